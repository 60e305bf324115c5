//! The writes: `POST /attendees/create`, `/checkin/attendees` and `/checkin/sessions`.
//!
//! Writes never touch the data folder. They are kept per bundle (by its folder name, whatever
//! token opened it) as the list of writes acknowledged since the last reset, and, with
//! `--state DIR`, in an append-only log there ([`log`]), durable before the answer. What the
//! reads show is a *view*: the bundle's prepared attendees with the writes folded over them
//! ([`View`]). A view belongs to one prepared version of the bundle; when a reload brings a new
//! one, the writes are folded again over it (so a reload keeps them), lazily, on the next request
//! that needs them.
//!
//! Folding a write over a base that already has it does nothing: a registration whose e-mail
//! the new snapshot holds is skipped (the snapshot caught up with the site), a check-in of a
//! code no attendee has any more is skipped. The same rules refuse a new write; replaying skips.

pub(crate) mod log;
pub(crate) mod queue;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use bytes::Bytes;
use chrono::{DateTime, FixedOffset, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::errors::ApiError;
use crate::model::records::{AttendeeCreate, CheckinAttendee, CheckinSession};
use crate::prepare::Listed;

pub(crate) use log::LogError;
use log::Mark;

/// The time zone registrations are dated in: Brasília (no daylight saving since 2019).
const BRASILIA_SECONDS: i32 = -3 * 3600;

/// What a bundle's prepared data offers the writes: its attendees and what validates a write.
/// Made once per prepared version (`prepare`).
#[derive(Debug)]
pub(crate) struct Base {
    /// The attendees answers of the bundle.
    pub(crate) attendees: Arc<Listed>,
    pub(crate) id_event: i64,
    /// Ticket name by `id_ticket_price`: what a registration may take, and its category.
    pub(crate) prices: HashMap<i64, String>,
    /// The activities' ids.
    pub(crate) sessions: HashSet<i64>,
    /// Attendee index by lower-case e-mail, by check-in code (as text) and the largest id and
    /// code.
    pub(crate) emails: HashMap<String, usize>,
    pub(crate) codes: HashMap<String, usize>,
    pub(crate) max_id: i64,
    pub(crate) max_code: i64,
    /// When the data was pulled from its source (`[source]`'s `pulled_at`), if it was.
    pub(crate) pulled_at: Option<DateTime<Utc>>,
}

/// One acknowledged write, as logged and replayed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "write", rename_all = "snake_case")]
pub(crate) enum Write {
    /// A registration: the attendee record as it was made (ids, code and date included).
    Registration { attendee: Map<String, Value> },
    Checkin {
        checkin_code: String,
        checkin: i64,
        checkin_date: String,
        /// Who the code named when the check-in was acknowledged (absent in older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        person: Option<Person>,
    },
    SessionCheckin {
        id_attendees: i64,
        id_session: i64,
        checkin: i64,
        checkin_date: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        person: Option<Person>,
    },
    /// `POST /_writes/reset`: the writes before it are forgotten.
    Reset,
}

impl From<&CheckinAttendee> for Write {
    fn from(c: &CheckinAttendee) -> Write {
        Write::Checkin {
            checkin_code: c.checkin_code.as_str().trim().to_string(),
            checkin: c.checkin.0,
            checkin_date: c.checkin_date.as_str().to_string(),
            person: None,
        }
    }
}

impl From<&CheckinSession> for Write {
    fn from(c: &CheckinSession) -> Write {
        Write::SessionCheckin {
            id_attendees: c.id_attendees.0,
            id_session: c.id_session.0,
            checkin: c.checkin.0,
            checkin_date: c.checkin_date.as_str().to_string(),
            person: None,
        }
    }
}

impl Write {
    /// Who a check-in was resolved to when it was acknowledged.
    pub(crate) fn person(&self) -> Option<Person> {
        match self {
            Write::Checkin { person, .. } | Write::SessionCheckin { person, .. } => *person,
            Write::Registration { .. } | Write::Reset => None,
        }
    }
}

/// Who a check-in is for, resolved when it is acknowledged and logged with it, so that a replay
/// over later files, and the copy sent to the source, follow the person rather than the code or
/// id: a later snapshot may give that code or id to someone else (the source and the desk
/// number their registrations alike), or a registration made here may get new ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Person {
    /// An attendee of the bundle's files, named by its own code or id: its `id_attendees`
    /// there, which is the source's.
    Listed(i64),
    /// A registration made here, by the `id_attendees` it was logged with: the source knows it
    /// by other ones once it took it.
    Registered(i64),
}

/// A line of the log: one request's writes (or a reset), in the order they were applied.
#[derive(Debug, Serialize, Deserialize)]
struct Logged {
    /// Its place in the log, from 1: the order writes are forwarded in (kiosk mode).
    seq: u64,
    /// When it was acknowledged (RFC 3339), for people reading the log.
    at: String,
    bundle: String,
    /// The request as it came (path and JSON body), to forward it as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    request: Option<Received>,
    writes: Vec<Write>,
}

/// Whether a write made for event `made` belongs with data of event `now`: the same event, or
/// either not known (a request logged before events were belongs to any). The one rule for
/// what reads show, what is sent and what is learnt at the source.
pub(crate) fn same_event(made: Option<i64>, now: Option<i64>) -> bool {
    made.zip(now).is_none_or(|(made, now)| made == now)
}

/// How deeply a write request's JSON body may nest. Its log line wraps it two levels deeper
/// (and `forwarded.jsonl` a few more), and a line is read back with serde_json's limit of 128
/// levels: a deeper body would be acknowledged and then not replay. Real bodies nest 3 deep.
pub(crate) const MAX_BODY_DEPTH: usize = 64;

/// A write request as it came.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Received {
    pub(crate) path: String,
    pub(crate) body: Value,
    /// Whether its bundle named a source when it came: only then is it queued for forwarding.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) forward: bool,
    /// The `id_event` of the data it was made on (absent in older logs: any). Another event's
    /// data pulled into the bundle's folder shows none of its writes, nor gets them sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) event: Option<i64>,
}

/// Why a write is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) error: ApiError,
    /// What was wrong, for the message (`None`: the error's message says it all).
    pub(crate) detail: Option<String>,
}

impl Refused {
    fn new(error: ApiError, detail: impl Into<String>) -> Refused {
        Refused {
            error,
            detail: Some(detail.into()),
        }
    }
}

/// An attendee of a view: one of the base's, or one registered here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Who {
    Base(usize),
    Created(usize),
}

