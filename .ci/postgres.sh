# PostgreSQL for the checkpoint tests (tests/checkpoints_pg.rs, checkpoints_cli): Debian's
# `postgresql` package, a private cluster in a temporary directory, listening on a free
# 127.0.0.1 port with trust authentication (local only), stopped and deleted at exit.
#
# Sourced by .ci/run. `ragloop_postgres_up` returns 0 with RAGLOOP_POSTGRES_URL exported,
# 2 when PostgreSQL cannot be installed here, 1 when it is installed but did not start.
# `ragloop_postgres_down` stops the cluster (the caller puts it in its EXIT trap).

ragloop_postgres_log() { echo "postgres: $*" >&2; }

ragloop_postgres_bindir() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1
}

# Runs a command as the `postgres` user when we are root (the server refuses root).
ragloop_postgres_as() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

ragloop_postgres_up() {
  local bin
  bin=$(ragloop_postgres_bindir)
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) \
        || { ragloop_postgres_log "apt-get install postgresql failed"; return 2; }
      bin=$(ragloop_postgres_bindir)
    fi
  fi
  [ -n "$bin" ] && [ -x "$bin/initdb" ] || { ragloop_postgres_log "no initdb"; return 2; }
  RAGLOOP_POSTGRES_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ragloop-postgres.XXXXXX")
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || { ragloop_postgres_log "no postgres user"; return 1; }
    chown postgres "$RAGLOOP_POSTGRES_DIR"
  fi
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])') \
    || { ragloop_postgres_log "no free port"; return 1; }
  ragloop_postgres_as "$bin/initdb" -D "$RAGLOOP_POSTGRES_DIR/data" -U postgres --auth=trust \
    -E UTF8 --locale=C.UTF-8 >"$RAGLOOP_POSTGRES_DIR/initdb.log" 2>&1 \
    || { ragloop_postgres_log "initdb failed: $(tail -n 5 "$RAGLOOP_POSTGRES_DIR/initdb.log")"; return 1; }
  RAGLOOP_POSTGRES_BIN=$bin
  ragloop_postgres_as "$bin/pg_ctl" -D "$RAGLOOP_POSTGRES_DIR/data" -w -t 60 \
    -l "$RAGLOOP_POSTGRES_DIR/server.log" \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $RAGLOOP_POSTGRES_DIR -c fsync=off" start >/dev/null \
    || { ragloop_postgres_log "pg_ctl start failed: $(tail -n 5 "$RAGLOOP_POSTGRES_DIR/server.log")"; return 1; }
  export RAGLOOP_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres"
  return 0
}

ragloop_postgres_down() {
  if [ -n "${RAGLOOP_POSTGRES_DIR:-}" ] && [ -d "$RAGLOOP_POSTGRES_DIR/data" ]; then
    ragloop_postgres_as "$RAGLOOP_POSTGRES_BIN/pg_ctl" -D "$RAGLOOP_POSTGRES_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  [ -n "${RAGLOOP_POSTGRES_DIR:-}" ] && rm -rf "$RAGLOOP_POSTGRES_DIR"
  return 0
}
