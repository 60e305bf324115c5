//! Watching the data folder: file events (inotify and the like), or polling where events do not
//! arrive (network shares, some container volumes); either way turned into the set of bundles
//! they touch and handed to the `Reloader`.
//!
//! notify-debouncer-full coalesces the bursts that saving makes (truncate and write, write a
//! temporary file and rename it over, delete and re-create, copy a folder in) and follows renames.
//! A path's bundle is its first component under the data folder; an event on the data folder
//! itself, or a watcher error, reloads everything.
//!
//! Polling is ours rather than notify's `PollWatcher`: that one keeps modification times in whole
//! seconds and does not compare sizes, so a second save within the same second is never seen
//! (short of hashing every file on every poll). Ours compares each file's size, modification time
//! to the nanosecond, identity (inode) and access (mode, owner: a file made readable again),
//! which is only a `stat` per file per interval.

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
pub(crate) fn scope_of(data_dir: &Path, paths: &[PathBuf]) -> Scope {
    let mut names = BTreeSet::new();
    for path in paths {
        let first = path
            .strip_prefix(data_dir)
            .ok()
            .and_then(|rel| rel.components().next());
        match first {
            Some(Component::Normal(name)) => match name.to_str() {
                // A Kubernetes ConfigMap or Secret volume: the kubelet renames a new `..data`
                // link over the old one, and the bundles are links through it.
                Some("..data") => return Scope::All,
                // Not bundles (staging folders, editor files): a rename out of them shows up
                // under the new name.
                Some(n) if crate::load::ignored(n) => {}
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
pub(crate) async fn spawn(
    data_dir: &Path,
    mode: WatchMode,
    debounce: Duration,
    reloader: Arc<Reloader>,
) -> notify::Result<Option<Watcher>> {
    let (tx, rx) = mpsc::unbounded_channel::<Option<Vec<PathBuf>>>();
    let watcher = match mode {
        WatchMode::Off => return Ok(None),
        WatchMode::Native => {
            let identity = folder_identity(data_dir);
            let debouncer = native(data_dir, debounce, tx.clone())?;
            // The debouncer lives in the guard, which re-arms it when the folder is replaced.
            Watcher {
                _debouncer: None,
                poller: Some(tokio::spawn(guard_folder(
                    data_dir.to_path_buf(),
                    debounce,
                    tx,
                    Arc::clone(&reloader),
                    debouncer,
                    identity,
                ))),
            }
        }
        WatchMode::Poll(interval) => {
            // The baseline is taken before this returns, so a change made right after is seen.
            let dir = data_dir.to_path_buf();
            let baseline = tokio::task::spawn_blocking(move || fingerprints(&dir))
                .await
                .unwrap_or_default();
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
    // The debouncer sends an event half the quiet time after it came, whether or not more
    // follow on that file (a file being copied in); the reload loop then waits for a whole quiet
    // time without any: about 1.5 times the quiet time in all. Poll mode settles by itself (a
    // bundle is sent once a scan finds it unchanged).
    let quiet = match mode {
        WatchMode::Native => debounce,
        _ => Duration::ZERO,
    };
    tokio::spawn(reload_loop(data_dir.to_path_buf(), rx, reloader, quiet));
    Ok(Some(watcher))
}

/// A native watch of `data_dir` (recursive), sending batches of changed paths to `tx`.
fn native(
    data_dir: &Path,
    debounce: Duration,
    tx: mpsc::UnboundedSender<Option<Vec<PathBuf>>>,
) -> notify::Result<Box<dyn std::any::Any + Send>> {
    let handler = move |result: DebounceEventResult| {
        let _ = tx.send(changed_paths(result));
    };
    // Half the quiet time here; the reload loop waits for the rest (see `reload_loop`).
    let mut d = new_debouncer_opt::<_, RecommendedWatcher, _>(
        debounce / 2,
        Some(debounce / 8),
        handler,
        RecommendedCache::new(),
        notify::Config::default(),
    )?;
    d.watch(data_dir, RecursiveMode::Recursive)?;
    Ok(Box::new(d))
}

/// The paths a debounced batch of events changed; `None` (reload everything) when the watcher
/// failed or lost events.
fn changed_paths(result: DebounceEventResult) -> Option<Vec<PathBuf>> {
    match result {
        // The kernel's queue overflowed (a large bundle staged inside the data folder can do
        // that): events were lost, so every bundle is read again.
        Ok(events) if events.iter().any(|e| e.event.need_rescan()) => {
            tracing::warn!("file watcher: events were lost; reloading everything");
            None
        }
        // Reading a file is an event too (open, close without writing): eventbox's own reads
        // must not trigger reloads.
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
    }
}

/// How often the native watch checks that the data folder is still the one it watches.
pub(crate) const FOLDER_CHECK: Duration = Duration::from_millis(250);

/// What the native watch follows: the data folder's device and inode, and the folders its
/// top-level links lead to outside it (a bundle may be a link). A link written as a path
/// within the data folder (a ConfigMap's `demo` → `..data/demo`) leads where the watch is.
#[derive(Debug, PartialEq, Eq)]
struct FolderIdentity {
    folder: (u64, u64),
    links: Vec<(std::ffi::OsString, Option<(u64, u64)>)>,
}

/// The data folder's [`FolderIdentity`], or `None` when it is missing or not a folder. One
/// `stat` and one listing, then per link one `readlink`, and one `stat` for each that leads
/// outside.
fn folder_identity(dir: &Path) -> Option<FolderIdentity> {
    let folder = std::fs::metadata(dir)
        .ok()
        .filter(std::fs::Metadata::is_dir)
        .map(|m| identity(&m))?;
    let within = |text: &Path| {
        text.is_relative() && text.components().all(|c| matches!(c, Component::Normal(_)))
    };
    let mut links: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|text| !within(&text)))
        .map(|e| {
            let target = std::fs::metadata(e.path()).ok().map(|m| identity(&m));
            (e.file_name(), target)
        })
        .collect();
    links.sort();
    Some(FolderIdentity { folder, links })
}

/// Keeps the native watch on the data folder. A watch follows an inode: when the folder is
/// removed, re-created or swapped by `mv`, the old watch sees nothing more; nor does it follow a
/// link made or pointed elsewhere after it started (`ln -sfn /srv/b/v2 data/summit`). Every
/// [`FOLDER_CHECK`] this compares the [`FolderIdentity`]; on a change the watch is marked lost
/// (`/status`, `/readyz`, the log) while there is no folder, and as soon as one is there it
/// is watched anew and everything is reloaded.
async fn guard_folder(
    dir: PathBuf,
    debounce: Duration,
    tx: mpsc::UnboundedSender<Option<Vec<PathBuf>>>,
    reloader: Arc<Reloader>,
    debouncer: Box<dyn std::any::Any + Send>,
    mut watched: Option<FolderIdentity>,
) {
    let mut debouncer = Some(debouncer);
    let mut lost = false;
    loop {
        tokio::time::sleep(FOLDER_CHECK).await;
        let now = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || folder_identity(&dir))
                .await
                .unwrap_or(None)
        };
        if now == watched && debouncer.is_some() {
            continue;
        }
        // The watch follows the old folder (or nothing): drop it.
        debouncer = None;
        watched = None;
        let reason = match now {
            None => format!("the data folder {} is missing", dir.display()),
            Some(_) => match native(&dir, debounce, tx.clone()) {
                Ok(d) => {
                    debouncer = Some(d);
                    watched = now;
                    let (reloader, was_lost, shown) =
                        (Arc::clone(&reloader), lost, dir.display().to_string());
                    let _ = tokio::task::spawn_blocking(move || {
                        if was_lost {
                            reloader.set_watch_lost(None);
                        } else {
                            tracing::info!(
                                "the data folder {shown} or a link in it changed: watching it anew \
                                 and reloading everything"
                            );
                        }
                        reloader.reload(&Scope::All)
                    })
                    .await;
                    lost = false;
                    continue;
                }
                Err(e) => format!("cannot watch the data folder {}: {e}", dir.display()),
            },
        };
        if !lost {
            lost = true;
            let reloader = Arc::clone(&reloader);
            let _ =
                tokio::task::spawn_blocking(move || reloader.set_watch_lost(Some(reason))).await;
        }
    }
}

/// What a poll compares for each file: size, modification time (to the nanosecond), identity,
/// and who may read it (a `chmod` or `chown` that makes a file readable again changes only its
/// status time, not its modification time).
type Fingerprints = BTreeMap<PathBuf, (u64, Option<SystemTime>, u64, Access)>;

/// Every file and folder under `dir`, with its fingerprint. Unreadable entries are skipped (the
/// reload that follows reports them).
fn fingerprints(dir: &Path) -> Fingerprints {
    let mut out = Fingerprints::new();
    let mut stack = vec![dir.to_path_buf()];
    // Links are followed, as loading does; a folder reached twice (a link loop) is walked once.
    let mut walked = std::collections::HashSet::new();
    while let Some(d) = stack.pop() {
        if let Ok(meta) = std::fs::metadata(&d) {
            if !walked.insert(identity(&meta)) {
                continue;
            }
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path.clone());
            }
            let print = (
                meta.len(),
                meta.modified().ok(),
                identity(&meta).1,
                access(&meta),
            );
            out.insert(path, print);
        }
    }
    out
}

