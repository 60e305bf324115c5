//! [`TestServer`]: a whole eventbox running inside a test process, for teams that test their API
//! clients against fixtures.
//!
//! Why it is shaped so:
//! - **Its own thread and runtime.** Each server runs a single-threaded tokio runtime on a thread
//!   of its own, so it works the same from `#[test]` and from `#[tokio::test]`, and no server
//!   shares anything with another. Dropping it blocks the dropping thread until the server has
//!   stopped: at once when idle, at most [`STOP_TIMEOUT`] with requests in flight.
//! - **No global state, no fixed port.** Each server binds `127.0.0.1:0` and has its own store,
//!   metrics and catalog; it installs no tracing subscriber and no signal handler. Many servers
//!   can run at once in one test binary without port reuse or cross-talk.
//! - **Ready when `start` returns.** The listener is bound and the first load is published before
//!   `start` returns, so the first request never races the start (no sleeps, no polling).
//! - **Bundles built in code go through the normal path.** They are written to a private temporary
//!   folder (removed on drop) and loaded like any data folder, so every validation applies; a
//!   bundle with an error makes `start` fail with every problem, each with its file and place.
//! - **Verification from the journal.** With `.journal(N)`, [`TestServer::verify`] asserts what
//!   the client sent ([`Expect`]: method, path, status, JSON body, count) and fails with the
//!   requests received instead; it matches as `GET /_journal?method=&path=&status=` does.
//!
//! ```
//! use eventbox::testing::{Bundle, TestServer};
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = TestServer::from_bundles([Bundle::new("summit")
//!     .token("summit-token")
//!     .json("event", json!({"data": [{
//!         "id_event": 7, "title": "Summit", "url": "summit",
//!         "start_date": "2026-05-04T09:00:00", "end_date": "2026-05-05T18:00:00",
//!         "start_date_registration": "01/02/2026", "end_date_registration": "03/05/2026",
//!         "summary": "Two days", "description": null, "url_image": "",
//!         "credit_hour": 0, "country": "Brasil", "state": "SP", "city": "Santos",
//!         "venue": "Porto", "latitude": "-23.96", "longitude": "-46.33",
//!         "banner": null, "tickets": []
//!     }]}))])
//! .start()?;
//!
//! // Any HTTP client works; this one is plain std, as a synchronous `#[test]` could use.
//! use std::io::{Read, Write};
//! let mut conn = std::net::TcpStream::connect(server.addr())?;
//! let token = server.token("summit").unwrap_or_default();
//! write!(conn, "GET /api/v1/event HTTP/1.1\r\nHost: {}\r\n", server.addr())?;
//! write!(conn, "Authorization-Token: {token}\r\nConnection: close\r\n\r\n")?;
//! let mut answer = String::new();
//! conn.read_to_string(&mut answer)?;
//! assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
//! assert!(answer.contains(r#""title":"Summit""#), "{answer}");
//! # Ok(())
//! # }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

mod verify;

pub use verify::{Expect, Received, VerifyError};

/// The options a test server takes ([`Builder::options`]), as `eventbox serve` does.
pub use crate::config::ServeOptions;

/// The demo data folder of eventbox's own source (its bundle `demo`, opened by `demo-token`),
/// for a first test from any crate: `TestServer::start(eventbox::testing::demo_data())`.
pub fn demo_data() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/data"))
}

use crate::api;
use crate::app::App;
use crate::config::Switch;
use crate::http::{Journal, Service};
use crate::load::LoadError;
use crate::problem::Problem;

/// How long requests in flight may take to finish once a test server is dropped; connections
/// still open then are closed. Short: a test is waiting.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(1);

/// A test server could not start. `Debug` shows the message, as `Display` does, so
/// `start().expect(..)` and `start().unwrap()` print the problems readably.
#[derive(thiserror::Error)]
pub enum StartError {
    /// The state folder (`ServeOptions::state`) could not be opened, or its log is damaged.
    #[error(transparent)]
    State(#[from] crate::app::StateError),
    /// An in-code bundle's name cannot be a bundle folder's name.
    #[error("bundle name {0:?} is not usable: give one folder name, not empty, not starting with `.` or `_` (such folders are not served)")]
    BundleName(String),
    /// Two in-code bundles have one name.
    #[error("two bundles are named {0:?}: give each bundle its own name")]
    DuplicateBundle(String),
    /// A file path given to [`Bundle::file`] would leave the bundle's folder.
    #[error("bundle {bundle:?}: file path {path:?} is not usable: give a relative path such as `event.json` or `payment_details/PG1.json`")]
    FilePath { bundle: String, path: String },
    /// A bundle was given tokens with [`Bundle::token`] and a `bundle.toml` of its own, which
    /// would replace them.
    #[error("bundle {0:?}: give its tokens with .token(..) or a bundle.toml file, not both")]
    TokensTwice(String),
    /// A payment detail's reference cannot name one file of `payment_details/`.
    #[error("bundle {bundle:?}: payment detail reference {reference:?} cannot be a file name (no `/` or `\\`, not empty, and none a bundle folder skips: a leading `.`, a trailing `~`, `#…#`)")]
    DetailReference { bundle: String, reference: String },
    /// [`Bundle::json`] or [`Bundle::json_for`] was given a key the endpoint table does not
    /// have (for that kind of file).
    #[error(
        "bundle {bundle:?}: {key:?} names no endpoint file of that kind (the endpoints: {known})"
    )]
    UnknownEndpoint {
        bundle: String,
        key: String,
        known: String,
    },
    /// An option `eventbox serve` would refuse (a journal over 100,000 requests, a limit of 0).
    #[error("{0}")]
    Options(crate::config::ConfigError),
    /// The temporary data folder could not be made or written.
    #[error("cannot write the test data folder at {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    /// The data folder could not be read at all.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A bundle has errors, so it would not be served.
    #[error(transparent)]
    Bundles(BundleErrors),
    /// The server's listener, runtime or thread could not be set up.
    #[error("cannot start the test server ({what}): {source}")]
    Server {
        what: &'static str,
        source: io::Error,
    },
}

