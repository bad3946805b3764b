//! results.jsonl: one row per finished (variant, question) pair, appended and flushed
//! as each run ends, by a single writer (one eval per directory: [`super::lock`]).
//!
//! Row schema (one JSON object per line, keys in this order):
//!
//! | key | type | meaning |
//! | --- | --- | --- |
//! | `variant` | string | the arm: `base` or a variant name of the spec; with several specs `STEM` or `STEM:VARIANT` |
//! | `id` | string | question id |
//! | `repeat` | integer | the repeat index, 1 to N−1, of `--repeats N`; absent for the first repeat (and without `--repeats`) |
//! | `kind` | string | question kind |
//! | `status` | string | generated, exhausted, fallback, limit, failed |
//! | `answer` | string or null | the answer |
//! | `sources` | [string] | sources of the output documents |
//! | `path` | [string] | nodes executed, in order |
//! | `iterations` | integer | retrieval passes when the arm retrieves, else passes through the entry node |
//! | `steps` | integer | node executions |
//! | `retrieval` | bool | `false` when the arm's spec has no `retrieve` node (its recall and precision are n/a); absent otherwise |
//! | `retrieved` | [[string]] | per retrieval pass (iteration), the `metadata.source` (else id) of each document returned, in rank order |
//! | `usage` | object | `calls`, `input_tokens`, `output_tokens`, `cost_usd` |
//! | `latency_ms` | number | wall time of the run |
//! | `error` | string or null | why the run failed or was limited |
//! | `metrics` | object | [`RowMetrics`] |
//!
//! Resuming ([`read_for_resume`]) keeps every complete row, drops a torn last line
//! (an eval killed in the middle of a write) by truncating the file to the last
//! newline, and refuses a corrupt line elsewhere.
use crate::runtime::Status;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// An eval's file (results.jsonl, settings.json) that cannot be read, parsed or
/// written. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading failed.
    #[error("cannot read {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// Opening for writing failed.
    #[error("cannot open {}: {error}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// Cutting a torn last line away failed.
    #[error("cannot truncate {}: {error}", path.display())]
    Truncate {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// Writing failed.
    #[error("cannot write {}: {error}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// Replacing the file atomically failed.
    #[error("cannot rewrite {}: {error}", path.display())]
    Rewrite {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// The path exists and is not a regular file.
    #[error("{}: not a regular file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// A line other than the last is not a result row.
    #[error("{}:{line}: not a result row ({message}); fix or remove the line, or start a new --out directory", path.display())]
    BadRow {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// Why it does not parse.
        message: String,
    },
    /// settings.json or shard.json does not hold what ragloop wrote there.
    #[error("{}: not a ragloop eval {} file: {error}", path.display(), path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default())]
    NotSettings {
        /// The file.
        path: PathBuf,
        /// The parse error.
        error: serde_json::Error,
    },
    /// A value could not be serialized (never for rows and settings built by ragloop).
    #[error("{0}")]
    Serialize(#[from] serde_json::Error),
}

/// Reads the JSON file `dir/name` (settings.json, shard.json); `Ok(None)` when it
/// does not exist.
///
/// # Errors
/// The file exists but cannot be read ([`StoreError::Read`]) or does not hold a `T`
/// ([`StoreError::NotSettings`]).
pub(crate) fn read_json_file<T: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
) -> Result<Option<T>, StoreError> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|error| StoreError::NotSettings { path, error }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(StoreError::Read { path, error }),
    }
}

/// Writes `value` as pretty JSON to `dir/name` (a temporary file renamed into place).
///
/// # Errors
/// [`StoreError::Write`] naming the file.
pub(crate) fn write_json_file<T: Serialize>(
    dir: &Path,
    name: &str,
    value: &T,
) -> Result<(), StoreError> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    let text = serde_json::to_string_pretty(value)? + "\n";
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|error| {
            let _ = std::fs::remove_file(&tmp);
            StoreError::Write { path, error }
        })
}

/// LLM usage of a row, and summed over rows (the summary's `totals`).
///
/// JSON: `{"calls", "input_tokens", "output_tokens", "cost_usd"}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// LLM calls (repairs included).
    pub calls: u64,
    /// Prompt and completion tokens and their cost in US dollars (flattened).
    #[serde(flatten)]
    pub tokens: crate::providers::Usage,
}

