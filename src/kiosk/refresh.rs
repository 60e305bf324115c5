//! `serve --refresh-every`: every bundle whose bundle.toml names a `[source]` is pulled again on
//! that period, each on its own timer (jittered by ±10 %), at most [`AT_ONCE`] at a time. A
//! refresh is a conditional `pull` over the bundle in place (`If-None-Match` with the tags of the
//! previous refresh; a 304 reuses the file): staged, checked, swapped in whole, then read again
//! through the normal reload. A refresh answered 304 throughout writes nothing and only marks
//! the snapshot as confirmed. A failure leaves the bundle as it was; after `--offline-after` in
//! a row the source is offline, retried with a backoff doubling from an eighth of the period up
//! to the period, and online again after one success. Each change of state is logged once.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::{SourceHealth, Sources, Transition};
use crate::catalog::Scope;
use crate::metrics::Metrics;
use crate::pull::{self, ProgressMode, PullOptions};
use crate::reload::Reloader;
use crate::token::Token;

/// Refreshes running at once, across bundles.
pub(crate) const AT_ONCE: usize = 2;

/// How the refresher runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RefreshOptions {
    pub(crate) every: Duration,
    pub(crate) offline_after: u32,
    /// The server's `--max-file-bytes`: a refreshed copy the server would refuse is not swapped
    /// in.
    pub(crate) max_file_bytes: u64,
}

/// What every bundle's refresh loop shares.
#[derive(Debug)]
struct Shared {
    options: RefreshOptions,
    reloader: Arc<Reloader>,
    sources: Arc<Sources>,
    metrics: Arc<Metrics>,
    at_once: Semaphore,
}

