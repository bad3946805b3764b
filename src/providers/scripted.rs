//! The `scripted` provider, for tests: answers come from a fixture, in order, per node.
//!
//! Fixture (JSON): `{"grader": [{...}, {...}], "rewriter": ["q2", "q3"], "generator":
//! ["answer"]}`. Each call made by node N takes the next answer of N. An answer is the
//! output itself (a string for text nodes, an object for structured ones), or a
//! wrapper object whose only keys are among `output`, `delay_ms` and `error`:
//! - `{"output": ..., "delay_ms": 50}`: answer after sleeping 50 ms;
//! - `{"error": "..."}`: fail the call (a permanent provider error), optionally after
//!   `delay_ms`.
//!
//! Determinism: the answer is picked when [`Provider::call`] is invoked, not when the
//! returned future first runs. The runtime creates the first call of every item of a
//! `map` node in item order before any of them runs, so item `i` of a visit gets the
//! `i`-th answer of that visit whatever the delays and the concurrency. Repair turns
//! take the next answer when they happen.
use super::{
    estimate_tokens, ConfigError, FixtureError, LlmRequest, LlmResponse, Provider, ProviderError,
    Usage,
};
use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// One scripted answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// What the call returns (ignored when `error` is set).
    pub output: Value,
    /// Sleep this long before answering.
    pub delay: Option<Duration>,
    /// Fail with this message instead of answering.
    pub error: Option<String>,
}

impl Answer {
    /// Reads one fixture entry (see the module docs for the wrapper form).
    pub fn from_value(v: Value) -> Answer {
        if let Value::Object(m) = &v {
            let wrapper = !m.is_empty()
                && (m.contains_key("output") || m.contains_key("error"))
                && m.keys()
                    .all(|k| matches!(k.as_str(), "output" | "delay_ms" | "error"));
            if wrapper {
                let delay = m
                    .get("delay_ms")
                    .and_then(Value::as_f64)
                    .filter(|d| *d > 0.0)
                    .and_then(|d| Duration::try_from_secs_f64(d / 1000.0).ok());
                let error = m
                    .get("error")
                    .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string));
                return Answer {
                    output: m.get("output").cloned().unwrap_or(Value::Null),
                    delay,
                    error,
                };
            }
        }
        Answer {
            output: v,
            delay: None,
            error: None,
        }
    }
}

/// Answers calls from per-node queues.
#[derive(Debug, Default)]
pub struct ScriptedProvider {
    queues: Mutex<HashMap<String, VecDeque<Answer>>>,
    calls: Mutex<Vec<LlmRequest>>,
    record: bool,
}

impl ScriptedProvider {
    /// A provider with the given answers per node.
    pub fn new(answers: impl IntoIterator<Item = (String, Vec<Answer>)>) -> ScriptedProvider {
        ScriptedProvider {
            queues: Mutex::new(answers.into_iter().map(|(k, v)| (k, v.into())).collect()),
            ..Default::default()
        }
    }

    /// Reads a fixture value (`{"node": [answers...]}`).
    ///
    /// # Errors
    /// [`FixtureError::NotObject`] or [`FixtureError::NotList`] when the value is not
    /// an object of arrays.
    pub fn from_json(v: &Value) -> Result<ScriptedProvider, FixtureError> {
        let obj = v.as_object().ok_or(FixtureError::NotObject)?;
        let mut answers = Vec::new();
        for (node, list) in obj {
            let list = list
                .as_array()
                .ok_or_else(|| FixtureError::NotList { node: node.clone() })?;
            answers.push((
                node.clone(),
                list.iter().cloned().map(Answer::from_value).collect(),
            ));
        }
        Ok(ScriptedProvider::new(answers))
    }

