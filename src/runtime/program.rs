//! A spec compiled for running: templates, expressions and schemas compiled once,
//! node names turned into indices.
use super::expr::{Compiled, Engine, EngineBuilder, Expr};
use super::state::SchemaCheck;
use crate::spec::source::Sources;
use crate::spec::types::{
    Edge, LlmNode, ModelSpec, NodeSpec, Reducer, RetrieveNode, SchemaRef, TemplateSource, ToolNode,
};
use crate::spec::LoadedSpec;
use minijinja::Template;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Where an edge leads: a node index, or END (`None`).
pub type Target = Option<usize>;

/// A compiled outgoing edge.
#[derive(Debug)]
pub enum EdgeProg {
    /// Always to this target.
    Static(Target),
    /// `when` arms in order; the arm without a predicate is `else`.
    Branch(Vec<(Option<Expr>, Target)>),
}

/// A compiled LLM call (an `llm` node, or each call of a `map` node).
pub struct LlmProg {
    /// Model name.
    pub model: String,
    /// The model's configuration.
    pub model_spec: Arc<ModelSpec>,
    /// The task, if named.
    pub task: Option<String>,
    /// Named inputs.
    pub inputs: Vec<(Arc<str>, Compiled)>,
    /// System template.
    pub system: Option<PromptPart>,
    /// User template.
    pub user: PromptPart,
    /// Structured output schema and its validator.
    pub schema: Option<(Arc<Value>, SchemaCheck)>,
    /// Repair turns allowed.
    pub repairs: u32,
}

impl std::fmt::Debug for LlmProg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LlmProg({})", self.model)
    }
}

/// A prompt template, pre-rendered when it reads no variable.
#[derive(Debug)]
pub enum PromptPart {
    /// The template reads no variable: its text, rendered once.
    Static(String),
    /// Rendered at every call.
    Template(Template<'static, 'static>),
}

impl PromptPart {
    fn new(t: Template<'static, 'static>) -> PromptPart {
        if t.undeclared_variables(false).is_empty() {
            if let Ok(text) = t.render(()) {
                return PromptPart::Static(text);
            }
        }
        PromptPart::Template(t)
    }

    /// The prompt text for a scope.
    ///
    /// # Errors
    /// The render error, as text.
    pub fn render(&self, scope: &minijinja::value::Value) -> Result<String, String> {
        match self {
            PromptPart::Static(s) => Ok(s.clone()),
            PromptPart::Template(t) => super::expr::render(t, scope),
        }
    }
}

/// What a node does.
#[derive(Debug)]
pub enum Body {
    /// Query a retriever.
    Retrieve {
        /// Retriever name.
        retriever: String,
        /// Query template.
        query: Template<'static, 'static>,
        /// Documents per query.
        top_k: usize,
    },
    /// One LLM call.
    Llm(LlmProg),
    /// One LLM call per element of `over`.
    Map {
        /// The call.
        call: LlmProg,
        /// The list expression.
        over: Expr,
        /// `over` when it is a bare name (read directly from the state).
        over_name: Option<String>,
        /// Most calls in flight.
        concurrency: usize,
    },
    /// Expressions only.
    Update,
    /// A tool search.
    Tool {
        /// Tool name.
        tool: String,
        /// Query template.
        query: Template<'static, 'static>,
    },
}

/// A compiled node.
#[derive(Debug)]
pub struct NodeProg {
    /// Name.
    pub name: String,
    /// Kind as written in specs.
    pub kind: &'static str,
    /// Visit limit.
    pub max_visits: Option<u32>,
    /// What it does.
    pub body: Body,
    /// Field, its reducer, and the value to merge.
    pub update: Vec<(String, Reducer, Compiled)>,
    /// Outgoing edge.
    pub edge: EdgeProg,
    /// Listed in `output.fallback`.
    pub fallback: bool,
    /// Some `update` expression reads `output` through the template engine (so the
    /// output must be converted to a template value).
    pub output_in_exprs: bool,
}

/// A spec ready to run.
#[derive(Debug)]
pub struct Program {
    /// The (merged) spec.
    pub loaded: LoadedSpec,
    /// The engine holding the templates.
    pub engine: Engine,
    /// The state schema.
    pub state_check: SchemaCheck,
    /// Properties the state schema declares.
    pub state_fields: Vec<String>,
    /// Nodes, in spec order.
    pub nodes: Vec<NodeProg>,
    /// Entry node index.
    pub entry: usize,
    /// Global step limit.
    pub max_steps: u32,
}

fn template_text(loaded: &LoadedSpec, src: &TemplateSource) -> Result<String, String> {
    match src {
        TemplateSource::Inline(s) => Ok(s.clone()),
        TemplateSource::File(f) => {
            let path: PathBuf = loaded.resolve(&f.file, None).map_err(|d| d.message)?;
            std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))
        }
    }
}

