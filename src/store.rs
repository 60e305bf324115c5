//! The served state: an immutable [`Snapshot`] of prepared answers, behind an `ArcSwap`.
//! (Which bundle versions go into a snapshot is decided by `catalog`.)
//!
//! Every answer is serialised here, once, before the snapshot is published: the request path is
//! a token lookup and a `Bytes` clone. Changing what is served means building a new snapshot and
//! swapping it in whole; a request that holds the old one keeps a consistent view until it ends.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crate::model::payments::DerivedRow;
use crate::model::{Bundle, Slot};
use crate::simulate::Simulation;
use crate::token::Token;
use arc_swap::{ArcSwap, Guard};
use bytes::Bytes;

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

/// The compressed variants of a body.
#[derive(Debug)]
pub struct Compressed {
    pub gzip: Bytes,
    pub br: Bytes,
}

/// One answer: its bytes, a hash of them for the `ETag`, and its compressed variants, each made
/// once (when prepared, in the background, or on first demand) and then kept.
#[derive(Debug)]
pub struct Body {
    identity: Bytes,
    hash: u64,
    compressed: OnceLock<Box<Compressed>>,
}

impl Body {
    pub fn new(identity: Bytes) -> Body {
        Body {
            hash: xxhash_rust::xxh3::xxh3_64(&identity),
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

    /// The strong entity tag of one encoding of this body: the same bytes give the same tag, across
    /// restarts too.
    pub fn etag(&self, encoding: Encoding) -> String {
        match encoding {
            Encoding::Identity => format!("\"{:016x}\"", self.hash),
            Encoding::Gzip => format!("\"{:016x}-gzip\"", self.hash),
            Encoding::Brotli => format!("\"{:016x}-br\"", self.hash),
        }
    }

    /// The bytes of an encoding if they are ready (identity always is).
    pub fn ready(&self, encoding: Encoding) -> Option<&Bytes> {
        match encoding {
            Encoding::Identity => Some(&self.identity),
            Encoding::Gzip => self.compressed.get().map(|c| &c.gzip),
            Encoding::Brotli => self.compressed.get().map(|c| &c.br),
        }
    }

    /// The bytes of an encoding, compressing now if needed (CPU work: for a large body, call it
    /// off the async threads).
    pub fn encoded(&self, encoding: Encoding) -> &Bytes {
        if encoding != Encoding::Identity {
            self.compress();
        }
        self.ready(encoding).unwrap_or(&self.identity)
    }

    /// Makes the compressed variants if they are not there yet.
    pub fn compress(&self) {
        self.compressed.get_or_init(|| {
            let large = self.identity.len() > EAGER_COMPRESS_MAX;
            let (gzip_level, br_quality) = if large { (6, 5) } else { (9, 9) };
            Box::new(Compressed {
                gzip: gzip(&self.identity, gzip_level),
                br: brotli(&self.identity, br_quality),
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

/// Everything served at one moment: token → bundle answers, and the `/status` body.
#[derive(Debug, Default)]
pub struct Snapshot {
    by_token: HashMap<Token, Arc<Prepared>>,
    status: Bytes,
    /// False for the empty snapshot served until the first load is published.
    ready: bool,
}

impl Snapshot {
    /// A published snapshot (ready).
    pub fn new(by_token: HashMap<Token, Arc<Prepared>>, status: Bytes) -> Snapshot {
        Snapshot {
            by_token,
            status,
            ready: true,
        }
    }

    /// The bundle a token opens.
    pub fn bundle(&self, token: &Token) -> Option<&Prepared> {
        self.by_token.get(token).map(Arc::as_ref)
    }

    /// The `/status` body.
    pub fn status(&self) -> &Bytes {
        &self.status
    }

    /// Whether the first load has been published.
    pub fn is_ready(&self) -> bool {
        self.ready
    }
}

/// The current snapshot, swapped atomically.
#[derive(Debug)]
pub struct Store {
    current: ArcSwap<Snapshot>,
}

impl Store {
    pub fn new(snapshot: Snapshot) -> Self {
        Store {
            current: ArcSwap::from_pointee(snapshot),
        }
    }

    /// The snapshot to answer one request from. Cheap; hold it for the request's life.
    pub fn snapshot(&self) -> Guard<Arc<Snapshot>> {
        self.current.load()
    }

    /// Publishes a new snapshot; requests already holding the old one finish on it.
    pub fn replace(&self, snapshot: Snapshot) {
        self.current.store(Arc::new(snapshot));
    }
}
