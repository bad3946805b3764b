//! Explaining an undefined value: the path as written, the deepest part of it that
//! exists, what that part holds, and where the path is.
//!
//! minijinja reports a strict-undefined failure as "undefined value" with, at best,
//! the byte range of the failing instruction (often only part of the expression:
//! `.verdict.scor`, a filter name, a whole `if` tag). [`explain_error`] takes that
//! range, finds the tag (or the expression) around it, parses the variable paths
//! written there (`a.b["c"][0]`, `docs[i]`), and walks each one segment by segment
//! over the values the evaluation saw, with the same lookups the engine uses
//! ([`JValue::get_attr`], [`JValue::get_item`]). The first path that does not resolve
//! is reported:
//!
//! - a missing key: ``grade.verdict has: score; did you mean `score`?``
//! - a missing variable: `` `questoin` is not set; did you mean `question`? (set: ...) ``
//! - an attribute of a non-object: `answer is a string, not an object`
//! - an index past the end: `documents has 2 items; index 5 is out of range`
//!
//! Names bound inside a template (`for`, `set`, `with`, macro arguments, `loop`) are
//! not in the context: a `for` loop with one target over a path is walked item by
//! item, other local names are skipped. When no path explains the failure the result
//! is `None` and the caller keeps minijinja's message. Only names and sizes are
//! reported, never values.
use super::paths::{PathExpr, Scanner, Sub, Tag};
use minijinja::value::{Value as JValue, ValueKind};
use minijinja::{Error, ErrorKind};
use std::ops::Range;

/// Most keys listed in one message.
const MAX_KEYS_LISTED: usize = 20;
/// Most keys or list items looked at (a huge map or list is not walked in full).
const MAX_SCAN: usize = 10_000;

/// Names minijinja binds inside templates.
const TEMPLATE_LOCALS: &[&str] = &["loop", "caller", "varargs", "kwargs", "self", "super"];

/// Why a path is undefined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation {
    /// The path as written, e.g. `grade.verdict.scor`.
    pub path: String,
    /// 1-based line of the path in the source.
    pub line: usize,
    /// 1-based column (in characters) of the path in the source.
    pub column: usize,
    /// What is missing and what exists, e.g. ``grade.verdict has: score; did you mean `score`?``.
    pub detail: String,
}

/// Explains a minijinja [`ErrorKind::UndefinedError`] raised while rendering the
/// template `source` (`template` true) or evaluating the expression `source` over
/// `ctx`. Returns `None` for other errors, and when no path written near the error's
/// position is undefined over `ctx`.
pub fn explain_error(
    err: &Error,
    source: &str,
    template: bool,
    ctx: &JValue,
) -> Option<Explanation> {
    if !is_undefined_error(err) {
        return None;
    }
    let focus = err
        .range()
        .filter(|r| r.start <= r.end && r.end <= source.len());
    let sc = Scanner::new(source);
    let mut paths = Vec::new();
    if template {
        let tags = sc.tags();
        let chosen: Vec<&Tag> = if let Some(f) = &focus {
            tags.iter()
                .filter(|t| t.inner.start <= f.end && f.start <= t.inner.end)
                .collect()
        } else if let Some(line) = err.line() {
            let lines = line_range(source, line)?;
            tags.iter()
                .filter(|t| t.inner.start <= lines.end && lines.start <= t.inner.end)
                .collect()
        } else {
            return None;
        };
        for t in chosen {
            sc.paths_in(t, &mut paths);
        }
    } else {
        sc.paths_in_expr(0..source.len(), &mut paths);
    }
    // Paths under the reported range first.
    if let Some(f) = &focus {
        paths.sort_by_key(|p| {
            let r = p.range();
            !(r.start <= f.end && f.start <= r.end)
        });
    }
    sc.first_undefined(&paths, ctx, template)
}

