//! Simulation as a client under test sees it: `[simulate]` latency and error rates (bounds,
//! binomial tolerance, same seed same sequence, endpoint overrides, reload), the control headers
//! and each fault over a raw TCP connection, and the headers ignored without the flag.

use std::time::{Duration, Instant};

use eventbox::app::App;
use eventbox::watch::WatchMode;
use reqwest::StatusCode;
use tokio::task::JoinSet;

use crate::helpers::{
    loaded_with, raw_http1, serve_app, spawn_app, Answer, TempData, TestApp, DEMO_TOKEN,
};

/// Serves `data` with the control headers on (and `max_delay`).
async fn with_control(data: &std::path::Path, max_delay: Duration) -> TestApp {
    serve_app(loaded_with(data, |o| {
        o.allow_control_headers = true;
        o.max_delay = max_delay;
    }))
    .await
}

/// One GET and how long it took, client-side.
async fn timed_get(client: reqwest::Client, url: String) -> (StatusCode, Duration) {
    let start = Instant::now();
    let res = client
        .get(url)
        .header("Authorization-Token", DEMO_TOKEN)
        .send()
        .await
        .expect("answered");
    let status = res.status();
    res.bytes().await.expect("the body");
    (status, start.elapsed())
}

/// `n` GETs of `path`, `at_once` in flight at a time: each one's status and duration.
async fn many(app: &TestApp, path: &str, n: usize, at_once: usize) -> Vec<(StatusCode, Duration)> {
    let mut out = Vec::with_capacity(n);
    let mut set = JoinSet::new();
    for _ in 0..n {
        if set.len() >= at_once {
            out.push(set.join_next().await.expect("a task").expect("no panic"));
        }
        set.spawn(timed_get(app.client.clone(), format!("{}{path}", app.base)));
    }
    while let Some(done) = set.join_next().await {
        out.push(done.expect("no panic"));
    }
    out
}

/// The statuses of `n` GETs of the event made one after another.
async fn sequence(app: &TestApp, n: usize) -> Vec<u16> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(app.get("/api/v1/event", DEMO_TOKEN).await.status.as_u16());
    }
    out
}

#[tokio::test]
async fn latency_stays_within_its_bounds_over_100_requests() {
    let data = TempData::new();
    data.with_simulating_demo("demo", "[simulate]\nlatency_ms = [20, 60]\nseed = 1\n");
    let app = spawn_app(data.path()).await;

    let answers = many(&app, "/api/v1/event", 100, 10).await;

    assert_eq!(answers.len(), 100);
    // Scheduling on a busy machine only adds time: the lower bound is exact, the upper generous.
    let slack = Duration::from_millis(400);
    for (status, took) in &answers {
        assert_eq!(*status, 200);
        assert!(
            *took >= Duration::from_millis(20) && *took < Duration::from_millis(60) + slack,
            "took {took:?}; every answer waits 20 to 60 ms"
        );
    }
    // Spread over the range, not one fixed delay: both halves are seen. Overhead only adds
    // time, so an answer under the midpoint (plus a little) waited in the lower half.
    let midpoint = Duration::from_millis(40);
    let took: Vec<Duration> = answers.iter().map(|(_, t)| *t).collect();
    assert!(
        took.iter()
            .any(|t| *t < midpoint + Duration::from_millis(5)),
        "no answer in the lower half: {took:?}"
    );
    assert!(
        took.iter().any(|t| *t >= midpoint),
        "no answer in the upper half: {took:?}"
    );
}

#[tokio::test]
async fn the_error_rate_is_within_a_binomial_tolerance_over_1000_requests() {
    let data = TempData::new();
    data.with_simulating_demo(
        "demo",
        "[simulate]\nerror_rate = 0.3\nerror_status = 503\nseed = 7\n",
    );
    let app = spawn_app(data.path()).await;

    let answers = many(&app, "/api/v1/event", 1000, 25).await;

    let errors = answers.iter().filter(|(s, _)| *s == 503).count();
    let ok = answers.iter().filter(|(s, _)| *s == 200).count();
    assert_eq!(errors + ok, 1000, "only 200 and 503 are answered");
    // 300 expected; 5 standard deviations (sqrt(1000 * 0.3 * 0.7) = 14.5) either side.
    assert!(
        (228..=372).contains(&errors),
        "{errors} simulated errors in 1000 requests at rate 0.3"
    );
    let one = first_error(&app, 503).await;
    one.assert_error(503, "simulated_error");
}

