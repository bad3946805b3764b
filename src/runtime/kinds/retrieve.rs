//! `kind: retrieve`: query a retriever with a rendered template; `output` is the list
//! of documents (`id`, `content`, `metadata`), in rank order.
use super::{Compile, KindTypes, NodeBody, Step, TemplateChecks};
use crate::diag::{Code, Diagnostic};
use crate::jinja::suggest;
use crate::runtime::expr::{render, Scope};
use crate::runtime::nodes::{documents_out, Failure, NodeOut, StepError};
use crate::runtime::program::ProgramError;
use crate::runtime::program_error::NodeFault;
use crate::spec::types::RetrieveNode;
use crate::spec::LoadedSpec;
use futures::future::BoxFuture;
use minijinja::Template;

/// The retriever must be declared.
pub(super) fn check_refs(
    ls: &LoadedSpec,
    name: &str,
    node: &RetrieveNode,
    diags: &mut Vec<Diagnostic>,
) {
    let spec = &ls.spec;
    let retriever = &node.retriever;
    if !spec.retrievers.contains_key(retriever) {
        diags.push(
            Diagnostic::new(
                Code::UnknownRetriever,
                format!("node `{name}` uses retriever `{retriever}`, which is not declared"),
            )
            .at(ls.span(&["nodes", name, "retriever"]))
            .help(suggest(retriever, spec.retrievers.keys())),
        );
    }
}

/// The query template reads the state; `output` is a list of documents.
pub(super) fn check_templates<'n, C: TemplateChecks>(
    cx: &mut C,
    name: &str,
    node: &'n RetrieveNode,
) -> KindTypes<'n, C::Ty> {
    let base = cx.scope(&[]);
    cx.template(&base, &node.query, &["nodes", name, "query"]);
    KindTypes {
        output: Some(cx.documents()),
        inputs: Vec::new(),
    }
}

pub(super) fn templates(
    node: &RetrieveNode,
    add: &mut dyn FnMut(&'static str, String) -> Result<(), ProgramError>,
) -> Result<(), ProgramError> {
    add("query", node.query.clone())
}

pub(super) fn compile(
    cx: &Compile<'_>,
    node: &RetrieveNode,
) -> Result<Box<dyn NodeBody>, ProgramError> {
    let retriever = &node.retriever;
    let r = cx
        .spec
        .retrievers
        .get(retriever)
        .ok_or_else(|| cx.fault(NodeFault::UnknownRetriever(retriever.clone())))?;
    Ok(Box::new(Retrieve {
        retriever: retriever.clone(),
        query: cx.template("query")?,
        top_k: node.top_k.unwrap_or(r.top_k()) as usize,
    }))
}

/// A compiled `retrieve` node.
#[derive(Debug)]
struct Retrieve {
    /// Retriever name.
    retriever: String,
    /// Query template.
    query: Template<'static, 'static>,
    /// Documents per query.
    top_k: usize,
}

impl NodeBody for Retrieve {
    fn exec<'a>(&'a self, step: Step<'a>) -> BoxFuture<'a, Result<NodeOut, Failure>> {
        Box::pin(async move {
            let plain = |e: StepError| (e, None);
            let q = render(&self.query, &Scope::make(step.mirror, Vec::new()))
                .map_err(|e| plain(StepError::Query(e)))?;
            let r = step
                .res
                .retrievers
                .get(&self.retriever)
                .ok_or_else(|| plain(StepError::RetrieverNotOpen(self.retriever.clone())))?;
            let (docs, usage) = crate::retrieval::usage::counted(r.search(&q, self.top_k)).await;
            let stats = (!usage.is_empty()).then(|| crate::runtime::trace::LlmStats {
                retrieval: usage,
                ..Default::default()
            });
            let docs = docs.map_err(|e| {
                (
                    StepError::Retriever {
                        retriever: self.retriever.clone(),
                        message: e,
                    },
                    stats,
                )
            })?;
            let mut out = documents_out(docs, step.node);
            out.llm = stats;
            Ok(out)
        })
    }
}
