//! The writes waiting to reach a bundle's source (kiosk mode, `crate::kiosk::forward`).
//!
//! Every write request logged with `--state` is an entry, in `seq` order, once it is durable.
//! What happened to each entry is appended to `DIR/forwarded.jsonl` (fdatasync'd, like the
//! writes' log): `sending` before it is sent, then `accepted` (the source took it: it leaves the
//! queue) or `rejected` (the source refused the entry itself with a 4xx, see
//! `crate::kiosk::forward`: it moves to the rejected list, with the source's answer, and does
//! not block the rest). An entry marked `sending` without an
//! outcome was maybe sent before a crash: the forwarder checks the source before sending it
//! again.
//!
//! Check-ins naming someone registered here whom the source does not list are *parked*: not
//! sent (the desk's code may be someone else's there) until the source lists them. A `parked`
//! line parks a whole entry; an `accepted` line with `parked` items parks those and takes the
//! rest. A parked entry is sent (and recorded) like a pending one once it can be. The previous
//! version kept such check-ins aside for good, as `rejected` with no status or an `accepted`
//! line's `left_out`: those stay in the rejected list (they may have been resent by hand).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::log::{self, Log, LogError};
use super::{same_event, Person, Received, Write};
use crate::model::records::wire_int;

/// One write request waiting for the source.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) seq: u64,
    pub(crate) bundle: String,
    pub(crate) request: Received,
    /// In the log for good (an entry is never sent before).
    durable: bool,
    /// Marked `sending` before a restart, with no outcome: maybe the source has it.
    pub(crate) maybe_sent: bool,
    /// A batch of check-ins: who each item was for (`None` in older logs). Empty for a
    /// registration.
    persons: Vec<Option<Person>>,
}

impl Entry {
    /// This entry with only the items of its batch at `places` (their persons with them).
    fn only(&self, places: &[usize]) -> Entry {
        let persons = if self.persons.len() == batch_items_of(&self.request.body).len() {
            let kept = self.persons.iter().enumerate();
            kept.filter(|(k, _)| places.contains(k))
                .map(|(_, p)| *p)
                .collect()
        } else {
            // Not in line with the items: matched by their codes and ids instead.
            vec![None; places.len()]
        };
        Entry {
            request: Received {
                body: with_items(&self.request.body, places, true),
                ..self.request.clone()
            },
            persons,
            ..self.clone()
        }
    }
}

/// The id, check-in code and e-mail a registration got here (the source knows it by others).
fn registered_here(writes: &[Write]) -> Option<(i64, i64, String)> {
    match writes.first()? {
        Write::Registration { attendee } => Some((
            attendee.get("id_attendees")?.as_i64()?,
            attendee.get("checkin_code")?.as_i64()?,
            attendee.get("email")?.as_str()?.trim().to_lowercase(),
        )),
        _ => None,
    }
}

/// What the source did with an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    Sending,
    /// The try after the last `Sending` never reached the source (no connection could be
    /// made): the entry is not maybe received, so a registration is sent, not looked for.
    Unsent,
    Accepted,
    Rejected,
    Parked,
    /// Dismissed by hand (`DELETE /_queue`): no longer listed, never sent.
    Dismissed,
}

/// A line of `forwarded.jsonl`: what happened to an entry. Made with [`Outcome::new`], its
/// details set by the forwarder, recorded with [`Queue::record`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Outcome {
    seq: u64,
    outcome: Kind,
    /// The source's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<u16>,
    /// The source's answer to a rejected entry, or why a parked one is not sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) answer: Option<String>,
    /// For an accepted registration: its id and code here, and at the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ids: Option<Ids>,
    /// For a batch accepted or refused: the items not sent with it, parked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) parked: Option<LeftOut>,
    /// The same, as the previous version wrote it: kept aside in the rejected list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    left_out: Option<LeftOut>,
    /// For a dismissal: the list it takes the entry off (a batch whose sent part was refused
    /// is in both, under one `seq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    list: Option<List>,
    at: String,
}

impl Outcome {
    pub(crate) fn new(seq: u64, outcome: Kind) -> Outcome {
        Outcome {
            seq,
            outcome,
            status: None,
            answer: None,
            ids: None,
            parked: None,
            left_out: None,
            list: None,
            at: String::new(),
        }
    }
}

/// The lists an entry may be dismissed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum List {
    Parked,
    Rejected,
    /// Not sent yet: one the source keeps failing (a 5xx every time) holds back every later
    /// entry of its bundle, and the operator may take it out.
    Pending,
}

/// The items of a batch of check-ins that were not sent (by their place in it, from 0), and
/// why: they name someone registered here whom the source does not list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LeftOut {
    pub(crate) items: Vec<usize>,
    pub(crate) answer: String,
}

/// The items of a batch body: a bare array, or the array of a one-key object (what
/// `bodies::array_body` takes).
fn batch_items(body: &mut Value) -> Option<&mut Vec<Value>> {
    match body {
        Value::Array(items) => Some(items),
        Value::Object(o) => o.values_mut().find_map(|v| v.as_array_mut()),
        _ => None,
    }
}

/// The same, to read.
fn batch_items_of(body: &Value) -> &[Value] {
    match body {
        Value::Array(items) => items,
        Value::Object(o) => o.values().find_map(Value::as_array).map_or(&[], |v| v),
        _ => &[],
    }
}

/// `body` with only the items at `places` (`keep`), or without them.
pub(crate) fn with_items(body: &Value, places: &[usize], keep: bool) -> Value {
    let mut body = body.clone();
    if let Some(items) = batch_items(&mut body) {
        let mut k = 0;
        items.retain(|_| {
            let kept = places.contains(&k) == keep;
            k += 1;
            kept
        });
    }
    body
}

/// What a registration is called here and at the source: later check-ins made here name it by
/// the local id or code, and are sent with the source's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Ids {
    pub(crate) local_id: i64,
    pub(crate) local_code: i64,
    pub(crate) source_id: i64,
    pub(crate) source_code: i64,
}

/// An entry the source refused, kept with its request and the source's answer; or, as
/// `/_queue` shows one, a parked entry (no status, and why it waits).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Aside {
    seq: u64,
    bundle: String,
    path: String,
    body: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    answer: String,
    at: String,
}

/// Why a bundle's writes wait for the source (`/_queue`'s `waits`).
#[derive(Debug, Clone, Serialize)]
struct Waits {
    /// The entry whose sending failed, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    answer: String,
    at: String,
}

/// Check-ins not sent yet: they name someone registered here whom the source did not list.
#[derive(Debug, Clone)]
struct Parked {
    /// The items parked, with their persons.
    entry: Entry,
    answer: String,
    at: String,
}

impl Aside {
    fn new(e: Entry, status: Option<u16>, answer: String, at: &str) -> Aside {
        Aside {
            seq: e.seq,
            bundle: e.bundle,
            path: e.request.path,
            body: e.request.body,
            status,
            answer,
            at: at.to_string(),
        }
    }
}

impl Parked {
    fn shown(&self) -> Aside {
        Aside::new(self.entry.clone(), None, self.answer.clone(), &self.at)
    }
}

/// A registration made here, as the forwarder knows it: check-ins that name it are sent with the
/// id and code the source knows it by, looked up by its e-mail when they are not known yet (the
/// source refused it as registered already, the look-up after it failed, or it was made while
/// the bundle named no source and never queued).
#[derive(Debug, Clone)]
struct Here {
    /// The log line that made it.
    seq: u64,
    local_id: i64,
    local_code: i64,
    /// Lower case.
    email: String,
    /// Its `id_attendees` and `checkin_code` at the source, once known.
    source: Option<(i64, i64)>,
    /// Queued to be sent (its bundle named a source when it was made).
    queued: bool,
    /// The event it was made for (see `Received::event`).
    event: Option<i64>,
}

