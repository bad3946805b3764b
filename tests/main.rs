//! The one integration-test binary: every file under tests/ is a module of it, so the
//! crate is linked once for all of them (see README "Development").

mod providers_support;
mod runtime_support;
mod spec_fixtures;

mod bound_props;
mod cassette;
mod cassette_cli;
mod cassette_openai;
mod cli;
mod conformance;
mod crag_web;
mod dense;
mod docs;
mod eval;
mod eval_lock;
mod graph_props;
mod interrupt_cli;
mod invalid_specs;
mod layers;
mod llamacpp;
mod map_cancel;
mod offline_provider;
mod overrides_cli;
mod provider_failures;
mod providers_anthropic;
mod providers_cli;
mod providers_openai;
mod redirects;
mod retries_cli;
mod retrieval;
mod retrieval_cli;
mod retrieval_quality;
mod root_cli;
mod run_outputs_cli;
mod runtime;
mod runtime_cli;
mod runtime_undefined;
mod rustc_cli;
mod spec_schema;
mod spec_words;
mod terminal_escape;
mod typecheck;
mod variant_props;
mod websearch;
