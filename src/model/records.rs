//! The records of the platform's API documentation (event, ticket, price, payment, submission
//! type, topic area, page area, sponsor item, then the pages named below) and those only the live
//! service's answers show (payment detail row, submission, author).
//!
//! A page named here (pessoas.md, programacao.md, certificados.md, empresas.md, models.md,
//! api-fgv.md) is a page of that documentation, `even3dev/apidocs` at commit 5772319;
//! tests/fixtures/apidocs/README.md lists the examples taken from each.
//!
//! Each record is declared once, with `record!`: its field list is the struct, the order in
//! which it is served (serde's derive keeps declaration order) and the order in which its decoder
//! reads the file, each field by the rule its type picks (`decode::Field`); in test builds also
//! its `FIELDS`, from which docs/bundles.md's field tables are generated. `extra` holds
//! whatever the file has beyond the declared fields, in file order, and is served after. Numbers
//! that the documentation calls decimal are `serde_json::Number`, which keeps their text
//! (`10.00` stays `10.00`).
//!
//! A macro rather than `#[derive(Deserialize)]`: serde stops at a record's first error, and its
//! messages name Rust types; a bundle's check reports every problem of every record with its JSON
//! path, in the words the tests and the docs show.

use serde::Serialize;
use serde_json::{Map, Number, Value};

use super::decode::{Diag, Field, Obj, Omittable, Record, TextFormat};
use super::formats::{BrDate, CheckinDate, DateTime, DecimalText, HourMinute, IsoDate};

/// Fields a file has beyond its record's declared fields, in file order.
pub(crate) type Extra = Map<String, Value>;

