//! Graph algorithms behind the reachability and cycle checks. Pure functions over a
//! petgraph graph, so property tests can compare them with naive implementations.
use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;

/// Marks every node reachable from `start` (including `start`), following edges forward.
pub fn reachable_from<N, E>(g: &DiGraph<N, E>, start: NodeIndex) -> Vec<bool> {
    walk(g, start, Direction::Outgoing)
}

/// Marks every node from which `target` is reachable (including `target`).
pub fn reaching<N, E>(g: &DiGraph<N, E>, target: NodeIndex) -> Vec<bool> {
    walk(g, target, Direction::Incoming)
}

fn walk<N, E>(g: &DiGraph<N, E>, start: NodeIndex, dir: Direction) -> Vec<bool> {
    let mut seen = vec![false; g.node_count()];
    if start.index() >= seen.len() {
        return seen;
    }
    let mut stack = vec![start];
    seen[start.index()] = true;
    while let Some(n) = stack.pop() {
        for m in g.neighbors_directed(n, dir) {
            if !seen[m.index()] {
                seen[m.index()] = true;
                stack.push(m);
            }
        }
    }
    seen
}

/// Finds a cycle among the nodes not marked `removed`, as the list of its nodes in
/// order (the last node has an edge back to the first). Cycles are searched one
/// strongly connected component at a time, components in the order Tarjan's
/// algorithm yields them; `None` when the remaining graph is acyclic.
pub fn find_cycle<N, E>(g: &DiGraph<N, E>, removed: &[bool]) -> Option<Vec<NodeIndex>> {
    let filtered = g.filter_map(
        |ix, _| {
            if removed.get(ix.index()).copied().unwrap_or(false) {
                None
            } else {
                Some(ix)
            }
        },
        |_, _| Some(()),
    );
    for scc in petgraph::algo::tarjan_scc(&filtered) {
        let self_loop = scc.len() == 1 && filtered.find_edge(scc[0], scc[0]).is_some();
        if scc.len() > 1 || self_loop {
            let members: std::collections::HashSet<NodeIndex> = scc.iter().copied().collect();
            let path = cycle_in_scc(&filtered, scc[0], &members);
            return Some(path.into_iter().map(|ix| filtered[ix]).collect());
        }
    }
    None
}

/// A counter that can bound cycles: the nodes that increment it and the branch
/// nodes whose predicates compare it.
#[derive(Clone, Debug, Default)]
pub struct Counter {
    /// Nodes whose update strictly increases the counter.
    pub incrementers: Vec<NodeIndex>,
    /// Branch nodes with a predicate that compares the counter.
    pub guards: Vec<NodeIndex>,
}

/// Most counters considered (the search is exponential in this number; further
/// counters are ignored, which can only report more cycles, never fewer).
pub const MAX_COUNTERS: usize = 8;

/// Finds a cycle that is not bounded. A cycle is bounded when it contains a node
/// marked in `limited` (a node with `max_visits`), or when, for some counter, it
/// contains one of the counter's incrementers and one of its guards.
///
/// A cycle is unbounded iff for every counter it avoids all incrementers or all
/// guards; so it suffices to try, for each of the 2^k choices of "avoid
/// incrementers / avoid guards" per counter, whether the graph minus the chosen
/// nodes still has a cycle.
pub fn unbounded_cycle_in<N, E>(
    g: &DiGraph<N, E>,
    limited: &[bool],
    counters: &[Counter],
) -> Option<Vec<NodeIndex>> {
    let counters = &counters[..counters.len().min(MAX_COUNTERS)];
    for choice in 0u32..(1u32 << counters.len()) {
        let mut removed = limited.to_vec();
        removed.resize(g.node_count(), false);
        for (i, c) in counters.iter().enumerate() {
            let set = if choice & (1 << i) == 0 {
                &c.incrementers
            } else {
                &c.guards
            };
            for ix in set {
                if let Some(r) = removed.get_mut(ix.index()) {
                    *r = true;
                }
            }
        }
        if let Some(c) = find_cycle(g, &removed) {
            return Some(c);
        }
    }
    None
}

/// Something that bounds every cycle passing through one of `progress` and one of
/// `guarded`: a counter, with the nodes that move it (`progress`) and the edges that can
/// only be taken while it is below its bound (`guarded`).
#[derive(Clone, Debug, Default)]
pub struct EdgeBound {
    /// Nodes whose update moves the counter towards its bound.
    pub progress: Vec<NodeIndex>,
    /// Edges that cannot be taken once the counter is past its bound.
    pub guarded: Vec<EdgeIndex>,
}

