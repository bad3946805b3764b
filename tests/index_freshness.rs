//! Index freshness without rehashing (issue 13 item 7): an unchanged corpus is
//! recognised by the stamps in the manifest (size, modification time, inode and change
//! time) and no file is read again; the content fingerprint stays the truth.

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use ragloop::retrieval::{BuildReport, Index, IndexOptions};

const FILES: [(&str, &str); 3] = [
    (
        "a.md",
        "# Alpha\n\nOwnership moves values between bindings.\n",
    ),
    (
        "b.md",
        "# Beta\n\nBorrowing lends a reference without moving.\n",
    ),
    (
        "sub/c.txt",
        "Lifetimes name how long a reference is valid.\n",
    ),
];

/// Writes `text` at `rel` with its modification time an hour ago, outside the racy
/// window in which a stamp is not trusted.
fn write_old(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    fs::write(&p, text).expect("write");
    set_mtime(&p, SystemTime::now() - Duration::from_secs(3600));
}

fn set_mtime(p: &Path, t: SystemTime) {
    fs::File::options()
        .write(true)
        .open(p)
        .and_then(|f| f.set_modified(t))
        .expect("set mtime");
}

fn open(root: &Path, dest: &Path) -> BuildReport {
    Index::open_or_build(root, Some(dest), &IndexOptions::default())
        .expect("index")
        .1
}

#[test]
fn an_unchanged_corpus_is_not_read_again() {
    let corpus = tempfile::tempdir().expect("tempdir");
    for (rel, text) in FILES {
        write_old(corpus.path(), rel, text);
    }
    let out = tempfile::tempdir().expect("tempdir");
    let dest = out.path().join("idx");
    let first = open(corpus.path(), &dest);
    assert!(!first.reused);
    assert_eq!(first.hashed, 3, "a first build hashes every file");
    let second = open(corpus.path(), &dest);
    assert!(second.reused);
    assert_eq!(
        second.hashed, 0,
        "unchanged files are trusted by their stamps"
    );
}

#[test]
fn same_size_and_restored_mtime_still_rebuilds() {
    let corpus = tempfile::tempdir().expect("tempdir");
    for (rel, text) in FILES {
        write_old(corpus.path(), rel, text);
    }
    let out = tempfile::tempdir().expect("tempdir");
    let dest = out.path().join("idx");
    open(corpus.path(), &dest);
    let path = corpus.path().join("b.md");
    let old_mtime = fs::metadata(&path)
        .and_then(|m| m.modified())
        .expect("mtime");
    // Same length, other content, and the old modification time put back (as `cp -p`
    // or a restore would): the change time differs, so the file is read again and the
    // content fingerprint notices.
    let changed = FILES[1].1.replace("Borrowing", "Borrowi!g");
    assert_eq!(changed.len(), FILES[1].1.len());
    fs::write(&path, &changed).expect("rewrite");
    set_mtime(&path, old_mtime);
    let report = open(corpus.path(), &dest);
    #[cfg(unix)]
    {
        assert_eq!(report.hashed, 1, "only the changed file is read");
        assert!(!report.reused, "changed content rebuilds the index");
    }
    let _ = report;
}

#[test]
fn a_touched_file_is_hashed_once_then_trusted_again() {
    let corpus = tempfile::tempdir().expect("tempdir");
    for (rel, text) in FILES {
        write_old(corpus.path(), rel, text);
    }
    let out = tempfile::tempdir().expect("tempdir");
    let dest = out.path().join("idx");
    open(corpus.path(), &dest);
    // New modification time, same content: hashed, equal fingerprint, index reused,
    // and the fresh stamp is written back to the manifest.
    set_mtime(
        &corpus.path().join("a.md"),
        SystemTime::now() - Duration::from_secs(1800),
    );
    let touched = open(corpus.path(), &dest);
    assert!(touched.reused, "same content: same fingerprint");
    assert_eq!(touched.hashed, 1);
    let again = open(corpus.path(), &dest);
    assert!(again.reused);
    assert_eq!(again.hashed, 0, "the refreshed stamp is trusted");
}

