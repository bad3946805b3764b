//! Checking variants incrementally.
//!
//! [`super::check`] is a sequence of parts, each a function of a part of the spec:
//!
//! | part | reads |
//! |---|---|
//! | references, models, retrieval | the whole spec, cheaply (names, ranges) |
//! | the state | `state`, `output` |
//! | a node's output schema and templates | that node, the state |
//! | the branches' predicates | `edges`, the state |
//! | the graph | topology (`nodes`' names, `edges`, `entry`), the updates and `max_visits` of nodes on cycles, the state, and whether an earlier part found a fault it must not reason over |
//!
//! A variant's merged spec differs from the base spec only under the paths its `set`
//! names. Its parts that read nothing under those paths find what the base spec's
//! found — and [`super::check_variants`] drops a variant's finding that repeats one of
//! the base spec. So only the parts a variant affects run again ([`Changes`]): for a
//! variant that sets `nodes.grade.prompt.user`, the references and that node; the
//! graph only when the topology, a node on a cycle, the state or the blocking faults
//! change. What it reports is what checking the whole merged spec reports (property
//! test `incremental_equals_full`).
use super::{graph, models, refs, retrieval, schemas, templates, Options, StateInfo};
use crate::diag::Diagnostic;
use crate::graph::Topology;
use crate::spec::source::Sources;
use crate::spec::LoadedSpec;
use indexmap::{IndexMap, IndexSet};
use std::collections::HashSet;
use std::sync::Arc;

/// One node's findings: its output schema's, then its templates'.
#[derive(Clone, Debug, Default)]
struct NodeParts {
    schema: Vec<Diagnostic>,
    templates: Vec<Diagnostic>,
}

/// The findings of one check, by part (before the graph part, which may amend a
/// predicate's finding, see `arms.rs`).
pub(super) struct Parts {
    /// What the templates' context derived from the state schema.
    shared: std::rc::Rc<templates::Shared>,
    refs_ok: bool,
    refs: Refs,
    /// `refs.all()`, once.
    refs_all: Vec<Diagnostic>,
    state: StateInfo,
    state_diags: Vec<Diagnostic>,
    nodes: IndexMap<String, NodeParts>,
    edges: Vec<Diagnostic>,
    /// How many findings of the parts before the graph stop the cycle check.
    blocking: usize,
    /// Nodes on a cycle of the topology (`None` when the references did not resolve).
    cyclic: Option<HashSet<String>>,
    /// The spec's topology, built once when the references resolve: the graph part
    /// runs over it and `compile` keeps it.
    topology: Option<Arc<Topology>>,
}

/// The references part: [`refs::RefParts`], then the models' and the retrieval
/// checks (which read only `models`, `retrievers` and `tools`).
struct Refs {
    parts: refs::RefParts,
    models: Vec<Diagnostic>,
    retrieval: Vec<Diagnostic>,
}

impl Refs {
    fn of(ls: &LoadedSpec, opts: &Options) -> Refs {
        let mut r = Refs {
            parts: refs::parts(ls, opts),
            models: Vec::new(),
            retrieval: Vec::new(),
        };
        models::check(ls, &mut r.models);
        retrieval::check(ls, &mut r.retrieval);
        r
    }

    fn all(&self) -> Vec<Diagnostic> {
        let mut out = self.parts.all();
        out.extend_from_slice(&self.models);
        out.extend_from_slice(&self.retrieval);
        out
    }
}

