//! The request journal (`--journal N`): the last N requests, in memory, so a team can see what
//! its client sent. `GET /_journal` lists them (`?method=&path=&status=` keeps those a
//! [`Filter`] matches), `DELETE /_journal` empties it; the test server verifies from it too.
//!
//! A bounded ring in arrival order: recording the N+1st request drops the one that arrived
//! first, so a long test run cannot grow it without limit. N is at most [`MAX_CAPACITY`], and
//! each entry's client-given text (path, query, reference) is cut to [`MAX_TEXT`] bytes and its
//! body to [`MAX_BODY`], so the journal's memory is bounded whatever clients send. Recording is one short lock per request
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

/// The most bytes of a request body kept (16 KiB: a reference or a registration is far
/// smaller); a longer body is cut there and flagged (`body_cut`). With [`MAX_TEXT`] it bounds an
/// entry to about 20 KiB.
pub(crate) const MAX_BODY: usize = 16 * 1024;

/// Cuts `text` to at most `limit` bytes on a character boundary, appending `…` when cut.
pub(crate) fn clip(text: &mut String, limit: usize) {
    if text.len() > limit {
        let mut end = limit;
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
    /// The request body, when the handler read one (at most [`MAX_BODY`] bytes are kept).
    pub(crate) body: Option<Bytes>,
    /// Whether `body` was cut to [`MAX_BODY`].
    pub(crate) body_cut: bool,
}

/// The last `capacity` requests to arrive.
#[derive(Debug)]
pub(crate) struct Journal {
    capacity: usize,
    ring: Mutex<Ring>,
}

#[derive(Debug, Default)]
struct Ring {
    /// In arrival order (`Entry::time`); shared, so listing copies pointers under the lock.
    entries: VecDeque<Arc<Entry>>,
    /// Per bundle (`None`: requests that opened none), how many of its requests were dropped to
    /// make room since they were last forgotten: counts read from the journal are partial
    /// when this is not 0.
    dropped: std::collections::HashMap<Option<Arc<str>>, u64>,
}

impl Journal {
    /// A journal of the last `capacity` requests, at most [`MAX_CAPACITY`] (the configuration
    /// refuses more; library callers get the cap); `None` (off) for 0.
    pub(crate) fn with_capacity(capacity: usize) -> Option<Arc<Journal>> {
        (capacity > 0).then(|| {
            Arc::new(Journal {
                capacity: capacity.min(MAX_CAPACITY),
                ring: Mutex::new(Ring::default()),
            })
        })
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        // A panic while holding the lock cannot leave the ring inconsistent: keep using it.
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps one request (its path, query and reference cut to [`MAX_TEXT`] bytes) in arrival
    /// order, dropping the one that arrived first when full. Requests are recorded when they
    /// end, so one that waited longer goes before those that arrived after it and ended first:
    /// its place is found from the back (usually the back itself).
    pub(crate) fn record(&self, mut entry: Entry) {
        clip(&mut entry.path, MAX_TEXT);
        if let Some(query) = &mut entry.query {
            clip(query, MAX_TEXT);
        }
        if let Some(reference) = entry.reference.take() {
            let mut reference = reference.into_string();
            clip(&mut reference, MAX_TEXT);
            entry.reference = Some(reference.into_boxed_str());
        }
        if let Some(body) = entry.body.as_mut().filter(|b| b.len() > MAX_BODY) {
            // A copy, so the kept bytes do not hold the whole buffer.
            *body = Bytes::copy_from_slice(&body[..MAX_BODY]);
            entry.body_cut = true;
        }
        let entry = Arc::new(entry);
        let mut ring = self.lock();
        let at = ring
            .entries
            .iter()
            .rposition(|e| e.time <= entry.time)
            .map_or(0, |i| i + 1);
        ring.entries.insert(at, entry);
        while ring.entries.len() > self.capacity {
            if let Some(gone) = ring.entries.pop_front() {
                *ring.dropped.entry(gone.bundle.clone()).or_default() += 1;
            }
        }
    }

    /// The requests kept, in the order they arrived.
    pub(crate) fn entries(&self) -> Vec<Arc<Entry>> {
        self.snapshot(None).0
    }

    /// The requests kept, in the order they arrived, and how many were dropped to make room
    /// (of `bundle`'s requests, or of all), read together.
    pub(crate) fn snapshot(&self, bundle: Option<&str>) -> (Vec<Arc<Entry>>, u64) {
        let ring = self.lock();
        let dropped = match bundle {
            Some(b) => ring.dropped.get(&Some(Arc::from(b))).copied().unwrap_or(0),
            None => ring.dropped.values().sum(),
        };
        (ring.entries.iter().cloned().collect(), dropped)
    }

    /// Forgets the requests `filter` matches, and the count of those dropped: every request's
    /// with [`Filter::default`], or one bundle's (`DELETE /_journal?bundle=NAME`).
    pub(crate) fn forget(&self, filter: &Filter) {
        let mut ring = self.lock();
        ring.entries.retain(|e| !filter.matches(e));
        match &filter.bundle {
            None => ring.dropped.clear(),
            Some(b) => {
                ring.dropped.remove(&Some(Arc::from(b.as_str())));
            }
        }
    }

    /// How many requests were dropped to make room since they were last forgotten.
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.snapshot(None).1
    }

    /// The `GET /_journal` body: `{"capacity": N, "dropped": d, "count": n, "entries": [...]}`,
    /// the entries
    /// `filter` matches. Serialised after the lock is released: recording requests never waits
    /// for it.
    pub(crate) fn body(&self, filter: &Filter) -> Bytes {
        let (mut entries, dropped) = self.snapshot(filter.bundle.as_deref());
        entries.retain(|e| filter.matches(e));
        let body = Listing {
            capacity: self.capacity,
            dropped,
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
    dropped: u64,
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
    /// JSON when the body parses as JSON, else its text (invalid UTF-8 replaced); null when
    /// none was read.
    body: Option<serde_json::Value>,
    body_cut: bool,
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
            body: e.body.as_deref().map(shown_body),
            body_cut: e.body_cut,
        }
    }
}

/// A body as `/_journal` shows it: the JSON it holds (read as the endpoints read it), else its
/// text.
fn shown_body(body: &[u8]) -> serde_json::Value {
    crate::read::parse_json(body)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(body).into_owned()))
}

