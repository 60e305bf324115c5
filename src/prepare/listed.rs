//! A list whose records are also answered one by one (`GET /attendees/{id}`) and by page
//! (`?page=N&per_page=M`): the whole body is prepared once; a record's bytes are a range of it,
//! found once by reading the prepared body back (serde_json's `RawValue` borrows each record's
//! exact text), so one record or one page is a copy of prepared bytes into its envelope, never a
//! serialisation.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::Body;

/// A list body with the place of each record in it.
pub(crate) struct Listed {
    pub(crate) body: Body,
    /// The body's bytes (the same buffer), which records and pages are cut from.
    bytes: Bytes,
    /// Each record's bytes in `body`, in list order.
    ranges: Vec<Range<usize>>,
    /// Each record's id, in list order.
    ids: Vec<i64>,
    /// Record index by id.
    by_id: HashMap<i64, usize>,
    /// Whether the envelope carries `count` (`{"data": [...], "count": n}`) or not
    /// (`{"data": [...]}`, the activities and speakers).
    counted: bool,
    /// Whether [`Listed::compress_soon`] started.
    compressing: AtomicBool,
}

/// Its size, never its records.
impl std::fmt::Debug for Listed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listed")
            .field("records", &self.len())
            .field("body", &self.body)
            .finish()
    }
}

/// The envelope as prepared: `data` first, then `count` if the body has one.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    data: Vec<&'a RawValue>,
    count: Option<serde::de::IgnoredAny>,
}

impl Listed {
    /// Finds each record of a prepared list body; `ids` are the records' ids in list order.
    pub(crate) fn new(bytes: Bytes, ids: Vec<i64>) -> serde_json::Result<Listed> {
        let envelope: Envelope<'_> = serde_json::from_slice(&bytes)?;
        if envelope.data.len() != ids.len() {
            return Err(serde::de::Error::custom(format!(
                "{} records served, {} ids",
                envelope.data.len(),
                ids.len()
            )));
        }
        let base = bytes.as_ptr() as usize;
        let ranges = envelope
            .data
            .iter()
            .map(|raw| {
                let start = raw.get().as_ptr() as usize - base;
                start..start + raw.get().len()
            })
            .collect();
        let counted = envelope.count.is_some();
        Ok(Listed::with(bytes, ranges, ids, counted))
    }

    fn with(bytes: Bytes, ranges: Vec<Range<usize>>, ids: Vec<i64>, counted: bool) -> Listed {
        // The first record of an id answers for it (a bundle with a repeated id does not load).
        let mut by_id = HashMap::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            by_id.entry(*id).or_insert(i);
        }
        Listed {
            body: Body::new(bytes.clone()),
            bytes,
            ranges,
            ids,
            by_id,
            counted,
            compressing: AtomicBool::new(false),
        }
    }

    /// Starts compressing a list made per change (the attendees with the writes) on a blocking
    /// thread, once; identity is served meanwhile. It gives up as soon as nothing else holds the
    /// list (a later write replaced it). Needs a tokio runtime; without one it does nothing.
    pub(crate) fn compress_soon(self: &Arc<Self>) {
        if self.body.is_small() || self.compressing.swap(true, Ordering::Relaxed) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let listed = Arc::clone(self);
        runtime.spawn_blocking(move || {
            listed
                .body
                .compress_while(&|| Arc::strong_count(&listed) > 1);
        });
    }

    /// A list made of `records` (id and bytes each), in the envelope with `count` or without.
    pub(crate) fn assembled(records: Vec<(i64, Bytes)>, counted: bool) -> Listed {
        let mut ranges = Vec::with_capacity(records.len());
        let mut ids = Vec::with_capacity(records.len());
        let mut offset = b"{\"data\":[".len();
        for (id, r) in &records {
            ranges.push(offset..offset + r.len());
            ids.push(*id);
            offset += r.len() + 1;
        }
        let body = assemble(records.iter().map(|(_, r)| &r[..]), records.len(), counted);
        Listed::with(body, ranges, ids, counted)
    }

    /// The index of the record with `id`.
    pub(crate) fn index_of(&self, id: i64) -> Option<usize> {
        self.by_id.get(&id).copied()
    }

    /// The id and bytes of record `i`.
    pub(crate) fn record(&self, i: usize) -> (i64, Bytes) {
        let range = self.ranges.get(i).cloned().unwrap_or(0..0);
        (
            self.ids.get(i).copied().unwrap_or_default(),
            self.bytes.slice(range),
        )
    }

    /// How many records the list has.
    pub(crate) fn len(&self) -> usize {
        self.ranges.len()
    }

    /// The record of the id written in `id` (a path segment), in the list's envelope.
    pub(crate) fn one(&self, id: &str) -> Option<Bytes> {
        let index = *self.by_id.get(&id.parse::<i64>().ok()?)?;
        Some(self.envelope(index..index + 1))
    }

    /// Page `page` (from 1) of `per_page` records, in the list's envelope; past the end, none.
    /// `count`, when the envelope has one, is the number of records in the page (as everywhere
    /// in the API, the length of `data`).
    pub(crate) fn page(&self, page: usize, per_page: usize) -> Bytes {
        let start = page
            .saturating_sub(1)
            .saturating_mul(per_page)
            .min(self.len());
        let end = start.saturating_add(per_page).min(self.len());
        self.envelope(start..end)
    }

    /// The records `which` (contiguous in the body) in the envelope.
    fn envelope(&self, which: Range<usize>) -> Bytes {
        let bytes = match (self.ranges.get(which.start), which.end.checked_sub(1)) {
            (Some(first), Some(last)) if which.start < which.end => {
                let last = &self.ranges[last];
                &self.bytes[first.start..last.end]
            }
            _ => &[][..],
        };
        let pieces = (!bytes.is_empty()).then_some(bytes);
        assemble(pieces.into_iter(), which.len(), self.counted)
    }
}

