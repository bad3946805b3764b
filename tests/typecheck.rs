//! The type checker (issue 12 items 2, 3, 5): token columns of its findings, `{% set %}`
//! scoping compared with what minijinja renders, and the `format` policy at run time.
use ragloop::diag::{Code, Severity};
use ragloop::jinja;
use ragloop::runtime::state::SchemaCheck;
use ragloop::spec::source::Sources;
use ragloop::validate::types::{self, Ty, Vars};
use ragloop::validate::{validate_file, validate_str, Options};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Invalid specs with an `# expect-col: N` header: the finding of the expected code is
/// at that column of the expected line (the token, not the whole expression).
#[test]
fn findings_point_at_the_token_column() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/specs/invalid");
    let mut checked = 0;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let Some(col) = text
            .lines()
            .take(4)
            .find_map(|l| l.strip_prefix("# expect-col: "))
        else {
            continue;
        };
        let col: u32 = col.trim().parse().unwrap();
        let code = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect: "))
            .unwrap()
            .trim()
            .to_string();
        let (suffix, line) = match text
            .lines()
            .take(3)
            .find_map(|l| l.split("expect-at: ").nth(1))
        {
            Some(at) => {
                let at = at.split_whitespace().next().unwrap();
                let (f, l) = at.rsplit_once(':').unwrap();
                (f.to_string(), l.parse::<u32>().unwrap())
            }
            None => {
                let marker = format!("# <- {code}");
                let line = text.lines().position(|l| l.contains(&marker)).unwrap() as u32 + 1;
                (
                    path.file_name().unwrap().to_string_lossy().into_owned(),
                    line,
                )
            }
        };
        let mut sources = Sources::new();
        let outcome = validate_file(&path, &mut sources, &Options::default());
        let got: Vec<String> = outcome
            .diagnostics
            .iter()
            .filter_map(|d| {
                d.span.map(|s| {
                    format!(
                        "{} {}:{}:{}",
                        d.code.as_str(),
                        sources.get(s.file).path.display(),
                        s.line,
                        s.col
                    )
                })
            })
            .collect();
        let found = outcome.diagnostics.iter().any(|d| {
            d.code.as_str() == code
                && d.span.is_some_and(|s| {
                    s.line == line
                        && s.col == col
                        && sources
                            .get(s.file)
                            .path
                            .to_string_lossy()
                            .ends_with(&suffix)
                })
        });
        assert!(
            found,
            "{}: expected {code} at {suffix}:{line}:{col}, got {got:?}",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} specs with expect-col");
}

const SPEC: &str = r#"
version: 1
name: w
root: .
state:
  schema:
    type: object
    properties:
      question: {type: string}
      answer: {type: string}
      flag: {type: boolean}
models:
  m: {provider: scripted}
output:
  answer: answer
entry: gen
nodes:
  gen:
    kind: llm
    model: m
    prompt:
      user: "{% if flag %}{% set tone = 'short' %}{% endif %}Answer {{ question }} in a {{ tone }} way"
    update:
      answer: output
edges:
  gen: END
"#;

/// A name set in only some `{% if %}` branches: a warning (W013) at the read.
#[test]
fn set_in_some_branches_is_a_warning_at_the_read() {
    let mut sources = Sources::new();
    let outcome = validate_str(Path::new("w.yaml"), SPEC, &mut sources, &Options::default());
    let w: Vec<_> = outcome
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::MaybeUndefined)
        .collect();
    assert_eq!(w.len(), 1, "{:?}", outcome.diagnostics);
    assert_eq!(w[0].severity, Severity::Warning);
    let span = w[0].span.unwrap();
    let line = SPEC.lines().nth(span.line as usize - 1).unwrap();
    let at: String = line.chars().skip(span.col as usize - 1).take(4).collect();
    assert_eq!(at, "tone");
    assert!(
        outcome.is_valid(),
        "a warning only: {:?}",
        outcome.diagnostics
    );
    // Set in every branch: no finding at all (today's E041 is gone).
    let fixed = SPEC.replace(
        "{% endif %}",
        "{% else %}{% set tone = 'long' %}{% endif %}",
    );
    let outcome = validate_str(
        Path::new("w.yaml"),
        &fixed,
        &mut Sources::new(),
        &Options::default(),
    );
    assert!(outcome.diagnostics.is_empty(), "{:?}", outcome.diagnostics);
}

