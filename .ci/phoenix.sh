# Throwaway Arize Phoenix: a real OpenTelemetry backend (OTLP receiver + span query API) on
# loopback, for tests/telemetry/test_phoenix_e2e.py and for looking at traces by hand.  Usage (bash):
#
#   set -euo pipefail; source .ci/phoenix.sh
#   phoenix_venv                       # creates/reuses the venv, prints its path
#   phoenix_start "$(phoenix_venv)"; trap phoenix_stop EXIT
#   # -> exports PHOENIX_URL, OTEL_EXPORTER_OTLP_ENDPOINT (OTLP/HTTP), PHOENIX_GRPC_ENDPOINT
#
# Phoenix (PyPI arize-phoenix, Elastic License 2.0) lives in its OWN venv, never the project's:
# about 145 packages, 830 MB. `uv pip install --compile-bytecode` takes ~25-55 s; without
# compiled bytecode its start-up doubles when PYTHONDONTWRITEBYTECODE is set. Start-up: 10-13 s.
# The venv is $ACTORLOG_PHOENIX_VENV (default /tmp/phoenix-venv) and is reused when present.
# Every stop function is safe under `set -e` and when nothing was started.

_phoenix_free_port() {
  python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}

phoenix_venv() {
  # Create (once) the venv Phoenix runs from; print its path on stdout, progress on stderr.
  local venv=${ACTORLOG_PHOENIX_VENV:-/tmp/phoenix-venv}
  if [ -x "$venv/bin/phoenix" ]; then
    echo "$venv"
    return 0
  fi
  command -v uv >/dev/null 2>&1 || python3 -m pip install -q uv >&2 || return 1
  local t0
  t0=$(date +%s)
  uv venv -q "$venv" >&2 || return 1
  uv pip install -q -p "$venv" --compile-bytecode arize-phoenix >&2 || return 1
  echo "Phoenix installed in $venv in $(( $(date +%s) - t0 )) s" >&2
  echo "$venv"
}

phoenix_start() {
  local venv=${1:?usage: phoenix_start VENV}
  local t0 http_port grpc_port
  t0=$(date +%s)
  PHOENIX_DIR=$(mktemp -d /tmp/phoenix.XXXXXX)
  http_port=$(_phoenix_free_port)
  grpc_port=$(_phoenix_free_port)
  # The three switches after the working dir keep Phoenix from reaching out to the internet.
  PHOENIX_HOST=127.0.0.1 PHOENIX_PORT=$http_port PHOENIX_GRPC_PORT=$grpc_port \
  PHOENIX_WORKING_DIR=$PHOENIX_DIR PHOENIX_TELEMETRY_ENABLED=false \
  PHOENIX_ALLOW_EXTERNAL_RESOURCES=false PHOENIX_DISABLE_AGENT_ASSISTANT=true \
    "$venv/bin/phoenix" serve >"$PHOENIX_DIR/server.log" 2>&1 &
  PHOENIX_PID=$!
  export PHOENIX_DIR PHOENIX_PID PHOENIX_URL="http://127.0.0.1:$http_port"
  export PHOENIX_GRPC_ENDPOINT="http://127.0.0.1:$grpc_port"
  export OTEL_EXPORTER_OTLP_ENDPOINT="$PHOENIX_URL"   # the SDK's HTTP exporter appends /v1/traces
  while [ $(( $(date +%s) - t0 )) -lt 90 ]; do
    if curl -sf -o /dev/null "$PHOENIX_URL/healthz"; then
      echo "Phoenix up at $PHOENIX_URL (OTLP gRPC $PHOENIX_GRPC_ENDPOINT) in $(( $(date +%s) - t0 )) s" >&2
      return 0
    fi
    kill -0 "$PHOENIX_PID" 2>/dev/null || break
    sleep 0.2
  done
  echo "Phoenix failed to start:" >&2
  tail -50 "$PHOENIX_DIR/server.log" >&2
  phoenix_stop
  return 1
}

phoenix_stop() {
  if [ -n "${PHOENIX_PID:-}" ]; then
    kill "$PHOENIX_PID" 2>/dev/null || true
    wait "$PHOENIX_PID" 2>/dev/null || true   # Phoenix exits 143 on SIGTERM
  fi
  if [ -n "${PHOENIX_DIR:-}" ]; then rm -rf "$PHOENIX_DIR"; fi
  unset PHOENIX_PID PHOENIX_DIR PHOENIX_URL PHOENIX_GRPC_ENDPOINT OTEL_EXPORTER_OTLP_ENDPOINT
  return 0
}
