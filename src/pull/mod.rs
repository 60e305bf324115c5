//! `eventbox pull`: copies a live event (the real service, or another eventbox) into a bundle.
//!
//! The endpoint table's list endpoints are fetched one after the other (`plan`), then the
//! details endpoint once per payment reference by a bounded pool of workers. Everything is
//! written into a staging folder beside the target (`DIR/_NAME.pull-<pid>-<n>`, a name the
//! server skips), checked with the same loader `check` and `serve` use, and only then swapped
//! into place; any failure before the swap removes the staging folder and leaves the earlier
//! copy as it was (see `crate::stage`).
//!
//! Split in three, with the staging folder and the swap in `crate::stage` (shared with `gen`):
//! this file (options, the run, the summary, what may become a file name), `fetch` (the HTTP
//! client: timeouts, retries, backoff, `Retry-After`, 401) and `progress` (a bar on a terminal,
//! plain lines otherwise).
//! Library functions, so tests run a pull in-process against an in-process server.

pub(crate) mod fetch;
pub(crate) mod progress;

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::Url;
use serde::Deserialize;

use crate::api;
use crate::load;
use crate::problem::quoted;
use crate::stage::{self, Staging};
pub use crate::stage::{Refusal, StageError};
use crate::token::token_hint;
use fetch::Fetcher;
use progress::Progress;
pub use progress::ProgressMode;

/// The token given with `--token` (see [`crate::token`]).
pub use crate::token::Token;

/// What `pull` does: the `eventbox pull` command line (each field's doc is its `--help` line);
/// [`PullOptions::new`] gives the same defaults, which a test holds equal.
#[derive(Debug, Clone, clap::Args)]
pub struct PullOptions {
    /// The service: its origin or its API base, e.g. https://host/api/v1
    #[arg(long, value_name = "BASE_URL")]
    pub from: String,
    /// The token that opens the event (EVENTBOX_TOKEN keeps it out of the process list)
    #[arg(long, env = "EVENTBOX_TOKEN", hide_env_values = true)]
    pub token: Token,
    /// The bundle folder to create or replace: absent, empty, or a bundle (it has bundle.toml);
    /// or a bundle in object storage, s3://bucket/prefix/NAME (or gs://, az://, a WebDAV
    /// http(s)://), written with its manifest first, credentials from the environment
    #[arg(long, value_name = "DIR/NAME")]
    pub into: PathBuf,
    /// Replace --into even when it holds other bundles or files (all of them are deleted)
    // Never a file or a symbolic link (see `stage::check_target`).
    #[arg(long)]
    pub force: bool,
    /// Detail requests in flight at once
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub concurrency: usize,
    /// The largest answer taken, in bytes (as decoded), which is also the largest bundle file
    /// the copy may hold: set it to the server's --max-file-bytes
    #[arg(long, env = "EVENTBOX_MAX_FILE_BYTES", value_name = "N",
          default_value_t = crate::read::DEFAULT_MAX_FILE_BYTES)]
    pub max_file_bytes: u64,
    /// Re-indent the JSON instead of keeping the bodies byte for byte
    #[arg(long)]
    pub pretty: bool,
    /// Retries of one request (timeouts, connection errors, 429, 5xx)
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub retries: u32,
    /// Time allowed to connect
    #[arg(long, default_value = "10s", value_parser = crate::config::parse_duration)]
    pub connect_timeout: Duration,
    /// Time allowed for one request, its body included
    #[arg(long, default_value = "60s", value_parser = crate::config::parse_duration)]
    pub timeout: Duration,
    // The first backoff; each retry doubles it (with jitter), up to `max_retry_wait`. Not a flag.
    #[arg(skip = Duration::from_millis(250))]
    pub backoff: Duration,
    /// The longest wait before a retry, Retry-After included
    #[arg(long, default_value = "30s", value_parser = crate::config::parse_duration)]
    pub max_retry_wait: Duration,
    /// A bar on a terminal and plain lines otherwise (auto), plain lines, or nothing
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    /// The company's Authorization-App key: copies the company's event list too
    /// (EVENTBOX_APP keeps it out of the process list)
    // A secret, like the token; without it the two-header reads are left out.
    #[arg(long, env = "EVENTBOX_APP", hide_env_values = true, value_name = "KEY")]
    pub app: Option<Token>,
    // Set by `serve --refresh-every` (`crate::kiosk`): a conditional pull over the bundle at
    // `into`, keeping its bundle.toml's tokens and other keys.
    #[arg(skip)]
    pub(crate) refresh: Option<Refresh>,
}

/// Its sizes only: `read` holds the tokens.
impl std::fmt::Debug for Refresh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Refresh")
            .field("etags", &self.etags.len())
            .field("read", &self.read.len())
            .finish()
    }
}

/// What a refresh adds to a pull.
#[derive(Clone, Default)]
pub(crate) struct Refresh {
    /// The `ETag` of each file the previous refresh received, by [`etag_key`]: sent as
    /// `If-None-Match`; a 304 reuses that file from the bundle being replaced.
    pub(crate) etags: Arc<std::collections::HashMap<String, String>>,
    /// The text of the bundle.toml in place when the refresh began: swapped in as it is, with
    /// the new `[source] pulled_at` (the earlier one kept when a detail the source did not give
    /// was kept from the earlier copy: that copy is not wholly current, so its `Age` goes on). Edited meanwhile (a token revoked), the edit wins: the
    /// text in place then is the one swapped in.
    pub(crate) read: String,
}

/// The key of a file in [`Refresh::etags`]: its path in the bundle, without the extension.
fn etag_key(file: &str, reference: Option<&str>) -> String {
    match reference {
        Some(r) => format!("{file}/{r}"),
        None => file.to_string(),
    }
}

