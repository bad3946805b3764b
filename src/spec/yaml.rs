//! The only YAML parser of the project: saphyr-parser events turned into a
//! `serde_json::Value` plus a [`SpanIndex`] that maps each value's JSON pointer to its
//! source span.
//!
//! Rules (the spec format's YAML dialect):
//! - YAML 1.2 core schema for plain scalars: only `true`/`false` (any case variant the
//!   core schema allows) are booleans, so `yes`, `no`, `on`, `off` stay strings.
//! - Duplicate keys are an error ([`Code::DuplicateKey`]); keys must be scalars.
//! - Anchors and aliases are expanded, with caps on the values and on the bytes that
//!   aliases add ([`Limits::max_values`], [`Limits::max_alias_bytes`]), checked before
//!   each alias is copied, so an "aliases bomb" fails fast instead of exhausting memory.
//!   A document that has too many values without any alias gets a message of its own,
//!   at the value that crossed the limit.
//! - One document per file; custom tags are refused.
use super::source::{FileId, Span};
use crate::diag::{Code, Diagnostic};
use saphyr_parser::{Event, Parser, ScalarStyle, Span as YSpan};
use serde_json::{Map, Number, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Loader limits: exceeding one gives [`Code::TooLarge`].
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest accepted input, in bytes (default 2 MiB).
    pub max_bytes: usize,
    /// Deepest accepted nesting of sequences and mappings (default 64).
    pub max_depth: usize,
    /// Most values (mappings, lists, scalars) after alias expansion (default 200 000).
    pub max_values: usize,
    /// Most bytes that alias expansion may add: the text of the scalars and keys an
    /// alias copies, plus [`VALUE_OVERHEAD`] per value (default 8 MiB).
    pub max_alias_bytes: usize,
}

/// Bytes counted per value on top of its text, for [`Limits::max_alias_bytes`] (about
/// what a value costs in memory besides its text).
pub const VALUE_OVERHEAD: usize = 16;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 2 * 1024 * 1024,
            max_depth: 64,
            max_values: 200_000,
            max_alias_bytes: 8 * 1024 * 1024,
        }
    }
}

/// Spans of one value: the value itself and, for mapping entries, the key.
#[derive(Clone, Copy, Debug)]
pub struct ValueSpans {
    /// Span of the key that introduced the value (None for the root and sequence items).
    pub key: Option<Span>,
    /// Span of the value.
    pub value: Span,
}

/// JSON pointer (RFC 6901, e.g. `/nodes/grade/kind`) to spans.
///
/// Layered so that a variant's copy costs what the variant changes, not the size of
/// the spec: the parsed entries are shared (`base`, behind an `Arc`, cloned in O(1));
/// a copy records its own entries (`own`) and the pointers whose base subtrees it
/// replaced (`hidden`). Lookups are O(log n) plus the number of hidden pointers.
#[derive(Clone, Debug, Default)]
pub struct SpanIndex {
    base: Arc<BTreeMap<String, ValueSpans>>,
    own: BTreeMap<String, ValueSpans>,
    /// Pointers whose entry and descendants in `base` are no longer part of this index.
    hidden: Vec<String>,
}

/// True when `ptr` is `root` or lies under it.
fn within(ptr: &str, root: &str) -> bool {
    ptr.strip_prefix(root)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Entries of `map` at `root` or under it, in pointer order.
fn subtree<'a>(
    map: &'a BTreeMap<String, ValueSpans>,
    root: &'a str,
) -> impl Iterator<Item = (&'a String, &'a ValueSpans)> + 'a {
    map.range::<str, _>((std::ops::Bound::Included(root), std::ops::Bound::Unbounded))
        .take_while(move |(k, _)| k.starts_with(root))
        .filter(move |(k, _)| within(k, root))
}

/// Escapes one JSON pointer segment (`~` → `~0`, `/` → `~1`).
pub fn escape_segment(seg: &str) -> std::borrow::Cow<'_, str> {
    if seg.contains(['~', '/']) {
        std::borrow::Cow::Owned(seg.replace('~', "~0").replace('/', "~1"))
    } else {
        std::borrow::Cow::Borrowed(seg)
    }
}

