//! Variable paths as written in a template or expression: the tags of a template,
//! and in an expression's text every `root(.attr|[subscript])*` that reads a
//! variable (filter and test names, keywords, function names, keyword arguments and
//! assignment targets left out). A scanner over bytes, strings skipped; it never
//! panics and never fails, whatever the text: an unparsable piece reads nothing.
use std::ops::Range;

/// Words that are never variables: operators, literals and statement keywords.
const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "not",
    "in",
    "is",
    "if",
    "elif",
    "else",
    "endif",
    "for",
    "endfor",
    "set",
    "endset",
    "with",
    "endwith",
    "true",
    "false",
    "none",
    "True",
    "False",
    "None",
    "recursive",
    "do",
];

/// A subscript or attribute after the root of a path.
#[derive(Debug)]
pub(super) enum Sub {
    /// `.name`
    Attr(String),
    /// `[3]`, `[-1]`
    Index(i64),
    /// `['name']`
    Key(String),
    /// `[other.path]`
    Path(Box<PathExpr>),
}

#[derive(Debug)]
pub(super) struct Seg {
    pub(super) sub: Sub,
    /// Bytes of the segment as written (`.b`, `[0]`).
    pub(super) text: Range<usize>,
}

/// A variable path as written: a root name and its segments.
#[derive(Debug)]
pub(super) struct PathExpr {
    pub(super) root: Range<usize>,
    pub(super) segs: Vec<Seg>,
    /// Followed by `is ...` or `| default`: undefined at the last step is allowed.
    pub(super) guarded: bool,
}

impl PathExpr {
    pub(super) fn range(&self) -> Range<usize> {
        self.root.start..self.segs.last().map_or(self.root.end, |s| s.text.end)
    }
}

/// A template tag: the text between its delimiters.
pub(super) struct Tag {
    pub(super) inner: Range<usize>,
    pub(super) statement: bool,
}

/// Scans one source text.
pub(super) struct Scanner<'a> {
    pub(super) src: &'a str,
    bytes: &'a [u8],
    mask: Vec<bool>,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The text of a quoted string literal without escapes (`'text'` or `"text"`).
fn string_literal(s: &str) -> Option<&str> {
    let q = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = s.strip_prefix(q)?.strip_suffix(q)?;
    (s.len() >= 2 && !inner.contains(q) && !inner.contains('\\')).then_some(inner)
}

impl<'a> Scanner<'a> {
    pub(super) fn new(src: &'a str) -> Self {
        Scanner {
            src,
            bytes: src.as_bytes(),
            mask: super::code_mask(src),
        }
    }

    fn ident_end(&self, mut i: usize) -> usize {
        while i < self.bytes.len() && is_ident(self.bytes[i]) {
            i += 1;
        }
        i
    }

    fn skip_ws(&self, mut i: usize, end: usize) -> usize {
        while i < end && self.bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    }

