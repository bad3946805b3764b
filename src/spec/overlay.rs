//! Variants: named overlays applied to the spec's JSON value before typing, and
//! command-line overrides (`--override PATH=VALUE`) that work the same way.
//!
//! A variant's `set` maps a dotted path to a value. Every segment but the last must
//! exist; the last must name an existing key, a new key of an existing mapping, or an
//! existing list index. The new value keeps its own source spans, so a fault in the
//! merged spec points at the variant's line (for an override: at its VALUE, shown as
//! the source `--override PATH`).
use super::load::{typed, LoadedSpec};
use super::source::Sources;
use super::yaml::{escape_segment, pointer, SpanIndex};
use crate::diag::{Code, Diagnostic};
use serde_json::Value;

/// Applies variant `name` to `base`, returning the merged, typed spec.
///
/// # Errors
/// [`Code::VariantPath`] for a path that does not exist (or names `version`, `root`, `imports` or
/// `variants`, which variants cannot change); typing diagnostics of the merged spec.
/// All diagnostics carry the variant's name.
pub fn apply(base: &LoadedSpec, name: &str) -> Result<LoadedSpec, Vec<Diagnostic>> {
    let tag = |mut d: Diagnostic| {
        d.variant = Some(name.to_string());
        d
    };
    let Some(variant) = base.spec.variants.get(name) else {
        return Err(vec![tag(Diagnostic::new(
            Code::VariantPath,
            format!("no variant named `{name}`"),
        ))]);
    };
    let mut diags: Vec<Diagnostic> = overlapping(&variant.set)
        .into_iter()
        .map(|(outer, inner)| {
            let set_ptr = |p: &str| {
                format!("{}/{}", pointer(&["variants", name, "set"]), escape_segment(p))
            };
            tag(Diagnostic::new(
                Code::VariantOverlap,
                format!(
                    "variant `{name}` sets both `{outer}` and `{inner}`, which lies inside it: one would silently replace the other"
                ),
            )
            .at(base.spans.key(&set_ptr(inner)))
            .label(base.spans.key(&set_ptr(outer)), format!("`{outer}` set here")))
        })
        .collect();
    if !diags.is_empty() {
        return Err(diags);
    }
    let mut raw = without_variants(&base.raw);
    let mut spans = base.spans.clone();
    for (path, value) in &variant.set {
        let set_ptr = format!(
            "{}/{}",
            pointer(&["variants", name, "set"]),
            escape_segment(path)
        );
        let at = base.spans.key(&set_ptr);
        let segments: Vec<&str> = path.split('.').collect();
        if segments.iter().any(|s| s.is_empty()) {
            diags.push(tag(Diagnostic::new(
                Code::VariantPath,
                format!("variant `{name}`: `{path}` is not a dotted path"),
            )
            .at(at)));
            continue;
        }
        if matches!(segments[0], "version" | "root" | "variants" | "imports") {
            diags.push(tag(Diagnostic::new(
                Code::VariantPath,
                format!(
                    "variant `{name}`: `{}` cannot be changed by a variant",
                    segments[0]
                ),
            )
            .at(at)));
            continue;
        }
        match set_path(&mut raw, &segments, value.clone()) {
            Ok(()) => {
                let target = pointer(&segments);
                spans.graft(&target, &base.spans, &set_ptr, at);
            }
            Err(missing) => diags.push(tag(Diagnostic::new(
                Code::VariantPath,
                format!(
                    "variant `{name}` patches `{path}`, but `{missing}` does not exist in the spec"
                ),
            )
            .at(at))),
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    let spec =
        typed(&raw, &spans, base.file).map_err(|ds| ds.into_iter().map(tag).collect::<Vec<_>>())?;
    // Field by field: `..base.clone()` would copy the whole base spec (raw value,
    // spans, typed spec with every variant) once per variant, quadratic in variants.
    Ok(LoadedSpec {
        path: base.path.clone(),
        file: base.file,
        raw,
        spans,
        spec,
        root: base.root.clone(),
        variant: Some(name.to_string()),
    })
}

/// The sections whose entries [`Patcher`] re-types one by one.
const SECTIONS: [&str; 5] = ["nodes", "edges", "models", "retrievers", "tools"];

/// One typed entry of a [`SECTIONS`] map.
#[derive(Debug)]
enum Entry {
    Node(super::types::NodeSpec),
    Edge(super::types::Edge),
    Model(super::types::ModelSpec),
    Retriever(super::retriever::RetrieverSpec),
    Tool(super::types::ToolSpec),
}

/// What a patch replaced in one entry, to put back.
#[derive(Debug)]
struct Saved {
    section: &'static str,
    name: String,
    /// The entry's value before (`None`: the variant added it).
    raw: Option<Value>,
    /// Whether the typed entry was replaced, and the one before (`None`: added).
    typed: Option<Option<Entry>>,
}

/// Variants applied in place to one working copy of a spec, and undone: what
/// [`apply`] merges, at the cost of the entries a variant changes rather than of the
/// whole spec (`check_variants` checks 3,000 variants of a 3,000-node spec so).
///
/// [`Patcher::apply`] takes a variant whose every `set` path lies inside an entry of
/// `nodes`, `edges`, `models`, `retrievers` or `tools` (`nodes.grade.prompt.user`,
/// `retrievers.book`): it sets the values into the working copy's raw value, grafts
/// their spans, and types again only the entries changed. The merged spec is then
/// exactly [`apply`]'s: the raw value and spans are made by the same steps, and a
/// spec's typing is that of its entries (serde derives, no check across entries;
/// retriever options of another kind are looked for in the changed entries). Any
/// other variant, or one whose path or typing fails, is left to [`apply`] (which
/// reports the faults), with the copy unchanged.
#[derive(Debug)]
pub struct Patcher {
    work: LoadedSpec,
    saved: Vec<Saved>,
}

impl Patcher {
    /// A working copy of `base` without its variants (as [`apply`] merges them).
    pub fn new(base: &LoadedSpec) -> Patcher {
        let mut spec = base.spec.clone();
        spec.variants = indexmap::IndexMap::new();
        Patcher {
            work: LoadedSpec {
                path: base.path.clone(),
                file: base.file,
                raw: without_variants(&base.raw),
                spans: base.spans.clone(),
                spec,
                root: base.root.clone(),
                variant: None,
            },
            saved: Vec::new(),
        }
    }

    /// Applies variant `name` of `base` (the spec this patcher was made from) in
    /// place and returns the merged spec (`variant` set), or `None` when the variant
    /// needs [`apply`] (see the type's docs); nothing is left changed then. Call
    /// [`Patcher::undo`] before the next variant.
    pub fn apply(&mut self, base: &LoadedSpec, name: &str) -> Option<&LoadedSpec> {
        let variant = base.spec.variants.get(name)?;
        let fits = variant.set.keys().all(|path| {
            let mut seg = path.split('.');
            matches!((seg.next(), seg.next()), (Some(s), Some(_)) if SECTIONS.contains(&s))
                && path.split('.').all(|s| !s.is_empty())
        });
        if !fits || !overlapping(&variant.set).is_empty() {
            return None;
        }
        let mut ok = true;
        for (path, value) in &variant.set {
            let segments: Vec<&str> = path.split('.').collect();
            if !self.save(segments[0], segments[1])
                || set_path(&mut self.work.raw, &segments, value.clone()).is_err()
            {
                ok = false;
                break;
            }
            let set_ptr = format!(
                "{}/{}",
                pointer(&["variants", name, "set"]),
                escape_segment(path)
            );
            let at = base.spans.key(&set_ptr);
            self.work
                .spans
                .graft(&pointer(&segments), &base.spans, &set_ptr, at);
        }
        if !ok || !self.retype() {
            self.undo(base);
            return None;
        }
        self.work.variant = Some(name.to_string());
        Some(&self.work)
    }

    /// Puts back what the last [`Patcher::apply`] changed.
    pub fn undo(&mut self, base: &LoadedSpec) {
        while let Some(s) = self.saved.pop() {
            if let Some(Value::Object(map)) = self.work.raw.get_mut(s.section) {
                match s.raw {
                    Some(v) => {
                        map.insert(s.name.clone(), v);
                    }
                    None => {
                        map.shift_remove(&s.name);
                    }
                }
            }
            if let Some(old) = s.typed {
                self.put(s.section, &s.name, old);
            }
        }
        self.work.spans = base.spans.clone();
        self.work.variant = None;
    }

    /// Remembers the entry `section.name` before its first change; false when the
    /// section is not a mapping (then [`apply`] handles the variant).
    fn save(&mut self, section: &str, name: &str) -> bool {
        let Some(section) = SECTIONS.iter().copied().find(|s| *s == section) else {
            return false;
        };
        let Some(Value::Object(map)) = self.work.raw.get(section) else {
            return false;
        };
        if !self
            .saved
            .iter()
            .any(|s| s.section == section && s.name == name)
        {
            self.saved.push(Saved {
                section,
                name: name.to_string(),
                raw: map.get(name).cloned(),
                typed: None,
            });
        }
        true
    }

    /// Types every changed entry again; false when one does not type (the typed spec
    /// is then partly replaced: [`Patcher::undo`] restores it).
    fn retype(&mut self) -> bool {
        for i in 0..self.saved.len() {
            let (section, name) = (self.saved[i].section, self.saved[i].name.clone());
            let Some(value) = self.work.raw.get(section).and_then(|m| m.get(&name)) else {
                return false;
            };
            let Some(entry) = type_entry(section, &name, value) else {
                return false;
            };
            let old = self.put(section, &name, Some(entry));
            self.saved[i].typed = Some(old);
        }
        true
    }

    /// Sets (or, with `None`, removes) a typed entry; returns the one it replaces.
    fn put(&mut self, section: &str, name: &str, entry: Option<Entry>) -> Option<Entry> {
        macro_rules! swap {
            ($map:expr, $variant:ident) => {
                match entry {
                    Some(Entry::$variant(e)) => {
                        $map.insert(name.to_string(), e).map(Entry::$variant)
                    }
                    _ => $map.shift_remove(name).map(Entry::$variant),
                }
            };
        }
        let spec = &mut self.work.spec;
        match section {
            "nodes" => swap!(spec.nodes, Node),
            "edges" => swap!(spec.edges, Edge),
            "models" => swap!(spec.models, Model),
            "retrievers" => swap!(spec.retrievers, Retriever),
            _ => swap!(spec.tools, Tool),
        }
    }
}

/// An entry of `section` typed as the whole spec's typing would type it (`None` when
/// it does not type, or, for a retriever, holds another kind's option).
fn type_entry(section: &str, name: &str, value: &Value) -> Option<Entry> {
    use serde::Deserialize;
    match section {
        "nodes" => super::types::NodeSpec::deserialize(value)
            .ok()
            .map(Entry::Node),
        "edges" => super::types::Edge::deserialize(value).ok().map(Entry::Edge),
        "models" => super::types::ModelSpec::deserialize(value)
            .ok()
            .map(Entry::Model),
        "retrievers" => {
            let mut only = serde_json::Map::new();
            only.insert(name.to_string(), value.clone());
            let mut wrapped = serde_json::Map::new();
            wrapped.insert("retrievers".to_string(), Value::Object(only));
            if !super::kinds::no_stray_options(&Value::Object(wrapped)) {
                return None;
            }
            super::retriever::RetrieverSpec::deserialize(value)
                .ok()
                .map(Entry::Retriever)
        }
        _ => super::types::ToolSpec::deserialize(value)
            .ok()
            .map(Entry::Tool),
    }
}

/// The spec's value without its `variants` section. A variant cannot change that
/// section (E060), and typing it again for every variant made validation quadratic
/// in the number of variants; the merged spec's `variants` is therefore empty (the
/// base spec lists them).
fn without_variants(raw: &Value) -> Value {
    match raw {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "variants")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Pairs `(outer, inner)` of paths of one `set` where `inner` lies inside `outer`
/// (`retrievers.book` and `retrievers.book.top_k`). Linear in the total length of the
/// paths: each path's proper prefixes are looked up in a set.
fn overlapping(set: &indexmap::IndexMap<String, Value>) -> Vec<(&str, &str)> {
    let all: std::collections::HashSet<&str> = set.keys().map(String::as_str).collect();
    let mut out = Vec::new();
    for path in set.keys() {
        for (i, _) in path.match_indices('.') {
            if let Some(outer) = all.get(&path[..i]) {
                out.push((*outer, path.as_str()));
            }
        }
    }
    out
}

/// One command-line override `PATH=VALUE`, parsed ([`parse_override`]).
#[derive(Clone, Debug)]
pub struct Override {
    /// The argument as given.
    pub arg: String,
    /// The dotted path (`models.grader.structured_output`).
    pub path: String,
    /// The value.
    pub value: Value,
    /// Spans of the value, in its own source (named `--override PATH`).
    spans: SpanIndex,
}

/// Parses `PATH=VALUE`. VALUE is read as YAML, like a value of a variant's `set`: a
/// scalar (`json_schema`, `8`, `0.5`, `true`, `null`, `"quoted"`) or a flow sequence or
/// mapping (`[a, b]`, `{kind: bm25, corpus: docs}`); an empty VALUE is `null`. The
/// VALUE text is added to `sources` (as the file `--override PATH`), so diagnostics
/// about the value point into it.
///
/// # Errors
/// An [`OverrideError`] naming the argument: no `=` (`Syntax`), an empty or undotted
/// path, a path into `version`, `root`, `imports` or `variants` (`BadPath`), VALUE
/// that is not YAML (`NotYaml`, with the rendered diagnostics).
pub fn parse_override(arg: &str, sources: &mut Sources) -> Result<Override, OverrideError> {
    let (path, text) = arg.split_once('=').ok_or_else(|| OverrideError::Syntax {
        arg: arg.to_string(),
    })?;
    let path = path.trim();
    check_path(path).map_err(|fault| OverrideError::BadPath {
        arg: arg.to_string(),
        fault,
    })?;
    let file = sources.add(format!("--override {path}"), text.to_string());
    let (value, spans) = if text.trim().is_empty() {
        (Value::Null, SpanIndex::default())
    } else {
        super::yaml::parse(text, file, &super::yaml::Limits::default()).map_err(|ds| {
            OverrideError::NotYaml {
                arg: arg.to_string(),
                rendered: crate::diag::render::render(
                    &ds,
                    sources,
                    crate::diag::render::Format::Human,
                )
                .trim_end()
                .to_string(),
            }
        })?
    };
    Ok(Override {
        arg: arg.to_string(),
        path: path.to_string(),
        value,
        spans,
    })
}

/// Why a `--override PATH=VALUE` could not be parsed ([`parse_override`]) or applied
/// ([`apply_overrides`]). `Display` is the message the CLI prints, except for
/// `Invalid`, whose diagnostics the caller renders with the sources.
#[derive(Debug, thiserror::Error)]
pub enum OverrideError {
    /// No `=` in the argument.
    #[error("`--override {arg}`: expected PATH=VALUE (e.g. models.grader.structured_output=json_schema)")]
    Syntax {
        /// The argument as given.
        arg: String,
    },
    /// The PATH breaks the path rules.
    #[error("`--override {arg}`: {fault}")]
    BadPath {
        /// The argument as given.
        arg: String,
        /// Which rule.
        fault: PathFault,
    },
    /// VALUE is not YAML. `rendered`: the YAML diagnostics rendered with their source
    /// excerpts (rendering needs the [`Sources`] the error cannot hold).
    #[error("`--override {arg}`: VALUE is not YAML:\n{rendered}")]
    NotYaml {
        /// The argument as given.
        arg: String,
        /// The rendered diagnostics.
        rendered: String,
    },
    /// An override names a path that does not exist (the message names it, and the
    /// keys that do exist where it stops).
    #[error("{0}")]
    Path(String),
    /// The patched spec does not type-check (a value of the wrong type, an unknown
    /// key); the diagnostics point at the override's VALUE where they can.
    #[error("{}", .0.iter().map(|d| d.message.as_str()).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Diagnostic>),
}

/// Which path rule an override's PATH breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathFault {
    /// An empty segment (`a..b`, a leading or trailing dot, an empty path).
    #[error("`{0}` is not a dotted path")]
    NotDotted(String),
    /// A path into `version`, `root`, `variants` or `imports`.
    #[error("`{0}` cannot be changed")]
    Fixed(String),
}

/// Applies command-line overrides to `base` (a spec, or a variant's merged spec), in
/// order, with a variant's `set` rules (see the module docs), and types the result.
///
/// # Errors
/// [`OverrideError::Path`] for the first path that does not exist;
/// [`OverrideError::Invalid`] with the typing diagnostics of the patched spec.
pub fn apply_overrides(
    base: &LoadedSpec,
    overrides: &[Override],
) -> Result<LoadedSpec, OverrideError> {
    let mut raw = base.raw.clone();
    let mut spans = base.spans.clone();
    for o in overrides {
        let segments: Vec<&str> = o.path.split('.').collect();
        if let Err(missing) = set_path(&mut raw, &segments, o.value.clone()) {
            let parent: Vec<&str> = missing.split('.').collect();
            let parent = &parent[..parent.len().saturating_sub(1)];
            let known = raw
                .pointer(&pointer(parent))
                .and_then(Value::as_object)
                .map(|m| m.keys().map(String::as_str).collect::<Vec<_>>().join(", "));
            let mut msg = format!(
                "`--override {}`: `{missing}` does not exist in {}",
                o.arg,
                base.path.display()
            );
            match known {
                Some(k) if !parent.is_empty() && !k.is_empty() => {
                    msg.push_str(&format!(" ({} has: {k})", parent.join(".")))
                }
                Some(k) if !k.is_empty() => msg.push_str(&format!(" (top-level keys: {k})")),
                _ => {}
            }
            return Err(OverrideError::Path(msg));
        }
        spans.graft(&pointer(&segments), &o.spans, "", None);
    }
    let spec = typed(&raw, &spans, base.file).map_err(OverrideError::Invalid)?;
    Ok(LoadedSpec {
        raw,
        spans,
        spec,
        ..base.clone()
    })
}

/// The path rules shared by variants and overrides: dotted, no empty segment, not
/// into `version`, `root`, `variants` or `imports` (resolved when the spec loads).
fn check_path(path: &str) -> Result<(), PathFault> {
    let segments: Vec<&str> = path.split('.').collect();
    if segments.iter().any(|s| s.trim().is_empty()) {
        return Err(PathFault::NotDotted(path.to_string()));
    }
    if matches!(segments[0], "version" | "root" | "variants" | "imports") {
        return Err(PathFault::Fixed(segments[0].to_string()));
    }
    Ok(())
}

/// Sets `value` at `segments` in `root`. On failure returns the dotted prefix that
/// does not exist.
fn set_path(root: &mut Value, segments: &[&str], value: Value) -> Result<(), String> {
    let mut cur = root;
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let missing = || segments[..=i].join(".");
        match cur {
            Value::Object(map) => {
                if last {
                    map.insert((*seg).to_string(), value);
                    return Ok(());
                }
                cur = map.get_mut(*seg).ok_or_else(missing)?;
            }
            Value::Array(items) => {
                let ix: usize = seg.parse().map_err(|_| missing())?;
                let slot = items.get_mut(ix).ok_or_else(missing)?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                cur = slot;
            }
            _ => return Err(missing()),
        }
    }
    Err(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_path_rules() {
        let mut v = json!({"a": {"b": 1}, "l": [1, 2]});
        assert!(set_path(&mut v, &["a", "b"], json!(2)).is_ok());
        assert!(set_path(&mut v, &["a", "c"], json!(3)).is_ok());
        assert!(set_path(&mut v, &["l", "1"], json!(9)).is_ok());
        assert_eq!(
            set_path(&mut v, &["x", "y"], json!(0)),
            Err("x".to_string())
        );
        assert_eq!(
            set_path(&mut v, &["l", "5"], json!(0)),
            Err("l.5".to_string())
        );
        assert_eq!(v, json!({"a": {"b": 2, "c": 3}, "l": [1, 9]}));
    }

    #[test]
    fn parse_override_faults_are_typed_with_the_cli_messages() {
        let mut sources = Sources::default();
        let e = parse_override("models.g", &mut sources).unwrap_err();
        assert!(matches!(&e, OverrideError::Syntax { arg } if arg == "models.g"));
        assert_eq!(
            e.to_string(),
            "`--override models.g`: expected PATH=VALUE (e.g. models.grader.structured_output=json_schema)"
        );
        let e = parse_override("a..b=1", &mut sources).unwrap_err();
        assert!(matches!(
            &e,
            OverrideError::BadPath { fault: PathFault::NotDotted(p), .. } if p == "a..b"
        ));
        assert_eq!(
            e.to_string(),
            "`--override a..b=1`: `a..b` is not a dotted path"
        );
        let e = parse_override("root.x=1", &mut sources).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`--override root.x=1`: `root` cannot be changed"
        );
        let e = parse_override("models.g.x=[1", &mut sources).unwrap_err();
        assert!(matches!(e, OverrideError::NotYaml { .. }));
        assert!(e
            .to_string()
            .starts_with("`--override models.g.x=[1`: VALUE is not YAML:\n"));
        let o = parse_override("models.g.temperature=0.5", &mut sources).unwrap();
        assert_eq!(
            (o.path.as_str(), o.value.clone()),
            ("models.g.temperature", json!(0.5))
        );
    }
}
