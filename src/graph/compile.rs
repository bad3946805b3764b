//! Turns a spec's nodes and edges into a petgraph [`DiGraph`].
use crate::spec::types::Spec;
use crate::spec::yaml::pointer;
use indexmap::IndexMap;
use petgraph::graph::{DiGraph, NodeIndex};

/// Name of the terminal pseudo-node. Always a legal edge target; never a node name.
pub const END: &str = "END";

/// One edge of the topology.
#[derive(Clone, Debug)]
pub struct EdgeInfo {
    /// `None` for a static edge; the predicate text for a `when` arm; `"else"` for the
    /// `else` arm.
    pub label: Option<String>,
    /// Position of the arm in its branch list (`None` for a static edge).
    pub arm: Option<usize>,
    /// JSON pointer of the target value in the spec, for diagnostics.
    pub ptr: String,
}

/// The compiled topology. Node weights are node names; `END` is a node of its own.
#[derive(Clone, Debug)]
pub struct Topology {
    /// The directed graph, edges in declaration order.
    pub graph: DiGraph<String, EdgeInfo>,
    /// Node name → index (spec nodes only, in declaration order).
    pub index: IndexMap<String, NodeIndex>,
    /// Index of the `END` pseudo-node.
    pub end: NodeIndex,
    /// The entry node, when it exists.
    pub entry: Option<NodeIndex>,
}

#[cfg(test)]
thread_local! {
    /// How many times [`Topology::build`] ran on this thread (tests count the builds a
    /// command makes: one per variant).
    pub(crate) static BUILDS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Topology {
    /// Builds the topology of a spec. Edges to or from unknown nodes are left out
    /// (reference checks report them), so this never fails.
    pub fn build(spec: &Spec) -> Topology {
        #[cfg(test)]
        BUILDS.with(|c| c.set(c.get() + 1));
        let mut graph = DiGraph::new();
        let mut index = IndexMap::new();
        for name in spec.nodes.keys() {
            index.insert(name.clone(), graph.add_node(name.clone()));
        }
        let end = graph.add_node(END.to_string());
        let target = |name: &str| {
            if name == END {
                Some(end)
            } else {
                index.get(name).copied()
            }
        };
        let mut edges = Vec::new();
        for (from, edge) in &spec.edges {
            let Some(&src) = index.get(from) else {
                continue;
            };
            for arm in edge.arms() {
                let Some(dst) = target(arm.to) else { continue };
                let (label, ptr) = match (arm.index, arm.key()) {
                    (Some(i), Some(key)) => (
                        Some(arm.when.unwrap_or("else").to_string()),
                        pointer(&["edges", from.as_str(), &i.to_string(), key]),
                    ),
                    _ => (None, pointer(&["edges", from])),
                };
                edges.push((
                    src,
                    dst,
                    EdgeInfo {
                        label,
                        arm: arm.index,
                        ptr,
                    },
                ));
            }
        }
        for (s, d, info) in edges {
            graph.add_edge(s, d, info);
        }
        let entry = index.get(&spec.entry).copied();
        Topology {
            graph,
            index,
            end,
            entry,
        }
    }

    /// The index of an edge target: a node name, or `END` (the terminal); `None` for
    /// an unknown name.
    pub fn target(&self, name: &str) -> Option<NodeIndex> {
        if name == END {
            Some(self.end)
        } else {
            self.index.get(name).copied()
        }
    }

    /// Name of a node index (`END` for the terminal).
    pub fn name(&self, ix: NodeIndex) -> &str {
        &self.graph[ix]
    }
}