/// The conditional side of one pull: the tags sent, the tags received, whether any answer was
/// new.
#[derive(Debug, Default)]
struct Conditional {
    before: Arc<std::collections::HashMap<String, String>>,
    /// The bundle being replaced, whose files a 304 reuses.
    old: PathBuf,
    seen: std::sync::Mutex<std::collections::HashMap<String, String>>,
    changed: std::sync::atomic::AtomicBool,
    /// The files a 304 keeps: (earlier copy, staged path, URL). Linked only once some answer
    /// was new: a refresh that changes nothing touches no file of the bundle in place (a link
    /// changes a file's link count, which a watcher sees as a change).
    kept: std::sync::Mutex<Vec<(PathBuf, PathBuf, String)>>,
    /// A refresh (`serve --refresh-every`): a detail the source could not give within the
    /// retries keeps its earlier copy, rather than the whole refresh failing.
    refreshing: bool,
}

impl Conditional {
    /// The tag to send for a file, when one was seen and its earlier copy is still there.
    fn tag(&self, key: &str, old_file: &Path) -> Option<&str> {
        self.before
            .get(key)
            .map(String::as_str)
            .filter(|_| old_file.is_file())
    }

    /// Records an answer's tag.
    fn saw(&self, key: String, got: &fetch::Got) {
        if let Some(tag) = &got.etag {
            self.seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(key, tag.clone());
        }
    }

    /// Stages an answer's file: `text` (the body as it is written) goes to `new`, unless the
    /// earlier copy `old` holds exactly those bytes, which is then kept as for a 304. A source
    /// that sends no `ETag` (ASP.NET sends none by default) thus does not make every refresh
    /// rewrite, swap and reload the bundle: only an answer that differs counts as new.
    fn stage(&self, old: &Path, new: &Path, text: &[u8], url: &str) -> Result<(), PullError> {
        // Read whole only when the sizes agree; off the runtime's thread (a kiosk's payments
        // file may be 100 MB).
        let same = std::fs::metadata(old).is_ok_and(|m| m.len() == text.len() as u64)
            && stage::in_place(|| std::fs::read(old).is_ok_and(|earlier| earlier == text));
        if same {
            self.keep(old.to_path_buf(), new.to_path_buf(), url);
            return Ok(());
        }
        self.changed.store(true, Ordering::Relaxed);
        stage::write_private(new, text).map_err(|source| PullError::Io {
            path: new.to_path_buf(),
            source,
        })
    }

    /// Notes that the earlier copy `old` answers for `new` (a 304): put there by
    /// [`Conditional::link_kept`].
    fn keep(&self, old: PathBuf, new: PathBuf, url: &str) {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((old, new, url.to_string()));
    }

    /// Puts the earlier copy of every file a 304 kept in the staging folder: a hard link (files
    /// are never changed in place, only replaced whole), or a copy where links are not possible.
    fn link_kept(&self) -> Result<(), PullError> {
        let kept = std::mem::take(
            &mut *self
                .kept
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for (old, new, url) in kept {
            std::fs::hard_link(&old, &new)
                .or_else(|_| std::fs::copy(&old, &new).map(|_| ()))
                .map_err(|source| PullError::NotModifiedLost {
                    url,
                    path: old,
                    source,
                })?;
        }
        Ok(())
    }
}

impl PullOptions {
    pub fn new(
        from: impl Into<String>,
        token: impl Into<String>,
        into: impl Into<PathBuf>,
    ) -> Self {
        PullOptions {
            from: from.into(),
            token: Token::new(&token.into()),
            into: into.into(),
            force: false,
            concurrency: 8,
            max_file_bytes: crate::read::DEFAULT_MAX_FILE_BYTES,
            pretty: false,
            retries: 4,
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(60),
            backoff: Duration::from_millis(250),
            max_retry_wait: Duration::from_secs(30),
            progress: ProgressMode::Auto,
            app: None,
            refresh: None,
        }
    }
}

/// Why a pull failed. In every case the earlier copy of the bundle is untouched and no staging
/// folder is left behind.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error("--from {url:?}: {reason}")]
    BadBase { url: String, reason: String },
    #[error("--into {}: {reason}", path.display())]
    BadTarget { path: PathBuf, reason: String },
    #[error("--token: {0}")]
    BadToken(String),
    #[error("--app: {0}")]
    BadApp(String),
    #[error("--concurrency must be at least 1")]
    BadConcurrency,
    #[error("--{0} must be more than 0: no answer could come in time")]
    BadTimeout(&'static str),
    #[error("cannot start the HTTP client: {0}")]
    Client(String),
    #[error(
        "the server refused the token {hint} (401) at {url}: check --token; nothing was changed"
    )]
    TokenRefused { url: String, hint: String },
    #[error("the server refused the app key (401 InvalidAuthorizationApp) at {url}: check --app; nothing was changed")]
    AppRefused { url: String },
    #[error(
        "{url} answered {status}{message}; not retried (another try would get the same answer)"
    )]
    Status {
        url: String,
        status: u16,
        message: String,
    },
    #[error("{url}: gave up after {attempts} attempt{}; the last: {last}", if *attempts == 1 { "" } else { "s" })]
    GaveUp {
        url: String,
        attempts: u32,
        last: String,
    },
    #[error("{url}: {reason}; not retried (another try would fail the same way)")]
    Transport { url: String, reason: String },
    #[error("the payments answer does not list references: {0}")]
    Payments(String),
    #[error(
        "the payment reference {} cannot name a detail file ({reason}); the pull is refused",
        quoted(reference)
    )]
    UnsafeReference { reference: String, reason: String },
    #[error("{url} answered 200 with Content-Type {content_type}, a web page, not the API's JSON (a login page, a captive portal, a proxy's error page?); nothing was changed")]
    NotJsonAnswer { url: String, content_type: String },
    #[error("{url} answered 304 Not Modified, but the earlier copy {} cannot be reused: {source}", path.display())]
    NotModifiedLost {
        url: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{url} answered more than {limit} bytes, the largest file a bundle may hold (--max-file-bytes); not retried, nothing was changed")]
    TooLarge { url: String, limit: u64 },
    #[error("--pretty: {endpoint} did not answer JSON: {reason}")]
    NotJson { endpoint: String, reason: String },
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the pulled bundle fails check, so it was not swapped in (the paths name the staging folder, now removed):\n  {}{}", problems.join("\n  "), more_line(*more))]
    Check { problems: Vec<String>, more: usize },
    #[error(transparent)]
    Stage(#[from] stage::StageError),
    #[error("a detail worker stopped: {0}")]
    Worker(String),
}

fn more_line(more: usize) -> String {
    if more == 0 {
        String::new()
    } else {
        format!("\n  … and {more} more (run `eventbox check` on a copy for all)")
    }
}

/// One endpoint's part of the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSummary {
    /// The bundle file's stem (`payments`), or `payment_details`.
    pub name: &'static str,
    /// Records in the answer (for `submission`, types and topic areas together; for
    /// `payment_details`, the files). `None` when the answer was not the expected JSON.
    pub records: Option<usize>,
    pub bytes: u64,
}

