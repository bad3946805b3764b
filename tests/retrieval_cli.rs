// `ragloop index` end to end: summary lines, reuse, default cache location, exit codes.

use std::fs;
use std::path::Path;

use assert_cmd::Command;

fn ragloop() -> Command {
    let mut cmd = Command::cargo_bin("ragloop").expect("binary");
    cmd.env_remove("RAGLOOP_CACHE_DIR")
        .env_remove("XDG_CACHE_HOME");
    cmd
}

fn corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(
        dir.path().join("a.md"),
        "# A\n\nSome text about borrowing.\n",
    )
    .expect("write");
    fs::write(dir.path().join("b.bin.txt"), b"\0\0binary").expect("write");
    dir
}

fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn builds_then_reuses_then_forces() {
    let c = corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let dest = out.path().join("idx");
    let first = stdout_of(ragloop().arg("index").arg(c.path()).arg("--out").arg(&dest));
    assert!(
        first.starts_with("indexed 1 files into 1 chunks (1 skipped: 1 unreadable) in "),
        "{first}"
    );
    assert!(
        first
            .trim_end()
            .ends_with(&format!("-> {}", dest.display())),
        "{first}"
    );
    let second = stdout_of(ragloop().arg("index").arg(c.path()).arg("--out").arg(&dest));
    assert!(
        second.starts_with("reused index") && second.contains("(unchanged corpus)"),
        "{second}"
    );
    let third = stdout_of(
        ragloop()
            .arg("index")
            .arg(c.path())
            .arg("--out")
            .arg(&dest)
            .arg("--force"),
    );
    assert!(third.starts_with("indexed"), "{third}");
    // The binary file is reported on stderr.
    let out = ragloop()
        .arg("index")
        .arg(c.path())
        .arg("--out")
        .arg(&dest)
        .arg("--force")
        .output()
        .expect("run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("binary"));
}

fn only_dir_under(p: &Path) -> std::path::PathBuf {
    let entries: Vec<_> = fs::read_dir(p)
        .expect("ls")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries[0].clone()
}

#[test]
fn default_location_follows_the_environment() {
    let c = corpus();
    let cache = tempfile::tempdir().expect("tempdir");
    stdout_of(
        ragloop()
            .arg("index")
            .arg(c.path())
            .env("RAGLOOP_CACHE_DIR", cache.path()),
    );
    let idx = only_dir_under(&cache.path().join("indexes"));
    let name = idx
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    assert_eq!(name.len(), 16);
    assert!(name.chars().all(|ch| ch.is_ascii_hexdigit()));
    assert!(idx.join("manifest.json").is_file());

    let xdg = tempfile::tempdir().expect("tempdir");
    stdout_of(
        ragloop()
            .arg("index")
            .arg(c.path())
            .env("XDG_CACHE_HOME", xdg.path()),
    );
    assert_eq!(
        only_dir_under(&xdg.path().join("ragloop/indexes")).file_name(),
        idx.file_name()
    );

    let home = tempfile::tempdir().expect("tempdir");
    stdout_of(
        ragloop()
            .arg("index")
            .arg(c.path())
            .env("HOME", home.path()),
    );
    assert_eq!(
        only_dir_under(&home.path().join(".cache/ragloop/indexes")).file_name(),
        idx.file_name()
    );
}

#[test]
fn exit_codes() {
    let out = tempfile::tempdir().expect("tempdir");
    let run = |cmd: &mut Command| {
        let o = cmd.output().expect("run");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let (code, err) = run(ragloop()
        .arg("index")
        .arg(out.path().join("missing"))
        .arg("--out")
        .arg(out.path().join("i")));
    assert_eq!(code, Some(1));
    assert!(
        err.contains("corpus directory not found") && err.contains("missing"),
        "{err}"
    );
    let empty = tempfile::tempdir().expect("tempdir");
    let (code, err) = run(ragloop()
        .arg("index")
        .arg(empty.path())
        .arg("--out")
        .arg(out.path().join("i")));
    assert_eq!(code, Some(1));
    assert!(err.contains("no indexable files in"), "{err}");
    assert_eq!(run(ragloop().arg("index")).0, Some(2));
    assert_eq!(
        run(ragloop().arg("index").arg(".").arg("--no-such-flag")).0,
        Some(2)
    );
}

/// A spec whose retriever reads `rust-docs:book` (the corpus value is on line 11,
/// column 40) and a fixture answering its one llm node: `tests/specs/fixtures/rust_docs.yaml`.
pub(crate) fn rust_docs_spec() -> String {
    crate::spec_fixtures::spec("rust_docs")
}

/// A project with [`rust_docs_spec`] and a `rustc` stand-in whose sysroot holds no
/// documentation (as when the `rust-docs` component is not installed).
#[cfg(unix)]
fn project_without_rust_docs() -> (tempfile::TempDir, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let sysroot = dir.path().join("sysroot");
    fs::create_dir_all(sysroot.join("lib")).expect("sysroot");
    let rustc = dir.path().join("fake-rustc");
    fs::write(&rustc, format!("#!/bin/sh\necho '{}'\n", sysroot.display())).expect("rustc");
    fs::set_permissions(&rustc, fs::Permissions::from_mode(0o755)).expect("chmod");
    fs::write(dir.path().join("spec.yaml"), rust_docs_spec()).expect("spec");
    fs::write(dir.path().join("fixture.json"), r#"{"say": ["an answer"]}"#).expect("fixture");
    (dir, rustc)
}

#[cfg(unix)]
#[test]
fn validate_reports_rust_docs_that_are_not_installed() {
    let (dir, rustc) = project_without_rust_docs();
    let spec = dir.path().join("spec.yaml");
    let out = ragloop()
        .env("RUSTC", &rustc)
        .args(["validate", "--format", "json"])
        .arg(&spec)
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let d = &v["diagnostics"][0];
    assert_eq!(v["errors"], 1, "{v}");
    assert_eq!(d["code"], "E030", "{v}");
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(11), Some(40)),
        "{v}"
    );
    let message = d["message"].as_str().unwrap();
    assert!(
        message.starts_with("corpus `rust-docs:book`: the Rust documentation is not installed: ")
            && message.contains("sysroot/share/doc/rust/html does not exist"),
        "{message}"
    );
    assert!(
        d["help"]
            .as_str()
            .unwrap()
            .contains("rustup component add rust-docs"),
        "{v}"
    );
    // Human output: file:line:column and the hint.
    let out = ragloop()
        .env("RUSTC", &rustc)
        .arg("validate")
        .arg(&spec)
        .output()
        .expect("run");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("spec.yaml:11:40"), "{text}");
    assert!(
        text.contains("help: `rustup component add rust-docs`"),
        "{text}"
    );
    // An environment check: skipped on request.
    ragloop()
        .env("RUSTC", &rustc)
        .args(["validate", "--no-environment"])
        .arg(&spec)
        .assert()
        .code(0);
}

