//! `kind: tool`: search a tool (web search or its offline stand-in) with a rendered
//! template; `output` is the list of documents, in rank order.
use super::{Compile, KindTypes, NodeBody, Step, TemplateChecks};
use crate::diag::{Code, Diagnostic};
use crate::jinja::suggest;
use crate::runtime::expr::{render, Scope};
use crate::runtime::nodes::{documents_out, Failure, NodeOut, StepError};
use crate::runtime::program::ProgramError;
use crate::runtime::program_error::NodeFault;
use crate::spec::types::ToolNode;
use crate::spec::LoadedSpec;
use futures::future::BoxFuture;
use minijinja::Template;

/// The tool must be declared.
pub(super) fn check_refs(
    ls: &LoadedSpec,
    name: &str,
    node: &ToolNode,
    diags: &mut Vec<Diagnostic>,
) {
    let spec = &ls.spec;
    let tool = &node.tool;
    if !spec.tools.contains_key(tool) {
        diags.push(
            Diagnostic::new(
                Code::UnknownTool,
                format!("node `{name}` uses tool `{tool}`, which is not declared"),
            )
            .at(ls.span(&["nodes", name, "tool"]))
            .help(suggest(tool, spec.tools.keys())),
        );
    }
}

/// The query template reads the state; `output` is a list of documents.
pub(super) fn check_templates<'n, C: TemplateChecks>(
    cx: &mut C,
    name: &str,
    node: &'n ToolNode,
) -> KindTypes<'n, C::Ty> {
    let base = cx.scope(&[]);
    cx.template(&base, &node.query, &["nodes", name, "query"]);
    KindTypes {
        output: Some(cx.documents()),
        inputs: Vec::new(),
    }
}

pub(super) fn templates(
    node: &ToolNode,
    add: &mut dyn FnMut(&'static str, String) -> Result<(), ProgramError>,
) -> Result<(), ProgramError> {
    add("query", node.query.clone())
}

pub(super) fn compile(
    cx: &Compile<'_>,
    node: &ToolNode,
) -> Result<Box<dyn NodeBody>, ProgramError> {
    let tool = &node.tool;
    let query = cx.template("query")?;
    let top_k = match cx.spec.tools.get(tool) {
        Some(t) => t.top_k() as usize,
        None => return Err(cx.fault(NodeFault::UnknownTool(tool.clone()))),
    };
    Ok(Box::new(Tool {
        tool: tool.clone(),
        query,
        top_k,
    }))
}

/// A compiled `tool` node.
#[derive(Debug)]
struct Tool {
    /// Tool name.
    tool: String,
    /// Query template.
    query: Template<'static, 'static>,
    /// Results per query (the tool's `top_k`).
    top_k: usize,
}

impl NodeBody for Tool {
    fn exec<'a>(&'a self, step: Step<'a>) -> BoxFuture<'a, Result<NodeOut, Failure>> {
        Box::pin(async move {
            let plain = |e: StepError| (e, None);
            let tool = &self.tool;
            let q = render(&self.query, &Scope::make(step.mirror, Vec::new()))
                .map_err(|e| plain(StepError::Query(e)))?;
            let r = step
                .res
                .tools
                .get(tool)
                .ok_or_else(|| plain(StepError::ToolNotOpen(tool.clone())))?;
            let docs = r.search(&q, self.top_k).await.map_err(|e| {
                // Web-search tools name themselves already.
                let own = format!("tool `{tool}`: ");
                let e = e.to_string();
                plain(StepError::Tool(if e.starts_with(&own) {
                    e
                } else {
                    format!("{own}{e}")
                }))
            })?;
            Ok(documents_out(docs, step.node))
        })
    }
}
