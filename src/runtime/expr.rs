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
    pub fn make(fields: &Arc<Mirror>, extra: Vec<(Arc<str>, JValue)>) -> JValue {
        JValue::from_object(Scope {
            fields: Arc::clone(fields),
            extra,
        })
    }
}

/// Why an expression or template did not compile, render or evaluate. `Display` is the
/// one-line message the runtime shows (after ``node `N`: ``, and the part at fault).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    /// The source does not compile: for an expression ``` `SOURCE`: DETAIL ```, for a
    /// template minijinja's error with its detail.
    #[error("{0}")]
    Syntax(String),
    /// No template was added under the name asked for.
    #[error("{0}")]
    NoTemplate(String),
    /// A value read is undefined: the message names the path (and, for a template,
    /// its line and column) and what the deepest existing part has.
    #[error("{0}")]
    Undefined(String),
    /// The whole value is undefined (a JSON conversion of nothing).
    #[error("the expression is undefined")]
    UndefinedResult,
    /// The value cannot be represented in JSON (the serializer's message).
    #[error("the result cannot be turned into JSON: {0}")]
    NotJson(String),
    /// An ordering comparison (`<`, `<=`, `>`, `>=`) between values that are not two
    /// numbers or two strings; `operands` is `` `L` and `R` ``, the others minijinja
    /// kind names (`string`, `number`, `none`, ...).
    #[error("cannot order {operands}: a {left} and a {right}")]
    Unorderable {
        /// The operands' source text.
        operands: String,
        /// The kind of the left value.
        left: String,
        /// The kind of the right value.
        right: String,
    },
    /// Any other evaluation or rendering error, as [`describe`] gives it.
    #[error("{0}")]
    Eval(String),
}

/// Converts a JSON value to a minijinja value.
pub fn to_jinja(v: &Value) -> JValue {
    JValue::from_serialize(v)
}

/// Converts a minijinja value to JSON.
///
/// # Errors
/// When the value is undefined or cannot be represented in JSON.
pub fn to_json(v: &JValue) -> Result<Value, ExprError> {
    if v.is_undefined() {
        return Err(ExprError::UndefinedResult);
    }
    serde_json::to_value(v).map_err(|e| ExprError::NotJson(e.to_string()))
}

/// A compiled `update`/`inputs` value: an expression (strings) or a literal.
pub enum Compiled {
    /// A minijinja expression.
    Expr(Expression<'static, 'static>, String),
    /// A literal JSON value (also a quoted string literal such as `'text'`).
    Literal(Value, JValue),
    /// A bare name (`output`, `question`, `item`): looked up directly, without the
    /// template engine. Same result as the expression, strict undefined included.
    Name(Arc<str>),
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compiled::Expr(_, src) => write!(f, "Expr({src:?})"),
            Compiled::Literal(v, _) => write!(f, "Literal({v})"),
            Compiled::Name(n) => write!(f, "Name({n})"),
        }
    }
}

/// A compiled predicate or expression with its source text.
pub struct Expr {
    expr: Expression<'static, 'static>,
    /// Operands of the ordering comparisons (`<`, `<=`, `>`, `>=`) found in the
    /// source, compiled on their own: minijinja orders a string and a number without
    /// complaint, the runtime makes that an error.
    comparisons: Vec<(Compiled, Compiled, String)>,
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
    /// The evaluation error, as an [`ExprError`]; an undefined result is an error too. An
    /// undefined value names the path and what exists (see
    /// [`crate::jinja::explain_error`]).
    pub fn eval(&self, scope: &JValue) -> Result<JValue, ExprError> {
        let v = self
            .expr
            .eval(scope)
            .map_err(|e| explain(&e, &self.source, scope))?;
        if v.is_undefined() {
            return Err(undefined_result(&self.source, scope));
        }
        Ok(v)
    }

    /// Evaluates as a predicate (minijinja truthiness).
    ///
    /// # Errors
    /// The evaluation error, as an [`ExprError`].
    pub fn test(&self, scope: &JValue) -> Result<bool, ExprError> {
        let v = self.eval(scope)?;
        for (l, r, text) in &self.comparisons {
            // Operands that do not evaluate on their own (short-circuit guards) are skipped.
            if let (Ok(a), Ok(b)) = (l.eval_jinja(scope), r.eval_jinja(scope)) {
                // minijinja orders any two values; ordering is only meaningful between
                // two numbers or two strings, so anything else is a fault of the data
                // (a model that answered null, a list, or text where a number belongs).
                let orderable = (a.is_number() && b.is_number())
                    || (a.as_str().is_some() && b.as_str().is_some());
                if !orderable {
                    return Err(ExprError::Unorderable {
                        operands: text.clone(),
                        left: a.kind().to_string(),
                        right: b.kind().to_string(),
                    });
                }
            }
        }
        Ok(v.is_true())
    }
}

/// Where bare names are looked up as JSON (the fast path of [`Compiled::Name`]).
pub trait Names {
    /// The JSON value of a name, if it is defined.
    fn json(&self, name: &str) -> Option<Value>;
}

