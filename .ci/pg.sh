# Throwaway PostgreSQL for tests and CI (run as root).  Usage (bash):
#
#   set -euo pipefail; source .ci/pg.sh; pg_start; trap pg_stop EXIT
#
# pg_start initdbs a fresh cluster in a temp dir, starts it on a free loopback port and
# exports DATABASE_URL and ACTORLOG_TEST_POSTGRES_URL (read by tests/_pg.py).
# The server runs with fsync=off: fine for throwaway test data and for tests that kill the
# *client*; a test that kills the *server* and checks durability must start its own without it.
# pg_stop is safe under `set -e` and when nothing was started.

pg_bindir() {
  # Newest Debian-packaged server; install it if absent (a fresh image of another kind).
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
  if [ -z "$d" ] || [ ! -x "$d/postgres" ]; then
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
    d=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
  fi
  echo "$d"
}

pg_start() {
  PG_BIN=$(pg_bindir) || return 1
  PG_USER=postgres   # postgres refuses to run as root; Debian's package creates this user
  id -u "$PG_USER" >/dev/null 2>&1 ||
    useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin "$PG_USER"
  PG_DIR=$(mktemp -d /tmp/pgci.XXXXXX)
  chown "$PG_USER" "$PG_DIR" && chmod 700 "$PG_DIR"
  # cd "$PG_DIR": the postgres user cannot enter a cwd in root's home
  (cd "$PG_DIR" && runuser -u "$PG_USER" -- "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres \
      -A trust --encoding=UTF8 --locale=C.UTF-8 --no-sync >/dev/null) || return 1
  local try
  for try in 1 2 3; do   # retry in case the chosen free port got taken meanwhile
    PG_PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
    if (cd "$PG_DIR" && runuser -u "$PG_USER" -- "$PG_BIN/pg_ctl" -D "$PG_DIR/data" \
          -l "$PG_DIR/log" -w -t 60 start -o "-c listen_addresses=127.0.0.1 -p $PG_PORT \
          -k $PG_DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
          -c max_connections=200" >/dev/null); then
      break
    fi
    [ "$try" = 3 ] && { cat "$PG_DIR/log" >&2; return 1; }
  done
  "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres actors_test || return 1
  export PG_BIN PG_USER PG_DIR PG_PORT
  export DATABASE_URL="postgresql://postgres@127.0.0.1:$PG_PORT/actors_test"
  export ACTORLOG_TEST_POSTGRES_URL="$DATABASE_URL"
  echo "PostgreSQL $("$PG_BIN/postgres" -V | awk '{print $3}') up at $DATABASE_URL" >&2
}

pg_stop() {   # safe under set -e and when nothing was started
  [ -n "${PG_DIR:-}" ] || return 0
  (cd "$PG_DIR" && runuser -u "$PG_USER" -- "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop) >/dev/null 2>&1 || true
  rm -rf "$PG_DIR"; unset PG_DIR
  return 0
}
