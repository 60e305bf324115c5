//! The error contract: every error answer has the service's documented shape
//! `{"message": ..., "erros": [{"code": <status>, "description": <stable code>}], "count_erros": 1}`
//! with our stable code in `description`. The bodies are string constants, so an error costs no
//! serialisation either.

use bytes::Bytes;
use hyper::StatusCode;

/// An error answer of the API, by its stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiError {
    /// No `Authorization-Token` header, or a blank one.
    MissingToken,
    /// A token that no bundle names.
    InvalidToken,
    /// `payments/details` without a reference.
    MissingReference,
    /// A request body that is neither valid JSON nor a valid form.
    InvalidBody,
    /// A reference that no payment of the event has.
    PaymentNotFound,
    /// A request body over the cap.
    BodyTooLarge,
    /// A method other than GET or HEAD on a known path.
    MethodNotAllowed,
    /// The first load has not finished yet.
    NotReady,
    /// `Accept-Encoding` refuses every encoding eventbox can send.
    NotAcceptable,
    /// An `X-Eventbox-Delay`, `-Status` or `-Fault` value that cannot be used (with
    /// `--allow-control-headers`).
    InvalidControlHeader,
    /// `/_journal` while the request journal is off.
    JournalDisabled,
    /// Two different `Authorization-Token` values in one request.
    AmbiguousToken,
    /// Two different `Authorization-App` values in one request.
    AmbiguousApp,
    /// A URL (path and query) over `guard::MAX_URL_BYTES`.
    UriTooLong,
    /// A request body that did not arrive whole within `--body-timeout`.
    BodyTimeout,
    /// A `/_journal` query parameter that is not a filter, or a filter value that cannot be
    /// used (answered with [`journal_filter_body`], which names the parameter).
    InvalidJournalFilter,
}

/// The largest request body read, in bytes (64 KiB).
pub(crate) const BODY_LIMIT: usize = 64 * 1024;

macro_rules! error_body {
    ($message:literal, $status:literal, $code:literal) => {
        concat!(
            "{\"message\":\"",
            $message,
            "\",\"erros\":[{\"code\":",
            $status,
            ",\"description\":\"",
            $code,
            "\"}],\"count_erros\":1}"
        )
    };
}

impl ApiError {
    #[cfg(test)]
    pub(crate) const ALL: [ApiError; 16] = [
        ApiError::MissingToken,
        ApiError::InvalidToken,
        ApiError::MissingReference,
        ApiError::InvalidBody,
        ApiError::PaymentNotFound,
        ApiError::BodyTooLarge,
        ApiError::MethodNotAllowed,
        ApiError::NotReady,
        ApiError::NotAcceptable,
        ApiError::InvalidControlHeader,
        ApiError::JournalDisabled,
        ApiError::AmbiguousToken,
        ApiError::AmbiguousApp,
        ApiError::UriTooLong,
        ApiError::BodyTimeout,
        ApiError::InvalidJournalFilter,
    ];

    pub(crate) fn status(self) -> StatusCode {
        match self {
            ApiError::MissingToken | ApiError::InvalidToken => StatusCode::UNAUTHORIZED,
            ApiError::MissingReference
            | ApiError::InvalidBody
            | ApiError::InvalidControlHeader
            | ApiError::AmbiguousToken
            | ApiError::AmbiguousApp
            | ApiError::InvalidJournalFilter => StatusCode::BAD_REQUEST,
            ApiError::UriTooLong => StatusCode::URI_TOO_LONG,
            ApiError::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::PaymentNotFound | ApiError::JournalDisabled => StatusCode::NOT_FOUND,
            ApiError::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::NotReady => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
        }
    }