#[cfg(unix)]
#[test]
fn run_fails_before_any_call_when_rust_docs_are_not_installed() {
    let (dir, rustc) = project_without_rust_docs();
    let trace = dir.path().join("trace.jsonl");
    let out = ragloop()
        .env("RUSTC", &rustc)
        .env("RAGLOOP_CACHE_DIR", dir.path().join("cache"))
        .arg("run")
        .arg(dir.path().join("spec.yaml"))
        .args(["--question", "q", "--trace"])
        .arg(&trace)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("corpus `rust-docs:book`: the Rust documentation is not installed: ")
            && err.contains("(`rustup component add rust-docs` installs it)"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("an answer"));
    let steps = fs::read_to_string(&trace).unwrap_or_default();
    assert!(!steps.contains("\"node\""), "{steps}");
}

#[test]
fn validate_reports_a_rustc_that_cannot_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = dir.path().join("spec.yaml");
    fs::write(&spec, rust_docs_spec()).expect("spec");
    let out = ragloop()
        .env("RUSTC", dir.path().join("no-such-rustc"))
        .args(["validate", "--format", "json"])
        .arg(&spec)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let d = &v["diagnostics"][0];
    assert_eq!(d["code"], "E030", "{v}");
    assert_eq!(d["line"], 11, "{v}");
    assert!(
        d["message"].as_str().unwrap().contains("no-such-rustc"),
        "{v}"
    );
    assert!(d["help"].as_str().unwrap().contains("$RUSTC"), "{v}");
}