impl Compiled {
    /// Evaluates to JSON. `scope` is built only when an expression needs it.
    ///
    /// # Errors
    /// The evaluation or conversion error, as an [`ExprError`].
    pub fn eval_json(
        &self,
        scope: &mut dyn FnMut() -> JValue,
        names: &dyn Names,
    ) -> Result<Value, ExprError> {
        match self {
            Compiled::Literal(v, _) => Ok(v.clone()),
            Compiled::Name(n) => names.json(n).ok_or_else(|| unset(n, &scope())),
            Compiled::Expr(e, src) => {
                let scope = scope();
                let v = e.eval(&scope).map_err(|e| explain(&e, src, &scope))?;
                if v.is_undefined() {
                    return Err(undefined_result(src, &scope));
                }
                to_json(&v)
            }
        }
    }

    /// Whether evaluating reads the scope (as opposed to a literal or a bare name).
    pub fn needs_scope(&self) -> bool {
        matches!(self, Compiled::Expr(..))
    }

    /// The expression text, if this is not a literal.
    pub fn source(&self) -> Option<&str> {
        match self {
            Compiled::Expr(_, s) => Some(s),
            Compiled::Name(n) => Some(n),
            Compiled::Literal(..) => None,
        }
    }

    /// Evaluates to a minijinja value.
    ///
    /// # Errors
    /// The evaluation error, as an [`ExprError`].
    pub fn eval_jinja(&self, scope: &JValue) -> Result<JValue, ExprError> {
        match self {
            Compiled::Literal(_, j) => Ok(j.clone()),
            Compiled::Name(n) => {
                let v = scope
                    .get_attr(n)
                    .map_err(|e| ExprError::Eval(describe(&e)))?;
                if v.is_undefined() {
                    return Err(unset(n, scope));
                }
                Ok(v)
            }
            Compiled::Expr(e, src) => {
                let v = e.eval(scope).map_err(|e| explain(&e, src, scope))?;
                if v.is_undefined() {
                    return Err(undefined_result(src, scope));
                }
                Ok(v)
            }
        }
    }
}

/// An evaluation error of the expression `source` over `scope`: an undefined value
/// explained (path, what exists), anything else as [`describe`] gives it.
fn explain(e: &minijinja::Error, source: &str, scope: &JValue) -> ExprError {
    match crate::jinja::undefined_message(e, source, false, scope) {
        Some(m) => ExprError::Undefined(m),
        None => ExprError::Eval(describe(e)),
    }
}

/// The error for an expression that evaluated to undefined.
fn undefined_result(source: &str, scope: &JValue) -> ExprError {
    ExprError::Undefined(match crate::jinja::explain_undefined(source, scope) {
        Some(x) => format!("undefined value: `{}`: {}", x.path, x.detail),
        None => format!("`{source}` is undefined"),
    })
}

/// The error for a bare name that is not set.
fn unset(name: &str, scope: &JValue) -> ExprError {
    ExprError::Undefined(format!(
        "undefined value: {}",
        crate::jinja::unset_detail(name, scope)
    ))
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
    /// The syntax error, as an [`ExprError`].
    pub fn add_template(&mut self, name: String, source: String) -> Result<(), ExprError> {
        self.env
            .add_template_owned(name, source)
            .map_err(|e| ExprError::Syntax(describe(&e)))
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
    pub fn template(&self, name: &str) -> Result<Template<'static, 'static>, ExprError> {
        self.env
            .get_template(name)
            .map_err(|e| ExprError::NoTemplate(describe(&e)))
    }

    /// Compiles an expression.
    ///
    /// # Errors
    /// The syntax error, as an [`ExprError`].
    pub fn expr(&self, source: &str) -> Result<Expr, ExprError> {
        let expr = self
            .env
            .compile_expression_owned(source.to_string())
            .map_err(|e| ExprError::Syntax(format!("`{source}`: {}", describe(&e))))?;
        // A predicate that tests types or branches itself (`x is number and x > 5`,
        // `x > 5 if x is defined else false`) guards its own comparisons; the operand
        // check below evaluates operands without short-circuiting, so it would reject
        // exactly the guarded form. Such predicates are trusted as written.
        let guarded = ["is", "if"]
            .iter()
            .any(|w| crate::jinja::find_word(source, w).is_some());
        let comparisons = if guarded {
            Vec::new()
        } else {
            crate::jinja::comparison_operands(source)
        };
        let comparisons = comparisons
            .into_iter()
            .filter_map(|(l, r)| {
                let text = format!("`{l}` and `{r}`");
                let operand = |src: String| match serde_json::from_str::<serde_json::Number>(&src) {
                    Ok(n) => Some(Compiled::Literal(
                        Value::Number(n.clone()),
                        to_jinja(&Value::Number(n)),
                    )),
                    Err(_) => self.value(&Value::String(src)).ok(),
                };
                Some((operand(l)?, operand(r)?, text))
            })
            .collect();
        Ok(Expr {
            expr,
            comparisons,
            source: source.to_string(),
        })
    }

    /// Compiles an `update`/`inputs` value: strings are expressions, anything else a
    /// literal.
    ///
    /// # Errors
    /// The syntax error of an expression, as an [`ExprError`].
    pub fn value(&self, v: &Value) -> Result<Compiled, ExprError> {
        match v {
            Value::String(s) if is_bare_name(s.trim()) => Ok(Compiled::Name(Arc::from(s.trim()))),
            Value::String(s) if quoted_literal(s.trim()).is_some() => {
                let lit = Value::String(quoted_literal(s.trim()).unwrap_or_default().to_string());
                let j = to_jinja(&lit);
                Ok(Compiled::Literal(lit, j))
            }
            Value::String(s) => {
                let e = self
                    .env
                    .compile_expression_owned(s.clone())
                    .map_err(|e| ExprError::Syntax(format!("`{s}`: {}", describe(&e))))?;
                Ok(Compiled::Expr(e, s.clone()))
            }
            other => Ok(Compiled::Literal(other.clone(), to_jinja(other))),
        }
    }
}

/// A plain identifier that names a variable (not `true`, `none`, ...).
fn is_bare_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(
            s,
            "true"
                | "false"
                | "none"
                | "True"
                | "False"
                | "None"
                | "and"
                | "or"
                | "not"
                | "in"
                | "is"
                | "if"
                | "else"
                | "loop"
        )
}

