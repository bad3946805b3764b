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

// A reference list left out (or null) is empty: the metrics that read it are n/a.
fn string_list(m: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, v)| match v.as_str() {
                Some(s) if s.trim().is_empty() => Err(format!("`{key}[{i}]` is empty")),
                Some(s) => Ok(s.to_string()),
                None => Err(format!(
                    "`{key}[{i}]` must be a string, found {}",
                    type_name(v)
                )),
            })
            .collect(),
        Some(v) => Err(format!(
            "`{key}` must be a list of strings, found {}",
            type_name(v)
        )),
    }
}

fn string(m: &Map<String, Value>, key: &str) -> Result<String, String> {
    match m.get(key) {
        None => Err(format!("missing field `{key}`")),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(format!("`{key}` must be a string, found {}", type_name(v))),
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
/// What is wrong with the line (not JSON, not an object, a missing field, a field of
/// the wrong type, an empty id, question, kind, or `must_contain` / `sources` entry).
pub fn parse_line(line: &str, lineno: usize) -> Result<Item, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(m) = v else {
        return Err(format!("expected a JSON object, found {}", type_name(&v)));
    };
    let id = match m.get("id") {
        None => return Err("missing field `id`".into()),
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::String(_)) => return Err("`id` is empty".into()),
        Some(Value::Number(n)) if n.is_u64() || n.is_i64() => n.to_string(),
        Some(Value::Number(n)) => {
            return Err(format!(
                "`id` must be a string or an integer, found the number {n}"
            ))
        }
        Some(v) => {
            return Err(format!(
                "`id` must be a string or an integer, found {}",
                type_name(v)
            ))
        }
    };
    let question = string(&m, "question")?;
    if question.trim().is_empty() {
        return Err(format!("`{id}`: the question is empty"));
    }
    let answer = match m.get("answer") {
        None | Some(Value::Null) => None,
        Some(_) => Some(string(&m, "answer").map_err(|e| format!("`{id}`: {e}"))?),
    };
    Ok(Item {
        answer,
        must_contain: string_list(&m, "must_contain").map_err(|e| format!("`{id}`: {e}"))?,
        sources: string_list(&m, "sources").map_err(|e| format!("`{id}`: {e}"))?,
        kind: string(&m, "kind")
            .and_then(|k| {
                if k.trim().is_empty() {
                    Err("`kind` is empty".into())
                } else {
                    Ok(k)
                }
            })
            .map_err(|e| format!("`{id}`: {e}"))?,
        hard: match m.get("hard") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(v) => {
                return Err(format!(
                    "`{id}`: `hard` must be true or false, found {}",
                    type_name(v)
                ))
            }
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
            Err(message) => ds.errors.push(LineError {
                line: lineno,
                message,
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
