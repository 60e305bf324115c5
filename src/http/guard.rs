//! Checks that refuse an ambiguous or oversized request before it is routed (issue 15, item 4):
//! a `Host` that is missing from an HTTP/1.1 request, sent twice or not a host (RFC 9112
//! §3.2: a server must answer 400; hyper does not check), two different values of a header that
//! picks what is answered, a URL over [`MAX_URL_BYTES`], and a body on a request that takes none
//! over [`SMALL_BODY_LIMIT`]. hyper itself refuses header bytes that are not allowed (400) and a
//! head over `--max-header-bytes` (431).

use hyper::body::Body;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, HOST};
use hyper::{Method, Request, Uri, Version};

use crate::api::Route;
use crate::errors::ApiError;
use crate::token::{APP_HEADER, TOKEN_HEADER};

/// The longest URL (path and query) answered; a longer one gets 414.
pub(crate) const MAX_URL_BYTES: usize = 8 * 1024;

/// The largest body accepted on a request that reads none (every route but the details
/// endpoint, which reads up to `errors::BODY_LIMIT`); a larger one gets 413 and the connection
/// is closed. One of unknown length (chunked) is read up to the limit first: an empty one,
/// which some clients send on every GET, is no body.
pub(crate) const SMALL_BODY_LIMIT: u64 = 1024;

/// The one value of `name`, or why not: two different values are ambiguous (the same value
/// twice is not). `None` when absent.
fn single<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Result<Option<&'h HeaderValue>, ()> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    match first {
        Some(f) if values.any(|v| v != f) => Err(()),
        _ => Ok(first),
    }
}

/// The raw `Authorization-Token` value, or [`ApiError::AmbiguousToken`] when the request sends
/// two different ones (which one wins would be a guess).
pub(crate) fn token_header(headers: &HeaderMap) -> Result<Option<&[u8]>, ApiError> {
    single(headers, &TOKEN_HEADER)
        .map(|v| v.map(HeaderValue::as_bytes))
        .map_err(|()| ApiError::AmbiguousToken)
}

/// The host a request was sent to: the target's authority when it has one (an absolute-form
/// HTTP/1 target, which `Host` cannot override, RFC 9112 §3.2.2; HTTP/2's `:authority`), else
/// its `Host`. `Err` when no one host can be read: two different `Host` values, one that is
/// not visible ASCII (which hyper lets through), or an authority that is no `host[:port]` (a
/// user name: `127.0.0.1:1@evil.example`).
pub(crate) fn request_host<'r>(
    uri: &'r Uri,
    headers: &'r HeaderMap,
) -> Result<Option<&'r str>, ()> {
    if let Some(authority) = uri.authority() {
        let host = authority.as_str();
        return is_host(host.as_bytes()).then_some(Some(host)).ok_or(());
    }
    let mut values = headers.get_all(HOST).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.any(|v| v != first) {
        return Err(());
    }
    first.to_str().map(Some).map_err(|_| ())
}

/// Whether the request's `Host` is what RFC 9112 §3.2 asks: exactly one on an HTTP/1.1
/// request (HTTP/1.0 may send none; HTTP/2 names the host in `:authority`), never two, and a
/// host with an optional port (`uri-host [":" port]`, which may be empty), no user name.
fn host_is_valid<B>(req: &Request<B>) -> bool {
    let mut hosts = req.headers().get_all(HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) => req.version() != Version::HTTP_11,
        (Some(host), None) => is_host(host.as_bytes()),
        (Some(_), Some(_)) => false,
    }
}

/// `uri-host [":" port]` (RFC 3986 §3.2.2, RFC 9110 §7.2), the port digits or empty; an empty
/// `Host` too. Read in place: it runs on every request (`Authority::try_from` copies the bytes).
fn is_host(host: &[u8]) -> bool {
    // unreserved, sub-delims and `%` (of an escape); `:` only inside an IP literal.
    let name_byte = |b: &u8| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=%".contains(b);
    let (name_ok, port) = match host.strip_prefix(b"[") {
        Some(rest) => match rest.iter().position(|&b| b == b']') {
            Some(end) => (
                end > 0 && rest[..end].iter().all(|b| name_byte(b) || *b == b':'),
                &rest[end + 1..],
            ),
            None => return false,
        },
        None => match host.iter().rposition(|&b| b == b':') {
            Some(colon) => (host[..colon].iter().all(name_byte), &host[colon..]),
            None => (host.iter().all(name_byte), &[][..]),
        },
    };
    name_ok
        && port.strip_prefix(b":").map_or(port.is_empty(), |digits| {
            digits.iter().all(u8::is_ascii_digit)
        })
}

