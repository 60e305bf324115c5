//! The `[simulate]` table of `bundle.toml`: latency, errors and faults a bundle's answers are
//! given, so API clients can be tested against the unhappy paths of the real service.
//!
//! Decoded like every other file: every problem is collected with its key
//! (`simulate.endpoints.payments.latency_ms`), values out of range are errors (the bundle is not
//! served, or keeps its last good version on reload) and unknown keys or endpoints are warnings.
//! Endpoint tables override the bundle's values field by field, so what is served is resolved
//! here once into one [`Settings`] per endpoint; the request path only indexes it.

use serde_json::{Map, Value};

use super::decode::{describe, join_key, Diag};
use super::formats::RetryAfter;

/// The status of a simulated error when `error_status` is not given.
pub(crate) const DEFAULT_ERROR_STATUS: u16 = 503;

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
    /// Its name, as `X-Eventbox-Fault` and `[simulate] fault` take it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Fault::Reset => "reset",
            Fault::Empty => "empty",
            Fault::Truncate => "truncate",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Fault> {
        [Fault::Reset, Fault::Empty, Fault::Truncate]
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(text))
    }
}

/// The keys of an endpoint's settings, in `[simulate]` and in each `[simulate.endpoints.KEY]`.
const FIELDS: [&str; 6] = [
    "latency_ms",
    "error_rate",
    "error_status",
    "retry_after",
    "fault_rate",
    "fault",
];

/// What one endpoint's answers are given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Settings {
    /// The delay before answering, uniform in `[min, max]` milliseconds (both included).
    pub(crate) latency_ms: (u64, u64),
    /// The share of requests answered with `error_status`, in `[0, 1]`.
    pub(crate) error_rate: f64,
    /// The status of a simulated error, in 400..=599.
    pub(crate) error_status: u16,
    /// The `Retry-After` of a simulated error (none by default).
    pub(crate) retry_after: Option<RetryAfter>,
    /// The share of requests given `fault` instead of an answer, in `[0, 1]`.
    pub(crate) fault_rate: f64,
    /// How those answers are broken (`reset` by default).
    pub(crate) fault: Fault,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            latency_ms: (0, 0),
            error_rate: 0.0,
            error_status: DEFAULT_ERROR_STATUS,
            retry_after: None,
            fault_rate: 0.0,
            fault: Fault::Reset,
        }
    }
}

/// A bundle's `[simulate]` table, resolved per endpoint.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Simulate {
    /// The seed of the sequence of delays and errors; `None`: seeded from the clock.
    pub(crate) seed: Option<u64>,
    /// One per endpoint, in the order of [`crate::api::API`] (whose keys name the
    /// `[simulate.endpoints.KEY]` tables).
    pub(crate) endpoints: Vec<Settings>,
}

/// The fields of the bundle-wide table and of each endpoint table, as written (`None`: absent
/// or invalid).
#[derive(Debug, Default, Clone, Copy)]
struct Partial {
    latency_ms: Option<(u64, u64)>,
    error_rate: Option<f64>,
    error_status: Option<u16>,
    /// `Some(None)`: `"none"`, the bundle's value removed for this endpoint.
    retry_after: Option<Option<RetryAfter>>,
    fault_rate: Option<f64>,
    fault: Option<Fault>,
}

impl Partial {
    fn over(self, base: Settings) -> Settings {
        Settings {
            latency_ms: self.latency_ms.unwrap_or(base.latency_ms),
            error_rate: self.error_rate.unwrap_or(base.error_rate),
            error_status: self.error_status.unwrap_or(base.error_status),
            retry_after: self.retry_after.unwrap_or(base.retry_after),
            fault_rate: self.fault_rate.unwrap_or(base.fault_rate),
            fault: self.fault.unwrap_or(base.fault),
        }
    }
}

/// Decodes the value of `simulate` in bundle.toml. `None` when it had an error (in `diag`).
pub(crate) fn simulate(v: &Value, diag: &mut Diag) -> Option<Simulate> {
    let path = "simulate";
    let map = table(v, path, diag)?;
    let before = errors(diag);
    let mut seed = None;
    let mut endpoint_tables: Vec<(usize, Partial)> = Vec::new();
    for (key, value) in map {
        let at = join_key(path, key);
        match key.as_str() {
            field if FIELDS.contains(&field) => {}
            "seed" => match value.as_u64() {
                Some(s) => seed = Some(s),
                None => diag.error(
                    &at,
                    format!("expected a non-negative integer, found {}", describe(value)),
                ),
            },
            "endpoints" => {
                let Some(endpoints) = table(value, &at, diag) else {
                    continue;
                };
                for (name, table_value) in endpoints {
                    let at = join_key(&at, name);
                    match crate::api::index_of(name) {
                        Some(index) => {
                            if let Some(t) = table(table_value, &at, diag) {
                                endpoint_tables.push((index, fields(t, &at, diag, false)));
                            }
                        }
                        None => diag.warning(
                            &at,
                            format!(
                                "unknown endpoint, ignored (known: {})",
                                crate::api::keys().collect::<Vec<_>>().join(", ")
                            ),
                        ),
                    }
                }
            }
            _ => diag.warning(
                &at,
                format!(
                    "unknown key, ignored (known: {}, seed, endpoints)",
                    FIELDS.join(", ")
                ),
            ),
        }
    }
    let base = fields(map, path, diag, true).over(Settings::default());
    let mut endpoints = vec![base; crate::api::API.len()];
    for (index, partial) in endpoint_tables {
        endpoints[index] = partial.over(base);
    }
    (errors(diag) == before).then_some(Simulate { seed, endpoints })
}

