#!/usr/bin/env bash
# Single-shot retrieval quality per question kind over ../shared/datasets/rust-book-qa.jsonl
# (hit@1, hit@4, all@4, recall@10; Markdown table on stdout), next to issue 13's targets
# and a plain rank_bm25 baseline (bench/bm25_baseline.py) computed in the same run.
# Three tables: the defaults, max_per_source: 2, and the rerank stage (rerank: offline over
# 12 candidates, with max_per_source: 1). Extra arguments go to the example
# (both runs), e.g. --no-hygiene --force --heading-weight 0 --weights 0.5,0.8.
# RAGLOOP_QA=FILE picks another dataset; RANK_BM25_WHEEL=FILE.whl a rank_bm25 wheel to
# put on PYTHONPATH when the module is not installed (default /tmp/x/rank_bm25-0.2.2-…).
set -euo pipefail
cd "$(dirname "$0")/.."
QA="${RAGLOOP_QA:-$(pwd)/../shared/datasets/rust-book-qa.jsonl}"
[ -f "$QA" ] || QA=/work/shared/datasets/rust-book-qa.jsonl
export RAGLOOP_QA="$QA"
BOOK="$(rustc --print sysroot)/share/doc/rust/html/book"
BASE="$(mktemp)"
trap 'rm -f "$BASE"' EXIT
WHEEL="${RANK_BM25_WHEEL:-/tmp/x/rank_bm25-0.2.2-py3-none-any.whl}"
if ! python3 -c 'import rank_bm25' 2>/dev/null && [ -f "$WHEEL" ]; then
  export PYTHONPATH="$WHEEL${PYTHONPATH:+:$PYTHONPATH}"
fi
if python3 bench/bm25_baseline.py "$BOOK" "$QA" > "$BASE"; then
  set -- --baseline "$BASE" "$@"
else
  echo "warning: rank_bm25 baseline not computed (pip install rank_bm25)" >&2
fi
echo "### defaults (what a retriever gets without options)"
cargo run ${RECALL_PROFILE:---release} --quiet --example recall -- "$@"
echo
echo "### max_per_source: 2"
cargo run ${RECALL_PROFILE:---release} --quiet --example recall -- --max-per-source 2 "$@"
echo
echo "### rerank: {candidates: 12, reranker: offline}, max_per_source: 1"
cargo run ${RECALL_PROFILE:---release} --quiet --example recall -- --rerank offline --candidates 12 --max-per-source 1 "$@"