/// Builds a JSON pointer from segments.
pub fn pointer<S: AsRef<str>>(segments: &[S]) -> String {
    let mut p = String::new();
    for s in segments {
        p.push('/');
        p.push_str(&escape_segment(s.as_ref()));
    }
    p
}

impl SpanIndex {
    /// Spans recorded at exactly this pointer.
    pub fn get(&self, ptr: &str) -> Option<&ValueSpans> {
        if let Some(s) = self.own.get(ptr) {
            return Some(s);
        }
        if self.hidden.iter().any(|h| within(ptr, h)) {
            return None;
        }
        self.base.get(ptr)
    }

    /// Span of the value at `ptr`, or of its nearest recorded ancestor.
    pub fn value(&self, ptr: &str) -> Option<Span> {
        let mut p = ptr;
        loop {
            if let Some(s) = self.get(p) {
                return Some(s.value);
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => return None,
            }
        }
    }

    /// Span of the key that introduced `ptr`, falling back to [`SpanIndex::value`].
    pub fn key(&self, ptr: &str) -> Option<Span> {
        match self.get(ptr) {
            Some(ValueSpans { key: Some(k), .. }) => Some(*k),
            _ => self.value(ptr),
        }
    }

    /// Records spans for a pointer (used by variant overlays to move spans).
    pub fn insert(&mut self, ptr: String, spans: ValueSpans) {
        self.own.insert(ptr, spans);
    }

    /// Every entry at `root` or under it, as this index sees them.
    fn entries_under<'a>(&'a self, root: &'a str) -> Vec<(&'a String, &'a ValueSpans)> {
        let mut out: Vec<_> = subtree(&self.own, root).collect();
        out.extend(
            subtree(&self.base, root)
                .filter(|(k, _)| !self.own.contains_key(*k))
                .filter(|(k, _)| !self.hidden.iter().any(|h| within(k, h))),
        );
        out
    }

    /// Copies every entry of `other` found under `from` to the same relative place
    /// under `to`, replacing what `self` had under `to`. Costs the size of the two
    /// subtrees (plus a log factor), not of the whole index.
    pub fn graft(&mut self, to: &str, other: &SpanIndex, from: &str, key: Option<Span>) {
        let stale: Vec<String> = subtree(&self.own, to).map(|(k, _)| k.clone()).collect();
        for k in stale {
            self.own.remove(&k);
        }
        if !self.hidden.iter().any(|h| within(to, h)) {
            self.hidden.retain(|h| !within(h, to));
            self.hidden.push(to.to_string());
        }
        for (k, v) in other.entries_under(from) {
            let rest = &k[from.len()..];
            let spans = if rest.is_empty() {
                ValueSpans {
                    key: key.or(v.key),
                    value: v.value,
                }
            } else {
                *v
            };
            self.own.insert(format!("{to}{rest}"), spans);
        }
    }
}

/// A parsed YAML node with its span, before conversion to JSON.
#[derive(Clone, Debug)]
struct Node {
    kind: Kind,
    span: Span,
    /// Values in this node, itself included.
    size: usize,
    /// Its text (scalars and keys) plus [`VALUE_OVERHEAD`] per value.
    bytes: usize,
}

#[derive(Clone, Debug)]
enum Kind {
    Scalar(Value),
    Seq(Vec<Node>),
    Map(Vec<(String, Span, Node)>),
}

enum Frame {
    Seq {
        items: Vec<Node>,
        start: Span,
        anchor: usize,
    },
    Map {
        entries: Vec<(String, Span, Node)>,
        /// The keys of `entries`, each with its first key span (duplicate keys are
        /// found in constant time: a mapping of N keys is read in O(N), not O(N²)).
        keys: std::collections::HashMap<String, Span>,
        key: Option<(String, Span)>,
        start: Span,
        anchor: usize,
    },
}

fn conv_span(file: FileId, s: YSpan) -> Span {
    Span {
        file,
        line: s.start.line() as u32,
        col: s.start.col() as u32 + 1,
        end_line: s.end.line() as u32,
        end_col: s.end.col() as u32 + 1,
    }
}

