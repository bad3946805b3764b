//! The graphs a server serves: every spec compiled once ([`crate::compile::compile`]),
//! swapped whole on a successful hot reload, kept on a failed one.
//!
//! A graph is named by its spec file's stem (`graphs/crag.yaml` → `crag`), stable
//! across reloads even while the spec does not parse; two specs with one stem are
//! refused when the server starts. A served [`Graph`] is immutable but for its caches
//! (programs per variant, opened resources per variant): a run holds an
//! `Arc<Graph>`, so a reload never changes a run in flight, it finishes on the
//! version it started with.
use super::error::ApiError;
use super::watch::Fingerprint;
use super::Settings;
use crate::compile::{compile, CompileOptions, CompiledSpec, LoadError, SpecOverrides};
use crate::diag::render::{self, Format};
use crate::diag::Diagnostic;
use crate::graph::export::{render as export, GraphFormat};
use crate::runtime::{Program, Resources};
use axum::http::StatusCode;
use indexmap::IndexMap;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

/// A program and the resources its runs use.
type Prepared = (Arc<Program>, Arc<Resources>);

/// A compiled spec being served.
pub struct Graph {
    /// The graph's name (the spec file's stem).
    pub name: String,
    /// The spec file.
    pub path: PathBuf,
    /// This version's number: every compile of any spec of this server takes the next
    /// one (1 for the first), so a reload that serves a new version raises it.
    pub generation: u64,
    /// When it was compiled, unix ms.
    pub loaded_at_ms: u64,
    /// The variant names.
    pub variants: Vec<String>,
    /// The thread that owns the [`CompiledSpec`] (not `Send`: its sources memoize
    /// parsed files) and makes programs from it.
    compiler: std::sync::mpsc::Sender<Job>,
    /// Programs and their opened resources, per variant (`None`: the base spec),
    /// without request changes.
    ready: Mutex<HashMap<Option<String>, Prepared>>,
    summary: Value,
    settings: Arc<Settings>,
}

/// Why a spec file has no (new) compiled version.
#[derive(Clone, Debug)]
pub struct Failure {
    /// When it failed, unix ms.
    pub at_ms: u64,
    /// The errors, rendered as `ragloop validate` prints them.
    pub text: String,
    /// The diagnostics as `ragloop validate --format json` gives them.
    pub diagnostics: Value,
}

impl Failure {
    fn json(&self) -> Value {
        json!({"at": self.at_ms, "message": self.text, "diagnostics": self.diagnostics})
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Graph {
    /// The program and resources of `variant` with the request's model overrides
    /// (`models`, `NAME=PROVIDER[:MODEL][@BASE_URL]`): without overrides, made once
    /// per variant and shared by every run; with them, made for this run. May open
    /// an index (a first run): call it off the async workers.
    ///
    /// # Errors
    /// 404 `unknown_variant`; 422 `invalid_override` (a malformed override, or one
    /// that makes the spec invalid); 503 `resources_unavailable` (a missing API key,
    /// a corpus that does not open); 500 `internal` for a program that does not build
    /// from a validated spec.
    pub fn prepare(
        &self,
        variant: Option<&str>,
        models: &[String],
    ) -> Result<(Arc<Program>, Arc<Resources>), ApiError> {
        self.check_variant(variant)?;
        let key = variant.map(str::to_string);
        if models.is_empty() {
            if let Some(r) = self.cached(variant) {
                return Ok(r);
            }
        }
        let program = {
            let (reply, answer) = std::sync::mpsc::channel();
            let job = Job {
                variant: key.clone(),
                changes: SpecOverrides {
                    models: models.to_vec(),
                    ..SpecOverrides::default()
                },
                reply,
            };
            let gone = || {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    format!("graph `{}`: its compiler thread is gone", self.name),
                )
            };
            self.compiler.send(job).map_err(|_| gone())?;
            answer.recv().map_err(|_| gone())??
        };
        let resources =
            Resources::prepare(&program, self.settings.resource_options()).map_err(|e| {
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "resources_unavailable",
                    format!("graph `{}`: {e}", self.name),
                )
            })?;
        let pair = (program, Arc::new(resources));
        if models.is_empty() {
            lock(&self.ready).insert(key, pair.clone());
        }
        Ok(pair)
    }

    /// The program and resources of `variant` when already made (no override).
    pub fn cached(&self, variant: Option<&str>) -> Option<(Arc<Program>, Arc<Resources>)> {
        lock(&self.ready).get(&variant.map(str::to_string)).cloned()
    }

