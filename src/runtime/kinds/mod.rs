//! Node kinds: one module per kind, each holding everything that kind means — its
//! spec-level checks (references in `check_refs`, templates and expressions in
//! `check_templates`), its compile step (`templates`, then `compile` into a
//! [`NodeBody`]) and its execution ([`NodeBody::exec`]) — and this file, the one
//! registry that dispatches a [`NodeSpec`] to its kind's module.
//!
//! Layers (rig's pattern): the kind modules live in the runtime, which never imports
//! `validate`. What the template checks need from the type checker is the small
//! [`TemplateChecks`] trait defined here and implemented by `validate/templates.rs`;
//! the reference checks need only the spec and `diag`. `Program::compile` calls
//! [`templates`] and [`compile`]; the interpreter calls [`NodeBody::exec`].
//!
//! Adding a kind: its struct and `NodeSpec` variant in `src/spec/types.rs`, a module
//! here, and an arm in each function of this file (see ARCHITECTURE.md).
mod llm;
mod map;
mod retrieve;
mod tool;
mod update;

use super::expr::{Engine, Mirror};
use super::nodes::{Failure, Meter, NodeOut};
use super::program::{Inputs, NodeProg, ProgramError};
use super::program_error::NodeFault;
use super::resources::Resources;
use crate::diag::Diagnostic;
use crate::spec::types::{NodeSpec, SchemaRef, Spec, TemplateSource};
use crate::spec::LoadedSpec;
use futures::future::BoxFuture;
use minijinja::Template;
use serde_json::Value;
use std::sync::Arc;

/// What a compiled node does when it runs: one implementation per kind, built by its
/// module's `compile`.
pub(super) trait NodeBody: std::fmt::Debug + Send + Sync {
    /// Runs the node once over the step's state (before the step): its output, or the
    /// failure with the usage its calls billed.
    fn exec<'a>(&'a self, step: Step<'a>) -> BoxFuture<'a, Result<NodeOut, Failure>>;

    /// Whether the node calls LLMs (an interrupted step reports its meter's usage).
    fn calls_llm(&self) -> bool {
        false
    }
}

/// One execution of a node: what [`NodeBody::exec`] reads.
#[derive(Clone, Copy)]
pub(super) struct Step<'a> {
    /// The compiled node.
    pub(super) node: &'a NodeProg,
    /// Retrievers, tools and providers.
    pub(super) res: &'a Resources,
    /// The state as template values.
    pub(super) mirror: &'a Arc<Mirror>,
    /// The state as JSON.
    pub(super) state: &'a Value,
    /// The step's LLM usage so far.
    pub(super) meter: &'a Meter,
}

/// What a kind's `compile` reads: the spec, the frozen engine, the files validation read.
pub(super) struct Compile<'a> {
    /// The (merged) spec.
    pub(super) spec: &'a Spec,
    /// The engine holding every node's templates (`{node}/{part}`).
    pub(super) engine: &'a Engine,
    /// Schemas and prompt texts.
    pub(super) files: &'a Inputs,
    /// The node being compiled.
    pub(super) name: &'a str,
}

impl Compile<'_> {
    /// A fault of the node being compiled.
    pub(super) fn fault(&self, fault: NodeFault) -> ProgramError {
        ProgramError::Node {
            node: self.name.to_string(),
            fault,
        }
    }

    /// The node's template `part`, registered by its kind's `templates`.
    pub(super) fn template(&self, part: &str) -> Result<Template<'static, 'static>, ProgramError> {
        self.engine
            .template(&format!("{}/{part}", self.name))
            .map_err(|e| self.fault(NodeFault::NoTemplate(e)))
    }
}

