//! The interpreter: runs a [`Program`] from its entry node to END, a limit, or an
//! error.
//!
//! One step: check the bounds, run the node, evaluate every `update` value over the
//! state as it was before the step (plus `output` and the node's `inputs`), merge the
//! values through the reducers, validate the whole state against its schema, then
//! evaluate the outgoing edge (static, or the first arm whose `when` is true, else the
//! `else` arm).
//!
//! Bounds, exactly:
//! - `limits.max_steps = N`: at most N node executions. Before executing a node the
//!   runtime checks `steps_done == N`; if so the run stops with status `limit` and the
//!   node is not run. A run that reaches END after exactly N executions is not limited.
//! - `max_visits: N` on a node: the node runs at most N times. Its (N+1)-th entry stops
//!   the run with status `limit`, naming the node, before running it.
//! - Neither bound counts END.
use super::eval::{render, to_jinja, to_json, Compiled, Mirror, Names, Scope};
use super::program::{Body, EdgeProg, LlmProg, NodeProg, Program};
use super::resources::Resources;
use super::state::{initial_state, reduce};
use super::status::Status;
use super::trace::{unix_ms, Arm, LlmStats, Observer, Route, StepRecord};
use super::{RunInput, RunResult, RunUsage};
use crate::providers::{LlmRequest, LlmResponse, Message, Provider, ProviderError};
use futures::future::BoxFuture;
use futures::StreamExt;
use minijinja::value::Value as JValue;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Instant;

struct NodeOut {
    /// The node's output as JSON (`None` for `update` nodes).
    output: Option<Value>,
    /// The output as a template value, when an `update` expression needs it.
    output_jinja: Option<JValue>,
    /// The evaluated `inputs` of an `llm` node (template values and JSON).
    inputs: Inputs,
    inputs_json: Map<String, Value>,
    llm: Option<LlmStats>,
}

impl NodeOut {
    fn plain(output: Option<Value>, node: &NodeProg) -> NodeOut {
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
        }
    }
}

/// Bare-name lookups of `update` values: `output`, the inputs, then the state.
struct UpdateNames<'a> {
    out: &'a NodeOut,
    state: &'a Value,
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
struct InputNames<'a> {
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

