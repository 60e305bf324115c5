//! The bodies of the endpoints (the six of the platform's API documentation that bundles serve,
//! then the rest of its pages and the write bodies), built from records, and the checks that
//! span records. Pages are named as in `records`.
//!
//! A file holds the body its endpoint returns, so each decoder accepts the service's envelope
//! (`{"data": [...], "count": n}`) and, for convenience, the bare list (`[...]`; for the event,
//! also the bare event object). `count` may be left out; when present it must agree. Each body
//! serialises back to the service's shape with `count` computed.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::decode::{decode_array, describe, expected, Diag, ItemDecoder, Obj};
#[cfg(test)]
use super::decode::{Describe, Ty};
use super::records::{
    self, Activity, Attendee, AttendeeCreate, Certificate, CheckinAttendee, CheckinSession,
    CompanyEvent, DateRange, Event, Extra, PageArea, Speaker, Submission, SubmissionType,
    TopicArea,
};

/// A list envelope: `{"data": [...], "count": n}` ([`Data`]: without the count), then any
/// members the file added.
#[derive(Debug, Clone)]
pub(crate) struct List<T, const COUNTED: bool = true> {
    pub(crate) data: Vec<T>,
    pub(crate) extra: Extra,
}

/// A list envelope without a count, as the service writes the activities, the speakers and the
/// company events: `{"data": [...]}`, then any members the file added. A file may still carry
/// `count` (it is checked, and not served).
pub(crate) type Data<T> = List<T, false>;

impl<T, const COUNTED: bool> Default for List<T, COUNTED> {
    fn default() -> Self {
        List {
            data: Vec::new(),
            extra: Extra::new(),
        }
    }
}

impl<T: Serialize, const COUNTED: bool> Serialize for List<T, COUNTED> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        with_extra(s, 1 + usize::from(COUNTED), &self.extra, |m| {
            m.serialize_entry("data", &self.data)?;
            if COUNTED {
                m.serialize_entry("count", &self.data.len())?;
            }
            Ok(())
        })
    }
}

/// Writes a body as a map: its `own` members (written by `members`), then the members a file
/// added, in file order.
fn with_extra<S: Serializer>(
    s: S,
    own: usize,
    extra: &Extra,
    members: impl FnOnce(&mut S::SerializeMap) -> Result<(), S::Error>,
) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(own + extra.len()))?;
    members(&mut m)?;
    for (k, v) in extra {
        m.serialize_entry(k, v)?;
    }
    m.end()
}

/// Checks an optional `count` member against the number the body really has.
fn check_count(o: &mut Obj<'_, '_>, expected: usize, what: &str) {
    if let Some(v) = o.raw("count") {
        let path = o.path_of("count");
        match v.as_u64() {
            Some(n) if n as usize == expected => {}
            Some(n) => o
                .diag()
                .error(&path, format!("count is {n} but {what} {expected}")),
            None => o
                .diag()
                .error(&path, format!("expected an integer, found {}", describe(v))),
        }
    }
}

/// Decodes a list envelope or a bare list. Also returns the path of the records (`data` or the
/// root), for checks that name a record.
pub(crate) fn list<T, const COUNTED: bool>(
    v: &Value,
    path: &str,
    diag: &mut Diag,
    item: ItemDecoder<T>,
) -> Option<(List<T, COUNTED>, String)> {
    if v.is_array() {
        let data = decode_array(v, path, diag, item)?;
        return Some((
            List {
                data,
                extra: Extra::new(),
            },
            path.to_string(),
        ));
    }
    if !v.is_object() {
        // Either is taken: the message says both.
        diag.error(
            path,
            expected("an object or a bare list", path, &describe(v)),
        );
        return None;
    }
    let mut o = Obj::new(v, path, diag)?;
    let data_path = o.path_of("data");
    let data = o.list("data", item);
    if let Some(data) = &data {
        check_count(&mut o, data.len(), "data has");
    }
    let extra = o.finish();
    Some((List { data: data?, extra }, data_path))
}

/// A list the body must hold as its member `key`: `found` is its value and path, if present.
fn member_list<T>(
    found: Option<(&Value, String)>,
    key: &str,
    diag: &mut Diag,
    item: ItemDecoder<T>,
) -> Option<List<T>> {
    let Some((v, path)) = found else {
        diag.error(key, "missing required field");
        return None;
    };
    list(v, &path, diag, item).map(|(l, _)| l)
}

/// Body of `GET /api/v1/event`: one event in a list envelope.
#[derive(Debug, Clone)]
pub(crate) struct EventBody {
    pub(crate) event: Event,
    pub(crate) extra: Extra,
}

impl Serialize for EventBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        with_extra(s, 2, &self.extra, |m| {
            m.serialize_entry("data", std::slice::from_ref(&self.event))?;
            m.serialize_entry("count", &1)
        })
    }
}

/// The event file, for docs/bundles.md.
#[cfg(test)]
pub(crate) const EVENT_DOC: BodyDoc = BodyDoc {
    holds: "`{\"data\": [event], \"count\": 1}`, the bare list `[event]`, or the bare event \
        object (in TOML: its fields at the top, tickets as `[[tickets]]`). Exactly one event.",
    records: &[("data", <Event as Describe>::ty)],
};

/// The event file: the envelope, a bare list, or the bare event object. A bundle is one event,
/// so the list must hold exactly one.
pub(crate) fn event_body(v: &Value, diag: &mut Diag) -> Option<EventBody> {
    let is_bare_event = v.as_object().is_some_and(|m| !m.contains_key("data"));
    if is_bare_event {
        let event = records::event(v, "", diag)?;
        return Some(EventBody {
            event,
            extra: Extra::new(),
        });
    }
    let (list, data_path): (List<_>, _) = list(v, "", diag, records::event)?;
    let n = list.data.len();
    let Some(event) = list.data.into_iter().next().filter(|_| n == 1) else {
        diag.error(&data_path, format!("expected exactly one event, found {n}"));
        return None;
    };
    Some(EventBody {
        event,
        extra: list.extra,
    })
}

