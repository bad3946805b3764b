//! Source files and spans: every value loaded from a spec, prompt or schema file keeps
//! where it came from, so a diagnostic can say `file:line:column` and show the line.
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Index of a file in a [`Sources`] map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u32);

/// A region of a source file. Lines and columns are 1-based; columns count
/// characters (not bytes). `end` is exclusive; an empty span points at one position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    /// The file the span is in.
    pub file: FileId,
    /// First line (1-based).
    pub line: u32,
    /// First column (1-based, in characters).
    pub col: u32,
    /// Last line (1-based, inclusive).
    pub end_line: u32,
    /// Column just past the end on `end_line` (1-based, in characters).
    pub end_col: u32,
}

impl Span {
    /// A span covering one position.
    pub fn point(file: FileId, line: u32, col: u32) -> Span {
        Span {
            file,
            line,
            col,
            end_line: line,
            end_col: col,
        }
    }

    /// The start of a file (line 1, column 1), for faults that concern a whole file.
    pub fn file_start(file: FileId) -> Span {
        Span::point(file, 1, 1)
    }
}

/// One loaded source file: a path as the user named it and its text.
#[derive(Debug)]
pub struct SourceFile {
    /// The path as given (relative paths stay relative, for readable diagnostics).
    pub path: PathBuf,
    /// The file's full text (empty when the file could not be read).
    pub text: Arc<str>,
}

/// All files a validation or run has read: specs, prompts, schemas.
///
/// Diagnostics carry [`FileId`]s into this map; renderers look the text up here.
#[derive(Debug, Default)]
pub struct Sources {
    files: Vec<SourceFile>,
    /// Path → the ids added under it, in order (for [`Sources::find`] and for
    /// sharing an id when the same file is added again with the same text).
    by_path: std::collections::HashMap<PathBuf, Vec<FileId>>,
    memo: Memo,
}

/// Results derived from a file's text (a parsed and checked schema, ...), kept so a
/// file shared by a spec and its variants is processed once.
#[derive(Default)]
struct Memo(std::collections::HashMap<(FileId, &'static str), Box<dyn std::any::Any>>);

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Memo({} entries)", self.0.len())
    }
}

impl Sources {
    /// Creates an empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file and returns its id. The same path added again with the same text
    /// gets the id it had (so what [`Sources::memo`] derived from it is shared: a spec
    /// imported by several specs is parsed once per map); with another text, a new id.
    pub fn add(&mut self, path: impl Into<PathBuf>, text: impl Into<Arc<str>>) -> FileId {
        let path = path.into();
        let text = text.into();
        let ids = self.by_path.entry(path.clone()).or_default();
        if let Some(&id) = ids
            .iter()
            .find(|id| *self.files[id.0 as usize].text == *text)
        {
            return id;
        }
        let id = FileId(self.files.len() as u32);
        ids.push(id);
        self.files.push(SourceFile { path, text });
        id
    }

    /// Returns the result of `compute` for (`file`, `kind`), computing it at most once
    /// per map. `kind` names what is computed (e.g. `"schema"`), so several results
    /// can hang off one file.
    pub fn memo<T: Clone + 'static>(
        &mut self,
        file: FileId,
        kind: &'static str,
        compute: impl FnOnce(&mut Sources) -> T,
    ) -> T {
        if let Some(v) = self
            .memo
            .0
            .get(&(file, kind))
            .and_then(|b| b.downcast_ref::<T>())
        {
            return v.clone();
        }
        let v = compute(self);
        self.memo.0.insert((file, kind), Box::new(v.clone()));
        v
    }

    /// What [`Sources::memo`] computed for (`file`, `kind`), if it did.
    pub fn memoized<T: Clone + 'static>(&self, file: FileId, kind: &'static str) -> Option<T> {
        self.memo
            .0
            .get(&(file, kind))
            .and_then(|b| b.downcast_ref::<T>())
            .cloned()
    }

    /// Finds an already loaded file by path.
    pub fn find(&self, path: &Path) -> Option<FileId> {
        self.by_path.get(path).and_then(|ids| ids.first().copied())
    }

    /// The file behind an id.
    ///
    /// # Panics
    /// Never for ids handed out by this map; an id from another map is a programming error.
    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    /// The text of line `line` (1-based) of a file, without its line break.
    pub fn line_text(&self, id: FileId, line: u32) -> Option<&str> {
        let text = &self.get(id).text;
        text.split('\n')
            .nth(line.checked_sub(1)? as usize)
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
    }

    /// Converts a byte offset in a file to a 1-based (line, column in characters).
    pub fn position_of(&self, id: FileId, offset: usize) -> (u32, u32) {
        line_col(&self.get(id).text, offset)
    }

    /// A span from a byte range of a file's text.
    pub fn span_of_range(&self, id: FileId, range: std::ops::Range<usize>) -> Span {
        let (line, col) = self.position_of(id, range.start);
        let (end_line, end_col) = self.position_of(id, range.end.max(range.start));
        Span {
            file: id,
            line,
            col,
            end_line,
            end_col,
        }
    }
}

/// 1-based (line, column) of a byte offset; offsets past the end or inside a
/// character are clamped to the nearest preceding character boundary.
pub fn line_col(text: &str, offset: usize) -> (u32, u32) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    (line as u32, col as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same file added again with the same text keeps its id (so results memoized
    /// for it are shared); another text, or another path, gets a new one.
    #[test]
    fn a_file_added_again_keeps_its_id() {
        let mut s = Sources::new();
        let a = s.add("graphs/crag.yaml", "x: 1\n");
        let b = s.add("graphs/other.yaml", "x: 1\n");
        assert_eq!(s.add("graphs/crag.yaml", "x: 1\n"), a);
        let changed = s.add("graphs/crag.yaml", "x: 2\n");
        assert!(changed != a && changed != b && a != b);
        assert_eq!(s.add("graphs/crag.yaml", "x: 2\n"), changed);
        assert_eq!(s.find(Path::new("graphs/crag.yaml")), Some(a));
        assert_eq!(&*s.get(changed).text, "x: 2\n");
        let mut n = 0;
        for id in [a, a, changed] {
            s.memo(id, "count", |_| n += 1);
        }
        assert_eq!(n, 2);
    }

    #[test]
    fn line_col_counts_characters() {
        let text = "ab\nçd\nx";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 3), (2, 1));
        assert_eq!(line_col(text, 5), (2, 2)); // after the two-byte ç
        assert_eq!(line_col(text, 4), (2, 1)); // inside ç: clamped
        assert_eq!(line_col(text, 100), (3, 2));
    }
}
