//! The on-disk model: what users write in a bundle, parsed and validated. No HTTP, no tokio, no
//! filesystem: `load` hands this module text, and gets back typed bodies or problems.
//!
//! - [`parse_text`] turns JSON or TOML text into a `serde_json::Value` (syntax errors carry
//!   line and column), so both formats share every rule after it;
//! - [`bodies`] decodes each file's value into an endpoint body, built from [`records`];
//! - [`schedule`] derives the programme by day from the activities;
//! - [`decode`] is the toolkit they use to collect every problem with its JSON path.

pub(crate) mod bodies;
pub(crate) mod decode;
#[cfg(test)]
mod fielddoc;
#[expect(
    dead_code,
    reason = "records of the rest of the documented API, tested, not served yet"
)]
pub(crate) mod formats;
pub(crate) mod payments;
pub(crate) mod records;
pub(crate) mod schedule;
pub(crate) mod simulate;
pub(crate) mod split;

use std::collections::BTreeMap;

use serde_json::{Number, Value};
use toml::de::DeValue;
use toml::Spanned;

use crate::api::FileBody;
use crate::token::Token;
use decode::Diag;

/// The two file formats a bundle may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Toml,
}

impl Format {
    /// The format a file extension names, if any.
    pub(crate) fn from_extension(ext: &str) -> Option<Format> {
        match ext {
            "json" => Some(Format::Json),
            "toml" => Some(Format::Toml),
            _ => None,
        }
    }
}

/// A syntax error at a 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) line: usize,
    pub(crate) column: usize,
    pub(crate) message: String,
}

/// Parses JSON or TOML text into one value tree. Numbers keep their text; object members keep
/// their order. TOML date-times become strings in the same notation.
pub(crate) fn parse_text(text: &str, format: Format) -> Result<Value, SyntaxError> {
    match format {
        Format::Json => serde_json::from_str(text).map_err(|e| {
            let full = e.to_string();
            let suffix = format!(" at line {} column {}", e.line(), e.column());
            let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
            SyntaxError {
                line: e.line().max(1),
                column: char_column(text, e.line(), e.column()),
                message,
            }
        }),
        Format::Toml => {
            let table = toml::de::DeTable::parse(text).map_err(|e| {
                let at = e.span().map_or(0, |s| s.start);
                syntax_error(text, at, e.message().trim_end())
            })?;
            let span = table.span();
            toml_to_json(text, Spanned::new(span, DeValue::Table(table.into_inner())))
        }
    }
}

/// A syntax error at a byte offset of `text`.
fn syntax_error(text: &str, offset: usize, message: &str) -> SyntaxError {
    let (line, column) = line_column(text, offset);
    SyntaxError {
        line,
        column,
        message: message.to_string(),
    }
}

/// serde_json counts columns in bytes; people (and TOML's errors here) count characters. Turns a
/// 1-based line and byte column into a 1-based character column, never less than 1.
pub(crate) fn char_column(text: &str, line: usize, byte_column: usize) -> usize {
    let line_text = text.split('\n').nth(line.saturating_sub(1)).unwrap_or("");
    let mut end = byte_column.min(line_text.len());
    // A column inside a multi-byte character counts that whole character.
    while !line_text.is_char_boundary(end) {
        end += 1;
    }
    line_text[..end].chars().count().max(1)
}

/// The 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// A TOML value as JSON. A float keeps the text it was written with (`10.00` is served as
/// `10.00`, as a JSON bundle serves it), less TOML's own `+` and `_`; `inf` and `nan` have no JSON
/// form and are a syntax error at their place (they became `null`, which a check then reported as
/// "found null" where the file says `nan`). Integers in any radix become decimal; a date-time
/// is TOML's notation of it, a bare date or time the string it is written as.
fn toml_to_json(text: &str, v: Spanned<DeValue<'_>>) -> Result<Value, SyntaxError> {
    let span = v.span();
    let start = span.start;
    Ok(match v.into_inner() {
        DeValue::String(s) => Value::String(s.into_owned()),
        DeValue::Integer(i) => {
            let n = i64::from_str_radix(i.as_str(), i.radix())
                .map(Number::from)
                .or_else(|_| u64::from_str_radix(i.as_str(), i.radix()).map(Number::from))
                .map_err(|_| syntax_error(text, start, "integer number overflowed"))?;
            Value::Number(n)
        }
        DeValue::Float(f) => {
            let written = f.as_str().trim_start_matches('+').replace('_', "");
            let n = written.parse::<Number>().map_err(|_| {
                syntax_error(
                    text,
                    start,
                    &format!("{} has no JSON form: write a number", f.as_str()),
                )
            })?;
            Value::Number(n)
        }
        DeValue::Boolean(b) => Value::Bool(b),
        // A date-time in TOML's own notation (a `T`, seconds written: what the fields of
        // dates take, whichever way the file spells it); a bare time or date as written
        // (`07:00` stays `07:00`, where the parsed value would print `07:00:00`).
        DeValue::Datetime(d) if d.date.is_some() && d.time.is_some() => {
            Value::String(d.to_string())
        }
        DeValue::Datetime(d) => Value::String(
            text.get(span)
                .map_or_else(|| d.to_string(), |written| written.trim().to_string()),
        ),
        DeValue::Array(a) => Value::Array(
            a.into_iter()
                .map(|v| toml_to_json(text, v))
                .collect::<Result<_, _>>()?,
        ),
        DeValue::Table(t) => Value::Object(
            t.into_iter()
                .map(|(k, v)| Ok((k.into_inner().into_owned(), toml_to_json(text, v)?)))
                .collect::<Result<_, SyntaxError>>()?,
        ),
    })
}

