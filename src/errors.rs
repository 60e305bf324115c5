//! The error contract: every error answer has the service's documented shape
//! `{"message": ..., "erros": [{"code": <status>, "description": <stable code>}], "count_erros": 1}`
//! with our stable code in `description`. The bodies are string constants, so an error costs no
//! serialisation either.

use bytes::Bytes;
use hyper::StatusCode;

/// The largest request body read, in bytes (64 KiB).
pub(crate) const BODY_LIMIT: usize = 64 * 1024;

/// The largest write body read, in bytes (1 MiB: a batch of a few thousand check-ins).
pub(crate) const WRITE_LIMIT: usize = 1024 * 1024;

/// The request bodies one server holds in memory at once, in KiB (64 MiB): each body read
/// first takes room for as much as it may hold (its declared length, else its limit) and waits
/// while there is none; a write keeps it until answered, so many connections or HTTP/2 streams sending bodies together (200
/// streams of 1 MiB on each connection) cannot make the server hold more.
pub(crate) const BODY_ROOM_KIB: usize = 64 * 1024;

// A body waits for room it could never get if its limit were larger than the whole room.
const _: () = assert!(WRITE_LIMIT / 1024 <= BODY_ROOM_KIB && BODY_LIMIT / 1024 <= BODY_ROOM_KIB);