/// A file's mode, owner and group.
type Access = (u32, u32, u32);

#[cfg(unix)]
fn access(meta: &std::fs::Metadata) -> Access {
    use std::os::unix::fs::MetadataExt;
    (meta.mode(), meta.uid(), meta.gid())
}

#[cfg(not(unix))]
fn access(meta: &std::fs::Metadata) -> Access {
    (u32::from(meta.permissions().readonly()), 0, 0)
}

/// A file's device and inode.
#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn identity(_: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// How many scans a bundle that keeps changing may wait before it is reloaded all the same.
const MAX_POLL_WAIT: u32 = 8;

/// Scans `dir` every `interval`. A bundle whose files changed is sent once a scan finds it
/// unchanged (it has settled: a folder being copied in is not loaded half-copied), or after
/// [`MAX_POLL_WAIT`] scans if it never settles. Bundles settle independently, so a busy folder
/// never holds back the others.
async fn poll(
    dir: PathBuf,
    mut before: Fingerprints,
    interval: Duration,
    tx: mpsc::UnboundedSender<Option<Vec<PathBuf>>>,
) {
    let scan = |dir: PathBuf| tokio::task::spawn_blocking(move || fingerprints(&dir));
    // Changed paths waiting to be sent, by bundle (None: the data folder itself), and how many
    // scans they have waited.
    let mut pending: BTreeMap<Option<String>, (Vec<PathBuf>, u32)> = BTreeMap::new();
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
        let mut touched = BTreeSet::new();
        for path in changed {
            let key = match scope_of(&dir, std::slice::from_ref(&path)) {
                Scope::Bundles(names) => match names.into_iter().next() {
                    Some(name) => Some(name),
                    None => continue, // a staging or hidden folder
                },
                Scope::All => None,
            };
            pending.entry(key.clone()).or_default().0.push(path);
            touched.insert(key);
        }
        let mut ready = Vec::new();
        pending.retain(|key, (paths, waited)| {
            *waited += 1;
            let settled = !touched.contains(key);
            if settled || *waited > MAX_POLL_WAIT {
                ready.append(paths);
                false
            } else {
                true
            }
        });
        if !ready.is_empty() && tx.send(Some(ready)).is_err() {
            return;
        }
    }
}

