//! Request → response: a plain function of the request, its route and the snapshot.
//!
//! Checks run in the order the error contract fixes: path, method, token, then the request's own
//! parameters. Every success body of the API is a prepared `Bytes`; answering is a lookup and a
//! clone. `/metrics` is the one route that encodes per request (it is scraped, not polled).

use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Body;
use hyper::header::{
    HeaderMap, HeaderValue, ACCEPT_ENCODING, ALLOW, CACHE_CONTROL, CONTENT_ENCODING,
    CONTENT_LENGTH, CONTENT_TYPE, ETAG, HOST, IF_NONE_MATCH, RETRY_AFTER, VARY,
};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode};

use super::cors::Cors;
use super::errors::{not_found_body, ApiError, BODY_LIMIT};
use super::{details, negotiate};
use crate::metrics::{self, Metrics};
use crate::store::{self, Encoding, Prepared, Snapshot};

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

/// The six endpoints of the API text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Event,
    Payments,
    PaymentDetails,
    Submission,
    SubmissionList,
    Hotsite,
}

/// The paths eventbox answers: the API, which needs a token, and the operations routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Api(Endpoint),
    Healthz,
    Readyz,
    Status,
    Metrics,
    OpenApi,
}

const ROUTES: [(&str, Route); 11] = [
    ("/api/v1/event", Route::Api(Endpoint::Event)),
    ("/api/v1/payments", Route::Api(Endpoint::Payments)),
    (
        "/api/v1/payments/details",
        Route::Api(Endpoint::PaymentDetails),
    ),
    ("/api/v1/submission", Route::Api(Endpoint::Submission)),
    (
        "/api/v1/submission/list",
        Route::Api(Endpoint::SubmissionList),
    ),
    ("/api/v1/hotsite", Route::Api(Endpoint::Hotsite)),
    ("/healthz", Route::Healthz),
    ("/readyz", Route::Readyz),
    ("/status", Route::Status),
    ("/metrics", Route::Metrics),
    ("/openapi.json", Route::OpenApi),
];

/// The OpenAPI 3.1 document of the API as served (kept at the repository's root).
pub const OPENAPI: &[u8] = include_bytes!("../../openapi.json");

/// The document as a prepared body (ETag, compressed variants), made on first use. The same
/// bytes for every server, so sharing it shares no state.
static OPENAPI_BODY: LazyLock<store::Body> = LazyLock::new(|| {
    let body = store::Body::new(Bytes::from_static(OPENAPI));
    body.compress();
    body
});

impl Route {
    /// The route of a path, with or without one trailing slash. Like the service's web framework,
    /// matching ignores ASCII case.
    pub fn of(path: &str) -> Option<Route> {
        let path = path.strip_suffix('/').unwrap_or(path);
        ROUTES
            .iter()
            .find(|(p, _)| p.eq_ignore_ascii_case(path))
            .map(|&(_, r)| r)
    }

    /// The `endpoint` label of metrics and logs.
    pub fn label(route: Option<Route>) -> &'static str {
        match route {
            Some(Route::Api(Endpoint::Event)) => "event",
            Some(Route::Api(Endpoint::Payments)) => "payments",
            Some(Route::Api(Endpoint::PaymentDetails)) => "payment_details",
            Some(Route::Api(Endpoint::Submission)) => "submission",
            Some(Route::Api(Endpoint::SubmissionList)) => "submission_list",
            Some(Route::Api(Endpoint::Hotsite)) => "hotsite",
            Some(Route::Healthz) => "healthz",
            Some(Route::Readyz) => "readyz",
            Some(Route::Status) => "status",
            Some(Route::Metrics) => "metrics",
            Some(Route::OpenApi) => "openapi",
            None => "unknown",
        }
    }
}

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
}

fn json(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let len = HeaderValue::from(body.len());
    let mut res = Response::new(Full::new(body));
    *res.status_mut() = status;
    let h = res.headers_mut();
    h.insert(CONTENT_TYPE, JSON);
    h.insert(CONTENT_LENGTH, len);
    res
}

fn error(e: ApiError) -> Response<Full<Bytes>> {
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
/// on a HEAD stream).
pub async fn handle<B>(
    req: Request<B>,
    route: Option<Route>,
    snapshot: &Snapshot,
    ctx: &Context,
) -> Response<Full<Bytes>>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let head = req.method() == Method::HEAD;
    let mut res = answer(req, route, snapshot, ctx).await;
    if head {
        *res.body_mut() = Full::new(Bytes::new());
    }
    res
}

