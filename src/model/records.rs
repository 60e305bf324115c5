//! The records of the API text (event, ticket, price, payment, submission type, topic area, page
//! area, sponsor item) and of observed.md (payment detail row, submission, author).
//!
//! Field order in each struct is the order of its field table, and that is the order in which it
//! is served (serde's derive keeps declaration order). `extra` holds whatever the file has beyond
//! the table, in file order, and is served after. Numbers that the API text calls decimal are
//! `serde_json::Number`, which keeps their text (`10.00` stays `10.00`).

use serde::Serialize;
use serde_json::{Map, Number, Value};

use super::decode::{Diag, Obj};
use super::formats::{BrDate, DateTime, DecimalText, HourMinute};

/// Fields a file has beyond the API text's table, in file order.
pub type Extra = Map<String, Value>;

/// Event record (API text 2.1).
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub id_event: i64,
    pub title: String,
    pub url: String,
    pub start_date: DateTime,
    pub end_date: DateTime,
    pub start_date_registration: BrDate,
    pub end_date_registration: BrDate,
    pub summary: String,
    pub description: Option<String>,
    pub url_image: String,
    pub credit_hour: Number,
    pub country: String,
    pub state: String,
    pub city: String,
    pub venue: String,
    pub latitude: DecimalText,
    pub longitude: DecimalText,
    pub banner: Option<String>,
    pub tickets: Vec<Ticket>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Ticket type (API text 2.2).
