//! The one place that makes served bytes: from a validated bundle to its answers (compact JSON,
//! gzip and brotli variants, each with its `ETag` header value formatted once), the `/status`
//! body and the OpenAPI document's body. Nothing else creates a success body; `http` only picks
//! one (the fixed error bodies are constants in `errors.rs`).
//!
//! A body is prepared before a snapshot is published; compressed variants of bodies up to
//! [`EAGER_COMPRESS_MAX`] too, larger ones on a background thread after publishing, or on first
//! demand. A payment without a detail file answers a row assembled per request from the payments
//! body (see [`DerivedRow`]), formatted then. The payments body itself is written here too, one
//! record at a time as `load` reads them ([`PaymentsWriter`]), in pieces that versions share
//! ([`pieces`]) and a reload takes whole for the chunks of the file it read before.

mod listed;
mod pieces;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, OnceLock};

use bytes::Bytes;
use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use hyper::header::HeaderValue;
use serde::Serialize;

use crate::api::{self, Feed};
use crate::catalog::{Entry, Records};
use crate::model::bodies::{self, EventBody, RangeBy};
use crate::model::payments::Sink;
use crate::model::records::Payment;
use crate::model::records::{Activity, Attendee, PaymentDetail, Purchase};
use crate::model::AppKeys;
use crate::model::{Bundle, Slot};
use crate::problem::Severity;
use crate::simulate::Simulation;
use crate::writes;
use serde_json::{Map, Value};

use crate::model::split::{cuts_after, PIECE_MIN};
pub(crate) use listed::Listed;
pub(crate) use pieces::{Payload, Piece, Pieces};
use pieces::{Row, Span};

/// A content coding eventbox can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Identity,
    Gzip,
    Brotli,
}

impl Encoding {
    /// The `Content-Encoding` value; none for identity.
    pub(crate) fn header(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Gzip => Some("gzip"),
            Encoding::Brotli => Some("br"),
        }
    }
}

/// Bodies smaller than this are sent plain unless the client refuses identity.
pub(crate) const MIN_COMPRESS: usize = 1024;
/// Bodies up to this size are compressed (at the highest useful levels) when prepared; larger ones
/// (at faster levels) on a background thread once published, identity being served meanwhile.
pub(crate) const EAGER_COMPRESS_MAX: usize = 1 << 20;

/// The compressed variants of a body, and their `ETag`s.
#[derive(Debug)]
pub(crate) struct Compressed {
    pub(crate) gzip: Payload,
    pub(crate) br: Payload,
    gzip_etag: HeaderValue,
    br_etag: HeaderValue,
}

/// One answer: its bytes and `ETag`, and its compressed variants with theirs, each made once
/// (when prepared, in the background, or on first demand) and then kept.
pub(crate) struct Body {
    identity: Payload,
    /// For a body in pieces (a large payments body): its pieces, whose compressed forms make
    /// its own.
    pieces: Option<Arc<[Arc<Piece>]>>,
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
    pub(crate) fn new(identity: Bytes) -> Body {
        let hash = xxhash_rust::xxh3::xxh3_64(&identity);
        Body {
            hash,
            etag: etag(hash, ""),
            identity: Payload::One(identity),
            pieces: None,
            compressed: OnceLock::new(),
        }
    }

    /// A body made of `pieces`. Its tag is that of the same bytes in one buffer. A body up to
    /// [`EAGER_COMPRESS_MAX`] is one buffer (copied from several pieces), served and compressed
    /// as any body that size: pieces pay off only for large bodies.
    pub(crate) fn from_pieces(pieces: Arc<[Arc<Piece>]>) -> Body {
        if let [one] = &pieces[..] {
            return Body::new(one.bytes.clone());
        }
        let len: usize = pieces.iter().map(|p| p.bytes.len()).sum();
        if len <= EAGER_COMPRESS_MAX {
            let whole = Payload::pieces(pieces.iter().map(|p| p.bytes.clone()));
            return Body::new(crate::memfile::keep(whole.to_bytes()));
        }
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        for p in pieces.iter() {
            hasher.update(&p.bytes);
        }
        let hash = hasher.digest();
        Body {
            hash,
            etag: etag(hash, ""),
            identity: Payload::pieces(pieces.iter().map(|p| p.bytes.clone())),
            pieces: Some(pieces),
            compressed: OnceLock::new(),
        }
    }

    #[cfg(test)]
    pub(crate) fn identity(&self) -> &Payload {
        &self.identity
    }

    /// The identity body in one buffer.
    pub(crate) fn identity_bytes(&self) -> Bytes {
        self.identity.to_bytes()
    }

    /// The length of the identity body.
    pub(crate) fn len(&self) -> u64 {
        self.identity.len()
    }

    /// Too small to be worth compressing (when the client accepts identity).
    pub(crate) fn is_small(&self) -> bool {
        self.len() < MIN_COMPRESS as u64
    }

    /// The bytes of an encoding and their `ETag`, if they are ready (identity always is).
    pub(crate) fn ready(&self, encoding: Encoding) -> Option<(&Payload, &HeaderValue)> {
        match encoding {
            Encoding::Identity => Some((&self.identity, &self.etag)),
            Encoding::Gzip => self.compressed.get().map(|c| (&c.gzip, &c.gzip_etag)),
            Encoding::Brotli => self.compressed.get().map(|c| (&c.br, &c.br_etag)),
        }
    }

    /// For a body made for one request: the bytes of `encoding` and their `ETag`, that one
    /// coding compressed now and not kept (the body is dropped with the answer), at the levels
    /// a kept variant has, so the same bytes carry the same tag. Identity, and says so, if
    /// compressing failed.
    pub(crate) fn encoded_once(&self, encoding: Encoding) -> (Encoding, Payload, HeaderValue) {
        if let Some((bytes, etag)) = self.ready(encoding) {
            return (encoding, bytes.clone(), etag.clone());
        }
        let identity = self.identity.to_bytes();
        let (gzip_level, br_quality) = levels(identity.len());
        let made = match (encoding, &self.pieces) {
            // A body in pieces is compressed piece by piece (other bytes): kept, not made here.
            (_, Some(_)) | (Encoding::Identity, _) => None,
            (Encoding::Gzip, None) => gzip(&identity, gzip_level, &|| true).map(|b| (b, "-gzip")),
            (Encoding::Brotli, None) => brotli(&identity, br_quality, &|| true).map(|b| (b, "-br")),
        };
        match made {
            Some((bytes, suffix)) => (encoding, Payload::One(bytes), etag(self.hash, suffix)),
            None => (Encoding::Identity, self.identity.clone(), self.etag.clone()),
        }
    }