    /// The word (identifier) at `i`, if any.
    pub(super) fn word_at(&self, i: usize, end: usize) -> Option<&'a str> {
        (i < end && is_ident_start(self.bytes[i])).then(|| &self.src[i..self.ident_end(i).min(end)])
    }

    /// Every tag of a template, `{% raw %}` blocks and comments skipped.
    pub(super) fn tags(&self) -> Vec<Tag> {
        let mut out = Vec::new();
        let src = self.src;
        let mut pos = 0;
        while let Some(rel) = src.get(pos..).and_then(|s| s.find('{')) {
            let open = pos + rel;
            let (close, statement) = match src.get(open..open + 2) {
                Some("{{") => ("}}", false),
                Some("{%") => ("%}", true),
                Some("{#") => {
                    pos = src[open + 2..]
                        .find("#}")
                        .map_or(src.len(), |e| open + 4 + e);
                    continue;
                }
                _ => {
                    pos = open + 1;
                    continue;
                }
            };
            let start = open + 2;
            let end = self.find_close(start, close);
            out.push(Tag {
                inner: start..end,
                statement,
            });
            pos = (end + 2).min(src.len());
            if statement && self.word_at(self.skip_marks(start, end), end) == Some("raw") {
                pos = src[pos..].find("endraw").map_or(src.len(), |e| pos + e);
            }
        }
        out
    }

    /// The end of a tag: the first `close` outside a string literal.
    fn find_close(&self, start: usize, close: &str) -> usize {
        let mut quote: Option<u8> = None;
        let mut i = start;
        while i < self.bytes.len() {
            let b = self.bytes[i];
            match quote {
                Some(_) if b == b'\\' => i += 1,
                Some(q) if b == q => quote = None,
                Some(_) => {}
                None if b == b'"' || b == b'\'' => quote = Some(b),
                None if self.src.get(i..i + 2) == Some(close) => return i,
                None => {}
            }
            i += 1;
        }
        self.bytes.len()
    }

    /// Skips whitespace-control marks and blanks at the start of a tag.
    pub(super) fn skip_marks(&self, mut i: usize, end: usize) -> usize {
        while i < end && matches!(self.bytes[i], b'-' | b'+' | b'~') {
            i += 1;
        }
        self.skip_ws(i, end)
    }

    /// The paths read by one tag.
    pub(super) fn paths_in(&self, tag: &Tag, out: &mut Vec<PathExpr>) {
        let end = tag.inner.end;
        let mut start = self.skip_marks(tag.inner.start, end);
        if tag.statement {
            let Some(kw) = self.word_at(start, end) else {
                return;
            };
            start += kw.len();
            match kw {
                // Skip the targets: the expression starts after the top-level `in`.
                "for" => match self.find_word(start, end, "in") {
                    Some(at) => start = at + 2,
                    None => return,
                },
                // Assignments: the expression starts after the first `=`.
                "set" | "with" => match self.find_assign(start, end) {
                    Some(at) => start = at + 1,
                    None => return,
                },
                "if" | "elif" | "do" => {}
                _ => return,
            }
        }
        self.paths_in_expr(start..end, out);
    }

    /// The first whole word `w` in code between `start` and `end`.
    pub(super) fn find_word(&self, start: usize, end: usize, w: &str) -> Option<usize> {
        (start..end).find(|&i| {
            self.mask[i]
                && self.bytes[i..end].starts_with(w.as_bytes())
                && (i == 0 || !is_ident(self.bytes[i - 1]))
                && self.bytes.get(i + w.len()).is_none_or(|&c| !is_ident(c))
        })
    }

    /// The first `=` in code that is not part of `==`, `!=`, `<=` or `>=`.
    fn find_assign(&self, start: usize, end: usize) -> Option<usize> {
        (start..end).find(|&i| {
            self.mask[i]
                && self.bytes[i] == b'='
                && self.bytes.get(i + 1) != Some(&b'=')
                && (i == 0 || !matches!(self.bytes[i - 1], b'=' | b'!' | b'<' | b'>'))
        })
    }

    /// The paths of an expression's text, in order.
    pub(super) fn paths_in_expr(&self, region: Range<usize>, out: &mut Vec<PathExpr>) {
        #[derive(PartialEq)]
        enum Tok<'s> {
            Word(&'s str),
            Punct(u8),
        }
        let end = region.end.min(self.bytes.len());
        let mut last: [Option<Tok>; 2] = [None, None];
        fn push<'s>(last: &mut [Option<Tok<'s>>; 2], t: Tok<'s>) {
            last[1] = last[0].take();
            last[0] = Some(t);
        }
        let mut i = region.start;
        while i < end {
            let b = self.bytes[i];
            if !self.mask[i] {
                while i < end && !self.mask[i] {
                    i += 1;
                }
                push(&mut last, Tok::Punct(b'"'));
                continue;
            }
            if b.is_ascii_whitespace() {
                i += 1;
                continue;
            }
            if b.is_ascii_digit() {
                while i < end && (is_ident(self.bytes[i]) || self.bytes[i] == b'.') {
                    i += 1;
                }
                push(&mut last, Tok::Punct(b'0'));
                continue;
            }
            if !is_ident_start(b) {
                push(&mut last, Tok::Punct(b));
                i += 1;
                continue;
            }
            let word_end = self.ident_end(i).min(end);
            let word = &self.src[i..word_end];
            let after_dot = i > 0 && self.bytes[i - 1] == b'.';
            let filter = last[0] == Some(Tok::Punct(b'|'));
            let test = last[0] == Some(Tok::Word("is"))
                || (last[0] == Some(Tok::Word("not")) && last[1] == Some(Tok::Word("is")));
            if after_dot || filter || test || KEYWORDS.contains(&word) {
                push(&mut last, Tok::Word(word));
                i = word_end;
                continue;
            }
            let mut p = self.parse_path(i, end);
            let pend = p.range().end;
            let next = self.skip_ws(pend, end);
            let keep = match self.bytes.get(next).filter(|_| next < end) {
                // A call: drop the method name (`x.items()` reads `x`); a bare
                // function (`range(3)`) reads nothing.
                Some(b'(') => p.segs.pop().is_some(),
                // A keyword argument or an assignment target.
                Some(b'=') => self.bytes.get(next + 1) == Some(&b'='),
                _ => true,
            };
            if keep {
                p.guarded = self.word_at(next, end) == Some("is")
                    || (self.bytes.get(next) == Some(&b'|')
                        && matches!(
                            self.word_at(self.skip_ws(next + 1, end), end),
                            Some("default" | "d")
                        ));
                out.push(p);
            }
            push(&mut last, Tok::Punct(b'x'));
            i = pend.max(word_end);
        }
    }

    /// Parses `root(.attr|[sub])*` from the identifier at `start`.
    fn parse_path(&self, start: usize, end: usize) -> PathExpr {
        let root = start..self.ident_end(start).min(end);
        let mut segs = Vec::new();
        let mut i = root.end;
        loop {
            if i + 1 < end && self.bytes[i] == b'.' && is_ident_start(self.bytes[i + 1]) {
                let e = self.ident_end(i + 1).min(end);
                segs.push(Seg {
                    sub: Sub::Attr(self.src[i + 1..e].to_string()),
                    text: i..e,
                });
                i = e;
                continue;
            }
            if i < end && self.bytes[i] == b'[' && self.mask[i] {
                let Some(close) = self.matching(i, end) else {
                    break;
                };
                let inner = self.src[i + 1..close].trim();
                let sub = if let Ok(n) = inner.parse::<i64>() {
                    Sub::Index(n)
                } else if let Some(s) = string_literal(inner) {
                    Sub::Key(s.to_string())
                } else if let Some(p) = self.whole_path(i + 1, close) {
                    Sub::Path(Box::new(p))
                } else {
                    break;
                };
                segs.push(Seg {
                    sub,
                    text: i..close + 1,
                });
                i = close + 1;
                continue;
            }
            break;
        }
        PathExpr {
            root,
            segs,
            guarded: false,
        }
    }

    /// The `]` closing the `[` at `open`.
    fn matching(&self, open: usize, end: usize) -> Option<usize> {
        let mut depth = 0i32;
        for i in open..end {
            if !self.mask[i] {
                continue;
            }
            match self.bytes[i] {
                b'[' | b'(' | b'{' => depth += 1,
                b']' | b')' | b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return (self.bytes[i] == b']').then_some(i);
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// The text between `start` and `end` as one path, if it is exactly one.
    pub(super) fn whole_path(&self, start: usize, end: usize) -> Option<PathExpr> {
        let a = self.skip_ws(start, end);
        let w = self.word_at(a, end)?;
        if KEYWORDS.contains(&w) {
            return None;
        }
        let p = self.parse_path(a, end);
        (self.src[p.range().end..end].trim().is_empty()).then_some(p)
    }

    pub(super) fn text(&self, r: Range<usize>) -> &'a str {
        &self.src[r]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(src: &str) -> Vec<&str> {
        let sc = Scanner::new(src);
        let mut out = Vec::new();
        sc.paths_in_expr(0..src.len(), &mut out);
        out.iter().map(|p| sc.text(p.range())).collect()
    }

    #[test]
    fn finds_the_paths_an_expression_reads() {
        assert_eq!(
            paths("a.b['c'][0] > d[e.f] | length"),
            ["a.b['c'][0]", "d[e.f]"]
        );
        // Methods read their object; functions, keyword arguments, filter and test
        // names, keywords and literals read nothing.
        assert_eq!(
            paths("x.items() and f(a=b.c) | g(y.z)"),
            ["x", "b.c", "y.z"]
        );
        assert_eq!(
            paths("n is divisibleby(3) and not none and 'q.r' ~ s | default('t')"),
            ["n", "s"]
        );
    }

    #[test]
    fn finds_the_tags_of_a_template_and_their_paths() {
        let src = "{# {{ c }} #}{{ a.b }}{% for d in e.f %}{% set g = h %}{% raw %}{{ i }}{% endraw %}{{ '}}' ~ j }}";
        let sc = Scanner::new(src);
        let mut out = Vec::new();
        for t in sc.tags() {
            sc.paths_in(&t, &mut out);
        }
        let texts: Vec<&str> = out.iter().map(|p| sc.text(p.range())).collect();
        assert_eq!(texts, ["a.b", "e.f", "h", "j"]);
    }

    #[test]
    fn scanning_arbitrary_text_never_panics() {
        // Deterministic pseudo-random text over an alphabet of delimiters, quotes,
        // multi-byte characters and path pieces.
        let alphabet = [
            "{{", "}}", "{%", "%}", "{#", "#}", "[", "]", "(", ")", ".", "'", "\"", "\\", "|", "=",
            "é", "∑", " ", "\n", "a", "grade", "verdict", "for", "in", "set", "is", "0", "-1",
            "raw", "endraw", "d", "docs",
        ];
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..3000 {
            let mut s = String::new();
            for _ in 0..(seed % 24) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                s.push_str(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            let sc = Scanner::new(&s);
            let mut paths = Vec::new();
            for t in sc.tags() {
                sc.paths_in(&t, &mut paths);
            }
            sc.paths_in_expr(0..s.len(), &mut paths);
            for p in &paths {
                let _ = sc.text(p.range());
            }
        }
    }
}
