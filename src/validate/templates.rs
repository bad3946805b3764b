//! Templates, predicates and expressions: each compiles, and each variable it reads
//! is a state field or a builtin available at that place. Also: every field a node
//! writes is a state field.
use super::types::{self, Ty, Vars};
use super::StateInfo;
use crate::diag::{Code, Diagnostic};
use crate::jinja::{self, GLOBAL_NAMES};
use crate::runtime::kinds;
use crate::spec::load::read_text;
use crate::spec::source::{FileId, Sources, Span};
use crate::spec::types::{Edge, NodeSpec, Reducer, SchemaRef, TemplateSource};
use crate::spec::yaml::Limits;
use crate::spec::LoadedSpec;
use minijinja::Environment;
use serde_json::Value;

/// What a template, predicate or expression may read besides state fields.
struct Scope<'a> {
    state: &'a StateInfo,
    extra: Vec<String>,
    /// Every name readable here with its type (state fields, then the extras).
    vars: Vars,
}

impl Scope<'_> {
    fn allows(&self, name: &str) -> bool {
        !self.state.known
            || self.state.fields.contains_key(name)
            || self.extra.iter().any(|e| e == name)
            || GLOBAL_NAMES.contains(&name)
    }

    fn unknown(&self, vars: impl IntoIterator<Item = String>) -> Vec<String> {
        let mut v: Vec<String> = vars.into_iter().filter(|n| !self.allows(n)).collect();
        v.sort();
        v
    }

    fn known_names(&self) -> Vec<String> {
        self.state
            .fields
            .keys()
            .cloned()
            .chain(self.extra.iter().cloned())
            .collect()
    }
}

/// What the checks of one spec's templates share: the environment, the state and its
/// type. Built once per spec checked; [`check_node`] and [`check_edges`] take it.
pub(super) struct Ctx<'s> {
    shared: std::rc::Rc<Shared>,
    state: &'s StateInfo,
}

/// What a [`Ctx`] derives from the state schema once: kept by the base spec's check
/// and reused by each variant that leaves `state` as it is (the literal checks'
/// validators are compiled once per field, not once per variant).
pub(super) struct Shared {
    env: Environment<'static>,
    state_ty: Ty,
    /// Literal updates against their field's whole schema.
    literals: super::literals::Literals,
}

impl std::ops::Deref for Ctx<'_> {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.shared
    }
}

