//! Verification for client tests: which requests a [`TestServer`](super::TestServer) received,
//! and "this endpoint was called N times with this JSON body", as WireMock's `verify` and
//! wiremock-rs's `received_requests` offer. It reads the server's request journal (the same
//! entries as `GET /_journal`, matched by the same filters), so the server needs one:
//! [`Builder::journal`](super::Builder::journal).

use std::fmt;

use serde_json::Value;

use crate::http::journal::{Entry, Filter};

/// The most received requests a [`VerifyError`] lists; the rest are counted.
const LISTED: usize = 50;

/// The most bytes of a body that is not JSON quoted in a [`VerifyError`].
const QUOTED: usize = 200;

/// One request the server received, as its journal kept it (the path, query and reference cut
/// to 1024 bytes, the body to 16 KiB, as `GET /_journal` shows them).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Received {
    /// The method, as sent (`GET`).
    pub method: String,
    /// The path, as sent (no query).
    pub path: String,
    /// The query string without `?`; a parameter named like a secret (`token`, `key`, ...) has
    /// `REDACTED` for its value.
    pub query: Option<String>,
    /// The status answered: 0 when no answer was sent (a fault), 499 when the client went away
    /// before the answer was ready.
    pub status: u16,
    /// The bundle the request's token opened.
    pub bundle: Option<String>,
    /// The payment reference a details request asked for.
    pub reference: Option<String>,
    /// The request body, when the endpoint read one (`payments/details` without a query
    /// reference, the writes).
    pub body: Option<Vec<u8>>,
    /// Whether `body` was cut to 16 KiB.
    pub body_cut: bool,
    /// When the request arrived: the waits between a client's retries (after a 429's
    /// `Retry-After`, say) are the differences of these.
    pub time: std::time::SystemTime,
    /// From arrival to the answer's head being ready (simulated delays included), or to the
    /// client going away.
    pub duration: std::time::Duration,
    /// The token's first four characters (fewer for a short token), when one was sent.
    pub token_hint: Option<String>,
}

impl Received {
    pub(crate) fn of(e: &Entry) -> Received {
        Received {
            method: e.method.clone(),
            path: e.path.clone(),
            query: e.query.clone(),
            status: e.status,
            bundle: e.bundle.as_deref().map(str::to_string),
            reference: e.reference.as_deref().map(str::to_string),
            body: e.body.as_deref().map(<[u8]>::to_vec),
            body_cut: e.body_cut,
            time: e.time.into(),
            duration: e.duration,
            token_hint: e.token.clone(),
        }
    }

    /// The body as JSON, if there is one and it parses as the endpoints parse it (a byte order
    /// mark before it skipped; numbers keep their text: `10.00`).
    pub fn body_json(&self) -> Option<Value> {
        crate::read::parse_json(self.body.as_deref()?).ok()
    }
}

impl fmt::Display for Received {
    /// `POST /api/v1/payments/details?x=1 → 200`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)?;
        if let Some(query) = &self.query {
            write!(f, "?{query}")?;
        }
        write!(f, " → {}", self.status)
    }
}

/// Which requests to list or count, and how many are expected: a method, a path, a status and
/// a bundle (matched as `GET /_journal?method=&path=&status=&bundle=` matches them: method and
/// path ignoring ASCII case, the path ignoring one trailing slash, or every path starting with
/// what comes before a trailing `*`; a status code, `0`, or a class `4xx`), a JSON body, a
/// count. **Without [`Expect::status`], a request counts whatever it was answered**: a write
/// refused with 400 or 401 counts as sent; add `.status("2xx")` to count only those that
/// succeeded. Tests sharing one server tell their requests apart with [`Expect::bundle`]. Used
/// with [`TestServer::received`](super::TestServer::received),
/// [`check`](super::TestServer::check) and [`verify`](super::TestServer::verify).
///
/// The builders panic on a value the journal's filters refuse (`status("6xx")`, a path without
/// a leading `/`): a test's own mistake, shown at once.
#[derive(Debug, Clone, PartialEq)]
pub struct Expect {
    filter: Filter,
    /// What the filter asks for, for messages: `GET /api/v1/event (status 2xx)`.
    method: Option<String>,
    path: Option<String>,
    status: Option<String>,
    bundle: Option<String>,
    body: Option<Body>,
    times: Option<usize>,
}

