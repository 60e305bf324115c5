//! Payments, decoded record by record as they are read.
//!
//! The payments file is the one that grows large (a 200,000-payment event is about 100 MB of
//! JSON). Holding it as text, as a value tree and as typed records at once would take several
//! times its size, so it is read record by record: each record is parsed on its own, decoded
//! with the same rules as every other record, handed to a [`Sink`] (`prepare::PaymentsWriter`
//! writes it into the served body), then dropped. [`from_json_split`] cuts the file into
//! chunks of records ([`super::split`]), decodes them on a thread a core (up to four) and
//! takes a chunk a previous version read whole; [`from_json_reader`] streams it with
//! serde_json, for the files the split does not take and for their errors' places.
//! TOML files (and tests) feed the same builder from a parsed value.

use std::collections::VecDeque;
use std::fmt;
use std::io::Read;
use std::sync::{mpsc, Mutex};

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::decode::{describe, expected, join_index, Diag, Finding};
use super::records::{self, Payment};
use super::split::{cuts_after, NotSplit, Split};

/// Where decoded payments go, one at a time, in file order: `prepare` writes them into the
/// served body (the model only decodes and checks).
pub(crate) trait Sink {
    type Output;
    /// One valid payment; an `Err` is a message for the record's path.
    fn payment(&mut self, payment: Payment) -> Result<(), String>;
    /// The payments will come in chunks of the file ([`Sink::end_chunk`]): cut only there.
    fn by_chunks(&mut self);
    /// The key of a chunk's bytes (the file from its first record's first byte to its last
    /// record's last) in `context` (what else decides what they make: [`chunk_context`]), for
    /// [`Sink::end_chunk`] and [`Sink::reuse`].
    fn chunk_key(&self, chunk: &[u8], context: u64) -> u128;
    /// The payments given since the last chunk are a chunk of the file, cut where
    /// [`cuts_after`] says, of `len` bytes whose key is `input`: remember what they made, for a
    /// later version's [`Sink::reuse`], when `clean` (they gave no finding).
    fn end_chunk(&mut self, input: u128, len: usize, clean: bool);
    /// How many payments the chunk keyed `input` holds, if [`Sink::reuse`] would take it now.
    fn holds(&self, input: u128) -> Option<usize>;
    /// The chunk that followed the chunk keyed `input` when it was last read: its key and
    /// length, for the split to take it unscanned when the bytes that follow are it again.
    fn next_after(&self, input: u128) -> Option<(u128, usize)>;
    /// A chunk of `len` bytes whose key is `input`, in place of its payments, if what it made
    /// (its payments, written) is still held: how many payments it holds.
    fn reuse(&mut self, input: u128, len: usize) -> Option<usize>;
    /// The list is complete: close it, with the members the file added after its own; with
    /// every payment whose reference an earlier one has, as (its index, the earlier's index,
    /// the reference), in file order.
    fn finish(self, extra: &Map<String, Value>) -> (Self::Output, Vec<(usize, usize, String)>);
}

/// The records of a file read since the last cut: the file from the first record's first byte
/// to the last record's last, separators included. Hashed, with whether they open the list
/// (the first piece of a body holds its opening), they say whether a version already made
/// their piece.
#[derive(Debug, Default)]
struct Chunk {
    bytes: Vec<u8>,
    /// Where each record lies in `bytes`.
    records: Vec<(usize, usize)>,
}

impl Chunk {
    fn records(&self) -> impl Iterator<Item = &[u8]> {
        self.records
            .iter()
            .map(|&(start, end)| self.bytes.get(start..end).unwrap_or_default())
    }
}

/// Decodes and checks payments one record at a time, handing each to a [`Sink`].
#[derive(Debug)]
struct Builder<S> {
    /// `data` for the envelope, empty for a bare list.
    data_path: String,
    sink: S,
    records: usize,
    /// No record (and no shape) error so far: every record so far is in the sink, at its index.
    ok: bool,
    saw_data: bool,
    declared_count: Option<Value>,
    extra: Map<String, Value>,
}

impl<S: Sink> Builder<S> {
    fn new(sink: S) -> Builder<S> {
        Builder {
            data_path: String::new(),
            sink,
            records: 0,
            ok: true,
            saw_data: false,
            declared_count: None,
            extra: Map::new(),
        }
    }

    /// Decodes, checks and serialises one record.
    fn record(&mut self, value: &Value, diag: &mut Diag) {
        let path = join_index(&self.data_path, self.records);
        let payment = records::payment(value, &path, diag);
        self.accept(payment, diag);
    }

    /// Counts a decoded record, and hands a valid one to the sink while every record so far
    /// was valid (the bundle is rejected otherwise: keep checking, stop building).
    fn accept(&mut self, payment: Option<Payment>, diag: &mut Diag) {
        let index = self.records;
        self.records += 1;
        let Some(payment) = payment else {
            self.ok = false;
            return;
        };
        if !self.ok {
            return;
        }
        if let Err(message) = self.sink.payment(payment) {
            self.ok = false;
            let path = join_index(&self.data_path, index);
            diag.error(&path, format!("cannot be prepared: {message}"));
        }
    }

