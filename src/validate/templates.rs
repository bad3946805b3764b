//! Templates, predicates and expressions: each compiles, and each variable it reads
//! is a state field or a builtin available at that place. Also: every field a node
//! writes is a state field.
use super::StateInfo;
use crate::diag::{Code, Diagnostic};
use crate::jinja::{self, GLOBAL_NAMES};
use crate::spec::load::read_text;
use crate::spec::source::{FileId, Sources, Span};
use crate::spec::types::{Edge, NodeSpec, RetrieveNode, TemplateSource, ToolNode};
use crate::spec::yaml::Limits;
use crate::spec::LoadedSpec;
use minijinja::Environment;
use serde_json::Value;

/// What a template, predicate or expression may read besides state fields.
struct Scope<'a> {
    state: &'a StateInfo,
    extra: Vec<String>,
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

pub(super) fn check(
    ls: &LoadedSpec,
    state: &StateInfo,
    sources: &mut Sources,
    diags: &mut Vec<Diagnostic>,
) {
    let env = jinja::environment();
    let spec = &ls.spec;
    for (name, node) in &spec.nodes {
        let base = Scope {
            state,
            extra: vec![],
        };
        match node {
            NodeSpec::Retrieve(RetrieveNode { query, .. })
            | NodeSpec::Tool(ToolNode { query, .. }) => {
                check_inline_template(ls, &env, query, &["nodes", name, "query"], &base, diags);
            }
            NodeSpec::Llm(call) | NodeSpec::Map(call) => {
                let is_map = matches!(node, NodeSpec::Map(_));
                let item_vars: Vec<String> = if is_map {
                    vec!["item".into(), "index".into()]
                } else {
                    vec![]
                };
                if let Some(over) = &call.over {
                    check_expression(
                        ls,
                        &env,
                        &Value::String(over.clone()),
                        &["nodes", name, "over"],
                        &base,
                        Code::ExpressionSyntax,
                        Code::ExpressionUnknownVar,
                        diags,
                    );
                }
                let input_scope = Scope {
                    state,
                    extra: item_vars.clone(),
                };
                for (input, expr) in &call.inputs {
                    check_expression(
                        ls,
                        &env,
                        expr,
                        &["nodes", name, "inputs", input],
                        &input_scope,
                        Code::ExpressionSyntax,
                        Code::ExpressionUnknownVar,
                        diags,
                    );
                }
                let mut extra = item_vars;
                extra.extend(call.inputs.keys().cloned());
                let prompt_scope = Scope { state, extra };
                if let Some(system) = &call.prompt.system {
                    check_prompt(
                        ls,
                        &env,
                        system,
                        &["nodes", name, "prompt", "system"],
                        &prompt_scope,
                        sources,
                        diags,
                    );
                }
                check_prompt(
                    ls,
                    &env,
                    &call.prompt.user,
                    &["nodes", name, "prompt", "user"],
                    &prompt_scope,
                    sources,
                    diags,
                );
            }
            NodeSpec::Update(_) => {}
        }
        let update_scope = Scope {
            state,
            extra: if node.has_output() {
                vec!["output".into()]
            } else {
                vec![]
            },
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
            check_expression(
                ls,
                &env,
                expr,
                &["nodes", name, "update", field],
                &update_scope,
                Code::ExpressionSyntax,
                Code::ExpressionUnknownVar,
                diags,
            );
        }
    }
    let scope = Scope {
        state,
        extra: vec![],
    };
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
            if let Some(constant) = check_expression(
                ls,
                &env,
                &Value::String(when.clone()),
                &at,
                &scope,
                Code::PredicateSyntax,
                Code::PredicateUnknownVar,
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
    diags: &mut Vec<Diagnostic>,
) -> Option<bool> {
    let Value::String(text) = expr else {
        return None;
    };
    let span = ls.span(at);
    if let Err(msg) = jinja::check_expression_text(text) {
        diags.push(Diagnostic::new(syntax, format!("`{}`: {msg}", at.join("."))).at(span));
        return None;
    }
    match env.compile_expression(text) {
        Err(e) => {
            diags.push(
                Diagnostic::new(syntax, format!("`{}`: {}", at.join("."), describe(&e))).at(span),
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
                    .at(span),
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

fn check_inline_template(
    ls: &LoadedSpec,
    env: &Environment<'static>,
    text: &str,
    at: &[&str],
    scope: &Scope<'_>,
    diags: &mut Vec<Diagnostic>,
) {
    let span = ls.span(at);
    match env.template_from_str(text) {
        Err(e) => diags.push(
            Diagnostic::new(
                Code::TemplateSyntax,
                format!("template `{}`: {}", at.join("."), describe(&e)),
            )
            .at(span),
        ),
        Ok(t) => {
            for u in jinja::unknown_names(env, text, true) {
                diags.push(unknown_name_diag(
                    &u,
                    &format!("template `{}`", at.join(".")),
                    span,
                ));
            }
            for var in scope.unknown(t.undeclared_variables(false)) {
                diags.push(
                    Diagnostic::new(Code::TemplateUnknownVar, format!("template `{}` reads `{var}`, which is not a state field or a builtin here", at.join(".")))
                        .at(span)
                        .help(super::refs::suggest(&var, scope.known_names())),
                );
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
        TemplateSource::Inline(text) => check_inline_template(ls, env, text, at, scope, diags),
        TemplateSource::File(f) => {
            let mut file_at: Vec<&str> = at.to_vec();
            file_at.push("file");
            let span = ls.span(&file_at);
            let file = match load_template_file(ls, &f.file, span, sources) {
                Ok(id) => id,
                Err(d) => {
                    diags.push(d);
                    return;
                }
            };
            let text = sources.get(file).text.clone();
            match env.template_from_str(&text) {
                Err(e) => {
                    let loc = e
                        .range()
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
                Ok(t) => {
                    for u in jinja::unknown_names(env, &text, true) {
                        let loc = sources.span_of_range(file, u.range.clone());
                        diags.push(
                            unknown_name_diag(&u, &format!("template {}", f.file), Some(loc))
                                .label(span, "template used here"),
                        );
                    }
                    for var in scope.unknown(t.undeclared_variables(false)) {
                        let loc = jinja::locate_identifier(&text, &var)
                            .map(|r| sources.span_of_range(file, r));
                        diags.push(
                            Diagnostic::new(Code::TemplateUnknownVar, format!("template {} reads `{var}`, which is not a state field or a builtin here", f.file))
                                .at(loc.or(Some(Span::file_start(file))))
                                .label(span, "template used here")
                                .help(super::refs::suggest(&var, scope.known_names())),
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
