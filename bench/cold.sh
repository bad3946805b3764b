#!/usr/bin/env bash
# Cold start with a warm index (issue 13 item 7): median wall time of
#   ragloop index BOOK            (reuse: the corpus fingerprint from stamps, no rehash)
#   ragloop run graphs/crag.yaml  (a whole offline CRAG run, process start to exit)
# over RUNS runs each (default 15), release build, next to the bounds (index reuse: no
# bound of its own; run cold <= 15 ms) and the baseline of issue 13 (38 ms cold run,
# half of it rehashing the 24 MB book).
#   bench/cold.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-15}"
BOOK="$(rustc --print sysroot)/share/doc/rust/html/book"
cargo build --release --quiet --bin ragloop
BIN=target/release/ragloop
# Warm the default index and its stamps (the first start after a build may hash files
# written within the racy window once more).
"$BIN" index "$BOOK" >/dev/null
"$BIN" index "$BOOK" >/dev/null
median_ms() {
  local times=()
  for _ in $(seq "$RUNS"); do
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1 || true
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}'
}
idx=$(median_ms "$BIN" index "$BOOK")
run=$(median_ms "$BIN" run graphs/crag.yaml -q "How do I borrow a value mutably?")
printf '%-34s %10s %10s %12s\n' "what" "median ms" "bound ms" "baseline ms"
printf '%-34s %10s %10s %12s\n' "index reuse (book, warm)" "$idx" "-" "-"
printf '%-34s %10s %10s %12s\n' "run crag.yaml cold, warm index" "$run" "15" "38"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (figures on a loaded machine are upper bounds)"
