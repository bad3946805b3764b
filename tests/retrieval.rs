// Integration tests of the embedded BM25 retrieval (issue 3), one per vector-store
// invariant of seed 000 Section 5 plus reuse, crash safety and bad inputs.
// (Plain comments, no `//!`: the file is also `include!`d by a scratch harness.)

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use ragloop::retrieval::{load_corpus, Document, Index, IndexOptions, RetrievalError};

const PAGE: &str = r##"<!DOCTYPE html><html><head><meta charset="utf-8"><title>Borrowing - The Book</title>
<style>.sidebar{color:red}</style><script>var sidebarchrome = 1;</script></head><body>
<nav id="sidebar" class="sidebar"><div class="sidebar-scrollbox"><ol class="chapter">
<li><a href="a.html">Zebrachapter navigation entry</a></li></ol></div></nav>
<div id="menu-bar" class="menu-bar"><h1 class="menu-title">Menutitlechrome</h1><div class="right-buttons">Printbuttonchrome</div></div>
<div id="content" class="content"><main>
<h1 id="refs"><a class="header" href="#refs">References and Borrowing</a></h1>
<p>A <em>reference</em> is like a pointer: an address we can follow to reach data owned by another variable. Alpha.</p>
<pre><code class="language-rust">fn calculate_length(s: &amp;String) -&gt; usize {
    s.len()
}</code></pre>
<h2 id="mutable"><a class="header" href="#mutable">Mutable References</a></h2>
<p>You can have only one mutable reference to a value at a time. Alpha.</p>
<nav class="nav-wrapper"><a class="nav-chapters previous" href="p.html">Prevchapterchrome</a></nav>
</main></div><footer>Footerchrome text</footer></body></html>"##;

const REDIRECT: &str = r#"<html><head><meta http-equiv="refresh" content="0; URL=page.html"></head>
<body><p>Redirecting to page.html alpha</p></body></html>"#;

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(p, bytes).expect("write fixture");
}

/// A small mixed corpus; every chunk mentions "alpha".
fn corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "page.html", PAGE.as_bytes());
    write(root, "old-page.html", REDIRECT.as_bytes());
    write(
        root,
        "print.html",
        format!("<html><body><main>{PAGE}</main></body></html>").as_bytes(),
    );
    let long: String = (0..60)
        .map(|i| format!("Sentence {i} about ownership and the alpha borrow checker in Rust. "))
        .collect();
    write(
        root,
        "guide/intro.md",
        format!("# Intro Guide\n\nalpha start.\n\n## Ownership\n\n{long}\n\n```\n# not a heading alpha\n```\n").as_bytes(),
    );
    write(
        root,
        "notes.txt",
        b"Plain text notes about alpha lifetimes and traits.\n",
    );
    write(root, "image.png", b"\x89PNG not indexed");
    dir
}

fn opts() -> IndexOptions {
    IndexOptions::default()
}

fn build(root: &Path, out: &Path, force: bool) -> (Index, ragloop::retrieval::BuildReport) {
    let o = IndexOptions { force, ..opts() };
    Index::open_or_build(root, Some(out), &o).expect("build index")
}

fn all_docs(index: &Index) -> Vec<Document> {
    index.search("alpha", 10_000).expect("search")
}

fn loader_docs(root: &Path) -> BTreeMap<String, (Document, String)> {
    let loaded = load_corpus(root, &opts()).expect("load corpus");
    let mut map = BTreeMap::new();
    for f in loaded.files {
        for d in f.documents {
            map.insert(d.id.clone(), (d, f.extracted.text.clone()));
        }
    }
    map
}

