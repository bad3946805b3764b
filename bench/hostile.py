#!/usr/bin/env python3
"""Writes the hostile specs bench/validate.sh measures into the directory given:
alias_bytes.yaml (one 1 MB scalar aliased 1,000 times), alias_count.yaml (300,000
aliases), nodes_10000.yaml (10,000 nodes, no aliases), nodes_3000.yaml and
nodes_N.yaml and nodes_N_variants_N.yaml for N = 300, 1,000, 3,000 (N nodes, without
and with N variants that each change one node's update)."""
import os
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def write(name, text):
    with open(os.path.join(out, name), "w") as f:
        f.write(text)


big = "x" * (1024 * 1024 - 200)
write("alias_bytes.yaml", 'version: 1\nname: bomb\nx-big: &big "' + big + '"\nx-list: [' + ", ".join(["*big"] * 1000) + "]\n")
write("alias_count.yaml", "version: 1\nname: bomb\nx-a: &a [1]\nx-list: [" + ", ".join(["*a"] * 300000) + "]\n")


def chain(nodes, variants):
    lines = ["version: 1", "name: big", "state:", "  schema:", "    type: object", "    properties:",
             "      q: {type: string}", "entry: n0", "nodes:"]
    for i in range(nodes):
        lines += [f"  n{i}:", "    kind: update", "    update:", '      q: "q"']
    lines.append("edges:")
    for i in range(nodes):
        lines.append(f"  n{i}: {'n%d' % (i + 1) if i < nodes - 1 else 'END'}")
    if variants:
        lines.append("variants:")
        for i in range(variants):
            lines += [f"  v{i}:", "    set:", f"      nodes.n{i % nodes}.update.q: \"'v{i}'\""]
    return "\n".join(lines) + "\n"


write("nodes_10000.yaml", chain(10000, 0))
for n in (300, 1000, 3000):
    write(f"nodes_{n}.yaml", chain(n, 0))
    write(f"nodes_{n}_variants_{n}.yaml", chain(n, n))