/// What a pull did.
#[derive(Debug, Clone)]
pub struct PullSummary {
    /// The API base the endpoints were appended to.
    pub base: String,
    pub into: PathBuf,
    pub endpoints: Vec<EndpointSummary>,
    pub requests: u64,
    pub retries: u64,
    pub elapsed: Duration,
    /// `check`'s warnings about the pulled bundle (it was swapped in all the same).
    pub warnings: Vec<String>,
    /// A refresh whose every answer was 304: nothing was written or swapped.
    pub(crate) unchanged: bool,
    /// How many details a refresh could not get (their earlier copies kept): the copy is not
    /// wholly current.
    pub(crate) stale: usize,
    /// The `ETag` of each file received or confirmed (for the next refresh).
    pub(crate) etags: std::collections::HashMap<String, String>,
    /// A pull without `--app`: the company's event list was not asked for (its copy answers
    /// an empty list), which the summary says.
    pub(crate) without_app: bool,
}

impl PullSummary {
    pub fn bytes(&self) -> u64 {
        self.endpoints.iter().map(|e| e.bytes).sum()
    }

    /// Whether a line of the summary counts files fetched one per payment.
    fn per_payment(&self, e: &EndpointSummary) -> bool {
        api::index_of(e.name).is_some_and(|i| matches!(api::API[i].pull, api::Pull::PerPayment))
    }
}

impl fmt::Display for PullSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "pulled {} into {} in {:.2} s",
            self.base,
            self.into.display(),
            self.elapsed.as_secs_f64()
        )?;
        for e in &self.endpoints {
            let records = e.records.map_or_else(|| "?".to_string(), |n| n.to_string());
            writeln!(
                f,
                "  {:<16} {:>9} {:<8} {:>12}",
                e.name,
                records,
                match (self.per_payment(e), e.records) {
                    (true, Some(1)) => "file",
                    (true, _) => "files",
                    (false, Some(1)) => "record",
                    (false, _) => "records",
                },
                stage::human_bytes(e.bytes)
            )?;
        }
        write!(
            f,
            "  total {}, {} requests, {} retr{}",
            stage::human_bytes(self.bytes()),
            self.requests,
            self.retries,
            if self.retries == 1 { "y" } else { "ies" }
        )?;
        if self.without_app {
            write!(
                f,
                "\n  note: the company's event list (customclient/events) was not pulled: if the account has a company plan, give --app KEY for it"
            )?;
        }
        for w in &self.warnings {
            write!(f, "\n  warning: {w}")?;
        }
        Ok(())
    }
}

/// What `pull` fetches, from the endpoint table: the list endpoints in table order, each with
/// its path under the API base (as the platform's docs write it, trailing slash included), then
/// the endpoint fetched once per payment reference.
pub(crate) struct Plan {
    pub lists: Vec<(&'static api::Endpoint, &'static str)>,
    pub per_payment: Option<(&'static api::Endpoint, &'static str)>,
}

/// The plan of a pull (see [`Plan`]); `with_app`: the company's app key is given, so the
/// entries that need it are pulled too.
pub(crate) fn plan(with_app: bool) -> Plan {
    let relative = |e: &'static api::Endpoint| (e, e.relative().trim_start_matches('/'));
    Plan {
        lists: api::API
            .iter()
            .filter(|e| matches!(e.pull, api::Pull::List { .. }) && (with_app || !e.app))
            .map(relative)
            .collect(),
        per_payment: api::API
            .iter()
            .find(|e| matches!(e.pull, api::Pull::PerPayment))
            .map(relative),
    }
}