fn errors(diag: &Diag) -> usize {
    diag.findings
        .iter()
        .filter(|f| f.severity == crate::problem::Severity::Error)
        .count()
}

fn table<'v>(v: &'v Value, path: &str, diag: &mut Diag) -> Option<&'v Map<String, Value>> {
    match v {
        Value::Object(map) => Some(map),
        other => {
            diag.error(path, format!("expected a table, found {}", describe(other)));
            None
        }
    }
}

/// The settings of a table. The bundle-wide table's other keys are checked by the caller;
/// an endpoint table's unknown keys are warned about here.
fn fields(map: &Map<String, Value>, path: &str, diag: &mut Diag, bundle_wide: bool) -> Partial {
    let mut out = Partial::default();
    for (key, value) in map {
        let at = join_key(path, key);
        match key.as_str() {
            "latency_ms" => out.latency_ms = latency(value, &at, diag),
            "error_rate" => out.error_rate = rate(value, &at, diag),
            "fault_rate" => out.fault_rate = rate(value, &at, diag),
            "fault" => match value.as_str().and_then(Fault::parse) {
                Some(f) => out.fault = Some(f),
                None => diag.error(
                    &at,
                    format!(
                        "expected one of \"reset\", \"empty\", \"truncate\", found {}",
                        describe(value)
                    ),
                ),
            },
            "error_status" => match value.as_u64().and_then(|s| u16::try_from(s).ok()) {
                Some(s) if (400..=599).contains(&s) => out.error_status = Some(s),
                _ => diag.error(
                    &at,
                    format!(
                        "expected an HTTP error status from 400 to 599, found {}",
                        describe(value)
                    ),
                ),
            },
            "retry_after" => {
                let read = match value {
                    Value::Number(n) => n.as_u64().map(|s| Some(RetryAfter::Seconds(s))),
                    Value::String(text) => RetryAfter::parse_setting(text),
                    _ => None,
                };
                match read {
                    Some(r) => out.retry_after = Some(r),
                    None => diag.error(
                        &at,
                        format!(
                            "expected whole seconds (120), an HTTP-date from 1970 on whose weekday matches its date (\"Wed, 21 Oct 2026 07:28:00 GMT\") or \"none\", found {}",
                            describe(value)
                        ),
                    ),
                }
            }
            _ if bundle_wide => {}
            "seed" => diag.warning(
                &at,
                "unknown key, ignored (the seed is set once for the bundle, in [simulate])",
            ),
            _ => diag.warning(
                &at,
                format!("unknown key, ignored (known: {})", FIELDS.join(", ")),
            ),
        }
    }
    out
}

/// A share of requests: a number from 0 to 1.
fn rate(v: &Value, path: &str, diag: &mut Diag) -> Option<f64> {
    match v.as_f64() {
        Some(r) if v.is_number() && (0.0..=1.0).contains(&r) => Some(r),
        _ => {
            diag.error(
                path,
                format!("expected a number from 0 to 1, found {}", describe(v)),
            );
            None
        }
    }
}

