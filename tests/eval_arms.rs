//! `ragloop eval A.yaml B.yaml ...`: arms over several specs (`STEM`,
//! `STEM:VARIANT`), pairwise comparisons, per-arm gates and `--variants`, resume and
//! cassettes over every arm, bad specs; `--repeats N` (rows, cassette keys); the
//! cost-and-quality table first in the reports; the hard subset. No network: a temp
//! corpus and the scripted provider.
use assert_cmd::Command;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Retrieve, then answer; a variant that hits the step limit at once.
const SPEC_A: &str = r#"version: 1
name: arm_a
state:
  schema:
    type: object
    properties:
      question: {type: string}
      documents: {type: array}
      answer: {type: string}
    required: [question]
models:
  m: {provider: scripted, params: {file: fixture-a.json}}
retrievers:
  docs: {kind: bm25, corpus: corpus, top_k: 1}
output: {answer: answer, documents: documents}
limits: {max_steps: 10}
entry: retrieve
nodes:
  retrieve: {kind: retrieve, retriever: docs, query: "{{ question }}", update: {documents: output}}
  say: {kind: llm, model: m, prompt: {user: "{{ question }}"}, update: {answer: output}}
edges:
  retrieve: say
  say: END
variants:
  strict:
    set:
      limits.max_steps: 1
"#;

/// Other state and output fields, no retrieval: compared on what both have.
const SPEC_B: &str = r#"version: 1
name: arm_b
state:
  schema:
    type: object
    properties:
      question: {type: string}
      reply: {type: string}
    required: [question]
models:
  m: {provider: scripted, params: {file: fixture-b.json}}
output: {answer: reply}
limits: {max_steps: 5}
entry: say
nodes:
  say: {kind: llm, model: m, prompt: {user: "{{ question }}"}, update: {reply: output}}
edges:
  say: END
"#;

struct Env {
    dir: tempfile::TempDir,
}

fn item(id: &str, kind: &str) -> Value {
    json!({"id": id, "question": format!("What does cargo check do? ({id})"), "answer": "it checks without an executable",
           "must_contain": ["executable"], "sources": ["docs/cargo.md"], "kind": kind})
}

fn dataset(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            item(
                &format!("q{i}"),
                if i % 2 == 0 { "direct" } else { "paraphrase" },
            )
        })
        .collect()
}

