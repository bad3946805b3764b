//! `schemas/spec.schema.json` is generated from the Rust types of the spec format.
//! This test fails when the two drift; `RAGLOOP_BLESS=1 cargo test --test integration spec_schema::`
//! rewrites the file.
use ragloop::spec::spec_json_schema;
use std::path::Path;

#[test]
fn published_spec_schema_matches_the_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/spec.schema.json");
    let generated = serde_json::to_string_pretty(&spec_json_schema()).unwrap() + "\n";
    if std::env::var_os("RAGLOOP_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let published = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        published == generated,
        "schemas/spec.schema.json is out of date with src/spec/types.rs; rerun with RAGLOOP_BLESS=1"
    );
}

#[test]
fn shipped_graphs_conform_to_the_published_schema() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The generated schema (the first test checks that the published file equals it).
    let schema = spec_json_schema();
    let validator = jsonschema::validator_for(&schema).expect("the spec schema compiles");
    for entry in std::fs::read_dir(root.join("graphs")).unwrap() {
        let path = entry.unwrap().path();
        let mut sources = ragloop::spec::source::Sources::new();
        let loaded = ragloop::spec::load_spec(&path, &mut sources)
            .unwrap_or_else(|_| panic!("{} loads", path.display()));
        let errors: Vec<String> = validator
            .iter_errors(&loaded.raw)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
    }
    // And a spec with an unknown key does not conform.
    let bad = serde_json::json!({"version": 1, "name": "x", "state": {"schema": {}}, "entry": "a", "nodes": {}, "edges": {}, "bogus": 1});
    assert!(!validator.is_valid(&bad));
}
