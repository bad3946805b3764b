//! Templates and expressions at run time, on the shared [`crate::jinja::environment`].
//!
//! Everything a spec evaluates is compiled once per [`Program`](super::Program):
//! prompt and query templates are added to one environment, expressions are compiled
//! against it. The environment is leaked (`&'static`) so compiled expressions can be
//! kept next to it without self-references; a program is meant to live as long as
//! the process (one per spec and variant).
//!
//! An evaluation sees a [`Scope`]: the state fields (through a mirror kept as minijinja
//! values, so no field is converted twice) plus a few extra names (`output`, `item`,
//! `index`, and the node's `inputs`), which shadow state fields of the same name.
//! Values are never re-rendered: a document whose text contains `{{ x }}` is inserted
//! as text.
use minijinja::value::{Enumerator, Object, Value as JValue};
use minijinja::{Environment, Expression, Template};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// The state as minijinja values, field by field.
pub type Mirror = HashMap<String, JValue>;

/// What an evaluation can read.
#[derive(Debug)]
pub struct Scope {
    fields: Arc<Mirror>,
    extra: Vec<(Arc<str>, JValue)>,
}

impl Object for Scope {
    fn get_value(self: &Arc<Self>, key: &JValue) -> Option<JValue> {
        let k = key.as_str()?;
        if let Some((_, v)) = self.extra.iter().find(|(n, _)| &**n == k) {
            return Some(v.clone());
        }
        self.fields.get(k).cloned()
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut keys: Vec<JValue> = self
            .extra
            .iter()
            .map(|(k, _)| JValue::from(k.clone()))
            .collect();
        keys.extend(self.fields.keys().map(|k| JValue::from(k.as_str())));
        Enumerator::Values(keys)
    }
}

impl Scope {
    /// A scope over the state mirror with extra names.
    pub fn new(fields: &Arc<Mirror>, extra: Vec<(Arc<str>, JValue)>) -> JValue {
        JValue::from_object(Scope {
            fields: Arc::clone(fields),
            extra,
        })
    }
}

/// Converts a JSON value to a minijinja value.
pub fn to_jinja(v: &Value) -> JValue {
    JValue::from_serialize(v)
}

/// Converts a minijinja value to JSON.
///
/// # Errors
/// When the value is undefined or cannot be represented in JSON.
pub fn to_json(v: &JValue) -> Result<Value, String> {
    if v.is_undefined() {
        return Err("the expression is undefined".into());
    }
    serde_json::to_value(v).map_err(|e| format!("the result cannot be turned into JSON: {e}"))
}

/// A compiled `update`/`inputs` value: an expression (strings) or a literal.
pub enum Compiled {
    /// A minijinja expression.
    Expr(Expression<'static, 'static>, String),
    /// A literal JSON value.
    Literal(Value, JValue),
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compiled::Expr(_, src) => write!(f, "Expr({src:?})"),
            Compiled::Literal(v, _) => write!(f, "Literal({v})"),
        }
    }
}

/// A compiled predicate or expression with its source text.
pub struct Expr {
    expr: Expression<'static, 'static>,
    /// The source text.
    pub source: String,
}

impl std::fmt::Debug for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Expr({:?})", self.source)
    }
}

impl Expr {
    /// Evaluates to a minijinja value.
    ///
    /// # Errors
    /// The evaluation error, as text.
    pub fn eval(&self, scope: &JValue) -> Result<JValue, String> {
        self.expr.eval(scope).map_err(|e| describe(&e))
    }

    /// Evaluates as a predicate (minijinja truthiness).
    ///
    /// # Errors
    /// The evaluation error, as text.
    pub fn test(&self, scope: &JValue) -> Result<bool, String> {
        let v = self.eval(scope)?;
        if v.is_undefined() {
            return Err(format!("`{}` is undefined", self.source));
        }
        Ok(v.is_true())
    }
}

impl Compiled {
    /// Evaluates to JSON.
    ///
    /// # Errors
    /// The evaluation or conversion error, as text.
    pub fn eval_json(&self, scope: &JValue) -> Result<Value, String> {
        match self {
            Compiled::Literal(v, _) => Ok(v.clone()),
            Compiled::Expr(e, _) => to_json(&e.eval(scope).map_err(|e| describe(&e))?),
        }
    }

