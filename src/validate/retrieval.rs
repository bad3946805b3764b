//! Checks of retrievers and tools that reach beyond one value: the embedding model of
//! `dense`/`hybrid` retrievers, options that only some kinds take, web-search URLs
//! and call bounds.
use super::refs::suggest;
use crate::diag::{Code, Diagnostic};
use crate::spec::types::{Provider, RetrieverKind, ToolSpec, MAX_TIMEOUT_SECS, MIN_TIMEOUT_SECS};
use crate::spec::LoadedSpec;

/// Pushes every finding about `retrievers` and `tools`.
pub(super) fn check(ls: &LoadedSpec, diags: &mut Vec<Diagnostic>) {
    let spec = &ls.spec;
    for (name, r) in &spec.retrievers {
        let kind = r.kind.as_str();
        // Options a kind does not use are errors: a spec that sets them expects an
        // effect it would not get.
        let stray: &[(&str, bool)] = &[
            ("embedding", r.embedding.is_some() && !r.kind.embeds()),
            ("dimensions", r.dimensions.is_some() && !r.kind.embeds()),
            ("batch_size", r.batch_size.is_some() && !r.kind.embeds()),
            (
                "rrf_k",
                r.rrf_k.is_some() && r.kind != RetrieverKind::Hybrid,
            ),
        ];
        for (key, bad) in stray {
            if *bad {
                let takes = if *key == "rrf_k" {
                    "only `hybrid` retrievers take it"
                } else {
                    "only `dense` and `hybrid` retrievers take it"
                };
                diags.push(
                    Diagnostic::new(
                        Code::WrongType,
                        format!(
                            "retriever `{name}` is of kind `{kind}`: `{key}` has no effect there"
                        ),
                    )
                    .at(ls.key_span(&["retrievers", name, key]))
                    .help(format!("{takes}; remove it or change `kind`")),
                );
            }
        }
        if !r.kind.embeds() {
            continue;
        }
        let Some(model) = &r.embedding else {
            diags.push(
                Diagnostic::new(
                    Code::MissingKey,
                    format!("retriever `{name}` of kind `{kind}` is missing required key `embedding`"),
                )
                .at(ls.key_span(&["retrievers", name]))
                .help("add `embedding: <model name>`, naming a model with `provider: openai` and `model: <embedding model>` (e.g. text-embedding-3-small)"),
            );
            continue;
        };
        let at = ["retrievers", name.as_str(), "embedding"];
        let Some(m) = spec.models.get(model) else {
            diags.push(
                Diagnostic::new(
                    Code::UnknownModel,
                    format!(
                        "retriever `{name}` uses embedding model `{model}`, which is not declared"
                    ),
                )
                .at(ls.span(&at))
                .help(suggest(model, spec.models.keys())),
            );
            continue;
        };
        if m.provider != Provider::Openai {
            diags.push(
                Diagnostic::new(
                    Code::WrongType,
                    format!(
                        "retriever `{name}`: embedding model `{model}` has provider `{}`; embeddings come from an OpenAI-compatible `/v1/embeddings` server",
                        m.provider.as_str()
                    ),
                )
                .at(ls.span(&at))
                .label(
                    ls.span(&["models", model, "provider"]),
                    "the provider is set here".to_string(),
                )
                .help("use `provider: openai` (any OpenAI-compatible server: OpenAI, vLLM, Ollama, llama.cpp, LM Studio, ...) with its `base_url`"),
            );
        } else if m.model.as_deref().is_none_or(|s| s.trim().is_empty()) {
            diags.push(
                Diagnostic::new(
                    Code::MissingKey,
                    format!("embedding model `{model}` (used by retriever `{name}`) is missing required key `model`"),
                )
                .at(ls.key_span(&["models", model]))
                .help("name the embedding model as the server knows it, e.g. `model: text-embedding-3-small`"),
            );
        }
    }
    for (name, t) in &spec.tools {
        let (base_url, timeout, retries) = match t {
            ToolSpec::Corpus { .. } => continue,
            ToolSpec::Searxng {
                base_url,
                timeout_secs,
                retries,
                ..
            } => (Some(base_url.as_str()), *timeout_secs, *retries),
            ToolSpec::Tavily {
                base_url,
                timeout_secs,
                retries,
                ..
            } => (base_url.as_deref(), *timeout_secs, *retries),
        };
        if let Some(url) = base_url {
            if let Err(e) = crate::retrieval::web::endpoint(url, "search") {
                diags.push(
                    Diagnostic::new(Code::WrongType, format!("tool `{name}`: {e}"))
                        .at(ls.span(&["tools", name, "base_url"]))
                        .help("an absolute URL such as `http://127.0.0.1:8888`"),
                );
            }
        }
        if let Some(v) = timeout.filter(|v| !(MIN_TIMEOUT_SECS..=MAX_TIMEOUT_SECS).contains(v)) {
            diags.push(
                Diagnostic::new(
                    Code::WrongType,
                    format!(
                        "`tools.{name}.timeout_secs` is {v}; it must be between {MIN_TIMEOUT_SECS} and {MAX_TIMEOUT_SECS}"
                    ),
                )
                .at(ls.span(&["tools", name, "timeout_secs"])),
            );
        }
        if let Some(v) = retries.filter(|v| *v > 10) {
            diags.push(
                Diagnostic::new(
                    Code::WrongType,
                    format!("`tools.{name}.retries` is {v}; it must be between 0 and 10"),
                )
                .at(ls.span(&["tools", name, "retries"])),
            );
        }
    }
    for (name, r) in &spec.retrievers {
        let ranges = [
            ("dimensions", r.dimensions, 1, 65_536),
            ("batch_size", r.batch_size, 1, 2048),
            ("rrf_k", r.rrf_k, 0, 100_000),
        ];
        for (key, v, min, max) in ranges {
            if let Some(v) = v.filter(|v| *v < min || *v > max) {
                diags.push(
                    Diagnostic::new(
                        Code::WrongType,
                        format!(
                            "`retrievers.{name}.{key}` is {v}; it must be between {min} and {max}"
                        ),
                    )
                    .at(ls.span(&["retrievers", name, key])),
                );
            }
        }
    }
}
