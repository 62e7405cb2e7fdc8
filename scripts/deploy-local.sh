#!/usr/bin/env bash
# The main job on the local default: playbooks/deploy.yml against two local
# systemd containers that stand in for GPU hosts (inventories/local).
# Extra arguments go to ansible-playbook, e.g. --check --diff, or --tags rollback.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
source .venv/bin/activate

declare -A images=([sm120-local-bookworm]=bookworm [sm120-local-trixie]=trixie)
# A network of their own, on which Docker resolves the hosts' names: the router on one reaches the other's server.
network=sm120-local
docker network inspect "$network" >/dev/null 2>&1 || docker network create "$network" >/dev/null
for host in "${!images[@]}"; do
  if [[ $(docker inspect -f '{{.State.Running}}' "$host" 2>/dev/null) != true ]]; then
    docker rm -f "$host" >/dev/null 2>&1 || true
    echo "[deploy-local] starting $host"
    # The container options of every test host (molecule/resources/container.yml), the image and its command.
    mapfile -t run_args < <(python molecule/resources/container_options.py "localhost/sm120-systemd:${images[$host]}")
    docker run -d --name "$host" --hostname "$host" --network "$network" "${run_args[@]}" >/dev/null
  elif [[ $(docker inspect -f "{{index .NetworkSettings.Networks \"$network\"}}" "$host" 2>/dev/null) == "<no value>" ]]; then
    # Started by an earlier version of this script, on Docker's default network only.
    docker network connect "$network" "$host"
  fi
done
for host in "${!images[@]}"; do
  for _ in $(seq 30); do
    state=$(docker exec "$host" systemctl is-system-running 2>/dev/null || true)
    [[ $state == running || $state == degraded ]] && break
    sleep 1
  done
done

# What the containers cannot have, they get as in the molecule scenarios: an
# nvidia-smi stand-in printing 8x RTX PRO 6000 output, and (until the
# sglang_install phase lands) the real SGLang wheel without its 11 GB of GPU
# dependencies.
# A host prepared from these very files (stand-ins, wheels, inventory) is not prepared again: each later command
# (--check --diff, --tags rollback, ...) would otherwise spend half a minute finding nothing to change. The mark
# is written once the prepare passed, with the digest of what it was made from.
prepared=$(find molecule/resources inventories/local -type f -not -name '*.pyc' -print0 | sort -z |
  xargs -0 sha256sum | sha256sum | cut -c1-16)
stale=()
for host in "${!images[@]}"; do
  [[ $(docker exec "$host" cat /var/lib/sm120-standin/prepared 2>/dev/null) == "$prepared" ]] || stale+=("$host")
done
if ((${#stale[@]} > 0)); then
  ansible-playbook -i inventories/local molecule/resources/playbooks/prepare_gpu_host.yml
  for host in "${!images[@]}"; do
    docker exec "$host" sh -c 'mkdir -p /var/lib/sm120-standin && echo "$1" > /var/lib/sm120-standin/prepared' sh "$prepared"
  done
else
  echo "[deploy-local] the hosts are prepared from these files already (/var/lib/sm120-standin/prepared)"
fi
ansible-playbook -i inventories/local playbooks/deploy.yml "$@"
