//! Names and references: entry, edge ends, models, retrievers, tools, reserved
//! names, branch shape, node-kind field rules, provider tasks, corpus directories.
use super::Options;
use crate::diag::{Code, Diagnostic};
use crate::graph::END;
use crate::retrieval::RetrievalError;
use crate::spec::types::{Edge, NodeSpec, RetrieveNode, ToolSpec};
use crate::spec::LoadedSpec;
use indexmap::IndexMap;

/// The variant name `ragloop eval` uses for the spec without any variant.
const RESERVED_VARIANT: &str = "base";

/// The reference checks' findings, by the part of the spec each reads (so a
/// variant's check recomputes only the parts its `set` paths touch, see
/// `variants.rs`). [`RefParts::all`] lists them in the order the check reports them.
#[derive(Clone, Debug, Default)]
pub(super) struct RefParts {
    /// Node names (reserved, malformed): the names and the nodes' key spans.
    pub names: Vec<Diagnostic>,
    /// A variant named `base`: the `variants` section.
    pub variants: Vec<Diagnostic>,
    /// Entry, edge sources and ends, branch shape, nodes without an edge: the node
    /// names and key spans, `entry` and `edges`.
    pub wiring: Vec<Diagnostic>,
    /// `output` (answer field, fallback nodes): `output`, `name`, the node names.
    pub output: Vec<Diagnostic>,
    /// Per node, its kind's reference checks: the node and the models, retrievers
    /// and tools.
    pub nodes: IndexMap<String, Vec<Diagnostic>>,
    /// Ranges of `limits`, retrievers, tools and models.
    pub ranges: Vec<Diagnostic>,
    /// Per node, the ranges of its fields: the node.
    pub node_ranges: IndexMap<String, Vec<Diagnostic>>,
    /// Corpus directories of retrievers and tools (unless `no_environment`).
    pub env: Vec<Diagnostic>,
}

impl RefParts {
    /// True when the graph checks can run (entry and every edge end resolve,
    /// branches are well formed).
    pub fn graph_ok(&self) -> bool {
        self.names.is_empty() && self.variants.is_empty() && self.wiring.is_empty()
    }

    /// Every finding, in the order of the check.
    pub fn all(&self) -> Vec<Diagnostic> {
        let mut out = self.names.clone();
        out.extend_from_slice(&self.variants);
        out.extend_from_slice(&self.wiring);
        out.extend_from_slice(&self.output);
        for d in self.nodes.values() {
            out.extend_from_slice(d);
        }
        out.extend_from_slice(&self.ranges);
        for d in self.node_ranges.values() {
            out.extend_from_slice(d);
        }
        out.extend_from_slice(&self.env);
        out
    }
}

#[cfg(test)]
thread_local! {
    /// How many nodes [`node`] checked on this thread.
    pub(crate) static NODE_CHECKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The reference checks, by part.
pub(super) fn parts(ls: &LoadedSpec, opts: &Options) -> RefParts {
    let spec = &ls.spec;
    let mut p = RefParts {
        names: names(ls),
        variants: variants(ls),
        wiring: wiring(ls),
        output: output(ls),
        ranges: ranges(ls),
        env: env(ls, opts),
        ..RefParts::default()
    };
    for name in spec.nodes.keys() {
        p.nodes.insert(name.clone(), node(ls, name));
    }
    for name in spec.nodes.keys() {
        p.node_ranges.insert(name.clone(), node_ranges(ls, name));
    }
    p
}

/// Reserved and malformed node names.
pub(super) fn names(ls: &LoadedSpec) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    for name in ls.spec.nodes.keys() {
        if name == END || name == "START" {
            diags.push(
                Diagnostic::new(
                    Code::ReservedName,
                    format!("`{name}` is reserved and cannot name a node"),
                )
                .at(ls.key_span(&["nodes", name])),
            );
        } else if !is_node_name(name) {
            diags.push(
                Diagnostic::new(
                    Code::ReservedName,
                    format!("`{name}` is not a valid node name"),
                )
                .at(ls.key_span(&["nodes", name]))
                .help("node names start with a letter or `_` and hold letters, digits, `_` and `-` (no dots: variants address nodes by dotted paths)"),
            );
        }
    }
    diags
}

/// A variant named `base`.
pub(super) fn variants(ls: &LoadedSpec) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    if ls.spec.variants.contains_key(RESERVED_VARIANT) {
        diags.push(
            Diagnostic::new(
                Code::ReservedName,
                format!("`{RESERVED_VARIANT}` is reserved and cannot name a variant"),
            )
            .at(ls.key_span(&["variants", RESERVED_VARIANT]))
            .help("`base` names the spec without any variant (`ragloop eval --variants base,...`); rename this variant"),
        );
    }
    diags
}

