//! Graph checks: every node reachable from the entry, END reachable from every node,
//! every cycle bounded (E054), and arms made dead by an always-true arm (W003).
//!
//! The bound rule (documented with examples in docs/spec.md, "Bounded cycles"): a cycle
//! is bounded when it passes a node with `max_visits`, or when it passes a node that
//! moves a *monotone* field and an arm that cannot be chosen once that field has moved
//! far enough. Within the cycle's strongly connected component (SCC), a field is
//! monotone when every node of the component that writes it writes
//! - a **counter** step: `add` reducer with a number literal of one sign, `replace`
//!   with `field + N` / `field - N`, or `append` of a value that is never an array
//!   (the counter is then `field | length`); or
//! - a **latch**: `replace` with one and the same literal (`escalated: true`).
//!
//! A counter that keeps moving passes every constant: a number literal, or a state
//! field whose schema type is `integer` or `number` and that no node of the component
//! writes. A latch, once set, keeps its value. An arm is *guarded* by the field when
//! "this arm is chosen" (every earlier `when` false, its own true) is unsatisfiable with
//! the counter past every constant (or the latch set) and every other atom of the
//! predicates a free boolean ([`super::guard`]). A run that goes round such a cycle
//! forever would move the field infinitely often and still take the guarded arm.
use super::guard::{self, Assume, Known, Pred, Term};
use super::StateInfo;
use crate::diag::{Code, Diagnostic};
use crate::graph::analysis::{reachable_from, reaching, unbounded_cycle_edges, EdgeBound};
use crate::graph::Topology;
use crate::spec::types::{Arm, Edge, Reducer};
use crate::spec::LoadedSpec;
use petgraph::graph::{EdgeIndex, NodeIndex};
use serde_json::Value;
use std::collections::BTreeMap;

/// The graph checks over `topo`, the spec's [`Topology`] (built once by
/// [`super::check_topology`], then kept by `compile` for the runtime and `graph`).
pub(super) fn check(
    ls: &LoadedSpec,
    topo: &Topology,
    state: &StateInfo,
    diags: &mut Vec<Diagnostic>,
) {
    let spec = &ls.spec;
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
    super::arms::check(ls, topo, diags);
    // A predicate or update that does not compile, reads an unknown name or is
    // mistyped (E082-E085: its value is not what it reads like) is reported already;
    // reasoning over it would add a follow-on E054.
    let unparsed = diags.iter().any(|d| blocks_cycle_check(d.code));
    if unparsed {
        return;
    }
    if let Some(cycle) = unbounded_cycle(ls, topo, state) {
        let cycle = rotate_to_back_edge(topo, cycle);
        let names: Vec<&str> = cycle.iter().map(|&ix| topo.name(ix)).collect();
        let closing = closing_edge(topo, &cycle);
        let mut path = names.join(" -> ");
        path.push_str(" -> ");
        path.push_str(names[0]);
        diags.push(
            Diagnostic::new(Code::UnboundedCycle, format!("unbounded cycle {path}: nothing on it limits how often it repeats"))
                .at(closing.and_then(|ptr| ls.spans.value(&ptr)).or(ls.key_span(&["nodes", names[0]])))
                .help("set `max_visits` on a node of the cycle, or make staying on it require a counter that a node of the cycle increments to be below a bound (see \"Bounded cycles\" in docs/spec.md)"),
        );
    }
}

/// Whether a finding of an earlier check stops the cycle check (E054 reasons over
/// predicates and updates that compile and are typed as they read).
pub(super) fn blocks_cycle_check(code: Code) -> bool {
    matches!(
        code,
        Code::PredicateSyntax
            | Code::PredicateUnknownVar
            | Code::ExpressionSyntax
            | Code::ExpressionUnknownVar
            | Code::UnknownAttribute
            | Code::EnumLiteral
            | Code::IncompatibleOperands
            | Code::UpdateType
    )
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
    // The first arm that leads back (the one that keeps the loop going first).
    topo.graph
        .edges_connecting(last, first)
        .min_by_key(|e| e.weight().arm)
        .map(|e| e.weight().ptr.clone())
}

/// How a field moves within one strongly connected component.
#[derive(Clone, Debug, PartialEq)]
enum Motion {
    /// A counter: the term grows (`+1`) or shrinks (`-1`) at every write.
    Counter(Term, i8),
    /// A latch: every write sets this value.
    Latch(serde_json::Value),
}

/// How one write moves `field`, when it is monotone. A counter's step must be an
/// integer of at least 1 (either sign) unless the field is `integer`-typed: a float
/// step can be absorbed (`1e16 + 1 == 1e16`) or shrink (`x + 0.0000001`) so that the
/// counter never passes its bound.
fn motion(field: &str, expr: &Value, reducer: Reducer, integer: bool) -> Option<Motion> {
    let sign = |x: f64| {
        if !(integer || (x.fract() == 0.0 && x.abs() >= 1.0)) {
            None
        } else if x > 0.0 {
            Some(1)
        } else if x < 0.0 {
            Some(-1)
        } else {
            None
        }
    };
    match reducer {
        Reducer::Add => guard::literal_number(expr)
            .and_then(sign)
            .map(|s| Motion::Counter(Term::Field(field.into()), s)),
        Reducer::Append => {
            guard::never_array(expr).then(|| Motion::Counter(Term::Len(field.into()), 1))
        }
        Reducer::Replace => {
            if let Some(v) = guard::literal_value(expr) {
                return Some(Motion::Latch(v));
            }
            let Value::String(s) = expr else { return None };
            guard::self_step(field, s)
                .and_then(sign)
                .map(|s| Motion::Counter(Term::Field(field.into()), s))
        }
        Reducer::Merge => None,
    }
}

