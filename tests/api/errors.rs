//! The error contract: each stable code with its status and body, and the order of the checks
//! (path, method, token, then the request's own parameters).

use crate::helpers::{demo_data, spawn_app, DEMO_TOKEN};
use reqwest::Method;

const DETAILS: &str = "/api/v1/payments/details";

#[tokio::test]
async fn missing_or_blank_token_is_missing_token() {
    let app = spawn_app(&demo_data()).await;

    app.send(Method::GET, "/api/v1/event", None, None)
        .await
        .assert_error(401, "missing_token");
    app.get("/api/v1/payments", "   ")
        .await
        .assert_error(401, "missing_token");
}

#[tokio::test]
async fn unknown_token_is_invalid_token_on_every_endpoint() {
    let app = spawn_app(&demo_data()).await;
    for path in [
        "/api/v1/event",
        "/api/v1/payments",
        DETAILS,
        "/api/v1/submission/",
        "/api/v1/submission/list",
        "/api/v1/hotsite/",
    ] {
        app.get(path, "no-such-token")
            .await
            .assert_error(401, "invalid_token");
    }
}

#[tokio::test]
async fn details_without_a_reference_is_missing_reference() {
    let app = spawn_app(&demo_data()).await;

    app.get(DETAILS, DEMO_TOKEN)
        .await
        .assert_error(400, "missing_reference");
    app.get(&format!("{DETAILS}?reference="), DEMO_TOKEN)
        .await
        .assert_error(400, "missing_reference");
    app.send(
        Method::GET,
        DETAILS,
        Some(DEMO_TOKEN),
        Some(("application/json", br#"{"other":"x"}"#)),
    )
    .await
    .assert_error(400, "missing_reference");
}

#[tokio::test]
async fn a_body_that_is_neither_json_nor_form_is_invalid_body() {
    let app = spawn_app(&demo_data()).await;
    let bodies: [(&str, &[u8]); 5] = [
        ("application/json", b"{\"reference\": "),
        ("application/json", b"[\"PG2026000104\"]"),
        ("", b"{not json"),
        ("text/plain", b"just some words"),
        ("text/plain", b"reference=PG2026000104"),
    ];
    for (content_type, body) in bodies {
        app.send(
            Method::GET,
            DETAILS,
            Some(DEMO_TOKEN),
            Some((content_type, body)),
        )
        .await
        .assert_error(400, "invalid_body");
    }
}

#[tokio::test]
async fn an_unknown_reference_is_payment_not_found() {
    let app = spawn_app(&demo_data()).await;

    app.get(&format!("{DETAILS}?reference=NOPE"), DEMO_TOKEN)
        .await
        .assert_error(404, "payment_not_found");
}

#[tokio::test]
async fn a_body_over_64_kib_is_body_too_large() {
    let app = spawn_app(&demo_data()).await;
    let mut big = b"reference=PG2026000104&pad=".to_vec();
    big.resize(64 * 1024 + 1, b'x');

    app.send(
        Method::GET,
        DETAILS,
        Some(DEMO_TOKEN),
        Some(("application/x-www-form-urlencoded", &big)),
    )
    .await
    .assert_error(413, "body_too_large");

    // Exactly at the cap is read.
    big.truncate(64 * 1024);
    let res = app
        .send(
            Method::GET,
            DETAILS,
            Some(DEMO_TOKEN),
            Some(("application/x-www-form-urlencoded", &big)),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
}

#[tokio::test]
async fn other_methods_are_method_not_allowed_with_allow() {
    let app = spawn_app(&demo_data()).await;
    for method in [Method::POST, Method::PUT, Method::DELETE, Method::PATCH] {
        // OPTIONS too where it is answered (a CORS preflight): not on the admin routes.
        for (path, allow) in [
            ("/api/v1/event", "GET, HEAD, OPTIONS"),
            ("/api/v1/submission/", "GET, HEAD, OPTIONS"),
            ("/healthz", "GET, HEAD, OPTIONS"),
            ("/status", "GET, HEAD"),
        ] {
            let res = app.send(method.clone(), path, Some(DEMO_TOKEN), None).await;

            res.assert_error(405, "method_not_allowed");
            assert_eq!(res.header("allow"), Some(allow), "{method} {path}");
        }
    }
}

#[tokio::test]
async fn an_unknown_path_answers_the_framework_body_with_the_full_url() {
    let app = spawn_app(&demo_data()).await;

    let res = app.get("/api/v1/events?x=1", DEMO_TOKEN).await;

    assert_eq!(res.status, 404);
    let expected = format!(
        "No HTTP resource was found that matches the request URI '{}/api/v1/events?x=1'.",
        app.base
    );
    assert_eq!(res.json(), serde_json::json!({ "Message": expected }));
    assert_eq!(
        res.header("content-type"),
        Some("application/json; charset=utf-8")
    );
}

#[tokio::test]
async fn the_unknown_path_url_takes_its_scheme_from_x_forwarded_proto() {
    let app = spawn_app(&demo_data()).await;
    let host = app.base.trim_start_matches("http://");
    let quoted = |scheme: &str| {
        format!(
            "No HTTP resource was found that matches the request URI '{scheme}://{host}/nope?a=1'."
        )
    };

    for (proto, scheme) in [
        ("https", "https"),
        ("HTTPS", "https"),
        ("https, http", "https"),
        ("http,https", "http"),
        ("ftp", "http"),
        ("", "http"),
    ] {
        let res = app
            .request(
                Method::GET,
                "/nope?a=1",
                "",
                &[("x-forwarded-proto", proto)],
            )
            .await;
        assert_eq!(res.status, 404);
        assert_eq!(
            res.json()["Message"],
            quoted(scheme),
            "X-Forwarded-Proto: {proto:?}"
        );
    }
}

#[tokio::test]
async fn checks_run_path_then_method_then_token_then_parameters() {
    let app = spawn_app(&demo_data()).await;

    // An unknown path wins over a bad method and a missing token.
    let res = app.send(Method::POST, "/api/v2/event", None, None).await;
    assert_eq!(res.status, 404);
    assert!(res.json()["Message"].is_string());
    // A bad method wins over a missing token.
    app.send(Method::POST, "/api/v1/event", None, None)
        .await
        .assert_error(405, "method_not_allowed");
    // A bad token wins over a missing reference or an oversized body.
    app.send(Method::GET, DETAILS, None, None)
        .await
        .assert_error(401, "missing_token");
    let big = vec![b'x'; 70 * 1024];
    app.send(Method::GET, DETAILS, Some("wrong"), Some(("", &big)))
        .await
        .assert_error(401, "invalid_token");
}
