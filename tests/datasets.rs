//! The shipped question set `datasets/rust-book-qa.jsonl`: it parses with ragloop's own
//! dataset parser, its ids are unique, its kinds meet the minimums the README promises,
//! it covers every chapter and appendix, and (when the toolchain's `rust-docs` component
//! is installed) every source is a content page of the installed book, listed in
//! `book/toc.html`, and every `must_contain` term occurs in the text ragloop extracts from
//! at least one of the item's sources.
//!
//! Without the installed docs the book checks print a note and pass, unless
//! `RAGLOOP_REQUIRE_RUST_DOCS=1` (set by `.ci/run`, whose default toolchain ships them),
//! then they fail.
use ragloop::eval::dataset;
use ragloop::retrieval::{extract_html, resolve_corpus, HtmlPage};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

const KINDS: &[&str] = &["direct", "paraphrase", "multi_hop", "unanswerable"];
const MIN_ITEMS: usize = 100;
/// paraphrase + multi_hop.
const MIN_HARD: usize = 30;
const MIN_UNANSWERABLE: usize = 8;

fn dataset_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/rust-book-qa.jsonl")
}

/// One line of the shipped file, read as JSON (the fields checked here, whatever the
/// parser's `Item` makes of absent ones).
struct Line {
    lineno: usize,
    id: String,
    kind: String,
    must_contain: Vec<String>,
    sources: Vec<String>,
}

fn strings(v: &Value, key: &str, where_: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{where_}: `{key}` is not a list"))
        .iter()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("{where_}: `{key}` holds a non-string"))
                .to_string()
        })
        .collect()
}

/// The shipped file through `ragloop::eval::dataset::load` (no bad line, one item per
/// non-blank line) and, line by line, as JSON.
fn shipped() -> Vec<Line> {
    let path = dataset_path();
    let ds = dataset::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        ds.errors.is_empty(),
        "{}: lines the parser rejects: {:?}",
        path.display(),
        ds.errors
    );
    let text = std::fs::read_to_string(&path).expect("read dataset");
    let mut lines = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let where_ = format!("{}:{}", path.display(), n + 1);
        let v: Value = serde_json::from_str(raw).unwrap_or_else(|e| panic!("{where_}: {e}"));
        lines.push(Line {
            lineno: n + 1,
            id: v["id"].as_str().unwrap_or_default().to_string(),
            kind: v["kind"].as_str().unwrap_or_default().to_string(),
            must_contain: strings(&v, "must_contain", &where_),
            sources: strings(&v, "sources", &where_),
        });
    }
    assert_eq!(
        ds.items.len(),
        lines.len(),
        "the parser kept every line as an item"
    );
    for (item, line) in ds.items.iter().zip(&lines) {
        assert_eq!(
            (item.id.as_str(), item.kind.as_str()),
            (line.id.as_str(), line.kind.as_str())
        );
    }
    lines
}

#[test]
fn shipped_dataset_parses_and_meets_the_kind_minimums() {
    let lines = shipped();
    let mut problems = Vec::new();
    let mut ids = HashMap::new();
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for l in &lines {
        let at = format!("line {} `{}`", l.lineno, l.id);
        if let Some(first) = ids.insert(l.id.as_str(), l.lineno) {
            problems.push(format!("{at}: duplicate id (first on line {first})"));
        }
        let digits = l.id.strip_prefix("rq-").unwrap_or("");
        if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            problems.push(format!("{at}: id is not rq-NNN"));
        }
        *kinds.entry(l.kind.as_str()).or_default() += 1;
        if !KINDS.contains(&l.kind.as_str()) {
            problems.push(format!("{at}: unknown kind `{}`", l.kind));
        }
        if l.kind == "unanswerable" {
            if !l.must_contain.is_empty() || !l.sources.is_empty() {
                problems.push(format!(
                    "{at}: unanswerable items have no terms and no sources"
                ));
            }
            continue;
        }
        if !(1..=3).contains(&l.must_contain.len()) {
            problems.push(format!("{at}: {} must_contain terms", l.must_contain.len()));
        }
        if let Some(t) = l.must_contain.iter().find(|t| t.to_lowercase() != **t) {
            problems.push(format!("{at}: term `{t}` is not lowercase"));
        }
        let distinct: BTreeSet<_> = l.sources.iter().collect();
        if distinct.len() != l.sources.len() {
            problems.push(format!("{at}: a source is listed twice"));
        }
        let needed = if l.kind == "multi_hop" { 2 } else { 1 };
        if distinct.len() < needed {
            problems.push(format!("{at}: {} needs {needed}+ sources", l.kind));
        }
    }
    let count = |k: &str| kinds.get(k).copied().unwrap_or(0);
    if lines.len() < MIN_ITEMS {
        problems.push(format!("{} items, fewer than {MIN_ITEMS}", lines.len()));
    }
    if count("paraphrase") + count("multi_hop") < MIN_HARD {
        problems.push(format!(
            "fewer than {MIN_HARD} paraphrase + multi_hop items"
        ));
    }
    if count("unanswerable") < MIN_UNANSWERABLE {
        problems.push(format!("fewer than {MIN_UNANSWERABLE} unanswerable items"));
    }
    for k in KINDS {
        if count(k) == 0 {
            problems.push(format!("no `{k}` item"));
        }
    }
    assert!(
        problems.is_empty(),
        "kinds {kinds:?}:\n{}",
        problems.join("\n")
    );
}

