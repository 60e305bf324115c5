//! The OpenAPI document (`openapi.json`, served at `/openapi.json`): served as the router's own
//! routes say, and the demo bundle's real answers conform to it, checked by the `jsonschema` crate
//! (JSON Schema 2020-12, formats included, no `$ref` resolved over a network or from files).
//! schemathesis in CI is the full check (generated requests, every status); these keep
//! `cargo test` honest about drift.

use reqwest::Method;
use serde_json::Value;

use crate::helpers::{demo_data, spawn_app, TestApp, DEMO_TOKEN};

/// The document as built into the binary (`prepare.rs` includes the same file). That it lists
/// exactly the endpoint table's routes is a unit test of `src/api.rs`.
const OPENAPI: &[u8] = include_bytes!("../../openapi.json");

fn document() -> Value {
    crate::helpers::openapi()
}

#[tokio::test]
async fn the_document_is_served_without_a_token_with_head_and_etag() {
    let app = spawn_app(&demo_data()).await;

    let res = app.send(Method::GET, "/openapi.json", None, None).await;
    let head = app.send(Method::HEAD, "/openapi.json", None, None).await;
    let etag = res.header("etag").expect("an ETag").to_string();
    let again = app
        .request(
            Method::GET,
            "/openapi.json",
            "",
            &[("if-none-match", &etag)],
        )
        .await;

    assert_eq!(res.status, 200);
    assert_eq!(
        res.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(&res.body[..], OPENAPI);
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(
        head.header("content-length"),
        Some(OPENAPI.len().to_string().as_str())
    );
    assert_eq!(again.status, 304, "{}", again.text());
}

/// Closes every object shape under `schema` (`unevaluatedProperties: false` beside each
/// `properties` that says nothing about other members), so a member the document does not name is
/// an error: the demo bundle has no fields beyond the API text's tables. The first part of an
/// `allOf` is the whole shape; the later parts only narrow some of its members and stay open.
fn close(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                map.insert("unevaluatedProperties".into(), Value::Bool(false));
            }
            for (key, value) in map.iter_mut() {
                match (key.as_str(), value) {
                    ("allOf", Value::Array(parts)) => parts.iter_mut().take(1).for_each(close),
                    // The values of `properties` are schemas, its keys member names.
                    ("properties", Value::Object(members)) => members.values_mut().for_each(close),
                    (_, value) => close(value),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(close),
        _ => {}
    }
}

/// The schema an operation documents for a status, as a standalone JSON Schema 2020-12 document
/// whose `#/components/...` references resolve in a copy of the document's components (closed
/// with `strict`, see [`close`]). Null when the status has no JSON body documented.
pub(crate) fn response_schema(doc: &Value, path: &str, status: &str, strict: bool) -> Value {
    let mut response = &doc["paths"][path]["get"]["responses"][status];
    if let Some(name) = response["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("#/components/responses/"))
    {
        response = &doc["components"]["responses"][name];
    }
    let schema = &response["content"]["application/json"]["schema"];
    if schema.is_null() {
        return Value::Null;
    }
    let mut root = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "allOf": [schema],
        "components": { "schemas": doc["components"]["schemas"] },
    });
    if strict {
        close(&mut root);
    }
    root
}

