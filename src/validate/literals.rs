//! Literal updates against their field's whole JSON Schema (E085).
//!
//! The type checker compares types (`Ty`): it cannot see `minimum`, `multipleOf`,
//! `integer` against `3.5`, an `enum` inside an object, `additionalProperties: false`
//! or a `format`. A constant written by an update (a YAML value that is not a string,
//! or an expression that is only a literal: `"3.5"`, `"'Yes'"`, `"none"`) is validated
//! here against the state schema's property for the field (its `$ref`s resolved in the
//! state schema, formats asserted as at run time) and each violation is reported at
//! the literal (inside a YAML mapping or list: at the offending value). Expressions
//! that are not literals are left to the type checker: nothing is guessed.
use crate::diag::{Code, Diagnostic};
use crate::spec::yaml;
use crate::spec::LoadedSpec;
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::HashMap;

/// The state schema and a validator per field, compiled on first use.
pub(super) struct Literals {
    schema: Option<Value>,
    validators: RefCell<HashMap<String, Option<jsonschema::Validator>>>,
}

impl Literals {
    /// `schema`: the state schema, when it loaded and is valid.
    pub(super) fn new(schema: Option<Value>) -> Literals {
        Literals {
            schema,
            validators: RefCell::new(HashMap::new()),
        }
    }

    /// Checks the update `expr` of `field` at spec path `at` when it is a literal
    /// (the field's reducer is `replace`: the value is the field's new value).
    pub(super) fn check(
        &self,
        ls: &LoadedSpec,
        at: &[&str],
        field: &str,
        expr: &Value,
        diags: &mut Vec<Diagnostic>,
    ) {
        let Some(value) = literal(expr) else { return };
        let mut cache = self.validators.borrow_mut();
        let validator = cache
            .entry(field.to_string())
            .or_insert_with(|| self.validator(field));
        let Some(validator) = validator else { return };
        let mut instance = Map::new();
        instance.insert(field.to_string(), value.clone());
        let instance = Value::Object(instance);
        let prefix = format!("/{}", yaml::escape_segment(field));
        let base = yaml::pointer(at);
        for e in validator.iter_errors(&instance) {
            let ptr = e.instance_path().to_string();
            let inner = ptr.strip_prefix(&prefix).unwrap_or("");
            // A YAML literal's nested value has its own span; an expression's literal
            // is the whole scalar.
            let span = match expr {
                Value::String(_) => ls.span(at),
                _ => ls.spans.value(&format!("{base}{inner}")).or(ls.span(at)),
            };
            let shown = if inner.is_empty() {
                String::new()
            } else {
                format!(" at `{}`", inner.trim_start_matches('/').replace('/', "."))
            };
            diags.push(
                Diagnostic::new(
                    Code::UpdateType,
                    format!(
                        "`{}`: the literal {value} does not fit the schema of `{field}`{shown}: {e}",
                        at.join(".")
                    ),
                )
                .at(span)
                .help(format!(
                    "every run that takes this update fails the state schema; write a value `state.schema.properties.{field}` allows, or fix the schema"
                )),
            );
        }
    }

    /// A validator of `{field: value}` against the field's property schema, inside
    /// the state schema (so `$ref`s resolve); `None` when the schema gives the field
    /// none or does not compile.
    fn validator(&self, field: &str) -> Option<jsonschema::Validator> {
        let root = self.schema.as_ref()?.as_object()?;
        let prop = root.get("properties")?.as_object()?.get(field)?.clone();
        let mut only = root.clone();
        for k in [
            "required",
            "additionalProperties",
            "patternProperties",
            "unevaluatedProperties",
            "propertyNames",
            "dependentRequired",
            "dependentSchemas",
            "dependencies",
            "minProperties",
            "maxProperties",
            "allOf",
            "anyOf",
            "oneOf",
            "not",
            "if",
            "then",
            "else",
        ] {
            only.remove(k);
        }
        let mut props = Map::new();
        props.insert(field.to_string(), prop);
        only.insert("properties".into(), Value::Object(props));
        super::schemas::asserting_formats()
            .build(&Value::Object(only))
            .ok()
    }
}

/// The constant an update writes: a YAML value that is not a string, or an expression
/// that is only a literal (integral numbers as integers, as the runtime stores them).
fn literal(expr: &Value) -> Option<Value> {
    match expr {
        Value::String(_) => {
            let v = super::guard::literal_value(expr)?;
            Some(match v.as_f64() {
                Some(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => Value::from(x as i64),
                _ => v,
            })
        }
        other => Some(other.clone()),
    }
}
