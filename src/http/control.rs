//! Control headers: per-request simulation, only with `--allow-control-headers` (without the
//! flag the headers are ignored, so a client cannot slow a shared server down).
//!
//! - `X-Eventbox-Delay: <ms>` (or a duration with its unit, `3s`) waits that long before
//!   answering (capped by `--max-delay`);
//! - `X-Eventbox-Status: <400..=599>` answers that status with the simulated error body;
//! - `X-Eventbox-Fault: reset | empty | truncate` breaks the answer as [`Fault`] says;
//! - `X-Eventbox-Retry-After: <seconds | HTTP-date | none>` is the `Retry-After` of a simulated
//!   error (this request's or the bundle's drawn one), over the bundle's `retry_after`.
//!
//! A value that cannot be used is 400 `invalid_control_header`, not silently ignored: a test
//! that asks for a fault must not pass because nothing happened.

use std::time::Duration;

use hyper::header::{HeaderMap, HeaderName};

use crate::errors::SIMULATED_STATUSES;
use crate::model::formats::RetryAfter;
pub(crate) use crate::model::simulate::Fault;

/// A control header: its name, as the documentation spells it, and what it takes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ControlHeader {
    /// A `HeaderName` rather than text: a lookup by text parses the name on every request.
    pub(crate) name: HeaderName,
    spelled: &'static str,
    takes: &'static str,
}

pub(crate) static DELAY_HEADER: ControlHeader = ControlHeader::new(
    "x-eventbox-delay",
    "X-Eventbox-Delay",
    "milliseconds in plain digits, or a duration with its unit (250ms, 1.5s, 2min)",
);
pub(crate) static STATUS_HEADER: ControlHeader = ControlHeader::new(
    "x-eventbox-status",
    "X-Eventbox-Status",
    "a status from 400 to 599",
);
pub(crate) static FAULT_HEADER: ControlHeader = ControlHeader::new(
    "x-eventbox-fault",
    "X-Eventbox-Fault",
    "one of reset, empty, truncate",
);
pub(crate) static RETRY_AFTER_HEADER: ControlHeader = ControlHeader::new(
    "x-eventbox-retry-after",
    "X-Eventbox-Retry-After",
    "seconds (at most 18446744073709551615), an HTTP-date from 1970 on whose weekday matches its date, or none",
);

impl ControlHeader {
    const fn new(name: &'static str, spelled: &'static str, takes: &'static str) -> Self {
        ControlHeader {
            name: HeaderName::from_static(name),
            spelled,
            takes,
        }
    }
}

/// What a request's control headers ask for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Control {
    /// Already capped by `--max-delay`.
    pub(crate) delay: Option<Duration>,
    pub(crate) status: Option<u16>,
    pub(crate) fault: Option<Fault>,
    /// `Some(None)`: `none`, no `Retry-After` even where the bundle gives one.
    pub(crate) retry_after: Option<Option<RetryAfter>>,
}

/// A control header that cannot be used: 400 `invalid_control_header`, its message naming the
/// header and quoting its value (or saying that it was given twice with different values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadControl {
    pub(crate) header: &'static ControlHeader,
    /// The value that cannot be used, cut to [`MAX_QUOTED`] bytes; `None`: given twice.
    pub(crate) value: Option<String>,
}

/// The most bytes of a header's value quoted back.
const MAX_QUOTED: usize = 64;

impl BadControl {
    fn value(header: &'static ControlHeader, value: &str) -> BadControl {
        let mut value = value.to_string();
        super::journal::clip(&mut value, MAX_QUOTED);
        BadControl {
            header,
            value: Some(value),
        }
    }

    /// What the error's message adds: which header, and how it cannot be used.
    pub(crate) fn detail(&self) -> String {
        let ControlHeader { spelled, takes, .. } = self.header;
        match &self.value {
            None => format!("this request gives {spelled} twice, with different values."),
            Some(value) => format!("this request's {spelled} is `{value}`, not {takes}."),
        }
    }
}

/// The one value of header `name`, read by `parse`: `None` when absent. Given more than once, the
/// values must read the same (`reset` and `Reset`, `300` and `0300`): else which one the test
/// meant cannot be told, as with two different tokens.
fn one<T: PartialEq>(
    headers: &HeaderMap,
    header: &'static ControlHeader,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, BadControl> {
    let mut found: Option<T> = None;
    for value in headers.get_all(&header.name) {
        let read = value
            .to_str()
            .ok()
            .and_then(|t| parse(t.trim()))
            .ok_or_else(|| {
                BadControl::value(header, String::from_utf8_lossy(value.as_bytes()).trim())
            })?;
        match &found {
            Some(earlier) if *earlier != read => {
                return Err(BadControl {
                    header,
                    value: None,
                })
            }
            _ => found = Some(read),
        }
    }
    Ok(found)
}

