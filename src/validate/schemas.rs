//! JSON Schemas: the state schema (shape, initial values, reducers) and every node's
//! structured-output schema. Schema files are parsed with the spec's YAML loader
//! (JSON is YAML), so a fault inside a schema file is reported at its own
//! `file:line:column`.
use super::types::{lower, Ty};
use super::StateInfo;
use crate::diag::{Code, Diagnostic};
use crate::spec::load::read_text;
use crate::spec::source::{FileId, Sources, Span};
use crate::spec::types::{Reducer, SchemaRef};
use crate::spec::yaml::{self, Limits, SpanIndex};
use crate::spec::LoadedSpec;
use indexmap::IndexMap;
use serde_json::Value;
use std::sync::Arc;

/// A schema loaded from a file or inline, with where its values came from.
#[derive(Clone, Debug)]
pub struct LoadedSchema {
    /// The schema.
    pub schema: Value,
    /// The file it came from and spans of its values (inline schemas point into the spec).
    pub file: FileId,
    /// Spans of the schema's values.
    pub spans: SpanIndex,
    /// JSON pointer prefix of the schema inside `spans` (empty for files).
    pub prefix: String,
}

impl LoadedSchema {
    fn span(&self, ptr: &str) -> Option<Span> {
        self.spans.value(&format!("{}{ptr}", self.prefix))
    }
}

const KNOWN_DRAFTS: &[&str] = &[
    "http://json-schema.org/draft-04/schema",
    "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-07/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
];

/// Loads a schema named in a spec (file or inline) and checks that it is a valid
/// JSON Schema that compiles.
///
/// `at` is the spec path of the reference (e.g. `["nodes", "grade", "schema"]`).
///
/// # Errors
/// [`Code::MissingFile`], [`Code::PathEscapesRoot`], [`Code::SchemaSyntax`],
/// [`Code::InvalidSchema`] and file-reading codes.
pub fn load_schema(
    ls: &LoadedSpec,
    sref: &SchemaRef,
    at: &[&str],
    sources: &mut Sources,
) -> Result<LoadedSchema, Vec<Diagnostic>> {
    load_shared(ls, sref, at, sources).map(|l| LoadedSchema::clone(&l))
}

/// [`load_schema`], a file's schema shared with the per-file memo (not copied).
pub(crate) fn load_shared(
    ls: &LoadedSpec,
    sref: &SchemaRef,
    at: &[&str],
    sources: &mut Sources,
) -> Result<Arc<LoadedSchema>, Vec<Diagnostic>> {
    let loaded = match sref {
        SchemaRef::Inline(map) => LoadedSchema {
            schema: Value::Object(map.clone()),
            file: ls.file,
            spans: ls.spans.clone(),
            prefix: yaml::pointer(at),
        },
        SchemaRef::File(rel) => {
            let span = ls.span(at);
            let path = ls
                .resolve(rel, span)
                .map_err(|d| vec![super::named_by(d, at)])?;
            let shown = ls.shown(rel);
            let file = match sources.find(&shown) {
                Some(f) => f,
                None => read_text(&path, &shown, sources, span, Limits::default().max_bytes)
                    .map_err(|d| vec![d])?,
            };
            // Parsed and checked once per file, however many variants use it.
            let parsed = sources.memo(file, "schema", |sources| {
                parse_schema_file(sources, file, rel).map(Arc::new)
            });
            let loaded = parsed.map_err(|ds| {
                ds.into_iter()
                    .map(|d| d.label(span, "schema referenced here"))
                    .collect::<Vec<_>>()
            })?;
            return Ok(loaded);
        }
    };
    let place = format!("inline schema at `{}`", at.join("."));
    check_loaded(loaded, &place).map(Arc::new)
}

