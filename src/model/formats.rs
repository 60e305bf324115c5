//! Text values whose format the platform's API documentation fixes: date-times, Brazilian
//! dates, hours and decimal coordinates. Each is a newtype built only by `parse`, so a record
//! that holds one is known to be well-formed; it serialises as the text exactly as it was
//! written.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use serde::Serialize;

use super::decode::{Field, Obj, TextFormat};

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
                    Err(format!("{text:?} is not {}", $what))
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
    /// A decimal number carried as text, such as `-23.5505`.
    DecimalText
);

#[cfg(test)]
super::decode::describe_plain! {
    DateTime => "`YYYY-MM-DDTHH:MM:SS` date-time", "\"2026-09-15T08:00:00\"";
    BrDate => "`DD/MM/YYYY` date", "\"15/09/2026\"";
    HourMinute => "`HH:MM` hour", "\"09:30\"";
    DecimalText => "decimal number in a string", "\"-22.8478\"";
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
            Err(format!("{text:?} is not a decimal number"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
