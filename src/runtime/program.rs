//! A spec compiled for running: templates, expressions and schemas compiled once,
//! from the texts validation read ([`Inputs`]), edge targets resolved to indices of
//! the spec's [`Topology`]. Built by [`crate::compile`]; the runtime only reads it.
use super::expr::{Compiled, Engine, EngineBuilder, Expr, ExprError};
use super::kinds::{self, NodeBody};
pub use super::program_error::{NodeFault, ProgramError, SetError};
use super::state::SchemaCheck;
use crate::graph::Topology;
use crate::spec::types::{ModelSpec, Reducer, Spec};
use crate::spec::LoadedSpec;
use minijinja::Template;
use petgraph::graph::NodeIndex;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Where an edge leads, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A node of the topology (its index is the node's position in [`Program::nodes`]).
    Node(NodeIndex),
    /// The terminal `END`.
    End,
}

/// A compiled outgoing edge.
#[derive(Debug)]
pub enum EdgeProg {
    /// Always to this target.
    Static(Target),
    /// `when` arms in order, then the `else` target (validation requires one, last).
    Branch {
        /// Predicate and target of each `when` arm, in order.
        arms: Vec<(Expr, Target)>,
        /// Where the edge leads when no predicate holds.
        otherwise: Target,
    },
}

/// The file contents a program is compiled from, as validation read them (each
/// prompt and schema file is read and parsed once, by `validate`).
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// The state schema.
    pub state_schema: Value,
    /// Node name → its structured-output schema (nodes with `schema` only).
    pub schemas: HashMap<String, Value>,
    /// (node name, `"system"` or `"user"`) → the prompt template's text (inline or
    /// from its file).
    pub prompts: HashMap<(String, &'static str), Arc<str>>,
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
    pub(super) fn new(t: Template<'static, 'static>) -> PromptPart {
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
    /// The render error (see [`super::expr::render`]).
    pub fn render(&self, scope: &minijinja::value::Value) -> Result<String, ExprError> {
        match self {
            PromptPart::Static(s) => Ok(s.clone()),
            PromptPart::Template(t) => super::expr::render(t, scope),
        }
    }
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
    /// What it does: its kind's compiled body (`kinds/`).
    pub(super) body: Box<dyn NodeBody>,
    /// Field, its reducer, and the value to merge.
    pub update: Vec<(String, Reducer, Compiled)>,
    /// Outgoing edge.
    pub edge: EdgeProg,
    /// Listed in `output.fallback`.
    pub fallback: bool,
    /// `interrupt_before: true`: a thread run pauses before this node.
    pub interrupt_before: bool,
    /// Some `update` expression reads `output` through the template engine (so the
    /// output must be converted to a template value).
    pub output_in_exprs: bool,
}

/// A spec ready to run.
#[derive(Debug)]
pub struct Program {
    /// The spec's name.
    pub name: String,
    /// The variant applied, if any.
    pub variant: Option<String>,
    /// The typed (merged, changed) spec: the models, retrievers and tools the
    /// resources are opened from, the initial state and the output fields. The
    /// runtime never reads prompts, schemas or edges from it: they are compiled here.
    pub spec: Arc<Spec>,
    /// The directory relative paths of the spec resolve against (its `root`).
    pub root: PathBuf,
    /// The graph the interpreter walks: [`Target::Node`] indices are its node indices.
    pub topology: Arc<Topology>,
    /// The engine holding the templates.
    pub engine: Engine,
    /// The state schema.
    pub state_check: SchemaCheck,
    /// Properties the state schema declares.
    pub state_fields: Vec<String>,
    /// Nodes, in spec order.
    pub nodes: Vec<NodeProg>,
    /// Entry node.
    pub entry: NodeIndex,
    /// Global step limit.
    pub max_steps: u32,
    /// blake3 (64 hex digits) of what the program was compiled from: the merged,
    /// changed spec (its `variants` table left out) and the prompt and schema texts.
    /// Two programs with the same fingerprint run the same way; checkpoints record
    /// it so a thread is not resumed on a changed spec.
    pub fingerprint: String,
}

/// The [`Program::fingerprint`] of a spec and its inputs: every prompt text and
/// schema in name order, each length-prefixed.
fn fingerprint(spec: &Spec, files: &Inputs) -> String {
    let mut h = blake3::Hasher::new();
    let mut put = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    let mut value = serde_json::to_value(spec).unwrap_or(Value::Null);
    if let Some(obj) = value.as_object_mut() {
        obj.remove("variants");
    }
    put(value.to_string().as_bytes());
    put(files.state_schema.to_string().as_bytes());
    let mut schemas: Vec<_> = files.schemas.iter().collect();
    schemas.sort_by(|a, b| a.0.cmp(b.0));
    for (name, schema) in schemas {
        put(name.as_bytes());
        put(schema.to_string().as_bytes());
    }
    let mut prompts: Vec<_> = files.prompts.iter().collect();
    prompts.sort_by(|a, b| a.0.cmp(b.0));
    for ((name, part), text) in prompts {
        put(name.as_bytes());
        put(part.as_bytes());
        put(text.as_bytes());
    }
    h.finalize().to_hex().to_string()
}

impl Program {
    /// Compiles a loaded and validated spec from the texts validation read.
    ///
    /// `topology` must be [`Topology::build`] of `loaded.spec`; `files` holds the
    /// state schema, every node's output schema and every prompt's text.
    ///
    /// # Errors
    /// A [`ProgramError`] naming the node at fault: a template or expression that does
    /// not compile, a missing input, an edge to an unknown node, a branch without
    /// `else` (none of which a spec that passed `validate` has).
    pub fn compile(
        loaded: &LoadedSpec,
        topology: Arc<Topology>,
        files: &Inputs,
    ) -> Result<Program, ProgramError> {
        let spec = &loaded.spec;
        let target = |name: &str, from: &str| -> Result<Target, ProgramError> {
            match topology.target(name) {
                Some(ix) if ix == topology.end => Ok(Target::End),
                Some(ix) => Ok(Target::Node(ix)),
                None => Err(ProgramError::UnknownTarget {
                    from: from.to_string(),
                    to: name.to_string(),
                }),
            }
        };
        let state_schema = &files.state_schema;
        let state_check = SchemaCheck::new(state_schema).map_err(ProgramError::StateSchema)?;
        let state_fields = state_schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let node_fault = |node: &str, fault: NodeFault| ProgramError::Node {
            node: node.to_string(),
            fault,
        };

        // Templates first: the environment is frozen before expressions compile.
        let mut builder = EngineBuilder::default();
        for (name, node) in &spec.nodes {
            let mut add = |part: &'static str, text: String| {
                builder
                    .add_template(format!("{name}/{part}"), text)
                    .map_err(|error| {
                        node_fault(
                            name,
                            NodeFault::Template {
                                part: part.to_string(),
                                error,
                            },
                        )
                    })
            };
            kinds::templates(name, node, files, &mut add)?;
        }
        let engine = builder.build();

        let mut nodes = Vec::with_capacity(spec.nodes.len());
        for (name, node) in &spec.nodes {
            let in_node = |fault: NodeFault| node_fault(name, fault);
            let body = kinds::compile(
                &kinds::Compile {
                    spec,
                    engine: &engine,
                    files,
                    name,
                },
                node,
            )?;
            let update = node
                .update()
                .iter()
                .map(|(field, v)| {
                    let reducer = spec.state.reducers.get(field).copied().unwrap_or_default();
                    engine
                        .value(v)
                        .map(|c| (field.clone(), reducer, c))
                        .map_err(|error| {
                            in_node(NodeFault::Update {
                                field: field.clone(),
                                error,
                            })
                        })
                })
                .collect::<Result<Vec<_>, ProgramError>>()?;
            let edge = spec
                .edges
                .get(name)
                .ok_or_else(|| in_node(NodeFault::NoEdge))?;
            let mut arms = Vec::new();
            let mut otherwise = None;
            for arm in edge.arms() {
                let to = target(arm.to, name)?;
                match arm.when {
                    None => otherwise = Some(to),
                    Some(w) => {
                        arms.push((engine.expr(w).map_err(|e| in_node(NodeFault::Edge(e)))?, to))
                    }
                }
            }
            let edge = match (arms.is_empty(), otherwise, edge) {
                (true, Some(to), crate::spec::types::Edge::Static(_)) => EdgeProg::Static(to),
                (_, Some(otherwise), crate::spec::types::Edge::Branch(list))
                    if list.len() == arms.len() + 1 =>
                {
                    EdgeProg::Branch { arms, otherwise }
                }
                _ => return Err(in_node(NodeFault::BadArms)),
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
                interrupt_before: node.interrupt_before(),
                output_in_exprs,
            });
        }
        let entry = topology
            .entry
            .ok_or_else(|| ProgramError::NoEntry(spec.entry.clone()))?;
        Ok(Program {
            name: spec.name.clone(),
            variant: loaded.variant.clone(),
            spec: Arc::new(spec.clone()),
            root: loaded.root.clone(),
            topology,
            engine,
            state_check,
            state_fields,
            nodes,
            entry,
            max_steps: spec.limits.max_steps,
            fingerprint: fingerprint(spec, files),
        })
    }

    /// The spec's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The variant applied, if any.
    pub fn variant(&self) -> Option<&str> {
        self.variant.as_deref()
    }

    /// The compiled node at an index of the topology (`None` for END).
    pub fn node(&self, ix: NodeIndex) -> Option<&NodeProg> {
        self.nodes.get(ix.index())
    }

    /// Checks `--set FIELD=VALUE` values before anything runs: each field must be a
    /// property of the state schema other than `question` (given with the question),
    /// and the value must match that property's schema (checked on the initial state
    /// the sets produce, so `$ref`s and combinators of the state schema apply).
    ///
    /// # Errors
    /// A [`SetError`] naming the first faulty `--set`: its field, the type the state
    /// schema gives it (`integer`, `array`, ...) and the violation.
    pub fn check_sets(&self, sets: &[(String, Value)]) -> Result<(), SetError> {
        for (field, _) in sets {
            if field == "question" {
                return Err(SetError::Question);
            }
            if !self.state_fields.iter().any(|f| f == field) {
                return Err(SetError::UnknownField {
                    field: field.clone(),
                    fields: self.state_fields.clone(),
                });
            }
        }
        if sets.is_empty() {
            return Ok(());
        }
        let state = Value::Object(super::state::initial_state(
            &self.spec.state.initial,
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
                return Err(SetError::Mismatch {
                    field: field.clone(),
                    value: value.clone(),
                    expected: ty,
                    violation: v.to_string(),
                });
            }
        }
        Ok(())
    }
}
