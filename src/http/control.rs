//! Control headers: per-request simulation, only with `--allow-control-headers` (without the
//! flag the headers are ignored, so a client cannot slow a shared server down).
//!
//! - `X-Eventbox-Delay: <ms>` waits that long before answering (capped by `--max-delay`);
//! - `X-Eventbox-Status: <400..=599>` answers that status with the simulated error body;
//! - `X-Eventbox-Fault: reset | empty | truncate` breaks the answer as [`Fault`] says.
//!
//! A value that cannot be used is 400 `invalid_control_header`, not silently ignored: a test
//! that asks for a fault must not pass because nothing happened.

use std::time::Duration;

use hyper::header::HeaderMap;

use super::errors::SIMULATED_STATUSES;

pub(crate) const DELAY_HEADER: &str = "x-eventbox-delay";
pub(crate) const STATUS_HEADER: &str = "x-eventbox-status";
pub(crate) const FAULT_HEADER: &str = "x-eventbox-fault";

/// The largest delay a request may ask for when `--max-delay` is not given.
pub(crate) const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(30);

/// How an answer is broken, as a real client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// No answer: the connection is reset (TCP RST). HTTP/2: the stream is reset.
    Reset,
    /// No answer: the connection is closed (FIN) without a byte. HTTP/2: the stream is reset.
    Empty,
    /// The status and headers with the full `Content-Length`, half the body, then the
    /// connection is closed. HTTP/2: the stream is reset after half the body.
    Truncate,
}

impl Fault {
    /// The header's value for this fault.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Fault::Reset => "reset",
            Fault::Empty => "empty",
            Fault::Truncate => "truncate",
        }
    }

    fn parse(text: &str) -> Option<Fault> {
        [Fault::Reset, Fault::Empty, Fault::Truncate]
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(text))
    }
}

/// What a request's control headers ask for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Control {
    /// Already capped by `--max-delay`.
    pub(crate) delay: Option<Duration>,
    pub(crate) status: Option<u16>,
    pub(crate) fault: Option<Fault>,
}

/// A control header whose value cannot be used: 400 `invalid_control_header`, its message
/// naming this header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadControl(pub(crate) &'static str);

impl BadControl {
    /// The header as the documentation spells it.
    pub(crate) fn header(self) -> &'static str {
        match self.0 {
            DELAY_HEADER => "X-Eventbox-Delay",
            STATUS_HEADER => "X-Eventbox-Status",
            _ => "X-Eventbox-Fault",
        }
    }
}

impl Control {
    /// Reads the control headers; `max_delay` caps the delay.
    pub(crate) fn from_headers(
        headers: &HeaderMap,
        max_delay: Duration,
    ) -> Result<Control, BadControl> {
        // A header given twice with different values is as unusable as a bad value: which one
        // the test meant cannot be told (as two different tokens are refused).
        let text = |name: &'static str| -> Result<Option<&str>, BadControl> {
            let mut values = headers.get_all(name).iter();
            let first = values.next();
            if values.any(|v| Some(v) != first) {
                return Err(BadControl(name));
            }
            first
                .map(|v| v.to_str().map(str::trim).map_err(|_| BadControl(name)))
                .transpose()
        };
        let number = |name: &'static str, t: &str| -> Result<u64, BadControl> {
            // `u64::from_str` also takes a leading `+`; a header value should be plain digits.
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(BadControl(name));
            }
            // Beyond u64 milliseconds is far beyond any cap.
            Ok(t.parse::<u64>().unwrap_or(u64::MAX))
        };
        let delay = match text(DELAY_HEADER)? {
            Some(t) => Some(Duration::from_millis(number(DELAY_HEADER, t)?).min(max_delay)),
            None => None,
        };
        let status = match text(STATUS_HEADER)? {
            Some(t) => {
                let code = number(STATUS_HEADER, t)?;
                match u16::try_from(code) {
                    Ok(code) if SIMULATED_STATUSES.contains(&code) => Some(code),
                    _ => return Err(BadControl(STATUS_HEADER)),
                }
            }
            None => None,
        };
        let fault = match text(FAULT_HEADER)? {
            Some(t) => Some(Fault::parse(t).ok_or(BadControl(FAULT_HEADER))?),
            None => None,
        };
        Ok(Control {
            delay,
            status,
            fault,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn control(pairs: &[(&'static str, &'static str)]) -> Result<Control, BadControl> {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        Control::from_headers(&h, Duration::from_secs(30))
    }

    #[test]
    fn values_are_read_and_the_delay_capped() {
        assert_eq!(control(&[]), Ok(Control::default()));
        let c = control(&[
            (DELAY_HEADER, " 250 "),
            (STATUS_HEADER, "429"),
            (FAULT_HEADER, "Truncate"),
        ])
        .expect("valid");
        assert_eq!(c.delay, Some(Duration::from_millis(250)));
        assert_eq!(c.status, Some(429));
        assert_eq!(c.fault, Some(Fault::Truncate));
        let capped = control(&[(DELAY_HEADER, "99999999999999999999999")]).expect("valid");
        assert_eq!(capped.delay, Some(Duration::from_secs(30)));
    }

    #[test]
    fn unusable_values_are_refused() {
        for pairs in [
            [(DELAY_HEADER, "soon")],
            [(DELAY_HEADER, "-5")],
            [(DELAY_HEADER, "")],
            [(STATUS_HEADER, "200")],
            [(STATUS_HEADER, "600")],
            [(STATUS_HEADER, "5o3")],
            [(FAULT_HEADER, "explode")],
        ] {
            assert_eq!(control(&pairs), Err(BadControl(pairs[0].0)), "{pairs:?}");
        }
    }

    #[test]
    fn a_header_given_twice_is_refused_unless_both_say_the_same() {
        let mut h = HeaderMap::new();
        h.append(DELAY_HEADER, HeaderValue::from_static("300"));
        h.append(DELAY_HEADER, HeaderValue::from_static("300"));
        let max = Duration::from_secs(30);
        assert_eq!(
            Control::from_headers(&h, max).map(|c| c.delay),
            Ok(Some(Duration::from_millis(300)))
        );
        h.append(DELAY_HEADER, HeaderValue::from_static("600"));
        assert_eq!(
            Control::from_headers(&h, max),
            Err(BadControl(DELAY_HEADER))
        );
    }
}