/// A variant's references part, as the base spec's with the parts its `set` paths
/// touch computed again: the names and wiring when nodes are added or replaced whole
/// or `edges`/`entry` change; each changed node's reference and range checks (every
/// node's when `models`, `retrievers` or `tools` change: a node's checks read them);
/// the small spec-wide parts (`output`, the ranges of limits/models/retrievers/tools,
/// corpora, models, retrieval) always.
struct RefsDelta<'b> {
    base: &'b Refs,
    /// `None`: the base spec's.
    names: Option<Vec<Diagnostic>>,
    /// `None`: the base spec's.
    wiring: Option<Vec<Diagnostic>>,
    variants: Vec<Diagnostic>,
    output: Vec<Diagnostic>,
    ranges: Vec<Diagnostic>,
    env: Vec<Diagnostic>,
    models: Vec<Diagnostic>,
    retrieval: Vec<Diagnostic>,
    /// The nodes checked again, in the merged spec's order: (references, ranges).
    nodes: IndexMap<String, (Vec<Diagnostic>, Vec<Diagnostic>)>,
}

impl<'b> RefsDelta<'b> {
    fn of(base: &'b Refs, merged: &LoadedSpec, ch: &Changes, opts: &Options) -> RefsDelta<'b> {
        let structural = ch.all || ch.new_node || ch.top("edges") || ch.top("entry");
        let every_node = ch.all || ch.top("models") || ch.top("retrievers") || ch.top("tools");
        let names: Vec<&String> = if every_node {
            merged.spec.nodes.keys().collect()
        } else {
            in_spec_order(merged, &ch.nodes)
        };
        let mut models_d = Vec::new();
        models::check(merged, &mut models_d);
        let mut retrieval_d = Vec::new();
        retrieval::check(merged, &mut retrieval_d);
        RefsDelta {
            base,
            names: structural.then(|| refs::names(merged)),
            wiring: structural.then(|| refs::wiring(merged)),
            variants: refs::variants(merged),
            output: refs::output(merged),
            ranges: refs::ranges(merged),
            env: refs::env(merged, opts),
            models: models_d,
            retrieval: retrieval_d,
            nodes: names
                .into_iter()
                .map(|n| {
                    (
                        n.clone(),
                        (refs::node(merged, n), refs::node_ranges(merged, n)),
                    )
                })
                .collect(),
        }
    }

    /// Whether the graph checks can run on the merged spec.
    fn ok(&self) -> bool {
        let b = &self.base.parts;
        self.names.as_ref().unwrap_or(&b.names).is_empty()
            && self.variants.is_empty()
            && self.wiring.as_ref().unwrap_or(&b.wiring).is_empty()
    }

    /// How many of the merged spec's reference findings stop the cycle check, given
    /// `total`, the base spec's count.
    fn blocking(&self, total: usize) -> usize {
        let b = &self.base.parts;
        let mut old = blocking(&b.variants)
            + blocking(&b.output)
            + blocking(&b.ranges)
            + blocking(&b.env)
            + blocking(&self.base.models)
            + blocking(&self.base.retrieval);
        let mut new = blocking(&self.variants)
            + blocking(&self.output)
            + blocking(&self.ranges)
            + blocking(&self.env)
            + blocking(&self.models)
            + blocking(&self.retrieval);
        if let Some(n) = &self.names {
            old += blocking(&b.names);
            new += blocking(n);
        }
        if let Some(w) = &self.wiring {
            old += blocking(&b.wiring);
            new += blocking(w);
        }
        for (name, (r, g)) in &self.nodes {
            old += b.nodes.get(name).map_or(0, |d| blocking(d))
                + b.node_ranges.get(name).map_or(0, |d| blocking(d));
            new += blocking(r) + blocking(g);
        }
        total + new - old
    }

    /// The parts computed again, in the order of the full check (a subsequence of
    /// [`RefsDelta::all`]; the parts left out are the base spec's, whose findings
    /// `check_variants` drops from a variant's anyway).
    fn changed(self) -> Vec<Diagnostic> {
        let mut out = self.names.unwrap_or_default();
        out.extend(self.variants);
        out.extend(self.wiring.unwrap_or_default());
        out.extend(self.output);
        for (r, _) in self.nodes.values() {
            out.extend_from_slice(r);
        }
        out.extend(self.ranges);
        for (_, g) in self.nodes.values() {
            out.extend_from_slice(g);
        }
        out.extend(self.env);
        out.extend(self.models);
        out.extend(self.retrieval);
        out
    }

    /// Every reference finding of the merged spec, in the order of the full check.
    fn all(&self, merged: &LoadedSpec) -> Vec<Diagnostic> {
        let b = &self.base.parts;
        let empty = Vec::new();
        let mut out = self.names.as_ref().unwrap_or(&b.names).clone();
        out.extend_from_slice(&self.variants);
        out.extend_from_slice(self.wiring.as_ref().unwrap_or(&b.wiring));
        out.extend_from_slice(&self.output);
        for n in merged.spec.nodes.keys() {
            out.extend_from_slice(match self.nodes.get(n) {
                Some((r, _)) => r,
                None => b.nodes.get(n).unwrap_or(&empty),
            });
        }
        out.extend_from_slice(&self.ranges);
        for n in merged.spec.nodes.keys() {
            out.extend_from_slice(match self.nodes.get(n) {
                Some((_, g)) => g,
                None => b.node_ranges.get(n).unwrap_or(&empty),
            });
        }
        out.extend_from_slice(&self.env);
        out.extend_from_slice(&self.models);
        out.extend_from_slice(&self.retrieval);
        out
    }
}

/// The names of `set` that are nodes of `merged`, in its order.
fn in_spec_order<'m>(merged: &'m LoadedSpec, names: &IndexSet<String>) -> Vec<&'m String> {
    let mut at: Vec<usize> = names
        .iter()
        .filter_map(|n| merged.spec.nodes.get_index_of(n))
        .collect();
    at.sort_unstable();
    at.into_iter()
        .filter_map(|i| merged.spec.nodes.get_index(i).map(|(k, _)| k))
        .collect()
}

