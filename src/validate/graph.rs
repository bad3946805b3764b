//! Graph checks: every node reachable from the entry, END reachable from every node,
//! every cycle bounded.
//!
//! A cycle is bounded when a node on it has `max_visits`, or when it passes through
//! a node that increments a counter field and through a guard of that counter. A
//! counter is a field that a node updates with the `add` reducer and a positive
//! number, with `field + N` (N ≥ 1), or with the `append` reducer, and that no node of
//! the same strongly connected component writes otherwise (a reset). A guard is a
//! branch arm comparing the counter in exit form (`n >= max`) whose target leaves the
//! component, or in continue form (`n < max`) whose target stays, with a later arm
//! that leaves. Seed 004's `grade_answer -> generate` retry passes through no counter
//! update, so it is unbounded; graphs/crag.yaml bounds it.
use crate::diag::{Code, Diagnostic};
use crate::graph::analysis::{reachable_from, reaching, unbounded_cycle_in, Counter};
use crate::graph::Topology;
use crate::spec::types::{Edge, Reducer};
use crate::spec::LoadedSpec;
use petgraph::graph::NodeIndex;
use serde_json::Value;
use std::collections::BTreeMap;

pub(super) fn check(ls: &LoadedSpec, diags: &mut Vec<Diagnostic>) {
    let spec = &ls.spec;
    let topo = Topology::build(spec);
    let Some(entry) = topo.entry else { return };
    let from_entry = reachable_from(&topo.graph, entry);
    let to_end = reaching(&topo.graph, topo.end);
    for (name, &ix) in &topo.index {
        if !from_entry[ix.index()] {
            diags.push(
                Diagnostic::new(
                    Code::Unreachable,
                    format!(
                        "node `{name}` cannot be reached from the entry node `{}`",
                        spec.entry
                    ),
                )
                .at(ls.key_span(&["nodes", name]))
                .help("add an edge to it, or remove it"),
            );
        } else if !to_end[ix.index()] {
            diags.push(
                Diagnostic::new(Code::DeadEnd, format!("END cannot be reached from node `{name}`: a run that enters it never finishes"))
                    .at(ls.key_span(&["edges", name]))
                    .help("give its loop an exit: a branch arm to END or to a node that reaches END"),
            );
        }
    }
    if let Some(cycle) = unbounded_cycle(ls, &topo) {
        let cycle = rotate_to_back_edge(&topo, cycle);
        let names: Vec<&str> = cycle.iter().map(|&ix| topo.name(ix)).collect();
        let closing = closing_edge(&topo, &cycle);
        let mut path = names.join(" -> ");
        path.push_str(" -> ");
        path.push_str(names[0]);
        diags.push(
            Diagnostic::new(Code::UnboundedCycle, format!("unbounded cycle {path}: nothing on it limits how often it repeats"))
                .at(closing.and_then(|ptr| ls.spans.value(&ptr)).or(ls.key_span(&["nodes", names[0]])))
                .help("set `max_visits` on a node of the cycle, or route out of it on a counter that a node of the cycle increments"),
        );
    }
}

/// Rotates a cycle so that its closing edge (last → first) is the edge most likely to
/// be the loop's "go back" decision: a `when` arm, else any branch arm.
fn rotate_to_back_edge(topo: &Topology, mut cycle: Vec<NodeIndex>) -> Vec<NodeIndex> {
    let n = cycle.len();
    let rank = |i: usize| {
        let (a, b) = (cycle[i], cycle[(i + 1) % n]);
        topo.graph
            .edges_connecting(a, b)
            .map(|e| match e.weight().label.as_deref() {
                Some("else") => 1,
                Some(_) => 2,
                None => 0,
            })
            .max()
            .unwrap_or(0)
    };
    if let Some(best) = (0..n).max_by_key(|&i| (rank(i), std::cmp::Reverse(i))) {
        // Edge best → best+1 becomes the closing edge: start the cycle at best+1.
        cycle.rotate_left((best + 1) % n);
    }
    cycle
}