/// `bundle.toml`: the tokens that open the bundle, and what its answers simulate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BundleConfig {
    pub(crate) tokens: Vec<Token>,
    /// The `Authorization-App` values the company routes take (`app_keys`). `None` when they
    /// have an error (the bundle is not served then, and a last good version keeps its own).
    pub(crate) app_keys: Option<AppKeys>,
    /// The `[simulate]` table: latency and errors (see [`simulate`]).
    pub(crate) simulate: Option<simulate::Simulate>,
    /// The `[source]` table: where the bundle is pulled from (docs/kiosk.md).
    pub(crate) source: Option<Source>,
}

/// The `Authorization-App` values a bundle's company routes take.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum AppKeys {
    /// Any non-blank one: bundle.toml names no `app_keys`.
    #[default]
    Any,
    /// Those `app_keys` names (compared in constant time); none with `app_keys = []`.
    Only(std::sync::Arc<[Token]>),
}

impl AppKeys {
    /// Whether the company routes take `app` (trimmed, not blank).
    pub(crate) fn takes(&self, app: &str) -> bool {
        match self {
            AppKeys::Any => true,
            AppKeys::Only(keys) => keys.iter().any(|k| k.matches(app)),
        }
    }

    /// How many keys it names; `None` for any.
    pub(crate) fn count(&self) -> Option<usize> {
        match self {
            AppKeys::Any => None,
            AppKeys::Only(keys) => Some(keys.len()),
        }
    }
}

/// Where a bundle comes from: the API base `pull` copied it from, and when. `serve
/// --refresh-every` pulls it again from `url`; `Age` counts from `pulled_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Source {
    /// An `http` or `https` URL without credentials (the token is in `tokens`).
    pub(crate) url: String,
    /// When the snapshot was taken; `None` in a hand-written bundle not pulled yet.
    pub(crate) pulled_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// `bundle.toml`, for docs/bundles.md: its keys, as [`bundle_config`] reads them.
/// A JSON object's keys in order (tests of the served field order).
#[cfg(test)]
pub(crate) fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

#[cfg(test)]
pub(crate) const BUNDLE_TOML_DOC: bodies::BodyDoc = bodies::BodyDoc {
    holds: "The tokens that open the bundle (a client sends one as `Authorization-Token`), and \
        optionally the app keys its company routes take and what its answers simulate. Tokens \
        and app keys must not be blank or have white space around them; one listed twice and an \
        unknown key are warnings. `app_keys = []` takes no key (a warning): leave the key out to \
        take any non-blank `Authorization-App`.",
    records: &[("", || decode::Ty::Record {
        name: "bundle.toml",
        fields: &[
            decode::FieldDoc {
                key: "tokens",
                ty: || decode::Ty::Plain {
                    what: "list of strings, at least one",
                    example: "[\"token\"]",
                },
                presence: decode::Presence::Required,
            },
            decode::FieldDoc {
                key: "app_keys",
                ty: || decode::Ty::Plain {
                    what: "list of strings: the `Authorization-App` values the company routes \
                        take (docs/api.md); without it, any non-blank value",
                    example: "[\"app-key\"]",
                },
                presence: decode::Presence::Optional,
            },
            decode::FieldDoc {
                key: "simulate",
                ty: || {
                    decode::Ty::Plain {
                    what: "table: latency, errors and faults, bundle-wide and per endpoint (docs/client-testing.md)",
                    example: "{\"latency_ms\": 120}",
                }
                },
                presence: decode::Presence::Optional,
            },
            decode::FieldDoc {
                key: "source",
                ty: || {
                    decode::Ty::Plain {
                    what: "table: `url` (http or https, no credentials) the bundle is pulled \
                        from, and `pulled_at` (RFC 3339 date-time, with its offset) when; \
                        `pull` writes it, `serve --refresh-every` follows it (docs/kiosk.md)",
                    example: "{\"url\": \"https://host/api/v1\", \"pulled_at\": \"2026-11-23T14:03:27Z\"}",
                }
                },
                presence: decode::Presence::Optional,
            },
        ],
    })],
};