fn node_part(
    ctx: &templates::Ctx<'_>,
    ls: &LoadedSpec,
    name: &str,
    sources: &mut Sources,
) -> NodeParts {
    let node = &ls.spec.nodes[name];
    let mut p = NodeParts::default();
    schemas::check_node(ls, name, node, sources, &mut p.schema);
    templates::check_node(ctx, ls, name, node, sources, &mut p.templates);
    p
}

/// Every part of one spec's check.
pub(super) fn parts(ls: &LoadedSpec, sources: &mut Sources, opts: &Options) -> Parts {
    let refs = Refs::of(ls, opts);
    let refs_ok = refs.parts.graph_ok();
    let refs_all = refs.all();
    let mut state_diags = Vec::new();
    let state = schemas::check_state(ls, sources, &mut state_diags);
    let ctx = templates::Ctx::new(ls, &state, sources);
    let mut nodes = IndexMap::with_capacity(ls.spec.nodes.len());
    for name in ls.spec.nodes.keys() {
        nodes.insert(name.clone(), node_part(&ctx, ls, name, sources));
    }
    let mut edges = Vec::new();
    templates::check_edges(&ctx, ls, sources, &mut edges);
    let shared = ctx.shared();
    drop(ctx);
    let topology = refs_ok.then(|| Arc::new(Topology::build(&ls.spec)));
    let mut p = Parts {
        shared,
        refs_ok,
        refs,
        refs_all,
        state,
        state_diags,
        nodes,
        edges,
        blocking: 0,
        cyclic: topology.as_deref().map(cyclic_nodes),
        topology,
    };
    p.blocking = blocking(&p.refs_all)
        + blocking(&p.state_diags)
        + p.nodes.values().map(NodeParts::blocking).sum::<usize>()
        + blocking(&p.edges);
    p
}

/// How many of `ds` stop the cycle check.
fn blocking(ds: &[Diagnostic]) -> usize {
    ds.iter()
        .filter(|d| graph::blocks_cycle_check(d.code))
        .count()
}

impl NodeParts {
    fn blocking(&self) -> usize {
        blocking(&self.schema) + blocking(&self.templates)
    }
}