#[test]
fn ids_are_unique_and_stable_across_rebuilds() {
    let c = corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let (index, report) = build(c.path(), &out.path().join("idx"), false);
    assert!(!report.reused);
    let first: Vec<String> = all_docs(&index).into_iter().map(|d| d.id).collect();
    assert_eq!(
        first.len(),
        index.num_chunks(),
        "every chunk mentions alpha"
    );
    let unique: BTreeSet<&String> = first.iter().collect();
    assert_eq!(unique.len(), first.len(), "ids are unique");
    drop(index);
    let (again, report) = build(c.path(), &out.path().join("idx"), true);
    assert!(!report.reused, "forced rebuild");
    let second: Vec<String> = all_docs(&again).into_iter().map(|d| d.id).collect();
    assert_eq!(first, second, "same ids (and order) after a rebuild");
    // And into a different directory.
    let (other, _) = build(c.path(), &out.path().join("elsewhere"), false);
    let third: Vec<String> = all_docs(&other).into_iter().map(|d| d.id).collect();
    assert_eq!(first, third);
    // The id is also in the metadata, and is a UUID.
    for d in all_docs(&other) {
        assert_eq!(d.metadata["id"], serde_json::Value::from(d.id.clone()));
        assert_eq!(d.id.len(), 36);
    }
}

#[test]
fn returned_content_is_exactly_what_was_indexed() {
    let c = corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let (index, _) = build(c.path(), &out.path().join("idx"), false);
    let expected = loader_docs(c.path());
    let got = all_docs(&index);
    assert_eq!(got.len(), expected.len());
    for d in got {
        let (want, extracted) = expected
            .get(&d.id)
            .expect("returned id comes from the loader");
        assert_eq!(d.content, want.content);
        let range = d.metadata["byte_range"]
            .as_array()
            .expect("byte_range array");
        let (s, e) = (
            range[0].as_u64().expect("start") as usize,
            range[1].as_u64().expect("end") as usize,
        );
        assert_eq!(
            &extracted[s..e],
            d.content,
            "byte_range slices the extracted text"
        );
    }
}

#[test]
fn metadata_is_returned_whole() {
    let c = corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let (index, _) = build(c.path(), &out.path().join("idx"), false);
    let expected = loader_docs(c.path());
    let keys: BTreeSet<&str> = [
        "id",
        "source",
        "title",
        "heading_path",
        "chunk_index",
        "byte_range",
        "score",
    ]
    .into();
    for d in all_docs(&index) {
        let got: BTreeSet<&str> = d.metadata.keys().map(String::as_str).collect();
        assert_eq!(got, keys);
        let mut without_score = d.metadata.clone();
        let score = without_score.remove("score").expect("score");
        assert!(score.as_f64().expect("number") > 0.0);
        assert_eq!(
            without_score, expected[&d.id].0.metadata,
            "stored metadata returned unchanged"
        );
    }
    let sources: BTreeSet<String> = all_docs(&index)
        .iter()
        .map(|d| {
            d.metadata["source"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let want: BTreeSet<String> = ["guide/intro.md", "notes.txt", "page.html"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        sources, want,
        "redirect stub, print.html and .png are not indexed"
    );
    let md = all_docs(&index)
        .into_iter()
        .find(|d| d.metadata["source"] == "guide/intro.md" && d.metadata["chunk_index"] == 1)
        .expect("second markdown chunk");
    assert_eq!(md.metadata["title"], "Intro Guide");
    assert_eq!(
        md.metadata["heading_path"],
        serde_json::json!(["Intro Guide", "Ownership"])
    );
}

#[test]
fn repeated_queries_return_identical_results() {
    let c = corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let (index, _) = build(c.path(), &out.path().join("idx"), false);
    for q in [
        "alpha",
        "mutable reference",
        "ownership borrow checker",
        "sentence 7",
    ] {
        let first = index.search(q, 4).expect("search");
        assert!(!first.is_empty(), "{q}");
        for _ in 0..100 {
            assert_eq!(index.search(q, 4).expect("search"), first, "{q}");
        }
    }
    // The same from several threads at once (Index is Send + Sync).
    let reference = index.search("alpha rust", 5).expect("search");
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| assert_eq!(index.search("alpha rust", 5).expect("search"), reference));
        }
    });
}

