//! Fuzzes the whole static pipeline: YAML loading with spans, typing, every check,
//! variants, and rendering diagnostics in all three formats. Any panic is a bug.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ragloop::diag::render::{render, Format};
use ragloop::spec::source::Sources;
use ragloop::validate::{validate_str, Options};
use std::path::Path;

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
});
