//! SIGINT (Ctrl-C) and SIGTERM for `run` and `eval`: the first signal cancels the
//! token handed to the library (runs end with status `interrupted`, finished results
//! are kept, traces and reports are written, exit 130); a second one exits at once
//! with 130, removing the eval lock files this process holds.
use ragloop::runtime::CancellationToken;

/// Watches for SIGINT and SIGTERM (Ctrl-C elsewhere) on `rt` and returns the token
/// the first one cancels. The handlers are registered before this returns, so a
/// signal arriving right after is never missed (nor does it kill the process). When
/// they cannot be registered the default behaviour stays (the signal kills the
/// process), with a note.
pub fn install(rt: &tokio::runtime::Runtime, command: &'static str) -> CancellationToken {
    let token = CancellationToken::new();
    let _guard = rt.enter();
    let mut signals = match Signals::new() {
        Ok(s) => s,
        Err(e) => {
            ragloop::errln!("ragloop {command}: note: cannot watch for Ctrl-C/SIGTERM: {e}");
            return token;
        }
    };
    let cancel = token.clone();
    rt.spawn(async move {
        let name = signals.next().await;
        ragloop::errln!(
            "ragloop {command}: {name}: stopping; finished results are kept (send it again to exit at once)"
        );
        cancel.cancel();
        let name = signals.next().await;
        ragloop::errln!("ragloop {command}: {name} again: exiting now");
        ragloop::eval::lock::remove_held();
        std::process::exit(i32::from(ragloop::runtime::status::EXIT_INTERRUPTED));
    });
    token
}

#[cfg(unix)]
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    /// Waits for the next signal and names it.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "interrupted (SIGINT)",
            _ = self.term.recv() => "terminated (SIGTERM)",
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn new() -> std::io::Result<Signals> {
        Ok(Signals)
    }

    async fn next(&mut self) -> &'static str {
        match tokio::signal::ctrl_c().await {
            Ok(()) => "interrupted (Ctrl-C)",
            // Cannot watch: never resolve, the default behaviour stays.
            Err(_) => std::future::pending().await,
        }
    }
}
