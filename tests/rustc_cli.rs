// `rust-docs:` corpora and a misbehaving `$RUSTC`: a rustc that hangs, fails, prints
// nothing or a relative path, an empty `$RUSTC`, a sysroot without the book.
#![cfg(unix)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;

use super::retrieval_cli::rust_docs_spec;

fn ragloop() -> Command {
    let mut cmd = Command::cargo_bin("ragloop").expect("binary");
    cmd.env_remove("RAGLOOP_CACHE_DIR")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("RAGLOOP_RUSTC_TIMEOUT_SECS");
    cmd
}

/// A project with [`rust_docs_spec`] and a `rustc` stand-in running `script`.
fn project(script: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rustc = dir.path().join("fake-rustc");
    fs::write(&rustc, format!("#!/bin/sh\n{script}\n")).expect("rustc");
    fs::set_permissions(&rustc, fs::Permissions::from_mode(0o755)).expect("chmod");
    fs::write(dir.path().join("spec.yaml"), rust_docs_spec()).expect("spec");
    fs::write(dir.path().join("fixture.json"), r#"{"say": ["an answer"]}"#).expect("fixture");
    (dir, rustc)
}

/// `validate --format json` with `$RUSTC` set: (exit code, first diagnostic).
fn validate(dir: &Path, rustc: &std::ffi::OsStr) -> (Option<i32>, serde_json::Value) {
    let out = ragloop()
        .env("RUSTC", rustc)
        .env("RAGLOOP_RUSTC_TIMEOUT_SECS", "1")
        .args(["validate", "--format", "json"])
        .arg(dir.join("spec.yaml"))
        .timeout(Duration::from_secs(60))
        .output()
        .expect("run");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    (out.status.code(), v["diagnostics"][0].clone())
}

#[test]
fn a_rustc_that_never_answers_is_stopped_and_reported() {
    // No `exec`: the shell's own child keeps the pipes open after the shell is killed.
    let (dir, rustc) = project("sleep 30");
    let started = Instant::now();
    let (code, d) = validate(dir.path(), rustc.as_os_str());
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(code, Some(1), "{d}");
    assert_eq!(d["code"], "E030", "{d}");
    let message = d["message"].as_str().unwrap();
    assert!(
        message.contains("fake-rustc --print sysroot` ($RUSTC) did not answer within 1 s"),
        "{message}"
    );

    let started = Instant::now();
    let out = ragloop()
        .env("RUSTC", &rustc)
        .env("RAGLOOP_RUSTC_TIMEOUT_SECS", "0.5")
        .env("RAGLOOP_CACHE_DIR", dir.path().join("cache"))
        .arg("run")
        .arg(dir.path().join("spec.yaml"))
        .args(["--question", "q"])
        .timeout(Duration::from_secs(60))
        .output()
        .expect("run");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("did not answer within 0.5 s"), "{err}");
}

#[test]
fn a_bad_rustc_timeout_is_named() {
    let (dir, rustc) = project("echo /nowhere");
    let out = ragloop()
        .env("RUSTC", &rustc)
        .env("RAGLOOP_RUSTC_TIMEOUT_SECS", "soon")
        .args(["validate", "--format", "json"])
        .arg(dir.path().join("spec.yaml"))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("RAGLOOP_RUSTC_TIMEOUT_SECS is `soon`"),
        "{text}"
    );
}

#[test]
fn a_failing_rustc_is_quoted() {
    let (dir, rustc) = project(
        "echo \"  error: toolchain 'nightly' is not installed  \" >&2\necho more >&2\nexit 1",
    );
    let (code, d) = validate(dir.path(), rustc.as_os_str());
    assert_eq!(code, Some(1), "{d}");
    let message = d["message"].as_str().unwrap();
    assert!(
        message.contains(
            "exited with exit status: 1: error: toolchain 'nightly' is not installed / more"
        ),
        "{message}"
    );
}

