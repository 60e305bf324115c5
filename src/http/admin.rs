//! The admin rule (issue 13, item 7): the admin routes (`Operation::is_admin`: `/status`,
//! `/_journal`, `/_writes/reset`, `/_queue`; not the status page `/_ui`, which holds no data)
//! answer a loopback peer (127.0.0.0/8,
//! `::1`, and `::1`'s IPv4-mapped form `::ffff:127.x.y.z`) freely; any other peer needs the
//! admin token (`--admin-token`) as `Authorization: Bearer <token>`, compared in constant
//! time. Without a configured token a remote peer gets 403 `admin_local_only` (a loopback peer
//! under a host name that is not local, below, 403 `admin_host_not_local`); with one, a
//! missing or wrong bearer gets 401 `admin_token_required` (with `WWW-Authenticate: Bearer`,
//! added by `router::error`).
//!
//! A loopback peer is only "this machine" when it also addressed this machine by a loopback
//! name (`localhost`, `127.0.0.1`, `[::1]`: the request's `Host`): a web page whose host name
//! was rebound to 127.0.0.1 (DNS rebinding) reaches the server from loopback under its own
//! name, and is a remote client here. Nor does an admin route answer a request a browser sent
//! from a page of another origin (its `Origin` names another host than `Host`): 403
//! `admin_cross_origin`. Admin answers carry no CORS headers and admin routes answer no
//! preflight, so a page of another origin can neither read them nor send them a write.
//!
//! The peer is the TCP peer address, never `X-Forwarded-For`: that header is written by whoever
//! sends the request, so trusting it would let any remote client claim to be 127.0.0.1. Behind a
//! reverse proxy on the same machine every request is the proxy's (loopback), so such a proxy
//! must not forward the admin routes, or eventbox must listen where only the proxy reaches it
//! and the token be set (docs/operations.md).

use std::net::IpAddr;

use hyper::header::{HeaderMap, AUTHORIZATION, ORIGIN};
use hyper::Uri;

use super::guard::request_host;
use crate::errors::ApiError;
use crate::token::Token;

/// Whether `peer` is this machine's loopback: 127.0.0.0/8, `::1`, or an IPv4-mapped loopback
/// (a dual-stack listener on `::` sees IPv4 clients so).
pub(crate) fn is_loopback(peer: IpAddr) -> bool {
    peer.to_canonical().is_loopback()
}

/// Whether an admin route may answer a request from `peer` for `uri` with these headers, given
/// the configured admin token (`None`: loopback only).
pub(crate) fn check(
    token: Option<&Token>,
    peer: IpAddr,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    // A request whose host cannot be read names no loopback host.
    let host = request_host(uri, headers);
    if cross_origin(headers, host.ok().flatten()) {
        return Err(ApiError::AdminCrossOrigin);
    }
    if is_loopback(peer) && host.is_ok_and(|h| h.is_none_or(names_loopback)) {
        return Ok(());
    }
    let Some(token) = token else {
        return Err(if is_loopback(peer) {
            ApiError::AdminHostNotLocal
        } else {
            ApiError::AdminLocalOnly
        });
    };
    match bearer(headers) {
        Some(sent) if token.matches(sent) => Ok(()),
        _ => Err(ApiError::AdminTokenRequired),
    }
}

/// Whether `host` (`name[:port]`) cannot be a rebound name: `localhost`, an address (a page
/// can only rebind a name it owns; `0.0.0.0`, the address `serve` may print, reaches loopback
/// too), or the machine's own host name (which Debian maps to 127.0.1.1). Not names under
/// `localhost`: only some resolvers keep those local.
fn names_loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.parse::<IpAddr>().is_ok()
        || host_name().is_some_and(|own| own.eq_ignore_ascii_case(&name))
}

/// This machine's host name (`uname`), read once.
fn host_name() -> Option<&'static str> {
    static NAME: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            let uname = rustix::system::uname();
            let name = uname.nodename().to_str().ok()?.trim().to_string();
            (!name.is_empty()).then_some(name)
        }
        #[cfg(not(target_os = "linux"))]
        None
    })
    .as_deref()
}

