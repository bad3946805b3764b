//! Helpers shared by the runtime tests: small specs in a temp dir, scripted resources.
#![allow(dead_code)]
use ragloop::compile::load_program;
use ragloop::providers::scripted::ScriptedProvider;
use ragloop::providers::Provider;
use ragloop::retrieval::Document;
use ragloop::runtime::{
    run, NoTrace, Observer, Program, ResourceOptions, Resources, Retriever, RunInput, RunResult,
    ScriptedRetriever,
};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A temp project holding one spec.
pub struct Project {
    pub dir: tempfile::TempDir,
    pub spec: PathBuf,
}

pub fn project(spec_yaml: &str, fixture: &Value) -> Project {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = dir.path().join("spec.yaml");
    std::fs::write(&spec, spec_yaml).expect("write spec");
    std::fs::write(dir.path().join("fixture.json"), fixture.to_string()).expect("write fixture");
    std::fs::create_dir_all(dir.path().join("corpus")).expect("corpus dir");
    std::fs::write(
        dir.path().join("corpus/a.md"),
        "# Cargo\n\nCargo check checks code without building it.\n",
    )
    .expect("doc");
    Project { dir, spec }
}

pub fn program(path: &Path) -> Program {
    match load_program(path, None, &[]) {
        Ok(p) => p,
        Err(e) => panic!("spec does not load: {e}"),
    }
}

pub fn doc(id: &str, content: &str) -> Document {
    let mut metadata = serde_json::Map::new();
    metadata.insert("source".into(), json!(format!("{id}.html")));
    Document {
        id: id.into(),
        content: content.into(),
        metadata,
    }
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Runs `program` with every model answered by `provider` and every retriever by
/// `retrieval` (one list per call).
pub fn run_scripted(
    program: &Program,
    provider: Arc<ScriptedProvider>,
    retrieval: Vec<Vec<Document>>,
    question: &str,
    sets: Vec<(String, Value)>,
    obs: &mut dyn Observer,
) -> RunResult {
    let retriever: Arc<dyn Retriever> = Arc::new(ScriptedRetriever::new(retrieval));
    let mut opts = ResourceOptions::default();
    for name in program.spec.retrievers.keys() {
        opts.retrievers.insert(name.clone(), Arc::clone(&retriever));
    }
    for name in program.spec.models.keys() {
        opts.providers
            .insert(name.clone(), Arc::clone(&provider) as Arc<dyn Provider>);
    }
    let res = Resources::prepare(program, opts).expect("resources");
    let input = RunInput {
        question: Some(question.into()),
        sets,
    };
    rt().block_on(run(program, &res, &input, obs))
}

pub fn scripted(v: Value) -> Arc<ScriptedProvider> {
    Arc::new(
        ScriptedProvider::from_json(&v)
            .expect("fixture")
            .recording(),
    )
}

pub fn quick(program: &Program, fixture: Value, retrieval: Vec<Vec<Document>>) -> RunResult {
    run_scripted(
        program,
        scripted(fixture),
        retrieval,
        "What does cargo check do?",
        vec![],
        &mut NoTrace,
    )
}

pub fn grade(id: &str, yes: bool) -> Value {
    json!({"document_id": id, "binary_score": if yes { "yes" } else { "no" }, "confidence": 0.9})
}

pub fn providers_map() -> HashMap<String, Arc<dyn Provider>> {
    HashMap::new()
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