impl Here {
    /// Why a check-in naming this registration is not sent while the source does not list it.
    fn why_parked(&self) -> String {
        let email = &self.email;
        if self.queued {
            format!(
                "{email}, registered at the desk, is not listed by the source (was the \
                 registration refused, or dismissed?): it is sent once the source lists that e-mail"
            )
        } else {
            format!(
                "{email} was registered at the desk while the bundle named no source, so never \
                 sent there: it is sent once the source lists that e-mail"
            )
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    pending: BTreeMap<u64, Entry>,
    parked: BTreeMap<u64, Parked>,
    rejected: Vec<Aside>,
    /// Per bundle, the registrations made here since its last reset, in `seq` order.
    here: std::collections::HashMap<String, Vec<Here>>,
    /// Per bundle, the log line of a reset not durable yet: nothing of it is sent meanwhile.
    resetting: std::collections::HashMap<String, u64>,
    /// Per bundle whose writes wait for the source: why, since when, and the entry whose
    /// sending failed, if one did (a look-up at the source may fail too).
    waiting: std::collections::HashMap<String, Waits>,
    /// Per bundle, the event its data holds now, as the forwarder last saw it: entries made
    /// for another event (its data pulled into the folder since) are held, not sent.
    serving: std::collections::HashMap<String, i64>,
    /// Per bundle, when the source took each entry whole (by `seq`, from the outcome's time):
    /// data pulled after that shows the source's state, its later changes included.
    taken: std::collections::HashMap<String, BTreeMap<u64, chrono::DateTime<chrono::Utc>>>,
}

/// Whom an item of a batch names among the registrations made here.
enum Named<'a> {
    /// One logged before the entry.
    Here(&'a Here),
    /// One the queue never had (made while the bundle named no source), by its local id.
    Missing(i64),
    /// Someone else: an attendee of the files.
    Other,
}

/// The `checkin_code` (as text) and `id_attendees` an item of a batch names.
fn item_names(item: &Value) -> (Option<String>, Option<i64>) {
    let code = item.get("checkin_code").map(|code| match code {
        Value::String(s) => s.trim().to_string(),
        other => other.to_string(),
    });
    (code, item.get("id_attendees").and_then(wire_int))
}

/// `v` as an integer when it is one written as a string (taken so, [`wire_int`]): the source is
/// sent the documented model's integers.
fn as_integer(v: Option<&mut Value>) {
    if let Some(v) = v.filter(|v| v.is_string()) {
        if let Some(n) = wire_int(v) {
            *v = n.into();
        }
    }
}

impl Inner {
    /// Whether `e` was made for the event its bundle serves now (or that is not known).
    fn for_served(&self, e: &Entry) -> bool {
        same_event(e.request.event, self.serving.get(&e.bundle).copied())
    }

    /// Whom each item of `entry`'s batch names, in order: by the person logged with it, or,
    /// logged before persons were, by its code and id.
    fn named(&self, entry: &Entry) -> Vec<Named<'_>> {
        if entry.persons.is_empty() {
            return Vec::new();
        }
        let items = batch_items_of(&entry.request.body);
        let before = |h: &&Here| h.seq < entry.seq;
        let here = self.here.get(&entry.bundle);
        items
            .iter()
            .enumerate()
            .map(|(k, item)| match entry.persons.get(k).copied().flatten() {
                Some(Person::Listed(_)) => Named::Other,
                Some(Person::Registered(local)) => self
                    .here(&entry.bundle, local, entry.seq)
                    .map_or(Named::Missing(local), Named::Here),
                None => {
                    let (code, id) = item_names(item);
                    here.into_iter()
                        .flatten()
                        .filter(before)
                        .rfind(|h| {
                            code.as_ref()
                                .is_some_and(|c| *c == h.local_code.to_string())
                                || id == Some(h.local_id)
                        })
                        .map_or(Named::Other, Named::Here)
                }
            })
            .collect()
    }

    /// The registration made here as `local_id` that an entry logged as `seq` names: the last
    /// one logged before it (after a reset, later registrations may reuse the id).
    fn here(&self, bundle: &str, local_id: i64, seq: u64) -> Option<&Here> {
        self.here
            .get(bundle)?
            .iter()
            .rfind(|h| h.local_id == local_id && h.seq < seq)
    }

    /// Takes entry `seq` out of the pending or the parked ones.
    fn take(&mut self, seq: u64) -> Option<Entry> {
        self.pending
            .remove(&seq)
            .or_else(|| self.parked.remove(&seq).map(|p| p.entry))
    }

    /// Parks `entry`: it waits for the source to list whom it names.
    fn park(&mut self, entry: Entry, answer: String, at: &str) {
        let at = at.to_string();
        self.parked.insert(entry.seq, Parked { entry, answer, at });
    }

    /// Moves `entry` to the rejected list, with the source's status (`None`: not sent).
    fn reject(&mut self, e: Entry, status: Option<u16>, answer: String, at: &str) {
        self.rejected.push(Aside::new(e, status, answer, at));
    }

    /// Whether `entry`'s check-ins name a registration made here whose id and code at the
    /// source are not known.
    fn names_unknown(&self, entry: &Entry) -> bool {
        let named = self.named(entry);
        named
            .iter()
            .any(|n| matches!(n, Named::Here(h) if h.source.is_none()))
    }
}

/// The queue of every bundle.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    inner: Mutex<Inner>,
    outcomes: OnceLock<Log>,
    /// Woken when an entry becomes durable.
    pub(crate) ready: tokio::sync::Notify,
    /// The registrations made here (bundle, local id) whose new code at the source was said.
    renumbering_said: Mutex<std::collections::HashSet<(String, i64)>>,
}

/// The most bytes of a source's answer kept for a rejected entry.
const MAX_ANSWER: usize = 2048;

impl Queue {
    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An entry just logged, not durable yet: queued when its bundle named a source
    /// (`request.forward`). A registration is remembered either way, for the check-ins that
    /// will name it.
    pub(crate) fn push(
        &self,
        seq: u64,
        bundle: &str,
        request: Received,
        writes: &[Write],
        durable: bool,
    ) {
        let registered = registered_here(writes);
        let mut inner = self.inner();
        if let Some((local_id, local_code, email)) = registered {
            inner
                .here
                .entry(bundle.to_string())
                .or_default()
                .push(Here {
                    seq,
                    local_id,
                    local_code,
                    email,
                    source: None,
                    queued: request.forward,
                    event: request.event,
                });
        }
        if !request.forward {
            return;
        }
        inner.pending.insert(
            seq,
            Entry {
                seq,
                bundle: bundle.to_string(),
                request,
                durable,
                maybe_sent: false,
                persons: writes
                    .iter()
                    .filter(|w| matches!(w, Write::Checkin { .. } | Write::SessionCheckin { .. }))
                    .map(Write::person)
                    .collect(),
            },
        );
    }

    /// Whether `entry`'s check-ins name a registration made here whose id and code at the
    /// source are not known: its e-mail is to be looked up there first ([`Queue::learn`]).
    pub(crate) fn needs_look_up(&self, entry: &Entry) -> bool {
        self.inner().names_unknown(entry)
    }

    /// The registrations made here that `entry`'s check-ins name and whose id and code at the
    /// source are not known, by local id, each with why its check-ins are not sent.
    pub(crate) fn unknown_at_source(&self, entry: &Entry) -> BTreeMap<i64, String> {
        let inner = self.inner();
        let mut out = BTreeMap::new();
        for named in inner.named(entry) {
            match named {
                Named::Here(h) if h.source.is_none() => {
                    out.insert(h.local_id, h.why_parked());
                }
                Named::Missing(local) => {
                    out.insert(
                        local,
                        format!("id_attendees {local} is not a registration the desk logged"),
                    );
                }
                Named::Here(_) | Named::Other => {}
            }
        }
        out
    }

