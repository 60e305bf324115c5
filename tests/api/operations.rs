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
        .write("broken/event.json", "{\"data\": [}")
        .with_demo("malformed")
        .write(
            "malformed/bundle.toml",
            "tokens = \"secret-malformed-token\"\n",
        );
    let app = spawn_app(data.path()).await;

    let res = app.send(Method::GET, "/status", None, None).await;

    assert_eq!(res.status, 200);
    for secret in [
        "demo-token",
        "secret-broken-token",
        "secret-malformed-token",
    ] {
        assert!(
            !res.text().contains(secret),
            "{secret} in /status: {}",
            res.text()
        );
    }
    let v = res.json();
    let bundles = v["bundles"].as_array().expect("bundles");
    assert_eq!(bundles.len(), 3);
    let broken = &bundles[0];
    assert_eq!(broken["name"], "broken");
    assert_eq!(broken["served"], false);
    let error = broken["errors"][0].as_str().expect("an error line");
    assert!(error.contains("broken/event.json:1:11:"), "{error}");
    assert_eq!(broken["tokens"], 1);
    let malformed = bundles[2]["errors"][0].as_str().expect("an error line");
    assert!(
        malformed.contains(
            "malformed/bundle.toml: tokens: expected an array of strings, found a string"
        ),
        "{malformed}"
    );
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
        .assert_error(503, "bundle_unavailable");
    app.get("/api/v1/event", "nobodys-token")
        .await
        .assert_error(401, "invalid_token");
}

#[tokio::test]
async fn a_broken_bundle_never_takes_a_good_bundles_token() {
    let data = TempData::new();
    // "a-copy" comes first in name order, names the demo token, and is broken.
    data.with_demo("a-copy")
        .with_demo("demo")
        .write("a-copy/payments.json", "[{}]");
    let app = spawn_app(data.path()).await;

    assert_eq!(
        app.get("/api/v1/event", crate::helpers::DEMO_TOKEN)
            .await
            .status,
        200
    );
    let status = app.send(Method::GET, "/status", None, None).await.json();
    let copy = &status["bundles"][0];
    assert_eq!(copy["name"], "a-copy");
    let errors: Vec<&str> = copy["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|e| e.as_str())
        .collect();
    assert!(
        errors.iter().any(|e| e.ends_with("a-copy/bundle.toml: token demo… is also named by bundle \"demo\", which has it (a token opens one bundle): bundle \"a-copy\" is not served")),
        "{errors:#?}"
    );
    assert_eq!(status["bundles"][1]["served"], true);
}
