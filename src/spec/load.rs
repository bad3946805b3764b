//! Reading a spec file: bytes → text → YAML with spans → typed [`Spec`].
use super::source::{FileId, Sources, Span};
use super::types::{Spec, SPEC_VERSION};
use super::yaml::{self, escape_segment, Limits, SpanIndex};
use crate::diag::{Code, Diagnostic};
use serde_json::Value;
use std::path::{Component, Path, PathBuf};

/// A spec loaded from a file, with everything needed to locate its values.
#[derive(Clone, Debug)]
pub struct LoadedSpec {
    /// The spec file as named by the user.
    pub path: PathBuf,
    /// Its id in the [`Sources`] map.
    pub file: FileId,
    /// The spec as a JSON value (variants are applied at this level).
    pub raw: Value,
    /// Spans of every value of `raw`.
    pub spans: SpanIndex,
    /// The typed spec.
    pub spec: Spec,
    /// The project root every path in the spec resolves against (absolute, canonical).
    pub root: PathBuf,
    /// The variant applied to produce this spec, if any.
    pub variant: Option<String>,
}

impl LoadedSpec {
    /// Span of the value at a path of segments (or its nearest ancestor).
    pub fn span<S: AsRef<str>>(&self, segments: &[S]) -> Option<Span> {
        self.spans.value(&yaml::pointer(segments))
    }

    /// Span of the key that introduced the value at a path (or the value's span).
    pub fn key_span<S: AsRef<str>>(&self, segments: &[S]) -> Option<Span> {
        self.spans.key(&yaml::pointer(segments))
    }

    /// How to show a path written in the spec: relative to the working directory when
    /// the spec was named that way, with `.` and `dir/..` steps removed.
    pub fn shown(&self, rel: &str) -> PathBuf {
        let dir = self.path.parent().unwrap_or(Path::new(""));
        tidy(&dir.join(self.spec.root.as_deref().unwrap_or(".")).join(rel))
    }

    /// Resolves a path written in the spec against the project root.
    ///
    /// # Errors
    /// [`Code::PathEscapesRoot`] when the path leaves the root (lexically or through a
    /// symlink), [`Code::MissingFile`] when it does not exist.
    pub fn resolve(&self, rel: &str, at: Option<Span>) -> Result<PathBuf, Diagnostic> {
        resolve_under(&self.root, rel, at)
    }