    /// Takes the next chunk of the file: what a version made of the same bytes, when the sink
    /// still holds it, else its records decoded (on a decoding thread, or here), then
    /// remembered by its key when it ends where [`cuts_after`] cut. Its buffers, to use again.
    fn take(&mut self, pending: Pending, diag: &mut Diag) -> Result<Option<Buffers>, NotSplit> {
        let (mut buffers, key) = match pending {
            Pending::Known(key, n, len) => {
                // Its records are not checked again once the bundle is refused: they were clean.
                if self.ok && self.sink.reuse(key, len).is_none() {
                    return Err(NotSplit); // dropped since the split saw it: read as a stream
                }
                self.records += n;
                return Ok(None);
            }
            Pending::Decoding(reply, key) => {
                let (buffers, parsed) = reply.recv().map_err(|_| NotSplit)?;
                parsed?;
                (buffers, key)
            }
            Pending::Here(mut buffers, first, key) => {
                let len = buffers.chunk.bytes.len();
                if let Some(n) = key
                    .filter(|_| self.ok)
                    .and_then(|k| self.sink.reuse(k, len))
                {
                    self.records += n;
                    return Ok(Some(buffers));
                }
                decode(&mut buffers, first, &self.data_path)?;
                (buffers, key)
            }
        };
        let mut clean = true;
        for (payment, findings) in buffers.decoded.drain(..) {
            clean &= findings.is_empty();
            diag.findings.extend(findings);
            self.accept(payment, diag);
        }
        if let Some(key) = key.filter(|_| self.ok) {
            self.sink.end_chunk(key, buffers.chunk.bytes.len(), clean);
        }
        Ok(Some(buffers))
    }

    /// Checks the envelope's `count` and closes the body.
    fn finish(mut self, diag: &mut Diag) -> Option<S::Output> {
        // As for every other list: count and duplicates are checked once every record decoded.
        if !self.ok {
            return None;
        }
        if let Some(v) = &self.declared_count {
            match v.as_u64() {
                Some(n) if n as usize == self.records => {}
                Some(n) => {
                    diag.error(
                        "count",
                        format!("count is {n} but data has {}", self.records),
                    );
                    self.ok = false;
                }
                None => {
                    diag.error(
                        "count",
                        format!("expected an integer, found {}", describe(v)),
                    );
                    self.ok = false;
                }
            }
        }
        // Duplicate references, found in the sink's order of references (no set of 200,000
        // strings), reported after `count` as the non-streamed decoders order them.
        let (output, repeated) = self.sink.finish(&self.extra);
        for (index, first, reference) in repeated {
            diag.error(
                &format!("{}.reference_payment", join_index(&self.data_path, index)),
                format!(
                    "{} is also the reference of {}; references must be unique",
                    crate::problem::quoted(&reference),
                    join_index(&self.data_path, first)
                ),
            );
            self.ok = false;
        }
        self.ok.then_some(output)
    }
}

/// The payments file, for docs/bundles.md.
#[cfg(test)]
pub(crate) const PAYMENTS_DOC: super::bodies::BodyDoc = super::bodies::BodyDoc {
    holds: "`{\"data\": [payment, ...], \"count\": n}`, or the bare list. Read record by \
        record, so it may be large; each `reference_payment` is unique.",
    records: &[("data", <Payment as super::decode::Describe>::ty)],
};

/// Payments from a parsed value (TOML files; JSON in tests): the envelope or a bare list.
pub(crate) fn from_value<S: Sink>(v: &Value, diag: &mut Diag, sink: S) -> Option<S::Output> {
    let mut b = Builder::new(sink);
    match v {
        Value::Array(items) => items.iter().for_each(|item| b.record(item, diag)),
        Value::Object(map) => {
            b.data_path = "data".into();
            for (k, v) in map {
                match k.as_str() {
                    "data" => {
                        b.saw_data = true;
                        match v {
                            Value::Array(items) => {
                                items.iter().for_each(|item| b.record(item, diag))
                            }
                            other => {
                                diag.error("data", expected("an array", "data", &describe(other)));
                                b.ok = false;
                            }
                        }
                    }
                    "count" => b.declared_count = Some(v.clone()),
                    _ => {
                        b.extra.insert(k.clone(), v.clone());
                    }
                }
            }
            if !b.saw_data {
                diag.error("data", "missing required field");
                b.ok = false;
            }
        }
        other => {
            diag.error("", expected("an object", "", &describe(other)));
            return None;
        }
    }
    b.finish(diag)
}