impl<'s> Ctx<'s> {
    /// The context of `ls` with the state its schema check found.
    pub(super) fn new(ls: &LoadedSpec, state: &'s StateInfo, sources: &mut Sources) -> Ctx<'s> {
        let schema = if state.known {
            super::schemas::schema_value(ls, &ls.spec.state.schema, &["state", "schema"], sources)
        } else {
            None
        };
        Ctx {
            shared: std::rc::Rc::new(Shared {
                env: jinja::environment(),
                state_ty: schema.as_ref().map_or(Ty::Unknown, |v| types::lower(v, v)),
                literals: super::literals::Literals::new(schema),
            }),
            state,
        }
    }

    /// A context over `state` made from what [`Ctx::shared`] of a context over the
    /// same state (and state schema) gave.
    pub(super) fn with(shared: std::rc::Rc<Shared>, state: &'s StateInfo) -> Ctx<'s> {
        Ctx { shared, state }
    }

    /// What this context derived from the state schema, to make another with.
    pub(super) fn shared(&self) -> std::rc::Rc<Shared> {
        std::rc::Rc::clone(&self.shared)
    }

    fn state_vars(&self, extra: &[(&str, Ty)]) -> Vars {
        state_vars(self.state, &self.state_ty, extra)
    }

    fn scope_of(&self, extra: &[(&str, Ty)]) -> Scope<'s> {
        Scope {
            state: self.state,
            extra: extra.iter().map(|(k, _)| (*k).to_string()).collect(),
            vars: self.state_vars(extra),
        }
    }
}

/// One node's templates, expressions and writes (its findings depend on the node, the
/// state and the node's output schema only).
pub(super) fn check_node(
    ctx: &Ctx<'_>,
    ls: &LoadedSpec,
    name: &str,
    node: &NodeSpec,
    sources: &mut Sources,
    diags: &mut Vec<Diagnostic>,
) {
    let env = &ctx.env;
    let state = ctx.state;
    let state_ty = &ctx.state_ty;
    let spec = &ls.spec;
    let state_vars = |extra: &[(&str, Ty)]| ctx.state_vars(extra);
    {
        // The kind's own fields (`kinds/`), through the checks below.
        let found = kinds::check_templates(
            &mut Checker {
                ls,
                env,
                state,
                state_ty,
                sources,
                diags,
            },
            name,
            node,
        );
        let (output_ty, inputs_ty) = (found.output, found.inputs);
        let mut extra: Vec<(&str, Ty)> = inputs_ty;
        if node.has_output() {
            extra.push(("output", output_ty.unwrap_or(Ty::Unknown)));
        }
        let update_scope = Scope {
            state,
            extra: if node.has_output() {
                vec!["output".into()]
            } else {
                vec![]
            },
            vars: state_vars(&extra),
        };
        for (field, expr) in node.update() {
            if state.known && !state.fields.contains_key(field) {
                diags.push(
                    Diagnostic::new(
                        Code::UnknownWrite,
                        format!("node `{name}` writes `{field}`, which is not a state field"),
                    )
                    .at(ls.key_span(&["nodes", name, "update", field]))
                    .help(super::refs::suggest(field, state.fields.keys())),
                );
            }
            let at = ["nodes", name, "update", field.as_ref()];
            let before = diags.len();
            check_expression(
                ls,
                env,
                expr,
                &at,
                &update_scope,
                Code::ExpressionSyntax,
                Code::ExpressionUnknownVar,
                sources,
                diags,
            );
            let value_ty = type_expression(ls, expr, &at, &update_scope, sources, diags);
            if let Ty::Object { props, .. } = &state_ty {
                if let Some(field_ty) = props.get(field) {
                    let reducer = spec.state.reducers.get(field).copied().unwrap_or_default();
                    check_update_type(ls, &at, field, expr, &value_ty, field_ty, reducer, diags);
                }
            }
            let reducer = spec.state.reducers.get(field).copied().unwrap_or_default();
            if diags.len() == before && reducer == Reducer::Replace {
                ctx.literals.check(ls, &at, field, expr, diags);
            }
        }
    }
}

/// Every branch's predicates (their findings depend on the edges and the state only).
pub(super) fn check_edges(
    ctx: &Ctx<'_>,
    ls: &LoadedSpec,
    sources: &mut Sources,
    diags: &mut Vec<Diagnostic>,
) {
    let env = &ctx.env;
    let spec = &ls.spec;
    let scope = ctx.scope_of(&[]);
    for (from, edge) in &spec.edges {
        let Edge::Branch(arms) = edge else { continue };
        let mut always_true_at: Option<usize> = None;
        for (i, arm) in arms.iter().enumerate() {
            let Some(when) = &arm.when else { continue };
            let ix = i.to_string();
            let at = ["edges", from.as_str(), ix.as_str(), "when"];
            if let Some(prev) = always_true_at {
                diags.push(
                    Diagnostic::new(
                        Code::ShadowedArm,
                        format!(
                            "edges of `{from}`: arm {} can never be taken: arm {} is always true",
                            i + 1,
                            prev + 1
                        ),
                    )
                    .at(ls.span(&at)),
                );
            }
            let when_v = Value::String(when.clone());
            if let Some(constant) = check_expression(
                ls,
                env,
                &when_v,
                &at,
                &scope,
                Code::PredicateSyntax,
                Code::PredicateUnknownVar,
                sources,
                diags,
            ) {
                if constant {
                    always_true_at.get_or_insert(i);
                } else {
                    diags.push(
                        Diagnostic::new(
                            Code::PredicateNeverTrue,
                            format!("edges of `{from}`: predicate `{when}` is always false"),
                        )
                        .at(ls.span(&at))
                        .help("a predicate that reads no state field has a fixed value"),
                    );
                }
            }
            type_expression(ls, &when_v, &at, &scope, sources, diags);
        }
    }
}

/// Every name readable at a place with its type: the state's fields (typed by its
/// schema, else unknown), then `extra`.
fn state_vars(state: &StateInfo, state_ty: &Ty, extra: &[(&str, Ty)]) -> Vars {
    let mut v = Vars::new(!state.known);
    if let Ty::Object { props, .. } = state_ty {
        for (k, t) in props {
            v.insert(k.clone(), t.clone());
        }
    }
    for name in state.fields.keys() {
        if v.get(name).is_none() {
            v.insert(name.clone(), Ty::Unknown);
        }
    }
    for (k, t) in extra {
        v.insert(*k, t.clone());
    }
    v
}

/// The template checks of this file, as the node kinds call them
/// ([`kinds::TemplateChecks`]).
struct Checker<'a, 'm> {
    ls: &'a LoadedSpec,
    env: &'a Environment<'static>,
    state: &'a StateInfo,
    state_ty: &'a Ty,
    sources: &'m mut Sources,
    diags: &'m mut Vec<Diagnostic>,
}

impl<'a> kinds::TemplateChecks for Checker<'a, '_> {
    type Ty = Ty;
    type Scope = Scope<'a>;

