#!/usr/bin/env bash
# Single-shot BM25 recall@1/4/10 over ../shared/datasets/rust-book-qa.jsonl (Markdown
# table on stdout). Extra arguments go to the example, e.g. --dataset FILE --force.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --release --quiet --example recall -- "$@"
