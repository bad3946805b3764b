//! The minijinja environment shared by validation and the runtime: prompt templates,
//! query templates, branch predicates and `update`/`inputs` expressions.
//!
//! Rules:
//! - Strict undefined: reading a missing variable or attribute is an error, never a
//!   silent empty value or a silent "false" branch. `x is defined` still works.
//! - No auto-escaping (prompts are plain text), and values are never re-rendered:
//!   a document that contains `{{` is inserted as text.
//! - Fuel bounds the work of one evaluation, so a template cannot hang a run.
//!
//! Builtins available besides minijinja's standard filters and tests:
//! - `select_graded(documents, grades, field="binary_score", value="yes")` (filter):
//!   keeps the documents whose grade has `field == value`. A grade is matched to a
//!   document by its `document_id` when that names a document of the list, else by
//!   position (the grade at the document's index, unless that grade names another
//!   document): a map node's grades come in input order, so an id the model made
//!   up (`passage-1`) does not lose the grade. Used for seed
//!   000's "retain only the documents marked yes".
//! - `count_graded(grades, field="binary_score", value="yes")` (filter): how many
//!   grades have `field == value`.
//! - `cite(document)` (filter): the label to cite a document by: its
//!   `metadata.source` when present, else its `id`.
//!
//! An undefined value is explained by [`undefined_message`]: the path, the deepest
//! part of it that exists and what that part holds.
use minijinja::value::Value as JValue;
use minijinja::{Environment, Error, ErrorKind, UndefinedBehavior};

mod comparisons;
pub use comparisons::comparison_operands;
mod blocks;
pub use blocks::unclosed_at;
mod paths;
mod undefined;
pub use undefined::{
    closest, edit_distance, explain_error, explain_undefined, is_undefined_error, suggest,
    unset_detail, Explanation,
};

/// The message for an undefined value that [`explain_error`] can explain: the path,
/// where it is (`name:line:column` for a template, `name` being the template's), and
/// what is missing. `None` for other errors and unexplained ones.
pub fn undefined_message(
    err: &Error,
    source: &str,
    template: bool,
    ctx: &JValue,
) -> Option<String> {
    let x = explain_error(err, source, template, ctx)?;
    let mut s = if template {
        format!(
            "undefined value: `{}` (in {}:{}:{}): {}",
            x.path,
            err.name().unwrap_or("template"),
            x.line,
            x.column,
            x.detail
        )
    } else {
        format!("undefined value: `{}`: {}", x.path, x.detail)
    };
    // An operation that refused the undefined operand says which one.
    if err.kind() != ErrorKind::UndefinedError {
        if let Some(d) = err.detail() {
            s.push_str(&format!(" ({d})"));
        }
    }
    Some(s)
}

/// Fuel (instructions) one template or expression evaluation may use.
pub const FUEL: u64 = 5_000_000;

/// Names every template can read besides state fields: minijinja's global functions and
/// ragloop's builtins.
pub const GLOBAL_NAMES: &[&str] = &[
    "range",
    "dict",
    "namespace",
    "debug",
    "true",
    "false",
    "none",
];

/// Builds the shared environment.
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_fuel(Some(FUEL));
    env.set_recursion_limit(64);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_keep_trailing_newline(true);
    env.add_filter("select_graded", select_graded);
    env.add_filter("count_graded", count_graded);
    env.add_filter("cite", cite);
    env
}

fn grade_matches(grade: &JValue, field: &str, value: &JValue) -> bool {
    grade.get_attr(field).map(|v| &v == value).unwrap_or(false)
}

fn select_graded(
    documents: JValue,
    grades: JValue,
    field: Option<String>,
    value: Option<JValue>,
) -> Result<JValue, Error> {
    let field = field.unwrap_or_else(|| "binary_score".into());
    let value = value.unwrap_or_else(|| JValue::from("yes"));
    let docs: Vec<JValue> = documents.try_iter()?.collect();
    let grades: Vec<JValue> = grades.try_iter()?.collect();
    let ids: Vec<JValue> = docs
        .iter()
        .filter_map(|d| d.get_attr("id").ok().filter(|v| !v.is_undefined()))
        .collect();
    let mut kept = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        let id = doc.get_attr("id").ok().filter(|v| !v.is_undefined());
        let by_id = id.as_ref().and_then(|id| {
            grades.iter().find(|g| {
                g.get_attr("document_id")
                    .ok()
                    .is_some_and(|d| !d.is_undefined() && &d == id)
            })
        });
        // By position when the grade at the same index names no document of the list
        // (no `document_id`, or one the model made up, e.g. "passage-1"): grades of a
        // map node come back in input order.
        let grade = match by_id {
            Some(g) => Some(g),
            None => grades.get(i).filter(|g| match g.get_attr("document_id") {
                Ok(d) if !d.is_undefined() && !d.is_none() => !ids.contains(&d),
                _ => true,
            }),
        };
        if grade.is_some_and(|g| grade_matches(g, &field, &value)) {
            kept.push(doc.clone());
        }
    }
    if grades.len() > docs.len() * 4 + 64 {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "more grades than documents",
        ));
    }
    Ok(JValue::from(kept))
}