    /// 404 `unknown_variant` unless the spec defines `variant`.
    pub fn check_variant(&self, variant: Option<&str>) -> Result<(), ApiError> {
        match variant {
            Some(v) if !self.variants.iter().any(|n| n == v) => Err(ApiError::not_found(
                "unknown_variant",
                format!(
                    "graph `{}` has no variant `{v}` (variants: {})",
                    self.name,
                    if self.variants.is_empty() {
                        "none".to_string()
                    } else {
                        self.variants.join(", ")
                    }
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// One spec file and what became of it.
struct Slot {
    path: PathBuf,
    served: Option<Arc<Graph>>,
    failure: Option<Arc<Failure>>,
}

/// Every graph of the server, by name.
pub struct Registry {
    slots: RwLock<IndexMap<String, Slot>>,
    settings: Arc<Settings>,
    generation: std::sync::atomic::AtomicU64,
    /// Directories given on the command line: rescanned for new spec files.
    dirs: Vec<PathBuf>,
    /// Spec files found in those directories after start whose stem a served file
    /// already has (`(name, path)`): not served, listed by `GET /graphs`.
    conflicts: std::sync::Mutex<Vec<(String, PathBuf)>>,
}

/// The spec files named by `args`: files as given, directories' `*.yaml`/`*.yml`
/// (not recursive), sorted.
///
/// # Errors
/// A message for a path that does not exist, a directory without specs, or two
/// specs with the same stem.
pub fn spec_files(args: &[PathBuf]) -> Result<Vec<(String, PathBuf)>, String> {
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    for a in args {
        let files = if a.is_dir() {
            let found = dir_specs(a);
            if found.is_empty() {
                return Err(format!(
                    "{}: no *.yaml or *.yml spec in this directory",
                    a.display()
                ));
            }
            found
        } else if a.exists() {
            vec![a.clone()]
        } else {
            return Err(format!("{}: no such file or directory", a.display()));
        };
        for f in files {
            let name = stem(&f);
            if let Some((_, other)) = out.iter().find(|(n, _)| *n == name) {
                if crate::paths::same_file(other, &f) {
                    continue;
                }
                return Err(format!(
                    "{} and {} would both be served as `{name}`: graphs are named by their file stem",
                    other.display(),
                    f.display()
                ));
            }
            out.push((name, f));
        }
    }
    if out.is_empty() {
        return Err("no spec given".into());
    }
    Ok(out)
}

fn stem(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn dir_specs(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
        })
        .collect();
    found.sort();
    found
}

/// A program request to a graph's compiler thread.
struct Job {
    variant: Option<String>,
    changes: SpecOverrides,
    reply: std::sync::mpsc::Sender<Result<Arc<Program>, ApiError>>,
}

/// What the compiler thread hands back after the first compile.
struct Compiled {
    summary: Value,
    variants: Vec<String>,
    fingerprint: Fingerprint,
}

fn failure_of(
    diags: &[Diagnostic],
    sources: &crate::source::Sources,
    extra: Option<String>,
) -> Failure {
    let errors: Vec<Diagnostic> = diags.iter().filter(|d| d.is_error()).cloned().collect();
    let mut text = render::render(&errors, sources, Format::Human);
    if let Some(e) = extra {
        text.push_str(&e);
    }
    Failure {
        at_ms: crate::clock::unix_ms(),
        text,
        diagnostics: diagnostics_json(diags, sources),
    }
}

fn diagnostics_json(diags: &[Diagnostic], sources: &crate::source::Sources) -> Value {
    serde_json::from_str::<Value>(&render::render(diags, sources, Format::Json))
        .ok()
        .and_then(|v| v.get("diagnostics").cloned())
        .unwrap_or(Value::Array(Vec::new()))
}

/// Compiles `path` on the calling thread: the compiled spec, or why not, with the
/// fingerprint of what was read (to notice the next change).
fn compile_here(
    name: &str,
    path: &Path,
) -> Result<(CompiledSpec, Compiled), (Failure, Fingerprint)> {
    let opts = CompileOptions {
        no_environment: true,
    };
    match compile(path, &opts) {
        Err(e) => {
            // Watch the spec, the files its errors are in, and their directories (a
            // missing prompt that is then created).
            let mut watch = vec![path.to_path_buf()];
            for d in &e.diagnostics {
                for span in d.span.iter().chain(d.labels.iter().map(|(s, _)| s)) {
                    watch.push(e.sources.get(span.file).path.clone());
                }
            }
            let dirs: Vec<PathBuf> = watch
                .iter()
                .filter_map(|p| p.parent())
                .map(|d| {
                    if d.as_os_str().is_empty() {
                        PathBuf::from(".")
                    } else {
                        d.to_path_buf()
                    }
                })
                .collect();
            watch.extend(dirs);
            Err((
                failure_of(&e.diagnostics, &e.sources, None),
                Fingerprint::of(watch),
            ))
        }
        Ok(mut compiled) => {
            let mut watch = vec![path.to_path_buf()];
            watch.extend(compiled.files.iter().cloned());
            let fingerprint = Fingerprint::of(watch);
            // The base program is built now: a fault there is a load failure.
            if let Err(e) = compiled.program(None) {
                let msg = format!("{}: {e}\n", path.display());
                return Err((
                    failure_of(&compiled.diagnostics, &compiled.sources, Some(msg)),
                    fingerprint,
                ));
            }
            let summary = summarize(name, &compiled);
            let variants = compiled.variant_names().map(str::to_string).collect();
            Ok((
                compiled,
                Compiled {
                    summary,
                    variants,
                    fingerprint,
                },
            ))
        }
    }
}

/// Compiles one spec file on a thread of its own, which then keeps the
/// [`CompiledSpec`] and answers program requests until the graph is dropped.
fn build(
    name: &str,
    path: &Path,
    generation: u64,
    settings: &Arc<Settings>,
) -> (Result<Graph, Failure>, Fingerprint) {
    let (first_tx, first_rx) = std::sync::mpsc::channel();
    let (jobs_tx, jobs_rx) = std::sync::mpsc::channel::<Job>();
    let (n, p) = (name.to_string(), path.to_path_buf());
    let spawned = std::thread::Builder::new()
        .name(format!("ragloop-graph-{name}"))
        .spawn(move || {
            let mut compiled = match compile_here(&n, &p) {
                Ok((c, first)) => {
                    let _ = first_tx.send(Ok(first));
                    c
                }
                Err(f) => {
                    let _ = first_tx.send(Err(f));
                    return;
                }
            };
            // Ends when the graph (the only sender) is dropped.
            for job in jobs_rx {
                let made = compiled
                    .program_with(job.variant.as_deref(), &job.changes)
                    .map_err(|e| match e {
                        LoadError::Usage(m) => ApiError::unprocessable("invalid_override", m),
                        other => ApiError::new(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "internal",
                            other.to_string(),
                        ),
                    });
                let _ = job.reply.send(made);
            }
        });
    let first = match spawned {
        Ok(_) => first_rx.recv().ok(),
        Err(_) => None,
    };
    match first {
        Some(Ok(c)) => (
            Ok(Graph {
                name: name.to_string(),
                path: path.to_path_buf(),
                generation,
                loaded_at_ms: crate::clock::unix_ms(),
                variants: c.variants,
                compiler: jobs_tx,
                ready: Mutex::new(HashMap::new()),
                summary: c.summary,
                settings: Arc::clone(settings),
            }),
            c.fingerprint,
        ),
        Some(Err((f, fp))) => (Err(f), fp),
        None => (
            Err(Failure {
                at_ms: crate::clock::unix_ms(),
                text: format!("{}: the compile thread failed\n", path.display()),
                diagnostics: Value::Array(Vec::new()),
            }),
            Fingerprint::of([path.to_path_buf()]),
        ),
    }
}

/// `GET /graphs/{name}`'s spec part: names, nodes, models, variants, warnings, Mermaid.
fn summarize(name: &str, c: &CompiledSpec) -> Value {
    let unit = c.base();
    let spec = &unit.spec.spec;
    let nodes: Vec<Value> = spec
        .nodes
        .iter()
        .map(|(n, node)| {
            let mut v = json!({"name": n, "kind": node.kind()});
            if let Some(l) = node.llm() {
                v["model"] = json!(l.model);
            }
            v
        })
        .collect();
    let models: serde_json::Map<String, Value> = spec
        .models
        .iter()
        .map(|(n, m)| {
            (
                n.clone(),
                json!({"provider": m.provider.as_str(), "model": m.model}),
            )
        })
        .collect();
    let warnings = diagnostics_json(&c.diagnostics, &c.sources);
    let state: Vec<&String> = spec.state.initial.keys().collect();
    json!({
        "name": name,
        "spec_name": spec.name,
        "description": spec.description,
        "entry": spec.entry,
        "nodes": nodes,
        "models": models,
        "retrievers": spec.retrievers.keys().collect::<Vec<_>>(),
        "tools": spec.tools.keys().collect::<Vec<_>>(),
        "initial_state": state,
        "max_steps": spec.limits.max_steps,
        "variants": c.variant_names().collect::<Vec<_>>(),
        "warnings": warnings,
        "mermaid": export(spec, &unit.topology, GraphFormat::Mermaid),
    })
}

/// What the watcher keeps per spec file between polls.
pub struct Watched {
    name: String,
    fingerprint: Fingerprint,
}

impl Registry {
    /// Compiles every spec file once. Invalid ones are kept with their diagnostics
    /// (and printed on stderr); the server serves the rest.
    pub fn load(
        files: Vec<(String, PathBuf)>,
        dirs: Vec<PathBuf>,
        settings: Arc<Settings>,
    ) -> (Registry, Vec<Watched>) {
        let reg = Registry {
            slots: RwLock::new(IndexMap::new()),
            settings,
            generation: std::sync::atomic::AtomicU64::new(0),
            dirs,
            conflicts: std::sync::Mutex::new(Vec::new()),
        };
        let mut watched = Vec::new();
        for (name, path) in files {
            watched.push(reg.add(name, path));
        }
        (reg, watched)
    }

    fn next_generation(&self) -> u64 {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1
    }

    fn add(&self, name: String, path: PathBuf) -> Watched {
        let (built, fingerprint) = build(&name, &path, self.next_generation(), &self.settings);
        let slot = match built {
            Ok(g) => {
                crate::errln!("ragloop serve: serving `{name}` ({})", path.display());
                Slot {
                    path,
                    served: Some(Arc::new(g)),
                    failure: None,
                }
            }
            Err(f) => {
                crate::errp!("{}", f.text);
                crate::errln!(
                    "ragloop serve: `{name}` ({}) does not validate; not served until it does",
                    path.display()
                );
                Slot {
                    path,
                    served: None,
                    failure: Some(Arc::new(f)),
                }
            }
        };
        self.slots
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.clone(), slot);
        Watched { name, fingerprint }
    }

    /// The served version of `name`.
    ///
    /// # Errors
    /// 404 `unknown_graph` (the message says when the spec exists but does not
    /// validate, and lists the served graphs).
    pub fn get(&self, name: &str) -> Result<Arc<Graph>, ApiError> {
        let slots = self.slots.read().unwrap_or_else(|e| e.into_inner());
        match slots.get(name) {
            Some(Slot { served: Some(g), .. }) => Ok(Arc::clone(g)),
            Some(Slot { path, .. }) => Err(ApiError::not_found(
                "unknown_graph",
                format!(
                    "graph `{name}` ({}) does not validate and is not served; GET /graphs/{name} shows its diagnostics",
                    path.display()
                ),
            )),
            None => {
                let served: Vec<&str> = slots
                    .iter()
                    .filter(|(_, s)| s.served.is_some())
                    .map(|(n, _)| n.as_str())
                    .collect();
                Err(ApiError::not_found(
                    "unknown_graph",
                    format!(
                        "no graph `{name}` (served: {})",
                        if served.is_empty() { "none".into() } else { served.join(", ") }
                    ),
                ))
            }
        }
    }

    fn entry(name: &str, slot: &Slot, full: bool) -> Value {
        let mut v = match (&slot.served, full) {
            (Some(g), true) => g.summary.clone(),
            (Some(g), false) => json!({
                "name": name,
                "spec_name": g.summary["spec_name"],
                "description": g.summary["description"],
                "variants": g.variants,
            }),
            (None, _) => json!({"name": name}),
        };
        v["path"] = json!(slot.path.display().to_string());
        v["served"] = json!(slot.served.is_some());
        if let Some(g) = &slot.served {
            v["generation"] = json!(g.generation);
            v["loaded_at"] = json!(g.loaded_at_ms);
        }
        v["error"] = slot.failure.as_ref().map_or(Value::Null, |f| f.json());
        v
    }

    /// `GET /graphs`: every spec file, served or not, with the last failure.
    pub fn list(&self) -> Value {
        let slots = self.slots.read().unwrap_or_else(|e| e.into_inner());
        let graphs: Vec<Value> = slots
            .iter()
            .map(|(n, s)| Self::entry(n, s, false))
            .collect();
        let conflicts: Vec<Value> = lock(&self.conflicts)
            .iter()
            .map(|(name, path)| {
                json!({
                    "name": name,
                    "path": path.display().to_string(),
                    "served_from": slots.get(name).map(|s| s.path.display().to_string()),
                })
            })
            .collect();
        json!({"graphs": graphs, "conflicts": conflicts})
    }

    /// `GET /graphs/{name}`.
    ///
    /// # Errors
    /// 404 `unknown_graph`.
    pub fn describe(&self, name: &str) -> Result<Value, ApiError> {
        let slots = self.slots.read().unwrap_or_else(|e| e.into_inner());
        slots
            .get(name)
            .map(|s| Self::entry(name, s, true))
            .ok_or_else(|| ApiError::not_found("unknown_graph", format!("no graph `{name}`")))
    }

    /// (served, invalid) counts.
    pub fn counts(&self) -> (usize, usize) {
        let slots = self.slots.read().unwrap_or_else(|e| e.into_inner());
        let served = slots.values().filter(|s| s.served.is_some()).count();
        (served, slots.len() - served)
    }

    /// One poll: recompiles every spec whose files changed, swapping in what
    /// compiles and keeping the old version (with the new failure shown) otherwise;
    /// adds new spec files of the directories given. Blocking (file reads, compiles).
    pub fn poll(&self, watched: &mut Vec<Watched>, metrics: &super::metrics::Metrics) {
        // A spec file that is gone is no longer served (runs in flight keep their
        // version) nor listed.
        watched.retain(|w| {
            let mut slots = self.slots.write().unwrap_or_else(|e| e.into_inner());
            let gone = slots.get(&w.name).is_some_and(|s| !s.path.exists());
            if gone {
                if let Some(slot) = slots.shift_remove(&w.name) {
                    crate::errln!(
                        "ragloop serve: `{}` ({}) was removed; no longer served",
                        w.name,
                        slot.path.display()
                    );
                }
            }
            !gone
        });
        lock(&self.conflicts).retain(|(_, p)| p.exists());
        for w in watched.iter_mut() {
            if !w.fingerprint.changed() {
                continue;
            }
            let Some(path) = self
                .slots
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(&w.name)
                .map(|s| s.path.clone())
            else {
                continue;
            };
            let (built, fingerprint) =
                build(&w.name, &path, self.next_generation(), &self.settings);
            w.fingerprint = fingerprint;
            let mut slots = self.slots.write().unwrap_or_else(|e| e.into_inner());
            let Some(slot) = slots.get_mut(&w.name) else {
                continue;
            };
            match built {
                Ok(g) => {
                    crate::errln!(
                        "ragloop serve: reloaded `{}` ({}), generation {}",
                        w.name,
                        path.display(),
                        g.generation
                    );
                    slot.served = Some(Arc::new(g));
                    slot.failure = None;
                    metrics.reload(&w.name, true);
                }
                Err(f) => {
                    crate::errp!("{}", f.text);
                    crate::errln!(
                        "ragloop serve: `{}` changed and does not validate; {}",
                        w.name,
                        if slot.served.is_some() {
                            "the previous version stays served"
                        } else {
                            "still not served"
                        }
                    );
                    slot.failure = Some(Arc::new(f));
                    metrics.reload(&w.name, false);
                }
            }
        }
        for dir in &self.dirs {
            for f in dir_specs(dir) {
                let name = stem(&f);
                let holder = self
                    .slots
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&name)
                    .map(|s| s.path.clone());
                match holder {
                    None => watched.push(self.add(name, f)),
                    Some(p) if crate::paths::same_file(&p, &f) => {}
                    Some(p) => {
                        let mut conflicts = lock(&self.conflicts);
                        if !conflicts.iter().any(|(_, c)| c == &f) {
                            crate::errln!(
                                "ragloop serve: {} is not served: {} is already served as `{name}` (graphs are named by their file stem)",
                                f.display(),
                                p.display()
                            );
                            conflicts.push((name, f));
                        }
                    }
                }
            }
        }
    }
}

impl Watched {
    /// The files watched for this graph.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.fingerprint.paths()
    }
}
