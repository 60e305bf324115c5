//! The request journal over HTTP: what each entry holds, its bound, clearing it, and `/_journal`
//! when the journal is off.

use reqwest::Method;
use serde_json::Value;

use crate::helpers::{
    demo_data, loaded_with, raw_http1, serve_app, spawn_app, TestApp, DEMO_TOKEN,
};

/// The demo bundle served with a journal of `capacity` and the control headers on.
async fn journaled(capacity: usize) -> TestApp {
    serve_app(loaded_with(&demo_data(), |o| {
        o.journal = capacity;
        o.allow_control_headers = true;
    }))
    .await
}

async fn journal(app: &TestApp) -> Value {
    let res = app.get("/_journal", "").await;
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(
        res.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    res.json()
}

/// The entries' queries, in the order listed.
fn queries(listed: &Value) -> Vec<&str> {
    listed["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["query"].as_str())
        .collect()
}

#[tokio::test]
async fn the_journal_lists_each_request_oldest_first_with_what_was_asked() {
    let app = journaled(10).await;
    app.get("/api/v1/event", DEMO_TOKEN).await;
    app.get(
        "/api/v1/payments/details?reference=PG2026000107",
        DEMO_TOKEN,
    )
    .await;
    app.send(
        Method::GET,
        "/api/v1/payments/details",
        Some(DEMO_TOKEN),
        Some(("application/json", br#"{"reference":"PG2026000104"}"#)),
    )
    .await;
    app.send(Method::GET, "/nope?x=1", None, None).await;
    app.get("/api/v1/event", "wrong-token").await;
    app.get_with(
        "/api/v1/payments/details?reference=PG2026000110",
        DEMO_TOKEN,
        &[("x-eventbox-status", "503")],
    )
    .await;
    let reset = format!(
        "GET /api/v1/submission HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         X-Eventbox-Fault: reset\r\n\r\n"
    );
    raw_http1(&app.base, &reset).await;
    app.get("/healthz", "").await;
    // The status page and the reads it polls are not kept: they pushed the clients out.
    for path in ["/status", "/_queue", "/_ui"] {
        app.get(path, "").await;
    }

    let listed = journal(&app).await;

    assert_eq!(listed["capacity"], 10);
    assert_eq!(
        listed["count"], 8,
        "/_journal itself, /status, /_queue and /_ui are not recorded"
    );
    let entries = listed["entries"].as_array().expect("entries");
    let row = |e: &Value| {
        (
            e["method"].as_str().unwrap_or("?").to_string(),
            e["path"].as_str().unwrap_or("?").to_string(),
            e["query"].clone(),
            e["bundle"].clone(),
            e["token"].clone(),
            e["status"].as_u64().unwrap_or(999),
            e["reference"].clone(),
        )
    };
    let s = |t: &str| Value::String(t.to_string());
    let expected = vec![
        (
            "GET",
            "/api/v1/event",
            Value::Null,
            s("demo"),
            s("demo"),
            200,
            Value::Null,
        ),
        (
            "GET",
            "/api/v1/payments/details",
            s("reference=PG2026000107"),
            s("demo"),
            s("demo"),
            200,
            s("PG2026000107"),
        ),
        (
            "GET",
            "/api/v1/payments/details",
            Value::Null,
            s("demo"),
            s("demo"),
            200,
            s("PG2026000104"),
        ),
        (
            "GET",
            "/nope",
            s("x=1"),
            Value::Null,
            Value::Null,
            404,
            Value::Null,
        ),
        (
            "GET",
            "/api/v1/event",
            Value::Null,
            Value::Null,
            s("wron"),
            401,
            Value::Null,
        ),
        (
            "GET",
            "/api/v1/payments/details",
            s("reference=PG2026000110"),
            s("demo"),
            s("demo"),
            503,
            s("PG2026000110"),
        ),
        (
            "GET",
            "/api/v1/submission",
            Value::Null,
            s("demo"),
            s("demo"),
            0,
            Value::Null,
        ),
        (
            "GET",
            "/healthz",
            Value::Null,
            Value::Null,
            Value::Null,
            200,
            Value::Null,
        ),
    ];
    let got: Vec<_> = entries.iter().map(row).collect();
    let expected: Vec<_> = expected
        .into_iter()
        .map(|(m, p, q, b, t, st, r)| (m.to_string(), p.to_string(), q, b, t, st, r))
        .collect();
    assert_eq!(got, expected);
    let mut previous = None;
    for e in entries {
        let time = e["time"].as_str().expect("a time");
        let parsed = chrono::DateTime::parse_from_rfc3339(time).expect("RFC 3339");
        assert!(
            time.len() == 24 && time.ends_with('Z'),
            "UTC with milliseconds: {time}"
        );
        assert!(previous.is_none_or(|p| p <= parsed), "oldest first");
        previous = Some(parsed);
        assert!(e["duration_ms"].as_f64().is_some_and(|d| d >= 0.0), "{e}");
    }
    assert!(
        !listed.to_string().contains(DEMO_TOKEN) && !listed.to_string().contains("wrong-token"),
        "no token is shown whole"
    );
}

#[tokio::test]
async fn the_journal_keeps_only_the_last_n_requests() {
    let app = journaled(3).await;
    for i in 0..5 {
        app.get(&format!("/healthz?i={i}"), "").await;
    }

    let listed = journal(&app).await;

    assert_eq!(listed["capacity"], 3);
    assert_eq!(listed["count"], 3);
    let queries = queries(&listed);
    assert_eq!(queries, ["i=2", "i=3", "i=4"]);
}

#[tokio::test]
async fn delete_empties_the_journal() {
    let app = journaled(5).await;
    app.get("/api/v1/event", DEMO_TOKEN).await;
    assert_eq!(journal(&app).await["count"], 1);

    let deleted = app.request(Method::DELETE, "/_journal", "", &[]).await;

    assert_eq!(deleted.status, 204);
    assert!(deleted.body.is_empty());
    let after = journal(&app).await;
    assert_eq!(after["count"], 0);
    assert_eq!(after["entries"], Value::Array(Vec::new()));
    let put = app.request(Method::PUT, "/_journal", "", &[]).await;
    put.assert_error(405, "method_not_allowed");
    assert_eq!(put.header("allow"), Some("GET, HEAD, DELETE"));
}

#[tokio::test]
async fn without_journal_the_route_is_404_journal_disabled() {
    let app = spawn_app(&demo_data()).await;

    let listed = app.get("/_journal", "").await;
    let deleted = app.request(Method::DELETE, "/_journal", "", &[]).await;

    listed.assert_error(404, "journal_disabled");
    deleted.assert_error(404, "journal_disabled");
    // Another method is 405 on or off, as the docs say (before, off: 404).
    for method in [Method::OPTIONS, Method::POST] {
        let other = app.request(method.clone(), "/_journal", "", &[]).await;
        other.assert_error(405, "method_not_allowed");
        assert_eq!(other.header("allow"), Some("GET, HEAD, DELETE"), "{method}");
    }
}

#[tokio::test]
async fn a_long_query_is_cut_in_the_journal() {
    let app = journaled(5).await;
    let long = "q".repeat(10 * 1024);

    app.get(&format!("/healthz?{long}"), "").await;

    let listed = journal(&app).await;
    let query = listed["entries"][0]["query"].as_str().expect("a query");
    assert_eq!(query, format!("{}…", &long[..1024]), "cut to 1024 bytes");
}

/// A token sent in the query string is not kept whole in the journal (nor shown by `/_ui`,
/// which lists it): its value is `REDACTED`, as in the access log; the rest stays as sent.
#[tokio::test]
async fn secrets_in_the_query_are_redacted_in_the_journal() {
    let app = journaled(5).await;
    app.get(
        "/api/v1/event?token=demo-token&api_key=s3cr3t&lang=pt",
        DEMO_TOKEN,
    )
    .await;

    let listed = journal(&app).await;
    assert_eq!(
        listed["entries"][0]["query"],
        "token=REDACTED&api_key=REDACTED&lang=pt"
    );
    assert!(!listed.to_string().contains("demo-token"), "{listed}");
}

/// Polls the journal until an entry satisfies `found` (bounded); that entry.
async fn until_listed(app: &TestApp, found: impl Fn(&Value) -> bool) -> Value {
    let start = std::time::Instant::now();
    loop {
        let listed = journal(app).await;
        if let Some(e) = listed["entries"]
            .as_array()
            .and_then(|a| a.iter().find(|e| found(e)))
        {
            return e.clone();
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "not journaled in time: {listed}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_client_that_gives_up_during_a_delay_is_journaled_with_status_499() {
    let app = journaled(5).await;
    let impatient = crate::helpers::client_builder()
        .timeout(std::time::Duration::from_millis(200))
        .build()
        .expect("a client");

    let gave_up = impatient
        .get(format!(
            "{}/api/v1/payments/details?reference=PG2026000107",
            app.base
        ))
        .header("Authorization-Token", DEMO_TOKEN)
        .header("X-Eventbox-Delay", "1000")
        .send()
        .await;

    assert!(
        gave_up.is_err_and(|e| e.is_timeout()),
        "the client times out"
    );
    let entry = until_listed(&app, |e| e["path"] == "/api/v1/payments/details").await;
    assert_eq!(entry["status"], 499, "{entry}");
    assert_eq!(entry["bundle"], "demo");
    assert_eq!(entry["reference"], "PG2026000107");
    let took = entry["duration_ms"].as_f64().unwrap_or(-1.0);
    assert!(
        (150.0..1000.0).contains(&took),
        "recorded when the client went away, not after the delay: {took} ms"
    );
    let metrics = app.get("/metrics", "").await.text();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("eventbox_http_requests_total{")
                && l.contains("endpoint=\"payment_details\"")
                && l.contains("status=\"499\"")),
        "{metrics}"
    );
}

#[tokio::test]
async fn entries_are_listed_in_arrival_order_not_completion_order() {
    let app = journaled(5).await;
    let slow = {
        let client = app.client.clone();
        let url = format!("{}/api/v1/event?first", app.base);
        tokio::spawn(async move {
            client
                .get(url)
                .header("Authorization-Token", DEMO_TOKEN)
                .header("X-Eventbox-Delay", "1500")
                .send()
                .await
                .map(|r| r.status())
        })
    };
    // No signal says the server has read the first request; it has long before 300 ms pass,
    // even on a loaded machine, and the second is answered long before the first's 1.5 s delay.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let fast = app.get("/api/v1/event?second", DEMO_TOKEN).await;
    let slow = slow.await.expect("no panic").expect("answered");

    assert_eq!((slow.as_u16(), fast.status.as_u16()), (200, 200));
    let listed = journal(&app).await;
    let queries = queries(&listed);
    assert_eq!(
        queries,
        ["first", "second"],
        "the first to arrive is listed first"
    );
}

#[tokio::test]
async fn over_http2_a_client_that_cancels_during_a_delay_is_journaled_with_status_499() {
    let app = journaled(5).await;
    let impatient = crate::helpers::client_builder()
        .http2_prior_knowledge()
        .timeout(std::time::Duration::from_millis(200))
        .build()
        .expect("a client");

    let gave_up = impatient
        .get(format!("{}/api/v1/event?h2", app.base))
        .header("Authorization-Token", DEMO_TOKEN)
        .header("X-Eventbox-Delay", "1000")
        .send()
        .await;

    assert!(gave_up.is_err_and(|e| e.is_timeout()), "times out");
    let entry = until_listed(&app, |e| e["query"] == "h2").await;
    assert_eq!(entry["status"], 499, "the stream reset ends it: {entry}");
}

/// The entries' `METHOD path status`, in the order listed.
fn rows(listed: &Value) -> Vec<String> {
    listed["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| format!("{} {} {}", e["method"], e["path"], e["status"]).replace('"', ""))
        .collect()
}

#[tokio::test]
async fn the_journal_lists_only_what_every_filter_given_matches() {
    let app = journaled(20).await;
    app.get("/api/v1/event", DEMO_TOKEN).await;
    app.get("/api/v1/payments", DEMO_TOKEN).await;
    app.get("/api/v1/event", "wrong-token").await;
    app.send(Method::POST, "/api/v1/event", Some(DEMO_TOKEN), None)
        .await;
    app.get("/api/v1/Submission/", DEMO_TOKEN).await;
    app.send(Method::GET, "/nope", None, None).await;

    let filtered = |query: &'static str| {
        let app = &app;
        async move {
            let res = app.get(&format!("/_journal?{query}"), "").await;
            assert_eq!(res.status, 200, "{query}: {}", res.text());
            let listed = res.json();
            assert_eq!(listed["capacity"], 20, "{query}");
            assert_eq!(
                listed["count"],
                listed["entries"].as_array().map_or(0, Vec::len),
                "count is what is listed: {query}"
            );
            rows(&listed)
        }
    };

    assert_eq!(rows(&journal(&app).await).len(), 6, "no filter: all");
    assert_eq!(filtered("method=post").await, ["POST /api/v1/event 405"]);
    assert_eq!(
        filtered("path=/API/v1/event/").await,
        [
            "GET /api/v1/event 200",
            "GET /api/v1/event 401",
            "POST /api/v1/event 405"
        ],
        "ignoring case and one trailing slash"
    );
    assert_eq!(
        filtered("path=/api/v1/submission").await,
        ["GET /api/v1/Submission/ 200"]
    );
    assert_eq!(
        filtered("path=/api/v1/p*").await,
        ["GET /api/v1/payments 200"]
    );
    assert_eq!(filtered("path=/api/*").await.len(), 5, "a prefix");
    assert_eq!(
        filtered("status=4xx").await,
        [
            "GET /api/v1/event 401",
            "POST /api/v1/event 405",
            "GET /nope 404"
        ]
    );
    assert_eq!(
        filtered("method=GET&path=/api/v1/event&status=200").await,
        ["GET /api/v1/event 200"]
    );
    assert!(filtered("method=GET&status=5xx").await.is_empty());
}

#[tokio::test]
async fn a_bad_journal_filter_is_400_invalid_journal_filter_naming_the_parameter() {
    let app = journaled(5).await;
    app.get("/api/v1/event", DEMO_TOKEN).await;

    for (query, named) in [
        ("nope=1", "`nope`"),
        ("status=6xx", "`status`"),
        ("status=20", "`status`"),
        ("path=api/v1/event", "`path`"),
        ("method=", "`method`"),
        (
            "status=200&status=201",
            "`status` cannot be used: it is given twice",
        ),
    ] {
        let res = app.get(&format!("/_journal?{query}"), "").await;
        res.assert_error(400, "invalid_journal_filter");
        let message = res.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(message.contains(named), "{query}: {message}");
    }
    let head = app
        .request(Method::HEAD, "/_journal?status=x", "", &[])
        .await;
    assert_eq!(head.status, 400);
    let delete = app
        .request(Method::DELETE, "/_journal?path=/api/v1/event", "", &[])
        .await;
    delete.assert_error(400, "invalid_journal_filter");
    assert!(
        delete.text().contains("not taken by DELETE"),
        "{}",
        delete.text()
    );
    assert_eq!(
        journal(&app).await["count"],
        1,
        "a refused DELETE empties nothing"
    );
}

#[tokio::test]
async fn two_test_runs_on_one_server_list_and_forget_their_own_bundles_requests() {
    let data = crate::helpers::TempData::new();
    data.with_demo("alpha").with_demo("beta");
    data.write("alpha/bundle.toml", "tokens = [\"alpha-token\"]\n");
    data.write("beta/bundle.toml", "tokens = [\"beta-token\"]\n");
    let app = serve_app(loaded_with(data.path(), |o| o.journal = 20)).await;
    for token in ["alpha-token", "beta-token", "alpha-token", "wrong-token"] {
        app.get("/api/v1/event", token).await;
    }
    let bundles = |listed: &Value| -> Vec<String> {
        listed["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| e["bundle"].as_str().unwrap_or("none").to_string())
            .collect()
    };

    let alpha = app.get("/_journal?bundle=alpha", "").await.json();
    assert_eq!(bundles(&alpha), ["alpha", "alpha"], "{alpha}");
    assert_eq!(alpha["count"], 2);

    let forgotten = app
        .request(Method::DELETE, "/_journal?bundle=alpha", "", &[])
        .await;
    assert_eq!(forgotten.status, 204, "{}", forgotten.text());
    assert_eq!(bundles(&journal(&app).await), ["beta", "none"]);
    let refused = app
        .request(Method::DELETE, "/_journal?bundle=beta&status=200", "", &[])
        .await;
    refused.assert_error(400, "invalid_journal_filter");
    assert_eq!(bundles(&journal(&app).await), ["beta", "none"]);

    // A name no request has, served or not, is a filter that matches nothing, as any other
    // filter: listed empty, forgotten with nothing gone (a cleanup may run twice).
    for name in ["alpha", "btea"] {
        let listed = app.get(&format!("/_journal?bundle={name}"), "").await;
        assert_eq!(listed.status, 200, "{}", listed.text());
        assert_eq!(listed.json()["count"], 0, "{name}");
    }
    let cleanup = app
        .request(Method::DELETE, "/_journal?bundle=btea", "", &[])
        .await;
    assert_eq!(cleanup.status, 204, "{}", cleanup.text());
    assert_eq!(bundles(&journal(&app).await), ["beta", "none"]);
}

#[tokio::test]
async fn request_bodies_read_are_kept_as_json_or_text_and_cut_at_16_kib() {
    let app = journaled(10).await;
    let details = "/api/v1/payments/details";
    // After a byte order mark, which the endpoint skips: the journal shows the JSON too.
    let json_body = b"\xEF\xBB\xBF{\"reference\": \"PG2026000104\", \"amount\": 10.00}";
    app.send(
        Method::GET,
        details,
        Some(DEMO_TOKEN),
        Some(("application/json", json_body)),
    )
    .await;
    app.send(
        Method::GET,
        details,
        Some(DEMO_TOKEN),
        Some((
            "application/x-www-form-urlencoded",
            b"reference=PG2026000107",
        )),
    )
    .await;
    let long = format!(
        r#"{{"reference": "PG2026000104", "pad": "{}"}}"#,
        "x".repeat(20 * 1024)
    );
    let long_answer = app
        .send(
            Method::GET,
            details,
            Some(DEMO_TOKEN),
            Some(("application/json", long.as_bytes())),
        )
        .await;
    assert_eq!(long_answer.status, 200, "{}", long_answer.text());
    let broken = app
        .send(
            Method::GET,
            details,
            Some(DEMO_TOKEN),
            Some(("application/json", b"{nope")),
        )
        .await;
    broken.assert_error(400, "invalid_body");
    // A reference in the query: the body is not read, so not kept.
    app.send(
        Method::GET,
        &format!("{details}?reference=PG2026000110"),
        Some(DEMO_TOKEN),
        Some(("application/json", br#"{"ignored": true}"#)),
    )
    .await;
    app.get("/api/v1/event", DEMO_TOKEN).await;

    let raw = app.get("/_journal", "").await.text();
    assert!(
        raw.contains(r#""body":{"reference":"PG2026000104","amount":10.00},"body_cut":false"#),
        "JSON bodies as JSON, numbers as sent: {raw}"
    );
    let listed: Value = serde_json::from_str(&raw).expect("JSON");
    let entries = listed["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 6);
    assert_eq!(
        entries[1]["body"], "reference=PG2026000107",
        "a form as text"
    );
    assert_eq!(entries[1]["reference"], "PG2026000107");
    let cut = entries[2]["body"].as_str().expect("a cut body is text");
    assert_eq!(cut.len(), 16 * 1024);
    assert!(long.starts_with(cut));
    assert_eq!(entries[2]["body_cut"], true);
    assert_eq!(entries[3]["body"], "{nope", "a refused body is kept too");
    assert_eq!(entries[3]["status"], 400);
    assert_eq!(entries[4]["body"], Value::Null, "not read");
    assert_eq!(entries[5]["body"], Value::Null);
    assert_eq!(entries[5]["body_cut"], false);
}

#[tokio::test]
async fn a_request_answered_by_a_simulated_error_is_journaled_with_the_body_it_sent() {
    let app = journaled(10).await;
    let body = br#"{"name": "Ana Lima", "email": "ana@exemplo.com", "amount": 10.00}"#;
    let refused = crate::helpers::answer(
        app.client
            .post(format!("{}/api/v1/attendees/create", app.base))
            .header("Authorization-Token", DEMO_TOKEN)
            .header("x-eventbox-status", "503")
            .header("content-type", "application/json")
            .body(&body[..]),
    )
    .await;
    refused.assert_error(503, "simulated_error");
    // A body larger than any endpoint takes: its first 16 KiB, cut as any other.
    let large = format!(r#"{{"pad": "{}"}}"#, "x".repeat(2 * 1024 * 1024));
    crate::helpers::answer(
        app.client
            .post(format!("{}/api/v1/checkin/attendees", app.base))
            .header("Authorization-Token", DEMO_TOKEN)
            .header("x-eventbox-status", "502")
            .body(large.clone()),
    )
    .await
    .assert_error(502, "simulated_error");
    // A simulated error on a request without a body keeps none.
    app.get_with("/api/v1/event", DEMO_TOKEN, &[("x-eventbox-status", "429")])
        .await
        .assert_error(429, "simulated_error");

    let raw = app.get("/_journal", "").await.text();
    assert!(
        raw.contains(
            r#""status":503,"duration_ms""#
        ) && raw.contains(
            r#""body":{"name":"Ana Lima","email":"ana@exemplo.com","amount":10.00},"body_cut":false"#
        ),
        "the refused write's body, as sent: {raw}"
    );
    let listed: Value = serde_json::from_str(&raw).expect("JSON");
    let entries = listed["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[0]["status"], 503);
    assert_eq!(entries[1]["status"], 502);
    let cut = entries[1]["body"].as_str().expect("a cut body is text");
    assert_eq!(cut.len(), 16 * 1024);
    assert!(large.starts_with(cut));
    assert_eq!(entries[1]["body_cut"], true);
    assert_eq!(entries[2]["status"], 429);
    assert_eq!(entries[2]["body"], Value::Null);
}