    /// The stable code, served in `erros[0].description`.
    #[cfg(test)]
    pub(crate) fn code(self) -> &'static str {
        match self {
            ApiError::MissingToken => "missing_token",
            ApiError::InvalidToken => "invalid_token",
            ApiError::MissingReference => "missing_reference",
            ApiError::InvalidBody => "invalid_body",
            ApiError::PaymentNotFound => "payment_not_found",
            ApiError::BodyTooLarge => "body_too_large",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::NotReady => "not_ready",
            ApiError::NotAcceptable => "not_acceptable",
            ApiError::InvalidControlHeader => "invalid_control_header",
            ApiError::JournalDisabled => "journal_disabled",
            ApiError::AmbiguousToken => "ambiguous_token",
            ApiError::AmbiguousApp => "ambiguous_app",
            ApiError::UriTooLong => "uri_too_long",
            ApiError::BodyTimeout => "body_timeout",
            ApiError::InvalidJournalFilter => "invalid_journal_filter",
        }
    }

    /// The whole body.
    pub(crate) fn body(self) -> Bytes {
        Bytes::from_static(
            match self {
                ApiError::MissingToken => error_body!(
                    "The Authorization-Token header is missing or blank.",
                    401,
                    "missing_token"
                ),
                ApiError::InvalidToken => error_body!(
                    "The Authorization-Token does not open any event.",
                    401,
                    "invalid_token"
                ),
                ApiError::MissingReference => error_body!(
                    "The payment reference is missing: send reference in the query string, a JSON body or a form body.",
                    400,
                    "missing_reference"
                ),
                ApiError::InvalidBody => error_body!(
                    "The request body is neither valid JSON nor a valid form.",
                    400,
                    "invalid_body"
                ),
                ApiError::PaymentNotFound => error_body!(
                    "No payment of this event has that reference.",
                    404,
                    "payment_not_found"
                ),
                ApiError::BodyTooLarge => error_body!(
                    "The request body is too large: payments/details reads at most 64 KiB, other requests take at most 1 KiB.",
                    413,
                    "body_too_large"
                ),
                ApiError::MethodNotAllowed => error_body!(
                    "The method is not allowed on this resource; the Allow header lists those that are.",
                    405,
                    "method_not_allowed"
                ),
                ApiError::NotReady => error_body!(
                    "eventbox is still loading its data; retry shortly.",
                    503,
                    "not_ready"
                ),
                ApiError::NotAcceptable => error_body!(
                    "Accept-Encoding refuses every encoding available: identity, gzip and br.",
                    406,
                    "not_acceptable"
                ),
                ApiError::InvalidControlHeader => error_body!(
                    "A control header cannot be used: X-Eventbox-Delay takes milliseconds, X-Eventbox-Status a status from 400 to 599, X-Eventbox-Fault one of reset, empty, truncate.",
                    400,
                    "invalid_control_header"
                ),
                ApiError::JournalDisabled => error_body!(
                    "The request journal is off; start eventbox with --journal N to keep the last N requests.",
                    404,
                    "journal_disabled"
                ),
                ApiError::AmbiguousToken => error_body!(
                    "The request has two different Authorization-Token headers; send one.",
                    400,
                    "ambiguous_token"
                ),
                ApiError::AmbiguousApp => error_body!(
                    "The request has two different Authorization-App headers; send one.",
                    400,
                    "ambiguous_app"
                ),
                ApiError::UriTooLong => error_body!(
                    "The URL is longer than 8 KiB.",
                    414,
                    "uri_too_long"
                ),
                ApiError::BodyTimeout => error_body!(
                    "The request body did not arrive in time (--body-timeout); the connection is closed.",
                    408,
                    "body_timeout"
                ),
                ApiError::InvalidJournalFilter => error_body!(
                    "A /_journal filter cannot be used: method takes a method name, path a path starting with /, status a code (201) or a class (4xx); no other parameter is known.",
                    400,
                    "invalid_journal_filter"
                ),
            }
            .as_bytes(),
        )
    }
}

/// The statuses a simulated error may have.
pub(crate) const SIMULATED_STATUSES: std::ops::RangeInclusive<u16> = 400..=599;

/// The body of a simulated error (`[simulate]` or `X-Eventbox-Status`): the error shape with the
/// status in `code` and `simulated_error` in `description`. One body per status, formatted once
/// for the whole process; answering clones it. `None` outside [`SIMULATED_STATUSES`].
pub(crate) fn simulated_error_body(status: u16) -> Option<Bytes> {
    static BODIES: std::sync::OnceLock<Vec<Bytes>> = std::sync::OnceLock::new();
    let bodies = BODIES.get_or_init(|| {
        SIMULATED_STATUSES
            .map(|s| {
                Bytes::from(format!(
                    "{{\"message\":\"Simulated error {s} (eventbox simulation).\",\"erros\":[{{\"code\":{s},\"description\":\"simulated_error\"}}],\"count_erros\":1}}"
                ))
            })
            .collect()
    });
    let index = status.checked_sub(*SIMULATED_STATUSES.start())?;
    bodies.get(usize::from(index)).cloned()
}

/// The body of [`ApiError::InvalidJournalFilter`] naming the parameter and what it takes, e.g.
/// ``"The /_journal parameter `status` cannot be used: it takes a status code ..."``. Formatted when
/// asked for, like the journal itself (an operations route).
pub(crate) fn journal_filter_body(bad: &super::journal::BadFilter) -> Bytes {
    let e = ApiError::InvalidJournalFilter;
    let body = serde_json::json!({
        "message": format!("The /_journal parameter `{}` cannot be used: it {}.", bad.parameter, bad.reason),
        "erros": [{"code": e.status().as_u16(), "description": "invalid_journal_filter"}],
        "count_erros": 1,
    });
    // A `Value` of strings and integers always serialises.
    serde_json::to_vec(&body).map_or_else(|_| e.body(), Bytes::from)
}

/// The body the service's web framework answers for an unknown path (capital `M`), quoting the
/// full request URL. Formatted, not serialised: only the URL needs escaping.
pub(crate) fn not_found_body(url: &str) -> Bytes {
    let mut out = String::with_capacity(url.len() + 80);
    out.push_str("{\"Message\":\"No HTTP resource was found that matches the request URI '");
    for c in url.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push_str("'.\"}");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn every_body_is_the_documented_shape() {
        for e in ApiError::ALL {
            let v: Value = serde_json::from_slice(&e.body()).expect("valid JSON");
            assert_eq!(v["erros"][0]["code"], e.status().as_u16(), "{e:?}");
            assert_eq!(v["erros"][0]["description"], e.code(), "{e:?}");
            assert_eq!(v["count_erros"], 1);
            assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
        }
    }

    #[test]
    fn simulated_errors_have_the_shape_for_every_status() {
        for status in [400, 418, 503, 599] {
            let body = simulated_error_body(status).expect("in range");
            let v: Value = serde_json::from_slice(&body).expect("valid JSON");
            assert_eq!(v["erros"][0]["code"], status);
            assert_eq!(v["erros"][0]["description"], "simulated_error");
            assert_eq!(v["count_erros"], 1);
        }
        assert_eq!(simulated_error_body(399), None);
        assert_eq!(simulated_error_body(600), None);
    }

    #[test]
    fn not_found_escapes_the_url() {
        let b = not_found_body("http://h/a\"b\\c");
        let v: Value = serde_json::from_slice(&b).expect("valid JSON");
        assert_eq!(
            v["Message"],
            "No HTTP resource was found that matches the request URI 'http://h/a\"b\\c'."
        );
    }
}