impl From<&crate::runtime::RunUsage> for Usage {
    fn from(u: &crate::runtime::RunUsage) -> Usage {
        Usage {
            calls: u.calls,
            tokens: u.tokens,
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.calls += o.calls;
        self.tokens += o.tokens;
    }
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Usage>>(iter: I) -> Usage {
        iter.fold(Usage::default(), |mut a, b| {
            a += b;
            a
        })
    }
}

/// Per-question metrics stored in each results.jsonl row (`metrics` key), computed
/// by [`super::metrics::row_metrics`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowMetrics {
    /// Every must_contain term is in the answer (`null` when the item has none).
    pub must_contain_hit: Option<bool>,
    /// Share of must_contain terms in the answer (`null` when the item has none).
    pub must_contain_terms: Option<f64>,
    /// SQuAD token F1 against the reference answer, 0..1.
    pub f1: f64,
    /// recall@k of each retrieval pass, in order (empty when the item has no labelled
    /// source).
    pub recall: Vec<f64>,
    /// Context precision of each retrieval pass (same shape as `recall`).
    pub precision: Vec<f64>,
    /// The run declined to answer (see [`super::metrics::declined`]).
    pub declined: bool,
    /// Status exhausted or limit.
    pub loop_bound: bool,
    /// The judge's faithfulness and answer relevancy ([`super::judge`]); `null` in rows
    /// written before the judge existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<super::verdicts::JudgeRow>,
    /// The document grader's yes/no verdicts of the run, against the labels
    /// ([`super::verdicts::GraderCounts`]); absent when no step graded documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grader: Option<super::verdicts::GraderCounts>,
}

/// One results.jsonl row (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `base` or a variant name.
    pub variant: String,
    /// Question id.
    pub id: String,
    /// Repeat index (0 for the first repeat, not written; see the module docs).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repeat: u32,
    /// Question kind.
    pub kind: String,
    /// Terminal status.
    pub status: Status,
    /// The answer.
    pub answer: Option<String>,
    /// Output document sources.
    #[serde(default)]
    pub sources: Vec<String>,
    /// Nodes executed.
    #[serde(default)]
    pub path: Vec<String>,
    /// Passes through the entry node.
    #[serde(default)]
    pub iterations: u32,
    /// Node executions.
    #[serde(default)]
    pub steps: u32,
    /// Per retrieval pass, the documents' sources in rank order.
    #[serde(default)]
    pub retrieved: Vec<Vec<String>>,
    /// Whether the arm's spec has a `retrieve` node (written only when it has none:
    /// its retrieval metrics are then n/a, not 0).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub retrieval: bool,
    /// LLM usage.
    #[serde(default)]
    pub usage: Usage,
    /// Wall time, ms.
    #[serde(default)]
    pub latency_ms: f64,
    /// Failure or limit reason.
    pub error: Option<String>,
    /// Per-question metrics.
    #[serde(default)]
    pub metrics: RowMetrics,
}

fn yes() -> bool {
    true
}

// serde's skip_serializing_if takes a reference.
fn is_true(b: &bool) -> bool {
    *b
}

// serde's skip_serializing_if takes a reference.
fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Row {
    /// The pair (arm, question, repeat) this row is the result of.
    pub fn key(&self) -> PairKey {
        (self.variant.clone(), self.id.clone(), self.repeat)
    }
}

/// One run of an eval: (arm, question id, repeat index).
pub type PairKey = (String, String, u32);

/// Rows read back from an existing results.jsonl.
#[derive(Debug, Default)]
pub struct Existing {
    /// Complete rows, first occurrence of each (variant, id, repeat), file order.
    pub rows: Vec<Row>,
    /// A torn last line was dropped (its length in bytes).
    pub torn_bytes: Option<usize>,
    /// Later duplicates of a pair that were ignored.
    pub duplicates: usize,
}

/// Most bytes [`non_empty`] reads before deciding.
const SCAN_LIMIT: u64 = 1 << 20;