/// A JSON body expected: whole, or only the members given.
#[derive(Debug, Clone, PartialEq)]
struct Body {
    want: Value,
    /// Members of objects the expectation does not name are ignored (at any depth).
    partial: bool,
}

impl Expect {
    /// Every request (narrow it with [`Expect::method`], [`Expect::path`], [`Expect::status`]).
    pub fn any() -> Expect {
        Expect {
            filter: Filter::default(),
            method: None,
            path: None,
            status: None,
            bundle: None,
            body: None,
            times: None,
        }
    }

    /// Requests with this method to this path.
    pub fn request(method: &str, path: &str) -> Expect {
        Expect::any().method(method).path(path)
    }

    /// `GET` requests to this path.
    pub fn get(path: &str) -> Expect {
        Expect::request("GET", path)
    }

    /// `POST` requests to this path.
    pub fn post(path: &str) -> Expect {
        Expect::request("POST", path)
    }

    /// Only requests with this method (ignoring ASCII case).
    pub fn method(self, method: &str) -> Expect {
        let mut e = self.set("method", method);
        e.method = Some(method.to_ascii_uppercase());
        e
    }

    /// Only requests to this path: as the router matches it, or a prefix with a trailing `*`.
    /// No query: a path with `?` panics (the journal keeps the query apart, in
    /// [`Received::query`], so it would never match).
    pub fn path(self, path: &str) -> Expect {
        let mut e = self.set("path", path);
        e.path = Some(path.to_string());
        e
    }

    /// Only requests answered with this status: `201`, `"201"`, `"0"`, a class `"4xx"`, or an
    /// `http::StatusCode` (shown as `201 Created`: its code is taken).
    pub fn status(self, status: impl fmt::Display) -> Expect {
        let shown = status.to_string();
        let status = shown.split(' ').next().unwrap_or_default().to_string();
        let mut e = self.set("status", &status);
        e.status = Some(status);
        e
    }

    /// Only requests whose token opened this bundle (its folder's name, or the name given to
    /// an in-code [`Bundle`](super::Bundle)).
    pub fn bundle(self, bundle: &str) -> Expect {
        let mut e = self.set("bundle", bundle);
        e.bundle = Some(bundle.to_string());
        e
    }

    /// Only requests whose body is this JSON (objects compared regardless of member order,
    /// numbers by value: `10.00` equals `10`).
    pub fn json_body(self, body: Value) -> Expect {
        self.with_body(body, false)
    }

    /// Only requests whose body has at least these members, as [`json_body`](Expect::json_body)
    /// compares them: members of objects it does not name are ignored, at any depth
    /// (`json!({"email": "ana@example.com"})` matches a registration with that e-mail whatever
    /// else it holds). An array must have as many items, in the same order, each compared the
    /// same way (an object in it may have more members); a member given as `null` must be
    /// there, `null`.
    pub fn json_body_includes(self, body: Value) -> Expect {
        self.with_body(body, true)
    }

    fn with_body(mut self, want: Value, partial: bool) -> Expect {
        self.body = Some(Body { want, partial });
        self
    }

    /// Exactly this many matching requests ([`TestServer::check`](super::TestServer::check));
    /// without it, at least one.
    pub fn times(mut self, n: usize) -> Expect {
        self.times = Some(n);
        self
    }

    fn set(mut self, name: &str, value: &str) -> Expect {
        if let Err(bad) = self.filter.set(name, value) {
            panic!("Expect::{name}({value:?}): {bad}");
        }
        self
    }

    /// The bundle it narrows to, if any.
    pub(crate) fn narrowed_to(&self) -> Option<&str> {
        self.bundle.as_deref()
    }

