//! The middle of the request pipeline (see `pipeline`): a plain function of the request, its
//! route, the bundle its token opens, the snapshot and the peer's address, returning a `Handled`
//! value.
//!
//! Checks run in the order the error contract fixes (docs/api.md): what `guard` refuses (the
//! URL's length, a body where none is read), path, the admin rule (admin routes only, `admin`),
//! method, readiness, token, then the request's own parameters. A whole body of the API is a
//! prepared `Bytes`, and answering it is a lookup and a clone; one record or a page of a list
//! is a copy of its prepared bytes (`src/prepare/listed.rs`). Made per request: `/metrics` (scraped,
//! not polled), the `custom/*` date ranges, a payment's derived detail rows, a write's
//! acknowledgement, and the ones ARCHITECTURE.md's first invariant names.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Body;
use hyper::header::{
    HeaderMap, HeaderValue, ACCEPT_ENCODING, ALLOW, CACHE_CONTROL, CONTENT_ENCODING,
    CONTENT_LENGTH, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH, RETRY_AFTER, VARY,
    WWW_AUTHENTICATE, X_FRAME_OPTIONS,
};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode};

use super::admin;
use super::control::{Control, Fault};
use super::cors::Cors;
use super::journal::{Filter, Journal};
use super::pipeline::Handled;
use super::{details, guard, negotiate, paging};
use crate::api::{Feed, Operation, WriteKind, API};
use crate::errors::{
    detailed_body, message_body, not_found_body, simulated_error_body, ApiError, BODY_LIMIT,
    BODY_ROOM_KIB, WRITE_LIMIT,
};
use crate::metrics::{self, Metrics};
use crate::model::bodies;
use crate::model::decode::Diag;
use crate::prepare::{self, Answer, Answers, Encoding, Listed, Payload, Prepared};
use crate::simulate::Draw;
use crate::store::Snapshot;
use crate::token::Token;
use crate::writes::{Received, Writes};
use chrono::NaiveDate;
use tokio::sync::{Semaphore, SemaphorePermit};

/// The status page of `/_ui`: one HTML file with a few lines of script that read `/status`,
/// `/_queue` and `/_journal` every second (no build step, nothing from elsewhere).
const UI_PAGE: &str = include_str!("ui.html");

const JSON: HeaderValue = HeaderValue::from_static("application/json; charset=utf-8");
const GET_HEAD: HeaderValue = HeaderValue::from_static("GET, HEAD");
const HEALTHY: &[u8] = b"{\"status\":\"ok\"}";
const READY: &[u8] = b"{\"status\":\"ready\"}";
/// Ready, with stale data possible: answers keep coming, but changes on disk are not seen.
const READY_WATCH_LOST: &[u8] = b"{\"status\":\"ready\",\"watch\":\"lost\"}";
/// Ready on the last good bundles: object storage cannot be read (`/status` says why).
const READY_STORAGE_FAILING: &[u8] = b"{\"status\":\"ready\",\"storage\":\"failing\"}";
const READY_BOTH_FAILING: &[u8] =
    b"{\"status\":\"ready\",\"watch\":\"lost\",\"storage\":\"failing\"}";
/// Clients may keep answers but must revalidate (cheap: ETag and 304), so a reload shows at once.
const NO_CACHE: HeaderValue = HeaderValue::from_static("no-cache");
const ACCEPT_ENCODING_VARY: HeaderValue = HeaderValue::from_static("accept-encoding");

pub(crate) use crate::api::Route;

/// What the router needs beyond the request and the snapshot; one per server.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    /// The server's own address, for the unknown-path answer when a request has no Host.
    pub(crate) local: SocketAddr,
    pub(crate) metrics: Arc<Metrics>,
    /// Whether to send compressed bodies.
    pub(crate) compression: bool,
    /// Which origins may read answers.
    pub(crate) cors: Cors,
    /// Whether `X-Eventbox-*` control headers are obeyed.
    pub(crate) allow_control_headers: bool,
    /// The longest delay simulated (control headers and `[simulate]` alike).
    pub(crate) max_delay: std::time::Duration,
    /// The request journal, when on.
    pub(crate) journal: Option<Arc<Journal>>,
    /// The writes, every bundle's.
    pub(crate) writes: Arc<Writes>,
    /// The admin token (`--admin-token`): what a peer that is not loopback must send to use
    /// the admin routes; `None`: they answer loopback peers only.
    pub(crate) admin_token: Option<Token>,
    /// Turns true when the server stops: a simulated delay ends then, so that it never holds
    /// the drain.
    pub(crate) stopping: tokio::sync::watch::Receiver<bool>,
    /// The room for request bodies held at once ([`BODY_ROOM_KIB`]), shared by the server's
    /// listeners.
    pub(crate) body_room: Arc<Semaphore>,
}

/// The room of one server's request bodies: [`BODY_ROOM_KIB`] permits of a KiB.
pub(crate) fn body_room() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(BODY_ROOM_KIB))
}

fn json(status: StatusCode, body: impl Into<Payload>) -> Response<Payload> {
    let body = body.into();
    let len = HeaderValue::from(body.len());
    let mut res = Response::new(body);
    *res.status_mut() = status;
    let h = res.headers_mut();
    h.insert(CONTENT_TYPE, JSON);
    h.insert(CONTENT_LENGTH, len);
    res
}

pub(crate) fn error(e: ApiError) -> Response<Payload> {
    error_with_body(e, e.body())
}