    /// The bytes of an encoding and their `ETag`, compressing now if needed (CPU work: for a
    /// large body, call it off the async threads); identity, and says so, if compressing failed.
    pub(crate) fn encoded(&self, encoding: Encoding) -> (Encoding, (&Payload, &HeaderValue)) {
        if encoding != Encoding::Identity {
            self.compress();
        }
        match self.ready(encoding) {
            Some(ready) => (encoding, ready),
            None => (Encoding::Identity, (&self.identity, &self.etag)),
        }
    }

    /// Makes the compressed variants if they are not there yet.
    pub(crate) fn compress(&self) {
        self.compress_while(&|| true);
    }

    /// Makes the compressed variants unless `keep` turns false on the way (it is asked between
    /// chunks of a megabyte): a version unpublished while its large body is being compressed
    /// stops costing CPU and memory. Returns whether the variants exist.
    fn compress_while(&self, keep: &dyn Fn() -> bool) -> bool {
        if self.compressed.get().is_some() {
            return true;
        }
        let whole = |identity: &Bytes| {
            let (gzip_level, br_quality) = levels(identity.len());
            gzip(identity, gzip_level, keep)
                .and_then(|gz| Some((gz.into(), brotli(identity, br_quality, keep)?.into())))
        };
        let made = match &self.pieces {
            Some(pieces) => pieces::compressed(pieces, keep),
            None => whole(&self.identity.to_bytes()),
        };
        let made = made.map(|(gzip, br)| Compressed {
            gzip,
            br,
            gzip_etag: etag(self.hash, "-gzip"),
            br_etag: etag(self.hash, "-br"),
        });
        match made {
            Some(c) => {
                // Another thread may have made them meanwhile: the same bytes either way.
                let _ = self.compressed.set(Box::new(c));
                true
            }
            None => false,
        }
    }
}

/// The gzip level and brotli quality of a body of `len` bytes: the best for a body up to
/// [`EAGER_COMPRESS_MAX`], faster ones for a larger one (seconds of CPU otherwise).
fn levels(len: usize) -> (u32, u32) {
    if len > EAGER_COMPRESS_MAX {
        (6, 5)
    } else {
        (9, 9)
    }
}

/// How much is compressed between two questions to `keep`.
const COMPRESS_CHUNK: usize = 1 << 20;

fn gzip(data: &[u8], level: u32, keep: &dyn Fn() -> bool) -> Option<Bytes> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(data.len() / 4),
        flate2::Compression::new(level),
    );
    for chunk in data.chunks(COMPRESS_CHUNK) {
        if !keep() {
            return None;
        }
        // Writing into a Vec cannot fail.
        let _ = enc.write_all(chunk);
    }
    let mut out = enc.finish().unwrap_or_default();
    out.shrink_to_fit();
    Some(Bytes::from(out))
}

fn brotli(data: &[u8], quality: u32, keep: &dyn Fn() -> bool) -> Option<Bytes> {
    use std::io::Write;
    let mut out = Vec::with_capacity(data.len() / 4);
    {
        // The window no larger than the body (at most brotli's 4 MiB default): the encoder's
        // tables grow with the window, tens of megabytes at 22 bits even for a small body.
        let lgwin = (usize::BITS - data.len().leading_zeros()).clamp(10, 22);
        let mut w = ::brotli::CompressorWriter::new(&mut out, 64 * 1024, quality, lgwin);
        for chunk in data.chunks(COMPRESS_CHUNK) {
            if !keep() {
                return None;
            }
            let _ = w.write_all(chunk);
        }
    }
    out.shrink_to_fit();
    Some(Bytes::from(out))
}

/// The answers for payment references (`GET /payments/details?reference=`): the bundle's
/// detail files, prepared; for every other payment, its row derived when asked for from its
/// record in the payments body. A payment costs 24 bytes here (two places in the piece of that
/// body that holds it, and its place in the order of references), not an answer or a map entry
/// of its own: a large event has 200,000 of them, and a reload holds two versions at once.
pub(crate) struct ByReference {
    files: HashMap<Box<str>, Body>,
    /// The payments body (its pieces shared with the payments answer), each payment's row and
    /// their order by reference.
    payments: Payments,
}

impl ByReference {
    pub(crate) fn new(files: HashMap<Box<str>, Body>, payments: Payments) -> ByReference {
        ByReference { files, payments }
    }

    /// The answer for `reference`: its detail file, else the row derived from its payment.
    pub(crate) fn get(&self, reference: &str) -> Option<Answer<'_>> {
        if let Some(body) = self.files.get(reference) {
            return Some(Answer::Prepared(body));
        }
        let row = self.payments.find(reference)?;
        Some(Answer::Made(Body::new(self.payments.detail(row))))
    }
}

/// A body to answer with: prepared and borrowed from the snapshot, or made for this request.
#[derive(Debug)]
pub(crate) enum Answer<'a> {
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
pub(crate) enum Answers {
    /// One body for every request.
    One(Body),
    /// A list, also answered by page and one record by id.
    List(Arc<Listed>),
    /// One record of the list at this index of [`crate::api::API`].
    ItemOf(usize),
    /// Events picked per request by a date range (`custom/*`).
    Ranged(Ranged),
    /// The answer for every payment reference (and every detail file).
    ByReference(ByReference),
}

/// One bundle's answers.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) name: Arc<str>,
    /// Indexed like [`crate::api::API`]; shared with the versions [`Prepared::renewed`] makes.
    answers: Arc<Vec<Answers>>,
    /// What `[simulate]` in bundle.toml asks for; its sequence starts with this version.
    pub(crate) simulation: Option<Simulation>,
    /// What the writes fold over and are checked against.
    pub(crate) writes: Option<Arc<writes::Base>>,
    /// The source its bundle.toml names, if any: `Age` and `Eventbox-Source` come from it.
    pub(crate) source: Option<Arc<crate::kiosk::SourceHealth>>,
    /// The `Authorization-App` values its company routes take (`app_keys`).
    app_keys: AppKeys,
}

