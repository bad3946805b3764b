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
        first.starts_with("indexed 1 files into 1 chunks (1 skipped) in "),
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
