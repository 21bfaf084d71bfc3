#!/usr/bin/env bash
# Set everything up and run the whole test suite:  bash scripts/test.sh [pytest args]
#
# Creates .venv (with uv if it can, else python -m venv + pip), installs actorlog with its
# test extras, starts the real services the tests use when this machine can run them
# (PostgreSQL from Debian's packages, Arize Phoenix as the OTLP backend, Chromium for the
# HTML checks and the console's browser tests, driven by Playwright from the test extra), and
# runs pytest. Outside CI a service that cannot start makes its tests
# skip with a reason; with CI set they fail instead (see .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! "$PY" -m uv --version >/dev/null 2>&1; then
  "$PY" -m pip install -q uv >/dev/null 2>&1 || true
fi
if "$PY" -m uv --version >/dev/null 2>&1; then
  [ -x .venv/bin/python ] || "$PY" -m uv venv -q -p "$(command -v "$PY")" .venv
  "$PY" -m uv pip install -q -p .venv/bin/python -e '.[test]'
else
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  .venv/bin/python -m pip install -q -e '.[test]'
fi

cleanup() { pg_stop || true; phoenix_stop || true; return 0; }
trap cleanup EXIT
# shellcheck source=../.ci/pg.sh
source .ci/pg.sh
# shellcheck source=../.ci/phoenix.sh
source .ci/phoenix.sh

if [ "$(id -u)" = 0 ] || command -v pg_ctl >/dev/null 2>&1; then
  pg_start || echo "PostgreSQL could not start; its tests will skip (or fail under CI)" >&2
fi
if [ "${ACTORLOG_NO_PHOENIX:-}" != 1 ]; then
  { PHOENIX_VENV=$(phoenix_venv) && phoenix_start "$PHOENIX_VENV"; } ||
    echo "Phoenix could not start; its tests will skip (or fail under CI)" >&2
fi
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 ||
    echo "Chromium could not be installed; the HTML tests will skip (or fail under CI)" >&2
fi

# Two worker processes (pytest-xdist), each taking the next test as it gets free: CI has two
# cores, and many tests wait on killed processes, servers and disks. ACTORLOG_TEST_WORKERS=N
# runs N; 0 runs the suite in this one process (so does a later "-n 0" in the arguments).
.venv/bin/python -m pytest -n "${ACTORLOG_TEST_WORKERS:-2}" --dist worksteal "$@"