/// The answer of `e` with `body` (its envelope with a more precise message) and its headers.
fn error_with_body(e: ApiError, body: Bytes) -> Response<Payload> {
    let mut res = json(e.status(), body);
    match e {
        ApiError::MethodNotAllowed => {
            res.headers_mut().insert(ALLOW, GET_HEAD);
        }
        ApiError::NotReady => {
            res.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        ApiError::AdminTokenRequired => {
            res.headers_mut().insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"eventbox\""),
            );
        }
        _ => {}
    }
    res
}

/// 405, with `Allow` naming the methods the route's table entry answers, and OPTIONS when it
/// answers a preflight (`preflight`: CORS on, a route a page of another origin may read).
fn not_allowed(route: Route, preflight: bool) -> Response<Payload> {
    let mut res = error(ApiError::MethodNotAllowed);
    res.headers_mut().insert(ALLOW, methods(route, preflight));
    res
}

/// 405 `read_only`: with `--read-only` no write is taken, nor are writes forgotten (`POST
/// /_writes/reset`); `Allow` is empty, as these routes have no other method. Dismissing what
/// waits for the source (`DELETE /_queue`) changes nothing served: taken.
fn read_only() -> Response<Payload> {
    let mut res = error(ApiError::ReadOnly);
    res.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(""));
    res
}

/// The `Allow` value of a route: its table entry's methods (and OPTIONS, for a preflight).
pub(crate) fn methods(route: Route, options: bool) -> HeaderValue {
    let mut methods: Vec<&str> = route.endpoint().methods.iter().map(|(m, _)| *m).collect();
    if options {
        methods.push("OPTIONS");
    }
    HeaderValue::from_str(&methods.join(", ")).unwrap_or(GET_HEAD)
}

/// `X-Forwarded-Proto`, which names the scheme a TLS proxy in front was asked with.
const FORWARDED_PROTO: hyper::header::HeaderName =
    hyper::header::HeaderName::from_static("x-forwarded-proto");

/// The full URL of a request, as the service's framework quotes it. The scheme is the first
/// `X-Forwarded-Proto` value when that is `http` or `https` (a TLS proxy in front), else `http`.
fn full_url<B>(req: &Request<B>, ctx: &Context) -> String {
    let scheme = req
        .headers()
        .get(FORWARDED_PROTO)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .map(str::trim)
        .and_then(|v| {
            ["http", "https"]
                .into_iter()
                .find(|s| s.eq_ignore_ascii_case(v))
        })
        .unwrap_or("http");
    let uri = req.uri();
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let host = guard::request_host(uri, req.headers())
        .ok()
        .flatten()
        .map_or_else(|| ctx.local.to_string(), str::to_string);
    format!("{scheme}://{host}{path}")
}

/// Routes, checks, simulates and represents one request: the middle of the pipeline (see
/// `pipeline`). `route` is `Route::of` the request's path; `bundle` is what its token opens (or
/// why none), looked up once by the pipeline; `peer` is the TCP peer's address. Checks run in
/// the order the error contract fixes: path, the admin rule, method, readiness, token, then the
/// request's own parameters.
pub(crate) async fn respond<B>(
    req: Request<B>,
    route: Option<Route>,
    bundle: Result<&Prepared, ApiError>,
    snapshot: &Snapshot,
    ctx: &Context,
    peer: IpAddr,
) -> Handled
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match checked(req, route, bundle, snapshot, ctx, peer) {
        Checked::Api(req, index, bundle) => api(req, index, bundle, ctx).await,
        Checked::Answered(response) => Handled::plain(response),
        Checked::Reset(bundle, body) => {
            // A body refuses the reset, and so does one that fails before it is known to be
            // empty (too slow: 408): a broken request never forgets anything.
            let refused = if body.size_hint().lower() > 0 {
                Some(ApiError::InvalidReset)
            } else {
                match prefix(body, 1).await {
                    Ok(b) if b.is_empty() => None,
                    Ok(_) => Some(ApiError::InvalidReset),
                    Err(e) => Some(e),
                }
            };
            if let Some(e) = refused {
                return Handled::plain(error(e));
            }
            Handled::plain(match ctx.writes.reset(&bundle.name).durable().await {
                Ok(()) => no_content(),
                Err(_) => error(ApiError::StateUnwritable),
            })
        }
        Checked::Dismiss(bundle, seq) => {
            Handled::plain(match ctx.writes.queue.dismiss(&bundle.name, seq).await {
                Ok(true) => no_content(),
                Ok(false) => error_with_body(
                    ApiError::NotInQueue,
                    detailed_body(ApiError::NotInQueue, &seq.to_string()),
                ),
                Err(_) => error(ApiError::StateUnwritable),
            })
        }
    }
}