/// The nodes that lie on a cycle (a strongly connected component with an edge inside).
fn cyclic_nodes(topo: &Topology) -> HashSet<String> {
    let mut out = HashSet::new();
    for scc in petgraph::algo::tarjan_scc(&topo.graph) {
        let cyclic = scc.len() > 1 || topo.graph.find_edge(scc[0], scc[0]).is_some();
        if cyclic {
            out.extend(
                scc.iter()
                    .filter(|&&ix| ix != topo.end)
                    .map(|&ix| topo.name(ix).to_string()),
            );
        }
    }
    out
}

/// The parts in the order [`super::check`] reports them, then the graph part, and the
/// [`Topology`] the graph part ran over (`None` when the references did not resolve).
pub(super) fn finish(ls: &LoadedSpec, p: &Parts) -> (Vec<Diagnostic>, Option<Arc<Topology>>) {
    let mut all = assemble(
        &p.refs_all,
        &p.state_diags,
        p.nodes.values().map(|n| (&n.schema, &n.templates)),
        &p.edges,
    );
    if let Some(topo) = &p.topology {
        graph::check(ls, topo, &p.state, &mut all);
    }
    (all, p.topology.clone())
}

fn assemble<'a>(
    refs: &[Diagnostic],
    state: &[Diagnostic],
    nodes: impl Iterator<Item = (&'a Vec<Diagnostic>, &'a Vec<Diagnostic>)> + Clone,
    edges: &[Diagnostic],
) -> Vec<Diagnostic> {
    let mut all = refs.to_vec();
    all.extend_from_slice(state);
    for (schema, _) in nodes.clone() {
        all.extend_from_slice(schema);
    }
    for (_, tpl) in nodes {
        all.extend_from_slice(tpl);
    }
    all.extend_from_slice(edges);
    all
}

/// What a variant's `set` paths change, by part.
#[derive(Debug, Default)]
struct Changes {
    /// Every part (a path under `state`, or `nodes` itself).
    all: bool,
    /// Top-level sections other than `nodes` and `state` (`edges`, `entry`, `output`, ...).
    tops: HashSet<String>,
    /// Nodes under which a path lies (`nodes.NAME...`).
    nodes: IndexSet<String>,
    /// A node is added or replaced whole (`nodes.NAME`: its key's span moves to the
    /// variant, and the graph part reports at node keys).
    new_node: bool,
}

impl Changes {
    fn of<'a>(base: &LoadedSpec, paths: impl IntoIterator<Item = &'a str>) -> Changes {
        let mut c = Changes::default();
        for path in paths {
            let mut seg = path.split('.');
            match (seg.next(), seg.next()) {
                (Some("state"), _) | (Some("nodes"), None) => c.all = true,
                (Some("nodes"), Some(name)) => {
                    c.new_node |= !base.spec.nodes.contains_key(name) || seg.next().is_none();
                    c.nodes.insert(name.to_string());
                }
                (Some(top), _) => {
                    c.tops.insert(top.to_string());
                }
                (None, _) => c.all = true,
            }
        }
        c
    }

    fn top(&self, name: &str) -> bool {
        self.all || self.tops.contains(name)
    }
}

/// Whether a node's value differs between the base and the merged spec in a key the
/// graph part reads.
fn graph_keys_differ(base: &LoadedSpec, merged: &LoadedSpec, name: &str) -> bool {
    let at = |ls: &LoadedSpec, key: &str| {
        ls.raw
            .get("nodes")
            .and_then(|n| n.get(name))
            .and_then(|n| n.get(key))
            .cloned()
    };
    ["update", "max_visits", "kind"]
        .iter()
        .any(|k| at(base, k) != at(merged, k))
}

