//! The one place that makes served bytes: from a validated bundle to its answers (compact JSON,
//! gzip and brotli variants, each with its `ETag` header value formatted once), the `/status`
//! body and the OpenAPI document's body. Nothing else creates a success body; `http` only picks
//! one (the fixed error bodies are constants in `http/errors.rs`).
//!
//! A body is prepared before a snapshot is published; compressed variants of bodies up to
//! [`EAGER_COMPRESS_MAX`] too, larger ones on a background thread after publishing, or on first
//! demand. A payment without a detail file answers a row assembled per request from the payments
//! body (see `model::payments::DerivedRow`), formatted then.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, OnceLock};

use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use hyper::header::HeaderValue;
use serde::Serialize;

use crate::catalog::{Entry, Records};
use crate::model::payments::DerivedRow;
use crate::model::{Bundle, Slot};
use crate::problem::Severity;
use crate::simulate::Simulation;

/// A content coding eventbox can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    Gzip,
    Brotli,
}

impl Encoding {
    /// The `Content-Encoding` value; none for identity.
    pub fn header(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Gzip => Some("gzip"),
            Encoding::Brotli => Some("br"),
        }
    }
}

/// Bodies smaller than this are sent plain unless the client refuses identity.
pub const MIN_COMPRESS: usize = 1024;
/// Bodies up to this size are compressed (at the highest useful levels) when prepared; larger ones
/// (at faster levels) on a background thread once published, identity being served meanwhile.
pub const EAGER_COMPRESS_MAX: usize = 1 << 20;

/// The compressed variants of a body, and their `ETag`s.
#[derive(Debug)]
pub struct Compressed {
    pub gzip: Bytes,
    pub br: Bytes,
    gzip_etag: HeaderValue,
    br_etag: HeaderValue,
}

/// One answer: its bytes and `ETag`, and its compressed variants with theirs, each made once
/// (when prepared, in the background, or on first demand) and then kept.
#[derive(Debug)]
pub struct Body {
    identity: Bytes,
    hash: u64,
    etag: HeaderValue,
    compressed: OnceLock<Box<Compressed>>,
}

/// The strong entity tag of a body's hash and encoding suffix: the same bytes give the same tag,
/// across restarts too.
fn etag(hash: u64, suffix: &str) -> HeaderValue {
    HeaderValue::try_from(format!("\"{hash:016x}{suffix}\""))
        .unwrap_or(HeaderValue::from_static("\"0\""))
}

impl Body {
    pub fn new(identity: Bytes) -> Body {
        let hash = xxhash_rust::xxh3::xxh3_64(&identity);
        Body {
            hash,
            etag: etag(hash, ""),
            identity,
            compressed: OnceLock::new(),
        }
    }

    pub fn identity(&self) -> &Bytes {
        &self.identity
    }

    /// Too small to be worth compressing (when the client accepts identity).
    pub fn is_small(&self) -> bool {
        self.identity.len() < MIN_COMPRESS
    }

    /// The bytes of an encoding and their `ETag`, if they are ready (identity always is).
    pub fn ready(&self, encoding: Encoding) -> Option<(&Bytes, &HeaderValue)> {
        match encoding {
            Encoding::Identity => Some((&self.identity, &self.etag)),
            Encoding::Gzip => self.compressed.get().map(|c| (&c.gzip, &c.gzip_etag)),
            Encoding::Brotli => self.compressed.get().map(|c| (&c.br, &c.br_etag)),
        }
    }

    /// The bytes of an encoding and their `ETag`, compressing now if needed (CPU work: for a
    /// large body, call it off the async threads).
    pub fn encoded(&self, encoding: Encoding) -> (&Bytes, &HeaderValue) {
        if encoding != Encoding::Identity {
            self.compress();
        }
        self.ready(encoding).unwrap_or((&self.identity, &self.etag))
    }

    /// Makes the compressed variants if they are not there yet.
    pub fn compress(&self) {
        self.compressed.get_or_init(|| {
            let large = self.identity.len() > EAGER_COMPRESS_MAX;
            let (gzip_level, br_quality) = if large { (6, 5) } else { (9, 9) };
            Box::new(Compressed {
                gzip: gzip(&self.identity, gzip_level),
                br: brotli(&self.identity, br_quality),
                gzip_etag: etag(self.hash, "-gzip"),
                br_etag: etag(self.hash, "-br"),
            })
        });
    }
}

fn gzip(data: &[u8], level: u32) -> Bytes {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(data.len() / 4),
        flate2::Compression::new(level),
    );
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(data);
    Bytes::from(enc.finish().unwrap_or_default())
}

