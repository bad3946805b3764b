//! The offline corrective loop searches differently on every pass (issue 13 item 6):
//! graphs/crag.yaml run offline over the installed Rust book on questions whose
//! answers are not in it, so the loop rewrites until it gives up. Every retrieve step
//! sends a query never sent before in the run, and the passes bring back different
//! documents (before: three identical retrievals).
use assert_cmd::Command;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// The `(query, document ids)` of each retrieve step of one run.
fn retrievals(question: &str) -> Vec<(String, Vec<String>)> {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("q.jsonl");
    std::fs::write(
        &input,
        serde_json::json!({ "question": question }).to_string(),
    )
    .unwrap();
    let trace = dir.path().join("trace.jsonl");
    let out = Command::cargo_bin("ragloop")
        .unwrap()
        .current_dir(repo())
        .env("RAGLOOP_CACHE_DIR", dir.path().join("cache"))
        .args(["run", "graphs/crag.yaml", "--input"])
        .arg(&input)
        .arg("--trace")
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c == 0 || c == 3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    let mut steps = Vec::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["node"] != "retrieve" {
            continue;
        }
        let queries = v["delta"]["queries"].as_array().expect("queries delta");
        let query = queries.last().and_then(Value::as_str).unwrap().to_string();
        let ids = v["documents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_string())
            .collect();
        steps.push((query, ids));
    }
    steps
}

#[test]
fn every_pass_of_the_offline_loop_searches_a_new_query() {
    for question in [
        "How do I define command-line flags and subcommands with the clap crate's derive macros?",
        "Which serde attribute renames a field when serializing to JSON?",
    ] {
        let steps = retrievals(question);
        assert!(
            steps.len() >= 3,
            "{question}: the loop should retry: {steps:?}"
        );
        let queries: HashSet<&String> = steps.iter().map(|(q, _)| q).collect();
        assert_eq!(
            queries.len(),
            steps.len(),
            "{question}: a query repeats: {steps:?}"
        );
        let results: HashSet<&Vec<String>> = steps.iter().map(|(_, ids)| ids).collect();
        assert!(
            results.len() >= 2,
            "{question}: every pass found the same documents: {steps:?}"
        );
    }
}
