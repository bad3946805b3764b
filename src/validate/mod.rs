//! Static checks: everything `ragloop validate` verifies before any LLM call.
//!
//! Stages, as in Vector's `validate`: load (YAML, types) → references → files and
//! schemas → templates, predicates and expressions → graph (reachability, END,
//! cycles) → every variant's merged spec through the same checks. Each stage collects
//! all of its findings; the graph stage runs only when references resolved, so one
//! typo does not cascade into a page of follow-on errors.
mod arms;
mod graph;
mod guard;
mod models;
mod refs;
mod retrieval;
mod schemas;
mod templates;
pub mod types;

pub use schemas::{load_schema, LoadedSchema};

use crate::diag::{sort_dedup, Diagnostic};
use crate::graph::Topology;
use crate::spec::source::Sources;
use crate::spec::types::{SchemaRef, TemplateSource};
use crate::spec::{load_spec, load_spec_str, overlay, LoadedSpec};
use indexmap::IndexMap;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// What to check besides the spec's own files.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Skip checks of the environment (corpus directories exist). For CI machines
    /// that validate specs without the data.
    pub no_environment: bool,
}

/// Result of validating one spec file.
#[derive(Debug)]
pub struct Outcome {
    /// The loaded base spec, when it loaded.
    pub spec: Option<LoadedSpec>,
    /// Every finding, sorted by place, base spec and variants together.
    pub diagnostics: Vec<Diagnostic>,
}