/// Runs a pull: fetch everything into the staging folder, check it, swap it in.
pub async fn run(opts: &PullOptions) -> Result<PullSummary, PullError> {
    let started = Instant::now();
    let pulled_at = chrono::Utc::now();
    let base = api_base(&opts.from)?;
    let name = bundle_name(&opts.into, opts.force)?;
    if opts.concurrency == 0 {
        return Err(PullError::BadConcurrency);
    }
    for (option, limit) in [
        ("timeout", opts.timeout),
        ("connect-timeout", opts.connect_timeout),
    ] {
        if limit.is_zero() {
            return Err(PullError::BadTimeout(option));
        }
    }
    let fetcher = Arc::new(Fetcher::new(opts)?);
    let progress = Arc::new(Progress::new(opts.progress));
    let conditional = Arc::new(Conditional {
        before: opts
            .refresh
            .as_ref()
            .map(|r| Arc::clone(&r.etags))
            .unwrap_or_default(),
        old: opts.into.clone(),
        refreshing: opts.refresh.is_some(),
        ..Conditional::default()
    });
    // From here on, dropping `staging` (any error, a cancelled future) removes the folder.
    let staging = Staging::create(&opts.into, "pull", opts.force)?;
    // Its owner's only: the files hold people's data, and with --app other events' tokens.
    stage::private_folder(staging.path()).map_err(|source| PullError::Io {
        path: staging.path().to_path_buf(),
        source,
    })?;

    let mut endpoints = Vec::new();
    let mut references = Vec::new();
    let plan = plan(opts.app.is_some());
    for &(endpoint, path) in &plan.lists {
        let file = endpoint.key;
        let url = format!("{base}/{path}");
        let old_file = opts.into.join(format!("{file}.json"));
        let new_file = staging.path().join(format!("{file}.json"));
        let key = etag_key(file, None);
        let mut got = fetcher
            .get_if(&url, None, conditional.tag(&key, &old_file), &progress)
            .await?;
        if let Some(e) = got.not_found.take() {
            let takes_empty = matches!(
                endpoint.pull,
                api::Pull::List {
                    empty_404: true,
                    ..
                }
            );
            if !(takes_empty && got.body.as_deref().is_some_and(fetch::empty_list)) {
                return Err(e);
            }
        }
        conditional.saw(key, &got);
        let stream = matches!(endpoint.feed, api::Feed::Stream);
        let reused = got.body.is_none();
        let body = match got.body {
            Some(body) => Some(body),
            None => {
                conditional.keep(old_file.clone(), new_file.clone(), &url);
                // The references are in the payments body: read back the copy kept.
                stream
                    .then(|| std::fs::read(&old_file).map(Bytes::from))
                    .transpose()
                    .map_err(|source| PullError::NotModifiedLost {
                        url: url.clone(),
                        path: old_file.clone(),
                        source,
                    })?
            }
        };
        let records = match (&body, stream) {
            (Some(body), true) => {
                references = payment_references(body).map_err(|e| match e {
                    PullError::UnsafeReference { reference, reason } => {
                        PullError::UnsafeReference {
                            reference: hide_token(&reference, opts.token.expose()),
                            reason,
                        }
                    }
                    // serde quotes the server's text whole (`invalid type: string "..."`).
                    PullError::Payments(why) => {
                        let why = hide_token(&why, opts.token.expose());
                        let mut cut: String = why.chars().take(200).collect();
                        if cut.len() < why.len() {
                            cut.push('…');
                        }
                        PullError::Payments(cut)
                    }
                    other => other,
                })?;
                Some(references.len())
            }
            (Some(body), false) => count_records(endpoint, body),
            (None, _) => None,
        };
        let bytes = match &body {
            // Kept from the earlier copy: nothing received.
            _ if reused => 0,
            Some(body) => {
                let text = rendered(body, opts.pretty, file)?;
                conditional.stage(&old_file, &new_file, &text, &url)?;
                body.len() as u64
            }
            None => 0,
        };
        progress.endpoint(file, records, bytes);
        endpoints.push(EndpointSummary {
            name: file,
            records,
            bytes,
        });
    }

    let mut no_detail = Details::default();
    if let Some((endpoint, path)) = plan.per_payment {
        let (details, lost) = fetch_details(
            &fetcher,
            &progress,
            (endpoint.key, path, &format!("{base}/{path}")),
            references,
            staging.path(),
            opts,
            &conditional,
        )
        .await?;
        endpoints.push(details);
        no_detail = lost;
    }
    let etags = std::mem::take(
        &mut *conditional
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let summary = |warnings, unchanged| PullSummary {
        base: base.clone(),
        into: opts.into.clone(),
        endpoints: endpoints.clone(),
        requests: fetcher.requests(),
        retries: fetcher.retries(),
        elapsed: started.elapsed(),
        warnings,
        unchanged,
        stale: no_detail.stale.len(),
        etags: etags.clone(),
        without_app: opts.app.is_none() && opts.refresh.is_none(),
    };
    let token = opts.token.expose();
    let detail_warnings: Vec<String> = [
        references_warning(
            &no_detail.lost,
            token,
            "the source has no detail for",
            "no file is written, and the detail served is made from the payment",
        ),
        references_warning(
            &no_detail.stale,
            token,
            "the source did not give the detail of",
            "their earlier copies are kept (a new payment's detail is made from it), and the \
             next refresh asks again",
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    if opts.refresh.is_some() && !conditional.changed.load(Ordering::Relaxed) {
        // Every answer was 304 (or the same bytes): the bundle in place is current; the
        // staging folder goes.
        drop(staging);
        progress.finish();
        return Ok(summary(detail_warnings, true));
    }
    conditional.link_kept()?;
    if opts.refresh.is_some() {
        keep_unpulled(&opts.into, staging.path(), &plan)?;
    }

    let toml_path = staging.path().join("bundle.toml");
    let when = pulled_at.format("%Y-%m-%d %H:%M UTC");
    let source = crate::model::Source {
        url: base.clone(),
        pulled_at: Some(pulled_at),
    };
    let toml = match &opts.refresh {
        Some(refresh) if !no_detail.stale.is_empty() => refresh.read.clone(),
        Some(refresh) => {
            crate::model::with_pulled_at(&refresh.read, pulled_at).map_err(|reason| {
                PullError::BadTarget {
                    path: opts.into.join(stage::BUNDLE_FILE),
                    reason,
                }
            })?
        }
        None => {
            let note = format!("Pulled by `eventbox pull` from {base} on {when}.");
            // With the company's key, the copy takes that key alone on the company routes, as
            // the source does: their answers list other events' tokens (docs/api.md).
            let app_keys = opts.app.as_ref().map(|app| {
                let key = toml::Value::String(app.expose().trim().to_string());
                toml::Table::from_iter([("app_keys".to_string(), toml::Value::Array(vec![key]))])
            });
            crate::model::bundle_toml(
                &[opts.token.expose().trim().to_string()],
                Some(&note),
                Some(&source),
                app_keys.as_ref(),
            )
        }
    };
    stage::write_private(&toml_path, toml.as_bytes()).map_err(|source| PullError::Io {
        path: toml_path.clone(),
        source,
    })?;

    let mut warnings = check_staged(
        staging.path(),
        &opts.into,
        &name,
        opts.token.expose(),
        opts.max_file_bytes,
    )
    .await?;
    warnings.extend(detail_warnings);
    if let Some(refresh) = &opts.refresh {
        // Checked last, just before the swap: an edit made during the refresh is kept.
        keep_edited_bundle_toml(&opts.into, &toml_path, &refresh.read)?;
    }
    staging.commit_in_place()?;
    progress.finish();
    Ok(summary(warnings, false))
}

/// The API base from `--from`: an origin gets `/api/v1` appended; a URL already ending in
/// `/api/v1` (any case, with or without a trailing slash) is kept. Query and fragment are
/// dropped; credentials in the URL are refused (they would be sent to the server in the clear of
/// our logs).
pub(crate) fn api_base(from: &str) -> Result<String, PullError> {
    let bad = |reason: &str| PullError::BadBase {
        url: from.to_string(),
        reason: reason.to_string(),
    };
    let mut url = Url::parse(from.trim())
        .map_err(|e| bad(&format!("not a URL ({e}); write e.g. https://host/api/v1")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("only http and https URLs can be pulled from"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        // Quote the URL without them: a password is a secret too.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        return Err(PullError::BadBase {
            url: url.to_string(),
            reason: "credentials in the URL are not supported; the token goes in --token".into(),
        });
    }
    url.set_query(None);
    url.set_fragment(None);
    let path = url.path().trim_end_matches('/').to_string();
    let path = if path.to_ascii_lowercase().ends_with(api::BASE) {
        path
    } else {
        format!("{path}{}", api::BASE)
    };
    url.set_path(&path);
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// The bundle's name: the last part of `--into`, which the server must be willing to serve.
/// A target that [`stage::check_target`] refuses is refused here, before any request.
fn bundle_name(into: &Path, force: bool) -> Result<String, PullError> {
    let bad = |reason: &str| PullError::BadTarget {
        path: into.to_path_buf(),
        reason: reason.to_string(),
    };
    let name = into
        .file_name()
        .ok_or_else(|| bad("name the bundle folder, e.g. data/summit"))?
        .to_str()
        .ok_or_else(|| bad("the bundle name must be UTF-8"))?;
    if load::ignored(name) {
        return Err(bad(
            "a bundle whose name starts with `_` or `.` is never served; choose another name",
        ));
    }
    stage::check_target(into, force).map_err(|refusal| bad(&refusal.to_string()))?;
    Ok(name.to_string())
}

/// Why a payment reference cannot be a file name, if it cannot. It comes from a remote server,
/// so it must never steer a path: no separators, no `..`, no NUL or control characters, no
/// leading `.` (the loader skips such files), not empty, not longer than a file name may be.
pub(crate) fn unsafe_reference(reference: &str) -> Option<&'static str> {
    if reference.is_empty() {
        Some("it is empty")
    } else if reference.contains(['/', '\\']) {
        Some("it holds a path separator")
    } else if reference.contains("..") {
        Some("it holds `..`")
    } else if load::hidden(&format!("{reference}.json")) {
        Some("it starts with `.`")
    } else if reference.chars().any(char::is_control) {
        Some("it holds a control character")
    } else if reference.len() > 200 {
        Some("it is longer than 200 bytes")
    } else {
        None
    }
}

#[derive(Deserialize)]
struct ReferenceOnly {
    reference_payment: String,
}

#[derive(Deserialize)]
struct Envelope {
    data: Vec<ReferenceOnly>,
}

/// The payment references of a payments answer, in order, each once, each checked by
/// [`unsafe_reference`]. Other fields are skipped unread.
fn payment_references(body: &[u8]) -> Result<Vec<String>, PullError> {
    let bare = body
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'[');
    let records = if bare {
        serde_json::from_slice::<Vec<ReferenceOnly>>(crate::read::without_bom(body))
    } else {
        serde_json::from_slice::<Envelope>(crate::read::without_bom(body)).map(|e| e.data)
    }
    .map_err(|e| PullError::Payments(e.to_string()))?;
    let mut seen = HashSet::with_capacity(records.len());
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        if let Some(reason) = unsafe_reference(&r.reference_payment) {
            // Whole: the caller hides the token in it before it is shown, quoted and cut.
            return Err(PullError::UnsafeReference {
                reference: r.reference_payment,
                reason: reason.to_string(),
            });
        }
        if seen.insert(r.reference_payment.clone()) {
            out.push(r.reference_payment);
        }
    }
    Ok(out)
}

/// The fuzzer's way in (`crate::fuzzing::upstream`): an upstream answer through every parse
/// `pull` makes of one. Re-indenting valid JSON gives back the same value.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn fuzz_upstream(body: &[u8]) {
    if let Ok(references) = payment_references(body) {
        assert!(references.iter().all(|r| unsafe_reference(r).is_none()));
    }
    for endpoint in &api::API {
        let _ = count_records(endpoint, body);
    }
    let body = crate::read::without_bom(body);
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
        let mut out = Vec::new();
        reindent(body, &mut out);
        let again: serde_json::Value =
            serde_json::from_slice(&out).expect("re-indented JSON is JSON");
        assert_eq!(again, value, "re-indenting keeps the value");
    }
}

