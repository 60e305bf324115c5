//! Kiosk mode: bundles that remember their source (`[source]` in bundle.toml) and, with `serve
//! --refresh-every`, follow it (`refresh`), keep serving through its outages and say how old
//! what they serve is (`Age`, `Eventbox-Source: offline`). See docs/kiosk.md.
//!
//! `Sources` holds one `SourceHealth` per bundle that names a source, shared by everything
//! that asks about it: the prepared answers of each version of the bundle (the request path
//! reads two atomics for its headers), `/status` (made when a snapshot is published: the
//! refresher republishes after every attempt), the metrics (ages computed when scraped) and,
//! later, the write forwarder, which waits on `SourceHealth::changed` and asks
//! `SourceHealth::is_online`.

#[cfg(feature = "pull")]
pub(crate) mod forward;
#[cfg(feature = "pull")]
pub(crate) mod refresh;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

#[cfg(feature = "pull")]
pub use forward::Forwarder;
#[cfg(feature = "pull")]
pub use refresh::Refresher;

/// No time known (`fresh_at`).
const UNKNOWN: i64 = i64::MIN;

/// Whether a followed source answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum State {
    /// `--refresh-every` is off: the source is named, not followed.
    NotFollowed,
    /// Followed, no refresh finished yet.
    Pending,
    Online,
    /// `--offline-after` refreshes in a row failed; the last good snapshot is served.
    Offline,
}

/// What `/status` shows of a source besides its state.
#[derive(Debug, Clone)]
struct Detail {
    url: String,
    state: State,
    /// Failed refreshes in a row.
    failures: u32,
    last_success: Option<DateTime<Utc>>,
    last_attempt: Option<DateTime<Utc>>,
    last_error: Option<String>,
}

/// One bundle's source: its state, and since when its snapshot is known to be current.
#[derive(Debug)]
pub(crate) struct SourceHealth {
    offline: AtomicBool,
    /// Unix milliseconds: when the source last confirmed the snapshot (the `pulled_at` of the
    /// version loaded, or a refresh answered 304 throughout), [`UNKNOWN`] before.
    fresh_at: AtomicI64,
    detail: Mutex<Detail>,
    /// Woken on every change between online and offline.
    changed: tokio::sync::Notify,
}

/// A change of state a refresh caused, for the one log line it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transition {
    WentOffline,
    CameOnline,
}

impl SourceHealth {
    fn new(url: &str) -> SourceHealth {
        SourceHealth {
            offline: AtomicBool::new(false),
            fresh_at: AtomicI64::new(UNKNOWN),
            detail: Mutex::new(Detail {
                url: url.to_string(),
                state: State::NotFollowed,
                failures: 0,
                last_success: None,
                last_attempt: None,
                last_error: None,
            }),
            changed: tokio::sync::Notify::new(),
        }
    }