/// The first simulated error with `status` among the next requests (bounded).
async fn first_error(app: &TestApp, status: u16) -> Answer {
    for _ in 0..200 {
        let res = app.get("/api/v1/event", DEMO_TOKEN).await;
        if res.status == status {
            return res;
        }
    }
    panic!("no {status} within 200 requests");
}

#[tokio::test]
async fn the_same_seed_gives_the_same_sequence_and_a_reload_starts_it_again() {
    let data = TempData::new();
    data.with_simulating_demo("demo", "[simulate]\nerror_rate = 0.5\nseed = 42\n");
    let other = TempData::new();
    other.with_simulating_demo("demo", "[simulate]\nerror_rate = 0.5\nseed = 43\n");
    let first = spawn_app(data.path()).await;
    let second = spawn_app(data.path()).await;
    let third = spawn_app(other.path()).await;

    let a = sequence(&first, 40).await;
    let b = sequence(&second, 40).await;
    let c = sequence(&third, 40).await;
    first.app.load().expect("reload");
    let after_reload = sequence(&first, 40).await;

    assert!(a.contains(&503) && a.contains(&200), "{a:?}");
    assert_eq!(a, b, "two servers, one seed");
    assert_eq!(a, after_reload, "a reload starts the sequence again");
    assert_ne!(a, c, "another seed, another sequence");
    let status = first.get("/status", "").await.json();
    let shown = &status["bundles"][0]["simulate"];
    assert_eq!(
        (&shown["seed"], &shown["seed_from"]),
        (&42.into(), &"bundle.toml".into())
    );
    assert_eq!(
        shown["endpoints"]["payments"]["error_rate"], 0.5,
        "{status}"
    );
}

#[tokio::test]
async fn an_endpoint_override_applies_to_that_endpoint_only() {
    let data = TempData::new();
    data.with_simulating_demo(
        "demo",
        "[simulate]\nerror_rate = 0\n\
         [simulate.endpoints.payments]\nerror_rate = 1.0\nerror_status = 502\n\
         [simulate.endpoints.hotsite]\nlatency_ms = 600\n",
    );
    let app = spawn_app(data.path()).await;

    let payments = app.get("/api/v1/payments", DEMO_TOKEN).await;
    let start = Instant::now();
    let hotsite = app.get("/api/v1/hotsite/", DEMO_TOKEN).await;
    let hotsite_took = start.elapsed();
    let start = Instant::now();
    let event = app.get("/api/v1/event", DEMO_TOKEN).await;
    let event_took = start.elapsed();
    let submission = app.get("/api/v1/submission/", DEMO_TOKEN).await;

    payments.assert_error(502, "simulated_error");
    assert_eq!(hotsite.status, 200);
    assert!(
        hotsite_took >= Duration::from_millis(600),
        "{hotsite_took:?}"
    );
    assert_eq!(event.status, 200);
    assert!(event_took < Duration::from_millis(600), "{event_took:?}");
    assert_eq!(submission.status, 200);

    // /status shows what each endpoint is given (only those given anything), and the seed the
    // clock gave, with which the run can be replayed.
    let status = app.get("/status", "").await.json();
    let shown = &status["bundles"][0]["simulate"];
    assert_eq!(shown["seed_from"], "clock", "{status}");
    assert!(shown["seed"].is_u64(), "{status}");
    assert_eq!(
        shown["endpoints"],
        serde_json::json!({
            "payments": {"latency_ms": [0, 0], "error_rate": 1.0, "error_status": 502, "retry_after": null, "fault_rate": 0.0, "fault": "reset"},
            "hotsite": {"latency_ms": [600, 600], "error_rate": 0.0, "error_status": 503, "retry_after": null, "fault_rate": 0.0, "fault": "reset"},
        })
    );
}

