//! The progress bar of long corpus work (indexing files, embedding chunks): drawn on
//! stderr only when asked for and stderr is a terminal, hidden otherwise.

/// A bar of `len` steps. `template` is an indicatif template (e.g.
/// `"{spinner} {msg} [{bar:30}] {pos}/{len} files"`); a template indicatif refuses
/// leaves the default style.
pub(crate) fn bar(enabled: bool, len: usize, template: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    let target = if enabled && std::io::stderr().is_terminal() {
        indicatif::ProgressDrawTarget::stderr()
    } else {
        indicatif::ProgressDrawTarget::hidden()
    };
    let pb = indicatif::ProgressBar::with_draw_target(Some(len as u64), target);
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        pb.set_style(style);
    }
    pb
}