/// Entry, edges and nodes without an edge.
pub(super) fn wiring(ls: &LoadedSpec) -> Vec<Diagnostic> {
    let spec = &ls.spec;
    let mut diags = Vec::new();
    let is_target = |name: &str| name == END || spec.nodes.contains_key(name);
    if !spec.nodes.contains_key(&spec.entry) {
        diags.push(
            Diagnostic::new(
                Code::UnknownEntry,
                format!("entry node `{}` does not exist", spec.entry),
            )
            .at(ls.span(&["entry"]))
            .help(suggest(&spec.entry, spec.nodes.keys())),
        );
    }
    for (from, edge) in &spec.edges {
        if !spec.nodes.contains_key(from) {
            diags.push(
                Diagnostic::new(
                    Code::UnknownEdgeSource,
                    format!("edges are given for `{from}`, which is not a node"),
                )
                .at(ls.key_span(&["edges", from]))
                .help(suggest(from, spec.nodes.keys())),
            );
        }
        match edge {
            Edge::Static(to) => {
                if !is_target(to) {
                    diags.push(unknown_target(ls, from, to, &["edges", from]));
                }
            }
            Edge::Branch(arms) => check_branch(ls, from, arms, &mut diags),
        }
    }
    for name in spec.nodes.keys() {
        if !spec.edges.contains_key(name) {
            diags.push(
                Diagnostic::new(
                    Code::MissingEdge,
                    format!("node `{name}` has no outgoing edge"),
                )
                .at(ls.key_span(&["nodes", name]))
                .help(format!(
                    "add `{name}: <next node>` (or `{name}: END`) under `edges`"
                )),
            );
        }
    }
    diags
}

/// `output`: an answer field, fallback nodes that exist.
pub(super) fn output(ls: &LoadedSpec) -> Vec<Diagnostic> {
    let spec = &ls.spec;
    let mut diags = Vec::new();
    if spec.output.answer.is_none() {
        diags.push(
            Diagnostic::new(
                Code::NoAnswerField,
                "the spec names no `output.answer` field: no run can end as `generated`",
            )
            .at(ls.key_span(&["name"]))
            .help("add `output: {answer: <state field holding the answer>}`"),
        );
    }
    for (i, name) in spec.output.fallback.iter().enumerate() {
        if !spec.nodes.contains_key(name) {
            diags.push(
                Diagnostic::new(
                    Code::UnknownOutput,
                    format!("`output.fallback` names `{name}`, which is not a node"),
                )
                .at(ls.span(&["output", "fallback", &i.to_string()]))
                .help(suggest(name, spec.nodes.keys())),
            );
        }
    }
    diags
}

/// One node's kind-specific reference checks (model, retriever, tool, fields of
/// other kinds).
pub(super) fn node(ls: &LoadedSpec, name: &str) -> Vec<Diagnostic> {
    #[cfg(test)]
    NODE_CHECKS.with(|c| c.set(c.get() + 1));
    let mut diags = Vec::new();
    if let Some(node) = ls.spec.nodes.get(name) {
        crate::runtime::kinds::check_refs(ls, name, node, &mut diags);
    }
    diags
}

/// Corpus directories exist (unless `no_environment`).
pub(super) fn env(ls: &LoadedSpec, opts: &Options) -> Vec<Diagnostic> {
    let spec = &ls.spec;
    let mut diags = Vec::new();
    if !opts.no_environment {
        for (name, r) in &spec.retrievers {
            check_corpus(ls, r.corpus(), &["retrievers", name, "corpus"], &mut diags);
        }
        for (name, t) in &spec.tools {
            if let ToolSpec::Corpus { corpus, .. } = t {
                check_corpus(ls, corpus, &["tools", name, "corpus"], &mut diags);
            }
        }
    }
    diags
}

fn check_corpus(ls: &LoadedSpec, corpus: &str, at: &[&str], diags: &mut Vec<Diagnostic>) {
    if corpus.starts_with("rust-docs:") {
        check_rust_docs(ls, corpus, at, diags);
        return;
    }
    let path = ls.root.join(corpus);
    if !path.is_dir() {
        diags.push(
            Diagnostic::new(
                Code::MissingFile,
                if path.exists() {
                    format!("corpus `{corpus}` is a file, not a directory")
                } else {
                    format!("corpus directory `{corpus}` does not exist")
                },
            )
            .at(ls.span(at))
            .help(format!(
                "looked for {}; `--no-environment` skips this check",
                path.display()
            )),
        );
    }
}

