//! One request, start to end: parse → route → authorise → simulate and fault → represent →
//! record. [`answer`] is what hyper calls for each request.
//!
//! It parses once what the later steps need: the path, with percent-encoded letters, digits and
//! `-._~` decoded ([`unescaped`]), the route (from the endpoint table) and the token, looked up once in the snapshot the request holds for its whole life. Recording (metrics,
//! access log, journal) is an [`Outcome`] guard begun before anything can wait, so a request
//! whose client goes away during a simulated delay is recorded too (status 499). The router
//! answers with a [`Handled`] value: the response, the payment reference asked for, the fault
//! asked for; this module acts on the fault (no answer, or half of one) below hyper through
//! `fault`. Nothing travels in response extensions.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::body::{Body, Incoming};
use hyper::header::{HeaderValue, CONNECTION, ORIGIN, SERVER, USER_AGENT};
use hyper::http::uri::{PathAndQuery, Uri};
use hyper::{Method, Request, Response, StatusCode};

use super::control::Fault;
use super::deadline::DeadlineBody;
use super::details;
use super::fault::{ConnFault, FaultError, ReplyBody};
use super::guard;
use super::journal::{self, Journal};
use super::router;
use super::server::Shared;
use crate::api::Route;
use crate::errors::ApiError;
use crate::prepare::{Payload, Prepared};
use crate::token::TOKEN_HEADER;
use crate::token::{hint_of_head, token_head};
use crate::token::{NotText, Token, TokenRef};

/// The `Server` header of every answer.
const SERVER_NAME: HeaderValue =
    HeaderValue::from_static(concat!("eventbox/", env!("CARGO_PKG_VERSION")));

/// `Connection: close`.
const CLOSE: HeaderValue = HeaderValue::from_static("close");

/// What the router made of a request, for the steps after it.
#[derive(Debug)]
pub(crate) struct Handled {
    pub(crate) response: Response<Payload>,
    /// The payment reference asked for or found (kept only when the journal is on).
    pub(crate) reference: Option<Box<str>>,
    /// The request body, when the handler read one (kept only when the journal is on; the
    /// journal keeps at most `journal::MAX_BODY` bytes of it).
    pub(crate) body: Option<Bytes>,
    /// The fault `X-Eventbox-Fault` asked for, once the simulation reached it.
    pub(crate) fault: Option<Fault>,
}

impl Handled {
    /// An answer with no reference and no fault.
    pub(crate) fn plain(response: Response<Payload>) -> Handled {
        Handled {
            response,
            reference: None,
            body: None,
            fault: None,
        }
    }
}

/// The bundle a request's token opens, or why none: the one lookup of a request.
fn authorise<'s>(
    token: Result<Option<TokenRef<'_>>, NotText>,
    snapshot: &'s crate::store::Snapshot,
) -> Result<&'s Prepared, ApiError> {
    match token {
        Ok(None) => Err(ApiError::MissingToken),
        Ok(Some(token)) => snapshot.bundle(token).ok_or_else(|| match snapshot.unserved(token) {
            Some((bundle, first)) => {
                if first {
                    tracing::warn!(bundle, "a request's token is one bundle {bundle:?} names, but no version of that bundle this token opens is served (it has errors, or waits for its source's first refresh: /status says which): answered 503 bundle_unavailable");
                }
                ApiError::BundleUnavailable
            }
            None => ApiError::InvalidToken,
        }),
        Err(NotText) => Err(ApiError::InvalidToken),
    }
}