/// Finds a cycle that is not bounded: one that avoids every node marked in `limited`
/// (a node with `max_visits`) and, for every bound, avoids all of its `progress`
/// nodes or all of its `guarded` edges. `None` when every cycle is bounded.
///
/// Sound for infinite runs, not only simple cycles: the nodes and edges a run uses
/// infinitely often form a strongly connected subgraph, which contains a simple cycle;
/// if that cycle is bounded, the subgraph uses a limited node infinitely often, or
/// moves a counter infinitely often while taking an edge its bound forbids.
///
/// Each strongly connected component is searched with only the bounds that lie in it,
/// trying for each of them (at most [`MAX_COUNTERS`] per component; further ones are
/// ignored, which can only report more cycles) both ways to avoid it.
pub fn unbounded_cycle_edges<N, E>(
    g: &DiGraph<N, E>,
    limited: &[bool],
    bounds: &[EdgeBound],
) -> Option<Vec<NodeIndex>> {
    let n = g.node_count();
    let is_limited = |ix: NodeIndex| limited.get(ix.index()).copied().unwrap_or(false);
    let base = g.filter_map(|ix, _| (!is_limited(ix)).then_some(ix), |e, _| Some(e));
    for scc in petgraph::algo::tarjan_scc(&base) {
        let self_loop = scc.len() == 1 && base.find_edge(scc[0], scc[0]).is_some();
        if scc.len() < 2 && !self_loop {
            continue;
        }
        let mut member = vec![false; n];
        for &ix in &scc {
            member[base[ix].index()] = true;
        }
        let inside = |ix: NodeIndex| member.get(ix.index()).copied().unwrap_or(false);
        let local: Vec<&EdgeBound> = bounds
            .iter()
            .filter(|b| {
                b.progress.iter().any(|&p| inside(p))
                    && b.guarded.iter().any(|&e| {
                        g.edge_endpoints(e)
                            .is_some_and(|(s, t)| inside(s) && inside(t))
                    })
            })
            .take(MAX_COUNTERS)
            .collect();
        for choice in 0u32..(1u32 << local.len()) {
            let mut drop_node = vec![false; n];
            let mut drop_edge = vec![false; g.edge_count()];
            for (i, b) in local.iter().enumerate() {
                if choice & (1 << i) == 0 {
                    for p in &b.progress {
                        if let Some(d) = drop_node.get_mut(p.index()) {
                            *d = true;
                        }
                    }
                } else {
                    for e in &b.guarded {
                        if let Some(d) = drop_edge.get_mut(e.index()) {
                            *d = true;
                        }
                    }
                }
            }
            let sub = g.filter_map(
                |ix, _| (inside(ix) && !drop_node[ix.index()]).then_some(ix),
                |e, _| (!drop_edge[e.index()]).then_some(()),
            );
            if let Some(c) = find_cycle(&sub, &vec![false; sub.node_count()]) {
                return Some(c.into_iter().map(|ix| sub[ix]).collect());
            }
        }
    }
    None
}

/// A simple cycle through `start` inside a strongly connected component (BFS for the
/// shortest way back to `start`).
fn cycle_in_scc(
    g: &DiGraph<NodeIndex, ()>,
    start: NodeIndex,
    members: &std::collections::HashSet<NodeIndex>,
) -> Vec<NodeIndex> {
    let mut prev: std::collections::HashMap<NodeIndex, NodeIndex> =
        std::collections::HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for e in g.edges(n) {
            let m = e.target();
            if !members.contains(&m) {
                continue;
            }
            if m == start {
                let mut path = vec![n];
                let mut cur = n;
                while cur != start {
                    cur = prev[&cur];
                    path.push(cur);
                }
                path.reverse();
                return path;
            }
            if let std::collections::hash_map::Entry::Vacant(v) = prev.entry(m) {
                v.insert(n);
                queue.push_back(m);
            }
        }
    }
    vec![start]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_self_loop_and_cycle() {
        let mut g: DiGraph<(), ()> = DiGraph::new();
        let a = g.add_node(());
        let b = g.add_node(());
        let c = g.add_node(());
        g.add_edge(a, b, ());
        g.add_edge(b, c, ());
        assert!(find_cycle(&g, &[false; 3]).is_none());
        g.add_edge(c, b, ());
        let cyc = find_cycle(&g, &[false; 3]).unwrap();
        assert_eq!(cyc.len(), 2);
        assert!(find_cycle(&g, &[false, true, false]).is_none());
        g.add_edge(a, a, ());
        assert_eq!(find_cycle(&g, &[false, true, false]).unwrap(), vec![a]);
        assert_eq!(reachable_from(&g, a), vec![true, true, true]);
        assert_eq!(reaching(&g, a), vec![true, false, false]);
    }
}
