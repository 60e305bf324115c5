//! A bundle load with a time limit. Reading goes through [`crate::read`], which cannot block on
//! a pipe or read without bound, but a file system can still hang (a network share that stops
//! answering). A load that runs past the limit is abandoned: its thread is left behind (it
//! cannot be interrupted; it ends when the file system answers, and its result is dropped), the
//! bundle gets an error naming the file it was on, keeps its last good version, and is read
//! again on its next change. Other bundles and shutdown never wait for it.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long one bundle's load may take before it is abandoned.
pub(crate) const LOAD_TIME_LIMIT: Duration = Duration::from_secs(30);

/// The file a load is on, shared with whoever waits for it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Progress(Arc<Mutex<Option<PathBuf>>>);

impl Progress {
    /// Notes that the load now reads `path`.
    pub(crate) fn set(&self, path: &Path) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(path.to_path_buf());
    }

    /// The file the load was last on.
    pub(crate) fn current(&self) -> Option<PathBuf> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The load ran past its limit; it was on this file (or had not opened one yet).
#[derive(Debug)]
pub(crate) struct Abandoned {
    pub file: Option<PathBuf>,
    pub limit: Duration,
}

/// Runs `load` on a thread of its own and waits at most `limit` for it.
pub(crate) fn run<T: Send + 'static>(
    limit: Duration,
    load: impl FnOnce(&Progress) -> T + Send + 'static,
) -> Result<T, Abandoned> {
    if limit.is_zero() {
        // Waiting for nothing: abandoned before it starts, not raced against a quick load that
        // may have sent its result before it is looked for.
        return Err(Abandoned { file: None, limit });
    }
    let progress = Progress::default();
    let (tx, rx) = mpsc::sync_channel(1);
    let theirs = progress.clone();
    let spawned = std::thread::Builder::new()
        .name("eventbox-load".into())
        .spawn(move || {
            let _ = tx.send(load(&theirs));
        });
    if spawned.is_err() {
        // No thread to spare: nothing was read.
        return Err(Abandoned { file: None, limit });
    }
    rx.recv_timeout(limit).map_err(|_| Abandoned {
        file: progress.current(),
        limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_in_time_gives_its_result() {
        assert_eq!(run(Duration::from_secs(5), |_| 7).ok(), Some(7));
    }

    /// A zero limit abandons every load, however quick (a quick one used to win the race).
    #[test]
    fn a_zero_limit_abandons_even_a_quick_load() {
        for _ in 0..100 {
            assert!(run(Duration::ZERO, |_| 7).is_err());
        }
    }

    #[test]
    fn a_load_past_the_limit_is_abandoned_naming_the_file_it_was_on() {
        let started = std::time::Instant::now();

        let result = run(Duration::from_millis(100), |p| {
            p.set(Path::new("/data/summit/payments.json"));
            std::thread::sleep(Duration::from_secs(3));
        });

        let abandoned = result.expect_err("abandoned");
        assert_eq!(
            abandoned.file.as_deref(),
            Some(Path::new("/data/summit/payments.json"))
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "did not wait for the load"
        );
    }
}
