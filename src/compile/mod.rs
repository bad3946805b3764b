//! Spec files → a validated, compiled value, once.
//!
//! Modelled on Vector's config compiler (a lenient loaded spec becomes a strict value
//! in one pass): [`compile`] loads the spec, runs every check of [`crate::validate`]
//! exactly once on the base spec and once on each variant's merged spec, and keeps,
//! per variant, the merged spec, its [`Topology`] and (built on first use, from the
//! prompt and schema texts validation read) its [`Program`]. `ragloop validate`,
//! `graph`, `run` and `eval` all start here; the runtime never sees a spec that did
//! not pass.
//!
//! Command-line changes ([`SpecOverrides`]) are applied to one variant's merged spec
//! by [`CompiledSpec::program_with`]: only the changed spec is checked again (files the
//! checks already read and parsed are taken from [`CompiledSpec::sources`]), and a fault
//! it has then is the changes' fault (a usage error naming them).
pub mod overrides;

pub use overrides::{apply_model_override, SpecOverrides};

use crate::diag::render::{self, Format};
use crate::diag::Diagnostic;
use crate::graph::Topology;
use crate::runtime::program::{Inputs, Program, ProgramError};
use crate::runtime::resources::ResourceError;
use crate::spec::source::Sources;
use crate::spec::{load_spec, overlay, LoadedSpec};
use crate::validate;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What [`compile`] checks besides the spec's own files.
#[derive(Clone, Copy, Debug, Default)]
pub struct CompileOptions {
    /// Skip checks of the environment (corpus directories exist). `run` and `eval`
    /// set it: they check corpora when resources open, since `--corpus` may replace them.
    pub no_environment: bool,
}

/// The spec does not validate (or does not load).
#[derive(Debug, thiserror::Error)]
#[error("{}", self.render())]
pub struct CompileError {
    /// Every finding (errors and warnings), sorted by place, base spec and variants
    /// together.
    pub diagnostics: Vec<Diagnostic>,
    /// The files read, to render the diagnostics with.
    pub sources: Sources,
    /// The variant names the spec declares (empty when it did not load).
    pub variant_names: Vec<String>,
}

impl CompileError {
    /// The errors, rendered as human text (what `run` and `eval` print).
    pub fn render(&self) -> String {
        let errors: Vec<Diagnostic> = self
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .cloned()
            .collect();
        render::render(&errors, &self.sources, Format::Human)
    }
}

/// Why a program could not be made from a compiled spec.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The spec does not validate; `Display` renders the errors as human text.
    #[error(transparent)]
    Invalid(Box<CompileError>),
    /// A bad argument (unknown variant or model, malformed override, a change that
    /// makes the spec invalid).
    #[error("{0}")]
    Usage(String),
    /// The spec validated but its prompt or schema texts could not be taken (the
    /// diagnostics' messages).
    #[error("{0}")]
    Compile(String),
    /// The spec validated but [`Program::compile`] failed.
    #[error(transparent)]
    Program(Box<ProgramError>),
    /// A variant's resources could not be opened (eval opens every variant's before
    /// its first question).
    #[error("variant `{variant}`: {error}")]
    Resources {
        /// The variant's name (`base` for the spec without a variant).
        variant: String,
        /// Why they did not open.
        error: ResourceError,
    },
}

impl From<ProgramError> for LoadError {
    fn from(e: ProgramError) -> Self {
        LoadError::Program(Box::new(e))
    }
}

impl From<CompileError> for LoadError {
    fn from(e: CompileError) -> Self {
        LoadError::Invalid(Box::new(e))
    }
}

/// One variant of a compiled spec (or the base spec).
#[derive(Debug)]
pub struct Unit {
    /// `None` for the base spec, else the variant's name.
    pub variant: Option<String>,
    /// The merged spec (`variant` set).
    pub spec: LoadedSpec,
    /// Its topology: what `graph` draws and the runtime walks.
    pub topology: Arc<Topology>,
    /// The compiled program, once [`CompiledSpec::program`] built it.
    program: Option<Arc<Program>>,
}

