//! The HTTP side of `pull`: one reqwest client (rustls, gzip, HTTP/2 when offered) and the retry
//! policy around each request.
//!
//! A request is retried on a timeout, a connection or transfer error (not a TLS handshake the
//! server's certificate failed, too many redirects or a request that cannot be built), 429 and
//! 5xx, with exponential backoff and jitter, at most `retries` times; `Retry-After` (seconds or an
//! HTTP-date) replaces the backoff, capped by `max_retry_wait`. 401 ends the pull at once (the
//! token was refused; retrying cannot help), and so does any other 4xx. Redirects are followed
//! only within the same origin: the token is a custom header, which an HTTP client does not strip
//! when a redirect leaves for another host.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::{BackoffBuilder, Retryable};
use bytes::Bytes;
use reqwest::header::{
    HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE, ETAG, IF_NONE_MATCH, RETRY_AFTER,
};
use reqwest::StatusCode;

use super::progress::Progress;
use super::{PullError, PullOptions};
use crate::model::formats::RetryAfter;
use crate::problem::quoted;
use crate::token::{token_hint, APP_HEADER, TOKEN_HEADER};

/// Sends the pull's requests, retrying what may succeed on a second try.
pub(crate) struct Fetcher {
    client: reqwest::Client,
    token: HeaderValue,
    /// `Authorization-App`, when the company's key is given (sent with every request).
    app: Option<HeaderValue>,
    /// The token, trimmed, to find in server text ([`Fetcher::redact`]).
    token_text: String,
    token_hint: String,
    retries: u32,
    timeout: Duration,
    backoff: Duration,
    max_wait: Duration,
    requests: AtomicU64,
    retried: AtomicU64,
    /// The largest body taken, as decoded (`--max-file-bytes`).
    max_bytes: u64,
    /// No request is sent before this instant: set by a 429 (or a `Retry-After` on a 5xx) for
    /// every worker, not only the one that was told, since the limit is the server's.
    not_before: std::sync::Mutex<Option<tokio::time::Instant>>,
}

/// A successful answer: its body (`None`: 304, the copy named by `If-None-Match` is current) and
/// its `ETag`; or a 404 in one of the platform's own shapes, which may mean "none" (an empty
/// list's envelope, or its error envelope with `erros`), with the error it is where the caller
/// takes it for no answer (`not_found`).
#[derive(Debug)]
pub(crate) struct Got {
    pub(crate) body: Option<Bytes>,
    pub(crate) etag: Option<String>,
    pub(crate) not_found: Option<PullError>,
}

/// The content type of an answer that is a web page, not the API's JSON: a login page, a
/// captive portal, a proxy's error page, served with 200.
pub(crate) fn html(headers: &HeaderMap) -> Option<String> {
    let kind = headers.get(CONTENT_TYPE)?.to_str().ok()?;
    let essence = kind.split(';').next().unwrap_or_default().trim();
    matches!(
        essence.to_ascii_lowercase().as_str(),
        "text/html" | "application/xhtml+xml"
    )
    .then(|| kind.to_string())
}

/// How one attempt went, when it did not succeed.
enum Failure {
    /// Worth another try, after `after` when the server said so, else after the backoff, and
    /// no sooner than `held` (every worker is held that long: a 429 without `Retry-After`).
    Retry {
        reason: String,
        after: Option<Duration>,
        held: Duration,
    },
    Fatal(PullError),
}

