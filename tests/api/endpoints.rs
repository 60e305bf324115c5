//! Every endpoint of the API text, served from the demo bundle over real HTTP.

use crate::helpers::{demo_data, spawn_app, DEMO_TOKEN};
use reqwest::Method;
use serde_json::Value;

/// A demo file as compact JSON: what its endpoint must answer, byte for byte.
fn compact_file(rel: &str) -> String {
    let text = std::fs::read_to_string(demo_data().join("demo").join(rel)).expect("demo file");
    let v: Value = serde_json::from_str(&text).expect("demo file is JSON");
    v.to_string()
}

#[tokio::test]
async fn every_endpoint_answers_its_file_compact() {
    let app = spawn_app(&demo_data()).await;
    let cases = [
        ("/api/v1/event", "event.json"),
        ("/api/v1/payments", "payments.json"),
        ("/api/v1/submission/", "submission.json"),
        ("/api/v1/submission/list", "submission_list.json"),
        ("/api/v1/hotsite/", "hotsite.json"),
        ("/api/v1/attendees", "attendees.json"),
        ("/api/v1/attendees/", "attendees.json"),
        (
            "/api/v1/payments/details?reference=PG2026000122",
            "payment_details/PG2026000122.json",
        ),
    ];
    for (path, file) in cases {
        let res = app.get(path, DEMO_TOKEN).await;

        assert_eq!(res.status, 200, "{path}: {}", res.text());
        assert_eq!(
            res.header("content-type"),
            Some("application/json; charset=utf-8"),
            "{path}"
        );
        assert_eq!(
            res.header("content-length"),
            Some(res.body.len().to_string().as_str()),
            "{path}"
        );
        assert_eq!(
            res.text(),
            compact_file(file),
            "{path} answers {file}, compact"
        );
    }
}

#[tokio::test]
async fn demo_bodies_have_the_documented_shapes() {
    let app = spawn_app(&demo_data()).await;

    let event = app.get("/api/v1/event", DEMO_TOKEN).await.json();
    assert_eq!(event["count"], 1);
    assert!(event["data"][0]["tickets"]
        .as_array()
        .is_some_and(|t| t.len() >= 4));

    let payments = app.get("/api/v1/payments", DEMO_TOKEN).await.json();
    let n = payments["data"].as_array().map_or(0, Vec::len);
    assert!(n >= 30, "30+ payments, got {n}");
    assert_eq!(payments["count"], n);

    let submission = app.get("/api/v1/submission/", DEMO_TOKEN).await.json();
    assert_eq!(submission["count"], 2);
    assert_eq!(
        submission["submission_type"]["count"],
        submission["submission_type"]["data"]
            .as_array()
            .map_or(0, Vec::len)
    );

    let list = app.get("/api/v1/submission/list", DEMO_TOKEN).await.json();
    assert_eq!(list["count"], 1);
    assert!(list["submission"]["data"][0]["author"]
        .as_array()
        .is_some_and(|a| !a.is_empty()));

    let hotsite = app.get("/api/v1/hotsite/", DEMO_TOKEN).await.json();
    assert_eq!(hotsite["capa"], Value::Null);
    assert!(hotsite["areasSite"]
        .as_array()
        .is_some_and(|a| a.len() >= 3));
}