/// What the writes added to one attendee.
#[derive(Debug, Default, Clone)]
struct Marks {
    /// The last check-in at the event: `checkin` (1 in, 0 undone) and its date.
    checkin: Option<(i64, String)>,
    /// The source took that check-in before the data served was pulled: a record carrying
    /// the source's own `checkin` shows it instead (someone may have undone it there since).
    checkin_taken: bool,
    /// Check-ins at activities, in the order they came.
    sessions: Vec<(i64, i64, String)>,
}

/// A registered attendee.
#[derive(Debug, Clone)]
struct Created {
    id: i64,
    /// The id it was logged with (`id` unless the files took that one since).
    logged: i64,
    record: Map<String, Value>,
}

/// The writes folded over one base.
///
/// Its maps grow one write at a time under the writes' lock, so they are B-trees: a hash map
/// rehashes everything it holds each time it doubles, and every write waiting on the lock (on
/// every runtime thread) waited with it: 150 ms at 115,000 registrations, 270 ms at 230,000.
#[derive(Debug)]
struct View {
    base: Arc<Base>,
    created: Vec<Created>,
    emails: BTreeMap<String, usize>,
    codes: BTreeMap<String, usize>,
    ids: BTreeMap<i64, usize>,
    next_id: i64,
    next_code: i64,
    marks: BTreeMap<Who, Marks>,
    /// Every registration made here by the id it was logged with (found in the base by e-mail
    /// or not, renumbered or not), and its logged code's id: who its check-ins go to.
    alias_ids: BTreeMap<i64, Who>,
    alias_codes: BTreeMap<String, i64>,
    /// The attendees answers with the writes, made when first asked for after a change.
    listed: Option<Arc<Listed>>,
    /// Registrations the base took the id or code of, numbered anew: (logged id, id, code).
    renumbered: Vec<(i64, i64, i64)>,
}

impl View {
    fn new(base: Arc<Base>) -> View {
        View {
            next_id: base.max_id.saturating_add(1),
            next_code: base.max_code.saturating_add(1).max(10_000_001),
            base,
            created: Vec::new(),
            emails: BTreeMap::new(),
            codes: BTreeMap::new(),
            ids: BTreeMap::new(),
            marks: BTreeMap::new(),
            alias_ids: BTreeMap::new(),
            alias_codes: BTreeMap::new(),
            listed: None,
            renumbered: Vec::new(),
        }
    }

    /// Who a check-in code names now, and how: an attendee of the files by its code, a
    /// registration made here by its code now, or one by the code it was logged with (what its
    /// badge says) when no one has that code now. The same as the attendees list shows.
    fn by_code(&self, code: &str) -> Option<(Who, Person)> {
        let code = code.trim();
        if let Some(&i) = self.base.codes.get(code) {
            return Some((
                Who::Base(i),
                Person::Listed(self.base.attendees.record(i).0),
            ));
        }
        if let Some(&i) = self.codes.get(code) {
            return Some((Who::Created(i), Person::Registered(self.created[i].logged)));
        }
        let logged = *self.alias_codes.get(code)?;
        Some((*self.alias_ids.get(&logged)?, Person::Registered(logged)))
    }

    /// Who an `id_attendees` names now, and how (as [`View::by_code`]).
    fn by_id(&self, id: i64) -> Option<(Who, Person)> {
        if let Some(i) = self.base.attendees.index_of(id) {
            return Some((Who::Base(i), Person::Listed(id)));
        }
        if let Some(&i) = self.ids.get(&id) {
            return Some((Who::Created(i), Person::Registered(self.created[i].logged)));
        }
        Some((*self.alias_ids.get(&id)?, Person::Registered(id)))
    }

    /// Who a check-in is for: the person it was resolved to, or, logged before persons were,
    /// its code or id as it was resolved then (the registrations made here first).
    fn target(&self, write: &Write) -> Option<Who> {
        match (write, write.person()) {
            (_, Some(Person::Listed(id))) => self.base.attendees.index_of(id).map(Who::Base),
            (_, Some(Person::Registered(id))) => self.alias_ids.get(&id).copied(),
            (Write::Checkin { checkin_code, .. }, None) => self
                .alias_codes
                .get(checkin_code.trim())
                .and_then(|id| self.alias_ids.get(id).copied())
                .or_else(|| self.by_code(checkin_code).map(|(who, _)| who)),
            (Write::SessionCheckin { id_attendees, .. }, None) => self
                .alias_ids
                .get(id_attendees)
                .copied()
                .or_else(|| self.by_id(*id_attendees).map(|(who, _)| who)),
            (Write::Registration { .. } | Write::Reset, None) => None,
        }
    }

    /// Resolves a new check-in's person (see [`Person`]); one no one answers to keeps none,
    /// and [`View::check`] refuses it.
    fn resolve(&self, write: &mut Write) {
        let found = match write {
            Write::Checkin { checkin_code, .. } => self.by_code(checkin_code),
            Write::SessionCheckin { id_attendees, .. } => self.by_id(*id_attendees),
            Write::Registration { .. } | Write::Reset => None,
        };
        if let (
            Some((_, found)),
            Write::Checkin { person, .. } | Write::SessionCheckin { person, .. },
        ) = (found, write)
        {
            *person = Some(found);
        }
    }

    fn who_by_email(&self, email: &str) -> Option<Who> {
        let email = email.trim().to_lowercase();
        self.base
            .emails
            .get(&email)
            .map(|i| Who::Base(*i))
            .or_else(|| self.emails.get(&email).map(|i| Who::Created(*i)))
    }

    fn registered(&self, email: &str) -> bool {
        self.who_by_email(email).is_some()
    }

    /// The registration a create body asks for, made at `now`: refused for a price the event
    /// does not have or an e-mail already registered.
    fn registration(&self, create: &AttendeeCreate, now: DateTime<Utc>) -> Result<Write, Refused> {
        let price = create.registration.id_ticket_price.0;
        let Some(ticket) = self.base.prices.get(&price) else {
            return Err(Refused::new(
                ApiError::UnknownTicketPrice,
                format!("id_ticket_price {price} is none of the event's (GET /api/v1/event)"),
            ));
        };
        if self.registered(&create.email) {
            return Err(Refused {
                error: ApiError::AlreadyRegistered,
                detail: None,
            });
        }
        let local = FixedOffset::east_opt(BRASILIA_SECONDS).map_or_else(
            || now.naive_utc(),
            |tz| now.with_timezone(&tz).naive_local(),
        );
        let text = |s: &Option<String>| Value::String(s.clone().unwrap_or_default());
        let mut a = Map::new();
        a.insert("id_attendees".into(), self.next_id.into());
        a.insert("id_event".into(), self.base.id_event.into());
        a.insert("checkin_code".into(), self.next_code.into());
        a.insert("name".into(), create.name.trim().into());
        let badge = create
            .bagde_name
            .clone()
            .filter(|b| !b.trim().is_empty())
            .unwrap_or_else(|| create.name.trim().to_string());
        a.insert("bagde_name".into(), badge.into());
        a.insert("email".into(), create.email.trim().into());
        a.insert("gender".into(), text(&create.gender));
        let photo = create.photo.clone().filter(|p| !p.is_empty());
        a.insert("photo".into(), photo.unwrap_or_else(|| " ".into()).into());
        a.insert("document".into(), "".into());
        a.insert(
            "confirmed".into(),
            create.registration_confirmed.unwrap_or(false).into(),
        );
        a.insert("registration_category".into(), ticket.clone().into());
        a.insert(
            "registration_date".into(),
            local.format("%d/%m/%Y").to_string().into(),
        );
        a.insert(
            "registration_hour".into(),
            local.format("%H:%M").to_string().into(),
        );
        Ok(Write::Registration { attendee: a })
    }

