//! JSON Schemas: the state schema (shape, initial values, reducers) and every node's
//! structured-output schema. Schema files are parsed with the spec's YAML loader
//! (JSON is YAML), so a fault inside a schema file is reported at its own
//! `file:line:column`.
use super::StateInfo;
use crate::diag::{Code, Diagnostic};
use crate::spec::load::read_text;
use crate::spec::source::{FileId, Sources, Span};
use crate::spec::types::{Reducer, SchemaRef};
use crate::spec::yaml::{self, Limits, SpanIndex};
use crate::spec::LoadedSpec;
use indexmap::IndexMap;
use serde_json::Value;

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
    let loaded = match sref {
        SchemaRef::Inline(map) => LoadedSchema {
            schema: Value::Object(map.clone()),
            file: ls.file,
            spans: ls.spans.clone(),
            prefix: yaml::pointer(at),
        },
        SchemaRef::File(rel) => {
            let span = ls.span(at);
            let path = ls.resolve(rel, span).map_err(|d| vec![d])?;
            let shown = ls.shown(rel);
            let file = match sources.find(&shown) {
                Some(f) => f,
                None => read_text(&path, &shown, sources, span, Limits::default().max_bytes)
                    .map_err(|d| vec![d])?,
            };
            // Parsed and checked once per file, however many variants use it.
            let parsed = sources.memo(file, "schema", |sources| {
                parse_schema_file(sources, file, rel)
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
    check_loaded(loaded, &place)
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

/// Checks the state schema, initial values, reducers and output schemas. Returns the
/// state's fields for the template and expression checks.
pub(super) fn check(
    ls: &LoadedSpec,
    sources: &mut Sources,
    diags: &mut Vec<Diagnostic>,
) -> StateInfo {
    let spec = &ls.spec;
    let mut info = StateInfo {
        fields: IndexMap::new(),
        known: false,
    };
    match load_schema(ls, &spec.state.schema, &["state", "schema"], sources) {
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
            let ty = prop.get("type").and_then(Value::as_str);
            let needs = match reducer {
                Reducer::Append => Some(("array", ty == Some("array"))),
                Reducer::Add => Some(("number", matches!(ty, Some("integer" | "number")))),
                Reducer::Merge => Some(("object", ty == Some("object"))),
                Reducer::Replace => None,
            };
            if let (Some((want, ok)), Some(ty)) = (needs, ty) {
                if !ok {
                    diags.push(
                        Diagnostic::new(
                            Code::ReducerType,
                            format!(
                                "reducer `{}` needs a {want} field, but `{field}` is `{ty}`",
                                format!("{reducer:?}").to_lowercase()
                            ),
                        )
                        .at(ls.span(&["state", "reducers", field])),
                    );
                }
            }
        }
    }
    for (name, node) in &spec.nodes {
        if let Some(call) = node.llm() {
            if let Some(sref) = &call.schema {
                if let Err(ds) = load_schema(ls, sref, &["nodes", name, "schema"], sources) {
                    diags.extend(ds);
                }
            }
        }
    }
    info
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
    let Ok(validator) = jsonschema::validator_for(&partial) else {
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