/// Whether a browser sent the request from a page of another origin: its `Origin` is `null` (a
/// sandboxed page, a file) or names another host and port than the one the request went to.
fn cross_origin(headers: &HeaderMap, host: Option<&str>) -> bool {
    let Some(origin) = headers.get(ORIGIN) else {
        return false;
    };
    let Some((scheme, authority)) = origin.to_str().ok().and_then(|o| o.split_once("://")) else {
        return true;
    };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => ":80",
        "https" => ":443",
        _ => return true,
    };
    let plain = |a: &str| {
        let a = a.to_ascii_lowercase();
        a.strip_suffix(default_port)
            .map(str::to_string)
            .unwrap_or(a)
    };
    host.is_none_or(|host| plain(host) != plain(authority))
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

    use hyper::header::{HeaderValue, HOST};

    use super::*;

    const SECRET: &str = "s3cret-admin-token";

    fn headers(values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(HOST, HeaderValue::from_static("127.0.0.1:8080"));
        for v in values {
            h.append(AUTHORIZATION, HeaderValue::from_static(v));
        }
        h
    }

    /// The admin rule for a request to `/status` with these headers.
    fn check(token: Option<&Token>, peer: IpAddr, headers: &HeaderMap) -> Result<(), ApiError> {
        super::check(token, peer, &Uri::from_static("/status"), headers)
    }

    #[test]
    fn loopback_is_this_machine_only_when_addressed_by_a_loopback_name() {
        let peer = ip("127.0.0.1");
        let with_host = |host: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(HOST, HeaderValue::from_static(host));
            h
        };
        for local in [
            "localhost",
            "LOCALHOST:8080",
            "localhost.",
            "127.0.0.1",
            "127.9.9.9:8080",
            "[::1]:8080",
            "[::ffff:127.0.0.1]",
            "0.0.0.0:8080",
        ] {
            assert_eq!(check(None, peer, &with_host(local)), Ok(()), "{local}");
        }
        // DNS rebinding: a page's own name, resolved to 127.0.0.1.
        for rebound in [
            "evil.example:8080",
            "localhost.evil.example",
            "app.localhost:8080",
        ] {
            assert_eq!(
                check(None, peer, &with_host(rebound)),
                Err(ApiError::AdminHostNotLocal),
                "{rebound}"
            );
        }
        // The machine's own name (Debian resolves it to 127.0.1.1).
        if let Some(own) = host_name() {
            let mut h = HeaderMap::new();
            h.insert(
                HOST,
                HeaderValue::from_str(&format!("{own}:8080")).expect("a name"),
            );
            assert_eq!(check(None, ip("127.0.1.1"), &h), Ok(()), "{own}");
        }
        // No Host (HTTP/1.0): nothing was rebound.
        assert_eq!(check(None, peer, &HeaderMap::new()), Ok(()));
        // No one host can be read (the request is refused before routing, `http::guard`; this
        // rule does not count on it): two different ones, or one that is not visible ASCII.
        let mut two = with_host("localhost");
        two.append(HOST, HeaderValue::from_static("evil.example"));
        let unreadable = {
            let mut h = HeaderMap::new();
            let value = HeaderValue::from_bytes(b"evil.example\xff").expect("obs-text");
            h.insert(HOST, value);
            h
        };
        for h in [two, unreadable] {
            assert_eq!(
                check(None, peer, &h),
                Err(ApiError::AdminHostNotLocal),
                "{h:?}"
            );
        }
        // HTTP/2 gives the host as the URI's authority.
        let h2 = |authority: &str| {
            let uri: Uri = format!("http://{authority}/status").parse().expect("a URI");
            super::check(None, peer, &uri, &HeaderMap::new())
        };
        assert_eq!(h2("localhost:8080"), Ok(()));
        assert_eq!(h2("evil.example:8080"), Err(ApiError::AdminHostNotLocal));
        // An absolute-form HTTP/1 target's authority is the host, whatever `Host` says
        // (RFC 9112 §3.2.2).
        let absolute = |authority: &str, host: &'static str| {
            let uri: Uri = format!("http://{authority}/status").parse().expect("a URI");
            super::check(None, peer, &uri, &with_host(host))
        };
        assert_eq!(
            absolute("evil.example:8080", "127.0.0.1:8080"),
            Err(ApiError::AdminHostNotLocal)
        );
        assert_eq!(absolute("localhost:8080", "evil.example:8080"), Ok(()));
        // An authority with a user name is no loopback host, whatever it starts with.
        assert_eq!(
            absolute("127.0.0.1:1@evil.example", "127.0.0.1:8080"),
            Err(ApiError::AdminHostNotLocal)
        );
    }

    #[test]
    fn a_page_of_another_origin_is_refused_whoever_sends_it() {
        let token = Token::new(SECRET);
        let with = |origin: &'static str, host: &'static str| {
            let mut h = headers(&["Bearer s3cret-admin-token"]);
            h.insert(HOST, HeaderValue::from_static(host));
            h.insert(ORIGIN, HeaderValue::from_static(origin));
            h
        };
        for (origin, host) in [
            ("https://evil.example", "127.0.0.1:8080"),
            ("http://127.0.0.1:9999", "127.0.0.1:8080"),
            ("null", "127.0.0.1:8080"),
            ("file://", "127.0.0.1:8080"),
            ("https://localhost", "localhost:80"),
        ] {
            for peer in [ip("127.0.0.1"), ip("192.0.2.10")] {
                assert_eq!(
                    check(Some(&token), peer, &with(origin, host)),
                    Err(ApiError::AdminCrossOrigin),
                    "{origin} to {host} from {peer}"
                );
            }
        }
        // The status page's own requests (same origin).
        for (origin, host) in [
            ("http://127.0.0.1:8080", "127.0.0.1:8080"),
            ("http://LOCALHOST", "localhost:80"),
            ("https://eventbox.example", "eventbox.example"),
        ] {
            assert_eq!(
                check(Some(&token), ip("127.0.0.1"), &with(origin, host)),
                Ok(()),
                "{origin} to {host}"
            );
        }
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