#[tokio::test]
async fn a_reload_applies_a_changed_simulate_and_a_bad_one_keeps_the_last_good() {
    let data = TempData::new();
    data.with_demo("demo");
    let app = App::new(data.path());
    let _watcher = app
        .watch(WatchMode::Native, Duration::from_millis(50))
        .await
        .expect("watching starts");
    app.load().expect("loads");
    let app = serve_app(app).await;
    assert_eq!(app.get("/api/v1/event", DEMO_TOKEN).await.status, 200);

    let bundle_toml = |simulate: &str| format!("tokens = [\"{DEMO_TOKEN}\"]\n{simulate}");
    data.write(
        "demo/bundle.toml",
        bundle_toml("[simulate]\nerror_rate = 1\nerror_status = 500\n"),
    );
    let failing = until(&app, "[simulate] error_rate = 1", |r| r.status == 500).await;
    failing.assert_error(500, "simulated_error");

    data.write(
        "demo/bundle.toml",
        bundle_toml(
            "[simulate]\nerror_rate = 1\n[simulate.endpoints.payments]\nlatency_ms = [800, 200]\n",
        ),
    );
    let status = until_status(&app, |errors| !errors.is_empty()).await;
    assert_eq!(app.get("/api/v1/event", DEMO_TOKEN).await.status, 500);
    assert!(
        status
            .iter()
            .any(|e| e.contains("bundle.toml: simulate.endpoints.payments.latency_ms: ")),
        "{status:?}"
    );
}

const PATIENCE: Duration = Duration::from_secs(10);

