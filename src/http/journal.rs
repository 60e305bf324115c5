//! The request journal (`--journal N`): the last N requests, in memory, so a team can see what
//! its client sent. `GET /_journal` lists them, `DELETE /_journal` empties it.
//!
//! A bounded ring in arrival order: recording the N+1st request drops the one that arrived
//! first, so a long test run cannot grow it without limit. N is at most [`MAX_CAPACITY`], and
//! each entry's client-given text (path, query, reference) is cut to [`MAX_TEXT`] bytes, so the
//! journal's memory is bounded whatever clients send. Recording is one short lock per request
//! (only when the journal is on); listing copies pointers under the lock and serialises after
//! releasing it, when `/_journal` is asked for (an operations route, never the API's request
//! path). Tokens are kept cut to their first four characters, never whole.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

/// The most requests a journal keeps (`--journal N`).
pub(crate) const MAX_CAPACITY: usize = 100_000;

/// The most bytes of a request's path, query or reference kept; longer ones are cut (on a
/// character boundary) and end with `…`.
pub(crate) const MAX_TEXT: usize = 1024;

/// Cuts `text` to at most [`MAX_TEXT`] bytes on a character boundary, appending `…` when cut.
fn clip(text: &mut String) {
    if text.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
}

/// One request, as the journal keeps it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    /// When the request arrived.
    pub(crate) time: DateTime<Utc>,
    pub(crate) method: String,
    pub(crate) path: String,
    /// The query string, without `?`.
    pub(crate) query: Option<String>,
    /// The bundle the request's token opens.
    pub(crate) bundle: Option<Arc<str>>,
    /// The token's first four characters (fewer for a short token: never more than half).
    pub(crate) token: Option<String>,
    /// The status answered; 0 when no answer was sent (`X-Eventbox-Fault: reset` or `empty`),
    /// 499 when the client went away before the answer was ready.
    pub(crate) status: u16,
    /// From arrival to the answer's head being ready (simulated delays included), or to the
    /// client going away.
    pub(crate) duration: Duration,
    /// The payment reference a details request asked for.
    pub(crate) reference: Option<Box<str>>,
}

/// The last `capacity` requests to arrive.
#[derive(Debug)]
pub(crate) struct Journal {
    capacity: usize,
    /// In arrival order (`Entry::time`); shared, so listing copies pointers under the lock.
    entries: Mutex<VecDeque<Arc<Entry>>>,
}

impl Journal {
    /// A journal of the last `capacity` requests, at most [`MAX_CAPACITY`] (the configuration
    /// refuses more; library callers get the cap); `None` (off) for 0.
    pub(crate) fn with_capacity(capacity: usize) -> Option<Arc<Journal>> {
        (capacity > 0).then(|| {
            Arc::new(Journal {
                capacity: capacity.min(MAX_CAPACITY),
                entries: Mutex::new(VecDeque::new()),
            })
        })
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Arc<Entry>>> {
        // A panic while holding the lock cannot leave the ring inconsistent: keep using it.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps one request (its path, query and reference cut to [`MAX_TEXT`] bytes) in arrival
    /// order, dropping the one that arrived first when full. Requests are recorded when they
    /// end, so one that waited longer goes before those that arrived after it and ended first:
    /// its place is found from the back (usually the back itself).
    pub(crate) fn record(&self, mut entry: Entry) {
        clip(&mut entry.path);
        if let Some(query) = &mut entry.query {
            clip(query);
        }
        if let Some(reference) = entry.reference.take() {
            let mut reference = reference.into_string();
            clip(&mut reference);
            entry.reference = Some(reference.into_boxed_str());
        }
        let entry = Arc::new(entry);
        let mut entries = self.lock();
        let at = entries
            .iter()
            .rposition(|e| e.time <= entry.time)
            .map_or(0, |i| i + 1);
        entries.insert(at, entry);
        while entries.len() > self.capacity {
            entries.pop_front();
        }
    }

    /// The requests kept, in the order they arrived.
    pub(crate) fn entries(&self) -> Vec<Arc<Entry>> {
        self.lock().iter().cloned().collect()
    }

    /// Forgets every request.
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    /// The `GET /_journal` body: `{"capacity": N, "count": n, "entries": [...]}`. Serialised
    /// after the lock is released: recording requests never waits for it.
    pub(crate) fn body(&self) -> Bytes {
        let entries = self.entries();
        let body = Listing {
            capacity: self.capacity,
            count: entries.len(),
            entries: entries.iter().map(|e| Shown::of(e)).collect(),
        };
        // Strings, integers and finite floats: serialisation cannot fail.
        serde_json::to_vec(&body).map_or_else(|_| Bytes::new(), Bytes::from)
    }
}

#[derive(Serialize)]
struct Listing<'a> {
    capacity: usize,
    count: usize,
    entries: Vec<Shown<'a>>,
}

#[derive(Serialize)]
struct Shown<'a> {
    time: String,
    method: &'a str,
    path: &'a str,
    query: Option<&'a str>,
    bundle: Option<&'a str>,
    token: Option<&'a str>,
    status: u16,
    duration_ms: f64,
    reference: Option<&'a str>,
}