/// Whether `err` is a failure on an undefined value: strict undefined, or an
/// operation (a filter, an operator) that refused an undefined operand.
pub fn is_undefined_error(err: &Error) -> bool {
    match err.kind() {
        ErrorKind::UndefinedError => true,
        ErrorKind::InvalidOperation => err.detail().is_some_and(|d| d.contains("undefined")),
        _ => false,
    }
}

/// Explains why the expression `source` evaluated to undefined over `ctx` (no error
/// was raised: the last step of a path found nothing). `None` when no path of it is
/// undefined.
pub fn explain_undefined(source: &str, ctx: &JValue) -> Option<Explanation> {
    let sc = Scanner::new(source);
    let mut paths = Vec::new();
    sc.paths_in_expr(0..source.len(), &mut paths);
    sc.first_undefined(&paths, ctx, false)
}

/// The detail for a top-level name that `ctx` does not hold: a close name if there is
/// one, and the names that are set.
pub fn unset_detail(name: &str, ctx: &JValue) -> String {
    let names = keys_of(ctx);
    let mut s = format!("`{name}` is not set");
    if let Some(c) = closest(name, &names) {
        s.push_str(&format!(
            "; did you mean `{}`?",
            crate::text::escape_line(c)
        ));
    }
    if names.is_empty() {
        s.push_str(" (nothing is set)");
    } else {
        s.push_str(&format!(" (set: {})", list(&names)));
    }
    s
}

/// "did you mean" help: the closest candidate by edit distance, when close enough
/// (see [`closest`]); else the declared names, or "none are declared".
pub fn suggest<'a, I, S>(name: &str, candidates: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str> + 'a,
{
    let mut all: Vec<String> = Vec::new();
    for c in candidates {
        let c = c.as_ref().to_string();
        if !all.contains(&c) {
            all.push(c);
        }
    }
    match closest(name, &all) {
        Some(c) => format!("did you mean `{c}`?"),
        None if all.is_empty() => "none are declared".to_string(),
        None => format!("declared: {}", all.join(", ")),
    }
}

/// The closest candidate to `name` by edit distance, when close enough to be a typo
/// (at most a third of the length, and at least 2, edits).
pub fn closest<'a, S: AsRef<str>>(name: &str, candidates: &'a [S]) -> Option<&'a str> {
    let limit = (name.chars().count().max(3) / 3).max(2);
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let c = c.as_ref();
        let d = edit_distance(name, c);
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// Levenshtein distance in characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != *cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

fn line_range(source: &str, line: usize) -> Option<Range<usize>> {
    let mut start = 0;
    for (i, l) in source.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return Some(start..start + l.len());
        }
        start += l.len();
    }
    None
}