    /// The provider of model `name`: the fixture named by `params.file`, relative to
    /// the project root `root`.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the model: no `params.file` (`NoFixture`), a path
    /// outside the root (`File`), a fixture that cannot be used (`Fixture`).
    pub fn from_spec(
        name: &str,
        model: &crate::spec::types::ModelSpec,
        root: &Path,
    ) -> Result<std::sync::Arc<dyn Provider>, ConfigError> {
        let file = model
            .params
            .get("file")
            .and_then(|f| f.as_str())
            .ok_or_else(|| ConfigError::NoFixture {
                model: name.to_string(),
            })?;
        let path =
            crate::spec::load::resolve_under(root, file, None).map_err(|d| ConfigError::File {
                model: name.to_string(),
                message: d.message,
            })?;
        ScriptedProvider::from_file(&path)
            .map(|p| std::sync::Arc::new(p) as std::sync::Arc<dyn Provider>)
            .map_err(|source| ConfigError::Fixture {
                model: name.to_string(),
                source,
            })
    }

    /// Reads a fixture file.
    ///
    /// # Errors
    /// [`FixtureError`] when the file cannot be read, is not JSON or is not a valid
    /// fixture.
    pub fn from_file(path: &Path) -> Result<ScriptedProvider, FixtureError> {
        let text = std::fs::read_to_string(path).map_err(|source| FixtureError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let v: Value = serde_json::from_str(&text).map_err(|source| FixtureError::NotJson {
            path: path.to_path_buf(),
            source,
        })?;
        ScriptedProvider::from_json(&v)
    }

    /// Keeps a copy of every request (see [`ScriptedProvider::requests`]).
    pub fn recording(mut self) -> Self {
        self.record = true;
        self
    }

    /// The requests received so far (when built with [`ScriptedProvider::recording`]).
    pub fn requests(&self) -> Vec<LlmRequest> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Answers not used yet, per node.
    pub fn remaining(&self) -> HashMap<String, usize> {
        self.queues
            .lock()
            .map(|q| q.iter().map(|(k, v)| (k.clone(), v.len())).collect())
            .unwrap_or_default()
    }

    fn next(&self, req: &LlmRequest) -> Result<Answer, ProviderError> {
        if self.record {
            if let Ok(mut c) = self.calls.lock() {
                c.push(req.clone());
            }
        }
        let mut queues = self
            .queues
            .lock()
            .map_err(|_| ProviderError::Permanent("scripted provider state is poisoned".into()))?;
        match queues.get_mut(&req.node).and_then(VecDeque::pop_front) {
            Some(a) => Ok(a),
            None => Err(ProviderError::Permanent(format!(
                "scripted provider: no answer left for node `{}`{}",
                req.node,
                req.item.map(|i| format!(" (item {i})")).unwrap_or_default()
            ))),
        }
    }
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn call<'a>(
        &'a self,
        req: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        // Picked now, in call order (see the module docs).
        let picked = self.next(req);
        Box::pin(async move {
            let answer = picked?;
            if let Some(d) = answer.delay {
                tokio::time::sleep(d).await;
            }
            if let Some(e) = answer.error {
                return Err(ProviderError::Permanent(e));
            }
            let input_tokens: u64 = req
                .messages
                .iter()
                .map(|m| estimate_tokens(&m.content))
                .sum();
            let output_tokens = match &answer.output {
                Value::String(s) => estimate_tokens(s),
                v => estimate_tokens(&v.to_string()),
            };
            let cost_usd = super::cost_usd(&req.model, input_tokens, output_tokens);
            Ok(LlmResponse {
                output: answer.output,
                usage: Usage {
                    input_tokens,
                    output_tokens,
                    cost_usd,
                },
                ..Default::default()
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrapper_detection() {
        let a = Answer::from_value(json!({"output": "x", "delay_ms": 5}));
        assert_eq!(a.output, json!("x"));
        assert_eq!(a.delay, Some(Duration::from_millis(5)));
        let a = Answer::from_value(json!({"error": "boom"}));
        assert_eq!(a.error.as_deref(), Some("boom"));
        let a =
            Answer::from_value(json!({"document_id": "d", "binary_score": "yes", "confidence": 1}));
        assert_eq!(a.output["binary_score"], json!("yes"));
    }
}
