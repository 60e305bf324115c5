//! The company and institutional routes over real HTTP: `GET /customclient/events`,
//! `POST /custom/getdata` and `/custom/getdatasubscribed`, with their second header and the
//! codes api-fgv.md documents, and the date range.

use eventbox::testing::{Bundle, TestServer};
use reqwest::Method;
use serde_json::{json, Value};

use crate::fixtures;
use crate::helpers::{answer, demo_data, spawn_app, Answer, TestApp, DEMO_TOKEN};

async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    token: Option<&str>,
    app_key: Option<&str>,
    body: Option<&str>,
) -> Answer {
    let mut req = app.client.request(method, format!("{}{path}", app.base));
    if let Some(t) = token {
        req = req.header("Authorization-Token", t);
    }
    if let Some(a) = app_key {
        req = req.header("Authorization-App", a);
    }
    if let Some(b) = body {
        req = req
            .header("Content-Type", "application/json")
            .body(b.to_string());
    }
    answer(req).await
}

#[tokio::test]
async fn the_second_header_and_the_token_answer_the_documented_codes() {
    let app = spawn_app(&demo_data()).await;
    let routes = [
        (Method::GET, "/api/v1/customclient/events", None),
        (Method::POST, "/api/v1/custom/getdata", Some("{}")),
        (
            Method::POST,
            "/api/v1/custom/getdatasubscribed/",
            Some("{}"),
        ),
    ];
    for (method, path, body) in routes {
        let ok = call(
            &app,
            method.clone(),
            path,
            Some(DEMO_TOKEN),
            Some("company-app"),
            body,
        )
        .await;
        assert_eq!(ok.status, 200, "{path}: {}", ok.text());
        call(&app, method.clone(), path, Some(DEMO_TOKEN), None, body)
            .await
            .assert_error(401, "InvalidAuthorizationApp");
        call(
            &app,
            method.clone(),
            path,
            Some(DEMO_TOKEN),
            Some("  "),
            body,
        )
        .await
        .assert_error(401, "InvalidAuthorizationApp");
        call(
            &app,
            method.clone(),
            path,
            Some("not-a-token"),
            Some("company-app"),
            body,
        )
        .await
        .assert_error(401, "InvalidAuthorizationToken");
        call(&app, method.clone(), path, None, Some("company-app"), body)
            .await
            .assert_error(401, "InvalidAuthorizationToken");
    }
    // The other routes keep their own codes and need no second header.
    call(
        &app,
        Method::GET,
        "/api/v1/event",
        Some("not-a-token"),
        None,
        None,
    )
    .await
    .assert_error(401, "invalid_token");
}

/// A bundle.toml naming `app_keys` takes only those as `Authorization-App` on the company
/// routes (their answers hold other events' tokens and people): another key is 401
/// `InvalidAuthorizationApp`, as the platform answers a wrong one. Without `app_keys`, any
/// non-blank key (above). A blank key in the list keeps the bundle from being served.
#[tokio::test]
async fn app_keys_in_bundle_toml_are_the_only_keys_the_company_routes_take() {
    let data = crate::helpers::TempData::new();
    data.with_demo("demo");
    let toml = data.path().join("demo/bundle.toml");
    std::fs::write(
        &toml,
        "tokens = [\"demo-token\"]\napp_keys = [\"company-key-1\", \"company-key-2\", \"chave-ç\"]\n",
    )
    .expect("write");
    let app = spawn_app(data.path()).await;
    for (path, method, body) in [
        ("/api/v1/customclient/events", Method::GET, None),
        ("/api/v1/custom/getdata", Method::POST, Some("{}")),
    ] {
        // UTF-8 too, as a token is read; only those named.
        for (key, taken) in [
            ("company-key-1", true),
            (" company-key-2 ", true),
            ("chave-ç", true),
            ("company-key", false),
            ("company-key-10", false),
            ("other", false),
        ] {
            let got = call(
                &app,
                method.clone(),
                path,
                Some(DEMO_TOKEN),
                Some(key),
                body,
            )
            .await;
            if taken {
                assert_eq!(got.status, 200, "{path} {key}: {}", got.text());
            } else {
                got.assert_error(401, "InvalidAuthorizationApp");
            }
        }
    }
    assert_eq!(app.get("/api/v1/event", DEMO_TOKEN).await.status, 200);
    // /status says a lock is in force, by count.
    let status = app.send(Method::GET, "/status", None, None).await.json();
    assert_eq!(status["bundles"][0]["app_keys"], 3, "{status}");
    assert!(!status.to_string().contains("company-key"), "{status}");

    let broken = crate::helpers::TempData::new();
    broken.with_demo("demo");
    std::fs::write(
        broken.path().join("demo/bundle.toml"),
        "tokens = [\"demo-token\"]\napp_keys = [\" \"]\n",
    )
    .expect("write");
    let app = spawn_app(broken.path()).await;
    let status = app.send(Method::GET, "/status", None, None).await.text();
    assert!(
        status.contains("app_keys[0]") && status.contains("an app key must not be blank"),
        "{status}"
    );
    app.get("/api/v1/event", DEMO_TOKEN)
        .await
        .assert_error(503, "bundle_unavailable");
}