/// Which entries to list or count: every filter given must hold. The `/_journal` query
/// (`?method=GET&path=/api/v1/payments*&status=4xx&bundle=demo`) and the test server's `Expect`
/// both make one with [`Filter::set`], so both accept the same values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    /// A method name, compared ignoring ASCII case.
    method: Option<String>,
    path: Option<PathPattern>,
    status: Option<StatusPattern>,
    /// The name of the bundle the request's token opened, as written.
    bundle: Option<String>,
}

/// A path as [`crate::api::Route::of`] matches one: ignoring one trailing slash and ASCII case;
/// or, written with a trailing `*`, every path that starts with the rest (ignoring ASCII case).
#[derive(Debug, Clone, PartialEq, Eq)]
enum PathPattern {
    Exact(String),
    Prefix(String),
}

/// A status code, or a class (`4xx`: 400 to 499).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StatusPattern {
    Exact(u16),
    Class(u16),
}

/// Why a journal filter cannot be used: the parameter and what it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadFilter {
    /// The parameter's name as given (cut to [`MAX_NAME`] bytes).
    pub(crate) parameter: String,
    pub(crate) reason: &'static str,
}

impl BadFilter {
    /// The body of [`crate::errors::ApiError::InvalidJournalFilter`] naming the parameter and
    /// what it takes, e.g. ``"The /_journal parameter `status` cannot be used: it takes a status
    /// code ..."``. Formatted when asked for, like the journal itself (an operations route).
    pub(crate) fn body(&self) -> bytes::Bytes {
        let message = format!(
            "The /_journal parameter `{}` cannot be used: it {}.",
            self.parameter, self.reason
        );
        crate::errors::message_body(crate::errors::ApiError::InvalidJournalFilter, &message)
    }
}

/// The longest parameter name quoted back in a [`BadFilter`].
const MAX_NAME: usize = 64;

impl std::fmt::Display for BadFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.parameter, self.reason)
    }
}

const METHOD_TAKES: &str = "takes a method name such as GET or post";
const PATH_TAKES: &str =
    "takes a path starting with /, without a query (ignoring case and one trailing slash; a trailing * matches every path starting with the rest)";
const STATUS_TAKES: &str =
    "takes a status code (201; 0 for no answer, 499 for a client that went away) or a class (4xx)";
const BUNDLE_TAKES: &str = "takes the name of a bundle (its folder's name)";

impl Filter {
    /// Whether it names a bundle.
    pub(crate) fn names_bundle(&self) -> bool {
        self.bundle.is_some()
    }

    /// The filter of a `/_journal` query string: `method`, `path`, `status` and `bundle`, each
    /// at most once; any other parameter, or a value that cannot be used, is a [`BadFilter`].
    pub(crate) fn from_query(query: Option<&str>) -> Result<Filter, BadFilter> {
        Filter::parse(query, |_| None)
    }

    /// For `DELETE /_journal`, which forgets every request, or one bundle's with `bundle`: no
    /// other parameter (it would suggest that only the requests it matches go).
    pub(crate) fn to_forget(query: Option<&str>) -> Result<Filter, BadFilter> {
        Filter::parse(query, |name| {
            (name != "bundle").then_some(
                "is not taken by DELETE, which forgets every request, or one bundle's (bundle=NAME)",
            )
        })
    }

