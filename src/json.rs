//! Small helpers about JSON values that every layer's messages use.
use serde_json::Value;

/// A JSON type name for messages: `null`, `a boolean`, `a number`, `a string`,
/// `an array`, `an object`.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
