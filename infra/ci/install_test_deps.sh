#!/usr/bin/env bash
# OS packages that the infrastructure tests need: PostgreSQL (tracking server backend) and
# Chromium (headless check of the MLflow UI). Idempotent and quiet; needs root (or sudo) and apt.
#
#   infra/ci/install_test_deps.sh
set -euo pipefail

missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || missing+=(chromium)
command -v ip >/dev/null || missing+=(iproute2)
((${#missing[@]} == 0)) && exit 0

sudo=()
[[ $(id -u) == 0 ]] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_test_deps: installed ${missing[*]}"