#[test]
fn reused_while_unchanged_rebuilt_after_change() {
    let c = corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let dest = out.path().join("idx");
    let (_, r1) = build(c.path(), &dest, false);
    assert!(!r1.reused);
    let (_, r2) = build(c.path(), &dest, false);
    assert!(r2.reused, "unchanged corpus is reused");
    assert_eq!(
        (r2.files, r2.chunks, r2.skipped),
        (r1.files, r1.chunks, r1.skipped)
    );
    // Same size, different content: the content hash notices.
    write(
        c.path(),
        "notes.txt",
        b"Plain text notes about alpha lifetimes and trait!.\n",
    );
    let (index, r3) = build(c.path(), &dest, false);
    assert!(!r3.reused, "changed content triggers a rebuild");
    assert!(index
        .search("trait", 5)
        .expect("search")
        .iter()
        .any(|d| d.content.contains("trait!")));
    let (_, r4) = build(c.path(), &dest, false);
    assert!(r4.reused);
    // A new file triggers a rebuild too; changed options as well.
    write(c.path(), "extra.md", b"# Extra\n\nalpha extra");
    assert!(!build(c.path(), &dest, false).1.reused);
    let o = IndexOptions {
        exclude: vec!["print.html".into(), "notes.txt".into()],
        ..opts()
    };
    assert!(
        !Index::open_or_build(c.path(), Some(&dest), &o)
            .expect("build")
            .1
            .reused
    );
}

#[test]
fn half_written_or_foreign_index_is_rebuilt() {
    let c = corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let dest = out.path().join("idx");
    let (_, r) = build(c.path(), &dest, false);
    let chunks = r.chunks;
    // Missing manifest (as if killed before the manifest was written).
    fs::remove_file(dest.join("manifest.json")).expect("rm manifest");
    let (index, r) = build(c.path(), &dest, false);
    assert!(!r.reused);
    assert!(
        r.warnings.iter().any(|w| w.contains("no manifest")),
        "{:?}",
        r.warnings
    );
    assert_eq!(index.num_chunks(), chunks);
    drop(index);
    // Garbage manifest.
    fs::write(dest.join("manifest.json"), b"{ not json").expect("write");
    assert!(!build(c.path(), &dest, false).1.reused);
    // Another format version.
    let m = fs::read_to_string(dest.join("manifest.json")).expect("read");
    let m = m.replace(
        &format!("\"format_version\": {}", ragloop::retrieval::FORMAT_VERSION),
        "\"format_version\": 999",
    );
    fs::write(dest.join("manifest.json"), m).expect("write");
    assert!(!build(c.path(), &dest, false).1.reused);
    // Damaged tantivy files with a valid manifest.
    for entry in fs::read_dir(&dest).expect("ls") {
        let p = entry.expect("entry").path();
        if p.file_name().and_then(|n| n.to_str()) == Some("meta.json") {
            fs::write(&p, b"garbage").expect("write");
        }
    }
    let (index, r) = build(c.path(), &dest, false);
    assert!(!r.reused);
    assert_eq!(index.num_chunks(), chunks);
    assert!(build(c.path(), &dest, false).1.reused);
    // A leftover temporary directory from a killed build is harmless.
    let stale = out.path().join(".idx.tmp-4294967295-2");
    fs::create_dir_all(&stale).expect("mkdir");
    assert!(build(c.path(), &dest, false).1.reused);
    // ... and removed by the next build when its process is gone (Linux /proc).
    assert!(!build(c.path(), &dest, true).1.reused);
    if Path::new("/proc/self").exists() {
        assert!(!stale.exists(), "stale temporary directory removed");
    }
}

#[test]
fn refuses_to_replace_an_unrelated_directory() {
    let c = corpus();
    let out = tempfile::tempdir().expect("tempdir");
    write(out.path(), "mine/important.txt", b"do not delete");
    let err = Index::open_or_build(c.path(), Some(&out.path().join("mine")), &opts())
        .expect_err("must refuse");
    assert!(matches!(err, RetrievalError::NotAnIndex(_)), "{err}");
    assert!(out.path().join("mine/important.txt").exists());
}

#[test]
fn bad_inputs_are_skipped_with_warnings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "good.md", b"# Good\n\nalpha content");
    write(root, "binary.txt", b"abc\0def alpha");
    write(root, "latin1.txt", b"caf\xe9 alpha");
    write(root, "empty.md", b"");
    write(root, "blank.txt", b"   \n\n");
    write(root, "stub.html", REDIRECT.as_bytes());
    #[cfg(unix)]
    std::os::unix::fs::symlink(root, root.join("loop")).expect("symlink");
    let out = tempfile::tempdir().expect("tempdir");
    let (index, r) =
        Index::open_or_build(root, Some(&out.path().join("idx")), &opts()).expect("build");
    assert_eq!(r.files, 1);
    assert_eq!(index.search("alpha", 10).expect("search").len(), 1);
    let joined = r.warnings.join("\n");
    for needle in ["binary", "UTF-8", "empty"] {
        assert!(joined.contains(needle), "warning about {needle}: {joined}");
    }
    #[cfg(unix)]
    assert!(joined.contains("symlink loop"), "{joined}");
    let expected_skips = if cfg!(unix) { 6 } else { 5 };
    assert_eq!(r.skipped, expected_skips, "{joined}");
}