/// Decodes `bundle.toml`. At least one token; tokens are non-blank and have no surrounding white
/// space (the header is trimmed before matching, so such a token could never match). Unknown
/// keys and repeated tokens are warnings. Messages never quote a token whole. With no token
/// (`tokens = []`) it is an error, but the config is given, so that the empty list is known.
pub(crate) fn bundle_config(v: &Value, diag: &mut Diag) -> Option<BundleConfig> {
    let mut o = decode::Obj::new(v, "", diag)?;
    let tokens = o.raw("tokens");
    let app_keys = o.raw("app_keys");
    let simulate_table = o.raw("simulate");
    let source_table = o.raw("source");
    let extra = o.rest();
    for key in extra.keys() {
        diag.warning(key, unknown_bundle_key(key));
    }
    // A bundle.toml that reads without `tokens` names none, as `tokens = []` does: deleting the
    // line takes every token out, the last good version's too (it used to tell nothing, and a
    // token deleted to revoke it kept opening the last good version).
    let (out, ok) = match tokens {
        Some(tokens) => secrets("tokens", "a token", tokens, diag),
        None => {
            diag.error(
                "tokens",
                "missing required field: tokens = [\"...\"] names the tokens that open this bundle; without it, no request opens this bundle",
            );
            (Vec::new(), true)
        }
    };
    if ok && out.is_empty() && tokens.is_some() {
        // An error that still gives the (empty) list: how every token is taken out at once,
        // the last good version's too (a leaked only token).
        diag.error(
            "tokens",
            "at least one token is required; with none (tokens = []), no request opens this bundle",
        );
    }
    // An error here keeps the bundle from being served (it is in `diag`), not its tokens from
    // being known.
    let app_keys = match app_keys {
        None => Some(AppKeys::Any),
        Some(v) => match secrets("app_keys", "an app key", v, diag) {
            (keys, true) => {
                if keys.is_empty() {
                    // Not "any key", which leaving the key out says: a lock taking nothing
                    // (how a leaked only key is taken out at once).
                    diag.warning(
                        "app_keys",
                        "app_keys = [] takes no key: the company routes answer 401 \
                         InvalidAuthorizationApp to every request; leave app_keys out to take \
                         any non-blank Authorization-App",
                    );
                }
                Some(AppKeys::Only(keys.into()))
            }
            (_, false) => None,
        },
    };
    // Errors in [simulate] keep the bundle from being served (they are in `diag`), but its tokens
    // are still known, so clashes are found.
    let simulate = simulate_table.and_then(|v| simulate::simulate(v, diag));
    // So do errors in [source]: `tokens = []` still takes every token out.
    let source = source_table.and_then(|v| source(v, diag));
    ok.then_some(BundleConfig {
        tokens: out,
        app_keys,
        simulate,
        source,
    })
}

/// The warning for an unknown top-level key of `bundle.toml`, naming the key meant when it is
/// close to one (`app_key` for `app_keys`: ignored, it leaves the company routes open).
fn unknown_bundle_key(key: &str) -> String {
    const KNOWN: [&str; 4] = ["tokens", "app_keys", "simulate", "source"];
    if SOURCE_KEYS.contains(&key) {
        return format!("unknown key, ignored: `{key}` belongs in the [source] table");
    }
    match closest(key, &KNOWN) {
        Some(k) => format!("unknown key, ignored; did you mean {k:?}?"),
        None => format!(
            "unknown key, ignored; bundle.toml's keys are {}",
            KNOWN.join(", ")
        ),
    }
}

/// The keys of `[source]`.
const SOURCE_KEYS: [&str; 2] = ["url", "pulled_at"];

/// The one of `known` that `key` is most likely a slip for, if any is close.
fn closest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    crate::problem::closest(key, known.iter().copied(), 0.8)
}

/// Decodes a list of secrets (`tokens`, `app_keys`; each is `a_what`, "a token"): strings, not
/// blank, without white space around them (a header is trimmed before matching, so such a value
/// could never match); one listed twice is a warning. The good ones, and whether none was an
/// error. A value is never quoted whole, only its hint.
fn secrets(key: &str, a_what: &str, v: &Value, diag: &mut Diag) -> (Vec<Token>, bool) {
    let what = a_what.split_once(' ').map_or(a_what, |(_, w)| w);
    let Value::Array(items) = v else {
        diag.error(
            key,
            format!(
                "expected an array of strings, found {}; write {key} = [\"...\"]",
                kind_of(v)
            ),
        );
        return (Vec::new(), false);
    };
    let mut out: Vec<Token> = Vec::with_capacity(items.len());
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let path = format!("{key}[{i}]");
        match item {
            Value::String(s) if s.trim().is_empty() => {
                diag.error(&path, format!("{a_what} must not be blank"));
                ok = false;
            }
            Value::String(s) if s.trim() != s => {
                diag.error(
                    &path,
                    format!(
                        "{what} {} has white space around it; it could never match",
                        crate::token::token_hint(s.trim())
                    ),
                );
                ok = false;
            }
            Value::String(s) if out.contains(&Token::new(s)) => {
                diag.warning(
                    &path,
                    format!("{what} {} is listed twice", crate::token::token_hint(s)),
                );
            }
            Value::String(s) => out.push(Token::new(s)),
            other => {
                diag.error(
                    &path,
                    format!("expected a string, found {}", kind_of(other)),
                );
                ok = false;
            }
        }
    }
    (out, ok)
}

