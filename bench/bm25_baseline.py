#!/usr/bin/env python3
"""Plain BM25 baseline for bench/recall.sh (issue 13): rank_bm25's BM25Okapi over the
Rust book's content pages cut into 800-character windows.

Content pages: the top-level `book/*.html` files that have a `<main>` element, minus
`print.html` (the whole book on one page), `toc.html` (the sidebar frame), the
"this is an old link" pages and byte-identical repeats (`index.html` = `title-page.html`):
111 pages for the book shipped with Rust 1.95. Text: the `<main>` element with tags
stripped and entities decoded, whitespace collapsed. Tokens: lowercase `\\w+` runs.

Prints one JSON object per kind on stdout: {"kind", "n", "hit1", "hit4", "all4"}, the
same measures as examples/recall.rs (a labelled page at rank 1, one in the top 4, all in
the top 4), the window's page standing for the window.

    bm25_baseline.py BOOK_DIR DATASET.jsonl
"""
import html
import json
import os
import re
import sys

from rank_bm25 import BM25Okapi

WINDOW = 800


def page_text(raw):
    m = re.search(r"<main>(.*?)</main>", raw, re.S)
    if not m:
        return None
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", m.group(1), flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", body))
    return re.sub(r"\s+", " ", text).strip()


def tokens(text):
    return re.findall(r"\w+", text.lower())


def main():
    book, dataset = sys.argv[1], sys.argv[2]
    seen, windows, owners = set(), [], []
    for name in sorted(os.listdir(book)):
        if not name.endswith(".html") or name in ("print.html", "toc.html"):
            continue
        raw = open(os.path.join(book, name), encoding="utf-8").read()
        if "this is an old link" in raw:
            continue
        text = page_text(raw)
        if not text or text in seen:
            continue
        seen.add(text)
        for i in range(0, len(text), WINDOW):
            windows.append(tokens(text[i : i + WINDOW]))
            owners.append("book/" + name)
    bm25 = BM25Okapi(windows)
    by_kind = {}
    for line in open(dataset, encoding="utf-8"):
        if not line.strip():
            continue
        item = json.loads(line)
        labelled = set(item.get("sources") or [])
        if not labelled:
            continue
        scores = bm25.get_scores(tokens(item["question"]))
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        top = [owners[i] for i in order[:4]]
        k = by_kind.setdefault(item["kind"], [0, 0, 0, 0])
        k[0] += 1
        k[1] += top[0] in labelled
        k[2] += any(p in labelled for p in top)
        k[3] += labelled <= set(top)
    print(json.dumps({"pages": len(seen), "windows": len(windows)}))
    for kind, (n, h1, h4, a4) in sorted(by_kind.items()):
        print(json.dumps({"kind": kind, "n": n, "hit1": h1 / n, "hit4": h4 / n, "all4": a4 / n}))


if __name__ == "__main__":
    main()