/// Payments streamed from JSON text: only one record is held as a value at a time. A syntax
/// error is the `Err`, with serde's line and byte column; a wrong shape is a finding, worded as
/// the other lists word it.
pub(crate) fn from_json_reader<R: Read, S: Sink>(
    reader: R,
    diag: &mut Diag,
    sink: S,
) -> Result<Option<S::Output>, serde_json::Error> {
    let mut b = Builder::new(sink);
    let mut de = serde_json::Deserializer::from_reader(reader);
    Stream {
        b: &mut b,
        diag: &mut *diag,
        top: true,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(b.finish(diag))
}

/// A chunk's records decoded: each payment (none when it has an error) with its findings.
type Decoded = Vec<(Option<Payment>, Vec<Finding>)>;

/// A chunk and its records decoded. They go round between the split and the decoding threads
/// rather than being made for each chunk: eventbox's allocator returns freed pages at once, and
/// a megabyte allocated and freed per chunk on several threads cost a third of a load in the
/// kernel.
#[derive(Debug, Default)]
struct Buffers {
    chunk: Chunk,
    decoded: Decoded,
}

/// A chunk to decode, the index of its first record in the list, and where the result goes.
type Job = (Buffers, usize, mpsc::SyncSender<Decoding>);

/// A decoded chunk: its buffers, and whether every record parsed.
type Decoding = (Buffers, Result<(), NotSplit>);

/// What decides what a chunk's bytes make, besides the bytes: whether they open the list (the
/// first piece holds the body's opening) and how deep a record may nest there (less in the
/// envelope than in a bare list). Chunks are the same only in the same context.
fn chunk_context(first: bool, max_depth: usize) -> u64 {
    (max_depth as u64) << 1 | u64::from(first)
}

/// A chunk between the split and the sink.
enum Pending {
    /// Taken unscanned, its bytes those of a chunk the sink holds: its key, how many records
    /// it holds, its length.
    Known(u128, usize, usize),
    /// Being decoded on a decoding thread; its key if it ends where [`cuts_after`] cut.
    Decoding(mpsc::Receiver<Decoding>, Option<u128>),
    /// A chunk (with its first record's index and its key) to take here: whole, when the sink
    /// holds the piece its key names; else decoded on this thread (a chunk the sink held a
    /// piece for when it was split, the last chunk of a small file, or any chunk when no
    /// thread could start).
    Here(Buffers, usize, Option<u128>),
}

/// The chunks between the split and the sink, in file order, and buffers to use again.
#[derive(Default)]
struct Queue {
    pending: VecDeque<Pending>,
    /// The bytes of the chunks pending.
    bytes: usize,
    spare: Vec<Buffers>,
}

impl Queue {
    fn push(&mut self, chunk: Pending, bytes: usize) {
        self.pending.push_back(chunk);
        self.bytes += bytes;
    }

    /// Hands chunks to the builder while more than [`IN_FLIGHT`] wait (or all of them).
    fn settle<S: Sink>(
        &mut self,
        b: &mut Builder<S>,
        diag: &mut Diag,
        all: bool,
    ) -> Result<(), NotSplit> {
        while self.pending.len() > IN_FLIGHT
            || (self.pending.len() > 1 && self.bytes > IN_FLIGHT_BYTES)
            || (all && !self.pending.is_empty())
        {
            if let Some(next) = self.pending.pop_front() {
                if let Some(buffers) = b.take(next, diag)? {
                    self.bytes -= buffers.chunk.bytes.len();
                    self.spare.push(buffers);
                }
            }
        }
        Ok(())
    }
}

/// How many chunks, and how many of their bytes, may wait between the split and the sink (a
/// chunk is about 64 KiB to 1 MiB, or one record if a record is longer: one is always let
/// through).
const IN_FLIGHT: usize = 4;
const IN_FLIGHT_BYTES: usize = 8 << 20;

/// The most decoding threads a load starts (one a core, up to this).
const MAX_WORKERS: usize = 4;

/// Parses and decodes the records of `chunk` into `decoded`, the first at index `first` of the
/// list at `data_path`, with the rules of every other record. `NotSplit` when a record does
/// not parse.
fn decode(buffers: &mut Buffers, first: usize, data_path: &str) -> Result<(), NotSplit> {
    buffers.decoded.clear();
    for (i, record) in buffers.chunk.records().enumerate() {
        let value: Value = serde_json::from_slice(record).map_err(|_| NotSplit)?;
        let mut diag = Diag::default();
        let payment = records::payment(&value, &join_index(data_path, first + i), &mut diag);
        buffers.decoded.push((payment, diag.findings));
    }
    Ok(())
}

/// A decoding thread: decodes the chunks it is sent until the split is over.
fn decoder(queue: &Mutex<mpsc::Receiver<Job>>, data_path: &str) {
    loop {
        let job = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok((mut buffers, first, reply)) = job else {
            return; // the split is over
        };
        let parsed = decode(&mut buffers, first, data_path);
        let _ = reply.send((buffers, parsed));
    }
}

/// Payments from JSON read as [`split`](super::split) records, each parsed from its bytes, a
/// chunk at a time on decoding threads: the same result as [`from_json_reader`] (a test and the
/// `load_json` fuzzer hold them equal) at a fraction of its time. `NotSplit` for a file that
/// does not split or does not parse, which the caller reads with [`from_json_reader`] for its
/// errors' places.
pub(crate) fn from_json_split<R: Read, S: Sink>(
    reader: R,
    diag: &mut Diag,
    sink: S,
) -> Result<Option<S::Output>, NotSplit> {
    let mut split = Split::new(reader)?;
    let mut b = Builder::new(sink);
    let (data_path, max_depth) = (split.data_path, split.max_depth);
    b.data_path = data_path.into();
    b.sink.by_chunks();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_WORKERS));
    // The records are parsed and decoded on up to `workers` threads, a chunk at a time, and
    // written here in file order; the threads start with the first chunk that must be decoded
    // (a small file, or a reload that takes every chunk but the last, starts none).
    let (jobs, queue) = mpsc::sync_channel::<Job>(IN_FLIGHT);
    let queue = Mutex::new(queue);
    std::thread::scope(|scope| {
        let mut threads = Vec::new();
        let run = || -> Result<(), NotSplit> {
            // Dropped when this returns, however it returns: the workers then stop.
            let jobs = jobs;
            let mut spawned = None;
            let mut spawn = || {
                let mut n = 0;
                for _ in 0..workers {
                    let queue = &queue;
                    let worker = move || decoder(queue, data_path);
                    let thread = std::thread::Builder::new().name("eventbox-decode".into());
                    if let Ok(handle) = thread.spawn_scoped(scope, worker) {
                        threads.push(handle);
                        n += 1;
                    }
                }
                n
            };
            let mut queue = Queue::default();
            let mut current = Buffers::default();
            let (mut first, mut records) = (0, 0);
            // The chunk that followed the last one when a version read it.
            let mut expected = None;
            loop {
                // At a chunk's start: chunks a version read, taken unscanned while the bytes
                // ahead are theirs.
                while let Some((key, len)) = expected.take() {
                    let Some(n) = b.sink.holds(key) else { break };
                    if !split.at_next()? {
                        break;
                    }
                    split.start_chunk();
                    let Some(ahead) = split.ahead(len)? else {
                        break;
                    };
                    if b.sink.chunk_key(ahead, chunk_context(false, max_depth)) != key {
                        break;
                    }
                    split.skip(len);
                    records += n;
                    first = records;
                    expected = b.sink.next_after(key);
                    queue.push(Pending::Known(key, n, len), 0);
                    queue.settle(&mut b, diag, false)?;
                }
                split.at_next()?;
                split.start_chunk();
                let end = loop {
                    let Some(len) = split.next_record()?.map(<[u8]>::len) else {
                        break true;
                    };
                    let chunk = split.chunk();
                    let record = chunk.get(chunk.len() - len..).unwrap_or_default();
                    current.chunk.records.push((chunk.len() - len, chunk.len()));
                    records += 1;
                    if cuts_after(chunk.len(), record) {
                        break false;
                    }
                };
                // A chunk is complete; one that ends where `cuts_after` cut has a key.
                let mut full = queue.spare.pop().unwrap_or_default();
                full.chunk.records.clear();
                std::mem::swap(&mut full, &mut current);
                full.chunk.bytes.clear();
                full.chunk.bytes.extend_from_slice(split.chunk());
                let context = chunk_context(first == 0, max_depth);
                let key = (!end).then(|| b.sink.chunk_key(&full.chunk.bytes, context));
                expected = key.and_then(|k| b.sink.next_after(k));
                let known = key.is_some_and(|k| b.sink.holds(k).is_some());
                // The list's last chunk when no thread runs yet (a small file): decoded here.
                let threads = if known || (end && spawned.is_none()) {
                    0
                } else {
                    *spawned.get_or_insert_with(&mut spawn)
                };
                let bytes = full.chunk.bytes.len();
                if threads == 0 {
                    queue.push(Pending::Here(full, first, key), bytes);
                } else {
                    let (reply, decoded) = mpsc::sync_channel(1);
                    jobs.send((full, first, reply)).map_err(|_| NotSplit)?;
                    queue.push(Pending::Decoding(decoded, key), bytes);
                }
                first = records;
                queue.settle(&mut b, diag, end)?;
                if end {
                    return Ok(());
                }
            }
        };
        let result = run();
        // Joined, not only finished: a thread still exiting (its thread-locals being freed)
        // when the load returns would count as leaked memory to the fuzzers' leak check.
        for thread in threads.drain(..) {
            let _ = thread.join();
        }
        result
    })?;
    // The envelope around the list: `count`, the members the file adds, `data` twice.
    let skeleton = split.skeleton()?;
    let mut de = serde_json::Deserializer::from_slice(&skeleton);
    Stream {
        b: &mut b,
        diag: &mut *diag,
        top: true,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end())
    .map_err(|_| NotSplit)?;
    Ok(b.finish(diag))
}