/// `120` or `[50, 400]`: milliseconds, or a range with min ≤ max.
fn latency(v: &Value, path: &str, diag: &mut Diag) -> Option<(u64, u64)> {
    const EXPECTED: &str = "expected milliseconds (120) or a range [min, max] ([50, 400])";
    match v {
        Value::Number(n) => match n.as_u64() {
            Some(ms) => Some((ms, ms)),
            None => {
                diag.error(path, format!("{EXPECTED}, found {}", describe(v)));
                None
            }
        },
        Value::Array(items) => match items.as_slice() {
            [a, b] => match (a.as_u64(), b.as_u64()) {
                (Some(min), Some(max)) if min <= max => Some((min, max)),
                (Some(min), Some(max)) => {
                    diag.error(
                        path,
                        format!("the range [{min}, {max}] has its minimum above its maximum"),
                    );
                    None
                }
                _ => {
                    diag.error(
                        path,
                        format!("{EXPECTED}; the range holds something other than milliseconds"),
                    );
                    None
                }
            },
            _ => {
                diag.error(path, format!("{EXPECTED}; a range has exactly two numbers"));
                None
            }
        },
        other => {
            diag.error(path, format!("{EXPECTED}, found {}", describe(other)));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{parse_text, Format};

    fn decode(text: &str) -> (Option<Simulate>, Vec<String>) {
        let v = parse_text(text, Format::Toml).expect("valid TOML");
        let mut diag = Diag::default();
        let out = simulate(&v["simulate"], &mut diag);
        let lines = diag
            .findings
            .iter()
            .map(|f| format!("{}: {}: {}", f.severity.as_str(), f.path, f.message))
            .collect();
        (out, lines)
    }

    #[test]
    fn endpoint_tables_override_the_bundle_field_by_field() {
        let (sim, problems) = decode(
            "[simulate]\nlatency_ms = 120\nerror_rate = 0.05\nseed = 7\nretry_after = 30\n\
             fault_rate = 0.25\n\
             [simulate.endpoints.payments]\nlatency_ms = [200, 800]\nfault = \"Truncate\"\n\
             retry_after = \"Wed, 21 Oct 2026 07:28:00 GMT\"\n\
             [simulate.endpoints.submission_list]\nerror_status = 502\nretry_after = \"none\"\n",
        );
        assert_eq!(problems, Vec::<String>::new());
        let sim = sim.expect("valid");
        assert_eq!(sim.seed, Some(7));
        let at = |key| sim.endpoints[crate::api::index_of(key).expect("a key of the table")];
        let event = at("event");
        assert_eq!(event.latency_ms, (120, 120));
        assert_eq!(event.error_rate, 0.05);
        assert_eq!(event.error_status, DEFAULT_ERROR_STATUS);
        assert_eq!(at("payments").latency_ms, (200, 800));
        assert_eq!(at("payments").error_rate, 0.05);
        assert_eq!(at("submission_list").error_status, 502);
        assert_eq!(at("submission_list").latency_ms, (120, 120));
        assert_eq!((event.fault_rate, event.fault), (0.25, Fault::Reset));
        assert_eq!(
            (at("payments").fault_rate, at("payments").fault),
            (0.25, Fault::Truncate)
        );
        assert_eq!(event.retry_after, Some(RetryAfter::Seconds(30)));
        assert_eq!(at("submission_list").retry_after, None, "taken back");
        assert_eq!(
            at("payments").retry_after.map(|r| r.to_string()).as_deref(),
            Some("Wed, 21 Oct 2026 07:28:00 GMT")
        );
    }

    #[test]
    fn bad_values_are_errors_with_their_key_and_unknown_names_warnings() {
        let (sim, problems) = decode(
            "[simulate]\nerror_rate = 1.5\nerror_status = 302\nlatency_ms = [5]\nspeed = 1\n\
             retry_after = \"soon\"\nfault_rate = -0.1\nfault = \"boom\"\n\
             [simulate.endpoints.payments]\nlatency_ms = [800, 200]\nseed = 3\nretry_after = -1\n\
             fault = 3\n\
             [simulate.endpoints.tickets]\nerror_rate = 1\n",
        );
        let unknown = format!(
            "warning: simulate.endpoints.tickets: unknown endpoint, ignored (known: {})",
            crate::api::keys().collect::<Vec<_>>().join(", ")
        );
        assert_eq!(sim, None);
        assert_eq!(
            problems,
            vec![
                "warning: simulate.speed: unknown key, ignored (known: latency_ms, error_rate, error_status, retry_after, fault_rate, fault, seed, endpoints)",
                "error: simulate.endpoints.payments.latency_ms: the range [800, 200] has its minimum above its maximum",
                "warning: simulate.endpoints.payments.seed: unknown key, ignored (the seed is set once for the bundle, in [simulate])",
                "error: simulate.endpoints.payments.retry_after: expected whole seconds (120), an HTTP-date from 1970 on whose weekday matches its date (\"Wed, 21 Oct 2026 07:28:00 GMT\") or \"none\", found the number -1",
                "error: simulate.endpoints.payments.fault: expected one of \"reset\", \"empty\", \"truncate\", found the number 3",
                unknown.as_str(),
                "error: simulate.error_rate: expected a number from 0 to 1, found the number 1.5",
                "error: simulate.error_status: expected an HTTP error status from 400 to 599, found the number 302",
                "error: simulate.latency_ms: expected milliseconds (120) or a range [min, max] ([50, 400]); a range has exactly two numbers",
                "error: simulate.retry_after: expected whole seconds (120), an HTTP-date from 1970 on whose weekday matches its date (\"Wed, 21 Oct 2026 07:28:00 GMT\") or \"none\", found the string \"soon\"",
                "error: simulate.fault_rate: expected a number from 0 to 1, found the number -0.1",
                "error: simulate.fault: expected one of \"reset\", \"empty\", \"truncate\", found the string \"boom\"",
            ]
        );
    }

    #[test]
    fn warnings_alone_keep_the_table() {
        let (sim, problems) = decode("[simulate]\nerror_rate = 1\n[simulate.endpoints.nope]\n");
        assert_eq!(problems.len(), 1, "{problems:?}");
        let sim = sim.expect("served");
        assert!(sim.endpoints.iter().all(|e| e.error_rate == 1.0), "{sim:?}");
        let (sim, problems) = decode("simulate = 3\n");
        assert_eq!(sim, None);
        assert_eq!(
            problems,
            vec!["error: simulate: expected a table, found the number 3"]
        );
    }
}
