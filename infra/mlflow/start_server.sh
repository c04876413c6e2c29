#!/usr/bin/env bash
# The MLflow tracking server for a cluster: PostgreSQL backend store, an artifact store (a local
# path or s3://bucket/prefix, proxied by the server so clients never hold storage credentials),
# and authentication switched on (MLflow's basic-auth app). Runs in the foreground.
#
#   export MLFLOW_BACKEND_STORE_URI=postgresql://mlflow@db-host:5432/mlflow
#   export PGPASSWORD=...                          # the database password (never in the URI)
#   export MLFLOW_ARTIFACTS_DESTINATION=s3://bucket/mlflow   # or /srv/mlflow-artifacts
#   export MLFLOW_AUTH_ADMIN_USERNAME=admin MLFLOW_AUTH_ADMIN_PASSWORD=...   # first start only
#   export MLFLOW_FLASK_SERVER_SECRET_KEY=...      # CSRF key of the auth app (random, stable)
#   infra/mlflow/start_server.sh
#
# Clients (lmforge, MlflowClient) then set MLFLOW_TRACKING_URI=http://HOST:PORT and
# MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD. S3 needs the usual AWS_* variables here
# (and MLFLOW_S3_ENDPOINT_URL for MinIO and friends) on the server only.
#
# Optional: HOST (default 127.0.0.1: bind another address only behind TLS, e.g. a reverse
# proxy), PORT (5000), WORKERS (2), MLFLOW_ALLOWED_HOSTS (Host headers to accept when HOST is not
# loopback, e.g. "mlflow.internal:5000"), MLFLOW_AUTH_DIR (where the generated auth config
# lives, default ~/.lmforge-mlflow-auth), MLFLOW_DEFAULT_PERMISSION (what a signed-in user may
# do to others' experiments: READ by default, NO_PERMISSIONS to isolate users).
set -euo pipefail

die() { echo "start_server: $*" >&2; exit 1; }

for name in MLFLOW_BACKEND_STORE_URI MLFLOW_ARTIFACTS_DESTINATION MLFLOW_FLASK_SERVER_SECRET_KEY; do
  [[ -n "${!name:-}" ]] || die "set $name (see the top of $0)"
done
case "$MLFLOW_BACKEND_STORE_URI" in
  *://*:*@*) die "MLFLOW_BACKEND_STORE_URI carries a password; give it in PGPASSWORD instead" ;;
esac

HOST=${HOST:-127.0.0.1}
PORT=${PORT:-5000}
WORKERS=${WORKERS:-2}
AUTH_DIR=${MLFLOW_AUTH_DIR:-$HOME/.lmforge-mlflow-auth}
PYTHON=${PYTHON:-python3}

# The auth app keeps its users in the same database; the ini holds no secret (the database
# password comes from PGPASSWORD, the admin's from MLFLOW_AUTH_ADMIN_PASSWORD).
mkdir -p "$AUTH_DIR"
chmod 700 "$AUTH_DIR"
cat >"$AUTH_DIR/basic_auth.ini" <<EOF
[mlflow]
default_permission = ${MLFLOW_DEFAULT_PERMISSION:-READ}
database_uri = $MLFLOW_BACKEND_STORE_URI
admin_username = ${MLFLOW_AUTH_ADMIN_USERNAME:-admin}
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
EOF
export MLFLOW_AUTH_CONFIG_PATH="$AUTH_DIR/basic_auth.ini"
# MLflow's job execution (huey consumers and periodic tasks for its GenAI features) serves
# nothing lmforge tracks, and its consumers keep polling: tens of CPU-seconds in the first
# minutes of an idle server. Off unless the caller's environment asks for it.
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION=${MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false}

args=(--app-name basic-auth
  --host "$HOST" --port "$PORT" --workers "$WORKERS"
  --backend-store-uri "$MLFLOW_BACKEND_STORE_URI"
  --serve-artifacts --artifacts-destination "$MLFLOW_ARTIFACTS_DESTINATION")
if [[ -n "${MLFLOW_ALLOWED_HOSTS:-}" ]]; then
  args+=(--allowed-hosts "$MLFLOW_ALLOWED_HOSTS")
fi
exec "$PYTHON" -m mlflow server "${args[@]}"
