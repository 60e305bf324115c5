//! CORS for browser clients. The API's custom `Authorization-Token` header makes every new origin
//! send a preflight, so `OPTIONS` on a known path answers one (no token needed), and every answer,
//! errors included, carries `Access-Control-Allow-Origin`, so a browser client can read a 401.

use hyper::header::{
    HeaderMap, HeaderValue, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, VARY,
};

const ANY: HeaderValue = HeaderValue::from_static("*");
const HEADERS: HeaderValue =
    HeaderValue::from_static("Authorization-Token, Authorization-App, Content-Type, If-None-Match, X-Eventbox-Delay, X-Eventbox-Status, X-Eventbox-Fault, X-Eventbox-Retry-After");
const EXPOSE: HeaderValue = HeaderValue::from_static("ETag, Retry-After, Age, Eventbox-Source");
/// How long a browser may cache a preflight answer, in seconds (browsers cap it lower).
const MAX_AGE: HeaderValue = HeaderValue::from_static("86400");
const ORIGIN_VARY: HeaderValue = HeaderValue::from_static("origin");

/// Which origins may read answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cors {
    /// No CORS headers; `OPTIONS` is 405.
    Off,
    /// Every origin (`Access-Control-Allow-Origin: *`).
    Any,
    /// These origins, echoed back with `Vary: Origin`.
    Origins(Vec<String>),
}

/// Checks a `--cors-origin` value: `*`, `none`, `null`, or an origin as browsers send it in
/// `Origin` (`scheme://host[:port]`). Anything else (no scheme, a path, a default port, a
/// wildcard) would match no request, silently: it is refused, with what to write instead.
pub(crate) fn check_origin(value: &str) -> Result<(), String> {
    let value = value.trim();
    if value == "*" || value == "null" || value.eq_ignore_ascii_case("none") {
        return Ok(());
    }
    let text = value.strip_suffix('/').unwrap_or(value);
    let wrong = |why: &str| Err(format!("--cors-origin {value:?} is not an origin: {why}"));
    let Ok(uri) = text.parse::<hyper::Uri>() else {
        return wrong("write scheme://host[:port], e.g. https://app.example");
    };
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return wrong(&format!("add its scheme, e.g. https://{text}"));
    };
    let origin = format!("{scheme}://{authority}");
    if authority.as_str().contains(['@', '*']) {
        return wrong("a browser's Origin has no user and no wildcard; list each origin, or *");
    }
    if origin.len() != text.len() {
        return wrong(&format!("an origin has no path or query: write {origin}"));
    }
    let default_port = match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    if authority.port_u16().is_some() && authority.port_u16() == default_port {
        return wrong(&format!(
            "a browser leaves the default port out of Origin: write {scheme}://{}",
            authority.host()
        ));
    }
    Ok(())
}

impl Cors {
    /// From `--cors-origin` values: `none` turns CORS off, `*` (the default) allows every origin.
    /// Spaces around a value and a trailing `/` are ignored (`a, b` in a variable). Each value
    /// is checked (`check_origin`); no value at all (which would allow every origin), and
    /// `none` beside origins (which would be dropped), are refused: neither says what it seems
    /// to.
    pub(crate) fn parse(origins: &[String]) -> Result<Cors, String> {
        for origin in origins {
            check_origin(origin)?;
        }
        let origins: Vec<&str> = origins.iter().map(|o| o.trim()).collect();
        let none = |o: &&str| o.eq_ignore_ascii_case("none");
        if origins.is_empty() {
            Err("--cors-origin names no origin: write \"*\" to allow every origin, or \"none\" to turn CORS off".to_string())
        } else if origins.iter().all(none) {
            Ok(Cors::Off)
        } else if origins.iter().any(none) {
            Err("--cors-origin none turns CORS off: it cannot be given with origins".to_string())
        } else if origins.contains(&"*") {
            Ok(Cors::Any)
        } else {
            Ok(Cors::Origins(
                origins
                    .iter()
                    .map(|o| o.trim_end_matches('/').to_string())
                    .collect(),
            ))
        }
    }

    pub(crate) fn is_on(&self) -> bool {
        *self != Cors::Off
    }

    /// The `Access-Control-Allow-Origin` value for a request's `Origin`, if it may read.
    fn allow(&self, origin: Option<&HeaderValue>) -> Option<HeaderValue> {
        match self {
            Cors::Off => None,
            Cors::Any => Some(ANY),
            Cors::Origins(list) => {
                let origin = origin?;
                let text = origin.to_str().ok()?;
                list.iter()
                    .any(|o| o.eq_ignore_ascii_case(text))
                    .then(|| origin.clone())
            }
        }
    }