/// A body's length and tag, never its bytes: a bundle's bodies may be a hundred megabytes.
impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body")
            .field("len", &self.identity.len())
            .field("etag", &self.etag)
            .field("compressed", &self.compressed.get().is_some())
            .finish()
    }
}

/// One body, or how many references answer: never every reference (a large event has 200,000).
impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answers::One(body) => f.debug_tuple("One").field(body).finish(),
            Answers::List(l) => write!(f, "List({} records, {:?})", l.len(), l.body),
            Answers::ItemOf(i) => write!(f, "ItemOf({i})"),
            Answers::Ranged(r) => write!(f, "Ranged({} events)", r.events.len()),
            Answers::ByReference(by) => write!(
                f,
                "ByReference({} detail files, {} payments)",
                by.files.len(),
                by.payments.count()
            ),
        }
    }
}

fn to_body(json: serde_json::Result<Vec<u8>>) -> serde_json::Result<Body> {
    json.map(|v| Body::new(crate::memfile::keep(Bytes::from(v))))
}

impl Prepared {
    /// Serialises every answer of a bundle. A payment with a detail file answers that file's
    /// body; any other payment answers one row derived from the payment itself. With
    /// `compression`, bodies from [`MIN_COMPRESS`] up to [`EAGER_COMPRESS_MAX`] are compressed
    /// now.
    pub(crate) fn new(bundle: &Bundle, compression: bool) -> serde_json::Result<Prepared> {
        let mut answers = Vec::with_capacity(bundle.slots.len());
        for (i, (slot, e)) in bundle.slots.iter().zip(&api::API).enumerate() {
            answers.push(match slot {
                Slot::Body(body) => {
                    // Served as they are: lists and single bodies (the ranges are read apart).
                    let json = Bytes::from(body.to_json()?);
                    let kept = crate::memfile::keep;
                    match (body.ids(), body.ranged()) {
                        (Some(ids), _) => Answers::List(Arc::new(Listed::new(kept(json), ids)?)),
                        (None, Some(by)) => Answers::Ranged(Ranged::new(&json, by)?),
                        (None, None) => Answers::One(Body::new(kept(json))),
                    }
                }
                Slot::Elsewhere => match e.feed {
                    Feed::Item { list, .. } => Answers::ItemOf(api::index_of(list).unwrap_or(i)),
                    Feed::Derived { from, derive } => {
                        let source = api::index_of(from).and_then(|j| match bundle.slots.get(j) {
                            Some(Slot::Body(b)) => Some(b.as_ref()),
                            _ => None,
                        });
                        match source {
                            Some(b) => Answers::One(to_body(derive(b))?),
                            None => Answers::ItemOf(i),
                        }
                    }
                    _ => Answers::ItemOf(i),
                },
                Slot::Stream(payments) => {
                    Answers::One(Body::from_pieces(Arc::clone(&payments.pieces)))
                }
                Slot::PerReference(files) => {
                    let files = files
                        .iter()
                        .map(|(reference, body)| {
                            Ok((reference.as_str().into(), to_body(body.to_json())?))
                        })
                        .collect::<serde_json::Result<_>>()?;
                    let payments = bundle.payments().cloned().unwrap_or_default();
                    Answers::ByReference(ByReference::new(files, payments))
                }
            });
        }
        let writes = writes_base(bundle, &answers);
        let prepared = Prepared {
            name: bundle.name.as_str().into(),
            answers: Arc::new(answers),
            simulation: bundle.config.simulate.as_ref().map(Simulation::new),
            writes,
            source: None,
            // Keys with an error keep a bundle from being prepared; were one prepared all the
            // same, its company routes take no key rather than any.
            app_keys: bundle
                .config
                .app_keys
                .clone()
                .unwrap_or_else(|| AppKeys::Only(Arc::from([]))),
        };
        if compression {
            for body in prepared.bodies() {
                if (MIN_COMPRESS as u64..=EAGER_COMPRESS_MAX as u64).contains(&body.len()) {
                    body.compress();
                }
            }
        }
        Ok(prepared)
    }

    /// A new version with the same answers (shared, not copied, compressed variants included),
    /// for a bundle read again with the same bytes: it starts what a reload starts (the
    /// simulation's sequence) and costs no memory for its bodies.
    pub(crate) fn renewed(&self) -> Prepared {
        Prepared {
            name: Arc::clone(&self.name),
            answers: Arc::clone(&self.answers),
            simulation: self.simulation.as_ref().map(Simulation::renewed),
            writes: self.writes.clone(),
            source: self.source.clone(),
            app_keys: self.app_keys.clone(),
        }
    }

    /// A new version ([`Prepared::renewed`]) whose company routes take `app_keys`: those a
    /// bundle.toml names now, while another of its files has errors.
    pub(crate) fn with_app_keys(&self, app_keys: &AppKeys) -> Prepared {
        Prepared {
            app_keys: app_keys.clone(),
            ..self.renewed()
        }
    }

    /// How many app keys its company routes take; `None`: any non-blank one.
    pub(crate) fn app_key_count(&self) -> Option<usize> {
        self.app_keys.count()
    }

    /// Whether its company routes take the app keys `keys`, as they are.
    pub(crate) fn takes_app_keys(&self, keys: &AppKeys) -> bool {
        self.app_keys == *keys
    }

    /// Whether the company routes take this `Authorization-App` value: one its bundle.toml
    /// names (compared in constant time), or any when it names none.
    pub(crate) fn takes_app(&self, app: &str) -> bool {
        self.app_keys.takes(app)
    }

    /// Whether two versions share their answers (one is the other [`Prepared::renewed`]).
    #[cfg(test)]
    pub(crate) fn shares_answers(&self, other: &Prepared) -> bool {
        Arc::ptr_eq(&self.answers, &other.answers)
    }

