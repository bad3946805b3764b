//! Walking a corpus directory and turning each file into chunked [`Document`]s.

use std::path::{Path, PathBuf};

use super::chunk::{chunk_text, ChunkSizes};
use super::extracted::Extracted;
use super::skips::{SkipReason, Skips};
use super::{chunk_id, html, markdown, Document};

/// Extensions (lowercase, without the dot) the loader understands.
pub const EXTENSIONS: &[&str] = &["md", "markdown", "txt", "html", "htm"];

/// A candidate file of the corpus (supported extension, not excluded).
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub rel: String,
    pub path: PathBuf,
}

/// The outcome of walking a corpus: candidates plus what was skipped while walking.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    pub candidates: Vec<Candidate>,
    pub skips: Skips,
    pub warnings: Vec<String>,
    /// Files of a supported extension seen, before `include`/`exclude`.
    pub seen: usize,
}

/// One loaded file: its extracted text and its chunks.
#[derive(Debug, Clone)]
pub struct LoadedFile {
    /// Path relative to the corpus root, `/`-separated.
    pub source: String,
    /// The extracted text.
    pub extracted: Extracted,
    /// The chunks, in order; `chunk_index` is the position in this list.
    pub documents: Vec<Document>,
}

/// Every loaded file of a corpus plus the skip accounting.
#[derive(Debug, Default)]
pub struct LoadedCorpus {
    /// Files that produced at least one chunk, sorted by relative path.
    pub files: Vec<LoadedFile>,
    /// Files seen but not indexed.
    pub skipped: usize,
    /// The files seen but not indexed, with their reasons.
    pub skips: Skips,
    /// Human-readable problems (unreadable, binary, invalid UTF-8, loops, ...).
    pub warnings: Vec<String>,
}

/// Matches a glob-ish pattern: `*` any run of characters, `?` one character.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// `true` if `rel` (a `/`-separated relative path) is excluded by one of `patterns`.
pub(crate) fn is_excluded(rel: &str, patterns: &[String]) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    patterns.iter().any(|p| {
        let p = p.trim_start_matches("./");
        if p.contains('/') {
            glob_match(p, rel)
        } else {
            glob_match(p, name)
        }
    })
}

fn has_supported_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .map(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
        .unwrap_or(false)
}

/// `true` if `rel` is kept by `include`: an empty list keeps everything, else one of
/// the patterns must match (same matching rule as [`is_excluded`]).
pub(crate) fn is_included(rel: &str, include: &[String]) -> bool {
    include.is_empty() || is_excluded(rel, include)
}

/// Walks `root` (following symlinks, with loop detection), sorted by file name, and
/// returns the candidate files: those `include` keeps (all when it is empty) and no
/// `exclude` pattern matches. Left-out files count as skipped without a warning.
pub(crate) fn walk(root: &Path, exclude: &[String], include: &[String]) -> Walk {
    let mut out = Walk::default();
    let walker = walkdir::WalkDir::new(root)
        .follow_links(true)
        .sort_by_file_name();
    for entry in walker {
        let entry = match entry {
            Ok(e) => e,
            Err(err) => {
                let where_ = err
                    .path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| root.display().to_string());
                let why = if err.loop_ancestor().is_some() {
                    "symlink loop".to_string()
                } else {
                    err.to_string()
                };
                out.warnings.push(format!("skipped {where_}: {why}"));
                out.skips.push(where_, SkipReason::Unreadable, Some(why));
                continue;
            }
        };
        if !entry.file_type().is_file() || !has_supported_extension(entry.path()) {
            continue;
        }
        let Ok(rel_path) = entry.path().strip_prefix(root) else {
            continue;
        };
        let mut parts = Vec::new();
        let mut ok = true;
        for c in rel_path.components() {
            match c.as_os_str().to_str() {
                Some(s) => parts.push(s.to_string()),
                None => ok = false,
            }
        }
        out.seen += 1;
        if !ok {
            let why = "file name is not valid UTF-8";
            out.warnings
                .push(format!("skipped {}: {why}", entry.path().display()));
            out.skips.push(
                entry.path().display().to_string(),
                SkipReason::Unreadable,
                Some(why.to_string()),
            );
            continue;
        }
        let rel = parts.join("/");
        if !is_included(&rel, include) {
            out.skips.push(rel, SkipReason::NotIncluded, None);
            continue;
        }
        if is_excluded(&rel, exclude) {
            out.skips.push(rel, SkipReason::Excluded, None);
            continue;
        }
        out.candidates.push(Candidate {
            rel,
            path: entry.path().to_path_buf(),
        });
    }
    out.candidates.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

/// Why a file produced no chunks.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Skip {
    /// Expected (redirect stub, no content): counted, no warning.
    Quiet(SkipReason),
    /// Worth a warning.
    Warn(String),
}