/// Whether a results file exists and holds anything but whitespace. Reads at most
/// the first MiB (a file, or a device such as `/dev/zero`, whose first MiB is all
/// whitespace counts as non-empty); anything that exists but is not a regular file
/// counts as non-empty too, so it is never silently written over.
pub fn non_empty(path: &Path) -> bool {
    use std::io::Read;
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if !meta.is_file() {
        return true;
    }
    if meta.len() == 0 {
        return false;
    }
    let Ok(f) = File::open(path) else {
        return true;
    };
    let mut buf = [0u8; 8192];
    let mut limited = f.take(SCAN_LIMIT);
    loop {
        match limited.read(&mut buf) {
            Ok(0) => return meta.len() > SCAN_LIMIT,
            Ok(n) => {
                if buf[..n].iter().any(|c| !c.is_ascii_whitespace()) {
                    return true;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}

/// Reads a results.jsonl for `--resume`, truncating a torn last line away so that
/// appending starts on a fresh line. A missing file is an empty result.
///
/// # Errors
/// The file is not a regular file, cannot be read or truncated, or a line other than
/// the last is not a row
/// (`file:line: message`).
pub fn read_for_resume(path: &Path) -> Result<Existing, StoreError> {
    let p = || path.to_path_buf();
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => {
            return Err(StoreError::NotAFile { path: p() });
        }
        _ => {}
    }
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Existing::default()),
        Err(error) => return Err(StoreError::Read { path: p(), error }),
    };
    let mut out = Existing::default();
    let mut seen = HashSet::new();
    let mut start = 0usize;
    let mut lineno = 0usize;
    while start < bytes.len() {
        lineno += 1;
        let end = bytes[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|p| start + p);
        let line = &bytes[start..end.unwrap_or(bytes.len())];
        let parsed = std::str::from_utf8(line)
            .map_err(|e| e.to_string())
            .and_then(|s| {
                if s.trim().is_empty() {
                    Ok(None)
                } else {
                    serde_json::from_str::<Row>(s)
                        .map(Some)
                        .map_err(|e| e.to_string())
                }
            });
        match parsed {
            Ok(Some(row)) => {
                if seen.insert(row.key()) {
                    out.rows.push(row);
                } else {
                    out.duplicates += 1;
                }
            }
            Ok(None) => {}
            Err(e) => {
                // Only the last line may be torn (no newline after it, or nothing
                // but whitespace after it).
                let rest_blank = end.is_none_or(|e| bytes[e..].iter().all(u8::is_ascii_whitespace));
                if !rest_blank {
                    return Err(StoreError::BadRow {
                        path: p(),
                        line: lineno,
                        message: e,
                    });
                }
                let f = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|error| StoreError::Open { path: p(), error })?;
                f.set_len(start as u64)
                    .map_err(|error| StoreError::Truncate { path: p(), error })?;
                out.torn_bytes = Some(line.len());
                return Ok(out);
            }
        }
        match end {
            Some(e) => start = e + 1,
            None => {
                // A complete row without its newline: add it so the next row starts
                // on its own line.
                let mut f = OpenOptions::new()
                    .append(true)
                    .open(path)
                    .map_err(|error| StoreError::Open { path: p(), error })?;
                f.write_all(b"\n")
                    .map_err(|error| StoreError::Write { path: p(), error })?;
                break;
            }
        }
    }
    Ok(out)
}

/// Replaces the content of results.jsonl with `rows` (one line each), atomically:
/// written to a temporary file in the same directory, synced, then renamed over
/// `path`, so a kill leaves either the old file or the new one.
///
/// # Errors
/// [`StoreError::Rewrite`] naming the file.
pub fn rewrite(path: &Path, rows: &[Row]) -> Result<(), StoreError> {
    let name = path.file_name().map_or_else(
        || "results.jsonl".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let mut text = Vec::new();
    for r in rows {
        serde_json::to_writer(&mut text, r)?;
        text.push(b'\n');
    }
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|error| {
        let _ = std::fs::remove_file(&tmp);
        StoreError::Rewrite {
            path: path.to_path_buf(),
            error,
        }
    })
}

/// Appends rows to results.jsonl, one line each, flushed to the OS before
/// [`Writer::append`] returns.
///
/// The file is always opened with `O_APPEND` and each row is written with one
/// `write` of the whole line, so rows stay whole under any interleaving, even from
/// two writers that bypassed the directory lock ([`super::lock`]): the OS puts each
/// write at the end of the file, never over another one.
pub struct Writer {
    file: File,
    path: std::path::PathBuf,
}

