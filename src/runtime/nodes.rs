//! Running one node: retrieval, tool search, LLM calls (with fan-out, retries and
//! schema repair turns), and the names `update` values can read.
use super::expr::{to_jinja, to_json, Compiled, ExprError, Mirror, Names, Scope};
use super::kinds::Step;
use super::program::{LlmProg, NodeProg, Program};
use super::resources::Resources;
use super::trace::{LlmStats, RetrievedDoc};
use crate::providers::{LlmRequest, LlmResponse, Message, Provider, ProviderError};
use crate::retrieval::SearchError;
use futures::future::BoxFuture;
use minijinja::value::Value as JValue;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Instant;

pub(super) struct NodeOut {
    /// The node's output as JSON (`None` for `update` nodes).
    pub(super) output: Option<Value>,
    /// The output as a template value, when an `update` expression needs it.
    pub(super) output_jinja: Option<JValue>,
    /// The evaluated `inputs` of an `llm` node (template values and JSON).
    pub(super) inputs: Inputs,
    pub(super) inputs_json: Map<String, Value>,
    pub(super) llm: Option<LlmStats>,
    /// The documents a `retrieve` or `tool` node returned, in rank order, or the
    /// documents a `map` node fanned out over with their outputs (for its step
    /// record: `documents` or `items`).
    pub(super) documents: Option<Vec<RetrievedDoc>>,
}

impl NodeOut {
    pub(super) fn plain(output: Option<Value>, node: &NodeProg) -> NodeOut {
        let output_jinja = if node.output_in_exprs {
            output.as_ref().map(to_jinja)
        } else {
            None
        };
        NodeOut {
            output,
            output_jinja,
            inputs: Vec::new(),
            inputs_json: Map::new(),
            llm: None,
            documents: None,
        }
    }
}

/// Bare-name lookups of `update` values: `output`, the inputs, then the state.
pub(super) struct UpdateNames<'a> {
    pub(super) out: &'a NodeOut,
    pub(super) state: &'a Value,
}

impl Names for UpdateNames<'_> {
    fn json(&self, name: &str) -> Option<Value> {
        if name == "output" {
            if let Some(o) = &self.out.output {
                return Some(o.clone());
            }
        }
        if let Some(v) = self.out.inputs_json.get(name) {
            return Some(v.clone());
        }
        self.state.get(name).cloned()
    }
}

/// Bare-name lookups of `inputs`: `item`/`index` of a map call, then the state.
pub(super) struct InputNames<'a> {
    item: Option<(usize, &'a Value)>,
    state: &'a Value,
}

impl Names for InputNames<'_> {
    fn json(&self, name: &str) -> Option<Value> {
        match (name, self.item) {
            ("item", Some((_, v))) => Some(v.clone()),
            ("index", Some((i, _))) => Some(Value::from(i)),
            _ => self.state.get(name).cloned(),
        }
    }
}

pub(super) fn name(n: &'static str) -> Arc<str> {
    thread_local! {
        static NAMES: [Arc<str>; 3] = [Arc::from("output"), Arc::from("item"), Arc::from("index")];
    }
    NAMES.with(|a| match n {
        "output" => Arc::clone(&a[0]),
        "item" => Arc::clone(&a[1]),
        "index" => Arc::clone(&a[2]),
        other => Arc::from(other),
    })
}