/// Why a request is refused before routing, if it is: a `Host` missing, twice or not a host
/// (400), a URL too long (414), two different `Authorization-App` values (400), a body where
/// none is read (413).
pub(crate) fn refusal<B: Body>(req: &Request<B>, route: Option<Route>) -> Option<ApiError> {
    if !host_is_valid(req) {
        return Some(ApiError::InvalidHost);
    }
    let url = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if url > MAX_URL_BYTES {
        return Some(ApiError::UriTooLong);
    }
    if single(req.headers(), &APP_HEADER).is_err() {
        return Some(ApiError::AmbiguousApp);
    }
    if takes_no_body(req, route) {
        let too_large = req
            .body()
            .size_hint()
            .upper()
            .is_some_and(|n| n > SMALL_BODY_LIMIT);
        if too_large {
            return Some(ApiError::BodyTooLarge);
        }
    }
    None
}

/// Whether a request is one that reads no body (a GET or HEAD of any route but the details
/// endpoint) and comes with one of unknown length, to be read up to [`SMALL_BODY_LIMIT`].
pub(crate) fn unknown_body<B: Body>(req: &Request<B>, route: Option<Route>) -> bool {
    takes_no_body(req, route) && req.body().size_hint().upper().is_none()
}

/// A GET or HEAD of a route that reads no body, sent with one.
fn takes_no_body<B: Body>(req: &Request<B>, route: Option<Route>) -> bool {
    let reads_body = route.is_some_and(Route::reads_body);
    matches!(*req.method(), Method::GET | Method::HEAD)
        && !reads_body
        && !req.body().is_end_stream()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http1_1_request_names_one_host() {
        let request = |version: Version, hosts: &[&[u8]]| {
            let mut req = Request::builder().version(version).uri("/api/v1/event");
            for host in hosts {
                req = req.header(HOST, HeaderValue::from_bytes(host).expect("a header value"));
            }
            req.body(()).expect("a request")
        };
        let valid = |version, hosts: &[&[u8]]| host_is_valid(&request(version, hosts));
        for (host, is_host) in [
            (&b"localhost"[..], true),
            (b"localhost:8080", true),
            (b"127.0.0.1:80", true),
            (b"[::1]:8080", true),
            (b"event.example", true),
            (b"", true),
            (b"user@event.example", false),
            (b"event.example:port", false),
            (b"event example", false),
            (b"event.example/path", false),
            (b"evil.example\xff", false),
        ] {
            assert_eq!(valid(Version::HTTP_11, &[host]), is_host, "{host:?}");
        }
        assert!(!valid(Version::HTTP_11, &[]));
        assert!(valid(Version::HTTP_10, &[]));
        assert!(valid(Version::HTTP_2, &[]));
        for hosts in [
            &[&b"localhost"[..], b"localhost"][..],
            &[b"a.example", b"b.example"],
        ] {
            assert!(!valid(Version::HTTP_11, hosts), "{hosts:?}");
            assert!(!valid(Version::HTTP_10, hosts), "{hosts:?}");
        }
    }

    #[test]
    fn the_same_token_twice_is_not_ambiguous_two_different_ones_are() {
        let mut h = HeaderMap::new();
        assert_eq!(token_header(&h), Ok(None));
        h.append(TOKEN_HEADER, HeaderValue::from_static("a"));
        h.append(TOKEN_HEADER, HeaderValue::from_static("a"));
        assert_eq!(token_header(&h), Ok(Some(&b"a"[..])));
        h.append(TOKEN_HEADER, HeaderValue::from_static("b"));
        assert_eq!(token_header(&h), Err(ApiError::AmbiguousToken));
    }
}
