//! The pieces of a running eventbox wired together: the store the server reads, the metrics, the
//! reloader that publishes snapshots, and the file watcher. `serve` and the tests build the same
//! `App`, so what the tests start is what users run. It is built from the whole [`ServeOptions`]
//! ([`App::with_options`]) and hands each part its options, so callers never unpack them.
//!
//! Embedding it in a service of your own, on your runtime and your listener (`cli::serve`
//! does the same, and adds object storage, kiosk mode, signals and logs):
//!
//! ```no_run
//! use eventbox::app::App;
//! use eventbox::config::ServeOptions;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mut options = ServeOptions::for_folder("data");
//! options.journal = 100;
//! // Refused as `serve` refuses it: a journal over 100,000, a CORS origin that is not one...
//! let app = App::with_options(&options)?;
//! app.open_state()?; // with `options.state`: the writes kept there come back first
//! let _watcher = app.watch_as_configured().await?; // before the load: no change is missed
//! let loading = app.clone();
//! // Both block (reading files, waiting for a reload in progress): off the async threads.
//! let bundles = tokio::task::spawn_blocking(move || {
//!     loading.load().map(|_| loading.bundles())
//! })
//! .await??;
//! for bundle in bundles {
//!     println!("{}: served {}, {} problems", bundle.name, bundle.served, bundle.problems.len());
//! }
//! let listener = tokio::net::TcpListener::bind(options.listen_addr()).await?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! # drop(stop);
//! // Until `stop` is sent (or dropped); requests in flight then get `http::DRAIN_TIMEOUT`.
//! eventbox::http::serve(listener, app.service(), async {
//!     let _ = stopped.await;
//! })
//! .await?;
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::catalog::{Catalog, Scope};
use crate::config::{ConfigError, ServeOptions};
use crate::http::{Journal, Service};
use crate::metrics::Metrics;
use crate::reload::Reloader;
use crate::store::{Snapshot, Store};
use crate::watch::{self, WatchMode, Watcher};
use crate::writes::Writes;

pub use crate::catalog::Refreshed;
pub use crate::load::LoadError;

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
    pub(crate) store: Arc<Store>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) reloader: Arc<Reloader>,
    pub(crate) writes: Arc<Writes>,
    /// The sources bundles name, and their state (kiosk mode).
    pub(crate) sources: Arc<crate::kiosk::Sources>,
    options: Arc<ServeOptions>,
}

/// What [`App::open_state`] found in the state folder.
#[derive(Debug)]
pub struct StateOpened {
    /// The log file.
    pub path: PathBuf,
    /// How many lines it held.
    pub lines: usize,
    /// How many writes they hold now (those before a reset of their bundle are forgotten).
    pub writes: usize,
    /// Kiosk mode: the writes queued for their sources.
    pub queue: Queued,
    /// Where a write cut short by a crash (never acknowledged) was copied aside, if one was.
    pub torn: Option<PathBuf>,
    /// Kiosk mode: set when the forwarding outcomes name writes past the log's last: the log
    /// lost lines it had saved, and new writes are numbered after the outcomes' highest.
    pub lost: Option<Lost>,
}

/// Kiosk mode: the writes of a state folder's queue ([`StateOpened::queue`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Queued {
    /// Waiting to be sent to their source.
    pub waiting: usize,
    /// Parked: check-ins of someone registered here whom the source does not list yet, not
    /// sent until it does.
    pub parked: usize,
    /// Refused by the source.
    pub refused: usize,
}

/// Lines the state log lost ([`StateOpened::lost`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lost {
    /// The log's last `seq`.
    pub logged: u64,
    /// The highest `seq` the forwarding outcomes name.
    pub forwarded: u64,
}

/// One bundle folder as loaded now ([`App::bundles`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BundleState {
    /// The folder's name.
    pub name: String,
    /// Whether a version of it is served: the latest, or its last good one while the latest
    /// has errors or a token another bundle has. A bundle with errors and no earlier version
    /// loaded is not served (its tokens answer 503 `bundle_unavailable`); a served one may
    /// still not open every token its `bundle.toml` names (one added while another file has
    /// errors answers 503 too).
    pub served: bool,
    /// The errors and warnings of its latest load and of its tokens (a token another bundle
    /// has), each with its file and place, as `/status` and the log show them.
    pub problems: Vec<crate::problem::Problem>,
}

/// The state folder could not be opened, or its log is damaged.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct StateError(#[from] crate::writes::LogError);

impl App {
    /// The defaults, serving `data_dir`. Nothing is loaded yet: the store serves the not-ready
    /// snapshot (`/readyz` is 503).
    pub fn new(data_dir: &Path) -> App {
        App::build(&ServeOptions::for_folder(data_dir))
    }

    /// An eventbox as `options` say: the catalog of `options.data` (with compressed variants
    /// or not); [`App::service`] and [`App::watch_as_configured`] take the rest. Nothing is
    /// loaded yet. A value `eventbox serve` would refuse (`journal` over 100,000, a CORS origin
    /// that is not one, a poll interval under 10 ms when watching...) is refused here too, with
    /// the message `serve` gives, never quietly changed. `memory_file: Off` turns the memory
    /// file off for the whole process (bodies are held on the heap), not only for this app.
    pub fn with_options(options: &ServeOptions) -> Result<App, ConfigError> {
        options.check()?;
        Ok(App::build(options))
    }