/// What the checks made of a request.
enum Checked<'s, B> {
    /// Answered already: an operations route, or a refusal.
    Answered(Response<Payload>),
    /// An API request that passed, with its endpoint's index and its bundle.
    Api(Request<B>, usize, &'s Prepared),
    /// `POST /_writes/reset` with the token of this bundle, and its body (refused unless empty).
    Reset(&'s Prepared, B),
    /// `DELETE /_queue?seq=N` with the token of this bundle.
    Dismiss(&'s Prepared, u64),
}

/// Everything before an API answer: the operations routes are answered here, and so is every
/// refusal; an API request that passes comes back with its endpoint and bundle. The admin rule
/// (`admin::check`) is applied here, once, to every admin route and every method, before
/// anything else about the route is said.
fn checked<'s, B>(
    req: Request<B>,
    route: Option<Route>,
    bundle: Result<&'s Prepared, ApiError>,
    snapshot: &Snapshot,
    ctx: &Context,
    peer: IpAddr,
) -> Checked<'s, B> {
    let Some(route) = route else {
        return Checked::Answered(json(
            StatusCode::NOT_FOUND,
            not_found_body(&full_url(&req, ctx)),
        ));
    };
    if route.is_admin() {
        if let Err(e) = admin::check(ctx.admin_token.as_ref(), peer, req.uri(), req.headers()) {
            return Checked::Answered(error(e));
        }
    }
    let index = match (route, route.operation()) {
        // Its own methods (DELETE too), and no preflight: answered before the checks below.
        (_, Some(Operation::Journal)) => {
            return Checked::Answered(journal(
                route,
                req.method(),
                req.uri().query(),
                ctx.journal.as_deref(),
            ))
        }
        // No preflight on the other routes no page of another origin may read
        // (`Operation::cross_origin`): the other admin routes (`http::admin`), `/metrics`, `/_ui`.
        _ if !route.cross_origin() && req.method() == Method::OPTIONS => {
            return Checked::Answered(not_allowed(route, false))
        }
        // A CORS preflight: no token (browsers send none), the allow headers added by the server.
        _ if req.method() == Method::OPTIONS && ctx.cors.is_on() => {
            let mut res = no_content();
            res.headers_mut().insert(ALLOW, methods(route, true));
            return Checked::Answered(res);
        }
        _ if !route
            .endpoint()
            .methods
            .iter()
            .any(|(m, _)| *m == req.method().as_str()) =>
        {
            let preflight = route.cross_origin() && ctx.cors.is_on();
            return Checked::Answered(not_allowed(route, preflight));
        }
        (_, Some(Operation::Healthz)) => {
            return Checked::Answered(json(StatusCode::OK, Bytes::from_static(HEALTHY)))
        }
        (_, Some(Operation::Metrics)) => {
            let mut res = json(StatusCode::OK, Bytes::from(ctx.metrics.render()));
            res.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(metrics::CONTENT_TYPE),
            );
            return Checked::Answered(res);
        }
        (_, Some(Operation::OpenApi)) => {
            return Checked::Answered(represent(
                req.headers(),
                &Answer::Prepared(prepare::openapi()),
                ctx,
            ))
        }
        // The page holds no data: served from the start, it says what a first load awaits.
        (_, Some(Operation::Ui)) => {
            let mut res = json(StatusCode::OK, Bytes::from_static(UI_PAGE.as_bytes()));
            res.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            res.headers_mut().insert(CACHE_CONTROL, NO_CACHE);
            // Never inside another site's frame: a remote operator types the admin token here.
            res.headers_mut()
                .insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
            res.headers_mut().insert(
                CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("frame-ancestors 'none'"),
            );
            return Checked::Answered(res);
        }
        _ if !snapshot.is_ready() => {
            return Checked::Answered(match snapshot.waiting_body() {
                Some(body) => error_with_body(ApiError::NotReady, body.clone()),
                None => error(ApiError::NotReady),
            })
        }
        // Loaded, but no token opens anything: not ready (a rollout whose bundles all have
        // errors must not replace replicas that serve).
        (_, Some(Operation::Readyz)) if snapshot.serves_nothing() => {
            // Loaded: not "still loading".
            return Checked::Answered(error_with_body(
                ApiError::NotReady,
                message_body(
                    ApiError::NotReady,
                    "eventbox has loaded its data, but no bundle is served: each has errors (or waits for its source's first refresh), or the data folder holds none; see /status.",
                ),
            ));
        }
        (_, Some(Operation::Readyz)) => {
            let body = match (snapshot.watch_lost(), snapshot.storage_failing()) {
                (false, false) => READY,
                (true, false) => READY_WATCH_LOST,
                (false, true) => READY_STORAGE_FAILING,
                (true, true) => READY_BOTH_FAILING,
            };
            return Checked::Answered(json(StatusCode::OK, Bytes::from_static(body)));
        }
        (_, Some(Operation::Status)) => {
            let status = ctx.writes.status(snapshot.status());
            return Checked::Answered(json(StatusCode::OK, status));
        }
        (_, Some(Operation::Queue)) if req.method() == Method::DELETE => {
            return match (bundle, queue_seq(req.uri().query())) {
                (Err(e), _) => Checked::Answered(error(e)),
                (Ok(_), None) => Checked::Answered(error(ApiError::InvalidQueueEntry)),
                (Ok(bundle), Some(seq)) => Checked::Dismiss(bundle, seq),
            };
        }
        (_, Some(Operation::Queue)) => {
            return Checked::Answered(json(StatusCode::OK, ctx.writes.queue.body()))
        }
        (_, Some(Operation::WritesReset)) => {
            // Nothing but the token may seem to pick the bundle: no parameter (nor a body,
            // checked when read).
            let query = req.uri().query().is_some_and(|q| !q.is_empty());
            return match (bundle, query) {
                (Err(e), _) => Checked::Answered(error(e)),
                (Ok(_), _) if ctx.writes.read_only() => Checked::Answered(read_only()),
                (Ok(_), true) => Checked::Answered(error(ApiError::InvalidReset)),
                (Ok(bundle), false) => Checked::Reset(bundle, req.into_body()),
            };
        }
        (Route::Api(index), None) => index,
        (Route::Operation(_), None) => return Checked::Answered(error(ApiError::NotReady)),
    };
    if API.get(index).is_some_and(|e| e.app) {
        // The company and institutional routes: their own documented codes (api-fgv.md).
        // UTF-8, as a token is read (`to_str` takes visible ASCII only).
        let app = req
            .headers()
            .get(crate::token::APP_HEADER)
            .and_then(|v| std::str::from_utf8(v.as_bytes()).ok());
        let Some(app) = app.map(str::trim).filter(|a| !a.is_empty()) else {
            return Checked::Answered(error(ApiError::InvalidAuthorizationApp));
        };
        match bundle {
            Err(ApiError::MissingToken | ApiError::InvalidToken) => {
                return Checked::Answered(error(ApiError::InvalidAuthorizationToken))
            }
            // A key its bundle.toml does not name (`app_keys`): these answers hold other
            // events' tokens and people, as the platform's do for its company accounts.
            Ok(b) if !b.takes_app(app) => {
                return Checked::Answered(error(ApiError::InvalidAuthorizationApp))
            }
            _ => {}
        }
    }
    match bundle {
        Ok(bundle) => Checked::Api(req, index, bundle),
        Err(e) => Checked::Answered(error(e)),
    }
}

