//! Flags that decide where LLM answers come from and where they go: the response
//! cache, cassette recording and replay. Flattened into `ragloop run` (and `eval`).
use ragloop::providers::cache::ResponseCache;
use ragloop::providers::cassette::{Cassette, CassetteWriter};
use ragloop::runtime::ResourceOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `--record`, `--replay`, `--no-cache`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct CallArgs {
    /// Record every LLM exchange (request, answer, usage) and embedding call (texts,
    /// vectors) into FILE, one JSON line each (the file is created or truncated).
    /// Never holds an API key.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Answer every model (chat and embedding) from a cassette written by --record:
    /// no provider is built, no API key is needed; a request the cassette does not
    /// hold fails the run.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Bypass the response cache (no read, no write). The cache keeps the answers of
    /// temperature-0 openai/anthropic models and query embeddings under $RAGLOOP_CACHE_DIR, else
    /// $XDG_CACHE_HOME/ragloop, else ~/.cache/ragloop (responses/).
    #[arg(long)]
    pub no_cache: bool,
}

impl CallArgs {
    /// Fills the cache, replay and record fields of `opts`. `inputs` are the files the
    /// run reads (spec, questions, trace...): `--record` refuses to overwrite them.
    /// The cassette is created (truncated), or with `resume` (an eval resumed after a
    /// kill) appended to after cutting off a torn last line. Call it after the spec
    /// has loaded. Prints a warning on stderr when a replayed cassette's last line was
    /// torn.
    ///
    /// # Errors
    /// A usage message: unreadable or malformed cassette (with file:line), a record
    /// file that would overwrite an input, a record file that cannot be created.
    pub fn apply(
        &self,
        opts: &mut ResourceOptions,
        inputs: &[&Path],
        resume: bool,
    ) -> Result<(), String> {
        if !self.no_cache {
            opts.cache = ResponseCache::open_default().map(Arc::new);
        }
        if let Some(path) = &self.replay {
            let c = Cassette::load(path).map_err(|e| format!("--replay: {e}"))?;
            if c.truncated_tail() {
                ragloop::errln!(
                    "ragloop: warning: the last line of {} is incomplete (an interrupted recording) and was skipped",
                    path.display()
                );
            }
            opts.replay = Some(Arc::new(c));
        }
        if let Some(path) = &self.record {
            let clobbered = ragloop::paths::clobbers(
                path,
                inputs.iter().copied().chain(self.replay.as_deref()),
            );
            if let Some(p) = clobbered {
                return Err(format!(
                    "--record {} would overwrite {}, an input of this run",
                    path.display(),
                    p.display()
                ));
            }
            let writer = if resume {
                CassetteWriter::append(path)
            } else {
                CassetteWriter::create(path)
            }
            .map_err(|e| e.to_string())?;
            opts.record = Some(Arc::new(writer));
        }
        Ok(())
    }
}