    fn detail(&self) -> std::sync::MutexGuard<'_, Detail> {
        self.detail.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the source is offline (answers then carry `Eventbox-Source: offline`).
    pub(crate) fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Relaxed)
    }

    /// Whether the source answered its last refresh (or none failed `--offline-after` times in
    /// a row yet). The write forwarder sends only while this holds.
    pub(crate) fn is_online(&self) -> bool {
        !self.is_offline()
    }

    /// Resolves on the next change between online and offline after it is made (or, when
    /// `enable`d first, after that).
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// The source's API base (`https://host/api/v1`).
    pub(crate) fn url(&self) -> String {
        self.detail().url.clone()
    }

    /// Whole seconds since the snapshot was last confirmed by the source, at `now`; `None`
    /// when unknown (a hand-written bundle never pulled).
    pub(crate) fn age_seconds(&self, now: DateTime<Utc>) -> Option<u64> {
        match self.fresh_at.load(Ordering::Relaxed) {
            UNKNOWN => None,
            at => Some(u64::try_from((now.timestamp_millis() - at) / 1000).unwrap_or(0)),
        }
    }

    /// The snapshot was confirmed current at `at` (never moves back).
    pub(crate) fn confirmed(&self, at: DateTime<Utc>) {
        self.fresh_at
            .fetch_max(at.timestamp_millis(), Ordering::Relaxed);
    }

    fn fresh_at(&self) -> Option<DateTime<Utc>> {
        match self.fresh_at.load(Ordering::Relaxed) {
            UNKNOWN => None,
            at => DateTime::from_timestamp_millis(at),
        }
    }

    /// The refresher starts following it (or stops).
    pub(crate) fn set_followed(&self, followed: bool) {
        let mut d = self.detail();
        d.state = match (followed, d.state) {
            (false, _) => State::NotFollowed,
            (true, State::NotFollowed) => State::Pending,
            (true, state) => state,
        };
        if !followed && self.offline.swap(false, Ordering::Relaxed) {
            self.changed.notify_waiters();
        }
    }

    /// A refresh started at `at` succeeded: online at once.
    pub(crate) fn succeeded(&self, at: DateTime<Utc>) -> Option<Transition> {
        let mut d = self.detail();
        d.failures = 0;
        d.last_attempt = Some(at);
        d.last_success = Some(at);
        d.last_error = None;
        let was = d.state;
        d.state = State::Online;
        drop(d);
        self.offline.store(false, Ordering::Relaxed);
        (was == State::Offline).then(|| {
            self.changed.notify_waiters();
            Transition::CameOnline
        })
    }

    /// A refresh started at `at` failed: offline once `offline_after` have failed in a row.
    /// The error is kept as one line (a load's report of a staged copy has one per problem).
    pub(crate) fn failed(
        &self,
        at: DateTime<Utc>,
        error: String,
        offline_after: u32,
    ) -> Option<Transition> {
        let mut d = self.detail();
        d.failures = d.failures.saturating_add(1);
        d.last_attempt = Some(at);
        d.last_error = Some(one_line(&error));
        if d.failures < offline_after.max(1) || d.state == State::Offline {
            return None;
        }
        d.state = State::Offline;
        drop(d);
        self.offline.store(true, Ordering::Relaxed);
        self.changed.notify_waiters();
        Some(Transition::WentOffline)
    }

    /// Failed refreshes in a row.
    pub(crate) fn failures(&self) -> u32 {
        self.detail().failures
    }

    /// `/status`'s `source` of a bundle, at `now`.
    pub(crate) fn status(&self, now: DateTime<Utc>) -> SourceStatus {
        let d = self.detail().clone();
        let time =
            |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true));
        SourceStatus {
            url: d.url,
            state: d.state,
            pulled_at: time(self.fresh_at()),
            age_seconds: self.age_seconds(now),
            last_success: time(d.last_success),
            last_attempt: time(d.last_attempt),
            last_error: d.last_error,
            failures_in_a_row: d.failures,
        }
    }
}

/// A bundle's source in `/status`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SourceStatus {
    url: String,
    state: State,
    /// When the source last confirmed the snapshot served.
    pulled_at: Option<String>,
    /// Seconds from `pulled_at` to when this status was made.
    age_seconds: Option<u64>,
    last_success: Option<String>,
    last_attempt: Option<String>,
    last_error: Option<String>,
    failures_in_a_row: u32,
}

