//! Watching the data folder: file events (inotify and the like), or polling where events do not
//! arrive (network shares, some container volumes); either way turned into the set of bundles
//! they touch and handed to the [`Reloader`].
//!
//! notify-debouncer-full coalesces the bursts that saving makes (truncate and write, write a
//! temporary file and rename it over, delete and re-create, copy a folder in) and follows renames.
//! A path's bundle is its first component under the data folder; an event on the data folder
//! itself, or a watcher error, reloads everything.
//!
//! Polling is ours rather than notify's `PollWatcher`: that one keeps modification times in whole
//! seconds and does not compare sizes, so a second save within the same second is never seen
//! (short of hashing every file on every poll). Ours compares each file's size, modification time
//! to the nanosecond and identity (inode), which is only a `stat` per file per interval.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use notify_debouncer_full::notify::{self, EventKind, RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{new_debouncer_opt, DebounceEventResult, RecommendedCache};
use tokio::sync::mpsc;

use crate::catalog::Scope;
use crate::reload::Reloader;

/// How the data folder is watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    /// The platform's file events.
    Native,
    /// Scanning the folder's metadata every interval.
    Poll(Duration),
    /// Not at all (SIGHUP still reloads).
    Off,
}

/// Keeps the watcher alive; dropping it stops watching (and ends the reload task).
pub struct Watcher {
    _debouncer: Option<Box<dyn std::any::Any + Send>>,
    poller: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if let Some(p) = &self.poller {
            p.abort();
        }
    }
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watcher")
    }
}

/// The bundles a set of changed paths touches. `data_dir` must be the path the watcher was given.
pub fn scope_of(data_dir: &Path, paths: &[PathBuf]) -> Scope {
    let mut names = BTreeSet::new();
    for path in paths {
        let first = path
            .strip_prefix(data_dir)
            .ok()
            .and_then(|rel| rel.components().next());
        match first {
            Some(Component::Normal(name)) => match name.to_str() {
                Some(n) => {
                    names.insert(n.to_string());
                }
                None => return Scope::All,
            },
            _ => return Scope::All,
        }
    }
    Scope::Bundles(names)
}

/// Starts watching `data_dir` (recursively) and reloading what changes. Must be called inside a
/// tokio runtime. Returns `None` for [`WatchMode::Off`].
pub fn spawn(
    data_dir: &Path,
    mode: WatchMode,
    debounce: Duration,
    reloader: Arc<Reloader>,
) -> notify::Result<Option<Watcher>> {
    let (tx, rx) = mpsc::unbounded_channel::<Option<Vec<PathBuf>>>();
    let watcher = match mode {
        WatchMode::Off => return Ok(None),
        WatchMode::Native => {
            let handler = move |result: DebounceEventResult| {
                let batch = match result {
                    // Reading a file is an event too (open, close without writing): eventbox's
                    // own reads must not trigger reloads.
                    Ok(events) => Some(
                        events
                            .into_iter()
                            .filter(|e| !matches!(e.event.kind, EventKind::Access(_)))
                            .flat_map(|e| e.event.paths)
                            .collect(),
                    ),
                    Err(errors) => {
                        for e in errors {
                            tracing::warn!(error = %e, "file watcher error; reloading everything");
                        }
                        None
                    }
                };
                let _ = tx.send(batch);
            };
            let mut d = new_debouncer_opt::<_, RecommendedWatcher, _>(
                debounce,
                Some(debounce / 4),
                handler,
                RecommendedCache::new(),
                notify::Config::default(),
            )?;
            d.watch(data_dir, RecursiveMode::Recursive)?;
            Watcher {
                _debouncer: Some(Box::new(d)),
                poller: None,
            }
        }
        WatchMode::Poll(interval) => {
            // The baseline is taken now, so a change made right after this returns is seen.
            let baseline = fingerprints(data_dir);
            Watcher {
                _debouncer: None,
                poller: Some(tokio::spawn(poll(
                    data_dir.to_path_buf(),
                    baseline,
                    interval,
                    tx,
                ))),
            }
        }
    };
    tokio::spawn(reload_loop(data_dir.to_path_buf(), rx, reloader));
    Ok(Some(watcher))
}