/// The findings of `merged` (variant of `base`, whose parts are `bp`) that can differ
/// from the base spec's: the parts the variant affects, and, when the graph part runs
/// again, everything it reads. Every finding of [`super::check`] on `merged` that is
/// left out repeats one of `base` exactly.
pub(super) fn check_variant<'a>(
    base: &LoadedSpec,
    bp: &Parts,
    merged: &LoadedSpec,
    paths: impl IntoIterator<Item = &'a str>,
    sources: &mut Sources,
    opts: &Options,
) -> Vec<Diagnostic> {
    let ch = Changes::of(base, paths);
    // References: the parts the paths touch (see `RefsDelta`).
    let refs = RefsDelta::of(&bp.refs, merged, &ch, opts);
    let refs_ok = refs.ok();
    let fresh_state = ch.all || ch.top("output");
    let mut state_diags = Vec::new();
    let own_state;
    let state: &StateInfo = if fresh_state {
        own_state = schemas::check_state(merged, sources, &mut state_diags);
        &own_state
    } else {
        &bp.state
    };
    // In the merged spec's order, as the full check reports them.
    let fresh_nodes: Vec<&String> = if ch.all {
        merged.spec.nodes.keys().collect()
    } else {
        in_spec_order(merged, &ch.nodes)
    };
    let fresh_edges = ch.all || ch.top("edges");
    let mut nodes: IndexMap<&str, NodeParts> = IndexMap::new();
    let mut edges = Vec::new();
    if !fresh_nodes.is_empty() || fresh_edges {
        let ctx = if fresh_state {
            templates::Ctx::new(merged, state, sources)
        } else {
            templates::Ctx::with(std::rc::Rc::clone(&bp.shared), state)
        };
        for name in &fresh_nodes {
            nodes.insert(name.as_str(), node_part(&ctx, merged, name, sources));
        }
        if fresh_edges {
            templates::check_edges(&ctx, merged, sources, &mut edges);
        }
    }
    let empty = NodeParts::default();
    let node_of = |name: &str| {
        nodes
            .get(name)
            .or_else(|| bp.nodes.get(name))
            .unwrap_or(&empty)
    };
    // The blocking findings of the merged spec: the base spec's, those of the parts
    // run again replaced by theirs (no walk over the unchanged nodes).
    let mut count = bp.blocking as isize;
    let mut swap = |old: usize, new: usize| count += new as isize - old as isize;
    let base_refs = blocking(&bp.refs_all);
    swap(base_refs, refs.blocking(base_refs));
    if fresh_state {
        swap(blocking(&bp.state_diags), blocking(&state_diags));
    }
    for (name, p) in &nodes {
        swap(
            bp.nodes.get(*name).map_or(0, NodeParts::blocking),
            p.blocking(),
        );
    }
    if fresh_edges {
        swap(blocking(&bp.edges), blocking(&edges));
    }
    let is_blocked = count > 0;
    let graph_again = refs_ok
        && (ch.all
            || ch.new_node
            || fresh_edges
            || ch.top("entry")
            || fresh_state
            || refs_ok != bp.refs_ok
            || is_blocked != (bp.blocking > 0)
            || ch.nodes.iter().any(|n| {
                bp.cyclic.as_ref().is_none_or(|c| c.contains(n))
                    && graph_keys_differ(base, merged, n)
            }));
    // The graph part amends the base spec's predicate findings (W001, `arms.rs`):
    // when it runs on one of the two specs only, those findings differ too.
    if graph_again || refs_ok != bp.refs_ok {
        let mut all = assemble(
            &refs.all(merged),
            if fresh_state {
                &state_diags
            } else {
                &bp.state_diags
            },
            merged
                .spec
                .nodes
                .keys()
                .map(|n| node_of(n))
                .map(|p| (&p.schema, &p.templates)),
            if fresh_edges { &edges } else { &bp.edges },
        );
        if refs_ok {
            graph::check(merged, &Topology::build(&merged.spec), state, &mut all);
        }
        return all;
    }
    let mut out = refs.changed();
    out.extend(state_diags);
    for p in nodes.values() {
        out.extend_from_slice(&p.schema);
    }
    for p in nodes.into_values() {
        out.extend(p.templates);
    }
    out.extend(edges);
    out
}