/// Panics unless [`from_json_split`] and [`from_json_reader`] agree on `bytes` wherever the
/// split applies: the same findings, and the same body when it loads, on a first load and on a
/// second one that takes the chunks the first read; and, for a bare list, on the same list in
/// the envelope read while those chunks are held (records may nest less deep there). For the
/// tests and the `load_json` fuzzer.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn split_agrees(bytes: &[u8]) {
    use crate::prepare::{Payments, PaymentsWriter, Pieces};
    let pieces = Pieces::default();
    let split = |bytes: &[u8]| {
        let mut diag = Diag::default();
        from_json_split(bytes, &mut diag, PaymentsWriter::new(&pieces)).map(|p| (p, diag.findings))
    };
    let body = |(p, findings): &(Option<Payments>, Vec<super::decode::Finding>)| {
        (p.as_ref().map(Payments::body), findings.clone())
    };
    let streamed = |bytes: &[u8]| {
        let mut diag = Diag::default();
        from_json_reader(bytes, &mut diag, PaymentsWriter::new(&Pieces::default()))
            .map(|p| (p.map(|p| p.body()), diag.findings))
    };
    let Ok(first) = split(bytes) else {
        return;
    };
    let stream = streamed(bytes).expect("a file that splits and parses is valid JSON");
    assert!(body(&first) == stream, "the split and the stream agree");
    // Again while the first load's pieces live: its chunks are taken, not decoded.
    let again = split(bytes).expect("the same bytes split again");
    assert!(
        body(&again) == stream,
        "a load taking chunks read before agrees"
    );
    if bytes.trim_ascii_start().starts_with(b"[") {
        let envelope = [&b"{\"data\":"[..], bytes, b"}"].concat();
        if let Ok(split) = split(&envelope) {
            let stream = streamed(&envelope).expect("a file that splits and parses is valid JSON");
            assert!(body(&split) == stream, "the list in the envelope agrees");
        }
    }
    drop(first);
}

/// How serde_json (with `arbitrary_precision`) hands a number to a visitor: a one-entry map.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// The streaming visitor: at the top of the file (`top`), the envelope or a bare list; under
/// `data`, the list. A list is visited record by record.
struct Stream<'a, S> {
    b: &'a mut Builder<S>,
    diag: &'a mut Diag,
    top: bool,
}

impl<S: Sink> Stream<'_, S> {
    /// A value of the wrong kind: the message `Obj::new` (top) or `decode_array` (data) gives.
    fn wrong<E>(self, found: &str) -> Result<(), E> {
        let (path, what) = match self.top {
            true => (String::new(), "an object"),
            false => (self.b.data_path.clone(), "an array"),
        };
        let message = expected(what, &path, found);
        self.diag.error(&path, message);
        self.b.ok = false;
        Ok(())
    }
}