    fn scope(&self, extra: &[(&str, Ty)]) -> Scope<'a> {
        Scope {
            state: self.state,
            extra: extra.iter().map(|(k, _)| (*k).to_string()).collect(),
            vars: state_vars(self.state, self.state_ty, extra),
        }
    }

    fn template(&mut self, scope: &Scope<'a>, text: &str, at: &[&str]) {
        check_inline_template(self.ls, self.env, text, at, scope, self.sources, self.diags);
    }

    fn expression(&mut self, scope: &Scope<'a>, expr: &Value, at: &[&str]) -> Ty {
        check_expression(
            self.ls,
            self.env,
            expr,
            at,
            scope,
            Code::ExpressionSyntax,
            Code::ExpressionUnknownVar,
            self.sources,
            self.diags,
        );
        type_expression(self.ls, expr, at, scope, self.sources, self.diags)
    }

    fn prompt(&mut self, scope: &Scope<'a>, source: &TemplateSource, at: &[&str]) {
        check_prompt(
            self.ls,
            self.env,
            source,
            at,
            scope,
            self.sources,
            self.diags,
        );
    }

    fn schema(&mut self, schema: &SchemaRef, at: &[&str]) -> Ty {
        super::schemas::schema_value(self.ls, schema, at, self.sources)
            .map_or(Ty::Unknown, |v| types::lower(&v, &v))
    }

    fn documents(&self) -> Ty {
        Ty::Array(Box::new(Ty::document()))
    }

    fn string(&self) -> Ty {
        Ty::string()
    }

    fn int(&self) -> Ty {
        Ty::Int
    }

    fn unknown(&self) -> Ty {
        Ty::Unknown
    }

    fn list(&self, t: Ty) -> Ty {
        Ty::Array(Box::new(t))
    }

    fn element(&self, t: &Ty) -> Ty {
        t.element()
    }
}

/// Type-checks an expression (a YAML string) or types a literal (any other value);
/// findings go to `diags` at their token.
fn type_expression(
    ls: &LoadedSpec,
    expr: &Value,
    at: &[&str],
    scope: &Scope<'_>,
    sources: &Sources,
    diags: &mut Vec<Diagnostic>,
) -> Ty {
    let Value::String(text) = expr else {
        return Ty::of_value(expr);
    };
    let (ty, findings) = types::expression(text, &scope.vars);
    let span = ls.span(at);
    for f in findings {
        let loc = span.map(|s| types::token_span(sources, s, text, f.range.clone()));
        diags.push(f.into_diagnostic(&format!("`{}`", at.join(".")), loc));
    }
    ty
}

/// An `update` value against its field: what the field's reducer takes must be able
/// to hold the value's type.
#[allow(clippy::too_many_arguments)]
fn check_update_type(
    ls: &LoadedSpec,
    at: &[&str],
    field: &str,
    expr: &Value,
    value: &Ty,
    field_ty: &Ty,
    reducer: Reducer,
    diags: &mut Vec<Diagnostic>,
) {
    let want = match reducer {
        Reducer::Replace | Reducer::Add => field_ty.clone(),
        Reducer::Append => {
            let arrays: Vec<Ty> = field_ty
                .members()
                .iter()
                .filter_map(|t| match t {
                    Ty::Array(e) => Some((**e).clone()),
                    _ => None,
                })
                .collect();
            if arrays.is_empty() {
                return; // E036 reports the reducer
            }
            let elem = Ty::union_all(arrays);
            Ty::union(elem.clone(), Ty::Array(Box::new(elem)))
        }
        Reducer::Merge => Ty::open_object(),
    };
    if types::may_fit(value, &want) {
        return;
    }
    let what = match expr {
        Value::String(_) => format!("the expression is {}", describe_ty(value)),
        _ => format!("the literal {expr} is {}", describe_ty(value)),
    };
    let wanted = match reducer {
        Reducer::Append => format!("`append` to `{field}` takes {}", describe_ty(&want)),
        _ => format!("`{field}` is {}", describe_ty(&want)),
    };
    let help = match expr {
        Value::String(_) => format!(
            "the value must be {}; fix the expression or the field's schema",
            describe_ty(&want)
        ),
        _ if want.is_string() => {
            format!("a constant string is an expression in quotes: `\"'{expr}'\"`")
        }
        _ => format!("write {}, or fix the field's schema", describe_ty(&want)),
    };
    diags.push(
        Diagnostic::new(
            Code::UpdateType,
            format!("`{}`: {what}, but {wanted}", at.join(".")),
        )
        .at(ls.span(at))
        .help(help),
    );
}