/// Polls the event endpoint until `done` holds (bounded).
async fn until(app: &TestApp, what: &str, done: impl Fn(&Answer) -> bool) -> Answer {
    let start = Instant::now();
    loop {
        let res = app.get("/api/v1/event", DEMO_TOKEN).await;
        if done(&res) {
            return res;
        }
        assert!(start.elapsed() < PATIENCE, "{what}: not seen in time");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `/status` until the demo bundle's errors satisfy `done` (bounded); those errors.
async fn until_status(app: &TestApp, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let start = Instant::now();
    loop {
        let status = app.get("/status", "").await.json();
        let errors: Vec<String> = status["bundles"][0]["errors"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        if done(&errors) {
            return errors;
        }
        assert!(start.elapsed() < PATIENCE, "/status: not seen in time");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn max_delay_caps_a_bundles_simulated_latency() {
    let data = TempData::new();
    data.with_simulating_demo("demo", "[simulate]\nlatency_ms = 5000\n");
    let app = serve_app(loaded_with(data.path(), |o| {
        o.max_delay = Duration::from_millis(100);
    }))
    .await;

    let start = Instant::now();
    let res = app.get("/api/v1/event", DEMO_TOKEN).await;
    let took = start.elapsed();

    assert_eq!(res.status, 200);
    assert!(
        took >= Duration::from_millis(100) && took < Duration::from_secs(2),
        "--max-delay 100ms caps the bundle's 5 s: {took:?}"
    );
}

// ---- control headers --------------------------------------------------------------------------

const CONTROL: [(&str, &str); 3] = [
    ("x-eventbox-delay", "2000"),
    ("x-eventbox-status", "503"),
    ("x-eventbox-fault", "reset"),
];

#[tokio::test]
async fn control_headers_are_ignored_without_the_flag() {
    let app = spawn_app(&crate::helpers::demo_data()).await;
    let plain = app.get("/api/v1/event", DEMO_TOKEN).await;
    let start = Instant::now();

    let res = app.get_with("/api/v1/event", DEMO_TOKEN, &CONTROL).await;

    assert!(start.elapsed() < Duration::from_millis(1500), "not delayed");
    assert_eq!(res.status, 200);
    assert_eq!(res.body, plain.body);
    let bad = app
        .get_with("/api/v1/event", DEMO_TOKEN, &[("x-eventbox-fault", "nope")])
        .await;
    assert_eq!(bad.status, 200, "not even read");
}

#[tokio::test]
async fn x_eventbox_delay_waits_and_is_capped_by_max_delay() {
    let app = with_control(&crate::helpers::demo_data(), Duration::from_millis(400)).await;

    let start = Instant::now();
    let short = app
        .get_with("/api/v1/event", DEMO_TOKEN, &[("x-eventbox-delay", "150")])
        .await;
    let short_took = start.elapsed();
    let start = Instant::now();
    let long = app
        .get_with(
            "/api/v1/event",
            DEMO_TOKEN,
            &[("x-eventbox-delay", "60000")],
        )
        .await;
    let long_took = start.elapsed();

    assert_eq!(short.status, 200);
    assert!(short_took >= Duration::from_millis(150), "{short_took:?}");
    assert_eq!(long.status, 200);
    assert!(
        long_took >= Duration::from_millis(400) && long_took < Duration::from_secs(5),
        "capped at --max-delay 400ms: {long_took:?}"
    );
}

#[tokio::test]
async fn x_eventbox_status_answers_that_status_with_the_error_body() {
    let app = with_control(&crate::helpers::demo_data(), Duration::from_secs(30)).await;

    // What a real 405 on the route names.
    let real = app
        .request(reqwest::Method::DELETE, "/api/v1/payments", DEMO_TOKEN, &[])
        .await;
    assert_eq!(real.status, 405);
    let allow = real.header("allow").map(str::to_string);
    assert!(
        allow.as_deref().is_some_and(|a| a.contains("GET")),
        "{allow:?}"
    );
    for status in ["400", "404", "405", "429", "500", "503", "599"] {
        let res = app
            .get_with(
                "/api/v1/payments",
                DEMO_TOKEN,
                &[("x-eventbox-status", status)],
            )
            .await;
        res.assert_error(status.parse().expect("a number"), "simulated_error");
        // Only a 405 names the methods the route takes, as a real 405 does.
        assert_eq!(
            res.header("allow"),
            allow.as_deref().filter(|_| status == "405"),
            "{status}"
        );
    }
    for (header, value) in [
        ("x-eventbox-status", "200"),
        ("x-eventbox-status", "600"),
        ("x-eventbox-status", "oops"),
        ("x-eventbox-delay", "soon"),
        ("x-eventbox-fault", "explode"),
    ] {
        let res = app
            .get_with("/api/v1/event", DEMO_TOKEN, &[(header, value)])
            .await;
        res.assert_error(400, "invalid_control_header");
        // The message names the header that cannot be used, as the client spelt it or not,
        // and quotes its value.
        let message = res.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            message
                .to_ascii_lowercase()
                .contains(&format!("this request's {header} is `{value}`, not")),
            "{message}"
        );
    }
    // Given twice with different values: which one the test meant cannot be told.
    let twice = app
        .get_with(
            "/api/v1/event",
            DEMO_TOKEN,
            &[("x-eventbox-delay", "30"), ("x-eventbox-delay", "60")],
        )
        .await;
    twice.assert_error(400, "invalid_control_header");
    let message = twice.json()["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("gives X-Eventbox-Delay twice, with different values"),
        "{message}"
    );
    let no_token = app
        .get_with("/api/v1/event", "wrong", &[("x-eventbox-status", "503")])
        .await;
    no_token.assert_error(401, "invalid_token");
    let operations = app
        .get_with("/healthz", "", &[("x-eventbox-status", "503")])
        .await;
    assert_eq!(
        operations.status, 200,
        "operations routes are not simulated"
    );
}

#[tokio::test]
async fn a_control_header_overrides_the_bundles_simulation() {
    let data = TempData::new();
    data.with_simulating_demo("demo", "[simulate]\nerror_rate = 1\nerror_status = 503\n");
    let app = with_control(data.path(), Duration::from_secs(30)).await;

    let res = app
        .get_with("/api/v1/event", DEMO_TOKEN, &[("x-eventbox-status", "418")])
        .await;

    res.assert_error(418, "simulated_error");
    app.get("/api/v1/event", DEMO_TOKEN)
        .await
        .assert_error(503, "simulated_error");
}

#[tokio::test]
async fn a_simulated_error_carries_the_retry_after_asked_for() {
    let data = TempData::new();
    data.with_simulating_demo(
        "demo",
        "[simulate]\nerror_rate = 1\nerror_status = 429\nretry_after = 7\n\
         [simulate.endpoints.payments]\nretry_after = \"Sunday, 06-Nov-94 08:49:37 GMT\"\n\
         [simulate.endpoints.hotsite]\nerror_rate = 0\n\
         [simulate.endpoints.submission]\nretry_after = \"none\"\n",
    );
    let app = with_control(data.path(), Duration::from_secs(30)).await;
    const STATUS: &str = "x-eventbox-status";
    const RETRY: &str = "x-eventbox-retry-after";
    let date = "Wed, 21 Oct 2026 07:28:00 GMT";

    /// Why, the path, the control headers, then the status and `Retry-After` answered.
    type Case<'a> = (
        &'a str,
        &'a str,
        &'a [(&'a str, &'a str)],
        u16,
        Option<&'a str>,
    );
    let cases: &[Case] = &[
        ("the bundle's", "/api/v1/event", &[], 429, Some("7")),
        (
            "an endpoint's, a date sent in the preferred form",
            "/api/v1/payments",
            &[],
            429,
            Some("Sun, 06 Nov 1994 08:49:37 GMT"),
        ),
        (
            "taken back for an endpoint",
            "/api/v1/submission/",
            &[],
            429,
            None,
        ),
        (
            "a real answer: none",
            "/api/v1/hotsite/",
            &[(RETRY, "2")],
            200,
            None,
        ),
        (
            "the request's, on a drawn error",
            "/api/v1/event",
            &[(RETRY, "1")],
            429,
            Some("1"),
        ),
        (
            "the request's, on an asked error",
            "/api/v1/hotsite/",
            &[(STATUS, "503"), (RETRY, date)],
            503,
            Some(date),
        ),
        (
            "the bundle's, on an asked error",
            "/api/v1/hotsite/",
            &[(STATUS, "503")],
            503,
            Some("7"),
        ),
        (
            "taken back for a request",
            "/api/v1/event",
            &[(RETRY, "none")],
            429,
            None,
        ),
    ];
    for (why, path, headers, status, retry_after) in cases {
        let res = app.get_with(path, DEMO_TOKEN, headers).await;
        assert_eq!(res.status, *status, "{why}");
        if *status != 200 {
            res.assert_error(*status, "simulated_error");
        }
        assert_eq!(res.header("retry-after"), *retry_after, "{why}");
    }

    // A date whose weekday is wrong is no HTTP-date: the message says what the header takes.
    let unusable = app
        .get_with(
            "/api/v1/event",
            DEMO_TOKEN,
            &[(RETRY, "Mon, 06 Nov 1994 08:49:37 GMT")],
        )
        .await;
    unusable.assert_error(400, "invalid_control_header");
    // What was wrong, and nothing else: the header's value and what it takes.
    assert_eq!(
        unusable.json()["message"],
        "A control header cannot be used: this request's X-Eventbox-Retry-After is `Mon, 06 Nov 1994 08:49:37 GMT`, not seconds (at most 18446744073709551615), an HTTP-date from 1970 on whose weekday matches its date, or none."
    );
}

fn raw_request(fault: &str) -> String {
    raw_request_to("/api/v1/event", fault)
}

fn raw_request_to(path: &str, fault: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         X-Eventbox-Fault: {fault}\r\n\r\n"
    )
}

#[tokio::test]
async fn fault_reset_resets_the_connection_without_an_answer() {
    let app = with_control(&crate::helpers::demo_data(), Duration::from_secs(30)).await;

    let got = raw_http1(&app.base, &raw_request("reset")).await;

    assert!(got.received.is_empty(), "{:?}", got.received);
    // The RST arrives after the request was read, so the read that waits for the answer fails.
    let kind = got.end.as_ref().map_err(std::io::Error::kind);
    assert_eq!(
        kind,
        Err(std::io::ErrorKind::ConnectionReset),
        "a reset, not an orderly close"
    );
}

#[tokio::test]
async fn fault_empty_closes_the_connection_without_a_byte() {
    let app = with_control(&crate::helpers::demo_data(), Duration::from_secs(30)).await;

    let got = raw_http1(&app.base, &raw_request("empty")).await;

    assert!(got.received.is_empty(), "{:?}", got.received);
    assert!(got.end.is_ok(), "an orderly close (FIN): {:?}", got.end);
}

#[tokio::test]
async fn fault_empty_after_a_request_body_is_still_an_orderly_close() {
    let app = with_control(&crate::helpers::demo_data(), Duration::from_secs(30)).await;
    // Larger than hyper reads with the head, so most of it is still in the socket.
    let body = format!(
        r#"{{"reference":"PG2026000104","padding":"{}"}}"#,
        "x".repeat(60 * 1024)
    );
    let request = format!(
        "GET /api/v1/payments/details HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         X-Eventbox-Fault: empty\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );

    let got = raw_http1(&app.base, &request).await;

    assert!(got.received.is_empty(), "{:?}", got.received);
    assert!(got.end.is_ok(), "an orderly close (FIN): {:?}", got.end);
}

#[tokio::test]
async fn fault_truncate_sends_the_head_and_half_the_body_then_closes() {
    let app = with_control(&crate::helpers::demo_data(), Duration::from_secs(30)).await;
    // A small body, and one (526 KB) larger than the socket buffers take at once.
    for path in ["/api/v1/event", "/api/v1/payments"] {
        let whole = app.get(path, DEMO_TOKEN).await.body;

        let got = raw_http1(&app.base, &raw_request_to(path, "truncate")).await;

        assert_truncated(&got, &whole);
    }
}

/// Head with the full Content-Length, exactly the first half of the body, then an orderly close.
fn assert_truncated(got: &crate::helpers::RawExchange, whole: &[u8]) {
    assert!(got.end.is_ok(), "closed: {:?}", got.end);
    let split = got
        .received
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head");
    let head = String::from_utf8_lossy(&got.received[..split]).to_ascii_lowercase();
    let body = &got.received[split + 4..];
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let announced = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .expect("a Content-Length");
    assert_eq!(announced, whole.len(), "the full length is announced");
    assert_eq!(body.len(), whole.len() / 2, "half the body is sent");
    assert_eq!(body, &whole[..body.len()]);
}

/// A GET of `path` on a connection of its own, without control headers.
async fn plain_raw(app: &TestApp, path: &str) -> crate::helpers::RawExchange {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         Connection: close\r\n\r\n"
    );
    raw_http1(&app.base, &request).await
}

/// A bundle's `fault_rate` gives its faults with no control header (and without
/// `--allow-control-headers`), per endpoint, as `X-Eventbox-Fault` does; the journal records
/// each as status 0.
#[tokio::test]
async fn a_bundles_fault_rate_breaks_its_answers_without_any_header() {
    let data = TempData::new();
    data.with_simulating_demo(
        "demo",
        "[simulate]\nfault_rate = 1\n\
         [simulate.endpoints.hotsite]\nfault = \"empty\"\n\
         [simulate.endpoints.payments]\nfault = \"truncate\"\n\
         [simulate.endpoints.submission]\nfault_rate = 0\n",
    );
    let app = serve_app(loaded_with(data.path(), |o| o.journal = 10)).await;
    let whole = spawn_app(&crate::helpers::demo_data())
        .await
        .get("/api/v1/payments", DEMO_TOKEN)
        .await
        .body;

    let reset = plain_raw(&app, "/api/v1/event").await;
    assert!(reset.received.is_empty(), "{:?}", reset.received);
    assert_eq!(
        reset.end.as_ref().map_err(std::io::Error::kind),
        Err(std::io::ErrorKind::ConnectionReset),
        "the default fault is a reset"
    );
    let empty = plain_raw(&app, "/api/v1/hotsite").await;
    assert!(empty.received.is_empty(), "{:?}", empty.received);
    assert!(empty.end.is_ok(), "an orderly close (FIN): {:?}", empty.end);
    assert_truncated(&plain_raw(&app, "/api/v1/payments").await, &whole);
    let spared = app.get("/api/v1/submission", DEMO_TOKEN).await;
    assert_eq!(spared.status, 200, "{}", spared.text());

    let journal = app.get("/_journal", "").await.json();
    let statuses: Vec<(String, u64)> = journal["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            let path = e["path"].as_str().unwrap_or_default().to_string();
            (path, e["status"].as_u64().unwrap_or(999))
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("/api/v1/event".to_string(), 0),
            ("/api/v1/hotsite".to_string(), 0),
            ("/api/v1/payments".to_string(), 200),
            ("/api/v1/submission".to_string(), 200),
        ]
    );
    let status = app.get("/status", "").await.json();
    let shown = &status["bundles"][0]["simulate"]["endpoints"]["payments"];
    assert_eq!(
        (shown["fault_rate"].as_f64(), shown["fault"].as_str()),
        (Some(1.0), Some("truncate")),
        "{status}"
    );
}

/// Faults drawn from a seed are replayed by it: which requests get one is the same on two
/// servers, and another seed differs.
#[tokio::test]
async fn the_same_seed_gives_the_same_faults() {
    let seeded = |seed: u64| {
        let data = TempData::new();
        data.with_simulating_demo(
            "demo",
            &format!("[simulate]\nfault_rate = 0.5\nfault = \"empty\"\nseed = {seed}\n"),
        );
        data
    };
    let (one, two, other) = (seeded(42), seeded(42), seeded(43));
    let mut runs = Vec::new();
    for data in [&one, &two, &other] {
        let app = spawn_app(data.path()).await;
        let mut answered = Vec::new();
        for _ in 0..30 {
            answered.push(!plain_raw(&app, "/api/v1/event").await.received.is_empty());
        }
        runs.push(answered);
    }
    assert!(
        runs[0].contains(&true) && runs[0].contains(&false),
        "{:?}",
        runs[0]
    );
    assert_eq!(runs[0], runs[1], "one seed, one sequence");
    assert_ne!(runs[0], runs[2], "another seed, another");
}

#[tokio::test]
async fn over_http2_a_fault_resets_only_its_stream() {
    let app = with_control(&crate::helpers::demo_data(), Duration::from_secs(30)).await;
    let client = crate::helpers::client_builder()
        .http2_prior_knowledge()
        .build()
        .expect("a client");
    let url = format!("{}/api/v1/event", app.base);
    let get = |fault: Option<&'static str>| {
        let mut req = client.get(&url).header("Authorization-Token", DEMO_TOKEN);
        if let Some(f) = fault {
            req = req.header("X-Eventbox-Fault", f);
        }
        req.send()
    };

    let ok = get(None).await.expect("answered");
    assert_eq!(ok.version(), reqwest::Version::HTTP_2);
    for fault in ["reset", "empty"] {
        assert!(get(Some(fault)).await.is_err(), "{fault}: no answer");
    }
    // The stream reset may overtake the queued head: the request or its body fails.
    let truncated = match get(Some("truncate")).await {
        Ok(res) => res.bytes().await.map(|b| b.len()),
        Err(e) => Err(e),
    };
    assert!(
        truncated.is_err(),
        "truncate: the body is cut: {truncated:?}"
    );
    let after = get(None).await.expect("answered");

    assert_eq!(after.status(), 200, "the connection carries on");
}

