//! The `offline` provider: the standard RAG tasks of [`crate::tasks`] computed
//! locally with classical IR methods. Deterministic, no network, no key. It reads the
//! request's `task` and `inputs` and ignores the prompt.
//!
//! | task | inputs | output |
//! |------|--------|--------|
//! | `grade_documents` | `question` (string), `document` (object) | `{"document_id": string, "binary_score": "yes"\|"no", "confidence": 0..1}` |
//! | `rewrite_query` | `question`, `documents` (array of objects), optional `queries` (array of strings: the queries already tried) | string, never one of `queries` nor the question |
//! | `generate_answer` | `question`, `documents` | string, every sentence followed by `[source]` |
//! | `grade_answer` | `question`, `documents`, `answer` (string) | `{"grounded": bool, "addresses_question": bool}` |
//! | `route_question` | `question` | `{"route": "retrieve"\|"direct"}` |
//! | `classify_question` | `question` | `{"complexity": "simple"\|"complex", "reason": string}` |
//!
//! A document is `{id, content, metadata}` as returned by a retriever; `content` is
//! required, `metadata.source` (else `id`) is what citations name, `metadata.title`
//! and `metadata.heading_path` count as part of the document when grading.
//!
//! Text goes through the same analyzer as the BM25 index (lowercase, English stop
//! words, Snowball stemming) plus a short list of question words (`what`, `how`,
//! `can`, `rust`, ...). Terms are weighted by BM25 IDF from the retriever's index when
//! one is given, else from the call's documents (uniform for a single document).
//!
//! Parameters (the model's `params` in the spec), all optional:
//!
//! | param | type | default | meaning |
//! |-------|------|---------|---------|
//! | `relevance_threshold` | number 0..1 | 0.35 | least IDF-weighted question coverage of a document graded `yes` |
//! | `min_overlap` | integer ≥ 0 | 1 | least number of distinct question terms in a document graded `yes` |
//! | `answer_min_coverage` | number 0..1 | 0.3 | least question coverage of the best document for an answer; below it the generator refuses |
//! | `sentence_min_coverage` | number 0..1 | 0.15 | least question coverage of the best sentence for an answer; below it the generator refuses |
//! | `max_sentences` | integer 1..=10 | 4 | most sentences in a generated answer |
//! | `min_gain` | number 0..1 | 0.1 | least marginal score of a further answer sentence |
//! | `expansion_terms` | integer 0..=20 | 4 | terms added per step by `rewrite_query` (heading and feedback terms, half and half) |
//! | `feedback_docs` | integer 0..=20 | 3 | chunks probed from the index (one per question term) for feedback when the call has no documents |
//! | `synonyms` | boolean | true | expand everyday programming words to the Rust book's vocabulary when rewriting |
//! | `support_threshold` | number 0..1 | 0.7 | least share of an answer sentence's terms found in one document for it to count as grounded |
//! | `addresses_threshold` | number 0..1 | 0.4 | least IDF-weighted share of the question's terms the answer must contain |
//! | `key_terms_share` | number 0..1 | 0.5 | share of the question's IDF weight its key terms (rarest first) make up; the answer must hold every key term (0: no key terms) |

mod classify_question;
mod generate_answer;
mod grade_answer;
mod grade_documents;
mod rewrite_query;
mod route_question;
mod text;

use std::sync::Arc;

use futures::future::BoxFuture;
use indexmap::IndexMap;
use serde_json::{Map, Value};

pub use rewrite_query::SYNONYMS;

use super::{estimate_tokens, LlmRequest, LlmResponse, ParamError, Provider, ProviderError, Usage};
use crate::retrieval::Index;
use text::{doc_view, type_name, Analyzer, DocView};