/// What a poll compares for each file: size, modification time (to the nanosecond), identity.
type Fingerprints = BTreeMap<PathBuf, (u64, Option<SystemTime>, u64)>;

/// Every file and folder under `dir`, with its fingerprint. Unreadable entries are skipped (the
/// reload that follows reports them).
fn fingerprints(dir: &Path) -> Fingerprints {
    let mut out = Fingerprints::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            // Follows links, as loading does.
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path.clone());
            }
            out.insert(path, (meta.len(), meta.modified().ok(), inode(&meta)));
        }
    }
    out
}

#[cfg(unix)]
fn inode(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.ino()
}

#[cfg(not(unix))]
fn inode(_: &std::fs::Metadata) -> u64 {
    0
}

/// Scans `dir` every `interval`. Paths added, removed or changed are collected until a scan finds
/// nothing new (the folder has settled, as the debouncer waits for native events), then sent:
/// a folder being copied in is not loaded half-copied.
async fn poll(
    dir: PathBuf,
    mut before: Fingerprints,
    interval: Duration,
    tx: mpsc::UnboundedSender<Option<Vec<PathBuf>>>,
) {
    let scan = |dir: PathBuf| tokio::task::spawn_blocking(move || fingerprints(&dir));
    let mut pending: BTreeSet<PathBuf> = BTreeSet::new();
    loop {
        tokio::time::sleep(interval).await;
        let Ok(now) = scan(dir.clone()).await else {
            return;
        };
        let changed: Vec<PathBuf> = now
            .iter()
            .filter(|(p, f)| before.get(*p) != Some(f))
            .map(|(p, _)| p.clone())
            .chain(before.keys().filter(|p| !now.contains_key(*p)).cloned())
            .collect();
        before = now;
        if !changed.is_empty() {
            pending.extend(changed);
            continue;
        }
        if !pending.is_empty()
            && tx
                .send(Some(std::mem::take(&mut pending).into_iter().collect()))
                .is_err()
        {
            return;
        }
    }
}

/// Receives batches of changed paths, merges what is already waiting, reloads, repeats. Ends
/// when the watcher is dropped.
async fn reload_loop(
    data_dir: PathBuf,
    mut rx: mpsc::UnboundedReceiver<Option<Vec<PathBuf>>>,
    reloader: Arc<Reloader>,
) {
    while let Some(first) = rx.recv().await {
        let mut scope = batch_scope(&data_dir, first);
        while let Ok(more) = rx.try_recv() {
            scope = merge(scope, batch_scope(&data_dir, more));
        }
        if scope == Scope::Bundles(BTreeSet::new()) {
            continue;
        }
        let reloader = Arc::clone(&reloader);
        let _ = tokio::task::spawn_blocking(move || reloader.reload(&scope)).await;
    }
}

fn batch_scope(data_dir: &Path, batch: Option<Vec<PathBuf>>) -> Scope {
    match batch {
        Some(paths) => scope_of(data_dir, &paths),
        None => Scope::All,
    }
}

fn merge(a: Scope, b: Scope) -> Scope {
    match (a, b) {
        (Scope::Bundles(mut x), Scope::Bundles(y)) => {
            x.extend(y);
            Scope::Bundles(x)
        }
        _ => Scope::All,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_their_bundle() {
        let root = Path::new("/d");
        let paths = [
            PathBuf::from("/d/demo/event.json"),
            PathBuf::from("/d/other/payment_details/x.json"),
            PathBuf::from("/d/demo"),
        ];
        assert_eq!(
            scope_of(root, &paths),
            Scope::Bundles(
                ["demo".to_string(), "other".to_string()]
                    .into_iter()
                    .collect()
            )
        );
        assert_eq!(scope_of(root, &[PathBuf::from("/d")]), Scope::All);
        assert_eq!(scope_of(root, &[PathBuf::from("/elsewhere/x")]), Scope::All);
    }
}