fn line_col(source: &str, at: usize) -> (usize, usize) {
    let before = source.get(..at).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Sorted, distinct keys of a map value (names of a context).
fn keys_of(v: &JValue) -> Vec<String> {
    let Ok(iter) = v.try_iter() else {
        return Vec::new();
    };
    let mut keys: Vec<String> = iter
        .take(MAX_SCAN)
        .map(|k| k.as_str().map_or_else(|| k.to_string(), str::to_string))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Up to [`MAX_KEYS_LISTED`] key names, comma-separated. Keys come from state
/// (`--set`, LLM replies, web results): their control characters are escaped
/// ([`crate::text::escape_line`]) so the message stays one safe line.
fn list(keys: &[String]) -> String {
    let mut s = keys
        .iter()
        .take(MAX_KEYS_LISTED)
        .map(|k| crate::text::escape_line(k).into_owned())
        .collect::<Vec<_>>()
        .join(", ");
    if keys.len() > MAX_KEYS_LISTED {
        s.push_str(&format!(", … ({} more)", keys.len() - MAX_KEYS_LISTED));
    }
    s
}
/// What one lookup asked for.
enum Key {
    Name(String),
    Index(i64),
    Other(String),
}

/// A path's outcome over the context.
enum Resolved {
    Defined(JValue),
    /// Undefined at segment `step` (0 = the root), with the detail.
    Undefined {
        step: usize,
        detail: String,
    },
    /// Cannot be judged (a local name, a subscript that cannot be evaluated).
    Unknown,
}

impl Scanner<'_> {
    /// The first path that is undefined over `ctx`, explained.
    fn first_undefined(
        &self,
        paths: &[PathExpr],
        ctx: &JValue,
        template: bool,
    ) -> Option<Explanation> {
        for p in paths {
            if let Resolved::Undefined { step, detail } = self.resolve(p, ctx, template) {
                if p.guarded && step == p.segs.len() {
                    continue;
                }
                let r = p.range();
                let (line, column) = line_col(self.src, r.start);
                return Some(Explanation {
                    path: self.text(r).to_string(),
                    line,
                    column,
                    detail,
                });
            }
        }
        None
    }

    fn resolve(&self, p: &PathExpr, ctx: &JValue, template: bool) -> Resolved {
        let root = self.text(p.root.clone());
        match ctx.get_attr(root).ok().filter(|v| !v.is_undefined()) {
            Some(v) => self.walk(v, p, ctx, template),
            None if template && self.is_local(root) => self.resolve_loop_item(p, ctx),
            None => Resolved::Undefined {
                step: 0,
                detail: unset_detail(root, ctx),
            },
        }
    }

    /// Walks the segments of `p` from the root's value `v`.
    fn walk(&self, mut v: JValue, p: &PathExpr, ctx: &JValue, template: bool) -> Resolved {
        for (k, seg) in p.segs.iter().enumerate() {
            let (key, next) = match &seg.sub {
                Sub::Attr(n) => (Key::Name(n.clone()), v.get_attr(n)),
                Sub::Key(s) => (Key::Name(s.clone()), v.get_item(&JValue::from(s.as_str()))),
                Sub::Index(i) => (Key::Index(*i), v.get_item(&JValue::from(*i))),
                Sub::Path(q) => match self.resolve(q, ctx, template) {
                    Resolved::Defined(kv) => {
                        let key = match (kv.as_str(), kv.as_i64()) {
                            (Some(s), _) => Key::Name(s.to_string()),
                            (None, Some(i)) if kv.is_integer() => Key::Index(i),
                            _ => Key::Other(kv.to_string()),
                        };
                        (key, v.get_item(&kv))
                    }
                    // The subscript itself is what is missing.
                    Resolved::Undefined { detail, .. } => {
                        return Resolved::Undefined { step: k, detail }
                    }
                    Resolved::Unknown => return Resolved::Unknown,
                },
            };
            match next.ok().filter(|n| !n.is_undefined()) {
                Some(n) => v = n,
                None => {
                    let parent_end = match k {
                        0 => p.root.end,
                        _ => p.segs[k - 1].text.end,
                    };
                    let parent = self.text(p.root.start..parent_end);
                    return Resolved::Undefined {
                        step: k + 1,
                        detail: describe_missing(parent, &v, &key),
                    };
                }
            }
        }
        Resolved::Defined(v)
    }

    /// Whether `name` is bound inside the template (so it is not in the context).
    fn is_local(&self, name: &str) -> bool {
        TEMPLATE_LOCALS.contains(&name)
            || self.tags().iter().any(|t| {
                t.statement && {
                    let a = self.skip_marks(t.inner.start, t.inner.end);
                    matches!(
                        self.word_at(a, t.inner.end),
                        Some("for" | "set" | "with" | "macro" | "call" | "import" | "from")
                    ) && self.find_word(a, t.inner.end, name).is_some()
                }
            })
    }

    /// A path rooted at the target of `{% for name in path %}` (the last such loop
    /// before it): walks every item of the loop's list and explains the first one
    /// on which the path is undefined.
    fn resolve_loop_item(&self, p: &PathExpr, ctx: &JValue) -> Resolved {
        let name = self.text(p.root.clone());
        let Some(iterable) = self
            .tags()
            .into_iter()
            .rev()
            .filter(|t| t.statement && t.inner.end <= p.root.start)
            .find_map(|t| {
                let a = self.skip_marks(t.inner.start, t.inner.end);
                (self.word_at(a, t.inner.end) == Some("for")).then_some(())?;
                let kw_end = a + 3;
                let at = self.find_word(kw_end, t.inner.end, "in")?;
                (self.src[kw_end..at].trim() == name).then_some(())?;
                let tail = self.src[at + 2..t.inner.end].trim_end_matches(['-', '+', '~']);
                let p = self.whole_path(at + 2, at + 2 + tail.len())?;
                Some(p)
            })
        else {
            return Resolved::Unknown;
        };
        let list = match self.resolve(&iterable, ctx, false) {
            Resolved::Defined(v) if matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable) => v,
            _ => return Resolved::Unknown,
        };
        let Ok(items) = list.try_iter() else {
            return Resolved::Unknown;
        };
        let list_text = self.text(iterable.range());
        for (i, item) in items.take(MAX_SCAN).enumerate() {
            if let Resolved::Undefined { step, detail } = self.walk(item, p, ctx, true) {
                return Resolved::Undefined {
                    step,
                    detail: format!("{detail} (`{name}` is item {i} of `{list_text}`)"),
                };
            }
        }
        Resolved::Unknown
    }
}

