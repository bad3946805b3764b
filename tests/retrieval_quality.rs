// Issue 13: corpus hygiene (placeholders, duplicates, all-in-one pages found by their
// content), include/exclude globs, skip reasons, max_per_source, and headings
// weighted above body text.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use assert_cmd::Command;
use ragloop::retrieval::{
    open_retriever, Diversified, Diversity, Index, IndexOptions, OpenContext, RetrievalError,
    Retriever, SkipReason,
};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(p, text).expect("write fixture");
}

fn html(title: &str, body: &str) -> String {
    let paras: String = body
        .split("\n\n")
        .map(|p| format!("<p>{p}</p>\n"))
        .collect();
    format!("<html><head><title>{title}</title></head><body><main><h1>{title}</h1>\n{paras}</main></body></html>")
}

fn chapter(topic: &str) -> String {
    (0..4)
        .map(|i| {
            format!("Paragraph {i} on {topic}: how {topic} works and why the {topic} rules exist.")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

const NOTICE: &str =
    "This edition of the guide is no longer distributed here; read the current edition instead.";

/// Three chapters, an all-in-one page repeating them, a copy of one chapter, three
/// old-edition placeholders sharing a notice, a redirect stub.
fn messy_corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let (a, b, c) = (
        chapter("borrowing"),
        chapter("lifetimes"),
        chapter("traits"),
    );
    write(root, "borrowing.html", &html("Borrowing", &a));
    write(root, "lifetimes.html", &html("Lifetimes", &b));
    write(root, "traits.html", &html("Traits", &c));
    write(
        root,
        "whole-guide.html",
        &html("The Guide", &format!("{a}\n\n{b}\n\n{c}")),
    );
    write(root, "start.html", &html("Borrowing", &a));
    for (i, t) in ["Borrowing", "Lifetimes", "Traits"].iter().enumerate() {
        write(root, &format!("old/ch0{i}.html"), &html(t, NOTICE));
    }
    write(
        root,
        "moved.html",
        r#"<html><head><meta http-equiv="refresh" content="0; URL=traits.html"></head><body>moved</body></html>"#,
    );
    dir
}

fn reasons(report: &ragloop::retrieval::BuildReport) -> BTreeMap<String, usize> {
    report
        .skipped_by_reason
        .iter()
        .map(|(r, n)| (r.to_string(), *n))
        .collect()
}

fn sources(index: &Index, q: &str, k: usize) -> Vec<String> {
    index
        .search(q, k)
        .expect("search")
        .iter()
        .map(|d| {
            d.metadata["source"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn hygiene_skips_placeholders_duplicates_and_aggregates_with_reasons() {
    let c = messy_corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let opts = IndexOptions {
        hygiene: true,
        ..IndexOptions::default()
    };
    let (index, report) =
        Index::open_or_build(c.path(), Some(&out.path().join("i")), &opts).expect("build");
    let want: BTreeMap<String, usize> = [
        ("aggregate", 1),
        ("duplicate", 1),
        ("placeholder", 3),
        ("redirect", 1),
    ]
    .into_iter()
    .map(|(r, n)| (r.to_string(), n))
    .collect();
    assert_eq!(reasons(&report), want);
    assert_eq!(report.files, 3);
    assert_eq!(report.skipped, 6);
    let by_file: BTreeMap<&str, SkipReason> = report
        .skipped_files
        .iter()
        .map(|f| (f.path.as_str(), f.reason))
        .collect();
    assert_eq!(by_file["whole-guide.html"], SkipReason::Aggregate);
    assert_eq!(by_file["start.html"], SkipReason::Duplicate);
    assert_eq!(by_file["old/ch01.html"], SkipReason::Placeholder);
    let dup = report
        .skipped_files
        .iter()
        .find(|f| f.path == "start.html")
        .and_then(|f| f.detail.clone());
    assert_eq!(dup.as_deref(), Some("same text as borrowing.html"));
    // Only the chapters are found.
    let mut got = sources(&index, "borrowing lifetimes traits edition", 50);
    got.sort();
    got.dedup();
    assert_eq!(got, ["borrowing.html", "lifetimes.html", "traits.html"]);
    // A reused index reports the same reasons (from its manifest).
    let (_, again) =
        Index::open_or_build(c.path(), Some(&out.path().join("i")), &opts).expect("reuse");
    assert!(again.reused);
    assert_eq!(reasons(&again), want);
    assert_eq!(again.skipped_files, report.skipped_files);
}

#[test]
fn without_hygiene_every_page_is_indexed_and_ids_do_not_depend_on_it() {
    let c = messy_corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let (plain, report) = Index::open_or_build(
        c.path(),
        Some(&out.path().join("p")),
        &IndexOptions::default(),
    )
    .expect("build");
    assert_eq!(report.files, 8);
    assert_eq!(reasons(&report).get("placeholder"), None);
    let clean = IndexOptions {
        hygiene: true,
        ..IndexOptions::default()
    };
    let (hyg, _) =
        Index::open_or_build(c.path(), Some(&out.path().join("h")), &clean).expect("build");
    let ids = |ix: &Index, src: &str| -> Vec<String> {
        let mut v: Vec<String> = ix
            .documents()
            .expect("documents")
            .into_iter()
            .filter(|d| d.metadata["source"] == src)
            .map(|d| d.id)
            .collect();
        v.sort();
        v
    };
    assert!(!ids(&hyg, "traits.html").is_empty());
    assert_eq!(ids(&plain, "traits.html"), ids(&hyg, "traits.html"));
}

#[test]
fn include_keeps_only_matching_files_and_exclude_still_applies() {
    let c = messy_corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let opts = IndexOptions {
        include: vec![
            "old/*".into(),
            "traits.html".into(),
            "lifetimes.html".into(),
        ],
        exclude: vec!["old/ch02.html".into()],
        ..IndexOptions::default()
    };
    let (index, report) =
        Index::open_or_build(c.path(), Some(&out.path().join("i")), &opts).expect("build");
    let mut got = sources(&index, "lifetimes traits edition", 50);
    got.sort();
    got.dedup();
    assert_eq!(
        got,
        [
            "lifetimes.html",
            "old/ch00.html",
            "old/ch01.html",
            "traits.html"
        ]
    );
    let r = reasons(&report);
    assert_eq!(r.get("not_included"), Some(&4));
    assert_eq!(r.get("excluded"), Some(&1));
}

#[test]
fn a_corpus_whose_every_file_is_left_out_is_a_clear_error() {
    let c = messy_corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let opts = IndexOptions {
        include: vec!["*.md".into()],
        ..IndexOptions::default()
    };
    let err = Index::open_or_build(c.path(), Some(&out.path().join("i")), &opts)
        .expect_err("nothing left");
    assert!(
        matches!(err, RetrievalError::AllExcluded { seen: 9, .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("every file of") && msg.contains("*.md"),
        "{msg}"
    );
    assert!(!out.path().join("i").exists());
}

/// One long page about `topic` (several chunks) and short pages `other-N`.
fn one_big_page_corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let long: String = (0..120)
        .map(|i| format!("Sentence {i} explains the zorblax protocol in more detail.\n\n"))
        .collect();
    write(dir.path(), "big.md", &format!("# Zorblax\n\n{long}"));
    for i in 0..3 {
        write(
            dir.path(),
            &format!("other-{i}.md"),
            &format!("# Other {i}\n\nA note that mentions zorblax once, among many other words of page {i}.\n"),
        );
    }
    dir
}

#[tokio::test]
async fn max_per_source_caps_a_page_and_fills_with_the_next_best() {
    let c = one_big_page_corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let (index, _) = Index::open_or_build(
        c.path(),
        Some(&out.path().join("i")),
        &IndexOptions::default(),
    )
    .expect("build");
    let plain = sources(&index, "zorblax protocol detail", 4);
    assert_eq!(
        plain, ["big.md"; 4],
        "the big page fills the top 4 unrestricted"
    );
    let diversified = Diversified::new(
        Arc::new(index),
        Diversity {
            max_per_source: Some(1),
            mmr: None,
        },
    );
    let docs = diversified
        .search("zorblax protocol detail", 4)
        .await
        .expect("search");
    let got: Vec<&str> = docs
        .iter()
        .map(|d| d.metadata["source"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(got[0], "big.md");
    let mut rest = got[1..].to_vec();
    rest.sort();
    assert_eq!(rest, ["other-0.md", "other-1.md", "other-2.md"]);
    // Fewer distinct pages than top_k: every page once, no repeats.
    let docs = diversified.search("zorblax", 10).await.expect("search");
    assert_eq!(docs.len(), 4);
}

#[tokio::test]
async fn max_per_source_from_the_spec() {
    let c = one_big_page_corpus();
    // The cache directory crag_web.rs sets for this process too (same value: no race).
    let cache = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("crag-web-cache");
    std::env::set_var("RAGLOOP_CACHE_DIR", &cache);
    let spec: ragloop::spec::types::RetrieverSpec = serde_json::from_value(serde_json::json!({
        "kind": "bm25", "corpus": c.path().display().to_string(), "top_k": 4, "max_per_source": 2
    }))
    .expect("spec");
    let models = indexmap::IndexMap::new();
    let ctx = OpenContext {
        root: Path::new("."),
        corpus: None,
        progress: false,
        models: &models,
        embed_calls: None,
    };
    let opened = open_retriever("r", &spec, &ctx).expect("open");
    let docs = opened
        .retriever
        .search("zorblax protocol detail", 4)
        .await
        .expect("search");
    let big = docs
        .iter()
        .filter(|d| d.metadata["source"] == "big.md")
        .count();
    assert_eq!((docs.len(), big), (4, 2));
}

#[test]
fn a_heading_match_outweighs_the_same_word_once_in_the_text() {
    // Two sections of equal length: the query word is the heading of one and a word of
    // the other's text. The section it names ranks first.
    let dir = tempfile::tempdir().expect("tempdir");
    let filler = "words about other matters that fill the section to a similar length";
    write(
        dir.path(),
        "a.md",
        &format!("# Guide\n\n## Quuxification\n\nThis part explains {filler}.\n"),
    );
    write(
        dir.path(),
        "b.md",
        &format!("# Notes\n\n## Misc\n\nThis quuxification part {filler}.\n"),
    );
    let out = tempfile::tempdir().expect("tempdir");
    let (index, _) = Index::open_or_build(
        dir.path(),
        Some(&out.path().join("i")),
        &IndexOptions::default(),
    )
    .expect("build");
    assert_eq!(sources(&index, "quuxification", 2), ["a.md", "b.md"]);
    // A chunk deep in a long section still carries its section's heading.
    let long: String = (0..30)
        .map(|i| format!("Line {i} with unrelated filler text for the section body.\n\n"))
        .collect();
    write(dir.path(), "c.md", &format!("# Frobnication\n\n{long}"));
    let (index, _) = Index::open_or_build(
        dir.path(),
        Some(&out.path().join("j")),
        &IndexOptions::default(),
    )
    .expect("build");
    let hits = index.search("frobnication", 100).expect("search");
    let chunks_of_c = index
        .documents()
        .expect("documents")
        .iter()
        .filter(|d| d.metadata["source"] == "c.md")
        .count();
    assert!(chunks_of_c > 1);
    assert_eq!(
        hits.len(),
        chunks_of_c,
        "every chunk of the section matches its heading"
    );
}

#[test]
fn index_cli_reports_skips_by_reason_and_lists_them_with_verbose() {
    let c = messy_corpus();
    let out = tempfile::tempdir().expect("tempdir");
    let run = |extra: &[&str]| {
        let o = Command::cargo_bin("ragloop")
            .expect("binary")
            .arg("index")
            .arg(c.path())
            .arg("--out")
            .arg(out.path().join("i"))
            .args(extra)
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let s = run(&["--hygiene", "on"]);
    assert!(
        s.contains("(6 skipped: 1 redirect, 3 placeholder, 1 duplicate, 1 aggregate)"),
        "{s}"
    );
    assert!(!s.contains("skipped start.html"), "{s}");
    let s = run(&["--hygiene", "on", "--verbose"]);
    assert!(
        s.contains("skipped start.html: duplicate (same text as borrowing.html)"),
        "{s}"
    );
    assert!(s.contains("skipped whole-guide.html: aggregate"), "{s}");
    let o = Command::cargo_bin("ragloop")
        .expect("binary")
        .arg("index")
        .arg(c.path())
        .arg("--out")
        .arg(out.path().join("k"))
        .args(["--include", "*.md"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("every file of"));
}

#[test]
fn a_title_matching_one_query_word_does_not_outrank_text_matching_all_of_them() {
    // Headings are weighted inside the chunk's BM25 (BM25F-style, saturating with the
    // text) rather than as separate short-field scores added on top, which made every
    // chunk of a page titled with one query word outrank the chunk answering the query.
    let dir = tempfile::tempdir().expect("tempdir");
    let filler = "plain words about other matters that fill the section to a similar length";
    write(
        dir.path(),
        "answer.md",
        &format!("# Notes\n\n## Misc\n\nTo frobnicate a quux, {filler}.\n"),
    );
    write(
        dir.path(),
        "title.md",
        &format!("# Quux\n\n## Quux\n\nA quux is {filler}, {filler}.\n"),
    );
    for i in 0..6 {
        write(
            dir.path(),
            &format!("filler-{i}.md"),
            &format!("# Page {i}\n\n## Part {i}\n\nSome text, {filler}.\n"),
        );
    }
    let out = tempfile::tempdir().expect("tempdir");
    let (index, _) = Index::open_or_build(
        dir.path(),
        Some(&out.path().join("i")),
        &IndexOptions::default(),
    )
    .expect("build");
    assert_eq!(
        sources(&index, "frobnicate quux", 2),
        ["answer.md", "title.md"]
    );
}