    /// The places in `entry`'s batch of the items naming a registration made here among
    /// `locals` (by local id), and how many items the batch has.
    pub(crate) fn items_naming(&self, entry: &Entry, locals: &[i64]) -> (Vec<usize>, usize) {
        let inner = self.inner();
        let named = inner.named(entry);
        let places = named
            .iter()
            .enumerate()
            .filter(|(_, n)| match n {
                Named::Here(h) => locals.contains(&h.local_id),
                Named::Missing(local) => locals.contains(local),
                Named::Other => false,
            })
            .map(|(k, _)| k)
            .collect();
        (places, named.len())
    }

    /// The registration `entry` makes, if it makes one: its id, code and (lower-case) e-mail
    /// here.
    pub(crate) fn registration_of(&self, entry: &Entry) -> Option<(i64, i64, String)> {
        let inner = self.inner();
        let h = inner
            .here
            .get(&entry.bundle)?
            .iter()
            .find(|h| h.seq == entry.seq)?;
        Some((h.local_id, h.local_code, h.email.clone()))
    }

    /// What the source calls the registrations made here for `bundle` whose ids there were not
    /// known: `people` is the source's list, id and code by lower-case e-mail.
    /// Only registrations made for the event the bundle serves: the source's list is that
    /// event's, and someone registered at two editions is two people there.
    /// Those learnt now, with both names (to say which badges carry a code the source gave
    /// someone else).
    pub(crate) fn learn(
        &self,
        bundle: &str,
        people: &HashMap<String, Option<(i64, i64)>>,
    ) -> Vec<Ids> {
        let mut inner = self.inner();
        let serving = inner.serving.get(bundle).copied();
        let mut learnt = Vec::new();
        for h in inner.here.get_mut(bundle).into_iter().flatten() {
            if h.source.is_none() && same_event(h.event, serving) {
                h.source = people.get(&h.email).copied().flatten();
                if let Some((source_id, source_code)) = h.source {
                    learnt.push(Ids {
                        local_id: h.local_id,
                        local_code: h.local_code,
                        source_id,
                        source_code,
                    });
                }
            }
        }
        learnt
    }

    /// Whether the new code the source gave registration `local_id` of `bundle` is yet to be
    /// said (true once per run: a look-up and an acceptance may both learn it).
    pub(crate) fn first_renumbering(&self, bundle: &str, local_id: i64) -> bool {
        self.renumbering_said
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((bundle.to_string(), local_id))
    }

    /// The first parked entry of `bundle` (in `seq` order, but those `tried` this round) that
    /// has something to send now: an item naming someone whose id at the source is known.
    pub(crate) fn next_parked(&self, bundle: &str, tried: &[u64]) -> Option<Entry> {
        let inner = self.inner();
        let reset = inner.resetting.get(bundle).copied().unwrap_or(0);
        let parked = inner.parked.values().map(|p| &p.entry);
        parked
            .filter(|e| e.bundle == bundle && !tried.contains(&e.seq) && e.seq > reset)
            .filter(|e| inner.for_served(e))
            .find(|e| {
                inner.named(e).iter().any(|n| match n {
                    Named::Here(h) => h.source.is_some(),
                    Named::Missing(_) => false,
                    Named::Other => true,
                })
            })
            .cloned()
    }

    /// The body of `entry` as the source is sent it: each check-in item that named a
    /// registration made here names it by the id and code the source knows it by (when known:
    /// see [`Queue::unknown_at_source`]); an item that named an attendee of the files by its own
    /// code or id goes as it came, a code taken as a number as its string. Items logged before
    /// persons were are matched by their code and id.
    pub(crate) fn translated(&self, entry: &Entry) -> Value {
        let inner = self.inner();
        let named = inner.named(entry);
        let mut body = entry.request.body.clone();
        // A registration's price id taken as a string goes as the documented integer.
        let person = match crate::model::bodies::create_is_wrapped(&body) {
            true => &mut body["attendee"],
            false => &mut body,
        };
        as_integer(
            person
                .get_mut("registration")
                .and_then(|r| r.get_mut("id_ticket_price")),
        );
        for (item, named) in batch_items(&mut body).into_iter().flatten().zip(named) {
            // A code goes as it was matched here: taken as a number, as the documented model's
            // string; with spaces around it (a scanner's line end), without them. Integers taken
            // as strings go as integers.
            match item.get_mut("checkin_code") {
                Some(code @ Value::Number(_)) => *code = Value::String(code.to_string()),
                Some(Value::String(code)) if code.trim() != code => *code = code.trim().to_string(),
                _ => {}
            }
            for key in ["id_attendees", "id_session", "checkin"] {
                as_integer(item.get_mut(key));
            }
            let Named::Here(Here {
                source: Some((source_id, source_code)),
                ..
            }) = named
            else {
                continue;
            };
            let (code, id) = item_names(item);
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            if code.is_some() {
                item.insert("checkin_code".into(), source_code.to_string().into());
            }
            if id.is_some() {
                item.insert("id_attendees".into(), (*source_id).into());
            }
        }
        body
    }

    /// Entry `seq` is in the log for good: it may be sent.
    pub(crate) fn durable(&self, seq: u64) {
        if let Some(e) = self.inner().pending.get_mut(&seq) {
            e.durable = true;
        }
        self.ready.notify_one();
    }

    /// Entry `seq` was taken back (it could not be made durable).
    pub(crate) fn forget(&self, seq: u64) {
        let mut inner = self.inner();
        inner.pending.remove(&seq);
        for here in inner.here.values_mut() {
            here.retain(|h| h.seq != seq);
        }
    }

