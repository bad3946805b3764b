//! # ragloop
//!
//! A declarative runtime for agentic RAG graphs. A spec (YAML) names the state, the
//! models, the retrievers, the nodes and the edges of a graph; prompts live in Jinja
//! files and structured-output shapes in JSON Schema files.
//!
//! The pipeline, one module per stage:
//!
//! 1. [`spec`] loads a spec file into typed values that keep the source span of
//!    every value (`file:line:column`).
//! 2. [`validate`] runs every static check and returns all findings as
//!    [`diag::Diagnostic`]s with stable codes.
//! 3. [`graph`] builds a spec's petgraph topology and exports it as Mermaid or DOT.
//! 4. [`compile`] is the one entry point from spec files to what runs: it loads the
//!    spec, validates the base spec and each variant once, and compiles each into a
//!    [`runtime::Program`] from the files validation read.
//! 5. [`retrieval`] ingests a corpus into a persistent BM25 index (and dense vectors).
//! 6. [`runtime`] runs a compiled program; [`retrieval::web`] answers its web-search tools.
//!
//! The `ragloop` binary is a thin layer over these modules.
#![warn(missing_docs)]
// Diagnostics are large but only travel on the cold, failing path.
#![allow(clippy::result_large_err)]

/// Like `eprintln!`, but a closed or broken stderr (`ragloop run --verbose 2>&1 | head`)
/// is ignored instead of panicking: diagnostics are best effort, the run's results
/// and exit status are not. Messages embed remote and state-derived text (server
/// replies, web results, JSON keys), so every control character but newline and tab
/// is escaped ([`text::escape_text`]) before it reaches the terminal.
#[macro_export]
macro_rules! errln {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stderr(), "{}", $crate::text::escape_text(&text));
    }};
}

/// Like `eprint!`, ignoring a closed or broken stderr and escaping control
/// characters (see [`errln!`]).
#[macro_export]
macro_rules! errp {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = write!(std::io::stderr(), "{}", $crate::text::escape_text(&text));
    }};
}

pub mod checkpoint;
pub mod clock;
pub mod compile;
pub mod diag;
pub mod eval;
pub mod graph;
pub mod http;
pub mod jinja;
pub mod json;
pub mod paths;
pub mod providers;
pub mod retries;
pub mod retrieval;
pub mod runtime;
pub mod secret;
pub mod serve;
pub mod source;
pub mod spec;
pub mod tasks;
pub mod text;
pub mod tokens;
pub mod validate;
