//! The errors of [`Program::compile`](super::Program::compile): [`ProgramError`], and
//! [`NodeFault`] for the part of one node at fault; of
//! [`Program::check_sets`](super::Program::check_sets): [`SetError`].
use super::expr::ExprError;
use super::state::StateError;

/// Why [`Program::compile`](super::Program::compile) failed (none of these happens to a spec that passed
/// `validate`). `Display` is the message `run` and `eval` show.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    /// An edge arm names a node that does not exist.
    #[error("edge of node `{from}` leads to unknown node `{to}`")]
    UnknownTarget {
        /// The node the edge leaves.
        from: String,
        /// The name it leads to.
        to: String,
    },
    /// The state schema does not compile.
    #[error("state schema: {0}")]
    StateSchema(StateError),
    /// A node's part does not compile.
    #[error("node `{node}`: {fault}")]
    Node {
        /// The node's name.
        node: String,
        /// What is wrong with it.
        fault: NodeFault,
    },
    /// The spec's `entry` is not a node.
    #[error("entry node `{0}` does not exist")]
    NoEntry(String),
}

/// What is wrong with one node (see [`ProgramError::Node`]).
#[derive(Debug, thiserror::Error)]
pub enum NodeFault {
    /// A prompt's text was not in the [`Inputs`](super::program::Inputs) (`part`: `system` or `user`).
    #[error("{0} prompt was not loaded")]
    PromptNotLoaded(&'static str),
    /// A template (`query`, `system`, `user`) does not compile.
    #[error("{part} template: {error}")]
    Template {
        /// `query`, `system` or `user`.
        part: String,
        /// The syntax error.
        error: ExprError,
    },
    /// A template added to the engine cannot be found again.
    #[error("{0}")]
    NoTemplate(ExprError),
    /// The node names a model the spec does not declare.
    #[error("unknown model `{0}`")]
    UnknownModel(String),
    /// An `inputs` value does not compile.
    #[error("input `{input}`: {error}")]
    Input {
        /// The input's name.
        input: String,
        /// The syntax error.
        error: ExprError,
    },
    /// The output schema was not in the [`Inputs`](super::program::Inputs).
    #[error("schema was not loaded")]
    SchemaNotLoaded,
    /// The output schema does not compile.
    #[error("schema: {0}")]
    Schema(StateError),
    /// The node names a retriever the spec does not declare.
    #[error("unknown retriever `{0}`")]
    UnknownRetriever(String),
    /// A map node without `over`.
    #[error("a map node needs `over`")]
    NoOver,
    /// A map's `over` does not compile.
    #[error("over: {0}")]
    Over(ExprError),
    /// The node names a tool the spec does not declare.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// An `update` value does not compile.
    #[error("update `{field}`: {error}")]
    Update {
        /// The state field.
        field: String,
        /// The syntax error.
        error: ExprError,
    },
    /// The node has no entry under `edges`.
    #[error("no outgoing edge")]
    NoEdge,
    /// A branch predicate does not compile.
    #[error("edge: {0}")]
    Edge(ExprError),
    /// The edge's arms are malformed.
    #[error("an edge arm needs `when` and `to`, or `else`, and the branch ends with `else`")]
    BadArms,
}

/// A `--set FIELD=VALUE` that [`Program::check_sets`](super::Program::check_sets)
/// refuses (a usage error). `Display` is the message `run` prints.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SetError {
    /// `--set question=…`: the question has its own flags.
    #[error("--set question: give the question with --question or --input")]
    Question,
    /// The state schema has no such property; `fields` are the ones it has.
    #[error("--set {field}: the state has no field `{field}` (fields: {})", .fields.join(", "))]
    UnknownField {
        /// The field as given.
        field: String,
        /// The state schema's properties.
        fields: Vec<String>,
    },
    /// The value does not match the field's schema.
    #[error("--set {field}={value}: {}: {violation}", says(field, expected.as_deref()))]
    Mismatch {
        /// The field.
        field: String,
        /// The value as parsed.
        value: serde_json::Value,
        /// The field's `type` in the state schema (`integer`, `string or null`), if any.
        expected: Option<String>,
        /// The schema violation.
        violation: String,
    },
}

impl SetError {
    /// The fault in the words of a request's `input` object (no `--set`), for
    /// `ragloop serve`.
    pub fn input_message(&self) -> String {
        match self {
            SetError::Question => "`input.question` is the question; give it as a string".into(),
            SetError::UnknownField { field, fields } => format!(
                "`input.{field}`: the state has no field `{field}` (fields: {})",
                fields.join(", ")
            ),
            SetError::Mismatch {
                field,
                value,
                expected,
                violation,
            } => format!(
                "`input.{field}` = {value}: {}: {violation}",
                says(field, expected.as_deref())
            ),
        }
    }
}

fn says(field: &str, expected: Option<&str>) -> String {
    match expected {
        Some(t) => format!("the state schema says `{field}` is {t}"),
        None => format!("`{field}` does not match the state schema"),
    }
}