/// Decodes raw bytes and extracts text according to the file's extension.
pub(crate) fn extract_bytes(rel: &str, bytes: &[u8]) -> Result<Extracted, Skip> {
    if bytes.is_empty() {
        return Err(Skip::Warn("empty file".to_string()));
    }
    if bytes[..bytes.len().min(8192)].contains(&0) {
        return Err(Skip::Warn(
            "binary file (NUL byte in the first 8 KiB)".to_string(),
        ));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Skip::Warn(format!("invalid UTF-8 at byte {}", e.valid_up_to())))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let ext = rel.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    let extracted = match ext.as_str() {
        "html" | "htm" => match html::extract_html(text) {
            html::HtmlPage::Content(e) => e,
            html::HtmlPage::Redirect => return Err(Skip::Quiet(SkipReason::Redirect)),
            html::HtmlPage::NoIndex => return Err(Skip::Quiet(SkipReason::NoIndex)),
        },
        "md" | "markdown" => markdown::extract_markdown(text),
        _ => Extracted {
            title: None,
            text: text.to_string(),
            headings: Vec::new(),
        },
    };
    if extracted.text.trim().is_empty() {
        return Err(Skip::Quiet(SkipReason::NoText));
    }
    Ok(extracted)
}

/// Builds the documents of one file from its extracted text.
pub(crate) fn documents_for(
    source: &str,
    extracted: &Extracted,
    sizes: &ChunkSizes,
) -> Vec<Document> {
    let file_name = source.rsplit('/').next().unwrap_or(source);
    let title = extracted
        .title
        .clone()
        .unwrap_or_else(|| file_name.to_string());
    chunk_text(&extracted.text, &extracted.headings, sizes)
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let content = extracted.text[c.start..c.end].to_string();
            let id = chunk_id(source, i, &content);
            let mut m = serde_json::Map::new();
            m.insert("id".into(), id.clone().into());
            m.insert("source".into(), source.into());
            m.insert("title".into(), title.clone().into());
            m.insert(
                "heading_path".into(),
                c.heading_path
                    .into_iter()
                    .map(serde_json::Value::from)
                    .collect(),
            );
            m.insert("chunk_index".into(), i.into());
            m.insert("byte_range".into(), serde_json::json!([c.start, c.end]));
            Document {
                id,
                content,
                metadata: m,
            }
        })
        .collect()
}

/// Reads and extracts one candidate file; `None` if it was skipped (the skip is
/// recorded, and warned about when unexpected).
pub(crate) fn extract_file(
    cand: &Candidate,
    bytes: std::io::Result<Vec<u8>>,
    skips: &mut Skips,
    warnings: &mut Vec<String>,
) -> Option<Extracted> {
    let bytes = match bytes {
        Ok(b) => b,
        Err(e) => {
            warnings.push(format!("skipped {}: unreadable: {e}", cand.path.display()));
            skips.push(&cand.rel, SkipReason::Unreadable, Some(e.to_string()));
            return None;
        }
    };
    match extract_bytes(&cand.rel, &bytes) {
        Ok(extracted) => Some(extracted),
        Err(Skip::Quiet(reason)) => {
            skips.push(&cand.rel, reason, None);
            None
        }
        Err(Skip::Warn(why)) => {
            warnings.push(format!("skipped {}: {why}", cand.path.display()));
            skips.push(&cand.rel, SkipReason::Unreadable, Some(why));
            None
        }
    }
}

/// Chunks an extracted file; `None` (recorded as `no_text`) if it yields no chunk.
pub(crate) fn chunk_file(
    cand: &Candidate,
    extracted: Extracted,
    sizes: &ChunkSizes,
    skips: &mut Skips,
) -> Option<LoadedFile> {
    let documents = documents_for(&cand.rel, &extracted, sizes);
    if documents.is_empty() {
        skips.push(&cand.rel, SkipReason::NoText, None);
        return None;
    }
    Some(LoadedFile {
        source: cand.rel.clone(),
        extracted,
        documents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_basics() {
        assert!(glob_match("print.html", "print.html"));
        assert!(glob_match("*.html", "a.html"));
        assert!(glob_match("a*/b?.md", "abc/d/b1.md"));
        assert!(!glob_match("*.md", "a.html"));
        assert!(is_excluded("book/print.html", &["print.html".into()]));
        assert!(!is_excluded(
            "book/print.html",
            &["other/print.html".into()]
        ));
        assert!(is_excluded("book/x/print.html", &["book/*".into()]));
    }

    #[test]
    fn binary_and_utf8() {
        assert!(matches!(
            extract_bytes("a.txt", b"ab\0cd"),
            Err(Skip::Warn(_))
        ));
        assert!(matches!(
            extract_bytes("a.txt", &[0x66, 0xff, 0x66]),
            Err(Skip::Warn(_))
        ));
        assert!(matches!(extract_bytes("a.txt", b""), Err(Skip::Warn(_))));
        assert_eq!(
            extract_bytes("a.txt", b"   \n"),
            Err(Skip::Quiet(SkipReason::NoText))
        );
        assert!(extract_bytes("a.txt", b"hello").is_ok());
    }
}
