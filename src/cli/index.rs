//! `ragloop index DIR [--out PATH] [--exclude PATTERN]... [--force]`: builds the BM25
//! index of a corpus directory, or reuses it while the corpus is unchanged.
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
    let mut opts = IndexOptions {
        force: args.force,
        progress: true,
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
            if report.reused {
                let _ = writeln!(
                    std::io::stdout(),
                    "reused index of {} files, {} chunks in {:.2} s -> {} (unchanged corpus)",
                    report.files,
                    report.chunks,
                    report.seconds,
                    report.index_dir.display()
                );
            } else {
                let _ = writeln!(
                    std::io::stdout(),
                    "indexed {} files into {} chunks ({} skipped) in {:.2} s -> {}",
                    report.files,
                    report.chunks,
                    report.skipped,
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