    /// A bundle's writes were reset by log line `reset`: its entries logged before are not
    /// sent, those parked or rejected are forgotten, and the registrations made here before
    /// are no longer named by later check-ins. Entries logged after the reset stay.
    /// How many entries that never reached the source (pending or parked) it forgot.
    pub(crate) fn drop_bundle(&self, bundle: &str, reset: u64) -> usize {
        // The ids of forgotten registrations are given again: say a new one's code anew.
        self.renumbering_said
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(b, _)| b != bundle);
        let mut inner = self.inner();
        inner.resetting.remove(bundle);
        let before = inner.pending.len() + inner.parked.len();
        inner
            .pending
            .retain(|seq, e| e.bundle != bundle || *seq > reset);
        inner
            .parked
            .retain(|seq, p| p.entry.bundle != bundle || *seq > reset);
        inner
            .rejected
            .retain(|r| r.bundle != bundle || r.seq > reset);
        inner.waiting.remove(bundle);
        if let Some(here) = inner.here.get_mut(bundle) {
            here.retain(|h| h.seq > reset);
        }
        let dropped = before - inner.pending.len() - inner.parked.len();
        drop(inner);
        // What was logged after the reset may go now.
        self.ready.notify_one();
        dropped
    }

    /// Opens `dir/forwarded.jsonl` and applies what it says to the entries replayed. Returns
    /// the highest `seq` it names (0: none).
    pub(crate) fn open(&self, dir: &std::path::Path) -> Result<u64, LogError> {
        let opened = Log::open(dir, log::FORWARDED, |line| {
            serde_json::from_str::<Outcome>(line).is_ok()
        })?;
        let mut highest = 0;
        {
            let mut inner = self.inner();
            for line in &opened.lines {
                let Ok(o) = serde_json::from_str::<Outcome>(line) else {
                    continue;
                };
                highest = highest.max(o.seq);
                apply(&mut inner, &o);
            }
        }
        let _ = self.outcomes.set(opened.log);
        Ok(highest)
    }

    /// The bundles that have an entry ready to send, or parked.
    pub(crate) fn bundles_ready(&self) -> Vec<String> {
        let inner = self.inner();
        let mut out: Vec<String> = Vec::new();
        let ready = inner.pending.values().filter(|e| e.durable);
        for e in ready.chain(inner.parked.values().map(|p| &p.entry)) {
            if !out.contains(&e.bundle) {
                out.push(e.bundle.clone());
            }
        }
        out
    }

    /// The first entry of `bundle` (in `seq` order), if it is ready.
    pub(crate) fn next_for(&self, bundle: &str) -> Option<Entry> {
        let inner = self.inner();
        let first = inner
            .pending
            .values()
            .find(|e| e.bundle == bundle && inner.for_served(e))?;
        let reset = inner.resetting.get(bundle).is_some_and(|r| first.seq < *r);
        (first.durable && !reset).then(|| first.clone())
    }

    /// Whether `entry`, picked to be sent, still is to be: not dismissed or taken since, and
    /// no reset of its bundle logged after it.
    pub(crate) fn may_send(&self, entry: &Entry) -> bool {
        let inner = self.inner();
        let queued =
            inner.pending.contains_key(&entry.seq) || inner.parked.contains_key(&entry.seq);
        let reset = inner
            .resetting
            .get(&entry.bundle)
            .is_some_and(|r| entry.seq < *r);
        queued && !reset
    }

    /// A reset of `bundle` logged as line `seq` and not durable yet: its entries before it
    /// are not sent until [`Queue::drop_bundle`] drops them or [`Queue::reset_failed`].
    pub(crate) fn resetting(&self, bundle: &str, seq: u64) {
        self.inner().resetting.insert(bundle.to_string(), seq);
    }

    /// The reset of `bundle` at line `seq` could not be made durable: its entries go on.
    pub(crate) fn reset_failed(&self, bundle: &str, seq: u64) {
        let mut inner = self.inner();
        if inner.resetting.get(bundle) == Some(&seq) {
            inner.resetting.remove(bundle);
        }
        drop(inner);
        self.ready.notify_one();
    }

    /// Whether `bundle` has parked check-ins naming a registration made here that can be
    /// looked up at the source (by its e-mail).
    pub(crate) fn parked_to_look_up(&self, bundle: &str) -> bool {
        let inner = self.inner();
        let mut parked = inner.parked.values().map(|p| &p.entry);
        // Not those held for another event: the source's list is the served event's.
        parked.any(|e| e.bundle == bundle && inner.for_served(e) && inner.names_unknown(e))
    }

    /// How many entries wait for the source, are parked, and were refused, in every bundle.
    /// Per bundle, how many entries wait for the source, are parked, and were refused (each
    /// bundle with one at least).
    pub(crate) fn counts_by_bundle(&self) -> BTreeMap<String, [usize; 3]> {
        let inner = self.inner();
        let mut by: BTreeMap<String, [usize; 3]> = BTreeMap::new();
        let bundles = (inner.pending.values().map(|e| (&e.bundle, 0)))
            .chain(inner.parked.values().map(|p| (&p.entry.bundle, 1)))
            .chain(inner.rejected.iter().map(|r| (&r.bundle, 2)));
        for (bundle, kind) in bundles {
            by.entry(bundle.clone()).or_default()[kind] += 1;
        }
        by
    }

    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        let inner = self.inner();
        (
            inner.pending.len(),
            inner.parked.len(),
            inner.rejected.len(),
        )
    }

    /// Says why `bundle`'s writes wait (the forwarder's round stopped), naming the entry whose
    /// sending failed when one did, or, `None`, that they go again; shown in `/_queue`.
    pub(crate) fn waits(&self, bundle: &str, why: Option<(Option<u64>, &str)>) {
        let mut inner = self.inner();
        match why {
            Some((seq, why)) => {
                // `at` is since when they wait: kept while they go on waiting, for whatever
                // reason (before, each failed try moved it).
                let at = inner
                    .waiting
                    .get(bundle)
                    .map_or_else(|| Utc::now().to_rfc3339(), |w| w.at.clone());
                let waits = Waits {
                    seq,
                    answer: why.to_string(),
                    at,
                };
                inner.waiting.insert(bundle.to_string(), waits);
            }
            None => {
                inner.waiting.remove(bundle);
            }
        }
    }

    /// The forwarder saw `bundle` serve `event`.
    pub(crate) fn serves(&self, bundle: &str, event: i64) {
        self.inner().serving.insert(bundle.to_string(), event);
    }

    /// `bundle`'s pending or parked entries made for an event other than the one it serves
    /// now: how many, and those events.
    /// When the source took `bundle`'s entries whole, by `seq`.
    pub(crate) fn taken(&self, bundle: &str) -> BTreeMap<u64, chrono::DateTime<chrono::Utc>> {
        self.inner().taken.get(bundle).cloned().unwrap_or_default()
    }

    pub(crate) fn held(&self, bundle: &str) -> (usize, BTreeSet<i64>) {
        let inner = self.inner();
        let parked = inner.parked.values().map(|p| &p.entry);
        let held: Vec<&Entry> = inner
            .pending
            .values()
            .chain(parked)
            .filter(|e| e.bundle == bundle && !inner.for_served(e))
            .collect();
        let events = held.iter().filter_map(|e| e.request.event).collect();
        (held.len(), events)
    }

    /// How many entries `bundle` has waiting.
    pub(crate) fn pending(&self, bundle: &str) -> usize {
        self.inner()
            .pending
            .values()
            .filter(|e| e.bundle == bundle)
            .count()
    }

    /// Per bundle that has any, how many entries wait and the `next` one to go (with why it
    /// waits, once the source failed it), which are parked (with why) and which the source
    /// refused (with the source's answer), oldest first: `/_queue`, and `/status`'s `queue`.
    pub(crate) fn by_bundle(&self) -> BTreeMap<String, Value> {
        #[derive(Serialize, Default)]
        struct Of<'a> {
            pending: usize,
            /// Pending or parked, the entries made for another event than the bundle serves
            /// now: not sent.
            #[serde(skip_serializing_if = "Vec::is_empty")]
            held: Vec<Held>,
            /// The first of them, sent next.
            #[serde(skip_serializing_if = "Option::is_none")]
            next: Option<Next<'a>>,
            /// Why they wait, when the last round stopped.
            #[serde(skip_serializing_if = "Option::is_none")]
            waits: Option<&'a Waits>,
            parked: Vec<Aside>,
            rejected: Vec<Aside>,
        }
        #[derive(Serialize)]
        struct Held {
            seq: u64,
            event: Option<i64>,
        }
        #[derive(Serialize)]
        struct Next<'a> {
            seq: u64,
            path: &'a str,
            body: &'a Value,
        }
        let inner = self.inner();
        let mut bundles: BTreeMap<&str, Of> = BTreeMap::new();
        for e in inner.pending.values() {
            let of = bundles.entry(&e.bundle).or_default();
            of.pending += 1;
            if !inner.for_served(e) {
                of.held.push(Held {
                    seq: e.seq,
                    event: e.request.event,
                });
            } else if of.next.is_none() {
                of.next = Some(Next {
                    seq: e.seq,
                    path: &e.request.path,
                    body: &e.request.body,
                });
            }
        }
        for (bundle, waits) in &inner.waiting {
            if let Some(of) = bundles.get_mut(bundle.as_str()) {
                of.waits = Some(waits);
            }
        }
        for p in inner.parked.values() {
            let of = bundles.entry(&p.entry.bundle).or_default();
            if !inner.for_served(&p.entry) {
                of.held.push(Held {
                    seq: p.entry.seq,
                    event: p.entry.request.event,
                });
            }
            of.parked.push(p.shown());
        }
        for r in &inner.rejected {
            bundles
                .entry(&r.bundle)
                .or_default()
                .rejected
                .push(r.clone());
        }
        bundles
            .into_iter()
            .filter_map(|(name, of)| Some((name.to_string(), serde_json::to_value(of).ok()?)))
            .collect()
    }

    /// Per bundle that has any, the registrations made here that the source knows by another
    /// check-in code (its id here, e-mail, the code on its badge, the source's): a badge that
    /// shows a code naming someone else there, or no one. `/status`'s `reprint`.
    pub(crate) fn reprints(&self) -> BTreeMap<String, Value> {
        #[derive(Serialize)]
        struct Reprint<'a> {
            id: i64,
            email: &'a str,
            code: i64,
            code_at_source: i64,
        }
        let inner = self.inner();
        let mut reprints = BTreeMap::new();
        for (bundle, made_here) in &inner.here {
            let of: Vec<Reprint> = made_here
                .iter()
                .filter_map(|h| {
                    let (_, code_at_source) = h.source.filter(|&(_, c)| c != h.local_code)?;
                    Some(Reprint {
                        id: h.local_id,
                        email: &h.email,
                        code: h.local_code,
                        code_at_source,
                    })
                })
                .collect();
            if let (false, Ok(of)) = (of.is_empty(), serde_json::to_value(of)) {
                reprints.insert(bundle.clone(), of);
            }
        }
        reprints
    }

    /// `GET /_queue`: [`Queue::by_bundle`] under `bundles`.
    pub(crate) fn body(&self) -> bytes::Bytes {
        let body = serde_json::json!({ "bundles": self.by_bundle() });
        serde_json::to_vec(&body).map_or_else(|_| bytes::Bytes::new(), bytes::Bytes::from)
    }

    /// Dismisses `bundle`'s entry `seq` (`DELETE /_queue`), durably: whether it had one. A
    /// parked or pending entry being sent at that moment may still reach the source. One list
    /// at a time, the rejected first: a batch whose sent part was refused is both rejected and
    /// parked. A pending entry goes whole, wherever a send under way puts it meanwhile.
    pub(crate) async fn dismiss(&self, bundle: &str, seq: u64) -> std::io::Result<bool> {
        let list = {
            let inner = self.inner();
            let ours = |b: &str| b == bundle;
            if inner
                .rejected
                .iter()
                .any(|r| r.seq == seq && ours(&r.bundle))
            {
                List::Rejected
            } else if inner
                .parked
                .get(&seq)
                .is_some_and(|p| ours(&p.entry.bundle))
            {
                List::Parked
            } else if inner
                .pending
                .get(&seq)
                .is_some_and(|e| ours(&e.bundle) && e.durable)
            {
                // Not before it is durable: a write that turns out not to be is taken back,
                // and its seq may be used again after a restart.
                List::Pending
            } else {
                return Ok(false);
            }
        };
        let mut o = Outcome::new(seq, Kind::Dismissed);
        o.list = Some(list);
        self.record(o).await?;
        tracing::info!(bundle, seq, list = ?list, "queue entry dismissed (DELETE /_queue): no longer listed (a parked or pending one is not sent)");
        Ok(true)
    }

    /// Records (durably) what happened to an entry, then applies it.
    pub(crate) async fn record(&self, mut o: Outcome) -> std::io::Result<()> {
        if let Some(a) = &mut o.answer {
            if a.len() > MAX_ANSWER {
                let mut end = MAX_ANSWER;
                while !a.is_char_boundary(end) {
                    end -= 1;
                }
                a.truncate(end);
            }
        }
        o.at = Utc::now().to_rfc3339();
        if let Some(log) = self.outcomes.get() {
            let line = serde_json::to_vec(&o).map_err(std::io::Error::other)?;
            log.append(line)
                .await
                .unwrap_or_else(|_| Err(std::io::Error::other("the outcome log has stopped")))?;
        }
        apply(&mut self.inner(), &o);
        Ok(())
    }
}

