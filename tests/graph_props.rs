//! Property tests: the reachability and cycle checks agree with naive
//! implementations on random graphs.
use petgraph::graph::{DiGraph, NodeIndex};
use proptest::prelude::*;
use ragloop::graph::analysis::{find_cycle, reachable_from, reaching, unbounded_cycle_in, Counter};

fn graph(n: usize, edges: &[(usize, usize)]) -> DiGraph<(), ()> {
    let mut g = DiGraph::new();
    for _ in 0..n {
        g.add_node(());
    }
    for &(a, b) in edges {
        g.add_edge(NodeIndex::new(a % n), NodeIndex::new(b % n), ());
    }
    g
}

/// Transitive closure by Floyd–Warshall: closure[i][j] = a path of length ≥ 1 from i to j.
fn closure(n: usize, edges: &[(usize, usize)], removed: &[bool]) -> Vec<Vec<bool>> {
    let mut c = vec![vec![false; n]; n];
    for &(a, b) in edges {
        let (a, b) = (a % n, b % n);
        if !removed[a] && !removed[b] {
            c[a][b] = true;
        }
    }
    for k in 0..n {
        for i in 0..n {
            for j in 0..n {
                if c[i][k] && c[k][j] {
                    c[i][j] = true;
                }
            }
        }
    }
    c
}

/// Every simple cycle, by brute force over paths (small graphs only).
fn simple_cycles(n: usize, edges: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let adj = |a: usize, b: usize| edges.iter().any(|&(x, y)| x % n == a && y % n == b);
    let mut out = Vec::new();
    fn extend(
        path: &mut Vec<usize>,
        n: usize,
        adj: &dyn Fn(usize, usize) -> bool,
        out: &mut Vec<Vec<usize>>,
    ) {
        let (first, last) = (path[0], *path.last().unwrap());
        if adj(last, first) {
            out.push(path.clone());
        }
        for next in first + 1..n {
            if !path.contains(&next) && adj(last, next) {
                path.push(next);
                extend(path, n, adj, out);
                path.pop();
            }
        }
    }
    for start in 0..n {
        extend(&mut vec![start], n, &adj, &mut out);
    }
    out
}

fn arb_graph() -> impl Strategy<Value = (usize, Vec<(usize, usize)>)> {
    (1usize..8).prop_flat_map(|n| (Just(n), proptest::collection::vec((0..n, 0..n), 0..20)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn reachability_matches_closure((n, edges) in arb_graph(), start in 0usize..8) {
        let start = start % n;
        let g = graph(n, &edges);
        let c = closure(n, &edges, &vec![false; n]);
        let fwd = reachable_from(&g, NodeIndex::new(start));
        let back = reaching(&g, NodeIndex::new(start));
        for j in 0..n {
            prop_assert_eq!(fwd[j], j == start || c[start][j]);
            prop_assert_eq!(back[j], j == start || c[j][start]);
        }
    }

    #[test]
    fn cycle_found_iff_one_exists((n, edges) in arb_graph(), removed in proptest::collection::vec(any::<bool>(), 8)) {
        let removed = &removed[..n];
        let g = graph(n, &edges);
        let c = closure(n, &edges, removed);
        let exists = (0..n).any(|i| !removed[i] && c[i][i]);
        let found = find_cycle(&g, removed);
        prop_assert_eq!(found.is_some(), exists);
        if let Some(cycle) = found {
            // A real cycle: distinct, kept nodes joined by edges, closing back to the start.
            let mut seen = std::collections::HashSet::new();
            for (i, ix) in cycle.iter().enumerate() {
                prop_assert!(!removed[ix.index()]);
                prop_assert!(seen.insert(*ix));
                let next = cycle[(i + 1) % cycle.len()];
                prop_assert!(g.find_edge(*ix, next).is_some());
            }
        }
    }

    #[test]
    fn unbounded_cycle_matches_definition(
        (n, edges) in arb_graph(),
        limited in proptest::collection::vec(any::<bool>(), 8),
        counters in proptest::collection::vec((proptest::collection::vec(0usize..8, 0..3), proptest::collection::vec(0usize..8, 0..3)), 0..3),
    ) {
        let limited = &limited[..n];
        let counters: Vec<Counter> = counters
            .into_iter()
            .map(|(inc, guard)| Counter {
                incrementers: inc.into_iter().map(|i| NodeIndex::new(i % n)).collect(),
                guards: guard.into_iter().map(|i| NodeIndex::new(i % n)).collect(),
            })
            .collect();
        // Definition: a simple cycle is bounded if it has a limited node, or for some
        // counter both an incrementer and a guard. (Checking simple cycles suffices: a
        // closed walk avoiding all bounds contains a simple cycle avoiding them.)
        let bounded = |cyc: &Vec<usize>| {
            cyc.iter().any(|&v| limited[v])
                || counters.iter().any(|c| {
                    cyc.iter().any(|&v| c.incrementers.contains(&NodeIndex::new(v)))
                        && cyc.iter().any(|&v| c.guards.contains(&NodeIndex::new(v)))
                })
        };
        let naive = simple_cycles(n, &edges).iter().any(|c| !bounded(c));
        let g = graph(n, &edges);
        let found = unbounded_cycle_in(&g, limited, &counters);
        prop_assert_eq!(found.is_some(), naive);
        if let Some(cyc) = found {
            let as_usize: Vec<usize> = cyc.iter().map(|i| i.index()).collect();
            prop_assert!(!bounded(&as_usize), "reported cycle {:?} is bounded", as_usize);
        }
    }
}
