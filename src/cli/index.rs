//! `ragloop index DIR [--out PATH] [--exclude PATTERN]... [--include PATTERN]...
//! [--hygiene on|off] [--force] [--verbose]`: builds the BM25 index of a corpus
//! directory, or reuses it while the corpus is unchanged, and says what it skipped.
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use ragloop::retrieval::{resolve_corpus, Index, IndexOptions};

/// Arguments of `ragloop index`.
#[derive(clap::Args)]
pub struct IndexArgs {
    /// Corpus directory (or `rust-docs:book`, `rust-docs:` for the installed Rust docs).
    pub dir: PathBuf,
    /// Where to write the index (default: $RAGLOOP_CACHE_DIR, $XDG_CACHE_HOME/ragloop or
    /// ~/.cache/ragloop, then indexes/<hash of the corpus path>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Leave out files matching PATTERN (file name, or path relative to DIR if it has
    /// a `/`; `*` and `?` wildcards). Replaces the default `print.html` when given.
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<String>,
    /// Index only files matching PATTERN (same rules as --exclude, which still
    /// applies to them). Repeatable.
    #[arg(long, value_name = "PATTERN")]
    pub include: Vec<String>,
    /// Skip placeholder pages, duplicates and all-in-one pages (found by content).
    /// Default: on for `rust-docs:` corpora, off otherwise.
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    pub hygiene: Option<String>,
    /// List every skipped file with its reason.
    #[arg(long, short)]
    pub verbose: bool,
    /// Rebuild even if the corpus is unchanged.
    #[arg(long)]
    pub force: bool,
    /// Do not print warnings about skipped files.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `ragloop index`: exit 0 on success, 1 if the index cannot be built.
pub fn run(args: IndexArgs) -> ExitCode {
    let spec = args.dir.to_string_lossy();
    let corpus = match resolve_corpus(&spec, std::path::Path::new(".")) {
        Ok(p) => p,
        Err(e) => {
            ragloop::errln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let hygiene = match args.hygiene.as_deref() {
        Some(v) => v == "on",
        None => spec.starts_with("rust-docs:"),
    };
    let mut opts = IndexOptions {
        force: args.force,
        progress: true,
        include: args.include,
        hygiene,
        ..IndexOptions::default()
    };
    if !args.exclude.is_empty() {
        opts.exclude = args.exclude;
    }
    match Index::open_or_build(&corpus, args.out.as_deref(), &opts) {
        Ok((_index, report)) => {
            if !args.quiet {
                for w in &report.warnings {
                    ragloop::errln!("warning: {w}");
                }
            }
            let mut out = std::io::stdout();
            if args.verbose {
                for f in &report.skipped_files {
                    let detail = f
                        .detail
                        .as_deref()
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default();
                    let line = format!("skipped {}: {}{detail}", f.path, f.reason);
                    let _ = writeln!(out, "{}", ragloop::text::escape_line(&line));
                }
            }
            let skipped = if report.skipped_by_reason.is_empty() {
                format!("{} skipped", report.skipped)
            } else {
                let counts: Vec<String> = report
                    .skipped_by_reason
                    .iter()
                    .map(|(reason, n)| format!("{n} {reason}"))
                    .collect();
                format!("{} skipped: {}", report.skipped, counts.join(", "))
            };
            if report.reused {
                let _ = writeln!(
                    out,
                    "reused index of {} files, {} chunks ({skipped}) in {:.2} s -> {} (unchanged corpus)",
                    report.files,
                    report.chunks,
                    report.seconds,
                    report.index_dir.display()
                );
            } else {
                let _ = writeln!(
                    out,
                    "indexed {} files into {} chunks ({skipped}) in {:.2} s -> {}",
                    report.files,
                    report.chunks,
                    report.seconds,
                    report.index_dir.display()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            ragloop::errln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
