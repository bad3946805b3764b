//! Typing errors in the spec's words. serde describes faults in Rust's terms
//! ("invalid type: map, expected struct Arm", "unknown variant `generator`", "expected
//! u32"); [`rewrite`] turns every such message into what a spec author wrote and
//! should write ("a branch arm is `{when, to}` or `{else}`", "unknown node kind
//! `generator`; kinds are ...", "an integer from 1 to 1000").
use super::types::Spec;
use serde_json::Value;

/// Rewrites a serde type or value message about the value at `segments` of `work`
/// (the raw spec being typed) into a whole diagnostic message. `None` for messages
/// it does not know (unknown and missing keys, untagged enums), which the caller words.
pub(crate) fn rewrite(msg: &str, segments: &[String], work: &Value) -> Option<String> {
    if let Some(rest) = msg.strip_prefix("unknown variant `") {
        let (name, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let list = expected
            .split_once("expected one of ")
            .map(|(_, l)| l)
            .or_else(|| expected.split_once("expected ").map(|(_, l)| l))
            .unwrap_or("")
            .trim();
        let (what, whats) = enum_words(segments);
        let place = describe(segments);
        return Some(if list.is_empty() {
            format!("{place}: unknown {what} `{name}`")
        } else {
            format!("{place}: unknown {what} `{name}`; {whats} are {list}")
        });
    }
    let (found, expected) = if let Some(rest) = msg.strip_prefix("invalid type: ") {
        match rest.split_once(", expected ") {
            Some((f, e)) => (found_words(f), e.to_string()),
            None => return None,
        }
    } else if let Some(rest) = msg.strip_prefix("invalid value: ") {
        match rest.split_once(", expected ") {
            Some((f, e)) => (found_words(f), e.to_string()),
            None => return None,
        }
    } else if let Some(rest) = msg.strip_prefix("invalid length ") {
        // A struct read from a list: serde accepts sequences for structs.
        match rest.split_once(", expected ") {
            Some((_, e)) => ("a list".to_string(), e.to_string()),
            None => return None,
        }
    } else {
        return None;
    };
    let wanted = expected_words(&expected, segments, work);
    Some(format!("{wanted}, not {found}"))
}

/// What a serde "found" phrase means in YAML terms.
fn found_words(f: &str) -> String {
    let f = f.trim();
    if f == "map" {
        return "a mapping".into();
    }
    if f == "sequence" {
        return "a list".into();
    }
    if f == "null" || f == "unit value" || f == "unit" {
        return "null".into();
    }
    for (prefix, word) in [
        ("floating point ", "the number "),
        ("integer ", "the integer "),
        ("boolean ", ""),
        ("string ", "the string "),
        ("character ", "the string "),
    ] {
        if let Some(v) = f.strip_prefix(prefix) {
            return format!("{word}{v}");
        }
    }
    format!("`{f}`")
}

/// What the spec expects at a place, from serde's "expected" phrase.
fn expected_words(e: &str, segments: &[String], work: &Value) -> String {
    let last = segments.last().map(String::as_str).unwrap_or("");
    let place = describe(segments);
    let e = e.trim();
    // `struct X with N elements` (from a list) names the struct too.
    let e = e.split(" with ").next().unwrap_or(e);
    if let Some(ty) = e.strip_prefix("struct ") {
        return format!("{place}: {}", struct_words(ty));
    }
    if let Some(ty) = e
        .strip_prefix("internally tagged enum ")
        .or_else(|| e.strip_prefix("enum "))
    {
        return format!("{place}: {}", enum_shape_words(ty, segments, work));
    }
    if e == "variant identifier" || e.starts_with("variant ") {
        let (what, whats) = enum_words(segments);
        return match kinds(segments, work) {
            Some(list) => format!("{place}: a {what}; {whats} are {list}"),
            None => format!("{place}: a {what} name"),
        };
    }
    let integer = |t: &str| {
        matches!(
            t,
            "u8" | "u16"
                | "u32"
                | "u64"
                | "u128"
                | "usize"
                | "i8"
                | "i16"
                | "i32"
                | "i64"
                | "i128"
                | "isize"
        )
    };
    if integer(e) {
        return match last {
            "top_k" | "candidates" => format!("{place} must be an integer from 1 to 1000"),
            "max_visits" | "max_steps" => format!("{place} must be an integer, at least 1"),
            _ if e.starts_with('u') => format!("{place} must be a whole number (0 or more)"),
            _ => format!("{place} must be an integer"),
        };
    }
    let words = match e {
        "f32" | "f64" => "a number".to_string(),
        "a map" | "map" => "a mapping".into(),
        "a sequence" | "sequence" => "a list".into(),
        "string or map" => "a string or a mapping".into(),
        "map with a single key" => "a mapping with a single key".into(),
        "a boolean" | "bool" => "`true` or `false`".into(),
        other => serde_words(other),
    };
    format!("{place}: expected {words}")
}

/// serde's `map` and `sequence` as whole words become `mapping` and `list` (a text
/// that already says `mapping` keeps it).
fn serde_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(match word.as_str() {
            "map" => "mapping",
            "sequence" => "list",
            w => w,
        });
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn describe(segments: &[String]) -> String {
    if segments.is_empty() {
        "the spec".to_string()
    } else {
        format!("`{}`", segments.join("."))
    }
}

/// A spec mapping, by the Rust struct that types it.
fn struct_words(ty: &str) -> String {
    match ty {
        "Arm" => "a branch arm is `{when, to}` or `{else}`".into(),
        "Prompt" => "a prompt is a mapping `{system, user}` (`user` required)".into(),
        "Variant" => "a variant is a mapping `{description, set}`".into(),
        "ModelSpec" => "a model is a mapping with `provider` (and `model`, `params`, ...)".into(),
        "RetrieverSpec" => {
            "a retriever is a mapping with `kind`, `corpus` and `top_k` (and more)".into()
        }
        "StateSpec" => "`state` is a mapping `{schema, initial, reducers}`".into(),
        "OutputSpec" => "`output` is a mapping `{answer, documents, fallback}`".into(),
        "Limits" => "`limits` is a mapping `{max_steps}`".into(),
        "FileRef" => "a file reference is `{file: path}`".into(),
        "Price" => "a price is a mapping of USD per million tokens".into(),
        "Spec" => "a spec is a mapping of `version`, `state`, `nodes`, `edges`, ...".into(),
        other => format!("expected a {} mapping", words_of(other)),
    }
}

/// A tagged spec value (node, tool, retriever) by its Rust enum.
fn enum_shape_words(ty: &str, segments: &[String], work: &Value) -> String {
    let base = match ty {
        "NodeSpec" => "a node",
        "ToolSpec" => "a tool",
        "RetrieverSpec" => "a retriever",
        "Edge" => {
            return "expected a node name (or END), or a list of `when`/`to` arms ending in an `else` arm"
                .into()
        }
        "TemplateSource" => return "expected inline template text or `{file: path}`".into(),
        "SchemaRef" => return "expected a schema file path or an inline schema mapping".into(),
        other => return format!("expected a {}", words_of(other)),
    };
    let mut kind_path = segments.to_vec();
    kind_path.push("kind".into());
    match kinds(&kind_path, work) {
        Some(list) => format!("{base} is a mapping with `kind` (one of {list})"),
        None => format!("{base} is a mapping with `kind`"),
    }
}

/// `RetrieverSpec` → `retriever`, `StructuredMode` → `structured mode`.
fn words_of(ty: &str) -> String {
    let ty = ty.strip_suffix("Spec").unwrap_or(ty);
    let mut out = String::new();
    for (i, c) in ty.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push(' ');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// How to name the members of the enum at `segments`: ("node kind", "kinds").
fn enum_words(segments: &[String]) -> (&'static str, &'static str) {
    let s: Vec<&str> = segments.iter().map(String::as_str).collect();
    match s.as_slice() {
        ["nodes", ..] => ("node kind", "kinds"),
        ["retrievers", ..] => ("retriever kind", "kinds"),
        ["tools", ..] => ("tool kind", "kinds"),
        ["models", _, "provider", ..] => ("provider", "providers"),
        ["models", _, "structured_output", ..] => ("structured output mode", "modes"),
        ["models", ..] => ("model setting", "settings"),
        ["state", "reducers", ..] => ("reducer", "reducers"),
        _ => ("value", "values"),
    }
}

/// The allowed names of the enum at `segments`, found by typing the spec again with a
/// name no enum has there (serde then lists the allowed ones).
fn kinds(segments: &[String], work: &Value) -> Option<String> {
    let mut probe = work.clone();
    let mut cur = &mut probe;
    for s in segments {
        cur = match cur {
            Value::Object(m) => m.get_mut(s)?,
            Value::Array(a) => a.get_mut(s.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    *cur = Value::String("\u{1}".into());
    let err = serde_path_to_error::deserialize::<_, Spec>(&probe).err()?;
    let msg = err.inner().to_string();
    let rest = msg.strip_prefix("unknown variant `")?;
    let list = rest.split_once("expected one of ")?.1.trim();
    Some(list.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(s: &str) -> Vec<String> {
        s.split('.').map(String::from).collect()
    }

    #[test]
    fn a_mapping_in_serdes_words_stays_a_mapping_and_candidates_has_its_range() {
        let w = Value::Null;
        assert_eq!(
            rewrite(
                "invalid type: null, expected a reranker name (`offline`) or a mapping with `kind: tei`",
                &segs("retrievers.book.rerank.reranker"),
                &w
            )
            .unwrap(),
            "`retrievers.book.rerank.reranker`: expected a reranker name (`offline`) or a mapping, not null"
        );
        assert_eq!(
            rewrite(
                "invalid type: string \"twelve\", expected u32",
                &segs("retrievers.book.rerank.candidates"),
                &w
            )
            .unwrap(),
            "`retrievers.book.rerank.candidates` must be an integer from 1 to 1000, not the string \"twelve\""
        );
        assert_eq!(
            serde_words("map or sequence, a bitmap"),
            "mapping or list, a bitmap"
        );
    }

    #[test]
    fn speaks_the_spec() {
        let w = Value::Null;
        assert_eq!(
            rewrite(
                "unknown variant `generator`, expected one of `retrieve`, `llm`",
                &segs("nodes.g"),
                &w
            )
            .unwrap(),
            "`nodes.g`: unknown node kind `generator`; kinds are `retrieve`, `llm`"
        );
        assert_eq!(
            rewrite(
                "invalid type: string \"x\", expected u32",
                &segs("retrievers.docs.top_k"),
                &w
            )
            .unwrap(),
            "`retrievers.docs.top_k` must be an integer from 1 to 1000, not the string \"x\""
        );
        assert_eq!(
            rewrite(
                "invalid type: integer `3`, expected struct Arm",
                &segs("edges.g.0"),
                &w
            )
            .unwrap(),
            "`edges.g.0`: a branch arm is `{when, to}` or `{else}`, not the integer `3`"
        );
        assert_eq!(
            rewrite("invalid type: map, expected a string", &segs("entry"), &w).unwrap(),
            "`entry`: expected a string, not a mapping"
        );
        assert_eq!(rewrite("something else", &[], &w), None);
    }
}