    /// Whether a received request matches (everything but the count).
    pub(crate) fn matches(&self, e: &Entry) -> bool {
        self.filter.matches(e)
            && self
                .body
                .as_ref()
                .is_none_or(|body| body_differences(body, e).is_empty())
    }

    /// `POST /api/v1/x (status 2xx) with this JSON body`.
    fn describe(&self) -> String {
        let mut out = format!(
            "{} {}",
            self.method.as_deref().unwrap_or("any method"),
            self.path.as_deref().unwrap_or("to any path"),
        );
        if let Some(status) = &self.status {
            out.push_str(&format!(" (status {status})"));
        }
        if let Some(bundle) = &self.bundle {
            out.push_str(&format!(" to bundle {bundle:?}"));
        }
        match &self.body {
            Some(Body { partial: true, .. }) => out.push_str(" with the expected JSON members"),
            Some(_) => out.push_str(" with the expected JSON body"),
            None => {}
        }
        out
    }

    /// Whether the count of matching requests is the one expected.
    fn count_ok(&self, n: usize) -> bool {
        match self.times {
            Some(times) => n == times,
            None => n > 0,
        }
    }

    /// Checks `entries` (every request the journal kept, oldest first, `dropped` more having
    /// been dropped before them to make room); the readable failure if the count is not the
    /// one expected. An exact count ([`Expect::times`]) cannot be known once requests were
    /// dropped, so it fails then, saying so.
    pub(crate) fn check(&self, entries: &[&Entry], dropped: u64) -> Result<(), VerifyError> {
        let matched = entries.iter().filter(|e| self.matches(e)).count();
        let exact = self.times.is_some();
        if self.count_ok(matched) && !(exact && dropped > 0) {
            return Ok(());
        }
        let times = |n: usize| format!("{n} time{}", if n == 1 { "" } else { "s" });
        let wanted = self
            .times
            .map_or_else(|| "at least once".to_string(), times);
        let mut message = format!(
            "expected {} {wanted}, received {}.",
            self.describe(),
            times(matched)
        );
        if let Some(want) = &self.body {
            // The request with the fewest differences among those matching all but the body.
            let closest = entries
                .iter()
                .filter(|e| self.filter.matches(e))
                .map(|e| (e, body_differences(want, e)))
                .min_by_key(|(_, d)| d.len());
            if let Some((e, diffs)) = closest.filter(|(_, d)| !d.is_empty()) {
                message.push_str(&format!(
                    "\nthe closest body ({}) differs:",
                    Received::of(e)
                ));
                for d in diffs {
                    message.push_str(&format!("\n  {d}"));
                }
            }
        }
        if dropped > 0 {
            message.push_str(&format!(
                "\nthe journal is full: {} before these were dropped to make room, so the count \
                 is partial (start the server with a larger .journal(N), or clear it between \
                 steps with clear_journal)",
                requests(usize::try_from(dropped).unwrap_or(usize::MAX))
            ));
        }
        message.push_str(&format!("\nreceived {} in all", requests(entries.len())));
        if entries.is_empty() {
            message.push('.');
        } else {
            message.push(':');
        }
        // Expected of one bundle: which bundle each went to.
        let by_bundle = self.filter.names_bundle();
        for e in entries.iter().take(LISTED) {
            message.push_str(&format!("\n  {}", Received::of(e)));
            match e.bundle.as_deref().filter(|_| by_bundle) {
                Some(bundle) => message.push_str(&format!(" (bundle {bundle:?})")),
                None if by_bundle => message.push_str(" (no bundle)"),
                None => {}
            }
        }
        if entries.len() > LISTED {
            message.push_str(&format!("\n  … and {} more", entries.len() - LISTED));
        }
        Err(VerifyError { message })
    }
}

fn requests(n: usize) -> String {
    format!("{n} request{}", if n == 1 { "" } else { "s" })
}

/// Why a [`TestServer::check`](super::TestServer::check) failed: a readable message saying
/// what was expected, what differs in the closest body, and every request received (method,
/// path, status; the first 50).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyError {
    message: String,
}

