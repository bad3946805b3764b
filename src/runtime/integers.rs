//! Integers written as floats: JSON Schema's `type: integer` accepts `7.0` (a number
//! with a zero fractional part), so a value validated against a schema may still be
//! the float `7.0` where the schema says integer: from `--set n=7.0`, from an LLM's
//! structured output, from a spec's `state.initial`, from an update (`add` of a
//! float). [`normalize`] stores such a value as the integer `7`, so templates show
//! `7`, traces and results hold `7`, and `range(n)` works.
//!
//! Where "the schema says integer" is followed through `properties`,
//! `additionalProperties`, `items` (a schema, or a list of schemas), `prefixItems`,
//! `additionalItems`, local `$ref`s (`#/...`), `allOf`/`anyOf`/`oneOf` and
//! `then`/`else`. Converting is always safe after validation: `7` and `7.0` are the
//! same number to JSON Schema, so no constraint that held stops holding.
//!
//! A float whose magnitude is 2^53 or more is integer-valued to JSON Schema but need
//! not be the integer that was written (`9007199254740993.0` reads as
//! `9007199254740992.0`, `18446744073709551616` is beyond u64): where the schema says
//! integer (and allows no `number`), [`inexact`] reports it as a violation instead of
//! letting it be stored as a float.
use serde_json::{Map, Value};

/// Deepest nesting followed (values and `$ref` chains); deeper values are left as
/// they are.
const MAX_DEPTH: usize = 64;

/// Whether `schema` mentions the `integer` type anywhere (when it does not,
/// [`normalize`] has nothing to do).
pub(crate) fn mentions_integer(schema: &Value) -> bool {
    match schema {
        Value::String(s) => s == "integer",
        Value::Array(a) => a.iter().any(mentions_integer),
        Value::Object(m) => m.values().any(mentions_integer),
        _ => false,
    }
}

/// Rewrites, in `value`, every integer-valued float (`7.0`, `-3.0`; magnitude below
/// 2^53) that `schema` (a subschema of `root`, or `root` itself) types as `integer`
/// to the integer.
pub(crate) fn normalize(root: &Value, schema: &Value, value: &mut Value) {
    walk(root, &[schema], value, 0);
}

/// [`normalize`] for the value of property `key` of an object `schema` describes (a
/// state field, before it is written to the state).
pub(crate) fn normalize_member(root: &Value, schema: &Value, key: &str, value: &mut Value) {
    let schemas = expand(root, &[schema]);
    let members = member_schemas(&schemas, key);
    if !members.is_empty() {
        walk(root, &members, value, 0);
    }
}

fn walk(root: &Value, schemas: &[&Value], value: &mut Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let schemas = expand(root, schemas);
    match value {
        Value::Number(n) => {
            if let Some(i) = integral(n) {
                if schemas.iter().any(|s| says_integer(s)) {
                    *value = Value::from(i);
                }
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let members = member_schemas(&schemas, k);
                if !members.is_empty() {
                    walk(root, &members, v, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                let of_item = item_schemas(&schemas, i);
                if !of_item.is_empty() {
                    walk(root, &of_item, v, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// 2^53: from here on, not every integer is a float (and a float is not known to be
/// the integer that was written).
const EXACT_LIMIT: f64 = 9_007_199_254_740_992.0;

/// Every float in `value` with magnitude 2^53 or more (or infinite) at a place that
/// `schema` (a subschema of `root`) types as `integer` and not also as `number`, as
/// (JSON pointer into `value`, message). Such a float cannot be stored as the exact
/// integer it stands for.
pub(crate) fn inexact(root: &Value, schema: &Value, value: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    find_inexact(root, &[schema], value, &mut String::new(), &mut out, 0);
    out
}

fn find_inexact(
    root: &Value,
    schemas: &[&Value],
    value: &Value,
    pointer: &mut String,
    out: &mut Vec<(String, String)>,
    depth: usize,
) {
    if depth > MAX_DEPTH || out.len() >= 16 {
        return;
    }
    let schemas = expand(root, schemas);
    match value {
        Value::Number(n) => {
            let Some(f) = n.as_f64().filter(|_| n.is_f64()) else {
                return;
            };
            if f.abs() >= EXACT_LIMIT
                && schemas.iter().any(|s| says_integer(s))
                && !schemas.iter().any(|s| says_number(s))
            {
                out.push((
                    pointer.clone(),
                    format!(
                        "{n} is not an exact integer: integers written as floats, or beyond the 64-bit range, must be below 2^53 (9007199254740992) in magnitude; write it without a fraction and within the 64-bit range"
                    ),
                ));
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                let members = member_schemas(&schemas, k);
                if !members.is_empty() {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    find_inexact(root, &members, v, pointer, out, depth + 1);
                    pointer.truncate(len);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let of_item = item_schemas(&schemas, i);
                if !of_item.is_empty() {
                    let len = pointer.len();
                    pointer.push_str(&format!("/{i}"));
                    find_inexact(root, &of_item, v, pointer, out, depth + 1);
                    pointer.truncate(len);
                }
            }
        }
        _ => {}
    }
}

fn says_number(schema: &Map<String, Value>) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "number",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "number"),
        _ => false,
    }
}

fn integral(n: &serde_json::Number) -> Option<i64> {
    if !n.is_f64() {
        return None;
    }
    let f = n.as_f64()?;
    (f.is_finite() && f.fract() == 0.0 && f.abs() < EXACT_LIMIT).then_some(f as i64)
}

fn says_integer(schema: &Map<String, Value>) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    }
}

/// The object schemas that apply at one place: `schemas` and, recursively, what
/// their `$ref`, `allOf`, `anyOf`, `oneOf`, `then` and `else` lead to.
fn expand<'a>(root: &'a Value, schemas: &[&'a Value]) -> Vec<&'a Map<String, Value>> {
    fn go<'a>(root: &'a Value, s: &'a Value, out: &mut Vec<&'a Map<String, Value>>, d: usize) {
        let Value::Object(m) = s else { return };
        if d > MAX_DEPTH || out.len() >= 256 || out.iter().any(|o| std::ptr::eq(*o, m)) {
            return;
        }
        out.push(m);
        if let Some(target) = m.get("$ref").and_then(Value::as_str).and_then(|r| {
            let p = r.strip_prefix('#')?;
            if p.is_empty() {
                Some(root)
            } else {
                root.pointer(p)
            }
        }) {
            go(root, target, out, d + 1);
        }
        for k in ["allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = m.get(k) {
                for b in branches {
                    go(root, b, out, d + 1);
                }
            }
        }
        for k in ["then", "else"] {
            if let Some(b) = m.get(k) {
                go(root, b, out, d + 1);
            }
        }
    }
    let mut out = Vec::new();
    for s in schemas {
        go(root, s, &mut out, 0);
    }
    out
}

fn member_schemas<'a>(schemas: &[&'a Map<String, Value>], key: &str) -> Vec<&'a Value> {
    let mut out = Vec::new();
    for s in schemas {
        match s.get("properties").and_then(|p| p.get(key)) {
            Some(p) => out.push(p),
            None => out.extend(s.get("additionalProperties").filter(|a| a.is_object())),
        }
    }
    out
}