#[test]
fn an_empty_or_relative_sysroot_is_an_error() {
    let (dir, rustc) = project("exit 0");
    let (code, d) = validate(dir.path(), rustc.as_os_str());
    assert_eq!(code, Some(1), "{d}");
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("printed no sysroot"),
        "{d}"
    );

    let (dir, rustc) = project("echo relative/sysroot");
    let (code, d) = validate(dir.path(), rustc.as_os_str());
    assert_eq!(code, Some(1), "{d}");
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("printed `relative/sysroot`, which is not an absolute path"),
        "{d}"
    );
}

#[test]
fn an_empty_rustc_variable_counts_as_unset() {
    let (dir, _) = project("exit 0");
    let unset = ragloop()
        .env_remove("RUSTC")
        .args(["validate", "--format", "json"])
        .arg(dir.path().join("spec.yaml"))
        .output()
        .expect("run");
    let (code, d) = validate(dir.path(), "".as_ref());
    let v: serde_json::Value = serde_json::from_slice(&unset.stdout).expect("json");
    assert_eq!(code, unset.status.code(), "{d}");
    assert_eq!(d, v["diagnostics"][0], "{d}");
    assert!(!d.to_string().contains("running ``"), "{d}");
}

#[test]
fn a_sysroot_without_the_book_gets_the_rust_docs_hint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sysroot = dir.path().join("sysroot");
    fs::create_dir_all(sysroot.join("share/doc/rust/html")).expect("html");
    let (project, rustc) = project(&format!("echo '{}'", sysroot.display()));
    let (code, d) = validate(project.path(), rustc.as_os_str());
    assert_eq!(code, Some(1), "{d}");
    assert_eq!(d["code"], "E030", "{d}");
    let message = d["message"].as_str().unwrap();
    assert!(
        message.contains(
            "html/book does not exist: `book` is not a folder of the installed Rust documentation"
        ),
        "{message}"
    );
    assert!(
        d["help"]
            .as_str()
            .unwrap()
            .contains("rustup component add rust-docs"),
        "{d}"
    );
}

/// A rustc's answer is remembered across processes (a process start of rustup's proxy
/// costs more than a whole offline run) and asked again when what picks the
/// toolchain changes: the rustc file itself, a `rust-toolchain.toml` in the current
/// directory, or when the remembered sysroot is gone.
#[test]
fn the_sysroot_is_asked_once_across_runs_until_the_toolchain_may_have_changed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sysroot = dir.path().join("sysroot");
    fs::create_dir_all(&sysroot).expect("sysroot");
    let count = dir.path().join("asked");
    let script = format!(
        "echo x >> '{}'\necho '{}'",
        count.display(),
        sysroot.display()
    );
    let (proj, rustc) = project(&script);
    let cache = dir.path().join("cache");
    let asked = || fs::read_to_string(&count).map_or(0, |t| t.lines().count());
    let validate = || {
        ragloop()
            .env("RUSTC", &rustc)
            .env("RAGLOOP_CACHE_DIR", &cache)
            .current_dir(proj.path())
            .args(["validate", "--format", "json", "spec.yaml"])
            .timeout(Duration::from_secs(60))
            .output()
            .expect("run")
    };
    let first = validate();
    let second = validate();
    assert_eq!(asked(), 1, "asked once for two runs");
    assert_eq!(
        first.stdout, second.stdout,
        "the same findings from the remembered sysroot"
    );
    // The rustc changes (an update, another toolchain behind the same name).
    fs::write(&rustc, format!("#!/bin/sh\n{script}\n")).expect("rustc");
    validate();
    assert_eq!(asked(), 2, "a changed rustc is asked again");
    // A toolchain file in the current directory can select another toolchain.
    fs::write(
        proj.path().join("rust-toolchain.toml"),
        "[toolchain]\nchannel = \"beta\"\n",
    )
    .expect("toolchain file");
    validate();
    assert_eq!(asked(), 3, "a new rust-toolchain.toml is asked again");
    validate();
    assert_eq!(asked(), 3);
    // The remembered sysroot is gone (toolchain uninstalled).
    fs::remove_dir_all(&sysroot).expect("remove");
    validate();
    assert_eq!(asked(), 4, "a sysroot that no longer exists is asked again");
}
