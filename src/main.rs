//! The `ragloop` command-line interface: a thin layer over the library.
use std::process::ExitCode;

mod cli;

fn main() -> ExitCode {
    cli::main()
}
