//! The run state: initial values, reducers and schema checks.
//!
//! The state is a JSON object (`serde_json::Map`, keys in insertion order). It starts
//! from the spec's `state.initial`, then the question (field `question`), then every
//! `--set FIELD=VALUE` in order. After each node, the node's update is merged field by
//! field through the field's reducer and the whole state is validated against the
//! state JSON Schema.
use crate::spec::types::Reducer;
use indexmap::IndexMap;
use serde_json::{Map, Value};

/// Why a state value could not be set, merged or checked. The messages are the
/// runtime's (a step failure wraps them as `node `N`: update of `F`: ...`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// `--set` without `=` or with an empty field name (the argument as given).
    #[error("`--set {0}`: expected FIELD=VALUE")]
    BadSet(String),
    /// The field's current value has the wrong JSON type for its reducer.
    #[error("reducer `{reducer}` needs {needs}, the field holds {found}")]
    FieldType {
        /// `append`, `add` or `merge`.
        reducer: &'static str,
        /// What the reducer needs: `an array`, `a number`, `an object`.
        needs: &'static str,
        /// The JSON type found ([`kind`]).
        found: &'static str,
    },
    /// The update's value has the wrong JSON type for the reducer.
    #[error("reducer `{reducer}` needs {needs}, the update is {found}")]
    UpdateType {
        /// `add` or `merge`.
        reducer: &'static str,
        /// What the reducer needs.
        needs: &'static str,
        /// The JSON type found ([`kind`]).
        found: &'static str,
    },
    /// `add` overflowed to a non-finite number.
    #[error("reducer `add`: the sum is not finite")]
    NotFinite,
    /// A JSON Schema does not compile (the compiler's message).
    #[error("{0}")]
    Schema(String),
}

/// The state object of a run.
pub type State = Map<String, Value>;

/// Parses the value of `--set FIELD=VALUE`: JSON when it parses as JSON, else the
/// text as a string (so `--set name=abc` and `--set name='"abc"'` are the same).
pub fn parse_set_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// Splits `FIELD=VALUE` into the field and its parsed value.
///
/// # Errors
/// [`StateError::BadSet`] when there is no `=` or the field is empty.
pub fn parse_set(arg: &str) -> Result<(String, Value), StateError> {
    match arg.split_once('=') {
        Some((field, value)) if !field.trim().is_empty() => {
            Ok((field.trim().to_string(), parse_set_value(value)))
        }
        _ => Err(StateError::BadSet(arg.to_string())),
    }
}

/// Builds the initial state: `initial`, then `question` (when given), then `sets`.
pub fn initial_state(
    initial: &IndexMap<String, Value>,
    question: Option<&str>,
    sets: &[(String, Value)],
) -> State {
    let mut state = State::new();
    for (k, v) in initial {
        state.insert(k.clone(), v.clone());
    }
    if let Some(q) = question {
        state.insert("question".into(), Value::String(q.to_string()));
    }
    for (k, v) in sets {
        state.insert(k.clone(), v.clone());
    }
    state
}

/// Merges `new` into the current value of a field (`None` when the field is unset).
///
/// - `replace`: the new value.
/// - `append`: the old array (or `[]` when unset) with `new` concatenated when it is
///   an array, pushed otherwise.
/// - `add`: old + new for numbers (unset counts as 0); integers stay integers unless
///   the sum overflows or either side is fractional.
/// - `merge`: the old object (or `{}`) with the keys of `new` (an object) written over
///   it, shallowly.
///
/// # Errors
/// [`StateError::FieldType`]/[`StateError::UpdateType`] when the old or new value has
/// the wrong type for the reducer, [`StateError::NotFinite`] for a sum that overflows.
pub fn reduce(reducer: Reducer, old: Option<&Value>, new: Value) -> Result<Value, StateError> {
    match reducer {
        Reducer::Replace => Ok(new),
        Reducer::Append => {
            let mut out = match old {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a.clone(),
                Some(other) => {
                    return Err(StateError::FieldType {
                        reducer: "append",
                        needs: "an array",
                        found: kind(other),
                    })
                }
            };
            match new {
                Value::Array(items) => out.extend(items),
                v => out.push(v),
            }
            Ok(Value::Array(out))
        }
        Reducer::Add => {
            let old = match old {
                None | Some(Value::Null) => Value::from(0),
                Some(v) => v.clone(),
            };
            match (&old, &new) {
                (Value::Number(a), Value::Number(b)) => {
                    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
                        if let Some(s) = x.checked_add(y) {
                            return Ok(Value::from(s));
                        }
                    }
                    let s = a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0);
                    serde_json::Number::from_f64(s)
                        .map(Value::Number)
                        .ok_or(StateError::NotFinite)
                }
                (Value::Number(_), v) => Err(StateError::UpdateType {
                    reducer: "add",
                    needs: "a number",
                    found: kind(v),
                }),
                (v, _) => Err(StateError::FieldType {
                    reducer: "add",
                    needs: "a number",
                    found: kind(v),
                }),
            }
        }
        Reducer::Merge => {
            let mut out = match old {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(m)) => m.clone(),
                Some(other) => {
                    return Err(StateError::FieldType {
                        reducer: "merge",
                        needs: "an object",
                        found: kind(other),
                    })
                }
            };
            match new {
                Value::Object(m) => {
                    for (k, v) in m {
                        out.insert(k, v);
                    }
                    Ok(Value::Object(out))
                }
                v => Err(StateError::UpdateType {
                    reducer: "merge",
                    needs: "an object",
                    found: kind(&v),
                }),
            }
        }
    }
}