    /// Evaluates to a minijinja value.
    ///
    /// # Errors
    /// The evaluation error, as text.
    pub fn eval_jinja(&self, scope: &JValue) -> Result<JValue, String> {
        match self {
            Compiled::Literal(_, j) => Ok(j.clone()),
            Compiled::Expr(e, src) => {
                let v = e.eval(scope).map_err(|e| describe(&e))?;
                if v.is_undefined() {
                    return Err(format!("`{src}` is undefined"));
                }
                Ok(v)
            }
        }
    }
}

/// A minijinja error as one line, with its detail.
pub fn describe(e: &minijinja::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// Collects templates, then freezes into an [`Engine`].
pub struct EngineBuilder {
    env: Environment<'static>,
}

impl Default for EngineBuilder {
    fn default() -> Self {
        EngineBuilder {
            env: crate::jinja::environment(),
        }
    }
}

impl EngineBuilder {
    /// Adds a template under a name.
    ///
    /// # Errors
    /// The syntax error, as text.
    pub fn add_template(&mut self, name: String, source: String) -> Result<(), String> {
        self.env
            .add_template_owned(name, source)
            .map_err(|e| describe(&e))
    }

    /// Freezes the environment (leaking it, see the module docs).
    pub fn build(self) -> Engine {
        Engine {
            env: Box::leak(Box::new(self.env)),
        }
    }
}

/// A frozen environment: compiles expressions and hands out templates.
#[derive(Clone, Copy)]
pub struct Engine {
    env: &'static Environment<'static>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Engine")
    }
}

impl Engine {
    /// A template added to the builder.
    ///
    /// # Errors
    /// When no template has that name.
    pub fn template(&self, name: &str) -> Result<Template<'static, 'static>, String> {
        self.env.get_template(name).map_err(|e| describe(&e))
    }

    /// Compiles an expression.
    ///
    /// # Errors
    /// The syntax error, as text.
    pub fn expr(&self, source: &str) -> Result<Expr, String> {
        let expr = self
            .env
            .compile_expression_owned(source.to_string())
            .map_err(|e| format!("`{source}`: {}", describe(&e)))?;
        Ok(Expr {
            expr,
            source: source.to_string(),
        })
    }

    /// Compiles an `update`/`inputs` value: strings are expressions, anything else a
    /// literal.
    ///
    /// # Errors
    /// The syntax error of an expression, as text.
    pub fn value(&self, v: &Value) -> Result<Compiled, String> {
        match v {
            Value::String(s) => {
                let e = self
                    .env
                    .compile_expression_owned(s.clone())
                    .map_err(|e| format!("`{s}`: {}", describe(&e)))?;
                Ok(Compiled::Expr(e, s.clone()))
            }
            other => Ok(Compiled::Literal(other.clone(), to_jinja(other))),
        }
    }
}

/// Renders a template over a scope.
///
/// # Errors
/// The render error, as text.
pub fn render(t: &Template<'static, 'static>, scope: &JValue) -> Result<String, String> {
    t.render(scope).map_err(|e| describe(&e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scope_shadows_and_is_strict() {
        let mut b = EngineBuilder::default();
        b.add_template("t".into(), "{{ question }} {{ doc }}".into())
            .unwrap();
        let engine = b.build();
        let mut m = Mirror::new();
        m.insert("question".into(), to_jinja(&json!("q")));
        let fields = Arc::new(m);
        let scope = Scope::new(
            &fields,
            vec![(Arc::from("doc"), to_jinja(&json!("{{ x }}")))],
        );
        let t = engine.template("t").unwrap();
        assert_eq!(render(&t, &scope).unwrap(), "q {{ x }}");
        let e = engine.expr("missing > 1").unwrap();
        assert!(e.test(&scope).is_err());
        let e = engine.expr("missing is defined").unwrap();
        assert!(!e.test(&scope).unwrap());
        let v = engine.value(&json!("question ~ '!'")).unwrap();
        assert_eq!(v.eval_json(&scope).unwrap(), json!("q!"));
        let v = engine.value(&json!(1)).unwrap();
        assert_eq!(v.eval_json(&scope).unwrap(), json!(1));
    }

    #[test]
    fn string_number_comparison_is_an_error() {
        let engine = EngineBuilder::default().build();
        let mut m = Mirror::new();
        m.insert("s".into(), to_jinja(&json!("abc")));
        let scope = Scope::new(&Arc::new(m), vec![]);
        let e = engine.expr("s >= 3").unwrap();
        assert!(e.test(&scope).is_err(), "{:?}", e.test(&scope));
    }
}