impl<'de, S: Sink> DeserializeSeed<'de> for Stream<'_, S> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, S: Sink> Visitor<'de> for Stream<'_, S> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object with \"data\" (the service's body), or an array of payments")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.wrong("null")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.wrong(&v.to_string())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.wrong(&describe(&Value::String(v.into())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(record) = seq.next_element::<Value>()? {
            self.b.record(&record, self.diag);
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut number = None;
        if self.top {
            self.b.data_path = "data".into();
        }
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                NUMBER_TOKEN => number = Some(map.next_value::<String>()?),
                _ if !self.top => {
                    map.next_value::<IgnoredAny>()?;
                }
                "data" if self.b.saw_data => {
                    map.next_value::<IgnoredAny>()?;
                    self.diag.error("data", "appears twice; keep one");
                    self.b.ok = false;
                }
                "data" => {
                    self.b.saw_data = true;
                    map.next_value_seed(Stream {
                        b: &mut *self.b,
                        diag: &mut *self.diag,
                        top: false,
                    })?;
                }
                "count" => self.b.declared_count = Some(map.next_value::<Value>()?),
                _ => {
                    let v = map.next_value::<Value>()?;
                    self.b.extra.insert(key, v);
                }
            }
        }
        if let Some(n) = number {
            return self.wrong(&format!("the number {n}"));
        }
        if !self.top {
            return self.wrong("an object");
        }
        if !self.b.saw_data {
            self.diag.error("data", "missing required field");
            self.b.ok = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::bodies::List;
    use crate::model::records::PaymentDetail;
    use crate::prepare::{Payments, PaymentsWriter, Pieces};
    use std::sync::Arc;

    pub(super) fn from_value(v: &Value, diag: &mut Diag) -> Option<Payments> {
        super::from_value(v, diag, PaymentsWriter::new(&Pieces::default()))
    }

    pub(super) fn from_json_reader(
        reader: &[u8],
        diag: &mut Diag,
    ) -> Result<Option<Payments>, serde_json::Error> {
        super::split_agrees(reader);
        super::from_json_reader(reader, diag, PaymentsWriter::new(&Pieces::default()))
    }

    /// Payments split from `text` (valid, without errors) into `sink`.
    fn split(text: &str, sink: impl Sink<Output = Payments>) -> Payments {
        super::from_json_split(text.as_bytes(), &mut Diag::default(), sink)
            .expect("the file splits")
            .expect("no errors")
    }

    const TWO: &str = r#"{"count": 2, "data": [
      {"id_event": 1, "id_payment": 1, "reference_payment": "A", "buyer": "Ana", "email_buyer": "a@x", "country_buyer": "Brasil", "document_buyer": "1", "description_payment": "1x", "date_payment": "01/02/2026", "hour_payment": "10:00", "type_payment": "Pix", "method_payment": "Pix", "amount_payment": 10.00, "amount_receive_payment": 9.90, "status_payment": "Pago", "cupom_payment": "", "note_payment": "", "extra": true},
      {"id_event": 1, "id_payment": 2, "reference_payment": "B", "buyer": "Bia", "email_buyer": "b@x", "country_buyer": "Brasil", "document_buyer": "2", "description_payment": "2x", "date_payment": "02/02/2026", "hour_payment": "11:00", "type_payment": "Visa", "method_payment": "Cartão", "amount_payment": 20, "amount_receive_payment": 19, "status_payment": "Pago", "cupom_payment": "", "note_payment": ""}
    ], "source": "export"}"#;

    #[test]
    fn the_stream_and_the_value_give_the_same_bytes() {
        let mut d1 = Diag::default();
        let streamed = from_json_reader(TWO.as_bytes(), &mut d1)
            .expect("valid")
            .expect("no errors");
        let value: Value = serde_json::from_str(TWO).expect("valid");
        let mut d2 = Diag::default();
        let parsed = from_value(&value, &mut d2).expect("no errors");
        assert_eq!(streamed.body(), parsed.body());
        let split = split(TWO, PaymentsWriter::new(&Pieces::default()));
        assert_eq!(split.body(), parsed.body());
        assert_eq!(streamed.count(), 2);
        let body = streamed.body();
        let body = std::str::from_utf8(&body).expect("UTF-8");
        assert!(
            body.starts_with(r#"{"data":[{"id_event":1,"id_payment":1,"reference_payment":"A""#),
            "{body}"
        );
        assert!(body.contains(r#""amount_payment":10.00,"#), "{body}");
        assert!(
            body.ends_with(r#"],"count":2,"source":"export"}"#),
            "{body}"
        );
        assert!(d1.findings.is_empty() && d2.findings.is_empty());
    }

    /// A payments document of `references`, each payment's note `note` long.
    fn payments_of(references: &[String], note: usize) -> Value {
        let data: Vec<Value> = references
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut v: Value = serde_json::from_str(TWO).expect("valid");
                let mut p = v["data"][0].take();
                p["reference_payment"] = r.as_str().into();
                p["id_payment"] = i.into();
                p["note_payment"] = format!("{i:0note$}").into();
                p
            })
            .collect();
        serde_json::json!({ "data": data })
    }

    #[test]
    fn every_reference_finds_its_own_row_escaped_or_not_and_a_file_comes_first() {
        // Short ones, and long ones sharing their first 16 bytes (the sort's integer key).
        let mut references: Vec<String> = [
            "Z9",
            "A\"quoted\"",
            "Ção",
            "a\\b",
            "B",
            "AA",
            "a",
            "LONGPREFIX-0123456789-B",
            "LONGPREFIX-0123456789",
            "LONGPREFIX-0123456789-A",
            "LONGPREFIX-01234",
        ]
        .map(String::from)
        .to_vec();
        // Small, and large enough to be cut into pieces: the rows lie in every piece.
        for (many, note) in [(0, 0), (6_000, 200)] {
            references.extend((0..many).map(|i| format!("PG{i:06}")));
            let value = payments_of(&references, note);
            let payments = from_value(&value, &mut Diag::default()).expect("no errors");
            assert_eq!(
                payments.pieces.len() > 1,
                many > 0,
                "{}",
                payments.pieces.len()
            );
            let file = crate::prepare::Body::new(bytes::Bytes::from_static(b"{\"file\":1}"));
            let by = crate::prepare::ByReference::new(
                [("B".into(), file)].into_iter().collect(),
                payments,
            );
            every_reference_found(&by, &references);
        }
    }

    #[test]
    fn a_version_changed_in_one_record_shares_every_other_piece_with_the_last() {
        let pieces = Pieces::default();
        let load = |v: &Value| {
            super::from_value(v, &mut Diag::default(), PaymentsWriter::new(&pieces))
                .expect("no errors")
        };
        let references: Vec<String> = (0..8_000).map(|i| format!("PG{i:06}")).collect();
        let mut value = payments_of(&references, 100);
        let before = load(&value);
        // The same length, other bytes.
        let note = value["data"][4_000]["note_payment"]
            .as_str()
            .unwrap_or_default();
        value["data"][4_000]["note_payment"] = note.replace('0', "1").into();
        let after = load(&value);
        // A record inserted near the start moves no cut after the piece it lands in.
        let mut inserted = value.clone();
        let mut extra = inserted["data"][10].clone();
        extra["reference_payment"] = "NEW".into();
        extra["id_payment"] = 99_999.into();
        inserted["data"]
            .as_array_mut()
            .expect("a list")
            .insert(3, extra);
        let grown = load(&inserted);

        let n = before.pieces.len();
        assert!(n >= 8, "{n} pieces");
        assert_eq!(after.pieces.len(), n);
        assert_eq!(shared(&before, &after), n - 1);
        // The first piece (the insertion) and the last (the count) are new.
        assert_eq!(
            shared(&after, &grown),
            n - 2,
            "{} pieces",
            grown.pieces.len()
        );
        assert_eq!(after.body().len(), before.body().len());
        assert_eq!(after.count(), before.count());
    }

    #[test]
    fn a_reload_scans_and_decodes_only_the_chunks_that_changed_and_writes_the_same_body() {
        /// A writer that counts the payments it is given to decode.
        struct Counting<'a>(PaymentsWriter, &'a std::cell::Cell<usize>);
        impl Sink for Counting<'_> {
            type Output = Payments;
            fn payment(&mut self, payment: Payment) -> Result<(), String> {
                self.1.set(self.1.get() + 1);
                self.0.payment(payment)
            }
            fn by_chunks(&mut self) {
                self.0.by_chunks();
            }
            fn chunk_key(&self, chunk: &[u8], context: u64) -> u128 {
                self.0.chunk_key(chunk, context)
            }
            fn end_chunk(&mut self, input: u128, len: usize, clean: bool) {
                self.0.end_chunk(input, len, clean);
            }
            fn holds(&self, input: u128) -> Option<usize> {
                self.0.holds(input)
            }
            fn next_after(&self, input: u128) -> Option<(u128, usize)> {
                self.0.next_after(input)
            }
            fn reuse(&mut self, input: u128, len: usize) -> Option<usize> {
                self.0.reuse(input, len)
            }
            fn finish(self, extra: &Map<String, Value>) -> (Payments, Vec<(usize, usize, String)>) {
                self.0.finish(extra)
            }
        }
        let pieces = Pieces::default();
        let decoded = std::cell::Cell::new(0);
        let scanned = || crate::model::split::SCANNED.get();
        let load = |text: &str| {
            decoded.set(0);
            let before = scanned();
            let p = split(text, Counting(PaymentsWriter::new(&pieces), &decoded));
            let scanned = scanned() - before;
            // What a first load (nothing to reuse) makes of the same text.
            let fresh = split(text, PaymentsWriter::new(&Pieces::default()));
            assert!(
                p.body() == fresh.body(),
                "the same body as a first load makes"
            );
            (p, decoded.get(), scanned)
        };
        let references: Vec<String> = (0..8_000).map(|i| format!("PG{i:06}")).collect();
        let mut value = payments_of(&references, 100);
        let text = serde_json::to_string_pretty(&value).expect("JSON");
        let (before, all, every) = load(&text);
        assert_eq!(all, 8_000);
        assert!(every > text.len() / 2, "every record is scanned");
        let n = before.pieces.len();
        assert!(n >= 8, "{n} pieces");

        // The same bytes again: only the last chunk is decoded (its piece holds the envelope's
        // end); its bytes are the same, so its piece is shared too. Only the first and the last
        // are scanned: each chunk between is known by the hash of the bytes where the chunk
        // that followed the last one read is expected.
        let (again, read, seen) = load(&text);
        assert!(read < all / 4, "{read} of {all} decoded");
        assert!(seen < every * 3 / n, "{seen} of {every} bytes scanned");
        assert_eq!(shared(&before, &again), n);

        // One payment changed: its chunk and the last are decoded again, one piece is new;
        // the first, the changed one and the one after it are scanned.
        value["data"][4_000]["buyer"] = "Changed".into();
        let changed = serde_json::to_string_pretty(&value).expect("JSON");
        let (after, read, seen) = load(&changed);
        assert!(read < all / 2, "{read} of {all} decoded");
        assert!(seen < every * 5 / n, "{seen} of {every} bytes scanned");
        assert_eq!(shared(&again, &after), n - 1);
        let detail = |p: &Payments, reference| p.find(reference).map(|r| p.detail(r));
        let changed_row = detail(&after, "PG004000").expect("found");
        assert!(changed_row.windows(9).any(|w| w == b"\"Changed\""));
        assert_eq!(detail(&after, "PG003999"), detail(&before, "PG003999"));

        // Kept pieces come with their payments: every reference is found where it is.
        assert_eq!(after.count(), 8_000);
        for reference in ["PG000000", "PG003999", "PG004000", "PG007999"] {
            let row = after.find(reference).expect("found");
            assert_eq!(after.reference(row).as_deref(), Some(reference));
        }

        // Errors in a changed chunk and in the first: the chunks held are decoded, not taken
        // (the bundle is refused: each record is checked), and reported as the stream does.
        value["data"][6_000]["hour_payment"] = "26:00".into();
        value["data"][10]["hour_payment"] = "25:00".into();
        let broken = serde_json::to_string_pretty(&value).expect("JSON");
        let mut diag = Diag::default();
        let refused =
            super::from_json_split(broken.as_bytes(), &mut diag, PaymentsWriter::new(&pieces))
                .expect("splits");
        assert!(refused.is_none());
        let paths: Vec<&str> = diag.findings.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["data[10].hour_payment", "data[6000].hour_payment"]);
    }

    #[test]
    fn a_chunk_read_in_a_bare_list_is_not_taken_unscanned_in_an_envelope() {
        // A record nested 126 deep (an unknown member, ignored): a bare list may hold it, the
        // envelope may not (serde_json's recursion limit counts the envelope too).
        let references: Vec<String> = (0..8_000).map(|i| format!("PG{i:06}")).collect();
        let mut value = payments_of(&references, 100);
        let deep = format!("{}{}", "[".repeat(125), "]".repeat(125));
        value["data"][6_000]["deep"] = serde_json::from_str(&deep).expect("nested");
        let bare = serde_json::to_string(&value["data"]).expect("JSON");
        let pieces = Pieces::default();
        let first = split(&bare, PaymentsWriter::new(&pieces));
        assert_eq!(first.count(), 8_000);
        // The same records in the envelope, while the first load's pieces live.
        let envelope = format!("{{\"data\":{bare}}}");
        let streamed = super::from_json_reader(
            envelope.as_bytes(),
            &mut Diag::default(),
            PaymentsWriter::new(&Pieces::default()),
        );
        assert!(streamed.is_err(), "too deep for the stream");
        let split = super::from_json_split(
            envelope.as_bytes(),
            &mut Diag::default(),
            PaymentsWriter::new(&pieces),
        );
        assert!(
            matches!(split, Err(NotSplit)),
            "read as a stream, for its error"
        );
        super::split_agrees(envelope.as_bytes());
        drop(first);
    }

    #[test]
    fn chunks_decoded_on_threads_report_in_file_order_and_a_broken_one_stops_the_split() {
        let references: Vec<String> = (0..8_000).map(|i| format!("PG{i:06}")).collect();
        let mut value = payments_of(&references, 100);
        for i in [10, 3_000, 7_999] {
            value["data"][i]["hour_payment"] = "25:00".into();
        }
        value["data"][5_000]["amount_receive_payment"] = serde_json::json!(99);
        let text = serde_json::to_string(&value).expect("JSON");
        // The same findings in the same order as the stream (it panics otherwise).
        super::split_agrees(text.as_bytes());
        let mut diag = Diag::default();
        let split = super::from_json_split(
            text.as_bytes(),
            &mut diag,
            PaymentsWriter::new(&Pieces::default()),
        );
        assert!(matches!(split, Ok(None)), "rejected, not unsplit");
        let paths: Vec<&str> = diag.findings.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "data[10].hour_payment",
                "data[3000].hour_payment",
                "data[5000].amount_receive_payment",
                "data[7999].hour_payment"
            ]
        );
        // A record that splits but does not parse, in a middle chunk: the split gives up (and
        // the loader reads the file as a stream), without waiting for ever.
        let broken = text.replacen("\"id_payment\":4000,", "\"id_payment\":4000.0.0,", 1);
        assert_ne!(broken, text);
        let result = super::from_json_split(
            broken.as_bytes(),
            &mut Diag::default(),
            PaymentsWriter::new(&Pieces::default()),
        );
        assert!(matches!(result, Err(NotSplit)));
    }

    /// How many of `b`'s pieces `a` holds too.
    fn shared(a: &Payments, b: &Payments) -> usize {
        b.pieces
            .iter()
            .filter(|p| a.pieces.iter().any(|q| Arc::ptr_eq(p, q)))
            .count()
    }

    fn every_reference_found(by: &crate::prepare::ByReference, references: &[String]) {
        for (i, reference) in references.iter().enumerate() {
            let answer = by.get(reference).expect("found");
            let json: Value = serde_json::from_slice(&answer.identity().to_bytes()).expect("JSON");
            if *reference == "B" {
                assert_eq!(json, serde_json::json!({"file": 1}));
            } else {
                assert_eq!(json["data"][0]["id_payment"], i, "{reference}: {json}");
                assert_eq!(json["data"][0]["reference_payment"], reference.as_str());
            }
        }
        for absent in ["", "b", "Z", "Ca\u{0327}o", "A\\\"quoted\\\""] {
            assert!(by.get(absent).is_none(), "{absent:?}");
        }
    }

    #[test]
    fn records_and_derived_rows_are_what_serde_writes() {
        // The hand-written payment writer and the row pieces mirror `Payment`'s `Serialize` and
        // `PaymentDetail::derived_from`: escapes, non-ASCII text, numbers as written and fields
        // the file adds included.
        let text = TWO
            .replacen("\"Ana\"", r#""Ana \"Zé\" \\ Ção\u0001""#, 1)
            .replacen(
                "\"extra\": true",
                r#""extra": {"a": [1, 2.50]}, "z": null"#,
                1,
            );
        let value: Value = serde_json::from_str(&text).expect("valid");
        let mut diag = Diag::default();
        let payments = from_value(&value, &mut diag).expect("no errors");
        let rows = payments.rows();
        let mut expected_body = b"{\"data\":[".to_vec();
        for (i, item) in value["data"].as_array().expect("a list").iter().enumerate() {
            let payment = records::payment(item, "data", &mut diag).expect("a payment");
            let row = &rows[i];
            assert_eq!(
                payments.reference(*row).as_ref(),
                Some(&payment.reference_payment)
            );
            let expected: List<_> = List {
                data: PaymentDetail::derived_from(&payment),
                extra: Map::new(),
            };
            let expected_row = serde_json::to_vec(&expected).expect("serialisable");
            assert_eq!(
                String::from_utf8_lossy(&payments.detail(*row)),
                String::from_utf8_lossy(&expected_row)
            );
            if i > 0 {
                expected_body.push(b',');
            }
            serde_json::to_writer(&mut expected_body, &payment).expect("serialisable");
        }
        expected_body.extend_from_slice(b"],\"count\":2,\"source\":\"export\"}");
        assert_eq!(
            String::from_utf8_lossy(&payments.body()),
            String::from_utf8_lossy(&expected_body)
        );
    }

    #[test]
    fn every_problem_is_reported_with_its_path() {
        let broken = TWO
            .replacen("\"B\"", "\"A\"", 1)
            .replacen("10:00", "25:00", 1)
            .replacen("\"count\": 2", "\"count\": 3", 1);
        let mut diag = Diag::default();
        assert!(from_json_reader(broken.as_bytes(), &mut diag)
            .expect("valid JSON")
            .is_none());
        let got: Vec<String> = diag
            .findings
            .iter()
            .map(|f| format!("{}: {}", f.path, f.message))
            .collect();
        assert_eq!(
            got,
            vec!["data[0].hour_payment: \"25:00\" is not an HH:MM hour".to_string()],
            "as for other lists, count and duplicates are checked once every record decoded"
        );
    }

    #[test]
    fn syntax_errors_are_errors() {
        let mut diag = Diag::default();
        let e = from_json_reader(&b"{\"data\": [\n  {]"[..], &mut diag).unwrap_err();
        assert_eq!(e.line(), 2);
    }
}