/// What one outcome line does to the queue.
fn apply(inner: &mut Inner, o: &Outcome) {
    match o.outcome {
        Kind::Sending | Kind::Unsent => {
            let parked = inner.parked.get_mut(&o.seq).map(|p| &mut p.entry);
            if let Some(e) = inner.pending.get_mut(&o.seq).or(parked) {
                e.maybe_sent = o.outcome == Kind::Sending;
            }
        }
        Kind::Accepted => {
            if let Some(e) = inner.take(o.seq) {
                let mut here = inner.here.get_mut(&e.bundle).into_iter().flatten();
                if let Some((h, ids)) = here.rfind(|h| h.seq == o.seq).zip(o.ids) {
                    h.source = Some((ids.source_id, ids.source_code));
                }
                // Whole: no part of the entry parked or refused, now or before (a batch's refused
                // part keeps the entry's seq).
                let whole = o.parked.is_none()
                    && o.left_out.is_none()
                    && !inner.parked.contains_key(&o.seq)
                    && !inner.rejected.iter().any(|a| a.seq == o.seq);
                let at = chrono::DateTime::parse_from_rfc3339(&o.at).ok();
                if let Some(at) = at.filter(|_| whole) {
                    inner
                        .taken
                        .entry(e.bundle.clone())
                        .or_default()
                        .insert(o.seq, at.with_timezone(&chrono::Utc));
                }
                if let Some(left) = &o.parked {
                    inner.park(e.only(&left.items), left.answer.clone(), &o.at);
                } else if let Some(left) = &o.left_out {
                    inner.reject(e.only(&left.items), None, left.answer.clone(), &o.at);
                }
            }
        }
        Kind::Parked => {
            if let Some(e) = inner.take(o.seq) {
                inner.park(e, o.answer.clone().unwrap_or_default(), &o.at);
            }
        }
        Kind::Dismissed => match o.list {
            // The whole write, wherever the forwarder put it meanwhile: the outcome of a send
            // under way may be applied before or after this line, and either order leaves
            // nothing of it, as a restart does.
            Some(List::Pending) => {
                let pending = inner.pending.remove(&o.seq).map(|e| e.bundle);
                let parked = inner.parked.remove(&o.seq).map(|p| p.entry.bundle);
                inner.rejected.retain(|r| r.seq != o.seq);
                if let Some(bundle) = pending.or(parked) {
                    // Why it waited is not why the next one will.
                    if inner
                        .waiting
                        .get(&bundle)
                        .is_some_and(|w| w.seq == Some(o.seq))
                    {
                        inner.waiting.remove(&bundle);
                    }
                }
            }
            Some(List::Parked) => {
                inner.parked.remove(&o.seq);
            }
            Some(List::Rejected) => {
                inner.rejected.retain(|r| r.seq != o.seq);
            }
            // Written before lists were named: both.
            None => {
                inner.parked.remove(&o.seq);
                inner.rejected.retain(|r| r.seq != o.seq);
            }
        },
        Kind::Rejected => {
            if let Some(e) = inner.take(o.seq) {
                let answer = o.answer.clone().unwrap_or_default();
                match &o.parked {
                    // Only what was sent was refused: the items parked stay so.
                    Some(left) => {
                        let items = batch_items_of(&e.request.body).len();
                        let sent: Vec<usize> =
                            (0..items).filter(|k| !left.items.contains(k)).collect();
                        inner.park(e.only(&left.items), left.answer.clone(), &o.at);
                        inner.reject(e.only(&sent), o.status, answer, &o.at);
                    }
                    None => inner.reject(e, o.status, answer, &o.at),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn received(path: &str, body: Value) -> Received {
        Received {
            path: path.into(),
            body,
            forward: true,
            event: None,
        }
    }

    /// Queues a registration made here as log line `seq`.
    fn register(q: &Queue, seq: u64, id: i64, code: i64, email: &str) {
        let attendee = json!({"id_attendees": id, "checkin_code": code, "email": email});
        let write = Write::Registration {
            attendee: attendee.as_object().cloned().unwrap_or_default(),
        };
        q.push(seq, "b", received("/create", json!({})), &[write], true);
    }

    /// Registration `seq` accepted by the source, which knows its `local` (id, code) as `source`.
    fn known_at_source(q: &Queue, seq: u64, local: (i64, i64), source: (i64, i64)) {
        let mut accepted = Outcome::new(seq, Kind::Accepted);
        accepted.ids = Some(Ids {
            local_id: local.0,
            local_code: local.1,
            source_id: source.0,
            source_code: source.1,
        });
        apply(&mut q.inner(), &accepted);
    }

    fn checkin(code: &str, person: Option<Person>) -> Write {
        Write::Checkin {
            checkin_code: code.into(),
            checkin: 1,
            checkin_date: "d".into(),
            person,
        }
    }

    /// `waits.at` is since when a bundle's writes wait: another failed try (another reason
    /// even) keeps it; once they go again, a new wait starts anew. Before, each try moved it.
    #[test]
    fn a_wait_keeps_its_start_until_the_writes_go_again() {
        let q = Queue::default();
        let at = |q: &Queue| q.inner().waiting.get("b").map(|w| w.at.clone());
        q.waits("b", Some((None, "no answer")));
        let first = at(&q).expect("waiting");
        q.inner().waiting.get_mut("b").expect("waiting").at = "then".into();
        q.waits("b", Some((Some(3), "answered 500")));
        assert_eq!(at(&q).as_deref(), Some("then"), "{first}");
        assert_eq!(
            q.inner()
                .waiting
                .get("b")
                .map(|w| w.answer.clone())
                .as_deref(),
            Some("answered 500")
        );
        q.waits("b", None);
        assert_eq!(at(&q), None);
        q.waits("b", Some((None, "no answer")));
        assert_ne!(at(&q).as_deref(), Some("then"));
    }

    /// A reset while a check-in is being forwarded: a registration made after it reuses the
    /// id, and neither takes what the source calls the other.
    #[test]
    fn a_check_in_names_the_registration_logged_before_it_not_a_later_one_with_its_id() {
        let q = Queue::default();
        register(&q, 1, 101, 555, "ana@x");
        let body = json!([{"checkin_code": "555", "checkin": 1, "checkin_date": "d"}]);
        let write = checkin("555", Some(Person::Registered(101)));
        q.push(2, "b", received("/checkin", body.clone()), &[write], true);
        let in_flight = q.inner().pending.get(&2).cloned().expect("entry 2");
        q.drop_bundle("b", 2);
        register(&q, 3, 101, 555, "cai@x");
        known_at_source(&q, 3, (101, 555), (700, 777));
        // Ana's look-up does not land on Cai, and Cai's ids do not go with Ana's check-in.
        q.learn(
            "b",
            &HashMap::from([("ana@x".to_string(), Some((900, 999)))]),
        );
        assert_eq!(q.inner().here["b"][0].source, Some((700, 777)));
        assert_eq!(q.translated(&in_flight), body);
        assert!(!q.needs_look_up(&in_flight));
        assert_eq!(q.items_naming(&in_flight, &[101]), (vec![0], 1));
        assert!(q.unknown_at_source(&in_flight)[&101].contains("not a registration"));
    }

    /// A check-in logged before persons were is matched to a registration made here by its
    /// code: looked up at the source when unknown, left out when not listed there, and sent
    /// with the source's code when known.
    #[test]
    fn a_check_in_logged_without_a_person_is_matched_by_its_code() {
        let q = Queue::default();
        register(&q, 1, 101, 555, "ana@x");
        let body = json!({"attendees": [{"checkin_code": "555", "checkin": 1, "checkin_date": "d"},
                                        {"checkin_code": "12", "checkin": 1, "checkin_date": "d"}]});
        q.push(
            2,
            "b",
            received("/checkin", body.clone()),
            &[checkin("555", None), checkin("12", None)],
            true,
        );
        let entry = q.inner().pending.get(&2).cloned().expect("entry 2");
        assert!(q.needs_look_up(&entry));
        let unknown = q.unknown_at_source(&entry);
        assert_eq!(unknown.keys().collect::<Vec<_>>(), [&101]);
        assert!(unknown[&101].contains("ana@x"), "{unknown:?}");
        assert_eq!(q.items_naming(&entry, &[101]), (vec![0], 2));
        q.learn(
            "b",
            &HashMap::from([("ana@x".to_string(), Some((700, 777)))]),
        );
        let sent = q.translated(&entry);
        assert_eq!(sent["attendees"][0]["checkin_code"], "777");
        assert_eq!(sent["attendees"][1], body["attendees"][1]);
    }

    /// A code taken as a number (as `/attendees` lists it) goes as the documented model's
    /// string, so a source that takes only strings takes the batch; one with spaces around it
    /// (a scanner's line end), matched here without them, goes without them (before, as it
    /// came: a code the source need not know); the rest goes as it came.
    #[test]
    fn a_check_in_code_goes_as_it_was_matched() {
        let q = Queue::default();
        let body = json!([{"checkin_code": 12, "checkin": 1, "checkin_date": "d"},
                          {"checkin_code": "13", "checkin": 1, "checkin_date": "d"},
                          {"checkin_code": " 14\r\n", "checkin": 1, "checkin_date": "d"}]);
        let writes = [
            checkin("12", None),
            checkin("13", None),
            checkin("14", None),
        ];
        q.push(1, "b", received("/checkin", body.clone()), &writes, true);
        let entry = q.inner().pending.get(&1).cloned().expect("entry 1");
        let sent = q.translated(&entry);
        assert_eq!(sent[0]["checkin_code"], "12");
        assert_eq!(sent[0]["checkin_date"], "d");
        assert_eq!(sent[1], body[1]);
        assert_eq!(sent[2]["checkin_code"], "14");
    }

    /// Integers taken as strings (`"101"`) are matched as the integers they are, and sent as
    /// integers: a session check-in of someone registered here goes with the source's id. Before,
    /// its `id_attendees` as a string went as it came, the desk's own id, to the source.
    #[test]
    fn integers_taken_as_strings_are_matched_and_sent_as_integers() {
        let q = Queue::default();
        register(&q, 1, 101, 555, "ana@x");
        known_at_source(&q, 1, (101, 555), (700, 777));
        let body = json!([{"id_attendees": "101", "id_session": "9104", "checkin": "1",
            "checkin_date": "d"}]);
        let write = Write::SessionCheckin {
            id_attendees: 101,
            id_session: 9104,
            checkin: 1,
            checkin_date: "d".into(),
            person: Some(Person::Registered(101)),
        };
        q.push(2, "b", received("/checkin/sessions", body), &[write], true);
        let entry = q.inner().pending.get(&2).cloned().expect("entry 2");

        let sent = q.translated(&entry);

        assert_eq!(
            sent,
            json!([{"id_attendees": 700, "id_session": 9104, "checkin": 1, "checkin_date": "d"}])
        );
        let wrapped = json!({"attendee": {"name": "B", "registration": {"id_ticket_price": "7"}}});
        let flat = json!({"name": "C", "registration": {"id_ticket_price": "+8"}, "attendee": {}});
        q.push(3, "b", received("/create", wrapped), &[], true);
        q.push(4, "b", received("/create", flat), &[], true);
        let sent = |seq| {
            let entry = q.inner().pending.get(&seq).cloned().expect("entry");
            q.translated(&entry)
        };
        assert_eq!(sent(3)["attendee"]["registration"]["id_ticket_price"], 7);
        assert_eq!(sent(4)["registration"]["id_ticket_price"], 8);
    }

    /// A batch naming Ana (registered here, unknown at the source) and someone of the files:
    /// accepted with Ana's item left out, that item is parked with its person; once the source
    /// lists Ana, it is what goes next, with her code there, and its acceptance empties the
    /// parked list. A restart (the same outcome lines read again) rebuilds each state.
    #[test]
    fn items_left_out_are_parked_with_their_person_and_sent_once_the_source_lists_them() {
        let q = Queue::default();
        register(&q, 1, 101, 555, "ana@x");
        let mut refused = Outcome::new(1, Kind::Rejected);
        refused.status = Some(422);
        apply(&mut q.inner(), &refused);
        let body = json!([{"checkin_code": "12", "checkin": 1, "checkin_date": "d"},
                          {"checkin_code": "555", "checkin": 1, "checkin_date": "d"}]);
        let writes = [
            checkin("12", Some(Person::Listed(7))),
            checkin("555", Some(Person::Registered(101))),
        ];
        q.push(2, "b", received("/checkin", body.clone()), &writes, true);
        let mut accepted = Outcome::new(2, Kind::Accepted);
        accepted.parked = Some(LeftOut {
            items: vec![1],
            answer: "not sent: ana".into(),
        });
        apply(&mut q.inner(), &accepted);
        assert!(q.next_for("b").is_none());
        assert!(q.parked_to_look_up("b"));
        assert_eq!(q.bundles_ready(), ["b"]);
        assert!(
            q.next_parked("b", &[]).is_none(),
            "nothing to send while Ana is unknown"
        );
        let shown: Value = serde_json::from_slice(&q.body()).expect("JSON");
        let parked = &shown["bundles"]["b"]["parked"];
        assert_eq!(parked[0]["body"], json!([body[1]]), "{shown}");
        assert_eq!(parked[0]["answer"], "not sent: ana");
        assert_eq!(parked[0].get("status"), None);

        q.learn(
            "b",
            &HashMap::from([("ana@x".to_string(), Some((700, 777)))]),
        );
        assert!(!q.parked_to_look_up("b"));
        // A reset logged after it and not durable yet holds it; one that failed lets it go.
        q.resetting("b", 3);
        assert!(
            q.next_parked("b", &[]).is_none(),
            "held by the reset in flight"
        );
        q.reset_failed("b", 3);
        let next = q.next_parked("b", &[]).expect("Ana's check-in can go");
        assert!(q.next_parked("b", &[2]).is_none(), "tried this round");
        assert!(q.unknown_at_source(&next).is_empty());
        assert_eq!(q.translated(&next)[0]["checkin_code"], "777");
        apply(&mut q.inner(), &Outcome::new(2, Kind::Sending));
        assert!(q.next_parked("b", &[]).is_some_and(|e| e.maybe_sent));
        let mut rest = Outcome::new(2, Kind::Accepted);
        rest.at = "2026-11-27T21:00:00.000+00:00".into();
        apply(&mut q.inner(), &rest);
        assert!(q.inner().parked.is_empty());
        assert!(q.bundles_ready().is_empty());
        // Every item of it taken at last: data pulled after that shows the source's state.
        assert_eq!(q.taken("b").keys().collect::<Vec<_>>(), [&2]);
    }

    /// A batch whose sent part the source refused is never taken whole, though its parked part
    /// is accepted later: the refused check-ins must not give way to the source's state.
    #[test]
    fn a_batch_with_a_refused_part_is_never_taken_whole() {
        let q = Queue::default();
        let body = json!([{"checkin_code": "12", "checkin": 1, "checkin_date": "d"},
                          {"checkin_code": "13", "checkin": 1, "checkin_date": "d"}]);
        let writes = [
            checkin("12", Some(Person::Listed(7))),
            checkin("13", Some(Person::Listed(8))),
        ];
        q.push(2, "b", received("/checkin", body), &writes, true);
        let mut refused = Outcome::new(2, Kind::Rejected);
        refused.status = Some(422);
        refused.parked = Some(LeftOut {
            items: vec![1],
            answer: "not sent".into(),
        });
        apply(&mut q.inner(), &refused);
        let mut rest = Outcome::new(2, Kind::Accepted);
        rest.at = "2026-11-27T21:00:00.000+00:00".into();
        apply(&mut q.inner(), &rest);
        assert!(q.taken("b").is_empty());
    }

    /// A whole entry parked is parked; a refusal is rejected; what the previous version kept
    /// aside for good (rejected with no status, an accepted batch's `left_out`) stays in the
    /// rejected list, unsent (it may have been resent by hand); a reset forgets all of it.
    #[test]
    fn a_parked_line_parks_what_the_previous_version_kept_aside_stays_rejected() {
        let q = Queue::default();
        let body = json!([{"checkin_code": "555", "checkin": 1, "checkin_date": "d"},
                          {"checkin_code": "12", "checkin": 1, "checkin_date": "d"}]);
        for seq in [1, 2, 3, 4] {
            let writes = [
                checkin("555", Some(Person::Registered(101))),
                checkin("12", Some(Person::Listed(7))),
            ];
            q.push(seq, "b", received("/checkin", body.clone()), &writes, true);
        }
        apply(&mut q.inner(), &Outcome::new(1, Kind::Parked));
        apply(&mut q.inner(), &Outcome::new(2, Kind::Rejected));
        let mut refused = Outcome::new(3, Kind::Rejected);
        refused.status = Some(422);
        apply(&mut q.inner(), &refused);
        let old: Outcome = serde_json::from_value(json!({"seq": 4, "outcome": "accepted",
            "status": 200, "left_out": {"items": [0], "answer": "not sent: ana"}, "at": "t"}))
        .expect("an old line");
        apply(&mut q.inner(), &old);
        let shown: Value = serde_json::from_slice(&q.body()).expect("JSON");
        let of = &shown["bundles"]["b"];
        assert_eq!(of["parked"].as_array().map(Vec::len), Some(1), "{shown}");
        assert_eq!(of["parked"][0]["seq"], 1, "{shown}");
        let rejected = of["rejected"].as_array().cloned().unwrap_or_default();
        let seqs: Vec<&Value> = rejected.iter().map(|r| &r["seq"]).collect();
        assert_eq!(seqs, [2, 3, 4], "{shown}");
        assert_eq!(rejected[0].get("status"), None, "{shown}");
        assert_eq!(rejected[1]["status"], 422, "{shown}");
        assert_eq!(rejected[2].get("status"), None, "{shown}");
        assert_eq!(rejected[2]["body"], json!([body[0]]), "{shown}");
        assert_eq!(of["pending"], 0);
        q.drop_bundle("b", 4);
        assert_eq!(&q.body()[..], br#"{"bundles":{}}"#);
    }

    /// A registration made while its bundle named no source is not queued, but a check-in
    /// naming it is looked up at the source by its e-mail like any other.
    #[test]
    fn a_registration_not_queued_is_still_looked_up_for_its_check_ins() {
        let q = Queue::default();
        let attendee = json!({"id_attendees": 101, "checkin_code": 555, "email": "Hugo@X "});
        let write = Write::Registration {
            attendee: attendee.as_object().cloned().unwrap_or_default(),
        };
        let mut request = received("/create", json!({}));
        request.forward = false;
        q.push(1, "b", request, &[write], true);
        assert!(q.bundles_ready().is_empty(), "not queued");
        let body = json!([{"checkin_code": "555", "checkin": 1, "checkin_date": "d"}]);
        let write = checkin("555", Some(Person::Registered(101)));
        q.push(2, "b", received("/checkin", body), &[write], true);
        let entry = q.next_for("b").expect("the check-in");
        assert!(q.needs_look_up(&entry));
        assert!(q.unknown_at_source(&entry)[&101].contains("named no source"));
        q.learn(
            "b",
            &HashMap::from([("hugo@x".to_string(), Some((700, 777)))]),
        );
        assert_eq!(q.translated(&entry)[0]["checkin_code"], "777");
    }

    /// What `forwarded.jsonl` says is what a restart has: a check-in parked, then dismissed by
    /// hand, and a refusal, read back from the file.
    #[test]
    fn a_dismissed_entry_stays_dismissed_after_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let body = json!([{"checkin_code": "555", "checkin": 1, "checkin_date": "d"}]);
        let fill = |q: &Queue| {
            for seq in [1, 2, 3] {
                let write = checkin("555", Some(Person::Registered(101)));
                q.push(seq, "b", received("/checkin", body.clone()), &[write], true);
            }
        };
        let lines = [
            json!({"seq": 1, "outcome": "parked", "answer": "not sent: ana", "at": "t"}),
            json!({"seq": 2, "outcome": "parked", "answer": "not sent: ana", "at": "t"}),
            json!({"seq": 3, "outcome": "rejected", "status": 422, "answer": "no", "at": "t"}),
            json!({"seq": 2, "outcome": "dismissed", "list": "parked", "at": "t"}),
            json!({"seq": 3, "outcome": "dismissed", "list": "rejected", "at": "t"}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(dir.path().join(log::FORWARDED), text).expect("write");
        let q = Queue::default();
        fill(&q);
        q.open(dir.path()).expect("opens");
        let shown: Value = serde_json::from_slice(&q.body()).expect("JSON");
        let of = &shown["bundles"]["b"];
        assert_eq!(of["parked"].as_array().map(Vec::len), Some(1), "{shown}");
        assert_eq!(of["parked"][0]["seq"], 1, "{shown}");
        assert_eq!(of["rejected"], json!([]), "{shown}");
        assert!(q.next_for("b").is_none(), "{shown}");
    }

    /// A batch whose sent part the source refused: that part is rejected, the parked item stays
    /// parked under the same seq; dismissing takes the rejected part first, and the parked
    /// part only with a second dismissal. Read back from the file as a restart does.
    #[tokio::test]
    async fn a_refused_batch_keeps_its_parked_item_and_is_dismissed_a_part_at_a_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let body = json!([{"checkin_code": "12", "checkin": 1, "checkin_date": "d"},
                          {"checkin_code": "555", "checkin": 1, "checkin_date": "d"}]);
        let writes = [
            checkin("12", Some(Person::Listed(7))),
            checkin("555", Some(Person::Registered(101))),
        ];
        let line = json!({"seq": 1, "outcome": "rejected", "status": 405, "answer": "no",
            "parked": {"items": [1], "answer": "not sent: ana"}, "at": "t"});
        std::fs::write(dir.path().join(log::FORWARDED), format!("{line}\n")).expect("write");
        let q = Queue::default();
        q.push(1, "b", received("/checkin", body.clone()), &writes, true);
        q.open(dir.path()).expect("opens");
        let shown: Value = serde_json::from_slice(&q.body()).expect("JSON");
        let of = &shown["bundles"]["b"];
        assert_eq!(of["rejected"][0]["body"], json!([body[0]]), "{shown}");
        assert_eq!(of["parked"][0]["body"], json!([body[1]]), "{shown}");
        assert!(q.dismiss("b", 1).await.expect("dismissed"));
        let shown: Value = serde_json::from_slice(&q.body()).expect("JSON");
        let of = &shown["bundles"]["b"];
        assert_eq!(of["rejected"], json!([]), "{shown}");
        assert_eq!(of["parked"].as_array().map(Vec::len), Some(1), "{shown}");
        assert!(q.dismiss("b", 1).await.expect("dismissed"));
        assert!(!q.dismiss("b", 1).await.expect("nothing left"));
        assert_eq!(&q.body()[..], br#"{"bundles":{}}"#);
    }

    /// A pending entry the source keeps failing can be dismissed, so the next goes, but not
    /// one that is not durable yet; a batch rejected twice under one seq (its sent part, then
    /// its parked part) loses both parts with one dismissal, as before. Read back from the file
    /// as a restart does.
    #[tokio::test]
    async fn a_pending_entry_can_be_dismissed_and_two_rejected_parts_go_together() {
        let dir = tempfile::tempdir().expect("tempdir");
        let batch = json!([{"checkin_code": "12", "checkin": 1, "checkin_date": "d"},
                           {"checkin_code": "555", "checkin": 1, "checkin_date": "d"}]);
        let one = json!([{"checkin_code": "12", "checkin": 1, "checkin_date": "d"}]);
        let fill = |q: &Queue| {
            let writes = [
                checkin("12", Some(Person::Listed(7))),
                checkin("555", Some(Person::Registered(101))),
            ];
            q.push(1, "b", received("/checkin", batch.clone()), &writes, true);
            for seq in [2, 3] {
                let write = checkin("12", Some(Person::Listed(7)));
                q.push(seq, "b", received("/checkin", one.clone()), &[write], true);
            }
        };
        let lines = [
            json!({"seq": 1, "outcome": "rejected", "status": 405, "answer": "no",
                "parked": {"items": [1], "answer": "not sent: ana"}, "at": "t"}),
            json!({"seq": 1, "outcome": "rejected", "status": 422, "answer": "no", "at": "t"}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(dir.path().join(log::FORWARDED), text).expect("write");
        let q = Queue::default();
        fill(&q);
        q.open(dir.path()).expect("opens");
        let rejected = |q: &Queue| {
            let shown: Value = serde_json::from_slice(&q.body()).expect("JSON");
            shown["bundles"]["b"]["rejected"]
                .as_array()
                .map_or(0, Vec::len)
        };
        assert_eq!(rejected(&q), 2, "both parts of batch 1 refused");
        assert!(q.dismiss("b", 1).await.expect("dismissed"));
        assert_eq!(
            rejected(&q),
            0,
            "a dismissal takes the rejected parts of its seq"
        );

        assert_eq!(q.next_for("b").map(|e| e.seq), Some(2));
        assert!(!q.dismiss("other", 2).await.expect("not that bundle's"));
        assert!(q
            .dismiss("b", 2)
            .await
            .expect("a pending entry is dismissed"));
        assert_eq!(q.next_for("b").map(|e| e.seq), Some(3), "the next one goes");
        let write = checkin("12", Some(Person::Listed(7)));
        q.push(4, "b", received("/checkin", one.clone()), &[write], false);
        assert!(!q.dismiss("b", 4).await.expect("not durable yet"));

        drop(q);
        let again = Queue::default();
        fill(&again);
        again.open(dir.path()).expect("opens again");
        assert_eq!(rejected(&again), 0);
        assert_eq!(again.next_for("b").map(|e| e.seq), Some(3));
    }

    /// A pending entry dismissed while the forwarder sends it: whether the send's outcome
    /// (parked, refused) is applied before or after the dismissal, nothing of the entry is
    /// left, in memory and after a restart alike.
    #[test]
    fn a_dismissal_and_a_send_outcome_leave_nothing_in_either_order() {
        let body = json!([{"checkin_code": "555", "checkin": 1, "checkin_date": "d"}]);
        let queue = || {
            let q = Queue::default();
            let write = checkin("555", Some(Person::Registered(101)));
            q.push(1, "b", received("/checkin", body.clone()), &[write], true);
            q
        };
        let mut dismissed = Outcome::new(1, Kind::Dismissed);
        dismissed.list = Some(List::Pending);
        let parked = Outcome::new(1, Kind::Parked);
        let mut refused = Outcome::new(1, Kind::Rejected);
        refused.status = Some(422);
        for outcome in [&parked, &refused] {
            for order in [[outcome, &dismissed], [&dismissed, outcome]] {
                let q = queue();
                for o in order {
                    apply(&mut q.inner(), o);
                }
                assert_eq!(&q.body()[..], br#"{"bundles":{}}"#, "{order:?}");
            }
        }
    }

    /// An entry picked to be sent is not, once it was dismissed or a reset of its bundle was
    /// logged since (the forwarder looks it up at the source first, which takes a while).
    #[tokio::test]
    async fn a_picked_entry_is_not_sent_once_dismissed_or_reset_since() {
        let q = Queue::default();
        let body = json!([{"checkin_code": "12", "checkin": 1, "checkin_date": "d"}]);
        let write = checkin("12", Some(Person::Listed(7)));
        q.push(1, "b", received("/checkin", body), &[write], true);
        let picked = q.next_for("b").expect("picked");
        assert!(q.may_send(&picked));
        q.resetting("b", 2);
        assert!(!q.may_send(&picked), "a reset logged after it");
        q.reset_failed("b", 2);
        assert!(q.may_send(&picked), "the reset failed: it goes");
        assert!(q.dismiss("b", 1).await.expect("dismissed"));
        assert!(!q.may_send(&picked), "dismissed");
    }
}
