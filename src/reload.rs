//! Reloading: read what changed, build a new snapshot, swap it in.
//!
//! The [`Reloader`] owns the [`Catalog`] behind a mutex, so reloads run one at a time, and does
//! its work on the calling thread: callers on the async side use `spawn_blocking`, keeping file
//! I/O off the request path. A reload that finds errors keeps each affected bundle's last good
//! version serving; only a data folder that cannot be used at all fails ([`LoadError`]), and then
//! nothing changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::catalog::{Catalog, Entry, Refreshed, Scope};
use crate::load::LoadError;
use crate::metrics::Metrics;
use crate::prepare::Prepared;
use crate::problem::Severity;
use crate::store::Store;

/// What a bundle's log lines depend on: the version it serves and its token clashes.
type Signature = (Option<usize>, Vec<String>);

fn signature(e: &Entry) -> Signature {
    (
        e.serving.as_ref().map(|v| Arc::as_ptr(v) as usize),
        e.conflicts.iter().map(ToString::to_string).collect(),
    )
}

/// Logs a bundle's problems and what it serves now; `following`: sources are followed
/// (`--refresh-every`), so a bundle that awaits its source's first refresh will get it.
fn log_entry(entry: &Entry, following: bool) {
    let name = &entry.name;
    // A desk set up with bundle.toml alone: its missing event is no fault yet.
    let awaits =
        following && entry.awaits_source && entry.serving.is_none() && entry.conflicts.is_empty();
    for p in entry.all_problems() {
        match p.severity {
            Severity::Error if awaits => {}
            Severity::Error => tracing::error!(bundle = %name, "{p}"),
            Severity::Warning => tracing::warn!(bundle = %name, "{p}"),
        }
    }
    if awaits {
        tracing::warn!(
            bundle = %name,
            "bundle not served yet: its folder holds no data file, only bundle.toml naming a \
             [source]; the first refresh fills it"
        );
        return;
    }
    let fresh = match (&entry.serving, &entry.candidate) {
        (Some(s), Some(c)) => Arc::ptr_eq(s, c),
        _ => false,
    };
    match &entry.serving {
        Some(_) if fresh && entry.conflicts.is_empty() => {
            tracing::info!(bundle = %name, "bundle loaded")
        }
        Some(v) => tracing::warn!(
            bundle = %name,
            "bundle has errors; still serving the version loaded at {}",
            v.loaded_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
        None => tracing::error!(bundle = %name, "bundle not served: it has errors"),
    }
}

/// The background compression of large bodies: one thread at a time, on versions still served.
///
/// It holds published versions weakly: one unpublished before its turn is freed and skipped,
/// and one unpublished while being compressed is given up within a megabyte of work (nothing but
/// the compressor holds it then). So reloads in a row never keep old versions alive, nor start
/// one compression each.
#[derive(Debug, Default)]
struct Compressor {
    queue: Arc<Mutex<Queue>>,
}

#[derive(Debug, Default)]
struct Queue {
    waiting: std::collections::VecDeque<Weak<Prepared>>,
    running: bool,
}

impl Compressor {
    fn submit(&self, fresh: &[Arc<Prepared>]) {
        if fresh.is_empty() {
            return;
        }
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.waiting.extend(fresh.iter().map(Arc::downgrade));
        if queue.running {
            return;
        }
        let shared = Arc::clone(&self.queue);
        let spawned = std::thread::Builder::new()
            .name("eventbox-compress".into())
            .spawn(move || loop {
                let next = {
                    let mut queue = shared.lock().unwrap_or_else(PoisonError::into_inner);
                    match queue.waiting.pop_front() {
                        Some(next) => next,
                        None => {
                            queue.running = false;
                            return;
                        }
                    }
                };
                if let Some(prepared) = next.upgrade() {
                    // Only this thread holds it: it is served no more.
                    prepared.compress_large(&|| Arc::strong_count(&prepared) > 1);
                }
            });
        match spawned {
            Ok(_) => queue.running = true,
            Err(e) => {
                queue.waiting.clear();
                tracing::warn!(error = %e, "cannot start background compression; large bodies are sent plain");
            }
        }
    }
}

/// Reloads the catalog and publishes snapshots to the store.
#[derive(Debug)]
pub(crate) struct Reloader {
    catalog: Mutex<Catalog>,
    store: Arc<Store>,
    metrics: Arc<Metrics>,
    compressor: Compressor,
    /// Sources are followed (`--refresh-every`): see [`log_entry`].
    following: bool,
}

impl Reloader {
    /// A reloader for `catalog` (usually empty until the first [`Reloader::reload`]).
    pub(crate) fn new(catalog: Catalog, store: Arc<Store>, metrics: Arc<Metrics>) -> Reloader {
        Reloader {
            catalog: Mutex::new(catalog),
            store,
            metrics,
            compressor: Compressor::default(),
            following: false,
        }
    }

    /// Whether the bundles' sources are followed (`--refresh-every`), which its log says of
    /// a bundle that awaits its first refresh.
    pub(crate) fn following_sources(mut self, following: bool) -> Reloader {
        self.following = following;
        self
    }

    /// Reads the bundles in `scope` (and any folder that appeared or vanished), logs what changed,
    /// and publishes a new snapshot. Blocking: file I/O.
    pub(crate) fn reload(&self, scope: &Scope) -> Result<Refreshed, LoadError> {
        let mut catalog = self.catalog.lock().unwrap_or_else(PoisonError::into_inner);
        let before: HashMap<String, Signature> = catalog
            .entries()
            .map(|e| (e.name.clone(), signature(e)))
            .collect();
        let refreshed = match catalog.refresh(scope) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "reload failed; still serving the previous snapshot");
                // /status says so too (once something has been published).
                if self.store.snapshot().is_ready() {
                    self.store.replace(catalog.snapshot());
                }
                return Err(e);
            }
        };
        let snapshot = catalog.snapshot();
        // The metrics first: a client that sees the new answers then scrapes sees them counted.
        let now = chrono::Utc::now();
        let served = catalog.entries().filter(|e| e.serving.is_some()).count();
        self.metrics.observe_snapshot(served, now);
        self.metrics.set_load_errors(
            catalog.entries().map(|e| {
                (
                    e.name.as_str(),
                    e.all_problems().filter(|p| p.is_error()).count(),
                )
            }),
            &refreshed.removed,
        );
        for entry in catalog.entries() {
            if refreshed.loaded.contains(&entry.name) {
                self.metrics.observe_load(!entry.has_errors());
            }
        }
        self.store.replace(snapshot);
        for entry in catalog.entries() {
            let reread = refreshed.loaded.contains(&entry.name);
            // A bundle not re-read can still change: a neighbour's edit freed or took a token.
            // One found holding the same bytes keeps its answers: only such a change is news
            // (else every touch, and a kiosk's refresh then its watch, said "bundle loaded").
            let (was, now) = (before.get(&entry.name), signature(entry));
            let news = if refreshed.unchanged.contains(&entry.name) {
                was.map(|(serving, clashes)| (serving.is_some(), clashes))
                    != Some((now.0.is_some(), &now.1))
            } else {
                reread || was != Some(&now)
            };
            if news {
                log_entry(entry, self.following);
            }
        }
        for name in &refreshed.removed {
            let renamed = refreshed.renamed.iter().find(|(was, _)| was == name);
            let served = renamed
                .and_then(|(_, now)| catalog.entry(now))
                .is_some_and(|e| e.serving.is_some());
            match renamed {
                Some((_, now)) if served => {
                    tracing::info!(bundle = %name, renamed = %now, "bundle folder renamed; its tokens open it under its new name");
                }
                Some((_, now)) => {
                    tracing::warn!(bundle = %name, renamed = %now, "bundle folder renamed, and not served under its new name (/status says why)");
                }
                None => {
                    tracing::info!(bundle = %name, "bundle folder removed; its tokens no longer open it");
                }
            }
        }
        if catalog.compression() {
            // Bodies too large to compress while preparing: in the background, identity being
            // served until they are ready.
            let fresh: Vec<Arc<Prepared>> = catalog
                .entries()
                .filter(|e| refreshed.loaded.contains(&e.name))
                .filter_map(|e| e.serving.as_ref().map(|v| Arc::clone(&v.prepared)))
                .collect();
            self.compressor.submit(&fresh);
        }
        Ok(refreshed)
    }

    /// Records the file watch lost (`Some(reason)`) or restored (`None`), logs it, and publishes
    /// a snapshot saying so (once the first load is published). Blocking: waits for a reload
    /// in progress.
    pub(crate) fn set_watch_lost(&self, reason: Option<String>) {
        match &reason {
            Some(r) => tracing::warn!(
                "file watch lost: {r}; changes are not seen until it is restored (SIGHUP still reloads)"
            ),
            None => tracing::info!("file watch restored; reloading everything"),
        }
        let mut catalog = self.catalog.lock().unwrap_or_else(PoisonError::into_inner);
        catalog.set_watch_lost(reason);
        if self.store.snapshot().is_ready() {
            self.store.replace(catalog.snapshot());
        }
    }

    /// Records that object storage cannot be read (`Some(reason)`) or answers again (`None`)
    /// and publishes a snapshot saying so (once the first load is published); the mirror logs
    /// it. Blocking: waits for a reload in progress.
    #[cfg(feature = "object-store")]
    pub(crate) fn set_storage_failing(&self, reason: Option<String>) {
        let mut catalog = self.catalog.lock().unwrap_or_else(PoisonError::into_inner);
        if self.store.snapshot().is_ready() {
            catalog.set_storage_failing(reason);
            self.store.replace(catalog.snapshot());
        } else {
            // Before the first load: the not-ready answers say what is awaited.
            let waiting = match &reason {
                Some(r) => crate::store::Snapshot::waiting(&format!("Object storage: {r}")),
                None => crate::store::Snapshot::default(),
            };
            catalog.set_storage_failing(reason);
            self.store.replace(waiting);
        }
    }

    /// Names the files of problems under `url`, the object storage the data folder mirrors.
    #[cfg(feature = "object-store")]
    pub(crate) fn set_files_from(&self, url: String) {
        let mut catalog = self.catalog.lock().unwrap_or_else(PoisonError::into_inner);
        catalog.set_files_from(url);
    }

    /// Records the bundles in object storage the mirror could not take (by name: state and
    /// reason) and publishes a snapshot saying so (once the first load is published). Blocking:
    /// waits for a reload in progress.
    #[cfg(feature = "object-store")]
    pub(crate) fn set_storage_bundles(&self, bundles: &crate::catalog::StorageTroubles) {
        let mut catalog = self.catalog.lock().unwrap_or_else(PoisonError::into_inner);
        catalog.set_storage_bundles(bundles);
        if self.store.snapshot().is_ready() {
            self.store.replace(catalog.snapshot());
        }
    }

    /// Changes each time a snapshot is published (a reload, a refresh's new state).
    pub(crate) fn published(&self) -> tokio::sync::watch::Receiver<u64> {
        self.store.published()
    }

    /// Publishes the snapshot anew, with nothing read: `/status` then shows what changed
    /// outside the catalog (a source's state). Blocking: waits for a reload in progress.
    pub(crate) fn republish(&self) {
        let mut catalog = self.catalog.lock().unwrap_or_else(PoisonError::into_inner);
        if self.store.snapshot().is_ready() {
            self.store.replace(catalog.snapshot());
        }
    }

    /// Runs `f` with the catalog (for the startup listing of bundles, and tests).
    pub(crate) fn with_catalog<T>(&self, f: impl FnOnce(&Catalog) -> T) -> T {
        f(&self.catalog.lock().unwrap_or_else(PoisonError::into_inner))
    }
}
