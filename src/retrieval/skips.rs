//! Why a corpus file was not indexed: [`SkipReason`], one [`SkippedFile`] per file,
//! collected in [`Skips`] and reported by [`super::BuildReport`] (and `ragloop index`).
use std::collections::BTreeMap;

/// Why a file of the corpus produced no chunks.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Matched an `exclude` pattern.
    Excluded,
    /// Matched no `include` pattern (when `include` is set).
    NotIncluded,
    /// An HTML redirect stub (`<meta http-equiv="refresh">` and no `<main>`).
    Redirect,
    /// An HTML page without `<main>` marked `robots: noindex` (a sidebar frame).
    NoIndex,
    /// No text once extracted.
    NoText,
    /// Hygiene: a placeholder page, almost all of whose text is template text shared
    /// with other pages ("no longer distributed", "this is an old link").
    Placeholder,
    /// Hygiene: the same extracted text as another file (kept: the first by path).
    Duplicate,
    /// Hygiene: a page that repeats the paragraphs of several other pages (an
    /// all-in-one page such as mdBook's `print.html`).
    Aggregate,
    /// Empty, binary, invalid UTF-8, unreadable, a symlink loop or a non-UTF-8 name
    /// (these are also warned about).
    Unreadable,
}

impl SkipReason {
    /// The reason as printed (`ragloop index`, manifest): `excluded`, `not_included`,
    /// `redirect`, `noindex`, `no_text`, `placeholder`, `duplicate`, `aggregate`,
    /// `unreadable`.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Excluded => "excluded",
            SkipReason::NotIncluded => "not_included",
            SkipReason::Redirect => "redirect",
            SkipReason::NoIndex => "noindex",
            SkipReason::NoText => "no_text",
            SkipReason::Placeholder => "placeholder",
            SkipReason::Duplicate => "duplicate",
            SkipReason::Aggregate => "aggregate",
            SkipReason::Unreadable => "unreadable",
        }
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One file that was not indexed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SkippedFile {
    /// Path relative to the corpus root, `/`-separated (or the full path when it is
    /// not under the root or not UTF-8).
    pub path: String,
    /// Why.
    pub reason: SkipReason,
    /// More about it, when there is more to say (`same text as index.html`, the
    /// warning's text, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The files skipped so far, in the order they were found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skips {
    /// One entry per skipped file.
    pub files: Vec<SkippedFile>,
}

impl Skips {
    /// Records a skipped file.
    pub fn push(&mut self, path: impl Into<String>, reason: SkipReason, detail: Option<String>) {
        self.files.push(SkippedFile {
            path: path.into(),
            reason,
            detail,
        });
    }

    /// Number of skipped files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// `true` when nothing was skipped.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Skipped files counted by reason.
    pub fn by_reason(&self) -> BTreeMap<SkipReason, usize> {
        let mut out = BTreeMap::new();
        for f in &self.files {
            *out.entry(f.reason).or_insert(0) += 1;
        }
        out
    }
}