/// The nodes of one component that write a field, and how each write moves it.
type Writes = (Vec<NodeIndex>, Vec<Option<Motion>>);

/// Finds a cycle that no bound covers (see the module docs).
pub(crate) fn unbounded_cycle(
    ls: &LoadedSpec,
    topo: &Topology,
    state: &StateInfo,
) -> Option<Vec<NodeIndex>> {
    let spec = &ls.spec;
    let n = topo.graph.node_count();
    let mut limited = vec![false; n];
    limited[topo.end.index()] = true;
    for (name, &ix) in &topo.index {
        if spec.nodes[name].max_visits().is_some() {
            limited[ix.index()] = true;
        }
    }
    let mut scc_of = vec![usize::MAX; n];
    let sccs = petgraph::algo::tarjan_scc(&topo.graph);
    for (k, scc) in sccs.iter().enumerate() {
        for ix in scc {
            scc_of[ix.index()] = k;
        }
    }
    // A field whose schema type is `integer` holds integers only (E054's steps).
    let integer = |f: &str| {
        state.known
            && state
                .fields
                .get(f)
                .is_some_and(|schema| match schema.get("type") {
                    Some(Value::String(t)) => t == "integer",
                    Some(Value::Array(ts)) => {
                        ts.iter().any(|t| t == "integer") && !ts.iter().any(|t| t == "number")
                    }
                    _ => false,
                })
    };
    // Per component: field -> (writers, motions of the writes).
    let mut writes: Vec<BTreeMap<&str, Writes>> = vec![BTreeMap::new(); sccs.len()];
    for (name, node) in &spec.nodes {
        let ix = topo.index[name];
        for (field, expr) in node.update() {
            let reducer = spec.state.reducers.get(field).copied().unwrap_or_default();
            let e = writes[scc_of[ix.index()]]
                .entry(field.as_str())
                .or_default();
            e.0.push(ix);
            e.1.push(motion(field, expr, reducer, integer(field)));
        }
    }
    let numeric = |f: &str| {
        state.known
            && state.fields.get(f).is_some_and(|schema| {
                matches!(
                    schema.get("type").and_then(Value::as_str),
                    Some("integer" | "number")
                )
            })
    };
    // Edge of each (branch node, arm).
    let mut arm_edge: BTreeMap<(NodeIndex, usize), EdgeIndex> = BTreeMap::new();
    for e in topo.graph.edge_indices() {
        if let (Some((src, _)), Some(arm)) = (topo.graph.edge_endpoints(e), topo.graph[e].arm) {
            arm_edge.insert((src, arm), e);
        }
    }
    let mut bounds = Vec::new();
    for (k, scc) in sccs.iter().enumerate() {
        let cyclic = scc.len() > 1 || topo.graph.find_edge(scc[0], scc[0]).is_some();
        if !cyclic {
            continue;
        }
        let constants: Vec<String> = state
            .fields
            .keys()
            .filter(|f| numeric(f) && !writes[k].contains_key(f.as_str()))
            .cloned()
            .collect();
        let monotone: Vec<(&str, &Vec<NodeIndex>, Motion)> = writes[k]
            .iter()
            .filter_map(|(field, (writers, motions))| {
                let first = motions.first()?.clone()?;
                motions
                    .iter()
                    .all(|m| m.as_ref() == Some(&first))
                    .then_some((*field, writers, first))
            })
            .collect();
        if monotone.is_empty() {
            continue;
        }
        for &ix in scc {
            let Some(Edge::Branch(arms)) = spec.edges.get(topo.name(ix)) else {
                continue;
            };
            let preds: Vec<Option<Pred>> = arms
                .iter()
                .map(|a| a.when.as_deref().map(guard::parse))
                .collect();
            for (field, writers, m) in &monotone {
                let known = match m {
                    Motion::Counter(t, s) => (
                        t.clone(),
                        if *s > 0 {
                            Known::PlusInf
                        } else {
                            Known::MinusInf
                        },
                    ),
                    Motion::Latch(v) => (Term::Field(field.to_string()), Known::Scalar(v.clone())),
                };
                let assume = Assume {
                    known: vec![known],
                    constant_numbers: &constants,
                };
                let mut guarded = Vec::new();
                for (i, arm) in arms.iter().enumerate() {
                    let Some(&e) = arm_edge.get(&(ix, i)) else {
                        continue;
                    };
                    if scc_of[topo.graph.edge_endpoints(e)?.1.index()] != k {
                        continue;
                    }
                    let earlier: Vec<Pred> = preds[..i].iter().flatten().cloned().collect();
                    let chosen = guard::choice(
                        &earlier,
                        if is_else(arm) {
                            None
                        } else {
                            preds[i].as_ref()
                        },
                    );
                    if guard::satisfiable(&chosen, &assume) == Some(false) {
                        guarded.push(e);
                    }
                }
                if !guarded.is_empty() {
                    bounds.push(EdgeBound {
                        progress: writers.to_vec(),
                        guarded,
                    });
                }
            }
        }
    }
    unbounded_cycle_edges(&topo.graph, &limited, &bounds)
}

fn is_else(arm: &Arm) -> bool {
    arm.when.is_none()
}
