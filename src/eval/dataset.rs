//! Eval datasets: JSON lines `{"id", "question", "answer", "must_contain", "sources",
//! "kind"}` (the schema of `rust-book-qa.jsonl`).
//!
//! Field types: `id` a non-empty string (or an integer, kept as its decimal text),
//! `question` and `answer` strings (`question` non-empty), `must_contain` and
//! `sources` lists of non-empty strings, `kind` a non-empty string (`direct`, `paraphrase`, `multi_hop`,
//! `unanswerable` in the shipped set; any other name is accepted and reported as its
//! own kind). `unanswerable` is the kind whose questions should be declined.
//! An optional boolean `hard` puts a question in (or out of) the hard subset of the
//! reports whatever its kind (`--hard KIND,...` decides for the others).
//!
//! The references `answer`, `must_contain` and `sources` may be left out (or be
//! `null`): the metrics that need them are then n/a for the question (absent, never
//! 0), and the reference-free ones (the judge's `faithfulness` and
//! `answer_relevancy`) still run. A reference that is present must have its type.
//! Unknown keys are ignored. Blank lines are skipped; a UTF-8 byte-order mark is
//! tolerated.
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::Path;

/// The kind whose questions the documents do not answer.
pub const UNANSWERABLE: &str = "unanswerable";

/// One question of a dataset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// Unique id.
    pub id: String,
    /// The question as a user would ask it.
    pub question: String,
    /// Short reference answer (`None` when the line has none: token F1 is n/a).
    pub answer: Option<String>,
    /// Key terms a correct answer mentions (case-insensitive); empty for unanswerable.
    pub must_contain: Vec<String>,
    /// Labelled source pages (paths); empty for unanswerable.
    pub sources: Vec<String>,
    /// Question kind.
    pub kind: String,
    /// `hard: true` / `false`: in (out of) the hard subset of the reports whatever
    /// its kind; absent: hard when its kind is one of `--hard` (see
    /// [`Item::is_hard`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard: Option<bool>,
    /// 1-based line in the dataset file.
    #[serde(skip)]
    pub line: usize,
}

impl Item {
    /// Whether the question should be declined (kind `unanswerable`).
    pub fn unanswerable(&self) -> bool {
        self.kind == UNANSWERABLE
    }

    /// Whether the question is in the hard subset: its `hard` field when given,
    /// else whether its kind is one of `hard_kinds`.
    pub fn is_hard(&self, hard_kinds: &[String]) -> bool {
        self.hard.unwrap_or_else(|| hard_kinds.contains(&self.kind))
    }
}

/// Why a dataset cannot be evaluated at all (bad single lines are [`LineError`]s
/// instead).
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The file cannot be read.
    #[error("cannot read {}: {error}", path.display())]
    Read {
        /// The dataset file.
        path: std::path::PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// The file is not UTF-8.
    #[error("{} is not UTF-8 (byte offset {offset})", path.display())]
    NotUtf8 {
        /// The dataset file.
        path: std::path::PathBuf,
        /// Byte offset of the first invalid sequence.
        offset: usize,
    },
    /// Ids used more than once: one `line N: duplicate id `X` (first on line M)` each.
    #[error("{}", .0.join("; "))]
    DuplicateIds(Vec<String>),
    /// No line at all.
    #[error("the dataset has no question")]
    Empty,
    /// A fault of the text of this file.
    #[error("{}: {error}", path.display())]
    In {
        /// The dataset file.
        path: std::path::PathBuf,
        /// The fault.
        error: Box<DatasetError>,
    },
}

/// A dataset line that could not be used.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

/// A parsed dataset: the usable items in file order and the bad lines.
#[derive(Clone, Debug, Default)]
pub struct Dataset {
    /// Usable items, in file order.
    pub items: Vec<Item>,
    /// Lines that are not JSON, lack a field or have a field of the wrong type.
    pub errors: Vec<LineError>,
}

