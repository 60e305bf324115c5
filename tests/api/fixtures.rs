//! A small bundle written by hand in JSON and, as its twin, in TOML (decimals with trailing zeros
//! in both, such as `286.50`: a TOML bundle serves them as written, as a JSON bundle does). Tests
//! change parts of it to show one rule at a time.

use crate::helpers::TempData;

pub const TOKEN: &str = "tiny-token";

pub const BUNDLE_TOML: &str = "tokens = [\"tiny-token\", \"second-tiny-token\"]\n";

/// Fields out of table order, an extra field, nullable fields left out, decimals with trailing
/// zeros, price tiers out of id order.
pub const EVENT_JSON: &str = r#"{
  "data": [{
    "title": "Encontro Nacional de Hidrologia",
    "id_event": 7001,
    "url": "enh",
    "start_date": "2026-10-05T08:00:00",
    "end_date": "2026-10-07T18:00:00",
    "start_date_registration": "01/06/2026",
    "end_date_registration": "30/09/2026",
    "summary": "Três dias sobre água.",
    "url_image": "https://img.example/enh.png",
    "credit_hour": 12.5,
    "country": "Brasil",
    "state": "MG",
    "city": "Belo Horizonte",
    "venue": "Minascentro",
    "latitude": "-19.9245",
    "longitude": "-43.9352",
    "organizer_note": "campo extra",
    "tickets": [{
      "title": "Geral",
      "registration_quantity": 3,
      "prices": [
        {"id_ticket": 1, "id_ticket_price": 12, "price": 150.5, "start_date": "2026-08-01T00:00:00", "due_date": "2026-07-01T00:00:00", "registration_quantity_price": 1},
        {"id_ticket": 1, "id_ticket_price": 11, "price": 120.25, "start_date": "2026-06-01T00:00:00", "due_date": "2026-07-31T23:59:00", "registration_quantity_price": 2}
      ]
    }]
  }],
  "count": 1
}"#;

pub const EVENT_TOML: &str = r#"
title = "Encontro Nacional de Hidrologia"
id_event = 7001
url = "enh"
start_date = "2026-10-05T08:00:00"
end_date = 2026-10-07T18:00:00
start_date_registration = "01/06/2026"
end_date_registration = "30/09/2026"
summary = "Três dias sobre água."
url_image = "https://img.example/enh.png"
credit_hour = 12.5
country = "Brasil"
state = "MG"
city = "Belo Horizonte"
venue = "Minascentro"
latitude = "-19.9245"
longitude = "-43.9352"
organizer_note = "campo extra"

[[tickets]]
title = "Geral"
registration_quantity = 3

[[tickets.prices]]
id_ticket = 1
id_ticket_price = 12
price = 150.5
start_date = "2026-08-01T00:00:00"
due_date = "2026-07-01T00:00:00"
registration_quantity_price = 1

[[tickets.prices]]
id_ticket = 1
id_ticket_price = 11
price = 120.25
start_date = "2026-06-01T00:00:00"
due_date = "2026-07-31T23:59:00"
registration_quantity_price = 2
"#;

pub const PAYMENTS_JSON: &str = r#"[
  {"id_event": 7001, "id_payment": 1, "reference_payment": "R-001", "buyer": "Ana Souza", "email_buyer": "ana@ex.com.br", "country_buyer": "Brasil", "document_buyer": "111.222.333-44", "description_payment": "1x Geral", "date_payment": "02/06/2026", "hour_payment": "09:15", "type_payment": "Pix", "method_payment": "Pix", "amount_payment": 120.25, "amount_receive_payment": 119.5, "status_payment": "Pago", "cupom_payment": "", "note_payment": ""},
  {"id_event": 7001, "id_payment": 2, "reference_payment": "R-002", "buyer": "João Lima", "email_buyer": "joao@ex.com.br", "country_buyer": "Brasil", "document_buyer": "555.666.777-88", "description_payment": "2x Geral", "date_payment": "03/08/2026", "hour_payment": "18:40", "type_payment": "Visa", "method_payment": "Cartão de crédito", "amount_payment": 301, "amount_receive_payment": 286.50, "status_payment": "Pago", "cupom_payment": "HIDRO", "note_payment": "nota"}
]"#;

pub const PAYMENTS_TOML: &str = r#"
count = 2

[[data]]
id_event = 7001
id_payment = 1
reference_payment = "R-001"
buyer = "Ana Souza"
email_buyer = "ana@ex.com.br"
country_buyer = "Brasil"
document_buyer = "111.222.333-44"
description_payment = "1x Geral"
date_payment = "02/06/2026"
hour_payment = "09:15"
type_payment = "Pix"
method_payment = "Pix"
amount_payment = 120.25
amount_receive_payment = 119.5
status_payment = "Pago"
cupom_payment = ""
note_payment = ""

[[data]]
id_event = 7001
id_payment = 2
reference_payment = "R-002"
buyer = "João Lima"
email_buyer = "joao@ex.com.br"
country_buyer = "Brasil"
document_buyer = "555.666.777-88"
description_payment = "2x Geral"
date_payment = "03/08/2026"
hour_payment = "18:40"
type_payment = "Visa"
method_payment = "Cartão de crédito"
amount_payment = 301
amount_receive_payment = 286.50
status_payment = "Pago"
cupom_payment = "HIDRO"
note_payment = "nota"
"#;

pub const DETAIL_JSON: &str = r#"{"data": [{"id_event": 7001, "id_payment": 2, "reference_payment": "R-002", "attendee": "João Lima", "email_attendee": "joao@ex.com.br", "document_attendee": "", "phone_attende": "31999990000", "description": "Ingresso", "item": "Geral", "amount": 150.50}], "count": 1}"#;