    /// Whether a write holds on this view (the rules above); a check-in never depends on another
    /// write of its batch, so a batch is checked item by item before any is applied.
    fn check(&self, write: &Write) -> Result<(), Refused> {
        match write {
            Write::Registration { attendee } => {
                let email = attendee.get("email").and_then(Value::as_str).unwrap_or("");
                if self.registered(email) {
                    return Err(Refused {
                        error: ApiError::AlreadyRegistered,
                        detail: None,
                    });
                }
            }
            Write::Checkin { checkin_code, .. } => {
                if self.target(write).is_none() {
                    return Err(Refused::new(
                        ApiError::UnknownCheckinCode,
                        format!("no attendee has checkin_code {checkin_code:?}"),
                    ));
                }
            }
            Write::SessionCheckin {
                id_attendees,
                id_session,
                ..
            } => {
                if self.target(write).is_none() {
                    return Err(Refused::new(
                        ApiError::UnknownAttendee,
                        format!("no attendee has id_attendees {id_attendees}"),
                    ));
                }
                if !self.base.sessions.contains(id_session) {
                    return Err(Refused::new(
                        ApiError::UnknownSession,
                        format!("no activity has id_session {id_session}"),
                    ));
                }
            }
            Write::Reset => {}
        }
        Ok(())
    }

    /// Applies a write that [`View::check`] passed; replaying one it does not is skipped, and
    /// a registration the base holds already (by e-mail) is the base's record from then on.
    /// Folds one write; `taken`: the source took it before the data served was pulled.
    fn apply(&mut self, write: &Write, taken: bool) {
        if !matches!(write, Write::Registration { .. }) && self.check(write).is_err() {
            return;
        }
        match write {
            Write::Registration { attendee } => {
                let email = attendee.get("email").and_then(Value::as_str).unwrap_or("");
                let logged_id = attendee.get("id_attendees").and_then(Value::as_i64);
                let logged_code = attendee.get("checkin_code").and_then(Value::as_i64);
                let alias = |view: &mut View, who: Who| {
                    if let Some(id) = logged_id {
                        view.alias_ids.insert(id, who);
                        if let Some(code) = logged_code {
                            view.alias_codes.insert(code.to_string(), id);
                        }
                    }
                };
                if let Some(who) = self.who_by_email(email) {
                    // The snapshot caught up with it: its check-ins go to the base's record.
                    alias(self, who);
                    self.listed = None;
                    return;
                }
                let mut record = attendee.clone();
                // Replayed over a base that took its id or code since: give it new ones (and
                // send the check-ins that name the old ones to it).
                let mut id = logged_id.unwrap_or(self.next_id);
                if self.by_id(id).is_some() {
                    id = self.next_id;
                    record.insert("id_attendees".into(), id.into());
                }
                let mut code = logged_code.unwrap_or(self.next_code);
                if self.by_code(&code.to_string()).is_some() {
                    code = self.next_code;
                    record.insert("checkin_code".into(), code.into());
                }
                if (Some(id), Some(code)) != (logged_id, logged_code) {
                    self.renumbered.push((logged_id.unwrap_or(id), id, code));
                }
                let index = self.created.len();
                alias(self, Who::Created(index));
                self.emails.insert(email.trim().to_lowercase(), index);
                self.codes.insert(code.to_string(), index);
                self.ids.insert(id, index);
                self.next_id = self.next_id.max(id.saturating_add(1));
                self.next_code = self.next_code.max(code.saturating_add(1));
                self.created.push(Created {
                    id,
                    logged: logged_id.unwrap_or(id),
                    record,
                });
            }
            Write::Checkin {
                checkin,
                checkin_date,
                ..
            } => {
                if let Some(who) = self.target(write) {
                    let marks = self.marks.entry(who).or_default();
                    marks.checkin = Some((*checkin, checkin_date.clone()));
                    marks.checkin_taken = taken;
                }
            }
            Write::SessionCheckin {
                id_session,
                checkin,
                checkin_date,
                ..
            } => {
                let Some(who) = self.target(write) else {
                    return;
                };
                // One entry per activity, the last check-in winning (as at the event).
                let sessions = &mut self.marks.entry(who).or_default().sessions;
                sessions.retain(|(id, _, _)| id != id_session);
                sessions.push((*id_session, *checkin, checkin_date.clone()));
            }
            Write::Reset => *self = View::new(self.base.clone()),
        }
        self.listed = None;
    }

    /// The attendees answers with the writes.
    fn listed(&mut self) -> Arc<Listed> {
        if let Some(listed) = &self.listed {
            return listed.clone();
        }
        let base = &self.base.attendees;
        let mut records: Vec<(i64, Bytes)> = Vec::with_capacity(base.len() + self.created.len());
        for i in 0..base.len() {
            let (id, bytes) = base.record(i);
            records.push((id, marked(bytes, self.marks.get(&Who::Base(i)))));
        }
        for (i, c) in self.created.iter().enumerate() {
            // A map of JSON values always serialises.
            let bytes = serde_json::to_vec(&c.record)
                .map_or_else(|_| Bytes::from_static(b"{}"), Bytes::from);
            records.push((c.id, marked(bytes, self.marks.get(&Who::Created(i)))));
        }
        let listed = Arc::new(Listed::assembled(records, true));
        self.listed = Some(listed.clone());
        listed
    }
}

