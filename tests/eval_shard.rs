//! Sharded evals end to end (issue 16): `ragloop eval --shard I/N` on an offline
//! spec, `ragloop eval merge` of the 4 shards against the unsharded eval, the
//! merge's refusals, and the shipped Kubernetes / GitHub Actions examples parsed by
//! the project's YAML parser. No network: a temp corpus and the offline provider.
use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SPEC: &str = r#"version: 1
name: sharded
state:
  schema:
    type: object
    properties:
      question: {type: string}
      documents: {type: array}
      answer: {type: string}
    required: [question]
models:
  m: {provider: offline}
retrievers:
  docs: {kind: bm25, corpus: corpus, top_k: 2}
output: {answer: answer, documents: documents}
limits: {max_steps: 10}
entry: retrieve
nodes:
  retrieve: {kind: retrieve, retriever: docs, query: "{{ question }}", update: {documents: output}}
  say:
    kind: llm
    model: m
    task: generate_answer
    inputs: {question: question, documents: documents}
    prompt:
      user: "Question: {{ question }}\n{% for d in documents %}[{{ d.id }}] {{ d.content }}\n{% endfor %}"
    update: {answer: output}
edges:
  retrieve: say
  say: END
variants:
  top1:
    set:
      retrievers.docs.top_k: 1
"#;

/// A temp dir with the spec, a 3-document corpus and `n` questions.
fn setup(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("spec.yaml"), SPEC).unwrap();
    std::fs::create_dir_all(p.join("corpus")).unwrap();
    for (f, text) in [
        ("cargo.md", "# Cargo\n\nCargo check checks your code compiles without producing an executable.\n"),
        ("own.md", "# Ownership\n\nEach value has one owner. When the owner goes out of scope the value is dropped.\n"),
        ("borrow.md", "# Borrowing\n\nReferences borrow a value without taking ownership. A mutable reference is exclusive.\n"),
    ] {
        std::fs::write(p.join("corpus").join(f), text).unwrap();
    }
    write_dataset(p, n);
    dir
}

fn write_dataset(p: &Path, n: usize) {
    let topics = [
        ("cargo check", "compiles", "cargo.md"),
        ("the owner of a value", "dropped", "own.md"),
        ("a mutable reference", "exclusive", "borrow.md"),
        ("the weather", "sunny", "weather.md"),
    ];
    let kinds = ["direct", "paraphrase", "multi_hop"];
    let text: String = (0..n)
        .map(|i| {
            let (q, must, src) = topics[i % topics.len()];
            format!(
                "{}\n",
                serde_json::json!({"id": format!("q{i}"), "question": format!("What about {q}? ({i})"),
                    "answer": format!("It {must}."), "must_contain": [must], "sources": [src],
                    "kind": kinds[i % kinds.len()]})
            )
        })
        .collect();
    std::fs::write(p.join("data.jsonl"), text).unwrap();
}