impl VerifyError {
    pub(crate) fn journal_off() -> VerifyError {
        VerifyError {
            message: "the test server keeps no journal of requests: start it with \
                      .journal(N) (for example TestServer::from_bundles(..).journal(1000))"
                .to_string(),
        }
    }

    /// The message, as `Display` shows it.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for VerifyError {}

/// How an entry's body differs from the JSON expected: one line per difference.
fn body_differences(expected: &Body, e: &Entry) -> Vec<String> {
    let Some(body) = e.body.as_deref() else {
        return vec![
            "$: no body recorded (none was sent, or the endpoint answered before reading it)"
                .to_string(),
        ];
    };
    match crate::read::parse_json(body) {
        Ok(got) => {
            let mut out = Vec::new();
            diff("$", &expected.want, &got, expected.partial, &mut out);
            out
        }
        Err(_) if e.body_cut => vec![format!(
            "$: the body received ({} bytes kept) was cut at the journal's limit of 16 KiB, so it cannot be compared as JSON; check a smaller body, or the request's other parts",
            body.len()
        )],
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let mut quoted: String = text.chars().take(QUOTED).collect();
            if quoted.len() < text.len() {
                quoted.push('…');
            }
            vec![format!("$: the body received is not JSON: {quoted:?}")]
        }
    }
}

/// Every difference between `want` and `got`, each as `<JSON path>: ...`; none when equal
/// (objects regardless of member order, numbers by value).
#[cfg(test)]
fn differences(want: &Value, got: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff("$", want, got, false, &mut out);
    out
}

/// Adds to `out` how `got` differs from `want` at the JSON path `at`; with `partial`, members of
/// `got`'s objects that `want` does not name are not differences.
fn diff(at: &str, want: &Value, got: &Value, partial: bool, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let here = member(at, k);
                match g.get(k) {
                    Some(gv) => diff(&here, wv, gv, partial, out),
                    None => out.push(format!("{here}: expected {wv}, missing")),
                }
            }
            for (k, gv) in g.iter().filter(|(k, _)| !partial && !w.contains_key(*k)) {
                out.push(format!("{}: not expected, received {gv}", member(at, k)));
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            if w.len() != g.len() {
                out.push(format!(
                    "{at}: expected {} items, received {}",
                    w.len(),
                    g.len()
                ));
            }
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                diff(&format!("{at}[{i}]"), wv, gv, partial, out);
            }
        }
        (Value::Number(w), Value::Number(g)) => {
            if !same_number(w, g) {
                out.push(format!("{at}: expected {w}, received {g}"));
            }
        }
        _ if want == got => {}
        _ => out.push(format!("{at}: expected {want}, received {got}")),
    }
}

/// Whether two JSON numbers have one value: `10` is `10.00`, but integers of 64 bits are
/// compared exactly (as floats, 9007199254740993 would be 9007199254740992: an id past 2^53
/// would pass for its neighbour). Larger integers are compared as floats, and a number past the
/// float range (`1e400`) is equal only to the same text.
fn same_number(w: &serde_json::Number, g: &serde_json::Number) -> bool {
    let int = |n: &serde_json::Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (int(w), int(g)) {
        (Some(w), Some(g)) => w == g,
        (Some(i), None) => g.as_f64().is_some_and(|f| float_is(f, i)),
        (None, Some(i)) => w.as_f64().is_some_and(|f| float_is(f, i)),
        (None, None) => match (w.as_f64(), g.as_f64()) {
            (Some(w), Some(g)) => w == g,
            _ => w.as_str() == g.as_str(),
        },
    }
}

/// Whether the float `f` is exactly the integer `i`.
fn float_is(f: f64, i: i128) -> bool {
    // Past ±2^127 no i128 is equal; `as` saturates, so bound it first.
    f.fract() == 0.0 && f.abs() < 1.7e38 && f as i128 == i
}

