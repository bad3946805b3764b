//! Where a template's unclosed construct opens. minijinja reports an unclosed
//! `{% if %}` (or an unterminated `{{`) at the end of the template, where nothing can
//! be fixed; [`unclosed_at`] finds the opening tag instead by scanning the template's
//! tags in order: comments, `{{ … }}` and `{% … %}` (string literals inside tags
//! honoured, `{% raw %}` bodies skipped), with a stack of the blocks still open.
use std::ops::Range;

/// Block tags that open a block, with the tag that closes it. `set` opens a block only
/// in its block form (`{% set x %}…{% endset %}`, no `=`).
const BLOCKS: &[(&str, &str)] = &[
    ("if", "endif"),
    ("for", "endfor"),
    ("with", "endwith"),
    ("macro", "endmacro"),
    ("filter", "endfilter"),
    ("call", "endcall"),
    ("set", "endset"),
    ("block", "endblock"),
    ("autoescape", "endautoescape"),
];

/// The byte range (in `text`) of the opening of what is left unclosed at the end of
/// the template: an unterminated `{{`, `{%` or `{#` (its two delimiter bytes), else the
/// whole `{% … %}` tag of the innermost block never closed. `None` when everything is
/// closed, or when the block tags do not nest (an end tag closing another block: the
/// parser's own error position is the right one then).
pub fn unclosed_at(text: &str) -> Option<Range<usize>> {
    let bytes = text.as_bytes();
    let mut open: Vec<(&'static str, Range<usize>)> = Vec::new();
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] != b'{' {
            i += 1;
            continue;
        }
        match bytes[i + 1] {
            b'#' => match text[i + 2..].find("#}") {
                Some(r) => i += 2 + r + 2,
                None => return Some(i..i + 2),
            },
            b'{' => match tag_end(text, i + 2, "}}") {
                Some(end) => i = end,
                None => return Some(i..i + 2),
            },
            b'%' => {
                let Some(end) = tag_end(text, i + 2, "%}") else {
                    return Some(i..i + 2);
                };
                let (name, rest) = tag_name(&text[i + 2..end - 2]);
                if name == "raw" {
                    match find_tag(text, end, "endraw") {
                        Some(after) => i = after,
                        None => return Some(i..end),
                    }
                    continue;
                }
                if let Some((_, close)) = BLOCKS.iter().find(|(o, _)| *o == name) {
                    if name != "set" || !has_assignment(rest) {
                        open.push((close, i..end));
                    }
                } else if name.starts_with("end") {
                    match open.last() {
                        Some((close, _)) if *close == name => {
                            open.pop();
                        }
                        _ => return None,
                    }
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    open.pop().map(|(_, r)| r)
}

/// The offset just past `close`, searching from `from` and skipping string literals.
fn tag_end(text: &str, from: usize, close: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < bytes.len() && bytes[i] != q {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            _ if bytes[i..].starts_with(close.as_bytes()) => return Some(i + close.len()),
            _ => i += 1,
        }
    }
    None
}

/// A block tag's name and the rest of its inside (whitespace-control marks removed).
fn tag_name(inside: &str) -> (&str, &str) {
    let s = inside.trim_start_matches(['-', '+', '~']).trim_start();
    let n = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (&s[..n], &s[n..])
}

/// Whether a `set` tag's rest has an `=` outside string literals (`{% set x = 1 %}`).
fn has_assignment(rest: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in rest.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '=' => return true,
            None => {}
        }
    }
    false
}

/// The offset past the first `{% name %}` tag at or after `from` (what lies between is
/// not read as tags: a `{% raw %}` body).
fn find_tag(text: &str, from: usize, name: &str) -> Option<usize> {
    let mut pos = from;
    while let Some(rel) = text[pos..].find("{%") {
        let start = pos + rel;
        let inside = text[start + 2..]
            .trim_start_matches(['-', '+', '~'])
            .trim_start();
        if tag_name(inside).0 == name {
            return tag_end(text, start + 2, "%}");
        }
        pos = start + 2;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::unclosed_at;

    fn at(text: &str) -> Option<&str> {
        unclosed_at(text).map(|r| &text[r])
    }

    #[test]
    fn finds_the_innermost_unclosed_block() {
        assert_eq!(at("a {% if x %} b"), Some("{% if x %}"));
        assert_eq!(
            at("{% for d in ds %}{% if d %}x{% endif %}\n"),
            Some("{% for d in ds %}")
        );
        assert_eq!(
            at("{% with a = 1 %}{%- if a -%}{% for b in c %}{% endfor %}"),
            Some("{%- if a -%}")
        );
        assert_eq!(at("{% set x %}abc"), Some("{% set x %}"));
        assert_eq!(at("{% macro m(a) %}{{ a }}"), Some("{% macro m(a) %}"));
        assert_eq!(at("{% filter upper %}x"), Some("{% filter upper %}"));
        assert_eq!(at("x {{ y"), Some("{{"));
    }

    #[test]
    fn closed_or_misnested_templates_have_none() {
        assert_eq!(at("{% if a %}{% set x = 1 %}{% else %}{% endif %}"), None);
        assert_eq!(at("{% set x %}a{% endset %}{{ x }}"), None);
        assert_eq!(
            at("{{ '{% if' }} {# {% for #} {% raw %}{% if {% endraw %}"),
            None
        );
        assert_eq!(at("{% set s = '%}' %}{% if s %}{% endif %}"), None);
        assert_eq!(at("{% if a %}{% for b in c %}{% endif %}"), None);
    }
}