fn item_schemas<'a>(schemas: &[&'a Map<String, Value>], i: usize) -> Vec<&'a Value> {
    let mut out = Vec::new();
    for s in schemas {
        let prefix = s.get("prefixItems").and_then(Value::as_array);
        match (prefix, s.get("items")) {
            (Some(p), _) if i < p.len() => out.push(&p[i]),
            (Some(_), Some(items)) => out.push(items),
            (None, Some(Value::Array(tuple))) => match tuple.get(i) {
                Some(t) => out.push(t),
                None => out.extend(s.get("additionalItems")),
            },
            (None, Some(items)) => out.push(items),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn norm(schema: Value, mut v: Value) -> String {
        normalize(&schema, &schema, &mut v);
        v.to_string()
    }

    #[test]
    fn integer_valued_floats_become_integers_where_the_schema_says_integer() {
        let schema = json!({
            "type": "object",
            "$defs": {"count": {"type": ["integer", "null"]}},
            "properties": {
                "n": {"type": "integer"},
                "x": {"type": "number"},
                "list": {"type": "array", "items": {"type": "integer"}},
                "pair": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "integer"}]},
                "nested": {"type": "object", "properties": {"k": {"$ref": "#/$defs/count"}}},
                "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "map": {"type": "object", "additionalProperties": {"type": "integer"}}
            }
        });
        assert_eq!(
            norm(
                schema,
                json!({"n": 7.0, "x": 7.0, "list": [1.0, 2, 3.0], "pair": [1.0, 2.0],
                       "nested": {"k": 4.0}, "either": 5.0, "map": {"a": 6.0}, "other": 8.0})
            ),
            r#"{"n":7,"x":7.0,"list":[1,2,3],"pair":[1.0,2],"nested":{"k":4},"either":5,"map":{"a":6},"other":8.0}"#
        );
    }

    #[test]
    fn fractions_huge_values_and_cycles_are_left_alone() {
        let schema = json!({"type": "integer"});
        assert_eq!(norm(schema.clone(), json!(7.5)), "7.5");
        assert_eq!(norm(schema.clone(), json!(1e300)), "1e+300");
        assert_eq!(norm(schema, json!(-3.0)), "-3");
        // A `$ref` cycle ends (and is followed where the value goes).
        let cyclic = json!({"$ref": "#", "properties": {"a": {"$ref": "#"}}, "type": "integer"});
        assert_eq!(norm(cyclic, json!({"a": {"a": 2.0}})), r#"{"a":{"a":2}}"#);
        assert!(!mentions_integer(&json!({"type": "string"})));
    }

    #[test]
    fn floats_beyond_2_pow_53_are_inexact_where_the_schema_says_integer() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer"},
            "x": {"type": "number"},
            "either": {"type": ["integer", "number"]},
            "list": {"type": "array", "items": {"$ref": "#/properties/n"}}
        }});
        let v = json!({"n": 9_007_199_254_740_992.0_f64, "x": 1e300, "either": 1e20,
                       "list": [1, 1.8446744073709552e19, -1e300], "other": 1e30});
        let found = inexact(&schema, &schema, &v);
        let pointers: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(pointers, ["/n", "/list/1", "/list/2"], "{found:?}");
        assert!(
            found[0]
                .1
                .contains("9007199254740992.0 is not an exact integer"),
            "{found:?}"
        );
        // Below 2^53, and integers (u64 included), are exact.
        let fine = json!({"n": 9_007_199_254_740_991.0_f64, "list": [u64::MAX, i64::MIN]});
        assert!(inexact(&schema, &schema, &fine).is_empty());
    }

    #[test]
    fn members_of_the_state() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let mut v = json!(3.0);
        normalize_member(&schema, &schema, "n", &mut v);
        assert_eq!(v.to_string(), "3");
        let mut v = json!(3.0);
        normalize_member(&schema, &schema, "unknown", &mut v);
        assert_eq!(v.to_string(), "3.0");
    }
}