/// Tuning parameters of the offline provider (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct OfflineParams {
    /// Least IDF-weighted question coverage (0..1) of a document graded `yes`.
    pub relevance_threshold: f64,
    /// Least number of distinct question terms in a document graded `yes`.
    pub min_overlap: usize,
    /// Least question coverage (0..1) of the best document; below it the generator refuses.
    pub answer_min_coverage: f64,
    /// Least question coverage (0..1) of the best sentence; below it the generator refuses.
    pub sentence_min_coverage: f64,
    /// Most sentences in a generated answer (1..=10).
    pub max_sentences: usize,
    /// Least marginal score (0..1) of a further answer sentence.
    pub min_gain: f64,
    /// Terms added by pseudo-relevance feedback when rewriting (0..=20).
    pub expansion_terms: usize,
    /// Documents fetched from the index for feedback when the call has none (0..=20).
    pub feedback_docs: usize,
    /// Expand everyday programming words with the Rust book's vocabulary when rewriting.
    pub synonyms: bool,
    /// Least share (0..1) of an answer sentence's terms found in one document.
    pub support_threshold: f64,
    /// Least IDF-weighted share (0..1) of the question's terms the answer must contain.
    pub addresses_threshold: f64,
    /// Share (0..1) of the question's IDF weight its key terms make up (rarest terms
    /// first); the answer must hold every key term. 0: no key-term check.
    pub key_terms_share: f64,
}

impl Default for OfflineParams {
    fn default() -> Self {
        OfflineParams {
            relevance_threshold: 0.35,
            min_overlap: 1,
            answer_min_coverage: 0.3,
            sentence_min_coverage: 0.15,
            max_sentences: 4,
            min_gain: 0.1,
            expansion_terms: 4,
            feedback_docs: 3,
            synonyms: true,
            support_threshold: 0.7,
            addresses_threshold: 0.4,
            key_terms_share: 0.5,
        }
    }
}

impl OfflineParams {
    /// The keys [`OfflineParams::from_map`] takes.
    pub const KNOWN: &'static [&'static str] = &[
        "relevance_threshold",
        "min_overlap",
        "answer_min_coverage",
        "sentence_min_coverage",
        "max_sentences",
        "min_gain",
        "expansion_terms",
        "feedback_docs",
        "synonyms",
        "support_threshold",
        "addresses_threshold",
        "key_terms_share",
    ];

    /// Reads a spec's `params` map.
    ///
    /// # Errors
    /// A [`ParamError`] naming the parameter: an unknown key, an ill-typed or
    /// out-of-range value.
    pub fn from_map(params: &IndexMap<String, Value>) -> Result<OfflineParams, ParamError> {
        let mut p = OfflineParams::default();
        for (key, value) in params {
            let unit = |v: &Value| -> Result<f64, ParamError> {
                match v.as_f64() {
                    Some(x) if (0.0..=1.0).contains(&x) => Ok(x),
                    _ => Err(ParamError::NotUnit {
                        param: key.clone(),
                        value: v.clone(),
                    }),
                }
            };
            let count = |v: &Value, min: u64, max: u64| -> Result<usize, ParamError> {
                match v.as_u64() {
                    Some(n) if (min..=max).contains(&n) => Ok(n as usize),
                    _ => Err(ParamError::NotCount {
                        param: key.clone(),
                        min,
                        max,
                        value: v.clone(),
                    }),
                }
            };
            match key.as_str() {
                "relevance_threshold" => p.relevance_threshold = unit(value)?,
                "min_overlap" => p.min_overlap = count(value, 0, 1000)?,
                "answer_min_coverage" => p.answer_min_coverage = unit(value)?,
                "sentence_min_coverage" => p.sentence_min_coverage = unit(value)?,
                "max_sentences" => p.max_sentences = count(value, 1, 10)?,
                "min_gain" => p.min_gain = unit(value)?,
                "expansion_terms" => p.expansion_terms = count(value, 0, 20)?,
                "feedback_docs" => p.feedback_docs = count(value, 0, 20)?,
                "synonyms" => {
                    p.synonyms = value.as_bool().ok_or_else(|| ParamError::NotBool {
                        param: key.clone(),
                        value: value.clone(),
                    })?
                }
                "support_threshold" => p.support_threshold = unit(value)?,
                "addresses_threshold" => p.addresses_threshold = unit(value)?,
                "key_terms_share" => p.key_terms_share = unit(value)?,
                other => {
                    return Err(ParamError::Unknown {
                        param: other.to_string(),
                        known: Self::KNOWN,
                    })
                }
            }
        }
        Ok(p)
    }
}