#[tokio::test]
async fn company_events_are_served_as_written_and_as_documented() {
    let documented: Value =
        serde_json::from_str(fixtures::EMPRESAS_EVENTS_JSON).expect("the fixture is JSON");
    let server = TestServer::from_bundles([Bundle::new("company")
        .token("company-token")
        .json(
            "event",
            serde_json::from_str(fixtures::EVENT_JSON).expect("JSON"),
        )
        .json("company_events", documented.clone())])
    .start()
    .expect("starts");
    let res = answer(
        crate::helpers::client()
            .get(server.url("/api/v1/customclient/events"))
            .header("Authorization-Token", "company-token")
            .header("Authorization-App", "any"),
    )
    .await;
    assert_eq!(res.status, 200);
    assert_eq!(res.json(), documented);
}

#[tokio::test]
async fn the_date_range_picks_events_or_registrations_and_a_bad_one_is_502() {
    let app = spawn_app(&demo_data()).await;
    let post = |path: &'static str, body: &'static str| {
        let app = &app;
        async move {
            call(
                app,
                Method::POST,
                path,
                Some(DEMO_TOKEN),
                Some("k"),
                Some(body),
            )
            .await
        }
    };
    let ids = |v: Value| -> Vec<Value> {
        v["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(|e| e["evento.id"].clone())
            .collect()
    };

    let september = post(
        "/api/v1/custom/getdata",
        r#"{"dataInicio": "2026-09-01", "dataFim": "2026-09-30"}"#,
    )
    .await;
    assert_eq!(ids(september.json()), vec![json!(48213)]);
    let autumn = post(
        "/api/v1/custom/getdata",
        r#"{"dataInicio": "2026-09-15", "dataFim": "2026-10-20"}"#,
    )
    .await;
    assert_eq!(
        ids(autumn.json()),
        vec![json!(48213), json!(48377)],
        "bounds included"
    );

    let june = post(
        "/api/v1/custom/getdatasubscribed",
        r#"{"dataInicio": "2026-06-01", "dataFim": "2026-06-30"}"#,
    )
    .await
    .json();
    let people = june["data"][0]["participantes"]
        .as_array()
        .expect("participants");
    assert_eq!(people.len(), 1, "only June's registration: {june}");
    assert_eq!(people[0]["inscricao.data_inscricao"], "2026-06-15T10:20:00");
    let none = post(
        "/api/v1/custom/getdatasubscribed",
        r#"{"dataInicio": "2020-01-01", "dataFim": "2020-12-31"}"#,
    )
    .await;
    assert_eq!(none.json(), json!({"data": []}));

    for bad in [
        "",
        "not json",
        r#"{"dataInicio": "2026-10-01", "dataFim": "2026-09-01"}"#,
        r#"{"dataInicio": "01/09/2026"}"#,
    ] {
        let res = call(
            &app,
            Method::POST,
            "/api/v1/custom/getdata",
            Some(DEMO_TOKEN),
            Some("k"),
            Some(bad),
        )
        .await;
        res.assert_error(502, "InvalidParameter");
    }
}

#[tokio::test]
async fn without_dates_the_range_is_the_last_30_days_to_tomorrow() {
    let today = chrono::Utc::now().date_naive();
    let dated = |days_ago: i64, id: i64| {
        let d = today - chrono::Duration::days(days_ago);
        json!({"evento.id": id, "evento.data": format!("{d}T00:00:00"), "participantes": []})
    };
    let server = TestServer::from_bundles([Bundle::new("fgv")
        .token("fgv-token")
        .json(
            "event",
            serde_json::from_str(fixtures::EVENT_JSON).expect("JSON"),
        )
        .json(
            "custom_getdata",
            json!({"data": [dated(31, 1), dated(30, 2), dated(0, 3), dated(-1, 4), dated(-2, 5)]}),
        )])
    .start()
    .expect("starts");
    let res = answer(
        crate::helpers::client()
            .post(server.url("/api/v1/custom/getdata"))
            .header("Authorization-Token", "fgv-token")
            .header("Authorization-App", "fgv")
            .header("Content-Type", "application/json")
            .body("{}"),
    )
    .await;
    let ids: Vec<i64> = res.json()["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|e| e["evento.id"].as_i64())
        .collect();
    assert_eq!(ids, vec![2, 3, 4]);
}
