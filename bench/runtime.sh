#!/usr/bin/env bash
# Interpreter overhead: ragloop (criterion, benches/runtime.rs) next to LangGraph
# (bench/langgraph_overhead.py) on the same ARSC graph with instant nodes.
# Python side needs langgraph: PYTHON=/path/to/venv/bin/python bench/runtime.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

out=$(cargo bench --bench runtime -- --warm-up-time 1 --measurement-time 3 2>/dev/null)
# criterion prints: "<name>  time:   [low mid high]"; take the middle estimate in us.
to_us() { awk -v v="$1" -v u="$2" 'BEGIN { f = (u=="ns") ? 0.001 : (u=="µs"||u=="us") ? 1 : (u=="ms") ? 1000 : 1000000; printf "%.2f", v*f }'; }
est() {
  local line
  line=$(printf '%s\n' "$out" | grep -A1 "^$1" | grep -o 'time: *\[[^]]*\]' | head -1)
  set -- $(printf '%s' "$line" | tr -d '[]' | sed 's/time://')
  to_us "$3" "$4"
}
happy=$(est arsc_happy_path_3_steps)
exh=$(est arsc_canonical_exhausted_11_steps)
fan=$(est fanout/fanout_4x50ms)
loop=$(est update_loop_100_steps)

lg=$("$PY" bench/langgraph_overhead.py --json 2>/dev/null || echo '')
lg_field() { [ -n "$lg" ] && "$PY" -c "import json,sys; d=json.loads(sys.argv[1]); print('%.1f' % d[sys.argv[2]][sys.argv[3]])" "$lg" "$1" "$2" || echo "n/a"; }

printf '%-26s %14s %12s %16s %14s\n' "path" "ragloop us/run" "us/step" "langgraph us/run" "us/step"
printf '%-26s %14s %12s %16s %14s\n' "happy (3 steps)" "$happy" "$(awk -v t="$happy" 'BEGIN{printf "%.2f", t/3}')" "$(lg_field happy_path_3_steps us_per_invoke)" "$(lg_field happy_path_3_steps us_per_step)"
printf '%-26s %14s %12s %16s %14s\n' "exhausted (11 steps)" "$exh" "$(awk -v t="$exh" 'BEGIN{printf "%.2f", t/11}')" "$(lg_field exhausted_11_steps us_per_invoke)" "$(lg_field exhausted_11_steps us_per_step)"
echo "update-only loop (100 steps): $(awk -v t="$loop" 'BEGIN{printf "%.2f", t/100}') us/step (interpreter alone: no prompts, providers or retrieval)"
echo "fan-out 4 x 50 ms (concurrency 4): $(awk -v t="$fan" 'BEGIN{printf "%.1f", t/1000}') ms wall"