fn name(n: &'static str) -> Arc<str> {
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

fn mirror_of(state: &Map<String, Value>) -> Mirror {
    state
        .iter()
        .map(|(k, v)| (k.clone(), to_jinja(v)))
        .collect()
}

/// Runs a program once. Never panics on user input: every failure becomes a
/// [`Status::Failed`] result whose `error` names the node.
pub async fn run(
    program: &Program,
    res: &Resources,
    input: &RunInput,
    obs: &mut dyn Observer,
) -> RunResult {
    let spec = &program.loaded.spec;
    let mut state = Value::Object(initial_state(
        &spec.state.initial,
        input.question.as_deref(),
        &input.sets,
    ));
    let mut result = RunResult::new(program.variant());
    if let Err(v) = program.state_check.check(&state) {
        result.fail(format!(
            "initial state does not match the state schema: {v}"
        ));
        return finish(program, result, state, None, obs);
    }
    let mut mirror = Arc::new(state.as_object().map(mirror_of).unwrap_or_default());
    let mut visits = vec![0u32; program.nodes.len()];
    let mut steps = 0u32;
    let mut current = Some(program.entry);
    let mut last: Option<usize> = None;
    let tracing = obs.enabled();
    while let Some(ix) = current {
        let node = &program.nodes[ix];
        if steps >= program.max_steps {
            result.status = Status::Limit;
            result.error = Some(format!(
                "step limit reached: limits.max_steps = {} node executions done, node `{}` would be the next",
                program.max_steps, node.name
            ));
            return finish(program, result, state, last, obs);
        }
        if let Some(mv) = node.max_visits {
            if visits[ix] >= mv {
                result.status = Status::Limit;
                result.error = Some(format!(
                    "node `{}` reached its visit limit (max_visits = {mv}); entry {} refused",
                    node.name,
                    mv + 1
                ));
                return finish(program, result, state, last, obs);
            }
        }
        steps += 1;
        visits[ix] += 1;
        if ix == program.entry {
            result.iterations += 1;
        }
        result.path.push(node.name.clone());
        let started = Instant::now();
        let start_ms = if tracing { unix_ms() } else { 0 };
        let mut record = |delta: Map<String, Value>,
                          route: Option<Route>,
                          llm: Option<LlmStats>,
                          error: Option<String>| {
            if tracing {
                obs.step(&StepRecord {
                    step: steps,
                    node: node.name.clone(),
                    kind: node.kind,
                    variant: program.variant().map(str::to_string),
                    start: start_ms,
                    duration_us: started.elapsed().as_micros() as u64,
                    delta,
                    route,
                    llm,
                    error,
                });
            }
        };
        let out = match exec(program, node, res, &mirror, &state).await {
            Ok(o) => o,
            Err((e, llm)) => {
                let msg = format!("node `{}`: {e}", node.name);
                if let Some(l) = &llm {
                    result.usage.add_stats(l);
                }
                record(Map::new(), None, llm, Some(msg.clone()));
                result.fail(msg);
                return finish(program, result, state, last, obs);
            }
        };
        if let Some(l) = &out.llm {
            result.usage.add_stats(l);
        }
        // Every update value sees the state before the step.
        let mut writes = Vec::with_capacity(node.update.len());
        {
            let mut cached: Option<JValue> = None;
            let mut scope = || {
                cached
                    .get_or_insert_with(|| {
                        let mut extra = out.inputs.clone();
                        if let Some(o) = &out.output_jinja {
                            extra.push((name("output"), o.clone()));
                        }
                        Scope::make(&mirror, extra)
                    })
                    .clone()
            };
            let names = UpdateNames {
                out: &out,
                state: &state,
            };
            for (field, reducer, value) in &node.update {
                match value.eval_json(&mut scope, &names) {
                    Ok(v) => writes.push((field, *reducer, v)),
                    Err(e) => {
                        let msg = format!("node `{}`: update of `{field}`: {e}", node.name);
                        record(Map::new(), None, out.llm, Some(msg.clone()));
                        result.fail(msg);
                        return finish(program, result, state, last, obs);
                    }
                }
            }
        }
        let mut delta = Map::new();
        let fields = Arc::make_mut(&mut mirror);
        if let Value::Object(obj) = &mut state {
            for (field, reducer, v) in writes {
                match reduce(reducer, obj.get(field), v) {
                    Ok(new) => {
                        fields.insert(field.clone(), to_jinja(&new));
                        if tracing {
                            delta.insert(field.clone(), new.clone());
                        }
                        obj.insert(field.clone(), new);
                    }
                    Err(e) => {
                        let msg = format!("node `{}`: update of `{field}`: {e}", node.name);
                        record(delta, None, out.llm, Some(msg.clone()));
                        result.fail(msg);
                        return finish(program, result, state, last, obs);
                    }
                }
            }
        }
        if let Err(v) = program.state_check.check(&state) {
            let field = v
                .field()
                .map(|f| format!("field `{f}`"))
                .unwrap_or_else(|| "the state".into());
            let msg = format!(
                "node `{}`: the update makes {field} violate the state schema: {v}",
                node.name
            );
            record(delta, None, out.llm, Some(msg.clone()));
            result.fail(msg);
            return finish(program, result, state, last, obs);
        }
        last = Some(ix);
        let route = match choose(node, &mirror) {
            Ok(r) => r,
            Err(e) => {
                let msg = format!("node `{}`: edge: {e}", node.name);
                record(delta, None, out.llm, Some(msg.clone()));
                result.fail(msg);
                return finish(program, result, state, last, obs);
            }
        };
        current = route.0;
        if tracing {
            let to = route
                .0
                .map_or("END".to_string(), |t| program.nodes[t].name.clone());
            record(
                delta,
                Some(Route {
                    to,
                    arm: route.1,
                    predicate: route.2,
                }),
                out.llm,
                None,
            );
        }
    }
    // Reached END.
    result.status = if last.is_some_and(|l| program.nodes[l].fallback) {
        Status::Fallback
    } else if answer_of(program, &state).is_some() {
        Status::Generated
    } else {
        Status::Exhausted
    };
    finish(program, result, state, last, obs)
}

type Choice = (Option<usize>, Arm, Option<String>);

fn choose(node: &NodeProg, mirror: &Arc<Mirror>) -> Result<Choice, String> {
    match &node.edge {
        EdgeProg::Static(t) => Ok((*t, Arm::Named("static"), None)),
        EdgeProg::Branch(arms) => {
            let scope = Scope::make(mirror, Vec::new());
            for (i, (pred, t)) in arms.iter().enumerate() {
                match pred {
                    None => return Ok((*t, Arm::Named("else"), None)),
                    Some(p) => {
                        if p.test(&scope)
                            .map_err(|e| format!("predicate `{}` of arm {i}: {e}", p.source))?
                        {
                            return Ok((*t, Arm::Index(i), Some(p.source.clone())));
                        }
                    }
                }
            }
            Err("no arm matched and there is no `else` arm".into())
        }
    }
}

fn answer_of<'a>(program: &Program, state: &'a Value) -> Option<&'a str> {
    let field = program.loaded.spec.output.answer.as_deref()?;
    state
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