/// What a lookup of `key` found on `parent` (written `p`), given that it found nothing.
fn describe_missing(p: &str, parent: &JValue, key: &Key) -> String {
    match parent.kind() {
        ValueKind::None => format!("{p} is none, not an object"),
        ValueKind::Map | ValueKind::Plain => {
            let keys = keys_of(parent);
            if keys.is_empty() {
                return format!("{p} is an empty object");
            }
            let mut s = format!("{p} has: {}", list(&keys));
            if let Key::Name(n) = key {
                if let Some(c) = closest(n, &keys) {
                    s.push_str(&format!(
                        "; did you mean `{}`?",
                        crate::text::escape_line(c)
                    ));
                }
            }
            s
        }
        ValueKind::Seq | ValueKind::Iterable => match (key, parent.len()) {
            (Key::Index(_), Some(0)) => format!("{p} is an empty list"),
            (Key::Index(i), Some(n)) => format!(
                "{p} has {n} item{}; index {i} is out of range",
                if n == 1 { "" } else { "s" }
            ),
            (Key::Index(i), None) => format!("{p} has no item {i}"),
            _ => format!("{p} is a list, not an object"),
        },
        ValueKind::String => match key {
            Key::Index(i) => format!(
                "{p} is a string of {} characters; index {i} is out of range",
                parent.as_str().map_or(0, |s| s.chars().count())
            ),
            _ => format!("{p} is a string, not an object"),
        },
        ValueKind::Number => format!("{p} is a number, not an object"),
        ValueKind::Bool => format!("{p} is a boolean, not an object"),
        other => match key {
            Key::Other(k) => format!("{p} is a {other} and has no item {k}"),
            _ => format!("{p} is a {other}, not an object"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> JValue {
        JValue::from_serialize(json!({
            "grade": {"verdict": {"score": 1}},
            "answer": "text",
            "docs": [{"title": "a"}, {"title": "b"}],
            "question": "q",
            "i": 7,
            "empty": [],
            "nothing": null,
        }))
    }

    /// Renders `t` over the test context and explains the error.
    fn tpl(t: &str) -> Option<Explanation> {
        let mut env = crate::jinja::environment();
        env.add_template_owned("t", t.to_string()).unwrap();
        let err = env.get_template("t").unwrap().render(ctx()).unwrap_err();
        explain_error(&err, t, true, &ctx())
    }

    /// Evaluates expression `e` over the test context and explains the error or the
    /// undefined result.
    fn expr(e: &str) -> Option<Explanation> {
        let env = crate::jinja::environment();
        match env.compile_expression(e).unwrap().eval(ctx()) {
            Err(err) => explain_error(&err, e, false, &ctx()),
            Ok(v) => {
                assert!(v.is_undefined(), "{e} evaluated to {v:?}");
                explain_undefined(e, &ctx())
            }
        }
    }

    #[test]
    fn misspelled_nested_key_names_the_keys_that_exist() {
        for t in [
            "a {{ grade.verdict.scor }}",
            "a {{ grade.verdict.scor | upper }}",
            "{% if grade.verdict.scor > 1 %}x{% endif %}",
            "a {{ 'x' ~ grade['verdict'].scor ~ question }}",
        ] {
            let x = tpl(t).unwrap_or_else(|| panic!("{t}: not explained"));
            assert!(
                x.path.starts_with("grade") && x.path.ends_with("scor"),
                "{t}: {x:?}"
            );
            assert!(
                x.detail.ends_with(" has: score; did you mean `score`?"),
                "{t}: {x:?}"
            );
        }
        let x = tpl("a {{ 'x' ~ grade['verdict'].scor ~ question }}").unwrap();
        assert_eq!(
            x.detail,
            "grade['verdict'] has: score; did you mean `score`?"
        );
        let x = tpl("line\n  {{ grade.verdict.scor }}").unwrap();
        assert_eq!((x.line, x.column), (2, 6));
        let x = tpl("é {{ grade.verdicts.score }}").unwrap();
        assert_eq!(x.path, "grade.verdicts.score");
        assert_eq!(x.detail, "grade has: verdict; did you mean `verdict`?");
        assert_eq!((x.line, x.column), (1, 6));
        for e in [
            "grade.verdict.scor > 1",
            "grade.verdict.scor",
            "grade.verdicts.score is defined",
            "question and grade.verdict.scor == 1",
        ] {
            let x = expr(e).unwrap_or_else(|| panic!("{e}: not explained"));
            assert!(x.detail.contains("did you mean `"), "{e}: {x:?}");
        }
        assert_eq!(
            expr("grade.verdict.scor > 1").unwrap().detail,
            "grade.verdict has: score; did you mean `score`?"
        );
    }

    #[test]
    fn control_characters_in_key_names_are_escaped() {
        let t = "{{ grade.verdict.scor }}";
        let c = JValue::from_serialize(
            json!({"grade": {"verdict": {"\u{1b}[31mevil\nline": 1, "scores": 2}}}),
        );
        let mut env = crate::jinja::environment();
        env.add_template_owned("t", t.to_string()).unwrap();
        let err = env
            .get_template("t")
            .unwrap()
            .render(c.clone())
            .unwrap_err();
        let x = explain_error(&err, t, true, &c).unwrap();
        assert!(
            !x.detail.contains('\u{1b}') && !x.detail.contains('\n'),
            "{}",
            x.detail
        );
        assert!(
            x.detail.contains("\\u{1b}[31mevil\\u{a}line"),
            "{}",
            x.detail
        );
        let c = JValue::from_serialize(json!({"\u{9b}x": 1}));
        let d = unset_detail("y", &c);
        assert!(!d.contains('\u{9b}') && d.contains("\\u{9b}x"), "{d}");
    }

    #[test]
    fn misspelled_variable_names_what_is_set() {
        let x = tpl("{{ questoin }}").unwrap();
        assert_eq!(x.path, "questoin");
        assert_eq!(
            x.detail,
            "`questoin` is not set; did you mean `question`? (set: answer, docs, empty, grade, i, nothing, question)"
        );
        let x = expr("questoin | length > 0").unwrap();
        assert!(
            x.detail
                .starts_with("`questoin` is not set; did you mean `question`?"),
            "{x:?}"
        );
        // No close name: only the list.
        let x = expr("zzzzzz").unwrap();
        assert!(
            x.detail.starts_with("`zzzzzz` is not set (set: answer,"),
            "{x:?}"
        );
    }

    #[test]
    fn non_objects_and_ranges() {
        assert_eq!(
            tpl("{{ answer.foo }}").unwrap().detail,
            "answer is a string, not an object"
        );
        assert_eq!(
            tpl("{{ answer['foo'] }}").unwrap().detail,
            "answer is a string, not an object"
        );
        assert_eq!(
            expr("answer.foo.bar").unwrap().detail,
            "answer is a string, not an object"
        );
        assert_eq!(expr("i.x").unwrap().detail, "i is a number, not an object");
        assert_eq!(
            expr("nothing.x").unwrap().detail,
            "nothing is none, not an object"
        );
        assert_eq!(
            expr("docs.title").unwrap().detail,
            "docs is a list, not an object"
        );
        assert_eq!(
            tpl("{{ docs[5].title }}").unwrap().detail,
            "docs has 2 items; index 5 is out of range"
        );
        assert_eq!(
            expr("docs[i]").unwrap().detail,
            "docs has 2 items; index 7 is out of range"
        );
        assert_eq!(expr("docs[i]").unwrap().path, "docs[i]");
        assert_eq!(expr("empty[0]").unwrap().detail, "empty is an empty list");
        assert_eq!(
            expr("answer[9]").unwrap().detail,
            "answer is a string of 4 characters; index 9 is out of range"
        );
        // The subscript itself missing.
        assert!(expr("docs[j]")
            .unwrap()
            .detail
            .starts_with("`j` is not set"));
        assert_eq!(
            expr("docs[1].titel").unwrap().detail,
            "docs[1] has: title; did you mean `title`?"
        );
    }

    #[test]
    fn loop_variables_are_walked_item_by_item() {
        let x = tpl("{% for d in docs %}{{ d.titel }}{% endfor %}").unwrap();
        assert_eq!(x.path, "d.titel");
        assert_eq!(
            x.detail,
            "d has: title; did you mean `title`? (`d` is item 0 of `docs`)"
        );
        // Other local names cannot be judged: minijinja's message stays.
        assert_eq!(tpl("{% set g = grade %}{{ g.nope }}"), None);
        assert_eq!(
            tpl("{% for k, v in grade | items %}{{ v.nope }}{% endfor %}"),
            None
        );
        assert_eq!(tpl("{% for d in docs %}{{ loop.nope }}{% endfor %}"), None);
    }

    #[test]
    fn guarded_paths_and_calls_are_not_blamed() {
        // `grade.x` is undefined but tested; the failing path is the other one.
        let x = expr("grade.x is defined or grade.verdict.scor > 0").unwrap();
        assert_eq!(x.path, "grade.verdict.scor");
        let x = tpl("{{ grade.x | default('') }}{{ grade.verdict.scor }}").unwrap();
        assert_eq!(x.path, "grade.verdict.scor");
        // Method calls read the object; functions and keyword arguments read nothing.
        let x =
            expr("range(3) | length > 0 and dict(k=question).k == 'q' and grade.verdict.scor > 0")
                .unwrap();
        assert_eq!(x.path, "grade.verdict.scor");
    }

    #[test]
    fn other_errors_are_left_alone() {
        let env = crate::jinja::environment();
        let err = env.render_str("{{ 1 + 'a' }}", ()).unwrap_err();
        assert_eq!(explain_error(&err, "{{ 1 + 'a' }}", true, &ctx()), None);
        // An operation that fails on an undefined operand is explained.
        let x = tpl("{{ grade.verdict.scor + 1 }}").unwrap();
        assert_eq!(x.path, "grade.verdict.scor");
        let x = expr("grade.verdict.scor | length > 0").unwrap();
        assert!(x.detail.contains("did you mean `score`"), "{x:?}");
    }
}
