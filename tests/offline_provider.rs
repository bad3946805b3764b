// Tests of the `offline` provider: output shapes against the shipped schemas,
// determinism, refusals, citations, rewriting, errors, hostile inputs, and corpus
// statistics from a small index.

use std::path::Path;
use std::sync::Arc;

use indexmap::IndexMap;
use ragloop::providers::offline::OfflineProvider;
use ragloop::providers::{LlmRequest, Provider, ProviderError};
use ragloop::retrieval::{Index, IndexOptions};
use serde_json::{json, Map, Value};

fn provider() -> OfflineProvider {
    OfflineProvider::new(&IndexMap::new(), None).expect("default params")
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("inputs must be an object"),
    }
}

fn run(p: &OfflineProvider, task: &str, inputs: Value) -> Result<Value, ProviderError> {
    p.run_task(task, &obj(inputs))
}

fn schema(name: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("schema file");
    let value: Value = serde_json::from_str(&text).expect("schema JSON");
    jsonschema::validator_for(&value).expect("valid schema")
}

fn doc(id: &str, source: &str, content: &str) -> Value {
    json!({"id": id, "content": content, "metadata": {"source": source, "title": "", "heading_path": []}})
}

fn ownership_docs() -> Value {
    json!([
        doc("d1", "ch04-01-what-is-ownership.html",
            "Each value in Rust has an owner. There can only be one owner at a time. \
             When the owner goes out of scope, the value will be dropped. \
             Assigning a String to another variable moves it, so the first variable is no longer valid."),
        doc("d2", "ch03-02-data-types.html",
            "Integer types such as u8 and i32 have a known size. \
             Types that implement the Copy trait are copied instead of moved, so both variables stay usable."),
        doc("d3", "ch17-01-futures.html",
            "Futures are lazy and do nothing until they are awaited. An async runtime polls them."),
    ])
}

const QUESTION: &str = "Why is my String variable no longer valid after I assign it to another variable, when integers are copied?";

#[test]
fn grade_documents_matches_the_grading_result_schema() {
    let p = provider();
    let v = schema("grading-result.json");
    let docs = ownership_docs();
    for d in docs.as_array().unwrap() {
        let out = run(
            &p,
            "grade_documents",
            json!({"question": QUESTION, "document": d}),
        )
        .unwrap();
        assert!(v.is_valid(&out), "{out}");
        let m = out.as_object().unwrap();
        assert_eq!(m.len(), 3, "exactly the GradingResult fields: {out}");
        assert_eq!(m["document_id"], d["id"]);
        let c = m["confidence"].as_f64().unwrap();
        assert!((0.5..=1.0).contains(&c), "{c}");
    }
    let yes = run(
        &p,
        "grade_documents",
        json!({"question": QUESTION, "document": docs[0]}),
    )
    .unwrap();
    assert_eq!(yes["binary_score"], "yes", "{yes}");
    let no = run(
        &p,
        "grade_documents",
        json!({"question": QUESTION, "document": docs[2]}),
    )
    .unwrap();
    assert_eq!(no["binary_score"], "no", "{no}");
}

#[test]
fn relevance_threshold_param_moves_the_decision() {
    let strict = OfflineProvider::new(
        &IndexMap::from([("relevance_threshold".to_string(), json!(1.0))]),
        None,
    )
    .unwrap();
    let lax = OfflineProvider::new(
        &IndexMap::from([("relevance_threshold".to_string(), json!(0.0))]),
        None,
    )
    .unwrap();
    let d = &ownership_docs()[1];
    let s = run(
        &strict,
        "grade_documents",
        json!({"question": QUESTION, "document": d}),
    )
    .unwrap();
    let l = run(
        &lax,
        "grade_documents",
        json!({"question": QUESTION, "document": d}),
    )
    .unwrap();
    assert_eq!(s["binary_score"], "no");
    assert_eq!(l["binary_score"], "yes");
}