/// The offline provider. Cheap to share; every call is a pure function of the request,
/// the parameters and the (read-only) index.
#[derive(Debug)]
pub struct OfflineProvider {
    params: OfflineParams,
    index: Option<Arc<Index>>,
    analyzer: Analyzer,
}

impl OfflineProvider {
    /// Creates the provider.
    ///
    /// - `params`: the model's `params` map from the spec (e.g.
    ///   `relevance_threshold: 0.35`); see the module documentation for every key.
    /// - `index`: the retriever's index, for corpus statistics (IDF) and
    ///   pseudo-relevance feedback; `None` → statistics from the call's documents only.
    ///
    /// # Errors
    /// A [`ParamError`] naming the parameter if a key is unknown or a value ill-typed
    /// or out of range.
    pub fn new(
        params: &IndexMap<String, Value>,
        index: Option<Arc<Index>>,
    ) -> Result<OfflineProvider, ParamError> {
        Ok(OfflineProvider {
            params: OfflineParams::from_map(params)?,
            index,
            analyzer: Analyzer::new(),
        })
    }

    /// The parameters in effect.
    pub fn params(&self) -> &OfflineParams {
        &self.params
    }

    /// Runs one task synchronously: `task` names it, `inputs` are the node's evaluated
    /// inputs. Returns a JSON string for the text tasks (`rewrite_query`,
    /// `generate_answer`) and an object for the others.
    ///
    /// # Errors
    /// [`ProviderError::Unsupported`] for an unknown task, [`ProviderError::Permanent`]
    /// for a missing or ill-typed input (the message names the task and the input).
    pub fn run_task(
        &self,
        task: &str,
        inputs: &Map<String, Value>,
    ) -> Result<Value, ProviderError> {
        let ctx = Ctx { task, inputs };
        let index = self.index.as_deref();
        match task {
            "grade_documents" => {
                let question = ctx.string("question")?;
                let document = ctx.document("document")?;
                Ok(grade_documents::grade(
                    &self.analyzer,
                    &self.params,
                    index,
                    question,
                    &document,
                ))
            }
            "rewrite_query" => {
                let question = ctx.string("question")?;
                let docs = ctx.documents("documents", &self.analyzer)?;
                let tried = ctx.optional_strings("queries")?;
                Ok(Value::String(rewrite_query::rewrite(
                    &self.analyzer,
                    &self.params,
                    index,
                    question,
                    &docs,
                    &tried,
                )))
            }
            "generate_answer" => {
                let question = ctx.string("question")?;
                let docs = ctx.documents("documents", &self.analyzer)?;
                Ok(Value::String(generate_answer::generate(
                    &self.analyzer,
                    &self.params,
                    index,
                    question,
                    &docs,
                )))
            }
            "grade_answer" => {
                let question = ctx.string("question")?;
                let docs = ctx.documents("documents", &self.analyzer)?;
                let answer = ctx.string("answer")?;
                Ok(grade_answer::grade(
                    &self.analyzer,
                    &self.params,
                    index,
                    question,
                    &docs,
                    answer,
                ))
            }
            "route_question" => {
                let question = ctx.string("question")?;
                Ok(route_question::route(&self.analyzer, index, question))
            }
            "classify_question" => {
                let question = ctx.string("question")?;
                Ok(classify_question::classify(&self.analyzer, index, question))
            }
            other => Err(ProviderError::Unsupported(format!(
                "the offline provider has no task `{other}` (it implements: {})",
                crate::tasks::TASKS
                    .iter()
                    .map(|t| t.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}

/// Input access with errors that name the task and the input.
struct Ctx<'a> {
    task: &'a str,
    inputs: &'a Map<String, Value>,
}

impl<'a> Ctx<'a> {
    fn get(&self, name: &str) -> Result<&'a Value, ProviderError> {
        self.inputs.get(name).ok_or_else(|| {
            ProviderError::Permanent(format!(
                "offline task `{}`: missing input `{name}`",
                self.task
            ))
        })
    }

    fn string(&self, name: &str) -> Result<&'a str, ProviderError> {
        match self.get(name)? {
            Value::String(s) => Ok(s),
            other => Err(ProviderError::Permanent(format!(
                "offline task `{}`: input `{name}` must be a string, got {}",
                self.task,
                type_name(other)
            ))),
        }
    }

    /// An optional array of strings: missing or null → empty.
    fn optional_strings(&self, name: &str) -> Result<Vec<String>, ProviderError> {
        let bad = |what: &str| {
            ProviderError::Permanent(format!(
                "offline task `{}`: input `{name}` must be an array of strings, got {what}",
                self.task
            ))
        };
        match self.inputs.get(name) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(bad(&format!("an array holding {}", type_name(other)))),
                })
                .collect(),
            Some(other) => Err(bad(type_name(other))),
        }
    }