/// Reads, parses and checks a schema file (memoized per file by [`load_schema`]).
fn parse_schema_file(
    sources: &mut Sources,
    file: FileId,
    rel: &str,
) -> Result<LoadedSchema, Vec<Diagnostic>> {
    let text = sources.get(file).text.clone();
    // `.json` files must be strict JSON (no trailing commas, comments or YAML); the
    // YAML parser then only supplies the spans.
    if rel.to_ascii_lowercase().ends_with(".json") {
        // A UTF-8 byte order mark is accepted, as the YAML parser accepts it.
        let json = text.strip_prefix('\u{feff}').unwrap_or(&text);
        if let Err(e) = serde_json::from_str::<serde_json::Value>(json) {
            let at = Span::point(file, e.line().max(1) as u32, e.column().max(1) as u32);
            return Err(vec![Diagnostic::new(
                Code::SchemaSyntax,
                format!("schema {rel} is not valid JSON: {e}"),
            )
            .at(Some(at))]);
        }
    }
    let (schema, spans) = yaml::parse(&text, file, &Limits::default()).map_err(|ds| {
        ds.into_iter()
            .map(|mut d| {
                if d.code == Code::YamlSyntax {
                    d.code = Code::SchemaSyntax;
                    d.message = format!("schema {rel} does not parse: {}", d.message);
                }
                d
            })
            .collect::<Vec<_>>()
    })?;
    check_loaded(
        LoadedSchema {
            schema,
            file,
            spans,
            prefix: String::new(),
        },
        &format!("schema {rel}"),
    )
}

/// Checks that a loaded schema is a valid JSON Schema (known draft, meta-schema,
/// compiles). `place` names it in messages.
fn check_loaded(loaded: LoadedSchema, place: &str) -> Result<LoadedSchema, Vec<Diagnostic>> {
    let where_ = || place.to_string();
    let root_span = loaded.span("").or(Some(Span::file_start(loaded.file)));
    if !loaded.schema.is_object() && !loaded.schema.is_boolean() {
        return Err(vec![Diagnostic::new(
            Code::InvalidSchema,
            format!("{} is not an object", where_()),
        )
        .at(root_span)]);
    }
    if let Some(draft) = loaded.schema.get("$schema") {
        let known = draft
            .as_str()
            .is_some_and(|d| KNOWN_DRAFTS.contains(&d.trim_end_matches('#')));
        if !known {
            return Err(vec![Diagnostic::new(
                Code::InvalidSchema,
                format!("{}: unknown `$schema` {draft}", where_()),
            )
            .at(loaded.span("/$schema"))
            .help(format!("use one of: {}", KNOWN_DRAFTS.join(", ")))]);
        }
    }
    if let Err(e) = jsonschema::meta::validate(&loaded.schema) {
        let ptr = e.instance_path().to_string();
        return Err(vec![Diagnostic::new(
            Code::InvalidSchema,
            format!("{} is not a valid JSON Schema: {e}", where_()),
        )
        .at(loaded.span(&ptr).or(root_span))]);
    }
    let formats = unknown_formats(&loaded.schema);
    if !formats.is_empty() {
        let known = known_formats(&loaded.schema);
        return Err(formats
            .into_iter()
            .map(|(ptr, name)| {
                let help = match crate::jinja::closest(&name, &known) {
                    Some(c) => format!("did you mean `{c}`? known formats: {}", known.join(", ")),
                    None => format!("known formats: {}", known.join(", ")),
                };
                Diagnostic::new(
                    Code::UnknownFormat,
                    format!("{}: unknown format `{name}`", where_()),
                )
                .at(loaded.span(&ptr).or(root_span))
                .help(help)
            })
            .collect());
    }
    if let Err(e) = jsonschema::validator_for(&loaded.schema) {
        let ptr = e.instance_path().to_string();
        return Err(vec![Diagnostic::new(
            Code::InvalidSchema,
            format!("{} does not compile: {e}", where_()),
        )
        .at(loaded.span(&ptr).or(root_span))]);
    }
    Ok(loaded)
}

