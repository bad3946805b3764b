//! `ragloop graph SPEC --format mermaid|dot`: the topology, conditional edges
//! labelled with their predicates, END shown.
use ragloop::compile::{compile, CompileOptions};
use ragloop::diag::render::{self, Format};
use ragloop::graph::export::{render as export, GraphFormat};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `ragloop graph`.
#[derive(clap::Args)]
#[command(after_help = "Exit status: 0 printed, 1 the spec is invalid, 2 usage error.")]
pub struct GraphArgs {
    /// The spec file.
    pub spec: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "mermaid")]
    pub format: GraphFormatArg,
    /// Draw a variant's merged spec.
    #[arg(long)]
    pub variant: Option<String>,
}

/// `--format` of `ragloop graph` (the library's [`GraphFormat`] has no clap derive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormatArg {
    /// Mermaid flowchart (renders on GitHub and in most Markdown viewers).
    Mermaid,
    /// Graphviz DOT (`dot -Tsvg`).
    Dot,
}

impl From<GraphFormatArg> for GraphFormat {
    fn from(f: GraphFormatArg) -> Self {
        match f {
            GraphFormatArg::Mermaid => GraphFormat::Mermaid,
            GraphFormatArg::Dot => GraphFormat::Dot,
        }
    }
}

/// Runs `ragloop graph`.
pub fn run(args: GraphArgs) -> ExitCode {
    // Draw only what `validate` accepts: a broken edge would otherwise vanish silently.
    let compiled = match compile(
        &args.spec,
        &CompileOptions {
            no_environment: true,
        },
    ) {
        Ok(c) => c,
        Err(e) => {
            ragloop::errp!(
                "{}",
                render::render(&e.diagnostics, &e.sources, Format::Human)
            );
            ragloop::errln!(
                "ragloop graph: {} is not valid; fix the errors above first",
                args.spec.display()
            );
            return ExitCode::from(1);
        }
    };
    let Some(unit) = compiled.unit(args.variant.as_deref()) else {
        let names: Vec<&str> = compiled.variant_names().collect();
        ragloop::errln!(
            "ragloop graph: no variant `{}` in {} (variants: {})",
            args.variant.as_deref().unwrap_or_default(),
            args.spec.display(),
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        );
        return ExitCode::from(super::EXIT_USAGE);
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(export(&unit.spec.spec, &unit.topology, args.format.into()).as_bytes());
    let _ = out.flush();
    ExitCode::SUCCESS
}