fn brotli(data: &[u8], quality: u32) -> Bytes {
    use std::io::Write;
    let mut out = Vec::with_capacity(data.len() / 4);
    {
        let mut w = ::brotli::CompressorWriter::new(&mut out, 64 * 1024, quality, 22);
        let _ = w.write_all(data);
    }
    Bytes::from(out)
}

/// A payment's detail answer.
#[derive(Debug)]
pub enum Detail {
    /// The bundle's detail file for that reference, prepared.
    File(Box<Body>),
    /// The row derived from the payment: its values are in the payments body already, so the
    /// row is assembled when asked for instead of being kept (it would double a large event's
    /// memory).
    Derived(DerivedRow),
}

/// A body to answer with: prepared and borrowed from the snapshot, or made for this request.
#[derive(Debug)]
pub enum Answer<'a> {
    Prepared(&'a Body),
    Made(Body),
}

impl std::ops::Deref for Answer<'_> {
    type Target = Body;

    fn deref(&self) -> &Body {
        match self {
            Answer::Prepared(body) => body,
            Answer::Made(body) => body,
        }
    }
}

/// One endpoint's answers in a bundle (one per entry of [`crate::api::API`]).
#[derive(Debug)]
pub enum Answers {
    /// One body for every request.
    One(Body),
    /// The answer for every payment reference (and every detail file).
    ByReference(HashMap<Box<str>, Detail>),
}

/// One bundle's answers.
#[derive(Debug)]
pub struct Prepared {
    pub name: Arc<str>,
    /// Indexed like [`crate::api::API`].
    answers: Vec<Answers>,
    /// The index of the streamed payments body, which derived detail rows are copied from.
    stream: Option<usize>,
    /// What `[simulate]` in bundle.toml asks for; its sequence starts with this version.
    pub simulation: Option<Simulation>,
}

fn to_body(json: serde_json::Result<Vec<u8>>) -> serde_json::Result<Body> {
    json.map(|v| Body::new(Bytes::from(v)))
}

impl Prepared {
    /// Serialises every answer of a bundle. A payment with a detail file answers that file's
    /// body; any other payment answers one row derived from the payment itself. With
    /// `compression`, bodies from [`MIN_COMPRESS`] up to [`EAGER_COMPRESS_MAX`] are compressed
    /// now.
    pub fn new(bundle: &Bundle, compression: bool) -> serde_json::Result<Prepared> {
        let derived: &[(String, DerivedRow)] =
            bundle.payments().map_or(&[], |p| p.derived.as_slice());
        let mut answers = Vec::with_capacity(bundle.slots.len());
        let mut stream = None;
        for (i, slot) in bundle.slots.iter().enumerate() {
            answers.push(match slot {
                Slot::Body(body) => Answers::One(to_body(body.to_json())?),
                Slot::Stream(payments) => {
                    stream = Some(i);
                    Answers::One(Body::new(payments.body.clone()))
                }
                Slot::PerReference(files) => {
                    let mut by = HashMap::with_capacity(derived.len() + files.len());
                    for (reference, row) in derived {
                        if !files.contains_key(reference) {
                            by.insert(reference.as_str().into(), Detail::Derived(*row));
                        }
                    }
                    for (reference, body) in files {
                        by.insert(
                            reference.as_str().into(),
                            Detail::File(Box::new(to_body(body.to_json())?)),
                        );
                    }
                    Answers::ByReference(by)
                }
            });
        }
        let prepared = Prepared {
            name: bundle.name.as_str().into(),
            answers,
            stream,
            simulation: bundle.config.simulate.as_ref().map(Simulation::new),
        };
        if compression {
            for body in prepared.bodies() {
                let len = body.identity.len();
                if (MIN_COMPRESS..=EAGER_COMPRESS_MAX).contains(&len) {
                    body.compress();
                }
            }
        }
        Ok(prepared)
    }