impl Env {
    fn new(items: &[Value]) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("a.yaml"), SPEC_A).unwrap();
        std::fs::write(p.join("b.yaml"), SPEC_B).unwrap();
        std::fs::write(
            p.join("fixture-a.json"),
            json!({"say": vec!["It checks the code without an executable."; 400]}).to_string(),
        )
        .unwrap();
        std::fs::write(
            p.join("fixture-b.json"),
            json!({"say": vec!["No idea."; 400]}).to_string(),
        )
        .unwrap();
        std::fs::create_dir_all(p.join("corpus")).unwrap();
        std::fs::write(
            p.join("corpus/cargo.md"),
            "# Cargo\n\nCargo check checks your code compiles without producing an executable.\n",
        )
        .unwrap();
        std::fs::write(
            p.join("corpus/other.md"),
            "# Ownership\n\nEach value has one owner.\n",
        )
        .unwrap();
        let text: String = items.iter().map(|v| format!("{v}\n")).collect();
        std::fs::write(p.join("data.jsonl"), text).unwrap();
        Env { dir }
    }
    fn path(&self, p: &str) -> std::path::PathBuf {
        self.dir.path().join(p)
    }
    /// `ragloop eval SPECS... --dataset data.jsonl --out OUT --concurrency 1` (the
    /// scripted answers go in call order).
    fn cmd(&self, specs: &[&str], out: &str) -> Command {
        self.cmd_c(specs, out, 1)
    }
    fn cmd_c(&self, specs: &[&str], out: &str, concurrency: u16) -> Command {
        let mut c = Command::cargo_bin("ragloop").unwrap();
        c.env("RAGLOOP_CACHE_DIR", self.path("cache")).arg("eval");
        for s in specs {
            c.arg(self.path(s));
        }
        c.arg("--dataset")
            .arg(self.path("data.jsonl"))
            .arg("--out")
            .arg(self.path(out))
            .arg("--concurrency")
            .arg(concurrency.to_string());
        c
    }
    fn rows(&self, out: &str) -> Vec<Value> {
        std::fs::read_to_string(self.path(&format!("{out}/results.jsonl")))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
    fn summary(&self, out: &str) -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(self.path(&format!("{out}/summary.json"))).unwrap(),
        )
        .unwrap()
    }
    fn text(&self, p: &str) -> String {
        std::fs::read_to_string(self.path(p)).unwrap()
    }
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn variants_of(rows: &[Value]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in rows {
        *m.entry(r["variant"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    m
}

#[test]
fn several_specs_run_every_arm_and_compare_every_pair() {
    let env = Env::new(&dataset(12));
    let o = env.cmd(&["a.yaml", "b.yaml"], "out").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rows = env.rows("out");
    let arms = variants_of(&rows);
    assert_eq!(
        arms,
        BTreeMap::from([
            ("a".to_string(), 12),
            ("a:strict".to_string(), 12),
            ("b".to_string(), 12)
        ])
    );
    let s = env.summary("out");
    assert_eq!(s["variants"], json!(["a", "a:strict", "b"]));
    assert_eq!(s["arms"][2]["variant"], "base");
    assert_eq!(s["arms"][1]["variant"], "strict");
    let pairs: BTreeSet<(String, String)> = s["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["a"].as_str().unwrap().into(),
                c["b"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(pairs.len(), 3, "{pairs:?}");
    assert!(pairs.contains(&("a".into(), "b".into())));
    // a answers with the term, b never: a significant difference, question by question.
    let ab = s["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["a"] == "a" && c["b"] == "b")
        .unwrap();
    let mc = ab["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "must_contain")
        .unwrap();
    assert_eq!(mc["n"], 12);
    assert_eq!(mc["verdict"], "worse", "{mc}");
    // b has no retrieval and other fields: compared on what both have, no NaN; its
    // retrieval metrics are n/a (not 0), the pair's comparison on them has no question.
    assert_eq!(
        s["results"]["b"]["overall"]["metrics"]["recall_final"]["n"],
        0
    );
    assert!(s["results"]["b"]["overall"]["metrics"]["recall_final"]["value"].is_null());
    assert_eq!(
        s["results"]["a"]["overall"]["metrics"]["recall_final"]["n"],
        12
    );
    assert!(s["table"][2]["recall_hard"]["value"].is_null());
    assert_eq!(s["table"][0]["recall_hard"]["n"], 6);
    let rf = ab["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "recall_final")
        .unwrap();
    assert_eq!(
        (rf["n"].as_u64(), rf["verdict"].as_str()),
        (Some(0), Some("insufficient data"))
    );
    let brow = rows.iter().find(|r| r["variant"] == "b").unwrap();
    assert_eq!(brow["retrieval"], false);
    assert!(rows
        .iter()
        .filter(|r| r["variant"] == "a")
        .all(|r| r.get("retrieval").is_none()));
    let md = env.text("out/report.md");
    let html = env.text("out/report.html");
    for text in [&md, &html] {
        assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
    }
    assert!(md.contains("arms: a, a:strict, b"), "{md}");
    // The cost table opens the report, with a row per arm, then the comparisons.
    let first = md.lines().find(|l| l.starts_with("## ")).unwrap();
    assert!(first.starts_with("## Cost and quality per arm"), "{first}");
    let table = md.split("## Paired comparisons").next().unwrap();
    for arm in ["| a |", "| a:strict |", "| b |"] {
        assert!(table.contains(arm), "{arm}: {table}");
    }
    assert!(table.contains("| calls/q | tokens/q | cost/q | latency p50 ms | latency p99 ms | faithfulness | answer relevancy | must_contain | recall (hard) |"), "{table}");
    assert!(table.contains("n/a"), "{table}");
    let comparisons = md.find("## Paired comparisons").unwrap();
    assert!(comparisons < md.find("## Answer and retrieval quality").unwrap());
    let h_table = html.find("<h2>Cost and quality per arm").unwrap();
    assert!(h_table < html.find("<h2>Paired comparisons").unwrap());
    assert!(h_table < html.find("<h2>Plots").unwrap());
}

#[test]
fn variants_and_gates_name_arms() {
    let env = Env::new(&dataset(12));
    // A bare variant name with several specs: usage error listing the arms.
    let o = env
        .cmd(&["a.yaml", "b.yaml"], "out")
        .args(["--variants", "strict"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown arm `strict`") && stderr(&o).contains("a, a:strict, b"),
        "{}",
        stderr(&o)
    );
    assert!(!env.path("out").exists());
    // Selection, in order; gates per arm (ARM:METRIC with an arm holding `:`).
    let o = env
        .cmd(&["a.yaml", "b.yaml"], "out")
        .args([
            "--variants",
            "b,a:base",
            "--fail-under",
            "a:must_contain=0.9",
        ])
        .args(["--fail-under", "b:must_contain=0.5", "--fail-if-worse", "a"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert_eq!(variants_of(&env.rows("out")).len(), 2);
    let s = env.summary("out");
    assert_eq!(s["variants"], json!(["b", "a"]));
    let gates = s["gates"].as_array().unwrap();
    assert_eq!(gates[0]["passed"], true, "{}", gates[0]);
    assert_eq!(gates[1]["passed"], false);
    assert!(gates[1]["reason"]
        .as_str()
        .unwrap()
        .starts_with("b: must_contain = 0"));
    // --fail-if-worse against the first arm (b): a is better, not worse (and recall,
    // which b lacks, cannot be judged).
    assert_eq!(gates[2]["passed"], true, "{}", gates[2]);
    assert_eq!(gates[2]["gate"], "--fail-if-worse a=b");
    assert!(
        gates[2]["reason"]
            .as_str()
            .unwrap()
            .contains("a vs b: insufficient data to judge recall_final (n = 0)"),
        "{}",
        gates[2]
    );
    // ARM=REF names the reference: b is significantly worse than a.
    let o = env
        .cmd(&["a.yaml", "b.yaml"], "out2")
        .args(["--variants", "a,b", "--fail-if-worse", "b=a"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("b is significantly worse than a: must_contain"),
        "{}",
        stderr(&o)
    );
    // Gates naming an arm that is not evaluated are usage errors.
    let o = env
        .cmd(&["a.yaml", "b.yaml"], "out3")
        .args(["--fail-under", "strict:f1=0.1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a, a:strict, b"), "{}", stderr(&o));
}

#[test]
fn resume_covers_every_arm_and_refuses_another_spec_list() {
    let env = Env::new(&dataset(10));
    let o = env.cmd(&["a.yaml", "b.yaml"], "out").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let settings: Value = serde_json::from_str(&env.text("out/settings.json")).unwrap();
    assert_eq!(settings["specs"].as_array().unwrap().len(), 2, "{settings}");
    assert_eq!(
        settings["specs"][0]["fingerprint"].as_str().unwrap().len(),
        64
    );
    // Drop half the rows of every arm (an eval killed early): resume runs them only.
    let rows = env.text("out/results.jsonl");
    let kept: Vec<&str> = rows
        .lines()
        .filter(|l| !l.contains("\"id\":\"q7\"") && !l.contains("\"id\":\"q3\""))
        .collect();
    std::fs::write(env.path("out/results.jsonl"), kept.join("\n") + "\n").unwrap();
    let o = env
        .cmd(&["a.yaml", "b.yaml"], "out")
        .arg("--resume")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("6 new run(s), 24 resumed"), "{out}");
    assert_eq!(env.rows("out").len(), 30);
    // Another spec list, or a spec changed since: usage errors, nothing run.
    let before = env.text("out/results.jsonl");
    std::fs::write(env.path("c.yaml"), SPEC_B).unwrap();
    let o2 = env
        .cmd(&["a.yaml", "b.yaml", "c.yaml"], "out")
        .arg("--resume")
        .output()
        .unwrap();
    assert_eq!(o2.status.code(), Some(2), "{}", stderr(&o2));
    assert!(stderr(&o2).contains("specs:"), "{}", stderr(&o2));
    let o = env
        .cmd(&["a.yaml"], "out")
        .arg("--resume")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    std::fs::write(
        env.path("b.yaml"),
        SPEC_B.replace("max_steps: 5", "max_steps: 6"),
    )
    .unwrap();
    let o = env
        .cmd(&["a.yaml", "b.yaml"], "out")
        .arg("--resume")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("b.yaml: its files changed"),
        "{}",
        stderr(&o)
    );
    assert_eq!(env.text("out/results.jsonl"), before);
}

#[test]
fn a_recorded_multi_spec_eval_replays_without_a_provider() {
    let env = Env::new(&dataset(6));
    let cassette = env.path("calls.jsonl");
    let o = env
        .cmd(&["a.yaml", "b.yaml"], "out")
        .arg("--record")
        .arg(&cassette)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The fixtures are gone: every answer of every arm comes from the cassette.
    std::fs::write(env.path("fixture-a.json"), "{}").unwrap();
    std::fs::write(env.path("fixture-b.json"), "{}").unwrap();
    let o = env
        .cmd_c(&["a.yaml", "b.yaml"], "out2", 3)
        .arg("--replay")
        .arg(&cassette)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let key = |r: &Value| {
        (
            r["variant"].as_str().unwrap().to_string(),
            r["id"].as_str().unwrap().to_string(),
            r["answer"].to_string(),
            r["status"].to_string(),
            r["metrics"].to_string(),
        )
    };
    let a: BTreeSet<_> = env.rows("out").iter().map(key).collect();
    let b: BTreeSet<_> = env.rows("out2").iter().map(key).collect();
    assert_eq!(a.len(), 18);
    assert_eq!(a, b);
}

#[test]
fn a_spec_that_does_not_validate_or_a_stem_collision_is_a_usage_error() {
    let env = Env::new(&dataset(3));
    std::fs::write(
        env.path("bad.yaml"),
        SPEC_B.replace("entry: say", "entry: nowhere"),
    )
    .unwrap();
    let o = env.cmd(&["a.yaml", "bad.yaml"], "out").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("bad.yaml: the spec does not validate"), "{e}");
    assert!(
        e.contains("nowhere") && e.contains("nothing was run"),
        "{e}"
    );
    assert!(!env.path("out").exists());
    std::fs::create_dir_all(env.path("other")).unwrap();
    std::fs::write(env.path("other/a.yaml"), SPEC_A).unwrap();
    let o = env
        .cmd(&["a.yaml", "other/a.yaml"], "out")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("same file stem `a`")
            && e.contains(&env.path("a.yaml").display().to_string())
            && e.contains(&env.path("other/a.yaml").display().to_string()),
        "{e}"
    );
    assert!(!env.path("out").exists());
}

/// The cassette's request keys, by (node, question text, repeat).
fn keys(path: &std::path::Path) -> BTreeMap<(String, String, Option<u64>), BTreeSet<String>> {
    let mut m: BTreeMap<_, BTreeSet<String>> = BTreeMap::new();
    for l in std::fs::read_to_string(path).unwrap().lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        let q = v["messages"][0]["content"].as_str().unwrap().to_string();
        m.entry((
            v["node"].as_str().unwrap().to_string(),
            q,
            v["config"]["repeat"].as_u64(),
        ))
        .or_default()
        .insert(v["key"].as_str().unwrap().to_string());
    }
    m
}

#[test]
fn repeats_run_each_question_n_times_with_their_own_keys() {
    let env = Env::new(&dataset(4));
    // --repeats 1 is today's eval: no repeat in rows, the same keys as without it.
    let (c0, c1, c3) = (
        env.path("c0.jsonl"),
        env.path("c1.jsonl"),
        env.path("c3.jsonl"),
    );
    let o = env
        .cmd(&["a.yaml"], "o0")
        .args(["--variants", "base", "--record"])
        .arg(&c0)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = env
        .cmd(&["a.yaml"], "o1")
        .args(["--variants", "base", "--repeats", "1", "--record"])
        .arg(&c1)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(keys(&c0), keys(&c1));
    assert!(env.rows("o1").iter().all(|r| r.get("repeat").is_none()));
    let settings: Value = serde_json::from_str(&env.text("o1/settings.json")).unwrap();
    assert!(
        settings.get("repeats").is_none() && settings.get("specs").is_none(),
        "{settings}"
    );
    // --repeats 3: three rows per question, repeat 1 and 2 marked, keys distinct per
    // repeat, the first repeat's keys those of a single run.
    let o = env
        .cmd(&["a.yaml"], "o3")
        .args(["--variants", "base", "--repeats", "3", "--record"])
        .arg(&c3)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rows = env.rows("o3");
    assert_eq!(rows.len(), 12);
    let mut per: BTreeMap<(String, u64), usize> = BTreeMap::new();
    for r in &rows {
        *per.entry((
            r["id"].as_str().unwrap().into(),
            r["repeat"].as_u64().unwrap_or(0),
        ))
        .or_default() += 1;
    }
    assert_eq!(per.len(), 12, "{per:?}");
    let k3 = keys(&c3);
    let k0 = keys(&c0);
    for ((node, q, rep), ks) in &k0 {
        assert_eq!(k3.get(&(node.clone(), q.clone(), *rep)), Some(ks));
        let r1 = &k3[&(node.clone(), q.clone(), Some(1))];
        let r2 = &k3[&(node.clone(), q.clone(), Some(2))];
        assert!(r1.is_disjoint(ks) && r2.is_disjoint(ks) && r1.is_disjoint(r2));
    }
    let s = env.summary("o3");
    assert_eq!(s["repeats"], 3);
    assert_eq!(s["results"]["base"]["rows"], 12);
    assert_eq!(s["results"]["base"]["missing"], 0);
    assert_eq!(
        s["results"]["base"]["overall"]["metrics"]["must_contain"]["n"],
        4
    );
    assert_eq!(s["spread"]["base"]["questions"], 4);
    assert_eq!(s["spread"]["base"]["must_contain_unstable"], 0);
    let md = env.text("o3/report.md");
    assert!(
        md.contains("## Repeats: per-question spread (3 runs per question)"),
        "{md}"
    );
    // Replayed with no provider, every repeat answers from its own exchanges.
    std::fs::write(env.path("fixture-a.json"), "{}").unwrap();
    let o = env
        .cmd(&["a.yaml"], "o3r")
        .args(["--variants", "base", "--repeats", "3", "--replay"])
        .arg(&c3)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(env.rows("o3r").len(), 12);
    // Resuming with another --repeats is refused.
    let o = env
        .cmd(&["a.yaml"], "o3")
        .args([
            "--variants",
            "base",
            "--repeats",
            "2",
            "--resume",
            "--replay",
        ])
        .arg(&c3)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--repeats: 3 (before) vs 2 (now)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_table_opens_a_single_spec_report_and_the_hard_subset_follows_hard_and_kinds() {
    // q0 (direct, hard: true) is found by the retriever; q1 (paraphrase) is not.
    let mut q0 = item("q0", "direct");
    q0["hard"] = json!(true);
    let mut q1 = item("q1", "paraphrase");
    q1["question"] = json!("Who owns a value?");
    let env = Env::new(&[q0, q1]);
    let o = env
        .cmd(&["a.yaml"], "out")
        .args(["--variants", "base"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = env.text("out/report.md");
    let first = md.lines().find(|l| l.starts_with("## ")).unwrap();
    assert_eq!(first, "## Cost and quality per arm");
    assert!(md.contains("variants: base"), "{md}");
    let s = env.summary("out");
    let hard = &s["table"][0]["recall_hard"];
    assert_eq!(hard["n"], 2, "{hard}");
    assert_eq!(hard["value"], 0.5, "{hard}");
    assert_eq!(s["hard_kinds"], json!(["paraphrase", "multi_hop"]));
    // The judge metrics fill their columns (the offline judge by default).
    let f = s["table"][0]["faithfulness"]["value"].as_f64();
    assert!(
        f.is_some_and(|v| (0.0..=1.0).contains(&v)),
        "{}",
        s["table"][0]
    );
    // --hard direct: q0 by its field, q1 is no longer hard.
    let o = env
        .cmd(&["a.yaml"], "out2")
        .args(["--variants", "base", "--hard", "direct"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = env.summary("out2");
    assert_eq!(s["table"][0]["recall_hard"]["n"], 1);
    assert_eq!(s["table"][0]["recall_hard"]["value"], 1.0);
    // A `hard` that is not a boolean is a bad line.
    let mut bad = item("q9", "direct");
    bad["hard"] = json!("yes");
    std::fs::write(env.path("data.jsonl"), format!("{bad}\n")).unwrap();
    let o = env.cmd(&["a.yaml"], "out3").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("`hard` must be true or false"),
        "{}",
        stderr(&o)
    );
}

/// Seed 004's iterations are retrieval passes: an arm whose entry is not the retrieve
/// node (a classifier or any step up front) still counts each pass, so its
/// iteration delta and mean iterations are not stuck at 1.
#[test]
fn iterations_count_retrieval_passes_when_the_entry_is_another_node() {
    const SPEC_C: &str = r#"version: 1
name: arm_c
state:
  schema:
    type: object
    properties:
      question: {type: string}
      documents: {type: array}
      passes: {type: integer}
      answer: {type: string}
    required: [question]
  initial: {passes: 0}
  reducers: {passes: add}
models:
  m: {provider: scripted, params: {file: fixture-a.json}}
retrievers:
  docs: {kind: bm25, corpus: corpus, top_k: 1}
output: {answer: answer, documents: documents}
limits: {max_steps: 20}
entry: start
nodes:
  start: {kind: update, update: {passes: "0"}}
  retrieve: {kind: retrieve, retriever: docs, query: "{{ question }}", update: {documents: output, passes: "1"}}
  say: {kind: llm, model: m, prompt: {user: "{{ question }}"}, update: {answer: output}}
edges:
  start: retrieve
  retrieve:
    - when: passes < 3
      to: retrieve
    - else: say
  say: END
"#;
    let env = Env::new(&dataset(2));
    std::fs::write(env.path("c.yaml"), SPEC_C).unwrap();
    let o = env.cmd(&["c.yaml"], "out").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rows = std::fs::read_to_string(env.path("out/results.jsonl")).unwrap();
    for line in rows.lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        assert_eq!(r["retrieved"].as_array().unwrap().len(), 3, "{r}");
        assert_eq!(
            r["iterations"], 3,
            "three retrieval passes, one entry visit: {r}"
        );
    }
}

/// A `--hard` kind that no question has is warned about (a typo would silently
/// shrink the hard subset), and a kind given twice counts once.
#[test]
fn an_unknown_or_repeated_hard_kind_is_reported() {
    let env = Env::new(&dataset(2));
    let o = env
        .cmd(&["a.yaml"], "out")
        .args(["--variants", "base", "--hard", "nosuch,direct,direct"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("--hard: no question of") && err.contains("kind `nosuch`"),
        "{err}"
    );
    assert!(err.contains("kinds: direct, paraphrase"), "{err}");
    assert_eq!(
        env.summary("out")["hard_kinds"],
        json!(["nosuch", "direct"])
    );
}
