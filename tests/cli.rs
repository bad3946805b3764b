//! The `ragloop` binary: exit codes, output formats and hostile input.
use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn ragloop() -> Command {
    let mut cmd = Command::cargo_bin("ragloop").unwrap();
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn shipped_graphs_validate() {
    let out = ragloop()
        .args([
            "validate",
            "graphs/arsc.yaml",
            "graphs/arsc-canonical.yaml",
            "graphs/crag.yaml",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Default: every spec in ./graphs.
    ragloop().arg("validate").assert().code(0);
}

#[test]
fn every_invalid_spec_exits_1_with_its_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/specs/invalid");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let code = path.file_name().unwrap().to_string_lossy()[..4].to_string();
        let out = ragloop()
            .args(["validate", "--format", "json"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", path.display());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            v["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["code"] == code),
            "{}: {v}",
            path.display()
        );
        n += 1;
    }
    assert!(n >= 30);
}

#[test]
fn usage_errors_exit_2() {
    ragloop()
        .args(["validate", "--format", "xml", "graphs/crag.yaml"])
        .assert()
        .code(2);
    ragloop().args(["validate", "--bogus"]).assert().code(2);
    ragloop().arg("frobnicate").assert().code(2);
    let empty = tmp();
    ragloop().arg("validate").arg(empty.path()).assert().code(2);
    ragloop()
        .args(["graph", "graphs/crag.yaml", "--variant", "nope"])
        .assert()
        .code(2);
}

fn validate_one(path: &Path) -> (i32, serde_json::Value) {
    let out = ragloop()
        .args(["validate", "--format", "json"])
        .arg(path)
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or_default(),
    )
}