#[cfg(test)]
thread_local! {
    /// The files [`parse`] parsed on this thread, in order (tests count parses).
    pub(crate) static PARSED: std::cell::RefCell<Vec<FileId>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Parses YAML text into a JSON value and the spans of every value.
///
/// # Errors
/// Every problem found, as diagnostics located in `file`: syntax ([`Code::YamlSyntax`]),
/// duplicate keys, unsupported constructs and limits. Parsing stops at the first
/// syntax error or limit; duplicate keys are all reported.
pub fn parse(
    text: &str,
    file: FileId,
    limits: &Limits,
) -> Result<(Value, SpanIndex), Vec<Diagnostic>> {
    #[cfg(test)]
    PARSED.with(|p| p.borrow_mut().push(file));
    if text.len() > limits.max_bytes {
        return Err(vec![Diagnostic::new(
            Code::TooLarge,
            format!(
                "file is {} bytes; the limit is {} bytes",
                text.len(),
                limits.max_bytes
            ),
        )
        .at(Some(Span::file_start(file)))]);
    }
    // YAML streams may hold only printable characters; a raw escape character would
    // also end up in terminal output.
    if let Some((pos, c)) = text.char_indices().find(|&(_, c)| {
        (c < ' ' && !matches!(c, '\t' | '\n' | '\r'))
            || c == '\u{7f}'
            || ('\u{80}'..='\u{9f}').contains(&c) && c != '\u{85}'
    }) {
        let (line, col) = super::source::line_col(text, pos);
        return Err(vec![Diagnostic::new(
            Code::YamlSyntax,
            format!("control character U+{:04X} is not allowed in YAML; write it as an escape in a double-quoted string", c as u32),
        )
        .at(Some(Span::point(file, line, col)))]);
    }
    let mut diags = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Node> = HashMap::new();
    let mut root: Option<Node> = None;
    let mut documents = 0usize;
    // Values seen in the text, and values and bytes added by aliases.
    let mut plain = 0usize;
    let mut aliased = 0usize;
    let mut aliased_bytes = 0usize;

    for ev in Parser::new_from_str(text) {
        let (event, yspan) = match ev {
            Ok(e) => e,
            Err(err) => {
                let m = err.marker();
                // The scanner has its own nesting limit, which it may hit before we see
                // the events that would trip ours.
                let (code, msg) = if err.info().contains("recursion limit") {
                    (
                        Code::TooLarge,
                        format!("nesting deeper than the parser allows ({})", err.info()),
                    )
                } else {
                    (
                        Code::YamlSyntax,
                        format!("YAML syntax error: {}", err.info()),
                    )
                };
                diags.push(Diagnostic::new(code, msg).at(Some(Span::point(
                    file,
                    m.line() as u32,
                    m.col() as u32 + 1,
                ))));
                return Err(diags);
            }
        };
        let span = conv_span(file, yspan);
        let node = match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => continue,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    diags.push(
                        Diagnostic::new(
                            Code::YamlUnsupported,
                            "a spec file holds one YAML document; found a second one",
                        )
                        .at(Some(span)),
                    );
                    return Err(diags);
                }
                continue;
            }
            Event::SequenceStart(anchor, tag) => {
                check_tag(tag.as_deref(), &["seq"], span, &mut diags);
                count_value(&mut plain, aliased, limits, span, &mut diags)?;
                if stack.len() >= limits.max_depth {
                    return Err(too_deep(limits, span, diags));
                }
                stack.push(Frame::Seq {
                    items: Vec::new(),
                    start: span,
                    anchor,
                });
                continue;
            }
            Event::MappingStart(anchor, tag) => {
                check_tag(tag.as_deref(), &["map"], span, &mut diags);
                count_value(&mut plain, aliased, limits, span, &mut diags)?;
                if stack.len() >= limits.max_depth {
                    return Err(too_deep(limits, span, diags));
                }
                stack.push(Frame::Map {
                    entries: Vec::new(),
                    keys: std::collections::HashMap::new(),
                    key: None,
                    start: span,
                    anchor,
                });
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq {
                    items,
                    start,
                    anchor,
                }) => {
                    let size = 1 + items.iter().map(|n| n.size).sum::<usize>();
                    let bytes = VALUE_OVERHEAD + items.iter().map(|n| n.bytes).sum::<usize>();
                    let node = Node {
                        kind: Kind::Seq(items),
                        span: join(start, span),
                        size,
                        bytes,
                    };
                    remember(&mut anchors, anchor, &node);
                    node
                }
                _ => continue,
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map {
                    entries,
                    start,
                    anchor,
                    ..
                }) => {
                    let size = 1 + entries.iter().map(|(_, _, n)| n.size).sum::<usize>();
                    let bytes = VALUE_OVERHEAD
                        + entries
                            .iter()
                            .map(|(k, _, n)| k.len() + n.bytes)
                            .sum::<usize>();
                    let node = Node {
                        kind: Kind::Map(entries),
                        span: join(start, span),
                        size,
                        bytes,
                    };
                    remember(&mut anchors, anchor, &node);
                    node
                }
                _ => continue,
            },
            Event::Alias(id) => match anchors.get(&id) {
                Some(n) => {
                    // Checked before the copy is made.
                    aliased += n.size;
                    aliased_bytes += n.bytes;
                    if plain + aliased > limits.max_values || aliased_bytes > limits.max_alias_bytes
                    {
                        let what = if aliased_bytes > limits.max_alias_bytes {
                            format!("more than {} bytes", limits.max_alias_bytes)
                        } else {
                            format!("more than {} values", limits.max_values)
                        };
                        diags.push(
                            Diagnostic::new(
                                Code::TooLarge,
                                format!("anchors and aliases expand the document to {what}"),
                            )
                            .at(Some(span))
                            .help("write the repeated value out, or repeat it fewer times"),
                        );
                        return Err(diags);
                    }
                    let mut n = n.clone();
                    n.span = span;
                    n
                }
                None => {
                    diags.push(
                        Diagnostic::new(Code::YamlSyntax, "alias refers to an unknown anchor")
                            .at(Some(span)),
                    );
                    return Err(diags);
                }
            },
            Event::Scalar(text, style, anchor, tag) => {
                count_value(&mut plain, aliased, limits, span, &mut diags)?;
                let value = match resolve_scalar(&text, style, tag.as_deref(), span, &mut diags) {
                    Some(v) => v,
                    None => Value::Null,
                };
                let bytes = VALUE_OVERHEAD + text.len();
                let node = Node {
                    kind: Kind::Scalar(value),
                    span,
                    size: 1,
                    bytes,
                };
                remember(&mut anchors, anchor, &node);
                node
            }
        };
        // Attach the finished node to its parent.
        match stack.last_mut() {
            None => root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries, keys, key, ..
            }) => match key.take() {
                None => match &node.kind {
                    Kind::Scalar(v) => {
                        let k = match v {
                            Value::String(s) => s.clone(),
                            Value::Null => "null".to_string(),
                            other => other.to_string(),
                        };
                        if let Some(first) = keys.get(&k) {
                            diags.push(
                                Diagnostic::new(Code::DuplicateKey, format!("duplicate key `{k}`"))
                                    .at(Some(node.span))
                                    .label(Some(*first), "first defined here"),
                            );
                            *key = Some((format!("\u{0}dup{}", entries.len()), node.span));
                        } else {
                            *key = Some((k, node.span));
                        }
                    }
                    _ => {
                        diags.push(
                            Diagnostic::new(
                                Code::YamlUnsupported,
                                "mapping keys must be scalars (strings)",
                            )
                            .at(Some(node.span)),
                        );
                        *key = Some((format!("\u{0}bad{}", entries.len()), node.span));
                    }
                },
                Some((k, kspan)) => {
                    keys.entry(k.clone()).or_insert(kspan);
                    entries.push((k, kspan, node));
                }
            },
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    let root = match root {
        Some(r) => r,
        None => {
            return Err(vec![Diagnostic::new(
                Code::YamlSyntax,
                "the file is empty: expected a mapping",
            )
            .at(Some(Span::file_start(file)))])
        }
    };
    let mut map = BTreeMap::new();
    let value = to_json(root, String::new(), None, &mut map);
    Ok((
        value,
        SpanIndex {
            base: Arc::new(map),
            ..SpanIndex::default()
        },
    ))
}