/// Declares a record from one field list: the struct (served in field order, then `extra`), its
/// decoder function and its [`Record`] impl.
///
/// A field is `name: Type`, read by the rule of [`Field`] for its type; `name as "key": Type`
/// when the file's key is not a Rust name; `name: Option<T> [omittable]` for a field that may be
/// left out and is then not served either. After the fields, `check(o) { ... }` runs once every
/// field has been read (each is an `Option` there, `None` when it had an error) with the object
/// `o`, for warnings that span fields.
macro_rules! record {
    (
        $(#[$meta:meta])*
        pub(crate) struct $name:ident, decoded by $decoder:ident {
            $(
                $(#[$field_meta:meta])*
                $field:ident $(as $key:literal)? : $ty:ty $([$how:ident])?
            ),* $(,)?
        }
        $(check($o:ident) $check:block)?
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Serialize)]
        pub(crate) struct $name {
            $(
                $(#[$field_meta])*
                $(#[serde(rename = $key)])?
                // `[omittable]`: not served when absent (the cfg_attr only consumes the marker).
                $(#[serde(skip_serializing_if = "Option::is_none")] #[cfg_attr(any(), $how)])?
                pub(crate) $field: $ty,
            )*
            #[serde(flatten)]
            pub(crate) extra: Extra,
        }

        #[doc = concat!("Decodes a [`", stringify!($name), "`] at `path`, reporting every problem.")]
        #[allow(non_snake_case)]
        pub(crate) fn $decoder(v: &Value, path: &str, diag: &mut Diag) -> Option<$name> {
            record!(@body v, path, diag, $name, $($o)?; $($field $(as $key)? : $ty $([$how])?),* ; $($check)?)
        }

        impl Record for $name {
            fn decode(v: &Value, path: &str, diag: &mut Diag) -> Option<Self> {
                $decoder(v, path, diag)
            }
            #[cfg(test)]
            const NAME: &'static str = stringify!($name);
            #[cfg(test)]
            const FIELDS: &'static [$crate::model::decode::FieldDoc] = &[$(
                $crate::model::decode::FieldDoc {
                    key: record!(@key $field $($key)?),
                    ty: <$ty as $crate::model::decode::Describe>::ty,
                    presence: record!(@presence $ty $(, $how)?),
                },
            )*];
        }
    };
    (@presence $ty:ty) => {
        if <$ty as $crate::model::decode::Describe>::NULLABLE {
            $crate::model::decode::Presence::Nullable
        } else {
            $crate::model::decode::Presence::Required
        }
    };
    (@presence $ty:ty, omittable) => { $crate::model::decode::Presence::Optional };
    // Every field is read (so every problem is reported) before the `?`s decide whether the
    // record is whole.
    (@body $v:ident, $path:ident, $diag:ident, $name:ident, $o:ident;
        $($field:ident $(as $key:literal)? : $ty:ty $([$how:ident])?),* ; $($check:block)?) => {{
        let mut $o = Obj::new($v, $path, $diag)?;
        $(let $field: Option<$ty> = record!(@read $o, record!(@key $field $($key)?), $ty $(, $how)?);)*
        $($check)?
        let extra = $o.finish();
        Some($name { $($field: $field?,)* extra })
    }};
    (@body $v:ident, $path:ident, $diag:ident, $name:ident, ; $($rest:tt)*) => {
        record!(@body $v, $path, $diag, $name, o; $($rest)*)
    };
    (@key $field:ident) => { stringify!($field) };
    (@key $field:ident $key:literal) => { $key };
    (@read $o:ident, $key:expr, $ty:ty) => { <$ty as Field>::read(&mut $o, $key) };
    (@read $o:ident, $key:expr, $ty:ty, omittable) => {
        <$ty as Omittable>::read_omittable(&mut $o, $key)
    };
}

record! {
    /// Event record (documentation, `GET /event`).
    pub(crate) struct Event, decoded by event {
        id_event: i64,
        title: String,
        url: String,
        start_date: DateTime,
        end_date: DateTime,
        start_date_registration: BrDate,
        end_date_registration: BrDate,
        summary: String,
        description: Option<String>,
        url_image: String,
        credit_hour: Number,
        country: String,
        state: String,
        city: String,
        venue: String,
        latitude: DecimalText,
        longitude: DecimalText,
        banner: Option<String>,
        tickets: Vec<Ticket>,
    }
    check(o) {
        not_negative(&mut o, "credit_hour", credit_hour.as_ref().and_then(Number::as_f64));
        // A registration names its price by id_ticket_price alone: two prices with one id
        // are one price to it (the first in file order).
        let mut seen: std::collections::HashMap<i64, String> = Default::default();
        let at = o.path_of("tickets");
        for (i, t) in tickets.iter().flatten().enumerate() {
            for (j, p) in t.prices.iter().enumerate() {
                let here = format!("{at}[{i}].prices[{j}].id_ticket_price");
                match seen.get(&p.id_ticket_price) {
                    Some(first) => o.diag().warning(
                        &here,
                        format!(
                            "{} is also {first}'s: a registration taking it gets the first",
                            p.id_ticket_price
                        ),
                    ),
                    None => {
                        seen.insert(p.id_ticket_price, here);
                    }
                }
            }
        }
    }
}

/// A count or an amount the documentation allows from 0: a negative one is served as it is,
/// with a warning.
fn not_negative(o: &mut Obj<'_, '_>, key: &str, value: Option<f64>) {
    if let Some(n) = value.filter(|n| *n < 0.0) {
        let at = o.path_of(key);
        o.diag().warning(&at, format!("is {n}, below 0"));
    }
}

record! {
    /// Ticket type (documentation, `GET /event`).
    pub(crate) struct Ticket, decoded by ticket {
        title: String,
        registration_quantity: i64,
        prices: Vec<TicketPrice>,
    }
    check(o) {
        not_negative(&mut o, "registration_quantity", registration_quantity.map(|n| n as f64));
        // All tiers of one ticket carry the same id_ticket (documentation, `GET /event`); the
        // service's data is taken as it is, so a mismatch is a warning.
        if let Some(first) = prices.as_ref().and_then(|p| p.first()) {
            for (i, p) in prices.iter().flatten().enumerate().skip(1) {
                if p.id_ticket != first.id_ticket {
                    let at = format!("{}[{i}].id_ticket", o.path_of("prices"));
                    o.diag().warning(
                        &at,
                        format!(
                            "id_ticket {} differs from {} of the ticket's first price",
                            p.id_ticket, first.id_ticket
                        ),
                    );
                }
            }
        }
    }
}

record! {
    /// Price tier of a ticket (documentation, `GET /event`). Tiers keep their file order.
    pub(crate) struct TicketPrice, decoded by ticket_price {
        id_ticket: i64,
        id_ticket_price: i64,
        price: Number,
        start_date: DateTime,
        due_date: DateTime,
        registration_quantity_price: i64,
    }
    check(o) {
        not_negative(&mut o, "price", price.as_ref().and_then(Number::as_f64));
        let sold = registration_quantity_price.map(|n| n as f64);
        not_negative(&mut o, "registration_quantity_price", sold);
    }
}

record! {
    /// Payment record (documentation, `GET /payments`).
    pub(crate) struct Payment, decoded by payment {
        id_event: i64,
        id_payment: i64,
        reference_payment: String,
        buyer: String,
        email_buyer: String,
        country_buyer: String,
        document_buyer: String,
        description_payment: String,
        date_payment: BrDate,
        hour_payment: HourMinute,
        type_payment: String,
        method_payment: String,
        amount_payment: Number,
        amount_receive_payment: Number,
        status_payment: String,
        cupom_payment: String,
        note_payment: String,
    }
    check(o) {
        if let (Some(paid), Some(received)) = (&amount_payment, &amount_receive_payment) {
            if let (Some(p), Some(r)) = (paid.as_f64(), received.as_f64()) {
                if r > p {
                    let at = o.path_of("amount_receive_payment");
                    o.diag()
                        .warning(&at, format!("{received} is above amount_payment {paid}"));
                }
            }
        }
    }
}

record! {
    /// One row of a payment's detail (undocumented: as the live service answers). `phone_attende` is the service's spelling.
    pub(crate) struct PaymentDetail, decoded by payment_detail {
        id_event: i64,
        id_payment: i64,
        reference_payment: String,
        attendee: String,
        email_attendee: String,
        document_attendee: String,
        phone_attende: String,
        description: String,
        item: String,
        amount: Number,
    }
}

/// What a payment's derived detail rows repeat of it.
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct Purchase {
    pub(crate) id_event: i64,
    pub(crate) id_payment: i64,
    pub(crate) reference_payment: String,
    pub(crate) buyer: String,
    pub(crate) email_buyer: String,
    pub(crate) document_buyer: String,
    pub(crate) description_payment: String,
    pub(crate) amount_payment: Number,
}

/// The most rows one purchase is split into: a description claiming more is one row.
const MAX_ROWS: u64 = 1000;

impl PaymentDetail {
    /// The rows served for a payment that has no detail file of its own, as the documented
    /// example shows them (observed.md): one row per item of the purchase, `description`
    /// `"Ingresso"`, `item` the ticket's name, read from `description_payment` written as the
    /// service writes it (`"1x Estudantes"`, `"2x Geral, 1x Estudante"`), `amount` the payment's
    /// amount split evenly (to its written decimals, the first rows taking the remainder). A
    /// description in another form is one row with the whole description as `item`.
    pub(crate) fn rows_of(p: &Purchase) -> Vec<PaymentDetail> {
        let total = |items: &[(u64, &str)]| {
            items
                .iter()
                .try_fold(0u64, |sum, (n, _)| sum.checked_add(*n))
        };
        let items = purchase_items(&p.description_payment)
            .filter(|items| total(items).is_some_and(|n| n <= MAX_ROWS))
            .unwrap_or_else(|| vec![(1, p.description_payment.trim())]);
        let n: u64 = items.iter().map(|(n, _)| n).sum();
        let amounts = split_amount(&p.amount_payment, n)
            .unwrap_or_else(|| vec![p.amount_payment.clone(); n as usize]);
        let names = items
            .iter()
            .flat_map(|(count, name)| std::iter::repeat_n(*name, *count as usize));
        names
            .zip(amounts)
            .map(|(item, amount)| PaymentDetail {
                id_event: p.id_event,
                id_payment: p.id_payment,
                reference_payment: p.reference_payment.clone(),
                attendee: p.buyer.clone(),
                email_attendee: p.email_buyer.clone(),
                document_attendee: p.document_buyer.clone(),
                phone_attende: String::new(),
                description: "Ingresso".into(),
                item: item.to_string(),
                amount,
                extra: Extra::new(),
            })
            .collect()
    }

    /// The rows of a payment (see [`PaymentDetail::rows_of`]).
    #[cfg(test)]
    pub(crate) fn derived_from(p: &Payment) -> Vec<Self> {
        PaymentDetail::rows_of(&Purchase {
            id_event: p.id_event,
            id_payment: p.id_payment,
            reference_payment: p.reference_payment.clone(),
            buyer: p.buyer.clone(),
            email_buyer: p.email_buyer.clone(),
            document_buyer: p.document_buyer.clone(),
            description_payment: p.description_payment.clone(),
            amount_payment: p.amount_payment.clone(),
        })
    }
}

/// `"2x Geral, 1x Estudante"` → `[(2, "Geral"), (1, "Estudante")]`; `None` in another form.
fn purchase_items(description: &str) -> Option<Vec<(u64, &str)>> {
    description
        .split(", ")
        .map(|part| {
            let (count, name) = part.trim().split_once("x ")?;
            let count: u64 = count.trim().parse().ok().filter(|n| *n > 0)?;
            let name = name.trim();
            (!name.is_empty()).then_some((count, name))
        })
        .collect()
}

/// `total` split into `n` amounts written with its decimals, the first ones a unit more when it
/// does not divide evenly; `None` for a number not written as plain decimals.
fn split_amount(total: &Number, n: u64) -> Option<Vec<Number>> {
    let text = total.to_string();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.as_str()),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty()
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let scale = fraction.len();
    let units: u128 = format!("{whole}{fraction}").parse().ok()?;
    let (each, rest) = (units / u128::from(n.max(1)), units % u128::from(n.max(1)));
    (0..n)
        .map(|i| {
            let u = each + u128::from(u128::from(i) < rest);
            let s = format!("{u:0>width$}", width = scale + 1);
            let (w, f) = s.split_at(s.len() - scale);
            let sign = if negative && u > 0 { "-" } else { "" };
            let text = if scale == 0 {
                format!("{sign}{w}")
            } else {
                format!("{sign}{w}.{f}")
            };
            serde_json::from_str(&text).ok()
        })
        .collect()
}