impl Writer {
    /// Opens `path` for appending (`truncate`: emptied first).
    ///
    /// # Errors
    /// A message naming the file.
    pub fn open(path: &Path, truncate: bool) -> Result<Writer, StoreError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|error| StoreError::Open {
                path: path.to_path_buf(),
                error,
            })?;
        if truncate {
            file.set_len(0).map_err(|error| StoreError::Truncate {
                path: path.to_path_buf(),
                error,
            })?;
        }
        Ok(Writer {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Writes one row as a single `write` of the whole line (the OS may, rarely,
    /// write a prefix only, e.g. on a full disk: the rest follows at once).
    ///
    /// # Errors
    /// A message naming the file.
    pub fn append(&mut self, row: &Row) -> Result<(), StoreError> {
        let mut line = serde_json::to_vec(row)?;
        line.push(b'\n');
        let err = |error: std::io::Error| StoreError::Write {
            path: self.path.clone(),
            error,
        };
        let mut done = loop {
            match self.file.write(&line) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(err(e)),
            }
        };
        while done < line.len() {
            match self.file.write(&line[done..]) {
                Ok(0) => return Err(err(std::io::ErrorKind::WriteZero.into())),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(err(e)),
            }
        }
        self.file.flush().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str) -> Row {
        Row {
            variant: "base".into(),
            id: id.into(),
            repeat: 0,
            kind: "direct".into(),
            status: Status::Generated,
            answer: Some("a".into()),
            sources: vec![],
            path: vec![],
            iterations: 1,
            steps: 1,
            retrieved: vec![],
            retrieval: true,
            usage: Usage::default(),
            latency_ms: 1.0,
            error: None,
            metrics: RowMetrics::default(),
        }
    }

    #[test]
    fn a_row_of_an_older_results_file_reads_and_writes_back_byte_for_byte() {
        // The usage object (calls + the flattened token counts) keeps its keys and order.
        let line = r#"{"variant":"base","id":"rb-001","kind":"direct","status":"generated","answer":"a","sources":["x.html"],"path":["retrieve"],"iterations":1,"steps":4,"retrieved":[["x.html"]],"usage":{"calls":6,"input_tokens":4407,"output_tokens":246,"cost_usd":0.25},"latency_ms":16.5,"error":null,"metrics":{"must_contain_hit":true,"must_contain_terms":1.0,"f1":0.5,"recall":[1.0],"precision":[1.0],"declined":false,"loop_bound":false}}"#;
        let row: Row = serde_json::from_str(line).unwrap();
        assert_eq!(row.usage.calls, 6);
        assert_eq!(row.usage.tokens.input_tokens, 4407);
        assert_eq!(serde_json::to_string(&row).unwrap(), line);
        // Integer costs (hand-written files) read too.
        let u: Usage =
            serde_json::from_str(r#"{"calls":1,"input_tokens":2,"output_tokens":3,"cost_usd":0}"#)
                .unwrap();
        assert_eq!(u.tokens.cost_usd, 0.0);
    }

    #[test]
    fn torn_last_line_is_dropped_and_appending_continues_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("results.jsonl");
        let mut w = Writer::open(&p, true).unwrap();
        w.append(&row("a")).unwrap();
        w.append(&row("b")).unwrap();
        drop(w);
        let full = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, &full[..full.len() - 10]).unwrap();
        let ex = read_for_resume(&p).unwrap();
        assert_eq!(ex.rows.len(), 1);
        assert!(ex.torn_bytes.is_some());
        let mut w = Writer::open(&p, false).unwrap();
        w.append(&row("b")).unwrap();
        let ex = read_for_resume(&p).unwrap();
        assert_eq!(
            ex.rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(ex.torn_bytes, None);
    }

    #[test]
    fn rows_stay_whole_when_two_writers_interleave() {
        // Two writers on one file (as two evals that bypassed the lock), the second
        // opened with truncate like a fresh eval: every line is a whole row, none
        // written over another.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("results.jsonl");
        let mut a = Writer::open(&p, true).unwrap();
        let mut b = Writer::open(&p, true).unwrap();
        let ta = std::thread::spawn(move || {
            for i in 0..300 {
                a.append(&row(&format!("a{i}"))).unwrap();
            }
        });
        for i in 0..300 {
            b.append(&row(&format!("b{i}"))).unwrap();
        }
        ta.join().unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let ids: HashSet<String> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<Row>(l)
                    .unwrap_or_else(|e| panic!("spliced line {l:?}: {e}"))
                    .id
            })
            .collect();
        assert_eq!(ids.len(), 600, "every row kept");
    }

    #[test]
    fn non_empty_reads_only_a_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("results.jsonl");
        assert!(!non_empty(&p));
        std::fs::write(&p, "").unwrap();
        assert!(!non_empty(&p));
        std::fs::write(&p, " \n\n").unwrap();
        assert!(!non_empty(&p));
        std::fs::write(&p, "\n{}").unwrap();
        assert!(non_empty(&p));
        // An endless device is decided from its first bytes, not read to the end.
        #[cfg(unix)]
        {
            let link = dir.path().join("zero.jsonl");
            std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
            assert!(non_empty(&link));
            assert!(read_for_resume(&link)
                .unwrap_err()
                .to_string()
                .contains("not a regular file"));
        }
        // A directory is not silently treated as empty.
        assert!(non_empty(dir.path()));
    }

    #[test]
    fn rewrite_replaces_the_rows() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("results.jsonl");
        let mut w = Writer::open(&p, true).unwrap();
        for id in ["a", "b", "c"] {
            w.append(&row(id)).unwrap();
        }
        drop(w);
        rewrite(&p, &[row("a"), row("c")]).unwrap();
        let ex = read_for_resume(&p).unwrap();
        assert_eq!(
            ex.rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["a", "c"]
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn corrupt_middle_line_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("results.jsonl");
        let good = serde_json::to_string(&row("a")).unwrap();
        std::fs::write(&p, format!("{good}\n{{oops\n{good}\n")).unwrap();
        let e = read_for_resume(&p).unwrap_err().to_string();
        assert!(
            e.ends_with("") && e.contains("results.jsonl:2: not a result row"),
            "{e}"
        );
    }
}