/// Decodes `[source]`: `url` required (http or https, a host, no credentials, nothing a header
/// could not carry), `pulled_at` optional (an RFC 3339 date-time with its offset, as `pull`
/// writes it; a TOML date-time or a string). Unknown keys are warnings.
fn source(v: &Value, diag: &mut Diag) -> Option<Source> {
    let errors_before = diag.findings.len();
    let mut o = decode::Obj::new(v, "source", diag)?;
    let url = o.raw("url");
    let pulled_at = o.raw("pulled_at");
    let extra = o.rest();
    for key in extra.keys() {
        let message = match key.as_str() {
            // Written below `[source]`, a top-level key becomes one of the table's.
            "tokens" | "app_keys" => format!(
                "unknown key, ignored: `{key}` is a top-level key; write it above the [source] table"
            ),
            _ => match closest(key, &SOURCE_KEYS) {
                Some(k) => format!("unknown key, ignored; did you mean {k:?}?"),
                None if closest(key, &["tokens", "app_keys"]).is_some() => {
                    "unknown key, ignored: top-level keys go above the [source] table".to_string()
                }
                None => "unknown key, ignored".to_string(),
            },
        };
        diag.warning(&decode::join_key("source", key), message);
    }
    let url = match url {
        None => {
            diag.error(
                "source.url",
                "missing required field: url = \"https://host/api/v1\" names where the bundle is pulled from",
            );
            None
        }
        Some(Value::String(text)) => match source_url_problem(text) {
            Some(problem) => {
                diag.error("source.url", problem);
                None
            }
            None => Some(text.trim().to_string()),
        },
        Some(other) => {
            diag.error(
                "source.url",
                format!("expected a string (a URL), found {}", kind_of(other)),
            );
            None
        }
    };
    let pulled_at = match pulled_at {
        None => None,
        Some(Value::String(text)) => match chrono::DateTime::parse_from_rfc3339(text.trim()) {
            Ok(t) => Some(t.with_timezone(&chrono::Utc)),
            Err(e) => {
                diag.error(
                    "source.pulled_at",
                    format!(
                        "{} is not an RFC 3339 date-time with an offset ({e}); write e.g. 2026-11-23T14:03:27Z",
                        decode::describe(&Value::String(text.clone()))
                    ),
                );
                None
            }
        },
        Some(other) => {
            diag.error(
                "source.pulled_at",
                format!(
                    "expected a date-time such as 2026-11-23T14:03:27Z, found {}",
                    kind_of(other)
                ),
            );
            None
        }
    };
    let failed = diag.findings[errors_before..]
        .iter()
        .any(|f| f.severity == crate::problem::Severity::Error);
    match (url, failed) {
        (Some(url), false) => Some(Source { url, pulled_at }),
        _ => None,
    }
}

/// Why `text` cannot be a source URL, if it cannot. The URL itself is never quoted whole: it
/// may hold a secret in its user part.
pub(crate) fn source_url_problem(text: &str) -> Option<String> {
    let text = text.trim();
    let uri = match text.parse::<hyper::Uri>() {
        Ok(uri) => uri,
        Err(e) => return Some(format!("not a URL ({e}); write e.g. https://host/api/v1")),
    };
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(_) => return Some("only http and https sources can be pulled from".into()),
        None => return Some("not an absolute URL; write e.g. https://host/api/v1".into()),
    }
    match uri.authority() {
        None => Some("the URL names no host; write e.g. https://host/api/v1".into()),
        Some(a) if a.as_str().contains('@') => {
            Some("credentials in the URL are not supported; the token goes in `tokens`".into())
        }
        Some(a) if a.host().is_empty() => {
            Some("the URL names no host; write e.g. https://host/api/v1".into())
        }
        Some(_) => None,
    }
}