record! {
    /// Submission type (documentation, `GET /submission/`). `title` may hold a `{{name}}`
    /// placeholder, served as stored.
    pub(crate) struct SubmissionType, decoded by submission_type {
        id_event: i64,
        id_submissiontype: i64,
        url_roles: String,
        title: String,
    }
}

record! {
    /// Topic area (documentation, `GET /submission/`).
    pub(crate) struct TopicArea, decoded by topic_area {
        id_event: i64,
        id_topicarea: i64,
        title: String,
    }
}

record! {
    /// Submission of the submission list (undocumented: as the live service answers).
    pub(crate) struct Submission, decoded by submission {
        id_event: i64,
        id_submission: i64,
        title: String,
        status: String,
        id_submission_type: i64,
        submission_type: String,
        topic_area: String,
        id_topic_area: i64,
        abstract_ as "abstract": String,
        proceedings_abstract: String,
        proceedings_full_paper: String,
        date: DateTime,
        start_time: HourMinute,
        end_time: HourMinute,
        location: Option<String>,
        author: Vec<Author>,
    }
}

record! {
    /// Author of a submission (undocumented: as the live service answers).
    pub(crate) struct Author, decoded by author {
        id_event: i64,
        id_submission: i64,
        name: String,
        email: String,
        is_presenter: bool,
        author_order: i64,
    }
}

