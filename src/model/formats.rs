//! Text values whose format the platform's API documentation fixes: date-times, Brazilian
//! dates, hours and decimal coordinates. Each is a newtype built only by `parse`, so a record
//! that holds one is known to be well-formed; it serialises as the text exactly as it was
//! written.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use serde::Serialize;

use super::decode::{Field, Obj, TextFormat};
use crate::problem::quoted;

/// Whether `text` has exactly the shape of `pattern`, where `9` stands for any ASCII digit.
/// chrono alone would accept single-digit fields; the documentation's formats are fixed-width.
fn has_shape(text: &str, pattern: &str) -> bool {
    text.len() == pattern.len()
        && text.bytes().zip(pattern.bytes()).all(|(t, p)| match p {
            b'9' => t.is_ascii_digit(),
            _ => t == p,
        })
}

macro_rules! text_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
        #[serde(transparent)]
        pub(crate) struct $name(String);

        impl $name {
            pub(crate) fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Field for $name {
            fn read(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self> {
                o.text(key)
            }
        }
    };
    // A fixed-width shape (`9` is a digit) that chrono must also accept with `chrono_format`.
    ($(#[$doc:meta])* $name:ident, $shape:literal, $chrono:ty, $chrono_format:literal, $what:literal) => {
        text_newtype!($(#[$doc])* $name);

        impl TextFormat for $name {
            fn parse(text: &str) -> Result<Self, String> {
                if has_shape(text, $shape) && <$chrono>::parse_from_str(text, $chrono_format).is_ok() {
                    Ok($name(text.to_string()))
                } else {
                    Err(format!("{} is not {}", quoted(text), $what))
                }
            }
        }
    };
}

text_newtype!(
    /// `YYYY-MM-DDTHH:MM:SS`, ISO 8601 without a time zone.
    DateTime,
    "9999-99-99T99:99:99",
    NaiveDateTime,
    "%Y-%m-%dT%H:%M:%S",
    "a YYYY-MM-DDTHH:MM:SS date-time"
);
text_newtype!(
    /// `DD/MM/YYYY`.
    BrDate,
    "99/99/9999",
    NaiveDate,
    "%d/%m/%Y",
    "a DD/MM/YYYY date"
);
text_newtype!(
    /// `HH:MM`, 24-hour.
    HourMinute,
    "99:99",
    NaiveTime,
    "%H:%M",
    "an HH:MM hour"
);
text_newtype!(
    /// `YYYY-MM-DD`, a calendar date (the company events' `start_date`, api-fgv.md's range).
    IsoDate,
    "9999-99-99",
    NaiveDate,
    "%Y-%m-%d",
    "a YYYY-MM-DD date"
);
text_newtype!(
    /// A decimal number carried as text, such as `-23.5505`.
    DecimalText
);
text_newtype!(
    /// The `checkin_date` of a check-in: a "datetime" (models.md), which clients write as
    /// `YYYY-MM-DDTHH:MM:SS`, with or without fractional seconds and a zone (`Z`, `-03:00`);
    /// the forms the service's framework also reads as one are taken too: without seconds
    /// (`YYYY-MM-DDTHH:MM`), with a space for the `T`, or a date alone.
    CheckinDate
);

#[cfg(test)]
super::decode::describe_plain! {
    DateTime => "`YYYY-MM-DDTHH:MM:SS` date-time", "\"2026-09-15T08:00:00\"";
    BrDate => "`DD/MM/YYYY` date", "\"15/09/2026\"";
    HourMinute => "`HH:MM` hour", "\"09:30\"";
    DecimalText => "decimal number in a string", "\"-22.8478\"";
    IsoDate => "`YYYY-MM-DD` date", "\"2026-09-15\"";
    CheckinDate => "`YYYY-MM-DDTHH:MM:SS` date-time, may add fractions and a zone, or leave out the seconds or the time",
        "\"2026-09-15T08:00:00\"";
}

impl TextFormat for CheckinDate {
    fn parse(text: &str) -> Result<Self, String> {
        let local = [
            "%Y-%m-%dT%H:%M:%S%.f",
            "%Y-%m-%d %H:%M:%S%.f",
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%d %H:%M",
        ]
        .iter()
        .any(|f| NaiveDateTime::parse_from_str(text, f).is_ok())
            || chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok();
        if local || chrono::DateTime::parse_from_rfc3339(text).is_ok() {
            Ok(CheckinDate(text.to_string()))
        } else {
            Err(format!(
                "{} is not a date-time such as 2020-01-01T10:00:00",
                quoted(text)
            ))
        }
    }
}

impl TextFormat for DecimalText {
    fn parse(text: &str) -> Result<Self, String> {
        let digits = text.strip_prefix('-').unwrap_or(text);
        let (int, frac) = match digits.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (digits, None),
        };
        let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if all_digits(int) && frac.is_none_or(all_digits) {
            Ok(DecimalText(text.to_string()))
        } else {
            Err(format!("{} is not a decimal number", quoted(text)))
        }
    }
}

/// A `Retry-After` value as RFC 9110 §10.2.3 writes it: whole seconds, or an HTTP-date (read
/// in any of its three forms, written in the preferred one). Given to simulated errors
/// (`[simulate] retry_after`, `X-Eventbox-Retry-After`) and read from upstream answers by `pull`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryAfter {
    Seconds(u64),
    Date(std::time::SystemTime),
}

impl RetryAfter {
    /// The value of `text` (white space around it ignored); `None` when it is neither form.
    pub(crate) fn parse(text: &str) -> Option<RetryAfter> {
        let text = text.trim();
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            // Beyond u64 is no value: refused, never clamped to another one.
            return text.parse().ok().map(RetryAfter::Seconds);
        }
        httpdate::parse_http_date(text).ok().map(RetryAfter::Date)
    }

    /// A simulation's setting: a value, or `none` (any case) for no `Retry-After` at all, so
    /// that an endpoint or a request can take back the bundle's. `None` when it is neither.
    pub(crate) fn parse_setting(text: &str) -> Option<Option<RetryAfter>> {
        if text.trim().eq_ignore_ascii_case("none") {
            return Some(None);
        }
        RetryAfter::parse(text).map(Some)
    }

    /// How long it says to wait from `now` (a date in the past: no wait).
    pub(crate) fn wait(self, now: std::time::SystemTime) -> std::time::Duration {
        match self {
            RetryAfter::Seconds(s) => std::time::Duration::from_secs(s),
            RetryAfter::Date(when) => when.duration_since(now).unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for RetryAfter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RetryAfter::Seconds(s) => write!(f, "{s}"),
            RetryAfter::Date(when) => f.write_str(&httpdate::fmt_http_date(*when)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_or_an_http_date_in_any_form() {
        use std::time::{Duration, UNIX_EPOCH};
        assert_eq!(RetryAfter::parse(" 120 "), Some(RetryAfter::Seconds(120)));
        let date = UNIX_EPOCH + Duration::from_secs(784_111_777);
        for form in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(
                RetryAfter::parse(form),
                Some(RetryAfter::Date(date)),
                "{form}"
            );
        }
        // Written in the preferred form, whatever form it was read in.
        assert_eq!(
            RetryAfter::Date(date).to_string(),
            "Sun, 06 Nov 1994 08:49:37 GMT"
        );
        for bad in [
            "",
            "soon",
            "-5",
            "+5",
            "1.5",
            "99999999999999999999",
            "Sun, 06 Nov 1994 25:49:37 GMT",
            "Mon, 06 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(RetryAfter::parse(bad), None, "{bad:?}");
        }
        assert_eq!(RetryAfter::parse("0300"), Some(RetryAfter::Seconds(300)));
        assert_eq!(RetryAfter::parse_setting(" None "), Some(None));
        assert_eq!(
            RetryAfter::parse_setting("5"),
            Some(Some(RetryAfter::Seconds(5)))
        );
        assert_eq!(RetryAfter::parse_setting("never"), None);
        assert_eq!(
            RetryAfter::Date(date).wait(date + Duration::from_secs(9)),
            Duration::ZERO,
            "a date in the past means now"
        );
        assert_eq!(
            RetryAfter::Date(date + Duration::from_secs(9)).wait(date),
            Duration::from_secs(9)
        );
    }

    #[test]
    fn date_times() {
        assert!(DateTime::parse("2025-08-14T08:30:00").is_ok());
        for bad in [
            "2025-8-14T08:30:00",
            "2025-02-30T08:00:00",
            "2025-08-14 08:30:00",
            "2025-08-14T08:30",
            "2025-08-14T08:30:00Z",
        ] {
            assert!(DateTime::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn br_dates_and_hours() {
        assert!(BrDate::parse("29/02/2024").is_ok());
        assert_eq!(
            BrDate::parse("2024-13-01").unwrap_err(),
            "\"2024-13-01\" is not a DD/MM/YYYY date"
        );
        assert!(BrDate::parse("31/04/2024").is_err());
        assert_eq!(
            BrDate::parse("1\nerror: x").unwrap_err(),
            "\"1\\nerror: x\" is not a DD/MM/YYYY date",
            "file text never adds a line to a report"
        );
        assert!(HourMinute::parse("23:59").is_ok());
        assert!(HourMinute::parse("24:00").is_err());
        assert!(HourMinute::parse("9:30").is_err());
    }

    #[test]
    fn decimal_text() {
        for ok in ["-23.5505", "46", "0.0", "-0.5"] {
            assert!(DecimalText::parse(ok).is_ok(), "{ok} should be accepted");
        }
        for bad in ["", "-", "1.", ".5", "1,5", "abc", "1e5", " 1.0"] {
            assert!(
                DecimalText::parse(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    /// Every form `openapi.json`'s `checkin_date` pattern allows parses, and a few it does not
    /// are refused (a day-first date is ambiguous).
    #[test]
    fn a_checkin_date_takes_the_forms_the_framework_reads() {
        for ok in [
            "2026-09-15T08:00:00",
            "2026-09-15T08:00:00.123",
            "2026-09-15T08:00:00Z",
            "2026-09-15T08:00:00.5-03:00",
            "2026-09-15 08:00:00",
            "2026-09-15 08:00:00-03:00",
            "2026-09-15T08:00",
            "2026-09-15 08:00",
            "2026-09-15",
        ] {
            assert!(CheckinDate::parse(ok).is_ok(), "{ok:?} should be taken");
        }
        for bad in [
            "15/09/2026 08:00",
            "2026-09-15T08",
            "2026-13-01",
            "2026-09-15T08:00Z",
            "",
        ] {
            assert!(
                CheckinDate::parse(bad).is_err(),
                "{bad:?} should be refused"
            );
        }
    }
}