/// A record with what the writes added: `checkin` and `checkin_date` for the event,
/// `checkin_sessions` for activities, after its own fields, or in place of the same names when
/// the record has them already (a snapshot pulled from another eventbox carries them).
fn marked(record: Bytes, marks: Option<&Marks>) -> Bytes {
    let Some(marks) = marks else { return record };
    let Ok(mut fields) = serde_json::from_slice::<Map<String, Value>>(&record) else {
        return record;
    };
    let sources_own = marks.checkin_taken && fields.contains_key("checkin");
    if let Some((checkin, date)) = marks.checkin.as_ref().filter(|_| !sources_own) {
        fields.insert("checkin".into(), (*checkin).into());
        fields.insert("checkin_date".into(), date.clone().into());
    }
    if !marks.sessions.is_empty() {
        let sessions = marks
            .sessions
            .iter()
            .map(|(id, checkin, date)| {
                serde_json::json!({"id_session": id, "checkin": checkin, "checkin_date": date})
            })
            .collect();
        fields.insert("checkin_sessions".into(), Value::Array(sessions));
    }
    serde_json::to_vec(&fields).map_or(record, Bytes::from)
}

/// One bundle's writes and their view.
#[derive(Debug, Default)]
struct BundleWrites {
    /// Since the last reset, in order, each with the `seq` of its log line (0 without a log)
    /// and the event it was made for (see [`Received::event`]).
    writes: Vec<(u64, Option<i64>, Write)>,
    view: Option<View>,
    /// The renumberings logged (a view is folded again on every new version of the files).
    renumbering_said: HashSet<(i64, i64, i64)>,
}

impl BundleWrites {
    /// The view over `base`, folded again if the base is new; `taken` gives when the source
    /// took each write whole (asked only then).
    fn view(
        &mut self,
        bundle: &str,
        base: &Arc<Base>,
        taken: impl FnOnce() -> BTreeMap<u64, DateTime<Utc>>,
    ) -> &mut View {
        let stale = self
            .view
            .as_ref()
            .is_none_or(|v| !Arc::ptr_eq(&v.base, base));
        if stale {
            let mut view = View::new(base.clone());
            // A registration the new files took the id or code of gets new ones above every
            // logged registration's, another event's too: it takes no other registration's,
            // whose badge has them, and the queue tells registrations apart by their ids.
            for (_, _, w) in &self.writes {
                if let Write::Registration { attendee } = w {
                    let logged = |key: &str| attendee.get(key).and_then(Value::as_i64);
                    if let Some(id) = logged("id_attendees") {
                        view.next_id = view.next_id.max(id.saturating_add(1));
                    }
                    if let Some(code) = logged("checkin_code") {
                        view.next_code = view.next_code.max(code.saturating_add(1));
                    }
                }
            }
            // Only the writes made for the event the files hold now are shown.
            let now = Some(base.id_event);
            let taken = taken();
            let before_pull = |seq: &u64| {
                taken
                    .get(seq)
                    .zip(base.pulled_at)
                    .is_some_and(|(at, pulled)| *at < pulled)
            };
            for (seq, _, w) in self.writes.iter().filter(|(_, e, _)| same_event(*e, now)) {
                // Replaying skips what the new base refuses (see the module's documentation).
                view.apply(w, before_pull(seq));
            }
            for &(logged, id, code) in &view.renumbered {
                if self.renumbering_said.insert((logged, id, code)) {
                    tracing::warn!(
                        bundle,
                        logged_id = logged,
                        id_attendees = id,
                        checkin_code = code,
                        "a registration made here is numbered anew (its id or check-in code is someone else's in the bundle's files now): reprint its badge from /attendees"
                    );
                }
            }
            self.view = Some(view);
        }
        self.view.get_or_insert_with(|| View::new(base.clone()))
    }
}

/// A write that passed and waits to be durable.
pub(crate) struct Pending(Option<Durable>);

/// Resolves once a write is in the log (or could not be put there).
type Durable = Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>>;

impl Pending {
    /// Waits until the write is in the log (at once without `--state`). On an error it was
    /// taken back already: it was never acknowledged.
    pub(crate) async fn durable(self) -> std::io::Result<()> {
        match self.0 {
            None => Ok(()),
            Some(wait) => wait.await,
        }
    }
}

/// Leave to make writes on one bundle: no reset is in flight while it is held
/// ([`Writes::admit`]). Let it go before awaiting the writes' durability.
pub(crate) struct Admitted<'a> {
    writes: &'a Arc<Writes>,
    bundle: &'a str,
    base: &'a Arc<Base>,
    _gate: tokio::sync::RwLockReadGuard<'a, ()>,
}

impl Admitted<'_> {
    /// Decodes the JSON body of a write of `kind` and applies it: `None` when the body does
    /// not decode (its problems are in `diag`), else what [`Admitted::register`] or
    /// [`Admitted::checkins`] gave. `request` makes the log's record of it.
    pub(crate) fn apply(
        &self,
        kind: crate::api::WriteKind,
        value: &Value,
        diag: &mut crate::model::decode::Diag,
        request: impl FnOnce() -> Received,
    ) -> Option<Result<Pending, Refused>> {
        use crate::api::WriteKind;
        use crate::model::bodies;
        let items: Vec<Write> = match kind {
            WriteKind::Register => {
                let create = bodies::attendee_create_body(value, diag)?;
                return (!diag.has_errors()).then(|| self.register(request(), &create));
            }
            WriteKind::Checkin => {
                let items = bodies::checkin_attendees_body(value, diag)?;
                (!diag.has_errors()).then(|| items.iter().map(Into::into).collect())?
            }
            WriteKind::CheckinSessions => {
                let items = bodies::checkin_sessions_body(value, diag)?;
                (!diag.has_errors()).then(|| items.iter().map(Into::into).collect())?
            }
        };
        Some(self.checkins(request(), items))
    }

    /// Registers an attendee (`POST /attendees/create`).
    pub(crate) fn register(
        &self,
        request: Received,
        create: &AttendeeCreate,
    ) -> Result<Pending, Refused> {
        self.writes.commit(self.bundle, self.base, request, |view| {
            Ok(vec![view.registration(create, Utc::now())?])
        })
    }

    /// Applies a batch of check-ins (`POST /checkin/attendees`, `/checkin/sessions`), all or
    /// none.
    pub(crate) fn checkins(
        &self,
        request: Received,
        writes: Vec<Write>,
    ) -> Result<Pending, Refused> {
        self.writes
            .commit(self.bundle, self.base, request, |_| Ok(writes))
    }
}

/// What the log answers for one line: whether it is durable.
type LogWait = tokio::sync::oneshot::Receiver<std::io::Result<()>>;

/// The log's answer, or the error of a log that stopped without one.
async fn logged(wait: LogWait) -> std::io::Result<()> {
    wait.await
        .unwrap_or_else(|_| Err(std::io::Error::other("the write log has stopped")))
}

