#!/usr/bin/env bash
# Installs everything the collection's local run and tests need on a fresh
# Debian/Ubuntu machine, and nothing twice: Debian packages, the docker engine,
# the controller venv (pinned), the systemd base images for the container hosts,
# and the link that lets Ansible find this checkout as sm120.sglang.
# With --tests (scripts/test.sh), also the real SGLang wheels the unit tests read (.cache/wheels) and promtool, so
# that the tests themselves need no network.
set -euo pipefail
tests=false
case "${1:-}" in
  --tests) tests=true ;;
  "") ;;
  *) echo "setup.sh takes --tests (also fetch what the unit tests read) or nothing; got $1" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${SM120_VENV:-$ROOT/.venv}
log() { printf '[setup] %s\n' "$*"; }

need_pkgs=()
for cmd_pkg in dockerd:docker.io debootstrap:debootstrap shellcheck:shellcheck rsync:rsync; do
  command -v "${cmd_pkg%%:*}" >/dev/null 2>&1 || need_pkgs+=("${cmd_pkg#*:}")
done
python3 -c 'import venv, ensurepip' 2>/dev/null || need_pkgs+=(python3-venv)
if ((${#need_pkgs[@]})); then
  log "installing ${need_pkgs[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# With --tests, promtool for the alert rules' tests (tests/unit/plugins/plugin_utils/test_alert_rules_promtool.py):
# Debian ships it in the prometheus package, installed without its recommends (a node exporter). Installed here, the
# package's own server is not wanted: where systemd runs, it is stopped and left disabled.
if $tests && ! command -v promtool >/dev/null 2>&1; then
  log "installing prometheus (promtool)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  if [[ -d /run/systemd/system ]]; then systemctl disable --now prometheus.service >/dev/null 2>&1 || true; fi
fi

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  setsid dockerd >/var/log/dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /var/log/dockerd.log" >&2; exit 1; }
fi

# The venv (PyPI) and the two base images (Debian's archive) are made side by side: on a fresh machine each
# waits mostly on its downloads. Each writes its log; the first to fail is named, with its log.
venv() {
  local req_hash
  req_hash=$(sha256sum requirements.txt | cut -c1-16)
  [[ -f $VENV/.requirements-$req_hash ]] && { quiet_dsa; return 0; }
  log "creating controller venv $VENV"
  python3 -m venv "$VENV" &&
  "$VENV/bin/pip" install -q --upgrade pip &&
  "$VENV/bin/pip" install -q -r requirements.txt &&
  rm -f "$VENV"/.requirements-* &&
  touch "$VENV/.requirements-$req_hash" &&
  quiet_dsa
}

# ansible-core 2.19 imports cryptography's DSA key class for its SSH agent client on every run, and cryptography
# (51.0.1 in the pinned set's resolution) warns of DSA's deprecation at that import: a CryptographyDeprecationWarning
# on every command, about no key of ours. A .pth line (run by the venv's Python at start-up, whatever the command)
# ignores that one warning.
quiet_dsa() {
  local site
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') &&
  printf '%s\n' "import warnings; warnings.filterwarnings('ignore', message='DSA is deprecated')" \
    >"$site/sm120-quiet-dsa.pth"
}

# A base image: Debian from its archive (debootstrap), then systemd on top.
image() {
  local suite=$1 base=localhost/debian:$1 image=localhost/sm120-systemd:$1 recipe_hash rootfs
  recipe_hash=$(cat molecule/resources/images/* | sha256sum | cut -c1-12)
  if ! docker image inspect "$base" >/dev/null 2>&1; then
    log "debootstrap $suite"
    rootfs=$(mktemp -d "/tmp/rootfs-$suite.XXXX")
    debootstrap --variant=minbase "$suite" "$rootfs" || { echo "debootstrap $suite failed" >&2; return 1; }
    tar -C "$rootfs" -c . | docker import - "$base" >/dev/null || return 1
    rm -rf "$rootfs"
  fi
  if [[ $(docker image inspect -f '{{ index .Config.Labels "recipe" }}' "$image" 2>/dev/null) != "$recipe_hash" ]]; then
    log "building $image"
    docker build -q --label recipe="$recipe_hash" --build-arg BASE="$base" -t "$image" \
      molecule/resources/images >/dev/null
  fi
}

# The unit tests' wheels (tests/unit/sglang_wheels.py, PyPI) once the venv is there: its Python reads the release data.
wheels() {
  "$VENV/bin/python" tests/unit/sglang_wheels.py | sed 's/^/[setup] /'
}

declare -A jobs=()
if $tests; then
  { venv && wheels; } >/tmp/setup-venv.log 2>&1 & jobs[venv]=$!
else
  venv >/tmp/setup-venv.log 2>&1 & jobs[venv]=$!
fi
for suite in bookworm trixie; do
  image "$suite" >"/tmp/setup-image-$suite.log" 2>&1 & jobs[image-$suite]=$!
done
failed=0
for name in venv image-bookworm image-trixie; do
  if ! wait "${jobs[$name]}"; then
    echo "setup: $name failed; its log, /tmp/setup-$name.log, ends:" >&2
    tail -n 20 "/tmp/setup-$name.log" >&2
    failed=1
  fi
  grep '^\[setup\]' "/tmp/setup-$name.log" || true
done
((failed == 0)) || exit 1

# Ansible finds the checkout as the collection sm120.sglang through this link
# (ansible.cfg's collections_path); an installed tarball needs none of it.
mkdir -p .collections/ansible_collections/sm120
# Replaced only when it is not the link already: a deploy running beside a second setup keeps finding it.
[[ $(readlink .collections/ansible_collections/sm120/sglang) == ../../.. ]] ||
  ln -sfn ../../.. .collections/ansible_collections/sm120/sglang
log "ready: source $VENV/bin/activate"
