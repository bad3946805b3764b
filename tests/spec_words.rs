//! Messages speak the spec's words: every value of the shipped and valid specs is
//! replaced, one at a time, by values of every wrong shape, and no diagnostic (message
//! or help) may name a Rust type or serde's vocabulary.
use ragloop::spec::source::Sources;
use ragloop::validate::{validate_str, Options};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Words that only make sense to someone who read the Rust source.
const TYPE_SPEAK: &[&str] = &[
    "struct ",
    "unknown variant",
    "variant of",
    "variant identifier",
    "enum ",
    "u8",
    "u16",
    "u32",
    "u64",
    "usize",
    "i32",
    "i64",
    "f32",
    "f64",
    " map",
    "sequence",
    "unit value",
    "expected option",
    "newtype",
    "tuple",
    "Vec<",
    "IndexMap",
    "Option<",
    "floating point",
];

/// Whether `text` contains `word` as type-speak (" map" only as a word, not "mapping").
fn speaks_rust(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let next = text[i + word.len()..].chars().next();
        !(word == " map" && next.is_some_and(char::is_alphabetic))
    })
}

fn paths(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(prefix.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                prefix.push(k.clone());
                paths(x, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                prefix.push(i.to_string());
                paths(x, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn set(v: &mut Value, path: &[String], new: Value) {
    let mut cur = v;
    for s in path {
        cur = match cur {
            Value::Object(m) => m.get_mut(s).unwrap(),
            Value::Array(a) => &mut a[s.parse::<usize>().unwrap()],
            _ => unreachable!(),
        };
    }
    *cur = new;
}

fn specs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    vec![
        root.join("tests/specs/valid/minimal.yaml"),
        root.join("graphs/crag-web.yaml"),
    ]
}

#[test]
fn no_rust_type_names_in_messages() {
    let wrong = [
        json!("x"),
        json!(3.5),
        json!(-1),
        json!(true),
        json!(null),
        json!([1]),
        json!({"zz": 1}),
    ];
    let mut leaks = BTreeSet::new();
    let mut seen = 0usize;
    for spec in specs() {
        let text = std::fs::read_to_string(&spec).unwrap();
        let mut sources = Sources::new();
        let base = validate_str(&spec, &text, &mut sources, &Options::default());
        let raw = base.spec.as_ref().unwrap().raw.clone();
        let mut all = Vec::new();
        paths(&raw, &mut Vec::new(), &mut all);
        for path in all.iter().filter(|p| !p.is_empty()) {
            for w in &wrong {
                let mut v = raw.clone();
                // Variants repeat every check per variant: keep them only when the
                // mutation is inside one.
                if path[0] != "variants" {
                    v.as_object_mut().unwrap().shift_remove("variants");
                }
                set(&mut v, path, w.clone());
                // JSON is YAML: the mutated spec is fed back as text.
                let text = serde_json::to_string_pretty(&v).unwrap();
                let mut sources = Sources::new();
                let out = validate_str(&spec, &text, &mut sources, &Options::default());
                for d in &out.diagnostics {
                    seen += 1;
                    let all_text = format!("{} {}", d.message, d.help.clone().unwrap_or_default());
                    for word in TYPE_SPEAK {
                        if speaks_rust(&all_text, word) {
                            leaks.insert(format!("{} [{word}] {}", path.join("."), all_text));
                        }
                    }
                }
            }
        }
    }
    assert!(seen > 1000, "only {seen} diagnostics");
    assert!(
        leaks.is_empty(),
        "{} messages in Rust's words:\n{}",
        leaks.len(),
        leaks.into_iter().collect::<Vec<_>>().join("\n")
    );
}

fn diagnostics_of(fixture: &str) -> Vec<ragloop::diag::Diagnostic> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/specs/invalid")
        .join(fixture);
    let mut sources = Sources::new();
    ragloop::validate::validate_file(&path, &mut sources, &Options::default()).diagnostics
}

#[test]
fn yaml_boolean_when_gets_a_hint_to_quote_it() {
    let diags = diagnostics_of("E004_when_yaml_boolean.yaml");
    let d = diags.iter().find(|d| d.code.as_str() == "E004").unwrap();
    assert!(
        d.message.contains("expected a string, not `true`"),
        "{}",
        d.message
    );
    assert!(
        d.help.as_deref().unwrap_or("").contains("quote it"),
        "{d:?}"
    );
}

#[test]
fn dead_arms_name_the_nodes_they_cut_off() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/specs/warnings/W003_always_true_arm.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().position(|l| l.contains("# <- W003")).unwrap() as u32 + 1;
    let mut sources = Sources::new();
    let diags =
        ragloop::validate::validate_file(&path, &mut sources, &Options::default()).diagnostics;
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert_eq!(d.code.as_str(), "W003");
    assert_eq!(d.span.unwrap().line, line);
    assert!(
        d.message.contains("the `else` arm is never taken")
            && d.message.contains("`rewrite` becomes unreachable"),
        "{}",
        d.message
    );
}
