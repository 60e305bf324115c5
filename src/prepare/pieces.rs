//! Large bodies in pieces that versions share.
//!
//! The payments body of a large event is a hundred megabytes, and a reload holds two versions
//! at once. When a file changes in a few records, most of its body is the same bytes as before:
//! written in [`Piece`]s cut where the content says (after a record whose hash ends in enough
//! zero bits, so the cuts after an inserted record fall back into line at the next cut the
//! content decides), each piece is looked up in the
//! catalog's [`Pieces`] by its hash and bytes, and a piece the previous version already holds is
//! shared rather than made again, its compressed forms with it. A reload of a file that changed
//! in one record costs one new piece, not a second body, and compresses one piece, not the body.
//!
//! A piece's compressed forms join into one valid stream without compressing again: gzip from
//! raw deflate pieces, each ended by a sync flush (byte-aligned, not final), between a gzip
//! header and a final empty block with the combined CRC-32 (as pigz does); brotli from pieces
//! encoded as bare, byte-aligned meta-blocks that use no dictionary and no distance from before
//! them (the brotli crate's `catable` and `bare_stream`), between a stream header and a final
//! empty meta-block.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use bytes::Bytes;

/// Bytes to send: one buffer, or pieces sent one after the other.
#[derive(Debug, Clone)]
pub(crate) enum Payload {
    One(Bytes),
    Pieces(Arc<[Bytes]>, u64),
}

impl Default for Payload {
    fn default() -> Self {
        Payload::One(Bytes::new())
    }
}

impl From<Bytes> for Payload {
    fn from(bytes: Bytes) -> Self {
        Payload::One(bytes)
    }
}

impl Payload {
    /// From pieces (empty ones dropped); one piece is sent as one buffer.
    pub(crate) fn pieces(pieces: impl IntoIterator<Item = Bytes>) -> Payload {
        let mut all: Vec<Bytes> = pieces.into_iter().filter(|p| !p.is_empty()).collect();
        match all.len() {
            0 => Payload::default(),
            1 => Payload::One(all.pop().unwrap_or_default()),
            _ => {
                let len = all.iter().map(|p| p.len() as u64).sum();
                Payload::Pieces(all.into(), len)
            }
        }
    }

    pub(crate) fn len(&self) -> u64 {
        match self {
            Payload::One(b) => b.len() as u64,
            Payload::Pieces(_, len) => *len,
        }
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffers in order.
    pub(crate) fn parts(&self) -> &[Bytes] {
        match self {
            Payload::One(b) => std::slice::from_ref(b),
            Payload::Pieces(p, _) => p,
        }
    }

    /// Part `i` to send (taken, when the payload is one buffer); none past the last, and no
    /// empty part.
    pub(crate) fn take_part(&mut self, i: usize) -> Option<Bytes> {
        let part = match self {
            Payload::One(b) if i == 0 => std::mem::take(b),
            Payload::One(_) => return None,
            Payload::Pieces(parts, _) => parts.get(i)?.clone(),
        };
        (!part.is_empty()).then_some(part)
    }

    /// The first `n` bytes (all of them if fewer), without copying.
    pub(crate) fn prefix(&self, n: u64) -> Payload {
        let mut left = n;
        let mut kept = Vec::new();
        for part in self.parts() {
            if left == 0 {
                break;
            }
            let take = (part.len() as u64).min(left) as usize;
            kept.push(part.slice(..take));
            left -= take as u64;
        }
        Payload::pieces(kept)
    }

    /// The bytes in one buffer (a copy when in pieces).
    pub(crate) fn to_bytes(&self) -> Bytes {
        match self {
            Payload::One(b) => b.clone(),
            Payload::Pieces(parts, len) => {
                let mut all = Vec::with_capacity(*len as usize);
                for p in parts.iter() {
                    all.extend_from_slice(p);
                }
                Bytes::from(all)
            }
        }
    }
}

/// A piece of a body, shared by every version that holds the same bytes, with its compressed
/// forms once made.
pub(crate) struct Piece {
    pub(crate) bytes: Bytes,
    /// Where each record of a list lies in `bytes`, with its key (a payment and its reference):
    /// made with the bytes, so a version that takes the piece takes them too.
    pub(crate) rows: Box<[Row]>,
    /// Each row's key's first 16 bytes ([`key_prefix`]): what a sort by key compares first,
    /// kept so that a version sorts its rows without reading every key from the bytes (a cache
    /// miss a row, an eighth of a reload's CPU, profiled).
    pub(crate) prefixes: Box<[u128]>,
    packed: OnceLock<Packed>,
}

/// The first 16 bytes of `key`, zero-padded, as a big-endian integer: keys compare as their
/// prefixes do, unless the prefixes are equal.
fn key_prefix(key: &[u8]) -> u128 {
    let mut prefix = [0u8; 16];
    let n = key.len().min(16);
    prefix[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(prefix)
}

/// Where bytes lie in a piece: from, to.
pub(crate) type Span = (u32, u32);

/// A record in a piece: its bytes, and its key's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) record: Span,
    pub(crate) key: Span,
}

/// Its size, never its bytes.
impl std::fmt::Debug for Piece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Piece({} bytes)", self.bytes.len())
    }
}