/// A `rust-docs:` corpus is resolved as the run resolves it (the toolchain's sysroot,
/// `$RUSTC` honoured); a failure is the run's message, at the corpus value.
fn check_rust_docs(ls: &LoadedSpec, corpus: &str, at: &[&str], diags: &mut Vec<Diagnostic>) {
    let Err(e) = crate::retrieval::resolve_corpus(corpus, &ls.root) else {
        return;
    };
    let help = match e {
        RetrievalError::RustDocsNotInstalled { .. }
        | RetrievalError::RustDocsFolderMissing { .. } => {
            "`rustup component add rust-docs` installs the documentation of the active toolchain ($RUSTC names another rustc)"
        }
        RetrievalError::RustDocs { .. } => {
            "the Rust docs are found through `rustc --print sysroot`; set $RUSTC to a working rustc"
        }
        _ => "`rust-docs:` names a folder of the installed Rust docs, e.g. `rust-docs:book`",
    };
    diags.push(
        Diagnostic::new(Code::MissingFile, format!("corpus `{corpus}`: {e}"))
            .at(ls.span(at))
            .help(format!("{help}; `--no-environment` skips this check")),
    );
}

fn unknown_target(ls: &LoadedSpec, from: &str, to: &str, at: &[&str]) -> Diagnostic {
    Diagnostic::new(
        Code::UnknownEdgeTarget,
        format!("edge from `{from}` leads to `{to}`, which is not a node"),
    )
    .at(ls.span(at))
    .help(suggest(
        to,
        ls.spec.nodes.keys().map(String::as_str).chain([END]),
    ))
}

fn check_branch(
    ls: &LoadedSpec,
    from: &str,
    arms: &[crate::spec::types::Arm],
    diags: &mut Vec<Diagnostic>,
) {
    let spec = &ls.spec;
    if arms.is_empty() {
        diags.push(
            Diagnostic::new(
                Code::BranchShape,
                format!("edges of `{from}`: the branch list is empty"),
            )
            .at(ls.span(&["edges", from])),
        );
        return;
    }
    let mut else_seen = false;
    for (i, arm) in arms.iter().enumerate() {
        let ix = i.to_string();
        let at = ["edges", from, ix.as_str()];
        match (&arm.when, &arm.to, &arm.otherwise) {
            (Some(_), Some(to), None) => {
                if else_seen {
                    diags.push(
                        Diagnostic::new(
                            Code::BranchShape,
                            format!("edges of `{from}`: a `when` arm follows the `else` arm"),
                        )
                        .at(ls.span(&at))
                        .help("`else` must be the last arm"),
                    );
                }
                if to != END && !spec.nodes.contains_key(to) {
                    diags.push(unknown_target(ls, from, to, &["edges", from, &ix, "to"]));
                }
            }
            (None, None, Some(to)) => {
                if else_seen {
                    diags.push(
                        Diagnostic::new(
                            Code::BranchShape,
                            format!("edges of `{from}`: more than one `else` arm"),
                        )
                        .at(ls.span(&at)),
                    );
                }
                else_seen = true;
                if to != END && !spec.nodes.contains_key(to) {
                    diags.push(unknown_target(ls, from, to, &["edges", from, &ix, "else"]));
                }
            }
            (Some(_), None, None) => diags.push(
                Diagnostic::new(
                    Code::BranchShape,
                    format!("edges of `{from}`: arm {} has `when` but no `to`", i + 1),
                )
                .at(ls.span(&at)),
            ),
            (_, _, otherwise) => {
                // A malformed arm that has an `else` counts as the `else` arm: its
                // E051 is the fault, no E050 "has no else arm" besides.
                else_seen |= otherwise.is_some();
                diags.push(
                    Diagnostic::new(
                        Code::BranchShape,
                        format!(
                            "edges of `{from}`: arm {} must be either `{{when, to}}` or `{{else}}`",
                            i + 1
                        ),
                    )
                    .at(ls.span(&at)),
                )
            }
        }
    }
    if !else_seen {
        diags.push(
            Diagnostic::new(Code::MissingElse, format!("the branch of `{from}` has no `else` arm"))
                .at(ls.key_span(&["edges", from]))
                .help("end the list with `- else: <node or END>`: a state that matches no `when` needs somewhere to go"),
        );
    }
}

/// "did you mean" help (see [`crate::jinja::suggest`]).
pub(crate) use crate::jinja::suggest;