fn codes(v: &serde_json::Value) -> Vec<String> {
    v["diagnostics"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|d| d["code"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn hostile_files_get_diagnostics_not_panics() {
    let dir = tmp();
    let write = |name: &str, bytes: &[u8]| -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let cases: Vec<(PathBuf, &str)> = vec![
        (dir.path().join("missing.yaml"), "E007"),
        (write("empty.yaml", b""), "E001"),
        (
            write("binary.yaml", &[0x7f, b'E', b'L', b'F', 0, 0, 1, 2, 3]),
            "E008",
        ),
        (write("latin1.yaml", b"version: 1\nname: caf\xe9\n"), "E008"),
        (write("huge.yaml", &vec![b'#'; 10 * 1024 * 1024]), "E009"),
        (
            write(
                "deep.yaml",
                format!("a: {}{}", "[".repeat(200_000), "]".repeat(200_000)).as_bytes(),
            ),
            "E009",
        ),
        (
            write("deepmap.yaml", "{a: ".repeat(50_000).as_bytes()),
            "E009",
        ),
        (write("list.yaml", b"- 1\n- 2\n"), "E004"),
        (write("scalar.yaml", b"just text"), "E004"),
        (
            write("two_docs.yaml", b"version: 1\n---\nversion: 1\n"),
            "E010",
        ),
        (write("tabs.yaml", b"version: 1\n\tname: x\n"), "E001"),
        (write("noversion.yaml", b"name: x\n"), "E006"),
    ];
    for (path, code) in cases {
        let (status, v) = validate_one(&path);
        assert_eq!(status, 1, "{}: {v}", path.display());
        assert!(
            codes(&v).contains(&code.to_string()),
            "{}: expected {code}, got {v}",
            path.display()
        );
        for d in v["diagnostics"].as_array().unwrap() {
            assert!(d["message"].as_str().is_some_and(|m| !m.is_empty()));
        }
    }
}

#[test]
fn a_predicate_or_tag_with_a_hostile_operator_chain_is_refused_not_a_stack_overflow() {
    // minijinja folds constants recursively: a 50,000-term `or` overflowed the stack
    // (exit 134) in validate, in a `when` and in a prompt tag alike.
    let chain = (0..50_000)
        .map(|i| format!("question == 'q{i}'"))
        .collect::<Vec<_>>()
        .join(" or ");
    let spec = |when: &str, prompt: &str| {
        format!(
            r#"version: 1
name: t
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      answer: {{type: string}}
models:
  m: {{provider: offline}}
entry: a
nodes:
  a: {{kind: llm, model: m, prompt: {{user: "{prompt}"}}, update: {{answer: output}}}}
edges:
  a:
    - when: "{when}"
      to: END
    - else: END
"#
        )
    };
    let dir = tmp();
    for (name, text, code) in [
        ("when.yaml", spec(&chain, "{{ question }}"), "E042"),
        (
            "tag.yaml",
            spec("question == 'x'", &format!("{{{{ {chain} }}}}")),
            "E040",
        ),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let (status, v) = validate_one(&p);
        assert_eq!(status, 1, "{name}: {v}");
        assert!(codes(&v).contains(&code.to_string()), "{name}: {v}");
        assert!(v.to_string().contains("at most 1000"), "{name}: {v}");
    }
}

#[test]
fn alias_bomb_is_refused_quickly() {
    let dir = tmp();
    let mut s = String::from("version: 1\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 9].join(", ");
        s.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let p = dir.path().join("bomb.yaml");
    std::fs::write(&p, s).unwrap();
    let (status, v) = validate_one(&p);
    assert_eq!(status, 1);
    assert!(codes(&v).contains(&"E009".to_string()), "{v}");
}

#[test]
fn human_output_shows_the_source_line() {
    let out = ragloop()
        .args([
            "validate",
            "tests/specs/invalid/E022_edge_to_missing_node.yaml",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("error[E022]"), "{text}");
    assert!(
        text.contains("--> tests/specs/invalid/E022_edge_to_missing_node.yaml:81:12"),
        "{text}"
    );
    assert!(text.contains("  rewrite: retreive"), "{text}");
    assert!(text.contains("^^^^^^^^"), "{text}");
    assert!(text.contains("did you mean `retrieve`?"), "{text}");
}

#[test]
fn github_format_is_workflow_commands() {
    let out = ragloop()
        .args([
            "validate",
            "--format",
            "github",
            "tests/specs/invalid/E050_branch_without_else.yaml",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("::error "))
        .expect("an error line");
    assert!(
        line.contains("file=tests/specs/invalid/E050_branch_without_else.yaml,line=75,col="),
        "{line}"
    );
    assert!(line.contains("title=E050 branch without else::"), "{line}");
}

#[test]
fn deny_warnings_turns_warnings_into_failures() {
    let dir = tmp();
    let base = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/specs/valid/minimal.yaml"),
    )
    .unwrap();
    let spec = base
        .replace(
            "root: ..",
            &format!(
                "root: {}",
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/specs")
                    .display()
            ),
        )
        .replace(
            "    - when: n >= 3\n",
            "    - when: \"true\"\n      to: END\n    - when: n >= 3\n",
        );
    let p = dir.path().join("warn.yaml");
    std::fs::write(&p, spec).unwrap();
    let out = ragloop()
        .args(["validate", "--format", "json"])
        .arg(&p)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(codes(&v), vec!["W001"]);
    ragloop()
        .args(["validate", "--deny-warnings"])
        .arg(&p)
        .assert()
        .code(1);
}

#[test]
fn graph_exports_mermaid_and_dot() {
    let out = ragloop()
        .args(["graph", "graphs/crag.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let m = String::from_utf8(out.stdout).unwrap();
    assert!(m.starts_with("flowchart TD\n"));
    assert!(m.contains("__start__ --> n_retrieve"));
    assert!(m.contains("n_grade_answer -.->|\"answer_grade.grounded and answer_grade.addresses_question\"| __end__"), "{m}");
    assert!(m.contains("n_grade_documents -.->|\"else\"| n_rewrite"));

    let out = ragloop()
        .args(["graph", "graphs/arsc.yaml", "--format", "dot"])
        .output()
        .unwrap();
    let dot = String::from_utf8(out.stdout).unwrap();
    assert!(
        dot.contains(
            "\"rewriter\" -> \"END\" [style=dashed, label=\"iteration_count >= max_iterations\"];"
        ),
        "{dot}"
    );
    assert!(dot.contains("\"END\" [shape=doublecircle"));

    // Render through graphviz when it is installed (CI installs it and sets RAGLOOP_REQUIRE_GRAPHVIZ).
    let have_dot = std::process::Command::new("dot").arg("-V").output().is_ok();
    if !have_dot {
        assert!(
            std::env::var_os("RAGLOOP_REQUIRE_GRAPHVIZ").is_none(),
            "graphviz `dot` is required but missing"
        );
        eprintln!("note: graphviz not installed; DOT rendering not checked");
        return;
    }
    for spec in [
        "graphs/arsc.yaml",
        "graphs/arsc-canonical.yaml",
        "graphs/crag.yaml",
    ] {
        let out = ragloop()
            .args(["graph", spec, "--format", "dot"])
            .output()
            .unwrap();
        let mut child = std::process::Command::new("dot")
            .arg("-Tsvg")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&out.stdout).unwrap();
        let res = child.wait_with_output().unwrap();
        assert!(
            res.status.success(),
            "{spec}: {}",
            String::from_utf8_lossy(&res.stderr)
        );
        assert!(String::from_utf8_lossy(&res.stdout).contains("<svg"));
    }
}

#[cfg(unix)]
#[test]
fn a_fifo_prompt_is_refused_not_waited_on() {
    let dir = tmp();
    let fifo = dir.path().join("prompt.jinja");
    let status = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !status.is_ok_and(|s| s.success()) {
        eprintln!("note: mkfifo unavailable; skipped");
        return;
    }
    let spec = dir.path().join("fifo.yaml");
    std::fs::write(
        &spec,
        "version: 1\nname: f\nstate: {schema: {type: object, properties: {question: {type: string}, a: {type: string}}}}\nmodels: {m: {provider: scripted}}\nentry: g\nnodes:\n  g: {kind: llm, model: m, prompt: {user: {file: prompt.jinja}}, update: {a: output}}\nedges: {g: END}\n",
    )
    .unwrap();
    let (status, v) = validate_one(&spec);
    assert_eq!(status, 1, "{v}");
    assert!(codes(&v).contains(&"E007".to_string()), "{v}");
}

#[test]
fn graph_refuses_an_invalid_spec() {
    let out = ragloop()
        .args([
            "graph",
            "tests/specs/invalid/E022_edge_to_missing_node.yaml",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("E022"));
}