impl Fetcher {
    pub(crate) fn new(opts: &PullOptions) -> Result<Fetcher, PullError> {
        let token = opts.token.expose().trim();
        if token.is_empty() {
            return Err(PullError::BadToken("the token is blank".into()));
        }
        let mut value = HeaderValue::from_str(token).map_err(|_| {
            PullError::BadToken("the token holds characters an HTTP header cannot carry".into())
        })?;
        value.set_sensitive(true);
        let app = match &opts.app {
            None => None,
            Some(app) if app.expose().trim().is_empty() => {
                return Err(PullError::BadApp("the app key is blank".into()));
            }
            Some(app) => {
                let mut v = HeaderValue::from_str(app.expose().trim()).map_err(|_| {
                    PullError::BadApp(
                        "the app key holds characters an HTTP header cannot carry".into(),
                    )
                })?;
                v.set_sensitive(true);
                Some(v)
            }
        };
        let same_origin = reqwest::redirect::Policy::custom(|attempt| {
            let first = attempt.previous().first();
            let same = first.is_some_and(|f| f.origin() == attempt.url().origin());
            if !same {
                attempt.stop()
            } else if attempt.previous().len() > 5 {
                attempt.error("more than 5 redirects")
            } else {
                attempt.follow()
            }
        });
        let client = reqwest::Client::builder()
            .connect_timeout(opts.connect_timeout)
            .timeout(opts.timeout)
            .redirect(same_origin)
            .user_agent(concat!("eventbox-pull/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| PullError::Client(e.to_string()))?;
        Ok(Fetcher {
            client,
            token: value,
            app,
            token_text: token.to_string(),
            token_hint: token_hint(token),
            retries: opts.retries,
            timeout: opts.timeout,
            backoff: opts.backoff,
            max_wait: opts.max_retry_wait,
            requests: AtomicU64::new(0),
            retried: AtomicU64::new(0),
            max_bytes: opts.max_file_bytes,
            not_before: std::sync::Mutex::new(None),
        })
    }

    /// Requests sent, retries included.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Retries made.
    pub(crate) fn retries(&self) -> u64 {
        self.retried.load(Ordering::Relaxed)
    }

    /// GETs `url` (with `{"reference": ...}` as a JSON body for the details endpoint) and
    /// returns the body, decoded from gzip when it came so. backon runs the retries: only what
    /// another try may mend is tried again, at most `retries` times, after the backoff's wait
    /// or the server's `Retry-After` (capped by `max_retry_wait`). (`pull` itself calls
    /// [`Fetcher::get_if`].)
    #[cfg(test)]
    pub(crate) async fn get(
        &self,
        url: &str,
        reference: Option<&str>,
        progress: &Progress,
    ) -> Result<Bytes, PullError> {
        let got = self.get_if(url, reference, None, progress).await?;
        if let Some(e) = got.not_found {
            return Err(e);
        }
        Ok(got.body.unwrap_or_default())
    }

    /// [`Fetcher::get`], conditional: with `etag`, sends `If-None-Match` and takes a 304 as
    /// "unchanged" (`body` is then `None`). The answer's `ETag`, if any, comes back with it.
    pub(crate) async fn get_if(
        &self,
        url: &str,
        reference: Option<&str>,
        etag: Option<&str>,
        progress: &Progress,
    ) -> Result<Got, PullError> {
        let mut retried: u32 = 0;
        let outcome = (|| self.once(url, reference, etag))
            .retry(self.waits())
            .sleep(tokio::time::sleep)
            .when(|f| matches!(f, Failure::Retry { .. }))
            .adjust(|f, wait| match f {
                Failure::Retry {
                    after: Some(after), ..
                } => wait.map(|_| (*after).min(self.max_wait)),
                // As the hold itself, never past --max-retry-wait.
                Failure::Retry { held, .. } => wait.map(|w| w.max((*held).min(self.max_wait))),
                Failure::Fatal(_) => wait,
            })
            .notify(|f, wait| {
                retried += 1;
                self.retried.fetch_add(1, Ordering::Relaxed);
                if let Failure::Retry { reason, .. } = f {
                    progress.retry(&self.shown(url, reference), reason, wait);
                }
            })
            .await;
        match outcome {
            Ok(body) => Ok(body),
            Err(Failure::Fatal(e)) => Err(e),
            Err(Failure::Retry { reason, .. }) => Err(PullError::GaveUp {
                url: self.shown(url, reference),
                attempts: retried + 1,
                last: reason,
            }),
        }
    }

    /// The waits between tries: `backoff × 2^n`, capped by `max_retry_wait`, with jitter that
    /// draws each wait from the upper half of that (so many workers retrying at once spread out
    /// and no wait passes the cap). backon's jitter adds up to 100 % to a delay, so the delays
    /// given to it are halves: from `backoff / 2` doubling up to `max_retry_wait / 2`.
    fn waits(&self) -> backon::ExponentialBackoff {
        // A cap below the first backoff (`--max-retry-wait 100ms`) caps that one too.
        backon::ExponentialBuilder::new()
            .with_min_delay(self.backoff.min(self.max_wait) / 2)
            .with_factor(2.0)
            .with_max_delay(self.max_wait / 2)
            .with_jitter()
            .with_max_times(self.retries as usize)
            .build()
    }

    async fn once(
        &self,
        url: &str,
        reference: Option<&str>,
        etag: Option<&str>,
    ) -> Result<Got, Failure> {
        self.wait_turn().await;
        self.requests.fetch_add(1, Ordering::Relaxed);
        let mut request = self
            .client
            .get(url)
            .header(ACCEPT, "application/json")
            .header(TOKEN_HEADER, self.token.clone());
        if let Some(app) = &self.app {
            request = request.header(APP_HEADER, app.clone());
        }
        if let Some(tag) = etag {
            request = request.header(IF_NONE_MATCH, tag);
        }
        if let Some(r) = reference {
            let body = serde_json::json!({ "reference": r }).to_string();
            request = request.header(CONTENT_TYPE, "application/json").body(body);
        }
        let transport = |e| self.transport(e, url, reference);
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let tag = response
            .headers()
            .get(ETAG)
            .and_then(|t| t.to_str().ok())
            .map(str::to_string);
        if status == StatusCode::NOT_MODIFIED && etag.is_some() {
            return Ok(Got {
                body: None,
                etag: tag.or_else(|| etag.map(str::to_string)),
                not_found: None,
            });
        }
        if status.is_success() {
            if let Some(kind) = html(response.headers()) {
                return Err(Failure::Fatal(PullError::NotJsonAnswer {
                    url: self.shown(url, reference),
                    content_type: quoted(&kind),
                }));
            }
            let body = self.body(response, url, reference).await?;
            return Ok(Got {
                body: Some(body),
                etag: tag,
                not_found: None,
            });
        }
        let after = retry_after(response.headers());
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .map(str::to_string);
        let (body, _) = error_body(response, ERROR_BODY_LIMIT).await;
        let shown = self.shown(url, reference);
        if status == StatusCode::NOT_FOUND && (empty_list(&body) || platform_error(&body)) {
            // The platform's own 404s (more-api.md: attendees' "Not found: 404 with {"data": [],
            // "count": 0}"; observed.md: the error envelope for /event, /payments and a
            // detail): the caller decides whether it means "none". The framework's
            // `{"Message": ...}` for a path it has no route for is not among them.
            let message = self.message(&body);
            return Ok(Got {
                body: Some(Bytes::from(body)),
                etag: tag,
                not_found: Some(PullError::Status {
                    url: shown,
                    status: 404,
                    message,
                }),
            });
        }
        if status == StatusCode::UNAUTHORIZED {
            // The company routes answer a wrong app key 401 too, with their own code.
            if self.app.is_some() && error_codes(&body) == ["InvalidAuthorizationApp"] {
                return Err(Failure::Fatal(PullError::AppRefused { url: shown }));
            }
            return Err(Failure::Fatal(PullError::TokenRefused {
                url: shown,
                hint: self.token_hint.clone(),
            }));
        }
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            // A 429 without Retry-After holds every worker for the first backoff: its own
            // wait is no shorter (what the retry line says), and grows as any backoff.
            let limited = status == StatusCode::TOO_MANY_REQUESTS;
            let held = match after {
                None if limited => self.backoff,
                _ => Duration::ZERO,
            };
            if limited || after.is_some() {
                self.hold_off(after.unwrap_or(self.backoff));
            }
            return Err(Failure::Retry {
                reason: format!("{status}{}", self.message(&body)),
                after,
                held,
            });
        }
        let message = match (status.is_redirection(), location) {
            (true, Some(to)) => format!(
                " (a redirect to {}, not followed: it leaves the origin, and the token would go with it)",
                quoted(&self.redact(&to))
            ),
            _ => self.message(&body),
        };
        Err(Failure::Fatal(PullError::Status {
            url: shown,
            status: status.as_u16(),
            message,
        }))
    }

    /// Waits until the server's last `Retry-After` (or a 429's backoff) has passed.
    async fn wait_turn(&self) {
        let until = *self
            .not_before
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(until) = until {
            tokio::time::sleep_until(until).await;
        }
    }

    /// Holds every request back for `wait` (capped by `max_retry_wait`), or longer when an
    /// earlier answer said so.
    fn hold_off(&self, wait: Duration) {
        let until = tokio::time::Instant::now() + wait.min(self.max_wait);
        let mut not_before = self
            .not_before
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if not_before.is_none_or(|t| t < until) {
            *not_before = Some(until);
        }
    }

    /// A successful answer's body, refused past `max_bytes` as it arrives (a body is held whole
    /// to be written; a source answering gigabytes, or a small gzip that decodes to them, must
    /// not take the memory of the server a refresh runs in).
    async fn body(
        &self,
        response: reqwest::Response,
        url: &str,
        reference: Option<&str>,
    ) -> Result<Bytes, Failure> {
        limited(response, self.max_bytes)
            .await
            .map_err(|cut| match cut {
                Cut::TooLarge => Failure::Fatal(PullError::TooLarge {
                    url: self.shown(url, reference),
                    limit: self.max_bytes,
                }),
                Cut::Transport(e) => self.transport(e, url, reference),
            })
    }

    /// Server-provided text (an error body, a `Location`, an error's causes) with every
    /// occurrence of the token replaced by its hint: a debug page that echoes request headers
    /// must not print the token.
    /// The URL for messages, the token hidden; for a detail, with its reference (hidden before
    /// it is quoted and cut, so a token across the cut is never half shown).
    fn shown(&self, url: &str, reference: Option<&str>) -> String {
        let url = self.redact(url);
        match reference {
            Some(r) => format!("{url} (reference {})", quoted(&self.redact(r))),
            None => url,
        }
    }

    fn redact(&self, text: &str) -> String {
        super::hide_token(text, &self.token_text)
    }

    /// `: "<message>"` from an error body, the token hidden (see [`server_message`]).
    fn message(&self, body: &[u8]) -> String {
        server_message(body, |text| self.redact(text))
    }

    /// A transport error: a reason to retry when another try may succeed (a timeout, a connection
    /// refused or reset, a body cut short), else fatal (a certificate or handshake the server
    /// refused, too many redirects, a request that cannot be built). Its causes on one line.
    fn transport(&self, e: reqwest::Error, url: &str, reference: Option<&str>) -> Failure {
        let retry =
            (e.is_timeout() || e.is_connect() || e.is_request() || e.is_body() || e.is_decode())
                && !e.is_builder()
                && !e.is_redirect()
                && !(e.is_connect() && tls_refused(&e));
        let reason = if e.is_timeout() {
            format!("no complete answer within {} ms", self.timeout.as_millis())
        } else {
            self.redact(&causes(e))
        };
        if retry {
            Failure::Retry {
                reason,
                after: None,
                held: Duration::ZERO,
            }
        } else {
            Failure::Fatal(PullError::Transport {
                url: self.shown(url, reference),
                reason,
            })
        }
    }
}

/// Whether a connection failed in its TLS handshake (a certificate not trusted, expired, for
/// another name; an answer that is not TLS): rustls reports it as an I/O error of kind
/// `InvalidData`, which the connector wraps in another I/O error. Retrying cannot help.
fn tls_refused(e: &reqwest::Error) -> bool {
    fn invalid_data(e: &(dyn std::error::Error + 'static)) -> bool {
        match e.downcast_ref::<std::io::Error>() {
            // An I/O error's `source` skips the error it wraps; look at that one too.
            Some(io) => {
                io.kind() == std::io::ErrorKind::InvalidData
                    || io.get_ref().is_some_and(|inner| invalid_data(inner))
            }
            None => e.source().is_some_and(invalid_data),
        }
    }
    std::error::Error::source(e).is_some_and(invalid_data)
}

/// Why [`limited`] read no body.
pub(crate) enum Cut {
    /// More than the limit: announced, or as it arrived.
    TooLarge,
    Transport(reqwest::Error),
}

/// A body, refused once past `limit` bytes as it arrives (or as announced): a body held whole
/// must not let a server answering gigabytes, or a small gzip that decodes to them, take the
/// memory of the process.
pub(crate) async fn limited(mut response: reqwest::Response, limit: u64) -> Result<Bytes, Cut> {
    if response.content_length().is_some_and(|n| n > limit) {
        return Err(Cut::TooLarge);
    }
    let mut body = bytes::BytesMut::new();
    while let Some(chunk) = response.chunk().await.map_err(Cut::Transport)? {
        if (body.len() + chunk.len()) as u64 > limit {
            return Err(Cut::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// The codes of an error body in the platform's envelope (`erros[].description`), if it is one.
fn error_codes(body: &[u8]) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        erros: Vec<Item>,
    }
    #[derive(serde::Deserialize)]
    struct Item {
        description: String,
    }
    serde_json::from_slice::<Envelope>(crate::read::without_bom(body))
        .map(|e| e.erros.into_iter().map(|i| i.description).collect())
        .unwrap_or_default()
}

/// The most of an error body that is read: enough for any message, and a server sending an
/// endless or huge error page costs neither memory nor the request's whole timeout.
const ERROR_BODY_LIMIT: usize = 4096;

/// An answer's body (an error's, or a write's short answer), at most `limit` bytes; what could
/// not be read is left. With whether it broke off (the connection closed or failed before the
/// body's end): such a body is what came, not what was sent.
pub(crate) async fn error_body(mut response: reqwest::Response, limit: usize) -> (Vec<u8>, bool) {
    let mut body = Vec::new();
    let mut broke = false;
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(_) => {
                broke = true;
                break;
            }
        }
    }
    body.truncate(limit);
    (body, broke)
}

/// A transport error with its causes on one line, without its URL (`cannot connect: client
/// error (Connect): tcp connect error: Connection refused (os error 111)`): reqwest's own text
/// alone says "error sending request" for a refused connection and a timeout alike, so one
/// that could not connect says so first, in plain words.
pub(crate) fn causes(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = match e.is_connect() {
        true => "cannot connect".to_string(),
        false => e.to_string(),
    };
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Whether an error answer's body is the platform's error envelope: an object whose `erros` is
/// a list (observed.md).
fn platform_error(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(crate::read::without_bom(body))
        .is_ok_and(|v| v.get("erros").is_some_and(serde_json::Value::is_array))
}

/// Whether an error answer's body is an empty list's envelope, `{"data": [], ...}`.
pub(crate) fn empty_list(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Envelope {
        data: Vec<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Envelope>(crate::read::without_bom(body))
        .is_ok_and(|e| e.data.is_empty())
}

/// `: "<message>"` from an error body (the service's `message`, the framework's `Message`, or
/// the text itself), passed through `redact` before it is quoted and cut, empty when there is
/// none.
fn server_message(body: &[u8], redact: impl Fn(&str) -> String) -> String {
    if body.is_empty() {
        return String::new();
    }
    let from_json = serde_json::from_slice::<serde_json::Value>(crate::read::without_bom(body))
        .ok()
        .and_then(|v| {
            ["message", "Message"]
                .iter()
                .find_map(|k| v.get(k).and_then(|m| m.as_str()).map(str::to_string))
        });
    let text = from_json.unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    format!(": {}", quoted(&redact(text.trim())))
}

/// `Retry-After` as a wait (see [`RetryAfter`]; a date in the past means now).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?;
    Some(RetryAfter::parse(text)?.wait(std::time::SystemTime::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_str(value).expect("a header"));
        h
    }

    #[test]
    fn retry_after_takes_seconds_or_an_http_date() {
        assert_eq!(retry_after(&headers("3")), Some(Duration::from_secs(3)));
        // The three date forms RFC 9110 names, all in the past: no wait.
        for past in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(retry_after(&headers(past)), Some(Duration::ZERO), "{past}");
        }
        let soon = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(120));
        let wait = retry_after(&headers(&soon)).expect("a wait");
        assert!(
            wait > Duration::from_secs(100) && wait <= Duration::from_secs(120),
            "{wait:?}"
        );
        assert_eq!(retry_after(&headers("soon")), None);
        assert_eq!(retry_after(&headers("Sun, 06 Nov 1994 25:49:37 GMT")), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn waits_double_with_jitter_stay_under_the_cap_and_end_after_the_retries() {
        let mut opts = PullOptions::new("http://h", "token", "d/x");
        opts.backoff = Duration::from_millis(100);
        opts.max_retry_wait = Duration::from_millis(1000);
        opts.retries = 8;
        let f = Fetcher::new(&opts).expect("a fetcher");
        // Many draws, so a jitter that left the upper half (or added nothing) would show.
        let mut spread = Vec::new();
        for _ in 0..50 {
            let waits: Vec<Duration> = f.waits().collect();
            assert_eq!(waits.len(), 8, "{waits:?}");
            for (attempt, wait) in waits.iter().enumerate() {
                let full = Duration::from_millis((100u64 << attempt).min(1000));
                // backon computes in f32 seconds: allow a microsecond of rounding.
                let slack = Duration::from_micros(1);
                assert!(
                    *wait + slack >= full / 2 && *wait <= full,
                    "attempt {attempt}: {wait:?} is outside {:?}..={full:?}",
                    full / 2
                );
            }
            spread.push(waits[0]);
        }
        spread.sort();
        spread.dedup();
        assert!(spread.len() > 10, "no jitter: {spread:?}");
        opts.retries = 0;
        let none = Fetcher::new(&opts).expect("a fetcher");
        assert_eq!(none.waits().count(), 0);
    }

    /// A server on 127.0.0.1:0 answering each connection with `answers[n]` (the last one
    /// again once they run out), closing after each; counts the requests.
    async fn scripted(answers: Vec<&'static str>) -> (String, std::sync::Arc<AtomicU64>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let count = std::sync::Arc::new(AtomicU64::new(0));
        let seen = std::sync::Arc::clone(&count);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let n = seen.fetch_add(1, Ordering::Relaxed) as usize;
                let answer = answers[n.min(answers.len() - 1)];
                let mut head = [0u8; 4096];
                let _ = socket.read(&mut head).await;
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.shutdown().await;
            }
        });
        (base, count)
    }