/// An API request that passed the checks: control headers, simulation, the answer.
async fn api<B>(req: Request<B>, index: usize, bundle: &Prepared, ctx: &Context) -> Handled
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let control = if ctx.allow_control_headers {
        match Control::from_headers(req.headers(), ctx.max_delay) {
            Ok(c) => c,
            Err(bad) => {
                return Handled::plain(detailed(ApiError::InvalidControlHeader, &bad.detail()))
            }
        }
    } else {
        Control::default()
    };
    // For the journal: the reference of a details request that gets no real answer (a fault, a
    // simulated error) is the query's, if any; a real answer's is the one it looked up.
    let asked = (Route::Api(index).by_reference() && ctx.journal.is_some())
        .then(|| details::from_query(req.uri().query()))
        .flatten();
    let draw = bundle.simulation.as_ref().map(|s| s.draw(index));
    // A header's fault or status is this request's outcome: the bundle's drawn fault is not.
    let fault = match (control.fault, control.status) {
        (None, None) => draw.and_then(|d| d.fault),
        (asked, _) => asked,
    };
    let (response, read) = simulated(req, index, bundle, (control, draw, fault), ctx).await;
    Handled {
        response,
        reference: read.reference.or(asked.map(String::into_boxed_str)),
        body: read.body,
        fault,
    }
}

/// What a handler read of a request, kept for the journal only.
#[derive(Debug, Default)]
struct Read {
    /// The payment reference looked up.
    reference: Option<Box<str>>,
    /// The request body, when the handler read one.
    body: Option<Bytes>,
}

/// The most of a body endpoint `index` reads: a write's batch, or the smaller limit of the
/// others.
fn body_limit(index: usize) -> usize {
    match API.get(index).map(|e| e.feed) {
        Some(Feed::Write(_)) => WRITE_LIMIT,
        _ => BODY_LIMIT,
    }
}