    fn build(options: &ServeOptions) -> App {
        if options.memory_file == crate::config::Switch::Off {
            crate::memfile::turn_off();
        }
        let store = Arc::new(Store::new(Snapshot::default()));
        let sources = Arc::new(crate::kiosk::Sources::default());
        let writes = Arc::new(Writes::new(options.read_only));
        let metrics = Arc::new(Metrics::new(Arc::clone(&sources), Arc::clone(&writes)));
        let reloader = Arc::new(
            Reloader::new(
                Catalog::new(&options.data, options.reading(), Arc::clone(&sources)),
                Arc::clone(&store),
                Arc::clone(&metrics),
            )
            .following_sources(options.refresh_every.is_some()),
        );
        App {
            store,
            metrics,
            reloader,
            writes,
            sources,
            options: Arc::new(options.clone()),
        }
    }

    /// The options it was built with.
    pub fn options(&self) -> &ServeOptions {
        &self.options
    }

    /// With `--state DIR`: opens the log there and takes back the writes it holds (call it once,
    /// before serving). `None` without `--state`.
    pub fn open_state(&self) -> Result<Option<StateOpened>, StateError> {
        let Some(dir) = &self.options.state else {
            return Ok(None);
        };
        let replayed = self.writes.open_state(dir)?;
        Ok(Some(StateOpened {
            path: self
                .writes
                .log_path()
                .map_or_else(|| dir.clone(), Path::to_path_buf),
            lines: replayed.lines,
            writes: replayed.writes,
            queue: Queued {
                waiting: replayed.queue.0,
                parked: replayed.queue.1,
                refused: replayed.queue.2,
            },
            torn: replayed.torn,
            lost: replayed
                .lost
                .map(|(logged, forwarded)| Lost { logged, forwarded }),
        }))
    }

    /// Reads every bundle and publishes the result (the first load, and SIGHUP). Blocking.
    /// A bundle with errors is no error of this call: [`App::bundles`] tells what loaded.
    pub fn load(&self) -> Result<Refreshed, LoadError> {
        self.reloader.reload(&Scope::All)
    }

    /// Every bundle folder as loaded now, in name order: whether it is served and its problems
    /// (what `/status` shows, without asking the server). Blocking: waits for a reload in
    /// progress.
    pub fn bundles(&self) -> Vec<BundleState> {
        self.reloader.with_catalog(|catalog| {
            catalog
                .entries()
                .map(|e| BundleState {
                    name: e.name.clone(),
                    served: e.serving.is_some(),
                    problems: e.all_problems().cloned().collect(),
                })
                .collect()
        })
    }

    /// Starts watching the data folder as the options say (`--watch`, `--poll-interval`,
    /// `--debounce`); `None` when off. Needs a tokio runtime.
    pub async fn watch_as_configured(&self) -> Result<Option<Watcher>, WatchError> {
        self.watch(self.options.watch_mode(), self.options.debounce)
            .await
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
        // Events carry absolute paths; the watcher maps them back to bundle names. Links are
        // not resolved: a data folder that is a link (`current` → `releases/v2`) is watched
        // through it, so pointing it elsewhere is seen as a new folder (the folder check).
        let data_dir = &self.options.data;
        let absolute = std::path::absolute(data_dir).map_err(|source| WatchError::Path {
            path: data_dir.clone(),
            source,
        })?;
        let reloader = Arc::clone(&self.reloader);
        Ok(watch::spawn(&absolute, mode, debounce, reloader).await?)
    }

    /// With `--refresh-every`: starts following the sources the bundles name (call it after the
    /// first load; bundles that appear later are picked up within a period). `None` when off.
    /// Dropping the [`crate::kiosk::Refresher`] stops it. Needs a tokio runtime.
    #[cfg(feature = "pull")]
    pub fn refresh_as_configured(&self) -> Option<crate::kiosk::Refresher> {
        let every = self.options.refresh_every?;
        Some(crate::kiosk::refresh::spawn(
            crate::kiosk::refresh::RefreshOptions {
                every,
                offline_after: self.options.offline_after,
                max_file_bytes: self.options.max_file_bytes,
            },
            Arc::clone(&self.reloader),
            Arc::clone(&self.sources),
            Arc::clone(&self.metrics),
        ))
    }

    /// With `--state`: starts sending the writes made here to the source of their bundle (kiosk
    /// mode); `None` without a state folder. Dropping the
    /// [`crate::kiosk::Forwarder`] stops it. Needs a tokio runtime.
    #[cfg(feature = "pull")]
    pub fn forward_as_configured(&self) -> Option<crate::kiosk::Forwarder> {
        self.options.state.as_ref()?;
        self.writes.forward_from_now();
        Some(crate::kiosk::forward::spawn(
            Arc::clone(&self.writes),
            Arc::clone(&self.sources),
            Arc::clone(&self.reloader),
            self.options.max_file_bytes,
        ))
    }

    /// What the HTTP server answers from, as the options say: access log, CORS, limits,
    /// control headers, the longest simulated delay, the journal and the admin token.
    pub fn service(&self) -> Service {
        let o = &self.options;
        Service {
            store: Arc::clone(&self.store),
            metrics: Arc::clone(&self.metrics),
            access_log: o.access_log,
            compression: o.compression(),
            cors: o.cors(),
            limits: o.limits(),
            allow_control_headers: o.allow_control_headers,
            max_delay: o.max_delay,
            journal: Journal::with_capacity(o.journal),
            writes: Arc::clone(&self.writes),
            admin_token: o.admin_token.clone(),
            body_room: crate::http::router::body_room(),
        }
    }
}