/// Why a node's execution failed. The interpreter shows it as ``node `N`: {error}``
/// (the messages below are the text after that prefix).
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The `query` template of a retrieve or tool node failed to render.
    #[error("query template: {0}")]
    Query(ExprError),
    /// The node's retriever was not opened.
    #[error("retriever `{0}` is not open")]
    RetrieverNotOpen(String),
    /// The retriever's search failed.
    #[error("retriever `{retriever}`: {message}")]
    Retriever {
        /// Retriever name.
        retriever: String,
        /// Why the search failed.
        message: SearchError,
    },
    /// The node's tool was not opened.
    #[error("tool `{0}` is not open")]
    ToolNotOpen(String),
    /// The tool's search failed; the message starts with ``tool `T`: ``.
    #[error("{0}")]
    Tool(String),
    /// The node's model has no provider.
    #[error("model `{0}` has no provider")]
    NoProvider(String),
    /// A map's `over` is not a list (`found`: what it is).
    #[error("over `{over}` is not a list: {found}")]
    NotAList {
        /// The `over` expression.
        over: String,
        /// What it evaluated to, or why it cannot be iterated.
        found: String,
    },
    /// A map's `over` expression failed.
    #[error("over `{over}`: {message}")]
    Over {
        /// The `over` expression.
        over: String,
        /// The evaluation's error.
        message: ExprError,
    },
    /// An `inputs` value of an llm or map call failed.
    #[error("input `{input}`: {message}")]
    Input {
        /// Input name.
        input: String,
        /// The evaluation's error.
        message: ExprError,
    },
    /// The system or user prompt failed to render.
    #[error("{part} prompt: {message}")]
    Prompt {
        /// `system` or `user`.
        part: &'static str,
        /// The template's error.
        message: ExprError,
    },
    /// One item of a map failed (its siblings were cancelled).
    #[error("item {index}: {error}")]
    Item {
        /// 0-based item index.
        index: usize,
        /// What failed.
        error: Box<StepError>,
    },
    /// The provider failed (after its retries).
    #[error("model `{model}`: provider failed: {error}")]
    Provider {
        /// Model name.
        model: String,
        /// The provider's error.
        error: ProviderError,
    },
    /// A text call returned structured output.
    #[error("model `{model}`: expected text output, the model returned {found}")]
    NotText {
        /// Model name.
        model: String,
        /// The JSON type returned.
        found: &'static str,
    },
    /// Structured output still violates the schema after every repair turn.
    #[error("model `{model}`: structured output does not match the schema after {repairs} repair turn(s): {violation} (output: {output})")]
    SchemaMismatch {
        /// Model name.
        model: String,
        /// Repair turns made.
        repairs: u32,
        /// The last violation.
        violation: String,
        /// The last output, cut to 200 characters.
        output: String,
    },
    /// A repair turn's call failed.
    #[error("model `{model}`: structured output does not match the schema ({violation}); repair turn {repair} failed: provider failed: {error}")]
    RepairFailed {
        /// Model name.
        model: String,
        /// The violation the repair turn was to fix.
        violation: String,
        /// 1-based repair turn.
        repair: u32,
        /// The provider's error.
        error: ProviderError,
    },
}

impl StepError {
    /// Item `index` of a map failed with `error`.
    pub(super) fn item(index: usize, error: StepError) -> StepError {
        StepError::Item {
            index,
            error: Box::new(error),
        }
    }
}

/// A failed step: the error, and the LLM usage of the calls it made.
pub(super) type Failure = (StepError, Option<LlmStats>);

/// The LLM usage of one step, added to as each call starts and ends. It lives
/// outside the step's future, so the usage of the calls that finished is kept when
/// the step is cut short: a `map` item that failed (its siblings dropped), an
/// interrupted run. A call counts in `calls` when it starts (a call dropped in flight
/// is still a request made); its wall time counts when it ends or is dropped; its
/// tokens and cost when the provider reports them.
#[derive(Debug, Default)]
pub(super) struct Meter(std::sync::Mutex<LlmStats>);

impl Meter {
    fn add(&self, f: impl FnOnce(&mut LlmStats)) {
        let mut s = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut s);
    }

    /// The usage so far.
    pub(super) fn get(&self) -> LlmStats {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The step-record view of retrieved documents (id and source), in rank order.
fn retrieved(docs: &[crate::retrieval::Document]) -> Vec<RetrievedDoc> {
    docs.iter()
        .map(|d| RetrievedDoc {
            id: d.id.clone(),
            source: d.source().to_string(),
            output: None,
        })
        .collect()
}

/// The documents a `map` step fanned out over, with each item's output, when every
/// item is a document (an object with a string `id`; source as
/// [`crate::retrieval::source_of`]); `None` otherwise.
pub(super) fn mapped_documents(items: &[Value], outs: &[Value]) -> Option<Vec<RetrievedDoc>> {
    items
        .iter()
        .zip(outs)
        .map(|(item, out)| {
            let id = item.get("id")?.as_str()?;
            Some(RetrievedDoc {
                id: id.to_string(),
                source: crate::retrieval::source_of(item)?,
                output: Some(out.clone()),
            })
        })
        .collect()
}

/// A retrieve or tool node's output: the documents as JSON, their record view.
pub(super) fn documents_out(docs: Vec<crate::retrieval::Document>, node: &NodeProg) -> NodeOut {
    let refs = retrieved(&docs);
    let mut o = NodeOut::plain(Some(documents_json(docs)), node);
    o.documents = Some(refs);
    o
}

fn documents_json(docs: Vec<crate::retrieval::Document>) -> Value {
    Value::Array(
        docs.into_iter()
            .map(|d| {
                let mut m = Map::with_capacity(3);
                m.insert("id".into(), Value::String(d.id));
                m.insert("content".into(), Value::String(d.content));
                m.insert("metadata".into(), Value::Object(d.metadata));
                Value::Object(m)
            })
            .collect(),
    )
}

/// Runs one node: its kind's [`NodeBody::exec`](super::kinds::NodeBody::exec).
pub(super) async fn exec(
    _program: &Program,
    node: &NodeProg,
    res: &Resources,
    mirror: &Arc<Mirror>,
    state: &Value,
    meter: &Meter,
) -> Result<NodeOut, Failure> {
    node.body
        .exec(Step {
            node,
            res,
            mirror,
            state,
            meter,
        })
        .await
}

pub(super) fn provider<'r>(
    res: &'r Resources,
    call: &LlmProg,
) -> Result<&'r Arc<dyn Provider>, StepError> {
    res.providers
        .get(&call.model)
        .ok_or_else(|| StepError::NoProvider(call.model.clone()))
}

