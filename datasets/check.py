#!/usr/bin/env python3
"""Checks datasets/rust-book-qa.jsonl against the Rust book installed with the toolchain.

Usage: python3 datasets/check.py [DATASET] [--evidence EVIDENCE.json]

Rules (the same ones tests/datasets.rs enforces through ragloop's own parser and HTML
extraction): unique ids, known kinds, every source a content page of the installed book
(listed in book/toc.html), every must_contain term lowercase and present (case-insensitive,
whitespace collapsed) in the `<main>` text of at least one source; unanswerable items have
no sources and no terms. With --evidence, a JSON object {id: [quote, ...]} of phrases that
must each occur in one of the item's sources (used while writing the answers).
Exit status 0 when every item passes, 1 otherwise.
"""
import html.parser, json, os, re, subprocess, sys
from collections import Counter

BLOCKS = set("p li ul ol pre div br tr td th table h1 h2 h3 h4 h5 h6 blockquote dt dd hr".split())
KINDS = {"direct", "paraphrase", "multi_hop", "unanswerable"}


class Main(html.parser.HTMLParser):
    """Collects the text inside <main>, skipping scripts, styles, buttons and nav."""

    def __init__(self):
        super().__init__()
        self.depth, self.skip, self.out = 0, 0, []

    def handle_starttag(self, tag, attrs):
        if tag == "main":
            self.depth += 1
        if self.depth and tag in ("script", "style", "button", "nav"):
            self.skip += 1
        if tag in BLOCKS:
            self.out.append(" ")

    def handle_endtag(self, tag):
        if tag == "main":
            self.depth -= 1
        if self.depth and tag in ("script", "style", "button", "nav"):
            self.skip -= 1
        if tag in BLOCKS:
            self.out.append(" ")

    def handle_data(self, data):
        if self.depth and not self.skip:
            self.out.append(data)


def norm(s):
    return " ".join(s.split()).lower()


def main():
    args = sys.argv[1:]
    evidence = {}
    if "--evidence" in args:
        i = args.index("--evidence")
        evidence = json.load(open(args[i + 1]))
        del args[i : i + 2]
    here = os.path.dirname(os.path.abspath(__file__))
    path = args[0] if args else os.path.join(here, "rust-book-qa.jsonl")
    root = subprocess.check_output(["rustc", "--print", "sysroot"], text=True).strip()
    html_root = os.path.join(root, "share/doc/rust/html")
    toc = open(os.path.join(html_root, "book/toc.html"), encoding="utf-8").read()
    content = {"book/" + p for p in re.findall(r'href="([^"#]+\.html)"', toc)}
    texts = {}

    def text(src):
        if src not in texts:
            p = Main()
            p.feed(open(os.path.join(html_root, src), encoding="utf-8").read())
            texts[src] = norm("".join(p.out))
        return texts[src]

    bad, ids, kinds = [], set(), Counter()
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if not line.strip():
            continue
        it = json.loads(line)
        i = it["id"]
        where = f"{path}:{n} {i}"
        if i in ids:
            bad.append(f"{where}: duplicate id")
        ids.add(i)
        kinds[it["kind"]] += 1
        if it["kind"] not in KINDS:
            bad.append(f"{where}: unknown kind {it['kind']}")
        mc, srcs = it["must_contain"], it["sources"]
        if it["kind"] == "unanswerable":
            if mc or srcs:
                bad.append(f"{where}: unanswerable with terms or sources")
            continue
        if not 1 <= len(mc) <= 3:
            bad.append(f"{where}: {len(mc)} must_contain terms")
        if it["kind"] == "multi_hop" and len(srcs) < 2:
            bad.append(f"{where}: multi_hop with fewer than 2 sources")
        for s in srcs:
            if s not in content:
                bad.append(f"{where}: {s} is not a content page in book/toc.html")
        srcs = [s for s in srcs if s in content]
        for t in mc:
            if t != t.lower():
                bad.append(f"{where}: term {t!r} is not lowercase")
            if not any(norm(t) in text(s) for s in srcs):
                bad.append(f"{where}: term {t!r} is in none of its sources")
        for q in evidence.get(i, []):
            if not any(norm(q) in text(s) for s in srcs):
                bad.append(f"{where}: evidence {q!r} is in none of its sources")
    for b in bad:
        print(b)
    print(f"{len(ids)} items, kinds: {dict(sorted(kinds.items()))}, problems: {len(bad)}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
