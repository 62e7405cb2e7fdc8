#!/usr/bin/env bash
# The execution environment's build context: the collection tarball, then ansible-builder create
# (execution-environment.yml). CONTEXT (default .ee/context) receives the Containerfile and _build/.
# Build the image where an RPM-based base image can be pulled:
#   ansible-builder build -f execution-environment.yml -t sm120-sglang-ee:latest --container-runtime docker
set -euo pipefail
cd "$(dirname "$0")/.."
context=${1:-.ee/context}
rm -rf .ee/collections "$context"
mkdir -p .ee/collections
ansible-galaxy collection build --force --output-path .ee/collections . >/dev/null
mv .ee/collections/sm120-sglang-*.tar.gz .ee/collections/sm120-sglang.tar.gz
ansible-builder create -f execution-environment.yml -c "$context" --output-filename Containerfile >/dev/null
echo "$context"
