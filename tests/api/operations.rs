//! The routes that need no token: `/healthz` and `/status`.

use crate::helpers::{spawn_app, TempData};
use eventbox::app::App;
use eventbox::config::ServeOptions;
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

/// Options built in code are checked as `serve` checks its flags: refused with serve's message,
/// never quietly changed (a journal capped, CORS turned off).
#[test]
fn an_app_refuses_the_options_serve_refuses() {
    let data = TempData::new();
    let mut options = ServeOptions::for_folder(data.path());
    options.journal = 100_000_000;
    let refused = App::with_options(&options).expect_err("a journal over 100,000");
    assert!(
        refused
            .to_string()
            .starts_with("--journal keeps at most 100000 requests"),
        "{refused}"
    );
    let mut options = ServeOptions::for_folder(data.path());
    options.cors_origin = vec!["not a url".into()];
    assert!(
        App::with_options(&options).is_err(),
        "an origin that is not one"
    );
    assert!(App::with_options(&ServeOptions::for_folder(data.path())).is_ok());
}

/// An embedder reads what `/status` shows from the app itself: which bundles are served, and
/// each one's problems with file and place.
#[test]
fn the_app_tells_which_bundles_are_served_and_their_problems() {
    let data = TempData::new();
    data.with_demo("good")
        .write("broken/bundle.toml", "tokens = [\"broken-token\"]\n")
        .write("broken/event.json", "{\"data\": [");
    let app = crate::helpers::loaded_with(data.path(), |_| {});
    let shown = |app: &eventbox::app::App| -> Vec<(String, bool, Vec<String>)> {
        app.bundles()
            .into_iter()
            .map(|b| {
                let problems = b.problems.iter().map(ToString::to_string).collect();
                (b.name, b.served, problems)
            })
            .collect()
    };
    let bundles = shown(&app);
    assert_eq!(bundles.len(), 2, "{bundles:?}");
    let (name, served, problems) = &bundles[0];
    assert_eq!((name.as_str(), *served), ("broken", false));
    assert!(
        problems.len() == 1 && problems[0].contains("broken/event.json:1:"),
        "{problems:?}"
    );
    assert_eq!(bundles[1], ("good".to_string(), true, vec![]));

    // The good one broken in turn: still served (its last good version), with the error.
    data.write("good/event.json", "[]");
    app.load().expect("the folder lists");
    let bundles = shown(&app);
    let (name, served, problems) = &bundles[1];
    assert_eq!((name.as_str(), *served), ("good", true));
    assert!(
        problems.iter().any(|p| p.contains("good/event.json")),
        "{problems:?}"
    );
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