/// A simulated delay ends when the server stops: the answer goes out at once, so a test
/// suite's teardown does not wait the drain's 10 s for a delay it asked for.
#[tokio::test]
async fn a_simulated_delay_ends_when_the_server_stops() {
    for http2 in [false, true] {
        let app = with_control(&crate::helpers::demo_data(), Duration::from_secs(30)).await;
        let url = format!("{}/api/v1/event", app.base);
        let client = if http2 {
            crate::helpers::client_builder()
                .http2_prior_knowledge()
                .build()
                .expect("client")
        } else {
            crate::helpers::client()
        };
        let delayed = tokio::spawn(
            client
                .get(url)
                .header("Authorization-Token", DEMO_TOKEN)
                .header("X-Eventbox-Delay", "20000")
                .send(),
        );
        // Time for the request to be read (no signal tells it; were it not read yet, the
        // request would fail below, not pass).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let start = Instant::now();
        app.shutdown().await;
        let answer = tokio::time::timeout(Duration::from_secs(5), delayed)
            .await
            .expect("answered before its delay")
            .expect("task")
            .unwrap_or_else(|e| panic!("an answer (HTTP/2: {http2}): {e}"));
        assert_eq!(answer.status(), StatusCode::OK);
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "shutdown took {:?}",
            start.elapsed()
        );
    }
}