/// A payment_details file, for docs/bundles.md.
#[cfg(test)]
pub(crate) const DETAILS_DOC: BodyDoc = BodyDoc {
    holds: "One file per payment, named after its `reference_payment`: \
        `{\"data\": [row, ...], \"count\": n}` or the bare list. A payment without a file \
        answers rows made from the payment, one per item of its `description_payment` (buyer \
        as attendee, `item` the ticket's name, `phone_attende` empty; docs/api.md).",
    records: &[("data", <records::PaymentDetail as Describe>::ty)],
};

/// A payment_details file: the rows of one payment's detail.
pub(crate) fn details_body(v: &Value, diag: &mut Diag) -> Option<List<records::PaymentDetail>> {
    list(v, "", diag, records::payment_detail).map(|(l, _)| l)
}

/// Body of `GET /api/v1/submission/`: two lists and a top-level count of 2.
#[derive(Debug, Clone, Default)]
pub(crate) struct SubmissionBody {
    pub(crate) submission_type: List<SubmissionType>,
    pub(crate) topic_area: List<TopicArea>,
    pub(crate) extra: Extra,
}

impl Serialize for SubmissionBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        with_extra(s, 3, &self.extra, |m| {
            m.serialize_entry("submission_type", &self.submission_type)?;
            m.serialize_entry("topic_area", &self.topic_area)?;
            m.serialize_entry("count", &2)
        })
    }
}

/// The submission file, for docs/bundles.md.
#[cfg(test)]
pub(crate) const SUBMISSION_DOC: BodyDoc = BodyDoc {
    holds: "`{\"submission_type\": {\"data\": [...], \"count\": n}, \"topic_area\": \
        {\"data\": [...], \"count\": n}, \"count\": 2}`; each of the two lists may also be \
        a bare list.",
    records: &[
        ("submission_type.data", <SubmissionType as Describe>::ty),
        ("topic_area.data", <TopicArea as Describe>::ty),
    ],
};

pub(crate) fn submission_body(v: &Value, diag: &mut Diag) -> Option<SubmissionBody> {
    let mut o = Obj::new(v, "", diag)?;
    let types = o
        .raw("submission_type")
        .map(|v| (v, o.path_of("submission_type")));
    let areas = o.raw("topic_area").map(|v| (v, o.path_of("topic_area")));
    check_count(&mut o, 2, "the body has lists:");
    let extra = o.finish();
    let submission_type = member_list(types, "submission_type", diag, records::submission_type);
    let topic_area = member_list(areas, "topic_area", diag, records::topic_area);
    Some(SubmissionBody {
        submission_type: submission_type?,
        topic_area: topic_area?,
        extra,
    })
}

/// A body that holds one list as its member [`NestedRecord::MEMBER`], with a top-level count of 1:
/// `{"submission": {"data": [...], "count": n}, "count": 1}` (`GET /api/v1/submission/list`), and
/// the certificates the same way. The documented certificates example has one certificate, so its
/// top-level `1` could be either; read as the submission list's (whose top-level count the live
/// service answers as 1), it is always 1.
#[derive(Debug, Clone)]
pub(crate) struct Nested<T> {
    pub(crate) list: List<T>,
    pub(crate) extra: Extra,
}

/// A record type served in a [`Nested`] body.
pub(crate) trait NestedRecord: Sized {
    /// The member that holds the list.
    const MEMBER: &'static str;
    /// What `/status` calls the records.
    const COUNTED_AS: &'static str;
    /// The decoder of one record.
    const DECODE: ItemDecoder<Self>;
}

impl NestedRecord for Submission {
    const MEMBER: &'static str = "submission";
    const COUNTED_AS: &'static str = "submissions";
    const DECODE: ItemDecoder<Self> = records::submission;
}

impl NestedRecord for Certificate {
    const MEMBER: &'static str = "certificates";
    const COUNTED_AS: &'static str = "certificates";
    const DECODE: ItemDecoder<Self> = records::certificate;
}

impl<T> Default for Nested<T> {
    fn default() -> Self {
        Nested {
            list: List::default(),
            extra: Extra::new(),
        }
    }
}

impl<T: NestedRecord + Serialize> Serialize for Nested<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        with_extra(s, 2, &self.extra, |m| {
            m.serialize_entry(T::MEMBER, &self.list)?;
            m.serialize_entry("count", &1)
        })
    }
}

/// The submission list file, for docs/bundles.md.
#[cfg(test)]
pub(crate) const SUBMISSION_LIST_DOC: BodyDoc = BodyDoc {
    holds: "`{\"submission\": {\"data\": [...], \"count\": n}, \"count\": 1}`, or the bare \
        list of submissions.",
    records: &[("submission.data", <Submission as Describe>::ty)],
};

/// A [`Nested`] file: the service's body, or a bare list of its records.
pub(crate) fn nested_body<T: NestedRecord>(v: &Value, diag: &mut Diag) -> Option<Nested<T>> {
    if v.is_array() {
        let (list, _) = list(v, "", diag, T::DECODE)?;
        return Some(Nested {
            list,
            extra: Extra::new(),
        });
    }
    let mut o = Obj::new(v, "", diag)?;
    let inner = o.raw(T::MEMBER);
    check_count(&mut o, 1, "the body has lists:");
    let extra = o.finish();
    let inner = inner.map(|v| (v, T::MEMBER.to_string()));
    let list = member_list(inner, T::MEMBER, diag, T::DECODE)?;
    Some(Nested { list, extra })
}

/// Body of `GET /api/v1/hotsite/`: the cover and the page areas, sorted by `ordem`.
#[derive(Debug, Clone, Default)]
pub(crate) struct HotsiteBody {
    pub(crate) capa: Value,
    pub(crate) areas: Vec<PageArea>,
    pub(crate) extra: Extra,
}

