//! The request journal (`--journal N`): the last N requests, in memory, so a team can see what
//! its client sent. `GET /_journal` lists them, `DELETE /_journal` empties it.
//!
//! A bounded ring: recording the N+1st request drops the oldest, so a long test run cannot grow
//! it without limit. Recording is one short lock per request (only when the journal is on); the
//! list is serialised when `/_journal` is asked for, an operations route, never on the API's
//! request path. Tokens are kept cut to their first four characters, never whole.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

/// One request, as the journal keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// When the request arrived.
    pub time: DateTime<Utc>,
    pub method: String,
    pub path: String,
    /// The query string, without `?`.
    pub query: Option<String>,
    /// The bundle the request's token opens.
    pub bundle: Option<Arc<str>>,
    /// The token's first four characters (fewer for a short token: never more than half).
    pub token: Option<String>,
    /// The status answered; 0 when no answer was sent (`X-Eventbox-Fault: reset` or `empty`).
    pub status: u16,
    /// From arrival to the answer's head being ready (simulated delays included).
    pub duration: Duration,
    /// The payment reference a details request asked for.
    pub reference: Option<Box<str>>,
}

/// The last `capacity` requests.
#[derive(Debug)]
pub struct Journal {
    capacity: usize,
    entries: Mutex<VecDeque<Entry>>,
}

impl Journal {
    /// A journal of the last `capacity` requests; `None` (off) for 0.
    pub fn with_capacity(capacity: usize) -> Option<Arc<Journal>> {
        (capacity > 0).then(|| {
            Arc::new(Journal {
                capacity,
                entries: Mutex::new(VecDeque::new()),
            })
        })
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Entry>> {
        // A panic while holding the lock cannot leave the ring inconsistent: keep using it.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps one request, dropping the oldest when full.
    pub fn record(&self, entry: Entry) {
        let mut entries = self.lock();
        while entries.len() >= self.capacity {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// The requests kept, oldest first.
    pub fn entries(&self) -> Vec<Entry> {
        self.lock().iter().cloned().collect()
    }

    /// Forgets every request.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// The `GET /_journal` body: `{"capacity": N, "count": n, "entries": [...]}`.
    pub fn body(&self) -> Bytes {
        let entries = self.entries();
        let body = Listing {
            capacity: self.capacity,
            count: entries.len(),
            entries: entries.iter().map(Shown::of).collect(),
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
        let paths: Vec<String> = journal.entries().into_iter().map(|e| e.path).collect();
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
}
