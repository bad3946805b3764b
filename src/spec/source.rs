//! Source spans, re-exported from [`crate::source`] (where `diag` can use them too)
//! so `spec::source::…` paths keep working.
pub use crate::source::{line_col, FileId, SourceFile, Sources, Span};
