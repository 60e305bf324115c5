//! Finds the records of a payments file without parsing it, so that each record is parsed from
//! a slice of bytes (serde_json's fastest reader) rather than from the file's stream.
//!
//! A [`Split`] reads the file in blocks and tracks only strings and nesting, which is exact for
//! valid JSON: it hands out each element of the payments list as bytes, and keeps the rest of
//! the file with the list emptied (`{"data":[],"count":2}`) as its *skeleton*. The caller
//! parses every record and the skeleton; when all of them parse, the file is valid JSON made of
//! exactly those parts (valid values, separated by commas, inside an array), so what they decode
//! to is what the whole file decodes to. Anything else (a syntax error anywhere, a shape this
//! does not follow, an escaped key, a read error) is [`NotSplit`], and the caller reads the file
//! again as a stream, which reports errors with their place in the file.

use std::io::{self, Read};

/// The file is not split: read it as a stream instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotSplit;

impl From<io::Error> for NotSplit {
    fn from(_: io::Error) -> Self {
        NotSplit
    }
}

/// A list is cut into chunks (and a body into pieces) after a record once the chunk holds this
/// much, when the record's hash says so...
#[cfg(not(fuzzing))]
pub(crate) const PIECE_MIN: usize = 64 * 1024;
/// ... which one record in this many does ...
#[cfg(not(fuzzing))]
const PIECE_EVERY: u64 = 512;
/// Fuzzing builds (`cargo fuzz` sets `--cfg fuzzing`) cut after a few records, so that the
/// short inputs a fuzzer makes have chunks to decode on threads and to take again.
#[cfg(fuzzing)]
pub(crate) const PIECE_MIN: usize = 64;
#[cfg(fuzzing)]
const PIECE_EVERY: u64 = 2;
/// ... and always once it holds this much.
const PIECE_MAX: usize = 1 << 20;

/// Whether a chunk (or piece) of `len` bytes ending with `record` ends there. The content
/// decides, so after a record inserted or removed the cuts fall back into line at the next cut.
pub(crate) fn cuts_after(len: usize, record: &[u8]) -> bool {
    len >= PIECE_MAX
        || (len >= PIECE_MIN && xxhash_rust::xxh3::xxh3_64(record).is_multiple_of(PIECE_EVERY))
}

/// The most white space read in one run (a separator is two: before and after its comma): the
/// bytes between two records of a chunk are kept with it, so more would be held (a file made
/// mostly of it is read as a stream, in bounded memory). White space inside a record is held
/// with the record, as its bytes are.
const MAX_GAP: usize = 64 * 1024;

/// How much is read at a time (and the least the buffer grows by).
const BLOCK: usize = 256 * 1024;

/// The elements of a payments list, read from a JSON file: the envelope's `data` or a bare
/// list.
#[derive(Debug)]
pub(crate) struct Split<R> {
    reader: R,
    buf: Vec<u8>,
    /// The first byte of `buf` not yet handed out.
    pos: usize,
    eof: bool,
    /// The file up to its list's `[`.
    skeleton: Vec<u8>,
    /// `data` for the envelope, empty for a bare list.
    pub(crate) data_path: &'static str,
    /// A record has been handed out.
    started: bool,
    /// Still reading the skeleton's beginning: keep every byte read.
    keep_all: bool,
    /// The deepest a record may nest: as deep as serde_json's recursion limit lets it in the
    /// file (where the list and the envelope count too), so that a record too deep for the
    /// stream is not read by the split either.
    pub(crate) max_depth: usize,
    /// At the next record's first byte: the separator before it is read.
    at_record: bool,
    /// Where the chunk being read starts in `buf` (kept until [`Split::start_chunk`] moves it).
    chunk: usize,
}