record! {
    /// Area of the event's web page (documentation: the web page areas endpoint). The service's camelCase
    /// and Portuguese names.
    #[allow(non_snake_case)]
    pub(crate) struct PageArea, decoded by page_area {
        idAreaSite: Option<i64>,
        titulo: String,
        subtitulo: Option<String>,
        ordem: i64,
        jsonObj: Vec<PageItem>,
        template: String,
    }
}

record! {
    /// Item of a page area's `jsonObj`. Only the sponsors item is shown (titulo, urlImagem, link,
    /// id); items of other areas may carry other fields. So each sponsor field is checked for its
    /// type when present and served first, in the table's order, and none is required.
    #[allow(non_snake_case)]
    pub(crate) struct PageItem, decoded by page_item {
        titulo: Option<String> [omittable],
        urlImagem: Option<String> [omittable],
        link: Option<String> [omittable],
        id: Option<i64> [omittable],
    }
}

// ---- The rest of the documented API (the pages of even3dev/apidocs 5772319) ----

/// A text field that is either empty (`""`) or in the format `T`: the attendee's
/// `registration_date` and `registration_hour` are `""` for people who never registered through
/// a form (pessoas.md). Served as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OrEmpty<T> {
    Empty,
    Value(T),
}

#[cfg(test)]
impl<T> OrEmpty<T> {
    /// The value, unless empty.
    pub(crate) fn value(&self) -> Option<&T> {
        match self {
            OrEmpty::Empty => None,
            OrEmpty::Value(t) => Some(t),
        }
    }
}

impl<T: Serialize> Serialize for OrEmpty<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OrEmpty::Empty => s.serialize_str(""),
            OrEmpty::Value(t) => t.serialize(s),
        }
    }
}

impl<T: TextFormat> Field for OrEmpty<T> {
    fn read(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self> {
        let text: String = o.required(key)?;
        if text.is_empty() {
            return Some(OrEmpty::Empty);
        }
        match T::parse(&text) {
            Ok(t) => Some(OrEmpty::Value(t)),
            Err(message) => {
                let path = o.path_of(key);
                o.diag().error(&path, format!("{message}, nor empty"));
                None
            }
        }
    }
}

#[cfg(test)]
impl<T: super::decode::Describe> super::decode::Describe for OrEmpty<T> {
    fn ty() -> super::decode::Ty {
        super::decode::Ty::OrEmpty(Box::new(T::ty()))
    }
}

#[cfg(test)]
super::decode::describe_plain! {
    EventToken => "string (a secret token)", "\"event-token\"";
}

/// An event's own token, as a company's event list carries it. A secret: `Debug` and every
/// message show at most its first characters (`problem::token_hint`); served whole.
#[derive(Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub(crate) struct EventToken(String);

#[cfg(test)]
impl EventToken {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for EventToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EventToken({})", crate::token::token_hint(&self.0))
    }
}

