// Single-shot retrieval quality over the Rust book QA dataset, per question kind, next
// to issue 13's targets and (with `--baseline FILE`, written by bench/bm25_baseline.py)
// a plain rank_bm25 baseline computed in the same run.
//
//   cargo run --release --example recall -- [--dataset FILE.jsonl] [--out INDEX_DIR]
//       [--corpus rust-docs:book] [--exclude PATTERN]... [--include PATTERN]...
//       [--no-hygiene] [--max-per-source N] [--force] [--prefix P] [--baseline FILE]
//
// `--prefix` is put before chunk sources to match dataset paths (default: the corpus
// directory name and `/`, e.g. `book/`; use `--prefix ''` for the HTML root).
//
// Measures, for the answerable items (`unanswerable` items have no sources), each a
// share of the items of a kind:
// - hit@1: the source page of the rank-1 chunk is a labelled page;
// - hit@4: a labelled page is among the sources of the top 4 chunks;
// - all@4: every labelled page is among them (the multi-hop measure);
// - recall@10: mean share of labelled pages among the sources of the top 10.
// Also prints query latency percentiles over every question.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use ragloop::retrieval::rerank::{order, OfflineReranker, OfflineWeights};
use ragloop::retrieval::{
    resolve_corpus, ChunkSizes, Diversity, FieldWeights, Index, IndexOptions,
};
use std::sync::Arc;

/// Issue 13's single-shot targets: hit@1, hit@4 (answerable), all@4 (multi-hop).
const TARGET_HIT1: f64 = 0.90;
const TARGET_HIT4: f64 = 0.97;
const TARGET_ALL4_MULTI: f64 = 0.75;