#[test]
fn grade_answer_matches_the_answer_grade_schema() {
    let p = provider();
    let v = schema("answer-grade.json");
    let docs = ownership_docs();
    let answer = run(
        &p,
        "generate_answer",
        json!({"question": QUESTION, "documents": docs}),
    )
    .unwrap();
    let answer = answer.as_str().unwrap();
    let out = run(
        &p,
        "grade_answer",
        json!({"question": QUESTION, "documents": docs, "answer": answer}),
    )
    .unwrap();
    assert!(v.is_valid(&out), "{out}");
    assert_eq!(out.as_object().unwrap().len(), 2);
    assert_eq!(
        out,
        json!({"grounded": true, "addresses_question": true}),
        "answer: {answer}"
    );

    // An invented claim is not grounded.
    let made_up = "The borrow checker was written in Haskell by a committee of penguins. [ch04-01-what-is-ownership.html]";
    let out = run(
        &p,
        "grade_answer",
        json!({"question": QUESTION, "documents": docs, "answer": made_up}),
    )
    .unwrap();
    assert!(v.is_valid(&out));
    assert_eq!(out["grounded"], false, "{out}");

    // A refusal is grounded and does not address the question.
    let refusal = "I could not find an answer to this question in the provided documents.";
    let out = run(
        &p,
        "grade_answer",
        json!({"question": QUESTION, "documents": docs, "answer": refusal}),
    )
    .unwrap();
    assert_eq!(out, json!({"grounded": true, "addresses_question": false}));
}

#[test]
fn generate_answer_cites_its_sources() {
    let p = provider();
    let out = run(
        &p,
        "generate_answer",
        json!({"question": QUESTION, "documents": ownership_docs()}),
    )
    .unwrap();
    let text = out.as_str().unwrap();
    assert!(!text.starts_with("I could not find"), "{text}");
    assert!(text.contains("[ch04-01-what-is-ownership.html]"), "{text}");
    assert!(
        text.trim_end().ends_with(']'),
        "every sentence is followed by a citation: {text}"
    );
    assert!(
        !text.contains("ch17-01-futures.html"),
        "irrelevant document not quoted: {text}"
    );
    // Without metadata.source the id is cited.
    let docs = json!([{"id": "only-id", "content": "Assigning a String to another variable moves it, so the first variable is no longer valid."}]);
    let out = run(
        &p,
        "generate_answer",
        json!({"question": QUESTION, "documents": docs}),
    )
    .unwrap();
    assert!(out.as_str().unwrap().contains("[only-id]"), "{out}");
}

#[test]
fn generate_answer_refuses_on_irrelevant_or_no_documents() {
    let p = provider();
    let q = "How do I rename a struct field to camelCase when serializing to JSON with serde?";
    let docs = json!([
        doc(
            "a",
            "x.html",
            "Futures are lazy and do nothing until they are awaited."
        ),
        doc(
            "b",
            "y.html",
            "Closures can capture values from their environment in three ways."
        ),
    ]);
    for docs in [docs, json!([])] {
        let out = run(
            &p,
            "generate_answer",
            json!({"question": q, "documents": docs}),
        )
        .unwrap();
        assert!(
            out.as_str().unwrap().starts_with("I could not find"),
            "{out}"
        );
        let grade = run(
            &p,
            "grade_answer",
            json!({"question": q, "documents": docs, "answer": out}),
        )
        .unwrap();
        assert_eq!(
            grade,
            json!({"grounded": true, "addresses_question": false})
        );
    }
}