/// A piece compressed: raw deflate ending in a sync flush, with the CRC-32 of its bytes, and
/// bare brotli meta-blocks.
struct Packed {
    deflate: Bytes,
    crc: crc32fast::Hasher,
    br: Bytes,
}

/// The gzip level and brotli quality of pieces (those of every large body).
const GZIP_LEVEL: u32 = 6;
const BR_QUALITY: u32 = 5;
/// The brotli window of pieces, and of the stream they join into: 1 MiB.
const BR_LGWIN: u32 = 20;

impl Piece {
    fn new(bytes: Bytes, rows: &[Row]) -> Piece {
        let key = |row: &Row| bytes.get(row.key.0 as usize..row.key.1 as usize);
        Piece {
            prefixes: rows
                .iter()
                .map(|row| key_prefix(key(row).unwrap_or_default()))
                .collect(),
            rows: rows.into(),
            bytes,
            packed: OnceLock::new(),
        }
    }

    /// Compresses the piece if it is not yet; `None` only if an encoder failed.
    fn packed(&self) -> Option<&Packed> {
        if let Some(p) = self.packed.get() {
            return Some(p);
        }
        let mut crc = crc32fast::Hasher::new();
        crc.update(&self.bytes);
        let made = Packed {
            deflate: deflate_synced(&self.bytes, GZIP_LEVEL)?,
            crc,
            br: brotli_bare(&self.bytes)?,
        };
        // Another thread may have made them meanwhile: the same bytes either way.
        let _ = self.packed.set(made);
        self.packed.get()
    }
}

/// Raw deflate of `data`, ended by a sync flush: byte-aligned, no final block.
fn deflate_synced(data: &[u8], level: u32) -> Option<Bytes> {
    use flate2::{Compress, Compression, FlushCompress};
    let mut c = Compress::new(Compression::new(level), false);
    let mut out = Vec::with_capacity(data.len() / 4 + 64);
    loop {
        let read = usize::try_from(c.total_in()).ok()?;
        c.compress_vec(data.get(read..)?, &mut out, FlushCompress::Sync)
            .ok()?;
        // The flush is complete once all input is read and the output was not filled.
        if c.total_in() == data.len() as u64 && out.len() < out.capacity() {
            break;
        }
        out.reserve(out.capacity().max(4096));
    }
    out.shrink_to_fit();
    Some(Bytes::from(out))
}

/// `data` as brotli meta-blocks that stand alone: no stream header, no last block, no
/// dictionary, no distance reaching before them, ending on a byte boundary.
fn brotli_bare(data: &[u8]) -> Option<Bytes> {
    let params = brotli::enc::BrotliEncoderParams {
        quality: BR_QUALITY as i32,
        lgwin: BR_LGWIN as i32,
        catable: true,
        bare_stream: true,
        byte_align: true,
        appendable: true,
        use_dictionary: false,
        ..Default::default()
    };
    let mut out = Vec::with_capacity(data.len() / 4 + 64);
    brotli::BrotliCompress(&mut &data[..], &mut out, &params).ok()?;
    out.shrink_to_fit();
    Some(Bytes::from(out))
}

/// The gzip header: deflate, no name, no time, unknown system.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
/// A final, empty deflate block (fixed codes, end of block).
const DEFLATE_END: [u8; 2] = [0x03, 0x00];
/// A brotli stream's last meta-block, empty (ISLAST, ISLASTEMPTY).
const BR_END: [u8; 1] = [0x03];

/// The brotli stream header for the pieces' window followed by an empty metadata meta-block
/// that pads it to a byte boundary (RFC 7932 §9.1, §9.2): WBITS (a 1, then lgwin - 17 in three
/// bits, for 18 to 24), ISLAST 0, MNIBBLES 3 (metadata), reserved 0, MSKIPBYTES 0, zeros.
const BR_HEADER: [u8; 2] = [(1 | ((BR_LGWIN - 17) << 1) | (0b11 << 5)) as u8, 0];

