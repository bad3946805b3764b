//! `imports:` (docs/spec.md "Imports"): imported entries are the same spec as if
//! written inline, faults inside them point at the imported file, variants reach into
//! them, and the shipped graphs that import crag's nodes run like crag. The per-code
//! faults (E090–E093) are tests/specs/invalid/E09*.yaml.
use ragloop::spec::load_spec;
use ragloop::spec::source::Sources;
use ragloop::validate::{validate_file, validate_str, Options};
use serde_json::Value;
use std::path::Path;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The typed spec as JSON, without `imports` (the only key inline text lacks).
fn typed_json(path: &Path) -> Value {
    let mut sources = Sources::new();
    let loaded = load_spec(path, &mut sources).unwrap_or_else(|d| panic!("{path:?}: {d:?}"));
    let mut v = serde_json::to_value(&loaded.spec).unwrap();
    v.as_object_mut().unwrap().remove("imports");
    v
}

#[test]
fn an_imported_spec_equals_the_same_spec_written_inline() {
    let specs = repo().join("tests/specs");
    let imported = typed_json(&specs.join("valid/imports_minimal.yaml"));
    // The same spec written out by hand: minimal.yaml's entries copied in.
    let inline = r#"
version: 1
name: imports-minimal
root: ..
state:
  schema:
    type: object
    properties:
      question: {type: string}
      documents: {type: array}
      answer: {type: string}
models:
  m:
    provider: scripted
retrievers:
  docs:
    kind: bm25
    corpus: files/corpus
    top_k: 3
output:
  answer: answer
entry: retrieve
nodes:
  retrieve:
    kind: retrieve
    retriever: docs
    query: "{{ question }}"
    update:
      documents: output
  generate:
    kind: llm
    model: m
    prompt:
      system: "Answer from the documents."
      user: "{{ question }}"
    update:
      answer: output
edges:
  retrieve: generate
  generate: END
"#;
    let path = specs.join("valid/inline_twin.yaml");
    let mut sources = Sources::new();
    let loaded = ragloop::spec::load_spec_str(&path, inline, &mut sources).unwrap();
    let mut v = serde_json::to_value(&loaded.spec).unwrap();
    v.as_object_mut().unwrap().remove("imports");
    assert_eq!(imported, v);
}

#[test]
fn adaptive_runs_crags_nodes_unchanged() {
    let crag = typed_json(&repo().join("graphs/crag.yaml"));
    let adaptive = typed_json(&repo().join("graphs/adaptive.yaml"));
    for kind in ["models", "retrievers"] {
        assert_eq!(crag[kind], adaptive[kind], "{kind}");
    }
    for (name, node) in adaptive["nodes"].as_object().unwrap() {
        assert_eq!(&crag["nodes"][name], node, "node {name}");
    }
    assert_eq!(adaptive["nodes"].as_object().unwrap().len(), 6);
    // crag-ab is crag plus variants: same nodes, models and retrievers.
    let ab = typed_json(&repo().join("graphs/crag-ab.yaml"));
    for kind in ["models", "retrievers", "nodes", "edges"] {
        assert_eq!(crag[kind], ab[kind], "{kind}");
    }
}

#[test]
fn a_fault_inside_an_imported_node_points_at_the_imported_file() {
    // `grade` uses model `m`, which is not imported: the reference is reported where
    // it is written, in minimal.yaml.
    let specs = repo().join("tests/specs");
    let text = r#"
version: 1
name: missing-model
root: ..
imports:
  - spec: valid/minimal.yaml
    retrievers: [docs]
    nodes: [retrieve, grade]
state:
  schema:
    type: object
    properties:
      question: {type: string}
      documents: {type: array}
      grades: {type: array}
entry: retrieve
nodes: {}
edges:
  retrieve: grade
  grade: END
"#;
    let mut sources = Sources::new();
    let out = validate_str(
        &specs.join("valid/twin.yaml"),
        text,
        &mut sources,
        &Options::default(),
    );
    let d = out
        .diagnostics
        .iter()
        .find(|d| d.is_error())
        .expect("an error");
    let span = d.span.expect("located");
    let file = sources.get(span.file).path.to_string_lossy().into_owned();
    assert!(
        file.ends_with("valid/minimal.yaml"),
        "{file}: {}",
        d.message
    );
    let minimal = std::fs::read_to_string(specs.join("valid/minimal.yaml")).unwrap();
    let line = minimal.lines().nth(span.line as usize - 1).unwrap();
    assert!(line.contains("model: m"), "line {}: {line}", span.line);
    assert!(d.message.contains('m'), "{}", d.message);
}

#[test]
fn variants_set_paths_inside_imported_entries_but_not_imports() {
    let specs = repo().join("tests/specs");
    let base = std::fs::read_to_string(specs.join("valid/imports_minimal.yaml")).unwrap();
    let ok = format!("{base}variants:\n  wide:\n    set:\n      retrievers.docs.top_k: 8\n");
    let mut sources = Sources::new();
    let out = validate_str(
        &specs.join("valid/twin.yaml"),
        &ok,
        &mut sources,
        &Options::default(),
    );
    assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics);
    let bad = format!("{base}variants:\n  other:\n    set:\n      imports.0.spec: valid/x.yaml\n");
    let mut sources = Sources::new();
    let out = validate_str(
        &specs.join("valid/twin.yaml"),
        &bad,
        &mut sources,
        &Options::default(),
    );
    assert!(
        out.diagnostics
            .iter()
            .any(|d| d.code.as_str() == "E060" && d.message.contains("`imports` cannot be changed")),
        "{:?}",
        out.diagnostics
    );
}

#[test]
fn imported_specs_count_as_inputs() {
    let mut sources = Sources::new();
    let loaded = load_spec(&repo().join("graphs/adaptive.yaml"), &mut sources).unwrap();
    let crag = repo().join("graphs/crag.yaml").canonicalize().unwrap();
    assert!(loaded.input_files().contains(&crag));
}

#[test]
fn an_import_chain_resolves_and_a_self_import_is_a_cycle() {
    // imports_minimal.yaml imports minimal.yaml; importing imports_minimal.yaml's
    // nodes reaches minimal.yaml's through it.
    let specs = repo().join("tests/specs");
    let chain = r#"
version: 1
name: chain
root: ..
imports:
  - spec: valid/imports_minimal.yaml
    models: [m]
    retrievers: [docs]
    nodes: [retrieve, generate]
state:
  schema: {type: object, properties: {question: {type: string}, documents: {type: array}, answer: {type: string}}}
output: {answer: answer}
entry: retrieve
nodes: {}
edges:
  retrieve: generate
  generate: END
"#;
    let mut sources = Sources::new();
    let out = validate_str(
        &specs.join("valid/chain.yaml"),
        chain,
        &mut sources,
        &Options::default(),
    );
    assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics);
    let out = validate_file(
        &specs.join("invalid/E091_import_cycle.yaml"),
        &mut Sources::new(),
        &Options::default(),
    );
    assert!(out.diagnostics.iter().any(|d| d.code.as_str() == "E091"));
}
