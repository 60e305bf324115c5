//! The pieces of a running eventbox wired together: the store the server reads, the metrics, the
//! reloader that publishes snapshots, and the file watcher. `serve` and the tests build the same
//! `App`, so what the tests start is what users run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::catalog::{Catalog, Refreshed, Scope};
use crate::http::cors::Cors;
use crate::http::{Limits, Service};
use crate::load::LoadError;
use crate::metrics::Metrics;
use crate::reload::Reloader;
use crate::store::{Snapshot, Store};
use crate::watch::{self, WatchMode, Watcher};

/// The watcher could not be started.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot resolve the data folder {}: {source}", path.display())]
    Path {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot watch the data folder (try --watch poll): {0}")]
    Notify(#[from] notify_debouncer_full::notify::Error),
}

/// A running eventbox's state.
#[derive(Debug, Clone)]
pub struct App {
    pub store: Arc<Store>,
    pub metrics: Arc<Metrics>,
    pub reloader: Arc<Reloader>,
    data_dir: PathBuf,
}

impl App {
    /// Nothing is loaded yet: the store serves the not-ready snapshot (`/readyz` is 503).
    pub fn new(data_dir: &Path) -> App {
        App::with_compression(data_dir, true)
    }

    /// As [`App::new`], choosing whether answers get compressed variants.
    pub fn with_compression(data_dir: &Path, compression: bool) -> App {
        let store = Arc::new(Store::new(Snapshot::default()));
        let metrics = Arc::new(Metrics::new());
        let reloader = Arc::new(Reloader::new(
            Catalog::new(data_dir).with_compression(compression),
            Arc::clone(&store),
            Arc::clone(&metrics),
        ));
        App {
            store,
            metrics,
            reloader,
            data_dir: data_dir.to_path_buf(),
        }
    }

    /// Reads no bundle file over `max` bytes (`--max-file-bytes`; a larger one is an error of
    /// its bundle).
    pub fn with_max_file_bytes(self, max: u64) -> App {
        self.reloader.configure(|c| c.set_max_file_bytes(max));
        self
    }

    /// Reads every bundle and publishes the result (the first load, and SIGHUP). Blocking.
    pub fn load(&self) -> Result<Refreshed, LoadError> {
        self.reloader.reload(&Scope::All)
    }

    /// Starts watching the data folder; `None` when `mode` is off. Needs a tokio runtime.
    pub async fn watch(
        &self,
        mode: WatchMode,
        debounce: Duration,
    ) -> Result<Option<Watcher>, WatchError> {
        if mode == WatchMode::Off {
            return Ok(None);
        }
        // Events carry absolute paths; the watcher maps them back to bundle names.
        let canonical =
            std::fs::canonicalize(&self.data_dir).map_err(|source| WatchError::Path {
                path: self.data_dir.clone(),
                source,
            })?;
        let reloader = Arc::clone(&self.reloader);
        Ok(watch::spawn(&canonical, mode, debounce, reloader).await?)
    }

    /// What the HTTP server answers from: the defaults (CORS for every origin; no control
    /// headers, no journal), and the access log if asked for.
    pub fn service(&self, access_log: bool) -> Service {
        let compression = self.reloader.with_catalog(|c| c.compression());
        Service {
            store: Arc::clone(&self.store),
            metrics: Arc::clone(&self.metrics),
            access_log,
            compression,
            cors: Cors::Any,
            limits: Limits::default(),
            allow_control_headers: false,
            max_delay: Service::DEFAULT_MAX_DELAY,
            journal: None,
        }
    }
}