impl Outcome {
    /// True when no finding is an error.
    pub fn is_valid(&self) -> bool {
        !self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Loads a spec file and runs every check on it and on each variant's merged spec.
pub fn validate_file(path: &Path, sources: &mut Sources, opts: &Options) -> Outcome {
    finish(load_spec(path, sources), sources, opts)
}

/// Validates spec text as if it had been read from `path` (see
/// [`crate::spec::load_spec_str`]); used by the fuzz target and by tools that hold
/// the text in memory.
pub fn validate_str(path: &Path, text: &str, sources: &mut Sources, opts: &Options) -> Outcome {
    finish(load_spec_str(path, text, sources), sources, opts)
}

fn finish(
    loaded: Result<LoadedSpec, Vec<Diagnostic>>,
    sources: &mut Sources,
    opts: &Options,
) -> Outcome {
    match loaded {
        Ok(l) => {
            let checked = check_variants(l, sources, opts);
            Outcome {
                spec: Some(checked.base),
                diagnostics: checked.diagnostics,
            }
        }
        Err(mut diagnostics) => {
            sort_dedup(&mut diagnostics);
            Outcome {
                spec: None,
                diagnostics,
            }
        }
    }
}

/// A loaded spec checked with each of its variants, and the variants' merged specs.
#[derive(Debug)]
pub struct Checked {
    /// The base spec.
    pub base: LoadedSpec,
    /// Each variant's merged spec ([`overlay::apply`]), in declaration order, with
    /// `variant` set; a variant whose overlay failed is left out (its faults are in
    /// `diagnostics`).
    pub variants: Vec<(String, LoadedSpec)>,
    /// Every finding, sorted by place, base spec and variants together (a fault of
    /// the base spec that every variant repeats is kept once).
    pub diagnostics: Vec<Diagnostic>,
    /// The [`Topology`] of the base spec, then of each of `variants` in order (`None`
    /// where the references did not resolve; see [`check_topology`]).
    pub topologies: Vec<Option<Topology>>,
}

/// Runs [`check`] once on the base spec and once on each variant's merged spec,
/// keeping the merged specs (what [`validate_file`] does after loading).
pub fn check_variants(loaded: LoadedSpec, sources: &mut Sources, opts: &Options) -> Checked {
    let (mut diagnostics, topology) = check_topology(&loaded, sources, opts);
    let mut topologies = vec![topology];
    let mut variants = Vec::with_capacity(loaded.spec.variants.len());
    for name in loaded.spec.variants.keys() {
        match overlay::apply(&loaded, name) {
            Ok(mut merged) => {
                // Where the variant changes the spec, to point at from faults that
                // show up in base lines.
                let block = loaded.span(&["variants", name]);
                let sets: Vec<_> = loaded.spec.variants[name]
                    .set
                    .keys()
                    .take(3)
                    .map(|path| {
                        (
                            loaded.key_span(&["variants", name, "set", path]),
                            path.clone(),
                        )
                    })
                    .collect();
                let (found, topology) = check_topology(&merged, sources, opts);
                topologies.push(topology);
                for mut d in found {
                    d.variant.get_or_insert_with(|| name.clone());
                    let inside = match (d.span, block) {
                        (Some(s), Some(b)) => {
                            s.file == b.file && s.line >= b.line && s.line <= b.end_line
                        }
                        _ => false,
                    };
                    if !inside {
                        for (at, path) in &sets {
                            d = d.label(*at, format!("variant `{name}` sets `{path}` here"));
                        }
                    }
                    diagnostics.push(d);
                }
                merged.variant = Some(name.clone());
                variants.push((name.clone(), merged));
            }
            Err(ds) => diagnostics.extend(ds),
        }
    }
    // A fault of the base spec shows up again in every variant: keep it once.
    let base: std::collections::HashSet<_> = diagnostics
        .iter()
        .filter(|d| d.variant.is_none())
        .map(|d| (d.code, d.span, d.message.clone()))
        .collect();
    diagnostics
        .retain(|d| d.variant.is_none() || !base.contains(&(d.code, d.span, d.message.clone())));
    sort_dedup(&mut diagnostics);
    Checked {
        base: loaded,
        variants,
        diagnostics,
        topologies,
    }
}

/// The value of a schema [`check`] accepted: an inline schema as written, a file's
/// as [`load_schema`] parsed it (the file is neither read nor parsed again when
/// `sources` already holds it).
///
/// # Errors
/// As [`load_schema`] for a file not checked yet.
pub fn schema_value(
    ls: &LoadedSpec,
    sref: &SchemaRef,
    at: &[&str],
    sources: &mut Sources,
) -> Result<Value, Vec<Diagnostic>> {
    match sref {
        SchemaRef::Inline(map) => Ok(Value::Object(map.clone())),
        SchemaRef::File(_) => load_schema(ls, sref, at, sources).map(|s| s.schema),
    }
}

/// The text of a prompt template: inline as written, a file's from `sources` (read
/// when `sources` does not hold it yet). `at` is the spec path of the prompt
/// (e.g. `["nodes", "grade", "prompt", "user"]`).
///
/// # Errors
/// Path, existence and text diagnostics of a file not read yet.
pub fn prompt_text(
    ls: &LoadedSpec,
    src: &TemplateSource,
    at: &[&str],
    sources: &mut Sources,
) -> Result<Arc<str>, Diagnostic> {
    match src {
        TemplateSource::Inline(text) => Ok(Arc::from(text.as_str())),
        TemplateSource::File(f) => {
            let mut file_at = at.to_vec();
            file_at.push("file");
            let id = templates::load_template_file(ls, &f.file, ls.span(&file_at), sources)?;
            Ok(Arc::clone(&sources.get(id).text))
        }
    }
}

/// Facts about the state that several checks need.
pub(crate) struct StateInfo {
    /// Field name → its property schema (`Value::Bool(true)` when the schema is unknown).
    pub fields: IndexMap<String, Value>,
    /// Whether the state schema loaded; when it did not, field checks are skipped.
    pub known: bool,
}

#[cfg(test)]
thread_local! {
    /// How many times [`check`] ran on this thread (tests count the checks a command
    /// makes: one per variant).
    pub(crate) static CHECKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Runs every check on one (base or merged) spec.
pub fn check(spec: &LoadedSpec, sources: &mut Sources, opts: &Options) -> Vec<Diagnostic> {
    check_topology(spec, sources, opts).0
}

/// [`check`], also returning the spec's [`Topology`] when its references resolved:
/// the graph checks ran over it, and `compile` keeps it for the runtime and `ragloop
/// graph` (one topology per variant, built once).
pub fn check_topology(
    spec: &LoadedSpec,
    sources: &mut Sources,
    opts: &Options,
) -> (Vec<Diagnostic>, Option<Topology>) {
    #[cfg(test)]
    CHECKS.with(|c| c.set(c.get() + 1));
    let mut diags = Vec::new();
    let refs_ok = refs::check(spec, opts, &mut diags);
    models::check(spec, &mut diags);
    retrieval::check(spec, &mut diags);
    let state = schemas::check(spec, sources, &mut diags);
    templates::check(spec, &state, sources, &mut diags);
    let topology = refs_ok.then(|| Topology::build(&spec.spec));
    if let Some(topo) = &topology {
        graph::check(spec, topo, &state, &mut diags);
    }
    (diags, topology)
}