impl fmt::Debug for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Every error that kept a bundle from being served, each with its file and place (for bundles
/// built in code, the file is relative to the temporary data folder, e.g. `summit/event.json`);
/// with [`Builder::strict`], the warnings too.
#[derive(Clone)]
pub struct BundleErrors {
    pub problems: Vec<Problem>,
    /// Found by [`TestServer::reload`]: the server runs on.
    reloaded: bool,
}

impl fmt::Display for BundleErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        let s = if n == 1 { "" } else { "s" };
        if self.reloaded {
            write!(
                f,
                "{n} problem{s} in the bundles at reload; the test server runs on, a bundle with \
                 errors serving its last good version, if it had one:"
            )?;
        } else {
            write!(
                f,
                "{n} problem{s} in the bundles, so the test server did not start:"
            )?;
        }
        for p in &self.problems {
            write!(f, "\n  {}: {p}", p.severity.as_str())?;
        }
        Ok(())
    }
}

impl fmt::Debug for BundleErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for BundleErrors {}

/// A bundle built in code: its name, the tokens that open it and its files. Written to the test
/// server's temporary data folder as a bundle folder, then loaded like any other.
///
/// ```
/// use eventbox::testing::Bundle;
/// use serde_json::json;
///
/// let bundle = Bundle::new("summit")
///     .token("summit-token")
///     .json("payments", json!({"data": []}))
///     .file("submission_list.toml", "[submission]\ndata = []\n");
/// assert_eq!(bundle.name(), "summit");
/// // Debug shows how many tokens, never the tokens.
/// assert!(!format!("{bundle:?}").contains("summit-token"));
/// ```
#[derive(Clone)]
pub struct Bundle {
    name: String,
    tokens: Vec<String>,
    /// Relative path → contents, written in this order (a later file replaces an earlier one).
    files: Vec<(String, Vec<u8>)>,
    /// Keys given to [`Bundle::json`] or [`Bundle::json_for`] that the table does not have.
    unknown: Vec<String>,
}