/// Receives batches of changed paths, waits until none has come for `quiet` (so a burst of
/// writes, such as a folder being copied in, is read once it is whole; capped at
/// [`MAX_SETTLE`]), reloads, repeats. Ends when the watcher is dropped.
async fn reload_loop(
    data_dir: PathBuf,
    mut rx: mpsc::UnboundedReceiver<Option<Vec<PathBuf>>>,
    reloader: Arc<Reloader>,
    quiet: Duration,
) {
    while let Some(first) = rx.recv().await {
        let mut scope = batch_scope(&data_dir, first);
        let started = tokio::time::Instant::now();
        while !quiet.is_zero() && started.elapsed() < MAX_SETTLE {
            let wait = quiet.min(MAX_SETTLE.saturating_sub(started.elapsed()));
            match tokio::time::timeout(wait, rx.recv()).await {
                Ok(Some(more)) => scope = merge(scope, batch_scope(&data_dir, more)),
                Ok(None) => return,
                Err(_) => break, // quiet long enough
            }
        }
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

/// The longest a reload waits for a folder to stop changing (and so the longest `--debounce`).
pub(crate) const MAX_SETTLE: Duration = Duration::from_secs(2);

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
    use notify_debouncer_full::notify::event::{AccessKind, Flag, ModifyKind};
    use notify_debouncer_full::notify::Event;
    use notify_debouncer_full::DebouncedEvent;

    fn debounced(event: Event) -> DebouncedEvent {
        DebouncedEvent::new(event, std::time::Instant::now())
    }

    /// An overflow of the kernel's queue arrives as one event with no path and the rescan
    /// flag: everything is reloaded, not nothing (its empty path list once meant no reload).
    #[test]
    fn lost_events_reload_everything_and_reads_nothing() {
        let edit = Event::new(EventKind::Modify(ModifyKind::Any)).add_path("/d/demo/a.json".into());
        let read = Event::new(EventKind::Access(AccessKind::Any)).add_path("/d/demo/b.json".into());
        assert_eq!(
            changed_paths(Ok(vec![debounced(edit.clone()), debounced(read)])),
            Some(vec![PathBuf::from("/d/demo/a.json")])
        );
        let overflow = Event::new(EventKind::Other).set_flag(Flag::Rescan);
        assert_eq!(
            changed_paths(Ok(vec![debounced(edit), debounced(overflow)])),
            None
        );
    }

    /// A file made readable again (`chmod`, `chown`) is a change to a poll, though neither
    /// its size nor its modification time moved.
    #[cfg(unix)]
    #[test]
    fn a_poll_sees_a_file_made_readable_again() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("event.json");
        std::fs::write(&file, "{}").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        let before = fingerprints(dir.path());
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_ne!(fingerprints(dir.path()), before);
    }

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
        assert_eq!(
            scope_of(
                root,
                &[
                    PathBuf::from("/d/_staging/x.json"),
                    PathBuf::from("/d/.git/x")
                ]
            ),
            Scope::Bundles(BTreeSet::new())
        );
        assert_eq!(scope_of(root, &[PathBuf::from("/elsewhere/x")]), Scope::All);
        assert_eq!(scope_of(root, &[PathBuf::from("/d/..data")]), Scope::All);
        assert_eq!(
            scope_of(
                root,
                &[PathBuf::from("/d/..2026_01_01_00_00_00.000/demo/x")]
            ),
            Scope::Bundles(BTreeSet::new())
        );
    }
}