impl Serialize for HotsiteBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        with_extra(s, 2, &self.extra, |m| {
            m.serialize_entry("capa", &self.capa)?;
            m.serialize_entry("areasSite", &self.areas)
        })
    }
}

/// The attendees file, for docs/bundles.md.
#[cfg(test)]
pub(crate) const ATTENDEES_DOC: BodyDoc = BodyDoc {
    holds: "`{\"data\": [...], \"count\": n}` as the service answers it, or the bare list. \
        `count` may be left out; when present it must agree. `id_attendees` and `checkin_code` \
        must each be unique; an `email` two participants share (ignoring case) is a warning: \
        the platform registers a person once per event, and a registration or check-in by \
        e-mail finds the first.",
    records: &[("data", <Attendee as Describe>::ty)],
};

/// The activities file, for docs/bundles.md.
#[cfg(test)]
pub(crate) const SESSION_DOC: BodyDoc = BodyDoc {
    holds: "`{\"data\": [...]}` as the service answers it, or the bare list. `id_session` must \
        be unique. `GET /session/getschedule` is derived from it (one entry per time).",
    records: &[("data", <Activity as Describe>::ty)],
};

/// The speakers file, for docs/bundles.md.
#[cfg(test)]
pub(crate) const SPEAKER_DOC: BodyDoc = BodyDoc {
    holds: "`{\"data\": [...]}` as the service answers it, or the bare list. `id_speaker` must \
        be unique.",
    records: &[("data", <Speaker as Describe>::ty)],
};

/// The certificates file, for docs/bundles.md.
#[cfg(test)]
pub(crate) const CERTIFICATES_DOC: BodyDoc = BodyDoc {
    holds: "`{\"certificates\": {\"data\": [...], \"count\": n}, \"count\": 1}` as the \
        service answers it, or the bare list of certificates.",
    records: &[("certificates.data", <Certificate as Describe>::ty)],
};

/// The company events file, for docs/bundles.md.
#[cfg(test)]
pub(crate) const COMPANY_EVENTS_DOC: BodyDoc = BodyDoc {
    holds: "`{\"data\": [...]}` as the service answers it, or the bare list. `id` must be unique; \
        `token` is each event's own token (a secret, served whole).",
    records: &[("data", <CompanyEvent as Describe>::ty)],
};

/// The custom files, for docs/bundles.md.
#[cfg(test)]
pub(crate) const CUSTOM_DOC: BodyDoc = BodyDoc {
    holds:
        "`{\"data\": [events]}`, or the bare list, each event an object with the dotted keys of \
        api-fgv.md (`\"evento.id\"`, `\"evento.data\"`, `\"participantes\"`...), served as \
        written. `evento.data` (and each participant's `inscricao.data_inscricao` for \
        getdatasubscribed) places it in a request's date range.",
    records: &[],
};

/// The hotsite file, for docs/bundles.md.
#[cfg(test)]
pub(crate) const HOTSITE_DOC: BodyDoc = BodyDoc {
    holds: "`{\"capa\": ..., \"areasSite\": [...]}`, or the bare list of areas. `capa` is any \
        JSON value, served as written (`null` when left out); areas are served sorted by `ordem` \
        (stable), and `ordem` values other than 1 to n are a warning.",
    records: &[("areasSite", <PageArea as Describe>::ty)],
};

/// The hotsite file: the service's body, or a bare list of areas. `capa` may be left out (null).
/// Areas are sorted by `ordem` (stable); `ordem` values other than 1..n are a warning.
pub(crate) fn hotsite_body(v: &Value, diag: &mut Diag) -> Option<HotsiteBody> {
    let (capa, mut areas, extra, areas_path) = if v.is_array() {
        let areas = decode_array(v, "", diag, records::page_area);
        (Value::Null, areas, Extra::new(), String::new())
    } else {
        let mut o = Obj::new(v, "", diag)?;
        let capa = o.raw("capa").cloned().unwrap_or(Value::Null);
        let path = o.path_of("areasSite");
        let areas = o.list("areasSite", records::page_area);
        (capa, areas, o.finish(), path)
    };
    if let Some(areas) = &mut areas {
        areas.sort_by_key(|a| a.ordem);
        let expected = (1..=areas.len() as i64).collect::<Vec<_>>();
        let got: Vec<i64> = areas.iter().map(|a| a.ordem).collect();
        if got != expected {
            let listed = got
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            diag.warning(
                &areas_path,
                format!(
                    "ordem values are {listed}; expected 1 to {} with none missing",
                    areas.len()
                ),
            );
        }
    }
    Some(HotsiteBody {
        capa,
        areas: areas?,
        extra,
    })
}

/// What a bundle file holds, for docs/bundles.md: a short text and where its records are.
#[cfg(test)]
pub(crate) struct BodyDoc {
    /// The file's shape, in Markdown.
    pub holds: &'static str,
    /// Each list of records in the envelope: its path (`data`, `submission_type.data`; `""` for
    /// a file that is one record) and the record's type.
    pub records: &'static [(&'static str, TyOf)],
}

/// A record type's description, as [`Describe::ty`] gives it.
#[cfg(test)]
pub(crate) type TyOf = fn() -> Ty;

/// The description of the body of the bundle file `key` (an [`crate::api::API`] key).
#[cfg(test)]
pub(crate) fn doc(key: &str) -> Option<BodyDoc> {
    Some(match key {
        "event" => EVENT_DOC,
        "payments" => super::payments::PAYMENTS_DOC,
        "payment_details" => DETAILS_DOC,
        "submission" => SUBMISSION_DOC,
        "submission_list" => SUBMISSION_LIST_DOC,
        "hotsite" => HOTSITE_DOC,
        "attendees" => ATTENDEES_DOC,
        "session" => SESSION_DOC,
        "speaker" => SPEAKER_DOC,
        "certificates" => CERTIFICATES_DOC,
        "company_events" => COMPANY_EVENTS_DOC,
        "custom_getdata" | "custom_getdatasubscribed" => CUSTOM_DOC,
        _ => return None,
    })
}

