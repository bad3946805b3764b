//! Property test of incremental variant checking: for random specs and variants
//! (variants that change updates, prompts, schemas, edges, the entry, state fields,
//! retrievers, `max_visits`, and add nodes), `check_variants` (incremental: only the
//! parts of the check a variant affects run again) reports exactly what checking every
//! merged spec in full reports ([`Mode::Full`]): the same codes, messages, spans,
//! labels and help, in the same order — and the in-place patch it merges most
//! variants with (`overlay::Patcher`) merges the same spec as `overlay::apply`.
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use ragloop::spec::load_spec_str;
use ragloop::spec::source::Sources;
use ragloop::validate::{check_variants_with, Mode, Options};
use serde_json::{json, Map, Value};
use std::path::Path;

/// `x.pipe(f)` = `f(x)` (keeps the catalogue below one expression per arm).
trait Pipe: Sized {
    fn pipe<T>(self, f: impl FnOnce(Self) -> T) -> T {
        f(self)
    }
}
impl<T> Pipe for T {}

/// A tiny deterministic generator (the case is its seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
}

const PREDICATES: &[&str] = &[
    "n < 3",
    "n >= 3",
    "grade == 'yes'",
    "grade == 'Yes'",
    "flag",
    "not flag",
    "nope > 1",
    "n > '3'",
    "true",
    "documents | length > 0",
    "n <",
];

fn update_value(r: &mut Rng, field: &str) -> Value {
    match field {
        "q" => r.pick(&[
            json!("output"),
            json!("'x'"),
            json!("q ~ 'y'"),
            json!(42),
            json!("nope"),
        ]),
        "n" => r.pick(&[
            json!("n + 1"),
            json!("n - 1"),
            json!(1),
            json!("'three'"),
            json!("n + 0.5"),
        ]),
        "flag" => r.pick(&[json!(true), json!("not flag"), json!(false)]),
        "documents" => r.pick(&[json!("output"), json!("[]")]),
        _ => r.pick(&[
            json!("'yes'"),
            json!("'maybe'"),
            json!("output.binary_score"),
        ]),
    }
}

fn prompt(r: &mut Rng) -> Value {
    r.pick(&[
        json!("Answer {{ q }}"),
        json!("{{ q.lenght }}"),
        json!("{% if flag %}{% set s = 1 %}{% endif %}{{ s }}"),
        json!("{{ nope }}"),
        json!("{% if q %}"),
        json!({"file": "prompts/ok.jinja"}),
        json!({"file": "prompts/bad.jinja"}),
        json!({"file": "prompts/missing.jinja"}),
    ])
}

fn schema(r: &mut Rng) -> Value {
    r.pick(&[
        json!({"type": "object", "properties": {"binary_score": {"type": "string", "enum": ["yes", "no"]}}}),
        json!({"type": "object", "properties": {"d": {"type": "string", "format": "datetime"}}}),
        json!({"type": "nope"}),
        json!("schemas/ok.json"),
        json!("schemas/broken.json"),
        json!("schemas/missing.json"),
    ])
}

fn node(r: &mut Rng, kind: &str) -> Value {
    let mut n = Map::new();
    n.insert("kind".into(), json!(kind));
    match kind {
        "retrieve" => {
            n.insert("retriever".into(), json!(r.pick(&["book", "book", "nope"])));
            n.insert(
                "query".into(),
                r.pick(&[json!("{{ q }}"), json!("{{ q.x }}")]),
            );
        }
        "llm" => {
            n.insert("model".into(), json!("m"));
            n.insert("prompt".into(), json!({"user": prompt(r)}));
            if r.chance(50) {
                n.insert("schema".into(), schema(r));
            }
        }
        _ => {}
    }
    let mut update = Map::new();
    for _ in 0..1 + r.below(2) {
        let field = r.pick(&["q", "n", "flag", "documents", "grade"]);
        update.insert(field.to_string(), update_value(r, field));
    }
    if kind == "update" || r.chance(70) {
        n.insert("update".into(), Value::Object(update));
    }
    if r.chance(20) {
        n.insert("max_visits".into(), json!(r.pick(&[0, 2, 3])));
    }
    Value::Object(n)
}

fn edge(r: &mut Rng, names: &[String], i: usize) -> Value {
    let next = |r: &mut Rng| -> Value {
        if r.chance(25) {
            json!("END")
        } else if r.chance(10) {
            json!("nowhere")
        } else {
            json!(names[r.below(names.len())])
        }
    };
    if r.chance(50) {
        let mut arms = Vec::new();
        for _ in 0..1 + r.below(2) {
            arms.push(json!({"when": r.pick(PREDICATES), "to": next(r)}));
        }
        if r.chance(90) {
            arms.push(json!({"else": next(r)}));
        }
        Value::Array(arms)
    } else if i + 1 < names.len() && r.chance(70) {
        json!(names[i + 1])
    } else {
        next(r)
    }
}