fn finish(
    program: &Program,
    mut result: RunResult,
    state: Value,
    _last: Option<usize>,
    obs: &mut dyn Observer,
) -> RunResult {
    let out = &program.loaded.spec.output;
    if matches!(result.status, Status::Generated | Status::Fallback) {
        result.answer = out
            .answer
            .as_deref()
            .and_then(|f| state.get(f))
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    if let Some(docs) = out
        .documents
        .as_deref()
        .and_then(|f| state.get(f))
        .and_then(Value::as_array)
    {
        for d in docs {
            let src = d
                .pointer("/metadata/source")
                .and_then(Value::as_str)
                .or_else(|| d.get("id").and_then(Value::as_str));
            if let Some(s) = src {
                if !result.sources.iter().any(|x| x == s) {
                    result.sources.push(s.to_string());
                }
            }
        }
    }
    result.steps = result.path.len() as u32;
    result.state = state;
    obs.finish(&result);
    result
}

type StepError = (String, Option<LlmStats>);

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

async fn exec(
    program: &Program,
    node: &NodeProg,
    res: &Resources,
    mirror: &Arc<Mirror>,
    state: &Value,
) -> Result<NodeOut, StepError> {
    let plain = |e: String| (e, None);
    match &node.body {
        Body::Update => Ok(NodeOut::plain(None, node)),
        Body::Retrieve {
            retriever,
            query,
            top_k,
        } => {
            let q = render(query, &Scope::make(mirror, Vec::new()))
                .map_err(|e| plain(format!("query template: {e}")))?;
            let r = res
                .retrievers
                .get(retriever)
                .ok_or_else(|| plain(format!("retriever `{retriever}` is not open")))?;
            let docs = r
                .search(&q, *top_k)
                .map_err(|e| plain(format!("retriever `{retriever}`: {e}")))?;
            Ok(NodeOut::plain(Some(documents_json(docs)), node))
        }
        Body::Tool { tool, query } => {
            let spec = program
                .loaded
                .spec
                .tools
                .get(tool)
                .ok_or_else(|| plain(format!("unknown tool `{tool}`")))?;
            let top_k = match spec {
                crate::spec::types::ToolSpec::Corpus { top_k, .. } => *top_k as usize,
                crate::spec::types::ToolSpec::Searxng { .. } => {
                    return Err(plain(format!(
                        "tool `{tool}`: kind `searxng` is not implemented in this build"
                    )))
                }
                crate::spec::types::ToolSpec::Tavily { .. } => {
                    return Err(plain(format!(
                        "tool `{tool}`: kind `tavily` is not implemented in this build"
                    )))
                }
            };
            let q = render(query, &Scope::make(mirror, Vec::new()))
                .map_err(|e| plain(format!("query template: {e}")))?;
            let r = res
                .tools
                .get(tool)
                .ok_or_else(|| plain(format!("tool `{tool}` is not open")))?;
            let docs = r
                .search(&q, top_k)
                .map_err(|e| plain(format!("tool `{tool}`: {e}")))?;
            Ok(NodeOut::plain(Some(documents_json(docs)), node))
        }
        Body::Llm(call) => {
            let provider: &dyn Provider = &**provider(res, call).map_err(plain)?;
            let (req, inputs) = request(node, call, mirror, state, None).map_err(plain)?;
            let first = provider.call(&req);
            let mut stats = LlmStats::default();
            let out = complete(provider, call, &req, first, &mut stats)
                .await
                .map_err(|e| (e, Some(stats)))?;
            let mut o = NodeOut::plain(Some(out), node);
            o.inputs = inputs;
            o.inputs_json = req.inputs;
            o.llm = Some(stats);
            Ok(o)
        }
        Body::Map {
            call,
            over,
            over_name,
            concurrency,
        } => {
            let provider: &dyn Provider = &**provider(res, call).map_err(plain)?;
            let not_list =
                |what: String| plain(format!("over `{}` is not a list: {what}", over.source));
            // Items as template values and as JSON.
            let items: Vec<(JValue, Value)> = match over_name
                .as_deref()
                .and_then(|n| Some((state.get(n)?, mirror.get(n)?)))
            {
                Some((Value::Array(json), jinja)) => {
                    let j: Vec<JValue> = jinja
                        .try_iter()
                        .map_err(|e| not_list(super::eval::describe(&e)))?
                        .collect();
                    j.into_iter().zip(json.iter().cloned()).collect()
                }
                Some((other, _)) => {
                    return Err(not_list(format!("it is {}", super::state::kind(other))))
                }
                None => {
                    let list = over
                        .eval(&Scope::make(mirror, Vec::new()))
                        .map_err(|e| plain(format!("over `{}`: {e}", over.source)))?;
                    let mut out = Vec::new();
                    for v in list
                        .try_iter()
                        .map_err(|e| not_list(super::eval::describe(&e)))?
                    {
                        let j = to_json(&v).map_err(not_list)?;
                        out.push((v, j));
                    }
                    out
                }
            };
            let mut reqs = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                reqs.push(
                    request(node, call, mirror, state, Some((i, item)))
                        .map_err(|e| plain(format!("item {i}: {e}")))?
                        .0,
                );
            }
            // First calls are created in item order before any runs (see scripted).
            let firsts: Vec<BoxFuture<'_, Result<LlmResponse, ProviderError>>> =
                reqs.iter().map(|r| provider.call(r)).collect();
            let tasks = reqs.iter().zip(firsts).map(|(req, first)| async move {
                let mut stats = LlmStats::default();
                let r = complete(provider, call, req, first, &mut stats).await;
                (r, stats)
            });
            let done: Vec<(Result<Value, String>, LlmStats)> = if *concurrency >= reqs.len() {
                futures::future::join_all(tasks).await
            } else {
                futures::stream::iter(tasks)
                    .buffered(*concurrency)
                    .collect()
                    .await
            };
            let mut total = LlmStats::default();
            let mut outs = Vec::with_capacity(done.len());
            let mut first_err = None;
            for (i, (r, s)) in done.into_iter().enumerate() {
                total.calls += s.calls;
                total.input_tokens += s.input_tokens;
                total.output_tokens += s.output_tokens;
                total.cost_usd += s.cost_usd;
                total.latency_ms += s.latency_ms;
                match r {
                    Ok(v) => outs.push(v),
                    Err(e) => {
                        first_err.get_or_insert(format!("item {i}: {e}"));
                    }
                }
            }
            if let Some(e) = first_err {
                return Err((e, Some(total)));
            }
            let mut o = NodeOut::plain(Some(Value::Array(outs)), node);
            o.llm = Some(total);
            Ok(o)
        }
    }
}