impl fmt::Debug for Bundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bundle")
            .field("name", &self.name)
            .field("tokens", &self.tokens.len())
            .field(
                "files",
                &self.files.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Bundle {
    /// An empty bundle; its folder is named `name`.
    pub fn new(name: impl Into<String>) -> Bundle {
        Bundle {
            name: name.into(),
            tokens: Vec::new(),
            files: Vec::new(),
            unknown: Vec::new(),
        }
    }

    /// The bundle's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds a token that opens the bundle (written to `bundle.toml`). A bundle needs at least one,
    /// unless a `bundle.toml` is given with [`Bundle::file`].
    pub fn token(mut self, token: impl Into<String>) -> Bundle {
        self.tokens.push(token.into());
        self
    }

    /// `KEY.json`: the body of the endpoint `key` of the endpoint table (`"event"`,
    /// `"payments"`, `"submission"`...), as its file holds it. A key that names no such file
    /// fails [`Builder::start`] with [`StartError::UnknownEndpoint`].
    pub fn json(self, key: &str, body: serde_json::Value) -> Bundle {
        if !api::is_on_disk(key, api::OnDisk::File) {
            return self.misused(key);
        }
        self.json_file(&format!("{key}.json"), &body)
    }

    /// `KEY/<reference>.json`: the answer of the endpoint `key` for one payment reference
    /// (`"payment_details"`). A key that names no such folder fails [`Builder::start`].
    pub fn json_for(self, key: &str, reference: &str, body: serde_json::Value) -> Bundle {
        if !api::is_on_disk(key, api::OnDisk::Folder) {
            return self.misused(key);
        }
        self.json_file(&format!("{key}/{reference}.json"), &body)
    }

    fn misused(mut self, key: &str) -> Bundle {
        self.unknown.push(key.to_string());
        self
    }

    /// Any file, as text or bytes, at a path relative to the bundle's folder: TOML files, a
    /// file with a deliberate error, or JSON whose numbers must keep their text (`10.00`).
    pub fn file(mut self, path: impl Into<String>, contents: impl Into<Vec<u8>>) -> Bundle {
        self.files.push((path.into(), contents.into()));
        self
    }

    /// Pretty-printed, so a problem's `line:column` points somewhere readable.
    fn json_file(self, path: &str, body: &serde_json::Value) -> Bundle {
        // A `Value` always serialises (its keys are strings).
        let text = serde_json::to_vec_pretty(body).unwrap_or_default();
        self.file(path, text)
    }

    /// Writes the bundle's folder under `data`.
    fn write(&self, data: &Path) -> Result<(), StartError> {
        // One folder name, written as such: `summit/` or `summit/.` would be the folder
        // `summit` under another name, and two bundles would share it.
        let name_ok = Path::new(&self.name)
            .file_name()
            .is_some_and(|f| f == self.name.as_str())
            && !crate::load::ignored(&self.name);
        if !name_ok {
            return Err(StartError::BundleName(self.name.clone()));
        }
        if let Some(key) = self.unknown.first() {
            return Err(StartError::UnknownEndpoint {
                bundle: self.name.clone(),
                key: key.clone(),
                known: api::keys().collect::<Vec<_>>().join(", "),
            });
        }
        let dir = data.join(&self.name);
        std::fs::create_dir_all(&dir).map_err(|source| StartError::Write {
            path: dir.clone(),
            source,
        })?;
        if !self.tokens.is_empty() && self.files.iter().any(|(rel, _)| rel == "bundle.toml") {
            return Err(StartError::TokensTwice(self.name.clone()));
        }
        if !self.tokens.is_empty() {
            let text = crate::model::bundle_toml(&self.tokens, None, None, None);
            write_file(&dir.join("bundle.toml"), text)?;
        }
        for (rel, contents) in &self.files {
            let rel_path = Path::new(rel);
            let relative = !rel.is_empty()
                && rel_path
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)));
            if !relative {
                return Err(StartError::FilePath {
                    bundle: self.name.clone(),
                    path: rel.clone(),
                });
            }
            // A file by reference is served for the reference its name gives: one level, no
            // deeper.
            let by_reference = api::on_disk(api::OnDisk::Folder)
                .find_map(|key| rel.strip_prefix(key).and_then(|r| r.strip_prefix('/')));
            if let Some(name) = by_reference {
                // One a load would skip would never be served: refused, as on disk.
                if name.contains(['/', '\\']) || crate::load::hidden(name) {
                    let reference = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
                    return Err(StartError::DetailReference {
                        bundle: self.name.clone(),
                        reference: reference.to_string(),
                    });
                }
            }
            write_file(&dir.join(rel_path), contents)?;
        }
        Ok(())
    }
}