    fn document(&self, name: &str) -> Result<Value, ProviderError> {
        let v = self.get(name)?;
        match v.as_object().and_then(|o| o.get("id")) {
            Some(Value::String(_)) | Some(Value::Number(_)) => {}
            _ => {
                return Err(ProviderError::Permanent(format!(
                    "offline task `{}`: input `{name}` must be a document object with an `id` (string) and a `content` (string)",
                    self.task
                )))
            }
        }
        Ok(v.clone())
    }

    fn documents(&self, name: &str, an: &Analyzer) -> Result<Vec<DocView>, ProviderError> {
        let list = match self.get(name)? {
            Value::Array(a) => a,
            Value::Null => return Ok(Vec::new()),
            other => {
                return Err(ProviderError::Permanent(format!(
                    "offline task `{}`: input `{name}` must be an array of documents, got {}",
                    self.task,
                    type_name(other)
                )))
            }
        };
        list.iter()
            .enumerate()
            .map(|(i, d)| {
                doc_view(an, d, i).map_err(|e| {
                    ProviderError::Permanent(format!(
                        "offline task `{}`: input `{name}`[{i}] {e}",
                        self.task
                    ))
                })
            })
            .collect()
    }
}

impl Provider for OfflineProvider {
    fn name(&self) -> &'static str {
        "offline"
    }

    fn call<'a>(
        &'a self,
        req: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        Box::pin(async move {
            let Some(task) = req.task.as_deref() else {
                return Err(ProviderError::Unsupported(format!(
                    "the offline provider needs a `task` (node `{}` names none); it implements: {}",
                    req.node,
                    crate::tasks::TASKS
                        .iter()
                        .map(|t| t.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            };
            let output = self.run_task(task, &req.inputs).map_err(|e| match e {
                ProviderError::Permanent(m) => {
                    ProviderError::Permanent(format!("{m} (node `{}`)", req.node))
                }
                ProviderError::Unsupported(m) => {
                    ProviderError::Unsupported(format!("{m} (node `{}`)", req.node))
                }
                other => other,
            })?;
            let input_text = serde_json::to_string(&req.inputs).unwrap_or_default();
            let output_tokens = match &output {
                Value::String(s) => estimate_tokens(s),
                other => estimate_tokens(&other.to_string()),
            };
            Ok(LlmResponse {
                output,
                usage: Usage {
                    input_tokens: estimate_tokens(&input_text),
                    output_tokens,
                    cost_usd: 0.0,
                },
                ..Default::default()
            })
        })
    }
}
