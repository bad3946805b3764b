//! Provider selection: which [`Provider`] answers a model of the spec.
use super::scripted::ScriptedProvider;
use super::Provider;
use crate::retrieval::Index;
use crate::spec::types::{ModelSpec, Provider as Kind};
use std::path::Path;
use std::sync::Arc;

/// Builds the provider of model `name`.
///
/// - `offline`: [`super::offline::OfflineProvider`] with the model's `params` and
///   `index` (the spec's first retriever's index, for corpus statistics);
/// - `scripted`: a fixture file named by `params.file`, relative to `root`;
/// - `replay`: a cassette named by `params.file`, relative to `root` (see
///   [`super::replay::ReplayProvider::from_spec`]);
/// - `openai`, `anthropic`: not available in this build.
///
/// # Errors
/// A message naming the model when the provider cannot be built.
pub fn provider_for(
    name: &str,
    model: &ModelSpec,
    root: &Path,
    index: Option<Arc<Index>>,
) -> Result<Arc<dyn Provider>, String> {
    match model.provider {
        Kind::Offline => super::offline::OfflineProvider::new(&model.params, index)
            .map(|p| Arc::new(p) as Arc<dyn Provider>)
            .map_err(|e| format!("model `{name}`: offline provider: {e}")),
        Kind::Scripted => {
            let file = model.params.get("file").and_then(|f| f.as_str()).ok_or_else(|| {
                format!("model `{name}`: the scripted provider needs `params.file` (a fixture path relative to the project root)")
            })?;
            let path = crate::spec::load::resolve_under(root, file, None).map_err(|d| format!("model `{name}`: {}", d.message))?;
            ScriptedProvider::from_file(&path).map(|p| Arc::new(p) as Arc<dyn Provider>).map_err(|e| format!("model `{name}`: {e}"))
        }
        Kind::Replay => super::replay::ReplayProvider::from_spec(name, model, root)
            .map(|p| Arc::new(p) as Arc<dyn Provider>),
        other => Err(format!(
            "model `{name}`: provider `{}` is not available in this build (use `--model {name}=offline` to run it offline)",
            other.as_str()
        )),
    }
}