/// What the checker says of a template: `Ok` (no finding), `Maybe` (W013), `Error` (E041).
#[derive(Debug, PartialEq, Clone, Copy)]
enum Verdict {
    Ok,
    Maybe,
    Error,
}

fn checker_verdict(template: &str) -> Verdict {
    let mut vars = Vars::new(false);
    vars.insert("c", Ty::Bool);
    vars.insert("d", Ty::Bool);
    vars.insert("items", Ty::Array(Box::new(Ty::Int)));
    let findings = types::template(template, &vars);
    if findings.iter().any(|f| f.code == Code::TemplateUnknownVar) {
        Verdict::Error
    } else if findings.iter().any(|f| f.code == Code::MaybeUndefined) {
        Verdict::Maybe
    } else {
        assert!(findings.is_empty(), "{template}: {findings:?}");
        Verdict::Ok
    }
}

/// What minijinja does: renders the template under every combination of the inputs
/// (`c`, `d` true/false; `items` empty or not).
fn minijinja_verdict(template: &str) -> Verdict {
    let env = jinja::environment();
    let mut ok = 0;
    let mut failed = 0;
    for c in [true, false] {
        for d in [true, false] {
            for items in [json!([]), json!([1, 2])] {
                match env.render_str(template, json!({"c": c, "d": d, "items": items})) {
                    Ok(_) => ok += 1,
                    Err(_) => failed += 1,
                }
            }
        }
    }
    match (ok, failed) {
        (_, 0) => Verdict::Ok,
        (0, _) => Verdict::Error,
        _ => Verdict::Maybe,
    }
}

/// The checker's scoping agrees with minijinja's rendering on each shape.
#[test]
fn set_scoping_matches_what_minijinja_renders() {
    let cases = [
        // if: every branch, some branches, nested, elif
        "{% if c %}{% set x = 1 %}{% else %}{% set x = 2 %}{% endif %}{{ x }}",
        "{% if c %}{% set x = 1 %}{% endif %}{{ x }}",
        "{% if c %}{% set x = 1 %}{% elif d %}{% set x = 2 %}{% else %}{% set x = 3 %}{% endif %}{{ x }}",
        "{% if c %}{% set x = 1 %}{% elif d %}{% set x = 2 %}{% endif %}{{ x }}",
        "{% if c %}{% if d %}{% set x = 1 %}{% else %}{% set x = 2 %}{% endif %}{% else %}{% set x = 3 %}{% endif %}{{ x }}",
        "{% set x = 0 %}{% if c %}{% set x = 1 %}{% endif %}{{ x }}",
        // for / with / filter / set blocks / macros: their names end with the block
        "{% for i in items %}{% set x = i %}{% endfor %}{{ x }}",
        "{% for i in items %}{% set x = i %}{{ x }}{% endfor %}",
        "{% for i in items %}{% endfor %}{{ i }}",
        "{% for i in items %}{{ loop.index }}{% endfor %}",
        "{% with %}{% set x = 1 %}{% endwith %}{{ x }}",
        "{% with x = 1 %}{{ x }}{% endwith %}",
        "{% with x = 1 %}{% endwith %}{{ x }}",
        "{% filter upper %}{% set x = 'a' %}{% endfilter %}{{ x }}",
        "{% set x %}text{% endset %}{{ x }}",
        "{% macro m(a) %}{% set y = a %}{{ y }}{% endmacro %}{{ m(1) }}",
        "{% macro m(a) %}{% set y = a %}{% endmacro %}{{ m(1) }}{{ y }}",
        "{% if c %}{% for i in items %}{% set x = i %}{% endfor %}{% endif %}{{ x }}",
        "{% for i in items %}{% if c %}{% set x = 1 %}{% else %}{% set x = 2 %}{% endif %}{{ x }}{% endfor %}",
        "{% set ns = namespace(v=0) %}{% for i in items %}{% set ns.v = i %}{% endfor %}{{ ns.v }}",
        "{% for i in items %}{% else %}{% set x = 1 %}{% endfor %}{{ x }}",
        "{% set x %}{% set y = 1 %}{% endset %}{{ y }}",
        "{% autoescape true %}{% set x = 1 %}{% endautoescape %}{{ x }}",
        // `is defined` guards a maybe-set name: the test itself and the guarded read
        "{% if c %}{% set x = 1 %}{% endif %}{% if x is defined %}{{ x }}{% endif %}",
        "{% if c %}{% set x = 1 %}{% endif %}{{ x is defined }}",
        "{{ nope }}",
    ];
    for t in cases {
        let want = minijinja_verdict(t);
        let got = checker_verdict(t);
        assert_eq!(got, want, "{t}: checker {got:?}, minijinja {want:?}");
    }
    // The checker does not correlate conditions: two `if`s that together cover every
    // case still warn (a warning, never an error).
    let t = "{% if c %}{% set x = 1 %}{% endif %}{% if not c %}{% set x = 2 %}{% endif %}{{ x }}";
    assert_eq!(minijinja_verdict(t), Verdict::Ok);
    assert_eq!(checker_verdict(t), Verdict::Maybe);
}

