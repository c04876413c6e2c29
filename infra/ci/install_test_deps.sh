#!/usr/bin/env bash
# OS packages that the infrastructure tests need: PostgreSQL (tracking server backend) and
# Chromium (headless check of the MLflow UI). Idempotent and quiet; needs apt and root, or sudo
# that asks no password. It never waits on a password prompt: without either it fails at once,
# printing the command to run.
#
#   infra/ci/install_test_deps.sh            # install what is missing
#   infra/ci/install_test_deps.sh --missing  # only print what is missing (one line)
set -euo pipefail

missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || missing+=(chromium)
command -v ip >/dev/null || missing+=(iproute2)
if [[ ${1:-} == --missing ]]; then
  echo "${missing[*]}"
  exit 0
fi
((${#missing[@]} == 0)) && exit 0

as_root=(env DEBIAN_FRONTEND=noninteractive)
if [[ $(id -u) != 0 ]]; then
  if ! command -v sudo >/dev/null || ! sudo -n true </dev/null 2>/dev/null; then
    echo "install_test_deps: ${missing[*]} missing and installing needs root (no passwordless" \
      "sudo here); run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  as_root=(sudo -n "${as_root[@]}")
fi
"${as_root[@]}" apt-get update -qq </dev/null
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
echo "install_test_deps: installed ${missing[*]}"