/// Answers one request: the pipeline above. HEAD gets GET's status and headers,
/// `Content-Length` included, and no body (HTTP/2 rejects DATA frames on a HEAD stream). A request
/// that asked for no answer fails (HTTP/1 then closes the connection, after `reset` with an RST;
/// HTTP/2 resets the stream); one that asked for `truncate` gets half its body.
pub(crate) async fn answer(
    mut req: Request<Incoming>,
    shared: &Shared,
    connection: Option<&ConnFault>,
    peer: SocketAddr,
) -> Result<Response<ReplyBody>, FaultError> {
    let ctx = &shared.ctx;
    // Parse. A URL over the limit is refused as sent (`guard`), not as decoding shortened it.
    let url = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if url <= guard::MAX_URL_BYTES {
        if let Some(uri) = unescaped(req.uri()) {
            *req.uri_mut() = uri;
        }
    }
    let route = Route::of(req.uri().path());
    let http1 = req.version() < hyper::Version::HTTP_2;
    let head = req.method() == Method::HEAD;
    let preflight = req.method() == Method::OPTIONS && route.is_some();
    let origin = req.headers().get(ORIGIN).cloned();
    // Two different tokens are refused, not guessed between (`guard`).
    let raw_token = guard::token_header(req.headers());
    let refused = guard::refusal(&req, route);
    let unknown_body = guard::unknown_body(&req, route);
    let mut has_body = !req.body().is_end_stream();
    // Set once the body was read to its end (HTTP/1, a body sent): see `CONNECTION` below.
    let mut ended: Option<Arc<AtomicBool>> = None;
    // Authorise: the request's one token lookup, in the snapshot it holds throughout.
    let snapshot = shared.store.snapshot();
    let bundle = raw_token.and_then(|raw| authorise(Token::from_header(raw), &snapshot));
    let source = bundle.as_ref().ok().and_then(|b| b.source.as_deref());
    // Recorded once: below, or when hyper drops this future first (the client went away).
    let mut outcome = Outcome::begin(&req, route, bundle.ok(), shared, peer);
    // Route, simulate, represent.
    let Handled {
        response,
        reference,
        body,
        fault,
    } = match refused {
        Some(e) => Handled::plain(router::error(e)),
        // A body of unknown length where none is read: read up to the limit, then answered
        // as without one (an empty chunked body on a GET), or 413.
        None if unknown_body => {
            let (parts, body) = req.into_parts();
            let limit = guard::SMALL_BODY_LIMIT as usize;
            let body = DeadlineBody::new(body, shared.body_timeout);
            match router::prefix(body, limit + 1).await {
                Ok(read) if read.len() > limit => {
                    Handled::plain(router::error(ApiError::BodyTooLarge))
                }
                Err(ApiError::BodyTimeout) => Handled::plain(router::error(ApiError::BodyTimeout)),
                // Read whole, or broken off (the connection is closed after the answer then).
                read => {
                    has_body = read.is_err();
                    let req = Request::from_parts(parts, http_body_util::Empty::<Bytes>::new());
                    router::respond(req, route, bundle, &snapshot, ctx, peer.ip()).await
                }
            }
        }
        None => {
            ended = (http1 && has_body).then(Arc::default);
            let req = req.map(|b| DeadlineBody::new(b, shared.body_timeout).telling(ended.clone()));
            router::respond(req, route, bundle, &snapshot, ctx, peer.ip()).await
        }
    };
    let unanswered = matches!(fault, Some(Fault::Reset | Fault::Empty));
    let mut res = response.map(|body| match (head, fault) {
        (true, _) => ReplyBody::full(Payload::default()),
        (false, Some(Fault::Truncate)) => ReplyBody::truncated(body),
        (false, _) => ReplyBody::full(body),
    });
    res.headers_mut().insert(SERVER, SERVER_NAME);
    if let Some(source) = source {
        say_age(source, res.headers_mut());
    }
    let body_read = ended.is_some_and(|e| e.load(Ordering::Acquire));
    if http1 && has_body && !body_read {
        // A body not read to its end (refused before it, or sent where none is used) may still
        // be arriving, slowly or without end: close rather than read it for the next request.
        // One read whole leaves the connection ready, whatever the answer (a 4xx too).
        res.headers_mut().insert(CONNECTION, CLOSE);
    }
    if route.is_some_and(|r| !r.cross_origin()) {
        // No CORS headers: no page of another origin reads an admin answer (`http::admin`),
        // the metrics or the status page.
    } else if preflight && res.status() == StatusCode::NO_CONTENT {
        let methods = route.map_or(HeaderValue::from_static("GET, HEAD"), |r| {
            router::methods(r, false)
        });
        ctx.cors
            .apply_preflight(origin.as_ref(), methods, res.headers_mut());
    } else {
        ctx.cors.apply(origin.as_ref(), res.headers_mut());
    }
    // Record. No status line is sent for an unanswered request: it counts as status 0.
    let sent = if unanswered || head {
        0
    } else {
        res.body().to_send()
    };
    outcome.record(
        if unanswered { 0 } else { res.status().as_u16() },
        reference,
        body,
        sent,
    );
    match fault {
        Some(fault @ (Fault::Reset | Fault::Empty)) => {
            if let (Fault::Reset, true, Some(connection)) = (fault, http1, connection) {
                connection.reset_on_close();
            }
            Err(FaultError(fault))
        }
        _ => {
            if let (true, Some(connection)) = (http1, connection) {
                res.body_mut().cut_after_half(connection);
            }
            Ok(res)
        }
    }
}