/// The text of a `bundle.toml` naming `tokens`: `note` first, if any, as `# ` comment lines
/// (where the bundle came from), then `tokens = [...]` written by the TOML library, so any token
/// is quoted right. [`bundle_config`] reads it back to the same tokens. `pull`, `gen` and the
/// test server all write `bundle.toml` with it (a refresh edits the one in place:
/// [`with_pulled_at`]); `pull --app` gives its `app_keys` in `rest`. `source`, when given, is
/// written last as a `[source]` table.
pub(crate) fn bundle_toml(
    tokens: &[String],
    note: Option<&str>,
    source: Option<&Source>,
    rest: Option<&toml::Table>,
) -> String {
    let mut text = String::new();
    for line in note.iter().flat_map(|n| n.lines()) {
        text.push_str(format!("# {line}").trim_end());
        text.push('\n');
    }
    if note.is_some() {
        text.push_str("# The tokens that open this bundle.\n");
    }
    let tokens = toml::Value::Array(tokens.iter().cloned().map(toml::Value::String).collect());
    text.push_str(&format!("tokens = {tokens}\n"));
    if let Some(rest) = rest.filter(|r| !r.is_empty()) {
        // Only keys read back from a bundle.toml: serialisation cannot fail.
        if let Ok(more) = toml::to_string(rest) {
            text.push('\n');
            text.push_str(&more);
        }
    }
    if let Some(source) = source {
        text.push_str("\n[source]\n");
        text.push_str(&format!(
            "url = {}\n",
            toml::Value::String(source.url.clone())
        ));
        if let Some(at) = source.pulled_at {
            text.push_str(&format!("pulled_at = {}\n", pulled_at_text(at)));
        }
    }
    text
}

/// The `bundle.toml` a refresh swaps in: `read`, the one in place, as its author wrote it
/// (comments, order, layout, every key), with `[source] pulled_at` set to `at`.
pub(crate) fn with_pulled_at(
    read: &str,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut =
        read.parse().map_err(|e| format!("not valid TOML: {e}"))?;
    // Parsed as a TOML value, so it is written as `bundle_toml` writes it.
    let at: toml_edit::Value = pulled_at_text(at).parse().map_err(|e| format!("{e}"))?;
    let source = doc
        .get_mut("source")
        .and_then(toml_edit::Item::as_table_like_mut)
        .ok_or("it names no [source] table")?;
    match source
        .get_mut("pulled_at")
        .and_then(toml_edit::Item::as_value_mut)
    {
        // The value replaced, its comment and spacing kept.
        Some(old) => {
            let decor = old.decor().clone();
            *old = at;
            *old.decor_mut() = decor;
        }
        None => {
            source.insert("pulled_at", toml_edit::value(at));
        }
    }
    Ok(doc.to_string())
}