fn provider<'r>(res: &'r Resources, call: &LlmProg) -> Result<&'r Arc<dyn Provider>, String> {
    res.providers
        .get(&call.model)
        .ok_or_else(|| format!("model `{}` has no provider", call.model))
}

type Inputs = Vec<(Arc<str>, JValue)>;

/// Evaluates the inputs and renders the prompts of one call.
fn request(
    node: &NodeProg,
    call: &LlmProg,
    mirror: &Arc<Mirror>,
    state: &Value,
    item: Option<(usize, (JValue, Value))>,
) -> Result<(LlmRequest, Inputs), String> {
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
        let v = c
            .eval_jinja(&base)
            .map_err(|e| format!("input `{input}`: {e}"))?;
        let j = match c {
            Compiled::Name(n) => names
                .json(n)
                .ok_or_else(|| format!("input `{input}`: `{n}` is not defined"))?,
            _ => to_json(&v).map_err(|e| format!("input `{input}`: {e}"))?,
        };
        inputs_json.insert(input.to_string(), j);
        inputs.push((Arc::clone(input), v));
    }
    drop(base);
    extra.extend(inputs.iter().cloned());
    let scope = Scope::make(mirror, extra);
    let mut messages = Vec::with_capacity(2);
    if let Some(t) = &call.system {
        messages.push(Message {
            role: "system".into(),
            content: t
                .render(&scope)
                .map_err(|e| format!("system prompt: {e}"))?,
        });
    }
    messages.push(Message {
        role: "user".into(),
        content: call
            .user
            .render(&scope)
            .map_err(|e| format!("user prompt: {e}"))?,
    });
    let req = LlmRequest {
        node: node.name.clone(),
        item: item.map(|(i, _)| i),
        model_name: call.model.clone(),
        model: call.model_spec.clone(),
        task: call.task.clone(),
        inputs: inputs_json,
        messages,
        schema: call.schema.as_ref().map(|(s, _)| s.clone()),
    };
    Ok((req, inputs))
}