/// A spec that passed every check, base spec and every variant.
#[derive(Debug)]
pub struct CompiledSpec {
    /// The spec file.
    pub path: PathBuf,
    /// Every file read (spec, prompts, schemas), with parse results memoized.
    pub sources: Sources,
    /// The warnings (a compiled spec has no error).
    pub diagnostics: Vec<Diagnostic>,
    /// The base spec first, then each variant in declaration order. A variant's
    /// merged spec is made again on first use ([`CompiledSpec::unit`]): checking does
    /// not keep them (3,000 merged specs of 3,000 nodes do not fit in memory).
    units: Vec<Slot>,
    /// Every file a run of the spec reads, as canonical paths: the spec, and the
    /// prompts, schemas and fixtures of the base spec and of every variant (and of
    /// every spec [`CompiledSpec::program_with`] changed). For refusing output paths that
    /// would overwrite an input.
    pub files: Vec<PathBuf>,
}

/// A unit, made on first use.
#[derive(Debug)]
struct Slot {
    variant: Option<String>,
    /// `None` inside when the overlay does not apply (it did when checked: never).
    unit: std::sync::OnceLock<Option<Unit>>,
}

/// The unit of a checked spec; `topology` is the one validation built, if it kept it
/// (the base's), else it is built now (a variant's, on first use).
fn make_unit(spec: LoadedSpec, topology: Option<Arc<Topology>>) -> Unit {
    Unit {
        variant: spec.variant.clone(),
        topology: topology.unwrap_or_else(|| Arc::new(Topology::build(&spec.spec))),
        spec,
        program: None,
    }
}

/// Whether `merged` has the graph of `base`: the same nodes in the same order, the
/// same entry and the same edges as written (what [`Topology::build`] reads).
fn same_graph(base: &LoadedSpec, merged: &LoadedSpec) -> bool {
    base.spec.entry == merged.spec.entry
        && base.spec.nodes.keys().eq(merged.spec.nodes.keys())
        && base.raw.get("edges") == merged.raw.get("edges")
}

/// Loads and checks the spec at `path` (base and every variant, each checked once).
///
/// # Errors
/// [`CompileError`] with every finding when the spec does not load or has an error.
pub fn compile(path: &Path, opts: &CompileOptions) -> Result<CompiledSpec, CompileError> {
    compile_in(path, opts, Sources::new())
}

/// [`compile`] adding the files read to `sources` (given back in [`CompiledSpec::sources`]
/// or [`CompileError::sources`]), so the diagnostics of several specs render together.
///
/// # Errors
/// As [`compile`].
pub fn compile_in(
    path: &Path,
    opts: &CompileOptions,
    mut sources: Sources,
) -> Result<CompiledSpec, CompileError> {
    let vopts = validate::Options {
        no_environment: opts.no_environment,
    };
    let loaded = match load_spec(path, &mut sources) {
        Ok(l) => l,
        Err(mut diagnostics) => {
            crate::diag::sort_dedup(&mut diagnostics);
            return Err(CompileError {
                diagnostics,
                sources,
                variant_names: Vec::new(),
            });
        }
    };
    let mut files: indexmap::IndexSet<PathBuf> = loaded.input_files().into_iter().collect();
    // Each variant's files, each path resolved once (not once per variant).
    let mut seen: std::collections::HashSet<String> = loaded
        .input_rels()
        .into_iter()
        .map(str::to_string)
        .collect();
    // A variant's files can differ from the base spec's only under its `set` paths.
    let set_paths: std::collections::HashMap<String, Vec<String>> = loaded
        .spec
        .variants
        .iter()
        .map(|(name, v)| (name.clone(), v.set.keys().cloned().collect()))
        .collect();
    let checked = validate::check_variants_with(
        loaded,
        &mut sources,
        &vopts,
        validate::Mode::Incremental,
        |merged| {
            let paths = merged
                .variant
                .as_ref()
                .and_then(|v| set_paths.get(v))
                .map_or(&[][..], Vec::as_slice);
            for rel in merged.input_rels_under(paths.iter().map(String::as_str)) {
                if seen.insert(rel.to_string()) {
                    if let Ok(p) = merged.resolve(rel, None) {
                        files.insert(p);
                    }
                }
            }
        },
    );
    if checked.diagnostics.iter().any(Diagnostic::is_error) {
        return Err(CompileError {
            diagnostics: checked.diagnostics,
            variant_names: checked.base.spec.variants.keys().cloned().collect(),
            sources,
        });
    }
    let mut units = Vec::with_capacity(checked.variants.len() + 1);
    let base = std::sync::OnceLock::new();
    let _ = base.set(Some(make_unit(checked.base, checked.topology)));
    units.push(Slot {
        variant: None,
        unit: base,
    });
    for name in checked.variants {
        units.push(Slot {
            variant: Some(name),
            unit: std::sync::OnceLock::new(),
        });
    }
    Ok(CompiledSpec {
        path: path.to_path_buf(),
        sources,
        diagnostics: checked.diagnostics,
        units,
        files: files.into_iter().collect(),
    })
}