impl Field for EventToken {
    /// A required string; a value of another kind is named by its kind only, never quoted.
    fn read(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self> {
        let path = o.path_of(key);
        let Some(v) = o.raw(key) else {
            o.diag().error(&path, "missing required field");
            return None;
        };
        match v {
            Value::String(s) => Some(EventToken(s.clone())),
            other => {
                let kind = match other {
                    Value::Null => "null",
                    Value::Bool(_) => "a boolean",
                    Value::Number(_) => "a number",
                    Value::Array(_) => "an array",
                    _ => "an object",
                };
                o.diag()
                    .error(&path, format!("expected a string, found {kind}"));
                None
            }
        }
    }
}

record! {
    /// Participant (pessoas.md, `GET /attendees`). `bagde_name` is the service's spelling.
    /// `checkin_code` may be left out (the documentation's third record has none) and is then
    /// not served either; `registration_date` and `registration_hour` may be `""`.
    pub(crate) struct Attendee, decoded by attendee {
        id_attendees: i64,
        id_event: i64,
        checkin_code: Option<i64> [omittable],
        name: String,
        bagde_name: String,
        email: String,
        gender: String,
        photo: String,
        document: String,
        confirmed: bool,
        registration_category: String,
        registration_date: OrEmpty<BrDate>,
        registration_hour: OrEmpty<HourMinute>,
    }
}

record! {
    /// Activity (programacao.md, `GET /session`). `ticket_price` keeps its text (`10.0000`).
    /// `venue` and `tags` may be null: the table and the session example show strings, but the
    /// documented schedule, derived from the activities, shows both as `null`.
    pub(crate) struct Activity, decoded by activity {
        id_session: i64,
        id_event: i64,
        title: String,
        description: String,
        credit_hour: String,
        capacity: i64,
        ticket_price: Number,
        type_ as "type": String,
        venue: Option<String>,
        tags: Option<String>,
        speakers: Vec<SessionSpeaker>,
        times: Vec<SessionTime>,
    }
}

record! {
    /// When an activity is held: one per day it is held on (programacao.md).
    pub(crate) struct SessionTime, decoded by session_time {
        id_event: i64,
        id_session: i64,
        id_time: i64,
        date: DateTime,
        start_time: HourMinute,
        end_time: HourMinute,
    }
}

/// A speaker's record, written once for the two places the documentation shows one: the
/// speakers list, and each activity's speakers, which carry the activity's `id_session` after
/// `id_speaker` (field order is served order).
macro_rules! speaker_record {
    ($(#[$meta:meta])* $name:ident, $decoder:ident $(, $id_session:ident)?) => {
        record! {
            $(#[$meta])*
            pub(crate) struct $name, decoded by $decoder {
                id_event: i64,
                id_speaker: i64,
                $($id_session: i64,)?
                name: String,
                photo: String,
                resume: Option<String>,
                facebook: String,
                linkedin: String,
                email: String,
                lattes: String,
                twitter: String,
                site: String,
            }
        }
    };
}

speaker_record! {
    /// Speaker (programacao.md, `GET /speaker`). `resume` may be null (the schedule example).
    Speaker, speaker
}

speaker_record! {
    /// Speaker of an activity: a [`Speaker`] that also carries the activity's `id_session`.
    SessionSpeaker, session_speaker, id_session
}

record! {
    /// A participant's certificate (certificados.md, `GET /certificates`). `id_pessoa` is the
    /// service's Portuguese name.
    pub(crate) struct Certificate, decoded by certificate {
        id_pessoa: i64,
        id_event: i64,
        name: String,
        email: String,
        document: String,
        certificate_url: String,
    }
}

record! {
    /// An event of a company account (empresas.md, `GET /customclient/events`), in the service's
    /// Portuguese and English names. `token` is the event's own token, a secret.
    pub(crate) struct CompanyEvent, decoded by company_event {
        id: i64,
        titulo: String,
        url: String,
        token: EventToken,
        email_organizador: String,
        start_date: IsoDate,
        start_time: HourMinute,
        end_date: IsoDate,
        end_time: HourMinute,
        local: String,
        city: String,
        state: String,
        country: String,
        publicated: bool,
        privacy: Privacy,
    }
}

record! {
    /// Who may see a company event (`"Privado - com link de acessso"`, the service's spelling).
    pub(crate) struct Privacy, decoded by privacy {
        id: i64,
        type_ as "type": String,
    }
}

record! {
    /// The body of `POST /attendees/create`: the `Attendee` object of pessoas.md. Clients send
    /// only `name`, `email`, `registration_confirmed` and `registration`, so only `name`, `email`
    /// and `registration` are required; the rest may be null or left out.
    pub(crate) struct AttendeeCreate, decoded by attendee_create {
        name: String,
        bagde_name: Option<String>,
        email: String,
        gender: Option<String>,
        photo: Option<String>,
        registration_confirmed: Option<bool>,
        registration: Registration,
    }
    check(o) {
        for (key, value) in [("name", &name), ("email", &email)] {
            if value.as_deref().is_some_and(|s| s.trim().is_empty()) {
                let at = o.path_of(key);
                o.diag().error(&at, "must not be blank");
            }
        }
        let texts = [
            ("name", name.as_deref()),
            ("bagde_name", bagde_name.as_ref().and_then(Option::as_deref)),
            ("email", email.as_deref()),
            ("gender", gender.as_ref().and_then(Option::as_deref)),
            ("photo", photo.as_ref().and_then(Option::as_deref)),
        ];
        for (key, value) in texts {
            if value.is_some_and(|s| s.chars().count() > MAX_TEXT_CHARS) {
                let at = o.path_of(key);
                o.diag().error(&at, format!("longer than {MAX_TEXT_CHARS} characters"));
            }
        }
    }
}

/// The longest text a registration may give a field, in characters: more than any name,
/// e-mail address (254) or photo URL holds, and few enough that a registration stays small in
/// memory, in the `--state` log and in every `/attendees` answer after it (a 1 MiB body of one
/// long name is refused, not served again on every read).
pub(crate) const MAX_TEXT_CHARS: usize = 2048;

record! {
    /// The ticket price a registration takes (`id_ticket_price` of `GET /event`), and its price.
    /// The price is not used (the ticket price's own is the price), so it may be null or left
    /// out: the documented body has it, the clients seen may not send it.
    pub(crate) struct Registration, decoded by registration {
        id_ticket_price: WireInt,
        price: Option<Number>,
    }
}

/// A check-in's `checkin_code`: a string in the documentation's `CheckinAttendee` model, a
/// number where `/attendees` lists it. The service's framework (ASP.NET Web API, whose JSON
/// reader puts a number into a string property) takes either, so a check-in page that posts back
/// the code it read works: an integer is taken as its digits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub(crate) struct CheckinCode(String);

impl CheckinCode {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl super::decode::Scalar for CheckinCode {
    const EXPECTED: &'static str = "a string (or an integer)";
    fn take(v: &Value) -> Option<Self> {
        match v {
            Value::String(s) => Some(CheckinCode(s.clone())),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(CheckinCode(n.to_string())),
            _ => None,
        }
    }
}

impl Field for CheckinCode {
    fn read(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self> {
        o.required(key)
    }
}

#[cfg(test)]
super::decode::describe_plain! {
    CheckinCode => "string, or an integer (as `/attendees` lists it)", "\"40511949\"";
    WireInt => "integer, or its digits as a string", "9104";
}

/// An integer of a write body: a JSON integer, or its digits as a string (`"9104"`). The
/// service's framework (ASP.NET Web API) converts a numeric string into an integer property, as
/// it puts a number into a string one ([`CheckinCode`]): a client the platform serves is served
/// here too, not refused for a form the platform takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub(crate) struct WireInt(pub(crate) i64);

impl super::decode::Scalar for WireInt {
    const EXPECTED: &'static str = "an integer (or its digits as a string)";
    fn take(v: &Value) -> Option<Self> {
        wire_int(v).map(WireInt)
    }
}

/// The integer a write body's `v` is, as [`WireInt`] reads one.
pub(crate) fn wire_int(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => s.parse().ok(),
        other => <i64 as super::decode::Scalar>::take(other),
    }
}

impl Field for WireInt {
    fn read(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self> {
        o.required(key)
    }
}

record! {
    /// One check-in at the event (models.md, `CheckinAttendee`): `checkin` 1 checks the person
    /// with that `checkin_code` in, 0 undoes it. The table types `checkin_code` as a string;
    /// an integer is taken too ([`CheckinCode`]).
    pub(crate) struct CheckinAttendee, decoded by checkin_attendee {
        checkin_code: CheckinCode,
        checkin: WireInt,
        checkin_date: CheckinDate,
    }
    check(o) {
        check_flag(&mut o, checkin);
    }
}

record! {
    /// One check-in at an activity (models.md, `CheckinSession`).
    pub(crate) struct CheckinSession, decoded by checkin_session {
        id_attendees: WireInt,
        id_session: WireInt,
        checkin: WireInt,
        checkin_date: CheckinDate,
    }
    check(o) {
        check_flag(&mut o, checkin);
    }
}

impl Field for Option<IsoDate> {
    /// May be null or left out; otherwise a `YYYY-MM-DD` date.
    fn read(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self> {
        match o.raw(key) {
            None | Some(Value::Null) => Some(None),
            Some(_) => o.text(key).map(Some),
        }
    }
}

record! {
    /// The body of `POST /custom/getdata` and `/custom/getdatasubscribed` (api-fgv.md): a range
    /// of `YYYY-MM-DD` dates, each optional (the page's defaults, 30 days ago and tomorrow, are
    /// the caller's to apply, as they depend on the day). A start after the end is an error (the
    /// page's `InvalidParameter`).
    #[allow(non_snake_case)]
    pub(crate) struct DateRange, decoded by date_range {
        dataInicio: Option<IsoDate>,
        dataFim: Option<IsoDate>,
    }
    check(o) {
        if let (Some(Some(from)), Some(Some(to))) = (&dataInicio, &dataFim) {
            if from.as_str() > to.as_str() {
                let at = o.path_of("dataFim");
                o.diag().error(
                    &at,
                    format!("{} is before dataInicio {}", to.as_str(), from.as_str()),
                );
            }
        }
    }
}

/// `checkin` is a flag: 1 checks in, 0 undoes (models.md).
fn check_flag(o: &mut Obj<'_, '_>, checkin: Option<WireInt>) {
    if let Some(WireInt(n)) = checkin.filter(|n| !matches!(n.0, 0 | 1)) {
        let at = o.path_of("checkin");
        o.diag()
            .error(&at, format!("is {n}; 1 checks in, 0 undoes a check-in"));
    }
}

#[cfg(test)]
mod tests {
    use super::{purchase_items, split_amount, PaymentDetail, Purchase};

    fn purchase(description: &str, amount: &str) -> Purchase {
        Purchase {
            id_event: 1,
            id_payment: 2,
            reference_payment: "R".into(),
            buyer: "B".into(),
            email_buyer: "b@x".into(),
            document_buyer: "".into(),
            description_payment: description.into(),
            amount_payment: serde_json::from_str(amount).expect("a number"),
        }
    }

    #[test]
    fn a_purchase_is_one_ingresso_row_per_item_with_the_amount_split() {
        let rows = PaymentDetail::rows_of(&purchase("2x Geral, 1x Estudante", "100.00"));
        let got: Vec<(String, String, String)> = rows
            .iter()
            .map(|r| (r.description.clone(), r.item.clone(), r.amount.to_string()))
            .collect();
        assert_eq!(
            got,
            [
                ("Ingresso", "Geral", "33.34"),
                ("Ingresso", "Geral", "33.33"),
                ("Ingresso", "Estudante", "33.33")
            ]
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        );
        let one = PaymentDetail::rows_of(&purchase("Inscrição avulsa", "10"));
        assert_eq!(one.len(), 1);
        assert_eq!(
            (one[0].item.as_str(), one[0].amount.to_string()),
            ("Inscrição avulsa", "10".into())
        );
        assert_eq!(
            PaymentDetail::rows_of(&purchase("5000x Geral", "1.00")).len(),
            1
        );
    }

    proptest::proptest! {
        /// The amounts of a split add up to the total exactly, keep its decimals and differ by
        /// at most one unit.
        #[test]
        fn a_split_adds_up_to_the_total(units in 0u64..10_000_000, scale in 0usize..5, n in 1u64..50) {
            let digits = format!("{units:0>width$}", width = scale + 1);
            let (w, f) = digits.split_at(digits.len() - scale);
            let text = if scale == 0 { w.to_string() } else { format!("{w}.{f}") };
            let parts = split_amount(&serde_json::from_str(&text).expect("number"), n)
                .expect("plain decimals split");
            proptest::prop_assert_eq!(parts.len() as u64, n);
            let as_units = |s: String| -> u64 { s.replace('.', "").parse().expect("digits") };
            let values: Vec<u64> = parts.iter().map(|p| as_units(p.to_string())).collect();
            proptest::prop_assert_eq!(values.iter().sum::<u64>(), units);
            for p in &parts {
                let s = p.to_string();
                let decimals = s.split_once('.').map_or(0, |(_, f)| f.len());
                proptest::prop_assert_eq!(decimals, scale);
            }
            let (lo, hi) = (values.iter().min().copied(), values.iter().max().copied());
            proptest::prop_assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1));
        }
    }

    #[test]
    fn descriptions_and_amounts_are_read_as_written() {
        assert_eq!(
            purchase_items("1x Estudantes"),
            Some(vec![(1, "Estudantes")])
        );
        assert_eq!(purchase_items("0x A"), None);
        assert_eq!(purchase_items("Geral"), None);
        let split = |t: &str, n| {
            split_amount(&serde_json::from_str(t).expect("number"), n)
                .map(|v| v.iter().map(ToString::to_string).collect::<Vec<_>>())
        };
        assert_eq!(
            split("10.0000", 2),
            Some(vec!["5.0000".into(), "5.0000".into()])
        );
        assert_eq!(split("0.05", 2), Some(vec!["0.03".into(), "0.02".into()]));
        assert_eq!(split("-1.00", 1), Some(vec!["-1.00".into()]));
        assert_eq!(split("1e3", 2), None);
    }

    use super::*;
    use serde_json::json;

    fn messages(diag: &Diag) -> Vec<String> {
        diag.findings
            .iter()
            .map(|f| format!("{:?} {}: {}", f.severity, f.path, f.message))
            .collect()
    }

    #[test]
    fn one_declaration_gives_the_served_order_renames_and_omitted_fields() {
        let v = json!({"cor": "azul", "id": 1, "titulo": "Água SA"});
        let mut diag = Diag::default();

        let item = page_item(&v, "jsonObj[0]", &mut diag).expect("a page item");

        assert!(diag.findings.is_empty(), "{:?}", messages(&diag));
        let served = serde_json::to_string(&item).expect("serialises");
        assert_eq!(served, r#"{"titulo":"Água SA","id":1,"cor":"azul"}"#);

        let author = json!({"id_event": 1, "id_submission": 2, "name": "N", "email": "e",
            "is_presenter": false, "author_order": 1});
        let v = json!({"abstract": "a.pdf", "id_event": 1, "id_submission": 2, "title": "T",
            "status": "S", "id_submission_type": 3, "submission_type": "P", "topic_area": "A",
            "id_topic_area": 4, "proceedings_abstract": "", "proceedings_full_paper": "",
            "date": "2026-10-06T10:00:00", "start_time": "10:00", "end_time": "10:15",
            "author": [author], "x": 0});
        let s = submission(&v, "", &mut diag).expect("a submission");
        assert_eq!(s.abstract_, "a.pdf");
        let served = serde_json::to_value(&s).expect("serialises");
        let keys = crate::model::keys(&served);
        assert_eq!(
            keys[8..11],
            ["abstract", "proceedings_abstract", "proceedings_full_paper"]
        );
        assert_eq!(keys[14..], ["location", "author", "x"]);
        assert_eq!(served["location"], Value::Null, "nullable left out: null");
    }

    record! {
        /// A record holding one record ([`Privacy`] of the company events), required, and one
        /// that may be null.
        pub(crate) struct Company, decoded by company {
            id: i64,
            privacy: Privacy,
            previous: Option<Privacy>,
        }
    }

    #[test]
    fn nested_records_are_decoded_with_their_paths_and_served_in_order() {
        let v = json!({"privacy": {"type": 3, "id": 2}, "id": 1, "previous": {"id": "x"}});
        let mut diag = Diag::default();

        assert!(company(&v, "data[0]", &mut diag).is_none());

        assert_eq!(
            messages(&diag),
            [
                "Error data[0].privacy.type: expected a string, found the number 3",
                "Error data[0].previous.id: expected an integer, found the string \"x\"",
                "Error data[0].previous.type: missing required field",
            ]
        );
        let v = json!({"privacy": {"type": "Privado", "id": 2, "cor": 1}, "id": 1});
        let mut diag = Diag::default();
        let c = company(&v, "", &mut diag).expect("a company");
        assert_eq!(
            serde_json::to_string(&c).expect("serialises"),
            r#"{"id":1,"privacy":{"id":2,"type":"Privado","cor":1},"previous":null}"#
        );
    }

    #[test]
    fn every_field_is_read_and_cross_field_checks_still_run() {
        let v = json!({"id_event": "7", "id_payment": 1, "reference_payment": "R",
            "buyer": "B", "email_buyer": "e", "country_buyer": "BR", "document_buyer": "d",
            "description_payment": "x", "date_payment": "2026-06-02", "hour_payment": "09:15",
            "type_payment": "Pix", "method_payment": "Pix", "amount_payment": 10.5,
            "amount_receive_payment": 12.5, "status_payment": null, "cupom_payment": ""});
        let mut diag = Diag::default();

        assert!(payment(&v, "data[3]", &mut diag).is_none());

        assert_eq!(
            messages(&diag),
            [
                "Error data[3].id_event: expected an integer, found the string \"7\"",
                "Error data[3].date_payment: \"2026-06-02\" is not a DD/MM/YYYY date",
                "Error data[3].status_payment: expected a string, found null",
                "Error data[3].note_payment: missing required field",
                "Warning data[3].amount_receive_payment: 12.5 is above amount_payment 10.5",
            ]
        );
        let mut diag = Diag::default();
        let item = json!({"titulo": null, "id": 1.5});
        assert!(page_item(&item, "x", &mut diag).is_none());
        assert_eq!(
            messages(&diag),
            [
                "Error x.titulo: expected a string, found null",
                "Error x.id: expected an integer, found the number 1.5",
            ]
        );
    }
}