/// Declares the errors once: each variant's status, stable code and message. The body is the
/// error shape with the status in `code` and the stable code in `description`, made at compile
/// time; a `documented` body is served as the platform's documentation writes it instead.
macro_rules! errors {
    ($(
        $(#[$doc:meta])*
        $name:ident = ($status:literal, $code:literal, $($documented:ident)? $text:literal),
    )*) => {
        /// An error answer of the API, by its stable code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum ApiError {
            $($(#[$doc])* $name,)*
        }

        impl ApiError {
            #[cfg(test)]
            pub(crate) const ALL: &[ApiError] = &[$(ApiError::$name,)*];

            pub(crate) fn status(self) -> StatusCode {
                let status: u16 = match self {
                    $(ApiError::$name => $status,)*
                };
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }

            /// The stable code, served in `erros[0].description` (but for documented bodies).
            #[cfg(test)]
            pub(crate) fn code(self) -> &'static str {
                match self {
                    $(ApiError::$name => $code,)*
                }
            }

            /// Whether the body is the documentation's own rather than the error shape.
            #[cfg(test)]
            pub(crate) fn is_documented(self) -> bool {
                match self {
                    $(ApiError::$name => errors!(@documented $($documented)?),)*
                }
            }

            /// The whole body.
            pub(crate) fn body(self) -> Bytes {
                Bytes::from_static(match self {
                    $(ApiError::$name => errors!(@body $status, $code, $($documented)? $text),)*
                }.as_bytes())
            }
        }
    };
    (@documented documented) => { true };
    (@documented) => { false };
    (@body $status:literal, $code:literal, documented $text:literal) => { $text };
    (@body $status:literal, $code:literal, $text:literal) => {
        concat!(
            "{\"message\":\"",
            $text,
            "\",\"erros\":[{\"code\":",
            $status,
            ",\"description\":\"",
            $code,
            "\"}],\"count_erros\":1}"
        )
    };
}

errors! {
    /// No `Authorization-Token` header, or a blank one.
    MissingToken = (401, "missing_token", "The Authorization-Token header is missing or blank."),
    /// A token that no bundle names.
    InvalidToken = (401, "invalid_token", "The Authorization-Token does not open any event."),
    /// A token its bundle's `bundle.toml` names that no served version has: the bundle has
    /// errors (in its files, or a token another bundle names) and no earlier version loaded, or
    /// an earlier version serves without this token, or it waits for its source's first
    /// refresh. 503, not 401: the token is good, so a client keeps it and retries, and a
    /// balancer tries another replica.
    BundleUnavailable = (503, "bundle_unavailable", "The event this Authorization-Token opens cannot be served for now: its bundle has errors (in its files, or a token another bundle also names) with no version of it loaded that this token opens, or it waits for its source's first refresh; the server's /status says which. Retry later."),
    /// `payments/details` without a reference.
    MissingReference = (400, "missing_reference", "The payment reference is missing: send reference in the query string, a JSON body or a form body."),
    /// A request body that is neither valid JSON (an object whose `reference` is a string) nor a
    /// valid form.
    InvalidBody = (400, "invalid_body", "The request body is neither JSON (an object whose reference is a string, or a string) nor a valid form."),
    /// A reference that no payment of the event has.
    PaymentNotFound = (404, "payment_not_found", "No payment of this event has that reference."),
    /// A request body over the cap.
    BodyTooLarge = (413, "body_too_large", "The request body is too large: writes take at most 1 MiB, payments/details and custom/* at most 64 KiB, other GET and HEAD requests at most 1 KiB."),
    /// A method other than GET or HEAD on a known path.
    MethodNotAllowed = (405, "method_not_allowed", "The method is not allowed on this resource; the Allow header lists those that are."),
    /// The first load has not finished yet.
    NotReady = (503, "not_ready", "eventbox is still loading its data; retry shortly."),
    /// `Accept-Encoding` accepts no encoding eventbox can send (one it does not name is not
    /// accepted, identity excepted: `identity;q=0` alone is a 406).
    NotAcceptable = (406, "not_acceptable", "Accept-Encoding accepts none of the encodings available: identity, gzip and br (a coding it does not name is not accepted; identity is, unless refused)."),
    /// An `X-Eventbox-Delay`, `-Status`, `-Fault` or `-Retry-After` value that cannot be used (with
    /// `--allow-control-headers`).
    InvalidControlHeader = (400, "invalid_control_header", "A control header cannot be used:"),
    /// `/_journal` while the request journal is off.
    JournalDisabled = (404, "journal_disabled", "The request journal is off; start eventbox with --journal N to keep the last N requests."),
    /// Two different `Authorization-Token` values in one request.
    AmbiguousToken = (400, "ambiguous_token", "The request has two different Authorization-Token headers; send one."),
    /// Two different `Authorization-App` values in one request.
    AmbiguousApp = (400, "ambiguous_app", "The request has two different Authorization-App headers; send one."),
    /// An HTTP/1.1 request without `Host`, any request with two, or a `Host` that is not a
    /// host and optional port (RFC 9112 §3.2; `http::guard`).
    InvalidHost = (400, "invalid_host", "The Host header is missing, sent twice, or not a host name or address with an optional port: an HTTP/1.1 request carries exactly one (RFC 9112, section 3.2)."),
    /// A URL (path and query) over `guard::MAX_URL_BYTES`.
    UriTooLong = (414, "uri_too_long", "The URL is longer than 8 KiB."),
    /// A request body that did not arrive whole within `--body-timeout`.
    BodyTimeout = (408, "body_timeout", "The request body did not arrive in time (--body-timeout); the connection is closed."),
    /// `GET /attendees/{id}` of an id no attendee has: the documented not-found answer of
    /// pessoas.md, `{"data": [], "count": 0}`.
    AttendeeNotFound = (404, "attendee_not_found", documented "{\"data\":[],\"count\":0}"),
    /// `GET /session/{id}` or `/speaker/{id}` of an id no record has: the one error of
    /// programacao.md, as written there (its `code` is 204, not the status).
    RecordNotFound = (404, "record_not_found", documented "{\"message\":\"Something bad happened :(\",\"erros\":[{\"code\":204,\"description\":\"Internal server error\"}],\"count_erros\":1}"),
    /// A write whose body is not JSON (the message says where it stops being JSON).
    InvalidJson = (400, "invalid_json", "The request body is not JSON:"),
    /// A write whose JSON is not what the endpoint takes (the message lists every problem).
    InvalidWrite = (400, "invalid_write", "The request body is not what this endpoint takes:"),
    /// A write with a `Content-Type` other than JSON.
    UnsupportedMediaType = (415, "unsupported_media_type", "Writes take JSON: send Content-Type: application/json (or none)."),
    /// A registration for an `id_ticket_price` the event does not have.
    UnknownTicketPrice = (400, "unknown_ticket_price", "The ticket price is not one of the event's:"),
    /// A second registration of an e-mail: the message a client author observed.
    AlreadyRegistered = (400, "already_registered", "Participante já está inscrito"),
    /// A check-in of a `checkin_code` no attendee has.
    UnknownCheckinCode = (404, "unknown_checkin_code", "No attendee has that check-in code:"),
    /// A check-in at an activity of an `id_attendees` no attendee has.
    UnknownAttendee = (404, "unknown_attendee", "No attendee has that id:"),
    /// A check-in at an `id_session` no activity has.
    UnknownSession = (404, "unknown_session", "No activity has that id:"),
    /// A write while eventbox runs with `--read-only`.
    ReadOnly = (405, "read_only", "eventbox runs with --read-only: writes and resets are refused."),
    /// A write that could not be made durable in the `--state` log.
    StateUnwritable = (500, "state_unwritable", "The write could not be saved in the state folder; it is not acknowledged."),
    /// `Authorization-App` missing on a company or institutional route (api-fgv.md's code).
    InvalidAuthorizationApp = (401, "InvalidAuthorizationApp", "The Authorization-App header is missing, blank, or not a key the bundle names."),
    /// A missing or unknown token on a company or institutional route (api-fgv.md's code).
    InvalidAuthorizationToken = (401, "InvalidAuthorizationToken", "The Authorization-Token is missing or is not allowed on this route."),
    /// An empty body or a bad date range on `custom/*` (api-fgv.md's code and status).
    InvalidParameter = (502, "InvalidParameter", "The body must be {\\\"dataInicio\\\": \\\"YYYY-MM-DD\\\", \\\"dataFim\\\": \\\"YYYY-MM-DD\\\"} with dataInicio not after dataFim."),
    /// A `/_journal` query parameter that is not a filter, or a filter value that cannot be
    /// used (answered with `http::journal::BadFilter::body`, which names the parameter).
    InvalidJournalFilter = (400, "invalid_journal_filter", "A /_journal filter cannot be used: method takes a method name, path a path starting with /, status a code (201) or a class (4xx); no other parameter is known."),
    /// An admin route (`/status`, `/_journal`, `/_writes/reset`, `/_queue`) asked for by
    /// a peer that is not loopback while no admin token is configured (`http::admin`).
    AdminLocalOnly = (403, "admin_local_only", "This operational endpoint answers loopback clients only: start eventbox with --admin-token to allow remote access with Authorization: Bearer."),
    /// An admin route asked for from loopback under a host name that may have been rebound
    /// there (DNS rebinding), or no readable host, while no admin token is configured
    /// (`http::admin`).
    AdminHostNotLocal = (403, "admin_host_not_local", "This operational endpoint answers a loopback client only when its Host is localhost, an address or this machine's name (any other name may be a web page's, rebound to this machine): send one of those, or start eventbox with --admin-token and send Authorization: Bearer."),
    /// An admin route asked for by a web page of another origin (`Origin`), which no admin
    /// route answers (`http::admin`).
    AdminCrossOrigin = (403, "admin_cross_origin", "This operational endpoint answers no request from a web page of another origin."),
    /// An admin route asked for by a peer that is not loopback without the configured admin
    /// token as `Authorization: Bearer` (answered with `WWW-Authenticate: Bearer`).
    AdminTokenRequired = (401, "admin_token_required", "This operational endpoint needs the admin token from a remote client: send Authorization: Bearer <admin token>."),
    /// `DELETE /_queue` without one `seq` that is a whole number from 1.
    InvalidQueueEntry = (400, "invalid_queue_entry", "DELETE /_queue takes one parameter, seq: the seq of a parked, rejected or pending entry of the token's bundle, as GET /_queue lists it."),
    /// `DELETE /_queue?seq=N` where the token's bundle has no parked, rejected or pending entry `N`.
    NotInQueue = (404, "not_in_queue", "The token's bundle has no parked, rejected or pending entry with that seq (GET /_queue lists them):"),
    /// `POST /_writes/reset` with a parameter or a body: the token alone picks the bundle, so
    /// `?bundle=other` would be ignored while the token's bundle is reset.
    InvalidReset = (400, "invalid_reset", "POST /_writes/reset takes no parameter and no body: the Authorization-Token picks the bundle whose writes are forgotten."),
    /// `page` or `per_page` that is not a whole number from 1.
    InvalidPaging = (400, "invalid_paging", "page and per_page take whole numbers from 1, each given once (per_page without page is page 1; page without per_page pages by 100)."),
}

/// The body of `e` with `detail` after its message (`"message": "<message> <detail>"`), for
/// errors whose message ends in a colon: what exactly was wrong.
pub(crate) fn detailed_body(e: ApiError, detail: &str) -> Bytes {
    with_message(e, |m| {
        m.push(' ');
        m.push_str(detail);
    })
}

/// The body of `e` with `message` for its message.
pub(crate) fn message_body(e: ApiError, message: &str) -> Bytes {
    with_message(e, |m| *m = message.to_string())
}

/// The body of `e` with its message changed by `change`.
fn with_message(e: ApiError, change: impl FnOnce(&mut String)) -> Bytes {
    let body = e.body();
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return body;
    };
    if let Some(serde_json::Value::String(m)) = v.get_mut("message") {
        change(m);
    }
    serde_json::to_vec(&v).map_or(body, Bytes::from)
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
        for &e in ApiError::ALL.iter().filter(|e| !e.is_documented()) {
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