/// `pulled_at` as bundle.toml holds it: a TOML date-time, RFC 3339, in UTC, to the millisecond
/// (no fraction on a whole second). Whether the source took a write before a pull is told from
/// it: to the second, a pull a moment after the source took a check-in read as before it.
fn pulled_at_text(at: chrono::DateTime<chrono::Utc>) -> String {
    use chrono::SubsecRound;
    at.trunc_subsecs(3)
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// What kind of value this is, without its content (for values that may be secrets).
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

/// One event's data, whole and validated: what a bundle folder holds.
#[derive(Debug)]
pub(crate) struct Bundle {
    /// The folder's name.
    pub(crate) name: String,
    pub(crate) config: BundleConfig,
    /// One per entry of [`crate::api::API`], in its order.
    pub(crate) slots: Vec<Slot>,
}

/// What feeds one endpoint of a bundle (see [`crate::api::Feed`]).
#[derive(Debug)]
pub(crate) enum Slot {
    /// A file's body, decoded whole (the default body when the file is absent).
    Body(Box<dyn FileBody>),
    /// The payments, streamed.
    Stream(crate::prepare::Payments),
    /// Files by payment reference.
    PerReference(BTreeMap<String, Box<dyn FileBody>>),
    /// No file: answered from another entry's slot ([`crate::api::Feed::Item`],
    /// [`crate::api::Feed::Derived`]).
    Elsewhere,
}

impl Bundle {
    /// The first whole-file body of type `T` (the event, say).
    pub(crate) fn body<T: 'static>(&self) -> Option<&T> {
        self.slots.iter().find_map(|s| match s {
            Slot::Body(b) => b.as_any().downcast_ref::<T>(),
            _ => None,
        })
    }

    /// The streamed payments.
    pub(crate) fn payments(&self) -> Option<&crate::prepare::Payments> {
        self.slots.iter().find_map(|s| match s {
            Slot::Stream(p) => Some(p),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_syntax_errors_have_line_and_column() {
        let e = parse_text("{\n  \"a\": 1\n  \"b\": 2\n}", Format::Json).unwrap_err();
        assert_eq!((e.line, e.column), (3, 3));
        assert_eq!(e.message, "expected `,` or `}`");
    }

    #[test]
    fn json_columns_count_characters_not_bytes() {
        let e = parse_text("{\"título\": \"Três águas\" x}", Format::Json).unwrap_err();
        assert_eq!((e.line, e.column), (1, 25), "{e:?}");
        let e = parse_text("{\"a\": 1\n", Format::Json).unwrap_err();
        assert!(e.column >= 1, "{e:?}");
    }

    #[test]
    fn toml_syntax_errors_have_line_and_column() {
        let e = parse_text("a = 1\nb = \n", Format::Toml).unwrap_err();
        assert_eq!((e.line, e.column), (2, 5));
        assert!(
            e.message.contains("string values must be quoted"),
            "{}",
            e.message
        );
    }

    #[test]
    fn numbers_keep_their_text_and_members_their_order() {
        let v = parse_text(r#"{"z": 10.00, "a": 0.10}"#, Format::Json).expect("valid JSON");
        assert_eq!(v.to_string(), r#"{"z":10.00,"a":0.10}"#);
        let v =
            parse_text("z = 10.5\na = 2024-05-01T08:00:00\n", Format::Toml).expect("valid TOML");
        assert_eq!(v.to_string(), r#"{"z":10.5,"a":"2024-05-01T08:00:00"}"#);
    }

    #[test]
    fn toml_numbers_are_served_as_written() {
        let text = "a = 10.00\nb = 0.10\nc = 1_000.50\nd = +2.0e3\ne = -0.0\nf = 0x1F\n\
                    g = 1_000\nj = 18446744073709551615\n[t]\nk = [1.50, 2]\n";

        let v = parse_text(text, Format::Toml).expect("valid TOML");

        assert_eq!(
            v.to_string(),
            r#"{"a":10.00,"b":0.10,"c":1000.50,"d":2.0e+3,"e":-0.0,"f":31,"g":1000,"j":18446744073709551615,"t":{"k":[1.50,2]}}"#
        );
        // No JSON form: an error at its place, naming it as written.
        for (text, shown) in [("a = 1\nh = inf\n", "inf"), ("a = 1\nh = -nan\n", "-nan")] {
            let e = parse_text(text, Format::Toml).expect_err("no JSON form");
            assert_eq!((e.line, e.column), (2, 5), "{text:?}: {e:?}");
            assert_eq!(
                e.message,
                format!("{shown} has no JSON form: write a number")
            );
        }
        let json =
            parse_text(r#"{"amount": 10.00, "k": [1.50, 2e3]}"#, Format::Json).expect("JSON");
        let toml = parse_text("amount = 10.00\nk = [1.50, 2e3]\n", Format::Toml).expect("TOML");
        assert_eq!(
            toml.to_string(),
            json.to_string(),
            "the same text as the JSON twin"
        );
    }

    #[test]
    fn toml_date_times_take_tomls_notation_and_bare_times_their_own() {
        let text = "a = 07:00\nb = 08:00:00\nc = 2026-09-15\nd = 2026-09-15 08:00:00\n\
                    e = 2026-09-15T08:00\nf = 2026-09-15T08:00:00Z # UTC\n\
                    [t]\nk = [ 09:30 , 1979-05-27T07:32:00-08:00 ]\n";

        let v = parse_text(text, Format::Toml).expect("valid TOML");

        // Date-times in TOML's notation, which the date fields take (`T`, seconds); a bare
        // time or date as written.
        assert_eq!(
            v.to_string(),
            r#"{"a":"07:00","b":"08:00:00","c":"2026-09-15","d":"2026-09-15T08:00:00","e":"2026-09-15T08:00:00","f":"2026-09-15T08:00:00Z","t":{"k":["09:30","1979-05-27T07:32:00-08:00"]}}"#
        );
    }

    #[test]
    fn toml_duplicate_keys_and_tables_are_syntax_errors() {
        for (text, at) in [
            ("a = 1\na = 2\n", (2, 1)),
            ("[t]\nx = 1\n[t]\ny = 2\n", (3, 2)),
            ("x = 1.\n", (1, 7)),
        ] {
            let e = parse_text(text, Format::Toml).unwrap_err();
            assert_eq!((e.line, e.column), at, "{text:?}: {e:?}");
        }
    }

    #[test]
    fn toml_integers_beyond_u64_are_an_error_where_written() {
        let e = parse_text("a = 1\nbig = 99999999999999999999\n", Format::Toml).unwrap_err();
        assert_eq!((e.line, e.column), (2, 7), "{e:?}");
        assert_eq!(e.message, "integer number overflowed");
    }

    #[test]
    fn a_malformed_tokens_value_is_never_quoted() {
        for text in [
            "tokens = \"super-secret-token\"\n",
            "tokens = [\"ok-token-1\", 42, {a = \"super-secret-token\"}]\n",
        ] {
            let mut diag = Diag::default();
            let v = parse_text(text, Format::Toml).expect("valid TOML");
            assert_eq!(bundle_config(&v, &mut diag), None);
            assert!(!diag.findings.is_empty());
            for f in &diag.findings {
                assert!(!f.message.contains("secret"), "{}", f.message);
            }
        }
    }

    #[test]
    fn bundle_toml_reads_back_to_the_same_config() {
        let tokens = vec![
            "to\"k\\en".to_string(),
            "ünïcode-token".to_string(),
            "line\nbreak'quote".to_string(),
        ];
        for note in [None, Some("Pulled from http://h/api/v1\non 2026-11-23.")] {
            let text = bundle_toml(&tokens, note, None, None);

            let v = parse_text(&text, Format::Toml).expect("valid TOML");
            let mut diag = Diag::default();
            let config = bundle_config(&v, &mut diag);

            assert_eq!(
                config,
                Some(BundleConfig {
                    tokens: tokens.iter().map(|t| Token::new(t)).collect(),
                    app_keys: Some(AppKeys::Any),
                    simulate: None,
                    source: None,
                }),
                "{text}"
            );
            assert!(diag.findings.is_empty(), "{:?}", diag.findings);
            if note.is_some() {
                assert!(
                    text.starts_with("# Pulled from http://h/api/v1\n# on 2026-11-23.\n"),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn a_source_is_written_and_read_back_with_the_other_keys_kept() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-23T14:03:27Z")
            .expect("a date")
            .with_timezone(&chrono::Utc);
        let source = Source {
            url: "http://127.0.0.1:8080/api/v1".into(),
            pulled_at: Some(at),
        };
        let rest: toml::Table = toml::from_str("[simulate]\nlatency_ms = 120\n").expect("TOML");
        let text = bundle_toml(
            &["token-1".into()],
            Some("note"),
            Some(&source),
            Some(&rest),
        );

        let v = parse_text(&text, Format::Toml).expect("valid TOML");
        let mut diag = Diag::default();
        let config = bundle_config(&v, &mut diag).expect("valid");

        assert!(diag.findings.is_empty(), "{:?}\n{text}", diag.findings);
        assert_eq!(config.source, Some(source), "{text}");
        assert!(config.simulate.is_some(), "{text}");
        assert!(
            text.contains("pulled_at = 2026-11-23T14:03:27Z\n"),
            "{text}"
        );
    }

    #[test]
    fn a_refresh_sets_pulled_at_and_keeps_the_rest_as_written() {
        let at = |text: &str| {
            chrono::DateTime::parse_from_rfc3339(text)
                .expect("a date")
                .with_timezone(&chrono::Utc)
        };
        let read = "# The desk in hall B.\ntokens = [\"t\"]  # the organiser's\n\n[source]\n\
                    url = \"http://h\"   # the office\npulled_at = 2026-11-01T09:00:00Z  # the last pull\n\n\
                    [simulate]\nlatency_ms = 5\n";
        let text = with_pulled_at(read, at("2026-11-23T14:03:27.5Z")).expect("edited");
        assert_eq!(
            text,
            read.replace("2026-11-01T09:00:00Z", "2026-11-23T14:03:27.500Z")
        );
        // Written for the first time (a desk set up with a url alone), and in an inline table.
        let text = with_pulled_at(
            "tokens = [\"t\"]\n[source]\nurl = \"http://h\"\n",
            at("2026-11-23T14:03:27Z"),
        );
        assert_eq!(
            text.as_deref(),
            Ok("tokens = [\"t\"]\n[source]\nurl = \"http://h\"\npulled_at = 2026-11-23T14:03:27Z\n")
        );
        let text = with_pulled_at(
            "source = { url = \"http://h\" }\n",
            at("2026-11-23T14:03:27Z"),
        )
        .expect("edited");
        let table: toml::Table = toml::from_str(&text).expect(&text);
        assert_eq!(
            table["source"]["pulled_at"].to_string(),
            "2026-11-23T14:03:27Z",
            "{text}"
        );
        assert_eq!(table["source"]["url"].as_str(), Some("http://h"), "{text}");
        assert_eq!(
            with_pulled_at("tokens = [\"t\"]\n", at("2026-11-23T14:03:27Z")),
            Err("it names no [source] table".to_string())
        );
    }

    #[test]
    fn a_source_must_be_a_url_without_credentials_and_pulled_at_a_date_time() {
        let check = |toml_text: &str| {
            let v = parse_text(toml_text, Format::Toml).expect("valid TOML");
            let mut diag = Diag::default();
            let config = bundle_config(&v, &mut diag);
            (config.map(|c| c.source), diag.lines())
        };
        let ok = check("tokens = [\"t\"]\n[source]\nurl = \"https://h/api/v1\"\n");
        assert_eq!(
            ok,
            (
                Some(Some(Source {
                    url: "https://h/api/v1".into(),
                    pulled_at: None
                })),
                vec![]
            )
        );
        let quoted = check(
            "tokens = [\"t\"]\n[source]\nurl = \"http://h\"\npulled_at = \"2026-11-23T15:03:27+01:00\"\n",
        );
        assert_eq!(quoted.1, Vec::<String>::new());
        for (text, expected) in [
            (
                "[source]\nurl = \"ftp://h\"",
                "source.url: only http and https sources can be pulled from",
            ),
            ("[source]\nurl = \"not a url\"", "source.url: not a URL"),
            (
                "[source]\nurl = \"https://user:s3cret@h/api/v1\"",
                "source.url: credentials in the URL are not supported",
            ),
            (
                "[source]\nurl = 3",
                "source.url: expected a string (a URL), found a number",
            ),
            (
                "[source]\npulled_at = 2026-11-23T14:03:27Z",
                "source.url: missing required field",
            ),
            (
                "[source]\nurl = \"http://h\"\npulled_at = \"yesterday\"",
                "source.pulled_at: the string \"yesterday\" is not an RFC 3339 date-time",
            ),
            (
                "[source]\nurl = \"http://h\"\npulled_at = 2026-11-23T14:03:27",
                "source.pulled_at: the string \"2026-11-23T14:03:27\" is not an RFC 3339",
            ),
            ("source = \"http://h\"", "source: expected"),
        ] {
            let (config, lines) = check(&format!("tokens = [\"t\"]\n{text}\n"));
            assert_eq!(
                config,
                Some(None),
                "{text}: the tokens are known, the source is not"
            );
            assert!(
                lines.iter().any(|l| l.starts_with(expected)),
                "{text}: {lines:?}"
            );
            assert!(!lines.iter().any(|l| l.contains("s3cret")), "{lines:?}");
        }
        let (_, warned) = check("tokens = [\"t\"]\n[source]\nurl = \"http://h\"\nfrom = 1\n");
        assert_eq!(warned, vec!["source.from: unknown key, ignored"]);
    }

    #[test]
    fn bundle_config_rules() {
        let mut diag = Diag::default();
        let v = parse_text(
            "tokens = [\"abcdefgh\", \" padded-token\", \"abcdefgh\"]\nfoo = 1\n",
            Format::Toml,
        )
        .expect("valid TOML");
        assert_eq!(bundle_config(&v, &mut diag), None);
        assert_eq!(
            diag.lines(),
            vec![
                "foo: unknown key, ignored; bundle.toml's keys are tokens, app_keys, simulate, source",
                "tokens[1]: token padd… has white space around it; it could never match",
                "tokens[2]: token abcd… is listed twice",
            ]
        );
    }

    /// The slips that would leave the company routes open to any key say so: an empty list is a
    /// lock taking no key, with a warning (leaving the key out is how "any" is said), a
    /// misspelt key names the one meant, and one written below `[source]` says to move it up.
    #[test]
    fn app_keys_slips_are_named() {
        let check = |toml_text: &str| {
            let v = parse_text(toml_text, Format::Toml).expect("valid TOML");
            let mut diag = Diag::default();
            (bundle_config(&v, &mut diag), diag.lines())
        };
        let (config, lines) = check("tokens = [\"t\"]\napp_keys = []\n");
        let keys = config
            .and_then(|c| c.app_keys)
            .expect("served: a lock taking no key");
        assert!(!keys.takes("any"));
        assert_eq!(
            lines,
            ["app_keys: app_keys = [] takes no key: the company routes answer 401 InvalidAuthorizationApp to every request; leave app_keys out to take any non-blank Authorization-App"]
        );
        let (config, lines) = check("tokens = [\"t\"]\napp_key = [\"k\"]\n");
        assert!(config.is_some());
        assert_eq!(
            lines,
            ["app_key: unknown key, ignored; did you mean \"app_keys\"?"]
        );
        let (_, lines) =
            check("tokens = [\"t\"]\n[source]\nurl = \"http://h\"\napp_keys = [\"k\"]\n");
        assert_eq!(
            lines,
            ["source.app_keys: unknown key, ignored: `app_keys` is a top-level key; write it above the [source] table"]
        );
        for (text, says) in [
            (
                "url = \"http://h\"\n",
                "url: unknown key, ignored: `url` belongs in the [source] table",
            ),
            (
                "[source]\nurl = \"http://h\"\npulled = 1\n",
                "source.pulled: unknown key, ignored; did you mean \"pulled_at\"?",
            ),
            (
                "[source]\nurl = \"http://h\"\napp_key = []\n",
                "source.app_key: unknown key, ignored: top-level keys go above the [source] table",
            ),
        ] {
            let (_, lines) = check(&format!("tokens = [\"t\"]\n{text}"));
            assert_eq!(lines, [says], "{text}");
        }
        let (config, lines) = check("tokens = [\"t\"]\napp_keys = [\"k\", \"k\"]\n");
        assert_eq!(config.and_then(|c| c.app_keys?.count()), Some(1));
        assert_eq!(lines, ["app_keys[1]: app key … is listed twice"]);
    }
}
