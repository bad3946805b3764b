//! `--override`, `--timeout` and `--retries`, shared by `run` and `eval`: changes to
//! the spec from the command line (see `ragloop::compile::overrides`).
use ragloop::compile::overrides::{parse_retries, parse_timeout};
use ragloop::compile::SpecOverrides;

/// The spec changes of `run` and `eval` besides `--variant` and `--model`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SpecArgs {
    /// Change any value of the spec, with a variant's `set` rules: PATH=VALUE, PATH
    /// dotted, VALUE read as YAML, e.g. models.grader.structured_output=json_schema
    /// or retrievers.book.top_k=8 (repeatable; applied after --variant, before --model).
    #[arg(long = "override", value_name = "PATH=VALUE")]
    pub overrides: Vec<String>,
    /// Timeout of one attempt of every network call (LLM, embeddings, web search), in
    /// seconds from 0.001 to 86400 (fractions allowed; the bounds of a spec's
    /// timeout_secs), instead of each model's and tool's timeout_secs.
    #[arg(long, value_name = "SECS", value_parser = parse_timeout)]
    pub timeout: Option<f64>,
    /// Retries of every call after a transient failure (0 to 10), instead of each
    /// model's and tool's retries.
    #[arg(long, value_name = "N", value_parser = parse_retries)]
    pub retries: Option<u32>,
}

impl SpecArgs {
    /// These changes and the `--model` overrides, in the library's form.
    pub fn changes(&self, models: &[String]) -> SpecOverrides {
        SpecOverrides {
            set: self.overrides.clone(),
            models: models.to_vec(),
            timeout_secs: self.timeout,
            retries: self.retries,
        }
    }
}
