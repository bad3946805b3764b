//! Spec fixtures shared between test files: `tests/specs/fixtures/NAME.yaml`, each
//! with a comment saying what it is for. A spec that one test file uses for its own
//! point stays inline there.
use std::path::{Path, PathBuf};

/// The path of `tests/specs/fixtures/NAME.yaml`.
pub fn path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/specs/fixtures")
        .join(format!("{name}.yaml"))
}

/// The text of `tests/specs/fixtures/NAME.yaml` (panics, naming the file, when it
/// cannot be read).
pub fn spec(name: &str) -> String {
    let p = path(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