    /// Every body of the bundle.
    pub(crate) fn bodies(&self) -> impl Iterator<Item = &Body> {
        self.answers
            .iter()
            .flat_map(|a| -> Box<dyn Iterator<Item = &Body> + '_> {
                match a {
                    Answers::One(body) => Box::new(std::iter::once(body)),
                    Answers::List(l) => Box::new(std::iter::once(&l.body)),
                    Answers::ItemOf(_) | Answers::Ranged(_) => Box::new(std::iter::empty()),
                    Answers::ByReference(by) => Box::new(by.files.values()),
                }
            })
    }

    /// The answers of the endpoint at `index` in [`crate::api::API`].
    pub(crate) fn answers(&self, index: usize) -> Option<&Answers> {
        self.answers.get(index)
    }

    /// The answer for a payment reference of the endpoint at `index`.
    pub(crate) fn detail(&self, index: usize, reference: &str) -> Option<Answer<'_>> {
        let Some(Answers::ByReference(by)) = self.answers.get(index) else {
            return None;
        };
        by.get(reference)
    }

    /// Compresses the bodies too large to compress when prepared (run it on a background
    /// thread), stopping as soon as `keep` turns false.
    pub(crate) fn compress_large(&self, keep: &dyn Fn() -> bool) {
        for body in self.bodies() {
            // Stop once unpublished; an encoder that failed leaves that body plain.
            if body.len() > EAGER_COMPRESS_MAX as u64 && !body.compress_while(keep) && !keep() {
                return;
            }
        }
    }
}

/// The events of a `custom/*` file, each with the dates that place it in a range.
#[derive(Debug)]
pub(crate) struct Ranged {
    /// Each event as served, with its date (`getdata`) or its participants' dates
    /// (`getdatasubscribed`).
    events: Vec<(Map<String, Value>, Option<NaiveDate>)>,
    by: RangeBy,
}

impl Ranged {
    fn new(prepared: &[u8], by: RangeBy) -> serde_json::Result<Ranged> {
        #[derive(serde::Deserialize)]
        struct Events {
            data: Vec<Map<String, Value>>,
        }
        let Events { data } = serde_json::from_slice(prepared)?;
        let events = data
            .into_iter()
            .map(|e| {
                let date = bodies::date_of(e.get("evento.data"));
                (e, date)
            })
            .collect();
        Ok(Ranged { events, by })
    }

    /// `{"data": [...]}`: the events dated in `from..=to`, or (getdatasubscribed) each event with
    /// only its participants registered in `from..=to`, events left with none left out.
    pub(crate) fn answer(&self, from: NaiveDate, to: NaiveDate) -> Bytes {
        let within = |d: Option<NaiveDate>| d.is_some_and(|d| from <= d && d <= to);
        let picked: Vec<Value> = match self.by {
            RangeBy::EventDate => self
                .events
                .iter()
                .filter(|(_, date)| within(*date))
                .map(|(e, _)| Value::Object(e.clone()))
                .collect(),
            RangeBy::Subscription => self
                .events
                .iter()
                .filter_map(|(e, _)| {
                    let people = e.get("participantes")?.as_array()?;
                    let kept: Vec<Value> = people
                        .iter()
                        .filter(|p| within(bodies::date_of(p.get("inscricao.data_inscricao"))))
                        .cloned()
                        .collect();
                    if kept.is_empty() {
                        return None;
                    }
                    let mut e = e.clone();
                    e.insert("participantes".into(), Value::Array(kept));
                    Some(Value::Object(e))
                })
                .collect(),
        };
        Bytes::from(serde_json::to_vec(&serde_json::json!({ "data": picked })).unwrap_or_default())
    }
}

/// What the writes of a bundle fold over: its attendees answers and the sets that check a write.
fn writes_base(bundle: &Bundle, answers: &[Answers]) -> Option<Arc<writes::Base>> {
    let attendees = match answers.get(api::index_of("attendees")?) {
        Some(Answers::List(l)) => l.clone(),
        _ => return None,
    };
    let people = bundle
        .body::<bodies::List<Attendee>>()
        .map_or(&[][..], |l| l.data.as_slice());
    let event = bundle.body::<EventBody>().map(|e| &e.event);
    // Two prices with one id (a warning): the first in file order is the one taken.
    let mut prices = HashMap::new();
    for t in event.into_iter().flat_map(|e| &e.tickets) {
        for p in &t.prices {
            prices
                .entry(p.id_ticket_price)
                .or_insert_with(|| t.title.clone());
        }
    }
    let sessions = bundle
        .body::<bodies::Data<Activity>>()
        .map(|d| d.data.iter().map(|a| a.id_session).collect())
        .unwrap_or_default();
    let mut emails = HashMap::with_capacity(people.len());
    let mut codes = HashMap::with_capacity(people.len());
    for (i, a) in people.iter().enumerate() {
        emails.entry(a.email.trim().to_lowercase()).or_insert(i);
        if let Some(code) = a.checkin_code {
            codes.entry(code.to_string()).or_insert(i);
        }
    }
    Some(Arc::new(writes::Base {
        attendees,
        id_event: event.map_or(0, |e| e.id_event),
        prices,
        sessions,
        emails,
        codes,
        max_id: people.iter().map(|a| a.id_attendees).max().unwrap_or(0),
        pulled_at: bundle.config.source.as_ref().and_then(|s| s.pulled_at),
        max_code: people
            .iter()
            .filter_map(|a| a.checkin_code)
            .max()
            .unwrap_or(0),
    }))
}

/// The payments of a bundle, ready to serve.
#[derive(Debug, Clone)]
pub(crate) struct Payments {
    /// The body of `GET /api/v1/payments`, `{"data": [...], "count": n}` and any members the
    /// file added, in pieces cut after records (see [`pieces`]), each knowing where its
    /// payments and their references lie (its detail row is derived from them when the bundle
    /// has no detail file for that reference).
    pub(crate) pieces: Arc<[Arc<Piece>]>,
    /// Every payment as (its piece, its row there), in the order of the references as
    /// serialised in the body (the first of equal ones first).
    sorted: Arc<[(u32, u32)]>,
}