#[test]
fn a_file_written_just_now_is_not_trusted_by_its_stamp() {
    let corpus = tempfile::tempdir().expect("tempdir");
    for (rel, text) in FILES {
        write_old(corpus.path(), rel, text);
    }
    let out = tempfile::tempdir().expect("tempdir");
    let dest = out.path().join("idx");
    open(corpus.path(), &dest);
    // Modified within the racy window of when its hash is taken: a later write in
    // the same clock tick would leave the stamp equal, so it is hashed every time
    // until it is older.
    fs::write(corpus.path().join("c-new.md"), "# New\n\nfresh text\n").expect("write");
    let r1 = open(corpus.path(), &dest);
    assert!(!r1.reused);
    let r2 = open(corpus.path(), &dest);
    assert!(r2.reused);
    assert!(
        r2.hashed >= 1,
        "a just-written file is read again: {}",
        r2.hashed
    );
}

#[test]
fn a_manifest_without_stamps_is_still_reused() {
    let corpus = tempfile::tempdir().expect("tempdir");
    for (rel, text) in FILES {
        write_old(corpus.path(), rel, text);
    }
    let out = tempfile::tempdir().expect("tempdir");
    let dest = out.path().join("idx");
    open(corpus.path(), &dest);
    // An index written before stamps existed: same fingerprint rule, so it is reused
    // (every file hashed once) and the stamps are added.
    let manifest = dest.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_slice(&fs::read(&manifest).expect("read")).expect("json");
    m.as_object_mut().expect("object").remove("stamps");
    fs::write(&manifest, serde_json::to_vec(&m).expect("json")).expect("write");
    let r = open(corpus.path(), &dest);
    assert!(r.reused);
    assert_eq!(r.hashed, 3);
    assert_eq!(open(corpus.path(), &dest).hashed, 0);
}

/// A file the walk cannot read (a dangling symlink) is warned about; once it is gone,
/// the index is rebuilt and the warning with it, instead of being repeated from the
/// manifest on every start.
#[cfg(unix)]
#[test]
fn a_walk_warning_that_went_away_is_not_repeated() {
    let corpus = tempfile::tempdir().expect("tempdir");
    for (rel, text) in FILES {
        write_old(corpus.path(), rel, text);
    }
    std::os::unix::fs::symlink(
        corpus.path().join("nowhere.md"),
        corpus.path().join("p3.md"),
    )
    .expect("symlink");
    let out = tempfile::tempdir().expect("tempdir");
    let dest = out.path().join("idx");
    let first = open(corpus.path(), &dest);
    assert!(
        first.warnings.iter().any(|w| w.contains("p3.md")),
        "{:?}",
        first.warnings
    );
    fs::remove_file(corpus.path().join("p3.md")).expect("rm");
    let after = open(corpus.path(), &dest);
    assert!(
        !after.warnings.iter().any(|w| w.contains("p3.md")),
        "a removed file is not warned about: {:?}",
        after.warnings
    );
    assert_eq!(after.skipped, first.skipped - 1, "{after:?}");
}

#[test]
fn concurrent_first_builds_of_one_index_build_it_once_and_all_open_it() {
    let corpus = tempfile::tempdir().expect("corpus");
    // Enough text that a build takes a while, so the builders overlap.
    for i in 0..200 {
        let text = format!(
            "# Page {i}\n\nOwnership, borrowing and lifetimes, part {i}: {}\n",
            "values move between bindings and references lend them. ".repeat(40)
        );
        write_old(corpus.path(), &format!("p{i}.md"), &text);
    }
    let out = tempfile::tempdir().expect("out");
    let dest = out.path().join("index");
    let start = std::sync::Arc::new(std::sync::Barrier::new(4));
    let builders: Vec<_> = (0..4)
        .map(|_| {
            let (root, dest, start) = (corpus.path().to_path_buf(), dest.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let (index, report) =
                    Index::open_or_build(&root, Some(&dest), &IndexOptions::default())
                        .expect("every builder gets a usable index");
                drop(index);
                report.reused
            })
        })
        .collect();
    let reused: Vec<bool> = builders
        .into_iter()
        .map(|b| b.join().expect("no panic"))
        .collect();
    assert_eq!(
        reused.iter().filter(|r| !**r).count(),
        1,
        "exactly one builder builds, the others reuse its index: {reused:?}"
    );
    let (_, again) =
        Index::open_or_build(corpus.path(), Some(&dest), &IndexOptions::default()).expect("reopen");
    assert!(again.reused);
}
