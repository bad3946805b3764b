//! `imports:` — a spec includes named nodes, models, retrievers and tools of another
//! spec (docs/spec.md "Imports").
//!
//! ```yaml
//! imports:
//!   - spec: graphs/crag.yaml          # relative to the project root
//!     nodes: [retrieve, generate]
//!     models: [generator]
//!     retrievers: [book]
//! ```
//!
//! Resolved once, when the spec loads, on the JSON value before typing: each listed
//! entry is copied into the importing spec's map of that kind (after its own entries,
//! in the order listed), with the source spans of the file it was written in, so a
//! fault inside an imported node is reported at its line in the imported file. The
//! result is exactly the spec one would get by writing the entries inline: validation,
//! variants (which may `set` paths inside imported entries), compilation and runs see
//! no difference. An imported spec's own imports are resolved first (imports chain);
//! it must share the importer's project root, since the paths inside imported entries
//! (prompt files, schemas, corpora) are resolved against the root.
//!
//! Faults, each at its place: [`Code::ImportMissing`] (the file does not exist, or its
//! root differs), [`Code::ImportCycle`], [`Code::ImportClash`] (a name the spec
//! already defines or an earlier import brought), [`Code::ImportUnknown`] (a name the
//! imported spec does not define). Files that cannot be read, YAML errors in the
//! imported file and paths escaping the root are reported as for any file
//! (E007–E009, E010–, E031).
use super::load::{read_text, resolve_under, tidy};
use super::source::{FileId, Sources, Span};
use super::yaml::{self, escape_segment, Limits, SpanIndex, ValueSpans};
use crate::diag::{Code, Diagnostic};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// One entry of `imports:`: a spec file and the names to include from it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Import {
    /// The spec to import from, relative to the project root (`root`). It must have the
    /// same project root as this spec.
    pub spec: String,
    /// Nodes to include, by name (their edges are not: this spec wires them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Models to include, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// Retrievers to include, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retrievers: Vec<String>,
    /// Tools to include, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
}

/// The maps an import can add to, in the order they are filled.
const KINDS: &[(&str, &str)] = &[
    ("models", "model"),
    ("retrievers", "retriever"),
    ("tools", "tool"),
    ("nodes", "node"),
];

/// Most nested imports (a chain longer than this is refused as a cycle would be).
const MAX_DEPTH: usize = 16;

/// Resolves the `imports:` of a spec just parsed from `path` into `raw` and `spans`.
/// Does nothing when `imports` is absent or not a list of mappings (typing reports a
/// malformed one), or when the project root cannot be resolved (the loader reports it).
///
/// # Errors
/// Every import fault found, located in the file where it is written.
pub(crate) fn expand(
    raw: &mut Value,
    spans: &mut SpanIndex,
    file: FileId,
    path: &Path,
    sources: &mut Sources,
) -> Result<(), Vec<Diagnostic>> {
    if raw.get("imports").is_none() {
        return Ok(());
    }
    let Some(root) = root_of(raw, path) else {
        return Ok(());
    };
    let this = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mut stack = vec![this];
    let mut diags = Vec::new();
    expand_in(
        raw, spans, file, path, &root, &mut stack, sources, &mut diags,
    );
    if diags.is_empty() {
        Ok(())
    } else {
        Err(diags)
    }
}

/// The canonical project root a parsed spec declares (`root`, relative to its
/// directory; default `.`).
fn root_of(raw: &Value, path: &Path) -> Option<PathBuf> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let rel = match raw.get("root") {
        None => ".",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return None,
    };
    dir.join(rel).canonicalize().ok()
}

