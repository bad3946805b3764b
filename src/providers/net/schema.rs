//! Structured-output schemas as sent: the tool name and description, the wire form
//! (`$schema`/`$id` removed), OpenAI's strict adaptation and its way back.
use serde_json::Value;

/// The function name offered for a schema: its `title` reduced to
/// `[A-Za-z0-9_-]{1,64}`, else `respond`.
pub(crate) fn tool_name(schema: &Value) -> String {
    let t: String = schema
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if t.trim_matches('_').is_empty() {
        "respond".into()
    } else {
        t
    }
}

/// The tool description: the schema's `description`, else a generic sentence.
pub(crate) fn tool_description(schema: &Value) -> String {
    schema
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| "Return the answer as structured output.".into())
}

/// The schema as sent to a provider: `$schema` and `$id` removed (some servers
/// reject them).
pub(crate) fn wire_schema(schema: &Value) -> Value {
    let mut s = schema.clone();
    if let Value::Object(m) = &mut s {
        m.remove("$schema");
        m.remove("$id");
    }
    s
}

/// A schema adapted to OpenAI's strict structured outputs: every object with
/// `properties` gets `additionalProperties: false` and lists all its properties in
/// `required`, the optional ones made nullable. `None` when the schema cannot be
/// made strict (a free-form object, `additionalProperties` allowing extra keys):
/// it is then sent with `strict: false`. Outputs are mapped back with
/// [`drop_optional_nulls`].
pub(crate) fn strict_schema(schema: &Value) -> Option<Value> {
    fn walk(s: &mut Value) -> bool {
        let Value::Object(m) = s else { return true };
        let is_object =
            m.get("type").and_then(Value::as_str) == Some("object") || m.contains_key("properties");
        if is_object {
            if !matches!(
                m.get("additionalProperties"),
                None | Some(Value::Bool(false))
            ) {
                return false;
            }
            let Some(Value::Object(props)) = m.get_mut("properties") else {
                return false;
            };
            let names: Vec<String> = props.keys().cloned().collect();
            let mut ok = true;
            for p in props.values_mut() {
                ok &= walk(p);
            }
            let required: Vec<String> = m
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            if let Some(Value::Object(props)) = m.get_mut("properties") {
                for (k, p) in props.iter_mut() {
                    if !required.contains(k) {
                        make_nullable(p);
                    }
                }
            }
            m.insert("additionalProperties".into(), Value::Bool(false));
            m.insert(
                "required".into(),
                Value::Array(names.into_iter().map(Value::String).collect()),
            );
            if !ok {
                return false;
            }
        }
        let mut ok = true;
        for key in ["items", "not"] {
            if let Some(v) = m.get_mut(key) {
                ok &= walk(v);
            }
        }
        for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
            if let Some(Value::Array(a)) = m.get_mut(key) {
                for v in a {
                    ok &= walk(v);
                }
            }
        }
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(d)) = m.get_mut(key) {
                for v in d.values_mut() {
                    ok &= walk(v);
                }
            }
        }
        ok
    }
    fn make_nullable(p: &mut Value) {
        let Value::Object(m) = p else { return };
        match m.get_mut("type") {
            Some(Value::String(t)) => {
                let t = t.clone();
                if t != "null" {
                    m.insert("type".into(), serde_json::json!([t, "null"]));
                }
            }
            Some(Value::Array(a)) => {
                if !a.iter().any(|t| t == "null") {
                    a.push(Value::String("null".into()));
                }
            }
            _ => {
                let inner = Value::Object(std::mem::take(m));
                m.insert("anyOf".into(), serde_json::json!([inner, {"type": "null"}]));
            }
        }
        if let Some(Value::Array(e)) = m.get_mut("enum") {
            if !e.contains(&Value::Null) {
                e.push(Value::Null);
            }
        }
    }
    let mut s = wire_schema(schema);
    walk(&mut s).then_some(s)
}

/// Removes the `null` values a strict schema allowed for properties the original
/// schema left optional, so the output validates against the original schema.
pub(crate) fn drop_optional_nulls(schema: &Value, out: &mut Value) {
    match out {
        Value::Object(o) => {
            let Some(props) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            o.retain(|k, v| {
                !(v.is_null() && props.contains_key(k) && !required.contains(&k.as_str()))
            });
            for (k, v) in o.iter_mut() {
                if let Some(ps) = props.get(k) {
                    drop_optional_nulls(ps, v);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for v in a {
                    drop_optional_nulls(items, v);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[test]
    fn strict_adaptation_and_back() {
        let s = json!({"$schema": "x", "title": "T", "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"},
                           "c": {"type": "object", "properties": {"d": {"enum": ["x", "y"]}}}},
            "required": ["a"]});
        let strict = strict_schema(&s).unwrap();
        assert!(strict.get("$schema").is_none());
        assert_eq!(strict["required"], json!(["a", "b", "c"]));
        assert_eq!(strict["additionalProperties"], json!(false));
        assert_eq!(
            strict["properties"]["b"]["type"],
            json!(["integer", "null"])
        );
        assert_eq!(
            strict["properties"]["c"]["properties"]["d"]["anyOf"][1],
            json!({"type": "null"})
        );
        assert_eq!(strict["properties"]["c"]["required"], json!(["d"]));
        let mut out = json!({"a": "x", "b": null, "c": {"d": null}});
        drop_optional_nulls(&s, &mut out);
        assert_eq!(out, json!({"a": "x", "c": {}}));
        // Free-form objects cannot be strict.
        assert!(strict_schema(&json!({"type": "object"})).is_none());
        assert!(strict_schema(
            &json!({"type": "object", "properties": {}, "additionalProperties": true})
        )
        .is_none());
    }

    #[test]
    fn names() {
        assert_eq!(
            tool_name(&json!({"title": "Grading Result"})),
            "Grading_Result"
        );
        assert_eq!(tool_name(&json!({})), "respond");
    }
}