/// Why one dataset line cannot be used ([`parse_line`]); its `Display` is the
/// [`LineError::message`] reports show.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The line is not JSON.
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// The line is JSON but not an object (`found`: its type, as [`type_name`] says).
    #[error("expected a JSON object, found {found}")]
    NotObject {
        /// The JSON type found.
        found: &'static str,
    },
    /// No `id`.
    #[error("missing field `id`")]
    MissingId,
    /// An empty or blank `id`.
    #[error("`id` is empty")]
    EmptyId,
    /// An `id` that is a number but not an integer.
    #[error("`id` must be a string or an integer, found the number {0}")]
    FractionalId(serde_json::Number),
    /// An `id` of another type.
    #[error("`id` must be a string or an integer, found {0}")]
    IdType(&'static str),
    /// The `question` is missing or not a string (no id prefix: the line's id is
    /// known, but the message reads as the line's first fault).
    #[error("{0}")]
    Question(FieldError),
    /// An empty or blank question.
    #[error("`{id}`: the question is empty")]
    EmptyQuestion {
        /// The item's id.
        id: String,
    },
    /// Another field of the item `id` is missing or ill-typed.
    #[error("`{id}`: {fault}")]
    Field {
        /// The item's id.
        id: String,
        /// What is wrong with the field.
        fault: FieldError,
    },
}

/// What is wrong with one field of a dataset line (see [`ParseError`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// A required field is missing.
    #[error("missing field `{0}`")]
    Missing(&'static str),
    /// A string field of another type.
    #[error("`{key}` must be a string, found {found}")]
    NotString {
        /// The field.
        key: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
    /// A string field that is empty or blank.
    #[error("`{0}` is empty")]
    Empty(&'static str),
    /// A list field that is not a list.
    #[error("`{key}` must be a list of strings, found {found}")]
    NotList {
        /// The field.
        key: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
    /// An entry of a list field that is empty or blank.
    #[error("`{key}[{index}]` is empty")]
    EmptyEntry {
        /// The field.
        key: &'static str,
        /// The entry's 0-based index.
        index: usize,
    },
    /// An entry of a list field that is not a string.
    #[error("`{key}[{index}]` must be a string, found {found}")]
    EntryNotString {
        /// The field.
        key: &'static str,
        /// The entry's 0-based index.
        index: usize,
        /// The JSON type found.
        found: &'static str,
    },
    /// `hard` that is not a boolean.
    #[error("`hard` must be true or false, found {0}")]
    HardNotBool(&'static str),
}

// A reference list left out (or null) is empty: the metrics that read it are n/a.
fn string_list(m: &Map<String, Value>, key: &'static str) -> Result<Vec<String>, FieldError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(index, v)| match v.as_str() {
                Some(s) if s.trim().is_empty() => Err(FieldError::EmptyEntry { key, index }),
                Some(s) => Ok(s.to_string()),
                None => Err(FieldError::EntryNotString {
                    key,
                    index,
                    found: type_name(v),
                }),
            })
            .collect(),
        Some(v) => Err(FieldError::NotList {
            key,
            found: type_name(v),
        }),
    }
}

fn string(m: &Map<String, Value>, key: &'static str) -> Result<String, FieldError> {
    match m.get(key) {
        None => Err(FieldError::Missing(key)),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(FieldError::NotString {
            key,
            found: type_name(v),
        }),
    }
}

/// The JSON type of a value, for messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Parses one line (without its newline) into an item.
///
/// # Errors
/// The [`ParseError`]: not JSON, not an object, a missing field, a field of the wrong
/// type, an empty id, question, kind, or `must_contain` / `sources` entry.
pub fn parse_line(line: &str, lineno: usize) -> Result<Item, ParseError> {
    let v: Value = serde_json::from_str(line).map_err(ParseError::NotJson)?;
    let Value::Object(m) = v else {
        return Err(ParseError::NotObject {
            found: type_name(&v),
        });
    };
    let id = match m.get("id") {
        None => return Err(ParseError::MissingId),
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::String(_)) => return Err(ParseError::EmptyId),
        Some(Value::Number(n)) if n.is_u64() || n.is_i64() => n.to_string(),
        Some(Value::Number(n)) => return Err(ParseError::FractionalId(n.clone())),
        Some(v) => return Err(ParseError::IdType(type_name(v))),
    };
    let question = string(&m, "question").map_err(ParseError::Question)?;
    if question.trim().is_empty() {
        return Err(ParseError::EmptyQuestion { id });
    }
    let field = |fault: FieldError| ParseError::Field {
        id: id.clone(),
        fault,
    };
    let answer = match m.get("answer") {
        None | Some(Value::Null) => None,
        Some(_) => Some(string(&m, "answer").map_err(field)?),
    };
    Ok(Item {
        answer,
        must_contain: string_list(&m, "must_contain").map_err(field)?,
        sources: string_list(&m, "sources").map_err(field)?,
        kind: string(&m, "kind")
            .and_then(|k| {
                if k.trim().is_empty() {
                    Err(FieldError::Empty("kind"))
                } else {
                    Ok(k)
                }
            })
            .map_err(field)?,
        hard: match m.get("hard") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(v) => return Err(field(FieldError::HardNotBool(type_name(v)))),
        },
        id,
        question,
        line: lineno,
    })
}