fn describe_ty(t: &Ty) -> String {
    match t {
        Ty::Str(Some(vals)) if vals.len() == 1 => format!("the string '{}'", vals[0]),
        Ty::Str(Some(vals)) => format!(
            "one of {}",
            vals.iter()
                .map(|v| format!("'{v}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Ty::Array(e) if **e != Ty::Unknown => format!("an array of {}", e.name()),
        other => {
            let n = other.name();
            let a = if n.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            format!("{a} {n}")
        }
    }
}

/// Compiles an expression and checks its variables. Returns `Some(truthiness)` when
/// the expression reads no variable at all (its value is fixed).
#[allow(clippy::too_many_arguments)]
fn check_expression(
    ls: &LoadedSpec,
    env: &Environment<'static>,
    expr: &Value,
    at: &[&str],
    scope: &Scope<'_>,
    syntax: Code,
    unknown: Code,
    sources: &Sources,
    diags: &mut Vec<Diagnostic>,
) -> Option<bool> {
    let Value::String(text) = expr else {
        return None;
    };
    let span = ls.span(at);
    let token =
        |range: std::ops::Range<usize>| span.map(|s| types::token_span(sources, s, text, range));
    if let Err(msg) = jinja::check_expression_text(text) {
        diags.push(Diagnostic::new(syntax, format!("`{}`: {msg}", at.join("."))).at(span));
        return None;
    }
    match env.compile_expression(text) {
        Err(e) => {
            diags.push(
                Diagnostic::new(syntax, format!("`{}`: {}", at.join("."), describe(&e)))
                    .at(e.range().map_or(span, token)),
            );
            None
        }
        Ok(compiled) => {
            for u in jinja::unknown_names(env, text, false) {
                diags.push(
                    Diagnostic::new(
                        syntax,
                        format!("`{}`: unknown {} `{}`", at.join("."), u.what, u.name),
                    )
                    .at(token(u.range.clone())),
                );
            }
            let vars = compiled.undeclared_variables(false);
            let bad = scope.unknown(vars.iter().cloned());
            for var in &bad {
                diags.push(
                    Diagnostic::new(
                        unknown,
                        format!(
                            "`{}` reads `{var}`, which is not a state field or a builtin here",
                            at.join(".")
                        ),
                    )
                    .at(span)
                    .help(super::refs::suggest(var, scope.known_names())),
                );
            }
            if vars.is_empty() {
                compiled.eval(()).ok().map(|v| v.is_true())
            } else {
                None
            }
        }
    }
}

fn describe(e: &minijinja::Error) -> String {
    match e.detail() {
        Some(d) => format!("{} ({d})", e.kind()),
        None => e.kind().to_string(),
    }
}

/// The byte range of a template syntax error: minijinja's, except that an error at
/// the end of input (an unclosed block or tag) is placed at the opening that is left
/// unclosed ([`jinja::unclosed_at`]).
fn syntax_range(e: &minijinja::Error, text: &str) -> Option<std::ops::Range<usize>> {
    let at_end = e.detail().is_some_and(|d| d.contains("end of input"))
        || e.range().is_some_and(|r| r.start >= text.trim_end().len());
    match at_end.then(|| jinja::unclosed_at(text)).flatten() {
        Some(r) => Some(r),
        None => e.range(),
    }
}

fn check_inline_template(
    ls: &LoadedSpec,
    env: &Environment<'static>,
    text: &str,
    at: &[&str],
    scope: &Scope<'_>,
    sources: &Sources,
    diags: &mut Vec<Diagnostic>,
) {
    let span = ls.span(at);
    if let Err(msg) = jinja::check_template_text(text) {
        diags.push(
            Diagnostic::new(
                Code::TemplateSyntax,
                format!("template `{}`: {msg}", at.join(".")),
            )
            .at(span),
        );
        return;
    }
    // A byte range of `text` at its token in the spec file (block and quoted scalars
    // included); the scalar's span when the range cannot be mapped.
    let token =
        |range: std::ops::Range<usize>| span.map(|s| types::token_span(sources, s, text, range));
    match env.template_from_str(text) {
        Err(e) => diags.push(
            Diagnostic::new(
                Code::TemplateSyntax,
                format!("template `{}`: {}", at.join("."), describe(&e)),
            )
            .at(syntax_range(&e, text).map_or(span, token)),
        ),
        Ok(_) => {
            for u in jinja::unknown_names(env, text, true) {
                diags.push(unknown_name_diag(
                    &u,
                    &format!("template `{}`", at.join(".")),
                    token(u.range.clone()),
                ));
            }
            let place = format!("template `{}`", at.join("."));
            for f in types::template(text, &scope.vars) {
                let loc = token(f.range.clone());
                diags.push(f.into_diagnostic(&place, loc));
            }
        }
    }
}

fn check_prompt(
    ls: &LoadedSpec,
    env: &Environment<'static>,
    src: &TemplateSource,
    at: &[&str],
    scope: &Scope<'_>,
    sources: &mut Sources,
    diags: &mut Vec<Diagnostic>,
) {
    match src {
        TemplateSource::Inline(text) => {
            check_inline_template(ls, env, text, at, scope, sources, diags);
        }
        TemplateSource::File(f) => {
            let mut file_at: Vec<&str> = at.to_vec();
            file_at.push("file");
            let span = ls.span(&file_at);
            let file = match load_template_file(ls, &f.file, span, sources) {
                Ok(id) => id,
                Err(d) => {
                    diags.push(super::named_by(d, &file_at));
                    return;
                }
            };
            let text = sources.get(file).text.clone();
            if let Err(msg) = jinja::check_template_text(&text) {
                diags.push(
                    Diagnostic::new(Code::TemplateSyntax, format!("template {}: {msg}", f.file))
                        .at(Some(Span::file_start(file)))
                        .label(span, "template used here"),
                );
                return;
            }
            match env.template_from_str(&text) {
                Err(e) => {
                    let loc = syntax_range(&e, &text)
                        .map(|r| sources.span_of_range(file, r))
                        .or_else(|| e.line().map(|l| Span::point(file, l as u32, 1)))
                        .unwrap_or(Span::file_start(file));
                    diags.push(
                        Diagnostic::new(
                            Code::TemplateSyntax,
                            format!("template {}: {}", f.file, describe(&e)),
                        )
                        .at(Some(loc))
                        .label(span, "template used here"),
                    );
                }
                Ok(_) => {
                    for u in jinja::unknown_names(env, &text, true) {
                        let loc = sources.span_of_range(file, u.range.clone());
                        diags.push(
                            unknown_name_diag(&u, &format!("template {}", f.file), Some(loc))
                                .label(span, "template used here"),
                        );
                    }
                    let place = format!("template {}", f.file);
                    for finding in types::template(&text, &scope.vars) {
                        let loc = sources.span_of_range(file, finding.range.clone());
                        diags.push(
                            finding
                                .into_diagnostic(&place, Some(loc))
                                .label(span, "template used here"),
                        );
                    }
                }
            }
        }
    }
}

fn unknown_name_diag(u: &jinja::UnknownName, place: &str, at: Option<Span>) -> Diagnostic {
    let d = Diagnostic::new(
        Code::TemplateSyntax,
        format!("{place}: unknown {} `{}`", u.what, u.name),
    )
    .at(at);
    if u.what == "tag" {
        d.help("a prompt is one standalone file: `include`, `import`, `from` and `extends` are not supported")
    } else {
        d
    }
}

/// Resolves and reads a template file named in a spec, reusing an already loaded copy.
///
/// # Errors
/// Path, existence and text diagnostics located at `span`.
pub fn load_template_file(
    ls: &LoadedSpec,
    rel: &str,
    span: Option<Span>,
    sources: &mut Sources,
) -> Result<FileId, Diagnostic> {
    let path = ls.resolve(rel, span)?;
    let shown = ls.shown(rel);
    match sources.find(&shown) {
        Some(id) => Ok(id),
        None => read_text(&path, &shown, sources, span, Limits::default().max_bytes),
    }
}