/// `$.name`, or `$["odd key"]` for a key that is not a plain name.
fn member(at: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && !key.starts_with(|c: char| c.is_ascii_digit())
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!("{at}.{key}")
    } else {
        format!("{at}[{}]", Value::String(key.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Partial: members not named are ignored at any depth, inside arrays too; an array keeps
    /// its length and order; a `null` expected must be there.
    #[test]
    fn a_partial_body_ignores_members_it_does_not_name_at_any_depth() {
        let got = json!({
            "name": "Ana", "extra": 1,
            "items": [{"id": 1, "note": "x"}, {"id": 2}],
            "nested": {"a": 1, "b": 2},
            "gone": null
        });
        let partial = |want: Value| {
            let mut out = Vec::new();
            diff("$", &want, &got, true, &mut out);
            out
        };
        assert!(partial(json!({"name": "Ana"})).is_empty());
        assert!(partial(json!({"items": [{"id": 1}, {"id": 2}], "nested": {"b": 2}})).is_empty());
        assert!(partial(json!({"gone": null})).is_empty());
        assert_eq!(
            partial(json!({"items": [{"id": 1}]})),
            ["$.items: expected 1 items, received 2"]
        );
        assert_eq!(
            partial(json!({"items": [{"id": 2}, {"id": 1}]})),
            [
                "$.items[0].id: expected 2, received 1",
                "$.items[1].id: expected 1, received 2"
            ]
        );
        assert_eq!(
            partial(json!({"missing": null})),
            ["$.missing: expected null, missing"]
        );
        assert_eq!(
            differences(&json!({"name": "Ana"}), &got).len(),
            4,
            "whole: every other member differs"
        );
    }

    #[test]
    fn differences_name_each_json_path() {
        let want = json!({"name": "Ana", "amount": 10, "tags": ["a", "b"], "odd key": 1});
        let got: Value = serde_json::from_str(
            r#"{"amount": 10.00, "name": "Ann", "tags": ["a"], "extra": true}"#,
        )
        .expect("JSON");
        assert_eq!(
            differences(&want, &got),
            [
                r#"$.name: expected "Ana", received "Ann""#,
                "$.tags: expected 2 items, received 1",
                r#"$["odd key"]: expected 1, missing"#,
                "$.extra: not expected, received true",
            ]
        );
        assert!(differences(&want, &want).is_empty());
        let reordered: Value = serde_json::from_str(
            r#"{"odd key": 1, "tags": ["a", "b"], "amount": 10.0, "name": "Ana"}"#,
        )
        .expect("JSON");
        assert!(
            differences(&want, &reordered).is_empty(),
            "order, 10 = 10.0"
        );
    }

    #[test]
    fn numbers_are_equal_by_value_and_integers_exactly() {
        let number = |text: &str| serde_json::from_str::<Value>(text).expect("JSON");
        for (a, b) in [
            ("10", "10.00"),
            ("1e2", "100"),
            ("-0.5", "-5e-1"),
            ("9007199254740993", "9007199254740993"),
            ("18446744073709551615", "18446744073709551615"),
            ("1e400", "1e400"),
        ] {
            assert!(differences(&number(a), &number(b)).is_empty(), "{a} = {b}");
        }
        for (a, b) in [
            // As floats both are 2^53: different ids must not pass for each other.
            ("9007199254740993", "9007199254740992"),
            ("9007199254740993", "9007199254740992.0"),
            ("18446744073709551615", "18446744073709551614"),
            ("-9223372036854775808", "9223372036854775807"),
            ("10", "10.5"),
        ] {
            assert_eq!(
                differences(&number(a), &number(b)),
                [format!("$: expected {a}, received {b}")],
                "{a} ≠ {b}"
            );
        }
        // Past the float range, where as_f64 gives none for either.
        for (a, b) in [("1e400", "-1e400"), ("1e400", "10"), ("1e400", "2e400")] {
            assert_eq!(differences(&number(a), &number(b)).len(), 1, "{a} ≠ {b}");
        }
    }
}
