//! Request → response: a plain function of the request, its route and the snapshot.
//!
//! Checks run in the order the error contract fixes: path, method, token, then the request's own
//! parameters. Every success body of the API is a prepared `Bytes`; answering is a lookup and a
//! clone. `/metrics` is the one route that encodes per request (it is scraped, not polled).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Body;
use hyper::header::{
    HeaderMap, HeaderValue, ACCEPT_ENCODING, ALLOW, CACHE_CONTROL, CONTENT_ENCODING,
    CONTENT_LENGTH, CONTENT_TYPE, ETAG, HOST, IF_NONE_MATCH, RETRY_AFTER, VARY,
};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode};

use super::control::{Control, Fault};
use super::cors::Cors;
use super::errors::{not_found_body, simulated_error_body, ApiError, BODY_LIMIT};
use super::fault::ReplyBody;
use super::journal::Journal;
use super::{details, negotiate};
use crate::api::Operation;
use crate::metrics::{self, Metrics};
use crate::prepare::{self, Answer, Answers, Encoding, Prepared};
use crate::store::Snapshot;
use crate::token::{NotText, Token};

/// The header that carries the token.
pub const TOKEN_HEADER: &str = "authorization-token";

const JSON: HeaderValue = HeaderValue::from_static("application/json; charset=utf-8");
const GET_HEAD: HeaderValue = HeaderValue::from_static("GET, HEAD");
const GET_HEAD_OPTIONS: HeaderValue = HeaderValue::from_static("GET, HEAD, OPTIONS");
const HEALTHY: &[u8] = b"{\"status\":\"ok\"}";
const READY: &[u8] = b"{\"status\":\"ready\"}";
/// Clients may keep answers but must revalidate (cheap: ETag and 304), so a reload shows at once.
const NO_CACHE: HeaderValue = HeaderValue::from_static("no-cache");
const ACCEPT_ENCODING_VARY: HeaderValue = HeaderValue::from_static("accept-encoding");

pub use crate::api::Route;

/// The OpenAPI document (see [`crate::prepare::openapi`]).
pub use crate::prepare::OPENAPI;

/// What the router needs beyond the request and the snapshot; one per server.
#[derive(Debug, Clone)]
pub struct Context {
    /// The server's own address, for the unknown-path answer when a request has no Host.
    pub local: SocketAddr,
    pub metrics: Arc<Metrics>,
    /// Whether to send compressed bodies.
    pub compression: bool,
    /// Which origins may read answers.
    pub cors: Cors,
    /// Whether `X-Eventbox-*` control headers are obeyed.
    pub allow_control_headers: bool,
    /// The longest delay simulated (control headers and `[simulate]` alike).
    pub max_delay: std::time::Duration,
    /// The request journal, when on.
    pub journal: Option<Arc<Journal>>,
}

/// Put in a response's extensions when the request asked for a payment reference (for the
/// journal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference(pub Box<str>);

/// Put in a response's extensions when no answer must be sent (`X-Eventbox-Fault: reset` or
/// `empty`); the server fails the request instead (see `fault`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unanswered(pub Fault);

fn json(status: StatusCode, body: Bytes) -> Response<Bytes> {
    let len = HeaderValue::from(body.len());
    let mut res = Response::new(body);
    *res.status_mut() = status;
    let h = res.headers_mut();
    h.insert(CONTENT_TYPE, JSON);
    h.insert(CONTENT_LENGTH, len);
    res
}

fn error(e: ApiError) -> Response<Bytes> {
    let mut res = json(e.status(), e.body());
    match e {
        ApiError::MethodNotAllowed => {
            res.headers_mut().insert(ALLOW, GET_HEAD);
        }
        ApiError::NotReady => {
            res.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        _ => {}
    }
    res
}

/// The full URL of a request, as the service's framework quotes it.
fn full_url<B>(req: &Request<B>, ctx: &Context) -> String {
    let uri = req.uri();
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let host = uri
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| {
            req.headers()
                .get(HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        })
        .unwrap_or_else(|| ctx.local.to_string());
    format!("http://{host}{path}")
}

/// The token of a request, trimmed; empty when absent.
pub fn token_of<B>(req: &Request<B>) -> &[u8] {
    req.headers()
        .get(TOKEN_HEADER)
        .map(|v| v.as_bytes().trim_ascii())
        .unwrap_or_default()
}

/// Answers one request from one snapshot; `route` is `Route::of` the request's path. HEAD gets
/// GET's status and headers, `Content-Length` included, and no body (HTTP/2 rejects DATA frames
/// on a HEAD stream). A request that asked for `X-Eventbox-Fault: truncate` gets half its body;
/// one that asked for `reset` or `empty` gets an [`Unanswered`] mark for the server to act on.
pub async fn handle<B>(
    req: Request<B>,
    route: Option<Route>,
    snapshot: &Snapshot,
    ctx: &Context,
) -> Response<ReplyBody>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let head = req.method() == Method::HEAD;
    let res = answer(req, route, snapshot, ctx).await;
    let truncate = res.extensions().get::<Fault>() == Some(&Fault::Truncate);
    res.map(|body| match (head, truncate) {
        (true, _) => ReplyBody::full(Bytes::new()),
        (false, true) => ReplyBody::truncated(body),
        (false, false) => ReplyBody::full(body),
    })
}