pub(super) type Inputs = Vec<(Arc<str>, JValue)>;

/// Evaluates the inputs and renders the prompts of one call. Prompts are rendered
/// for every provider, even those that answer from the task (offline) or from
/// fixtures (scripted), so an offline run catches the template faults a real model's
/// run would hit.
pub(super) fn request(
    node: &NodeProg,
    call: &LlmProg,
    mirror: &Arc<Mirror>,
    state: &Value,
    item: Option<(usize, (JValue, Value))>,
) -> Result<(LlmRequest, Inputs), StepError> {
    let mut extra: Inputs = Vec::with_capacity(call.inputs.len() + 2);
    if let Some((i, (v, _))) = &item {
        extra.push((name("item"), v.clone()));
        extra.push((name("index"), JValue::from(*i)));
    }
    let base = Scope::make(mirror, extra.clone());
    let names = InputNames {
        item: item.as_ref().map(|(i, (_, j))| (*i, j)),
        state,
    };
    let mut inputs_json = Map::new();
    let mut inputs: Inputs = Vec::with_capacity(call.inputs.len());
    for (input, c) in &call.inputs {
        let v = c.eval_jinja(&base).map_err(|message| StepError::Input {
            input: input.to_string(),
            message,
        })?;
        let j = match c {
            Compiled::Name(n) => names.json(n).ok_or_else(|| StepError::Input {
                input: input.to_string(),
                message: ExprError::Undefined(format!("`{n}` is not defined")),
            })?,
            _ => to_json(&v).map_err(|message| StepError::Input {
                input: input.to_string(),
                message,
            })?,
        };
        inputs_json.insert(input.to_string(), j);
        inputs.push((Arc::clone(input), v));
    }
    drop(base);
    let mut messages = Vec::with_capacity(2);
    extra.extend(inputs.iter().cloned());
    let scope = Scope::make(mirror, extra);
    if let Some(t) = &call.system {
        messages.push(Message {
            role: "system".into(),
            content: t.render(&scope).map_err(|message| StepError::Prompt {
                part: "system",
                message,
            })?,
        });
    }
    messages.push(Message {
        role: "user".into(),
        content: call
            .user
            .render(&scope)
            .map_err(|message| StepError::Prompt {
                part: "user",
                message,
            })?,
    });
    let req = LlmRequest {
        node: node.name.clone(),
        item: item.map(|(i, _)| i),
        model_name: call.model.clone(),
        model: Arc::clone(&call.model_spec),
        task: call.task.clone(),
        inputs: inputs_json,
        messages,
        schema: call.schema.as_ref().map(|(s, _)| Arc::clone(s)),
    };
    Ok((req, inputs))
}

/// Awaits one provider call (retries and per-attempt timeouts happen inside the
/// provider, see [`crate::providers::registry::wrap`]) and adds it to `meter`: the
/// call when it starts, its wall time when it ends or is dropped, its usage when it
/// reports one.
async fn timed(
    fut: BoxFuture<'_, Result<LlmResponse, ProviderError>>,
    meter: &Meter,
) -> Result<LlmResponse, ProviderError> {
    /// Adds the wall time of the call on drop, so a call dropped in flight counts it.
    struct Clock<'m> {
        meter: &'m Meter,
        started: Instant,
    }
    impl Drop for Clock<'_> {
        fn drop(&mut self) {
            let ms = self.started.elapsed().as_secs_f64() * 1000.0;
            self.meter.add(|s| s.latency_ms += ms);
        }
    }
    meter.add(|s| s.calls += 1);
    let clock = Clock {
        meter,
        started: Instant::now(),
    };
    let r = fut.await;
    drop(clock);
    meter.add(|stats| {
        // A failed reply the server answered (rejected, cut short, unusable) was billed
        // like any other; a cached one (replayed) counts its recorded cost, which is not
        // spent again.
        let answered = match &r {
            Ok(resp) => LlmStats::answered(
                resp.usage,
                resp.cached,
                resp.usage_estimated,
                resp.limit_wait_ms,
            ),
            Err(e) => match e.billed() {
                Some(b) => LlmStats::answered(b.usage, b.cached, b.usage_estimated, 0.0),
                None => return,
            },
        };
        *stats += answered;
    });
    r
}