/// Counts one value written in the text; past the limit, the error names the
/// document's own size when no alias contributed, else the expansion.
fn count_value(
    plain: &mut usize,
    aliased: usize,
    limits: &Limits,
    span: Span,
    diags: &mut Vec<Diagnostic>,
) -> Result<(), Vec<Diagnostic>> {
    *plain += 1;
    if *plain + aliased <= limits.max_values {
        return Ok(());
    }
    let msg = if aliased == 0 {
        format!(
            "the document has more than {} values (mappings, lists and scalars); the limit is {}",
            limits.max_values, limits.max_values
        )
    } else {
        format!(
            "anchors and aliases expand the document to more than {} values",
            limits.max_values
        )
    };
    diags.push(
        Diagnostic::new(Code::TooLarge, msg)
            .at(Some(span))
            .help("split the spec, or use fewer nodes and variants"),
    );
    Err(std::mem::take(diags))
}

fn too_deep(limits: &Limits, span: Span, mut diags: Vec<Diagnostic>) -> Vec<Diagnostic> {
    diags.push(
        Diagnostic::new(
            Code::TooLarge,
            format!("nesting deeper than {} levels", limits.max_depth),
        )
        .at(Some(span)),
    );
    diags
}

fn remember(anchors: &mut HashMap<usize, Node>, anchor: usize, node: &Node) {
    if anchor > 0 {
        anchors.insert(anchor, node.clone());
    }
}