/// The running refresher; dropping it stops every refresh loop (a pull in progress is
/// cancelled, its staging folder removed, the bundle left as it was).
#[derive(Debug)]
pub struct Refresher {
    task: tokio::task::JoinHandle<()>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Refresher {
    /// Stops every refresh loop and waits until they are gone: a pull cut short has removed
    /// its staging folder when this returns.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for Refresher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts following the sources of the bundles loaded (and of those that appear later). Needs
/// a tokio runtime.
pub(crate) fn spawn(
    options: RefreshOptions,
    reloader: Arc<Reloader>,
    sources: Arc<Sources>,
    metrics: Arc<Metrics>,
) -> Refresher {
    let shared = Arc::new(Shared {
        options,
        reloader,
        sources,
        metrics,
        at_once: Semaphore::new(AT_ONCE),
    });
    let (stop, stopped) = tokio::sync::oneshot::channel();
    Refresher {
        task: tokio::spawn(supervise(shared, stopped)),
        stop: Some(stop),
    }
}

/// Once a period: starts a loop for each bundle that names a source and has none, stops the
/// loops of bundles gone or no longer naming one.
async fn supervise(shared: Arc<Shared>, mut stopped: tokio::sync::oneshot::Receiver<()>) {
    let mut loops = JoinSet::new();
    // Per bundle followed, its loop and the health it keeps.
    let mut running: HashMap<String, (tokio::task::AbortHandle, Arc<SourceHealth>)> =
        HashMap::new();
    // A bundle that names its source again is followed at its reload, not a period later.
    let mut published = shared.reloader.published();
    let mut first = true;
    loop {
        let (reloader, sources) = (Arc::clone(&shared.reloader), Arc::clone(&shared.sources));
        let wanted = tokio::task::spawn_blocking(move || followed(&reloader, &sources))
            .await
            .unwrap_or_default();
        if std::mem::take(&mut first) {
            // Said here, once the bundles not served yet (a desk set up with bundle.toml alone)
            // are counted: the start, before this pass, saw only those served.
            let none = match wanted.len() {
                0 => " (none names one yet: one that does is followed once it loads)",
                _ => "",
            };
            tracing::info!(
                every = %humantime::format_duration(shared.options.every),
                offline_after = shared.options.offline_after,
                sources = wanted.len(),
                "following the sources bundles name{none}"
            );
        }
        // Gone, or its health made anew (it names another URL now): the loop keeping the old
        // one stops, and one keeping the new one starts below.
        let gone: Vec<String> = running
            .iter()
            .filter(|(n, (_, health))| {
                !wanted.contains_key(*n)
                    || shared
                        .sources
                        .get(n)
                        .is_some_and(|now| !Arc::ptr_eq(&now, health))
            })
            .map(|(n, _)| n.clone())
            .collect();
        let mut changed = !gone.is_empty();
        for name in gone {
            if let Some((handle, health)) = running.remove(&name) {
                handle.abort();
                health.set_followed(false);
            }
            shared.metrics.forget_upstream(&name);
        }
        for (name, dir) in wanted {
            if running.contains_key(&name) {
                continue;
            }
            let Some(health) = shared.sources.get(&name) else {
                continue;
            };
            health.set_followed(true);
            changed = true;
            let handle = loops.spawn(follow(
                name.clone(),
                dir,
                Arc::clone(&health),
                Arc::clone(&shared),
            ));
            running.insert(name, (handle, health));
        }
        // /status shows who is followed now, not only after the next refresh.
        if changed {
            let reloader = Arc::clone(&shared.reloader);
            let _ = tokio::task::spawn_blocking(move || reloader.republish()).await;
        }
        // Reap loops that ended (they do not, but a panic must not be kept).
        while loops.try_join_next().is_some() {}
        tokio::select! {
            () = tokio::time::sleep(shared.options.every) => {}
            () = super::changed(&mut published) => {}
            _ = &mut stopped => {
                loops.shutdown().await;
                return;
            }
        }
    }
}

/// The bundles to follow, by name: those serving a version that names a source, and those not
/// served whose bundle.toml names one (a kiosk set up with a bundle.toml alone, or a bundle
/// whose files broke: a refresh may mend it). Blocking: the catalog's lock, small reads.
fn followed(reloader: &Reloader, sources: &Sources) -> HashMap<String, PathBuf> {
    let listed: Vec<(String, PathBuf, bool)> = reloader.with_catalog(|c| {
        c.entries()
            .map(|e| {
                let serving_source = e
                    .serving
                    .as_ref()
                    .is_some_and(|v| v.prepared.source.is_some());
                (e.name.clone(), e.dir.clone(), serving_source)
            })
            .filter(|(_, _, serving_source)| *serving_source)
            .chain(
                c.entries()
                    .filter(|e| e.serving.is_none())
                    .map(|e| (e.name.clone(), e.dir.clone(), false)),
            )
            .collect()
    });
    let mut out = HashMap::new();
    for (name, dir, serving_source) in listed {
        if !serving_source {
            // Not served: does its bundle.toml name a valid source?
            let Some(url) = named_source(&dir) else {
                continue;
            };
            if sources.get(&name).is_none() {
                sources.loaded(
                    &name,
                    &crate::model::Source {
                        url,
                        pulled_at: None,
                    },
                );
            }
        }
        out.insert(name, dir);
    }
    out
}

/// The `[source] url` a bundle.toml names, when it is a URL a pull may use.
pub(crate) fn named_source(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(crate::stage::BUNDLE_FILE)).ok()?;
    let table: toml::Table = toml::from_str(&text).ok()?;
    let url = table.get("source")?.get("url")?.as_str()?;
    crate::model::source_url_problem(url)
        .is_none()
        .then(|| url.trim().to_string())
}

/// A draw in [0, 1), different in every process and every call (the clock and a counter,
/// mixed): jitter, not secrets.
fn draw() -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = CALLS.fetch_add(crate::rng::GOLDEN, Ordering::Relaxed);
    let mut rng = crate::rng::Rng::new(clock ^ n ^ u64::from(std::process::id()));
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// `d` changed by up to ±10 %, drawn anew each time, so kiosks started together spread out.
fn jittered(d: Duration) -> Duration {
    d.mul_f64(0.9 + 0.2 * draw())
}

/// The wait before the next try while offline: from an eighth of the period, doubling, capped
/// at the period. `failures` counts the tries failed in a row since going offline began.
fn backoff(every: Duration, failures_offline: u32) -> Duration {
    let first = every / 8;
    let factor = 1u32 << failures_offline.min(3);
    (first * factor).min(every)
}

/// One bundle's refresh loop.
async fn follow(name: String, dir: PathBuf, health: Arc<SourceHealth>, shared: Arc<Shared>) {
    let every = shared.options.every;
    let offline_after = shared.options.offline_after;
    let mut etags: Arc<HashMap<String, String>> = Arc::default();
    // The last refresh's warnings (details the source has none of, or did not give), logged
    // when they change.
    let mut warned: Vec<String> = Vec::new();
    // The first refresh comes soon after start (within a tenth of the period, spread), then on
    // the period.
    let mut wait = every.mul_f64(draw() / 10.0);
    loop {
        tokio::time::sleep(wait).await;
        // A 304 keeps the local file: trusted only while the bundle's data files load cleanly.
        // A file broken here would otherwise stay, and fail every refresh once anything else
        // changes at the source; with errors in a data file, every file is asked for anew.
        // (Not for errors a download cannot mend: bundle.toml's, kept by the refresh, or a
        // token clash.)
        let reloader = Arc::clone(&shared.reloader);
        let bundle = name.clone();
        let broken = tokio::task::spawn_blocking(move || {
            reloader.with_catalog(|c| {
                c.entry(&bundle).is_some_and(|e| {
                    e.problems.iter().any(|p| {
                        p.is_error()
                            && p.file.file_name()
                                != Some(std::ffi::OsStr::new(crate::stage::BUNDLE_FILE))
                    })
                })
            })
        })
        .await
        .unwrap_or(false);
        if broken && !etags.is_empty() {
            etags = Arc::default();
        }
        let outcome = {
            let _permit = shared.at_once.acquire().await;
            let started = chrono::Utc::now();
            let result = refresh_once(&name, &dir, &etags, &shared).await;
            (started, result)
        };
        let (started, result) = outcome;
        let transition = match result {
            Ok(Refreshed {
                tags,
                unchanged,
                warnings,
                stale,
            }) => {
                etags = Arc::new(tags);
                if warnings != warned {
                    for w in &warnings {
                        tracing::warn!(bundle = %name, "refresh: {w}");
                    }
                    warned = warnings;
                }
                // A copy with details the source did not give is not wholly current: its age
                // goes on.
                if unchanged && !stale {
                    health.confirmed(started);
                }
                wait = jittered(every);
                health.succeeded(started)
            }
            Err((error, staged_broken)) => {
                // Nor after a staged copy failed its check (a kept file may be the cause): the
                // next refresh asks for every file anew. Other failures keep them.
                if staged_broken {
                    etags = Arc::default();
                }
                let t = health.failed(started, error.clone(), offline_after);
                wait = if health.is_offline() {
                    backoff(every, health.failures().saturating_sub(offline_after))
                } else {
                    jittered(every)
                };
                if t.is_none() {
                    tracing::debug!(bundle = %name, %error, "refresh failed");
                }
                t
            }
        };
        match transition {
            Some(Transition::WentOffline) => {
                let status = health.status(chrono::Utc::now());
                tracing::warn!(
                    bundle = %name,
                    source = %status.url,
                    error = status.last_error.as_deref().unwrap_or(""),
                    failures = status.failures_in_a_row,
                    "source offline; still serving the snapshot pulled at {}",
                    status.pulled_at.as_deref().unwrap_or("an unknown time")
                );
            }
            Some(Transition::CameOnline) => {
                tracing::info!(bundle = %name, "source back online");
            }
            None => {}
        }
        shared.metrics.set_upstream(&name, health.is_online());
        // /status shows the attempt.
        let reloader = Arc::clone(&shared.reloader);
        let _ = tokio::task::spawn_blocking(move || reloader.republish()).await;
    }
}

/// What a successful refresh did.
struct Refreshed {
    tags: HashMap<String, String>,
    unchanged: bool,
    warnings: Vec<String>,
    /// Some details could not be got: their earlier copies were kept.
    stale: bool,
}

/// One refresh: read bundle.toml for the source, the tokens and the keys to keep; pull over
/// the bundle; reload it when it changed. The error is one line for `/status` and the log,
/// never holding the token whole, with whether the staged copy failed its check.
async fn refresh_once(
    name: &str,
    dir: &Path,
    etags: &Arc<HashMap<String, String>>,
    shared: &Shared,
) -> Result<Refreshed, (String, bool)> {
    refresh_pulled(name, dir, etags, shared)
        .await
        .map_err(|e| match e {
            Failed::Pull(e @ pull::PullError::Check { .. }) => (e.to_string(), true),
            // `pull`'s own words name its --token; here the token is bundle.toml's.
            Failed::Pull(pull::PullError::TokenRefused { url, hint }) => (
                format!(
                    "the source refused the token {hint} (401) at {url}: check the first token \
                     of {}",
                    dir.join(crate::stage::BUNDLE_FILE).display()
                ),
                false,
            ),
            Failed::Pull(e) => (e.to_string(), false),
            Failed::Other(e) => (e, false),
        })
}

/// Why a refresh failed: the pull's own error, or another step's.
enum Failed {
    Pull(pull::PullError),
    Other(String),
}

impl From<String> for Failed {
    fn from(e: String) -> Failed {
        Failed::Other(e)
    }
}

async fn refresh_pulled(
    name: &str,
    dir: &Path,
    etags: &Arc<HashMap<String, String>>,
    shared: &Shared,
) -> Result<Refreshed, Failed> {
    let toml_path = dir.join(crate::stage::BUNDLE_FILE);
    // A small file, read off the async threads.
    let path = toml_path.clone();
    let text = tokio::task::spawn_blocking(move || std::fs::read_to_string(path))
        .await
        .map_err(|e| format!("cannot read {}: {e}", toml_path.display()))?
        .map_err(|e| format!("cannot read {}: {e}", toml_path.display()))?;
    let mut table: toml::Table = toml::from_str(&text)
        .map_err(|e| format!("{}: not valid TOML: {}", toml_path.display(), e.message()))?;
    // The first token is the one sent; bundle.toml is kept as it is (`model::with_pulled_at`).
    let tokens: Vec<Token> = match table.remove("tokens") {
        Some(toml::Value::Array(items)) => items
            .iter()
            .filter_map(|t| t.as_str().map(Token::new))
            .collect(),
        _ => Vec::new(),
    };
    let url = table
        .remove("source")
        .and_then(|s| s.get("url").and_then(|u| u.as_str()).map(str::to_string))
        .ok_or_else(|| format!("{} names no [source] url", toml_path.display()))?;
    let token = tokens
        .first()
        .ok_or_else(|| format!("{} names no token", toml_path.display()))?;
    let every = shared.options.every;
    // Without the company's key, though bundle.toml may name it (`app_keys`, which `pull --app`
    // writes): the list `pull --app` copied is kept as it is, and a key the company changed
    // since never fails the refresh of the event's own data.
    let mut opts = PullOptions::new(url, token.expose(), dir);
    opts.progress = ProgressMode::Quiet;
    opts.concurrency = 4;
    // A try and one retry within the refresh; the next period tries again anyway.
    opts.retries = 1;
    opts.timeout = every.clamp(Duration::from_secs(1), Duration::from_secs(60));
    opts.connect_timeout = opts.timeout.min(Duration::from_secs(10));
    opts.backoff = (every / 4).min(Duration::from_millis(250));
    opts.max_retry_wait = every.min(Duration::from_secs(30));
    opts.refresh = Some(pull::Refresh {
        etags: Arc::clone(etags),
        read: text,
    });
    opts.max_file_bytes = shared.options.max_file_bytes;
    let summary = pull::run(&opts).await.map_err(Failed::Pull)?;
    if !summary.unchanged {
        let reloader = Arc::clone(&shared.reloader);
        let scope = Scope::Bundles(BTreeSet::from([name.to_string()]));
        tokio::task::spawn_blocking(move || reloader.reload(&scope))
            .await
            .map_err(|e| format!("the reload stopped: {e}"))?
            .map_err(|e| format!("the reload failed: {e}"))?;
    }
    Ok(Refreshed {
        tags: summary.etags,
        unchanged: summary.unchanged,
        warnings: summary.warnings,
        stale: summary.stale > 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_ten_per_cent_and_backoff_doubles_to_the_period() {
        let every = Duration::from_secs(10);
        for _ in 0..200 {
            let d = jittered(every);
            assert!(
                d >= Duration::from_secs(9) && d <= Duration::from_secs(11),
                "{d:?}"
            );
        }
        let waits: Vec<Duration> = (0..6).map(|n| backoff(every, n)).collect();
        assert_eq!(
            waits,
            [1250, 2500, 5000, 10_000, 10_000, 10_000].map(Duration::from_millis)
        );
    }
}