pub use crate::json::kind;

/// A compiled JSON Schema that reports its first violation as text, and stores
/// integer-valued floats as integers where it says `integer`
/// ([`SchemaCheck::normalize`]).
pub struct SchemaCheck {
    validator: jsonschema::Validator,
    schema: std::sync::Arc<Value>,
    /// Whether the schema mentions `integer` at all (else normalizing is a no-op).
    integers: bool,
}

impl std::fmt::Debug for SchemaCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SchemaCheck")
    }
}

/// A schema violation: where (JSON pointer into the instance) and what.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// JSON pointer of the offending value (empty for the root).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

impl Violation {
    /// The top-level field the violation is in (`None` for the root object).
    pub fn field(&self) -> Option<&str> {
        self.pointer
            .strip_prefix('/')
            .map(|p| p.split('/').next().unwrap_or(p))
            .filter(|f| !f.is_empty())
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "at {}: {}", self.pointer, self.message)
        }
    }
}

impl SchemaCheck {
    /// Compiles a schema.
    ///
    /// # Errors
    /// [`StateError::Schema`] with the compiler's message when the schema is not valid.
    pub fn new(schema: &Value) -> Result<SchemaCheck, StateError> {
        jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .map(|validator| SchemaCheck {
                validator,
                schema: std::sync::Arc::new(schema.clone()),
                integers: super::integers::mentions_integer(schema),
            })
            .map_err(|e| StateError::Schema(e.to_string()))
    }

    /// The schema.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Every violation of an instance (empty when it is valid). Besides the schema's
    /// own, a float of magnitude 2^53 or more where the schema says `integer` is one
    /// (it cannot be stored as the exact integer; see [`super::integers`]).
    pub fn violations(&self, instance: &Value) -> Vec<Violation> {
        let mut all: Vec<Violation> = self
            .validator
            .iter_errors(instance)
            .map(|e| Violation {
                pointer: e.instance_path().to_string(),
                message: e.to_string(),
            })
            .collect();
        all.extend(self.inexact(instance));
        all
    }

    /// The floats of `instance` that stand for integers too large to be exact.
    fn inexact(&self, instance: &Value) -> Vec<Violation> {
        if !self.integers {
            return Vec::new();
        }
        super::integers::inexact(&self.schema, &self.schema, instance)
            .into_iter()
            .map(|(pointer, message)| Violation { pointer, message })
            .collect()
    }

    /// Stores every integer-valued float of `instance` (`7.0`) that the schema types
    /// as `integer` as the integer (`7`); see [`super::integers`]. Validity does not
    /// change (JSON Schema treats `7.0` as an integer).
    pub fn normalize(&self, instance: &mut Value) {
        if self.integers {
            super::integers::normalize(&self.schema, &self.schema, instance);
        }
    }

    /// [`SchemaCheck::normalize`] for a value about to become property `key` of an
    /// object this schema describes (a state field).
    pub fn normalize_property(&self, key: &str, value: &mut Value) {
        if self.integers {
            super::integers::normalize_member(&self.schema, &self.schema, key, value);
        }
    }

    /// Checks an instance; the first violation found, if any (see
    /// [`SchemaCheck::violations`] for the ones beyond the schema's own).
    pub fn check(&self, instance: &Value) -> Result<(), Violation> {
        match self.validator.validate(instance) {
            Ok(()) => match self.inexact(instance).into_iter().next() {
                Some(v) => Err(v),
                None => Ok(()),
            },
            Err(e) => Err(Violation {
                pointer: e.instance_path().to_string(),
                message: e.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reducers() {
        assert_eq!(
            reduce(Reducer::Replace, Some(&json!(1)), json!("x")).unwrap(),
            json!("x")
        );
        assert_eq!(
            reduce(Reducer::Append, Some(&json!([1])), json!([2, 3])).unwrap(),
            json!([1, 2, 3])
        );
        assert_eq!(
            reduce(Reducer::Append, Some(&json!([1])), json!("a")).unwrap(),
            json!([1, "a"])
        );
        assert_eq!(
            reduce(Reducer::Append, None, json!({"a": 1})).unwrap(),
            json!([{"a": 1}])
        );
        assert!(reduce(Reducer::Append, Some(&json!("s")), json!(1)).is_err());
        assert_eq!(
            reduce(Reducer::Add, Some(&json!(2)), json!(3)).unwrap(),
            json!(5)
        );
        assert_eq!(reduce(Reducer::Add, None, json!(1)).unwrap(), json!(1));
        assert_eq!(
            reduce(Reducer::Add, Some(&json!(1)), json!(0.5)).unwrap(),
            json!(1.5)
        );
        assert!(reduce(Reducer::Add, Some(&json!(1)), json!("1")).is_err());
        assert_eq!(
            reduce(
                Reducer::Merge,
                Some(&json!({"a": 1, "b": 2})),
                json!({"b": 3})
            )
            .unwrap(),
            json!({"a": 1, "b": 3})
        );
        assert!(reduce(Reducer::Merge, Some(&json!({})), json!(1)).is_err());
    }

    #[test]
    fn set_values() {
        assert_eq!(parse_set("n=3").unwrap(), ("n".into(), json!(3)));
        assert_eq!(parse_set("s=abc").unwrap(), ("s".into(), json!("abc")));
        assert_eq!(parse_set("a=[1]").unwrap(), ("a".into(), json!([1])));
        assert!(parse_set("novalue").is_err());
    }
}