/// The request's URI with each percent-encoded unreserved character (a letter, a digit, `-`,
/// `.`, `_`, `~`) of its path decoded, when it has one: RFC 3986 §6.2.2.2 makes
/// `/api/v1/%65vent` the same resource as `/api/v1/event`, and the platform's server decodes
/// it. Every other encoding stays as sent (`%2F` is not a segment's end). The routes, the ids
/// they take, the log and the journal all see the decoded path.
fn unescaped(uri: &Uri) -> Option<Uri> {
    let path = uri.path();
    if !path.contains('%') {
        return None;
    }
    let hex = |b: Option<&u8>| b.and_then(|&b| char::from(b).to_digit(16));
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let unreserved = match (b, hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
            (b'%', Some(high), Some(low)) => u8::try_from(high * 16 + low)
                .ok()
                .filter(|c| c.is_ascii_alphanumeric() || b"-._~".contains(c)),
            _ => None,
        };
        match unreserved {
            Some(c) => {
                decoded.push(c);
                i += 3;
            }
            None => {
                decoded.push(b);
                i += 1;
            }
        }
    }
    if decoded.len() == bytes.len() {
        return None;
    }
    if let Some(query) = uri.query() {
        decoded.push(b'?');
        decoded.extend_from_slice(query.as_bytes());
    }
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(PathAndQuery::from_maybe_shared(Bytes::from(decoded)).ok()?);
    Uri::from_parts(parts).ok()
}

/// `Eventbox-Source: offline`.
const OFFLINE: HeaderValue = HeaderValue::from_static("offline");

/// The headers of an answer from a bundle that names a source: `Age` (RFC 9111: whole seconds
/// since the source last confirmed the snapshot) when known, and `Eventbox-Source: offline`
/// while the source is offline. Two atomic loads and an integer.
fn say_age(source: &crate::kiosk::SourceHealth, headers: &mut hyper::HeaderMap) {
    if let Some(age) = source.age_seconds(chrono::Utc::now()) {
        headers.insert(hyper::header::AGE, HeaderValue::from(age));
    }
    if source.is_offline() {
        headers.insert(SOURCE_HEADER, OFFLINE);
    }
}

/// The header that says the source is offline.
pub(crate) const SOURCE_HEADER: hyper::header::HeaderName =
    hyper::header::HeaderName::from_static("eventbox-source");

/// The status recorded for a request whose client went away before its answer was ready (a
/// timeout during a simulated delay, say): nginx's "client closed request".
pub(crate) const CLIENT_CLOSED: u16 = 499;