/// The pointer of the edge that leads from the cycle's last node back to its first.
fn closing_edge(topo: &Topology, cycle: &[NodeIndex]) -> Option<String> {
    let (&last, &first) = (cycle.last()?, cycle.first()?);
    topo.graph
        .edges_connecting(last, first)
        .next()
        .map(|e| e.weight().ptr.clone())
}

/// Finds a cycle that no bound covers (see the module docs).
pub(crate) fn unbounded_cycle(ls: &LoadedSpec, topo: &Topology) -> Option<Vec<NodeIndex>> {
    let spec = &ls.spec;
    let n = topo.graph.node_count();
    // `removed` marks nodes no unbounded cycle can use: END and visit-limited nodes.
    let mut removed = vec![false; n];
    removed[topo.end.index()] = true;
    for (name, &ix) in &topo.index {
        if spec.nodes[name].max_visits().is_some() {
            removed[ix.index()] = true;
        }
    }
    // Strongly connected components of the whole graph: a guard must lead out of
    // its component (or keep going round only while the counter is below its bound
    // and offer another arm that leaves).
    let mut scc_of = vec![usize::MAX; n];
    for (k, scc) in petgraph::algo::tarjan_scc(&topo.graph)
        .into_iter()
        .enumerate()
    {
        for ix in scc {
            scc_of[ix.index()] = k;
        }
    }
    let target_ix = |name: &str| {
        if name == crate::graph::END {
            Some(topo.end)
        } else {
            topo.index.get(name).copied()
        }
    };
    // counter field -> (nodes incrementing it, branch nodes testing it)
    let mut counters: BTreeMap<String, (Vec<NodeIndex>, Vec<NodeIndex>)> = BTreeMap::new();
    let mut resetters: BTreeMap<String, Vec<NodeIndex>> = BTreeMap::new();
    for (name, node) in &spec.nodes {
        let ix = topo.index[name];
        for (field, expr) in node.update() {
            let reducer = spec.state.reducers.get(field).copied().unwrap_or_default();
            if increments(field, expr, reducer) {
                counters.entry(field.clone()).or_default().0.push(ix);
            } else {
                resetters.entry(field.clone()).or_default().push(ix);
            }
        }
    }
    // A counter that a node of the same component may set back cannot bound it
    // (conservative: the reset may sit on another cycle of the component).
    counters.retain(|field, (inc, _)| {
        let resets = resetters.get(field).map(Vec::as_slice).unwrap_or(&[]);
        !resets
            .iter()
            .any(|r| inc.iter().any(|i| scc_of[i.index()] == scc_of[r.index()]))
    });
    for (from, edge) in &spec.edges {
        let (Edge::Branch(arms), Some(&ix)) = (edge, topo.index.get(from)) else {
            continue;
        };
        let here = scc_of[ix.index()];
        let target_of = |arm: &crate::spec::types::Arm| {
            arm.to
                .as_deref()
                .or(arm.otherwise.as_deref())
                .and_then(target_ix)
        };
        let leaves = |t: Option<NodeIndex>| t.is_some_and(|t| scc_of[t.index()] != here);
        for (i, arm) in arms.iter().enumerate() {
            let Some(when) = &arm.when else { continue };
            let target = target_of(arm);
            for (field, exit_form) in comparisons(when) {
                let guards = if exit_form {
                    // `n >= max -> out`: the arm itself leaves the loop.
                    leaves(target)
                } else {
                    // `n < max -> again`: stays in, and a later arm leaves.
                    !leaves(target) && arms[i + 1..].iter().any(|a| leaves(target_of(a)))
                };
                if guards {
                    if let Some(entry) = counters.get_mut(&field) {
                        entry.1.push(ix);
                    }
                }
            }
        }
    }
    let counters: Vec<Counter> = counters
        .into_values()
        .filter(|(inc, guard)| !inc.is_empty() && !guard.is_empty())
        .map(|(incrementers, guards)| Counter {
            incrementers,
            guards,
        })
        .collect();
    unbounded_cycle_in(&topo.graph, &removed, &counters)
}

