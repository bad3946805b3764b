//! Checks of retrievers and tools that reach beyond one value: the embedding model of
//! the kinds that embed (`dense`/`hybrid`), and, through the registry of retriever
//! kinds ([`crate::retrieval::check_retriever`], [`crate::retrieval::check_tool`]),
//! each kind's option bounds and web-search URLs. Options of another kind are
//! refused when the spec loads.
use super::refs::suggest;
use crate::diag::{Code, Diagnostic};
use crate::spec::types::Provider;
use crate::spec::LoadedSpec;

/// Pushes every finding about `retrievers` and `tools`.
pub(super) fn check(ls: &LoadedSpec, diags: &mut Vec<Diagnostic>) {
    let spec = &ls.spec;
    for (name, r) in &spec.retrievers {
        crate::retrieval::check_retriever(ls, name, r, diags);
        let kind = r.kind();
        let Some(embedding) = r.embedding() else {
            continue;
        };
        let Some(model) = embedding.model else {
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
        crate::retrieval::check_tool(ls, name, t, diags);
    }
}