fn join(start: Span, end: Span) -> Span {
    Span {
        end_line: end.end_line,
        end_col: end.end_col,
        ..start
    }
}

fn check_tag(
    tag: Option<&saphyr_parser::Tag>,
    allowed: &[&str],
    span: Span,
    diags: &mut Vec<Diagnostic>,
) {
    if let Some(tag) = tag {
        let core = tag.handle == "!!" || tag.handle == "tag:yaml.org,2002:";
        if !(core && allowed.contains(&tag.suffix.as_str())) {
            diags.push(
                Diagnostic::new(
                    Code::YamlUnsupported,
                    format!("unsupported tag `{}{}`", tag.handle, tag.suffix),
                )
                .at(Some(span)),
            );
        }
    }
}

fn resolve_scalar(
    text: &str,
    style: ScalarStyle,
    tag: Option<&saphyr_parser::Tag>,
    span: Span,
    diags: &mut Vec<Diagnostic>,
) -> Option<Value> {
    if let Some(tag) = tag {
        let core = tag.handle == "!!" || tag.handle == "tag:yaml.org,2002:";
        let forced = match (core, tag.suffix.as_str()) {
            (true, "str") => Some(Value::String(text.to_string())),
            (true, "int" | "float" | "bool" | "null") => match plain_scalar(text) {
                v @ (Value::Number(_) | Value::Bool(_) | Value::Null) => Some(v),
                _ => None,
            },
            _ => None,
        };
        if forced.is_none() {
            diags.push(
                Diagnostic::new(
                    Code::YamlUnsupported,
                    format!("unsupported tag `{}{}` on `{text}`", tag.handle, tag.suffix),
                )
                .at(Some(span)),
            );
        }
        return forced;
    }
    if style != ScalarStyle::Plain {
        return Some(Value::String(text.to_string()));
    }
    let v = plain_scalar(text);
    if let Value::String(s) = &v {
        if matches!(
            s.as_str(),
            ".inf" | ".Inf" | ".INF" | "-.inf" | "+.inf" | ".nan" | ".NaN" | ".NAN"
        ) {
            diags.push(
                Diagnostic::new(
                    Code::YamlUnsupported,
                    format!("`{s}` is not a finite number; specs use JSON numbers"),
                )
                .at(Some(span)),
            );
        }
    }
    Some(v)
}

