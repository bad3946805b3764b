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
mod literals;
mod models;
mod refs;
mod retrieval;
mod schemas;
mod templates;
pub mod types;
mod variants;

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

/// A loaded spec checked with each of its variants.
#[derive(Debug)]
pub struct Checked {
    /// The base spec.
    pub base: LoadedSpec,
    /// The variants whose overlay applied ([`overlay::apply`]), in declaration order;
    /// a variant whose overlay failed is left out (its faults are in `diagnostics`).
    /// Their merged specs are not kept (`compile` merges the ones it needs again).
    pub variants: Vec<String>,
    /// Every finding, sorted by place, base spec and variants together (a fault of
    /// the base spec that every variant repeats is kept once).
    pub diagnostics: Vec<Diagnostic>,
    /// The base spec's [`Topology`], the one the graph checks ran over (`None` where
    /// its references did not resolve); `compile` keeps it for the runtime and
    /// `ragloop graph`. A variant's is built when its merged spec is (not kept here:
    /// merged specs are not kept either).
    pub topology: Option<Arc<Topology>>,
}

/// Checks the base spec and each variant's merged spec (what [`validate_file`] does
/// after loading). A variant is checked incrementally: only the parts of [`check`]
/// its `set` paths affect run again (see `variants.rs`); the findings are those of
/// [`check`] on every merged spec.
pub fn check_variants(loaded: LoadedSpec, sources: &mut Sources, opts: &Options) -> Checked {
    check_variants_with(loaded, sources, opts, Mode::Incremental, |_| {})
}

/// How [`check_variants_with`] checks a variant's merged spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The parts the variant affects (the default).
    Incremental,
    /// [`check`] on the whole merged spec (the reference the incremental check is
    /// tested against).
    Full,
}

