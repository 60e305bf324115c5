//! How records are served: field order, null filling, extra fields, numbers and strings as
//! written, tier order, areas by ordem, the details endpoint's three ways to get a reference and
//! its derived row, and the TOML twin that answers the same bytes.

use crate::fixtures::{self, TOKEN};
use crate::helpers::{spawn_app, TempData, TestApp};
use reqwest::Method;
use serde_json::Value;

const ENDPOINTS: [&str; 7] = [
    "/api/v1/event",
    "/api/v1/payments",
    "/api/v1/payments/details?reference=R-001",
    "/api/v1/payments/details?reference=R-002",
    "/api/v1/submission/",
    "/api/v1/submission/list",
    "/api/v1/hotsite/",
];

async fn tiny_app() -> (TempData, TestApp) {
    let data = TempData::new();
    fixtures::write_json(&data, "tiny");
    let app = spawn_app(data.path()).await;
    (data, app)
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect()
}

#[tokio::test]
async fn a_toml_twin_answers_the_same_bytes() {
    let data = TempData::new();
    fixtures::write_json(&data, "as-json");
    fixtures::write_toml(&data, "as-toml", "toml-token");
    let app = spawn_app(data.path()).await;

    for path in ENDPOINTS {
        let json = app.get(path, TOKEN).await;
        let toml = app.get(path, "toml-token").await;

        assert_eq!(json.status, 200, "{path}: {}", json.text());
        assert_eq!(toml.status, 200, "{path}: {}", toml.text());
        assert_eq!(
            json.text(),
            toml.text(),
            "{path}: JSON and TOML bundles differ"
        );
    }
    // Decimals as written in the TOML file, trailing zeros included (not the float's 286.5).
    let payments = app.get("/api/v1/payments", "toml-token").await.text();
    assert!(
        payments.contains(r#""amount_receive_payment":286.50,"#),
        "{payments}"
    );
    let detail = app
        .get("/api/v1/payments/details?reference=R-002", "toml-token")
        .await
        .text();
    assert!(detail.contains(r#""amount":150.50}"#), "{detail}");
}

#[tokio::test]
async fn fields_follow_the_table_then_extras_and_nullables_are_filled() {
    let (_data, app) = tiny_app().await;

    let body = app.get("/api/v1/event", TOKEN).await.json();

    assert_eq!(keys(&body), ["data", "count"]);
    let event = &body["data"][0];
    assert_eq!(
        keys(event),
        [
            "id_event",
            "title",
            "url",
            "start_date",
            "end_date",
            "start_date_registration",
            "end_date_registration",
            "summary",
            "description",
            "url_image",
            "credit_hour",
            "country",
            "state",
            "city",
            "venue",
            "latitude",
            "longitude",
            "banner",
            "tickets",
            "organizer_note",
        ]
    );
    assert_eq!(event["description"], Value::Null);
    assert_eq!(event["banner"], Value::Null);
    assert_eq!(event["organizer_note"], "campo extra");
    assert_eq!(
        keys(&event["tickets"][0]),
        ["title", "registration_quantity", "prices"]
    );
}

#[tokio::test]
async fn numbers_and_strings_are_served_as_written() {
    let data = TempData::new();
    fixtures::write_json(&data, "tiny");
    data.write(
        "tiny/event.json",
        fixtures::EVENT_JSON
            .replace("\"price\": 150.5", "\"price\": 10.00")
            .replace("\"credit_hour\": 12.5", "\"credit_hour\": 0"),
    );
    let app = spawn_app(data.path()).await;

    let event = app.get("/api/v1/event", TOKEN).await.text();
    assert!(event.contains(r#""price":10.00,"#), "10.00 kept: {event}");
    assert!(event.contains(r#""credit_hour":0,"#), "{event}");
    assert!(event.contains(r#""price":120.25,"#), "{event}");
    let submission = app.get("/api/v1/submission/", TOKEN).await.text();
    assert!(
        submission.contains(r#""title":"Pôster {{name}}""#),
        "placeholder kept: {submission}"
    );
    let payments = app.get("/api/v1/payments", TOKEN).await.text();
    assert!(payments.contains(r#""amount_payment":301,"#), "{payments}");
}

#[tokio::test]
async fn price_tiers_keep_their_file_order() {
    let (_data, app) = tiny_app().await;

    let body = app.get("/api/v1/event", TOKEN).await.json();

    let ids: Vec<u64> = body["data"][0]["tickets"][0]["prices"]
        .as_array()
        .expect("prices")
        .iter()
        .filter_map(|p| p["id_ticket_price"].as_u64())
        .collect();
    assert_eq!(ids, [12, 11]);
}

#[tokio::test]
async fn areas_are_sorted_by_ordem_stably_and_items_keep_their_fields() {
    let (_data, app) = tiny_app().await;

    let body = app.get("/api/v1/hotsite/", TOKEN).await.json();

    assert_eq!(keys(&body), ["capa", "areasSite"]);
    assert_eq!(body["capa"], Value::Null);
    let areas = body["areasSite"].as_array().expect("areas");
    let titles: Vec<&str> = areas.iter().filter_map(|a| a["titulo"].as_str()).collect();
    assert_eq!(
        titles,
        ["Abertura", "Programação", "Extra", "Patrocinadores"]
    );
    assert_eq!(
        keys(&areas[0]),
        [
            "idAreaSite",
            "titulo",
            "subtitulo",
            "ordem",
            "jsonObj",
            "template"
        ]
    );
    assert_eq!(areas[0]["idAreaSite"], Value::Null, "left out: null");
    assert_eq!(areas[3]["subtitulo"], Value::Null, "left out: null");
    let sponsor = &areas[3]["jsonObj"][0];
    assert_eq!(keys(sponsor), ["titulo", "urlImagem", "link", "id", "cor"]);
}

#[tokio::test]
async fn details_take_the_reference_from_query_json_or_form() {
    let (_data, app) = tiny_app().await;
    let expected = app
        .get("/api/v1/payments/details?reference=R-002", TOKEN)
        .await;
    assert_eq!(expected.status, 200);
    assert_eq!(
        expected.json()["data"][0]["phone_attende"],
        "31999990000",
        "the detail file"
    );

    let details = "/api/v1/payments/details";
    let json = app
        .send(
            Method::GET,
            details,
            Some(TOKEN),
            Some(("application/json", br#"{"reference": "R-002"}"#)),
        )
        .await;
    let bare_json = app
        .send(
            Method::GET,
            details,
            Some(TOKEN),
            Some(("", br#"{"reference": "R-002"}"#)),
        )
        .await;
    let form = app
        .send(
            Method::GET,
            details,
            Some(TOKEN),
            Some(("application/x-www-form-urlencoded", b"reference=R-002")),
        )
        .await;
    // The two forms ASP.NET binds a lone string parameter from, and its other JSON type.
    let string = app
        .send(
            Method::GET,
            details,
            Some(TOKEN),
            Some(("text/json", b"\xEF\xBB\xBF\"R-002\"")),
        )
        .await;
    let nameless = app
        .send(
            Method::GET,
            details,
            Some(TOKEN),
            Some(("application/x-www-form-urlencoded", b"=R-002")),
        )
        .await;
    // The query string comes first.
    let both = app
        .send(
            Method::GET,
            &format!("{details}?reference=R-002"),
            Some(TOKEN),
            Some(("application/json", br#"{"reference": "R-001"}"#)),
        )
        .await;

    for (how, res) in [
        ("JSON body", json),
        ("JSON body without a type", bare_json),
        ("form body", form),
        ("a JSON string, text/json, after a byte order mark", string),
        ("a nameless form pair", nameless),
        ("query over body", both),
    ] {
        assert_eq!(res.status, 200, "{how}: {}", res.text());
        assert_eq!(res.body, expected.body, "{how}");
    }
}

#[tokio::test]
async fn a_payment_without_a_detail_file_answers_a_derived_row() {
    let (_data, app) = tiny_app().await;

    let res = app
        .get("/api/v1/payments/details?reference=R-001", TOKEN)
        .await;

    assert_eq!(res.status, 200);
    assert_eq!(
        res.text(),
        concat!(
            r#"{"data":[{"id_event":7001,"id_payment":1,"reference_payment":"R-001","attendee":"Ana Souza","#,
            r#""email_attendee":"ana@ex.com.br","document_attendee":"111.222.333-44","phone_attende":"","#,
            r#""description":"Ingresso","item":"Geral","amount":120.25}],"count":1}"#
        )
    );
}

#[tokio::test]
async fn every_token_of_a_bundle_opens_it() {
    let (_data, app) = tiny_app().await;

    let first = app.get("/api/v1/event", TOKEN).await;
    let second = app.get("/api/v1/event", "second-tiny-token").await;

    assert_eq!(first.status, 200);
    assert_eq!(first.body, second.body);
}

#[tokio::test]
async fn a_toml_bundle_from_the_test_server_serves_decimals_as_written() {
    let event = fixtures::EVENT_TOML.replace("price = 150.5\n", "price = 10.0000\n");
    let payments =
        fixtures::PAYMENTS_TOML.replace("amount_payment = 120.25\n", "amount_payment = 10.00\n");
    assert!(event.contains("10.0000") && payments.contains("10.00\n"));
    let server =
        eventbox::testing::TestServer::from_bundles([eventbox::testing::Bundle::new("decimals")
            .token(TOKEN)
            .file("event.toml", event)
            .file("payments.toml", payments)])
        .start()
        .expect("starts");
    let get = |path: &str| {
        crate::helpers::client()
            .get(server.url(path))
            .header("Authorization-Token", TOKEN)
    };

    let event = crate::helpers::answer(get("/api/v1/event")).await.text();
    let payments = crate::helpers::answer(get("/api/v1/payments")).await.text();

    assert!(event.contains(r#""price":10.0000,"#), "{event}");
    assert!(
        payments.contains(r#""amount_payment":10.00,"#),
        "{payments}"
    );
}