    /// Each parameter of `query` at most once, set by [`Filter::set`] unless `refused` gives
    /// a reason not to take it.
    fn parse(
        query: Option<&str>,
        refused: impl Fn(&str) -> Option<&'static str>,
    ) -> Result<Filter, BadFilter> {
        let mut filter = Filter::default();
        let mut seen: Vec<String> = Vec::new();
        for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            if let Some(reason) = refused(&name) {
                return Err(BadFilter::new(&name, reason));
            }
            if seen.iter().any(|s| *s == name) {
                return Err(BadFilter::new(
                    &name,
                    "is given twice; give each filter once",
                ));
            }
            filter.set(&name, &value)?;
            seen.push(name.into_owned());
        }
        Ok(filter)
    }

    /// Sets one filter from its parameter name and value, as the query string gives them.
    pub(crate) fn set(&mut self, name: &str, value: &str) -> Result<(), BadFilter> {
        match name {
            "method" => {
                let token = !value.is_empty()
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                if !token {
                    return Err(BadFilter::new(name, METHOD_TAKES));
                }
                self.method = Some(value.to_ascii_uppercase());
            }
            "path" => {
                if !value.starts_with('/') || value.contains('?') {
                    return Err(BadFilter::new(name, PATH_TAKES));
                }
                self.path = Some(match value.strip_suffix('*') {
                    Some(prefix) => PathPattern::Prefix(prefix.to_string()),
                    None => PathPattern::Exact(value.to_string()),
                });
            }
            "status" => {
                let bytes = value.as_bytes();
                self.status = Some(match bytes {
                    b"0" => StatusPattern::Exact(0),
                    [c @ b'1'..=b'5', b'x' | b'X', b'x' | b'X'] => {
                        StatusPattern::Class(u16::from(c - b'0'))
                    }
                    [b'1'..=b'5', b'0'..=b'9', b'0'..=b'9'] => StatusPattern::Exact(
                        value
                            .parse()
                            .map_err(|_| BadFilter::new(name, STATUS_TAKES))?,
                    ),
                    _ => return Err(BadFilter::new(name, STATUS_TAKES)),
                });
            }
            "bundle" => {
                if value.is_empty() {
                    return Err(BadFilter::new(name, BUNDLE_TAKES));
                }
                self.bundle = Some(value.to_string());
            }
            _ => {
                return Err(BadFilter::new(
                    name,
                    "is not a filter of /_journal: the filters are method, path, status and bundle",
                ))
            }
        }
        Ok(())
    }

    /// Whether an entry passes every filter given.
    pub(crate) fn matches(&self, e: &Entry) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(&e.method))
            && self.path.as_ref().is_none_or(|p| p.matches(&e.path))
            && self.status.is_none_or(|s| s.matches(e.status))
            && self
                .bundle
                .as_deref()
                .is_none_or(|b| e.bundle.as_deref() == Some(b))
    }
}

impl PathPattern {
    fn matches(&self, path: &str) -> bool {
        let bare = |p: &'_ str| -> String { p.strip_suffix('/').unwrap_or(p).to_ascii_lowercase() };
        match self {
            PathPattern::Exact(want) => bare(want) == bare(path),
            PathPattern::Prefix(prefix) => path
                .get(..prefix.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(prefix)),
        }
    }
}

impl StatusPattern {
    fn matches(self, status: u16) -> bool {
        match self {
            StatusPattern::Exact(s) => s == status,
            StatusPattern::Class(c) => status / 100 == c,
        }
    }
}

