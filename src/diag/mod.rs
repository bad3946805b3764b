//! Diagnostics: what is wrong, where, and under which stable code.
//!
//! Checks collect every finding as a [`Diagnostic`] instead of stopping at the first
//! one; [`render`] turns a list into human, JSON or GitHub-annotation output.
mod code;
pub mod render;

pub use code::{codes_markdown, Code};

use crate::source::Span;

/// How bad a finding is. Errors make `validate` exit 1; warnings only with
/// `--deny-warnings`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The spec is unusable.
    Error,
    /// The spec works but something in it is likely a mistake.
    Warning,
}

/// One finding.
///
/// `span` points at the offending value (a spec key or value, a place in a prompt or
/// schema file); `labels` point at related places (for example the other end of an
/// edge). `variant` is set when the finding only exists in a variant's merged spec.
#[derive(Clone, Debug)]
pub struct Diagnostic {
    /// Stable code.
    pub code: Code,
    /// Error or warning (taken from the code's letter by default).
    pub severity: Severity,
    /// One sentence that names what is wrong, and where in the spec's terms.
    pub message: String,
    /// Where the fault is, when it has a place.
    pub span: Option<Span>,
    /// Related places with a short note each.
    pub labels: Vec<(Span, String)>,
    /// How to fix it, when that is clear.
    pub help: Option<String>,
    /// The variant whose merged spec has this fault.
    pub variant: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with a code and message; severity follows the code's letter.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        let severity = if code.as_str().starts_with('W') {
            Severity::Warning
        } else {
            Severity::Error
        };
        Diagnostic {
            code,
            severity,
            message: message.into(),
            span: None,
            labels: Vec::new(),
            help: None,
            variant: None,
        }
    }

    /// Sets the primary span.
    pub fn at(mut self, span: Option<Span>) -> Self {
        self.span = span;
        self
    }

    /// Adds a related place.
    pub fn label(mut self, span: Option<Span>, note: impl Into<String>) -> Self {
        if let Some(span) = span {
            self.labels.push((span, note.into()));
        }
        self
    }

    /// Sets the fix hint.
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// True for errors.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Sorts diagnostics by file, line, column, then code, and drops exact repeats
/// (a fault present in the base spec is reported once, not once per variant).
pub fn sort_dedup(diags: &mut Vec<Diagnostic>) {
    diags.sort_by(|a, b| {
        let key = |d: &Diagnostic| d.span.map(|s| (s.file, s.line, s.col));
        key(a).cmp(&key(b)).then(a.code.cmp(&b.code))
    });
    let mut seen = std::collections::HashSet::new();
    diags.retain(|d| seen.insert((d.code, d.span, d.message.clone())));
}
