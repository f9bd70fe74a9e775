//! The progress bar `morph simulate` shows while its runs go.

use indicatif::{ProgressBar, ProgressStyle};

/// Runs `run` with a progress bar of its runs on stderr, cleared when it returns.
pub(crate) fn with_progress<T, E: Into<anyhow::Error>>(
    run: impl FnOnce(&mut dyn FnMut(usize, usize)) -> Result<T, E>,
) -> anyhow::Result<T> {
    let bar = ProgressBar::new(0);
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {elapsed}")?);
    let out = run(&mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    });
    bar.finish_and_clear();
    out.map_err(Into::into)
}