/// `text` with every occurrence of `token` (trimmed) replaced by its hint: server-provided text
/// (an error body, a `Location`, a reference, a loader's problem) may echo the token.
pub(crate) fn hide_token(text: &str, token: &str) -> String {
    let token = token.trim();
    if token.is_empty() {
        return text.to_string();
    }
    text.replace(token, &token_hint(token))
}

/// The records an answer holds, for the summary (as its table entry counts them).
fn count_records(endpoint: &api::Endpoint, body: &[u8]) -> Option<usize> {
    let api::Pull::List { count, .. } = endpoint.pull else {
        return None;
    };
    count(&serde_json::from_slice(crate::read::without_bom(body)).ok()?)
}

/// An answer as its file holds it: its bytes as received, or re-indented with `--pretty`
/// (numbers keep their text).
fn rendered<'a>(
    body: &'a [u8],
    pretty: bool,
    endpoint: &str,
) -> Result<std::borrow::Cow<'a, [u8]>, PullError> {
    if !pretty {
        return Ok(std::borrow::Cow::Borrowed(body));
    }
    // Checked without building a tree (a 100 MB body would take ten times that as a
    // `Value`), then re-indented token by token; a byte-order mark is not kept.
    let body = crate::read::without_bom(body);
    serde_json::from_slice::<serde::de::IgnoredAny>(body).map_err(|e| PullError::NotJson {
        endpoint: endpoint.to_string(),
        reason: e.to_string(),
    })?;
    let mut text = Vec::with_capacity(body.len() + body.len() / 4);
    reindent(body, &mut text);
    text.push(b'\n');
    Ok(std::borrow::Cow::Owned(text))
}

