//! `kind: map`: the `llm` call once per element of `over`, up to `concurrency` at a
//! time; `output` is the list of results in input order. A failed item ends the node
//! and cancels its siblings. The call's checks and compile step are `llm.rs`'s.
use super::{llm, Compile, NodeBody, Step};
use crate::diag::{Code, Diagnostic};
use crate::providers::{LlmResponse, Provider, ProviderError};
use crate::runtime::expr::{describe, to_json, Compiled, Expr, Scope};
use crate::runtime::nodes::{
    complete, mapped_documents, provider, request, Failure, NodeOut, StepError,
};
use crate::runtime::program::{LlmProg, ProgramError};
use crate::runtime::program_error::NodeFault;
use crate::spec::types::LlmNode;
use crate::spec::LoadedSpec;
use futures::future::BoxFuture;
use futures::StreamExt;
use minijinja::value::Value as JValue;
use serde_json::Value;

/// `over` is required; then the call's checks.
pub(super) fn check_refs(ls: &LoadedSpec, name: &str, call: &LlmNode, diags: &mut Vec<Diagnostic>) {
    if call.over.is_none() {
        diags.push(
            Diagnostic::new(
                Code::MissingKey,
                format!("map node `{name}` is missing required key `over`"),
            )
            .at(ls.key_span(&["nodes", name])),
        );
    }
    llm::check_call(ls, name, call, diags);
}

pub(super) fn compile(cx: &Compile<'_>, l: &LlmNode) -> Result<Box<dyn NodeBody>, ProgramError> {
    let over = l
        .over
        .as_deref()
        .ok_or_else(|| cx.fault(NodeFault::NoOver))?;
    Ok(Box::new(Map {
        call: llm::call(cx, l)?,
        over: cx
            .engine
            .expr(over)
            .map_err(|e| cx.fault(NodeFault::Over(e)))?,
        over_name: match cx.engine.value(&Value::String(over.to_string())) {
            Ok(Compiled::Name(n)) => Some(n.to_string()),
            _ => None,
        },
        concurrency: l.concurrency.unwrap_or(4).max(1) as usize,
    }))
}

/// A compiled `map` node.
#[derive(Debug)]
struct Map {
    /// The call.
    call: LlmProg,
    /// The list expression.
    over: Expr,
    /// `over` when it is a bare name (read directly from the state).
    over_name: Option<String>,
    /// Most calls in flight.
    concurrency: usize,
}

impl NodeBody for Map {
    fn calls_llm(&self) -> bool {
        true
    }

    fn exec<'a>(&'a self, step: Step<'a>) -> BoxFuture<'a, Result<NodeOut, Failure>> {
        Box::pin(self.run(step))
    }
}

impl Map {
    async fn run<'a>(&'a self, step: Step<'a>) -> Result<NodeOut, Failure> {
        let Step {
            node,
            res,
            mirror,
            state,
            meter,
        } = step;
        let Map {
            call,
            over,
            over_name,
            concurrency,
        } = self;
        let plain = |e: StepError| (e, None);
        let provider: &dyn Provider = &**provider(res, call).map_err(plain)?;
        let not_list = |found: String| {
            plain(StepError::NotAList {
                over: over.source.clone(),
                found,
            })
        };
        // Items as template values and as JSON.
        let items: Vec<(JValue, Value)> = match over_name
            .as_deref()
            .and_then(|n| Some((state.get(n)?, mirror.get(n)?)))
        {
            Some((Value::Array(json), jinja)) => {
                let j: Vec<JValue> = jinja
                    .try_iter()
                    .map_err(|e| not_list(describe(&e)))?
                    .collect();
                j.into_iter().zip(json.iter().cloned()).collect()
            }
            Some((other, _)) => {
                return Err(not_list(format!(
                    "it is {}",
                    crate::runtime::state::kind(other)
                )))
            }
            None => {
                let list = over
                    .eval(&Scope::make(mirror, Vec::new()))
                    .map_err(|message| {
                        plain(StepError::Over {
                            over: over.source.clone(),
                            message,
                        })
                    })?;
                // Strings and maps are iterable in templates, but fanning out over
                // characters or keys is never what a spec means.
                if !matches!(
                    list.kind(),
                    minijinja::value::ValueKind::Seq | minijinja::value::ValueKind::Iterable
                ) {
                    return Err(not_list(format!("it is {}", list.kind())));
                }
                let mut out = Vec::new();
                for v in list.try_iter().map_err(|e| not_list(describe(&e)))? {
                    let j = to_json(&v).map_err(|e| not_list(e.to_string()))?;
                    out.push((v, j));
                }
                out
            }
        };
        let item_json: Vec<Value> = items.iter().map(|(_, j)| j.clone()).collect();
        let mut reqs = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            reqs.push(
                request(node, call, mirror, state, Some((i, item)))
                    .map_err(|e| plain(StepError::item(i, e)))?
                    .0,
            );
        }
        // First calls are created in item order before any runs (see scripted).
        let firsts: Vec<BoxFuture<'_, Result<LlmResponse, ProviderError>>> =
            reqs.iter().map(|r| provider.call(r)).collect();
        // Boxed one by one (not a closure in `map`): the run's future must stay
        // `Send` for every lifetime so callers can `tokio::spawn` runs (rustc
        // cannot prove it through a closure returning an async block).
        let n = reqs.len();
        let mut tasks: Vec<BoxFuture<'_, (usize, Result<Value, StepError>)>> =
            Vec::with_capacity(n);
        for (i, (req, first)) in reqs.iter().zip(firsts).enumerate() {
            tasks.push(Box::pin(async move {
                (i, complete(provider, call, req, first, meter).await)
            }));
        }
        // At most `concurrency` items in flight, results taken as they end. The
        // first failure ends the node: the stream is dropped with it, and so are
        // the siblings' calls in flight (their HTTP requests cancelled, their
        // retries never made) and the items not started yet. The meter keeps the
        // usage of every call that finished.
        let mut running = futures::stream::iter(tasks).buffer_unordered((*concurrency).max(1));
        let mut outs: Vec<Option<Value>> = vec![None; n];
        while let Some((i, r)) = running.next().await {
            match r {
                Ok(v) => outs[i] = Some(v),
                Err(e) => {
                    drop(running);
                    return Err((StepError::item(i, e), Some(meter.get())));
                }
            }
        }
        drop(running);
        let outs: Vec<Value> = outs.into_iter().map(Option::unwrap_or_default).collect();
        let documents = mapped_documents(&item_json, &outs);
        let mut o = NodeOut::plain(Some(Value::Array(outs)), node);
        o.llm = Some(meter.get());
        o.documents = documents;
        Ok(o)
    }
}