fn count_graded(
    grades: JValue,
    field: Option<String>,
    value: Option<JValue>,
) -> Result<JValue, Error> {
    let field = field.unwrap_or_else(|| "binary_score".into());
    let value = value.unwrap_or_else(|| JValue::from("yes"));
    Ok(JValue::from(
        grades
            .try_iter()?
            .filter(|g| grade_matches(g, &field, &value))
            .count(),
    ))
}

/// `doc | cite`: the document's source ([`crate::retrieval::source_of`]), else `""`.
fn cite(doc: JValue) -> JValue {
    let source = serde_json::to_value(&doc)
        .ok()
        .and_then(|d| crate::retrieval::source_of(&d));
    JValue::from(source.unwrap_or_default())
}

/// Marks which bytes of `text` are code, as opposed to the inside of a string literal
/// (`'...'` or `"..."`, with backslash escapes; the quotes count as literal). The
/// scanners of this module and of the runtime use it to skip string contents.
pub fn code_mask(text: &str) -> Vec<bool> {
    let bytes = text.as_bytes();
    let mut mask = vec![true; bytes.len()];
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) => {
                mask[i] = false;
                if b == b'\\' {
                    if let Some(m) = mask.get_mut(i + 1) {
                        *m = false;
                    }
                    i += 2;
                    continue;
                }
                if b == q {
                    quote = None;
                }
            }
            None if b == b'"' || b == b'\'' => {
                mask[i] = false;
                quote = Some(b);
            }
            None => {}
        }
        i += 1;
    }
    mask
}

/// Why [`check_expression_text`] or [`check_template_text`] refuses a text before
/// minijinja sees it. Validation shows the message as a diagnostic's, after the
/// expression's or template's name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// An expression with more than [`MAX_EXPRESSION_OPERATORS`] operators.
    #[error("the expression has {ops} operators; at most {MAX_EXPRESSION_OPERATORS} are allowed (split it into update steps or state fields)")]
    ExpressionOperators {
        /// The operators counted.
        ops: usize,
    },
    /// A template delimiter (`{{`, `}}`, `{%`, `%}`, `{#`, `#}`) outside string
    /// literals of an expression.
    #[error("`{delimiter}` cannot appear in an expression (offset {offset}); write the expression without template delimiters")]
    Delimiter {
        /// The delimiter.
        delimiter: String,
        /// Its byte offset in the expression.
        offset: usize,
    },
    /// A template tag with more than [`MAX_EXPRESSION_OPERATORS`] operators.
    #[error("the tag at offset {offset} has {ops} operators; at most {MAX_EXPRESSION_OPERATORS} are allowed in one tag")]
    TagOperators {
        /// The tag's byte offset in the template.
        offset: usize,
        /// The operators counted.
        ops: usize,
    },
}

/// Rejects expression text that holds template delimiters (`{{`, `}}`, `{%`, `%}`,
/// `{#`, `#}`) outside string literals. An expression is the inside of a tag already;
/// minijinja 2.24's lexer panics on a stray `}}` in an expression (found by
/// fuzzing), so every expression goes through this check before it is compiled.
///
/// # Errors
/// [`TextError::Delimiter`] naming the delimiter and its byte offset;
/// [`TextError::ExpressionOperators`] past [`MAX_EXPRESSION_OPERATORS`].
pub fn check_expression_text(src: &str) -> Result<(), TextError> {
    let mask = code_mask(src);
    let ops = operator_count(src, &mask);
    if ops > MAX_EXPRESSION_OPERATORS {
        return Err(TextError::ExpressionOperators { ops });
    }
    for i in 0..src.len().saturating_sub(1) {
        if !(mask[i] && mask[i + 1]) {
            continue;
        }
        if let Some(pair) = src.get(i..i + 2) {
            if matches!(pair, "{{" | "}}" | "{%" | "%}" | "{#" | "#}") {
                return Err(TextError::Delimiter {
                    delimiter: pair.to_string(),
                    offset: i,
                });
            }
        }
    }
    Ok(())
}