/// The API answer after the simulation asked for: the delay (the control header's, else the
/// bundle's draw, capped by `--max-delay`), then no answer (`fault`), a simulated error or the
/// real one.
async fn simulated<B>(
    req: Request<B>,
    index: usize,
    bundle: &Prepared,
    (control, draw, fault): (Control, Option<Draw>, Option<Fault>),
    ctx: &Context,
) -> (Response<Payload>, Read)
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let delay = control
        .delay
        .or(draw.map(|d| d.delay))
        .map(|d| d.min(ctx.max_delay));
    if let Some(delay) = delay.filter(|d| !d.is_zero()) {
        // Cut short when the server stops: the answer goes out at once rather than holding
        // the drain (up to `--max-delay`) for a wait the client asked the test server for.
        let mut stopping = ctx.stopping.clone();
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = stopping.wait_for(|s| *s) => {}
        }
    }
    if let Some(fault @ (Fault::Reset | Fault::Empty)) = fault {
        if fault == Fault::Empty && !waits_to_send(req.version(), req.headers()) {
            // Bytes left unread in the socket would turn the close into a reset: read the body
            // (up to the cap) so the client sees an orderly close.
            let _ = read_keeping(req.into_body(), 0, body_limit(index)).await;
        }
        // No answer is sent: the pipeline fails the request (see `fault`).
        return (Response::new(Payload::default()), Read::default());
    }
    let status = control.status.or(draw.and_then(|d| d.error));
    if let Some(status) = status {
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        if let Some(body) = simulated_error_body(code.as_u16()) {
            // With a journal the body's first bytes are kept (what the journal keeps, and one
            // more to show it was cut), so a test can check what a client sent before it was
            // refused and retried. Read to its end (up to the endpoint's limit) only where that
            // keeps an HTTP/1 connection for the retry: not over HTTP/2, not a body declared
            // over the limit (closed anyway). None of one the client waits to send: the
            // refusal comes first, as a real endpoint's would.
            let mut read = Read::default();
            let waits = waits_to_send(req.version(), req.headers());
            let keep = match ctx.journal {
                Some(_) if !waits => super::journal::MAX_BODY + 1,
                _ => 0,
            };
            let limit = body_limit(index);
            let to_end = req.version() < hyper::Version::HTTP_2
                && !waits
                && req
                    .body()
                    .size_hint()
                    .upper()
                    .is_none_or(|n| n <= limit as u64);
            let upto = if to_end { limit } else { keep };
            read.body = read_keeping(req.into_body(), keep, upto)
                .await
                .ok()
                .filter(|b| !b.is_empty());
            let mut res = json(code, body);
            // The request's (`none` included), else the endpoint's, made when it loaded.
            let retry_after = match control.retry_after {
                Some(asked) => asked.and_then(crate::simulate::header_value),
                None => bundle
                    .simulation
                    .as_ref()
                    .and_then(|s| s.retry_after(index))
                    .cloned(),
            };
            if let Some(value) = retry_after {
                res.headers_mut().insert(RETRY_AFTER, value);
            }
            // A 405 names what the route takes, as the real one does (RFC 9110 §15.5.6).
            if code == StatusCode::METHOD_NOT_ALLOWED {
                let preflight = Route::Api(index).cross_origin() && ctx.cors.is_on();
                res.headers_mut()
                    .insert(ALLOW, methods(Route::Api(index), preflight));
            }
            return (res, read);
        }
    }
    let (parts, request_body) = req.into_parts();
    if let Some(Feed::Write(kind)) = API.get(index).map(|e| e.feed) {
        let mut read = Read::default();
        let keep = ctx.journal.is_some().then_some(&mut read);
        let res = write(kind, &parts, request_body, bundle, ctx, keep).await;
        return (res, read);
    }
    // What the handler read, kept for the journal only.
    let mut read = Read::default();
    let keep = ctx.journal.is_some().then_some(&mut read);
    let list = match bundle.answers(index) {
        Some(Answers::List(_)) => listed(bundle, index, ctx),
        Some(Answers::ItemOf(of)) => listed(bundle, *of, ctx),
        _ => None,
    };
    let found = match (bundle.answers(index), &list) {
        (Some(Answers::One(body)), _) => Ok(Answer::Prepared(body)),
        (Some(Answers::List(base)), Some(list)) => match paging::paging(parts.uri.query()) {
            Ok(None) => {
                // The attendees with writes, made per change: compressed once a client wants it.
                if !Arc::ptr_eq(base, list) {
                    let accept = header_list(&parts.headers, ACCEPT_ENCODING);
                    let wanted =
                        negotiate::choose(accept.as_deref(), ctx.compression, list.body.is_small());
                    if wanted.is_some_and(|e| e != Encoding::Identity) {
                        list.compress_soon();
                    }
                }
                Ok(Answer::Prepared(&list.body))
            }
            Ok(Some((page, per_page))) => {
                Ok(Answer::Made(prepare::Body::new(list.page(page, per_page))))
            }
            Err(e) => Err(e),
        },
        (Some(Answers::ItemOf(_)), Some(list)) => list
            .one(Route::id(parts.uri.path()))
            .map(|b| Answer::Made(prepare::Body::new(b)))
            .ok_or(match API.get(index).map(|e| e.feed) {
                Some(Feed::Item { missing, .. }) => missing,
                _ => ApiError::NotReady,
            }),
        (Some(Answers::ByReference(_)), _) => {
            payment_details(&parts, request_body, bundle, index, keep, &ctx.body_room).await
        }
        (Some(Answers::Ranged(ranged)), _) => {
            date_range(&parts, request_body, keep, &ctx.body_room)
                .await
                .map(|(from, to)| Answer::Made(prepare::Body::new(ranged.answer(from, to))))
        }
        // Every prepared bundle has a slot per table entry, and an item's list is a list.
        _ => Err(ApiError::NotReady),
    };
    let res = match found {
        Ok(Answer::Made(body)) => {
            let body = compressed_off_thread(body, &parts.headers);
            represent(&parts.headers, &Answer::Made(body.await), ctx)
        }
        Ok(body) => represent(&parts.headers, &body, ctx),
        Err(e) => error(e),
    };
    (res, read)
}

/// A body made for this request, larger than `prepare::EAGER_COMPRESS_MAX`, for a client that
/// refuses identity: compressed on a blocking thread (a page of any size can be asked for), so
/// that [`represent`] finds its variants made. Any other body comes back as it is.
async fn compressed_off_thread(body: prepare::Body, headers: &HeaderMap) -> prepare::Body {
    let accept = header_list(headers, ACCEPT_ENCODING);
    if negotiate::accepts_identity(accept.as_deref())
        || body.len() <= prepare::EAGER_COMPRESS_MAX as u64
    {
        return body;
    }
    let body = Arc::new(body);
    let compressing = Arc::clone(&body);
    let _ = tokio::task::spawn_blocking(move || compressing.compress()).await;
    // The task has ended (done or panicked): this is the one reference left.
    Arc::try_unwrap(body).unwrap_or_else(|body| prepare::Body::new(body.identity_bytes()))
}

/// The list at `index` as reads see it: the attendees with the bundle's writes folded in, when
/// it has any; any other list as prepared.
fn listed(bundle: &Prepared, index: usize, ctx: &Context) -> Option<Arc<Listed>> {
    let Some(Answers::List(list)) = bundle.answers(index) else {
        return None;
    };
    let written = match &bundle.writes {
        Some(base) if Arc::ptr_eq(list, &base.attendees) => {
            ctx.writes.attendees(&bundle.name, base)
        }
        _ => None,
    };
    Some(written.unwrap_or_else(|| Arc::clone(list)))
}