/// A query string for the access log and the journal, with the value of any parameter whose
/// name suggests a secret (it holds `token`, `key`, `secret`, `passw`, `pwd`, `auth`,
/// `credential` or `signature`, or is `sig`) replaced by `REDACTED`. Pairs are split at `&` and
/// at `;`, which some proxies and frameworks take as a separator too.
fn redacted(query: &str) -> String {
    const SECRET: [&str; 8] = [
        "token",
        "key",
        "secret",
        "passw",
        "pwd",
        "auth",
        "credential",
        "signature",
    ];
    let secret = |name: &str| {
        // The name as the server reads it: `%74oken` is `token`.
        form_urlencoded::parse(name.as_bytes())
            .next()
            .is_some_and(|(n, _)| {
                let n = n.to_ascii_lowercase();
                n == "sig" || SECRET.iter().any(|s| n.contains(s))
            })
    };
    // Split at `&`, then at `;` inside: a secret's value is redacted up to the next `&`, so a
    // value holding a `;` (`token=ab;cd`) shows none of itself either way it is read.
    query
        .split('&')
        .map(|piece| {
            let mut kept = Vec::new();
            for pair in piece.split(';') {
                match pair.split_once('=') {
                    Some((name, _)) if secret(name) => {
                        kept.push(format!("{name}=REDACTED"));
                        break;
                    }
                    _ => kept.push(pair.to_string()),
                }
            }
            kept.join(";")
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// What the access log and the journal show of a request (made only when one of them is on).
#[derive(Debug)]
struct Seen {
    /// When it arrived, for the journal only.
    arrived: Option<chrono::DateTime<chrono::Utc>>,
    method: Method,
    path: String,
    query: Option<String>,
    /// The token's first characters ([`token_head`]); none without a token. The whole token is
    /// only looked at, never kept.
    token: Option<String>,
    bundle: Option<Arc<str>>,
    /// For the access log: the client's address and `User-Agent`.
    client: SocketAddr,
    user_agent: Option<String>,
}

/// One request being answered: recorded (metrics, access log, journal) exactly once, by
/// [`Outcome::record`] when the answer is ready, or when dropped before that (hyper drops the
/// service's future when the client closes the connection or resets the stream) with status
/// [`CLIENT_CLOSED`] and the time taken so far.
struct Outcome<'a> {
    shared: &'a Shared,
    start: Instant,
    route: Option<Route>,
    /// The journal, when on and the request is not for `/_journal` itself.
    journal: Option<&'a Journal>,
    seen: Option<Seen>,
    recorded: bool,
}

impl<'a> Outcome<'a> {
    fn begin(
        req: &Request<Incoming>,
        route: Option<Route>,
        bundle: Option<&Prepared>,
        shared: &'a Shared,
        client: SocketAddr,
    ) -> Outcome<'a> {
        let start = Instant::now();
        let journal = shared.ctx.journal.as_deref().filter(|_| {
            let read = matches!(*req.method(), Method::GET | Method::HEAD);
            route
                .and_then(Route::operation)
                .is_none_or(|op| op.journaled(read))
        });
        let seen = (shared.access_log || journal.is_some()).then(|| {
            let raw = req.headers().get(TOKEN_HEADER).map(HeaderValue::as_bytes);
            let token = String::from_utf8_lossy(raw.unwrap_or_default().trim_ascii());
            Seen {
                arrived: journal.map(|_| chrono::Utc::now()),
                method: req.method().clone(),
                path: req.uri().path().to_string(),
                query: req.uri().query().map(redacted),
                bundle: bundle.map(|b| Arc::clone(&b.name)),
                token: (!token.is_empty()).then(|| token_head(&token)),
                client,
                user_agent: req
                    .headers()
                    .get(USER_AGENT)
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
            }
        });
        Outcome {
            shared,
            start,
            route,
            journal,
            seen,
            recorded: false,
        }
    }

    /// Records the request as answered with `status` (0: no answer sent); `reference` is the
    /// payment reference the router found and `body` the request body it read, for the journal.
    fn record(&mut self, status: u16, reference: Option<Box<str>>, body: Option<Bytes>, sent: u64) {
        self.recorded = true;
        let took = self.start.elapsed();
        let endpoint = Route::label(self.route);
        self.shared
            .ctx
            .metrics
            .observe_request(endpoint, status, took);
        let Some(seen) = self.seen.take() else {
            return;
        };
        if self.shared.access_log {
            tracing::info!(
                target: "eventbox::access",
                client = %seen.client,
                method = %seen.method,
                path = %seen.path,
                query = %seen.query.as_deref().unwrap_or("-"),
                status,
                bytes = sent,
                duration_us = took.as_micros() as u64,
                user_agent = seen.user_agent.as_deref().unwrap_or("-"),
                bundle = seen.bundle.as_deref().unwrap_or("-"),
                token = %seen.token.as_deref().map_or("-".to_string(), hint_of_head),
                "request"
            );
        }
        if let (Some(journal), Some(arrived)) = (self.journal, seen.arrived) {
            journal.record(journal::Entry {
                time: arrived,
                method: seen.method.to_string(),
                path: seen.path,
                query: seen.query,
                bundle: seen.bundle,
                token: seen.token,
                status,
                duration: took,
                reference,
                body,
                body_cut: false,
            });
        }
    }
}

impl Drop for Outcome<'_> {
    fn drop(&mut self) {
        if self.recorded {
            return;
        }
        // As for a details request given no real answer: the query's reference, if any.
        let by_reference = self.route.is_some_and(Route::by_reference);
        let reference = match (&self.seen, self.journal) {
            (Some(seen), Some(_)) if by_reference => {
                details::from_query(seen.query.as_deref()).map(String::into_boxed_str)
            }
            _ => None,
        };
        self.record(CLIENT_CLOSED, reference, None, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_unreserved_characters_of_the_path_are_decoded_and_nothing_else() {
        let decoded = |uri: &str| {
            let uri: Uri = uri.parse().expect("a URI");
            unescaped(&uri).map(|u| u.to_string())
        };
        assert_eq!(decoded("/api/v1/%65vent").as_deref(), Some("/api/v1/event"));
        assert_eq!(
            decoded("/api/v1/attendees/%31%32?x=%31").as_deref(),
            Some("/api/v1/attendees/12?x=%31")
        );
        assert_eq!(decoded("/a%2d%2E%5F%7e%41").as_deref(), Some("/a-._~A"));
        assert_eq!(
            decoded("http://h:1/api/v1/%45VENT").as_deref(),
            Some("http://h:1/api/v1/EVENT")
        );
        // Reserved or other characters, and broken escapes, stay as sent.
        for uri in [
            "/api/v1/event",
            "/api%2Fv1/event",
            "/a%20b",
            "/a%",
            "/a%4",
            "/a%G1",
            "/a%+1",
            "/a?%65=1",
        ] {
            assert_eq!(decoded(uri), None, "{uri}");
        }
    }

    #[test]
    fn secrets_in_the_query_are_redacted() {
        assert_eq!(
            redacted("reference=PG1&token=abc&api_key=k&x"),
            "reference=PG1&token=REDACTED&api_key=REDACTED&x"
        );
        assert_eq!(
            redacted("Authorization-Token=s"),
            "Authorization-Token=REDACTED"
        );
        assert_eq!(
            redacted("%74oken=s&api%5Fkey=k&Pass%77ord=p&reference=PG%31"),
            "%74oken=REDACTED&api%5Fkey=REDACTED&Pass%77ord=REDACTED&reference=PG%31"
        );
        assert_eq!(
            redacted("a=1;token=s;b=2&sig=x&pwd=p&passwd=q&credentials=c&design=d&"),
            "a=1;token=REDACTED&sig=REDACTED&pwd=REDACTED&passwd=REDACTED&\
             credentials=REDACTED&design=d&"
        );
        // A value holding `;` shows none of itself.
        assert_eq!(redacted("token=ab;cd&x=1"), "token=REDACTED&x=1");
    }
}