#[derive(Debug, Clone, Serialize)]
pub struct Ticket {
    pub title: String,
    pub registration_quantity: i64,
    pub prices: Vec<TicketPrice>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Price tier of a ticket (API text 2.3). Tiers keep their file order.
#[derive(Debug, Clone, Serialize)]
pub struct TicketPrice {
    pub id_ticket: i64,
    pub id_ticket_price: i64,
    pub price: Number,
    pub start_date: DateTime,
    pub due_date: DateTime,
    pub registration_quantity_price: i64,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Payment record (API text 2.4).
#[derive(Debug, Clone, Serialize)]
pub struct Payment {
    pub id_event: i64,
    pub id_payment: i64,
    pub reference_payment: String,
    pub buyer: String,
    pub email_buyer: String,
    pub country_buyer: String,
    pub document_buyer: String,
    pub description_payment: String,
    pub date_payment: BrDate,
    pub hour_payment: HourMinute,
    pub type_payment: String,
    pub method_payment: String,
    pub amount_payment: Number,
    pub amount_receive_payment: Number,
    pub status_payment: String,
    pub cupom_payment: String,
    pub note_payment: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One row of a payment's detail (observed.md). `phone_attende` is the service's spelling.
#[derive(Debug, Clone, Serialize)]
pub struct PaymentDetail {
    pub id_event: i64,
    pub id_payment: i64,
    pub reference_payment: String,
    pub attendee: String,
    pub email_attendee: String,
    pub document_attendee: String,
    pub phone_attende: String,
    pub description: String,
    pub item: String,
    pub amount: Number,
    #[serde(flatten)]
    pub extra: Extra,
}

impl PaymentDetail {
    /// The row served for a payment that has no detail file of its own.
    pub fn derived_from(p: &Payment) -> Self {
        PaymentDetail {
            id_event: p.id_event,
            id_payment: p.id_payment,
            reference_payment: p.reference_payment.clone(),
            attendee: p.buyer.clone(),
            email_attendee: p.email_buyer.clone(),
            document_attendee: p.document_buyer.clone(),
            phone_attende: String::new(),
            description: p.description_payment.clone(),
            item: String::new(),
            amount: p.amount_payment.clone(),
            extra: Extra::new(),
        }
    }
}

/// Submission type (API text 2.5). `title` may hold a `{{name}}` placeholder, served as stored.
#[derive(Debug, Clone, Serialize)]
pub struct SubmissionType {
    pub id_event: i64,
    pub id_submissiontype: i64,
    pub url_roles: String,
    pub title: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Topic area (API text 2.5).
#[derive(Debug, Clone, Serialize)]
pub struct TopicArea {
    pub id_event: i64,
    pub id_topicarea: i64,
    pub title: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Submission of the submission list (observed.md).
#[derive(Debug, Clone, Serialize)]
pub struct Submission {
    pub id_event: i64,
    pub id_submission: i64,
    pub title: String,
    pub status: String,
    pub id_submission_type: i64,
    pub submission_type: String,
    pub topic_area: String,
    pub id_topic_area: i64,
    #[serde(rename = "abstract")]
    pub abstract_: String,
    pub proceedings_abstract: String,
    pub proceedings_full_paper: String,
    pub date: DateTime,
    pub start_time: HourMinute,
    pub end_time: HourMinute,
    pub location: Option<String>,
    pub author: Vec<Author>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Author of a submission (observed.md).
#[derive(Debug, Clone, Serialize)]
pub struct Author {
    pub id_event: i64,
    pub id_submission: i64,
    pub name: String,
    pub email: String,
    pub is_presenter: bool,
    pub author_order: i64,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Area of the event's web page (API text 2.6). The service's camelCase and Portuguese names.
#[derive(Debug, Clone, Serialize)]
#[allow(non_snake_case)]
pub struct PageArea {
    pub idAreaSite: Option<i64>,
    pub titulo: String,
    pub subtitulo: Option<String>,
    pub ordem: i64,
    pub jsonObj: Vec<PageItem>,
    pub template: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Item of a page area's `jsonObj`. Only the sponsors item is shown (titulo, urlImagem, link,
/// id); items of other areas may carry other fields. So each sponsor field is checked for its
/// type when present and served first, in the table's order, and none is required.
#[derive(Debug, Clone, Serialize)]
#[allow(non_snake_case)]
pub struct PageItem {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub titulo: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub urlImagem: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    #[serde(flatten)]
    pub extra: Extra,
}

// ---- decoders: one per record, reading fields in table order -------------------------------
//
// Every field is read (so every problem is reported) before the `?`s decide whether the record
// is whole.

pub fn event(v: &Value, path: &str, diag: &mut Diag) -> Option<Event> {
    let mut o = Obj::new(v, path, diag)?;
    let id_event = o.int("id_event");
    let title = o.string("title");
    let url = o.string("url");
    let start_date = o.text("start_date");
    let end_date = o.text("end_date");
    let start_date_registration = o.text("start_date_registration");
    let end_date_registration = o.text("end_date_registration");
    let summary = o.string("summary");
    let description = o.nullable_string("description");
    let url_image = o.string("url_image");
    let credit_hour = o.number("credit_hour");
    let country = o.string("country");
    let state = o.string("state");
    let city = o.string("city");
    let venue = o.string("venue");
    let latitude = o.text("latitude");
    let longitude = o.text("longitude");
    let banner = o.nullable_string("banner");
    let tickets = o.list("tickets", ticket);
    let extra = o.finish();
    Some(Event {
        id_event: id_event?,
        title: title?,
        url: url?,
        start_date: start_date?,
        end_date: end_date?,
        start_date_registration: start_date_registration?,
        end_date_registration: end_date_registration?,
        summary: summary?,
        description: description?,
        url_image: url_image?,
        credit_hour: credit_hour?,
        country: country?,
        state: state?,
        city: city?,
        venue: venue?,
        latitude: latitude?,
        longitude: longitude?,
        banner: banner?,
        tickets: tickets?,
        extra,
    })
}

pub fn ticket(v: &Value, path: &str, diag: &mut Diag) -> Option<Ticket> {
    let mut o = Obj::new(v, path, diag)?;
    let title = o.string("title");
    let registration_quantity = o.int("registration_quantity");
    let prices = o.list("prices", ticket_price);
    if let Some(prices) = &prices {
        // All tiers of one ticket carry the same id_ticket (API text 2.3); the service's data is
        // taken as it is, so a mismatch is a warning.
        if let Some(first) = prices.first() {
            for (i, p) in prices.iter().enumerate().skip(1) {
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
    let extra = o.finish();
    Some(Ticket {
        title: title?,
        registration_quantity: registration_quantity?,
        prices: prices?,
        extra,
    })
}

pub fn ticket_price(v: &Value, path: &str, diag: &mut Diag) -> Option<TicketPrice> {
    let mut o = Obj::new(v, path, diag)?;
    let id_ticket = o.int("id_ticket");
    let id_ticket_price = o.int("id_ticket_price");
    let price = o.number("price");
    let start_date = o.text("start_date");
    let due_date = o.text("due_date");
    let registration_quantity_price = o.int("registration_quantity_price");
    let extra = o.finish();
    Some(TicketPrice {
        id_ticket: id_ticket?,
        id_ticket_price: id_ticket_price?,
        price: price?,
        start_date: start_date?,
        due_date: due_date?,
        registration_quantity_price: registration_quantity_price?,
        extra,
    })
}

pub fn payment(v: &Value, path: &str, diag: &mut Diag) -> Option<Payment> {
    let mut o = Obj::new(v, path, diag)?;
    let id_event = o.int("id_event");
    let id_payment = o.int("id_payment");
    let reference_payment = o.string("reference_payment");
    let buyer = o.string("buyer");
    let email_buyer = o.string("email_buyer");
    let country_buyer = o.string("country_buyer");
    let document_buyer = o.string("document_buyer");
    let description_payment = o.string("description_payment");
    let date_payment = o.text("date_payment");
    let hour_payment = o.text("hour_payment");
    let type_payment = o.string("type_payment");
    let method_payment = o.string("method_payment");
    let amount_payment = o.number("amount_payment");
    let amount_receive_payment = o.number("amount_receive_payment");
    if let (Some(paid), Some(received)) = (&amount_payment, &amount_receive_payment) {
        if let (Some(p), Some(r)) = (paid.as_f64(), received.as_f64()) {
            if r > p {
                let at = o.path_of("amount_receive_payment");
                o.diag()
                    .warning(&at, format!("{received} is above amount_payment {paid}"));
            }
        }
    }
    let status_payment = o.string("status_payment");
    let cupom_payment = o.string("cupom_payment");
    let note_payment = o.string("note_payment");
    let extra = o.finish();
    Some(Payment {
        id_event: id_event?,
        id_payment: id_payment?,
        reference_payment: reference_payment?,
        buyer: buyer?,
        email_buyer: email_buyer?,
        country_buyer: country_buyer?,
        document_buyer: document_buyer?,
        description_payment: description_payment?,
        date_payment: date_payment?,
        hour_payment: hour_payment?,
        type_payment: type_payment?,
        method_payment: method_payment?,
        amount_payment: amount_payment?,
        amount_receive_payment: amount_receive_payment?,
        status_payment: status_payment?,
        cupom_payment: cupom_payment?,
        note_payment: note_payment?,
        extra,
    })
}

pub fn payment_detail(v: &Value, path: &str, diag: &mut Diag) -> Option<PaymentDetail> {
    let mut o = Obj::new(v, path, diag)?;
    let id_event = o.int("id_event");
    let id_payment = o.int("id_payment");
    let reference_payment = o.string("reference_payment");
    let attendee = o.string("attendee");
    let email_attendee = o.string("email_attendee");
    let document_attendee = o.string("document_attendee");
    let phone_attende = o.string("phone_attende");
    let description = o.string("description");
    let item = o.string("item");
    let amount = o.number("amount");
    let extra = o.finish();
    Some(PaymentDetail {
        id_event: id_event?,
        id_payment: id_payment?,
        reference_payment: reference_payment?,
        attendee: attendee?,
        email_attendee: email_attendee?,
        document_attendee: document_attendee?,
        phone_attende: phone_attende?,
        description: description?,
        item: item?,
        amount: amount?,
        extra,
    })
}

pub fn submission_type(v: &Value, path: &str, diag: &mut Diag) -> Option<SubmissionType> {
    let mut o = Obj::new(v, path, diag)?;
    let id_event = o.int("id_event");
    let id_submissiontype = o.int("id_submissiontype");
    let url_roles = o.string("url_roles");
    let title = o.string("title");
    let extra = o.finish();
    Some(SubmissionType {
        id_event: id_event?,
        id_submissiontype: id_submissiontype?,
        url_roles: url_roles?,
        title: title?,
        extra,
    })
}

pub fn topic_area(v: &Value, path: &str, diag: &mut Diag) -> Option<TopicArea> {
    let mut o = Obj::new(v, path, diag)?;
    let id_event = o.int("id_event");
    let id_topicarea = o.int("id_topicarea");
    let title = o.string("title");
    let extra = o.finish();
    Some(TopicArea {
        id_event: id_event?,
        id_topicarea: id_topicarea?,
        title: title?,
        extra,
    })
}

pub fn submission(v: &Value, path: &str, diag: &mut Diag) -> Option<Submission> {
    let mut o = Obj::new(v, path, diag)?;
    let id_event = o.int("id_event");
    let id_submission = o.int("id_submission");
    let title = o.string("title");
    let status = o.string("status");
    let id_submission_type = o.int("id_submission_type");
    let submission_type = o.string("submission_type");
    let topic_area = o.string("topic_area");
    let id_topic_area = o.int("id_topic_area");
    let abstract_ = o.string("abstract");
    let proceedings_abstract = o.string("proceedings_abstract");
    let proceedings_full_paper = o.string("proceedings_full_paper");
    let date = o.text("date");
    let start_time = o.text("start_time");
    let end_time = o.text("end_time");
    let location = o.nullable_string("location");
    let author = o.list("author", author);
    let extra = o.finish();
    Some(Submission {
        id_event: id_event?,
        id_submission: id_submission?,
        title: title?,
        status: status?,
        id_submission_type: id_submission_type?,
        submission_type: submission_type?,
        topic_area: topic_area?,
        id_topic_area: id_topic_area?,
        abstract_: abstract_?,
        proceedings_abstract: proceedings_abstract?,
        proceedings_full_paper: proceedings_full_paper?,
        date: date?,
        start_time: start_time?,
        end_time: end_time?,
        location: location?,
        author: author?,
        extra,
    })
}

pub fn author(v: &Value, path: &str, diag: &mut Diag) -> Option<Author> {
    let mut o = Obj::new(v, path, diag)?;
    let id_event = o.int("id_event");
    let id_submission = o.int("id_submission");
    let name = o.string("name");
    let email = o.string("email");
    let is_presenter = o.boolean("is_presenter");
    let author_order = o.int("author_order");
    let extra = o.finish();
    Some(Author {
        id_event: id_event?,
        id_submission: id_submission?,
        name: name?,
        email: email?,
        is_presenter: is_presenter?,
        author_order: author_order?,
        extra,
    })
}

pub fn page_area(v: &Value, path: &str, diag: &mut Diag) -> Option<PageArea> {
    let mut o = Obj::new(v, path, diag)?;
    let id_area_site = o.nullable_int("idAreaSite");
    let titulo = o.string("titulo");
    let subtitulo = o.nullable_string("subtitulo");
    let ordem = o.int("ordem");
    let json_obj = o.list("jsonObj", page_item);
    let template = o.string("template");
    let extra = o.finish();
    Some(PageArea {
        idAreaSite: id_area_site?,
        titulo: titulo?,
        subtitulo: subtitulo?,
        ordem: ordem?,
        jsonObj: json_obj?,
        template: template?,
        extra,
    })
}

pub fn page_item(v: &Value, path: &str, diag: &mut Diag) -> Option<PageItem> {
    let mut o = Obj::new(v, path, diag)?;
    let titulo = o.optional_string("titulo");
    let url_imagem = o.optional_string("urlImagem");
    let link = o.optional_string("link");
    let id = o.optional_int("id");
    let extra = o.finish();
    Some(PageItem {
        titulo: titulo?,
        urlImagem: url_imagem?,
        link: link?,
        id: id?,
        extra,
    })
}