/// A write: refused with `--read-only`; otherwise the body is read (JSON, at most
/// [`WRITE_LIMIT`]), decoded as the endpoint takes it, checked and applied, and answered once
/// it is durable.
async fn write<B>(
    kind: WriteKind,
    parts: &Parts,
    body: B,
    bundle: &Prepared,
    ctx: &Context,
    keep: Option<&mut Read>,
) -> Response<Payload>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if ctx.writes.read_only() {
        return read_only();
    }
    let Some(base) = &bundle.writes else {
        return error(ApiError::NotReady);
    };
    if !content_type(&parts.headers).is_none_or(is_json_type) {
        return error(ApiError::UnsupportedMediaType);
    }
    // The room the body took is held until the write is answered (parsed, applied, durable).
    let (bytes, _room) = match read_body(parts, body, WRITE_LIMIT, &ctx.body_room).await {
        Ok(read) => read,
        Err(e) => return error(e),
    };
    if let Some(keep) = keep {
        keep.body = Some(bytes.clone());
    }
    let value = match crate::read::parse_json(&bytes) {
        Ok(v) => v,
        Err(e) => return detailed(ApiError::InvalidJson, &e.to_string()),
    };
    if json_depth(&value) > crate::writes::MAX_BODY_DEPTH {
        let detail = format!(
            "nested more than {} levels deep",
            crate::writes::MAX_BODY_DEPTH
        );
        return detailed(ApiError::InvalidJson, &detail);
    }
    let mut diag = Diag::default();
    let name = &bundle.name;
    let received = || Received {
        path: parts.uri.path().to_string(),
        body: value.clone(),
        forward: bundle.source.is_some() && ctx.writes.forwarding(),
        event: Some(base.id_event),
    };
    // A reset in flight is applied first; durability is awaited once this is let go.
    let writer = ctx.writes.admit(name, base).await;
    let done = writer.apply(kind, &value, &mut diag, received);
    drop(writer);
    let pending = match done {
        None => return detailed(ApiError::InvalidWrite, &diag.errors().join("; ")),
        Some(Err(refused)) => {
            return match refused.detail {
                Some(detail) => detailed(refused.error, &detail),
                None => error(refused.error),
            }
        }
        Some(Ok(pending)) => pending,
    };
    match pending.durable().await {
        Ok(()) => json(StatusCode::OK, Bytes::from_static(kind.acknowledgement())),
        Err(_) => error(ApiError::StateUnwritable),
    }
}

/// The date range of a `custom/*` request: `{"dataInicio", "dataFim"}`, each `YYYY-MM-DD` or
/// left out (30 days ago, tomorrow: the page's defaults). An empty body, one that is not JSON
/// or a start after the end is `InvalidParameter` (502, as the page documents).
async fn date_range<B>(
    parts: &Parts,
    body: B,
    keep: Option<&mut Read>,
    room: &Semaphore,
) -> Result<(NaiveDate, NaiveDate), ApiError>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (bytes, _) = read_body(parts, body, BODY_LIMIT, room).await?;
    if let Some(keep) = keep {
        keep.body = Some(bytes.clone());
    }
    if bytes.trim_ascii().is_empty() {
        return Err(ApiError::InvalidParameter);
    }
    let value = crate::read::parse_json(&bytes).map_err(|_| ApiError::InvalidParameter)?;
    let mut diag = Diag::default();
    let range = bodies::date_range_body(&value, &mut diag)
        .filter(|_| !diag.has_errors())
        .ok_or(ApiError::InvalidParameter)?;
    let today = chrono::Utc::now().date_naive();
    let parse = |d: Option<&crate::model::formats::IsoDate>, default: NaiveDate| match d {
        Some(d) => NaiveDate::parse_from_str(d.as_str(), "%Y-%m-%d")
            .map_err(|_| ApiError::InvalidParameter),
        None => Ok(default),
    };
    let from = parse(range.dataInicio.as_ref(), today - chrono::Days::new(30))?;
    let to = parse(range.dataFim.as_ref(), today + chrono::Days::new(1))?;
    if from > to {
        return Err(ApiError::InvalidParameter);
    }
    Ok((from, to))
}

/// A request's `Content-Type`. One that is not visible ASCII (which hyper lets through) names
/// no type eventbox knows: it reads as `""`, neither JSON nor a form.
fn content_type(headers: &HeaderMap) -> Option<&str> {
    headers.get(CONTENT_TYPE).map(|v| v.to_str().unwrap_or(""))
}

/// Whether a `Content-Type` is JSON: the media types the service's framework (ASP.NET) reads as
/// JSON, `application/json`, `text/json` and any `+json`, with any parameters.
pub(crate) fn is_json_type(content_type: &str) -> bool {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    mime == "application/json" || mime == "text/json" || mime.ends_with("+json")
}

/// How deeply a JSON value nests: 0 for a scalar, 1 for `[]` or `[1]`, 2 for `[[1]]`.
/// Without recursion, so no value's depth can exhaust the stack.
fn json_depth(value: &serde_json::Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0)];
    while let Some((v, depth)) = stack.pop() {
        let inner = depth + 1;
        match v {
            serde_json::Value::Array(items) => stack.extend(items.iter().map(|c| (c, inner))),
            serde_json::Value::Object(map) => stack.extend(map.values().map(|c| (c, inner))),
            _ => continue,
        }
        deepest = deepest.max(inner);
    }
    deepest
}

/// The error `e` with what exactly was wrong after its message.
fn detailed(e: ApiError, detail: &str) -> Response<Payload> {
    let mut res = error(e);
    let body = detailed_body(e, detail);
    res.headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    *res.body_mut() = body.into();
    res
}

fn no_content() -> Response<Payload> {
    let mut res = Response::new(Payload::default());
    *res.status_mut() = StatusCode::NO_CONTENT;
    res
}

/// `/_journal`: GET lists the requests kept (those its query's filters match), DELETE forgets
/// them all, or one bundle's; 404 when the journal is off.
fn journal(
    route: Route,
    method: &Method,
    query: Option<&str>,
    journal: Option<&Journal>,
) -> Response<Payload> {
    // The method first: `OPTIONS` is 405 whether the journal is on or off.
    let forget = match *method {
        Method::GET | Method::HEAD => false,
        Method::DELETE => true,
        _ => return not_allowed(route, false),
    };
    let Some(journal) = journal else {
        return error(ApiError::JournalDisabled);
    };
    let filter = match forget {
        false => Filter::from_query(query),
        true => Filter::to_forget(query),
    };
    let filter = match filter {
        Ok(filter) => filter,
        Err(bad) => return json(ApiError::InvalidJournalFilter.status(), bad.body()),
    };
    match *method {
        Method::GET | Method::HEAD => json(StatusCode::OK, journal.body(&filter)),
        Method::DELETE => {
            journal.forget(&filter);
            let mut res = Response::new(Payload::default());
            *res.status_mut() = StatusCode::NO_CONTENT;
            res
        }
        _ => not_allowed(route, false),
    }
}