/// Checks the state schema, initial values, reducers and the `output` fields (node
/// output schemas: [`check_node`]). Returns the state's fields for the template and
/// expression checks.
pub(super) fn check_state(
    ls: &LoadedSpec,
    sources: &mut Sources,
    diags: &mut Vec<Diagnostic>,
) -> StateInfo {
    let spec = &ls.spec;
    let mut info = StateInfo {
        fields: IndexMap::new(),
        known: false,
    };
    match load_shared(ls, &spec.state.schema, &["state", "schema"], sources) {
        Err(ds) => diags.extend(ds),
        Ok(schema) => {
            let props = schema.schema.get("properties").and_then(Value::as_object);
            let is_object = schema.schema.get("type").and_then(Value::as_str) == Some("object");
            match props {
                Some(props) if is_object => {
                    info.known = true;
                    for (k, v) in props {
                        info.fields.insert(k.clone(), v.clone());
                    }
                    check_initial(ls, &schema, &info, diags);
                }
                _ => diags.push(
                    Diagnostic::new(
                        Code::StateShape,
                        "the state schema must be `type: object` with `properties`",
                    )
                    .at(schema.span("").or(ls.span(&["state", "schema"]))),
                ),
            }
        }
    }
    if info.known {
        for (key, field) in [
            ("answer", &spec.output.answer),
            ("documents", &spec.output.documents),
        ] {
            if let Some(field) = field {
                if !info.fields.contains_key(field) {
                    diags.push(
                        Diagnostic::new(
                            Code::UnknownOutput,
                            format!("`output.{key}` names `{field}`, which is not a state field"),
                        )
                        .at(ls.span(&["output", key]))
                        .help(super::refs::suggest(field, info.fields.keys())),
                    );
                }
            }
        }
        let root = if spec.state.reducers.is_empty() {
            None
        } else {
            state_root(ls, sources)
        };
        for (field, reducer) in &spec.state.reducers {
            let at = ls.key_span(&["state", "reducers", field]);
            let Some(prop) = info.fields.get(field) else {
                diags.push(
                    Diagnostic::new(
                        Code::UnknownStateField,
                        format!("reducer for `{field}`, which is not a state field"),
                    )
                    .at(at)
                    .help(super::refs::suggest(field, info.fields.keys())),
                );
                continue;
            };
            // The field's type from its schema: type lists and `$ref`s included.
            let fty = root.as_ref().map_or(Ty::Unknown, |r| lower(prop, r));
            let kinds: Vec<&Ty> = fty.non_null();
            let known = fty != Ty::Unknown && !kinds.is_empty();
            let needs = match reducer {
                Reducer::Append => {
                    Some(("an array", kinds.iter().any(|t| matches!(t, Ty::Array(_)))))
                }
                Reducer::Add => Some((
                    "a number",
                    kinds.iter().any(|t| matches!(t, Ty::Int | Ty::Num)),
                )),
                Reducer::Merge => Some((
                    "an object",
                    kinds.iter().any(|t| matches!(t, Ty::Object { .. })),
                )),
                Reducer::Replace => None,
            };
            if let (Some((want, ok)), true) = (needs, known) {
                if !ok {
                    diags.push(
                        Diagnostic::new(
                            Code::ReducerType,
                            format!(
                                "reducer `{}` needs {want} field, but `{field}` is {}",
                                format!("{reducer:?}").to_lowercase(),
                                type_words(prop, &fty)
                            ),
                        )
                        .at(ls.span(&["state", "reducers", field])),
                    );
                }
            }
        }
    }
    info
}

/// Checks one node's structured-output schema (a file is parsed once, however many
/// nodes and variants use it).
pub(super) fn check_node(
    ls: &LoadedSpec,
    name: &str,
    node: &crate::spec::types::NodeSpec,
    sources: &mut Sources,
    diags: &mut Vec<Diagnostic>,
) {
    if let Some(sref) = node.llm().and_then(|call| call.schema.as_ref()) {
        if let Err(ds) = load_shared(ls, sref, &["nodes", name, "schema"], sources) {
            diags.extend(ds);
        }
    }
}

fn check_initial(
    ls: &LoadedSpec,
    schema: &LoadedSchema,
    info: &StateInfo,
    diags: &mut Vec<Diagnostic>,
) {
    let initial = &ls.spec.state.initial;
    for field in initial.keys() {
        if !info.fields.contains_key(field) {
            diags.push(
                Diagnostic::new(
                    Code::UnknownStateField,
                    format!("initial value for `{field}`, which is not a state field"),
                )
                .at(ls.key_span(&["state", "initial", field]))
                .help(super::refs::suggest(field, info.fields.keys())),
            );
        }
    }
    // The initial state is partial (the question comes at run time): check it against
    // the schema without `required`.
    let mut partial = schema.schema.clone();
    if let Some(obj) = partial.as_object_mut() {
        obj.remove("required");
    }
    let Ok(validator) = asserting_formats().build(&partial) else {
        return;
    };
    let value = Value::Object(
        initial
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    );
    for e in validator.iter_errors(&value) {
        let ptr = e.instance_path().to_string();
        let at = ls
            .spans
            .value(&format!("{}{ptr}", yaml::pointer(&["state", "initial"])));
        diags.push(
            Diagnostic::new(
                Code::InitialInvalid,
                format!(
                    "initial state `{}`: {e}",
                    ptr.trim_start_matches('/').replace('/', ".")
                ),
            )
            .at(at),
        );
    }
}