/// Every way `body` breaks `schema` (a [`response_schema`]), one line each: where, and why.
pub(crate) fn problems(schema: &Value, body: &Value) -> Vec<String> {
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .unwrap_or_else(|e| panic!("openapi.json's schema does not compile: {e}"));
    validator
        .iter_errors(body)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

async fn assert_conforms(app: &TestApp, doc: &Value, path: &str, request: &str, token: &str) {
    let strict = token == DEMO_TOKEN;
    let res = app.get(request, token).await;
    let status = res.status.as_u16().to_string();
    let schema = response_schema(doc, path, &status, strict);
    assert!(!schema.is_null(), "{request}: {status} is not documented");
    let problems = problems(&schema, &res.json());
    assert!(problems.is_empty(), "{request} {status}: {problems:#?}");
}

/// The checker itself: a body the document does not allow fails, for each kind of rule the
/// document uses (type, required, const, enum, pattern, format, minimum, minItems, a closed
/// object, the narrowing part of an `allOf`, `oneOf`), starting from real answers that pass.
#[tokio::test]
async fn the_checker_refuses_bodies_the_document_does_not_allow() {
    let doc = document();
    let app = spawn_app(&demo_data()).await;
    let payments = app.get("/api/v1/payments", DEMO_TOKEN).await.json();
    let event = app.get("/api/v1/event", DEMO_TOKEN).await.json();
    let refused = app.get("/api/v1/event", "wrong-token").await.json();
    let payments_schema = response_schema(&doc, "/api/v1/payments", "200", true);
    let event_schema = response_schema(&doc, "/api/v1/event", "200", true);
    let refused_schema = response_schema(&doc, "/api/v1/event", "401", false);
    let health_schema = response_schema(&doc, "/healthz", "200", false);
    assert!(problems(&payments_schema, &payments).is_empty());
    assert!(problems(&event_schema, &event).is_empty());
    assert!(problems(&refused_schema, &refused).is_empty());
    assert!(problems(&health_schema, &serde_json::json!({"status": "ok"})).is_empty());

    type Break = fn(&mut Value);
    let payment_breaks: [(&str, Break); 7] = [
        ("an integer as text", |b| {
            b["data"][0]["id_payment"] = "7".into()
        }),
        ("a required member missing", |b| {
            if let Some(payment) = b["data"][0].as_object_mut() {
                payment.shift_remove("buyer");
            }
        }),
        ("a date against its pattern", |b| {
            b["data"][0]["date_payment"] = "2026-09-14".into()
        }),
        ("an amount as text", |b| {
            b["data"][0]["amount_payment"] = "12.50".into()
        }),
        ("a negative count", |b| b["count"] = (-1).into()),
        ("a member the document does not name", |b| {
            b["data"][0]["surprise"] = true.into()
        }),
        ("a list that is an object", |b| {
            b["data"] = serde_json::json!({})
        }),
    ];
    for (what, break_it) in payment_breaks {
        let mut body = payments.clone();
        break_it(&mut body);
        let found = problems(&payments_schema, &body);
        assert!(!found.is_empty(), "payments with {what} passed the check");
    }
    // Open (not strict), an unknown member is allowed; nothing else is.
    let mut extra = payments.clone();
    extra["data"][0]["surprise"] = true.into();
    let open = response_schema(&doc, "/api/v1/payments", "200", false);
    assert!(problems(&open, &extra).is_empty());

    let mut two = event.clone();
    two["count"] = 2.into();
    assert!(!problems(&event_schema, &two).is_empty(), "count 2 passed");

    // The 401 body narrows the shared error shape in the second part of an `allOf`.
    let mut other_code = refused.clone();
    other_code["erros"][0]["description"] = "not_ready".into();
    assert!(
        !problems(&refused_schema, &other_code).is_empty(),
        "a 401 described as not_ready passed"
    );
    let mut empty = refused.clone();
    empty["erros"] = serde_json::json!([]);
    assert!(
        !problems(&refused_schema, &empty).is_empty(),
        "no erros passed"
    );

    // `oneOf` in /status: a bundle's records are null or an object of counts, nothing else.
    let status = app.get("/status", "").await.json();
    let status_schema = response_schema(&doc, "/status", "200", false);
    assert!(problems(&status_schema, &status).is_empty());
    let mut records = status.clone();
    records["bundles"][0]["records"] = "many".into();
    assert!(
        !problems(&status_schema, &records).is_empty(),
        "records as text passed"
    );
    // `format: date-time` is checked too.
    let mut when = status.clone();
    when["bundles"][0]["loaded_at"] = "yesterday".into();
    assert!(
        !problems(&status_schema, &when).is_empty(),
        "a loaded_at that is no date-time passed"
    );

    // `additionalProperties: false` and `const` of the health answer.
    for body in [
        serde_json::json!({"status": "ok", "more": 1}),
        serde_json::json!({"status": "ready"}),
    ] {
        assert!(!problems(&health_schema, &body).is_empty(), "{body} passed");
    }
}

#[tokio::test]
async fn the_demo_bundles_answers_conform_to_the_document() {
    let doc = document();
    let app = spawn_app(&demo_data()).await;
    let cases = [
        ("/api/v1/event", "/api/v1/event", DEMO_TOKEN),
        ("/api/v1/payments", "/api/v1/payments", DEMO_TOKEN),
        // A detail file, and a row derived from a payment.
        (
            "/api/v1/payments/details",
            "/api/v1/payments/details?reference=PG2026000122",
            DEMO_TOKEN,
        ),
        (
            "/api/v1/payments/details",
            "/api/v1/payments/details?reference=PG2026000107",
            DEMO_TOKEN,
        ),
        (
            "/api/v1/payments/details",
            "/api/v1/payments/details?reference=NOPE",
            DEMO_TOKEN,
        ),
        (
            "/api/v1/payments/details",
            "/api/v1/payments/details",
            DEMO_TOKEN,
        ),
        ("/api/v1/submission/", "/api/v1/submission/", DEMO_TOKEN),
        (
            "/api/v1/submission/list",
            "/api/v1/submission/list",
            DEMO_TOKEN,
        ),
        ("/api/v1/hotsite/", "/api/v1/hotsite/", DEMO_TOKEN),
        ("/api/v1/attendees", "/api/v1/attendees", DEMO_TOKEN),
        ("/api/v1/event", "/api/v1/event", "wrong-token"),
        ("/healthz", "/healthz", ""),
        ("/readyz", "/readyz", ""),
        ("/status", "/status", ""),
    ];
    for (path, request, token) in cases {
        assert_conforms(&app, &doc, path, request, token).await;
    }
}

/// A good token of a bundle that cannot be served answers 503 `bundle_unavailable` on every
/// documented GET of the API, as the document says (no `Retry-After`: that is `not_ready`'s).
#[tokio::test]
async fn a_bundle_not_served_answers_every_api_read_as_documented() {
    let doc = document();
    let data = crate::helpers::TempData::new();
    data.with_demo("demo");
    data.write("broken/bundle.toml", "tokens = [\"broken-token\"]\n");
    data.write("broken/event.json", "{\"data\": [");
    let app = spawn_app(data.path()).await;
    let reads: Vec<&String> = doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        // The routes with a second header (security `app`) check it first: not these.
        .filter(|(path, ops)| {
            path.starts_with("/api/")
                && ops["get"]["security"]
                    .as_array()
                    .is_some_and(|s| s.iter().all(|r| r.get("app").is_none()))
        })
        .map(|(path, _)| path)
        .collect();
    assert!(reads.len() >= 14, "{reads:?}");
    for path in reads {
        let request = path.replace("{id}", "1");
        let res = app.get(&request, "broken-token").await;
        res.assert_error(503, "bundle_unavailable");
        assert_eq!(res.header("retry-after"), None, "{request}");
        let schema = response_schema(&doc, path, "503", true);
        let found = problems(&schema, &res.json());
        assert!(found.is_empty(), "{request}: {found:#?}");
    }
}

#[tokio::test]
async fn the_journal_filtered_or_refused_conforms_to_the_document() {
    let doc = document();
    let app = crate::helpers::loaded_with(&demo_data(), |o| o.journal = 10);
    let app = crate::helpers::serve_app(app).await;
    let details = "/api/v1/payments/details";
    for (content_type, body) in [
        ("application/json", &br#"{"reference": "PG2026000122"}"#[..]),
        (
            "application/x-www-form-urlencoded",
            b"reference=PG2026000107",
        ),
    ] {
        app.send(
            Method::GET,
            details,
            Some(DEMO_TOKEN),
            Some((content_type, body)),
        )
        .await;
    }
    app.get("/api/v1/event", "wrong-token").await;

    for (request, status) in [
        ("/_journal", 200),
        (
            "/_journal?method=get&path=/api/v1/payments*&status=2xx",
            200,
        ),
        ("/_journal?status=4xx", 200),
        ("/_journal?bundle=demo", 200),
        ("/_journal?nope=1", 400),
        ("/_journal?status=6xx", 400),
    ] {
        let res = app.get(request, "").await;
        assert_eq!(res.status, status, "{request}: {}", res.text());
        let schema = response_schema(&doc, "/_journal", &status.to_string(), true);
        assert!(!schema.is_null(), "{request}: {status} is not documented");
        let problems = problems(&schema, &res.json());
        assert!(problems.is_empty(), "{request} {status}: {problems:#?}");
    }
    let params: Vec<&str> = doc["paths"]["/_journal"]["get"]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(params, ["method", "path", "status", "bundle"]);
}

/// Every read of a whole body, one record by id (found and not), and a page (and a bad one)
/// where the document takes `page`, as the document lists them: the answers conform.
#[tokio::test]
async fn every_documented_read_conforms_found_missing_and_paged() {
    let doc = document();
    let app = spawn_app(&demo_data()).await;
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        if !path.starts_with("/api/v1/") {
            continue;
        }
        let token_only = item["get"]["security"][0]
            .as_object()
            .is_some_and(|s| s.len() == 1 && s.contains_key("token"));
        if !token_only {
            continue; // writes (no GET) and the two-header routes: tests/api/writes.rs, company.rs
        }
        let params = item["get"]["parameters"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let takes = |n: &str| params.iter().any(|p| p["name"] == n);
        if takes("reference") {
            continue; // the details endpoint: the cases above
        }
        let mut requests = Vec::new();
        match path.strip_suffix("/{id}") {
            Some(list) => {
                let body = app.get(list, DEMO_TOKEN).await.json();
                let id = record_id(&body).unwrap_or_else(|| panic!("no id in {list}: {body}"));
                requests.push((format!("{list}/{id}"), DEMO_TOKEN));
                requests.push((format!("{list}/0"), DEMO_TOKEN));
            }
            None => {
                requests.push((path.clone(), DEMO_TOKEN));
                requests.push((path.clone(), "wrong-token"));
            }
        }
        if takes("page") {
            requests.push((format!("{path}?page=1&per_page=2"), DEMO_TOKEN));
            requests.push((format!("{path}?page=0"), DEMO_TOKEN));
        }
        for (request, token) in requests {
            assert_conforms(&app, &doc, path, &request, token).await;
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} answers checked");
}

/// After check-ins made here the attendees carry `checkin`, `checkin_date` and
/// `checkin_sessions`: the document names them, and the list, the one record and `/status`
/// (every bundle's record counts) conform with every object shape closed.
#[tokio::test]
async fn attendees_after_check_ins_and_the_status_conform_closed() {
    let doc = document();
    let app = spawn_app(&demo_data()).await;
    let list = app.get("/api/v1/attendees", DEMO_TOKEN).await.json();
    let first = &list["data"][0];
    let (id, code) = (&first["id_attendees"], &first["checkin_code"]);
    let session = &app.get("/api/v1/session", DEMO_TOKEN).await.json()["data"][0]["id_session"];
    for (path, body) in [
        (
            "/api/v1/checkin/attendees",
            serde_json::json!([{"checkin_code": code.to_string(), "checkin": 1, "checkin_date": "2026-09-15T08:01:00"}]),
        ),
        (
            "/api/v1/checkin/sessions",
            serde_json::json!([{"id_attendees": id, "id_session": session, "checkin": 1, "checkin_date": "2026-09-15T09:00:00"}]),
        ),
    ] {
        let bytes = serde_json::to_vec(&body).expect("JSON");
        let res = app
            .send(
                Method::POST,
                path,
                Some(DEMO_TOKEN),
                Some(("application/json", &bytes)),
            )
            .await;
        assert_eq!(res.status, 200, "{path}: {}", res.text());
    }
    for (path, request) in [
        ("/api/v1/attendees", "/api/v1/attendees".to_string()),
        ("/api/v1/attendees/{id}", format!("/api/v1/attendees/{id}")),
    ] {
        let body = app.get(&request, DEMO_TOKEN).await.json();
        let record = body["data"]
            .as_array()
            .and_then(|d| d.iter().find(|a| a["id_attendees"] == *id))
            .unwrap_or(&body);
        assert!(
            record.get("checkin_sessions").is_some(),
            "{request}: {body}"
        );
        let problems = problems(&response_schema(&doc, path, "200", true), &body);
        assert!(problems.is_empty(), "{request}: {problems:#?}");
    }
    let status = app.get("/status", "").await.json();
    let problems = problems(&response_schema(&doc, "/status", "200", true), &status);
    assert!(problems.is_empty(), "/status: {problems:#?}");
}

/// The id of a list's first record: its first `id_` member whose values differ from record to
/// record (`id_event` is the same in all).
fn record_id(list: &Value) -> Option<i64> {
    let data = list["data"].as_array()?;
    let first = data.first()?.as_object()?;
    first
        .iter()
        .filter(|(k, v)| k.starts_with("id_") && v.is_i64())
        .find(|(k, _)| {
            let mut values: Vec<&Value> = data.iter().map(|r| &r[k.as_str()]).collect();
            values.dedup();
            values.len() == data.len()
        })
        .and_then(|(_, v)| v.as_i64())
}