/// Writes `contents` at `path`, creating its folders.
fn write_file(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), StartError> {
    let failed = |source| StartError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(failed)?;
    }
    std::fs::write(path, contents).map_err(failed)
}

/// Where a test server's data comes from.
#[derive(Debug)]
enum Data {
    Folder(PathBuf),
    Bundles(Vec<Bundle>),
}

/// Options of a [`TestServer`], then [`Builder::start`]. They fill the same [`ServeOptions`] as
/// `eventbox serve`'s flags and file; only the data folder, the address (`127.0.0.1:0`) and
/// watching (off: the folder is read once) are the test server's own.
///
/// ```
/// use eventbox::testing::TestServer;
///
/// # fn main() -> Result<(), eventbox::testing::StartError> {
/// let demo = eventbox::testing::demo_data();
/// let server = TestServer::from_folder(demo)
///     .compression(false)
///     .journal(10)
///     .start()?;
/// assert!(server.base_url().starts_with("http://127.0.0.1:"));
/// assert_eq!(server.token("demo"), Some("demo-token"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Builder {
    data: Data,
    options: ServeOptions,
    allow_errors: bool,
    strict: bool,
}

impl Builder {
    fn new(data: Data) -> Builder {
        let defaults = ServeOptions::default();
        Builder {
            data,
            // Every client of a test is one address (loopback): the per-address limit of a
            // shared server (64) would close a test's 65th connection at once.
            options: ServeOptions {
                max_connections_per_ip: defaults.max_connections,
                ..defaults
            },
            allow_errors: false,
            strict: false,
        }
    }

    /// Any of `eventbox serve`'s options (its data folder, address and watching aside), set on
    /// the options the builder holds: the test server's defaults and what earlier calls set.
    ///
    /// ```
    /// use eventbox::testing::TestServer;
    ///
    /// # fn main() -> Result<(), eventbox::testing::StartError> {
    /// let server = TestServer::from_folder(eventbox::testing::demo_data())
    ///     .options(|o| o.cors_origin = vec!["https://app.example".into()])
    ///     .journal(10)
    ///     .start()?;
    /// assert!(server.app().options().journal == 10);
    /// # Ok(())
    /// # }
    /// ```
    pub fn options(mut self, set: impl FnOnce(&mut ServeOptions)) -> Builder {
        set(&mut self.options);
        self
    }

    /// gzip and brotli variants of the answers (default on, as `--compression`).
    pub fn compression(mut self, on: bool) -> Builder {
        self.options.compression = if on { Switch::On } else { Switch::Off };
        self
    }

    /// The largest bundle file read (default 1 GiB, as `--max-file-bytes`).
    pub fn max_file_bytes(mut self, max: u64) -> Builder {
        self.options.max_file_bytes = max;
        self
    }

    /// One `eventbox::access` log line per request (default off). Lines go wherever the test's
    /// own tracing subscriber sends them; the test server installs none.
    pub fn access_log(mut self, on: bool) -> Builder {
        self.options.access_log = on;
        self
    }