/// Numeric ranges the spec schema documents and serde cannot express: a value outside
/// its range is [`Code::WrongType`] at the value.
pub(super) fn ranges(ls: &LoadedSpec) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    let spec = &ls.spec;
    let mut out_of = |at: Vec<String>, value: f64, min: f64, max: Option<f64>| {
        out_of_range(ls, &mut diags, at, value, min, max)
    };
    let path = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    out_of(
        path(&["limits", "max_steps"]),
        f64::from(spec.limits.max_steps),
        1.0,
        None,
    );
    for (name, r) in &spec.retrievers {
        out_of(
            path(&["retrievers", name, "top_k"]),
            f64::from(r.own_top_k()),
            1.0,
            Some(1000.0),
        );
    }
    for (name, t) in &spec.tools {
        let top_k = match t {
            ToolSpec::Corpus { top_k, .. }
            | ToolSpec::Searxng { top_k, .. }
            | ToolSpec::Tavily { top_k, .. } => *top_k,
        };
        out_of(
            path(&["tools", name, "top_k"]),
            f64::from(top_k),
            1.0,
            Some(1000.0),
        );
    }
    for (name, m) in &spec.models {
        out_of(
            path(&["models", name, "temperature"]),
            m.temperature,
            0.0,
            Some(2.0),
        );
        if let Some(v) = m.max_tokens {
            out_of(
                path(&["models", name, "max_tokens"]),
                f64::from(v),
                1.0,
                None,
            );
        }
        if let Some(v) = m.timeout_secs {
            out_of(
                path(&["models", name, "timeout_secs"]),
                v,
                crate::spec::types::MIN_TIMEOUT_SECS,
                Some(crate::spec::types::MAX_TIMEOUT_SECS),
            );
        }
        if let Some(v) = m.concurrency {
            out_of(
                path(&["models", name, "concurrency"]),
                f64::from(v),
                1.0,
                None,
            );
        }
        if let Some(v) = m.requests_per_minute {
            out_of(
                path(&["models", name, "requests_per_minute"]),
                f64::from(v),
                1.0,
                None,
            );
        }
        if let Some(p) = &m.price {
            out_of(
                path(&["models", name, "price", "input_per_mtok"]),
                p.input_per_mtok,
                0.0,
                None,
            );
            out_of(
                path(&["models", name, "price", "output_per_mtok"]),
                p.output_per_mtok,
                0.0,
                None,
            );
        }
    }
    diags
}

/// The ranges of one node's fields (`max_visits`, `top_k`, `repair_attempts`,
/// `concurrency`).
pub(super) fn node_ranges(ls: &LoadedSpec, name: &str) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    let Some(node) = ls.spec.nodes.get(name) else {
        return diags;
    };
    let mut out_of = |at: Vec<String>, value: f64, min: f64, max: Option<f64>| {
        out_of_range(ls, &mut diags, at, value, min, max)
    };
    let path = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    if let Some(v) = node.max_visits() {
        out_of(
            path(&["nodes", name, "max_visits"]),
            f64::from(v),
            1.0,
            None,
        );
    }
    if let NodeSpec::Retrieve(RetrieveNode { top_k: Some(k), .. }) = node {
        out_of(
            path(&["nodes", name, "top_k"]),
            f64::from(*k),
            1.0,
            Some(1000.0),
        );
    }
    if let Some(call) = node.llm() {
        out_of(
            path(&["nodes", name, "repair_attempts"]),
            f64::from(call.repair_attempts),
            0.0,
            Some(10.0),
        );
        if let Some(c) = call.concurrency {
            out_of(
                path(&["nodes", name, "concurrency"]),
                f64::from(c),
                1.0,
                Some(256.0),
            );
        }
    }
    diags
}

/// Pushes [`Code::WrongType`] at `at` when `value` is below `min` or above `max`.
fn out_of_range(
    ls: &LoadedSpec,
    diags: &mut Vec<Diagnostic>,
    at: Vec<String>,
    value: f64,
    min: f64,
    max: Option<f64>,
) {
    let too_low = value < min;
    let too_high = max.is_some_and(|m| value > m);
    if too_low || too_high {
        let range = match max {
            Some(m) => format!("between {min} and {m}"),
            None => format!("at least {min}"),
        };
        diags.push(
            Diagnostic::new(
                Code::WrongType,
                format!("`{}` is {value}; it must be {range}", at.join(".")),
            )
            .at(ls.span(&at)),
        );
    }
}

/// `[A-Za-z_][A-Za-z0-9_-]*`
fn is_node_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}