/// Awaits the first call and runs the repair turns of structured output: an output
/// that violates the schema, or a reply the provider could not read as the asked
/// shape ([`ProviderError::InvalidOutput`]: prose instead of the forced tool call,
/// arguments that are not JSON, an unknown function), is shown back to the model
/// with what is wrong, at most `repair_attempts` times. The retries of a `map`
/// item's calls are reported as that item's ([`crate::retries::in_item`]).
pub(super) async fn complete(
    provider: &dyn Provider,
    call: &LlmProg,
    first_req: &LlmRequest,
    first: BoxFuture<'_, Result<LlmResponse, ProviderError>>,
    meter: &Meter,
) -> Result<Value, StepError> {
    let turns = complete_turns(provider, call, first_req, first, meter);
    crate::retries::in_item(first_req.item, turns).await
}

async fn complete_turns(
    provider: &dyn Provider,
    call: &LlmProg,
    first_req: &LlmRequest,
    first: BoxFuture<'_, Result<LlmResponse, ProviderError>>,
    meter: &Meter,
) -> Result<Value, StepError> {
    let emitted = crate::tokens::emitted();
    let mut turn = timed(first, meter).await;
    let Some((_, check)) = &call.schema else {
        let resp = turn.map_err(|e| provider_error(call, e))?;
        return match resp.output {
            Value::String(s) => {
                // An answer that did not stream (a cache hit, a cassette, a provider
                // that does not stream) reaches a listener whole, as one token event.
                if first_req.item.is_none() && crate::tokens::emitted() == emitted {
                    crate::tokens::emit(&s);
                }
                Ok(Value::String(s))
            }
            other => Err(StepError::NotText {
                model: call.model.clone(),
                found: super::state::kind(&other),
            }),
        };
    };
    let mut repairs = 0u32;
    let mut repair: Option<LlmRequest> = None;
    loop {
        let (shown, violation, output) = match turn {
            Ok(resp) => {
                let mut output = resp.output;
                // Lenient: a JSON document sent as text is parsed.
                if let Value::String(s) = &output {
                    if let Ok(v) = serde_json::from_str::<Value>(s.trim()) {
                        output = v;
                    }
                }
                let violation = match check.check(&output) {
                    Ok(()) => {
                        // `7.0` where the schema says integer is returned as `7`.
                        check.normalize(&mut output);
                        return Ok(output);
                    }
                    Err(v) => v.to_string(),
                };
                let shown = match &output {
                    Value::String(s) => s.clone(),
                    v => v.to_string(),
                };
                (shown, violation, output.to_string())
            }
            Err(ProviderError::InvalidOutput { reply, reason, .. }) => {
                let out = Value::String(reply.clone()).to_string();
                (reply, reason, out)
            }
            // Repair turns turn other failures into their own message below.
            Err(e) => return Err(provider_error(call, e)),
        };
        if repairs >= call.repairs {
            return Err(StepError::SchemaMismatch {
                model: call.model.clone(),
                repairs,
                violation,
                output: truncate(&output, 200),
            });
        }
        repairs += 1;
        let req = repair.get_or_insert_with(|| first_req.clone());
        if !shown.is_empty() {
            // A huge rejected reply is not sent back in full: its start shows the fault.
            req.messages.push(Message {
                role: "assistant".into(),
                content: truncate(&shown, REPAIR_REPLY_CHARS),
            });
        }
        req.messages.push(Message {
            role: "user".into(),
            content: format!(
                "Your answer does not match the required JSON Schema: {violation}. Reply again with only a corrected answer that matches the schema."
            ),
        });
        let fut = provider.call(req);
        turn = match timed(fut, meter).await {
            Err(e @ ProviderError::InvalidOutput { .. }) => Err(e),
            Err(e) => {
                return Err(StepError::RepairFailed {
                    model: call.model.clone(),
                    violation,
                    repair: repairs,
                    error: e,
                })
            }
            ok => ok,
        };
    }
}

/// The longest rejected reply shown back in a repair turn, in characters (longer
/// ones are cut, with `...`).
const REPAIR_REPLY_CHARS: usize = 4000;

fn provider_error(call: &LlmProg, e: ProviderError) -> StepError {
    StepError::Provider {
        model: call.model.clone(),
        error: e,
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}