struct Args {
    dataset: PathBuf,
    out: PathBuf,
    corpus: String,
    exclude: Vec<String>,
    include: Vec<String>,
    hygiene: Option<bool>,
    max_per_source: Option<usize>,
    mmr: Option<f64>,
    force: bool,
    prefix: Option<String>,
    baseline: Option<PathBuf>,
    weights: FieldWeights,
    chunk: Option<ChunkSizes>,
    heading_weight: Option<u32>,
    rerank: Option<OfflineWeights>,
    candidates: usize,
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
        include: Vec::new(),
        hygiene: None,
        max_per_source: None,
        mmr: None,
        force: false,
        prefix: None,
        baseline: None,
        weights: FieldWeights::default(),
        chunk: None,
        heading_weight: None,
        rerank: None,
        candidates: 12,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--dataset" => args.dataset = PathBuf::from(value()?),
            "--out" => args.out = PathBuf::from(value()?),
            "--corpus" => args.corpus = value()?,
            "--exclude" => args.exclude.push(value()?),
            "--include" => args.include.push(value()?),
            "--prefix" => args.prefix = Some(value()?),
            "--baseline" => args.baseline = Some(PathBuf::from(value()?)),
            "--max-per-source" => {
                let v = value()?;
                args.max_per_source =
                    Some(v.parse().map_err(|_| format!("--max-per-source {v:?}"))?)
            }
            "--weights" => {
                let v = value()?;
                let w: Vec<f32> = v.split(',').filter_map(|x| x.parse().ok()).collect();
                let [title, headings] = w[..] else {
                    return Err(format!("--weights TITLE,HEADINGS, not {v:?}"));
                };
                args.weights = FieldWeights { title, headings };
            }
            "--chunk" => {
                let v = value()?;
                let w: Vec<usize> = v.split(',').filter_map(|x| x.parse().ok()).collect();
                let [target, max, overlap] = w[..] else {
                    return Err(format!("--chunk TARGET,MAX,OVERLAP, not {v:?}"));
                };
                args.chunk = Some(ChunkSizes {
                    target,
                    max,
                    overlap,
                });
            }
            "--heading-weight" => {
                let v = value()?;
                args.heading_weight =
                    Some(v.parse().map_err(|_| format!("--heading-weight {v:?}"))?);
            }
            "--mmr" => {
                let v = value()?;
                args.mmr = Some(v.parse().map_err(|_| format!("--mmr {v:?}"))?);
            }
            "--rerank" => {
                let v = value()?;
                args.rerank = Some(match v.as_str() {
                    "offline" => OfflineWeights::default(),
                    w => {
                        let w: Vec<f64> = w.split(',').filter_map(|x| x.parse().ok()).collect();
                        let [retrieval, page, proximity, heading] = w[..] else {
                            return Err(format!("--rerank offline|R,P,X,H, not {v:?}"));
                        };
                        OfflineWeights {
                            retrieval,
                            page,
                            proximity,
                            heading,
                        }
                    }
                })
            }
            "--candidates" => {
                let v = value()?;
                args.candidates = v.parse().map_err(|_| format!("--candidates {v:?}"))?;
            }
            "--no-hygiene" => args.hygiene = Some(false),
            "--hygiene" => args.hygiene = Some(true),
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

/// Per kind: items, hit@1, hit@4, all@4 and recall@10 sums.
#[derive(Default, Clone, Copy)]
struct Sums {
    n: usize,
    hit1: f64,
    hit4: f64,
    all4: f64,
    recall10: f64,
}

impl Sums {
    fn add(&mut self, o: &Sums) {
        self.n += o.n;
        self.hit1 += o.hit1;
        self.hit4 += o.hit4;
        self.all4 += o.all4;
        self.recall10 += o.recall10;
    }
}

/// kind -> (hit1, hit4, all4) shares of the baseline.
fn read_baseline(path: &Path) -> Result<BTreeMap<String, Sums>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("{}: {e}", path.display()))?;
        let Some(kind) = v["kind"].as_str() else {
            continue;
        };
        let n = v["n"].as_u64().unwrap_or(0) as usize;
        let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN) * n as f64;
        out.insert(
            kind.to_string(),
            Sums {
                n,
                hit1: f("hit1"),
                hit4: f("hit4"),
                all4: f("all4"),
                recall10: f64::NAN,
            },
        );
    }
    Ok(out)
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let corpus = resolve_corpus(&args.corpus, Path::new("."))?;
    let mut opts = IndexOptions {
        force: args.force,
        progress: true,
        hygiene: args
            .hygiene
            .unwrap_or_else(|| args.corpus.starts_with("rust-docs:")),
        include: args.include.clone(),
        ..IndexOptions::default()
    };
    if !args.exclude.is_empty() {
        opts.exclude = args.exclude.clone();
    }
    if let Some(w) = args.heading_weight {
        opts.heading_weight = w;
    }
    if let Some(c) = args.chunk {
        opts.chunk = c;
    }
    let (index, report) = Index::open_or_build(&corpus, Some(&args.out), &opts)?;
    eprintln!(
        "{} index: {} files, {} chunks, {} skipped ({}), {:.2} s -> {}",
        if report.reused { "reused" } else { "built" },
        report.files,
        report.chunks,
        report.skipped,
        report
            .skipped_by_reason
            .iter()
            .map(|(r, n)| format!("{n} {r}"))
            .collect::<Vec<_>>()
            .join(", "),
        report.seconds,
        report.index_dir.display()
    );
    let diversity = Diversity {
        max_per_source: args.max_per_source,
        mmr: args.mmr,
    };
    let prefix = args.prefix.clone().unwrap_or_else(|| {
        corpus
            .file_name()
            .map(|n| format!("{}/", n.to_string_lossy()))
            .unwrap_or_default()
    });
    let text = std::fs::read_to_string(&args.dataset)
        .map_err(|e| format!("reading {}: {e}", args.dataset.display()))?;
    let mut by_kind: BTreeMap<String, Sums> = BTreeMap::new();
    let mut latencies = Vec::new();
    let index = Arc::new(index);
    let reranker = args
        .rerank
        .map(|w| OfflineReranker::with_weights(Arc::clone(&index), w));
    let search = |q: &str, k: usize| -> Result<Vec<String>, Box<dyn std::error::Error>> {
        let n = if reranker.is_some() {
            args.candidates.max(k)
        } else {
            k
        };
        let hits = index.search_with(q, diversity.fetch(n), &args.weights)?;
        let mut hits = diversity.apply(hits, n);
        if let Some(r) = &reranker {
            let scores = r.scores(q, &hits)?;
            hits = order(hits, &scores, k);
        }
        Ok(hits
            .iter()
            .map(|d| {
                format!(
                    "{prefix}{}",
                    d.metadata["source"].as_str().unwrap_or_default()
                )
            })
            .collect())
    };
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
            search(question, 10)?;
            latencies.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        if labelled.is_empty() {
            continue;
        }
        let top10 = search(question, 10)?;
        let top4 = search(question, 4)?;
        let in_top = |top: &[String], s: &str| top.iter().any(|t| t == s);
        let e = by_kind.entry(kind).or_default();
        e.n += 1;
        e.hit1 += f64::from(u8::from(
            top4.first().map(|t| labelled.contains(&t.as_str())) == Some(true),
        ));
        e.hit4 += f64::from(u8::from(labelled.iter().any(|s| in_top(&top4, s))));
        e.all4 += f64::from(u8::from(labelled.iter().all(|s| in_top(&top4, s))));
        e.recall10 +=
            labelled.iter().filter(|s| in_top(&top10, s)).count() as f64 / labelled.len() as f64;
    }
    let baseline = match &args.baseline {
        Some(p) => Some(read_baseline(p)?),
        None => None,
    };
    let share = |x: f64, n: usize| {
        if n == 0 || x.is_nan() {
            "–".to_string()
        } else {
            format!("{:.3}", x / n as f64)
        }
    };
    let bl = |kind: &str, f: fn(&Sums) -> f64| -> String {
        match baseline.as_ref().and_then(|b| b.get(kind)) {
            Some(s) => share(f(s), s.n),
            None => "–".to_string(),
        }
    };
    println!(
        "| kind | n | hit@1 | target | bm25 | hit@4 | target | bm25 | all@4 | target | bm25 | recall@10 |"
    );
    println!(
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let mut total = Sums::default();
    for (kind, s) in &by_kind {
        let all4_target = if kind == "multi_hop" {
            format!("{TARGET_ALL4_MULTI:.2}")
        } else {
            String::new()
        };
        println!(
            "| {kind} | {} | {} | {TARGET_HIT1:.2} | {} | {} | {TARGET_HIT4:.2} | {} | {} | {all4_target} | {} | {} |",
            s.n,
            share(s.hit1, s.n),
            bl(kind, |s| s.hit1),
            share(s.hit4, s.n),
            bl(kind, |s| s.hit4),
            share(s.all4, s.n),
            bl(kind, |s| s.all4),
            share(s.recall10, s.n),
        );
        total.add(s);
    }
    if total.n > 0 {
        let mut b = Sums::default();
        for s in baseline.iter().flat_map(|m| m.values()) {
            b.add(s);
        }
        let bshare = |x: f64| {
            if b.n == 0 {
                "–".to_string()
            } else {
                share(x, b.n)
            }
        };
        println!(
            "| **answerable** | {} | {} | {TARGET_HIT1:.2} | {} | {} | {TARGET_HIT4:.2} | {} | {} | | {} | {} |",
            total.n,
            share(total.hit1, total.n),
            bshare(b.hit1),
            share(total.hit4, total.n),
            bshare(b.hit4),
            share(total.all4, total.n),
            bshare(b.all4),
            share(total.recall10, total.n),
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