/// Parses a whole dataset text. Bad lines are collected in [`Dataset::errors`]; the
/// other lines are kept.
///
/// # Errors
/// Duplicate ids (every duplicate, with both line numbers), or a text without any
/// line at all: the dataset cannot be evaluated.
pub fn parse(text: &str) -> Result<Dataset, DatasetError> {
    let mut ds = Dataset::default();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut dups = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let lineno = n + 1;
        let line = line.trim_start_matches('\u{feff}');
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line, lineno) {
            Ok(item) => {
                if let Some(first) = seen.get(&item.id) {
                    dups.push(format!(
                        "line {lineno}: duplicate id `{}` (first on line {first})",
                        item.id
                    ));
                    continue;
                }
                seen.insert(item.id.clone(), lineno);
                ds.items.push(item);
            }
            Err(e) => ds.errors.push(LineError {
                line: lineno,
                message: e.to_string(),
            }),
        }
    }
    if !dups.is_empty() {
        return Err(DatasetError::DuplicateIds(dups));
    }
    if ds.items.is_empty() && ds.errors.is_empty() {
        return Err(DatasetError::Empty);
    }
    Ok(ds)
}

/// Reads and parses a dataset file.
///
/// # Errors
/// The file cannot be read or is not UTF-8, or [`parse`] fails; messages name the
/// file.
pub fn load(path: &Path) -> Result<Dataset, DatasetError> {
    let bytes = std::fs::read(path).map_err(|error| DatasetError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    let text = String::from_utf8(bytes).map_err(|e| DatasetError::NotUtf8 {
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })?;
    parse(&text).map_err(|e| DatasetError::In {
        path: path.to_path_buf(),
        error: Box::new(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_line_faults_are_typed_with_the_messages_reports_show() {
        let e = parse_line("[1]", 1).unwrap_err();
        assert!(matches!(e, ParseError::NotObject { found: "a list" }));
        assert_eq!(e.to_string(), "expected a JSON object, found a list");
        let e = parse_line(r#"{"id": 1.5}"#, 1).unwrap_err();
        assert!(matches!(e, ParseError::FractionalId(_)));
        assert_eq!(
            e.to_string(),
            "`id` must be a string or an integer, found the number 1.5"
        );
        let e = parse_line(r#"{"id": "a"}"#, 1).unwrap_err();
        assert!(matches!(
            e,
            ParseError::Question(FieldError::Missing("question"))
        ));
        assert_eq!(e.to_string(), "missing field `question`");
        let e = parse_line(
            r#"{"id": "a", "question": "q", "kind": "k", "sources": ["x", 3]}"#,
            1,
        )
        .unwrap_err();
        assert!(matches!(
            &e,
            ParseError::Field { id, fault: FieldError::EntryNotString { key: "sources", index: 1, found: "a number" } } if id == "a"
        ));
        assert_eq!(
            e.to_string(),
            "`a`: `sources[1]` must be a string, found a number"
        );
        let e = parse_line(r#"{"id": "a", "question": "q", "kind": " "}"#, 1).unwrap_err();
        assert_eq!(e.to_string(), "`a`: `kind` is empty");
        let e =
            parse_line(r#"{"id": "a", "question": "q", "kind": "k", "hard": 1}"#, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`a`: `hard` must be true or false, found a number"
        );
        let e = parse_line("{", 1).unwrap_err();
        assert!(matches!(e, ParseError::NotJson(_)));
        assert!(std::error::Error::source(&e).is_some());
        assert!(e.to_string().starts_with("not JSON: "));
    }

    const GOOD: &str = r#"{"id": "a", "question": "q?", "answer": "x", "must_contain": ["x"], "sources": ["book/a.html"], "kind": "direct"}"#;

    #[test]
    fn bad_lines_keep_their_numbers_and_the_rest_runs() {
        let text = format!(
            "{GOOD}\n\nnot json\n{{\"id\": \"b\", \"question\": \"q\"}}\n{{\"id\": \"c\", \"question\": \"q\", \"answer\": \"\", \"must_contain\": \"x\", \"sources\": [], \"kind\": \"direct\"}}\n"
        );
        let ds = parse(&text).unwrap();
        assert_eq!(ds.items.len(), 1);
        assert_eq!(ds.items[0].line, 1);
        let lines: Vec<usize> = ds.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![3, 4, 5]);
        assert!(ds.errors[0].message.starts_with("not JSON"));
        assert!(ds.errors[1].message.contains("missing field `kind`"));
        assert!(ds.errors[2]
            .message
            .contains("`must_contain` must be a list of strings, found a string"));
    }

    #[test]
    fn empty_strings_and_fractional_ids_are_refused() {
        for (line, want) in [
            (
                GOOD.replace(r#"["x"]"#, r#"["x", ""]"#),
                "`must_contain[1]` is empty",
            ),
            (
                GOOD.replace(r#"["book/a.html"]"#, r#"[" "]"#),
                "`sources[0]` is empty",
            ),
            (GOOD.replace(r#""direct""#, r#""""#), "`kind` is empty"),
            (
                GOOD.replace(r#""id": "a""#, r#""id": 5.5"#),
                "`id` must be a string or an integer, found the number 5.5",
            ),
            (
                GOOD.replace(r#""id": "a""#, r#""id": true"#),
                "`id` must be a string or an integer, found a boolean",
            ),
        ] {
            let first = GOOD.replace(r#""id": "a""#, r#""id": "z""#);
            let ds = parse(&format!("{first}\n{line}\n")).unwrap();
            assert_eq!(ds.errors.len(), 1, "{line}");
            assert_eq!(ds.errors[0].line, 2);
            assert!(
                ds.errors[0].message.contains(want),
                "{}",
                ds.errors[0].message
            );
        }
        let ds = parse(&GOOD.replace(r#""id": "a""#, r#""id": 5"#)).unwrap();
        assert_eq!(ds.items[0].id, "5");
    }

    #[test]
    fn references_may_be_left_out_but_not_mistyped() {
        let ds = parse(
            r#"{"id": "a", "question": "q?", "kind": "direct"}
{"id": "b", "question": "q?", "answer": null, "must_contain": null, "sources": null, "kind": "direct"}
{"id": "c", "question": "q?", "answer": 3, "kind": "direct"}
{"id": "d", "question": "q?", "sources": "book/a.html", "kind": "direct"}"#,
        )
        .unwrap();
        assert_eq!(ds.items.len(), 2);
        for it in &ds.items {
            assert_eq!(it.answer, None);
            assert!(it.must_contain.is_empty() && it.sources.is_empty());
        }
        assert!(ds.errors[0]
            .message
            .contains("`answer` must be a string, found a number"));
        assert!(ds.errors[1]
            .message
            .contains("`sources` must be a list of strings"));
        assert_eq!(parse(GOOD).unwrap().items[0].answer.as_deref(), Some("x"));
    }

    #[test]
    fn duplicate_ids_are_an_error() {
        let e = parse(&format!("{GOOD}\n{GOOD}\n")).unwrap_err().to_string();
        assert!(
            e.contains("line 2: duplicate id `a` (first on line 1)"),
            "{e}"
        );
    }

    #[test]
    fn hard_is_an_optional_boolean_that_wins_over_the_kind() {
        let kinds = vec!["paraphrase".to_string()];
        let ds = parse(&format!(
            "{}\n{}\n{}\n",
            GOOD,
            GOOD.replace(r#""id": "a""#, r#""id": "b", "hard": true"#),
            GOOD.replace(r#""id": "a""#, r#""id": "c", "hard": false"#)
                .replace("direct", "paraphrase"),
        ))
        .unwrap();
        let hard: Vec<bool> = ds.items.iter().map(|i| i.is_hard(&kinds)).collect();
        assert_eq!(hard, [false, true, false]);
        let ds = parse(&GOOD.replace(r#""id": "a""#, r#""id": "a", "hard": 1"#)).unwrap();
        assert!(ds.errors[0]
            .message
            .contains("`hard` must be true or false, found a number"));
    }
}
