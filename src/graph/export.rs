//! Exports a [`Topology`] as Mermaid (`flowchart TD`) or Graphviz DOT. Conditional
//! edges are labelled with their predicate (`else` for the fallback arm), `END` is a
//! terminal node and the entry is marked by an arrow from a start dot.
use super::compile::{Topology, END};
use crate::spec::types::Spec;
use petgraph::visit::EdgeRef;
use std::collections::HashMap;
use std::fmt::Write;

/// Output format of `ragloop graph` (the CLI's `--format` maps onto it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphFormat {
    /// Mermaid flowchart (renders on GitHub and in most Markdown viewers).
    Mermaid,
    /// Graphviz DOT (`dot -Tsvg`).
    Dot,
}

/// Renders the topology of `spec` in `format`.
pub fn render(spec: &Spec, topo: &Topology, format: GraphFormat) -> String {
    match format {
        GraphFormat::Mermaid => mermaid(spec, topo),
        GraphFormat::Dot => dot(spec, topo),
    }
}

fn kind_of(spec: &Spec, name: &str) -> &'static str {
    spec.nodes.get(name).map_or("", |n| n.kind())
}

fn mermaid_ids(topo: &Topology) -> HashMap<petgraph::graph::NodeIndex, String> {
    let mut ids = HashMap::new();
    let mut used = std::collections::HashSet::new();
    for ix in topo.graph.node_indices() {
        let name = topo.name(ix);
        let base: String = if ix == topo.end {
            "__end__".into()
        } else {
            let s: String = name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            // `end` (any case) is a Mermaid keyword; prefix every id to stay clear of it.
            format!("n_{s}")
        };
        let mut id = base.clone();
        let mut k = 1;
        while !used.insert(id.clone()) {
            k += 1;
            id = format!("{base}_{k}");
        }
        ids.insert(ix, id);
    }
    ids
}

fn mermaid_text(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '|' => out.push_str("#124;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '#' => out.push_str("#35;"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

fn mermaid(spec: &Spec, topo: &Topology) -> String {
    let ids = mermaid_ids(topo);
    let mut out = String::from("flowchart TD\n");
    out.push_str("    __start__((start))\n");
    for (name, &ix) in &topo.index {
        let _ = writeln!(
            out,
            "    {}[\"{}<br/><i>{}</i>\"]",
            ids[&ix],
            mermaid_text(name),
            kind_of(spec, name)
        );
    }
    let _ = writeln!(out, "    {}(((\"{END}\")))", ids[&topo.end]);
    if let Some(entry) = topo.entry {
        let _ = writeln!(out, "    __start__ --> {}", ids[&entry]);
    }
    for e in topo.graph.edge_references() {
        let (s, d) = (&ids[&e.source()], &ids[&e.target()]);
        match &e.weight().label {
            None => {
                let _ = writeln!(out, "    {s} --> {d}");
            }
            Some(label) => {
                let _ = writeln!(out, "    {s} -.->|\"{}\"| {d}", mermaid_text(label));
            }
        }
    }
    out
}

fn dot_text(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn dot(spec: &Spec, topo: &Topology) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph \"{}\" {{", dot_text(&spec.name));
    out.push_str("    rankdir=TB;\n    node [fontname=\"Helvetica\", shape=box, style=rounded];\n");
    // `START` is reserved, so no node of the spec can collide with the start marker.
    out.push_str("    \"START\" [shape=point, width=0.2, label=\"\"];\n");
    for name in topo.index.keys() {
        let _ = writeln!(
            out,
            "    \"{}\" [label=\"{}\\n({})\"];",
            dot_text(name),
            dot_text(name),
            kind_of(spec, name)
        );
    }
    let _ = writeln!(
        out,
        "    \"{END}\" [shape=doublecircle, style=solid, label=\"{END}\"];"
    );
    if let Some(entry) = topo.entry {
        let _ = writeln!(out, "    \"START\" -> \"{}\";", dot_text(topo.name(entry)));
    }
    for e in topo.graph.edge_references() {
        let (s, d) = (
            dot_text(topo.name(e.source())),
            dot_text(topo.name(e.target())),
        );
        match &e.weight().label {
            None => {
                let _ = writeln!(out, "    \"{s}\" -> \"{d}\";");
            }
            Some(label) => {
                let _ = writeln!(
                    out,
                    "    \"{s}\" -> \"{d}\" [style=dashed, label=\"{}\"];",
                    dot_text(label)
                );
            }
        }
    }
    out.push_str("}\n");
    out
}
