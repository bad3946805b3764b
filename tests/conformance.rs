//! Conformance with seed 000's canonical LangGraph code: graphs/arsc-canonical.yaml,
//! run on the scripted inputs recorded by tests/conformance/record.py (langgraph
//! 0.2.76), must take the same node sequence and end in the same final state.
//!
//! The seed's grader returns one list of grades per retrieval; the spec's map node
//! grades each document separately, so the recorded verdicts are scripted one per
//! document, in document order.

use crate::runtime_support::*;
use ragloop::retrieval::Document;
use ragloop::runtime::NoTrace;
use serde_json::{json, Value};

fn scenarios() -> Vec<(String, Value)> {
    let dir = repo().join("tests/conformance/recorded");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .expect("recorded dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let v: Value =
                serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).expect("json");
            (p.file_stem().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn canonical_spec_matches_langgraph_recordings() {
    let scenarios = scenarios();
    assert!(
        scenarios.len() >= 6,
        "expected at least 6 recorded scenarios, found {}",
        scenarios.len()
    );
    let prog = program(&repo().join("graphs/arsc-canonical.yaml"));
    for (name, rec) in scenarios {
        let inputs = &rec["inputs"];
        let retrievals: Vec<Vec<Document>> =
            serde_json::from_value(inputs["retrievals"].clone()).expect("retrievals");
        let mut grades = Vec::new();
        for (docs, verdicts) in retrievals
            .iter()
            .zip(inputs["grades"].as_array().expect("grades"))
        {
            for (d, v) in docs.iter().zip(verdicts.as_array().expect("verdicts")) {
                grades.push(json!({"document_id": d.id, "binary_score": v, "confidence": 0.9}));
            }
        }
        let fixture = json!({"grader": grades, "rewriter": inputs["rewrites"], "generator": inputs["generations"]});
        let provider = scripted(fixture);
        let r = run_scripted(
            &prog,
            provider.clone(),
            retrievals,
            inputs["question"].as_str().expect("question"),
            vec![("max_iterations".into(), inputs["max_iterations"].clone())],
            &mut NoTrace,
        );
        let expected_path: Vec<String> = serde_json::from_value(rec["path"].clone()).expect("path");
        assert_eq!(
            r.path, expected_path,
            "{name}: node sequence ({:?})",
            r.error
        );
        assert_eq!(r.state, rec["final_state"], "{name}: final state");
        assert!(
            provider.remaining().values().all(|n| *n == 0),
            "{name}: unused scripted answers {:?}",
            provider.remaining()
        );
        let expect_status = if rec["final_state"].get("generation").is_some() {
            "generated"
        } else {
            "exhausted"
        };
        assert_eq!(r.status.as_str(), expect_status, "{name}");
    }
}
