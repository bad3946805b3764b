#!/usr/bin/env sh
# Speed of `ragloop serve` against the mock OpenAI server of examples/support (a child
# process answering after 50 ms): the overhead of POST /runs/wait over the same run in
# process at p50 (bound <= 2 ms), and N concurrent streaming runs (default 1,000)
# held in flight with the memory per run. Prints the figures next to the bounds;
# exits 1 when one is missed. Usage: bench/serve.sh [RUNS] [N]
# PROFILE=debug bench/serve.sh runs the debug build (figures labelled as such).
set -eu
cd "$(dirname "$0")/.."
ulimit -n 20000 2>/dev/null || true
if [ "${PROFILE:-release}" = debug ]; then
  cargo build --quiet --example serve_bench
  exec ./target/debug/examples/serve_bench "$@"
fi
nice cargo build --release --quiet --example serve_bench
exec ./target/release/examples/serve_bench "$@"