/// Every bundle's writes, and the log when there is one.
#[derive(Debug, Default)]
pub(crate) struct Writes {
    read_only: bool,
    /// Set once, by [`Writes::open_state`], before the server starts.
    log: OnceLock<log::Log>,
    bundles: Mutex<HashMap<String, BundleWrites>>,
    /// Whether any bundle has writes: reads skip the lock while none has.
    any: AtomicBool,
    /// The `seq` of the last line logged (0: none yet).
    seq: AtomicU64,
    /// The log's epochs (`log`'s documentation): the first `seq` of each after the first, one
    /// started by each line that could not be made durable. Changed and read only under the
    /// bundles' lock, as lines are logged.
    fences: Mutex<Vec<u64>>,
    /// Taken to read by each write while it is checked and applied, and to write by a reset
    /// until its line is durable and applied: no write is checked against what a reset in
    /// flight will forget.
    gate: tokio::sync::RwLock<()>,
    /// With `--state`: the write requests not yet taken by the bundle's source (kiosk mode).
    pub(crate) queue: queue::Queue,
    /// A forwarder runs (kiosk mode): only then are new writes queued for their source, so a
    /// rehearsal on a pulled copy never has its test people sent later.
    forwarding: AtomicBool,
    /// While the latest line (a write or a reset) could not be made durable in the `--state`
    /// log: since when and why (`/status`'s `state_log`, the status page); the next durable
    /// line clears it. With the `seq` of the line that told: lines settle in tasks of their
    /// own, in any order, and an older line's outcome never overrides a newer one's.
    trouble: Mutex<(u64, Option<crate::prepare::Condition>)>,
}

/// What opening the state folder found, for the startup log.
#[derive(Debug)]
pub(crate) struct Replayed {
    /// The log's lines.
    pub(crate) lines: usize,
    /// The writes they hold now (those before a reset of their bundle forgotten).
    pub(crate) writes: usize,
    /// Kiosk mode: the entries waiting for the source, parked, and refused.
    pub(crate) queue: (usize, usize, usize),
    pub(crate) torn: Option<std::path::PathBuf>,
    /// The log's last `seq` and the higher one `forwarded.jsonl` names, when it names one.
    pub(crate) lost: Option<(u64, u64)>,
}

impl Writes {
    /// Marks that a forwarder runs: writes made from now on for a bundle naming a source are
    /// queued for it.
    pub(crate) fn forward_from_now(&self) {
        self.forwarding.store(true, Ordering::Release);
    }

    /// Whether writes are queued for their bundle's source ([`Writes::forward_from_now`]).
    pub(crate) fn forwarding(&self) -> bool {
        self.forwarding.load(Ordering::Acquire)
    }

    /// Writes kept in memory (until [`Writes::open_state`]); refused with 405 when `read_only`.
    pub(crate) fn new(read_only: bool) -> Writes {
        Writes {
            read_only,
            ..Writes::default()
        }
    }