/// [`check_variants`] with the [`Mode`] given, calling `each` with every variant's
/// merged spec (`variant` set) before it is dropped.
pub fn check_variants_with(
    loaded: LoadedSpec,
    sources: &mut Sources,
    opts: &Options,
    mode: Mode,
    mut each: impl FnMut(&LoadedSpec),
) -> Checked {
    #[cfg(test)]
    CHECKS.with(|c| c.set(c.get() + 1));
    let base_parts = variants::parts(&loaded, sources, opts);
    let (mut diagnostics, base_topology) = variants::finish(&loaded, &base_parts);
    let mut names = Vec::with_capacity(loaded.spec.variants.len());
    // Incremental: most variants are applied in place to one working copy (at the
    // cost of the entries they change), the others merged by `overlay::apply`.
    let mut patcher = (mode == Mode::Incremental && !loaded.spec.variants.is_empty())
        .then(|| overlay::Patcher::new(&loaded));
    for (name, variant) in &loaded.spec.variants {
        let owned;
        let (merged, patched) = match patcher.as_mut().and_then(|p| p.apply(&loaded, name)) {
            Some(m) => (Ok(m), true),
            None => match overlay::apply(&loaded, name) {
                Ok(m) => {
                    owned = m;
                    (Ok(&owned), false)
                }
                Err(ds) => (Err(ds), false),
            },
        };
        match merged {
            Ok(merged) => {
                #[cfg(test)]
                CHECKS.with(|c| c.set(c.get() + 1));
                // Where the variant changes the spec, to point at from faults that
                // show up in base lines.
                let block = loaded.span(&["variants", name]);
                let sets: Vec<_> = variant
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
                let found = match mode {
                    Mode::Full => check_inner(merged, sources, opts),
                    Mode::Incremental => variants::check_variant(
                        &loaded,
                        &base_parts,
                        merged,
                        variant.set.keys().map(String::as_str),
                        sources,
                        opts,
                    ),
                };
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
                each(merged);
                names.push(name.clone());
            }
            Err(ds) => diagnostics.extend(ds),
        }
        if patched {
            if let Some(p) = patcher.as_mut() {
                p.undo(&loaded);
            }
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
        variants: names,
        diagnostics,
        topology: base_topology,
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
        SchemaRef::File(_) => schemas::load_shared(ls, sref, at, sources).map(|s| s.schema.clone()),
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

/// A missing file's diagnostic naming the spec key that refers to it
/// (`file \`prompts/x.jinja\` does not exist (named by \`nodes.grade.prompt.user.file\`)`).
fn named_by(mut d: Diagnostic, at: &[&str]) -> Diagnostic {
    if d.code == crate::diag::Code::MissingFile {
        d.message
            .push_str(&format!(" (named by `{}`)", at.join(".")));
    }
    d
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
/// graph` (built once for the spec checked).
pub fn check_topology(
    spec: &LoadedSpec,
    sources: &mut Sources,
    opts: &Options,
) -> (Vec<Diagnostic>, Option<Arc<Topology>>) {
    #[cfg(test)]
    CHECKS.with(|c| c.set(c.get() + 1));
    variants::finish(spec, &variants::parts(spec, sources, opts))
}

fn check_inner(spec: &LoadedSpec, sources: &mut Sources, opts: &Options) -> Vec<Diagnostic> {
    variants::finish(spec, &variants::parts(spec, sources, opts)).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Code;

    fn codes(text: &str) -> Vec<Code> {
        let mut sources = Sources::new();
        let opts = Options {
            no_environment: true,
        };
        let out = validate_str(Path::new("/tmp/spec.yaml"), text, &mut sources, &opts);
        out.diagnostics.iter().map(|d| d.code).collect()
    }

    /// A loop `work -> work` that stays while `n < 3`, `n` of schema type `ty` moved
    /// by `step` through `reducer` (`add`, or `replace` with `n + step`).
    fn counter_loop(ty: &str, step: &str, reducer: &str) -> String {
        let (reducers, update) = match reducer {
            "add" => ("  reducers:\n    n: add\n".to_string(), step.to_string()),
            _ => (String::new(), format!("\"n + {step}\"")),
        };
        format!(
            "version: 1\nname: t\nstate:\n  schema:\n    type: object\n    properties:\n      n: {{type: {ty}}}\n      a: {{type: string}}\n  initial:\n    n: 0\n{reducers}output:\n  answer: a\nentry: work\nnodes:\n  work:\n    kind: update\n    update:\n      n: {update}\nedges:\n  work:\n    - when: n < 3\n      to: work\n    - else: END\n"
        )
    }

    /// E054's counter rule: a step bounds the loop when it is an integer of at least 1,
    /// or when the field is `integer`-typed (before: any nonzero step did, so
    /// `n + 0.0000001` on a `number` field passed as a bound).
    #[test]
    fn a_counter_bounds_a_loop_only_with_an_integer_step_or_type() {
        for ty in ["number", "integer"] {
            for step in ["0.0000001", "0.5", "1.5", "1", "2", "0.25"] {
                for reducer in ["add", "replace"] {
                    let found = codes(&counter_loop(ty, step, reducer));
                    let x: f64 = step.parse().unwrap();
                    let bounded = ty == "integer" || (x.fract() == 0.0 && x >= 1.0);
                    assert_eq!(
                        !found.contains(&Code::UnboundedCycle),
                        bounded,
                        "{ty} field, step {step} by {reducer}: {found:?}"
                    );
                }
            }
        }
    }

    /// A chain of `nodes` update nodes and `variants` variants, variant `i` setting
    /// node `i % nodes`'s update.
    fn chain(nodes: usize, variants: usize) -> String {
        let mut s = String::from("version: 1\nname: big\nstate:\n  schema:\n    type: object\n    properties:\n      q: {type: string}\noutput:\n  answer: q\nentry: n0\nnodes:\n");
        for i in 0..nodes {
            s.push_str(&format!(
                "  n{i}:\n    kind: update\n    update:\n      q: \"q\"\n"
            ));
        }
        s.push_str("edges:\n");
        for i in 0..nodes {
            let next = if i + 1 < nodes {
                format!("n{}", i + 1)
            } else {
                "END".into()
            };
            s.push_str(&format!("  n{i}: {next}\n"));
        }
        s.push_str("variants:\n");
        for i in 0..variants {
            s.push_str(&format!(
                "  v{i}:\n    set:\n      nodes.n{}.update.q: \"'v{i}'\"\n",
                i % nodes
            ));
        }
        s
    }

    /// A variant costs what it changes: checking 40 variants of a 200-node spec, each
    /// changing one node, types the spec once (not once per variant: the variants are
    /// patched into one working copy and only the changed node is typed again) and
    /// checks the references of 200 + 40 nodes (before: 200 x 41). Counts, not time,
    /// so the test holds on a loaded machine.
    #[test]
    fn a_variant_costs_what_it_changes() {
        let (nodes, variants) = (200, 40);
        crate::spec::load::TYPED.with(|c| c.set(0));
        refs::NODE_CHECKS.with(|c| c.set(0));
        let mut sources = Sources::new();
        let opts = Options {
            no_environment: true,
        };
        let out = validate_str(
            Path::new("/tmp/big.yaml"),
            &chain(nodes, variants),
            &mut sources,
            &opts,
        );
        assert!(out.is_valid(), "{:?}", out.diagnostics);
        assert_eq!(crate::spec::load::TYPED.with(std::cell::Cell::get), 1);
        assert_eq!(
            refs::NODE_CHECKS.with(std::cell::Cell::get),
            nodes + variants
        );
    }

    /// A missing file is said in words, with the key that names it (before: "cannot
    /// open `p.jinja`: No such file or directory (os error 2)").
    #[test]
    fn a_missing_file_is_said_in_words() {
        let text = "version: 1\nname: t\nstate:\n  schema: missing/state.json\nmodels:\n  m: {provider: scripted}\noutput:\n  answer: a\nentry: ask\nnodes:\n  ask:\n    kind: llm\n    model: m\n    prompt:\n      user: {file: nowhere/p.jinja}\nedges:\n  ask: END\n";
        let mut sources = Sources::new();
        let dir = tempfile::tempdir().unwrap();
        let out = validate_str(
            &dir.path().join("spec.yaml"),
            text,
            &mut sources,
            &Options::default(),
        );
        let missing: Vec<&Diagnostic> = out
            .diagnostics
            .iter()
            .filter(|d| d.code == crate::diag::Code::MissingFile)
            .collect();
        let messages: Vec<&str> = missing.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "file `missing/state.json` does not exist (named by `state.schema`)",
                "file `nowhere/p.jinja` does not exist (named by `nodes.ask.prompt.user.file`)",
            ]
        );
        // Where: the reference's line and column.
        let at: Vec<(u32, u32)> = missing
            .iter()
            .map(|d| d.span.map(|s| (s.line, s.col)).unwrap())
            .collect();
        assert_eq!(at, [(4, 11), (15, 20)]);
    }
}