/// Whether an update of `field` by `expr` under `reducer` strictly grows a counter.
fn increments(field: &str, expr: &Value, reducer: Reducer) -> bool {
    match reducer {
        Reducer::Append => true,
        Reducer::Add => match expr {
            Value::Number(n) => n.as_f64().is_some_and(|x| x > 0.0),
            Value::String(s) => s.trim().parse::<f64>().is_ok_and(|x| x > 0.0),
            _ => false,
        },
        Reducer::Replace => {
            let Value::String(s) = expr else { return false };
            let toks = tokens(s);
            let t: Vec<&str> = toks.iter().map(String::as_str).collect();
            let positive = |x: &str| x.parse::<f64>().is_ok_and(|v| v > 0.0);
            matches!(t.as_slice(), [f, "+", n] if *f == field && positive(n))
                || matches!(t.as_slice(), [n, "+", f] if *f == field && positive(n))
        }
        Reducer::Merge => false,
    }
}

/// Fields a predicate compares with an order or equality operator, optionally
/// through `| length`, and whether the comparison is in "exit form" — true once the
/// counter has grown enough (`n >= max`, `n > max`, `n == max`, `max <= n`,
/// `max < n`) — or in "continue form" — true while it is still small (`n < max`,
/// `n <= max`, `max > n`, `max >= n`).
pub(crate) fn comparisons(pred: &str) -> Vec<(String, bool)> {
    let t = tokens(pred);
    let mut out = Vec::new();
    let is_ident = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
    };
    for i in 0..t.len() {
        // Skip attributes (`x.field`) and filter names (`x | length`).
        if !is_ident(&t[i]) || (i > 0 && (t[i - 1] == "." || t[i - 1] == "|")) {
            continue;
        }
        let mut j = i + 1;
        if t.get(j).map(String::as_str) == Some("|")
            && t.get(j + 1).map(String::as_str) == Some("length")
        {
            j += 2;
        }
        let after = t.get(j).map(String::as_str);
        let before = if i > 0 { Some(t[i - 1].as_str()) } else { None };
        match (after, before) {
            (Some(">=" | ">" | "=="), _) | (_, Some("<=" | "<" | "==")) => {
                out.push((t[i].clone(), true))
            }
            (Some("<=" | "<"), _) | (_, Some(">=" | ">")) => out.push((t[i].clone(), false)),
            _ => {}
        }
    }
    out
}

/// Names of the fields [`comparisons`] finds.
#[cfg(test)]
fn compared_fields(pred: &str) -> Vec<String> {
    comparisons(pred).into_iter().map(|(f, _)| f).collect()
}

/// A small tokenizer for predicate analysis: identifiers, numbers, strings (kept
/// whole) and operators.
fn tokens(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric()
                    || chars[i] == '_'
                    || (chars[i] == '.' && chars[start].is_ascii_digit()))
            {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == '"' || c == '\'' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i = (i + 1).min(chars.len());
            out.push(chars[start..i].iter().collect());
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            if matches!(two.as_str(), ">=" | "<=" | "==" | "!=") {
                out.push(two);
                i += 2;
            } else {
                out.push(c.to_string());
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recognises_counters_and_guards() {
        assert!(increments("n", &json!("n + 1"), Reducer::Replace));
        assert!(increments("n", &json!("1+n"), Reducer::Replace));
        assert!(!increments("n", &json!("n - 1"), Reducer::Replace));
        assert!(!increments("n", &json!("m + 1"), Reducer::Replace));
        assert!(increments("n", &json!(1), Reducer::Add));
        assert!(!increments("n", &json!(-1), Reducer::Add));
        assert!(increments("h", &json!("'x'"), Reducer::Append));
        assert_eq!(
            compared_fields("iteration_count >= max_iterations"),
            vec!["iteration_count", "max_iterations"]
        );
        assert_eq!(
            compared_fields("generations < max_generations and x"),
            vec!["generations", "max_generations"]
        );
        assert_eq!(
            compared_fields("3 <= iterations and not grounded"),
            vec!["iterations"]
        );
        assert_eq!(compared_fields("history | length > 5"), vec!["history"]);
        assert!(
            compared_fields("a.b >= 3").is_empty(),
            "attributes are not counters"
        );
        assert!(compared_fields("not relevant").is_empty());
    }
}