/// A refused write whose body was read to its end leaves an HTTP/1.1 connection ready for the
/// next request (a client's retry on its pooled connection): a simulated 503, a check-in of a
/// code nobody has. One refused before its body is read (no token) is answered and closed.
/// Before, every refused write closed its connection.
#[tokio::test]
async fn a_refused_write_whose_body_was_read_keeps_the_connection() {
    let app = with_control(&crate::helpers::demo_data(), Duration::from_secs(5)).await;
    let body = r#"[{"checkin_code":"99999999","checkin":1,"checkin_date":"2026-09-17T09:00:00"}]"#;
    let post = |headers: &str| {
        format!(
            "POST /api/v1/checkin/attendees HTTP/1.1\r\nHost: x\r\n{headers}\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let then = format!(
        "GET /api/v1/event HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         Connection: close\r\n\r\n"
    );
    let token = format!("Authorization-Token: {DEMO_TOKEN}\r\n");
    for (headers, first, answers) in [
        (format!("{token}X-Eventbox-Status: 503\r\n"), "503", 2),
        (token.clone(), "4", 2),
        (String::new(), "401", 1),
    ] {
        let exchange = raw_http1(&app.base, format!("{}{then}", post(&headers))).await;
        let text = String::from_utf8_lossy(&exchange.received);
        assert!(
            text.starts_with(&format!("HTTP/1.1 {first}")),
            "{headers}: {text}"
        );
        assert_eq!(
            text.matches("HTTP/1.1 ").count(),
            answers,
            "{headers}: {text}"
        );
    }
}

/// A client that waits to send its body (`Expect: 100-continue`) gets the simulated error
/// first, not a `100 Continue` and a wait for a body it was refused; with a journal too (which
/// keeps a refused body's first bytes, and read them, sending `100 Continue`), and with the
/// `empty` fault (which reads a body before it closes).
#[tokio::test]
async fn a_client_waiting_to_send_its_body_gets_the_simulated_refusal_first() {
    let data = crate::helpers::demo_data();
    let plain = with_control(&data, Duration::from_secs(5)).await;
    let journaled = serve_app(loaded_with(&data, |o| {
        o.journal = 10;
        o.allow_control_headers = true;
    }))
    .await;
    for (app, control, first) in [
        (&plain, "X-Eventbox-Status: 503", "HTTP/1.1 503"),
        (&journaled, "X-Eventbox-Status: 503", "HTTP/1.1 503"),
        (&journaled, "X-Eventbox-Fault: empty", ""),
    ] {
        let waiting = format!(
            "POST /api/v1/checkin/attendees HTTP/1.1\r\nHost: x\r\n\
             Authorization-Token: {DEMO_TOKEN}\r\n{control}\r\nExpect: 100-continue\r\n\
             Content-Type: application/json\r\nContent-Length: 80\r\n\r\n"
        );
        let text =
            String::from_utf8_lossy(&raw_http1(&app.base, waiting).await.received).into_owned();
        assert!(
            text.starts_with(first) && !text.contains("100 Continue"),
            "{control}: {text}"
        );
    }
    let listed = journaled.get("/_journal", "").await.json();
    let entries = listed["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 2, "{listed}");
    for entry in entries {
        assert_eq!(
            entry["body"],
            serde_json::Value::Null,
            "never sent: {entry}"
        );
    }
}