#[tokio::test]
async fn demo_keeps_decimals_placeholders_and_price_order() {
    let app = spawn_app(&demo_data()).await;

    let event = app.get("/api/v1/event", DEMO_TOKEN).await.text();
    assert!(
        event.contains(r#""price":890.00"#),
        "decimals as written: {event}"
    );
    let first_ticket_ids: Vec<u64> = {
        let v: Value = serde_json::from_str(&event).expect("JSON");
        v["data"][0]["tickets"][0]["prices"]
            .as_array()
            .expect("prices")
            .iter()
            .filter_map(|p| p["id_ticket_price"].as_u64())
            .collect()
    };
    assert_eq!(
        first_ticket_ids,
        vec![30417, 30412, 30425],
        "tiers in file order"
    );

    let submission = app.get("/api/v1/submission/", DEMO_TOKEN).await.text();
    assert!(
        submission.contains("{{name}}"),
        "placeholder kept: {submission}"
    );
}

#[tokio::test]
async fn trailing_slashes_are_optional_everywhere() {
    let app = spawn_app(&demo_data()).await;
    for path in [
        "/api/v1/event",
        "/api/v1/payments",
        "/api/v1/submission",
        "/api/v1/submission/list",
        "/api/v1/hotsite",
    ] {
        let without = app.get(path, DEMO_TOKEN).await;
        let with = app.get(&format!("{path}/"), DEMO_TOKEN).await;

        assert_eq!(without.status, 200, "{path}");
        assert_eq!(with.status, 200, "{path}/");
        assert_eq!(without.body, with.body, "{path} with and without a slash");
    }
    let details = app
        .get(
            "/api/v1/payments/details/?reference=PG2026000104",
            DEMO_TOKEN,
        )
        .await;
    assert_eq!(details.status, 200);
}

#[tokio::test]
async fn head_answers_the_get_headers_and_sends_no_body_bytes() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let app = spawn_app(&demo_data()).await;
    let get = app.get("/api/v1/event", DEMO_TOKEN).await;
    // A raw HTTP/1.1 connection: HEAD, then GET /healthz on the same connection. Had the HEAD
    // answer carried body bytes, they would stand where the second status line must be.
    let addr = app.base.trim_start_matches("http://");
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let requests = format!(
        "HEAD /api/v1/event HTTP/1.1\r\nHost: {addr}\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\r\n\
         GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(requests.as_bytes()).await.expect("write");
    let mut raw = String::new();
    conn.read_to_string(&mut raw).await.expect("read");

    let (head, rest) = raw
        .split_once("\r\n\r\n")
        .expect("the HEAD answer's headers");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{raw}");
    let len = format!("content-length: {}", get.body.len());
    assert!(head.lines().any(|l| l.eq_ignore_ascii_case(&len)), "{head}");
    assert!(
        head.contains("content-type: application/json; charset=utf-8"),
        "{head}"
    );
    assert!(
        rest.starts_with("HTTP/1.1 200 OK"),
        "HEAD sent body bytes: {rest:.80}"
    );
    assert!(rest.ends_with(r#"{"status":"ok"}"#), "{rest}");
    let unauthorised = app.send(Method::HEAD, "/api/v1/event", None, None).await;
    assert_eq!(unauthorised.status, 401, "HEAD is authorised like GET");
}

#[tokio::test]
async fn head_over_http2_answers_headers_only() {
    let app = spawn_app(&demo_data()).await;
    let client = crate::helpers::client_builder()
        .http2_prior_knowledge()
        .build()
        .expect("client");

    let res = client
        .head(format!("{}/api/v1/payments/", app.base))
        .header("Authorization-Token", DEMO_TOKEN)
        .send()
        .await
        .expect("HEAD over HTTP/2 is answered");

    assert_eq!(res.version(), reqwest::Version::HTTP_2);
    assert_eq!(res.status(), 200);
    let declared = res
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let get = app.get("/api/v1/payments/", DEMO_TOKEN).await;
    assert_eq!(declared, Some(get.body.len().to_string()));
    assert!(res.bytes().await.expect("no body").is_empty());
}

#[tokio::test]
async fn the_token_is_trimmed_and_otherwise_exact() {
    let app = spawn_app(&demo_data()).await;

    assert_eq!(app.get("/api/v1/event", "  demo-token\t").await.status, 200);
    app.get("/api/v1/event", "DEMO-TOKEN")
        .await
        .assert_error(401, "invalid_token");
    app.get("/api/v1/event", "demo-token2")
        .await
        .assert_error(401, "invalid_token");
}

#[tokio::test]
async fn http2_prior_knowledge_is_served() {
    let app = spawn_app(&demo_data()).await;
    let client = crate::helpers::client_builder()
        .http2_prior_knowledge()
        .build()
        .expect("client");

    let res = client
        .get(format!("{}/api/v1/event", app.base))
        .header("Authorization-Token", DEMO_TOKEN)
        .send()
        .await
        .expect("answered");

    assert_eq!(res.version(), reqwest::Version::HTTP_2);
    assert_eq!(res.status(), 200);
    let body = res.text().await.expect("body");
    assert_eq!(body, compact_file("event.json"));
}
