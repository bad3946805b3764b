//! The type checker: types from the JSON Schemas for every template, predicate and
//! `update`/`inputs`/`over` expression.
//!
//! - [`schema`] lowers a JSON Schema to a [`Ty`] (open parts are [`Ty::Unknown`]);
//! - `walk` walks minijinja's AST (`minijinja::machinery`), infers each
//!   expression's type and tracks `{% set %}` scoping as minijinja does;
//! - `place` turns a byte range of a template or expression into the
//!   `file:line:column` of the token, inside YAML scalars (block scalars included)
//!   and prompt files.
//!
//! What is reported (codes in [`crate::diag::Code`]): a property the schema does not
//! declare (E082), a string compared with a field whose `enum` lacks it (E083), an
//! ordering or arithmetic between a number and a string (E084), an `update` value that
//! cannot satisfy its field (E085), a name set only in some `{% if %}` branches (W013)
//! or only inside an ended `{% for %}`/`{% with %}` block (E041). Anything a schema
//! leaves open is accepted silently.
mod place;
pub mod schema;
mod scope;
mod walk;

pub use place::token_span;
pub use schema::{lower, may_fit, Ty};

use crate::diag::{Code, Diagnostic};
use crate::spec::source::Span;
use indexmap::IndexMap;

/// The names an expression or template may read, with their types.
#[derive(Clone, Debug, Default)]
pub struct Vars {
    map: IndexMap<String, Ty>,
    /// Names beyond `map` may exist (the state schema did not load): unknown names
    /// are not reported.
    pub open: bool,
}

impl Vars {
    /// No names; `open` when unknown names are allowed.
    pub fn new(open: bool) -> Self {
        Vars {
            map: IndexMap::new(),
            open,
        }
    }

    /// The state fields of an object schema (`properties`, lowered), unknown names
    /// reported; `open` when the schema is not an object with properties.
    pub fn of_state_schema(schema: &serde_json::Value) -> Self {
        match lower(schema, schema) {
            Ty::Object { props, .. } if !props.is_empty() => Vars {
                map: props,
                open: false,
            },
            _ => Vars::new(true),
        }
    }

    /// [`Vars::of_state_schema`] of a schema written as JSON text (for tools and the
    /// fuzz target); `open` when the text is not JSON.
    pub fn of_state_schema_json(text: &str) -> Self {
        serde_json::from_str(text).map_or_else(|_| Vars::new(true), |v| Vars::of_state_schema(&v))
    }

    /// Adds (or shadows) a name.
    pub fn insert(&mut self, name: impl Into<String>, ty: Ty) {
        self.map.insert(name.into(), ty);
    }

    /// The type of a name.
    pub fn get(&self, name: &str) -> Option<&Ty> {
        self.map.get(name)
    }

    /// Every name, in insertion order.
    pub fn names(&self) -> Vec<String> {
        self.map.keys().cloned().collect()
    }
}

/// One fault found in a template or expression: a byte range of its text.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// The code.
    pub code: Code,
    /// What is wrong, naming the token.
    pub message: String,
    /// A suggestion.
    pub help: Option<String>,
    /// Byte range of the offending token in the checked text.
    pub range: std::ops::Range<usize>,
}

impl Finding {
    /// The diagnostic, located at `at`, its message prefixed by `place`.
    pub fn into_diagnostic(self, place: &str, at: Option<Span>) -> Diagnostic {
        let d = Diagnostic::new(self.code, format!("{place}: {}", self.message)).at(at);
        match self.help {
            Some(h) => d.help(h),
            None => d,
        }
    }
}

/// Type-checks a standalone expression (predicate, `update`, `inputs`, `over`).
/// Returns its type and the findings; unknown names are not reported here (the
/// caller's name check does), and an expression that does not parse gives
/// `(Unknown, [])` (the caller reports syntax).
pub fn expression(text: &str, vars: &Vars) -> (Ty, Vec<Finding>) {
    // minijinja's lexer panics on template delimiters inside an expression.
    if crate::jinja::check_expression_text(text).is_err() {
        return (Ty::Unknown, Vec::new());
    }
    match minijinja::machinery::parse_expr(text) {
        Ok(e) => {
            let mut w = walk::Walker::new(vars, text, false);
            let t = w.expression(&e);
            (t, w.findings)
        }
        Err(_) => (Ty::Unknown, Vec::new()),
    }
}

/// Type-checks a template and its names: unknown names (E041), names set only in
/// some branches (W013), names read after the block that set them ended (E041).
/// A template that does not parse gives no findings (the caller reports syntax).
pub fn template(text: &str, vars: &Vars) -> Vec<Finding> {
    let parsed =
        minijinja::machinery::parse(text, "<template>", Default::default(), Default::default());
    match parsed {
        Ok(root) => {
            let mut w = walk::Walker::new(vars, text, true);
            w.template(&root);
            let mut seen = std::collections::HashSet::new();
            // One report per name for name faults (the first read).
            w.findings
                .into_iter()
                .filter(|f| match f.code {
                    Code::TemplateUnknownVar | Code::MaybeUndefined => {
                        seen.insert((f.code, text.get(f.range.clone()).map(str::to_string)))
                    }
                    _ => true,
                })
                .collect()
        }
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