/// A payment in the payments body: the piece that holds it, and where in that piece its record
/// and its reference (each serialised JSON) lie. Its detail row is read back from the record
/// when asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DerivedRow {
    piece: u32,
    record: Span,
    reference: Span,
}

impl Default for Payments {
    fn default() -> Self {
        PaymentsWriter::new(&Pieces::default())
            .finish(&Map::new())
            .0
    }
}

impl Payments {
    pub(crate) fn count(&self) -> usize {
        self.sorted.len()
    }

    /// Row `j` of piece `piece`.
    fn row(&self, (piece, j): (u32, u32)) -> Option<DerivedRow> {
        let row = self.pieces.get(piece as usize)?.rows.get(j as usize)?;
        Some(DerivedRow {
            piece,
            record: row.record,
            reference: row.key,
        })
    }

    /// The bytes at `(start, end)` of a piece (none when out of range).
    fn span(&self, piece: u32, (start, end): Span) -> &[u8] {
        self.pieces
            .get(piece as usize)
            .and_then(|p| p.bytes.get(start as usize..end as usize))
            .unwrap_or_default()
    }

    /// The reference of row `j` of piece `piece` as serialised in the body.
    fn reference_json(&self, at: (u32, u32)) -> &[u8] {
        self.row(at)
            .map(|row| self.span(row.piece, row.reference))
            .unwrap_or_default()
    }

    /// Orders the payments by reference (for [`Payments::find`]) and reads the repeats off that
    /// order: equal references are neighbours, each run in file order. Returns (index, index of
    /// the first with that reference, the reference) for each repeat, in file order.
    fn sort(&mut self) -> Vec<(usize, usize, String)> {
        // Each payment with the first 16 bytes of its reference (its piece's prefix) as the
        // key: most references fit, so most comparisons are one integer comparison, not a read
        // of two places in a hundred megabytes of pieces (which made the sort half of a
        // reload). Equal prefixes are compared in full.
        let mut keyed = Vec::with_capacity(self.pieces.iter().map(|p| p.rows.len()).sum());
        // The index in the file of each piece's first payment.
        let mut first = Vec::with_capacity(self.pieces.len());
        for (i, piece) in self.pieces.iter().enumerate() {
            first.push(keyed.len());
            let i = offset(i).unwrap_or(u32::MAX);
            for (j, &prefix) in piece.prefixes.iter().enumerate() {
                let Ok(j) = offset(j) else { continue };
                keyed.push((prefix, i, j));
            }
        }
        let key = |at: (u32, u32)| self.reference_json(at);
        let full = |a: &(u128, u32, u32), b: &(u128, u32, u32)| {
            a.0.cmp(&b.0)
                .then_with(|| key((a.1, a.2)).cmp(key((b.1, b.2))))
        };
        // Stable, so equal references stay in file order; and adaptive: a file already in the
        // order of its references, or in a few runs of it (as exports in time order are), is
        // merged in linear time rather than sorted (an eighth of a reload's CPU, profiled).
        keyed.sort_by(full);
        let index =
            |(piece, j): (u32, u32)| first.get(piece as usize).map_or(0, |f| f + j as usize);
        let mut repeated = Vec::new();
        let mut run = None;
        for pair in keyed.windows(2) {
            if full(&pair[0], &pair[1]).is_ne() {
                run = None;
                continue;
            }
            let (a, b) = ((pair[0].1, pair[0].2), (pair[1].1, pair[1].2));
            let start = *run.get_or_insert(index(a));
            let reference = serde_json::from_slice(key(b)).unwrap_or_default();
            repeated.push((index(b), start, reference));
        }
        repeated.sort_unstable_by_key(|&(i, _, _)| i);
        self.sorted = keyed.into_iter().map(|(_, i, j)| (i, j)).collect();
        repeated
    }

    /// The payment with `reference`: a binary search of the references as the body has them
    /// (serialised by serde_json).
    pub(crate) fn find(&self, reference: &str) -> Option<DerivedRow> {
        let key = serde_json::to_vec(reference).ok()?;
        let at = self
            .sorted
            .binary_search_by(|&at| self.reference_json(at).cmp(&key[..]))
            .ok()?;
        self.row(self.sorted[at])
    }

    /// Every payment, in file order.
    #[cfg(test)]
    pub(crate) fn rows(&self) -> Vec<DerivedRow> {
        (0..self.pieces.len())
            .flat_map(|i| {
                let n = self.pieces[i].rows.len();
                (0..n).filter_map(move |j| Some((offset(i).ok()?, offset(j).ok()?)))
            })
            .filter_map(|at| self.row(at))
            .collect()
    }

    /// A payment's reference, as the body has it.
    #[cfg(test)]
    pub(crate) fn reference(&self, row: DerivedRow) -> Option<String> {
        serde_json::from_slice(self.span(row.piece, row.reference)).ok()
    }

    /// The detail answer of a payment: its record read back and split into rows by the one
    /// rule, [`PaymentDetail::rows_of`].
    pub(crate) fn detail(&self, row: DerivedRow) -> Bytes {
        let rows = serde_json::from_slice::<Purchase>(self.span(row.piece, row.record))
            .map(|p| PaymentDetail::rows_of(&p))
            .unwrap_or_default();
        let list: bodies::List<_> = bodies::List {
            data: rows,
            extra: Map::new(),
        };
        Bytes::from(serde_json::to_vec(&list).unwrap_or_default())
    }

    /// The whole body in one buffer (a copy): for tests and the fuzzers.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn body(&self) -> Bytes {
        Payload::pieces(self.pieces.iter().map(|p| p.bytes.clone())).to_bytes()
    }
}

/// The start of the payments body.
const PAYMENTS_OPEN: &[u8] = b"{\"data\":[";

/// Writes decoded payments into the payments body, one at a time (the [`Sink`] of
/// `model::payments`), in pieces shared through [`Pieces`] with any version holding the same
/// bytes, noting for each payment where the values its derived detail row repeats lie. Pieces
/// are cut where [`cuts_after`] says after the records written, or, when the model reads the
/// file in chunks ([`Sink::end_chunk`]), after each chunk: then a chunk read before is not
/// written again but taken whole ([`Sink::reuse`]).
#[derive(Debug)]
pub(crate) struct PaymentsWriter {
    pieces: Pieces,
    /// The piece being written, and its rows.
    current: Vec<u8>,
    rows: Vec<Row>,
    done: Vec<Arc<Piece>>,
    count: usize,
    /// Cut where the model's chunks end, not where the records written say.
    by_chunk: bool,
    /// The key of the last chunk taken, which the next one follows.
    last_input: Option<u128>,
}

