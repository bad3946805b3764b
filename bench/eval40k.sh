#!/usr/bin/env bash
# Eval at 40,000 questions (issue 16, item 4). Prints each figure next to its bound
# and the baseline before this work (issue 16: report step 58 s single-threaded,
# peak RSS 457 MB, report.html 95 MB).
#
# A synthetic offline eval: a retrieve -> generate spec on the offline provider over
# a small generated corpus, N questions (default 40,000; four kinds, labelled
# sources, must_contain terms, a quarter unanswerable), 3 arms (base and two
# top_k variants), --no-cache. Then the same eval as 4 shards, merged.
#
#   bench/eval40k.sh [N]
#
# Bounds (issue 16, Speed): the summary and report step (the CLI's "s of summary and
# reports": aggregation, intervals, comparisons, summary.json, report.md,
# report.html) <= 10% of the run phase; peak RSS of the whole eval <= 200 MB;
# report.html <= 2 MB (summary, plots, the failed runs and the first 1,000 rows:
# bounded whatever N); the 4 shards merged give the unsharded summary (every field
# but those computed from wall time, see docs/eval.md).
# RAGLOOP_BIN=target/debug/ragloop skips the release build (figures are release
# figures).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-40000}
if [ -z "${RAGLOOP_BIN:-}" ]; then
  nice cargo build --release --quiet
fi
BIN=$(realpath "${RAGLOOP_BIN:-target/release/ragloop}")
W=$(pwd)/target/bench-eval40k
rm -rf "$W" && mkdir -p "$W/corpus"
python3 - "$W" "$N" <<'PY'
import json, sys, random
w, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(2026)
words = ["ownership", "borrow", "lifetime", "trait", "closure", "iterator", "cargo", "crate",
         "module", "macro", "thread", "channel", "mutex", "vector", "string", "slice", "enum",
         "match", "pattern", "error", "result", "option", "generic", "box", "rc", "refcell"]
for d in range(40):
    ws = [words[(d + k) % len(words)] for k in range(6)]
    body = " ".join(f"The {a} works with the {b}." for a, b in zip(ws, ws[1:]))
    open(f"{w}/corpus/doc{d:02}.md", "w").write(f"# Doc {d}\n\n{body}\n")
spec = """version: 1
name: big
state:
  schema:
    type: object
    properties:
      question: {type: string}
      documents: {type: array}
      answer: {type: string}
    required: [question]
models:
  m: {provider: offline}
retrievers:
  docs: {kind: bm25, corpus: corpus, top_k: 3}
output: {answer: answer, documents: documents}
limits: {max_steps: 10}
entry: retrieve
nodes:
  retrieve: {kind: retrieve, retriever: docs, query: "{{ question }}", update: {documents: output}}
  say:
    kind: llm
    model: m
    task: generate_answer
    inputs: {question: question, documents: documents}
    prompt:
      user: "Question: {{ question }}\\n{% for d in documents %}[{{ d.id }}] {{ d.content }}\\n{% endfor %}"
    update: {answer: output}
edges:
  retrieve: say
  say: END
variants:
  top1: {set: {retrievers.docs.top_k: 1}}
  top5: {set: {retrievers.docs.top_k: 5}}
"""
open(f"{w}/spec.yaml", "w").write(spec)
kinds = ["direct", "paraphrase", "multi_hop", "unanswerable"]
with open(f"{w}/data.jsonl", "w") as f:
    for i in range(n):
        d = rnd.randrange(40)
        a, b = words[d % len(words)], words[(d + 1) % len(words)]
        kind = kinds[i % 4]
        item = {"id": f"q{i:05}", "question": f"How does the {a} work with the {b}? ({i})",
                "answer": f"The {a} works with the {b}.", "must_contain": [a],
                "sources": [f"doc{d:02}.md"], "kind": kind}
        if kind == "unanswerable":
            item.update(answer=None, must_contain=[], sources=[])
        f.write(json.dumps(item) + "\n")
PY
# One measured process: wall time and peak RSS (the child's ru_maxrss), its stdout.
measure() {
  local label=$1; shift
  python3 - "$W/$label.out" "$@" <<'PY'
import resource, subprocess, sys, time
out = sys.argv[1]
t0 = time.time()
p = subprocess.run(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
wall = time.time() - t0
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
open(out, "w").write(p.stdout + p.stderr + f"\nWALL {wall:.2f}\nRSS {rss:.1f}\nRC {p.returncode}\n")
if p.returncode not in (0, 1):
    sys.exit(f"exit {p.returncode}: {p.stderr[-2000:]}")
PY
}
cd "$W"
$BIN index corpus >/dev/null 2>&1 || true
measure full "$BIN" eval spec.yaml --dataset data.jsonl --concurrency 8 --no-cache --out full
for i in 1 2 3 4; do
  measure "shard$i" "$BIN" eval spec.yaml --dataset data.jsonl --concurrency 8 --no-cache --out "s$i" --shard "$i/4"
done
measure merge "$BIN" eval merge s1 s2 s3 s4 --out merged
python3 - "$N" <<'PY'
import json, os, re, sys
n = int(sys.argv[1])
def fig(label):
    t = open(f"{label}.out").read()
    g = lambda pat: float(re.search(pat, t).group(1))
    return t, g
t, g = fig("full")
runs, rep = g(r"([0-9.]+) s of runs"), g(r"([0-9.]+) s of summary and reports")
rss, wall = g(r"RSS ([0-9.]+)"), g(r"WALL ([0-9.]+)")
html = os.path.getsize("full/report.html") / 1e6
rows = sum(1 for _ in open("full/results.jsonl"))
ok = lambda c: "OK" if c else "ABOVE"
print(f"eval of {n} questions x 3 arms ({rows} runs, offline, --concurrency 8): wall {wall:.1f} s, run phase {runs:.1f} s")
print(f"  summary + reports: {rep:.2f} s = {100 * rep / runs:.1f}% of the run phase (bound <= 10%; baseline 58 s) {ok(rep <= 0.10 * runs)}")
print(f"  peak RSS: {rss:.0f} MB (bound <= 200 MB; baseline 457 MB) {ok(rss <= 200)}")
print(f"  report.html: {html:.2f} MB (bound <= 2 MB; baseline 95 MB) {ok(html <= 2)}; report.md {os.path.getsize('full/report.md') / 1e3:.0f} kB; results.jsonl {os.path.getsize('full/results.jsonl') / 1e6:.0f} MB")
shard_rss = max(fig(f"shard{i}")[1](r"RSS ([0-9.]+)") for i in range(1, 5))
mt, mg = fig("merge")
print(f"4 shards: peak RSS {shard_rss:.0f} MB per shard; merge {mg(r'([0-9.]+) s of merge'):.2f} s, peak RSS {mg(r'RSS ([0-9.]+)'):.0f} MB (bound <= 200 MB) {ok(mg(r'RSS ([0-9.]+)') <= 200)}")
def untimed(v):
    if isinstance(v, dict):
        if v.get("metric") == "latency_ms":
            return None
        return {k: untimed(x) for k, x in v.items() if "latency" not in k}
    if isinstance(v, list):
        return [untimed(x) for x in v]
    return v
a, b = json.load(open("full/summary.json")), json.load(open("merged/summary.json"))
same = untimed(a) == untimed(b)
print(f"  merged summary.json equals the unsharded one but for wall-time fields: {'yes' if same else 'NO'} {'OK' if same else 'DIFFERS'}")
PY
cd - >/dev/null
rm -rf "$W"