#[test]
fn rewrite_differs_from_the_question() {
    let p = provider();
    let cases = [
        (QUESTION, ownership_docs()),
        (QUESTION, json!([])),
        ("ownership", json!([])),
        ("", json!([])),
        ("what is it?", json!([])),
        ("cargo", json!([doc("z", "z.html", "cargo")])),
    ];
    for (q, docs) in cases {
        let out = run(
            &p,
            "rewrite_query",
            json!({"question": q, "documents": docs}),
        )
        .unwrap();
        let s = out.as_str().unwrap();
        let norm = |x: &str| {
            x.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase()
        };
        assert_ne!(norm(s), norm(q), "rewrite of {q:?} must differ");
        assert!(!s.trim().is_empty());
    }
    // Feedback terms come from the documents; synonyms map everyday words.
    let out = run(
        &p,
        "rewrite_query",
        json!({"question": QUESTION, "documents": ownership_docs()}),
    )
    .unwrap();
    assert!(
        out.as_str().unwrap().split_whitespace().count() > 4,
        "{out}"
    );
    let out = run(
        &p,
        "rewrite_query",
        json!({"question": "Is there a null in Rust?", "documents": []}),
    )
    .unwrap();
    assert!(out.as_str().unwrap().contains("Option"), "{out}");
}

#[test]
fn route_question_shape() {
    let p = provider();
    let out = run(&p, "route_question", json!({"question": QUESTION})).unwrap();
    assert_eq!(out, json!({"route": "retrieve"}));
    let out = run(&p, "route_question", json!({"question": "how do I?"})).unwrap();
    assert_eq!(out, json!({"route": "direct"}));
}

#[test]
fn every_task_is_deterministic() {
    let p = provider();
    let docs = ownership_docs();
    let calls = [
        (
            "grade_documents",
            json!({"question": QUESTION, "document": docs[0]}),
        ),
        (
            "rewrite_query",
            json!({"question": QUESTION, "documents": docs}),
        ),
        (
            "generate_answer",
            json!({"question": QUESTION, "documents": docs}),
        ),
        (
            "grade_answer",
            json!({"question": QUESTION, "documents": docs, "answer": "Assigning a String moves it. [x]"}),
        ),
        ("route_question", json!({"question": QUESTION})),
    ];
    for (task, inputs) in calls {
        let first = run(&p, task, inputs.clone()).unwrap();
        for _ in 0..100 {
            assert_eq!(run(&p, task, inputs.clone()).unwrap(), first, "{task}");
        }
        // A fresh provider gives the same answer too.
        assert_eq!(run(&provider(), task, inputs).unwrap(), first, "{task}");
    }
}