/// Resolves a plain scalar with the YAML 1.2 core schema.
fn plain_scalar(s: &str) -> Value {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(i) = s.parse::<i64>() {
            return Value::Number(i.into());
        }
        if let Ok(u) = s.trim_start_matches('+').parse::<u64>() {
            return Value::Number(u.into());
        }
    }
    if let Some(hex) = s.strip_prefix("0x") {
        if let Ok(i) = i64::from_str_radix(hex, 16) {
            return Value::Number(i.into());
        }
    }
    if let Some(oct) = s.strip_prefix("0o") {
        if let Ok(i) = i64::from_str_radix(oct, 8) {
            return Value::Number(i.into());
        }
    }
    if looks_like_float(s) {
        if let Some(n) = s.parse::<f64>().ok().and_then(Number::from_f64) {
            return Value::Number(n);
        }
    }
    Value::String(s.to_string())
}

/// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
fn looks_like_float(s: &str) -> bool {
    let b = s.strip_prefix(['-', '+']).unwrap_or(s).as_bytes();
    let mut i = 0;
    let int_digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    i += int_digits;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        frac_digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        i += frac_digits;
    }
    if int_digits == 0 && frac_digits == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            i += 1;
        }
        let exp = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if exp == 0 {
            return false;
        }
        i += exp;
    }
    i == b.len()
}

