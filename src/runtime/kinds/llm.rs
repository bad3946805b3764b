//! `kind: llm`: one LLM call — text, or structured output validated against `schema`
//! with repair turns. The call itself (model, task, inputs, prompts, schema) is shared
//! with `map` (see `map.rs`), which makes it once per element of `over`.
use super::{Compile, KindTypes, NodeBody, Step, TemplateChecks};
use crate::diag::{Code, Diagnostic};
use crate::jinja::suggest;
use crate::runtime::nodes::{complete, provider, request, Failure, NodeOut, StepError};
use crate::runtime::program::{Inputs, LlmProg, ProgramError, PromptPart};
use crate::runtime::program_error::NodeFault;
use crate::runtime::state::SchemaCheck;
use crate::spec::types::{LlmNode, Provider};
use crate::spec::LoadedSpec;
use crate::tasks;
use futures::future::BoxFuture;
use serde_json::Value;
use std::sync::Arc;

/// `over` and `concurrency` belong to `map` nodes; then the call's checks.
pub(super) fn check_refs(ls: &LoadedSpec, name: &str, call: &LlmNode, diags: &mut Vec<Diagnostic>) {
    for key in ["over", "concurrency"] {
        if ls
            .spans
            .get(&crate::spec::yaml::pointer(&["nodes", name, key]))
            .is_some()
        {
            diags.push(
                Diagnostic::new(
                    Code::UnknownKey,
                    format!("`{key}` is only allowed on `map` nodes (node `{name}` is `llm`)"),
                )
                .at(ls.key_span(&["nodes", name, key])),
            );
        }
    }
    check_call(ls, name, call, diags);
}

/// The model must be declared; an `offline` model needs a task it implements, with
/// the inputs the task reads.
pub(super) fn check_call(ls: &LoadedSpec, name: &str, call: &LlmNode, diags: &mut Vec<Diagnostic>) {
    let spec = &ls.spec;
    match spec.models.get(&call.model) {
        None => diags.push(
            Diagnostic::new(
                Code::UnknownModel,
                format!(
                    "node `{name}` uses model `{}`, which is not declared",
                    call.model
                ),
            )
            .at(ls.span(&["nodes", name, "model"]))
            .help(suggest(&call.model, spec.models.keys())),
        ),
        Some(model) => check_task(ls, name, call, model.provider, diags),
    }
}

fn check_task(
    ls: &LoadedSpec,
    name: &str,
    call: &LlmNode,
    provider: Provider,
    diags: &mut Vec<Diagnostic>,
) {
    let Some(task_name) = &call.task else {
        if provider == Provider::Offline {
            diags.push(
                Diagnostic::new(
                    Code::UnsupportedTask,
                    format!("node `{name}` uses an `offline` model but names no `task`"),
                )
                .at(ls.key_span(&["nodes", name]))
                .help(format!("the offline provider implements: {}", task_names())),
            );
        }
        return;
    };
    let at = ls.span(&["nodes", name, "task"]);
    match tasks::task(task_name) {
        None => {
            if provider == Provider::Offline {
                diags.push(
                    Diagnostic::new(
                        Code::UnsupportedTask,
                        format!("the offline provider has no task `{task_name}` (node `{name}`)"),
                    )
                    .at(at)
                    .help(format!("it implements: {}", task_names())),
                );
            }
        }
        Some(task) => {
            if provider == Provider::Offline {
                for input in task.inputs {
                    if !call.inputs.contains_key(*input) {
                        diags.push(
                            Diagnostic::new(
                                Code::UnsupportedTask,
                                format!("task `{task_name}` needs input `{input}`, which node `{name}` does not define under `inputs`"),
                            )
                            .at(at)
                            .help(format!("`{task_name}` takes: {}", task.inputs.join(", "))),
                        );
                    }
                }
            }
        }
    }
}