    /// Starts even when bundles have errors (default off: `start` fails): the bundles that load
    /// are served, the others are not (their tokens get 503 `bundle_unavailable`) and `/status`
    /// lists their errors, as `eventbox serve` does.
    pub fn allow_errors(mut self, allow: bool) -> Builder {
        self.allow_errors = allow;
        self
    }

    /// Warnings count as errors, as `eventbox check --strict` counts them (default off:
    /// `serve` serves a bundle with warnings). A misspelt file name (`payment.json`) or
    /// `[simulate.endpoints]` key is only a warning, and without this the server starts
    /// without that file or that fault: turn it on for fixtures, so a typo fails the start.
    pub fn strict(mut self, strict: bool) -> Builder {
        self.strict = strict;
        self
    }

    /// Obeys the `X-Eventbox-Delay`, `-Status`, `-Fault` and `-Retry-After` request headers
    /// (default off, as `--allow-control-headers`).
    pub fn allow_control_headers(mut self, allow: bool) -> Builder {
        self.options.allow_control_headers = allow;
        self
    }

    /// Caps simulated delays, from `[simulate]` or `X-Eventbox-Delay` (default 30 s, as
    /// `--max-delay`).
    pub fn max_delay(mut self, max: std::time::Duration) -> Builder {
        self.options.max_delay = max;
        self
    }

    /// Keeps the last `capacity` requests at `/_journal` (default 0: off, as `--journal`), which
    /// [`TestServer::verify`], [`TestServer::check`] and [`TestServer::received_requests`] read.
    pub fn journal(mut self, capacity: usize) -> Builder {
        self.options.journal = capacity;
        self
    }

    /// Loads the data and starts serving; returns once the server accepts connections and the
    /// data is published. Fails when a bundle has an error (every error is listed), unless
    /// [`Builder::allow_errors`].
    pub fn start(self) -> Result<TestServer, StartError> {
        let (data_dir, temp) = match self.data {
            Data::Folder(dir) => (dir, None),
            Data::Bundles(bundles) => {
                let temp = write_bundles(&bundles)?;
                (temp.path().to_path_buf(), Some(temp))
            }
        };
        let options = ServeOptions {
            data: data_dir.clone(),
            ..self.options
        };
        // What `serve` would refuse is refused here too, never quietly changed; but for the
        // watch options: a test server does not watch.
        let app = App::with_options(&ServeOptions {
            watch: crate::config::WatchKind::Off,
            ..options
        })
        .map_err(StartError::Options)?;
        app.open_state()?;
        app.load()?;
        let tokens: BTreeMap<String, Vec<String>> = app.reloader.with_catalog(|catalog| {
            catalog
                .entries()
                .filter_map(|e| {
                    let tokens = &e.serving.as_ref()?.tokens;
                    Some((
                        e.name.clone(),
                        tokens.iter().map(|t| t.expose().to_string()).collect(),
                    ))
                })
                .collect()
        });
        // The temporary folder's name says nothing: problems show `summit/event.json`.
        let shown_from = temp.is_some().then(|| data_dir.clone());
        if !self.allow_errors {
            bundle_errors(&app, self.strict, shown_from.as_deref()).map_err(StartError::Bundles)?;
        }
        let service = app.service();
        let journal = service.journal.clone();
        let (addr, stop, thread, runtime) = spawn(service)?;
        Ok(TestServer {
            addr,
            tokens,
            app,
            strict: self.strict,
            shown_from,
            journal,
            data_dir,
            stop: Some(stop),
            thread: Some(thread),
            runtime,
            _temp: temp,
        })
    }
}

/// Every error of the bundles as loaded now (and with `strict` every warning); their files
/// relative to `shown_from` when given.
fn bundle_errors(app: &App, strict: bool, shown_from: Option<&Path>) -> Result<(), BundleErrors> {
    let mut problems: Vec<Problem> = app
        .bundles()
        .into_iter()
        .flat_map(|b| b.problems)
        .filter(|p| p.is_error() || strict)
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    if let Some(base) = shown_from {
        for p in &mut problems {
            if let Ok(rel) = p.file.strip_prefix(base) {
                p.file = rel.to_path_buf();
            }
        }
    }
    Err(BundleErrors {
        problems,
        reloaded: false,
    })
}