impl<'a> Shown<'a> {
    fn of(e: &'a Entry) -> Shown<'a> {
        Shown {
            time: e.time.to_rfc3339_opts(SecondsFormat::Millis, true),
            method: &e.method,
            path: &e.path,
            query: e.query.as_deref(),
            bundle: e.bundle.as_deref(),
            token: e.token.as_deref(),
            status: e.status,
            duration_ms: e.duration.as_micros() as f64 / 1000.0,
            reference: e.reference.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str) -> Entry {
        Entry {
            time: DateTime::from_timestamp_millis(1_795_000_000_123).expect("a time"),
            method: "GET".into(),
            path: path.into(),
            query: None,
            bundle: None,
            token: None,
            status: 200,
            duration: Duration::from_micros(420),
            reference: None,
        }
    }

    #[test]
    fn keeps_the_last_n_oldest_first() {
        let journal = Journal::with_capacity(2).expect("on");
        for p in ["/a", "/b", "/c"] {
            journal.record(entry(p));
        }
        let paths: Vec<String> = journal.entries().iter().map(|e| e.path.clone()).collect();
        assert_eq!(paths, ["/b", "/c"]);
        let v: serde_json::Value = serde_json::from_slice(&journal.body()).expect("JSON");
        assert_eq!(v["capacity"], 2);
        assert_eq!(v["count"], 2);
        assert_eq!(v["entries"][0]["time"], "2026-11-18T11:06:40.123Z");
        assert_eq!(v["entries"][0]["duration_ms"], 0.42);
        assert_eq!(v["entries"][0]["query"], serde_json::Value::Null);
        journal.clear();
        assert!(journal.entries().is_empty());
        assert!(Journal::with_capacity(0).is_none());
    }

    #[test]
    fn entries_are_kept_in_arrival_order_and_the_first_arrived_is_dropped() {
        let at = |ms: i64, path: &str| Entry {
            time: DateTime::from_timestamp_millis(1_795_000_000_000 + ms).expect("a time"),
            ..entry(path)
        };
        let journal = Journal::with_capacity(3).expect("on");
        // Recorded when they end: /slow arrived first and ended last.
        journal.record(at(20, "/b"));
        journal.record(at(30, "/c"));
        journal.record(at(10, "/slow"));
        let paths =
            |j: &Journal| -> Vec<String> { j.entries().iter().map(|e| e.path.clone()).collect() };
        assert_eq!(paths(&journal), ["/slow", "/b", "/c"]);
        journal.record(at(40, "/d"));
        assert_eq!(paths(&journal), ["/b", "/c", "/d"]);
        journal.record(at(5, "/older-than-all"));
        assert_eq!(
            paths(&journal),
            ["/b", "/c", "/d"],
            "full: the first arrived goes"
        );
    }

    #[test]
    fn long_text_is_cut_on_a_character_boundary() {
        let journal = Journal::with_capacity(1).expect("on");
        // 'é' is two bytes: 1023 ASCII bytes put one across the limit.
        let long = format!("/{}{}", "a".repeat(1022), "é".repeat(10));
        journal.record(Entry {
            query: Some("q".repeat(5000)),
            reference: Some("r".repeat(MAX_TEXT).into_boxed_str()),
            ..entry(&long)
        });
        let kept = &journal.entries()[0];
        assert_eq!(kept.path, format!("/{}…", "a".repeat(1022)));
        assert_eq!(
            kept.query.as_deref(),
            Some(format!("{}…", "q".repeat(MAX_TEXT)).as_str())
        );
        assert_eq!(
            kept.reference.as_deref(),
            Some("r".repeat(MAX_TEXT).as_str()),
            "not cut at the limit"
        );
    }
}
