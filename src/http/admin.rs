//! The admin rule (issue 13, item 7): the admin routes (`Operation::is_admin`: `/status`,
//! `/_journal`, `/_writes/reset`, `/_queue`, `/_ui`) answer a loopback peer (127.0.0.0/8,
//! `::1`, and `::1`'s IPv4-mapped form `::ffff:127.x.y.z`) freely; any other peer needs the
//! admin token (`--admin-token`) as `Authorization: Bearer <token>`, compared in constant
//! time. Without a configured token a remote peer gets 403 `admin_local_only`; with one, a
//! missing or wrong bearer gets 401 `admin_token_required` (with `WWW-Authenticate: Bearer`,
//! added by `router::error`).
//!
//! The peer is the TCP peer address, never `X-Forwarded-For`: that header is written by whoever
//! sends the request, so trusting it would let any remote client claim to be 127.0.0.1. Behind a
//! reverse proxy on the same machine every request is the proxy's (loopback), so such a proxy
//! must not forward the admin routes, or eventbox must listen where only the proxy reaches it
//! and the token be set (docs/operations.md).

use std::net::IpAddr;

use hyper::header::{HeaderMap, AUTHORIZATION};

use super::errors::ApiError;
use crate::token::Token;

/// Whether `peer` is this machine's loopback: 127.0.0.0/8, `::1`, or an IPv4-mapped loopback
/// (a dual-stack listener on `::` sees IPv4 clients so).
pub(crate) fn is_loopback(peer: IpAddr) -> bool {
    peer.to_canonical().is_loopback()
}

/// Whether an admin route may answer a request from `peer` with these headers, given the
/// configured admin token (`None`: loopback only).
pub(crate) fn check(
    token: Option<&Token>,
    peer: IpAddr,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    if is_loopback(peer) {
        return Ok(());
    }
    let Some(token) = token else {
        return Err(ApiError::AdminLocalOnly);
    };
    match bearer(headers) {
        Some(sent) if token.matches(sent) => Ok(()),
        _ => Err(ApiError::AdminTokenRequired),
    }
}

/// The token of the request's one `Authorization: Bearer <token>` (the scheme in any ASCII case,
/// RFC 9110 §11.1; white space around the token trimmed). `None` when absent, blank, of another
/// scheme, not text, or when the request sends two different `Authorization` values.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let first = values.next()?;
    if values.any(|v| v != first) {
        return None;
    }
    let text = first.to_str().ok()?.trim();
    let (scheme, rest) = text.split_once(' ')?;
    let token = rest.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use hyper::header::HeaderValue;

    use super::*;

    const SECRET: &str = "s3cret-admin-token";

    fn headers(values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(AUTHORIZATION, HeaderValue::from_static(v));
        }
        h
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn loopback_peers_are_local_and_others_are_not() {
        for local in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(ip(local)), "{local}");
        }
        for remote in [
            "10.0.0.1",
            "192.168.1.20",
            "172.17.0.1",
            "0.0.0.0",
            "::",
            "::ffff:10.0.0.1",
            "fe80::1",
            "fd00::2",
            "2001:db8::1",
        ] {
            assert!(!is_loopback(ip(remote)), "{remote}");
        }
    }

    #[test]
    fn a_loopback_peer_needs_nothing_whatever_is_configured() {
        let token = Token::new(SECRET);
        for peer in [
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ] {
            assert_eq!(check(None, peer, &headers(&[])), Ok(()));
            assert_eq!(check(Some(&token), peer, &headers(&[])), Ok(()));
            assert_eq!(
                check(Some(&token), peer, &headers(&["Bearer wrong"])),
                Ok(())
            );
        }
    }

    #[test]
    fn a_remote_peer_without_a_configured_token_is_refused_even_with_a_bearer() {
        let peer = ip("192.0.2.10");
        assert_eq!(
            check(None, peer, &headers(&[])),
            Err(ApiError::AdminLocalOnly)
        );
        assert_eq!(
            check(None, peer, &headers(&["Bearer anything"])),
            Err(ApiError::AdminLocalOnly)
        );
    }

    #[test]
    fn a_remote_peer_needs_the_exact_bearer() {
        let token = Token::new(SECRET);
        let peer = ip("::ffff:192.0.2.10");
        let verdict = |values: &[&'static str]| check(Some(&token), peer, &headers(values));
        for good in [
            &["Bearer s3cret-admin-token"][..],
            &["bearer   s3cret-admin-token "],
            &["BEARER s3cret-admin-token", "BEARER s3cret-admin-token"],
        ] {
            assert_eq!(verdict(good), Ok(()), "{good:?}");
        }
        for bad in [
            &[][..],
            &["Bearer"],
            &["Bearer "],
            &["s3cret-admin-token"],
            &["Basic s3cret-admin-token"],
            &["Bearer s3cret-admin-toke"],
            &["Bearer s3cret-admin-tokenX"],
            &["Bearer S3CRET-ADMIN-TOKEN"],
            &["Bearer s3cret-admin-token", "Bearer other"],
        ] {
            assert_eq!(verdict(bad), Err(ApiError::AdminTokenRequired), "{bad:?}");
        }
    }
}
