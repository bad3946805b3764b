//! Root confinement (E073): a spec's `root` may not leave the directory ragloop runs
//! in or the spec's own tree unless `--allow-outside-root` is given, and no file
//! outside them is quoted in an error.
use assert_cmd::Command;

const SPEC: &str = r#"version: 1
name: escape
root: /
state:
  schema:
    type: object
    properties:
      question: {type: string}
      answer: {type: string}
models:
  m: {provider: scripted}
output: {answer: answer}
entry: ask
nodes:
  ask:
    kind: llm
    model: m
    prompt:
      user: {file: etc/passwd}
    update:
      answer: output
edges:
  ask: END
"#;

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spec.yaml"), SPEC).unwrap();
    dir
}

#[test]
fn root_outside_the_working_tree_is_refused_without_quoting_files() {
    let dir = project();
    for cmd in [&["validate"][..], &["graph"], &["run", "--question", "q"]] {
        let out = Command::cargo_bin("ragloop")
            .unwrap()
            .current_dir(dir.path())
            .args(cmd)
            .arg("spec.yaml")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{cmd:?}: {text}");
        assert!(text.contains("E073"), "{cmd:?}: {text}");
        assert!(
            !text.contains("root:x:0:0"),
            "{cmd:?} quoted /etc/passwd: {text}"
        );
    }
}

#[test]
fn allow_outside_root_lifts_the_confinement() {
    let dir = project();
    let out = Command::cargo_bin("ragloop")
        .unwrap()
        .current_dir(dir.path())
        .args(["validate", "--allow-outside-root", "spec.yaml"])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!text.contains("E073"), "{text}");
}
