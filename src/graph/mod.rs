//! The graph of a spec: names become petgraph indices ([`compile`]), graph algorithms
//! used by validation ([`analysis`]), and Mermaid/DOT export ([`export`]).
pub mod analysis;
pub mod compile;
pub mod export;

pub use compile::{EdgeInfo, Topology, END};