/// Checks that no `{{ … }}` or `{% … %}` tag of a template holds more than
/// [`MAX_EXPRESSION_OPERATORS`] operators (see there: minijinja would overflow the
/// stack compiling it).
///
/// # Errors
/// [`TextError::TagOperators`], naming the tag's byte offset and its operator count.
pub fn check_template_text(src: &str) -> Result<(), TextError> {
    let mut from = 0;
    while let Some(open) = src[from..].find(['{']).map(|i| from + i) {
        let close = match src.get(open..open + 2) {
            Some("{{") => "}}",
            Some("{%") => "%}",
            _ => {
                from = open + 1;
                continue;
            }
        };
        let body_start = open + 2;
        let end = src[body_start..]
            .find(close)
            .map_or(src.len(), |i| body_start + i);
        let body = &src[body_start..end];
        let ops = operator_count(body, &code_mask(body));
        if ops > MAX_EXPRESSION_OPERATORS {
            return Err(TextError::TagOperators { offset: open, ops });
        }
        from = (end + close.len()).min(src.len());
        if from <= open {
            break;
        }
    }
    Ok(())
}

/// The most operators (`and`, `or`, `not`, `in`, `is`, comparisons, arithmetic, `~`,
/// `|`) one predicate or expression may hold. minijinja folds an expression's
/// constants recursively, one stack frame per operator of a chain, so a hostile
/// `a or b or …` of 50,000 terms overflowed the stack; no real predicate comes near.
pub const MAX_EXPRESSION_OPERATORS: usize = 1000;

/// Operators in the code parts of an expression (string literals excluded).
fn operator_count(src: &str, mask: &[bool]) -> usize {
    let bytes = src.as_bytes();
    let mut n = 0;
    let mut i = 0;
    while i < bytes.len() {
        if !mask[i] {
            i += 1;
            continue;
        }
        let b = bytes[i];
        if b.is_ascii_alphabetic() || b == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            if matches!(&src[start..i], "and" | "or" | "not" | "in" | "is") {
                n += 1;
            }
            continue;
        }
        if matches!(
            b,
            b'+' | b'-' | b'*' | b'/' | b'%' | b'~' | b'|' | b'<' | b'>' | b'=' | b'!'
        ) {
            // `==`, `<=`, `//`, `**` are one operator.
            let two = bytes.get(i + 1).copied();
            if matches!(
                (b, two),
                (b'=' | b'<' | b'>' | b'!', Some(b'=')) | (b'/', Some(b'/')) | (b'*', Some(b'*'))
            ) {
                i += 1;
            }
            n += 1;
        }
        i += 1;
    }
    n
}

/// A filter or test a template or expression uses that the environment does not
/// define, or a tag prompts cannot use (`include`, `import`, `from`, `extends`: a
/// prompt is one standalone file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownName {
    /// `filter`, `test` or `tag`.
    pub what: &'static str,
    /// The name as written.
    pub name: String,
    /// Byte range in the checked text.
    pub range: std::ops::Range<usize>,
}

fn ident_at(bytes: &[u8], mut i: usize) -> Option<(usize, usize)> {
    while i < bytes.len()
        && (bytes[i] == b' ' || bytes[i] == b'\t' || bytes[i] == b'\n' || bytes[i] == b'\r')
    {
        i += 1;
    }
    let start = i;
    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
        i += 1;
    }
    (i > start && !bytes[start].is_ascii_digit()).then_some((start, i))
}

/// Whether rendering the one-tag `probe` fails with `kind` (an unknown filter or test).
fn is_unknown(env: &Environment<'static>, probe: &str, kind: ErrorKind) -> bool {
    matches!(env.render_str(probe, ()), Err(err) if err.kind() == kind)
}