async fn answer<B>(
    req: Request<B>,
    route: Option<Route>,
    snapshot: &Snapshot,
    ctx: &Context,
) -> Response<Full<Bytes>>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Some(route) = route else {
        return json(StatusCode::NOT_FOUND, not_found_body(&full_url(&req, ctx)));
    };
    if req.method() == Method::OPTIONS && ctx.cors.is_on() {
        // A CORS preflight: no token (browsers send none), the allow headers added by the server.
        let mut res = Response::new(Full::new(Bytes::new()));
        *res.status_mut() = StatusCode::NO_CONTENT;
        res.headers_mut().insert(ALLOW, GET_HEAD_OPTIONS);
        return res;
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return error(ApiError::MethodNotAllowed);
    }
    let endpoint = match route {
        Route::Healthz => return json(StatusCode::OK, Bytes::from_static(HEALTHY)),
        Route::Metrics => {
            let mut res = json(StatusCode::OK, Bytes::from(ctx.metrics.render()));
            res.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(metrics::CONTENT_TYPE),
            );
            return res;
        }
        Route::OpenApi => return represent(req.headers(), &OPENAPI_BODY, ctx),
        _ if !snapshot.is_ready() => return error(ApiError::NotReady),
        Route::Readyz => return json(StatusCode::OK, Bytes::from_static(READY)),
        Route::Status => return json(StatusCode::OK, snapshot.status().clone()),
        Route::Api(endpoint) => endpoint,
    };
    let token = token_of(&req);
    if token.is_empty() {
        return error(ApiError::MissingToken);
    }
    let Some(bundle) = std::str::from_utf8(token)
        .ok()
        .and_then(|t| snapshot.bundle(t))
    else {
        return error(ApiError::InvalidToken);
    };
    let (parts, request_body) = req.into_parts();
    let body = match endpoint {
        Endpoint::Event => &bundle.event,
        Endpoint::Payments => &bundle.payments,
        Endpoint::Submission => &bundle.submission,
        Endpoint::SubmissionList => &bundle.submission_list,
        Endpoint::Hotsite => &bundle.hotsite,
        Endpoint::PaymentDetails => match payment_details(&parts, request_body, bundle).await {
            Ok(body) => body,
            Err(e) => return error(e),
        },
    };
    represent(&parts.headers, body, ctx)
}

/// The answer for a prepared body: the encoding `Accept-Encoding` picks, its `ETag`, and 304 when
/// `If-None-Match` names that tag. No compression happens here unless a client refuses identity
/// for a body still being compressed in the background.
fn represent(headers: &HeaderMap, body: &store::Body, ctx: &Context) -> Response<Full<Bytes>> {
    let accept = headers.get(ACCEPT_ENCODING).and_then(|v| v.to_str().ok());
    let Some(wanted) = negotiate::choose(accept, ctx.compression, body.is_small()) else {
        let mut res = error(ApiError::NotAcceptable);
        res.headers_mut().insert(VARY, ACCEPT_ENCODING_VARY);
        return res;
    };
    let (encoding, bytes) = match body.ready(wanted) {
        Some(bytes) => (wanted, bytes.clone()),
        None if negotiate::accepts_identity(accept) => {
            (Encoding::Identity, body.identity().clone())
        }
        // Identity refused and the variant not made yet: a small body is compressed now (a few
        // ms); a large one is being compressed in the background, so ask the client to retry
        // rather than hold a worker for seconds.
        None if body.identity().len() > store::EAGER_COMPRESS_MAX => {
            let mut res = error(ApiError::NotReady);
            res.headers_mut().insert(VARY, ACCEPT_ENCODING_VARY);
            return res;
        }
        None => (wanted, body.encoded(wanted).clone()),
    };
    let etag = HeaderValue::from_str(&body.etag(encoding)).ok();
    let matched = match (
        headers.get(IF_NONE_MATCH).and_then(|v| v.to_str().ok()),
        &etag,
    ) {
        (Some(inm), Some(tag)) => negotiate::none_match(inm, tag.to_str().unwrap_or_default()),
        _ => false,
    };
    let mut res = if matched {
        let mut res = Response::new(Full::new(Bytes::new()));
        *res.status_mut() = StatusCode::NOT_MODIFIED;
        res
    } else {
        json(StatusCode::OK, bytes)
    };
    let h = res.headers_mut();
    if let Some(tag) = etag {
        h.insert(ETAG, tag);
    }
    h.insert(CACHE_CONTROL, NO_CACHE);
    h.insert(VARY, ACCEPT_ENCODING_VARY);
    if let (Some(name), false) = (encoding.header(), matched) {
        h.insert(CONTENT_ENCODING, HeaderValue::from_static(name));
    }
    res
}

/// The details answer: the reference from the query, else from the body (read up to the cap).
async fn payment_details<'a, B>(
    parts: &Parts,
    body: B,
    bundle: &'a Prepared,
) -> Result<&'a store::Body, ApiError>
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
    bundle
        .details
        .get(reference.as_str())
        .ok_or(ApiError::PaymentNotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_with_and_without_trailing_slash() {
        let api = |e| Some(Route::Api(e));
        assert_eq!(Route::of("/api/v1/event"), api(Endpoint::Event));
        assert_eq!(Route::of("/api/v1/event/"), api(Endpoint::Event));
        assert_eq!(Route::of("/api/v1/submission/"), api(Endpoint::Submission));
        assert_eq!(
            Route::of("/api/v1/submission/list/"),
            api(Endpoint::SubmissionList)
        );
        assert_eq!(Route::of("/API/V1/Hotsite/"), api(Endpoint::Hotsite));
        assert_eq!(Route::of("/healthz"), Some(Route::Healthz));
        assert_eq!(Route::of("/openapi.json"), Some(Route::OpenApi));
        assert_eq!(Route::of("/api/v1/event//"), None);
        assert_eq!(Route::of("/api/v1"), None);
        assert_eq!(Route::of("/"), None);
    }
}