fn write_bundles(bundles: &[Bundle]) -> Result<tempfile::TempDir, StartError> {
    let temp = tempfile::Builder::new()
        .prefix("eventbox-test-")
        .tempdir()
        .map_err(|source| StartError::Write {
            path: std::env::temp_dir(),
            source,
        })?;
    let mut names = BTreeSet::new();
    for bundle in bundles {
        if !names.insert(bundle.name.as_str()) {
            return Err(StartError::DuplicateBundle(bundle.name.clone()));
        }
        bundle.write(temp.path())?;
    }
    Ok(temp)
}

/// Binds `127.0.0.1:0` and serves on a thread of its own until the sender is used or dropped.
///
/// The runtime is built, used and dropped on that thread only: a runtime dropped on the
/// caller's thread would panic inside a `#[tokio::test]`, even on an error path.
/// The server's address, its stop signal, its thread and its runtime.
type Spawned = (
    SocketAddr,
    oneshot::Sender<()>,
    JoinHandle<()>,
    tokio::runtime::Handle,
);

fn spawn(service: Service) -> Result<Spawned, StartError> {
    let failed = |what| move |source| StartError::Server { what, source };
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(failed("bind"))?;
    listener.set_nonblocking(true).map_err(failed("listener"))?;
    let addr = listener.local_addr().map_err(failed("listener"))?;
    let (stop, stopped) = oneshot::channel::<()>();
    let (started_tx, started) =
        std::sync::mpsc::channel::<Result<tokio::runtime::Handle, StartError>>();
    let thread = std::thread::Builder::new()
        .name(format!("eventbox-test-{}", addr.port()))
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(failed("runtime"));
            // Registered with this runtime's reactor; connections wait in the kernel's queue
            // until the accept loop runs, so the server is usable once this is reported.
            let ready = runtime.and_then(|runtime| {
                let entered = runtime.enter();
                let listener =
                    tokio::net::TcpListener::from_std(listener).map_err(failed("listener"))?;
                drop(entered);
                Ok((runtime, listener))
            });
            match ready {
                Ok((runtime, listener)) => {
                    let _ = started_tx.send(Ok(runtime.handle().clone()));
                    run(runtime, listener, service, stopped);
                }
                Err(e) => {
                    let _ = started_tx.send(Err(e));
                }
            }
        })
        .map_err(failed("thread"))?;
    match started.recv() {
        Ok(Ok(runtime)) => Ok((addr, stop, thread, runtime)),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => {
            let _ = thread.join();
            Err(StartError::Server {
                what: "thread",
                source: std::io::Error::other("the server thread ended before it started"),
            })
        }
    }
}

/// The server thread: serve until asked to stop, drain for at most [`STOP_TIMEOUT`], then drop
/// the runtime (which closes every connection still open).
fn run(
    runtime: tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
    service: Service,
    stopped: oneshot::Receiver<()>,
) {
    runtime.block_on(async move {
        let (asked, drain) = oneshot::channel::<()>();
        let shutdown = async move {
            // Asked, or the handle is gone: stop either way.
            let _ = stopped.await;
            let _ = asked.send(());
        };
        let deadline = async move {
            let _ = drain.await;
            tokio::time::sleep(STOP_TIMEOUT).await;
        };
        tokio::select! {
            served = crate::http::serve(listener, service, shutdown) => {
                if let Err(e) = served {
                    tracing::warn!(error = %e, "the test server stopped with an error");
                }
            }
            () = deadline => {}
        }
    });
    // Connections still open close now; work handed to blocking threads (compressing a large
    // answer, a reload) gets at most STOP_TIMEOUT more, so it lets go of the state folder
    // before the drop returns, unless it takes longer than that.
    runtime.shutdown_timeout(STOP_TIMEOUT);
}