fn to_json(
    node: Node,
    ptr: String,
    key: Option<Span>,
    index: &mut BTreeMap<String, ValueSpans>,
) -> Value {
    let spans = ValueSpans {
        key,
        value: node.span,
    };
    let value = match node.kind {
        Kind::Scalar(v) => v,
        Kind::Seq(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, n)| to_json(n, format!("{ptr}/{i}"), None, index))
                .collect(),
        ),
        Kind::Map(entries) => {
            let mut map = Map::with_capacity(entries.len());
            for (k, kspan, n) in entries {
                let child = format!("{ptr}/{}", escape_segment(&k));
                let v = to_json(n, child, Some(kspan), index);
                map.insert(k, v);
            }
            Value::Object(map)
        }
    };
    // The pointer is moved in last (its children's were made from it).
    index.insert(ptr, spans);
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A variant's copy of the spans shares the parsed entries (cloning it does not
    /// copy the index: validation was quadratic in nodes x variants through it) and a
    /// graft changes only the copy, hiding the replaced subtree and nothing else.
    #[test]
    fn graft_on_a_shared_copy() {
        let (_, base) = p("a:\n  b: 1\n  bb: 2\n  c:\n    d: 3\nv:\n  x:\n    y: 4\n").unwrap();
        let mut copy = base.clone();
        assert!(
            Arc::ptr_eq(&copy.base, &base.base),
            "clone copied the index"
        );
        let at = base.key("/v/x");
        copy.graft("/a/c", &base, "/v/x", at);
        // The original is untouched.
        assert_eq!(base.get("/a/c/d").map(|s| s.value.line), Some(5));
        // The copy: the old subtree is gone, the grafted one is in place.
        assert!(copy.get("/a/c/d").is_none());
        assert_eq!(copy.get("/a/c/y").map(|s| s.value.line), Some(8));
        assert_eq!(copy.key("/a/c"), at);
        // Siblings with a common prefix (`/a/b` vs `/a/bb`) are not hidden.
        assert_eq!(copy.get("/a/b").map(|s| s.value.line), Some(2));
        assert_eq!(copy.get("/a/bb").map(|s| s.value.line), Some(3));
        // A missing pointer falls back to its nearest ancestor's value.
        assert_eq!(copy.value("/a/c/d"), copy.value("/a/c"));
        // Grafting again replaces the earlier graft; grafting a leaf inside a grafted
        // subtree keeps the rest of it.
        let mut again = copy.clone();
        again.graft("/a/c/y", &base, "/a/b", None);
        assert_eq!(again.get("/a/c/y").map(|s| s.value.line), Some(2));
        assert_eq!(copy.get("/a/c/y").map(|s| s.value.line), Some(8));
        again.graft("/a", &base, "/v", None);
        assert!(again.get("/a/c/y").is_none() && again.get("/a/b").is_none());
        assert_eq!(again.get("/a/x/y").map(|s| s.value.line), Some(8));
    }

    fn p(text: &str) -> Result<(Value, SpanIndex), Vec<Diagnostic>> {
        parse(text, FileId(0), &Limits::default())
    }

    #[test]
    fn alias_expansion_is_budgeted_in_bytes() {
        // One 1 MB scalar aliased 1,000 times: refused at the alias that crosses the
        // byte budget, long before 1 GB is copied.
        let big = "x".repeat(1024 * 1024 - 100);
        let aliases = vec!["*big"; 1000].join(", ");
        let text = format!("big: &big \"{big}\"\nlist: [{aliases}]\n");
        let err = p(&text).unwrap_err();
        assert_eq!(err[0].code, Code::TooLarge);
        assert!(err[0].message.contains("bytes"), "{}", err[0].message);
        let at = err[0].span.unwrap();
        assert_eq!(at.line, 2);
        // The 9th alias crosses 8 MiB (each copies about 1 MiB).
        assert_eq!(at.col as usize, "list: [".len() + 8 * "*big, ".len() + 1);
    }

    #[test]
    fn many_values_without_aliases_have_their_own_message_at_a_real_line() {
        let limits = Limits {
            max_values: 50,
            ..Limits::default()
        };
        let text: String = (0..40).map(|i| format!("n{i}: {{a: 1}}\n")).collect();
        let err = parse(&text, FileId(0), &limits).unwrap_err();
        assert!(
            err[0]
                .message
                .contains("the document has more than 50 values")
                && !err[0].message.contains("alias"),
            "{}",
            err[0].message
        );
        let line = err[0].span.unwrap().line;
        assert!((1..=40).contains(&line), "line {line}");
        // Every value (keys included) is counted once, however deep: the root, and per
        // entry its key, the mapping, `a` and `1`: 1 + 40 × 4 = 161.
        let limits = |max_values| Limits {
            max_values,
            ..Limits::default()
        };
        assert!(parse(&text, FileId(0), &limits(161)).is_ok());
        assert!(parse(&text, FileId(0), &limits(160)).is_err());
    }

    #[test]
    fn yaml_11_booleans_stay_strings() {
        let (v, _) =
            p("a: yes\nb: no\nc: off\nd: true\ne: 'true'\nf: 1.5\ng: 07\nh: null\n").unwrap();
        assert_eq!(v["a"], "yes");
        assert_eq!(v["b"], "no");
        assert_eq!(v["c"], "off");
        assert_eq!(v["d"], true);
        assert_eq!(v["e"], "true");
        assert_eq!(v["f"], 1.5);
        assert_eq!(v["g"], 7);
        assert!(v["h"].is_null());
    }

    #[test]
    fn spans_point_at_keys_and_values() {
        let (_, idx) = p("nodes:\n  grade:\n    kind: llm\n").unwrap();
        let s = idx.get("/nodes/grade/kind").unwrap();
        assert_eq!((s.key.unwrap().line, s.key.unwrap().col), (3, 5));
        assert_eq!((s.value.line, s.value.col), (3, 11));
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let e = p("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(e[0].code, Code::DuplicateKey);
        assert_eq!(e[0].span.unwrap().line, 3);
    }

    #[test]
    fn alias_bomb_is_stopped() {
        let mut s = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            s.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n", p = i - 1));
        }
        let e = p(&s).unwrap_err();
        assert_eq!(e[0].code, Code::TooLarge);
    }

    #[test]
    fn deep_nesting_is_stopped() {
        let s = "[".repeat(100_000);
        let e = p(&s).unwrap_err();
        assert_eq!(e[0].code, Code::TooLarge);
    }

    #[test]
    fn floats_and_pointer_escapes() {
        assert!(
            looks_like_float("1e5")
                && looks_like_float("-.5")
                && !looks_like_float("1e")
                && !looks_like_float(".")
        );
        assert_eq!(pointer(&["a/b", "c~d"]), "/a~1b/c~0d");
    }
}