async fn timed(
    fut: BoxFuture<'_, Result<LlmResponse, ProviderError>>,
    call: &LlmProg,
    stats: &mut LlmStats,
) -> Result<LlmResponse, ProviderError> {
    let t = Instant::now();
    let r = match call
        .model_spec
        .timeout_secs
        .filter(|s| s.is_finite() && *s > 0.0)
    {
        Some(secs) => {
            match tokio::time::timeout(std::time::Duration::from_secs_f64(secs.min(1e9)), fut).await
            {
                Ok(r) => r,
                Err(_) => Err(ProviderError::Transient(format!(
                    "timed out after {secs} s"
                ))),
            }
        }
        None => fut.await,
    };
    stats.calls += 1;
    stats.latency_ms += t.elapsed().as_secs_f64() * 1000.0;
    let resp = r?;
    stats.input_tokens += resp.usage.input_tokens;
    stats.output_tokens += resp.usage.output_tokens;
    stats.cost_usd += resp.usage.cost_usd;
    Ok(resp)
}

/// Awaits the first call and runs the repair turns of structured output.
async fn complete(
    provider: &dyn Provider,
    call: &LlmProg,
    first_req: &LlmRequest,
    first: BoxFuture<'_, Result<LlmResponse, ProviderError>>,
    stats: &mut LlmStats,
) -> Result<Value, String> {
    // Transient failures are retried `retries` times (model setting), with a short
    // growing pause; permanent ones fail at once.
    let mut resp = timed(first, call, stats).await;
    let mut attempt = 0u32;
    while let Err(ProviderError::Transient(_)) = &resp {
        if attempt >= call.model_spec.retries.unwrap_or(0) {
            break;
        }
        attempt += 1;
        tokio::time::sleep(std::time::Duration::from_millis(100u64 << attempt.min(6))).await;
        resp = timed(provider.call(first_req), call, stats).await;
    }
    let resp = resp.map_err(|e| provider_error(call, e))?;
    let Some((_, check)) = &call.schema else {
        return match resp.output {
            Value::String(s) => Ok(Value::String(s)),
            other => Err(format!(
                "expected text output, the model returned {}",
                super::state::kind(&other)
            )),
        };
    };
    let mut output = resp.output;
    let mut repairs = 0u32;
    let mut repair: Option<LlmRequest> = None;
    loop {
        // Lenient: a JSON document sent as text is parsed.
        if let Value::String(s) = &output {
            if let Ok(v) = serde_json::from_str::<Value>(s.trim()) {
                output = v;
            }
        }
        let violation = match check.check(&output) {
            Ok(()) => return Ok(output),
            Err(v) => v,
        };
        if repairs >= call.repairs {
            return Err(format!(
                "structured output does not match the schema after {repairs} repair turn(s): {violation} (output: {})",
                truncate(&output.to_string(), 200)
            ));
        }
        repairs += 1;
        let req = repair.get_or_insert_with(|| first_req.clone());
        let shown = match &output {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        req.messages.push(Message {
            role: "assistant".into(),
            content: shown,
        });
        req.messages.push(Message {
            role: "user".into(),
            content: format!(
                "Your answer does not match the required JSON Schema: {violation}. Reply again with only a corrected answer that matches the schema."
            ),
        });
        let resp = {
            let fut = provider.call(req);
            timed(fut, call, stats)
                .await
                .map_err(|e| provider_error(call, e))?
        };
        output = resp.output;
    }
}

fn provider_error(call: &LlmProg, e: ProviderError) -> String {
    format!("model `{}`: provider failed: {e}", call.model)
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

impl RunUsage {
    fn add_stats(&mut self, s: &LlmStats) {
        self.calls += s.calls;
        self.input_tokens += s.input_tokens;
        self.output_tokens += s.output_tokens;
        self.cost_usd += s.cost_usd;
    }
}