impl PaymentsWriter {
    /// A writer whose pieces are shared through `pieces`.
    pub(crate) fn new(pieces: &Pieces) -> PaymentsWriter {
        let mut current = Vec::with_capacity(PIECE_MIN);
        current.extend_from_slice(PAYMENTS_OPEN);
        PaymentsWriter {
            pieces: pieces.clone(),
            current,
            rows: Vec::new(),
            done: Vec::new(),
            count: 0,
            by_chunk: false,
            last_input: None,
        }
    }

    /// The chunk keyed `input`, of `len` bytes, was taken: it follows the last one.
    fn followed(&mut self, input: u128, len: usize) {
        if let Some(last) = self.last_input {
            self.pieces.note_next(last, input, len);
        }
        self.last_input = Some(input);
    }

    /// Ends the current piece.
    fn cut(&mut self) {
        self.done
            .push(self.pieces.intern(&self.current, &self.rows));
        self.current.clear();
        self.rows.clear();
    }
}

impl Sink for PaymentsWriter {
    type Output = Payments;

    fn payment(&mut self, payment: Payment) -> Result<(), String> {
        if self.count > 0 {
            self.current.push(b',');
        }
        let at = self.current.len();
        let (record, key) = write_payment(&payment, &mut self.current)?;
        self.rows.push(Row { record, key });
        self.count += 1;
        let record = self.current.get(at..).unwrap_or_default();
        if !self.by_chunk && cuts_after(self.current.len(), record) {
            self.cut();
        }
        Ok(())
    }

    fn by_chunks(&mut self) {
        self.by_chunk = true;
    }

    fn chunk_key(&self, chunk: &[u8], context: u64) -> u128 {
        self.pieces.input_key(chunk, context)
    }

    fn end_chunk(&mut self, input: u128, len: usize, clean: bool) {
        if self.rows.is_empty() {
            return;
        }
        self.cut();
        match self.done.last().filter(|_| clean) {
            Some(piece) => {
                self.pieces.note_input(input, piece);
                self.followed(input, len);
            }
            None => self.last_input = None,
        }
    }

    fn holds(&self, input: u128) -> Option<usize> {
        self.pieces.made_from(input).map(|piece| piece.rows.len())
    }

    fn next_after(&self, input: u128) -> Option<(u128, usize)> {
        self.pieces.next_after(input)
    }

    fn reuse(&mut self, input: u128, len: usize) -> Option<usize> {
        // Only at a chunk's start: nothing written since the last cut but the body's opening.
        let at_start = self.rows.is_empty()
            && (self.current.is_empty() || (self.count == 0 && self.current == PAYMENTS_OPEN));
        if !at_start {
            return None;
        }
        let piece = self.pieces.made_from(input)?;
        let n = piece.rows.len();
        self.current.clear();
        self.done.push(piece);
        self.count += n;
        self.followed(input, len);
        Some(n)
    }

    /// `count` and the members the file added, then the end of the envelope.
    fn finish(mut self, extra: &Map<String, Value>) -> (Payments, Vec<(usize, usize, String)>) {
        self.current.extend_from_slice(b"],\"count\":");
        self.current
            .extend_from_slice(self.count.to_string().as_bytes());
        for (k, v) in extra {
            self.current.push(b',');
            // Keys and values come from a parsed document: serialisation cannot fail.
            let _ = serde_json::to_writer(&mut self.current, k);
            self.current.push(b':');
            let _ = serde_json::to_writer(&mut self.current, v);
        }
        self.current.push(b'}');
        self.cut();
        let mut payments = Payments {
            pieces: self.done.into(),
            sorted: Arc::from([]),
        };
        let repeated = payments.sort();
        (payments, repeated)
    }
}

/// A place in a piece (or a piece's index), which a `u32` holds.
fn offset(n: usize) -> Result<u32, String> {
    u32::try_from(n).map_err(|_| "a payment over 4 GiB".to_string())
}

/// Appends a payment to the body exactly as its derived `Serialize` writes it (a test holds the
/// two equal): where in `out` the record and its reference lie.
fn write_payment(p: &Payment, out: &mut Vec<u8>) -> Result<(Span, Span), String> {
    /// Writes `"key":value` (after a comma unless first) and returns where the value lies.
    fn entry<T: Serialize + ?Sized>(
        out: &mut Vec<u8>,
        first: bool,
        key: &str,
        value: &T,
    ) -> Result<Span, String> {
        if !first {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key).map_err(|e| e.to_string())?;
        out.push(b':');
        let start = out.len();
        serde_json::to_writer(&mut *out, value).map_err(|e| e.to_string())?;
        Ok((offset(start)?, offset(out.len())?))
    }
    let start = offset(out.len())?;
    out.push(b'{');
    entry(out, true, "id_event", &p.id_event)?;
    entry(out, false, "id_payment", &p.id_payment)?;
    let reference = entry(out, false, "reference_payment", &p.reference_payment)?;
    entry(out, false, "buyer", &p.buyer)?;
    entry(out, false, "email_buyer", &p.email_buyer)?;
    entry(out, false, "country_buyer", &p.country_buyer)?;
    entry(out, false, "document_buyer", &p.document_buyer)?;
    entry(out, false, "description_payment", &p.description_payment)?;
    entry(out, false, "date_payment", &p.date_payment)?;
    entry(out, false, "hour_payment", &p.hour_payment)?;
    entry(out, false, "type_payment", &p.type_payment)?;
    entry(out, false, "method_payment", &p.method_payment)?;
    entry(out, false, "amount_payment", &p.amount_payment)?;
    entry(
        out,
        false,
        "amount_receive_payment",
        &p.amount_receive_payment,
    )?;
    entry(out, false, "status_payment", &p.status_payment)?;
    entry(out, false, "cupom_payment", &p.cupom_payment)?;
    entry(out, false, "note_payment", &p.note_payment)?;
    for (k, v) in &p.extra {
        entry(out, false, k, v)?;
    }
    out.push(b'}');
    Ok(((start, offset(out.len())?), reference))
}