/// Plain digits (`u64::from_str` also takes a leading `+`); beyond u64 is far beyond any cap.
fn digits(t: &str) -> Option<u64> {
    (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .then(|| t.parse::<u64>().unwrap_or(u64::MAX))
}

impl Control {
    /// Reads the control headers; `max_delay` caps the delay.
    pub(crate) fn from_headers(
        headers: &HeaderMap,
        max_delay: Duration,
    ) -> Result<Control, BadControl> {
        // Plain digits are milliseconds; a unit may be given as every duration of eventbox's
        // takes one.
        let delay = one(headers, &DELAY_HEADER, |t| {
            digits(t)
                .map(Duration::from_millis)
                .or_else(|| match humantime::parse_duration(t) {
                    Ok(d) => Some(d),
                    // A number too large for its unit is beyond any cap, as plain digits past
                    // u64 are: capped, not refused (when its unit is one).
                    Err(humantime::DurationError::NumberOverflow) => {
                        let unit = t.trim_start_matches(|c: char| c.is_ascii_digit()).trim();
                        humantime::parse_duration(&format!("1{unit}"))
                            .ok()
                            .map(|_| Duration::MAX)
                    }
                    Err(_) => None,
                })
                .map(|d| d.min(max_delay))
        })?;
        let status = one(headers, &STATUS_HEADER, |t| {
            digits(t)
                .and_then(|code| u16::try_from(code).ok())
                .filter(|code| SIMULATED_STATUSES.contains(code))
        })?;
        let fault = one(headers, &FAULT_HEADER, Fault::parse)?;
        let retry_after = one(headers, &RETRY_AFTER_HEADER, RetryAfter::parse_setting)?;
        Ok(Control {
            delay,
            status,
            fault,
            retry_after,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn control(pairs: &[(&'static ControlHeader, &'static str)]) -> Result<Control, BadControl> {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(&k.name, HeaderValue::from_static(v));
        }
        Control::from_headers(&h, Duration::from_secs(30))
    }

    #[test]
    fn values_are_read_and_the_delay_capped() {
        assert_eq!(control(&[]), Ok(Control::default()));
        let c = control(&[
            (&DELAY_HEADER, " 250 "),
            (&STATUS_HEADER, "429"),
            (&FAULT_HEADER, "Truncate"),
            (&RETRY_AFTER_HEADER, "Wed, 21 Oct 2026 07:28:00 GMT"),
        ])
        .expect("valid");
        assert_eq!(
            c.retry_after.flatten().map(|r| r.to_string()).as_deref(),
            Some("Wed, 21 Oct 2026 07:28:00 GMT")
        );
        assert_eq!(c.delay, Some(Duration::from_millis(250)));
        assert_eq!(c.status, Some(429));
        assert_eq!(c.fault, Some(Fault::Truncate));
        for huge in ["99999999999999999999999", "99999999999999999999999s"] {
            let capped = control(&[(&DELAY_HEADER, huge)]).expect("valid");
            assert_eq!(capped.delay, Some(Duration::from_secs(30)), "{huge}");
        }
        let durations = [
            ("250ms", 250),
            ("1.5s", 1500),
            ("3s", 3000),
            ("1m", 30_000),
            ("2y", 30_000),
        ];
        for (with_unit, ms) in durations {
            let c = control(&[(&DELAY_HEADER, with_unit)]).expect("a duration");
            assert_eq!(c.delay, Some(Duration::from_millis(ms)), "{with_unit}");
        }
        for bad in ["3 parsecs", "-1", "s", "3s 2"] {
            assert!(control(&[(&DELAY_HEADER, bad)]).is_err(), "{bad}");
        }
    }

    #[test]
    fn unusable_values_are_refused() {
        for pairs in [
            [(&DELAY_HEADER, "soon")],
            [(&DELAY_HEADER, "-5")],
            [(&DELAY_HEADER, "")],
            [(&STATUS_HEADER, "200")],
            [(&STATUS_HEADER, "600")],
            [(&STATUS_HEADER, "5o3")],
            [(&FAULT_HEADER, "explode")],
            [(&RETRY_AFTER_HEADER, "soon")],
            [(&RETRY_AFTER_HEADER, "-1")],
        ] {
            assert_eq!(
                control(&pairs),
                Err(BadControl::value(pairs[0].0, pairs[0].1)),
                "{pairs:?}"
            );
        }
    }

    #[test]
    fn a_header_given_twice_is_refused_unless_both_say_the_same() {
        let twice = |header: &'static ControlHeader, a: &'static str, b: &'static str| {
            let mut h = HeaderMap::new();
            h.append(&header.name, HeaderValue::from_static(a));
            h.append(&header.name, HeaderValue::from_static(b));
            Control::from_headers(&h, Duration::from_secs(30))
        };
        assert_eq!(
            twice(&DELAY_HEADER, "300", "0300").map(|c| c.delay),
            Ok(Some(Duration::from_millis(300)))
        );
        assert_eq!(
            twice(&FAULT_HEADER, "reset", "Reset").map(|c| c.fault),
            Ok(Some(Fault::Reset))
        );
        assert_eq!(
            twice(&DELAY_HEADER, "300", "600"),
            Err(BadControl {
                header: &DELAY_HEADER,
                value: None
            })
        );
        assert_eq!(
            twice(&STATUS_HEADER, "503", "oops"),
            Err(BadControl::value(&STATUS_HEADER, "oops"))
        );
    }

    #[test]
    fn the_message_quotes_the_value_cut_short() {
        let long = "9".repeat(200);
        let bad = control(&[(&STATUS_HEADER, " 5o3 ")]).expect_err("not a status");
        assert_eq!(
            bad.detail(),
            "this request's X-Eventbox-Status is `5o3`, not a status from 400 to 599."
        );
        let mut h = HeaderMap::new();
        h.insert(
            &DELAY_HEADER.name,
            HeaderValue::from_str(&format!("{long}x")).expect("a value"),
        );
        let bad = Control::from_headers(&h, Duration::from_secs(30)).expect_err("not digits");
        assert_eq!(bad.value, Some(format!("{}…", &long[..MAX_QUOTED])));
    }
}