    /// Every file a run of this spec reads, as canonical paths: the spec file, the
    /// specs it imports, the state schema, each node's prompt templates and output schema, and the
    /// fixtures of `scripted` models (`params.file`). Paths that do not resolve are
    /// left out. Output files (`--trace`, `--record`) must not be any of these.
    pub fn input_files(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self.path.canonicalize().into_iter().collect();
        for r in self.input_rels() {
            if let Ok(p) = self.resolve(r, None) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// The paths of [`LoadedSpec::input_rels`] that can differ from those of the spec
    /// this one was merged from by setting `paths` (a variant's `set` paths, dotted):
    /// the state schema under `state`, a node's files under `nodes.NAME`, a scripted
    /// model's fixture under `models.NAME`; all of them for `nodes` or `models` whole.
    /// Costs what the paths name, not the spec's size.
    pub fn input_rels_under<'a>(&self, paths: impl IntoIterator<Item = &'a str>) -> Vec<&str> {
        use crate::spec::types::{Provider, SchemaRef, TemplateSource};
        let mut rels: Vec<&str> = Vec::new();
        for path in paths {
            let mut seg = path.split('.');
            match (seg.next(), seg.next()) {
                (Some("nodes" | "models"), None) => return self.input_rels(),
                (Some("state"), _) => {
                    if let SchemaRef::File(f) = &self.spec.state.schema {
                        rels.push(f);
                    }
                }
                (Some("nodes"), Some(name)) => {
                    let Some(l) = self.spec.nodes.get(name).and_then(|n| n.llm()) else {
                        continue;
                    };
                    for t in std::iter::once(&l.prompt.user).chain(l.prompt.system.as_ref()) {
                        if let TemplateSource::File(f) = t {
                            rels.push(&f.file);
                        }
                    }
                    if let Some(SchemaRef::File(f)) = &l.schema {
                        rels.push(f);
                    }
                }
                (Some("models"), Some(name)) => {
                    if let Some(m) = self.spec.models.get(name) {
                        if m.provider == Provider::Scripted {
                            if let Some(f) = m.params.get("file").and_then(Value::as_str) {
                                rels.push(f);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        rels
    }

    /// The paths of [`LoadedSpec::input_files`] but the spec's own, as written
    /// (relative to the root, not resolved: no file system access).
    pub fn input_rels(&self) -> Vec<&str> {
        use crate::spec::types::{Provider, SchemaRef, TemplateSource};
        let mut rels: Vec<&str> = Vec::new();
        if let SchemaRef::File(f) = &self.spec.state.schema {
            rels.push(f);
        }
        for node in self.spec.nodes.values() {
            let Some(l) = node.llm() else { continue };
            for t in std::iter::once(&l.prompt.user).chain(l.prompt.system.as_ref()) {
                if let TemplateSource::File(f) = t {
                    rels.push(&f.file);
                }
            }
            if let Some(SchemaRef::File(f)) = &l.schema {
                rels.push(f);
            }
        }
        for m in self.spec.models.values() {
            if m.provider == Provider::Scripted {
                if let Some(f) = m.params.get("file").and_then(Value::as_str) {
                    rels.push(f);
                }
            }
        }
        for i in &self.spec.imports {
            rels.push(&i.spec);
        }
        rels
    }
}

/// Resolves `rel` under `root` (which must be canonical): see [`LoadedSpec::resolve`].
///
/// # Errors
/// [`Code::PathEscapesRoot`] or [`Code::MissingFile`], located at `at`.
pub fn resolve_under(root: &Path, rel: &str, at: Option<Span>) -> Result<PathBuf, Diagnostic> {
    let escapes = || {
        Diagnostic::new(Code::PathEscapesRoot, format!("path `{rel}` leaves the project root {}", root.display()))
            .at(at)
            .help("keep prompts and schemas under the project root (the spec's `root` key, default the spec's directory)")
    };
    let rel_path = Path::new(rel);
    if rel.is_empty() {
        return Err(Diagnostic::new(Code::MissingFile, "empty file path").at(at));
    }
    let mut depth: i64 = 0;
    for c in rel_path.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => return Err(escapes()),
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
        }
        if depth < 0 {
            return Err(escapes());
        }
    }
    let joined = root.join(rel_path);
    match joined.canonicalize() {
        Ok(canon) if canon.starts_with(root) => Ok(canon),
        Ok(_) => Err(escapes()),
        Err(e) => Err(Diagnostic::new(Code::MissingFile, missing_words(rel, &e))
            .at(at)
            .help(format!("looked for {}", joined.display()))),
    }
}

/// Why `rel` cannot be opened, in words (no "(os error 2)").
fn missing_words(rel: &str, e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::NotFound => format!("file `{rel}` does not exist"),
        K::PermissionDenied => format!("file `{rel}` cannot be opened: permission denied"),
        K::NotADirectory => {
            format!("file `{rel}` does not exist: a folder on its path is a file")
        }
        _ => {
            let text = e.to_string();
            let words = match text.find(" (os error") {
                Some(i) => &text[..i],
                None => &text,
            };
            format!("file `{rel}` cannot be opened: {}", words.to_lowercase())
        }
    }
}

/// Reads a text file into `sources`, refusing binary, non-UTF-8 and oversized files.
///
/// # Errors
/// [`Code::FileUnreadable`], [`Code::NotText`] or [`Code::TooLarge`]; the diagnostic is
/// located at `at` (where the file was named) or, for content faults, in the file.
pub fn read_text(
    path: &Path,
    shown: &Path,
    sources: &mut Sources,
    at: Option<Span>,
    max_bytes: usize,
) -> Result<FileId, Diagnostic> {
    let meta = std::fs::metadata(path).map_err(|e| {
        Diagnostic::new(
            Code::FileUnreadable,
            format!("cannot read {}: {e}", shown.display()),
        )
        .at(at)
    })?;
    if !meta.is_file() && !meta.is_dir() {
        return Err(Diagnostic::new(
            Code::FileUnreadable,
            format!(
                "{} is not a regular file (a FIFO, socket or device)",
                shown.display()
            ),
        )
        .at(at));
    }
    if meta.is_dir() {
        return Err(Diagnostic::new(
            Code::FileUnreadable,
            format!("{} is a directory, not a file", shown.display()),
        )
        .at(at));
    }
    if meta.len() > max_bytes as u64 {
        let id = sources.add(shown, "");
        return Err(Diagnostic::new(
            Code::TooLarge,
            format!(
                "{} is {} bytes; the limit is {max_bytes} bytes",
                shown.display(),
                meta.len()
            ),
        )
        .at(Some(Span::file_start(id))));
    }
    let bytes = std::fs::read(path).map_err(|e| {
        Diagnostic::new(
            Code::FileUnreadable,
            format!("cannot read {}: {e}", shown.display()),
        )
        .at(at)
    })?;
    match String::from_utf8(bytes) {
        Ok(text) => {
            if let Some(pos) = text.find('\0') {
                let id = sources.add(shown, text.replace('\0', " "));
                let span = sources.span_of_range(id, pos..pos + 1);
                return Err(Diagnostic::new(
                    Code::NotText,
                    format!("{} contains a NUL byte: it looks binary", shown.display()),
                )
                .at(Some(span)));
            }
            Ok(sources.add(shown, text))
        }
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let id = sources.add(shown, lossy);
            let span = sources.span_of_range(id, valid..valid + 1);
            Err(Diagnostic::new(
                Code::NotText,
                format!(
                    "{} is not valid UTF-8 (byte offset {valid})",
                    shown.display()
                ),
            )
            .at(Some(span)))
        }
    }
}

/// Loads and types a spec file.
///
/// # Errors
/// Every diagnostic found while reading, parsing and typing the file. Type errors are
/// collected per entry (a bad node does not hide a bad model).
pub fn load_spec(path: &Path, sources: &mut Sources) -> Result<LoadedSpec, Vec<Diagnostic>> {
    let limits = Limits::default();
    let file = read_text(path, path, sources, None, limits.max_bytes).map_err(|d| vec![d])?;
    load_spec_file(path, file, sources)
}

/// Loads a spec from text, as if it had been read from `path` (which sets the
/// directory the spec's `root` is relative to and the name diagnostics show).
///
/// # Errors
/// As [`load_spec`], without the file-reading ones.
pub fn load_spec_str(
    path: &Path,
    text: &str,
    sources: &mut Sources,
) -> Result<LoadedSpec, Vec<Diagnostic>> {
    let limits = Limits::default();
    if text.len() > limits.max_bytes {
        let file = sources.add(path, "");
        return Err(vec![Diagnostic::new(
            Code::TooLarge,
            format!(
                "spec is {} bytes; the limit is {} bytes",
                text.len(),
                limits.max_bytes
            ),
        )
        .at(Some(Span::file_start(file)))]);
    }
    let file = sources.add(path, text);
    load_spec_file(path, file, sources)
}

fn load_spec_file(
    path: &Path,
    file: FileId,
    sources: &mut Sources,
) -> Result<LoadedSpec, Vec<Diagnostic>> {
    // A spec an earlier spec imported was parsed then (and is kept for the other
    // importers); a spec no import read is parsed here and not kept (its value lives
    // on in the `LoadedSpec`: keeping a second copy would double the memory).
    let (mut raw, mut spans) = match sources.memoized::<ParsedYaml>(file, "spec-yaml") {
        Some(parsed) => Result::clone(&parsed)?,
        None => {
            let text = sources.get(file).text.clone();
            yaml::parse(&text, file, &Limits::default())?
        }
    };
    super::imports::expand(&mut raw, &mut spans, file, path, sources)?;
    let spec = typed(&raw, &spans, file)?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let root_rel = spec.root.as_deref().unwrap_or(".");
    let root = dir.join(root_rel).canonicalize().map_err(|e| {
        vec![Diagnostic::new(
            Code::MissingFile,
            format!("project root `{root_rel}` cannot be opened: {e}"),
        )
        .at(spans.value("/root").or(Some(Span::file_start(file))))]
    })?;
    if let Err(d) = confine_root(&root, dir, root_rel) {
        return Err(vec![
            d.at(spans.value("/root").or(Some(Span::file_start(file))))
        ]);
    }
    Ok(LoadedSpec {
        path: path.to_path_buf(),
        file,
        raw,
        spans,
        spec,
        root,
        variant: None,
    })
}

/// A spec file's YAML as [`parsed_yaml`] keeps it.
pub(crate) type ParsedYaml = std::sync::Arc<Result<(Value, SpanIndex), Vec<Diagnostic>>>;

/// An imported spec file's text parsed as YAML ([`yaml::parse`] with the default
/// limits), once per file and text in `sources`: a spec that several specs import
/// (and that is then validated itself) is parsed once per process.
pub(crate) fn parsed_yaml(file: FileId, sources: &mut Sources) -> ParsedYaml {
    sources.memo(file, "spec-yaml", |sources| {
        let text = sources.get(file).text.clone();
        std::sync::Arc::new(yaml::parse(&text, file, &Limits::default()))
    })
}

#[cfg(test)]
thread_local! {
    /// How many whole specs [`typed`] typed on this thread.
    pub(crate) static TYPED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

static ALLOW_OUTSIDE_ROOT: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Lets specs put their `root` outside the allowed region (the CLI's
/// `--allow-outside-root`); process-wide, off by default.
pub fn set_allow_outside_root(allow: bool) {
    ALLOW_OUTSIDE_ROOT.store(allow, std::sync::atomic::Ordering::Relaxed);
}

/// The git work tree holding `dir` (the nearest ancestor with a `.git` entry), else
/// `dir` itself; canonical.
fn work_tree(dir: &Path) -> Option<PathBuf> {
    let dir = dir.canonicalize().ok()?;
    let top = dir
        .ancestors()
        .find(|a| a.join(".git").exists())
        .map(Path::to_path_buf);
    Some(top.unwrap_or(dir))
}

/// Root confinement: a spec's project root must lie inside the directory ragloop runs
/// in or the spec file's directory, or the git work tree holding either, unless
/// [`set_allow_outside_root`] allowed it. Since every file a spec names is resolved
/// under its root ([`resolve_under`]), no file outside these trees is read, so none is
/// quoted in an error excerpt either.
///
/// # Errors
/// [`Code::RootOutside`], naming the resolved root and the allowed trees.
fn confine_root(root: &Path, spec_dir: &Path, root_rel: &str) -> Result<(), Diagnostic> {
    if ALLOW_OUTSIDE_ROOT.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(());
    }
    static CWD_TREE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let cwd = CWD_TREE.get_or_init(|| std::env::current_dir().ok().and_then(|d| work_tree(&d)));
    let spec_tree = work_tree(spec_dir);
    let mut allowed: Vec<&PathBuf> = cwd.iter().chain(spec_tree.iter()).collect();
    allowed.dedup();
    if allowed.iter().any(|a| root.starts_with(a)) {
        return Ok(());
    }
    let trees: Vec<String> = allowed.iter().map(|a| a.display().to_string()).collect();
    Err(Diagnostic::new(
        Code::RootOutside,
        format!(
            "project root `{root_rel}` is {}, outside the directory ragloop runs in and the spec's own tree ({})",
            root.display(),
            trees.join(", ")
        ),
    )
    .help("keep `root` inside the project (a CI job would otherwise let a spec read any file); pass --allow-outside-root if this is intended"))
}

/// Types a raw spec value. Used for the base spec and for each variant's merged spec.
///
/// # Errors
/// Version and typing diagnostics, located through `spans`.
pub fn typed(raw: &Value, spans: &SpanIndex, file: FileId) -> Result<Spec, Vec<Diagnostic>> {
    #[cfg(test)]
    TYPED.with(|c| c.set(c.get() + 1));
    let Some(obj) = raw.as_object() else {
        return Err(vec![Diagnostic::new(
            Code::WrongType,
            "a spec must be a mapping at the top level",
        )
        .at(spans.value("").or(Some(Span::file_start(file))))]);
    };
    match obj.get("version") {
        None => {
            return Err(vec![Diagnostic::new(
                Code::Version,
                "missing `version` key",
            )
            .at(Some(Span::file_start(file)))
            .help(format!("start the spec with `version: {SPEC_VERSION}`"))])
        }
        Some(v) if v.as_u64() != Some(SPEC_VERSION as u64) => {
            return Err(vec![Diagnostic::new(
                Code::Version,
                if v.is_number() {
                    format!(
                    "spec version {v} is not supported; this ragloop reads version {SPEC_VERSION}"
                )
                } else {
                    format!("`version` must be the integer {SPEC_VERSION}, not {v}")
                },
            )
            .at(spans.value("/version"))])
        }
        _ => {}
    }
    // The common case, a spec that types: no copy of the value (a copy is made only
    // to cut faulty entries out, below).
    if super::kinds::no_stray_options(raw) {
        if let Ok(spec) = serde_path_to_error::deserialize::<_, Spec>(raw) {
            return Ok(spec);
        }
    }
    let mut work = raw.clone();
    // Options of another retriever kind, in the spec's words (removed from `work`).
    let mut diags = super::kinds::stray_options(&mut work, spans);
    for _ in 0..64 {
        match serde_path_to_error::deserialize::<_, Spec>(&work) {
            Ok(spec) => {
                return if diags.is_empty() {
                    Ok(spec)
                } else {
                    Err(diags)
                };
            }
            Err(err) => {
                let segments: Vec<String> = err
                    .path()
                    .iter()
                    .filter_map(|s| match s {
                        serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                        serde_path_to_error::Segment::Seq { index } => Some(index.to_string()),
                        serde_path_to_error::Segment::Enum { variant } => Some(variant.clone()),
                        serde_path_to_error::Segment::Unknown => None,
                    })
                    .collect();
                let (msg, segments) = refine_untagged(err.inner().to_string(), segments, &work);
                let (mut diag, cut) = match super::words::rewrite(&msg, &segments, &work) {
                    Some(words) => (
                        Diagnostic::new(Code::WrongType, words)
                            .at(spans.value(&yaml::pointer(&segments))),
                        None,
                    ),
                    None => classify(msg, &segments, spans),
                };
                if segments.last().is_some_and(|s| s == "when")
                    && work
                        .pointer(&yaml::pointer(&segments))
                        .is_some_and(Value::is_boolean)
                {
                    diag = diag.help(
                        "a YAML `true`/`false` is a boolean, a predicate is an expression: quote it (`when: \"true\"`), or better, test a state field",
                    );
                }
                diags.push(diag.at_default(file));
                // Drop the faulty entry and retry, to find faults in the other entries.
                if !cut_entry(&mut work, &segments, cut) {
                    return Err(diags);
                }
            }
        }
    }
    Err(diags)
}

/// serde reports a failed untagged enum as "did not match any variant", which hides
/// the real fault. When the value has the shape of the structured alternative
/// (a list of arms, a `{file}` mapping), deserialize it as that alternative to get
/// the precise error and path.
fn refine_untagged(
    mut msg: String,
    mut segments: Vec<String>,
    work: &Value,
) -> (String, Vec<String>) {
    fn with_path(
        err: serde_path_to_error::Error<serde_json::Error>,
        mut segments: Vec<String>,
    ) -> (String, Vec<String>) {
        for seg in err.path().iter() {
            match seg {
                serde_path_to_error::Segment::Map { key } => segments.push(key.clone()),
                serde_path_to_error::Segment::Seq { index } => segments.push(index.to_string()),
                _ => {}
            }
        }
        (err.inner().to_string(), segments)
    }
    fn precise<T: serde::de::DeserializeOwned>(
        v: &Value,
        segments: Vec<String>,
    ) -> Option<(String, Vec<String>)> {
        let err = serde_path_to_error::deserialize::<_, T>(v).err()?;
        Some(with_path(err, segments))
    }
    // Nodes are an internally tagged enum: serde buffers the value and reports faults
    // inside it at the node, often as a misleading "missing field `kind`". Deserialize
    // the node as the struct its `kind` names to get the real fault and path.
    if segments.len() >= 2 && segments[0] == "nodes" {
        let node_ptr = yaml::pointer(&segments[..2]);
        if let Some(Value::Object(node)) = work.pointer(&node_ptr) {
            let mut rest = node.clone();
            let kind = rest.shift_remove("kind");
            let base = segments[..2].to_vec();
            let rest = Value::Object(rest);
            let refined = kind
                .as_ref()
                .and_then(Value::as_str)
                .and_then(|k| super::types::NodeSpec::fields_error(k, &rest))
                .map(|err| with_path(err, base));
            if let Some((m, segs)) = refined {
                msg = m;
                segments = segs;
            }
        }
    }
    // Retrievers are internally tagged too: type the entry as its kind's options.
    if let Some((m, segs)) = super::kinds::retriever_error(work, &segments) {
        msg = m;
        segments = segs;
    }
    if !msg.contains("did not match any variant of untagged enum") {
        return (msg, segments);
    }
    let value = work
        .pointer(&yaml::pointer(&segments))
        .cloned()
        .unwrap_or(Value::Null);
    let refined = if msg.contains("enum Edge") && value.is_array() {
        precise::<Vec<super::types::Arm>>(&value, segments.clone())
    } else if msg.contains("enum TemplateSource") && value.is_object() {
        precise::<super::types::FileRef>(&value, segments.clone())
    } else {
        None
    };
    refined.unwrap_or((msg, segments))
}

trait AtDefault {
    fn at_default(self, file: FileId) -> Self;
}

impl AtDefault for Diagnostic {
    fn at_default(mut self, file: FileId) -> Self {
        if self.span.is_none() {
            self.span = Some(Span::file_start(file));
        }
        self
    }
}

/// Turns a serde message into a diagnostic, and the name of the unknown key when the
/// fault is one.
fn classify(msg: String, segments: &[String], spans: &SpanIndex) -> (Diagnostic, Option<String>) {
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        let field = rest.split('`').next().unwrap_or("");
        // Depending on where serde failed, the path may already end at the unknown key.
        let segments = match segments.split_last() {
            Some((last, parent)) if last == field => parent,
            _ => segments,
        };
        let ptr = yaml::pointer(segments);
        let place = describe(segments);
        // serde_path_to_error's path stops at the map holding the unknown key.
        let key_ptr = format!("{ptr}/{}", escape_segment(field));
        let expected = rest.split_once(", expected ").map(|(_, e)| e.to_string());
        let at = if spans.get(&key_ptr).is_some() {
            spans.key(&key_ptr)
        } else {
            spans.value(&ptr)
        };
        let mut d = Diagnostic::new(
            Code::UnknownKey,
            format!("unknown key `{field}` in {place}"),
        )
        .at(at);
        if let Some(e) = expected {
            d = d.help(format!("expected {e}"));
        }
        return (d, Some(field.to_string()));
    }
    let ptr = yaml::pointer(segments);
    let place = describe(segments);
    if let Some(rest) = msg.strip_prefix("missing field `") {
        let field = rest.split('`').next().unwrap_or("");
        return (
            Diagnostic::new(
                Code::MissingKey,
                format!("{place} is missing required key `{field}`"),
            )
            .at(spans.key(&ptr)),
            None,
        );
    }
    let text = if msg.contains("untagged enum Edge") {
        "expected a node name (or END), or a list of `when`/`to` arms ending in an `else` arm"
            .to_string()
    } else if msg.contains("untagged enum TemplateSource") {
        "expected inline template text or `{file: path}`".to_string()
    } else if msg.contains("untagged enum SchemaRef") {
        "expected a schema file path or an inline schema mapping".to_string()
    } else {
        msg
    };
    (
        Diagnostic::new(Code::WrongType, format!("{place}: {text}")).at(spans.value(&ptr)),
        None,
    )
}

fn describe(segments: &[String]) -> String {
    if segments.is_empty() {
        "the spec".to_string()
    } else {
        format!("`{}`", segments.join("."))
    }
}

/// Removes the entry at fault from `work` so typing can go on: the unknown key
/// itself, else the named entry of a section (`nodes.X`, `models.X`, ...), else an
/// optional top-level key. Returns false when nothing could be removed.
fn cut_entry(work: &mut Value, segments: &[String], unknown: Option<String>) -> bool {
    if let Some(key) = unknown {
        let segments = match segments.split_last() {
            Some((last, parent)) if *last == key => parent,
            _ => segments,
        };
        let mut cur = &mut *work;
        for s in segments {
            cur = match cur {
                Value::Object(m) => match m.get_mut(s) {
                    Some(v) => v,
                    None => return false,
                },
                Value::Array(a) => match s.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                    Some(v) => v,
                    None => return false,
                },
                _ => return false,
            };
        }
        return cur
            .as_object_mut()
            .is_some_and(|m| m.shift_remove(&key).is_some());
    }
    let sections = [
        "models",
        "retrievers",
        "tools",
        "nodes",
        "edges",
        "variants",
    ];
    if segments.len() >= 2 && sections.contains(&segments[0].as_str()) {
        return work
            .get_mut(&segments[0])
            .and_then(Value::as_object_mut)
            .is_some_and(|m| m.shift_remove(&segments[1]).is_some());
    }
    match segments.first().map(String::as_str) {
        Some(k @ ("description" | "root" | "limits")) => work
            .as_object_mut()
            .is_some_and(|m| m.shift_remove(k).is_some()),
        _ => false,
    }
}

/// `dir/../x` → `x`, `./x` → `x`: a path as shown in messages (no file is read, so
/// symlinks are not followed).
pub(crate) fn tidy(p: &Path) -> PathBuf {
    let mut out: Vec<Component> = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.last(), Some(Component::Normal(_))) => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out.iter().collect()
}
