//! `ragloop graph SPEC --format mermaid|dot`: the topology, conditional edges
//! labelled with their predicates, END shown.
use ragloop::diag::render::{self, Format};
use ragloop::graph::export::{render as export, GraphFormat};
use ragloop::graph::Topology;
use ragloop::spec::source::Sources;
use ragloop::spec::{load_spec, overlay};
use ragloop::validate::{validate_file, Options};
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
    pub format: GraphFormat,
    /// Draw a variant's merged spec.
    #[arg(long)]
    pub variant: Option<String>,
}

/// Runs `ragloop graph`.
pub fn run(args: GraphArgs) -> ExitCode {
    // Draw only what `validate` accepts: a broken edge would otherwise vanish silently.
    let mut check_sources = Sources::new();
    let outcome = validate_file(
        &args.spec,
        &mut check_sources,
        &Options {
            no_environment: true,
        },
    );
    if !outcome.is_valid() {
        ragloop::errp!(
            "{}",
            render::render(&outcome.diagnostics, &check_sources, Format::Human)
        );
        ragloop::errln!(
            "ragloop graph: {} is not valid; fix the errors above first",
            args.spec.display()
        );
        return ExitCode::from(1);
    }
    let mut sources = Sources::new();
    let loaded = match load_spec(&args.spec, &mut sources) {
        Ok(l) => l,
        Err(diags) => {
            ragloop::errp!("{}", render::render(&diags, &sources, Format::Human));
            return ExitCode::from(1);
        }
    };
    let loaded = match &args.variant {
        None => loaded,
        Some(v) if !loaded.spec.variants.contains_key(v) => {
            let names: Vec<&str> = loaded.spec.variants.keys().map(String::as_str).collect();
            ragloop::errln!(
                "ragloop graph: no variant `{v}` in {} (variants: {})",
                args.spec.display(),
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            );
            return ExitCode::from(super::EXIT_USAGE);
        }
        Some(v) => match overlay::apply(&loaded, v) {
            Ok(m) => m,
            Err(diags) => {
                ragloop::errp!("{}", render::render(&diags, &sources, Format::Human));
                return ExitCode::from(1);
            }
        },
    };
    let topo = Topology::build(&loaded.spec);
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(export(&loaded.spec, &topo, args.format).as_bytes());
    let _ = out.flush();
    ExitCode::SUCCESS
}