fn load_schema(loaded: &LoadedSpec, sref: &SchemaRef, at: &[&str]) -> Result<Value, String> {
    let mut sources = Sources::new();
    crate::validate::load_schema(loaded, sref, at, &mut sources)
        .map(|s| s.schema)
        .map_err(|ds| {
            ds.into_iter()
                .map(|d| d.message)
                .collect::<Vec<_>>()
                .join("; ")
        })
}

impl Program {
    /// Compiles a loaded (and validated) spec.
    ///
    /// # Errors
    /// A message naming the node or file at fault (a spec that passed `validate` does
    /// not fail here unless files changed in between).
    pub fn compile(loaded: &LoadedSpec) -> Result<Program, String> {
        let spec = &loaded.spec;
        let index: HashMap<&str, usize> = spec
            .nodes
            .keys()
            .enumerate()
            .map(|(i, k)| (k.as_str(), i))
            .collect();
        let target = |name: &str, from: &str| -> Result<Target, String> {
            if name == "END" {
                return Ok(None);
            }
            index
                .get(name)
                .copied()
                .map(Some)
                .ok_or_else(|| format!("edge of node `{from}` leads to unknown node `{name}`"))
        };
        let state_schema = load_schema(loaded, &spec.state.schema, &["state", "schema"])?;
        let state_check =
            SchemaCheck::new(&state_schema).map_err(|e| format!("state schema: {e}"))?;
        let state_fields = state_schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();

        // Templates first: the environment is frozen before expressions compile.
        let mut builder = EngineBuilder::default();
        for (name, node) in &spec.nodes {
            let add = |b: &mut EngineBuilder, part: &str, text: String| {
                b.add_template(format!("{name}/{part}"), text)
                    .map_err(|e| format!("node `{name}`: {part} template: {e}"))
            };
            match node {
                NodeSpec::Retrieve(RetrieveNode { query, .. })
                | NodeSpec::Tool(ToolNode { query, .. }) => {
                    add(&mut builder, "query", query.clone())?
                }
                NodeSpec::Llm(l) | NodeSpec::Map(l) => {
                    if let Some(s) = &l.prompt.system {
                        let text = template_text(loaded, s)
                            .map_err(|e| format!("node `{name}`: system prompt: {e}"))?;
                        add(&mut builder, "system", text)?;
                    }
                    let text = template_text(loaded, &l.prompt.user)
                        .map_err(|e| format!("node `{name}`: user prompt: {e}"))?;
                    add(&mut builder, "user", text)?;
                }
                NodeSpec::Update(_) => {}
            }
        }
        let engine = builder.build();
        let tpl = |name: &str, part: &str| {
            engine
                .template(&format!("{name}/{part}"))
                .map_err(|e| format!("node `{name}`: {e}"))
        };

        let mut nodes = Vec::with_capacity(spec.nodes.len());
        for (name, node) in &spec.nodes {
            let in_node = |e: String| format!("node `{name}`: {e}");
            let llm = |l: &LlmNode| -> Result<LlmProg, String> {
                let model_spec = spec
                    .models
                    .get(&l.model)
                    .cloned()
                    .map(Arc::new)
                    .ok_or_else(|| in_node(format!("unknown model `{}`", l.model)))?;
                let inputs = l
                    .inputs
                    .iter()
                    .map(|(k, v)| {
                        engine
                            .value(v)
                            .map(|c| (Arc::<str>::from(k.as_str()), c))
                            .map_err(|e| in_node(format!("input `{k}`: {e}")))
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                let schema = match &l.schema {
                    Some(sref) => {
                        let v = load_schema(loaded, sref, &["nodes", name, "schema"])
                            .map_err(in_node)?;
                        let check =
                            SchemaCheck::new(&v).map_err(|e| in_node(format!("schema: {e}")))?;
                        Some((Arc::new(v), check))
                    }
                    None => None,
                };
                Ok(LlmProg {
                    model: l.model.clone(),
                    model_spec,
                    task: l.task.clone(),
                    inputs,
                    system: if l.prompt.system.is_some() {
                        Some(PromptPart::new(tpl(name, "system")?))
                    } else {
                        None
                    },
                    user: PromptPart::new(tpl(name, "user")?),
                    schema,
                    repairs: l.repair_attempts,
                })
            };
            let body = match node {
                NodeSpec::Retrieve(RetrieveNode {
                    retriever, top_k, ..
                }) => {
                    let r = spec
                        .retrievers
                        .get(retriever)
                        .ok_or_else(|| in_node(format!("unknown retriever `{retriever}`")))?;
                    Body::Retrieve {
                        retriever: retriever.clone(),
                        query: tpl(name, "query")?,
                        top_k: top_k.unwrap_or(r.top_k()) as usize,
                    }
                }
                NodeSpec::Llm(l) => Body::Llm(llm(l)?),
                NodeSpec::Map(l) => {
                    let over = l
                        .over
                        .as_deref()
                        .ok_or_else(|| in_node("a map node needs `over`".into()))?;
                    Body::Map {
                        call: llm(l)?,
                        over: engine
                            .expr(over)
                            .map_err(|e| in_node(format!("over: {e}")))?,
                        over_name: match engine.value(&Value::String(over.to_string())) {
                            Ok(Compiled::Name(n)) => Some(n.to_string()),
                            _ => None,
                        },
                        concurrency: l.concurrency.unwrap_or(4).max(1) as usize,
                    }
                }
                NodeSpec::Update(_) => Body::Update,
                NodeSpec::Tool(ToolNode { tool, .. }) => Body::Tool {
                    tool: tool.clone(),
                    query: tpl(name, "query")?,
                },
            };
            let update = node
                .update()
                .iter()
                .map(|(field, v)| {
                    let reducer = spec.state.reducers.get(field).copied().unwrap_or_default();
                    engine
                        .value(v)
                        .map(|c| (field.clone(), reducer, c))
                        .map_err(|e| in_node(format!("update `{field}`: {e}")))
                })
                .collect::<Result<Vec<_>, String>>()?;
            let edge = match spec.edges.get(name) {
                None => return Err(in_node("no outgoing edge".into())),
                Some(Edge::Static(to)) => EdgeProg::Static(target(to, name)?),
                Some(Edge::Branch(arms)) => {
                    let mut out = Vec::with_capacity(arms.len());
                    for arm in arms {
                        match (&arm.when, &arm.to, &arm.otherwise) {
                            (Some(w), Some(to), None) => out.push((
                                Some(engine.expr(w).map_err(|e| in_node(format!("edge: {e}")))?),
                                target(to, name)?,
                            )),
                            (None, None, Some(to)) => out.push((None, target(to, name)?)),
                            _ => {
                                return Err(in_node(
                                    "an edge arm needs `when` and `to`, or `else`".into(),
                                ))
                            }
                        }
                    }
                    EdgeProg::Branch(out)
                }
            };
            let output_in_exprs = update.iter().any(|(_, _, c)| {
                c.needs_scope()
                    && c.source()
                        .is_some_and(|s| crate::jinja::find_word(s, "output").is_some())
            });
            nodes.push(NodeProg {
                name: name.clone(),
                kind: node.kind(),
                max_visits: node.max_visits(),
                body,
                update,
                edge,
                fallback: spec.output.fallback.iter().any(|f| f == name),
                output_in_exprs,
            });
        }
        let entry = *index
            .get(spec.entry.as_str())
            .ok_or_else(|| format!("entry node `{}` does not exist", spec.entry))?;
        Ok(Program {
            loaded: loaded.clone(),
            engine,
            state_check,
            state_fields,
            nodes,
            entry,
            max_steps: spec.limits.max_steps,
        })
    }

    /// The spec's name.
    pub fn name(&self) -> &str {
        &self.loaded.spec.name
    }

    /// The variant applied, if any.
    pub fn variant(&self) -> Option<&str> {
        self.loaded.variant.as_deref()
    }

    /// Checks `--set FIELD=VALUE` values before anything runs: each field must be a
    /// property of the state schema other than `question` (given with the question),
    /// and the value must match that property's schema (checked on the initial state
    /// the sets produce, so `$ref`s and combinators of the state schema apply).
    ///
    /// # Errors
    /// A message naming the first faulty `--set`: its field, the type the state
    /// schema gives it (`integer`, `array`, ...) and the violation.
    pub fn check_sets(&self, sets: &[(String, Value)]) -> Result<(), String> {
        for (field, _) in sets {
            if field == "question" {
                return Err("--set question: give the question with --question or --input".into());
            }
            if !self.state_fields.iter().any(|f| f == field) {
                return Err(format!(
                    "--set {field}: the state has no field `{field}` (fields: {})",
                    self.state_fields.join(", ")
                ));
            }
        }
        if sets.is_empty() {
            return Ok(());
        }
        let state = Value::Object(super::state::initial_state(
            &self.loaded.spec.state.initial,
            None,
            sets,
        ));
        let violations = self.state_check.violations(&state);
        // The last --set of a field is the one in the state.
        for (i, (field, value)) in sets.iter().enumerate() {
            if sets[i + 1..].iter().any(|(f, _)| f == field) {
                continue;
            }
            if let Some(v) = violations.iter().find(|v| v.field() == Some(field)) {
                let ty = self
                    .state_check
                    .schema()
                    .pointer(&format!(
                        "/properties/{}/type",
                        crate::spec::yaml::escape_segment(field)
                    ))
                    .map(|t| match t {
                        Value::Array(ts) => ts
                            .iter()
                            .map(|t| t.as_str().unwrap_or("?"))
                            .collect::<Vec<_>>()
                            .join(" or "),
                        Value::String(t) => t.clone(),
                        other => other.to_string(),
                    });
                let says = match ty {
                    Some(t) => format!("the state schema says `{field}` is {t}"),
                    None => format!("`{field}` does not match the state schema"),
                };
                return Err(format!("--set {field}={value}: {says}: {v}"));
            }
        }
        Ok(())
    }
}