/// One variant's `set`: 1–3 changes from a catalogue of every kind of path.
fn variant(r: &mut Rng, names: &[String], kinds: &[&str]) -> Value {
    let mut set = Map::new();
    for _ in 0..1 + r.below(3) {
        let k = r.below(names.len());
        let name = &names[k];
        let (path, value) = match r.below(22) {
            0 | 1 => {
                let field = r.pick(&["q", "n", "flag", "documents", "grade"]);
                (
                    format!("nodes.{name}.update.{field}"),
                    update_value(r, field),
                )
            }
            2 if kinds[k] == "llm" => (format!("nodes.{name}.prompt.user"), prompt(r)),
            3 if kinds[k] == "llm" => (format!("nodes.{name}.schema"), schema(r)),
            4 => (format!("edges.{name}"), edge(r, names, k)),
            5 => (
                "state.schema.properties.n.type".to_string(),
                json!(r.pick(&["string", "integer", "number"])),
            ),
            6 => (
                "retrievers.book.top_k".to_string(),
                json!(r.pick(&[0, 3, 8])),
            ),
            7 => (format!("nodes.{name}.max_visits"), json!(r.pick(&[0, 2]))),
            8 => ("entry".to_string(), json!(r.pick(names))),
            9 => ("output.answer".to_string(), json!(r.pick(&["q", "zz"]))),
            10 => {
                let kind = r.pick(&["update", "llm", "retrieve"]);
                (format!("nodes.{name}"), node(r, kind))
            }
            11 => ("nodes.extra".to_string(), node(r, "update")),
            // Entries of the sections a variant is patched into in place (and the
            // faults that send it to the general merge: a path that does not exist,
            // an entry that does not type, another kind's option).
            12 => (
                "retrievers.book".to_string(),
                r.pick(&[
                    json!({"kind": "bm25", "corpus": "corpus", "top_k": 5}),
                    json!({"kind": "bm25", "corpus": "corpus", "embedding": "m"}),
                    json!({"kind": "bm25", "corpus": "corpus", "top_k": 0}),
                    json!({"kind": "nope", "corpus": "corpus"}),
                ]),
            ),
            13 => (
                r.pick(&["models.m.provider", "models.m.temperature", "models.m2"]),
                r.pick(&[
                    json!("scripted"),
                    json!("nope"),
                    json!(3),
                    json!({"provider": "scripted"}),
                ]),
            )
                .pipe(|(p, v)| (p.to_string(), v)),
            14 if kinds[k] == "llm" => (
                format!("nodes.{name}.model"),
                json!(r.pick(&["m", "m2", "nope"])),
            ),
            15 => (
                format!("nodes.{name}.kind"),
                json!(r.pick(&["update", "bogus"])),
            ),
            16 => (
                r.pick(&["nodes.missing.update.q", "tools.t.top_k", "edges.n0.x"])
                    .to_string(),
                json!("q"),
            ),
            17 => (
                r.pick(&["edges.extra", "edges.n0"]).to_string(),
                edge(r, names, k),
            ),
            18 if kinds[k] == "retrieve" => (
                format!("nodes.{name}.retriever"),
                json!(r.pick(&["book", "nope"])),
            ),
            19 => (
                format!("nodes.{name}.update"),
                r.pick(&[json!({"q": "'x'"}), json!({"n": "'three'"}), json!("nope")]),
            ),
            20 => (format!("nodes.{name}.unknown_key"), json!(1)),
            _ => (
                "state.reducers.n".to_string(),
                json!(r.pick(&["add", "append", "replace"])),
            ),
        };
        set.insert(path, value);
    }
    json!({ "set": set })
}

