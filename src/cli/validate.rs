//! `ragloop validate [SPEC...]`: every static check, before any LLM call.
use ragloop::compile::{compile_in, CompileOptions};
use ragloop::diag::render::{self, Format};
use ragloop::diag::{Diagnostic, Severity};
use ragloop::spec::source::Sources;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// `--format` of `ragloop validate` (the library's [`Format`] has no clap derive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// Readable text with source excerpts.
    Human,
    /// One JSON document: `{"diagnostics": [...], "errors": N, "warnings": N}`.
    Json,
    /// GitHub Actions workflow commands (`::error file=...,line=...::message`).
    Github,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Human => Format::Human,
            FormatArg::Json => Format::Json,
            FormatArg::Github => Format::Github,
        }
    }
}

/// Arguments of `ragloop validate`.
#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 every spec is valid, 1 a spec is invalid (or unreadable), 2 usage error."
)]
pub struct ValidateArgs {
    /// Spec files or directories of specs (`*.yaml`, `*.yml`). Default: ./graphs.
    pub specs: Vec<PathBuf>,
    /// Output format of diagnostics.
    #[arg(long, value_enum, default_value = "human")]
    pub format: FormatArg,
    /// Treat warnings as errors (exit 1 when there is any).
    #[arg(long)]
    pub deny_warnings: bool,
    /// Skip checks that look outside the spec's files (corpus directories exist).
    #[arg(long)]
    pub no_environment: bool,
    /// Print diagnostics only, no per-spec status lines.
    #[arg(long, short)]
    pub quiet: bool,
}

fn expand(specs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let inputs: Vec<PathBuf> = if specs.is_empty() {
        vec![PathBuf::from("graphs")]
    } else {
        specs.to_vec()
    };
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(&p)
                .map_err(|e| format!("cannot list {}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| {
                    f.is_file()
                        && matches!(f.extension().and_then(|x| x.to_str()), Some("yaml" | "yml"))
                })
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(format!("no *.yaml specs in {}", p.display()));
            }
            out.extend(found);
        } else if specs.is_empty() {
            return Err(
                "no spec given and ./graphs does not exist; usage: ragloop validate SPEC...".into(),
            );
        } else {
            out.push(p);
        }
    }
    Ok(out)
}

/// Runs `ragloop validate`.
pub fn run(args: ValidateArgs) -> ExitCode {
    let files = match expand(&args.specs) {
        Ok(f) => f,
        Err(msg) => {
            ragloop::errln!("ragloop validate: {msg}");
            return ExitCode::from(super::EXIT_USAGE);
        }
    };
    let opts = CompileOptions {
        no_environment: args.no_environment,
    };
    let mut sources = Sources::new();
    let mut all: Vec<Diagnostic> = Vec::new();
    let mut status_lines = Vec::new();
    let mut invalid = 0usize;
    for file in &files {
        let (mut diagnostics, variants) = match compile_in(file, &opts, sources) {
            Ok(c) => {
                let variants = c.variant_names().count();
                sources = c.sources;
                (c.diagnostics, variants)
            }
            Err(e) => {
                sources = e.sources;
                (e.diagnostics, e.variant_names.len())
            }
        };
        if args.deny_warnings {
            for d in &mut diagnostics {
                d.severity = Severity::Error;
            }
        }
        let errors = diagnostics.iter().filter(|d| d.is_error()).count();
        let warnings = diagnostics.len() - errors;
        let bad = errors > 0 || (args.deny_warnings && warnings > 0);
        invalid += usize::from(bad);
        status_lines.push(format!(
            "{} {}: {}{}",
            if bad { "x" } else { "√" },
            file.display(),
            if bad {
                format!("{errors} error(s), {warnings} warning(s)")
            } else if warnings > 0 {
                format!("valid, {warnings} warning(s)")
            } else {
                "valid".into()
            },
            if variants > 0 {
                format!(" ({variants} variant(s) checked)")
            } else {
                String::new()
            },
        ));
        all.extend(diagnostics);
    }
    let mut out = std::io::stdout().lock();
    let text = render::render(&all, &sources, args.format.into());
    let _ = out.write_all(text.as_bytes());
    if args.format == FormatArg::Human && !args.quiet {
        for l in &status_lines {
            let _ = writeln!(out, "{l}");
        }
    }
    let _ = out.flush();
    if invalid > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