#[allow(clippy::too_many_arguments)]
fn expand_in(
    raw: &mut Value,
    spans: &mut SpanIndex,
    file: FileId,
    path: &Path,
    root: &Path,
    stack: &mut Vec<PathBuf>,
    sources: &mut Sources,
    diags: &mut Vec<Diagnostic>,
) {
    let Some(Value::Array(entries)) = raw.get("imports").cloned() else {
        return;
    };
    let file_start = Some(Span::file_start(file));
    for (i, entry) in entries.iter().enumerate() {
        let Some(Value::String(rel)) = entry.get("spec") else {
            continue;
        };
        let entry_ptr = yaml::pointer(&["imports".to_string(), i.to_string()]);
        let spec_at = spans.value(&format!("{entry_ptr}/spec")).or(file_start);
        let shown = tidy(
            &path
                .parent()
                .unwrap_or(Path::new(""))
                .join(raw.get("root").and_then(Value::as_str).unwrap_or("."))
                .join(rel),
        );
        let target = match resolve_under(root, rel, spec_at) {
            Ok(p) => p,
            Err(d) if d.code == Code::MissingFile => {
                diags.push(
                    Diagnostic::new(
                        Code::ImportMissing,
                        format!("imported spec `{rel}` not found ({})", shown.display()),
                    )
                    .at(spec_at)
                    .help("`spec:` is relative to the project root (`root`)"),
                );
                continue;
            }
            Err(d) => {
                diags.push(d);
                continue;
            }
        };
        if let Some(pos) = stack.iter().position(|p| *p == target) {
            let chain: Vec<String> = stack[pos..]
                .iter()
                .chain(std::iter::once(&target))
                .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
                .collect();
            diags.push(
                Diagnostic::new(
                    Code::ImportCycle,
                    format!("import cycle: {}", chain.join(" → ")),
                )
                .at(spec_at)
                .help("a spec cannot import itself, directly or through another spec"),
            );
            continue;
        }
        if stack.len() > MAX_DEPTH {
            diags.push(
                Diagnostic::new(
                    Code::ImportCycle,
                    format!("imports nest more than {MAX_DEPTH} specs deep"),
                )
                .at(spec_at),
            );
            continue;
        }
        let limits = Limits::default();
        let fid = match read_text(&target, &shown, sources, spec_at, limits.max_bytes) {
            Ok(f) => f,
            Err(d) => {
                diags.push(d);
                continue;
            }
        };
        let parsed = super::load::parsed_yaml(fid, sources);
        let (parsed_raw, parsed_spans) = match &*parsed {
            Ok((raw, spans)) => (raw, spans),
            Err(ds) => {
                diags.extend(ds.iter().cloned());
                continue;
            }
        };
        match root_of(parsed_raw, &target) {
            Some(r) if r == root => {}
            other_root => {
                diags.push(
                    Diagnostic::new(
                        Code::ImportMissing,
                        format!(
                            "imported spec `{rel}` has project root {}, not this spec's {}",
                            other_root
                                .map(|r| r.display().to_string())
                                .unwrap_or_else(|| "(unresolvable)".into()),
                            root.display()
                        ),
                    )
                    .at(spec_at)
                    .help("the paths inside imported entries resolve against the root, so both specs must share it"),
                );
                continue;
            }
        }
        // Only a spec with imports of its own is copied (to expand them); the others
        // are read where the parse left them.
        let expanded;
        let (other, other_spans) = if parsed_raw.get("imports").is_some() {
            let (mut other, mut other_spans) = (parsed_raw.clone(), parsed_spans.clone());
            stack.push(target.clone());
            let before = diags.len();
            expand_in(
                &mut other,
                &mut other_spans,
                fid,
                &target,
                root,
                stack,
                sources,
                diags,
            );
            stack.pop();
            if diags.len() > before {
                continue;
            }
            expanded = (other, other_spans);
            (&expanded.0, &expanded.1)
        } else {
            (parsed_raw, parsed_spans)
        };
        for (kind, word) in KINDS {
            let Some(Value::Array(names)) = entry.get(*kind) else {
                continue;
            };
            for (j, name) in names.iter().enumerate() {
                let Some(name) = name.as_str() else { continue };
                let item_ptr = format!("{entry_ptr}/{kind}/{j}");
                let at = spans.value(&item_ptr).or(spec_at);
                let Some(value) = other.get(*kind).and_then(|m| m.get(name)).cloned() else {
                    let known: Vec<String> = other
                        .get(*kind)
                        .and_then(Value::as_object)
                        .map(|m| m.keys().map(|k| format!("`{k}`")).collect())
                        .unwrap_or_default();
                    diags.push(
                        Diagnostic::new(
                            Code::ImportUnknown,
                            format!("`{rel}` defines no {word} `{name}`"),
                        )
                        .at(at)
                        .help(if known.is_empty() {
                            format!("`{rel}` defines no {kind}")
                        } else {
                            format!("its {kind}: {}", known.join(", "))
                        }),
                    );
                    continue;
                };
                let to = format!("/{kind}/{}", escape_segment(name));
                if raw.get(*kind).and_then(|m| m.get(name)).is_some() {
                    diags.push(
                        Diagnostic::new(
                            Code::ImportClash,
                            format!("{word} `{name}` imported from `{rel}` is already defined"),
                        )
                        .at(at)
                        .label(spans.key(&to), format!("`{name}` defined here"))
                        .help(format!(
                            "remove `{name}` from the import or rename the local {word}"
                        )),
                    );
                    continue;
                }
                let Some(obj) = raw.as_object_mut() else {
                    return;
                };
                let map = obj
                    .entry(kind.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                let Some(map) = map.as_object_mut() else {
                    continue; // not a mapping: typing reports it
                };
                if spans.get(&format!("/{kind}")).is_none() {
                    spans.insert(
                        format!("/{kind}"),
                        ValueSpans {
                            key: None,
                            value: spans.value(&entry_ptr).unwrap_or(Span::file_start(file)),
                        },
                    );
                }
                map.insert(name.to_string(), value);
                spans.graft(&to, other_spans, &to, None);
            }
        }
    }
}