    /// Keeps the writes in `dir`'s log from now on, and takes back the writes it holds. Once:
    /// a second call fails.
    pub(crate) fn open_state(&self, dir: &std::path::Path) -> Result<Replayed, LogError> {
        let opened = log::Log::open(dir, log::FILE, |line| {
            serde_json::from_str::<Logged>(line).is_ok()
        })?;
        let count = opened.lines.len();
        let mut bundles = self.bundles();
        for line in &opened.lines {
            let Ok(logged) = serde_json::from_str::<Logged>(line) else {
                continue;
            };
            self.seq.fetch_max(logged.seq, Ordering::AcqRel);
            if let Some(request) = &logged.request {
                self.queue.push(
                    logged.seq,
                    &logged.bundle,
                    request.clone(),
                    &logged.writes,
                    true,
                );
            }
            if logged.writes.iter().any(|w| matches!(w, Write::Reset)) {
                self.queue.drop_bundle(&logged.bundle, logged.seq);
            }
            let b = bundles.entry(logged.bundle).or_default();
            let event = logged.request.as_ref().and_then(|r| r.event);
            for w in logged.writes {
                match w {
                    Write::Reset => *b = BundleWrites::default(),
                    w => {
                        b.writes.push((logged.seq, event, w));
                        b.view = None;
                    }
                }
            }
        }
        let writes = bundles.values().map(|b| b.writes.len()).sum();
        self.any.store(writes > 0, Ordering::Release);
        drop(bundles);
        // Outcomes past the log's last line: the log lost lines it had saved (a disk that did
        // not keep what it synced, a file cut by hand). Numbering goes on after them, or a new
        // write would take a lost one's `seq`, and with it that one's outcome (never sent).
        let logged = self.seq.load(Ordering::Acquire);
        let forwarded = self.queue.open(dir)?;
        let lost = (forwarded > logged).then(|| {
            self.seq.fetch_max(forwarded, Ordering::AcqRel);
            (logged, forwarded)
        });
        self.log.set(opened.log).map_err(|_| LogError::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::other("the state folder is open already"),
        })?;
        Ok(Replayed {
            lines: count,
            writes,
            queue: self.queue.counts(),
            torn: opened.torn,
            lost,
        })
    }

    pub(crate) fn read_only(&self) -> bool {
        self.read_only
    }

    /// Whether the latest line could not be made durable ([`Writes::trouble`]).
    pub(crate) fn state_failing(&self) -> bool {
        self.trouble
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .is_some()
    }

    /// Notes whether line `seq` was made durable ([`Writes::trouble`]), unless a later line
    /// told already.
    fn logged_as(&self, seq: u64, result: &std::io::Result<()>) {
        let mut trouble = self.trouble.lock().unwrap_or_else(|e| e.into_inner());
        let (told, condition) = &mut *trouble;
        if seq < *told {
            return;
        }
        *told = seq;
        *condition = match result {
            Ok(()) => {
                if let Some(was) = condition.take() {
                    // The operator saw ERRORs: say that writes are taken again.
                    tracing::info!(
                        failing_since = %was.since,
                        "the write log is saved again: writes are taken"
                    );
                }
                None
            }
            Err(e) => Some(crate::prepare::Condition::after(
                condition.take(),
                "failing",
                format!("{e}: writes are refused (500 state_unwritable) until one can be saved"),
            )),
        };
    }

    /// The `/status` body: the snapshot's `status` with each bundle's `queue` and `reprint`
    /// (kiosk mode) and, while the `--state` log fails, `state_log`.
    pub(crate) fn status(&self, status: &crate::prepare::Status) -> bytes::Bytes {
        let trouble = self
            .trouble
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clone();
        status.body(
            self.queue.by_bundle(),
            self.queue.reprints(),
            trouble.as_ref(),
        )
    }

    fn bundles(&self) -> MutexGuard<'_, HashMap<String, BundleWrites>> {
        self.bundles.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fences(&self) -> MutexGuard<'_, Vec<u64>> {
        self.fences.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The attendees answers of `bundle` with its writes; `None` when it has none.
    pub(crate) fn attendees(&self, bundle: &str, base: &Arc<Base>) -> Option<Arc<Listed>> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let mut bundles = self.bundles();
        let b = bundles.get_mut(bundle).filter(|b| !b.writes.is_empty())?;
        Some(b.view(bundle, base, || self.queue.taken(bundle)).listed())
    }

    /// Waits for a reset in flight to be applied (or refused), then gives leave to write on
    /// `bundle` over `base`.
    pub(crate) async fn admit<'a>(
        self: &'a Arc<Self>,
        bundle: &'a str,
        base: &'a Arc<Base>,
    ) -> Admitted<'a> {
        Admitted {
            writes: self,
            bundle,
            base,
            _gate: self.gate.read().await,
        }
    }

    /// Makes the writes a request asks for on `bundle`'s view (`make`), applies them if every one
    /// holds (all or none), logs them in that order and returns the wait for their durability.
    /// One lock for all of it, so the log's order is the order the writes were applied in.
    /// Called by [`Admitted`] only: never while a reset is in flight.
    fn commit(
        self: &Arc<Self>,
        bundle: &str,
        base: &Arc<Base>,
        request: Received,
        make: impl FnOnce(&View) -> Result<Vec<Write>, Refused>,
    ) -> Result<Pending, Refused> {
        let mut bundles = self.bundles();
        let b = bundles.entry(bundle.to_string()).or_default();
        let view = b.view(bundle, base, || self.queue.taken(bundle));
        let mut writes = make(view)?;
        if writes.is_empty() {
            return Err(Refused::new(
                ApiError::InvalidWrite,
                "the list is empty: send at least one check-in",
            ));
        }
        // A check-in's place in its list is said, also in a list of one (as the client sent a
        // list); a registration is no list.
        let batch = writes
            .iter()
            .any(|w| matches!(w, Write::Checkin { .. } | Write::SessionCheckin { .. }));
        for (i, w) in writes.iter_mut().enumerate() {
            view.resolve(w);
            view.check(w).map_err(|mut r| {
                if batch {
                    r.detail = r
                        .detail
                        .map(|d| format!("[{i}] (check-in {} of the list): {d}", i + 1));
                }
                r
            })?;
        }
        for w in &writes {
            view.apply(w, false);
        }
        let event = request.event;
        let (line, wait) = match self.log(bundle, Some(request.clone()), &writes) {
            Some((line, wait)) => {
                self.queue.push(line.seq, bundle, request, &writes, false);
                (line, Some(wait))
            }
            None => (Mark::default(), None),
        };
        b.writes
            .extend(writes.into_iter().map(|w| (line.seq, event, w)));
        self.any.store(true, Ordering::Release);
        drop(bundles);
        Ok(Pending(wait.map(|wait| self.settle(bundle, line, wait))))
    }

    /// Once log line `line` is durable, lets the queue send it; if it cannot be, takes its
    /// writes back, and those made after it on a view that held it. In a task of its own,
    /// started now: a client that leaves before the answer (its request dropped) changes
    /// neither. The future answers what the log did.
    fn settle(self: &Arc<Self>, bundle: &str, line: Mark, wait: LogWait) -> Durable {
        let (writes, bundle) = (Arc::clone(self), bundle.to_string());
        let task = tokio::spawn(async move {
            let result = logged(wait).await;
            writes.logged_as(line.seq, &result);
            match &result {
                Ok(()) => writes.queue.durable(line.seq),
                Err(e) => {
                    tracing::error!(error = %e, bundle, "a write could not be made durable; it is taken back");
                    writes.forget(line);
                }
            }
            result
        });
        Box::pin(async move { task.await.unwrap_or_else(|e| Err(std::io::Error::other(e))) })
    }

    /// Appends one request's writes to the log, if there is one: the wait for their durability.
    /// Called under the bundles' lock, so `seq` and the log follow the order writes are applied,
    /// and the line's epoch is the one its writes were checked in.
    fn log(
        &self,
        bundle: &str,
        request: Option<Received>,
        writes: &[Write],
    ) -> Option<(Mark, LogWait)> {
        let log = self.log.get()?;
        let seq = self.seq.fetch_add(1, Ordering::AcqRel) + 1;
        let epoch = self.fences().len() as u64;
        let logged = Logged {
            seq,
            at: Utc::now().to_rfc3339(),
            bundle: bundle.to_string(),
            request,
            writes: writes.to_vec(),
        };
        // A `Value` and strings always serialise; JSON text has no raw newline in it.
        let line = serde_json::to_vec(&logged).unwrap_or_default();
        let mark = Mark { seq, epoch };
        Some((mark, log.append_in(line, Some(mark))))
    }

    /// Takes back the writes of `line`, which could not be made durable (it failed, or the log
    /// refused it), from the first line of its epoch that failed on: those of every later line
    /// of the epoch, in any bundle, were checked on a view that held that one, and the log
    /// refuses them unwritten.
    fn forget(&self, line: Mark) {
        let first = self.log.get().and_then(|l| l.first_failed(line.epoch));
        self.take_back(first.map_or(line.seq, |f| f.min(line.seq)), line);
    }

    /// Takes back the writes of the lines from `from` to the end of `line`'s epoch. Reads stop
    /// showing them, and the same requests may be made again. The first time for an epoch,
    /// starts the next one: lines logged from now on were checked without them, and are
    /// written. Settling tasks run in any order: whichever comes first takes them all back.
    fn take_back(&self, from: u64, line: Mark) {
        let mut bundles = self.bundles();
        let mut fences = self.fences();
        if fences.len() as u64 == line.epoch {
            fences.push(self.seq.load(Ordering::Acquire) + 1);
        }
        let end = usize::try_from(line.epoch)
            .ok()
            .and_then(|e| fences.get(e))
            .copied()
            .unwrap_or(u64::MAX);
        let taken_back = from..end;
        let mut forgotten = std::collections::BTreeSet::new();
        for b in bundles.values_mut() {
            let had = b.writes.len();
            b.writes.retain(|(s, ..)| {
                let taken = taken_back.contains(s);
                if taken {
                    forgotten.insert(*s);
                }
                !taken
            });
            if b.writes.len() != had {
                b.view = None;
            }
        }
        forgotten.insert(line.seq);
        for seq in forgotten {
            self.queue.forget(seq);
        }
    }

    /// Forgets `bundle`'s writes (`POST /_writes/reset`); logged, so a restart forgets them too.
    /// With a log, they are forgotten once the reset's line is durable, as a restart replays
    /// it, and no write is made meanwhile ([`Writes::admit`]) nor sent to the source; a reset
    /// that cannot be made durable forgets nothing. That runs in a task of its own (a tokio
    /// runtime is needed then): the future need not be awaited for it to happen.
    pub(crate) fn reset(self: &Arc<Self>, bundle: &str) -> Pending {
        if self.log.get().is_none() {
            self.forget_before(bundle, u64::MAX);
            return Pending(None);
        }
        let (writes, bundle) = (Arc::clone(self), bundle.to_string());
        let task = tokio::spawn(async move {
            let _gate = writes.gate.write().await;
            // Logged under the lock, as writes are: `seq` follows the log's order.
            let bundles = writes.bundles();
            let line = writes.log(&bundle, None, &[Write::Reset]);
            if let Some((line, _)) = &line {
                writes.queue.resetting(&bundle, line.seq);
            }
            drop(bundles);
            let (line, wait) = line.ok_or_else(|| std::io::Error::other("no write log"))?;
            writes.settle_reset(&bundle, line, wait).await
        });
        Pending(Some(Box::pin(async move {
            task.await.unwrap_or_else(|e| Err(std::io::Error::other(e)))
        })))
    }

    /// Waits for the reset at log `line` to be durable, then forgets what was logged before
    /// it; if it cannot be, forgets nothing and lets the queue go on (and the next epoch start:
    /// no write was made after it, the gate being held).
    async fn settle_reset(&self, bundle: &str, line: Mark, wait: LogWait) -> std::io::Result<()> {
        let result = logged(wait).await;
        self.logged_as(line.seq, &result);
        match &result {
            Ok(()) => self.forget_before(bundle, line.seq),
            Err(e) => {
                self.forget(line);
                self.queue.reset_failed(bundle, line.seq);
                tracing::error!(
                    error = %e,
                    bundle,
                    "a writes reset (POST /_writes/reset) could not be made durable; nothing was forgotten"
                );
            }
        }
        result
    }

    /// Forgets `bundle`'s writes logged before line `seq`, and its queue's entries with them.
    fn forget_before(&self, bundle: &str, seq: u64) {
        let mut bundles = self.bundles();
        let mut forgotten = 0;
        if let Some(b) = bundles.get_mut(bundle) {
            let had = b.writes.len();
            b.writes.retain(|(s, ..)| *s > seq);
            b.view = None;
            forgotten = had - b.writes.len();
            if b.writes.is_empty() {
                bundles.remove(bundle);
            }
        }
        let unsent = self.queue.drop_bundle(bundle, seq);
        drop(bundles);
        if unsent > 0 {
            tracing::warn!(
                bundle,
                writes = forgotten,
                unsent,
                "writes reset (POST /_writes/reset): forgotten, and the bundle's queue with them, \
                 with requests that never reached the source (pending or parked)"
            );
        } else {
            tracing::info!(
                bundle,
                writes = forgotten,
                "writes reset (POST /_writes/reset): forgotten, and the bundle's queue with them"
            );
        }
    }

    /// The log file, when there is one.
    pub(crate) fn log_path(&self) -> Option<&std::path::Path> {
        self.log.get().map(log::Log::path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_follow_the_fields_or_replace_the_same_names() {
        let marks = Marks {
            checkin: Some((1, "2026-09-15T08:00:00".into())),
            checkin_taken: false,
            sessions: vec![(7, 1, "2026-09-15T09:00:00".into())],
        };
        let plain = marked(Bytes::from_static(br#"{"id":1,"n":10.00}"#), Some(&marks));
        assert_eq!(
            std::str::from_utf8(&plain).expect("UTF-8"),
            r#"{"id":1,"n":10.00,"checkin":1,"checkin_date":"2026-09-15T08:00:00","checkin_sessions":[{"id_session":7,"checkin":1,"checkin_date":"2026-09-15T09:00:00"}]}"#
        );
        // A record that carries them already (pulled from another eventbox): replaced in place.
        let again = marked(plain.clone(), Some(&marks));
        assert_eq!(again, plain);
        let unmarked = Bytes::from_static(br#"{"id":2}"#);
        assert_eq!(marked(unmarked.clone(), None), unmarked);
        // The source took the check-in before these data were pulled: a record with the
        // source's own check-in (undone there since) shows it; one without gets the desk's.
        let taken = Marks {
            checkin_taken: true,
            sessions: Vec::new(),
            ..marks
        };
        let undone = Bytes::from_static(br#"{"id":1,"checkin":0,"checkin_date":"later"}"#);
        assert_eq!(marked(undone.clone(), Some(&taken)), undone);
        assert_eq!(
            std::str::from_utf8(&marked(unmarked, Some(&taken))).expect("UTF-8"),
            r#"{"id":2,"checkin":1,"checkin_date":"2026-09-15T08:00:00"}"#
        );
    }

    /// A check-in request by `code`, queued for a source, and its write, of attendee `listed`.
    fn checkin(code: &str, listed: i64) -> (Received, Write) {
        let request = Received {
            path: "/api/v1/checkin/attendees".into(),
            body: serde_json::json!([{ "checkin_code": code }]),
            forward: true,
            event: None,
        };
        let write = Write::Checkin {
            checkin_code: code.into(),
            checkin: 1,
            checkin_date: "d".into(),
            person: Some(Person::Listed(listed)),
        };
        (request, write)
    }

    /// Log line 1 of bundle `b`, queued for its source and not durable yet.
    fn queued_checkin() -> Arc<Writes> {
        let writes = Arc::new(Writes::new(false));
        let (request, write) = checkin("12", 7);
        writes.queue.push(1, "b", request, &[write], false);
        assert!(
            writes.queue.next_for("b").is_none(),
            "not sent before it is durable"
        );
        writes
    }

    /// The client of a write leaves while its line is being synced (its request, and the
    /// wait, dropped): once the line is durable, the write is sent all the same. Before,
    /// the queue learnt it only in the request's own future, and the bundle's queue stopped
    /// behind it until a restart.
    #[tokio::test]
    async fn a_write_whose_client_left_before_the_sync_is_sent_once_durable() {
        let writes = queued_checkin();
        let (synced, wait) = tokio::sync::oneshot::channel();
        drop(Pending(Some(writes.settle(
            "b",
            Mark { seq: 1, epoch: 0 },
            wait,
        ))));
        let ready = writes.queue.ready.notified();
        synced.send(Ok(())).expect("the settling task waits");
        tokio::time::timeout(std::time::Duration::from_secs(10), ready)
            .await
            .expect("the queue hears of it");
        assert_eq!(writes.queue.next_for("b").map(|e| e.seq), Some(1));
    }

    /// A reset forgets what was logged before its line once the line is durable, not before,
    /// and not at all when it cannot be made durable: what the reads show is what a restart
    /// replays. A write logged after the reset's line stays.
    #[tokio::test]
    async fn a_reset_forgets_what_came_before_it_once_durable_and_nothing_when_not() {
        let writes = queued_checkin();
        let held = |writes: &Writes| {
            writes
                .bundles()
                .get("b")
                .map(|b| b.writes.iter().map(|(seq, ..)| *seq).collect::<Vec<_>>())
        };
        let (request, write) = checkin("13", 8);
        writes
            .bundles()
            .entry("b".into())
            .or_default()
            .writes
            .extend([(1, None, write.clone()), (3, None, write.clone())]);
        writes.queue.durable(1);
        // Line 3, after the reset's line 2, is durable already.
        writes.queue.push(3, "b", request, &[write], true);
        let settle = |wait| {
            let writes = Arc::clone(&writes);
            tokio::spawn(async move {
                writes
                    .settle_reset("b", Mark { seq: 2, epoch: 0 }, wait)
                    .await
            })
        };

        writes.queue.resetting("b", 2);
        let (synced, wait) = tokio::sync::oneshot::channel();
        let failed = settle(wait);
        assert_eq!(held(&writes), Some(vec![1, 3]), "nothing before the sync");
        assert!(writes.queue.next_for("b").is_none(), "nor sent meanwhile");
        synced
            .send(Err(std::io::Error::other("disk full")))
            .expect("the settling task waits");
        assert!(failed.await.expect("task").is_err());
        assert_eq!(
            held(&writes),
            Some(vec![1, 3]),
            "a failed reset forgets nothing"
        );
        assert_eq!(
            writes.queue.next_for("b").map(|e| e.seq),
            Some(1),
            "the queue goes on"
        );

        writes.queue.resetting("b", 2);
        let (synced, wait) = tokio::sync::oneshot::channel();
        let done = settle(wait);
        synced.send(Ok(())).expect("the settling task waits");
        done.await.expect("task").expect("durable");
        assert_eq!(held(&writes), Some(vec![3]), "line 3 came after the reset");
        assert_eq!(writes.queue.counts(), (1, 0, 0));
        assert_eq!(writes.queue.next_for("b").map(|e| e.seq), Some(3));
    }

    /// A line that could not be made durable is taken back with every later line of its epoch,
    /// in any bundle (the log refuses them: they were checked on a view that held it), from
    /// the epoch's first failed line whichever line's task comes first; the lines of the epoch
    /// that starts then stay.
    #[test]
    fn a_failed_line_takes_back_the_later_lines_of_its_epoch_only() {
        let writes = Writes::new(false);
        let (_, write) = checkin("12", 7);
        let held = |writes: &Writes, bundle: &str| {
            writes
                .bundles()
                .get(bundle)
                .map(|b| b.writes.iter().map(|(seq, ..)| *seq).collect::<Vec<_>>())
        };
        let add = |writes: &Writes, bundle: &str, seq: u64| {
            let mut bundles = writes.bundles();
            let b = bundles.entry(bundle.into()).or_default();
            b.writes.push((seq, None, write.clone()));
            writes.seq.store(seq, Ordering::Release);
        };
        for (bundle, seq) in [("b", 1), ("b", 2), ("b", 3), ("c", 4)] {
            add(&writes, bundle, seq);
        }

        // Lines 2 and 3 failed, or 3 was refused: 3's task comes first.
        writes.take_back(2, Mark { seq: 3, epoch: 0 });
        assert_eq!(held(&writes, "b"), Some(vec![1]));
        assert_eq!(held(&writes, "c"), Some(vec![]));
        assert_eq!(*writes.fences(), vec![5], "epoch 1 starts at line 5");

        add(&writes, "b", 5);
        // Line 3, refused by the log, is taken back again: nothing more.
        writes.take_back(2, Mark { seq: 2, epoch: 0 });
        assert_eq!(held(&writes, "b"), Some(vec![1, 5]));
        assert_eq!(*writes.fences(), vec![5]);

        writes.forget(Mark { seq: 5, epoch: 1 });
        assert_eq!(held(&writes, "b"), Some(vec![1]));
        assert_eq!(*writes.fences(), vec![5, 6]);
    }

    /// A line that cannot be synced is taken back, so it is never sent, whether or not its
    /// client waited for the answer.
    #[tokio::test]
    async fn a_write_that_cannot_be_made_durable_is_taken_back_and_not_sent() {
        let writes = queued_checkin();
        let (synced, wait) = tokio::sync::oneshot::channel();
        let pending = Pending(Some(writes.settle("b", Mark { seq: 1, epoch: 0 }, wait)));
        synced
            .send(Err(std::io::Error::other("disk full")))
            .expect("the settling task waits");
        assert!(pending.durable().await.is_err());
        assert_eq!(writes.queue.counts(), (0, 0, 0));
    }

    /// `/status` says the state log fails while the latest line could not be saved (since the
    /// first failure, with the latest reason), and stops once one is saved. Before, only the log
    /// said so: `/status`, `/readyz` and the status page looked well on a full disk.
    #[tokio::test]
    async fn status_shows_the_state_log_failing_until_a_line_is_saved() {
        let writes = Arc::new(Writes::new(false));
        let status = crate::prepare::Status::default();
        let settled = |seq: u64, result: std::io::Result<()>| {
            let (synced, wait) = tokio::sync::oneshot::channel();
            let done = writes.settle("b", Mark { seq, epoch: 0 }, wait);
            synced.send(result).expect("the settling task waits");
            done
        };
        let state_log = |writes: &Writes| {
            let body: serde_json::Value =
                serde_json::from_slice(&writes.status(&status)).expect("JSON");
            assert_eq!(body["bundles"], serde_json::json!([]));
            body.get("state_log").cloned()
        };
        assert_eq!(state_log(&writes), None);

        let _ = settled(1, Err(std::io::Error::other("disk full"))).await;
        let first = state_log(&writes).expect("failing");
        assert_eq!(first["state"], "failing");
        assert!(
            first["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("disk full")),
            "{first}"
        );
        let _ = settled(2, Err(std::io::Error::other("still full"))).await;
        let second = state_log(&writes).expect("failing");
        assert_eq!(second["since"], first["since"], "since the first failure");
        assert!(
            second["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("still full")),
            "{second}"
        );

        settled(3, Ok(())).await.expect("durable");
        assert_eq!(state_log(&writes), None);
        // An older line settling late (its task came last) does not tell.
        let _ = settled(2, Err(std::io::Error::other("late"))).await;
        assert_eq!(state_log(&writes), None);
    }
}
