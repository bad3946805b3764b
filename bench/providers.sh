#!/usr/bin/env sh
# Wall time of a CRAG run against a local mock OpenAI-compatible server that answers
# every call after 20 ms, next to the critical-path floor (LLM rounds x 20 ms, the
# fanned-out grading round counted once, plus measured retrieval) and the bound 1.05.
# Exits 1 when the ratio misses the bound. Usage: bench/providers.sh [RUNS] [QUESTION]
set -eu
cd "$(dirname "$0")/.."
cargo build --release --quiet --example providers_bench
exec ./target/release/examples/providers_bench "$@"