/// Re-indents valid JSON as `serde_json`'s pretty printer does (two spaces, `"key": value`,
/// `[]` and `{}` for empty containers; a test holds the two equal), copying every string and
/// number exactly as received. A streaming pass over the bytes: no tree is built.
fn reindent(json: &[u8], out: &mut Vec<u8>) {
    fn newline(out: &mut Vec<u8>, depth: usize) {
        out.push(b'\n');
        out.extend(std::iter::repeat_n(b' ', depth * 2));
    }
    let next_token = |from: usize| {
        json[from..]
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .map(|p| from + p)
    };
    let mut depth = 0usize;
    let mut i = 0;
    while i < json.len() {
        let b = json[i];
        match b {
            b'"' => {
                // A string, escapes included, copied whole.
                let start = i;
                i += 1;
                while i < json.len() && json[i] != b'"' {
                    i += if json[i] == b'\\' { 2 } else { 1 };
                }
                out.extend_from_slice(&json[start..(i + 1).min(json.len())]);
            }
            b'{' | b'[' => {
                let close = if b == b'{' { b'}' } else { b']' };
                match next_token(i + 1) {
                    Some(j) if json[j] == close => {
                        out.extend_from_slice(&[b, close]);
                        i = j;
                    }
                    _ => {
                        out.push(b);
                        depth += 1;
                        newline(out, depth);
                    }
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(out, depth);
                out.push(b);
            }
            b',' => {
                out.push(b',');
                newline(out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            _ if b.is_ascii_whitespace() => {}
            _ => out.push(b),
        }
        i += 1;
    }
}

/// A refresh replaces what it pulls and nothing else: whatever the bundle in place holds that
/// the plan does not write (`company_events.json` pulled with `--app`, which a refresh never
/// asks for; hand-written `custom_*.json`; hidden files such as `.notes`; folders such as
/// `backups/`) is linked into the staging folder, folders file by file. The loader ignores
/// the hidden ones and the folders, but they are the operator's: a refresh dropped them.
fn keep_unpulled(old: &Path, staging: &Path, plan: &Plan) -> Result<(), PullError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PullError::Io { path, source }
    };
    // A file's JSON or TOML form (a hand-written `event.toml` would clash with the `event.json`
    // pulled); `event.bak` or `payments.old/` are the operator's.
    let pulled = |name: &str| {
        let file = |key: &str| name == format!("{key}.json") || name == format!("{key}.toml");
        name == stage::BUNDLE_FILE
            || plan.lists.iter().any(|(e, _)| file(e.key))
            || plan.per_payment.is_some_and(|(e, _)| name == e.key)
    };
    for entry in std::fs::read_dir(old).map_err(io(old))? {
        let entry = entry.map_err(io(old))?;
        let name = entry.file_name();
        if name.to_str().is_some_and(pulled) {
            continue;
        }
        link_tree(&entry.path(), &staging.join(&name));
    }
    Ok(())
}

/// Puts `from` at `to` without copying data where the file system allows: a file is hard
/// linked (copied where links are not possible), a folder made anew with its entries linked
/// the same way, a symbolic link made again pointing where it did (on unix). What cannot be
/// carried over (a file the server may neither link nor read, a socket or a pipe, which are
/// never read) is left behind with a warning: the operator's own files never fail a refresh.
fn link_tree(from: &Path, to: &Path) {
    let carried = (|| -> std::io::Result<bool> {
        let kind = std::fs::symlink_metadata(from)?.file_type();
        if kind.is_dir() {
            std::fs::create_dir(to)?;
            for entry in std::fs::read_dir(from)? {
                let entry = entry?;
                link_tree(&entry.path(), &to.join(entry.file_name()));
            }
            Ok(true)
        } else if kind.is_symlink() {
            symlink(&std::fs::read_link(from)?, to)
        } else if kind.is_file() {
            std::fs::hard_link(from, to).or_else(|_| std::fs::copy(from, to).map(|_| ()))?;
            Ok(true)
        } else {
            Ok(false)
        }
    })();
    match carried {
        Ok(true) => {}
        Ok(false) => tracing::warn!(
            "the refresh leaves {} behind: not a file, a folder or a link",
            from.display()
        ),
        Err(e) => tracing::warn!("the refresh leaves {} behind: {e}", from.display()),
    }
}

/// Makes a symbolic link; `Ok(false)` where links are not made (Windows needs a privilege).
fn symlink(target: &Path, at: &Path) -> std::io::Result<bool> {
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(target, at)?;
        Ok(true)
    }
    #[cfg(not(unix))]
    {
        let _ = (target, at);
        Ok(false)
    }
}

/// Before a refresh's swap: when the bundle.toml in place is no longer the text the refresh
/// read (the operator revoked a token meanwhile), the staged one becomes that text, so the
/// swap never brings back what the edit took out.
fn keep_edited_bundle_toml(old: &Path, staged: &Path, read: &str) -> Result<(), PullError> {
    let live = old.join(stage::BUNDLE_FILE);
    let now = std::fs::read(&live).map_err(|source| PullError::Io {
        path: live.clone(),
        source,
    })?;
    if now == read.as_bytes() {
        return Ok(());
    }
    let io = |source| PullError::Io {
        path: staged.to_path_buf(),
        source,
    };
    std::fs::remove_file(staged).map_err(io)?;
    stage::write_private(staged, &now).map_err(io)
}