#[cfg(test)]
thread_local! {
    /// How many bytes of records this thread's splits scanned.
    pub(crate) static SCANNED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// serde_json's recursion limit: values nest at most this deep.
const SERDE_MAX_DEPTH: usize = 127;

impl<R: Read> Split<R> {
    /// Reads up to the first record: the `[` of a bare list, or the `[` that is the value of
    /// the top object's `data` key.
    pub(crate) fn new(reader: R) -> Result<Split<R>, NotSplit> {
        let mut s = Split {
            reader,
            buf: Vec::with_capacity(BLOCK),
            pos: 0,
            eof: false,
            skeleton: Vec::new(),
            data_path: "",
            started: false,
            keep_all: true,
            max_depth: SERDE_MAX_DEPTH - 1,
            at_record: false,
            chunk: 0,
        };
        s.whitespace()?;
        match s.byte()? {
            b'[' => {}
            b'{' => {
                s.data_path = "data";
                s.max_depth = SERDE_MAX_DEPTH - 2;
                loop {
                    s.whitespace()?;
                    let key = s.value()?;
                    if key.contains(&b'\\') || key.first() != Some(&b'"') {
                        return Err(NotSplit);
                    }
                    let data = key == b"\"data\"";
                    s.whitespace()?;
                    s.expect(b':')?;
                    s.whitespace()?;
                    if data {
                        s.expect(b'[')?;
                        break;
                    }
                    // A member before the list is checked now, not after the whole list.
                    let value = s.value()?;
                    if serde_json::from_slice::<serde::de::IgnoredAny>(value).is_err() {
                        return Err(NotSplit);
                    }
                    s.whitespace()?;
                    s.expect(b',')?;
                }
            }
            _ => return Err(NotSplit),
        }
        let taken = s.buf.drain(..s.pos);
        s.skeleton.extend(taken);
        s.pos = 0;
        s.keep_all = false;
        Ok(s)
    }

    /// Moves to the next record's first byte, past the separator before it: false at the
    /// list's end.
    pub(crate) fn at_next(&mut self) -> Result<bool, NotSplit> {
        if self.at_record {
            return Ok(true);
        }
        self.whitespace()?;
        if self.peek()? == Some(b']') {
            return Ok(false);
        }
        if self.started {
            self.expect(b',')?;
            self.whitespace()?;
        }
        self.at_record = true;
        Ok(true)
    }

    /// The next element of the list, `None` after the last.
    pub(crate) fn next_record(&mut self) -> Result<Option<&[u8]>, NotSplit> {
        if !self.at_next()? {
            return Ok(None);
        }
        self.at_record = false;
        self.started = true;
        let (start, end, depth) = self.span()?;
        #[cfg(test)]
        SCANNED.set(SCANNED.get() + (end - start));
        if depth > self.max_depth {
            return Err(NotSplit);
        }
        Ok(self.buf.get(start..end))
    }

    /// A chunk of records starts here: [`Split::chunk`] holds the file from here on.
    pub(crate) fn start_chunk(&mut self) {
        self.chunk = self.pos;
    }

    /// The file from [`Split::start_chunk`] to the end of the last record read.
    pub(crate) fn chunk(&self) -> &[u8] {
        self.buf.get(self.chunk..self.pos).unwrap_or_default()
    }

    /// At a record's start ([`Split::at_next`]), the next `len` bytes of the file, if it has
    /// that many; they are not scanned: [`Split::skip`] takes them as records a version read.
    pub(crate) fn ahead(&mut self, len: usize) -> Result<Option<&[u8]>, NotSplit> {
        if !self.at_record || !self.fill(len)? {
            return Ok(None);
        }
        Ok(self.buf.get(self.pos..self.pos + len))
    }

    /// Moves past the `len` bytes [`Split::ahead`] gave: records that end there, whole. The
    /// next chunk starts after them.
    pub(crate) fn skip(&mut self, len: usize) {
        self.pos = (self.pos + len).min(self.buf.len());
        self.chunk = self.pos;
        self.at_record = false;
        self.started = true;
    }

    /// The file with its list emptied: what was before the first record and what follows the
    /// last, read to the end. Called once [`Split::next_record`] gave `None`.
    pub(crate) fn skeleton(mut self) -> Result<Vec<u8>, NotSplit> {
        self.skeleton
            .extend_from_slice(self.buf.get(self.pos..).unwrap_or_default());
        self.reader.read_to_end(&mut self.skeleton)?;
        Ok(self.skeleton)
    }

    /// Makes at least `more` bytes past `pos` available unless the file ends first; keeps
    /// `buf[pos..]`, drops what was handed out. False at the end of the file.
    fn fill(&mut self, more: usize) -> Result<bool, NotSplit> {
        let have = self.buf.len() - self.pos;
        if have >= more {
            return Ok(true);
        }
        if self.eof {
            return Ok(false);
        }
        // What was handed out goes, but for the chunk being read; once it is half the buffer,
        // so that the bytes kept move a bounded number of times.
        let done = self.chunk.min(self.pos);
        if done > 0 && done >= self.buf.len() / 2 && !self.keep_all {
            self.buf.drain(..done);
            self.pos -= done;
            self.chunk -= done;
        }
        let want = (more - have).max(BLOCK);
        let len = self.buf.len();
        self.buf.resize(len + want, 0);
        let mut got = 0;
        while got < want {
            match self.reader.read(&mut self.buf[len + got..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.buf.truncate(len + got);
        Ok(self.buf.len() - self.pos >= more)
    }

    fn peek(&mut self) -> Result<Option<u8>, NotSplit> {
        self.fill(1)?;
        Ok(self.buf.get(self.pos).copied())
    }

    fn byte(&mut self) -> Result<u8, NotSplit> {
        let b = self.peek()?.ok_or(NotSplit)?;
        self.pos += 1;
        Ok(b)
    }

    fn expect(&mut self, want: u8) -> Result<(), NotSplit> {
        if self.byte()? == want {
            Ok(())
        } else {
            Err(NotSplit)
        }
    }

    /// Skips white space, at most [`MAX_GAP`] bytes of it.
    fn whitespace(&mut self) -> Result<(), NotSplit> {
        let mut gap = 0;
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek()? {
            self.pos += 1;
            gap += 1;
            if gap > MAX_GAP {
                return Err(NotSplit);
            }
        }
        Ok(())
    }

    /// Skips one value; its bytes.
    fn value(&mut self) -> Result<&[u8], NotSplit> {
        let (start, end, _) = self.span()?;
        Ok(self.buf.get(start..end).unwrap_or_default())
    }

    /// Finds the end of the value at `pos` (reading more as needed) and moves past it: where
    /// it lies in `buf`, and how deep it nests.
    fn span(&mut self) -> Result<(usize, usize, usize), NotSplit> {
        loop {
            if let Some((len, depth)) =
                value_len(self.buf.get(self.pos..).unwrap_or_default(), self.eof)
            {
                let start = self.pos;
                self.pos += len;
                return Ok((start, self.pos, depth));
            }
            // The value goes on past what is read: read as much again (so a long value is
            // scanned a bounded number of times), or give up at the end of the file.
            let have = self.buf.len() - self.pos;
            if !self.fill(have + have.max(BLOCK))? && self.eof {
                let complete = value_len(self.buf.get(self.pos..).unwrap_or_default(), true);
                if complete.is_none() {
                    return Err(NotSplit);
                }
            }
        }
    }
}

/// The length of the JSON value at the start of `bytes` and how deep it nests (0 for a
/// scalar), tracking only strings and nesting (exact for valid JSON); `None` when it does not
/// end within `bytes`. A scalar ends at the first byte that cannot be part of it, or at the end
/// when `eof`.
fn value_len(bytes: &[u8], eof: bool) -> Option<(usize, usize)> {
    match *bytes.first()? {
        b'{' | b'[' => {
            let (mut depth, mut deepest) = (0usize, 0usize);
            let mut i = 0;
            while let Some(&b) = bytes.get(i) {
                match b {
                    b'"' => i += string_len(bytes.get(i..)?)?,
                    b'{' | b'[' => {
                        depth += 1;
                        deepest = deepest.max(depth);
                        i += 1;
                    }
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        i += 1;
                        if depth == 0 {
                            return Some((i, deepest));
                        }
                    }
                    _ => i += 1,
                }
            }
            None
        }
        b'"' => Some((string_len(bytes)?, 0)),
        _ => match bytes
            .iter()
            .position(|b| matches!(b, b',' | b']' | b'}' | b' ' | b'\n' | b'\r' | b'\t'))
        {
            Some(0) => Some((1, 0)), // a stray delimiter: the parse of this "value" fails
            Some(n) => Some((n, 0)),
            None => eof.then_some((bytes.len(), 0)),
        },
    }
}

/// The length of the string at the start of `bytes` (its quotes included).
fn string_len(bytes: &[u8]) -> Option<usize> {
    let mut i = 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
        if bytes.get(i) == Some(&b'"') {
            return Some(i + 1);
        }
        i += 2; // a backslash and the byte it escapes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The records and skeleton of `text`, read `chunk` bytes at a time, when every part
    /// parses (as the caller requires).
    fn split(text: &str, chunk: usize) -> Result<(Vec<String>, String), NotSplit> {
        struct Dribble<'a>(&'a [u8], usize);
        impl Read for Dribble<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let parses = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).is_ok();
        let mut s = Split::new(Dribble(text.as_bytes(), chunk))?;
        let mut records = Vec::new();
        while let Some(r) = s.next_record()? {
            if !parses(r) {
                return Err(NotSplit);
            }
            records.push(String::from_utf8_lossy(r).into_owned());
        }
        let skeleton = s.skeleton()?;
        if !parses(&skeleton) {
            return Err(NotSplit);
        }
        Ok((records, String::from_utf8_lossy(&skeleton).into_owned()))
    }

    #[test]
    fn records_and_the_skeleton_are_found_in_any_shape_and_any_block_size() {
        for chunk in [1, 2, 7, 4096] {
            let got = |t| split(t, chunk);
            assert_eq!(
                got(
                    r#" {"source": {"a": [1, "]"]}, "data" : [ {"a": "x\"}"}, 12.50 ,"s",[1,[2]], null ] , "count": 2 } "#
                ),
                Ok((
                    vec![
                        r#"{"a": "x\"}"}"#.into(),
                        "12.50".into(),
                        r#""s""#.into(),
                        "[1,[2]]".into(),
                        "null".into()
                    ],
                    r#" {"source": {"a": [1, "]"]}, "data" : [] , "count": 2 } "#.into()
                )),
                "{chunk}"
            );
            assert_eq!(got("[]"), Ok((vec![], "[]".into())));
            assert_eq!(got("\n[ {} ]\n"), Ok((vec!["{}".into()], "\n[]\n".into())));
            assert_eq!(
                got(r#"{"data":[{"a":"\\","b":"\\\""}]}"#),
                Ok((
                    vec![r#"{"a":"\\","b":"\\\""}"#.into()],
                    r#"{"data":[]}"#.into()
                ))
            );
            // A second list is the skeleton's (the caller's parse reports it).
            assert_eq!(
                got(r#"{"data":[1],"data":[2]}"#),
                Ok((vec!["1".into()], r#"{"data":[],"data":[2]}"#.into()))
            );
        }
    }

    #[test]
    fn records_skipped_unscanned_are_passed_whole_and_not_kept() {
        let record = |i: usize| format!("{{\"n\": {i}, \"pad\": \"{}\"}}", "x".repeat(90));
        let records: Vec<String> = (0..20_000).map(record).collect();
        let text = format!("{{\"data\": [\n  {}\n]}}", records.join(",\n  "));
        let mut s = Split::new(text.as_bytes()).expect("splits");
        let mut i = 0;
        while i < records.len() {
            // Every tenth record is read; the nine after it are taken as a chunk read before.
            let got = s.next_record().expect("splits").expect("a record");
            assert_eq!(got, records[i].as_bytes());
            let nine = records[i + 1..i + 10].join(",\n  ");
            assert!(s.at_next().expect("splits"));
            s.start_chunk();
            let ahead = s
                .ahead(nine.len())
                .expect("splits")
                .expect("that many bytes");
            assert_eq!(ahead, nine.as_bytes());
            s.skip(nine.len());
            i += 10;
            // What was handed out or skipped is not kept.
            assert!(s.buf.len() <= 3 * BLOCK, "{} bytes buffered", s.buf.len());
        }
        assert_eq!(s.next_record(), Ok(None));
        assert_eq!(s.skeleton().as_deref(), Ok(&b"{\"data\": []}"[..]));
    }

    #[test]
    fn a_record_too_deep_for_the_stream_is_not_split_either() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        // In the envelope, the object and the list leave a record 125 levels; a bare list 126.
        for (text, ok) in [
            (format!("{{\"data\":[{}]}}", nested(125)), true),
            (format!("{{\"data\":[{}]}}", nested(126)), false),
            (format!("[{}]", nested(126)), true),
            (format!("[{}]", nested(127)), false),
        ] {
            let streamed = serde_json::from_str::<serde_json::Value>(&text).is_ok();
            assert_eq!(streamed, ok, "serde_json's own limit");
            assert_eq!(split(&text, 4096).is_ok(), ok);
        }
    }

    #[test]
    fn shapes_it_does_not_follow_and_broken_files_are_not_split() {
        for text in [
            "",
            "  ",
            r#""x""#,
            "12",
            r#"{"count": 1}"#,
            r#"{"d\u0061ta": []}"#,
            r#"{"data": {"a": 1}}"#,
            r#"{count: 1, "data": []}"#,
            "[1,]",
            "[1 2]",
            "[{\"a\": 1}",
            "[{\"a\": \"1}]",
            "[{\"a\": 1]]",
            "[,1]",
            "[1]]",
            "[1] x",
            "[\"\\\"]",
            r#"{"source": tru, "data": [1]}"#,
            &format!("[1,{}2]", " ".repeat(MAX_GAP + 1)),
        ] {
            for chunk in [1, 3, 4096] {
                assert!(split(text, chunk).is_err(), "{text}");
            }
        }
    }
}