fn ragloop(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("ragloop")
        .unwrap()
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn eval(dir: &Path, out: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "eval",
        "spec.yaml",
        "--dataset",
        "data.jsonl",
        "--no-cache",
        "--out",
        out,
    ];
    args.extend(extra);
    ragloop(dir, &args)
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(p: PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn lines(p: PathBuf) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// The value without what depends on the runs' wall time: `latency*` keys, and
/// the comparison of the `latency_ms` metric.
fn untimed(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            if m.get("metric").and_then(Value::as_str) == Some("latency_ms") {
                return Value::Null;
            }
            Value::Object(
                m.iter()
                    .filter(|(k, _)| !k.contains("latency"))
                    .map(|(k, v)| (k.clone(), untimed(v)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(untimed).collect()),
        v => v.clone(),
    }
}

#[test]
fn four_shards_merged_equal_the_unsharded_eval() {
    let env = setup(60);
    let d = env.path();
    let o = eval(d, "full", &["--repeats", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut sizes = Vec::new();
    for i in 1..=4 {
        let o = eval(
            d,
            &format!("s{i}"),
            &["--repeats", "2", "--shard", &format!("{i}/4")],
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let s = json(d.join(format!("s{i}/summary.json")));
        assert_eq!(s["shard"], serde_json::json!({"index": i, "count": 4}));
        assert_eq!(s["partial"], false, "a complete shard is not partial");
        sizes.push(lines(d.join(format!("s{i}/results.jsonl"))).len());
    }
    // Every pair ran once, in one shard; the slices are not lopsided.
    assert_eq!(sizes.iter().sum::<usize>(), 2 * 60 * 2, "{sizes:?}");
    assert!(sizes.iter().all(|n| (30..=90).contains(n)), "{sizes:?}");
    // Shards given in any order.
    let o = ragloop(
        d,
        &["eval", "merge", "s3", "s1", "s4", "s2", "--out", "merged"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (full, merged) = (
        json(d.join("full/summary.json")),
        json(d.join("merged/summary.json")),
    );
    assert!(merged.get("shard").is_none());
    assert_eq!(untimed(&full), untimed(&merged));
    assert_eq!(
        std::fs::read(d.join("full/settings.json")).unwrap(),
        std::fs::read(d.join("merged/settings.json")).unwrap()
    );
    // The same rows, but for each run's wall time.
    let rows = |p: &str| -> BTreeSet<String> {
        lines(d.join(p).join("results.jsonl"))
            .iter()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                v.as_object_mut().unwrap().remove("latency_ms");
                v.to_string()
            })
            .collect()
    };
    assert_eq!(rows("full"), rows("merged"));
    assert_eq!(rows("merged").len(), 240);

    // Given the very rows of the unsharded eval (each in the shard it hashes to),
    // the merge writes byte-identical summary.json, report.md and report.html.
    let full_rows = lines(d.join("full/results.jsonl"));
    for i in 1..=4 {
        let mine: BTreeSet<(String, String, u64)> = lines(d.join(format!("s{i}/results.jsonl")))
            .iter()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (
                    v["variant"].as_str().unwrap().into(),
                    v["id"].as_str().unwrap().into(),
                    v["repeat"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        let text: String = full_rows
            .iter()
            .filter(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                mine.contains(&(
                    v["variant"].as_str().unwrap().into(),
                    v["id"].as_str().unwrap().into(),
                    v["repeat"].as_u64().unwrap_or(0),
                ))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(d.join(format!("s{i}/results.jsonl")), text).unwrap();
    }
    let o = ragloop(
        d,
        &[
            "eval",
            "merge",
            "s1",
            "s2",
            "s3",
            "s4",
            "--out",
            "same-rows",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for f in ["summary.json", "report.md", "report.html"] {
        let a = std::fs::read_to_string(d.join("full").join(f)).unwrap();
        let b = std::fs::read_to_string(d.join("same-rows").join(f)).unwrap();
        assert!(a == b, "{f} differs from the unsharded eval's");
    }
}

#[test]
fn shard_arguments_are_checked() {
    let env = setup(5);
    let d = env.path();
    for bad in ["3/2", "0/0", "0/4", "1/0", "a/2", "2"] {
        let o = eval(d, "x", &["--shard", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("--shard"), "{bad}: {}", stderr(&o));
    }
    assert!(!d.join("x").exists(), "a usage error writes nothing");
    // Resuming a shard's directory as another shard is refused.
    assert_eq!(eval(d, "s1", &["--shard", "1/2"]).status.code(), Some(0));
    let o = eval(d, "s1", &["--shard", "2/2", "--resume"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--shard"), "{}", stderr(&o));
}

#[test]
fn merge_refuses_shards_that_do_not_make_one_eval() {
    let env = setup(24);
    let d = env.path();
    for i in 1..=3 {
        let o = eval(d, &format!("s{i}"), &["--shard", &format!("{i}/3")]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let merge = |dirs: &[&str], out: &str| {
        let mut a = vec!["eval", "merge"];
        a.extend(dirs);
        a.extend(["--out", out]);
        let o = ragloop(d, &a);
        (o.status.code(), stderr(&o))
    };
    let refused = |dirs: &[&str], needle: &str| {
        let (code, err) = merge(dirs, "m");
        assert_eq!(code, Some(2), "{dirs:?}: {err}");
        assert!(err.contains(needle), "{dirs:?}: want {needle:?} in {err}");
        assert!(
            !d.join("m/results.jsonl").exists(),
            "{dirs:?}: nothing merged"
        );
    };
    refused(&["s1", "s2"], "missing shard(s) 3/3");
    refused(&["s1", "s2", "s3", "s2"], "shard 2/3 given twice");
    refused(&["s1", "s2", "corpus"], "no shard.json");
    // Another arm selection: a different eval.
    let o = eval(d, "other", &["--shard", "3/3", "--variants", "base"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    refused(&["s1", "s2", "other"], "arms");
    // Different settings.
    let o = eval(d, "retries", &["--shard", "3/3", "--retries", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    refused(&["s1", "s2", "retries"], "--retries");
    // A row copied into another shard: overlapping pairs.
    let s1 = lines(d.join("s1/results.jsonl"));
    std::fs::create_dir_all(d.join("s2x")).unwrap();
    for f in ["shard.json", "settings.json"] {
        std::fs::copy(d.join("s2").join(f), d.join("s2x").join(f)).unwrap();
    }
    let mut s2 = lines(d.join("s2/results.jsonl"));
    s2.push(s1[0].clone());
    std::fs::write(d.join("s2x/results.jsonl"), s2.join("\n") + "\n").unwrap();
    refused(&["s1", "s2x", "s3"], "belongs to shard 1/3");
    // A shard that lost a row: incomplete.
    let s3 = lines(d.join("s3/results.jsonl"));
    std::fs::write(d.join("s3/results.jsonl"), s3[1..].join("\n") + "\n").unwrap();
    refused(
        &["s1", "s2", "s3"],
        "shard 3/3 (s3): 1 pair(s) without a row",
    );
    std::fs::write(d.join("s3/results.jsonl"), s3.join("\n") + "\n").unwrap();
    // The dataset changed since the shards ran.
    let data = std::fs::read_to_string(d.join("data.jsonl")).unwrap();
    write_dataset(d, 25);
    refused(&["s1", "s2", "s3"], "not the one the shards ran on");
    std::fs::write(d.join("data.jsonl"), &data).unwrap();
    // Shards run on different datasets.
    write_dataset(d, 25);
    let o = eval(d, "s3b", &["--shard", "3/3"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::write(d.join("data.jsonl"), &data).unwrap();
    refused(&["s1", "s2", "s3b"], "dataset contents");
    // --out one of the shards.
    let (code, err) = merge(&["s1", "s2", "s3"], "s1");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is one of the shards"), "{err}");
    // And the good merge, once.
    let (code, err) = merge(&["s1", "s2", "s3"], "ok");
    assert_eq!(code, Some(0), "{err}");
    let (code, err) = merge(&["s1", "s2", "s3"], "ok");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("already holds results"), "{err}");
}

fn yaml(path: &str) -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join(path)).unwrap();
    let (v, _) = ragloop::spec::yaml::parse(
        &text,
        ragloop::source::FileId(0),
        &ragloop::spec::yaml::Limits::default(),
    )
    .unwrap_or_else(|d| panic!("{path} does not parse: {d:?}"));
    v
}

#[test]
fn the_deploy_examples_parse_and_run_every_shard_once() {
    let k = yaml("deploy/kubernetes/eval-job.yaml");
    let items = k["items"].as_array().expect("a List");
    let job = items
        .iter()
        .find(|i| i["kind"] == "Job" && i["spec"]["completionMode"] == "Indexed")
        .expect("an Indexed Job");
    let n = job["spec"]["completions"].as_u64().unwrap();
    assert_eq!(job["spec"]["parallelism"].as_u64(), Some(n));
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    let script = c["args"][0].as_str().unwrap();
    assert!(
        script.contains("JOB_COMPLETION_INDEX + 1") && script.contains("--shard \"$I/$SHARDS\""),
        "{script}"
    );
    let shards = |c: &Value| {
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "SHARDS")
            .and_then(|e| e["value"].as_str())
            .and_then(|v| v.parse::<u64>().ok())
    };
    assert_eq!(shards(c), Some(n), "SHARDS = completions");
    let merge = items
        .iter()
        .find(|i| i["kind"] == "Job" && i["metadata"]["name"] == "ragloop-eval-merge")
        .expect("a merge Job");
    let mc = &merge["spec"]["template"]["spec"]["containers"][0];
    assert!(mc["args"][0]
        .as_str()
        .unwrap()
        .contains("ragloop eval merge"));
    assert_eq!(shards(mc), Some(n));
    let claim = |j: &Value| {
        j["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"].clone()
    };
    assert_eq!(claim(job), claim(merge), "one shared volume");
    assert!(items.iter().any(|i| i["kind"] == "PersistentVolumeClaim"
        && i["metadata"]["name"] == claim(job)
        && i["spec"]["accessModes"][0] == "ReadWriteMany"));

    let g = yaml("deploy/github-actions/eval-matrix.yml");
    let m = g["jobs"]["shard"]["strategy"]["matrix"]["shard"]
        .as_array()
        .unwrap();
    let want: Vec<Value> = (1..=m.len() as u64).map(Value::from).collect();
    assert_eq!(m, &want);
    let steps = g["jobs"]["shard"]["steps"].as_array().unwrap();
    assert!(steps.iter().any(|s| s["run"]
        .as_str()
        .is_some_and(|r| r.contains("--shard ${{ matrix.shard }}/$SHARDS"))));
    assert_eq!(
        g["jobs"]["shard"]["env"]["SHARDS"].as_u64(),
        Some(m.len() as u64)
    );
    assert_eq!(g["jobs"]["merge"]["needs"], "shard");
    let merge_steps = g["jobs"]["merge"]["steps"].as_array().unwrap();
    assert!(merge_steps.iter().any(|s| s["run"]
        .as_str()
        .is_some_and(|r| r.starts_with("ragloop eval merge"))));
}

#[test]
fn gates_are_left_to_the_merge() {
    let env = setup(12);
    let d = env.path();
    for i in 1..=2 {
        let o = eval(
            d,
            &format!("g{i}"),
            &[
                "--shard",
                &format!("{i}/2"),
                "--fail-over",
                "must_contain=0.01",
            ],
        );
        // A slice's figures decide no gate: the shard passes.
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(
            json(d.join(format!("g{i}/summary.json")))["gates"],
            serde_json::json!([])
        );
    }
    let o = ragloop(d, &["eval", "merge", "g1", "g2", "--out", "gm"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("gate failed: --fail-over must_contain=0.01"),
        "{}",
        stderr(&o)
    );
    assert_eq!(json(d.join("gm/summary.json"))["gates"][0]["passed"], false);
}