fn spec(seed: u64) -> String {
    let mut r = Rng(seed | 1);
    let count = 2 + r.below(5);
    let names: Vec<String> = (0..count).map(|i| format!("n{i}")).collect();
    let kinds: Vec<&str> = (0..count)
        .map(|_| r.pick(&["update", "llm", "retrieve"]))
        .collect();
    let mut nodes = Map::new();
    let mut edges = Map::new();
    for (i, name) in names.iter().enumerate() {
        nodes.insert(name.clone(), node(&mut r, kinds[i]));
        if r.chance(95) {
            edges.insert(name.clone(), edge(&mut r, &names, i));
        }
    }
    let state_schema = if r.chance(80) {
        json!({"type": "object", "properties": {
            "q": {"type": "string"},
            "n": {"type": "integer"},
            "flag": {"type": "boolean"},
            "documents": {"type": "array"},
            "grade": {"type": "string", "enum": ["yes", "no"]},
        }})
    } else {
        json!("schemas/state.json")
    };
    let mut variants = Map::new();
    for v in 0..1 + r.below(4) {
        variants.insert(format!("v{v}"), variant(&mut r, &names, &kinds));
    }
    let mut reducers = Map::new();
    if r.chance(30) {
        reducers.insert("n".into(), json!("add"));
    }
    let doc = json!({
        "version": 1,
        "name": "props",
        "state": {"schema": state_schema, "initial": {"n": 0}, "reducers": reducers},
        "models": {"m": {"provider": "scripted"}},
        "retrievers": {"book": {"kind": "bm25", "corpus": "corpus", "top_k": 3}},
        "output": {"answer": "q"},
        "entry": names[0],
        "nodes": nodes,
        "edges": edges,
        "variants": variants,
    });
    serde_json::to_string_pretty(&doc).unwrap()
}

fn fixture_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("prompts")).unwrap();
    std::fs::create_dir_all(p.join("schemas")).unwrap();
    std::fs::write(p.join("prompts/ok.jinja"), "Answer {{ q }}\n").unwrap();
    std::fs::write(p.join("prompts/bad.jinja"), "{{ q.lenght }} {{ nope }}\n").unwrap();
    std::fs::write(
        p.join("schemas/ok.json"),
        r#"{"type": "object", "properties": {"binary_score": {"type": "string", "enum": ["yes", "no"]}}}"#,
    )
    .unwrap();
    std::fs::write(p.join("schemas/broken.json"), "{\"type\": \"object\",}").unwrap();
    std::fs::write(
        p.join("schemas/state.json"),
        r#"{"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}, "flag": {"type": "boolean"}, "documents": {"type": "array"}, "grade": {"type": "string"}}}"#,
    )
    .unwrap();
    dir
}

/// The diagnostics of `check_variants_with` in `mode`, then each variant's merged
/// spec as `each` saw it (its name, raw value and typed spec: the in-place patch of
/// `Mode::Incremental` must merge exactly what `overlay::apply` merges).
fn diagnostics(path: &Path, text: &str, mode: Mode) -> Option<Vec<String>> {
    let mut sources = Sources::new();
    let loaded = load_spec_str(path, text, &mut sources).ok()?;
    let opts = Options {
        no_environment: true,
    };
    let mut merged = Vec::new();
    let checked = check_variants_with(loaded, &mut sources, &opts, mode, |m| {
        merged.push(format!("merged {:?}: {} {:?}", m.variant, m.raw, m.spec))
    });
    let mut out: Vec<String> = checked
        .diagnostics
        .iter()
        .map(|d| format!("{d:?}"))
        .collect();
    out.extend(merged);
    Some(out)
}

#[test]
fn incremental_equals_full() {
    let dir = fixture_dir();
    let path = dir.path().join("spec.yaml");
    let mut runner = TestRunner::new(Config {
        cases: 400,
        failure_persistence: None,
        ..Config::default()
    });
    let loaded = std::cell::Cell::new(0usize);
    let with_variant_findings = std::cell::Cell::new(0usize);
    runner
        .run(&any::<u64>(), |seed| {
            let text = spec(seed);
            let full = diagnostics(&path, &text, Mode::Full);
            let incremental = diagnostics(&path, &text, Mode::Incremental);
            if incremental != full {
                let (i, f) = (
                    incremental.unwrap_or_default(),
                    full.clone().unwrap_or_default(),
                );
                let only = |a: &[String], b: &[String]| {
                    a.iter()
                        .filter(|d| !b.contains(d))
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                prop_assert!(
                    false,
                    "incremental only:\n{}\nfull only:\n{}\n(same set, other order: {})\nspec:\n{}",
                    only(&i, &f),
                    only(&f, &i),
                    only(&i, &f).is_empty() && only(&f, &i).is_empty(),
                    text
                );
            }
            if let Some(f) = &full {
                loaded.set(loaded.get() + 1);
                let found = f.iter().any(|d| d.contains("variant: Some"));
                with_variant_findings.set(with_variant_findings.get() + usize::from(found));
            }
            Ok(())
        })
        .unwrap();
    // The generator must exercise the comparison: specs that load, and variants
    // whose findings differ from the base spec's.
    let (loaded, with_variant_findings) = (loaded.get(), with_variant_findings.get());
    println!("{loaded} of 400 specs loaded, {with_variant_findings} with findings of a variant");
    assert!(loaded > 200, "only {loaded} of 400 specs loaded");
    assert!(
        with_variant_findings > 50,
        "only {with_variant_findings} specs had findings of a variant"
    );
}