async fn answer<B>(
    req: Request<B>,
    route: Option<Route>,
    snapshot: &Snapshot,
    ctx: &Context,
) -> Response<Bytes>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Some(route) = route else {
        return json(StatusCode::NOT_FOUND, not_found_body(&full_url(&req, ctx)));
    };
    let index = match (route, route.operation()) {
        // Its own methods (DELETE too), and no preflight: answered before the checks below.
        (_, Some(Operation::Journal)) => return journal(req.method(), ctx.journal.as_deref()),
        // A CORS preflight: no token (browsers send none), the allow headers added by the server.
        _ if req.method() == Method::OPTIONS && ctx.cors.is_on() => {
            let mut res = Response::new(Bytes::new());
            *res.status_mut() = StatusCode::NO_CONTENT;
            res.headers_mut().insert(ALLOW, GET_HEAD_OPTIONS);
            return res;
        }
        _ if req.method() != Method::GET && req.method() != Method::HEAD => {
            return error(ApiError::MethodNotAllowed)
        }
        (_, Some(Operation::Healthz)) => return json(StatusCode::OK, Bytes::from_static(HEALTHY)),
        (_, Some(Operation::Metrics)) => {
            let mut res = json(StatusCode::OK, Bytes::from(ctx.metrics.render()));
            res.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(metrics::CONTENT_TYPE),
            );
            return res;
        }
        (_, Some(Operation::OpenApi)) => return represent(req.headers(), prepare::openapi(), ctx),
        _ if !snapshot.is_ready() => return error(ApiError::NotReady),
        (_, Some(Operation::Readyz)) => return json(StatusCode::OK, Bytes::from_static(READY)),
        (_, Some(Operation::Status)) => return json(StatusCode::OK, snapshot.status().clone()),
        (Route::Api(index), None) => index,
        (Route::Operation(_), None) => return error(ApiError::NotReady),
    };
    let bundle = match Token::from_header(req.headers().get(TOKEN_HEADER).map(|v| v.as_bytes())) {
        Ok(None) => return error(ApiError::MissingToken),
        Ok(Some(token)) => snapshot.bundle(&token),
        Err(NotText) => None,
    };
    let Some(bundle) = bundle else {
        return error(ApiError::InvalidToken);
    };
    let control = if ctx.allow_control_headers {
        match Control::from_headers(req.headers(), ctx.max_delay) {
            Ok(c) => c,
            Err(e) => return error(e),
        }
    } else {
        Control::default()
    };
    // For the journal: the reference of a details request that gets no real answer (a fault, a
    // simulated error) is the query's, if any; a real answer's is the one it looked up.
    let asked = (route.by_reference() && ctx.journal.is_some())
        .then(|| details::from_query(req.uri().query()))
        .flatten();
    let mut res = simulated(req, index, bundle, control, ctx).await;
    if let Some(fault) = control.fault {
        res.extensions_mut().insert(fault);
    }
    if let (Some(r), None) = (asked, res.extensions().get::<Reference>()) {
        res.extensions_mut().insert(Reference(r.into_boxed_str()));
    }
    res
}

/// The API answer after the simulation asked for: the delay (the control header's, else the
/// bundle's draw, capped by `--max-delay`), then no answer, a simulated error or the real one.
async fn simulated<B>(
    req: Request<B>,
    index: usize,
    bundle: &Prepared,
    control: Control,
    ctx: &Context,
) -> Response<Bytes>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let draw = bundle.simulation.as_ref().map(|s| s.draw(index));
    let delay = control
        .delay
        .or(draw.map(|d| d.delay))
        .map(|d| d.min(ctx.max_delay));
    if let Some(delay) = delay.filter(|d| !d.is_zero()) {
        tokio::time::sleep(delay).await;
    }
    if let Some(fault @ (Fault::Reset | Fault::Empty)) = control.fault {
        if fault == Fault::Empty {
            // Bytes left unread in the socket would turn the close into a reset: read the body
            // (up to the cap) so the client sees an orderly close.
            let _ = Limited::new(req.into_body(), BODY_LIMIT).collect().await;
        }
        let mut res = Response::new(Bytes::new());
        res.extensions_mut().insert(Unanswered(fault));
        return res;
    }
    let status = control.status.or(draw.and_then(|d| d.error));
    if let Some(status) = status {
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        if let Some(body) = simulated_error_body(code.as_u16()) {
            return json(code, body);
        }
    }
    let (parts, request_body) = req.into_parts();
    // The reference looked up, kept for the journal only.
    let mut reference = None;
    let keep = ctx.journal.is_some().then_some(&mut reference);
    let found = match bundle.answers(index) {
        Some(Answers::One(body)) => Ok(Answer::Prepared(body)),
        Some(Answers::ByReference(_)) => {
            payment_details(&parts, request_body, bundle, index, keep).await
        }
        // Every prepared bundle has a slot per table entry.
        None => Err(ApiError::NotReady),
    };
    let mut res = match found {
        Ok(body) => represent(&parts.headers, &body, ctx),
        Err(e) => error(e),
    };
    if let Some(r) = reference {
        res.extensions_mut().insert(Reference(r));
    }
    res
}