pub const DETAIL_TOML: &str = r#"
[[data]]
id_event = 7001
id_payment = 2
reference_payment = "R-002"
attendee = "João Lima"
email_attendee = "joao@ex.com.br"
document_attendee = ""
phone_attende = "31999990000"
description = "Ingresso"
item = "Geral"
amount = 150.50
"#;

pub const SUBMISSION_JSON: &str = r#"{"submission_type": {"data": [{"id_event": 7001, "id_submissiontype": 5, "url_roles": "", "title": "Pôster {{name}}"}], "count": 1}, "topic_area": [{"id_event": 7001, "id_topicarea": 9, "title": "Águas subterrâneas"}], "count": 2}"#;

pub const SUBMISSION_TOML: &str = r#"
count = 2
[submission_type]
count = 1
[[submission_type.data]]
id_event = 7001
id_submissiontype = 5
url_roles = ""
title = "Pôster {{name}}"
[[topic_area]]
id_event = 7001
id_topicarea = 9
title = "Águas subterrâneas"
"#;

pub const SUBMISSION_LIST_JSON: &str = r#"{"submission": {"data": [{"id_event": 7001, "id_submission": 40, "title": "Recarga de aquíferos", "status": "Aprovado", "id_submission_type": 5, "submission_type": "Pôster {{name}}", "topic_area": "Águas subterrâneas", "id_topic_area": 9, "abstract": "https://f.example/40.pdf", "proceedings_abstract": "", "proceedings_full_paper": "", "date": "2026-10-06T10:00:00", "start_time": "10:00", "end_time": "10:15", "author": [{"id_event": 7001, "id_submission": 40, "name": "Célia Ramos", "email": "celia@ex.br", "is_presenter": true, "author_order": 1}]}], "count": 1}, "count": 1}"#;

pub const SUBMISSION_LIST_TOML: &str = r#"
count = 1
[submission]
count = 1
[[submission.data]]
id_event = 7001
id_submission = 40
title = "Recarga de aquíferos"
status = "Aprovado"
id_submission_type = 5
submission_type = "Pôster {{name}}"
topic_area = "Águas subterrâneas"
id_topic_area = 9
abstract = "https://f.example/40.pdf"
proceedings_abstract = ""
proceedings_full_paper = ""
date = "2026-10-06T10:00:00"
start_time = "10:00"
end_time = "10:15"
[[submission.data.author]]
id_event = 7001
id_submission = 40
name = "Célia Ramos"
email = "celia@ex.br"
is_presenter = true
author_order = 1
"#;

/// Areas out of `ordem` order (two with the same ordem, to show the sort is stable).
pub const HOTSITE_JSON: &str = r#"{"areasSite": [
  {"idAreaSite": 9, "titulo": "Patrocinadores", "ordem": 3, "jsonObj": [{"link": "www.agua.br", "titulo": "Água SA", "id": 1, "urlImagem": "https://img.example/a.png", "cor": "azul"}], "template": ""},
  {"titulo": "Abertura", "subtitulo": "", "ordem": 1, "jsonObj": [], "template": "<p>Olá</p>"},
  {"idAreaSite": 2, "titulo": "Programação", "subtitulo": "dia a dia", "ordem": 2, "jsonObj": [], "template": ""},
  {"idAreaSite": null, "titulo": "Extra", "subtitulo": null, "ordem": 2, "jsonObj": [], "template": ""}
]}"#;

pub const HOTSITE_TOML: &str = r#"
[[areasSite]]
idAreaSite = 9
titulo = "Patrocinadores"
ordem = 3
template = ""
[[areasSite.jsonObj]]
link = "www.agua.br"
titulo = "Água SA"
id = 1
urlImagem = "https://img.example/a.png"
cor = "azul"

[[areasSite]]
titulo = "Abertura"
subtitulo = ""
ordem = 1
jsonObj = []
template = "<p>Olá</p>"

[[areasSite]]
idAreaSite = 2
titulo = "Programação"
subtitulo = "dia a dia"
ordem = 2
jsonObj = []
template = ""

[[areasSite]]
titulo = "Extra"
ordem = 2
jsonObj = []
template = ""
"#;

/// Writes the JSON bundle as `name` in `data`.
pub fn write_json(data: &TempData, name: &str) {
    data.write(&format!("{name}/bundle.toml"), BUNDLE_TOML)
        .write(&format!("{name}/event.json"), EVENT_JSON)
        .write(&format!("{name}/payments.json"), PAYMENTS_JSON)
        .write(&format!("{name}/payment_details/R-002.json"), DETAIL_JSON)
        .write(&format!("{name}/submission.json"), SUBMISSION_JSON)
        .write(
            &format!("{name}/submission_list.json"),
            SUBMISSION_LIST_JSON,
        )
        .write(&format!("{name}/hotsite.json"), HOTSITE_JSON);
}

/// Writes the TOML twin as `name` in `data`, with another token.
pub fn write_toml(data: &TempData, name: &str, token: &str) {
    data.write(
        &format!("{name}/bundle.toml"),
        format!("tokens = [\"{token}\"]\n"),
    )
    .write(&format!("{name}/event.toml"), EVENT_TOML)
    .write(&format!("{name}/payments.toml"), PAYMENTS_TOML)
    .write(&format!("{name}/payment_details/R-002.toml"), DETAIL_TOML)
    .write(&format!("{name}/submission.toml"), SUBMISSION_TOML)
    .write(
        &format!("{name}/submission_list.toml"),
        SUBMISSION_LIST_TOML,
    )
    .write(&format!("{name}/hotsite.toml"), HOTSITE_TOML);
}

/// The company events example of the platform's documentation (empresas.md).
pub const EMPRESAS_EVENTS_JSON: &str = include_str!("../fixtures/apidocs/empresas-events.json");
