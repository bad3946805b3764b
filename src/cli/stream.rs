//! `ragloop run --stream`: the text deltas of the run's `llm` nodes printed to stdout
//! as they arrive ([`ragloop::runtime::Observer::token`]), control characters
//! escaped as in an answer; each streamed step's text ends with a newline when the
//! step ends. The summary (sources, path, status, usage) then goes to stderr.
use ragloop::runtime::{Observer, RunResult, StepRecord};
use std::io::Write;

/// Prints tokens to stdout as they arrive.
#[derive(Default)]
pub(super) struct TokenPrinter {
    /// Whether the running step printed text not yet ended by a newline.
    open: bool,
}

impl Observer for TokenPrinter {
    fn wants_tokens(&self) -> bool {
        true
    }

    fn token(&mut self, _node: &str, text: &str) {
        let mut out = std::io::stdout().lock();
        // A closed stdout (`| head`) is not an error of the run.
        let _ = write!(out, "{}", ragloop::text::escape_text(text)).and_then(|()| out.flush());
        self.open = !text.ends_with('\n');
    }

    fn step(&mut self, _: &StepRecord) {
        if std::mem::take(&mut self.open) {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out).and_then(|()| out.flush());
        }
    }

    fn finish(&mut self, _: &RunResult) {}
}