    /// Adds the CORS headers of an ordinary answer (success or error).
    pub(crate) fn apply(&self, origin: Option<&HeaderValue>, headers: &mut HeaderMap) {
        if let Cors::Origins(_) = self {
            headers.append(VARY, ORIGIN_VARY);
        }
        if let Some(allow) = self.allow(origin) {
            headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, allow);
            headers.insert(ACCESS_CONTROL_EXPOSE_HEADERS, EXPOSE);
        }
    }

    /// Adds the headers of a preflight answer: nothing beyond `Vary` for an origin not allowed.
    /// `methods` are the route's (its table entry's).
    pub(crate) fn apply_preflight(
        &self,
        origin: Option<&HeaderValue>,
        methods: HeaderValue,
        headers: &mut HeaderMap,
    ) {
        if let Cors::Origins(_) = self {
            headers.append(VARY, ORIGIN_VARY);
        }
        if let Some(allow) = self.allow(origin) {
            headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, allow);
            headers.insert(ACCESS_CONTROL_ALLOW_METHODS, methods);
            headers.insert(ACCESS_CONTROL_ALLOW_HEADERS, HEADERS);
            headers.insert(ACCESS_CONTROL_MAX_AGE, MAX_AGE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_from_flags() {
        let parse =
            |list: &[&str]| Cors::parse(&list.iter().map(|o| o.to_string()).collect::<Vec<_>>());
        assert_eq!(parse(&["*"]), Ok(Cors::Any));
        assert_eq!(parse(&["none"]), Ok(Cors::Off));
        assert_eq!(parse(&["None", "none"]), Ok(Cors::Off));
        assert_eq!(
            parse(&["https://app.example/"]),
            Ok(Cors::Origins(vec!["https://app.example".into()]))
        );
        // EVENTBOX_CORS_ORIGIN="https://a.example, https://b.example", split at the comma.
        assert_eq!(
            parse(&["https://a.example", " https://b.example"]),
            Ok(Cors::Origins(vec![
                "https://a.example".into(),
                "https://b.example".into()
            ]))
        );
        // Nothing, or `none` beside an origin: refused, not every origin nor `none` dropped.
        let refused = parse(&[]).expect_err("empty");
        assert!(refused.contains("names no origin"), "{refused}");
        let refused = parse(&["none", "https://a.example"]).expect_err("none and an origin");
        assert!(
            refused.contains("cannot be given with origins"),
            "{refused}"
        );
        assert!(parse(&["app.example"]).is_err());
    }

    /// Values that would match no browser's `Origin` are refused with what to write instead.
    #[test]
    fn only_what_a_browser_can_send_is_taken_as_an_origin() {
        for ok in [
            "*",
            "none",
            "null",
            "https://app.example",
            "https://app.example/",
            " http://localhost:5173",
            "http://[::1]:8080",
        ] {
            assert_eq!(check_origin(ok), Ok(()), "{ok:?}");
        }
        for (wrong, says) in [
            ("app.example", "add its scheme, e.g. https://app.example"),
            (
                "localhost:5173",
                "add its scheme, e.g. https://localhost:5173",
            ),
            (
                "https://app.example/admin",
                "an origin has no path or query: write https://app.example",
            ),
            (
                "https://app.example?x=1",
                "an origin has no path or query: write https://app.example",
            ),
            (
                "https://app.example:443",
                "a browser leaves the default port out of Origin: write https://app.example",
            ),
            (
                "https://*.app.example",
                "a browser's Origin has no user and no wildcard; list each origin, or *",
            ),
            (
                "https://",
                "write scheme://host[:port], e.g. https://app.example",
            ),
        ] {
            let refused = check_origin(wrong).expect_err(wrong);
            assert_eq!(
                refused,
                format!("--cors-origin {wrong:?} is not an origin: {says}")
            );
        }
    }

    #[test]
    fn listed_origins_are_echoed_and_others_are_not() {
        let cors = Cors::Origins(vec!["https://app.example".into()]);
        let mut h = HeaderMap::new();
        cors.apply(
            Some(&HeaderValue::from_static("https://app.example")),
            &mut h,
        );
        assert_eq!(
            h.get(ACCESS_CONTROL_ALLOW_ORIGIN).map(|v| v.as_bytes()),
            Some(&b"https://app.example"[..])
        );
        assert_eq!(h.get(VARY).map(|v| v.as_bytes()), Some(&b"origin"[..]));
        let mut h = HeaderMap::new();
        cors.apply(
            Some(&HeaderValue::from_static("https://evil.example")),
            &mut h,
        );
        assert!(h.get(ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
    }
}
