//! The `validate` checks of a retriever's `rerank:` (E094–E097), in the spec's words.
use super::http::Shape;
use crate::diag::{Code, Diagnostic};
use crate::spec::retriever::{
    RerankerSpec, RetrieverSpec, MAX_RERANK_CANDIDATES, RERANKER_KINDS, RERANKER_NAMES,
};
use crate::spec::LoadedSpec;

/// Pushes the findings about `retrievers.NAME.rerank`: an unknown reranker (E094),
/// fewer candidates than documents kept (E095), numbers out of range (E096), an HTTP
/// reranker without what it needs (E097).
pub fn check_rerank(
    ls: &LoadedSpec,
    name: &str,
    spec: &RetrieverSpec,
    diags: &mut Vec<Diagnostic>,
) {
    let Some(r) = spec.rerank() else {
        return;
    };
    let at = |key: &[&str]| {
        let mut p = vec!["retrievers", name, "rerank"];
        p.extend_from_slice(key);
        ls.span(&p)
    };
    let mut numbers_ok = true;
    for (key, v) in [("candidates", r.candidates), ("top_k", r.top_k)] {
        if let Some(v) = v.filter(|v| *v < 1 || *v > MAX_RERANK_CANDIDATES) {
            numbers_ok = false;
            diags.push(
                Diagnostic::new(
                    Code::RerankNumber,
                    format!(
                        "`retrievers.{name}.rerank.{key}` is {v}; it must be between 1 and {MAX_RERANK_CANDIDATES}"
                    ),
                )
                .at(at(&[key])),
            );
        }
    }
    let kept = r.kept(spec.own_top_k());
    if let (Some(c), true) = (r.candidates, numbers_ok) {
        if c < kept {
            let whose = if r.top_k.is_some() {
                format!("`rerank.top_k` is {kept}")
            } else {
                format!("the retriever's `top_k` is {kept}")
            };
            diags.push(
                Diagnostic::new(
                    Code::RerankCandidates,
                    format!(
                        "retriever `{name}`: the rerank stage retrieves {c} candidate(s) but keeps {kept}: {whose}"
                    ),
                )
                .at(at(&["candidates"]))
                .help("the reranker only orders the candidates: set `candidates` to at least `top_k` (default 12)"),
            );
        }
    }
    let help = format!(
        "a reranker is {} or a mapping with `kind: {}`",
        RERANKER_NAMES
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", "),
        RERANKER_KINDS.join("`, `kind: ")
    );
    let h = match &r.reranker {
        RerankerSpec::Name(n) => {
            if !RERANKER_NAMES.contains(&n.as_str()) {
                let hint = if RERANKER_KINDS.contains(&n.as_str()) {
                    format!(
                        "; `{n}` is an HTTP reranker: write it as a mapping, `reranker: {{kind: {n}, base_url: ..., model: ...}}`"
                    )
                } else {
                    String::new()
                };
                diags.push(
                    Diagnostic::new(
                        Code::UnknownReranker,
                        format!("retriever `{name}`: unknown reranker `{n}`{hint}"),
                    )
                    .at(at(&["reranker"]))
                    .help(help),
                );
            }
            return;
        }
        RerankerSpec::Http(h) => h,
    };
    let Some(shape) = Shape::of(&h.kind) else {
        diags.push(
            Diagnostic::new(
                Code::UnknownReranker,
                format!("retriever `{name}`: unknown reranker kind `{}`", h.kind),
            )
            .at(at(&["reranker", "kind"]))
            .help(help),
        );
        return;
    };
    let kind = &h.kind;
    let mut setting = |key: Option<&str>, message: String, help: &str| {
        let span = match key {
            Some(k) => at(&["reranker", k]),
            None => at(&["reranker"]),
        };
        diags.push(
            Diagnostic::new(
                Code::RerankerSetting,
                format!("retriever `{name}`: {message}"),
            )
            .at(span)
            .help(help.to_string()),
        );
    };
    match (&h.base_url, shape.default_base_url()) {
        (None, None) => setting(
            None,
            format!("the `{kind}` reranker needs `base_url` (it has no default server)"),
            "the server's root, e.g. `base_url: http://127.0.0.1:8080` for text-embeddings-inference",
        ),
        (Some(b), _) => {
            if let Err(e) = crate::retrieval::web::endpoint(b, shape.path()) {
                setting(
                    Some("base_url"),
                    format!("the `{kind}` reranker's {e}"),
                    "an absolute http(s) URL such as `http://127.0.0.1:8080`",
                );
            }
        }
        (None, Some(_)) => {}
    }
    if shape.needs_model() && h.model.as_deref().is_none_or(|m| m.trim().is_empty()) {
        setting(
            None,
            format!("the `{kind}` reranker needs `model` (the model as the server knows it)"),
            match shape {
                Shape::Cohere => "e.g. `model: rerank-v3.5`",
                _ => "e.g. `model: jina-reranker-v2-base-multilingual`",
            },
        );
    }
    match &h.api_key_env {
        Some(v) if !is_var_name(v) => setting(
            Some("api_key_env"),
            "`api_key_env` must name an environment variable (letters, digits and `_`); the value is not shown, in case it is the key itself".to_string(),
            "a variable name such as `COHERE_API_KEY` (never the key itself)",
        ),
        None if h.base_url.is_none() && shape.default_base_url().is_some() => setting(
            None,
            format!(
                "the `{kind}` reranker calls the official API ({}), which needs a key: set `api_key_env`",
                shape.default_base_url().unwrap_or_default()
            ),
            "e.g. `api_key_env: COHERE_API_KEY`, or `base_url` for a local server",
        ),
        _ => {}
    }
    if let Some(t) = h
        .timeout_secs
        .filter(|t| !t.is_finite() || *t <= 0.0 || *t > 86_400.0)
    {
        diags.push(
            Diagnostic::new(
                Code::RerankNumber,
                format!(
                    "`retrievers.{name}.rerank.reranker.timeout_secs` is {t}; it must be more than 0 and at most 86400 seconds"
                ),
            )
            .at(at(&["reranker", "timeout_secs"])),
        );
    }
    if let Some(n) = h.retries.filter(|n| *n > 10) {
        diags.push(
            Diagnostic::new(
                Code::RerankNumber,
                format!("`retrievers.{name}.rerank.reranker.retries` is {n}; it must be between 0 and 10"),
            )
            .at(at(&["reranker", "retries"])),
        );
    }
}

/// A plausible environment variable name: letters, digits and `_`, not starting
/// with a digit.
fn is_var_name(v: &str) -> bool {
    !v.is_empty()
        && !v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