/// The OpenAPI 3.1 document of the API as served (kept at the repository's root).
pub(crate) const OPENAPI: &[u8] = include_bytes!("../openapi.json");

/// The document as a prepared body, made on first use. The same bytes for every server, so
/// sharing it shares no state.
pub(crate) fn openapi() -> &'static Body {
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

/// The `/status` of one snapshot, typed: every bundle folder as the catalog saw it at the
/// reload. What changes between reloads (each bundle's write queue, the state log's trouble) is
/// added when it is asked for, by [`Status::body`].
#[derive(Debug, Default, Serialize)]
pub(crate) struct Status {
    /// Present only while the file watch is lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    watch: Option<Condition>,
    /// Present only while object storage (`--data s3://...`) cannot be read: the bundles below
    /// are the last ones mirrored.
    #[serde(skip_serializing_if = "Option::is_none")]
    storage: Option<Condition>,
    /// The bundles in object storage the last poll could not mirror, by name: incomplete by
    /// their manifest, or failing to be read or written. Present only when there is one.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    storage_bundles: BTreeMap<String, Condition>,
    /// Present only while the last reload could not list the data folder (the bundles below
    /// are then the previous reload's).
    #[serde(skip_serializing_if = "Option::is_none")]
    data_folder_error: Option<String>,
    #[serde(skip)]
    bundles: Vec<BundleStatus>,
}

impl Status {
    /// The status of every bundle folder, in name order, with the file watch's loss when it is
    /// lost, and why the data folder could not be listed when it could not.
    pub(crate) fn new<'a>(
        entries: impl Iterator<Item = &'a Entry>,
        watch: Option<&Condition>,
        storage: Option<&Condition>,
        storage_bundles: &BTreeMap<String, Condition>,
        data_folder_error: Option<&str>,
        sources: &crate::kiosk::Sources,
    ) -> Status {
        Status {
            watch: watch.cloned(),
            storage: storage.cloned(),
            storage_bundles: storage_bundles.clone(),
            data_folder_error: data_folder_error.map(str::to_string),
            bundles: entries.map(|e| bundle_status(e, sources)).collect(),
        }
    }

    /// The `/status` body: each bundle with its `queue` from `queues` and its `reprint` from
    /// `reprints` (by bundle name; the queues of bundles no longer listed under
    /// `queues_of_missing_bundles`, shown, not hidden), and `state_log` while the `--state` log
    /// fails.
    pub(crate) fn body(
        &self,
        mut queues: BTreeMap<String, Value>,
        mut reprints: BTreeMap<String, Value>,
        state_log: Option<&Condition>,
    ) -> Bytes {
        #[derive(Serialize)]
        struct Body<'a> {
            #[serde(flatten)]
            status: &'a Status,
            bundles: Vec<Shown<'a>>,
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            queues_of_missing_bundles: BTreeMap<String, Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            state_log: Option<&'a Condition>,
        }
        #[derive(Serialize)]
        struct Shown<'a> {
            #[serde(flatten)]
            bundle: &'a BundleStatus,
            #[serde(skip_serializing_if = "Option::is_none")]
            queue: Option<Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            reprint: Option<Value>,
        }
        let bundles = self
            .bundles
            .iter()
            .map(|bundle| Shown {
                bundle,
                queue: queues.remove(&bundle.name),
                reprint: reprints.remove(&bundle.name),
            })
            .collect();
        let body = Body {
            status: self,
            bundles,
            queues_of_missing_bundles: queues,
            state_log,
        };
        // Only strings, numbers, booleans and the queues' own JSON: it cannot fail.
        serde_json::to_vec(&body)
            .map_or_else(|_| Bytes::from_static(b"{\"bundles\":[]}"), Bytes::from)
    }
}

/// Something wrong that goes on: its state, since when and why (`/status`'s `watch`, `lost`;
/// its `storage`, `failing`; each of its `storage_bundles`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Condition {
    pub(crate) state: &'static str,
    pub(crate) since: String,
    pub(crate) reason: String,
}

impl Condition {
    /// `state` since now.
    pub(crate) fn now(state: &'static str, reason: String) -> Condition {
        Condition {
            state,
            since: timestamp(Utc::now()),
            reason,
        }
    }

    /// `state` for `reason` now, after `before`: since `before`'s time if it was the same
    /// state (the reason is the latest one).
    pub(crate) fn after(
        before: Option<Condition>,
        state: &'static str,
        reason: String,
    ) -> Condition {
        match before {
            Some(b) if b.state == state => Condition { reason, ..b },
            _ => Condition::now(state, reason),
        }
    }
}

#[derive(Debug, Serialize)]
struct BundleStatus {
    name: String,
    served: bool,
    id_event: Option<i64>,
    title: Option<String>,
    /// How many tokens its bundle.toml names; never the tokens.
    tokens: usize,
    /// How many app keys the served version's company routes take (`app_keys`; absent: any);
    /// never the keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    app_keys: Option<usize>,
    records: Option<Records>,
    /// When the served version was loaded.
    loaded_at: Option<String>,
    /// When the folder was last read (the errors below are that attempt's).
    checked_at: String,
    errors: Vec<String>,
    warnings: Vec<String>,
    /// The served version's own warnings, when it is not the latest attempt's (that attempt
    /// failed, or clashes: its problems are above): a delay cut, an unknown key, still true of
    /// what is answered.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    served_warnings: Vec<String>,
    /// Where the served version comes from (or the version that would serve, when none is),
    /// when its bundle.toml names a source.
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<crate::kiosk::SourceStatus>,
    /// The served version's `[simulate]`, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    simulate: Option<serde_json::Value>,
}