/// Policy: structured outputs (and the state) assert `format`.
#[test]
fn formats_are_asserted_at_run_time() {
    let check = SchemaCheck::new(&json!({
        "type": "object",
        "properties": {"when": {"type": "string", "format": "date-time"}}
    }))
    .unwrap();
    assert!(check
        .check(&json!({"when": "2026-12-01T10:00:00Z"}))
        .is_ok());
    let err = check.check(&json!({"when": "yesterday"})).unwrap_err();
    assert!(err.to_string().contains("date-time"), "{err}");
}

/// The same typed state as the fuzz target's direct calls.
const FUZZ_STATE: &str = r#"{"type": "object", "properties": {
    "verdict": {"type": "string", "enum": ["yes", "no"]},
    "n": {"type": "integer"},
    "documents": {"type": "array", "items": {"type": "object", "properties": {
        "id": {"type": "string"}, "content": {"type": "string"}}}},
    "grade": {"type": ["object", "null"], "properties": {"ok": {"type": "boolean"}}}
}}"#;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
    /// Random token soup through the type checker (as the fuzz target does): no panic,
    /// and every finding's range lies inside the text on char boundaries.
    #[test]
    fn type_checker_never_panics_on_token_soup(tokens in proptest::collection::vec(
        proptest::sample::select(vec![
            "verdict", "n", "documents", "grade", "x", ".", "id", "contnet", "ok", "[0]", "|", "length",
            "first", "default(1)", "upper", "==", "!=", ">", "<=", "+", "-", "~", "in", "not", "and",
            "or", "is defined", "'Yes'", "'yes'", "\"3\"", "3", "none", "(", ")", "[", "]", ",",
            "{{", "}}", "{%", "%}", "if", "else", "endif", "for", "endfor", "set", "=", "with",
            "endwith", "é", "\n", " ",
        ]), 0..40)) {
        let text = tokens.join(" ");
        let vars = Vars::of_state_schema_json(FUZZ_STATE);
        for f in types::expression(&text, &vars).1.into_iter().chain(types::template(&text, &vars)) {
            proptest::prop_assert!(text.get(f.range.clone()).is_some(), "{text:?}: {f:?}");
        }
    }
}