/// What a body holds, for `/status`: each kind of record it has and how many, under the names
/// `/status` shows.
pub(crate) trait Records {
    fn records(&self) -> Vec<(&'static str, usize)>;

    /// For a body whose records can be asked for one by one (`GET /attendees/{id}`): each
    /// record's id, in the order of the served `data` list.
    fn ids(&self) -> Option<Vec<i64>> {
        None
    }

    /// For a body answered per request by a date range (the `custom/*` reads): what the range
    /// picks.
    fn ranged(&self) -> Option<RangeBy> {
        None
    }
}

impl Records for Data<CompanyEvent> {
    fn records(&self) -> Vec<(&'static str, usize)> {
        vec![("company_events", self.data.len())]
    }
}

impl Records for EventBody {
    fn records(&self) -> Vec<(&'static str, usize)> {
        vec![("tickets", self.event.tickets.len())]
    }
}

/// A detail file's rows are not counted: `/status` counts the detail files.
impl Records for List<records::PaymentDetail> {
    fn records(&self) -> Vec<(&'static str, usize)> {
        Vec::new()
    }
}

impl Records for SubmissionBody {
    fn records(&self) -> Vec<(&'static str, usize)> {
        vec![
            ("submission_types", self.submission_type.data.len()),
            ("topic_areas", self.topic_area.data.len()),
        ]
    }
}

impl<T: NestedRecord> Records for Nested<T> {
    fn records(&self) -> Vec<(&'static str, usize)> {
        vec![(T::COUNTED_AS, self.list.data.len())]
    }
}

impl Records for HotsiteBody {
    fn records(&self) -> Vec<(&'static str, usize)> {
        vec![("page_areas", self.areas.len())]
    }
}

impl Records for List<Attendee> {
    fn records(&self) -> Vec<(&'static str, usize)> {
        vec![("attendees", self.data.len())]
    }

    fn ids(&self) -> Option<Vec<i64>> {
        Some(self.data.iter().map(|a| a.id_attendees).collect())
    }
}

impl Records for Data<Activity> {
    fn records(&self) -> Vec<(&'static str, usize)> {
        vec![("activities", self.data.len())]
    }

    fn ids(&self) -> Option<Vec<i64>> {
        Some(self.data.iter().map(|a| a.id_session).collect())
    }
}

impl Records for Data<Speaker> {
    fn records(&self) -> Vec<(&'static str, usize)> {
        vec![("speakers", self.data.len())]
    }

    fn ids(&self) -> Option<Vec<i64>> {
        Some(self.data.iter().map(|s| s.id_speaker).collect())
    }
}

/// The body of `GET /session/getschedule`, derived from the activities' body (`session`).
pub(crate) fn schedule_json(activities: &dyn crate::api::FileBody) -> serde_json::Result<Vec<u8>> {
    let activities = activities
        .as_any()
        .downcast_ref::<Data<Activity>>()
        .map_or(&[][..], |d| d.data.as_slice());
    serde_json::to_vec(&super::schedule::schedule(activities))
}

// ---- The bodies of the rest of the documented API ----

/// Reports every record whose key (`key` of the record, read by `get`) an earlier one already
/// has: a lookup by that key would be ambiguous.
fn unique_keys<T, K: Eq + std::hash::Hash + std::fmt::Display>(
    items: &[T],
    path: &str,
    key: &str,
    get: impl Fn(&T) -> Option<K>,
    diag: &mut Diag,
) {
    for (at, k, first) in repeated(items, path, get) {
        diag.error(
            &super::decode::join_key(&at, key),
            format!("{key} {k} is also that of {first}"),
        );
    }
}

/// Each item whose key an earlier item has: (its path, the key, the first one's path).
fn repeated<T, K: Eq + std::hash::Hash>(
    items: &[T],
    path: &str,
    get: impl Fn(&T) -> Option<K>,
) -> Vec<(String, K, String)> {
    let mut seen = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(k) = get(item) else { continue };
        let at = super::decode::join_index(path, i);
        match seen.get(&k) {
            Some(first) => out.push((at, k, String::clone(first))),
            None => {
                seen.insert(k, at);
            }
        }
    }
    out
}

/// Body of `GET /api/v1/attendees`: the service's envelope (`{"data": [...], "count": n}`) or a
/// bare list. `id_attendees` (the `:id` of `GET /attendees/:id`) and `checkin_code` (what a
/// check-in names) must each be unique; an e-mail two participants share is a warning (the
/// platform registers a person once per event, and a registration or look-up by e-mail finds
/// the first).
pub(crate) fn attendees_body(v: &Value, diag: &mut Diag) -> Option<List<Attendee>> {
    let (list, path) = list(v, "", diag, records::attendee)?;
    let email = |a: &Attendee| {
        let e = a.email.trim().to_lowercase();
        (!e.is_empty()).then_some(e)
    };
    for (at, e, first) in repeated(&list.data, &path, email) {
        diag.warning(
            &super::decode::join_key(&at, "email"),
            format!(
                "email {} is also that of {first}: the platform registers a person once per \
                 event, and a registration or check-in by e-mail finds {first}",
                crate::problem::quoted(&e)
            ),
        );
    }
    unique_keys(
        &list.data,
        &path,
        "id_attendees",
        |a| Some(a.id_attendees),
        diag,
    );
    unique_keys(&list.data, &path, "checkin_code", |a| a.checkin_code, diag);
    Some(list)
}