/// `/_journal`: GET lists the requests kept, DELETE forgets them; 404 when the journal is off.
fn journal(method: &Method, journal: Option<&Journal>) -> Response<Bytes> {
    let Some(journal) = journal else {
        return error(ApiError::JournalDisabled);
    };
    match *method {
        Method::GET | Method::HEAD => json(StatusCode::OK, journal.body()),
        Method::DELETE => {
            journal.clear();
            let mut res = Response::new(Bytes::new());
            *res.status_mut() = StatusCode::NO_CONTENT;
            res
        }
        _ => {
            let mut res = error(ApiError::MethodNotAllowed);
            res.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD, DELETE"));
            res
        }
    }
}

/// The answer for a prepared body: the encoding `Accept-Encoding` picks, its `ETag`, and 304 when
/// `If-None-Match` names that tag. No compression happens here unless a client refuses identity
/// for a body still being compressed in the background.
fn represent(headers: &HeaderMap, body: &prepare::Body, ctx: &Context) -> Response<Bytes> {
    let accept = headers.get(ACCEPT_ENCODING).and_then(|v| v.to_str().ok());
    let Some(wanted) = negotiate::choose(accept, ctx.compression, body.is_small()) else {
        let mut res = error(ApiError::NotAcceptable);
        res.headers_mut().insert(VARY, ACCEPT_ENCODING_VARY);
        return res;
    };
    let (encoding, (bytes, etag)) = match body.ready(wanted) {
        Some(ready) => (wanted, ready),
        None if negotiate::accepts_identity(accept) => {
            (Encoding::Identity, body.encoded(Encoding::Identity))
        }
        // Identity refused and the variant not made yet: a small body is compressed now (a few
        // ms); a large one is being compressed in the background, so ask the client to retry
        // rather than hold a worker for seconds.
        None if body.identity().len() > prepare::EAGER_COMPRESS_MAX => {
            let mut res = error(ApiError::NotReady);
            res.headers_mut().insert(VARY, ACCEPT_ENCODING_VARY);
            return res;
        }
        None => (wanted, body.encoded(wanted)),
    };
    let matched = match headers.get(IF_NONE_MATCH).and_then(|v| v.to_str().ok()) {
        Some(inm) => negotiate::none_match(inm, etag.to_str().unwrap_or_default()),
        None => false,
    };
    let mut res = if matched {
        let mut res = Response::new(Bytes::new());
        *res.status_mut() = StatusCode::NOT_MODIFIED;
        res
    } else {
        json(StatusCode::OK, bytes.clone())
    };
    let h = res.headers_mut();
    h.insert(ETAG, etag.clone());
    h.insert(CACHE_CONTROL, NO_CACHE);
    h.insert(VARY, ACCEPT_ENCODING_VARY);
    if let (Some(name), false) = (encoding.header(), matched) {
        h.insert(CONTENT_ENCODING, HeaderValue::from_static(name));
    }
    res
}

/// The details answer: the reference from the query, else from the body (read up to the cap).
/// The reference found is left in `asked`, if given (only the journal wants it).
async fn payment_details<'a, B>(
    parts: &Parts,
    body: B,
    bundle: &'a Prepared,
    index: usize,
    asked: Option<&mut Option<Box<str>>>,
) -> Result<Answer<'a>, ApiError>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let reference = match details::from_query(parts.uri.query()) {
        Some(r) => r,
        None => {
            let declared = parts
                .headers
                .get(CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            if declared.is_some_and(|n| n > BODY_LIMIT as u64) {
                return Err(ApiError::BodyTooLarge);
            }
            let content_type = parts
                .headers
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            let bytes = Limited::new(body, BODY_LIMIT)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        ApiError::BodyTooLarge
                    } else {
                        ApiError::InvalidBody
                    }
                })?
                .to_bytes();
            details::from_body(content_type, &bytes)
                .map_err(|_| ApiError::InvalidBody)?
                .ok_or(ApiError::MissingReference)?
        }
    };
    let found = bundle.detail(index, reference.as_str());
    if let Some(asked) = asked {
        *asked = Some(reference.into_boxed_str());
    }
    found.ok_or(ApiError::PaymentNotFound)
}