/// The `seq` of `DELETE /_queue?seq=N`: its one parameter, a whole number from 1 (one too
/// large for any entry saturates: no entry has it).
fn queue_seq(query: Option<&str>) -> Option<u64> {
    let mut params = form_urlencoded::parse(query?.as_bytes());
    let (name, value) = params.next()?;
    let seq = paging::whole_number(&value).filter(|&n| n >= 1);
    (name == "seq" && params.next().is_none()).then_some(seq)?
}

/// The answer for a body: the encoding `Accept-Encoding` picks, its `ETag`, and 304 when
/// `If-None-Match` names that tag. No compression happens here unless a client refuses
/// identity: a body made for this request is compressed in the one coding asked for; a prepared
/// one being compressed in the background is waited for by the client (503) when large.
fn represent(headers: &HeaderMap, answer: &Answer<'_>, ctx: &Context) -> Response<Payload> {
    let accept = header_list(headers, ACCEPT_ENCODING);
    let accept = accept.as_deref();
    let Some(wanted) = negotiate::choose(accept, ctx.compression, answer.is_small()) else {
        let mut res = error(ApiError::NotAcceptable);
        res.headers_mut().insert(VARY, ACCEPT_ENCODING_VARY);
        return res;
    };
    let owned =
        |(e, (bytes, etag)): (Encoding, (&Payload, &HeaderValue))| (e, bytes.clone(), etag.clone());
    let (encoding, bytes, etag) = match answer.ready(wanted) {
        Some(ready) => owned((wanted, ready)),
        None if negotiate::accepts_identity(accept) => owned(answer.encoded(Encoding::Identity)),
        None => match answer {
            Answer::Made(body) => body.encoded_once(wanted),
            // Identity refused and the variant not made yet: a small body is compressed now (a
            // few ms); a large one is being compressed in the background, so ask the client to
            // retry rather than hold a worker for seconds.
            Answer::Prepared(body) if body.len() > prepare::EAGER_COMPRESS_MAX as u64 => {
                let mut res = error(ApiError::NotReady);
                res.headers_mut().insert(VARY, ACCEPT_ENCODING_VARY);
                return res;
            }
            Answer::Prepared(body) => owned(body.encoded(wanted)),
        },
    };
    let matched = match header_list(headers, IF_NONE_MATCH) {
        Some(inm) => negotiate::none_match(&inm, etag.to_str().unwrap_or_default()),
        None => false,
    };
    let mut res = if matched {
        let mut res = Response::new(Payload::default());
        *res.status_mut() = StatusCode::NOT_MODIFIED;
        res
    } else {
        json(StatusCode::OK, bytes)
    };
    let h = res.headers_mut();
    h.insert(ETAG, etag);
    h.insert(CACHE_CONTROL, NO_CACHE);
    h.insert(VARY, ACCEPT_ENCODING_VARY);
    if let (Some(name), false) = (encoding.header(), matched) {
        h.insert(CONTENT_ENCODING, HeaderValue::from_static(name));
    }
    res
}

/// A list-valued header (`Accept-Encoding`, `If-None-Match`) whole: its field lines joined
/// with commas, as RFC 9110 §5.3 reads a field sent on several lines. `None` when absent; a
/// line that is not text is left out.
fn header_list(
    headers: &HeaderMap,
    name: hyper::header::HeaderName,
) -> Option<std::borrow::Cow<'_, str>> {
    let mut lines = headers
        .get_all(&name)
        .iter()
        .filter_map(|v| v.to_str().ok());
    let first = lines.next()?;
    match lines.next() {
        None => Some(std::borrow::Cow::Borrowed(first)),
        Some(second) => {
            let mut all = format!("{first}, {second}");
            for line in lines {
                all.push_str(", ");
                all.push_str(line);
            }
            Some(std::borrow::Cow::Owned(all))
        }
    }
}

/// The first `n` bytes of a body (all of a shorter one), reading no further. A body that fails
/// before them (too slow, cut off) is an error, as [`read_body`] gives it.
pub(crate) async fn prefix<B>(body: B, n: usize) -> Result<Bytes, ApiError>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    read_keeping(body, n, n).await
}

/// Reads a body up to `read` bytes (to its end when shorter), keeping the first `keep` of
/// them: what an answer that does not use the body reads so that the connection can carry the
/// next request. A body that fails first is an error, as [`read_body`] gives it.
async fn read_keeping<B>(body: B, keep: usize, read: usize) -> Result<Bytes, ApiError>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut body = std::pin::pin!(body);
    let mut got = bytes::BytesMut::new();
    let mut total = 0;
    while total < read {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    total += bytes::Buf::remaining(&data);
                    let room = keep.saturating_sub(got.len());
                    bytes::BufMut::put(&mut got, bytes::Buf::take(data, room));
                }
            }
            Some(Err(e)) => return Err(body_error(e.into())),
            None => break,
        }
    }
    Ok(got.freeze())
}

