//! The OpenAPI document (`openapi.json`, served at `/openapi.json`): served as the router's own
//! routes say, and the demo bundle's real answers conform to it. schemathesis in CI is the full
//! check (generated requests, every status); these keep `cargo test` honest about drift.

use eventbox::api::{API, OPERATIONS};
use eventbox::http::router::{Route, OPENAPI};
use reqwest::Method;
use serde_json::Value;

use crate::helpers::{demo_data, spawn_app, TestApp, DEMO_TOKEN};

fn document() -> Value {
    serde_json::from_slice(OPENAPI).expect("openapi.json is JSON")
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

#[test]
fn the_document_lists_the_tables_endpoints_and_only_routes_that_exist() {
    let doc = document();

    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    let paths = doc["paths"].as_object().expect("paths");
    for path in API.iter().map(|e| e.path) {
        let item = paths.get(path).unwrap_or_else(|| panic!("{path} missing"));
        assert!(item.get("head").is_some(), "{path}: HEAD is not described");
        let get = &item["get"];
        assert_eq!(get["security"][0]["token"], serde_json::json!([]), "{path}");
        for status in ["200", "304", "401", "406", "503"] {
            assert!(get["responses"].get(status).is_some(), "{path} {status}");
        }
    }
    for path in paths.keys() {
        assert!(Route::of(path).is_some(), "{path} is not a route");
    }
    for path in OPERATIONS.iter().map(|e| e.path) {
        assert!(paths.contains_key(path), "{path} missing");
    }
}

/// The JSON type names a value has (an integer is also a number).
fn types_of(v: &Value) -> &'static [&'static str] {
    match v {
        Value::Null => &["null"],
        Value::Bool(_) => &["boolean"],
        Value::Number(n) if n.is_i64() || n.is_u64() => &["integer", "number"],
        Value::Number(_) => &["number"],
        Value::String(_) => &["string"],
        Value::Array(_) => &["array"],
        Value::Object(_) => &["object"],
    }
}

/// A small JSON Schema check (`$ref`, `type`, `const`, `enum`, `allOf`, `oneOf`, `required`,
/// `properties`, `items`; not `pattern`, which schemathesis checks). With `strict`, an object member the schema
/// does not name is reported too: the demo bundle has no fields beyond the API text's tables.
fn conform(doc: &Value, schema: &Value, v: &Value, at: &str, strict: bool, out: &mut Vec<String>) {
    if let Some(name) = schema["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
    {
        conform(doc, &doc["components"]["schemas"][name], v, at, strict, out);
    }
    if let Some(c) = schema.get("const") {
        if c != v {
            out.push(format!("{at}: {v} is not {c}"));
        }
    }
    if let Some(choices) = schema["enum"].as_array() {
        if !choices.contains(v) {
            out.push(format!("{at}: {v} is none of {choices:?}"));
        }
    }
    // The first part of an `allOf` is the whole shape; later parts narrow some of its members.
    for (i, part) in schema["allOf"].as_array().into_iter().flatten().enumerate() {
        conform(doc, part, v, at, strict && i == 0, out);
    }
    let allowed: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !allowed.is_empty() && !types_of(v).iter().any(|t| allowed.contains(t)) {
        out.push(format!("{at}: {v} is not {allowed:?}"));
    }
    if let Some(one_of) = schema["oneOf"].as_array() {
        let fits = one_of
            .iter()
            .filter(|s| {
                let mut errs = Vec::new();
                conform(doc, s, v, at, strict, &mut errs);
                errs.is_empty()
            })
            .count();
        if fits != 1 {
            out.push(format!("{at}: fits {fits} of oneOf"));
        }
    }
    if let (Some(required), Some(obj)) = (schema["required"].as_array(), v.as_object()) {
        for name in required.iter().filter_map(Value::as_str) {
            if !obj.contains_key(name) {
                out.push(format!("{at}: {name} missing"));
            }
        }
    }
    if let (Some(props), Some(obj)) = (schema["properties"].as_object(), v.as_object()) {
        for (name, value) in obj {
            match props.get(name) {
                Some(s) => conform(doc, s, value, &format!("{at}.{name}"), strict, out),
                None if strict => out.push(format!("{at}.{name}: not in the document")),
                None => {}
            }
        }
    }
    if let (Some(items), Some(list)) = (schema.get("items"), v.as_array()) {
        for (i, item) in list.iter().enumerate() {
            conform(doc, items, item, &format!("{at}[{i}]"), strict, out);
        }
    }
}

/// The schema an operation documents for a status.
fn response_schema<'a>(doc: &'a Value, path: &str, status: &str) -> &'a Value {
    let mut response = &doc["paths"][path]["get"]["responses"][status];
    if let Some(name) = response["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("#/components/responses/"))
    {
        response = &doc["components"]["responses"][name];
    }
    &response["content"]["application/json"]["schema"]
}

async fn assert_conforms(app: &TestApp, doc: &Value, path: &str, request: &str, token: &str) {
    let strict = token == DEMO_TOKEN;
    let res = app.get(request, token).await;
    let status = res.status.as_u16().to_string();
    let schema = response_schema(doc, path, &status);
    assert!(!schema.is_null(), "{request}: {status} is not documented");
    let mut problems = Vec::new();
    conform(doc, schema, &res.json(), "", strict, &mut problems);
    assert!(problems.is_empty(), "{request} {status}: {problems:#?}");
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
        ("/api/v1/event", "/api/v1/event", "wrong-token"),
        ("/healthz", "/healthz", ""),
        ("/readyz", "/readyz", ""),
        ("/status", "/status", ""),
    ];
    for (path, request, token) in cases {
        assert_conforms(&app, &doc, path, request, token).await;
    }
}