/// An eventbox serving on `127.0.0.1:<ephemeral port>` from a thread of its own, until dropped.
///
/// Start it from a data folder ([`TestServer::start`], [`TestServer::from_folder`]) or from
/// bundles built in code ([`TestServer::from_bundles`]). Dropping it stops accepting, lets
/// requests in flight finish (up to [`STOP_TIMEOUT`]), closes every connection and removes the
/// temporary folder of in-code bundles; afterwards its port refuses connections.
pub struct TestServer {
    addr: SocketAddr,
    tokens: BTreeMap<String, Vec<String>>,
    app: App,
    /// [`Builder::strict`], for [`TestServer::reload`].
    strict: bool,
    /// The temporary folder of in-code bundles, which problems are shown relative to.
    shown_from: Option<PathBuf>,
    /// The request journal, when on: what verification reads.
    journal: Option<Arc<Journal>>,
    data_dir: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    /// The server thread's runtime.
    runtime: tokio::runtime::Handle,
    /// Last: removed after the server thread has stopped.
    _temp: Option<tempfile::TempDir>,
}

impl fmt::Debug for TestServer {
    /// The address and the bundles; never a token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestServer")
            .field("addr", &self.addr)
            .field("bundles", &self.tokens.keys().collect::<Vec<_>>())
            .field("data_dir", &self.data_dir)
            .finish()
    }
}

impl TestServer {
    /// Serves every bundle of a data folder with the default options.
    pub fn start(data_dir: impl AsRef<Path>) -> Result<TestServer, StartError> {
        TestServer::from_folder(data_dir).start()
    }

    /// A builder for a server on a data folder (read once; not watched).
    pub fn from_folder(data_dir: impl AsRef<Path>) -> Builder {
        Builder::new(Data::Folder(data_dir.as_ref().to_path_buf()))
    }

    /// A builder for a server on bundles built in code.
    pub fn from_bundles(bundles: impl IntoIterator<Item = Bundle>) -> Builder {
        Builder::new(Data::Bundles(bundles.into_iter().collect()))
    }

    /// The address it listens on (`127.0.0.1` and an ephemeral port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The full URL of a path: `url("/api/v1/event")`.
    pub fn url(&self, path: &str) -> String {
        let slash = if path.starts_with('/') { "" } else { "/" };
        format!("http://{}{slash}{path}", self.addr)
    }

    /// The tokens of every bundle served, by bundle name.
    pub fn tokens(&self) -> &BTreeMap<String, Vec<String>> {
        &self.tokens
    }

    /// The first token of a served bundle.
    pub fn token(&self, bundle: &str) -> Option<&str> {
        self.tokens.get(bundle)?.first().map(String::as_str)
    }

    /// The data folder served: the one given, or the temporary folder of in-code bundles.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The running eventbox: its store, metrics and reloader.
    pub fn app(&self) -> &App {
        &self.app
    }

    /// Re-reads the data folder after a test has changed its files, and returns once the new
    /// data is served; the problems that kept a bundle from being served (with
    /// [`Builder::strict`], the warnings too) as [`TestServer::start`] reports them. A bundle
    /// whose new files have errors keeps serving its last good version, as `serve` does, so a
    /// test that goes on after an error would read the old data. With
    /// [`Builder::allow_errors`], bundles broken from the start are among the problems too.
    /// [`TestServer::tokens`] keeps what `start` saw.
    pub fn reload(&self) -> Result<(), BundleErrors> {
        if let Err(e) = self.app.load() {
            return Err(BundleErrors {
                problems: vec![Problem::error(
                    &self.data_dir,
                    crate::problem::Location::File,
                    e.to_string(),
                )],
                reloaded: true,
            });
        }
        bundle_errors(&self.app, self.strict, self.shown_from.as_deref()).map_err(|e| {
            BundleErrors {
                reloaded: true,
                ..e
            }
        })
    }

