//! Content negotiation and revalidation, as pure functions of header values: which encoding an
//! `Accept-Encoding` header picks (RFC 9110 §12.5.3, q-values, `*`, `identity;q=0`), and whether
//! an `If-None-Match` header matches an entity tag (weak comparison, lists, `*`).

use crate::prepare::Encoding;

/// The q-value a header gives each coding we can produce.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Weights {
    br: f32,
    gzip: f32,
    identity: f32,
}

/// The weight of identity when a header does not name it.
const UNNAMED_IDENTITY: f32 = 0.0001;

fn weights(header: &str) -> Weights {
    let (mut br, mut gzip, mut identity, mut star) = (None, None, None, None);
    for item in header.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        if coding.is_empty() {
            continue;
        }
        let mut q = 1.0_f32;
        for param in parts {
            if let Some((k, v)) = param.split_once('=') {
                if k.trim().eq_ignore_ascii_case("q") {
                    // A malformed q counts as 0: it must not select a coding by accident.
                    q = v
                        .trim()
                        .parse::<f32>()
                        .ok()
                        .filter(|q| (0.0..=1.0).contains(q))
                        .unwrap_or(0.0);
                }
            }
        }
        let slot = match coding.as_str() {
            "br" => &mut br,
            "gzip" | "x-gzip" => &mut gzip,
            "identity" => &mut identity,
            "*" => &mut star,
            _ => continue,
        };
        // The first mention of a coding counts.
        slot.get_or_insert(q);
    }
    Weights {
        br: br.or(star).unwrap_or(0.0),
        gzip: gzip.or(star).unwrap_or(0.0),
        // identity is acceptable unless excluded, by name or by `*;q=0`; when not named, it is
        // acceptable but ranks below every coding the client did name.
        identity: identity
            .or(star.filter(|q| *q == 0.0))
            .unwrap_or(UNNAMED_IDENTITY),
    }
}

/// The encoding to send, given the request's `Accept-Encoding` (None: header absent), whether
/// compression is on, and whether the body is small enough that compressing is not worth it.
/// `None` means nothing acceptable can be produced (406).
pub(crate) fn choose(accept: Option<&str>, compression: bool, small: bool) -> Option<Encoding> {
    let Some(header) = accept else {
        return Some(Encoding::Identity);
    };
    let w = weights(header);
    if !compression {
        // Nothing else to offer; refusing identity then would only break the client.
        return Some(Encoding::Identity);
    }
    if small && w.identity > 0.0 {
        return Some(Encoding::Identity);
    }
    // Highest q wins; on a tie br, then gzip, then identity.
    let ranked = [
        (w.br, Encoding::Brotli),
        (w.gzip, Encoding::Gzip),
        (w.identity, Encoding::Identity),
    ];
    let mut best: Option<(f32, Encoding)> = None;
    for (q, enc) in ranked {
        if q > 0.0 && best.is_none_or(|(bq, _)| q > bq) {
            best = Some((q, enc));
        }
    }
    best.map(|(_, enc)| enc)
}

/// Whether identity is acceptable to the request (no header: yes).
pub(crate) fn accepts_identity(accept: Option<&str>) -> bool {
    accept.is_none_or(|h| weights(h).identity > 0.0)
}

/// Whether an `If-None-Match` value matches `etag` (a quoted strong tag). Weak comparison, as
/// RFC 9110 §13.1.2 asks for this header: `W/"x"` matches `"x"`.
pub(crate) fn none_match(header: &str, etag: &str) -> bool {
    header
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Encoding::*;

    #[test]
    fn q_value_table() {
        let cases: [(Option<&str>, bool, Option<Encoding>); 17] = [
            (None, false, Some(Identity)),
            (Some(""), false, Some(Identity)),
            (Some("gzip"), false, Some(Gzip)),
            (Some("br"), false, Some(Brotli)),
            (Some("gzip, br"), false, Some(Brotli)),
            (Some("br;q=0.5, gzip"), false, Some(Gzip)),
            (Some("gzip;q=0.8, br;q=0.8"), false, Some(Brotli)),
            (Some("*"), false, Some(Brotli)),
            (Some("*;q=0.5, gzip;q=0.9"), false, Some(Gzip)),
            (Some("br;q=0, gzip;q=0"), false, Some(Identity)),
            (Some("identity;q=0, gzip"), false, Some(Gzip)),
            (Some("identity;q=0, br;q=0, gzip;q=0"), false, None),
            (Some("*;q=0"), false, None),
            (Some("deflate"), false, Some(Identity)),
            (Some("GZIP;Q=1"), false, Some(Gzip)),
            (Some("gzip;q=bogus"), false, Some(Identity)),
            (Some("gzip, br"), true, Some(Identity)),
        ];
        for (header, small, expected) in cases {
            assert_eq!(
                choose(header, true, small),
                expected,
                "{header:?} small={small}"
            );
        }
        assert_eq!(
            choose(Some("identity;q=0, gzip"), true, true),
            Some(Gzip),
            "small, identity refused"
        );
        assert_eq!(
            choose(Some("gzip, br"), false, false),
            Some(Identity),
            "compression off"
        );
        assert_eq!(
            choose(Some("identity;q=0"), false, false),
            Some(Identity),
            "compression off"
        );
    }

    #[test]
    fn if_none_match() {
        let tag = "\"abc\"";
        assert!(none_match("\"abc\"", tag));
        assert!(none_match("\"x\", \"abc\"", tag));
        assert!(none_match("W/\"abc\"", tag));
        assert!(none_match("*", tag));
        assert!(!none_match("\"abd\"", tag));
        assert!(!none_match("abc", tag));
    }
}
