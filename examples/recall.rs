// Single-shot BM25 recall over the Rust book QA dataset (the baseline the agentic loop
// must beat).
//
//   cargo run --release --example recall -- [--dataset FILE.jsonl] [--out INDEX_DIR]
//       [--corpus rust-docs:book] [--exclude PATTERN]... [--force] [--prefix P]
//
// `--prefix` is put before chunk sources to match dataset paths (default: the corpus
// directory name and `/`, e.g. `book/`; use `--prefix ''` for the HTML root).
//
// Recall@k for one item = |labelled source pages ∩ sources of the top-k chunks| /
// |labelled source pages|, averaged per question kind; `unanswerable` items have no
// sources and are left out. Dataset sources are relative to the HTML root
// (`book/ch04-01-...html`), so chunk sources (relative to the book) get a `book/`
// prefix. Also prints query latency percentiles over every question.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use ragloop::retrieval::{resolve_corpus, Index, IndexOptions};

const KS: [usize; 3] = [1, 4, 10];

struct Args {
    dataset: PathBuf,
    out: PathBuf,
    corpus: String,
    exclude: Vec<String>,
    force: bool,
    prefix: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut args = Args {
        dataset: std::env::var_os("RAGLOOP_QA")
            .map(PathBuf::from)
            .unwrap_or_else(|| manifest.join("../shared/datasets/rust-book-qa.jsonl")),
        out: std::env::temp_dir().join("ragloop-recall-index"),
        corpus: "rust-docs:book".to_string(),
        exclude: Vec::new(),
        force: false,
        prefix: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--dataset" => args.dataset = PathBuf::from(value()?),
            "--out" => args.out = PathBuf::from(value()?),
            "--corpus" => args.corpus = value()?,
            "--exclude" => args.exclude.push(value()?),
            "--prefix" => args.prefix = Some(value()?),
            "--force" => args.force = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("usage error: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let corpus = resolve_corpus(&args.corpus, Path::new("."))?;
    let mut opts = IndexOptions {
        force: args.force,
        progress: true,
        ..IndexOptions::default()
    };
    if !args.exclude.is_empty() {
        opts.exclude = args.exclude.clone();
    }
    let (index, report) = Index::open_or_build(&corpus, Some(&args.out), &opts)?;
    eprintln!(
        "{} index: {} files, {} chunks, {} skipped, {:.2} s -> {}",
        if report.reused { "reused" } else { "built" },
        report.files,
        report.chunks,
        report.skipped,
        report.seconds,
        report.index_dir.display()
    );
    let prefix = args.prefix.clone().unwrap_or_else(|| {
        corpus
            .file_name()
            .map(|n| format!("{}/", n.to_string_lossy()))
            .unwrap_or_default()
    });
    let text = std::fs::read_to_string(&args.dataset)
        .map_err(|e| format!("reading {}: {e}", args.dataset.display()))?;
    // kind -> (count, sums of recall@k)
    let mut by_kind: BTreeMap<String, (usize, [f64; 3])> = BTreeMap::new();
    let mut latencies = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let item: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| format!("{}:{}: {e}", args.dataset.display(), n + 1))?;
        let kind = item["kind"].as_str().unwrap_or("?").to_string();
        let question = item["question"].as_str().unwrap_or_default();
        let labelled: Vec<&str> = item["sources"]
            .as_array()
            .map(|a| a.iter().filter_map(|s| s.as_str()).collect())
            .unwrap_or_default();
        for _ in 0..20 {
            let t = Instant::now();
            index.search(question, 10)?;
            latencies.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        if labelled.is_empty() {
            continue;
        }
        let hits = index.search(question, *KS.iter().max().unwrap_or(&10))?;
        let sources: Vec<String> = hits
            .iter()
            .map(|d| {
                format!(
                    "{prefix}{}",
                    d.metadata["source"].as_str().unwrap_or_default()
                )
            })
            .collect();
        let entry = by_kind.entry(kind).or_insert((0, [0.0; 3]));
        entry.0 += 1;
        for (slot, k) in KS.iter().enumerate() {
            let top = &sources[..sources.len().min(*k)];
            let found = labelled
                .iter()
                .filter(|s| top.iter().any(|t| t == *s))
                .count();
            entry.1[slot] += found as f64 / labelled.len() as f64;
        }
    }
    println!("| kind | n | recall@1 | recall@4 | recall@10 |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let mut total = (0usize, [0.0f64; 3]);
    for (kind, (n, sums)) in &by_kind {
        println!(
            "| {kind} | {n} | {:.3} | {:.3} | {:.3} |",
            sums[0] / *n as f64,
            sums[1] / *n as f64,
            sums[2] / *n as f64
        );
        total.0 += n;
        for (t, s) in total.1.iter_mut().zip(sums) {
            *t += s;
        }
    }
    if total.0 > 0 {
        let n = total.0 as f64;
        println!(
            "| **all** | {} | {:.3} | {:.3} | {:.3} |",
            total.0,
            total.1[0] / n,
            total.1[1] / n,
            total.1[2] / n
        );
    }
    latencies.sort_by(f64::total_cmp);
    println!(
        "\nquery latency over {} searches (top_k=10): p50 {:.3} ms, p95 {:.3} ms, max {:.3} ms",
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.95),
        latencies.last().copied().unwrap_or(f64::NAN)
    );
    Ok(())
}