fn task_names() -> String {
    tasks::TASKS
        .iter()
        .map(|t| t.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The call's templates and expressions (`over` when written, `inputs`, prompts) and
/// types: `output` is text, or what the schema describes; a `map` (`is_map`) also
/// gives `item` and `index` to its inputs and prompts, and its `output` is the list.
pub(super) fn check_templates<'n, C: TemplateChecks>(
    cx: &mut C,
    name: &str,
    call: &'n LlmNode,
    is_map: bool,
) -> KindTypes<'n, C::Ty> {
    let base = cx.scope(&[]);
    let mut item_vars: Vec<(&str, C::Ty)> = Vec::new();
    if let Some(over) = &call.over {
        let over_v = Value::String(over.clone());
        let over_ty = cx.expression(&base, &over_v, &["nodes", name, "over"]);
        if is_map {
            item_vars.push(("item", cx.element(&over_ty)));
        }
    } else if is_map {
        item_vars.push(("item", cx.unknown()));
    }
    if is_map {
        item_vars.push(("index", cx.int()));
    }
    let input_scope = cx.scope(&item_vars);
    let mut inputs: Vec<(&'n str, C::Ty)> = Vec::new();
    for (input, expr) in &call.inputs {
        let t = cx.expression(
            &input_scope,
            expr,
            &["nodes", name, "inputs", input.as_str()],
        );
        inputs.push((input.as_str(), t));
    }
    let mut extra = item_vars;
    extra.extend(inputs.iter().cloned());
    let prompt_scope = cx.scope(&extra);
    if let Some(system) = &call.prompt.system {
        cx.prompt(&prompt_scope, system, &["nodes", name, "prompt", "system"]);
    }
    cx.prompt(
        &prompt_scope,
        &call.prompt.user,
        &["nodes", name, "prompt", "user"],
    );
    let one = match &call.schema {
        Some(sref) => cx.schema(sref, &["nodes", name, "schema"]),
        None => cx.string(),
    };
    KindTypes {
        output: Some(if is_map { cx.list(one) } else { one }),
        inputs,
    }
}

/// The prompt texts (`system` when written, then `user`).
pub(super) fn templates(
    name: &str,
    call: &LlmNode,
    files: &Inputs,
    add: &mut dyn FnMut(&'static str, String) -> Result<(), ProgramError>,
) -> Result<(), ProgramError> {
    let prompt = |part: &'static str| -> Result<String, ProgramError> {
        files
            .prompts
            .get(&(name.to_string(), part))
            .map(|t| t.to_string())
            .ok_or_else(|| ProgramError::Node {
                node: name.to_string(),
                fault: NodeFault::PromptNotLoaded(part),
            })
    };
    if call.prompt.system.is_some() {
        add("system", prompt("system")?)?;
    }
    add("user", prompt("user")?)
}

/// Compiles the call of an `llm` or `map` node.
pub(super) fn call(cx: &Compile<'_>, l: &LlmNode) -> Result<LlmProg, ProgramError> {
    let model_spec = cx
        .spec
        .models
        .get(&l.model)
        .cloned()
        .map(Arc::new)
        .ok_or_else(|| cx.fault(NodeFault::UnknownModel(l.model.clone())))?;
    let inputs = l
        .inputs
        .iter()
        .map(|(k, v)| {
            cx.engine
                .value(v)
                .map(|c| (Arc::<str>::from(k.as_str()), c))
                .map_err(|error| {
                    cx.fault(NodeFault::Input {
                        input: k.clone(),
                        error,
                    })
                })
        })
        .collect::<Result<Vec<_>, ProgramError>>()?;
    let schema = match &l.schema {
        Some(_) => {
            let v = cx
                .files
                .schemas
                .get(cx.name)
                .cloned()
                .ok_or_else(|| cx.fault(NodeFault::SchemaNotLoaded))?;
            let check = SchemaCheck::new(&v).map_err(|e| cx.fault(NodeFault::Schema(e)))?;
            Some((Arc::new(v), check))
        }
        None => None,
    };
    Ok(LlmProg {
        model: l.model.clone(),
        model_spec,
        task: l.task.clone(),
        inputs,
        system: if l.prompt.system.is_some() {
            Some(PromptPart::new(cx.template("system")?))
        } else {
            None
        },
        user: PromptPart::new(cx.template("user")?),
        schema,
        repairs: l.repair_attempts,
    })
}

pub(super) fn compile(cx: &Compile<'_>, l: &LlmNode) -> Result<Box<dyn NodeBody>, ProgramError> {
    Ok(Box::new(Llm(call(cx, l)?)))
}

/// A compiled `llm` node.
#[derive(Debug)]
struct Llm(LlmProg);

impl NodeBody for Llm {
    fn exec<'a>(&'a self, step: Step<'a>) -> BoxFuture<'a, Result<NodeOut, Failure>> {
        Box::pin(async move {
            let plain = |e: StepError| (e, None);
            let call = &self.0;
            let meter = step.meter;
            let provider: &dyn crate::providers::Provider =
                &**provider(step.res, call).map_err(plain)?;
            let (req, inputs) =
                request(step.node, call, step.mirror, step.state, None).map_err(plain)?;
            let first = provider.call(&req);
            let out = complete(provider, call, &req, first, meter)
                .await
                .map_err(|e| (e, Some(meter.get())))?;
            let mut o = NodeOut::plain(Some(out), step.node);
            o.inputs = inputs;
            o.inputs_json = req.inputs;
            o.llm = Some(meter.get());
            Ok(o)
        })
    }

    fn calls_llm(&self) -> bool {
        true
    }
}