/// Fetches every payment's detail with `opts.concurrency` workers, writing each file as it
/// comes; also the references the source has no detail for (a 404, or an empty list), which
/// get no file, and in a refresh those it could not give (an earlier copy is kept: one detail
/// of thousands failing twice on a flaky link failed the whole refresh, every period). The
/// first other error stops the others.
async fn fetch_details(
    fetcher: &Arc<Fetcher>,
    progress: &Arc<Progress>,
    (key, path, url): (&'static str, &'static str, &str),
    references: Vec<String>,
    staging: &Path,
    opts: &PullOptions,
    conditional: &Arc<Conditional>,
) -> Result<(EndpointSummary, Details), PullError> {
    let dir = staging.join(key);
    std::fs::create_dir(&dir)
        .and_then(|()| stage::private_folder(&dir))
        .map_err(|source| PullError::Io {
            path: dir.clone(),
            source,
        })?;
    let total = references.len();
    progress.details_start(total);
    let references = Arc::new(references);
    let next = Arc::new(AtomicUsize::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let lost = Arc::new(std::sync::Mutex::new(Vec::new()));
    let stale = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..opts.concurrency.min(total) {
        let (fetcher, progress, references, next, bytes, conditional, lost, stale) = (
            Arc::clone(fetcher),
            Arc::clone(progress),
            Arc::clone(&references),
            Arc::clone(&next),
            Arc::clone(&bytes),
            Arc::clone(conditional),
            Arc::clone(&lost),
            Arc::clone(&stale),
        );
        // A detail the source has none of: no file; the bundle changed if it had one.
        let none = {
            let conditional = Arc::clone(&conditional);
            move |reference: &String, old: &Path| {
                if old.is_file() {
                    conditional.changed.store(true, Ordering::Relaxed);
                }
                lost.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(reference.clone());
            }
        };
        let (url, dir, pretty) = (url.to_string(), dir.clone(), opts.pretty);
        let what = path.trim_end_matches('/');
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(reference) = references.get(i) else {
                    return Ok::<(), PullError>(());
                };
                // `reference` passed `unsafe_reference`: it is one plain file name.
                let path = dir.join(format!("{reference}.json"));
                let old = conditional.old.join(key).join(format!("{reference}.json"));
                let tag_key = etag_key(key, Some(reference));
                let got = fetcher
                    .get_if(
                        &url,
                        Some(reference),
                        conditional.tag(&tag_key, &old),
                        &progress,
                    )
                    .await;
                let got = match got {
                    // No detail at the source (a 404 in the platform's own shape): none is
                    // written, and it is made from the payment when served (bundles.md), as
                    // for any payment without a file.
                    Ok(got) if got.not_found.is_some() => {
                        none(reference, &old);
                        progress.detail_done();
                        continue;
                    }
                    Ok(got) => got,
                    // Its earlier copy is kept (none: the detail is made from the payment), and
                    // its tag is not, so the next refresh asks for it whole.
                    Err(PullError::GaveUp { .. }) if conditional.refreshing => {
                        if old.is_file() {
                            conditional.keep(old, path, &url);
                        }
                        stale
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(reference.clone());
                        progress.detail_done();
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                conditional.saw(tag_key, &got);
                match &got.body {
                    Some(body) => {
                        let text = rendered(body, pretty, what)?;
                        conditional.stage(&old, &path, &text, &url)?;
                        bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                    }
                    None => conditional.keep(old, path, &url),
                }
                progress.detail_done();
            }
        });
    }
    while let Some(joined) = workers.join_next().await {
        let failure = match joined {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            Err(e) => PullError::Worker(e.to_string()),
        };
        // Stop the others and wait until they are gone, so none writes after the staging folder
        // is removed. Their file writes are synchronous, so none is left half-way.
        workers.abort_all();
        while workers.join_next().await.is_some() {}
        progress.finish();
        return Err(failure);
    }
    progress.details_end();
    let taken = |list: &std::sync::Mutex<Vec<String>>| {
        let mut list = std::mem::take(
            &mut *list
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        list.sort();
        list
    };
    let (lost, stale) = (taken(&lost), taken(&stale));
    Ok((
        EndpointSummary {
            name: key,
            records: Some(total - lost.len()),
            bytes: bytes.load(Ordering::Relaxed),
        },
        Details { lost, stale },
    ))
}

/// The references of [`fetch_details`] that got no fresh file.
#[derive(Debug, Default)]
struct Details {
    /// The source has no detail for them: no file.
    lost: Vec<String>,
    /// A refresh could not get them: their earlier copy is kept, if any.
    stale: Vec<String>,
}

/// The summary's warning about `references`: `what` before the count, `then` after the list.
fn references_warning(
    references: &[String],
    token: &str,
    what: &str,
    then: &str,
) -> Option<String> {
    const SHOWN: usize = 5;
    if references.is_empty() {
        return None;
    }
    let shown: Vec<String> = references
        .iter()
        .take(SHOWN)
        .map(|r| quoted(&hide_token(r, token)))
        .collect();
    Some(format!(
        "{what} {} payment{} ({}{}): {then}",
        references.len(),
        if references.len() == 1 { "" } else { "s" },
        shown.join(", "),
        if references.len() > SHOWN {
            ", …"
        } else {
            ""
        }
    ))
}

/// Loads the staged folder with the loader `check` and `serve` use. Errors refuse the swap;
/// warnings are returned for the summary.
async fn check_staged(
    dir: &Path,
    target: &Path,
    name: &str,
    token: &str,
    max_file_bytes: u64,
) -> Result<Vec<String>, PullError> {
    let (staged, name) = (dir.to_path_buf(), name.to_string());
    let report = tokio::task::spawn_blocking(move || {
        load::load_bundle_capped(&staged, &name, max_file_bytes)
    })
    .await
    .map_err(|e| PullError::Worker(e.to_string()))?;
    // Named where they will be (`data/summit/event.json`), not in the staging folder, whose
    // name changes each time.
    let shown = |p: &crate::problem::Problem| {
        let mut p = p.clone();
        if let Ok(rel) = p.file.strip_prefix(dir) {
            p.file = target.join(rel);
        }
        hide_token(&p.to_string(), token)
    };
    let errors: Vec<String> = report.errors().map(shown).collect();
    if !errors.is_empty() {
        const SHOWN: usize = 10;
        return Err(PullError::Check {
            more: errors.len().saturating_sub(SHOWN),
            problems: errors.into_iter().take(SHOWN).collect(),
        });
    }
    Ok(report.warnings().map(shown).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token revoked in the bundle.toml in place while a refresh ran stays revoked: the
    /// staged bundle.toml (written from what the refresh read at its start) gives way to the
    /// text in place, readable by its owner only. Unedited, the staged one is kept.
    #[test]
    fn an_edit_of_bundle_toml_during_a_refresh_wins_over_the_staged_one() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (old, staging) = (tmp.path().join("old"), tmp.path().join("staging"));
        std::fs::create_dir_all(&old).expect("mkdir");
        std::fs::create_dir_all(&staging).expect("mkdir");
        let read = "tokens = [\"kept\", \"leaked\"]\n";
        let staged = staging.join(stage::BUNDLE_FILE);
        let written = "tokens = [\"kept\", \"leaked\"]\n[source]\nurl = \"https://x\"\n";

        std::fs::write(old.join(stage::BUNDLE_FILE), read).expect("write");
        stage::write_private(&staged, written.as_bytes()).expect("write");
        keep_edited_bundle_toml(&old, &staged, read).expect("kept");
        assert_eq!(
            std::fs::read_to_string(&staged).ok().as_deref(),
            Some(written)
        );

        let revoked = "tokens = [\"kept\"]\n";
        std::fs::write(old.join(stage::BUNDLE_FILE), revoked).expect("write");
        keep_edited_bundle_toml(&old, &staged, read).expect("kept");
        assert_eq!(
            std::fs::read_to_string(&staged).ok().as_deref(),
            Some(revoked)
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&staged)
                .expect("staged")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    /// An answer opening with a byte-order mark (read as JSON, as the endpoints read one) is
    /// re-indented without it: the mark was read as a token and the file was not JSON.
    #[test]
    fn a_byte_order_mark_is_dropped_when_pretty_printing() {
        let got = rendered(b"\xEF\xBB\xBF{\"a\": [1]}", true, "event").expect("JSON");
        assert_eq!(&got[..], b"{\n  \"a\": [\n    1\n  ]\n}\n");
    }

    #[test]
    fn reindenting_gives_what_serde_json_pretty_prints() {
        let text = r#" {"data": [ {"a": 10.00, "b": [], "c": {}, "d": "x{[\"],:y\\", "e": [1, [2, {}]],
            "f": null, "g": true, "h": -1.5e+3, "i": "Conceição"} ], "count": 1, "z": [ ] } "#;
        let value: serde_json::Value = serde_json::from_str(text).expect("valid JSON");
        let expected = serde_json::to_vec_pretty(&value).expect("serialisable");

        let mut got = Vec::new();
        reindent(text.as_bytes(), &mut got);

        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&expected)
        );
        // Where serde would decode an escape and write it anew, the text stays as received.
        let mut kept = Vec::new();
        reindent(br#"{"i":"\u00e9"}"#, &mut kept);
        assert_eq!(kept, b"{\n  \"i\": \"\\u00e9\"\n}".to_vec());
    }

    /// A source without `ETag`s: an answer equal to the earlier copy is kept as a 304 would
    /// be (linked, not rewritten) and does not count as new; one that differs does.
    #[test]
    fn an_answer_equal_to_the_earlier_copy_is_kept_and_is_no_change() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let old = dir.path().join("old.json");
        std::fs::write(&old, b"{\"data\":[1]}").expect("written");
        let staged = Conditional::default();
        staged
            .stage(&old, &dir.path().join("a.json"), b"{\"data\":[1]}", "u")
            .expect("kept");
        assert!(!staged.changed.load(Ordering::Relaxed));
        assert!(
            !dir.path().join("a.json").exists(),
            "linked at the swap only"
        );
        staged.link_kept().expect("linked");
        assert_eq!(
            std::fs::read(dir.path().join("a.json")).expect("linked"),
            b"{\"data\":[1]}".to_vec()
        );
        staged
            .stage(&old, &dir.path().join("b.json"), b"{\"data\":[2]}", "u")
            .expect("written");
        assert!(staged.changed.load(Ordering::Relaxed));
    }

    #[test]
    fn an_answer_never_overwrites_a_file_already_written() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("AB.json");

        let staged = Conditional::default();
        let old = dir.path().join("missing.json");
        staged
            .stage(&old, &path, b"{\"first\":1}", "u")
            .expect("written");
        let again = staged.stage(&old, &path, b"{\"second\":2}", "u");

        assert!(matches!(again, Err(PullError::Io { .. })), "{again:?}");
        assert_eq!(
            std::fs::read(&path).expect("readable"),
            b"{\"first\":1}".to_vec()
        );
    }

    #[test]
    fn the_base_accepts_an_origin_or_the_api_base() {
        for (from, base) in [
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080/api/v1"),
            ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/api/v1"),
            ("https://host/api/v1", "https://host/api/v1"),
            ("https://host/API/V1/", "https://host/API/V1"),
            (
                "https://host/proxy/api/v1?x=1#f",
                "https://host/proxy/api/v1",
            ),
            ("https://host/proxy", "https://host/proxy/api/v1"),
        ] {
            assert_eq!(api_base(from).expect(from), base, "{from}");
        }
        for from in ["ftp://host", "not a url", "https://user:pw@host/api/v1"] {
            assert!(api_base(from).is_err(), "{from}");
        }
        let refused = api_base("https://user:s3cret@host/api/v1")
            .expect_err("credentials are refused")
            .to_string();
        assert!(!refused.contains("s3cret"), "{refused}");
    }

    #[test]
    fn references_that_could_steer_a_path_are_refused() {
        for bad in [
            "", "../x", "a/b", "a\\b", "..", "x..y", ".hidden", "a\0b", "a\nb", "a\u{7f}b",
        ] {
            assert!(unsafe_reference(bad).is_some(), "{bad:?} was accepted");
        }
        assert!(unsafe_reference(&"x".repeat(201)).is_some());
        for good in ["PG2026000104", "R-001", "ção.1", "a b"] {
            assert_eq!(unsafe_reference(good), None, "{good:?}");
        }
    }

    #[test]
    fn references_come_from_the_envelope_or_a_bare_list_once_each() {
        let body = br#"{"data": [{"reference_payment": "A", "x": 1.50}, {"reference_payment": "B"}, {"reference_payment": "A"}], "count": 3}"#;
        assert_eq!(payment_references(body).expect("valid"), vec!["A", "B"]);
        let bare = br#" [{"reference_payment": "C"}]"#;
        assert_eq!(payment_references(bare).expect("valid"), vec!["C"]);
        let evil = br#"{"data": [{"reference_payment": "../../etc/passwd"}]}"#;
        let err = payment_references(evil).expect_err("refused");
        assert!(
            err.to_string()
                .contains("\"../../etc/passwd\" cannot name a detail file"),
            "{err}"
        );
    }

    #[test]
    fn a_token_debug_shows_a_hint_only() {
        let t = Token::new("secret-token-value");
        assert_eq!(format!("{t:?}"), "Token(secr…)");
    }
}
