//! Model configs that cannot work with their provider (E071): a network provider
//! (a kind with [`crate::providers::KindDef::network`]) without a `model` name, a `base_url` that is not an
//! http(s) address, an `api_key_env` that is not a variable name (a pasted key, most
//! likely — the message never repeats it), `params` that would replace the fields
//! ragloop builds. Keys themselves are not checked: validation is offline and runs
//! where keys are absent on purpose.
use crate::diag::{Code, Diagnostic};
use crate::spec::LoadedSpec;

/// `[A-Za-z_][A-Za-z0-9_]*`
fn is_var_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

pub(super) fn check(ls: &LoadedSpec, diags: &mut Vec<Diagnostic>) {
    for (name, m) in &ls.spec.models {
        if let Some(var) = &m.api_key_env {
            if !is_var_name(var) {
                diags.push(
                    Diagnostic::new(
                        Code::ModelConfig,
                        format!("models.{name}.api_key_env must name an environment variable (letters, digits, `_`); the value given is not a variable name"),
                    )
                    .at(ls.span(&["models", name, "api_key_env"]))
                    .help("write the variable's name (e.g. OPENAI_API_KEY) and export the key in your shell; never put a key in a spec"),
                );
            }
        }
        let Some(net) = crate::providers::kind(m.provider).network else {
            continue;
        };
        let provider = m.provider.as_str();
        if m.model.as_deref().is_none_or(|s| s.trim().is_empty()) {
            diags.push(
                Diagnostic::new(
                    Code::ModelConfig,
                    format!("model `{name}` uses provider `{provider}` but names no `model`"),
                )
                .at(ls.key_span(&["models", name]))
                .help(net.model_help),
            );
        }
        if let Some(base) = &m.base_url {
            if let Err(e) = (net.endpoint)(name, Some(base)) {
                diags.push(
                    Diagnostic::new(Code::ModelConfig, e.to_string())
                        .at(ls.span(&["models", name, "base_url"]))
                        .help("e.g. `http://localhost:11434` (Ollama) or `http://localhost:8000/v1` (vLLM)"),
                );
            }
        }
        for k in m
            .params
            .keys()
            .filter(|k| crate::providers::FIXED_FIELDS.contains(&k.as_str()))
        {
            diags.push(
                Diagnostic::new(
                    Code::ModelConfig,
                    format!("models.{name}.params.{k} cannot be set: ragloop builds that field of the {provider} request"),
                )
                .at(ls.key_span(&["models", name, "params", k])),
            );
        }
    }
}