    /// Every body of the bundle.
    pub fn bodies(&self) -> impl Iterator<Item = &Body> {
        self.answers
            .iter()
            .flat_map(|a| -> Box<dyn Iterator<Item = &Body> + '_> {
                match a {
                    Answers::One(body) => Box::new(std::iter::once(body)),
                    Answers::ByReference(by) => Box::new(by.values().filter_map(|d| match d {
                        Detail::File(body) => Some(body.as_ref()),
                        Detail::Derived(_) => None,
                    })),
                }
            })
    }

    /// The answers of the endpoint at `index` in [`crate::api::API`].
    pub fn answers(&self, index: usize) -> Option<&Answers> {
        self.answers.get(index)
    }

    /// The answer for a payment reference of the endpoint at `index`.
    pub fn detail(&self, index: usize, reference: &str) -> Option<Answer<'_>> {
        let Some(Answers::ByReference(by)) = self.answers.get(index) else {
            return None;
        };
        Some(match by.get(reference)? {
            Detail::File(body) => Answer::Prepared(body),
            Detail::Derived(row) => {
                let payments = match self.stream.and_then(|i| self.answers.get(i)) {
                    Some(Answers::One(body)) => body.identity(),
                    _ => return None,
                };
                Answer::Made(Body::new(row.bytes(payments)))
            }
        })
    }

    /// Compresses the bodies too large to compress when prepared (run it on a background thread).
    pub fn compress_large(&self) {
        for body in self.bodies() {
            if body.identity.len() > EAGER_COMPRESS_MAX {
                body.compress();
            }
        }
    }
}

/// The OpenAPI 3.1 document of the API as served (kept at the repository's root).
pub const OPENAPI: &[u8] = include_bytes!("../openapi.json");

/// The document as a prepared body, made on first use. The same bytes for every server, so
/// sharing it shares no state.
pub fn openapi() -> &'static Body {
    static BODY: LazyLock<Body> = LazyLock::new(|| {
        let body = Body::new(Bytes::from_static(OPENAPI));
        body.compress();
        body
    });
    &BODY
}

fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[derive(Serialize)]
struct StatusBody<'a> {
    bundles: Vec<BundleStatus<'a>>,
}

#[derive(Serialize)]
struct BundleStatus<'a> {
    name: &'a str,
    served: bool,
    id_event: Option<i64>,
    title: Option<&'a str>,
    /// How many tokens its bundle.toml names; never the tokens.
    tokens: usize,
    records: Option<&'a Records>,
    /// When the served version was loaded.
    loaded_at: Option<String>,
    /// When the folder was last read (the errors below are that attempt's).
    checked_at: String,
    errors: Vec<String>,
    warnings: Vec<String>,
}

fn bundle_status(e: &Entry) -> BundleStatus<'_> {
    let served = e.serving.as_deref();
    let lines = |severity| {
        e.all_problems()
            .filter(|p| p.severity == severity)
            .map(ToString::to_string)
            .collect()
    };
    BundleStatus {
        name: &e.name,
        served: served.is_some(),
        id_event: served.map(|v| v.summary.id_event),
        title: served.map(|v| v.summary.title.as_str()),
        tokens: e.tokens.len(),
        records: served.map(|v| &v.summary.records),
        loaded_at: served.map(|v| timestamp(v.loaded_at)),
        checked_at: timestamp(e.checked_at),
        errors: lines(Severity::Error),
        warnings: lines(Severity::Warning),
    }
}

/// The `/status` body of every bundle folder, in name order.
pub fn status<'a>(entries: impl Iterator<Item = &'a Entry>) -> Bytes {
    let body = StatusBody {
        bundles: entries.map(bundle_status).collect(),
    };
    // Only strings, integers and booleans: serialisation cannot fail.
    serde_json::to_vec(&body).map_or_else(|_| Bytes::from_static(b"{\"bundles\":[]}"), Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_encoding_has_its_etag_made_with_its_bytes() {
        let text = vec![b'x'; 4 * MIN_COMPRESS];
        let body = Body::new(Bytes::from(text.clone()));
        let hash = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&text));

        let before = body.ready(Encoding::Gzip);
        body.compress();

        assert!(before.is_none());
        let (bytes, tag) = body.ready(Encoding::Identity).expect("identity is ready");
        assert_eq!(
            (&bytes[..], tag.to_str().ok()),
            (&text[..], Some(&*format!("\"{hash}\"")))
        );
        let (gz, tag) = body.ready(Encoding::Gzip).expect("compressed");
        assert!(gz.len() < text.len());
        assert_eq!(tag.to_str().ok(), Some(&*format!("\"{hash}-gzip\"")));
        let (_, tag) = body.ready(Encoding::Brotli).expect("compressed");
        assert_eq!(tag.to_str().ok(), Some(&*format!("\"{hash}-br\"")));
        // The same header value every time: formatted once, not per request.
        let first = body
            .ready(Encoding::Gzip)
            .map(|(_, t)| t as *const HeaderValue);
        assert_eq!(
            first,
            body.ready(Encoding::Gzip)
                .map(|(_, t)| t as *const HeaderValue)
        );
    }
}