/// Registers a node's templates, in order, through `add(part, text)` (before the
/// engine freezes; `part` is how the kind's `compile` finds it again).
///
/// # Errors
/// A prompt text validation did not read ([`NodeFault::PromptNotLoaded`]), or what
/// `add` returns.
pub(super) fn templates(
    name: &str,
    node: &NodeSpec,
    files: &Inputs,
    add: &mut dyn FnMut(&'static str, String) -> Result<(), ProgramError>,
) -> Result<(), ProgramError> {
    match node {
        NodeSpec::Retrieve(n) => retrieve::templates(n, add),
        NodeSpec::Llm(n) | NodeSpec::Map(n) => llm::templates(name, n, files, add),
        NodeSpec::Update(_) => Ok(()),
        NodeSpec::Tool(n) => tool::templates(n, add),
    }
}

/// Compiles a node into what the runtime executes.
///
/// # Errors
/// A [`ProgramError::Node`] (none happens to a spec that passed `validate`).
pub(super) fn compile(
    cx: &Compile<'_>,
    node: &NodeSpec,
) -> Result<Box<dyn NodeBody>, ProgramError> {
    match node {
        NodeSpec::Retrieve(n) => retrieve::compile(cx, n),
        NodeSpec::Llm(n) => llm::compile(cx, n),
        NodeSpec::Map(n) => map::compile(cx, n),
        NodeSpec::Update(n) => update::compile(cx, n),
        NodeSpec::Tool(n) => tool::compile(cx, n),
    }
}

/// The reference and field checks of node `name` (models, retrievers, tools it
/// names, fields its kind refuses, provider tasks), as `validate` runs them.
pub fn check_refs(ls: &LoadedSpec, name: &str, node: &NodeSpec, diags: &mut Vec<Diagnostic>) {
    match node {
        NodeSpec::Retrieve(n) => retrieve::check_refs(ls, name, n, diags),
        NodeSpec::Llm(n) => llm::check_refs(ls, name, n, diags),
        NodeSpec::Map(n) => map::check_refs(ls, name, n, diags),
        NodeSpec::Update(_) => {}
        NodeSpec::Tool(n) => tool::check_refs(ls, name, n, diags),
    }
}

/// The template and expression checks of node `name`'s own fields (its `update` is
/// checked by the caller), with the types they produce.
pub fn check_templates<'n, C: TemplateChecks>(
    cx: &mut C,
    name: &str,
    node: &'n NodeSpec,
) -> KindTypes<'n, C::Ty> {
    match node {
        NodeSpec::Retrieve(n) => retrieve::check_templates(cx, name, n),
        NodeSpec::Llm(n) => llm::check_templates(cx, name, n, false),
        NodeSpec::Map(n) => llm::check_templates(cx, name, n, true),
        NodeSpec::Update(_) => KindTypes::default(),
        NodeSpec::Tool(n) => tool::check_templates(cx, name, n),
    }
}

/// What a kind's template checks found: the type of `output` (what `update`
/// expressions read; `None` for a kind without output) and the named inputs with
/// their types (also readable in `update`).
#[derive(Debug)]
pub struct KindTypes<'n, T> {
    /// The type of the node's `output`.
    pub output: Option<T>,
    /// Input name → its type, in declaration order.
    pub inputs: Vec<(&'n str, T)>,
}

impl<T> Default for KindTypes<'_, T> {
    fn default() -> Self {
        KindTypes {
            output: None,
            inputs: Vec::new(),
        }
    }
}

/// The template checks a kind's `check_templates` calls, implemented by `validate`
/// (its type checker and diagnostics). `at` is the spec path of the value checked
/// (e.g. `["nodes", "grade", "query"]`); findings are recorded by the implementation.
pub trait TemplateChecks {
    /// A type of the type checker.
    type Ty: Clone;
    /// The names readable at one place (state fields plus `extra`).
    type Scope;

    /// The names readable in a node's fields: the state fields plus `extra`.
    fn scope(&self, extra: &[(&str, Self::Ty)]) -> Self::Scope;
    /// Checks an inline template (compiles, reads known names).
    fn template(&mut self, scope: &Self::Scope, text: &str, at: &[&str]);
    /// Checks an expression (compiles, reads known names) and infers its type.
    fn expression(&mut self, scope: &Self::Scope, expr: &Value, at: &[&str]) -> Self::Ty;
    /// Checks a prompt template, inline or from its file.
    fn prompt(&mut self, scope: &Self::Scope, source: &TemplateSource, at: &[&str]);
    /// The type an output schema describes (unknown when it did not load).
    fn schema(&mut self, schema: &SchemaRef, at: &[&str]) -> Self::Ty;
    /// A list of documents (`id`, `content`, `metadata`).
    fn documents(&self) -> Self::Ty;
    /// A string.
    fn string(&self) -> Self::Ty;
    /// An integer.
    fn int(&self) -> Self::Ty;
    /// An unknown type (reads are not checked).
    fn unknown(&self) -> Self::Ty;
    /// A list of `t`.
    fn list(&self, t: Self::Ty) -> Self::Ty;
    /// The element type of a list type.
    fn element(&self, t: &Self::Ty) -> Self::Ty;
}