    /// Forgets every write (registrations, check-ins) of every bundle, as `POST /_writes/reset`
    /// does for one: what the reads show is the bundles' files again. For test isolation. With
    /// a state folder it returns once the log holds the resets (it blocks the calling thread
    /// until then; the server runs on its own).
    pub fn reset(&self) {
        for bundle in self.tokens.keys() {
            let pending = {
                let _entered = self.runtime.enter();
                self.app.writes.reset(bundle)
            };
            let (done, wait) = std::sync::mpsc::channel();
            self.runtime.spawn(async move {
                if let Err(e) = pending.durable().await {
                    tracing::error!(error = %e, "the test server's reset is not in its log");
                }
                let _ = done.send(());
            });
            let _ = wait.recv();
        }
    }

    /// Every request received, oldest first, as the journal kept it; `None` when the server
    /// keeps no journal ([`Builder::journal`]). A request is kept before its answer is sent, so
    /// one whose answer the client has seen is always listed.
    pub fn received_requests(&self) -> Option<Vec<Received>> {
        let journal = self.journal.as_ref()?;
        Some(journal.entries().iter().map(|e| Received::of(e)).collect())
    }

    /// The requests received that `expect` matches (its count aside), oldest first; `None`
    /// when the server keeps no journal.
    pub fn received(&self, expect: &Expect) -> Option<Vec<Received>> {
        let journal = self.journal.as_ref()?;
        Some(
            journal
                .entries()
                .iter()
                .filter(|e| expect.matches(e))
                .map(|e| Received::of(e))
                .collect(),
        )
    }

    /// Whether the requests received match `expect` as many times as it says (at least once
    /// without [`Expect::times`]); if not, a [`VerifyError`] whose message shows what was
    /// expected, how the closest body differs, and the requests received instead. An exact
    /// count fails once the journal has dropped requests to make room (the count would be
    /// partial): give it room with [`Builder::journal`] or use [`TestServer::clear_journal`].
    pub fn check(&self, expect: &Expect) -> Result<(), VerifyError> {
        let journal = self.journal.as_ref().ok_or_else(VerifyError::journal_off)?;
        let (entries, dropped) = journal.snapshot(expect.narrowed_to());
        let entries: Vec<_> = entries.iter().map(|e| &**e).collect();
        expect.check(&entries, dropped)
    }

    /// Forgets every request received so far, as `DELETE /_journal` does: verification then
    /// counts from here (between the steps of a test, or tests sharing a server). Nothing
    /// happens without a journal.
    pub fn clear_journal(&self) {
        if let Some(journal) = &self.journal {
            journal.forget(&crate::http::journal::Filter::default());
        }
    }

    /// [`TestServer::check`], panicking with its message when the requests do not match.
    ///
    /// ```
    /// use eventbox::testing::{Expect, TestServer};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = TestServer::from_folder(eventbox::testing::demo_data())
    ///     .journal(100)
    ///     .start()?;
    /// // ... the client under test calls GET /api/v1/event once ...
    /// # use std::io::{Read, Write};
    /// # let mut conn = std::net::TcpStream::connect(server.addr())?;
    /// # write!(conn, "GET /api/v1/event HTTP/1.1\r\nHost: x\r\nConnection: close\r\n")?;
    /// # write!(conn, "Authorization-Token: demo-token\r\n\r\n")?;
    /// # conn.read_to_end(&mut Vec::new())?;
    /// server.verify(&Expect::get("/api/v1/event").status(200).times(1));
    /// let failed = server.check(&Expect::get("/api/v1/payments"));
    /// assert!(failed.is_err_and(|e| e.message().contains("GET /api/v1/event → 200")));
    /// # Ok(())
    /// # }
    /// ```
    #[track_caller]
    pub fn verify(&self, expect: &Expect) {
        if let Err(e) = self.check(expect) {
            panic!("{e}");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // The thread only panics if the server did; the test sees that as refused requests.
            let _ = thread.join();
        }
    }
}