#[test]
fn shipped_dataset_covers_every_chapter_and_appendix() {
    let lines = shipped();
    let cited: BTreeSet<&str> = lines
        .iter()
        .flat_map(|l| &l.sources)
        .filter_map(|s| {
            let page = s.strip_prefix("book/")?;
            if page.starts_with("appendix-") {
                Some("appendix")
            } else {
                page.get(..4).filter(|p| p.starts_with("ch"))
            }
        })
        .collect();
    let missing: Vec<String> = (1..=21)
        .map(|n| format!("ch{n:02}"))
        .filter(|c| !cited.contains(c.as_str()))
        .chain((!cited.contains("appendix")).then(|| "appendix".to_string()))
        .collect();
    assert!(
        missing.is_empty(),
        "no question cites {missing:?} (cited: {cited:?})"
    );
}

/// The installed HTML root (`$(rustc --print sysroot)/share/doc/rust/html`) with its
/// `book/toc.html`, or `None` after a note (a failure under `RAGLOOP_REQUIRE_RUST_DOCS=1`).
fn installed_docs() -> Option<PathBuf> {
    let required = std::env::var("RAGLOOP_REQUIRE_RUST_DOCS").as_deref() == Ok("1");
    let why = match resolve_corpus("rust-docs:", Path::new("/nonexistent")) {
        Ok(root) if root.join("book/toc.html").is_file() => return Some(root),
        Ok(root) => format!("{} has no book/toc.html", root.display()),
        Err(e) => e.to_string(),
    };
    assert!(
        !required,
        "the installed Rust book is required (RAGLOOP_REQUIRE_RUST_DOCS=1) but missing: {why} \
         (install it with `rustup component add rust-docs`)"
    );
    eprintln!(
        "skipped: the installed Rust book is missing ({why}); datasets/rust-book-qa.jsonl \
         is not checked against it (`rustup component add rust-docs`)"
    );
    None
}

/// The pages `book/toc.html` links to, as paths relative to the HTML root
/// (`book/ch04-01-what-is-ownership.html`).
fn content_pages(root: &Path) -> BTreeSet<String> {
    let toc = std::fs::read_to_string(root.join("book/toc.html")).expect("read toc.html");
    toc.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(|href| href.split('#').next().unwrap_or(href))
        .filter(|href| href.ends_with(".html") && !href.contains("://"))
        .map(|href| format!("book/{href}"))
        .collect()
}

fn collapse(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[test]
fn shipped_dataset_matches_the_installed_book() {
    let Some(root) = installed_docs() else {
        return;
    };
    let pages = content_pages(&root);
    assert!(
        pages.len() > 100,
        "{}/book/toc.html lists only {} pages",
        root.display(),
        pages.len()
    );
    for excluded in ["book/print.html", "book/index.html"] {
        assert!(!pages.contains(excluded), "toc.html lists {excluded}");
    }
    let mut texts: HashMap<String, Option<String>> = HashMap::new();
    let mut problems = Vec::new();
    for l in shipped() {
        let at = format!("line {} `{}`", l.lineno, l.id);
        let mut found: Vec<String> = Vec::new();
        for s in &l.sources {
            if !pages.contains(s) {
                problems.push(format!(
                    "{at}: {s} is not a content page listed in book/toc.html"
                ));
                continue;
            }
            let text = texts.entry(s.clone()).or_insert_with(|| {
                let html = std::fs::read_to_string(root.join(s)).ok()?;
                match extract_html(&html) {
                    HtmlPage::Content(e) => Some(collapse(&e.text)),
                    HtmlPage::Redirect | HtmlPage::NoIndex => None,
                }
            });
            match text {
                Some(t) => found.push(t.clone()),
                None => problems.push(format!(
                    "{at}: {} is missing or has no content",
                    root.join(s).display()
                )),
            }
        }
        for term in &l.must_contain {
            let needle = collapse(term);
            if !found.iter().any(|t| t.contains(&needle)) {
                problems.push(format!("{at}: `{term}` occurs in none of {:?}", l.sources));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "against {}:\n{}",
        root.display(),
        problems.join("\n")
    );
}