/// `{"data":[` the `records` (each one or more records, comma-joined already; none empty)
/// `],"count":n}`, or without `count`.
pub(crate) fn assemble<'a>(
    records: impl Iterator<Item = &'a [u8]> + Clone,
    n: usize,
    counted: bool,
) -> Bytes {
    let len: usize = records.clone().map(|r| r.len() + 1).sum();
    let mut out = BytesMut::with_capacity(len + 32);
    out.put_slice(b"{\"data\":[");
    for (i, r) in records.enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        out.put_slice(r);
    }
    out.put_u8(b']');
    if counted {
        out.put_slice(b",\"count\":");
        out.put_slice(n.to_string().as_bytes());
    }
    out.put_u8(b'}');
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn listed(v: Value, ids: Vec<i64>) -> Listed {
        Listed::new(Bytes::from(serde_json::to_vec(&v).expect("json")), ids).expect("a list body")
    }

    fn parsed(b: Bytes) -> Value {
        serde_json::from_slice(&b).expect("json")
    }

    #[test]
    fn one_record_and_pages_are_cut_from_the_prepared_body() {
        let records: Vec<Value> = (1..=5)
            .map(|i| json!({"id": i * 10, "name": format!("n{i}"), "nested": {"a": [i, "]}"]}}))
            .collect();
        let l = listed(
            json!({"data": records, "count": 5, "extra": 1}),
            vec![10, 20, 30, 40, 50],
        );

        assert_eq!(
            parsed(l.one("30").expect("found")),
            json!({"data": [records[2]], "count": 1})
        );
        assert_eq!(l.one("31"), None);
        assert_eq!(l.one("x"), None);
        assert_eq!(
            parsed(l.page(2, 2)),
            json!({"data": [records[2], records[3]], "count": 2})
        );
        assert_eq!(
            parsed(l.page(3, 2)),
            json!({"data": [records[4]], "count": 1})
        );
        assert_eq!(parsed(l.page(4, 2)), json!({"data": [], "count": 0}));
        assert_eq!(
            parsed(l.page(1, usize::MAX)),
            json!({"data": records, "count": 5})
        );
        assert_eq!(
            parsed(l.page(usize::MAX, usize::MAX)),
            json!({"data": [], "count": 0})
        );
    }

    #[test]
    fn an_assembled_list_answers_like_a_prepared_one() {
        let records: Vec<(i64, Bytes)> = (1..=3)
            .map(|i| (i, Bytes::from(format!("{{\"id\":{i}}}"))))
            .collect();
        let l = Listed::assembled(records, true);
        let again = listed(parsed(l.bytes.clone()), vec![1, 2, 3]);
        assert_eq!(l.bytes, again.bytes);
        assert_eq!(
            parsed(l.one("2").expect("found")),
            json!({"data": [{"id": 2}], "count": 1})
        );
        assert_eq!(l.record(2), (3, Bytes::from_static(b"{\"id\":3}")));
        assert_eq!(
            parsed(l.page(2, 2)),
            json!({"data": [{"id": 3}], "count": 1})
        );
    }

    #[test]
    fn an_envelope_without_count_keeps_none() {
        let l = listed(json!({"data": [{"id": 1}, {"id": 2}]}), vec![1, 2]);
        assert_eq!(
            parsed(l.one("2").expect("found")),
            json!({"data": [{"id": 2}]})
        );
        assert_eq!(parsed(l.page(1, 1)), json!({"data": [{"id": 1}]}));
    }

    proptest::proptest! {
        /// Whatever the records hold (nested, escaped, unicode) and whatever page is asked for,
        /// a page and one record are exactly what cutting the parsed list gives.
        #[test]
        fn pages_and_records_equal_cutting_the_parsed_list(
            texts in proptest::collection::vec(".{0,12}", 0..40),
            page in 1usize..50,
            per_page in 1usize..20,
            counted in proptest::bool::ANY,
        ) {
            let records: Vec<Value> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| json!({"id": i as i64 * 3, "t": t, "n": {"a": [t, i]}}))
                .collect();
            let ids: Vec<i64> = (0..records.len() as i64).map(|i| i * 3).collect();
            let body = if counted {
                json!({"data": records, "count": records.len()})
            } else {
                json!({"data": records})
            };
            let l = listed(body, ids.clone());
            let start = ((page - 1) * per_page).min(records.len());
            let end = (start + per_page).min(records.len());
            let expected = &records[start..end];
            let got = parsed(l.page(page, per_page));
            proptest::prop_assert_eq!(&got["data"], &json!(expected));
            if counted {
                proptest::prop_assert_eq!(&got["count"], &json!(expected.len()));
            } else {
                proptest::prop_assert!(got.get("count").is_none());
            }
            for (i, id) in ids.iter().enumerate() {
                let one = parsed(l.one(&id.to_string()).expect("found"));
                proptest::prop_assert_eq!(&one["data"][0], &records[i]);
            }
            let again = Listed::assembled(
                (0..l.len()).map(|i| l.record(i)).collect(),
                counted,
            );
            proptest::prop_assert_eq!(&again.bytes, &l.bytes);
        }
    }

    #[test]
    fn ids_that_do_not_match_the_records_are_an_error() {
        let body = Bytes::from_static(br#"{"data":[{"id":1}]}"#);
        assert!(Listed::new(body, vec![]).is_err());
    }
}