/// The gzip and brotli streams of a body made of `pieces`, from their compressed forms (made
/// now where missing), or `None` if `keep` turned false between two pieces.
pub(crate) fn compressed(
    pieces: &[Arc<Piece>],
    keep: &dyn Fn() -> bool,
) -> Option<(Payload, Payload)> {
    let mut crc = crc32fast::Hasher::new();
    let mut gzip = vec![Bytes::from_static(&GZIP_HEADER)];
    let mut br = vec![Bytes::from_static(&BR_HEADER)];
    let mut len: u64 = 0;
    for piece in pieces {
        if piece.packed.get().is_none() && !keep() {
            return None;
        }
        let packed = piece.packed()?;
        crc.combine(&packed.crc);
        len += piece.bytes.len() as u64;
        gzip.push(packed.deflate.clone());
        br.push(packed.br.clone());
    }
    let mut trailer = DEFLATE_END.to_vec();
    trailer.extend_from_slice(&crc.finalize().to_le_bytes());
    // ISIZE: the length modulo 2^32.
    trailer.extend_from_slice(&(len as u32).to_le_bytes());
    gzip.push(Bytes::from(trailer));
    br.push(Bytes::from_static(&BR_END));
    Some((Payload::pieces(gzip), Payload::pieces(br)))
}

/// The pieces alive in a catalog, by the hash of their bytes, and by the hash of the input they
/// were made from: a piece made again with the same bytes is the one already held, and input
/// seen before need not be read again. Holds no piece alive itself.
#[derive(Debug, Clone)]
pub(crate) struct Pieces(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    /// The seed of the input hashes, drawn per catalog: the bytes that made a piece are gone,
    /// so a hash match is all that says a chunk is the same, and a bundle's author must not
    /// be able to make a chunk that matches another bundle's.
    seed: u64,
    held: Mutex<Held>,
}

impl Default for Pieces {
    fn default() -> Self {
        use std::hash::BuildHasher;
        // The standard library's randomly keyed hasher, as a source of one random number.
        let seed = std::collections::hash_map::RandomState::new().hash_one(0u8);
        Pieces(Arc::new(Shared {
            seed,
            held: Mutex::default(),
        }))
    }
}

#[derive(Debug, Default)]
struct Held {
    by_bytes: HashMap<u64, Weak<Piece>>,
    by_input: HashMap<u128, Input>,
}

/// What an input made.
#[derive(Debug, Default)]
struct Input {
    piece: Weak<Piece>,
    /// The input that followed it when it was last read: its key and length.
    next: Option<(u128, usize)>,
}

/// The entry for `key`, first clearing the entries of dropped pieces whenever the map reaches a
/// power of two.
fn remember<K: std::hash::Hash + Eq, V: Default>(
    map: &mut HashMap<K, V>,
    key: K,
    live: impl Fn(&V) -> bool,
) -> &mut V {
    if map.len() >= 64 && map.len().is_power_of_two() {
        map.retain(|_, v| live(v));
    }
    map.entry(key).or_default()
}

impl Pieces {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.0.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The key of input `bytes` for [`Pieces::made_from`] and [`Pieces::note_input`]: the same
    /// bytes in another `context` (what else decides what they make) are keyed apart.
    pub(crate) fn input_key(&self, bytes: &[u8], context: u64) -> u128 {
        xxhash_rust::xxh3::xxh3_128_with_seed(bytes, self.0.seed ^ context)
    }

    /// The piece holding `bytes` (with `rows`): the live one with the same bytes, else a new
    /// one (copied from `bytes`, which the caller reuses).
    pub(crate) fn intern(&self, bytes: &[u8], rows: &[Row]) -> Arc<Piece> {
        let hash = xxhash_rust::xxh3::xxh3_64(bytes);
        let mut held = self.held();
        let live = held.by_bytes.get(&hash).and_then(Weak::upgrade);
        // The bytes are compared: of two contents with one hash, the newer takes the entry.
        if let Some(live) = live.filter(|p| p.bytes == bytes) {
            // Pieces start at a record and records are written one way: the same rows.
            debug_assert_eq!(live.rows[..], rows[..]);
            return live;
        }
        let piece = Arc::new(Piece::new(crate::memfile::copy(bytes), rows));
        *remember(&mut held.by_bytes, hash, |w| w.strong_count() > 0) = Arc::downgrade(&piece);
        piece
    }

