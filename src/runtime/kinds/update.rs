//! `kind: update`: a pure state transform. The node has no output and no fields of
//! its own to check: its `update` expressions (checked and compiled for every kind)
//! are all it does.
use super::{Compile, NodeBody, Step};
use crate::runtime::nodes::{Failure, NodeOut};
use crate::runtime::program::ProgramError;
use crate::spec::types::UpdateNode;
use futures::future::BoxFuture;

pub(super) fn compile(
    _cx: &Compile<'_>,
    _node: &UpdateNode,
) -> Result<Box<dyn NodeBody>, ProgramError> {
    Ok(Box::new(Update))
}

/// A compiled `update` node.
#[derive(Debug)]
struct Update;

impl NodeBody for Update {
    fn exec<'a>(&'a self, step: Step<'a>) -> BoxFuture<'a, Result<NodeOut, Failure>> {
        Box::pin(async move { Ok(NodeOut::plain(None, step.node)) })
    }
}
