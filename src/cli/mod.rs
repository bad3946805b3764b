//! Subcommands of the `ragloop` binary. Each file parses its own arguments and calls
//! the library; `main` maps the outcome to an exit code.
//!
//! Exit codes shared by every subcommand: 0 success, 1 the input is invalid or the
//! work failed, 2 usage error (bad flags, unreadable arguments), 130 interrupted
//! (SIGINT/SIGTERM, `run` and `eval`; see `signals`).
use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod calls;
mod eval;
mod graph;
mod index;
mod overrides;
mod run;
mod serve;
mod signals;
mod stream;
mod threads;
mod validate;

/// Exit status for a usage error (bad flags or arguments).
pub const EXIT_USAGE: u8 = 2;

#[derive(Parser)]
#[command(
    name = "ragloop",
    version,
    about = "Validate, draw, index and run agentic RAG graphs written as YAML specs."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Accept a spec whose `root` lies outside the current directory and the spec's
    /// own directory (and their git work trees).
    #[arg(long, global = true)]
    allow_outside_root: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Check specs before any LLM call: syntax, references, files, templates, predicates, graph, variants.
    Validate(validate::ValidateArgs),
    /// Print a spec's topology as Mermaid or DOT.
    Graph(graph::GraphArgs),
    /// Build (or reuse) the BM25 index of a corpus directory.
    Index(index::IndexArgs),
    /// Run a spec on a question (offline by default) and print the answer, its sources and the path taken.
    Run(run::RunArgs),
    /// Run every question of a dataset under every variant; write metrics, comparisons and reports.
    Eval(eval::EvalArgs),
    /// Serve specs over HTTP: run, stream (SSE), graphs, metrics, OpenAPI; hot reload.
    Serve(serve::ServeArgs),
}

/// Parses the command line and runs the subcommand.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return match err.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(EXIT_USAGE),
            };
        }
    };
    ragloop::spec::load::set_allow_outside_root(cli.allow_outside_root);
    match cli.command {
        Command::Validate(args) => validate::run(args),
        Command::Graph(args) => graph::run(args),
        Command::Index(args) => index::run(args),
        Command::Run(args) => run::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Serve(args) => serve::run(args),
    }
}