/// Decodes a list envelope (with or without `count`) or a bare list into a [`Data`].
fn data<T>(v: &Value, diag: &mut Diag, item: ItemDecoder<T>) -> Option<(Data<T>, String)> {
    list(v, "", diag, item)
}

/// Body of `GET /api/v1/session`: the activities. `id_session` must be unique; a speaker or a
/// time naming another activity's `id_session` is a warning (served as written).
pub(crate) fn sessions_body(v: &Value, diag: &mut Diag) -> Option<Data<Activity>> {
    let (body, path) = data(v, diag, records::activity)?;
    unique_keys(
        &body.data,
        &path,
        "id_session",
        |a| Some(a.id_session),
        diag,
    );
    for (i, a) in body.data.iter().enumerate() {
        let at = super::decode::join_index(&path, i);
        let named = a
            .speakers
            .iter()
            .map(|s| ("speakers", s.id_session))
            .enumerate()
            .chain(a.times.iter().map(|t| ("times", t.id_session)).enumerate());
        for (j, (list, id)) in named {
            if id != a.id_session {
                diag.warning(
                    &format!("{at}.{list}[{j}].id_session"),
                    format!("is {id}, not the activity's {}", a.id_session),
                );
            }
        }
    }
    Some(body)
}

/// Body of `GET /api/v1/speaker`: the speakers; `id_speaker` must be unique.
pub(crate) fn speakers_body(v: &Value, diag: &mut Diag) -> Option<Data<Speaker>> {
    let (body, path) = data(v, diag, records::speaker)?;
    unique_keys(
        &body.data,
        &path,
        "id_speaker",
        |s| Some(s.id_speaker),
        diag,
    );
    Some(body)
}

/// Body of `GET /api/v1/customclient/events`: a company's events; `id` must be unique.
pub(crate) fn company_events_body(v: &Value, diag: &mut Diag) -> Option<Data<CompanyEvent>> {
    let (body, path) = data(v, diag, records::company_event)?;
    unique_keys(&body.data, &path, "id", |e| Some(e.id), diag);
    Some(body)
}

/// The body of `POST /api/v1/attendees/create`: the `Attendee` object, sent flat or wrapped as
/// `{"attendee": {...}}` (clients do both; the page names the body parameter `attendee`).
pub(crate) fn attendee_create_body(v: &Value, diag: &mut Diag) -> Option<AttendeeCreate> {
    match create_is_wrapped(v) {
        true => records::attendee_create(&v["attendee"], "attendee", diag),
        false => records::attendee_create(v, "", diag),
    }
}

/// Whether a create body is wrapped as `{"attendee": {...}}`: `attendee` is its one member.
pub(crate) fn create_is_wrapped(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|m| m.len() == 1 && m.contains_key("attendee"))
}

/// The body of `POST /api/v1/checkin/attendees`: an array of check-ins, bare or wrapped as
/// `{"attendees": [...]}` (the page's name of the body parameter).
pub(crate) fn checkin_attendees_body(v: &Value, diag: &mut Diag) -> Option<Vec<CheckinAttendee>> {
    array_body(v, "attendees", diag, records::checkin_attendee)
}

/// The body of `POST /api/v1/checkin/sessions`: an array of check-ins at activities, bare or
/// wrapped as `{"sessions": [...]}` (the page's name of the body parameter).
pub(crate) fn checkin_sessions_body(v: &Value, diag: &mut Diag) -> Option<Vec<CheckinSession>> {
    array_body(v, "sessions", diag, records::checkin_session)
}

/// A bare array, or one object whose only member `key` is that array.
fn array_body<T>(v: &Value, key: &str, diag: &mut Diag, item: ItemDecoder<T>) -> Option<Vec<T>> {
    match v
        .as_object()
        .filter(|m| m.len() == 1)
        .and_then(|m| m.get(key))
    {
        Some(inner) => decode_array(inner, key, diag, item),
        None => decode_array(v, "", diag, item),
    }
}

/// What the two institutional reads filter by (api-fgv.md): an event by its date (`evento.data`,
/// `getdata`), or a participant by the date of their registration
/// (`participantes[].inscricao.data_inscricao`, `getdatasubscribed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeBy {
    EventDate,
    Subscription,
}

/// The body of `POST /custom/getdata` or `/custom/getdatasubscribed`: `{"data": [events]}`, each
/// event an object keyed by the page's dotted names (`"evento.id"`), kept as written; the
/// request's date range picks the events (or participants) answered.
#[derive(Debug, Clone)]
pub(crate) struct CustomBody {
    pub(crate) events: Data<Map<String, Value>>,
    pub(crate) by: RangeBy,
}

impl CustomBody {
    /// No events: what an absent file stands for.
    pub(crate) fn empty(by: RangeBy) -> CustomBody {
        CustomBody {
            events: Data::default(),
            by,
        }
    }
}

impl Serialize for CustomBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.events.serialize(s)
    }
}

impl Records for CustomBody {
    fn records(&self) -> Vec<(&'static str, usize)> {
        vec![(
            match self.by {
                RangeBy::EventDate => "custom_events",
                RangeBy::Subscription => "custom_subscribed_events",
            },
            self.events.data.len(),
        )]
    }

    fn ranged(&self) -> Option<RangeBy> {
        Some(self.by)
    }
}

/// One event of a custom file: an object; a missing or unreadable date is a warning (the event
/// then falls in no range).
fn custom_event(v: &Value, path: &str, diag: &mut Diag) -> Option<Map<String, Value>> {
    let Some(o) = v.as_object() else {
        diag.error(path, format!("expected an object, found {}", describe(v)));
        return None;
    };
    if date_of(o.get("evento.data")).is_none() {
        diag.warning(
            &super::decode::join_key(path, "evento.data"),
            "missing or not a YYYY-MM-DD date: the event is in no date range",
        );
    }
    Some(o.clone())
}

