#!/usr/bin/env bash
# Wall time and peak RSS of a forced build of the Rust book index (release build).
#   bench/index.sh [CORPUS_DIR] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BOOK="${1:-$(rustc --print sysroot)/share/doc/rust/html/book}"
OUT="${2:-/tmp/ragloop-bench-index}"
cargo build --release --quiet --bin ragloop
LOG="$(mktemp)"
/usr/bin/time -v target/release/ragloop index "$BOOK" --out "$OUT" --force --hygiene on 2> "$LOG" | tee /dev/stderr
grep -E "^(warning|error):" "$LOG" >&2 || true
echo "wall time:  $(grep 'Elapsed (wall clock)' "$LOG" | awk '{print $NF}')"
echo "user+sys:   $(grep -E 'User time|System time' "$LOG" | awk '{s+=$NF} END {printf "%.2f s\n", s}')"
echo "peak RSS:   $(grep 'Maximum resident set size' "$LOG" | awk '{printf "%.1f MB\n", $NF/1024}')"
rm -f "$LOG"