impl BadFilter {
    fn new(parameter: &str, reason: &'static str) -> BadFilter {
        let mut parameter = parameter.to_string();
        clip(&mut parameter, MAX_NAME);
        BadFilter { parameter, reason }
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
            body: None,
            body_cut: false,
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
        let v: serde_json::Value =
            serde_json::from_slice(&journal.body(&Filter::default())).expect("JSON");
        assert_eq!(v["capacity"], 2);
        assert_eq!((v["dropped"].as_u64(), journal.dropped()), (Some(1), 1));
        assert_eq!(v["count"], 2);
        assert_eq!(v["entries"][0]["time"], "2026-11-18T11:06:40.123Z");
        assert_eq!(v["entries"][0]["duration_ms"], 0.42);
        assert_eq!(v["entries"][0]["query"], serde_json::Value::Null);
        // One bundle's requests forgotten: the others' history is still partial.
        journal.forget(&Filter::to_forget(Some("bundle=demo")).expect("a filter"));
        assert_eq!(journal.dropped(), 1);
        journal.forget(&Filter::default());
        assert!(journal.entries().is_empty());
        assert_eq!(journal.dropped(), 0);
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

    #[test]
    fn a_long_body_is_cut_and_flagged_and_shown_as_json_or_text() {
        let journal = Journal::with_capacity(3).expect("on");
        journal.record(Entry {
            body: Some(Bytes::from_static(br#"{"b":10.00,"a":[1]}"#)),
            ..entry("/json")
        });
        journal.record(Entry {
            body: Some(Bytes::from_static(b"reference=PG1")),
            ..entry("/form")
        });
        journal.record(Entry {
            body: Some(Bytes::from(vec![b'x'; MAX_BODY + 10])),
            ..entry("/long")
        });
        let kept = journal.entries();
        assert_eq!(kept[2].body.as_ref().map(Bytes::len), Some(MAX_BODY));
        assert!(kept[2].body_cut && !kept[0].body_cut);
        let listed = String::from_utf8(journal.body(&Filter::default()).to_vec()).expect("UTF-8");
        assert!(
            listed.contains(r#""body":{"b":10.00,"a":[1]},"body_cut":false"#),
            "JSON as sent, numbers and order kept: {listed}"
        );
        assert!(listed.contains(r#""body":"reference=PG1""#), "{listed}");
        assert!(listed.contains(r#""body_cut":true"#), "{listed}");
    }

    fn filter(query: &str) -> Result<Filter, BadFilter> {
        Filter::from_query(Some(query))
    }

    #[test]
    fn filters_parse_and_match_as_documented() {
        let e = |method: &str, path: &str, status: u16| Entry {
            method: method.into(),
            status,
            ..entry(path)
        };
        let post = e("POST", "/api/v1/attendees/create", 201);
        let refused = e("GET", "/api/v1/Submission/", 401);
        let faulted = e("GET", "/api/v1/event", 0);
        let yes = |q: &str, x: &Entry| filter(q).expect(q).matches(x);
        assert!(yes("", &post) && yes("", &refused));
        assert!(yes("method=post", &post) && !yes("method=GET", &post));
        assert!(yes("path=/API/v1/submission", &refused), "case, one slash");
        assert!(yes("path=/api/v1/submission/", &refused));
        assert!(!yes("path=/api/v1/submission//", &refused));
        assert!(yes("path=/api/v1/*", &post) && yes("path=/*", &refused));
        assert!(!yes("path=/api/v1/attendees", &post), "exact without *");
        assert!(yes("status=4xx", &refused) && yes("status=4XX", &refused));
        assert!(yes("status=401", &refused) && !yes("status=4xx", &post));
        assert!(yes("status=0", &faulted) && !yes("status=2xx", &faulted));
        assert!(yes(
            "method=GET&path=/api/v1/submission&status=4xx",
            &refused
        ));
        assert!(!yes(
            "method=GET&path=/api/v1/submission&status=2xx",
            &refused
        ));
    }

    #[test]
    fn a_bad_filter_names_its_parameter() {
        for (query, parameter) in [
            ("nope=1", "nope"),
            ("status=600", "status"),
            ("status=42", "status"),
            ("status=6xx", "status"),
            ("status=", "status"),
            ("method=", "method"),
            ("method=G%20T", "method"),
            ("path=api", "path"),
            ("status=200&status=201", "status"),
            ("bundle=", "bundle"),
            ("bundle=a&bundle=b", "bundle"),
        ] {
            let bad = filter(query).expect_err(query);
            assert_eq!(bad.parameter, parameter, "{query}");
        }
        let long = filter(&"n".repeat(500)).expect_err("unknown");
        assert_eq!(long.parameter, format!("{}…", "n".repeat(MAX_NAME)));
    }

    #[test]
    fn a_bundle_filter_lists_and_forgets_that_bundle_only() {
        let journal = Journal::with_capacity(8).expect("a journal");
        for (path, bundle) in [("/a", Some("demo")), ("/b", Some("other")), ("/c", None)] {
            let mut e = entry(path);
            e.bundle = bundle.map(Arc::from);
            journal.record(e);
        }
        let paths = |f: &Filter| -> Vec<String> {
            let shown: serde_json::Value = serde_json::from_slice(&journal.body(f)).expect("JSON");
            shown["entries"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| e["path"].as_str().unwrap_or_default().to_string())
                .collect()
        };
        assert_eq!(paths(&filter("bundle=demo").expect("a filter")), ["/a"]);
        assert_eq!(
            paths(&filter("bundle=Demo").expect("a filter")),
            [] as [&str; 0]
        );

        journal.forget(&Filter::to_forget(Some("bundle=demo")).expect("a filter"));

        assert_eq!(paths(&Filter::default()), ["/b", "/c"]);
        for query in ["method=GET", "bundle=demo&path=/a", "status=200"] {
            assert!(Filter::to_forget(Some(query)).is_err(), "{query}");
        }
        journal.forget(&Filter::to_forget(None).expect("no filter"));
        assert!(journal.entries().is_empty());
    }
}