#[test]
fn missing_and_ill_typed_inputs_name_the_task_and_input() {
    let p = provider();
    for task in ragloop::tasks::TASKS {
        for missing in task.inputs {
            let mut inputs = json!({"question": "q", "document": doc("d", "s", "c"), "documents": [], "answer": "a"});
            inputs.as_object_mut().unwrap().remove(*missing);
            match run(&p, task.name, inputs) {
                Err(ProviderError::Permanent(m)) => {
                    assert!(m.contains(task.name) && m.contains(missing), "{m}")
                }
                other => panic!("{} without {missing}: {other:?}", task.name),
            }
        }
    }
    let bad = [
        (
            "grade_documents",
            json!({"question": 3, "document": doc("d", "s", "c")}),
            "question",
        ),
        (
            "grade_documents",
            json!({"question": "q", "document": "text"}),
            "document",
        ),
        (
            "grade_documents",
            json!({"question": "q", "document": {"content": "no id"}}),
            "document",
        ),
        (
            "generate_answer",
            json!({"question": "q", "documents": "text"}),
            "documents",
        ),
        (
            "generate_answer",
            json!({"question": "q", "documents": [{"id": "x"}]}),
            "documents",
        ),
        (
            "generate_answer",
            json!({"question": "q", "documents": [{"id": "x", "content": 5}]}),
            "documents",
        ),
        (
            "grade_answer",
            json!({"question": "q", "documents": [], "answer": ["a"]}),
            "answer",
        ),
    ];
    for (task, inputs, name) in bad {
        match run(&p, task, inputs) {
            Err(ProviderError::Permanent(m)) => {
                assert!(m.contains(task) && m.contains(name), "{m}")
            }
            other => panic!("{task}: {other:?}"),
        }
    }
    match run(&p, "summarize", json!({})) {
        Err(ProviderError::Unsupported(m)) => assert!(
            m.contains("summarize") && m.contains("grade_documents"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
}

fn request(task: Option<&str>, inputs: Value) -> LlmRequest {
    LlmRequest {
        node: "n1".into(),
        item: None,
        model_name: "m".into(),
        model: std::sync::Arc::new(
            serde_json::from_value(json!({"provider": "offline"})).expect("model spec"),
        ),
        task: task.map(str::to_string),
        inputs: obj(inputs),
        messages: Vec::new(),
        schema: None,
    }
}

#[tokio::test]
async fn provider_call_reports_usage_and_errors() {
    let p = provider();
    assert_eq!(p.name(), "offline");
    let resp = p
        .call(&request(
            Some("generate_answer"),
            json!({"question": QUESTION, "documents": ownership_docs()}),
        ))
        .await
        .unwrap();
    assert!(resp.output.is_string());
    assert!(resp.usage.input_tokens > 0 && resp.usage.output_tokens > 0);
    assert_eq!(resp.usage.cost_usd, 0.0);
    match p.call(&request(None, json!({"question": "q"}))).await {
        Err(ProviderError::Unsupported(m)) => {
            assert!(m.contains("n1") && m.contains("task"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    match p
        .call(&request(Some("grade_documents"), json!({"question": "q"})))
        .await
    {
        Err(ProviderError::Permanent(m)) => {
            assert!(m.contains("n1") && m.contains("document"), "{m}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn params_are_checked() {
    let bad = [
        ("relevance_threshold", json!("high")),
        ("relevance_threshold", json!(1.5)),
        ("max_sentences", json!(0)),
        ("max_sentences", json!(2.5)),
        ("synonyms", json!("yes")),
        ("temperature_of_soup", json!(1)),
    ];
    for (k, v) in bad {
        let err = OfflineProvider::new(&IndexMap::from([(k.to_string(), v)]), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains(k), "{err}");
    }
    let ok = IndexMap::from([
        ("relevance_threshold".to_string(), json!(0.35)),
        ("min_overlap".to_string(), json!(2)),
        ("max_sentences".to_string(), json!(2)),
        ("synonyms".to_string(), json!(false)),
    ]);
    let p = OfflineProvider::new(&ok, None).unwrap();
    assert_eq!(p.params().max_sentences, 2);
}

#[test]
fn hostile_inputs_never_panic() {
    let p = provider();
    let big = "ownership borrow ".repeat(65_536); // ~1 MB
    let unicode = "Что такое владение? 所有権とは何ですか？ 🦀🦀 e\u{301}\u{200f}ltr\u{202e} ß ﬁ";
    let templ = "{{ question }} {% for x in y %}{{ x }}{% endfor %} {# c #} [ch]] [[ [";
    let texts: Vec<&str> = vec![
        "", " ", "\n\n", ".", "?!.", &big, unicode, templ, "[a] [b]", "x. y! z?",
    ];
    let weird_docs = json!([
        {"id": "", "content": ""},
        {"id": 7, "content": templ, "metadata": {"source": 3, "title": 4, "heading_path": "not a list"}},
        {"id": "u", "content": unicode, "metadata": null},
        {"id": "b", "content": big.clone(), "metadata": {"heading_path": [1, null, "h"]}},
        {"id": "x", "content": "x. y! z? ...\n\n.\t.", "extra": true},
    ]);
    for q in &texts {
        for a in [texts[0], texts[5], texts[6], texts[7], texts[8]] {
            let _ = run(
                &p,
                "grade_answer",
                json!({"question": q, "documents": weird_docs, "answer": a}),
            )
            .unwrap();
        }
        for d in weird_docs.as_array().unwrap() {
            let out = run(&p, "grade_documents", json!({"question": q, "document": d})).unwrap();
            assert!(schema("grading-result.json").is_valid(&out), "{out}");
        }
        let out = run(
            &p,
            "generate_answer",
            json!({"question": q, "documents": weird_docs}),
        )
        .unwrap();
        assert!(out.is_string());
        let out = run(
            &p,
            "rewrite_query",
            json!({"question": q, "documents": weird_docs}),
        )
        .unwrap();
        assert!(out.is_string());
        let _ = run(&p, "route_question", json!({"question": q})).unwrap();
    }
    // Null documents count as none.
    let out = run(
        &p,
        "generate_answer",
        json!({"question": QUESTION, "documents": null}),
    )
    .unwrap();
    assert!(out.as_str().unwrap().starts_with("I could not find"));
}

fn small_index() -> (tempfile::TempDir, Arc<Index>) {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    let pages = [
        ("ownership.md", "# Ownership\n\nEach value has an owner. When the owner goes out of scope, the value is dropped. Assigning a String to another variable moves it; the first variable is no longer valid. Integers implement Copy, so they are copied.\n"),
        ("threads.md", "# Threads\n\nCall join on the JoinHandle to wait for a spawned thread to finish. Without join the main thread may end first and the spawned thread is stopped.\n"),
        ("option.md", "# Option\n\nRust has no null. The Option enum with the variants Some and None expresses a value that might be absent.\n"),
        ("cargo.md", "# Cargo\n\nCargo builds your code, downloads dependencies and runs tests. Use cargo build --release for optimized builds.\n"),
    ];
    for (name, text) in pages {
        std::fs::write(corpus.join(name), text).unwrap();
    }
    let (index, _) = Index::open_or_build(
        &corpus,
        Some(&dir.path().join("index")),
        &IndexOptions::default(),
    )
    .unwrap();
    (dir, Arc::new(index))
}

#[test]
fn with_an_index_idf_and_feedback_come_from_the_corpus() {
    let (_dir, index) = small_index();
    assert!(index.doc_freq("thread") >= 1);
    assert_eq!(index.doc_freq("zebra"), 0);
    let p = OfflineProvider::new(&IndexMap::new(), Some(index.clone())).unwrap();
    let q = "How do I make the program wait for a background thread?";
    // Feedback from the index when the call brings no documents.
    let out = run(&p, "rewrite_query", json!({"question": q, "documents": []})).unwrap();
    let s = out.as_str().unwrap().to_lowercase();
    assert!(s.contains("join"), "{s}");
    let hits = index.search(q, 2).unwrap();
    let g = run(
        &p,
        "grade_documents",
        json!({"question": "How do I wait for a spawned thread to finish?", "document": hits[0]}),
    )
    .unwrap();
    assert_eq!(g["binary_score"], "yes", "{g}");
    let docs: Vec<Value> = hits
        .iter()
        .map(|d| serde_json::to_value(d).unwrap())
        .collect();
    let q2 = "How do I wait for a spawned thread to finish?";
    let a = run(
        &p,
        "generate_answer",
        json!({"question": q2, "documents": docs}),
    )
    .unwrap();
    assert!(a.as_str().unwrap().contains("[threads.md]"), "{a}");
    assert_eq!(
        run(&p, "route_question", json!({"question": "zebra quokka?"})).unwrap(),
        json!({"route": "direct"})
    );
    assert_eq!(
        run(&p, "route_question", json!({"question": q})).unwrap(),
        json!({"route": "retrieve"})
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn arbitrary_text_never_panics(q in "\\PC{0,200}", c in "(\\PC|\n|\\[|\\]|\\.| ){0,400}", a in "\\PC{0,200}") {
            let p = provider();
            let d = json!({"id": "d", "content": c, "metadata": {"source": "s", "heading_path": [q.clone()]}});
            let docs = json!([d.clone(), {"id": "e", "content": a.clone()}]);
            let g = run(&p, "grade_documents", json!({"question": q, "document": d})).unwrap();
            prop_assert!(g["confidence"].as_f64().is_some_and(|x| (0.0..=1.0).contains(&x)));
            let ans = run(&p, "generate_answer", json!({"question": q, "documents": docs})).unwrap();
            let _ = run(&p, "grade_answer", json!({"question": q, "documents": docs, "answer": ans})).unwrap();
            let _ = run(&p, "grade_answer", json!({"question": q, "documents": docs, "answer": a})).unwrap();
            let r = run(&p, "rewrite_query", json!({"question": q, "documents": docs})).unwrap();
            prop_assert_ne!(r.as_str().unwrap().trim().to_lowercase(), q.trim().to_lowercase());
            let _ = run(&p, "route_question", json!({"question": q})).unwrap();
        }
    }
}

#[test]
fn grade_answer_requires_the_questions_key_terms() {
    // `thread` and `wait` are in every passage (low IDF); `spawned` and `finish` in one:
    // they are the question's key terms. An answer that covers more than half of the
    // question's IDF weight but misses one key term does not address it (it did
    // before key terms).
    let docs = json!([
        doc(
            "a",
            "threads.html",
            "A thread can wait. Call join so the spawned thread can finish."
        ),
        doc("b", "async.html", "A thread may wait on a channel."),
        doc("c", "sync.html", "Every thread can wait for a lock."),
    ]);
    let q = "How do I wait for a spawned thread to finish?";
    let grade = |p: &OfflineProvider, answer: &str| {
        run(
            p,
            "grade_answer",
            json!({"question": q, "documents": docs, "answer": answer}),
        )
        .unwrap()
    };
    let misses = "A spawned thread can wait. [threads.html]";
    let hits = "Call join so the spawned thread can finish. [threads.html]";
    let strict = provider();
    assert_eq!(grade(&strict, misses)["addresses_question"], false);
    assert_eq!(grade(&strict, hits)["addresses_question"], true);
    let mut params = IndexMap::new();
    params.insert("key_terms_share".to_string(), json!(0.0));
    let old = OfflineProvider::new(&params, None).unwrap();
    assert_eq!(grade(&old, misses)["addresses_question"], true);
    // A key term written in the documentation's words counts: `null` → `None`.
    let docs = json!([doc(
        "o",
        "option.html",
        "A function cannot return null; it can return None, a variant of Option."
    )]);
    let out = run(
        &strict,
        "grade_answer",
        json!({"question": "How do I return null from a function?", "documents": docs,
               "answer": "A function can return None, a variant of Option. [option.html]"}),
    )
    .unwrap();
    assert_eq!(out["addresses_question"], true, "{out}");
}

#[test]
fn classify_question_routes_multi_part_and_out_of_corpus_questions_to_the_loop() {
    let p = provider();
    let class = |p: &OfflineProvider, q: &str| {
        run(p, "classify_question", json!({"question": q})).unwrap()["complexity"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(class(&p, "What does cargo check do?"), "simple");
    assert_eq!(
        class(&p, "What is the difference between String and str?"),
        "complex"
    );
    assert_eq!(
        class(&p, "Why does it move? And how do I copy it?"),
        "complex"
    );
    assert_eq!(class(&p, "how do I?"), "simple");
    let (_dir, index) = small_index();
    let p = OfflineProvider::new(&IndexMap::new(), Some(index)).unwrap();
    assert_eq!(class(&p, "How do I wait for a thread?"), "simple");
    assert_eq!(class(&p, "How do I wait for a zebra thread?"), "complex");
    // `null` is not in the corpus but translates (SYNONYMS): not a mismatch.
    assert_eq!(class(&p, "Is there a null?"), "simple");
    let out = run(&p, "classify_question", json!({"question": "zebra?"})).unwrap();
    assert!(schema("question-class.json").is_valid(&out), "{out}");
}