/// The text of a quoted string literal without escapes (`'text'` or `"text"`).
fn quoted_literal(s: &str) -> Option<&str> {
    let q = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = s.strip_prefix(q)?.strip_suffix(q)?;
    (s.len() >= 2 && !inner.contains(q) && !inner.contains('\\')).then_some(inner)
}

/// Renders a template over a scope.
///
/// # Errors
/// The render error, as an [`ExprError`]. An undefined value names the path, the template, line
/// and column, and what exists (see [`crate::jinja::undefined_message`]).
pub fn render(t: &Template<'static, 'static>, scope: &JValue) -> Result<String, ExprError> {
    t.render(scope).map_err(|e| {
        match crate::jinja::undefined_message(&e, t.source(), true, scope) {
            Some(m) => ExprError::Undefined(m),
            None => ExprError::Eval(describe(&e)),
        }
    })
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
        let scope = Scope::make(
            &fields,
            vec![(Arc::from("doc"), to_jinja(&json!("{{ x }}")))],
        );
        let t = engine.template("t").unwrap();
        assert_eq!(render(&t, &scope).unwrap(), "q {{ x }}");
        let e = engine.expr("missing > 1").unwrap();
        assert!(e.test(&scope).is_err());
        let e = engine.expr("missing is defined").unwrap();
        assert!(!e.test(&scope).unwrap());
        struct NoNames;
        impl Names for NoNames {
            fn json(&self, name: &str) -> Option<Value> {
                (name == "question").then(|| json!("q"))
            }
        }
        let mut sc = || scope.clone();
        let v = engine.value(&json!("question ~ '!'")).unwrap();
        assert_eq!(v.eval_json(&mut sc, &NoNames).unwrap(), json!("q!"));
        let v = engine.value(&json!(1)).unwrap();
        assert_eq!(v.eval_json(&mut sc, &NoNames).unwrap(), json!(1));
        let v = engine.value(&json!("question")).unwrap();
        assert!(matches!(v, Compiled::Name(_)));
        assert_eq!(v.eval_json(&mut sc, &NoNames).unwrap(), json!("q"));
        let v = engine.value(&json!("missing")).unwrap();
        assert!(v.eval_json(&mut sc, &NoNames).is_err());
        let v = engine.value(&json!("'Documents retrieved.'")).unwrap();
        assert!(matches!(v, Compiled::Literal(..)));
        assert_eq!(
            v.eval_json(&mut sc, &NoNames).unwrap(),
            json!("Documents retrieved.")
        );
        let v = engine.value(&json!("'a' ~ 'b'")).unwrap();
        assert!(matches!(v, Compiled::Expr(..)));
    }

    #[test]
    fn string_number_comparison_is_an_error() {
        let engine = EngineBuilder::default().build();
        let mut m = Mirror::new();
        m.insert("s".into(), to_jinja(&json!("abc")));
        let scope = Scope::make(&Arc::new(m), vec![]);
        let e = engine.expr("s >= 3").unwrap();
        let err = e.test(&scope).unwrap_err();
        assert_eq!(
            err,
            ExprError::Unorderable {
                operands: "`s` and `3`".into(),
                left: "string".into(),
                right: "number".into(),
            }
        );
        assert_eq!(
            err.to_string(),
            "cannot order `s` and `3`: a string and a number"
        );
        let err = engine.expr("s >").unwrap_err();
        assert!(
            matches!(&err, ExprError::Syntax(m) if m.starts_with("`s >`: ")),
            "{err}"
        );
        let err = engine.expr("t").unwrap().eval(&scope).unwrap_err();
        assert!(matches!(err, ExprError::Undefined(_)), "{err}");
        let e = engine
            .expr("s is defined and (s | length > 2 or missing < 1)")
            .unwrap();
        assert!(e.test(&scope).unwrap());
    }
}