    /// The live piece made from the input whose key ([`Pieces::input_key`]) is `input`.
    pub(crate) fn made_from(&self, input: u128) -> Option<Arc<Piece>> {
        self.held()
            .by_input
            .get(&input)
            .and_then(|i| i.piece.upgrade())
    }

    /// Notes that `piece` is what the input keyed `input` makes.
    pub(crate) fn note_input(&self, input: u128, piece: &Arc<Piece>) {
        let mut held = self.held();
        let entry = remember(&mut held.by_input, input, |i| i.piece.strong_count() > 0);
        entry.piece = Arc::downgrade(piece);
    }

    /// Notes that the input keyed `next`, of `len` bytes, followed the input keyed `input`.
    pub(crate) fn note_next(&self, input: u128, next: u128, len: usize) {
        if let Some(entry) = self.held().by_input.get_mut(&input) {
            entry.next = Some((next, len));
        }
    }

    /// The input that followed the input keyed `input` when it was last read
    /// ([`Pieces::note_next`]): its key and length.
    pub(crate) fn next_after(&self, input: u128) -> Option<(u128, usize)> {
        self.held().by_input.get(&input).and_then(|i| i.next)
    }

    /// How many pieces are alive.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.held()
            .by_bytes
            .values()
            .filter(|w| w.strong_count() > 0)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn text(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                b"{}\"abcdefgh:,0123"[(x >> 60) as usize]
            })
            .collect()
    }

    fn gunzip(p: &Payload) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&p.to_bytes()[..])
            .read_to_end(&mut out)
            .expect("gzip");
        out
    }

    fn unbrotli(p: &Payload) -> Vec<u8> {
        let mut out = Vec::new();
        brotli::Decompressor::new(&p.to_bytes()[..], 4096)
            .read_to_end(&mut out)
            .expect("brotli");
        out
    }

    #[test]
    fn pieces_compressed_apart_join_into_streams_of_the_whole() {
        let pieces = Pieces::default();
        // Sizes around the window and the flush boundaries, and repeated content across pieces.
        let parts: Vec<Vec<u8>> = vec![
            text(1, 1),
            text(70_000, 2),
            text(300_000, 3),
            text(70_000, 2),
            text(1 << 20, 4),
            text(17, 5),
        ];
        let held: Vec<Arc<Piece>> = parts.iter().map(|p| pieces.intern(p, &[])).collect();
        let whole: Vec<u8> = parts.concat();

        let (gz, br) = compressed(&held, &|| true).expect("made");

        assert_eq!(gunzip(&gz), whole);
        assert_eq!(unbrotli(&br), whole);
        assert!(gz.len() < whole.len() as u64 && br.len() < whole.len() as u64);
    }

    #[test]
    fn one_piece_and_no_piece_are_valid_streams_too() {
        for parts in [vec![], vec![text(5000, 9)]] {
            let pieces = Pieces::default();
            let held: Vec<Arc<Piece>> = parts.iter().map(|p| pieces.intern(p, &[])).collect();
            let (gz, br) = compressed(&held, &|| true).expect("made");
            assert_eq!(gunzip(&gz), parts.concat());
            assert_eq!(unbrotli(&br), parts.concat());
        }
    }

    #[test]
    fn the_same_bytes_are_one_piece_while_it_lives() {
        let pieces = Pieces::default();
        let a = pieces.intern(b"same bytes", &[]);
        let b = pieces.intern(b"same bytes", &[]);
        let c = pieces.intern(b"other bytes", &[]);

        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(pieces.live(), 2);
        drop((a, b));
        assert_eq!(pieces.live(), 1);
        // Made again once dropped: nothing keeps a piece alive but its holders.
        let again = pieces.intern(b"same bytes", &[]);
        assert_eq!(&again.bytes[..], b"same bytes");
    }

    #[test]
    fn a_prefix_cuts_across_pieces_without_copying() {
        let p = Payload::pieces([
            Bytes::from_static(b"abc"),
            Bytes::new(),
            Bytes::from_static(b"defg"),
        ]);
        assert_eq!(p.len(), 7);
        assert_eq!(p.parts().len(), 2);
        assert_eq!(&p.prefix(5).to_bytes()[..], b"abcde");
        assert_eq!(&p.prefix(3).to_bytes()[..], b"abc");
        assert_eq!(&p.prefix(99).to_bytes()[..], b"abcdefg");
        assert!(p.prefix(0).is_empty());
    }
}