/// The date a custom value starts with (`2024-12-22T00:00:00` → 2024-12-22).
pub(crate) fn date_of(v: Option<&Value>) -> Option<chrono::NaiveDate> {
    let text = v?.as_str()?;
    chrono::NaiveDate::parse_from_str(text.get(..10)?, "%Y-%m-%d").ok()
}

/// `custom_getdata`: the events, each in the answer when its date is in the range.
pub(crate) fn custom_getdata_body(v: &Value, diag: &mut Diag) -> Option<CustomBody> {
    let (events, _) = data(v, diag, custom_event)?;
    Some(CustomBody {
        events,
        by: RangeBy::EventDate,
    })
}

/// `custom_getdatasubscribed`: the events, each answered with the participants who registered in
/// the range (an event with none is left out).
pub(crate) fn custom_subscribed_body(v: &Value, diag: &mut Diag) -> Option<CustomBody> {
    let (events, _) = data(v, diag, custom_event)?;
    Some(CustomBody {
        events,
        by: RangeBy::Subscription,
    })
}

/// The body of `POST /api/v1/custom/getdata` and `/custom/getdatasubscribed`: the date range.
pub(crate) fn date_range_body(v: &Value, diag: &mut Diag) -> Option<DateRange> {
    records::date_range(v, "", diag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A documented example of `tests/fixtures/apidocs/` (see its README).
    macro_rules! fixture {
        ($name:literal) => {
            include_str!(concat!("../../tests/fixtures/apidocs/", $name))
        };
    }

    type Decoder<T> = fn(&Value, &mut Diag) -> Option<T>;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("the fixture is JSON")
    }

    /// Decodes `text` with no finding and checks it serialises back to exactly its compact text.
    fn round_trips<T: Serialize>(name: &str, text: &str, decode: Decoder<T>) -> T {
        let v = parse(text);
        let mut diag = Diag::default();

        let body = decode(&v, &mut diag);

        assert!(diag.findings.is_empty(), "{name}: {:?}", diag.lines());
        let body = body.unwrap_or_else(|| panic!("{name} did not decode"));
        let served = serde_json::to_string(&body).expect("serialises");
        assert_eq!(served, v.to_string(), "{name}");
        body
    }

    /// The findings of decoding `v`, as `path: message` (warnings marked).
    fn findings<T>(v: &Value, decode: Decoder<T>) -> (Option<T>, Vec<String>) {
        let mut diag = Diag::default();
        let body = decode(v, &mut diag);
        let lines = diag
            .findings
            .iter()
            .map(|f| match f.severity {
                crate::problem::Severity::Warning => format!("warning {}: {}", f.path, f.message),
                _ => format!("{}: {}", f.path, f.message),
            })
            .collect();
        (body, lines)
    }

    #[test]
    fn every_documented_read_example_decodes_and_serialises_back_exactly() {
        let attendees = round_trips(
            "pessoas-attendees",
            fixture!("pessoas-attendees.json"),
            attendees_body,
        );
        let empty = round_trips(
            "pessoas-attendees-404",
            fixture!("pessoas-attendees-404.json"),
            attendees_body,
        );
        let sessions = round_trips(
            "programacao-session",
            fixture!("programacao-session.json"),
            sessions_body,
        );
        let speakers = round_trips(
            "programacao-speaker",
            fixture!("programacao-speaker.json"),
            speakers_body,
        );
        let certificates = round_trips(
            "certificados-certificates",
            fixture!("certificados-certificates.json"),
            nested_body::<Certificate>,
        );
        let events = round_trips(
            "empresas-events",
            fixture!("empresas-events.json"),
            company_events_body,
        );

        assert_eq!(attendees.data.len(), 3);
        assert_eq!(attendees.data[0].checkin_code, Some(11));
        assert_eq!(attendees.data[2].checkin_code, None, "left out, not null");
        assert_eq!(
            attendees.data[2]
                .registration_date
                .value()
                .map(|d| d.as_str()),
            Some("20/08/2022")
        );
        assert!(empty.data.is_empty());
        let activity = &sessions.data[0];
        assert_eq!(activity.ticket_price.to_string(), "10.0000", "as written");
        assert_eq!((activity.speakers.len(), activity.times.len()), (2, 1));
        assert_eq!(speakers.data[0].id_speaker, 117452);
        assert_eq!(certificates.list.data[0].id_pessoa, 1234);
        assert_eq!(
            events.data[0].privacy.type_,
            "Privado - com link de acessso"
        );
        assert_eq!(events.data[0].token.as_str(), "123456789");
    }

    #[test]
    fn every_write_body_decodes_and_serialises_back_exactly() {
        let attendee = round_trips(
            "pessoas-attendee",
            fixture!("pessoas-attendee.json"),
            attendee_create_body,
        );
        let checkins = round_trips(
            "models-checkin-attendees",
            fixture!("models-checkin-attendees.json"),
            checkin_attendees_body,
        );
        let sessions = round_trips(
            "models-checkin-sessions",
            fixture!("models-checkin-sessions.json"),
            checkin_sessions_body,
        );

        let range = round_trips(
            "api-fgv-date-range",
            fixture!("api-fgv-date-range.json"),
            date_range_body,
        );

        assert_eq!(attendee.registration.id_ticket_price.0, 0);
        assert_eq!(
            range.dataFim.as_ref().map(|d| d.as_str()),
            Some("2024-12-31")
        );
        assert_eq!(attendee.registration_confirmed, Some(true));
        assert_eq!(checkins[0].checkin_code.as_str(), "11");
        assert_eq!(
            (sessions[0].id_attendees.0, sessions[0].id_session.0),
            (9, 155553)
        );
    }

    #[test]
    fn write_bodies_are_taken_flat_or_wrapped() {
        let flat = parse(fixture!("pessoas-attendee.json"));
        let wrapped = json!({ "attendee": flat.clone() });
        let (a, problems) = findings(&wrapped, attendee_create_body);
        assert!(problems.is_empty(), "{problems:?}");
        let a = serde_json::to_value(a.expect("the wrapped attendee")).expect("serialises");
        assert_eq!(a, flat);

        // Durato/competition-system's body: no badge name, gender or photo.
        let minimal = parse(
            r#"{"name": "Ana", "email": "ana@x.com", "registration_confirmed": false,
                "registration": {"id_ticket_price": 7, "price": 10.00}}"#,
        );
        let (a, problems) = findings(&minimal, attendee_create_body);
        assert!(problems.is_empty(), "{problems:?}");
        let a = a.expect("the minimal attendee");
        assert_eq!((a.bagde_name, a.gender, a.photo), (None, None, None));
        assert_eq!(
            a.registration.price.map(|p| p.to_string()).as_deref(),
            Some("10.00")
        );
        let (a, problems) = findings(
            &json!({"name": "Bia", "email": "bia@x.com", "registration": {"id_ticket_price": 7}}),
            attendee_create_body,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert!(a.expect("no price").registration.price.is_none());

        let items = parse(fixture!("models-checkin-attendees.json"));
        let (c, problems) = findings(&json!({ "attendees": items }), checkin_attendees_body);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(c.map(|c| c.len()), Some(1));
        let items = parse(fixture!("models-checkin-sessions.json"));
        let (c, problems) = findings(&json!({ "sessions": items }), checkin_sessions_body);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(c.map(|c| c.len()), Some(1));
    }

    #[test]
    fn bad_attendees_give_every_problem_with_its_path() {
        let mut v = parse(fixture!("pessoas-attendees.json"));
        v["data"][0]["registration_date"] = json!("2022-08-20");
        v["data"][0]["registration_hour"] = json!("11h50");
        v["data"][1]["checkin_code"] = json!("25");
        v["data"][1]["confirmed"] = json!("false");
        v["data"][2]["id_attendees"] = json!(9);
        v["data"][2]["checkin_code"] = json!(11);
        v["count"] = json!(4);

        let (body, problems) = findings(&v, attendees_body);

        assert!(body.is_none());
        assert_eq!(
            problems,
            [
                "data[0].registration_date: \"2022-08-20\" is not a DD/MM/YYYY date, nor empty",
                "data[0].registration_hour: \"11h50\" is not an HH:MM hour, nor empty",
                "data[1].checkin_code: expected an integer, found the string \"25\"",
                "data[1].confirmed: expected true or false, found the string \"false\"",
            ]
        );
        v["data"][0]["registration_date"] = json!("");
        v["data"][0]["registration_hour"] = json!("");
        v["data"][1]["checkin_code"] = json!(25);
        v["data"][1]["confirmed"] = json!(true);
        // One person twice, by another case: a warning (a registration finds the first).
        let first = v["data"][0]["email"]
            .as_str()
            .expect("an e-mail")
            .to_uppercase();
        v["data"][1]["email"] = json!(format!(" {first}"));
        let (body, problems) = findings(&v, attendees_body);
        assert!(body.is_some(), "duplicates are reported, the list is kept");
        let shared = first.to_lowercase();
        assert_eq!(
            problems,
            [
                "count: count is 4 but data has 3".to_string(),
                format!("warning data[1].email: email {shared:?} is also that of data[0]: the platform registers a person once per event, and a registration or check-in by e-mail finds data[0]"),
                "data[2].id_attendees: id_attendees 9 is also that of data[0]".to_string(),
                "data[2].checkin_code: checkin_code 11 is also that of data[0]".to_string(),
            ]
        );
    }

    #[test]
    fn bad_activities_and_speakers_give_problems_with_their_paths() {
        let mut v = parse(fixture!("programacao-session.json"));
        v["data"][0]["ticket_price"] = json!("10.00");
        v["data"][0]["speakers"][1]["resume"] = json!(3);
        v["data"][0]["times"][0]["date"] = json!("01/01/2020");
        v["data"][0]["times"][0]["end_time"] = json!("11h");
        v["data"][0]["venue"] = Value::Null;

        let (body, problems) = findings(&v, sessions_body);

        assert!(body.is_none());
        assert_eq!(
            problems,
            [
                "data[0].ticket_price: expected a number, found the string \"10.00\"",
                "data[0].speakers[1].resume: expected a string, found the number 3",
                "data[0].times[0].date: \"01/01/2020\" is not a YYYY-MM-DDTHH:MM:SS date-time",
                "data[0].times[0].end_time: \"11h\" is not an HH:MM hour",
            ]
        );

        let mut v = parse(fixture!("programacao-session.json"));
        v["data"][0]["speakers"][1]["id_session"] = json!(1);
        let second = v["data"][0].clone();
        v["data"].as_array_mut().expect("a list").push(second);
        let (_, problems) = findings(&v, sessions_body);
        assert_eq!(
            problems,
            [
                "data[1].id_session: id_session 155553 is also that of data[0]",
                "warning data[0].speakers[1].id_session: is 1, not the activity's 155553",
                "warning data[1].speakers[1].id_session: is 1, not the activity's 155553",
            ]
        );

        let (_, problems) = findings(&json!([{"id_event": 1}]), speakers_body);
        assert_eq!(problems[0], "[0].id_speaker: missing required field");
        assert_eq!(
            problems.len(),
            9,
            "all but id_event and resume (nullable): {problems:?}"
        );
    }

    #[test]
    fn bad_certificates_and_company_events_give_problems_with_their_paths() {
        let mut v = parse(fixture!("certificados-certificates.json"));
        v["certificates"]["count"] = json!(2);
        v["count"] = json!(3);
        v["certificates"]["data"][0]["id_pessoa"] = json!("1234");
        let (body, problems) = findings(&v, nested_body::<Certificate>);
        assert!(body.is_none());
        assert_eq!(
            problems,
            [
                "count: count is 3 but the body has lists: 1",
                "certificates.data[0].id_pessoa: expected an integer, found the string \"1234\"",
            ]
        );
        v["certificates"]["data"][0]["id_pessoa"] = json!(1234);
        let (_, problems) = findings(&v, nested_body::<Certificate>);
        assert_eq!(problems[1], "certificates.count: count is 2 but data has 1");

        let mut v = parse(fixture!("empresas-events.json"));
        v["data"][0]["token"] = json!(987654321);
        v["data"][0]["start_date"] = json!("01/01/2024");
        v["data"][0]["publicated"] = json!(1);
        v["data"][0]["privacy"] = json!({"id": 2});
        let (body, problems) = findings(&v, company_events_body);
        assert!(body.is_none());
        assert_eq!(
            problems,
            [
                "data[0].token: expected a string, found a number",
                "data[0].start_date: \"01/01/2024\" is not a YYYY-MM-DD date",
                "data[0].publicated: expected true or false, found the number 1",
                "data[0].privacy.type: missing required field",
            ]
        );
        assert!(
            problems.iter().all(|p| !p.contains("987654321")),
            "a token is never quoted"
        );
    }

    #[test]
    fn a_company_events_token_is_never_shown_whole() {
        let v = parse(fixture!("empresas-events.json"));
        let (body, _) = findings(&v, company_events_body);

        let shown = format!("{body:?}");

        assert!(!shown.contains("123456789"), "{shown}");
        assert!(shown.contains("EventToken(1234…)"), "{shown}");
    }

    #[test]
    fn bad_write_bodies_give_problems_with_their_paths() {
        let v = json!({"attendee": {"name": " ", "email": "a@b.c", "photo": 1,
            "registration": {"id_ticket_price": "7x"}}});
        let (body, problems) = findings(&v, attendee_create_body);
        assert!(body.is_none());
        assert_eq!(
            problems,
            [
                "attendee.photo: expected a string, found the number 1",
                "attendee.registration.id_ticket_price: expected an integer (or its digits as a string), found the string \"7x\"",
                "attendee.name: must not be blank",
            ]
        );
        let (_, problems) = findings(&json!({"name": "A"}), attendee_create_body);
        assert_eq!(
            problems,
            [
                "email: missing required field",
                "registration: missing required field"
            ]
        );

        let v = json!([{"checkin_code": 11.5, "checkin": 2, "checkin_date": "2020-01-01T09:30:00"},
            {"checkin_code": "12", "checkin": 0, "checkin_date": "01/01/2020 09:30"},
            {"checkin_code": "13", "checkin": 1, "checkin_date": "2020-01-01T09:30:00.123-03:00"}]);
        let (body, problems) = findings(&v, checkin_attendees_body);
        assert!(body.is_none());
        assert_eq!(
            problems,
            [
                "[0].checkin_code: expected a string (or an integer), found the number 11.5",
                "[0].checkin: is 2; 1 checks in, 0 undoes a check-in",
                "[1].checkin_date: \"01/01/2020 09:30\" is not a date-time such as 2020-01-01T10:00:00",
            ]
        );
        // An integer's digits as a string are taken, as the service's framework takes them.
        let v = json!([{"id_attendees": "9", "id_session": "155553", "checkin": "1",
            "checkin_date": "2020-01-01T09:30:00"}]);
        let (body, problems) = findings(&v, checkin_sessions_body);
        assert!(problems.is_empty(), "{problems:?}");
        let taken = body.expect("taken");
        let one = &taken[0];
        assert_eq!(
            (one.id_attendees.0, one.id_session.0, one.checkin.0),
            (9, 155553, 1)
        );
        let v = json!([{"id_attendees": "9.0", "id_session": " 1", "checkin": "2",
            "checkin_date": "2020-01-01T09:30:00"}]);
        let (_, problems) = findings(&v, checkin_sessions_body);
        assert_eq!(
            problems,
            [
                "[0].id_attendees: expected an integer (or its digits as a string), found the string \"9.0\"",
                "[0].id_session: expected an integer (or its digits as a string), found the string \" 1\"",
                "[0].checkin: is 2; 1 checks in, 0 undoes a check-in",
            ]
        );
        let v = json!({"dataInicio": "2024-12-31", "dataFim": "2024-12-01"});
        let (body, problems) = findings(&v, date_range_body);
        assert!(body.is_some(), "a cross-field error keeps the fields");
        assert_eq!(
            problems,
            ["dataFim: 2024-12-01 is before dataInicio 2024-12-31"]
        );
        let (_, problems) = findings(&json!({"dataFim": "31/12/2024"}), date_range_body);
        assert_eq!(
            problems,
            ["dataFim: \"31/12/2024\" is not a YYYY-MM-DD date"]
        );
        let (body, problems) = findings(&json!({}), date_range_body);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(body.is_some_and(|r| r.dataInicio.is_none() && r.dataFim.is_none()));
        let v = json!({"sessions": {"id_attendees": 9}});
        let (_, problems) = findings(&v, checkin_sessions_body);
        assert_eq!(
            problems,
            ["sessions: expected an array at sessions, found an object"]
        );
    }

    #[test]
    fn every_fixture_is_json_and_listed_in_its_readme() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/apidocs");
        let readme = std::fs::read_to_string(dir.join("README.md")).expect("the README");
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("the fixtures folder") {
            let name = entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            if name == "README.md" {
                continue;
            }
            let text = std::fs::read_to_string(dir.join(&name)).expect("a fixture");
            assert!(
                serde_json::from_str::<Value>(&text).is_ok(),
                "{name} is not JSON"
            );
            assert!(
                readme.contains(&format!("| `{name}` |")),
                "{name} not in the README"
            );
            names.push(name);
        }
        let listed = readme.matches("| `").count();
        assert_eq!(
            listed,
            names.len(),
            "the README lists a file that is not there"
        );
    }
}