/// Scans code (an expression, or the inside of template tags when `template` is true)
/// for filters and tests the environment lacks, and for tags prompts cannot use.
/// Names are checked by asking `env` itself, so custom filters count as known.
pub fn unknown_names(env: &Environment<'static>, text: &str, template: bool) -> Vec<UnknownName> {
    let mut regions: Vec<std::ops::Range<usize>> = Vec::new();
    if template {
        let mut pos = 0;
        while let Some(rel) = text[pos..].find('{') {
            let open = pos + rel;
            let close = match text.get(open..open + 2) {
                Some("{{") => "}}",
                Some("{%") => "%}",
                _ => {
                    pos = open + 1;
                    continue;
                }
            };
            let end = text[open + 2..]
                .find(close)
                .map_or(text.len(), |e| open + 2 + e);
            regions.push(open + 2..end);
            pos = end;
        }
    } else {
        regions.push(0..text.len());
    }
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mask = code_mask(text);
    for region in regions {
        if template && text.get(region.start - 1..region.start) == Some("%") {
            let mut k = region.start;
            while k < region.end && matches!(bytes[k], b'-' | b'+' | b'~') {
                k += 1;
            }
            if let Some((a, b)) = ident_at(bytes, k) {
                if matches!(&text[a..b], "include" | "import" | "from" | "extends") {
                    out.push(UnknownName {
                        what: "tag",
                        name: text[a..b].to_string(),
                        range: a..b,
                    });
                }
            }
        }
        let mut i = region.start;
        while i < region.end {
            let b = bytes[i];
            if !mask[i] {
                i += 1;
                continue;
            }
            if b == b'|' && bytes.get(i + 1) != Some(&b'|') && (i == 0 || bytes[i - 1] != b'|') {
                if let Some((a, e)) = ident_at(bytes, i + 1) {
                    let name = &text[a..e];
                    if is_unknown(
                        env,
                        &format!("{{{{ none | {name} }}}}"),
                        ErrorKind::UnknownFilter,
                    ) {
                        out.push(UnknownName {
                            what: "filter",
                            name: name.to_string(),
                            range: a..e,
                        });
                    }
                }
            } else if text.get(i..i + 2) == Some("is")
                && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'))
                && bytes.get(i + 2).is_some_and(|c| c.is_ascii_whitespace())
            {
                let mut k = i + 2;
                if let Some((a, e)) = ident_at(bytes, k) {
                    if &text[a..e] == "not" {
                        k = e;
                    }
                }
                if let Some((a, e)) = ident_at(bytes, k) {
                    let name = &text[a..e];
                    if is_unknown(
                        env,
                        &format!("{{{{ none is {name} }}}}"),
                        ErrorKind::UnknownTest,
                    ) {
                        out.push(UnknownName {
                            what: "test",
                            name: name.to_string(),
                            range: a..e,
                        });
                    }
                }
            }
            i += 1;
        }
    }
    out
}

/// Finds where identifier `name` is first read inside a template's tags
/// (`{{ ... }}` or `{% ... %}`). Returns a byte range into `source`.
pub fn locate_identifier(source: &str, name: &str) -> Option<std::ops::Range<usize>> {
    let mut pos = 0;
    while let Some(open_rel) = source[pos..].find(['{']) {
        let open = pos + open_rel;
        let rest = &source[open..];
        let close_pat = if rest.starts_with("{{") {
            "}}"
        } else if rest.starts_with("{%") {
            "%}"
        } else {
            pos = open + 1;
            continue;
        };
        let end = source[open + 2..]
            .find(close_pat)
            .map_or(source.len(), |e| open + 2 + e);
        if let Some(r) = find_word(&source[open + 2..end], name) {
            return Some(open + 2 + r.start..open + 2 + r.end);
        }
        pos = end;
    }
    find_word(source, name)
}