#[test]
fn missing_or_empty_corpus_is_a_clear_error() {
    let out = tempfile::tempdir().expect("tempdir");
    let missing = out.path().join("does-not-exist");
    let err =
        Index::open_or_build(&missing, Some(&out.path().join("i")), &opts()).expect_err("missing");
    assert!(matches!(err, RetrievalError::CorpusNotFound(_)));
    assert!(err.to_string().contains("does-not-exist"), "{err}");

    let file = out.path().join("file.txt");
    fs::write(&file, "x").expect("write");
    let err = Index::open_or_build(&file, Some(&out.path().join("i")), &opts()).expect_err("file");
    assert!(matches!(err, RetrievalError::NotADirectory(_)));

    let empty = tempfile::tempdir().expect("tempdir");
    let err = Index::open_or_build(empty.path(), Some(&out.path().join("i")), &opts())
        .expect_err("empty");
    assert!(
        err.to_string().starts_with("no indexable files in"),
        "{err}"
    );
    write(empty.path(), "x.bin", b"\0\0");
    write(empty.path(), "stub.html", REDIRECT.as_bytes());
    let err = Index::open_or_build(empty.path(), Some(&out.path().join("i")), &opts())
        .expect_err("only stubs");
    assert!(
        matches!(err, RetrievalError::EmptyCorpus { skipped: 1, .. }),
        "{err}"
    );
    assert!(!out.path().join("i").exists(), "nothing left behind");
    let leftovers: Vec<PathBuf> = fs::read_dir(out.path())
        .expect("ls")
        .map(|e| e.expect("entry").path())
        .collect();
    assert!(
        leftovers
            .iter()
            .all(|p| !p.to_string_lossy().contains(".tmp-")),
        "{leftovers:?}"
    );
}

#[test]
fn mdbook_chrome_is_dropped() {
    let c = corpus();
    let loaded = load_corpus(c.path(), &opts()).expect("load");
    let page = loaded
        .files
        .iter()
        .find(|f| f.source == "page.html")
        .expect("page loaded");
    let text = &page.extracted.text;
    for chrome in [
        "Zebrachapter",
        "Menutitlechrome",
        "Printbuttonchrome",
        "Prevchapterchrome",
        "Footerchrome",
        "sidebarchrome",
        "color:red",
    ] {
        assert!(!text.contains(chrome), "{chrome} leaked into {text:?}");
    }
    assert!(
        text.contains("fn calculate_length(s: &String) -> usize {\n    s.len()\n}"),
        "code kept verbatim: {text:?}"
    );
    assert_eq!(
        page.documents[0].metadata["title"],
        "References and Borrowing"
    );
    let out = tempfile::tempdir().expect("tempdir");
    let (index, _) = build(c.path(), &out.path().join("idx"), false);
    for q in [
        "zebrachapter",
        "menutitlechrome",
        "footerchrome",
        "prevchapterchrome",
    ] {
        assert!(index.search(q, 5).expect("search").is_empty(), "{q}");
    }
    let hits = index.search("mutable references", 1).expect("search");
    assert_eq!(
        hits[0].metadata["heading_path"],
        serde_json::json!(["References and Borrowing", "Mutable References"])
    );
}

#[test]
fn any_query_text_is_accepted() {
    let c = corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let (index, _) = build(c.path(), &out.path().join("idx"), false);
    for q in [
        "a OR (b AND \"",
        "foo:bar",
        "[]",
        "title:alpha^3",
        "*",
        "\\",
        "-alpha +alpha ~2",
        "{{ jinja }} {% x %}",
        "日本語 🦀",
        "\0\u{7}",
        &"alpha ".repeat(500),
    ] {
        index
            .search(q, 5)
            .unwrap_or_else(|e| panic!("query {q:?} failed: {e}"));
    }
    assert!(
        !index.search("foo:alpha", 5).expect("search").is_empty(),
        "field syntax is plain text"
    );
    for q in ["", "   ", "the and of", "!!!"] {
        assert!(index.search(q, 5).expect("search").is_empty(), "{q:?}");
    }
    assert!(index.search("alpha", 0).expect("search").is_empty());
}