#[cfg(test)]
mod shape_tests {
    use super::tests::{from_json_reader, from_value};
    use super::*;

    /// The findings for `text`, checking the stream and the parsed value agree.
    fn messages(text: &str) -> Vec<String> {
        let mut diag = Diag::default();
        assert!(from_json_reader(text.as_bytes(), &mut diag)
            .expect("valid JSON")
            .is_none());
        let value: Value = serde_json::from_str(text).expect("valid JSON");
        let mut d2 = Diag::default();
        assert!(from_value(&value, &mut d2).is_none());
        let show = |d: &Diag| -> Vec<String> {
            d.findings
                .iter()
                .map(|f| format!("{}: {}", f.path, f.message))
                .collect()
        };
        assert_eq!(show(&diag), show(&d2), "stream and value agree for {text}");
        show(&diag)
    }

    #[test]
    fn wrong_shapes_read_as_the_other_lists_do() {
        for (text, expected) in [
            (
                r#"{"data": "x"}"#,
                "data: expected an array at data, found the string \"x\"",
            ),
            (
                r#"{"data": 12.50}"#,
                "data: expected an array at data, found the number 12.50",
            ),
            (
                r#"{"data": {"a": 1}}"#,
                "data: expected an array at data, found an object",
            ),
            (
                r#""x""#,
                ": expected an object at the top level, found the string \"x\"",
            ),
            (r#"{"count": 0}"#, "data: missing required field"),
        ] {
            assert_eq!(messages(text), [expected], "{text}");
        }
    }

    #[test]
    fn duplicates_come_after_count_and_data_twice_is_refused() {
        let one = r#"{"id_event": 1, "id_payment": 1, "reference_payment": "A", "buyer": "Ana", "email_buyer": "a@x", "country_buyer": "Brasil", "document_buyer": "1", "description_payment": "1x", "date_payment": "01/02/2026", "hour_payment": "10:00", "type_payment": "Pix", "method_payment": "Pix", "amount_payment": 10.00, "amount_receive_payment": 9.90, "status_payment": "Pago", "cupom_payment": "", "note_payment": ""}"#;
        assert_eq!(
            messages(&format!("{{\"data\": [{one}, {one}], \"count\": 3}}")),
            [
                "count: count is 3 but data has 2",
                "data[1].reference_payment: \"A\" is also the reference of data[0]; references must be unique",
            ]
        );
        // Three of one reference among others: each repeat names the first, in file order.
        let other = one.replace("\"A\"", "\"B\"");
        let third = one.replace("\"A\"", "\"C\"");
        assert_eq!(
            messages(&format!("[{one}, {other}, {one}, {third}, {one}, {other}]")),
            [
                "[2].reference_payment: \"A\" is also the reference of [0]; references must be unique",
                "[4].reference_payment: \"A\" is also the reference of [0]; references must be unique",
                "[5].reference_payment: \"B\" is also the reference of [1]; references must be unique",
            ]
        );
        let mut diag = Diag::default();
        let twice = format!("{{\"data\": [{one}], \"data\": [{one}]}}");
        assert!(from_json_reader(twice.as_bytes(), &mut diag)
            .expect("valid JSON")
            .is_none());
        assert_eq!(diag.findings[0].message, "appears twice; keep one");
    }
}