/// How a field's type is named in a message: the schema's own `type` when it has one
/// (`` `string` ``, `` `["string", "null"]` ``), else the lowered type.
fn type_words(prop: &Value, ty: &Ty) -> String {
    match prop.get("type") {
        Some(Value::String(t)) => format!("`{t}`"),
        Some(t @ Value::Array(_)) => format!("`{t}`"),
        _ => format!("`{}` (through its schema)", ty.name()),
    }
}

/// The state schema's value, when it loads (for resolving `$ref`s).
fn state_root(ls: &LoadedSpec, sources: &mut Sources) -> Option<Value> {
    schema_value(ls, &ls.spec.state.schema, &["state", "schema"], sources)
}

/// The value of a schema named in a spec, when it loads and is valid (an inline
/// schema as written; a file through [`load_schema`]'s per-file memo). `None` when
/// it does not: its faults are reported by [`check`].
pub(crate) fn schema_value(
    ls: &LoadedSpec,
    sref: &SchemaRef,
    at: &[&str],
    sources: &mut Sources,
) -> Option<Value> {
    match sref {
        SchemaRef::Inline(map) => {
            let v = Value::Object(map.clone());
            (jsonschema::meta::is_valid(&v)).then_some(v)
        }
        SchemaRef::File(_) => load_shared(ls, sref, at, sources)
            .ok()
            .map(|l| l.schema.clone()),
    }
}

/// The formats ragloop's validator may know (`jsonschema`'s built-ins); which of them
/// a schema may use depends on its draft ([`known_formats`]).
const FORMAT_CANDIDATES: &[&str] = &[
    "date",
    "date-time",
    "duration",
    "email",
    "hostname",
    "idn-email",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "iri",
    "iri-reference",
    "json-pointer",
    "regex",
    "relative-json-pointer",
    "time",
    "uri",
    "uri-reference",
    "uri-template",
    "uuid",
];

/// The compiler every schema check uses: `format` is asserted (the policy, see
/// docs/spec.md); the runtime builds its validators the same way.
pub(crate) fn asserting_formats() -> jsonschema::ValidationOptions<'static> {
    let mut o = jsonschema::options();
    o = o.should_validate_formats(true);
    o
}

/// Whether the validator knows format `name` under the draft of `root` (its `$schema`).
fn format_known(root: &Value, name: &str) -> bool {
    let mut probe = serde_json::Map::new();
    if let Some(d) = root.get("$schema") {
        probe.insert("$schema".into(), d.clone());
    }
    probe.insert("format".into(), Value::String(name.to_string()));
    asserting_formats()
        .should_ignore_unknown_formats(false)
        .build(&Value::Object(probe))
        .is_ok()
}

/// The formats known under `root`'s draft.
fn known_formats(root: &Value) -> Vec<&'static str> {
    FORMAT_CANDIDATES
        .iter()
        .copied()
        .filter(|f| format_known(root, f))
        .collect()
}

/// Every `format` keyword of the schema whose name the validator does not know, with
/// the JSON pointer of its value.
fn unknown_formats(root: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    walk_formats(root, root, String::new(), 0, &mut found);
    found
}

fn walk_formats(
    root: &Value,
    schema: &Value,
    ptr: String,
    depth: usize,
    out: &mut Vec<(String, String)>,
) {
    const MAX_DEPTH: usize = 128;
    let Value::Object(obj) = schema else { return };
    if depth > MAX_DEPTH {
        return;
    }
    if let Some(Value::String(name)) = obj.get("format") {
        if !format_known(root, name) {
            out.push((format!("{ptr}/format"), name.clone()));
        }
    }
    for (key, value) in obj {
        let here = format!("{ptr}/{}", yaml::escape_segment(key));
        match key.as_str() {
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Value::Object(map) = value {
                    for (k, sub) in map {
                        let p = format!("{here}/{}", yaml::escape_segment(k));
                        walk_formats(root, sub, p, depth + 1, out);
                    }
                }
            }
            "items" | "prefixItems" | "allOf" | "anyOf" | "oneOf" => match value {
                Value::Array(items) => {
                    for (i, sub) in items.iter().enumerate() {
                        walk_formats(root, sub, format!("{here}/{i}"), depth + 1, out);
                    }
                }
                sub => walk_formats(root, sub, here, depth + 1, out),
            },
            "additionalProperties"
            | "additionalItems"
            | "contains"
            | "not"
            | "if"
            | "then"
            | "else"
            | "propertyNames"
            | "unevaluatedItems"
            | "unevaluatedProperties"
            | "contentSchema" => walk_formats(root, value, here, depth + 1, out),
            _ => {}
        }
    }
}