/// Waits for `published` to change; for ever once its sender is gone.
pub(crate) async fn changed(published: &mut tokio::sync::watch::Receiver<u64>) {
    if published.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Every bundle's [`SourceHealth`], by bundle name.
#[derive(Debug, Default)]
pub(crate) struct Sources {
    by_name: Mutex<ByName>,
}

#[derive(Debug, Default)]
struct ByName {
    /// Of the bundles that name a source.
    named: HashMap<String, Arc<SourceHealth>>,
    /// Of those that named one before: taken back when the same source is named again, so the
    /// refresh loop that keeps it (and `/status`) go on as they were.
    forgotten: HashMap<String, Arc<SourceHealth>>,
}

impl Sources {
    fn map(&self) -> std::sync::MutexGuard<'_, ByName> {
        self.by_name.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A version of bundle `name` naming `source` was loaded: its health (made anew for a URL
    /// it did not name; the one it had for this URL, also after a while without a source), with
    /// its `pulled_at` taken as confirmed.
    pub(crate) fn loaded(&self, name: &str, source: &crate::model::Source) -> Arc<SourceHealth> {
        // The API base, as a pull makes it: bundle.toml keeps the url as written (an origin,
        // a trailing slash), and writes go to the base's paths.
        #[cfg(feature = "pull")]
        let url = crate::pull::api_base(&source.url).unwrap_or_else(|_| source.url.clone());
        // Without `pull` nothing is forwarded: the url is only shown.
        #[cfg(not(feature = "pull"))]
        let url = source.url.clone();
        let health = {
            let mut map = self.map();
            let same = |h: &Arc<SourceHealth>| h.detail().url == url;
            let back = map.forgotten.remove(name).filter(same);
            match map.named.get(name).filter(|h| same(h)) {
                Some(health) => Arc::clone(health),
                None => {
                    let health = back.unwrap_or_else(|| Arc::new(SourceHealth::new(&url)));
                    map.named.insert(name.to_string(), Arc::clone(&health));
                    health
                }
            }
        };
        if let Some(at) = source.pulled_at {
            health.confirmed(at);
        }
        health
    }

    /// Bundle `name` names no source any more, or is gone. Whether it named one until now.
    pub(crate) fn forget(&self, name: &str) -> bool {
        let mut map = self.map();
        match map.named.remove(name) {
            Some(health) => {
                map.forgotten.insert(name.to_string(), health);
                true
            }
            None => false,
        }
    }

    /// The health of bundle `name`'s source, if it names one.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<SourceHealth>> {
        self.map().named.get(name).cloned()
    }

    /// Every bundle's, in no order.
    pub(crate) fn all(&self) -> Vec<(String, Arc<SourceHealth>)> {
        self.map()
            .named
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect()
    }
}

/// `text` on one line: its lines trimmed, empty ones dropped, joined by "; " (by a space after
/// a line ending in `:`, which introduces what follows).
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !out.is_empty() {
            out.push_str(if out.ends_with(':') { " " } else { "; " });
        }
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_after_n_failures_in_a_row_online_after_one_success() {
        let h = SourceHealth::new("http://h/api/v1");
        h.set_followed(true);
        let now = Utc::now();
        assert_eq!(h.failed(now, "refused".into(), 2), None);
        assert!(!h.is_offline());
        assert_eq!(
            h.failed(now, "refused".into(), 2),
            Some(Transition::WentOffline)
        );
        assert!(h.is_offline());
        // One line per change: a third failure changes nothing.
        assert_eq!(h.failed(now, "refused again".into(), 2), None);
        assert_eq!(h.status(now).last_error.as_deref(), Some("refused again"));
        h.failed(
            now,
            "the copy did not load:\n  a/event.json:2:1: EOF\n\n  a/bundle.toml: gone\n".into(),
            2,
        );
        assert_eq!(
            h.status(now).last_error.as_deref(),
            Some("the copy did not load: a/event.json:2:1: EOF; a/bundle.toml: gone")
        );
        assert_eq!(h.succeeded(now), Some(Transition::CameOnline));
        assert!(h.is_online());
        assert_eq!(h.succeeded(now), None);
        assert_eq!(h.failures(), 0);
    }

    #[test]
    fn the_age_counts_from_the_latest_confirmation() {
        let h = SourceHealth::new("http://h/api/v1");
        let now = Utc::now();
        assert_eq!(h.age_seconds(now), None);
        h.confirmed(now - chrono::Duration::seconds(90));
        h.confirmed(now - chrono::Duration::seconds(300));
        assert_eq!(h.age_seconds(now), Some(90));
    }
}
