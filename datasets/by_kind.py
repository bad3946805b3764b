#!/usr/bin/env python3
"""Per-kind figures from a `ragloop eval` results.jsonl, for one variant (default base).

Usage: python3 datasets/by_kind.py OUT_DIR/results.jsonl DATASET.jsonl [VARIANT]

hit@1 / hit@4: a labelled source among the first 1 / 4 documents of the first retrieval;
must_contain: all terms in the answer (ragloop's must_contain_hit); recall_gain: final
minus first-iteration recall@k, in points. Labelled (answerable) questions only; the
unanswerable row gives the share of declined answers.
"""
import json, sys
from collections import defaultdict

res, ds = sys.argv[1], sys.argv[2]
variant = sys.argv[3] if len(sys.argv) > 3 else "base"
items = {}
for line in open(ds, encoding="utf-8"):
    if line.strip():
        it = json.loads(line)
        items[it["id"]] = it
rows = defaultdict(list)
for line in open(res, encoding="utf-8"):
    r = json.loads(line)
    if r["variant"] == variant and r["id"] in items:
        rows[r["kind"]].append(r)
print(f"| kind | n | hit@1 | hit@4 | must_contain | recall_gain | declined |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for kind in ["direct", "paraphrase", "multi_hop", "unanswerable"]:
    rs = rows.get(kind, [])
    if not rs:
        continue
    m = [r["metrics"] for r in rs]
    declined = sum(bool(x.get("declined")) for x in m) / len(m)
    if kind == "unanswerable":
        print(f"| {kind} | {len(rs)} | - | - | - | - | {declined:.1%} |")
        continue
    h1 = h4 = mc = gain = 0.0
    for r in rs:
        want = {s.split("/")[-1] for s in items[r["id"]]["sources"]}
        first = [d.split("/")[-1] for d in (r["retrieved"][0] if r["retrieved"] else [])]
        h1 += bool(set(first[:1]) & want)
        h4 += bool(set(first[:4]) & want)
        mc += bool(r["metrics"].get("must_contain_hit"))
        rec = r["metrics"].get("recall") or [0.0]
        gain += rec[-1] - rec[0]
    n = len(rs)
    print(f"| {kind} | {n} | {h1/n:.1%} | {h4/n:.1%} | {mc/n:.1%} | {100*gain/n:+.1f} pp | {declined:.1%} |")
