//! `ragloop run` output files and exit statuses through the binary: `--trace` and
//! `--record` never overwrite a file the spec loaded, a closed stdout ends quietly,
//! bad cassettes and bad flags are usage errors. No network.
use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A copy of the shipped CRAG project (graphs, prompts, schemas) in a temp dir.
fn crag_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for sub in ["graphs", "prompts/crag", "schemas"] {
        std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        for e in std::fs::read_dir(repo().join(sub)).expect("read_dir") {
            let e = e.expect("entry");
            if e.path().is_file() {
                std::fs::copy(e.path(), dir.path().join(sub).join(e.file_name())).expect("copy");
            }
        }
    }
    dir
}

fn ragloop(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("ragloop").expect("binary");
    c.env("RAGLOOP_CACHE_DIR", dir.join(".cache"))
        .env("XDG_CACHE_HOME", dir.join(".cache"))
        .current_dir(dir);
    c
}

#[test]
fn trace_and_record_never_overwrite_a_file_the_spec_loaded() {
    let dir = crag_copy();
    for (flag, file) in [
        ("--trace", "prompts/crag/generate.user.jinja"),
        ("--record", "prompts/crag/grade_documents.system.jinja"),
        ("--trace", "schemas/grading-result.json"),
        ("--record", "schemas/crag-state.json"),
    ] {
        let before = std::fs::read(dir.path().join(file)).expect("file");
        let o = ragloop(dir.path())
            .args([
                "run",
                "graphs/crag.yaml",
                "-q",
                "What does cargo check do?",
                flag,
                file,
            ])
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag} {file}: {err}");
        assert!(
            err.contains("would overwrite") && err.contains("an input of this run"),
            "{err}"
        );
        assert_eq!(
            std::fs::read(dir.path().join(file)).expect("file"),
            before,
            "{file} clobbered"
        );
    }
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let dir = crag_copy();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).expect("mkdir");
    std::fs::write(
        corpus.join("a.md"),
        "# Cargo check\n\nThe cargo check command checks your code compiles without producing an executable.\n",
    )
    .expect("write");
    for extra in [&["--json"][..], &[][..]] {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("ragloop"))
            .current_dir(dir.path())
            .env("RAGLOOP_CACHE_DIR", dir.path().join(".cache"))
            .args([
                "run",
                "graphs/crag.yaml",
                "-q",
                "What does cargo check do?",
                "--corpus",
            ])
            .arg(&corpus)
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        // Nobody reads the output (`ragloop run ... | true`).
        drop(child.stdout.take());
        let o = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{err}"
        );
        assert!(
            matches!(o.status.code(), Some(0 | 3)),
            "{:?}: {err}",
            o.status
        );
    }
}

#[test]
fn a_malformed_model_flag_is_a_usage_error_naming_the_flag() {
    let dir = crag_copy();
    let o = ragloop(dir.path())
        .args([
            "run",
            "graphs/crag.yaml",
            "-q",
            "x",
            "--model",
            "grader=openai",
        ])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--model grader=openai") && err.contains("model name"),
        "{err}"
    );
}

#[test]
fn an_empty_or_garbage_cassette_is_refused_at_load() {
    let dir = crag_copy();
    for (name, bytes, want) in [
        ("empty.jsonl", &b""[..], "empty cassette"),
        (
            "garbage.jsonl",
            &b"\xff\xfe\x00binary"[..],
            "not a cassette",
        ),
    ] {
        std::fs::write(dir.path().join(name), bytes).expect("write");
        let o = ragloop(dir.path())
            .args(["run", "graphs/crag.yaml", "-q", "x", "--replay", name])
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("--replay") && err.contains(want), "{err}");
    }
}

#[test]
fn eval_record_never_overwrites_a_file_the_spec_loaded() {
    let dir = crag_copy();
    std::fs::write(
        dir.path().join("data.jsonl"),
        "{\"id\": \"q1\", \"question\": \"What does cargo check do?\"}\n",
    )
    .expect("write");
    let file = "prompts/crag/rewrite.user.jinja";
    let before = std::fs::read(dir.path().join(file)).expect("file");
    let o = ragloop(dir.path())
        .args([
            "eval",
            "graphs/crag.yaml",
            "--dataset",
            "data.jsonl",
            "--out",
            "out",
        ])
        .args(["--record", file])
        .output()
        .expect("eval");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("would overwrite"), "{err}");
    assert_eq!(std::fs::read(dir.path().join(file)).expect("file"), before);
}