/// First whole-word occurrence of `name` in `text` that is not an attribute (`.name`)
/// or inside a string literal.
pub fn find_word(text: &str, name: &str) -> Option<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mask = code_mask(text);
    (0..bytes.len())
        .find(|&i| {
            mask[i]
                && text[i..].starts_with(name)
                && (i == 0 || (!is_ident(bytes[i - 1]) && bytes[i - 1] != b'.'))
                && bytes.get(i + name.len()).is_none_or(|&c| !is_ident(c))
        })
        .map(|i| i..i + name.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_are_counted_in_code_only_and_capped_per_tag() {
        assert_eq!(
            operator_count(
                "a or not b and c >= 1 | length",
                &code_mask("a or not b and c >= 1 | length")
            ),
            5
        );
        let lit = "x == 'a or b or c'";
        assert_eq!(operator_count(lit, &code_mask(lit)), 1);
        let long = vec!["a"; 1002].join(" or ");
        assert!(check_expression_text(&long)
            .unwrap_err()
            .to_string()
            .contains("1001 operators"));
        assert_eq!(
            check_expression_text(&long),
            Err(TextError::ExpressionOperators { ops: 1001 })
        );
        assert!(check_expression_text(&vec!["a"; 1001].join(" or ")).is_ok());
        let tpl = format!("{{{{ x }}}} text {{% if {long} %}}y{{% endif %}}");
        assert!(check_template_text(&tpl)
            .unwrap_err()
            .to_string()
            .contains("offset 13"));
        assert_eq!(
            check_template_text(&tpl),
            Err(TextError::TagOperators {
                offset: 13,
                ops: 1001
            })
        );
        // Many small tags are fine: the cap is per tag.
        assert!(check_template_text(&"{{ a or b }}".repeat(2000)).is_ok());
    }
    use serde_json::json;

    #[test]
    fn strict_undefined_fails_predicates() {
        let env = environment();
        let e = env.compile_expression("missing > 3").unwrap();
        assert!(e.eval(json!({})).is_err());
        let e = env.compile_expression("missing is defined").unwrap();
        assert_eq!(e.eval(json!({})).unwrap(), JValue::from(false));
    }

    #[test]
    fn select_graded_matches_by_id_then_position() {
        let env = environment();
        let e = env
            .compile_expression("documents | select_graded(grades)")
            .unwrap();
        let state = json!({
            "documents": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
            "grades": [{"document_id": "c", "binary_score": "yes"}, {"document_id": "a", "binary_score": "no"},
                       {"document_id": "b", "binary_score": "yes"}]
        });
        let v: serde_json::Value = serde_json::to_value(e.eval(state).unwrap()).unwrap();
        assert_eq!(v, json!([{"id": "b"}, {"id": "c"}]));
        // A document_id that names no document falls back to the position; one that
        // names another document does not.
        let state = json!({
            "documents": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
            "grades": [{"document_id": "passage-1", "binary_score": "yes"},
                       {"document_id": "a", "binary_score": "no"},
                       {"document_id": null, "binary_score": "yes"}]
        });
        let v: serde_json::Value = serde_json::to_value(e.eval(state).unwrap()).unwrap();
        assert_eq!(v, json!([{"id": "c"}]));
        let state = json!({
            "documents": [{"id": "a"}, {"id": "b"}],
            "grades": [{"document_id": "passage-1", "binary_score": "yes"},
                       {"document_id": "passage-2", "binary_score": "yes"}]
        });
        let v: serde_json::Value = serde_json::to_value(e.eval(state).unwrap()).unwrap();
        assert_eq!(v, json!([{"id": "a"}, {"id": "b"}]));
        let e = env.compile_expression("grades | count_graded").unwrap();
        assert_eq!(
            e.eval(json!({"grades": [{"binary_score": "yes"}, {"binary_score": "no"}]}))
                .unwrap(),
            JValue::from(1)
        );
    }

    #[test]
    fn finds_unknown_filters_tests_and_tags() {
        let env = environment();
        let names = |t: &str, tpl: bool| {
            unknown_names(&env, t, tpl)
                .into_iter()
                .map(|u| (u.what, u.name))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names("x | nosuch > 1 or y || z", false),
            vec![("filter", "nosuch".to_string())]
        );
        assert_eq!(
            names(
                "x | length > 0 and d | select_graded(g) and x is defined and y is not nosuchtest",
                false
            ),
            vec![("test", "nosuchtest".to_string())]
        );
        assert_eq!(
            names(
                "a {{ q | upper }} {{ q | nope }} {% include 'x' %} '|' ",
                true
            ),
            vec![
                ("filter", "nope".to_string()),
                ("tag", "include".to_string())
            ]
        );
        assert!(names("x == 'a | b'", false).is_empty());
    }

    #[test]
    fn delimiters_in_expressions_are_rejected() {
        assert!(check_expression_text("grades }}| count_graded > 0").is_err());
        assert!(check_expression_text("{{ x }}").is_err());
        assert!(check_expression_text("a %} b").is_err());
        let e = check_expression_text("a %} b").unwrap_err();
        assert_eq!(
            e,
            TextError::Delimiter {
                delimiter: "%}".into(),
                offset: 2
            }
        );
        assert_eq!(
            e.to_string(),
            "`%}` cannot appear in an expression (offset 2); write the expression without template delimiters"
        );
        assert!(check_expression_text("x == '}}'").is_ok());
        assert!(check_expression_text("x == \"{%\" and y").is_ok());
        assert!(check_expression_text("d['k'] > 1").is_ok());
    }

    #[test]
    fn documents_are_not_rerendered() {
        let env = environment();
        let out = env
            .render_str("{{ d }}", json!({"d": "{{ secret }} {% if %}"}))
            .unwrap();
        assert_eq!(out, "{{ secret }} {% if %}");
    }

    #[test]
    fn locates_identifiers_in_tags_only() {
        let src = "question: {{ documents }} and {{ x.question }} {{ question }}";
        let r = locate_identifier(src, "question").unwrap();
        assert_eq!(&src[r.start - 3..r.end], "{{ question");
    }
}