    fn quiet(base: &str, retries: u32) -> (Fetcher, Progress) {
        let mut opts = PullOptions::new(base, "token", "d/x");
        opts.retries = retries;
        opts.backoff = Duration::from_millis(10);
        opts.max_retry_wait = Duration::from_millis(100);
        let fetcher = Fetcher::new(&opts).expect("a fetcher");
        (fetcher, Progress::new(crate::pull::ProgressMode::Quiet))
    }

    /// A token inside a long reference is hidden before the reference is cut for the message:
    /// cut first, the token's start was shown past its hint.
    #[test]
    fn a_token_across_the_cut_of_a_reference_is_never_shown() {
        let opts = PullOptions::new("http://127.0.0.1:9", "secret-token-123", "d/x");
        let fetcher = Fetcher::new(&opts).expect("a fetcher");
        let reference = format!("{}secret-token-123", "a".repeat(70));
        let shown = fetcher.shown("http://h/api/v1/payments/details", Some(&reference));
        assert!(!shown.contains("secret-t"), "{shown}");
        assert!(shown.contains("secr…"), "{shown}");
    }

    #[tokio::test]
    async fn a_retry_after_past_the_cap_waits_only_the_cap() {
        let (base, count) = scripted(vec![
            "HTTP/1.1 503 Service Unavailable\r\nretry-after: 3600\r\ncontent-length: 4\r\nconnection: close\r\n\r\nbusy",
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
        ])
        .await;
        let (f, progress) = quiet(&base, 3);

        let started = std::time::Instant::now();
        let body = tokio::time::timeout(Duration::from_secs(5), f.get(&base, None, &progress))
            .await
            .expect("Retry-After is capped, not waited for an hour")
            .expect("the second try");

        assert_eq!(&body[..], b"ok");
        assert_eq!(count.load(Ordering::Relaxed), 2);
        assert_eq!((f.requests(), f.retries()), (2, 1));
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(100) && took < Duration::from_secs(5),
            "Retry-After 3600 capped at 100 ms took {took:?}"
        );
    }

    /// A 429 without Retry-After waits at least the first backoff, but never past the cap,
    /// as the hold of every worker is capped; so does a first backoff past the cap (backon's
    /// smallest delay was the backoff, whatever the cap).
    #[tokio::test]
    async fn a_429_waits_the_first_backoff_only_up_to_the_cap() {
        let (base, count) = scripted(vec![
            "HTTP/1.1 429 Too Many Requests\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
        ])
        .await;
        let mut opts = PullOptions::new(&base, "token", "d/x");
        opts.retries = 1;
        opts.backoff = Duration::from_secs(3);
        opts.max_retry_wait = Duration::from_millis(50);
        let f = Fetcher::new(&opts).expect("a fetcher");
        let progress = Progress::new(crate::pull::ProgressMode::Quiet);

        let started = std::time::Instant::now();
        let body = tokio::time::timeout(Duration::from_secs(2), f.get(&base, None, &progress))
            .await
            .expect("the wait is capped at 50 ms, not the 3 s backoff")
            .expect("the second try");

        assert_eq!(&body[..], b"ok");
        assert_eq!(count.load(Ordering::Relaxed), 2);
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[tokio::test]
    async fn only_what_another_try_may_mend_is_retried_and_the_last_reason_is_kept() {
        let (base, count) = scripted(vec![
            "HTTP/1.1 429 Too Many Requests\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\nconnection: close\r\n\r\noops",
        ])
        .await;
        let (f, progress) = quiet(&base, 2);
        let err = f.get(&base, None, &progress).await.expect_err("gives up");
        assert!(
            matches!(&err, PullError::GaveUp { attempts: 3, last, .. } if last.contains("500") && last.contains("oops")),
            "{err:?}"
        );
        assert_eq!(count.load(Ordering::Relaxed), 3);

        let (base, count) = scripted(vec![
            "HTTP/1.1 404 Not Found\r\ncontent-length: 4\r\nconnection: close\r\n\r\nnope",
        ])
        .await;
        let (f, progress) = quiet(&base, 2);
        let err = f
            .get(&base, None, &progress)
            .await
            .expect_err("not retried");
        assert!(
            matches!(err, PullError::Status { status: 404, .. }),
            "{err:?}"
        );
        assert_eq!(count.load(Ordering::Relaxed), 1);
        assert_eq!(f.retries(), 0);
    }

    #[tokio::test]
    async fn a_304_to_if_none_match_means_unchanged_and_a_web_page_is_not_an_answer() {
        let (base, _) = scripted(vec![
            "HTTP/1.1 200 OK\r\netag: \"abc\"\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            "HTTP/1.1 304 Not Modified\r\netag: \"abc\"\r\nconnection: close\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-type: Text/HTML; charset=utf-8\r\ncontent-length: 6\r\nconnection: close\r\n\r\n<html>",
        ])
        .await;
        let (f, progress) = quiet(&base, 0);

        let first = f.get_if(&base, None, None, &progress).await.expect("200");
        let second = f
            .get_if(&base, None, Some("\"abc\""), &progress)
            .await
            .expect("304");
        let page = f
            .get_if(&base, None, None, &progress)
            .await
            .expect_err("a web page");

        assert_eq!(first.body.as_deref(), Some(&b"{}"[..]));
        assert_eq!(first.etag.as_deref(), Some("\"abc\""));
        assert!(second.body.is_none(), "{second:?}");
        assert_eq!(second.etag.as_deref(), Some("\"abc\""));
        assert!(
            matches!(&page, PullError::NotJsonAnswer { content_type, .. } if content_type.contains("Text/HTML")),
            "{page:?}"
        );
    }

    #[test]
    fn error_bodies_give_their_message() {
        let b = br#"{"message": "The Authorization-Token does not open any event.", "erros": []}"#;
        let same = |t: &str| t.to_string();
        assert_eq!(
            server_message(b, same),
            ": \"The Authorization-Token does not open any event.\""
        );
        assert_eq!(server_message(b"oops\n", same), ": \"oops\"");
        assert_eq!(server_message(b"", same), "");
    }

    #[test]
    fn server_text_never_shows_the_token_whole() {
        let f = Fetcher::new(&PullOptions::new("http://h", " s3cr\"et-token\n", "d/x"))
            .expect("a fetcher");
        let echoed =
            br#"{"message": "headers: Authorization-Token: s3cr\"et-token; again s3cr\"et-token"}"#;
        let shown = f.message(echoed);
        assert_eq!(
            shown,
            r#": "headers: Authorization-Token: s3cr…; again s3cr…""#
        );
        assert_eq!(f.redact("x s3cr\"et-token"), "x s3cr…");
    }
}
