//! Fuzzes the whole static pipeline: YAML loading with spans, typing, every check
//! (the type checker of `validate::types` included), variants, and rendering
//! diagnostics in all three formats. The input is also fed to the type checker
//! directly, as an expression and as a template over a typed state, so its walker is
//! reached even when the input is not a spec. Any panic is a bug.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ragloop::diag::render::{render, Format};
use ragloop::spec::source::Sources;
use ragloop::validate::types::{self, Vars};
use ragloop::validate::{validate_str, Options};
use std::path::Path;

/// A typed state for the direct type-checker calls: enums, nested objects, arrays of
/// objects, a nullable object.
const STATE: &str = r#"{"type": "object", "properties": {
    "verdict": {"type": "string", "enum": ["yes", "no"]},
    "n": {"type": "integer"},
    "documents": {"type": "array", "items": {"type": "object", "properties": {
        "id": {"type": "string"}, "content": {"type": "string"}}}},
    "grade": {"type": ["object", "null"], "properties": {"ok": {"type": "boolean"}}}
}}"#;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut sources = Sources::new();
    // The spec "lives" in the repository's graphs/ directory so that references to
    // prompts and schemas resolve against real files.
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../graphs/fuzz.yaml"));
    let outcome = validate_str(path, text, &mut sources, &Options { no_environment: true });
    for format in [Format::Human, Format::Json, Format::Github] {
        let _ = render(&outcome.diagnostics, &sources, format);
    }
    let vars = Vars::of_state_schema_json(STATE);
    let _ = types::expression(text, &vars);
    // Only text the environment compiles reaches the walker in `validate`.
    if ragloop::jinja::environment().template_from_str(text).is_ok() {
        let _ = types::template(text, &vars);
    }
});