/// Whether a client waits to send its body (`Expect: 100-continue` over HTTP/1.1): a simulated
/// refusal comes before it, since reading would send it `100 Continue` (hyper does at the first
/// read). Asked only where a simulation answers, not of every request.
fn waits_to_send(version: hyper::Version, headers: &hyper::HeaderMap) -> bool {
    version == hyper::Version::HTTP_11
        && headers
            .get(hyper::header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"))
}

/// What a body that could not be read whole answers.
fn body_error(e: Box<dyn std::error::Error + Send + Sync>) -> ApiError {
    if e.is::<http_body_util::LengthLimitError>() {
        ApiError::BodyTooLarge
    } else if e.is::<super::deadline::BodyTimedOut>() {
        ApiError::BodyTimeout
    } else {
        ApiError::InvalidBody
    }
}

/// A request's body, at most `limit` bytes (a larger declared length is refused before reading),
/// read once `room` holds as much as it may be (its declared length, else the most its framing
/// allows, else `limit`; an empty body takes none). The room stays taken while the caller holds
/// the permit returned with the bytes: a write keeps it until it is answered.
async fn read_body<'r, B>(
    parts: &Parts,
    body: B,
    limit: usize,
    room: &'r Semaphore,
) -> Result<(Bytes, Option<SemaphorePermit<'r>>), ApiError>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let most = match declared {
        Some(n) if n > limit => return Err(ApiError::BodyTooLarge),
        Some(n) => n,
        None => body
            .size_hint()
            .upper()
            .and_then(|n| usize::try_from(n).ok())
            .map_or(limit, |n| n.min(limit)),
    };
    let kib = u32::try_from(most.div_ceil(1024)).unwrap_or(u32::MAX);
    // The semaphore is never closed, so this cannot fail.
    let mut held = match kib {
        0 => None,
        kib => room.acquire_many(kib).await.ok(),
    };
    let bytes = Limited::new(body, most)
        .collect()
        .await
        .map_err(body_error)?
        .to_bytes();
    // What the body turned out to hold is kept taken; the rest (a body of unknown length took
    // the whole limit) goes back at once.
    if let Some(permit) = held.as_mut() {
        let extra = permit
            .num_permits()
            .saturating_sub(bytes.len().div_ceil(1024));
        drop(permit.split(extra));
    }
    Ok((bytes, held))
}

/// The details answer: the reference from the query, else from the body (read up to the cap).
/// The reference found and the body read are left in `keep`, if given (only the journal wants
/// them).
async fn payment_details<'a, B>(
    parts: &Parts,
    body: B,
    bundle: &'a Prepared,
    index: usize,
    mut keep: Option<&mut Read>,
    room: &Semaphore,
) -> Result<Answer<'a>, ApiError>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let reference = match details::from_query(parts.uri.query()) {
        Some(r) => r,
        None => {
            let content_type = content_type(&parts.headers);
            let (bytes, _) = read_body(parts, body, BODY_LIMIT, room).await?;
            if let Some(keep) = keep.as_deref_mut() {
                keep.body = Some(bytes.clone());
            }
            details::from_body(content_type, &bytes)
                .map_err(|_| ApiError::InvalidBody)?
                .ok_or(ApiError::MissingReference)?
        }
    };
    let found = bundle.detail(index, reference.as_str());
    if let Some(keep) = keep {
        keep.reference = Some(reference.into_boxed_str());
    }
    found.ok_or(ApiError::PaymentNotFound)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn parts(length: Option<usize>) -> Parts {
        let mut req = Request::builder()
            .method(Method::POST)
            .uri("/api/v1/checkin/attendees");
        if let Some(n) = length {
            req = req.header(CONTENT_LENGTH, n);
        }
        req.body(()).expect("a request").into_parts().0
    }

    /// A body of unknown length, as a chunked one is: one frame, no size hint.
    struct Chunked(Option<Bytes>);

    impl Body for Chunked {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
            std::task::Poll::Ready(self.0.take().map(|b| Ok(hyper::body::Frame::data(b))))
        }
    }

    /// A body is read once the room holds as much as it may be (its declared length, else what
    /// its framing allows, else its limit, in KiB), and the room is given back when the permit
    /// read with it is dropped: bodies sent together wait for each other instead of all being
    /// held at once. (The clock is paused: a read that waits for room runs it to the timeout at
    /// once.)
    #[tokio::test(start_paused = true)]
    async fn a_body_waits_for_room_for_what_it_may_hold() {
        let room = Semaphore::new(4);
        let bytes = Bytes::from(vec![b'x'; 3000]);
        let unsized_body = || Chunked(Some(bytes.clone()));
        let minute = Duration::from_secs(60);
        for (declared, limit, taken) in [(Some(3000), 8192, 3), (None, 4096, 4)] {
            let parts = parts(declared);
            let held = room.acquire_many(5 - taken).await.expect("room");
            let waited =
                tokio::time::timeout(minute, read_body(&parts, unsized_body(), limit, &room)).await;
            assert!(waited.is_err(), "{declared:?}: read without room for it");
            drop(held);
            let read =
                tokio::time::timeout(minute, read_body(&parts, unsized_body(), limit, &room)).await;
            let (body, permit) = read.expect("room").expect("read");
            assert_eq!(body.len(), 3000);
            assert_eq!(
                room.available_permits(),
                1,
                "the 3 KiB read are held with the bytes, what was taken beyond them given back"
            );
            drop(permit);
            assert_eq!(room.available_permits(), 4, "the room is given back");
        }
        // A body whose framing says how long it is takes that much; an empty one none, so it
        // never waits.
        let _all = room.acquire_many(4).await.expect("room");
        let empty = http_body_util::Empty::<Bytes>::new();
        let read = tokio::time::timeout(minute, read_body(&parts(None), empty, 4096, &room)).await;
        assert!(read.is_ok_and(|r| r.is_ok_and(|(b, p)| b.is_empty() && p.is_none())));
    }
}