#[test]
fn ties_are_broken_by_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..40 {
        write(
            dir.path(),
            &format!("doc{i:02}.txt"),
            b"identical words about the alpha query",
        );
    }
    write(dir.path(), "best.txt", b"alpha alpha alpha");
    let out = tempfile::tempdir().expect("tempdir");
    let (index, _) =
        Index::open_or_build(dir.path(), Some(&out.path().join("idx")), &opts()).expect("build");
    let all = index.search("alpha", 100).expect("search");
    assert_eq!(all.len(), 41);
    assert_eq!(all[0].metadata["source"], "best.txt");
    let tied: Vec<String> = all[1..].iter().map(|d| d.id.clone()).collect();
    let mut sorted = tied.clone();
    sorted.sort();
    assert_eq!(tied, sorted, "equal scores ordered by id");
    let scores: BTreeSet<u64> = all[1..]
        .iter()
        .map(|d| d.metadata["score"].as_f64().unwrap_or(0.0).to_bits())
        .collect();
    assert_eq!(scores.len(), 1, "the fixture really ties");
    for k in [1, 2, 5, 17, 40] {
        let top = index.search("alpha", k).expect("search");
        assert_eq!(
            top,
            all[..k].to_vec(),
            "top-{k} is a prefix of the full order"
        );
    }
}

#[test]
fn rust_book_index_when_installed() {
    let sysroot =
        std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
            .args(["--print", "sysroot"])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let Some(book) = sysroot
        .map(|s| PathBuf::from(s).join("share/doc/rust/html/book"))
        .filter(|p| p.is_dir())
    else {
        println!("note: the Rust book is not installed; skipping rust_book_index_when_installed");
        return;
    };
    let resolved = ragloop::retrieval::resolve_corpus("rust-docs:book", Path::new("/nonexistent"))
        .expect("resolve");
    assert_eq!(resolved, book);
    let out = tempfile::tempdir().expect("tempdir");
    let (index, report) =
        Index::open_or_build(&book, Some(&out.path().join("book")), &opts()).expect("build book");
    assert!(report.files > 100, "{report:?}");
    assert!(
        report.skipped > 50,
        "redirect stubs are skipped: {report:?}"
    );
    let hits = index.search("What is ownership?", 10).expect("search");
    let sources: Vec<&str> = hits
        .iter()
        .filter_map(|d| d.metadata["source"].as_str())
        .collect();
    assert!(sources.iter().all(|s| *s != "print.html"));
    assert!(
        sources.contains(&"ch04-01-what-is-ownership.html"),
        "{sources:?}"
    );
    let (_, again) =
        Index::open_or_build(&book, Some(&out.path().join("book")), &opts()).expect("reuse book");
    assert!(again.reused);
}

#[test]
fn resolve_corpus_paths() {
    let base = tempfile::tempdir().expect("tempdir");
    fs::create_dir_all(base.path().join("docs/sub")).expect("mkdir");
    let got = ragloop::retrieval::resolve_corpus("docs/sub", base.path()).expect("relative");
    assert_eq!(got, base.path().join("docs/sub"));
    let abs = base.path().join("docs");
    let got =
        ragloop::retrieval::resolve_corpus(abs.to_str().expect("utf8"), Path::new("/elsewhere"))
            .expect("absolute");
    assert_eq!(got, abs);
    let err = ragloop::retrieval::resolve_corpus("nope", base.path()).expect_err("missing");
    assert!(matches!(err, RetrievalError::CorpusNotFound(_)), "{err}");
    let dflt = ragloop::retrieval::default_index_dir(base.path());
    if let Ok(d) = dflt {
        let name = d
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        assert_eq!(name.len(), 16);
        assert_eq!(
            d.parent()
                .and_then(|p| p.file_name())
                .and_then(|n| n.to_str()),
            Some("indexes")
        );
    }
}
