//! The routes that need no token: `/healthz` and `/status`.

use crate::helpers::{spawn_app, TempData};
use reqwest::Method;

#[tokio::test]
async fn healthz_answers_without_a_token() {
    let data = TempData::new();
    let app = spawn_app(data.path()).await;

    let res = app.send(Method::GET, "/healthz", None, None).await;

    assert_eq!(res.status, 200);
    assert_eq!(res.text(), r#"{"status":"ok"}"#);
    assert_eq!(
        res.header("content-type"),
        Some("application/json; charset=utf-8")
    );
}

#[tokio::test]
async fn status_describes_each_bundle_and_never_shows_a_token() {
    let data = TempData::new();
    data.with_demo("good")
        .write("broken/bundle.toml", "tokens = [\"secret-broken-token\"]\n")
        .write("broken/event.json", "{\"data\": [}");
    let app = spawn_app(data.path()).await;

    let res = app.send(Method::GET, "/status", None, None).await;

    assert_eq!(res.status, 200);
    assert!(
        !res.text().contains("demo-token"),
        "a token in /status: {}",
        res.text()
    );
    assert!(
        !res.text().contains("secret-broken-token"),
        "a token in /status: {}",
        res.text()
    );
    let v = res.json();
    let bundles = v["bundles"].as_array().expect("bundles");
    assert_eq!(bundles.len(), 2);
    let broken = &bundles[0];
    assert_eq!(broken["name"], "broken");
    assert_eq!(broken["served"], false);
    let error = broken["errors"][0].as_str().expect("an error line");
    assert!(error.contains("broken/event.json:1:11:"), "{error}");
    let good = &bundles[1];
    assert_eq!(good["name"], "good");
    assert_eq!(good["served"], true);
    assert_eq!(good["id_event"], 48213);
    assert_eq!(good["tokens"], 1);
    assert_eq!(good["records"]["payments"], 32);
    assert_eq!(good["records"]["payment_details"], 2);
    assert!(good["loaded_at"].as_str().is_some_and(|t| t.ends_with('Z')));
    assert_eq!(good["errors"], serde_json::json!([]));
}

#[tokio::test]
async fn a_broken_bundle_does_not_stop_a_good_one() {
    let data = TempData::new();
    data.with_demo("good")
        .write("broken/bundle.toml", "tokens = [\"broken-token\"]\n")
        .write("broken/event.json", "{}");
    let app = spawn_app(data.path()).await;

    assert_eq!(
        app.get("/api/v1/event", crate::helpers::DEMO_TOKEN)
            .await
            .status,
        200
    );
    app.get("/api/v1/event", "broken-token")
        .await
        .assert_error(401, "invalid_token");
}
