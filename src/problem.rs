//! One problem found while loading a data folder: an error (the bundle is not served) or a
//! warning (served anyway; `check --strict` counts it as an error).
//!
//! Every problem says which file and where in it, in the two forms users can act on:
//! `path:line:column: message` for syntax, `path: json.path: message` for content.

use std::fmt;
use std::path::{Path, PathBuf};

/// How serious a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The file is rejected and its bundle is not served.
    Error,
    /// Served anyway; `check --strict` turns it into an error.
    Warning,
}

impl Severity {
    /// The lower-case word printed before the problem.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// Where in a file a problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The file as a whole (it is missing, unreadable, or clashes with another file).
    File,
    /// A syntax error at a 1-based line and column.
    Text { line: usize, column: usize },
    /// A content error at a JSON path such as `data[17].date_payment`; empty for the root.
    Path(String),
}

/// One error or warning, tied to a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    pub file: PathBuf,
    pub location: Location,
    pub message: String,
}

impl Problem {
    pub(crate) fn error(
        file: impl AsRef<Path>,
        location: Location,
        message: impl Into<String>,
    ) -> Self {
        Problem {
            severity: Severity::Error,
            file: file.as_ref().to_path_buf(),
            location,
            message: message.into(),
        }
    }

    pub(crate) fn warning(
        file: impl AsRef<Path>,
        location: Location,
        message: impl Into<String>,
    ) -> Self {
        Problem {
            severity: Severity::Warning,
            ..Problem::error(file, location, message)
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// `data/x/event.json:12:5: message`, `data/x/payments.json: data[17].date_payment: message`
/// or `data/x/bundle.toml: message`. The severity is not part of it; callers add it.
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.display();
        match &self.location {
            Location::File => write!(f, "{file}: {}", self.message),
            Location::Text { line, column } => {
                write!(f, "{file}:{line}:{column}: {}", self.message)
            }
            Location::Path(p) if p.is_empty() => write!(f, "{file}: {}", self.message),
            Location::Path(p) => write!(f, "{file}: {p}: {}", self.message),
        }
    }
}

/// The one of `known` that `key` is most likely a slip for, if any is at least `at_least` alike
/// (Jaro similarity, 0 to 1): the "did you mean" of every name eventbox is given (a bundle.toml
/// key, a configuration key, an `EVENTBOX_*` variable).
pub(crate) fn closest<'k, S: AsRef<str> + ?Sized + 'k>(
    key: &str,
    known: impl IntoIterator<Item = &'k S>,
    at_least: f64,
) -> Option<&'k S> {
    known
        .into_iter()
        .map(|k| (strsim::jaro(key, k.as_ref()), k))
        .filter(|(score, _)| *score > at_least)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// The most characters of a value a message quotes: a file's 500 KB string or 200,000-digit
/// number would otherwise make a 500 KB log line, `/status` entry and `check` report.
const MAX_QUOTED: usize = 80;

/// A value for a message: escaped as one line (`{:?}`, quotes around), its first
/// [`MAX_QUOTED`] characters, `…` after the closing quote when cut.
pub(crate) fn quoted(text: &str) -> String {
    let (head, more) = head(text);
    format!("{head:?}{more}")
}

/// A value's first [`MAX_QUOTED`] characters as written (a number's digits), `…` when cut.
pub(crate) fn clipped(text: &str) -> String {
    let (head, more) = head(text);
    format!("{head}{more}")
}

/// The first [`MAX_QUOTED`] characters of `text`, and `…` when that is not all of it.
fn head(text: &str) -> (&str, &'static str) {
    match text.char_indices().nth(MAX_QUOTED) {
        Some((end, _)) => (&text[..end], "…"),
        None => (text, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_forms() {
        let p = Problem::error(
            "d/x/event.json",
            Location::Text {
                line: 12,
                column: 5,
            },
            "bad",
        );
        assert_eq!(p.to_string(), "d/x/event.json:12:5: bad");
        let p = Problem::warning("d/x/p.json", Location::Path("data[1].x".into()), "odd");
        assert_eq!(p.to_string(), "d/x/p.json: data[1].x: odd");
        assert!(!p.is_error());
        let p = Problem::error("d/x/bundle.toml", Location::File, "missing");
        assert_eq!(p.to_string(), "d/x/bundle.toml: missing");
    }

    #[test]
    fn quoted_values_are_one_line_and_cut_on_a_character() {
        assert_eq!(quoted("a\nb"), r#""a\nb""#);
        let long = "é".repeat(MAX_QUOTED + 1);
        assert_eq!(quoted(&long), format!("{:?}…", "é".repeat(MAX_QUOTED)));
        assert_eq!(quoted(&long[2..]), format!("{:?}", &long[2..]));
        assert_eq!(
            clipped(&"9".repeat(200_000)),
            format!("{}…", "9".repeat(MAX_QUOTED))
        );
        assert_eq!(clipped("12"), "12");
    }
}