impl CompiledSpec {
    /// The base spec.
    pub fn base(&self) -> &Unit {
        self.made(0).expect("the base unit is made when compiled")
    }

    /// The unit at `at`, merged on first use.
    fn made(&self, at: usize) -> Option<&Unit> {
        let slot = self.units.get(at)?;
        slot.unit
            .get_or_init(|| {
                let base_unit = self.units[0].unit.get()?.as_ref()?;
                let base = &base_unit.spec;
                let name = slot.variant.as_deref()?;
                let mut merged = overlay::apply(base, name).ok()?;
                merged.variant = Some(name.to_string());
                // A variant that keeps the nodes, entry and edges walks the base's
                // topology (the same graph, the same node indices).
                let same = same_graph(base, &merged).then(|| Arc::clone(&base_unit.topology));
                Some(make_unit(merged, same))
            })
            .as_ref()
    }

    /// The base spec (`None`) or a variant, if the spec defines it (a variant's merged
    /// spec and topology are made on first use).
    pub fn unit(&self, variant: Option<&str>) -> Option<&Unit> {
        let at = self
            .units
            .iter()
            .position(|u| u.variant.as_deref() == variant)?;
        self.made(at)
    }

    /// The variant names, in declaration order (the base spec not included).
    pub fn variant_names(&self) -> impl Iterator<Item = &str> {
        self.units.iter().filter_map(|u| u.variant.as_deref())
    }

    /// The program of the base spec (`None`) or a variant, compiled on first use.
    ///
    /// # Errors
    /// [`LoadError::Usage`] for an unknown variant (the message lists the known
    /// ones); [`LoadError::Compile`].
    pub fn program(&mut self, variant: Option<&str>) -> Result<Arc<Program>, LoadError> {
        self.program_with(variant, &SpecOverrides::default())
    }

