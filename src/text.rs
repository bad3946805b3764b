//! Terminal-safe text: remote content (web-search results, LLM answers, document
//! sources) and state-derived names (JSON keys from `--set` or an LLM) may hold
//! control characters that a terminal would obey (ESC sequences recolour, move the
//! cursor or retitle the window; NUL and CR hide text). Everything printed for people
//! goes through one of these two functions; JSON output stays exact JSON (serde
//! escapes controls itself).
//!
//! A control character is written `\u{XX}` (its code point in hex, like Rust's
//! `char::escape_unicode`): C0 (U+0000–U+001F), DEL (U+007F) and C1 (U+0080–U+009F).
use std::borrow::Cow;
use std::fmt::Write;

fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

fn escape_where(s: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if escape(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Multi-line text (an answer): every control character escaped except newline and
/// tab, which keep their layout meaning. Borrowed when nothing needs escaping.
pub fn escape_text(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| is_control(c) && c != '\n' && c != '\t')
}

/// A single-line field (a source, a key name, an error message part): every control
/// character escaped, newline and tab included, so the value stays on its line.
/// Borrowed when nothing needs escaping.
pub fn escape_line(s: &str) -> Cow<'_, str> {
    escape_where(s, is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_layout_kept_in_text() {
        assert_eq!(
            escape_text("a\u{1b}[31mb\u{0}\n\tc\u{9b}\u{7f}"),
            "a\\u{1b}[31mb\\u{0}\n\tc\\u{9b}\\u{7f}"
        );
        assert_eq!(escape_line("x\ny\tz\r"), "x\\u{a}y\\u{9}z\\u{d}");
        assert!(matches!(escape_line("plain é ✓"), Cow::Borrowed(_)));
    }
}
