//! Where a byte range of a YAML scalar's value lies in the spec file: plain and
//! quoted single-line scalars, and literal (`|`) / folded (`>`) block scalars line by
//! line. When the file text does not match the value (an alias, a merged variant, a
//! multi-line flow scalar), the scalar's own span is returned.
use crate::spec::source::{Sources, Span};

/// The span of `range` (bytes of `value`, the decoded scalar) inside the spec file,
/// given `at`, the scalar's span. Falls back to `at`.
pub fn token_span(sources: &Sources, at: Span, value: &str, range: std::ops::Range<usize>) -> Span {
    let text = &sources.get(at.file).text;
    let start = locate(text, at, value, range.start);
    let end = locate(text, at, value, range.end.max(range.start));
    match (start, end) {
        (Some((line, col)), Some((end_line, end_col))) => Span {
            file: at.file,
            line,
            col,
            end_line,
            end_col,
        },
        (Some((line, col)), None) => Span::point(at.file, line, col),
        _ => at,
    }
}

/// Byte offset of the 1-based (line, column in characters) position.
fn offset_of(text: &str, line: u32, col: u32) -> Option<usize> {
    let mut off = 0usize;
    for _ in 1..line {
        off += text.get(off..)?.find('\n')? + 1;
    }
    let rest = text.get(off..)?;
    let mut chars = rest.char_indices();
    for _ in 1..col {
        chars.next()?;
    }
    Some(off + chars.next().map_or(rest.len(), |(i, _)| i))
}

/// (line, column) of byte `offset` of `value` in `text`.
fn locate(text: &str, at: Span, value: &str, offset: usize) -> Option<(u32, u32)> {
    let before = value.get(..offset)?;
    let start = offset_of(text, at.line, at.col)?;
    let src = text.get(start..)?;
    let first = src.chars().next()?;
    match first {
        '|' | '>' => block(src, at, before),
        '"' | '\'' => {
            if before.contains('\n') {
                return None;
            }
            let mut cols = 1u32; // the opening quote
            let mut s = src[1..].chars().peekable();
            for c in before.chars() {
                match s.next()? {
                    '\'' if first == '\'' && s.peek() == Some(&'\'') => {
                        s.next();
                        cols += 2;
                    }
                    '\\' if first == '"' => {
                        let extra = match s.next()? {
                            'x' => 2,
                            'u' => 4,
                            'U' => 8,
                            _ => 0,
                        };
                        for _ in 0..extra {
                            s.next()?;
                        }
                        cols += 2 + extra;
                    }
                    '\n' => return None,
                    got => {
                        if got != c {
                            return None;
                        }
                        cols += 1;
                    }
                }
            }
            Some((at.line, at.col + cols))
        }
        _ if !before.contains('\n') => {
            if !src.starts_with(before) {
                return None;
            }
            Some((at.line, at.col + before.chars().count() as u32))
        }
        // A block scalar whose span starts at its first content line.
        _ => content_lines(src.split('\n'), at.line, at.col - 1, before),
    }
}

/// Line `k` of the value is `lines[k]` minus `indent` columns of spaces.
fn content_lines<'a>(
    lines: impl Iterator<Item = &'a str>,
    first_line: u32,
    indent: u32,
    before: &str,
) -> Option<(u32, u32)> {
    let k = before.matches('\n').count();
    let col_in_line = before.rsplit('\n').next().unwrap_or("");
    let mut lines = lines;
    let line = if k == 0 {
        // `lines` starts at the span's column (the first line is already unindented).
        lines.next()?.to_string()
    } else {
        let l = lines.nth(k)?;
        l.get(indent as usize..)?.to_string()
    };
    if !line.starts_with(col_in_line) {
        return None;
    }
    let col = indent + 1;
    Some((
        first_line + k as u32,
        col + col_in_line.chars().count() as u32,
    ))
}

/// A block scalar: the value's line `k` is the `k`-th content line after the header
/// (literal style keeps lines; a folded scalar's lines are matched by their text).
fn block(src: &str, at: Span, before: &str) -> Option<(u32, u32)> {
    let mut lines = src.split('\n');
    lines.next()?; // the header: `|`, `|-`, `>2`, ...
    let content: Vec<&str> = lines.collect();
    let indent = content
        .iter()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start_matches(' ').len())?;
    // Literal style: the k-th value line is the k-th content line.
    let k = before.matches('\n').count();
    let col_in_line = before.rsplit('\n').next().unwrap_or("");
    let body = content.get(k)?.get(indent..).unwrap_or("");
    if !body.starts_with(col_in_line) {
        return None;
    }
    Some((
        at.line + 1 + k as u32,
        indent as u32 + 1 + col_in_line.chars().count() as u32,
    ))
}