    /// The program of a variant with command-line changes applied in the order
    /// [`overrides`] documents. Without changes, the cached program of
    /// [`CompiledSpec::program`]; with changes, the changed spec is checked again (only
    /// it: the base and other variants passed already) and compiled afresh.
    ///
    /// # Errors
    /// [`LoadError::Usage`] for an unknown variant, a malformed change, an override
    /// path that does not exist, or a change that makes the spec invalid (the message
    /// names the flags and holds the rendered diagnostics); [`LoadError::Compile`].
    pub fn program_with(
        &mut self,
        variant: Option<&str>,
        changes: &SpecOverrides,
    ) -> Result<Arc<Program>, LoadError> {
        let Some(at) = self
            .units
            .iter()
            .position(|u| u.variant.as_deref() == variant)
        else {
            let names: Vec<&str> = self.variant_names().collect();
            return Err(LoadError::Usage(format!(
                "unknown variant `{}`; {} defines: {}",
                variant.unwrap_or_default(),
                self.path.display(),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        };
        if self.made(at).is_none() {
            return Err(LoadError::Compile(format!(
                "variant `{}` does not apply",
                variant.unwrap_or_default()
            )));
        }
        if changes.is_empty() {
            let Some(Some(unit)) = self.units[at].unit.get_mut() else {
                unreachable!("made above")
            };
            if let Some(p) = &unit.program {
                return Ok(Arc::clone(p));
            }
            let program = Arc::new(build(
                &unit.spec,
                Arc::clone(&unit.topology),
                &mut self.sources,
            )?);
            unit.program = Some(Arc::clone(&program));
            return Ok(program);
        }
        let (changed, topology) = self.apply(at, changes)?;
        for f in changed.input_files() {
            if !self.files.contains(&f) {
                self.files.push(f);
            }
        }
        let topology = topology.unwrap_or_else(|| Arc::new(Topology::build(&changed.spec)));
        Ok(Arc::new(build(&changed, topology, &mut self.sources)?))
    }

    /// A variant's merged spec with `changes` applied and checked.
    fn apply(
        &mut self,
        at: usize,
        changes: &SpecOverrides,
    ) -> Result<(LoadedSpec, Option<Arc<Topology>>), LoadError> {
        let Some(mut loaded) = self.made(at).map(|u| u.spec.clone()) else {
            return Err(LoadError::Compile("the variant does not apply".into()));
        };
        let sources = &mut self.sources;
        if !changes.set.is_empty() {
            let parsed = changes
                .set
                .iter()
                .map(|a| overlay::parse_override(a, sources))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| LoadError::Usage(e.to_string()))?;
            loaded = overlay::apply_overrides(&loaded, &parsed).map_err(|e| match e {
                overlay::OverrideError::Invalid(ds) => LoadError::Usage(invalid_after(
                    changes,
                    &render::render(&ds, sources, Format::Human),
                )),
                other => LoadError::Usage(other.to_string()),
            })?;
        }
        for m in &changes.models {
            apply_model_override(&mut loaded, m).map_err(|e| LoadError::Usage(e.to_string()))?;
        }
        overrides::apply_call_policy(&mut loaded.spec, changes.timeout_secs, changes.retries);
        // A change can make a spec invalid (an offline model on a node without a
        // task, a schema file that does not exist, ...): check it again before
        // anything runs. Files already checked come from `sources`.
        let opts = validate::Options {
            no_environment: true,
        };
        let (found, topology) = validate::check_topology(&loaded, sources, &opts);
        let errors: Vec<Diagnostic> = found.into_iter().filter(|d| d.is_error()).collect();
        if !errors.is_empty() {
            // The spec validated before: the changes are at fault (a usage error).
            let text = render::render(&errors, sources, Format::Human);
            return Err(LoadError::Usage(invalid_after(changes, &text)));
        }
        Ok((loaded, topology))
    }
}

/// `--override ... --model ... makes the spec invalid:` and the diagnostics.
fn invalid_after(changes: &SpecOverrides, diagnostics: &str) -> String {
    format!(
        "{} makes the spec invalid:\n{}",
        changes.flags(),
        diagnostics.trim_end()
    )
}

/// Compiles a checked spec into a program from the texts in `sources` (read there
/// by the checks; nothing is read again).
fn build(
    loaded: &LoadedSpec,
    topology: Arc<Topology>,
    sources: &mut Sources,
) -> Result<Program, LoadError> {
    let fault = |ds: Vec<Diagnostic>| {
        LoadError::Compile(
            ds.into_iter()
                .map(|d| d.message)
                .collect::<Vec<_>>()
                .join("; "),
        )
    };
    let spec = &loaded.spec;
    let mut inputs = Inputs {
        state_schema: validate::schema_value(
            loaded,
            &spec.state.schema,
            &["state", "schema"],
            sources,
        )
        .map_err(fault)?,
        ..Inputs::default()
    };
    for (name, node) in &spec.nodes {
        let Some(call) = node.llm() else { continue };
        if let Some(sref) = &call.schema {
            let v = validate::schema_value(loaded, sref, &["nodes", name, "schema"], sources)
                .map_err(|ds| fault(ds).in_node(name))?;
            inputs.schemas.insert(name.clone(), v);
        }
        let parts = [
            ("user", Some(&call.prompt.user)),
            ("system", call.prompt.system.as_ref()),
        ];
        for (part, src) in parts {
            let Some(src) = src else { continue };
            let text =
                validate::prompt_text(loaded, src, &["nodes", name, "prompt", part], sources)
                    .map_err(|d| {
                        LoadError::Compile(format!("node `{name}`: {part} prompt: {}", d.message))
                    })?;
            inputs.prompts.insert((name.clone(), part), text);
        }
    }
    Ok(Program::compile(loaded, topology, &inputs)?)
}

impl LoadError {
    fn in_node(self, name: &str) -> LoadError {
        match self {
            LoadError::Compile(m) => LoadError::Compile(format!("node `{name}`: {m}")),
            LoadError::Program(e) => LoadError::Compile(format!("node `{name}`: {e}")),
            LoadError::Resources { .. } => self,
            other => other,
        }
    }
}

/// Loads, validates and compiles a spec: the variant (if any) is applied, then the
/// model overrides (a thin wrapper over [`compile`] and [`CompiledSpec::program_with`]
/// for tests, benches and examples).
///
/// # Errors
/// [`LoadError::Invalid`] with rendered diagnostics, [`LoadError::Usage`] for an
/// unknown variant or bad override, [`LoadError::Compile`].
pub fn load_program(
    path: &Path,
    variant: Option<&str>,
    models: &[String],
) -> Result<Program, LoadError> {
    let changes = SpecOverrides {
        models: models.to_vec(),
        ..SpecOverrides::default()
    };
    load_program_with(path, variant, &changes)
}

/// [`load_program`] with every command-line change (see [`CompiledSpec::program_with`]).
///
/// # Errors
/// As [`CompiledSpec::program_with`], and [`LoadError::Invalid`] when the spec itself
/// does not validate.
pub fn load_program_with(
    path: &Path,
    variant: Option<&str>,
    changes: &SpecOverrides,
) -> Result<Program, LoadError> {
    let mut compiled = compile(
        path,
        &CompileOptions {
            no_environment: true,
        },
    )?;
    let program = compiled.program_with(variant, changes)?;
    drop(compiled);
    Arc::try_unwrap(program).map_err(|_| LoadError::Compile("the program is shared".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::CHECKS;

    fn crag_ab() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("graphs/crag-ab.yaml")
    }

    /// Runs `f` and returns how many times [`validate::check`] ran meanwhile.
    fn checks<T>(f: impl FnOnce() -> T) -> (usize, T) {
        CHECKS.with(|c| c.set(0));
        let out = f();
        (CHECKS.with(std::cell::Cell::get), out)
    }

    fn opts() -> CompileOptions {
        CompileOptions {
            no_environment: true,
        }
    }

    /// Several specs validated in one process (as `ragloop validate graphs/*.yaml`
    /// does) parse each file once: graphs/crag.yaml, which adaptive, crag-ab and
    /// single-shot import, and each schema file they share (before: crag.yaml was
    /// parsed four times, as each import read it into a new file id).
    #[test]
    fn specs_validated_together_parse_each_file_once() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("graphs");
        crate::spec::yaml::PARSED.with(|p| p.borrow_mut().clear());
        let mut sources = Sources::new();
        for name in ["adaptive", "crag-ab", "single-shot", "crag"] {
            let compiled = compile_in(&dir.join(format!("{name}.yaml")), &opts(), sources)
                .unwrap_or_else(|e| panic!("{name}: {}", e.render()));
            sources = compiled.sources;
        }
        let parsed: Vec<std::path::PathBuf> = crate::spec::yaml::PARSED
            .with(|p| p.borrow().clone())
            .into_iter()
            .map(|f| sources.get(f).path.clone())
            .collect();
        let crag = parsed
            .iter()
            .filter(|p| p.ends_with("graphs/crag.yaml"))
            .count();
        assert_eq!(crag, 1, "graphs/crag.yaml parsed {crag} times: {parsed:?}");
        let mut distinct = parsed.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            parsed.len(),
            "a file parsed twice: {parsed:?}"
        );
    }

    #[test]
    fn compile_checks_the_base_and_each_variant_once() {
        let (n, compiled) = checks(|| compile(&crag_ab(), &opts()).expect("crag-ab compiles"));
        let mut compiled = compiled;
        let variants: Vec<String> = compiled.variant_names().map(str::to_string).collect();
        assert_eq!(variants.len(), 3, "crag-ab has 3 variants: {variants:?}");
        assert_eq!(n, variants.len() + 1);
        // Programs are compiled from what validation read: no check, no second read.
        let (n, programs) = checks(|| {
            let mut out = vec![compiled.program(None).unwrap()];
            for v in &variants {
                out.push(compiled.program(Some(v)).unwrap());
            }
            out
        });
        assert_eq!(n, 0);
        assert_eq!(programs[1].variant(), Some(variants[0].as_str()));
        // Compiled once per variant: the second request gets the same program.
        let again = compiled.program(Some(&variants[0])).unwrap();
        assert!(Arc::ptr_eq(&again, &programs[1]));
        // The variant's merged spec is what its program runs.
        assert_ne!(
            programs[0].spec.retrievers["book"].top_k(),
            programs[2].spec.retrievers["book"].top_k()
        );
    }

    #[test]
    fn each_topology_is_built_once_and_is_the_one_validation_checked() {
        use crate::graph::compile::BUILDS;
        let builds = |f: &mut dyn FnMut()| {
            BUILDS.with(|c| c.set(0));
            f();
            BUILDS.with(std::cell::Cell::get)
        };
        let mut compiled = None;
        // The base: one build, by validation (was 2: the graph checks built their
        // own). crag-ab's variants keep the graph: their graph checks do not run
        // again, and compiling reuses the base's topology (was one build per variant
        // since the compile-once change, two before it).
        let n = builds(&mut || compiled = Some(compile(&crag_ab(), &opts()).unwrap()));
        assert_eq!(n, 1, "one build for a base and 3 variants");
        let mut compiled = compiled.unwrap();
        let variants: Vec<String> = compiled.variant_names().map(str::to_string).collect();
        let n = builds(&mut || {
            compiled.program(None).unwrap();
            for v in &variants {
                compiled.program(Some(v)).unwrap();
            }
        });
        assert_eq!(n, 0, "programs walk the topology validation built");
        let base = Arc::clone(&compiled.base().topology);
        for v in &variants {
            let unit = compiled.unit(Some(v)).unwrap();
            assert!(
                Arc::ptr_eq(&unit.topology, &base),
                "{v} shares the base's topology"
            );
        }
        let changes = SpecOverrides {
            retries: Some(1),
            ..SpecOverrides::default()
        };
        let n = builds(&mut || {
            compiled.program_with(Some("top_k_8"), &changes).unwrap();
        });
        assert_eq!(n, 1, "a changed spec is checked and built once");
    }

    #[test]
    fn a_change_checks_only_the_changed_spec_again() {
        let mut compiled = compile(&crag_ab(), &opts()).unwrap();
        let changes = SpecOverrides {
            retries: Some(1),
            ..SpecOverrides::default()
        };
        let (n, p) = checks(|| compiled.program_with(Some("top_k_8"), &changes));
        assert_eq!(n, 1);
        let p = p.unwrap();
        assert!(p.spec.models.values().all(|m| m.retries == Some(1)));
        // The unchanged program is untouched.
        let base = compiled.program(Some("top_k_8")).unwrap();
        assert!(!Arc::ptr_eq(&base, &p));
    }

    #[test]
    fn eval_loading_checks_each_variant_once() {
        use crate::eval::runner;
        let (n, count) = checks(|| {
            let mut compiled = runner::compile_spec(&crag_ab()).unwrap();
            let variants = runner::resolve_variants(&compiled, None).unwrap();
            let programs =
                runner::load(&mut compiled, &variants, &runner::PrepareOptions::default()).unwrap();
            programs.len()
        });
        assert_eq!(count, 4);
        // Before: `spec_variants` validated everything once, then each of the 4
        // programs validated everything again: (3 + 2) * (3 + 1) = 20.
        assert_eq!(n, 4);
    }

    #[test]
    fn run_loading_checks_each_variant_once_and_lists_every_file() {
        let (n, compiled) = checks(|| {
            let mut c = compile(&crag_ab(), &opts()).unwrap();
            c.program(Some("lenient_grader")).unwrap();
            c
        });
        // Before: `load_program` and `spec_input_files` validated everything: 8.
        assert_eq!(n, 4);
        // The lenient prompt is read by a variant only: still an input of the spec.
        assert!(compiled
            .files
            .iter()
            .any(|f| f.ends_with("grade_documents.lenient.system.jinja")));
        assert!(compiled.files.iter().any(|f| f.ends_with("crag-ab.yaml")));
    }

    #[test]
    fn unknown_variants_and_invalid_specs_are_refused() {
        let mut compiled = compile(&crag_ab(), &opts()).unwrap();
        match compiled.program(Some("nope")) {
            Err(LoadError::Usage(m)) => {
                assert!(m.starts_with("unknown variant `nope`;"), "{m}");
                assert!(m.contains("lenient_grader, top_k_8"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "version: 1\nname: x\n").unwrap();
        let e = compile(&bad, &opts()).unwrap_err();
        assert!(e.diagnostics.iter().any(Diagnostic::is_error));
        assert!(e.render().contains("error"), "{}", e.render());
    }
}
