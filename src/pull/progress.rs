//! What `pull` tells a person while it runs, on stderr: a progress bar for the details phase
//! when stderr is a terminal (indicatif), plain lines when it is not (a log file, CI, cron), or
//! nothing. The workers share one `Progress`; it never sees the token.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::stage::human_bytes;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// A bar when stderr is a terminal, plain lines otherwise.
    Auto,
    /// Plain lines.
    Plain,
    /// Nothing (errors and the summary are still printed by the command).
    Quiet,
}

/// The progress display of one pull.
pub(crate) struct Progress {
    kind: Kind,
    total: AtomicUsize,
    done: AtomicUsize,
}

enum Kind {
    Bar(ProgressBar),
    Plain,
    Quiet,
}

impl Progress {
    pub(crate) fn new(mode: ProgressMode) -> Progress {
        let kind = match mode {
            ProgressMode::Auto if std::io::stderr().is_terminal() => {
                Kind::Bar(ProgressBar::hidden())
            }
            ProgressMode::Auto | ProgressMode::Plain => Kind::Plain,
            ProgressMode::Quiet => Kind::Quiet,
        };
        Progress {
            kind,
            total: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
        }
    }

    fn line(&self, text: &str) {
        match &self.kind {
            Kind::Bar(bar) if !bar.is_hidden() => bar.println(text),
            Kind::Bar(_) | Kind::Plain => {
                let _ = writeln!(std::io::stderr().lock(), "{text}");
            }
            Kind::Quiet => {}
        }
    }

    /// One list endpoint fetched.
    pub(crate) fn endpoint(&self, name: &str, records: Option<usize>, bytes: u64) {
        let records = match records {
            Some(1) => "1 record".to_string(),
            Some(n) => format!("{n} records"),
            None => "? records".to_string(),
        };
        self.line(&format!("pull: {name}: {records}, {}", human_bytes(bytes)));
    }

    /// The details phase starts, with `total` requests to make.
    pub(crate) fn details_start(&self, total: usize) {
        self.total.store(total, Ordering::Relaxed);
        match &self.kind {
            Kind::Bar(bar) => {
                // The bar was made before the list endpoints were fetched: its clock (rate, eta)
                // starts now.
                bar.reset();
                bar.set_length(total as u64);
                bar.set_style(
                    ProgressStyle::with_template(
                        "{prefix} [{bar:40}] {pos}/{len} {per_sec} eta {eta}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                bar.set_prefix("payment details");
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
            Kind::Plain => self.line(&format!("pull: payment details: {total} to fetch")),
            Kind::Quiet => {}
        }
    }

    /// One detail fetched and written.
    pub(crate) fn detail_done(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        match &self.kind {
            Kind::Bar(bar) => bar.inc(1),
            Kind::Plain => {
                // A line at each tenth, so a log shows progress without a line per request.
                let total = self.total.load(Ordering::Relaxed).max(1);
                if done * 10 / total != (done - 1) * 10 / total && done < total {
                    self.line(&format!("pull: payment details: {done}/{total}"));
                }
            }
            Kind::Quiet => {}
        }
    }

    /// The details phase is complete.
    pub(crate) fn details_end(&self) {
        let done = self.done.load(Ordering::Relaxed);
        if let Kind::Bar(bar) = &self.kind {
            bar.finish_and_clear();
        }
        self.line(&format!("pull: payment details: {done} fetched"));
    }

    /// A request will be tried again after `wait`.
    pub(crate) fn retry(&self, what: &str, reason: &str, wait: Duration) {
        // To the millisecond: `250ms`, `1s 500ms`.
        let wait = Duration::from_millis(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX));
        self.line(&format!(
            "pull: {what}: {reason}; retrying in {}",
            humantime::format_duration(wait)
        ));
    }

    /// Clears the bar (the pull ended, well or not).
    pub(crate) fn finish(&self) {
        if let Kind::Bar(bar) = &self.kind {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_clock_starts_with_the_details_phase() {
        let p = Progress {
            kind: Kind::Bar(ProgressBar::hidden()),
            total: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
        };
        // The list endpoints take their time (no event marks it: time itself must pass).
        std::thread::sleep(Duration::from_millis(200));
        p.details_start(10);
        let Kind::Bar(bar) = &p.kind else {
            panic!("a bar")
        };
        assert!(
            bar.elapsed() < Duration::from_millis(200),
            "{:?}",
            bar.elapsed()
        );
        p.finish();
    }
}