fn bundle_status(e: &Entry, sources: &crate::kiosk::Sources) -> BundleStatus {
    let served = e.serving.as_deref();
    let lines = |severity| {
        e.all_problems()
            .filter(|p| p.severity == severity)
            .map(ToString::to_string)
            .collect()
    };
    BundleStatus {
        name: e.name.clone(),
        served: served.is_some(),
        id_event: served.map(|v| v.summary.id_event),
        title: served.map(|v| v.summary.title.clone()),
        tokens: e.tokens.len(),
        app_keys: served.and_then(|v| v.prepared.app_key_count()),
        records: served.map(|v| v.summary.records.clone()),
        loaded_at: served.map(|v| timestamp(v.loaded_at)),
        checked_at: timestamp(e.checked_at),
        errors: lines(Severity::Error),
        warnings: lines(Severity::Warning),
        served_warnings: match (served, &e.candidate) {
            (Some(s), Some(c)) if std::ptr::eq(s, &**c) => Vec::new(),
            (Some(s), _) => s.warnings.iter().map(ToString::to_string).collect(),
            (None, _) => Vec::new(),
        },
        // Also for a bundle not served (a token clash, errors): the version it would serve, or
        // for one that never loaded (a desk set up with a bundle.toml alone), the source the
        // refresher follows for it.
        source: [&e.serving, &e.last_good, &e.candidate]
            .into_iter()
            .find_map(|v| v.as_ref()?.prepared.source.clone())
            .or_else(|| sources.get(&e.name))
            .map(|h| h.status(Utc::now())),
        simulate: served.and_then(|v| Some(v.prepared.simulation.as_ref()?.shown())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_sizes_never_bytes_or_every_reference() {
        let body = Body::new(Bytes::from(vec![b'q'; 1 << 20]));
        let files: HashMap<Box<str>, Body> = (0..10_000)
            .map(|i| {
                let body = Body::new(Bytes::from(format!("{{\"row\":{i}}}")));
                (format!("PG{i:08}").into(), body)
            })
            .collect();
        let refs = ByReference::new(files, Payments::default());

        let one = format!("{:?}", Answers::One(body));
        let many = format!("{:?}", Answers::ByReference(refs));

        assert!(one.len() < 200 && !one.contains("qqqq"), "{one}");
        assert_eq!(many, "ByReference(10000 detail files, 0 payments)");
    }

    /// A body made for one request, asked for in one coding by a client that refuses identity:
    /// that coding alone, of any size (a large one used to get a 503 that no retry mended), and
    /// the same bytes under the same tag as a kept variant of those bytes.
    #[test]
    fn a_body_made_per_request_is_compressed_in_the_one_coding_asked_for() {
        for len in [10_000, 2 * EAGER_COMPRESS_MAX] {
            let text: Vec<u8> = (0..len).map(|i| b"{\"a\":[1,2,3]}"[i % 13]).collect();
            let made = Body::new(Bytes::from(text.clone()));
            for encoding in [Encoding::Gzip, Encoding::Brotli] {
                let (got, bytes, tag) = made.encoded_once(encoding);
                assert_eq!(got, encoding, "{len}");
                assert!(made.ready(encoding).is_none(), "not kept");
                let kept = Body::new(Bytes::from(text.clone()));
                let (_, (kept_bytes, kept_tag)) = kept.encoded(encoding);
                assert_eq!(
                    bytes.to_bytes(),
                    kept_bytes.to_bytes(),
                    "{len} {encoding:?}"
                );
                assert_eq!(&tag, kept_tag);
                assert!(bytes.len() < text.len() as u64 / 4, "compressed");
            }
        }
    }

    #[test]
    fn a_compression_given_up_midway_leaves_nothing_and_can_be_made_later() {
        // Three chunks: `keep` says no at the third question, inside brotli's loop.
        let text: Vec<u8> = (0..3 * COMPRESS_CHUNK).map(|i| (i % 251) as u8).collect();
        let body = Body::new(Bytes::from(text.clone()));
        let asked = std::sync::atomic::AtomicUsize::new(0);
        let keep = || asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 4;

        assert!(!body.compress_while(&keep));
        assert!(body.ready(Encoding::Gzip).is_none());
        assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 5);

        assert!(body.compress_while(&|| true));
        let (gz, _) = body.ready(Encoding::Gzip).expect("made");
        let mut plain = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(&gz.to_bytes()[..]),
            &mut plain,
        )
        .expect("gzip");
        assert_eq!(plain, text);
    }

    #[test]
    fn a_body_in_pieces_is_one_buffer_up_to_a_megabyte_and_pieces_above() {
        fn gunzip(p: &Payload) -> Vec<u8> {
            let mut out = Vec::new();
            std::io::Read::read_to_end(
                &mut flate2::read::GzDecoder::new(&p.to_bytes()[..]),
                &mut out,
            )
            .expect("gzip");
            out
        }
        let pieces = Pieces::default();
        for (n, in_pieces) in [(3, false), (12, true)] {
            let parts: Vec<Vec<u8>> = (0..n)
                .map(|i| format!("{i:0>8},").repeat(12_000).into_bytes())
                .collect();
            let held: Arc<[Arc<Piece>]> = parts.iter().map(|p| pieces.intern(p, &[])).collect();
            let body = Body::from_pieces(held);
            body.compress();
            let (identity, tag) = body.ready(Encoding::Identity).expect("identity");
            assert_eq!(identity.parts().len() > 1, in_pieces);
            assert_eq!(
                tag,
                Body::new(Bytes::from(parts.concat()))
                    .ready(Encoding::Identity)
                    .expect("identity")
                    .1
            );
            let (gz, _) = body.ready(Encoding::Gzip).expect("compressed");
            let (br, _) = body.ready(Encoding::Brotli).expect("compressed");
            assert_eq!(gunzip(gz), parts.concat());
            assert_eq!(
                matches!(gz, Payload::Pieces(..)),
                in_pieces,
                "{} bytes",
                body.len()
            );
            assert_eq!(matches!(br, Payload::Pieces(..)), in_pieces);
        }
    }

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
            (&bytes.to_bytes()[..], tag.to_str().ok()),
            (&text[..], Some(&*format!("\"{hash}\"")))
        );
        let (gz, tag) = body.ready(Encoding::Gzip).expect("compressed");
        assert!(gz.len() < text.len() as u64);
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
