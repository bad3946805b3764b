#!/usr/bin/env bash
# Replay and cache figures (benches/cassette.rs) with their bounds, plus the CLI end to
# end: `ragloop run --input` of the 40 dataset questions, recorded then replayed.
# Needs ../shared/datasets/rust-book-qa.jsonl (or RAGLOOP_BENCH_DATASET) and the Rust
# book installed with the toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
DATASET=${RAGLOOP_BENCH_DATASET:-../shared/datasets/rust-book-qa.jsonl}
export RAGLOOP_BENCH_DATASET=$DATASET

out=$(cargo bench --bench cassette -- --warm-up-time 1 --measurement-time 3 2>/dev/null)
to_us() { awk -v v="$1" -v u="$2" 'BEGIN { f = (u=="ns") ? 0.001 : (u=="µs"||u=="us") ? 1 : (u=="ms") ? 1000 : 1000000; printf "%.2f", v*f }'; }
est() {
  local line
  line=$(printf '%s\n' "$out" | grep -A1 "^$1" | grep -o 'time: *\[[^]]*\]' | head -1)
  set -- $(printf '%s' "$line" | tr -d '[]' | sed 's/time://')
  to_us "$3" "$4"
}
replay=$(est replay/crag_40_questions)
qps=$(awk -v t="$replay" 'BEGIN{printf "%.0f", 40 / (t / 1e6)}')
echo "replay, in process: 40 crag questions in $(awk -v t="$replay" 'BEGIN{printf "%.1f", t/1000}') ms = $qps questions/s (bound: >= 500) $(awk -v q="$qps" 'BEGIN{print (q >= 500) ? "OK" : "BELOW BOUND"}')"
echo "cassette load (40 questions): $(est replay/load_cassette) us"
echo "cache hit: $(est cache/hit) us, cache put (temp file + rename): $(est cache/put) us"
for t in grade_documents rewrite_query generate_answer grade_answer; do
  k=$(est "key/$t"); o=$(est "offline/$t")
  [ -n "$o" ] && echo "$t: key $k us, offline answer $o us"
done

# CLI end to end (process start, spec load, index open, 40 questions).
bin=target/release/ragloop
cargo build --release --quiet
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$bin" run graphs/crag.yaml --input "$DATASET" --record "$tmp/c.jsonl" > "$tmp/live.jsonl" || true
start=$(date +%s.%N)
"$bin" run graphs/crag.yaml --input "$DATASET" --replay "$tmp/c.jsonl" > "$tmp/replay.jsonl" || true
end=$(date +%s.%N)
same=$(python3 - "$tmp/live.jsonl" "$tmp/replay.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
keys = ("status", "answer", "sources", "path", "state")
print(sum(all(x[k] == y[k] for k in keys) for x, y in zip(a, b)), "of", len(a))
PY
)
echo "CLI replay: 40 questions, $(wc -l < "$tmp/c.jsonl") exchanges, $(awk -v s="$start" -v e="$end" 'BEGIN{printf "%.0f ms wall = %.0f questions/s", (e-s)*1000, 40/(e-s)}') (bound: >= 500); identical results: $same"
