//! `eventbox::testing::TestServer`, as a client's test suite uses it: several at once, from a
//! folder or from bundles built in code, from `#[test]` and `#[tokio::test]`, stopped on drop,
//! and refusing to start on a broken bundle.

use std::io::{Read, Write};
use std::net::TcpStream;

use eventbox::problem::Location;
use eventbox::testing::{Bundle, Expect, StartError, TestServer};
use serde_json::{json, Value};

use crate::fixtures;
use crate::helpers::{answer, demo_data, Answer, DEMO_TOKEN};

/// A GET with a token and extra headers, over a fresh client.
async fn get(server: &TestServer, path: &str, token: &str, headers: &[(&str, &str)]) -> Answer {
    let mut req = crate::helpers::client()
        .get(server.url(path))
        .header("Authorization-Token", token);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    answer(req).await
}

/// The fixture's event with another title and id: each server's data is told apart by it.
fn event(title: &str, id_event: i64) -> Value {
    let mut body: Value = serde_json::from_str(fixtures::EVENT_JSON).expect("the fixture is JSON");
    body["data"][0]["title"] = json!(title);
    body["data"][0]["id_event"] = json!(id_event);
    body
}

fn summit() -> Bundle {
    Bundle::new("summit")
        .token("summit-token")
        .json("event", event("Summit", 1))
}

#[tokio::test]
async fn two_servers_at_once_each_answer_their_own_token_only() {
    let summit = TestServer::from_bundles([summit()])
        .start()
        .expect("summit starts");
    let demo = TestServer::start(demo_data()).expect("the demo starts");
    assert_ne!(summit.addr(), demo.addr(), "each server has its own port");

    let summit_own = get(&summit, "/api/v1/event", "summit-token", &[]).await;
    let demo_own = get(&demo, "/api/v1/event", DEMO_TOKEN, &[]).await;
    let summit_other = get(&summit, "/api/v1/event", DEMO_TOKEN, &[]).await;
    let demo_other = get(&demo, "/api/v1/event", "summit-token", &[]).await;

    assert_eq!(summit_own.status, 200, "{}", summit_own.text());
    assert_eq!(summit_own.json()["data"][0]["title"], "Summit");
    assert_eq!(demo_own.status, 200, "{}", demo_own.text());
    assert_eq!(
        demo_own.json()["data"][0]["title"],
        "33º Congresso Brasileiro de Engenharia Sanitária e Ambiental"
    );
    summit_other.assert_error(401, "invalid_token");
    demo_other.assert_error(401, "invalid_token");
    assert_eq!(summit.token("summit"), Some("summit-token"));
    assert_eq!(demo.token("demo"), Some(DEMO_TOKEN));
    assert_eq!(summit.token("demo"), None);
}

#[tokio::test]
async fn in_code_bundles_serve_every_file_they_are_given() {
    let server = TestServer::from_bundles([
        summit()
            .token("second-summit-token")
            .json(
                "payments",
                serde_json::from_str(fixtures::PAYMENTS_JSON).expect("JSON"),
            )
            .json_for(
                "payment_details",
                "R-002",
                serde_json::from_str(fixtures::DETAIL_JSON).expect("JSON"),
            )
            // A TOML file and JSON numbers kept as written, through `file`.
            .file("hotsite.toml", fixtures::HOTSITE_TOML)
            .file(
                "submission.json",
                r#"{"submission_type": [], "topic_area": [], "count": 2, "note": 10.00}"#,
            ),
        Bundle::new("forum")
            .token("forum-token")
            .json("event", event("Forum", 2)),
    ])
    .start()
    .expect("the bundles start");

    let payments = get(&server, "/api/v1/payments", "second-summit-token", &[]).await;
    let detail = get(
        &server,
        "/api/v1/payments/details?reference=R-002",
        "summit-token",
        &[],
    )
    .await;
    let hotsite = get(&server, "/api/v1/hotsite/", "summit-token", &[]).await;
    let submission = get(&server, "/api/v1/submission/", "summit-token", &[]).await;
    let forum = get(&server, "/api/v1/event", "forum-token", &[]).await;

    assert_eq!(payments.json()["count"], 2, "{}", payments.text());
    assert_eq!(detail.json()["data"][0]["phone_attende"], "31999990000");
    let titles: Vec<String> = hotsite.json()["areasSite"]
        .as_array()
        .expect("areasSite")
        .iter()
        .map(|a| a["titulo"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        titles,
        ["Abertura", "Programação", "Extra", "Patrocinadores"],
        "{}",
        hotsite.text()
    );
    assert!(
        submission.text().ends_with(r#""note":10.00}"#),
        "{}",
        submission.text()
    );
    assert_eq!(forum.json()["data"][0]["title"], "Forum");
    let tokens = server.tokens();
    assert_eq!(
        tokens.get("summit").map(Vec::as_slice),
        Some(
            [
                "summit-token".to_string(),
                "second-summit-token".to_string()
            ]
            .as_slice()
        )
    );
    assert_eq!(tokens.get("forum").map(Vec::len), Some(1));
}

/// A GET over a plain `TcpStream` (HTTP/1.1, `Connection: close`): the whole answer as text.
fn raw_get(server: &TestServer, path: &str, token: &str) -> String {
    let mut conn = TcpStream::connect(server.addr()).expect("connect");
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization-Token: {token}\r\nConnection: close\r\n\r\n",
        server.addr()
    )
    .expect("write the request");
    let mut text = String::new();
    conn.read_to_string(&mut text).expect("read the answer");
    text
}

#[test]
fn works_from_a_plain_test_without_a_runtime() {
    let server = TestServer::start(demo_data()).expect("the demo starts");

    let text = raw_get(&server, "/api/v1/submission/list", DEMO_TOKEN);

    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains(r#""id_submission":58800"#), "{text}");
}

#[test]
fn many_servers_started_from_many_threads_never_cross_talk() {
    let servers: Vec<TestServer> = std::thread::scope(|scope| {
        let started: Vec<_> = (0..8)
            .map(|i| {
                scope.spawn(move || {
                    TestServer::from_bundles([Bundle::new(format!("event{i}"))
                        .token(format!("token-{i}"))
                        .json("event", event(&format!("Event {i}"), i))])
                    .start()
                    .expect("starts")
                })
            })
            .collect();
        started
            .into_iter()
            .map(|h| h.join().expect("the starting thread"))
            .collect()
    });

    for (i, server) in servers.iter().enumerate() {
        let own = raw_get(server, "/api/v1/event", &format!("token-{i}"));
        let neighbour = raw_get(server, "/api/v1/event", &format!("token-{}", (i + 1) % 8));
        assert!(own.contains(&format!(r#""title":"Event {i}""#)), "{own}");
        assert!(neighbour.starts_with("HTTP/1.1 401 "), "{neighbour}");
    }
    let mut ports: Vec<u16> = servers.iter().map(|s| s.addr().port()).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 8);
}

#[tokio::test]
async fn dropping_the_server_stops_it() {
    let server = TestServer::from_bundles([summit()])
        .start()
        .expect("summit starts");
    let addr = server.addr();
    // A kept-alive connection, open when the server is dropped.
    let client = crate::helpers::client();
    let before = answer(client.get(server.url("/healthz"))).await;
    assert_eq!(before.status, 200);
    let data_dir = server.data_dir().to_path_buf();
    assert!(data_dir.join("summit/event.json").is_file());

    drop(server);

    let refused = TcpStream::connect(addr).expect_err("nothing listens after drop");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    let reused = client.get(format!("http://{addr}/healthz")).send().await;
    assert!(reused.is_err(), "the kept-alive connection was answered");
    assert!(
        !data_dir.exists(),
        "the temporary data folder is removed: {}",
        data_dir.display()
    );
}

#[test]
fn a_bundle_with_errors_fails_start_with_every_problem_and_its_place() {
    let mut bad = event("Broken", 3);
    bad["data"][0]["start_date"] = json!("2026-13-01T08:00:00");
    bad["data"][0]["latitude"] = json!("north");

    let err = TestServer::from_bundles([
        summit(),
        Bundle::new("broken")
            .token("broken-token")
            .json("event", bad),
        Bundle::new("tokenless").json("event", event("No token", 4)),
    ])
    .start()
    .expect_err("a broken bundle fails the start");

    let StartError::Bundles(errors) = &err else {
        panic!("expected bundle errors, got {err}");
    };
    let places: Vec<(String, Location)> = errors
        .problems
        .iter()
        .map(|p| (p.file.display().to_string(), p.location.clone()))
        .collect();
    assert!(
        places.contains(&(
            "broken/event.json".into(),
            Location::Path("data[0].start_date".into())
        )),
        "{places:?}"
    );
    assert!(
        places.contains(&(
            "broken/event.json".into(),
            Location::Path("data[0].latitude".into())
        )),
        "{places:?}"
    );
    assert!(
        places.iter().any(|(f, _)| f == "tokenless/bundle.toml"),
        "{places:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("error: broken/event.json: data[0].start_date: "),
        "{message}"
    );
    assert!(!message.contains("broken-token"), "{message}");
}

#[tokio::test]
async fn allow_errors_serves_the_good_bundles_and_reports_the_broken_ones() {
    let server = TestServer::from_bundles([
        summit(),
        Bundle::new("broken")
            .token("broken-token")
            .file("event.json", "{\"data\": ["),
    ])
    .allow_errors(true)
    .start()
    .expect("starts despite the broken bundle");

    let good = get(&server, "/api/v1/event", "summit-token", &[]).await;
    let broken = get(&server, "/api/v1/event", "broken-token", &[]).await;
    let status = get(&server, "/status", "", &[]).await;

    assert_eq!(good.status, 200, "{}", good.text());
    broken.assert_error(503, "bundle_unavailable");
    let bundles = status.json()["bundles"].clone();
    assert_eq!(bundles[0]["name"], "broken", "{bundles}");
    assert_eq!(bundles[0]["served"], false, "{bundles}");
    assert!(
        bundles[0]["errors"][0]
            .as_str()
            .is_some_and(|e| e.contains("broken/event.json:1:")),
        "{bundles}"
    );
    assert_eq!(server.token("broken"), None);
}

#[test]
fn unusable_names_and_paths_are_refused() {
    let cases = [
        (vec![Bundle::new("_hidden").token("t")], "_hidden"),
        (vec![Bundle::new("a/b").token("t")], "a/b"),
        // The folder `summit` under other names: two bundles would share it.
        (vec![Bundle::new("summit/").token("t")], "summit/"),
        (vec![Bundle::new("summit/.").token("t")], "summit/."),
        (vec![summit(), summit()], "summit"),
        (
            vec![summit().file("../escape.json", "{}")],
            "../escape.json",
        ),
        (
            vec![summit().file("bundle.toml", "tokens = [\"other\"]\n")],
            "summit",
        ),
        (
            vec![summit().json_for("payment_details", "R/1", serde_json::json!({"data": []}))],
            "R/1",
        ),
        // A name a load skips would never be served.
        (
            vec![summit().json_for("payment_details", ".R-1", serde_json::json!({"data": []}))],
            ".R-1",
        ),
    ];
    for (bundles, named) in cases {
        let err = TestServer::from_bundles(bundles)
            .start()
            .expect_err("refused");
        let fits = match &err {
            StartError::BundleName(n)
            | StartError::DuplicateBundle(n)
            | StartError::TokensTwice(n) => n == named,
            StartError::FilePath { path, .. } => path == named,
            StartError::DetailReference { reference, .. } => reference == named,
            _ => false,
        };
        assert!(fits, "{named}: {err}");
    }
}

#[tokio::test]
async fn builder_options_reach_the_server() {
    let plain = TestServer::from_folder(demo_data())
        .options(|o| o.cors_origin = vec!["none".into()])
        .compression(false)
        .start()
        .expect("the demo starts");
    let default = TestServer::start(demo_data()).expect("the demo starts");
    let asks = [("accept-encoding", "gzip"), ("origin", "https://a.example")];

    let from_plain = get(&plain, "/api/v1/payments", DEMO_TOKEN, &asks).await;
    let from_default = get(&default, "/api/v1/payments", DEMO_TOKEN, &asks).await;

    assert_eq!(from_plain.status, 200);
    assert_eq!(from_plain.header("content-encoding"), None);
    assert_eq!(from_plain.header("access-control-allow-origin"), None);
    assert_eq!(from_default.header("content-encoding"), Some("gzip"));
    assert_eq!(
        from_default.header("access-control-allow-origin"),
        Some("*")
    );
}

#[tokio::test]
async fn the_journal_and_control_headers_are_builder_options() {
    let testing = TestServer::from_folder(demo_data())
        .allow_control_headers(true)
        .journal(8)
        .start()
        .expect("the demo starts");
    let default = TestServer::start(demo_data()).expect("the demo starts");
    let teapot = [("x-eventbox-status", "418")];

    let from_testing = get(&testing, "/api/v1/event", DEMO_TOKEN, &teapot).await;
    let from_default = get(&default, "/api/v1/event", DEMO_TOKEN, &teapot).await;
    let journal = get(&testing, "/_journal", "", &[]).await;
    let no_journal = get(&default, "/_journal", "", &[]).await;

    assert_eq!(from_testing.status, 418, "{}", from_testing.text());
    assert_eq!(from_default.status, 200);
    assert_eq!(journal.status, 200, "{}", journal.text());
    assert_eq!(journal.json()["capacity"], 8);
    assert_eq!(journal.json()["entries"][0]["status"], 418);
    assert_eq!(no_journal.status, 404);
}

#[test]
fn debug_never_shows_a_token() {
    let server = TestServer::from_bundles([summit()])
        .start()
        .expect("summit starts");

    // The app holds every token (the snapshot's keys, the catalog's versions, bundle.toml's
    // config): its Debug shows how many, never one. (A load report's Debug: `load.rs`'s tests.)
    let shown = format!("{server:?} {:?} {:?}", summit(), server.app());

    assert!(shown.contains("summit"), "{shown}");
    assert!(!shown.contains("summit-token"), "{shown}");
}

const DETAILS: &str = "/api/v1/payments/details";

/// A GET of the details endpoint with a JSON body.
async fn details_by_body(server: &TestServer, body: &str) -> Answer {
    answer(
        crate::helpers::client()
            .get(server.url(DETAILS))
            .header("Authorization-Token", DEMO_TOKEN)
            .header("Content-Type", "application/json")
            .body(body.to_string()),
    )
    .await
}

/// The demo bundle with a journal, after: the event twice, one details request by JSON body
/// (after a byte order mark, which the endpoint skips, and so does verification), one with a
/// wrong token.
async fn called() -> TestServer {
    let server = TestServer::from_folder(demo_data())
        .journal(100)
        .start()
        .expect("starts");
    for _ in 0..2 {
        assert_eq!(
            get(&server, "/api/v1/event", DEMO_TOKEN, &[]).await.status,
            200
        );
    }
    let found = details_by_body(
        &server,
        "\u{FEFF}{\"reference\": \"PG2026000104\", \"n\": 10.00}",
    )
    .await;
    assert_eq!(found.status, 200, "{}", found.text());
    get(&server, "/api/v1/payments", "wrong-token", &[])
        .await
        .assert_error(401, "invalid_token");
    server
}

#[tokio::test]
async fn verify_passes_when_the_requests_were_received_as_expected() {
    let server = called().await;

    server.verify(&Expect::get("/api/v1/event").times(2));
    server.verify(&Expect::get("/API/v1/event/").status("2xx"));
    server.verify(
        &Expect::get(DETAILS)
            .status(200)
            .json_body(json!({"n": 10, "reference": "PG2026000104"}))
            .times(1),
    );
    server.verify(&Expect::any().status("401").times(1));
    server.verify(&Expect::post("/api/v1/event").times(0));

    let all = server.received_requests().expect("the journal is on");
    let listed: Vec<String> = all.iter().map(ToString::to_string).collect();
    assert_eq!(
        listed,
        [
            "GET /api/v1/event → 200",
            "GET /api/v1/event → 200",
            "GET /api/v1/payments/details → 200",
            "GET /api/v1/payments → 401",
        ]
    );
    let details = server
        .received(&Expect::get("/api/v1/payments*"))
        .expect("the journal is on");
    assert_eq!(details.len(), 2);
    assert_eq!(details[0].reference.as_deref(), Some("PG2026000104"));
    assert_eq!(
        details[0].body_json().map(|b| b.to_string()).as_deref(),
        Some(r#"{"reference":"PG2026000104","n":10.00}"#),
        "numbers as sent"
    );
    assert_eq!(details[1].bundle, None, "a wrong token opens nothing");
}

/// `json_body_includes` matches on the members it names and ignores the others; `json_body`
/// wants the whole body.
#[tokio::test]
async fn a_body_can_be_expected_by_some_of_its_members() {
    let server = called().await;

    server.verify(&Expect::get(DETAILS).json_body_includes(json!({"reference": "PG2026000104"})));
    let whole = server
        .check(&Expect::get(DETAILS).json_body(json!({"reference": "PG2026000104"})))
        .expect_err("the body has n too");
    assert!(
        whole
            .message()
            .contains("$.n: not expected, received 10.00"),
        "{whole}"
    );
    let wrong = server
        .check(&Expect::get(DETAILS).json_body_includes(json!({"reference": "PG1"})))
        .expect_err("no such reference");
    assert!(
        wrong.message().starts_with(
            "expected GET /api/v1/payments/details with the expected JSON members at least once"
        ),
        "{wrong}"
    );
    assert!(
        wrong.message().contains(
            "differs:\n  $.reference: expected \"PG1\", received \"PG2026000104\"\nreceived"
        ),
        "only the member named differs: {wrong}"
    );
}

#[tokio::test]
async fn check_fails_with_a_message_showing_the_closest_body_and_what_was_received() {
    let server = called().await;

    let wrong_body = server
        .check(&Expect::get(DETAILS).json_body(json!({"reference": "PG1", "n": 10})))
        .expect_err("no such body");
    let too_few = server
        .check(&Expect::get("/api/v1/event").times(3))
        .expect_err("called twice");

    assert_eq!(
        wrong_body.message(),
        "expected GET /api/v1/payments/details with the expected JSON body at least once, \
         received 0 times.\n\
         the closest body (GET /api/v1/payments/details → 200) differs:\n  \
         $.reference: expected \"PG1\", received \"PG2026000104\"\n\
         received 4 requests in all:\n  \
         GET /api/v1/event → 200\n  \
         GET /api/v1/event → 200\n  \
         GET /api/v1/payments/details → 200\n  \
         GET /api/v1/payments → 401"
    );
    assert!(
        too_few
            .to_string()
            .starts_with("expected GET /api/v1/event 3 times, received 2 times.\n"),
        "{too_few}"
    );
    // verify panics with the same message.
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        server.verify(&Expect::get("/api/v1/event").times(3));
    }))
    .expect_err("verify panics");
    let text = panicked
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert_eq!(text, too_few.message());
}

/// A body over the journal's 16 KiB is cut there: `check` says so rather than calling what
/// the client sent "not JSON". Each request also says when it came, how long its answer took
/// and the token's hint, so that a test can check a client's waits between retries.
#[tokio::test]
async fn a_body_cut_by_the_journal_is_said_to_be_cut_and_each_request_has_its_time() {
    let server = TestServer::from_folder(demo_data())
        .journal(10)
        .allow_control_headers(true)
        .start()
        .expect("starts");
    let before = std::time::SystemTime::now();
    let pad = "x".repeat(20_000);
    let body = json!({"reference": "PG2026000122", "pad": pad}).to_string();
    let sent = answer(
        crate::helpers::client()
            .get(server.url(DETAILS))
            .header("Authorization-Token", DEMO_TOKEN)
            .header("Content-Type", "application/json")
            .header("X-Eventbox-Delay", "150")
            .body(body),
    )
    .await;
    assert_eq!(sent.status, 200, "{}", sent.text());

    let said = server
        .check(&Expect::get(DETAILS).json_body(json!({"reference": "PG2026000122", "pad": pad})))
        .expect_err("cut, so not comparable");
    assert!(
        said.message()
            .contains("was cut at the journal's limit of 16 KiB, so it cannot be compared as JSON"),
        "{said}"
    );
    assert!(!said.message().contains("not JSON"), "{said}");

    let received = server.received_requests().expect("the journal is on");
    let [details] = received.as_slice() else {
        panic!("one request: {received:?}");
    };
    assert!(details.body_cut);
    assert!(
        details.time >= before - std::time::Duration::from_secs(1),
        "{details:?}"
    );
    assert!(details.time <= std::time::SystemTime::now(), "{details:?}");
    assert!(
        details.duration >= std::time::Duration::from_millis(150),
        "the delay counts: {details:?}"
    );
    assert_eq!(details.token_hint.as_deref(), Some(&DEMO_TOKEN[..4]));
}

#[tokio::test]
async fn verification_without_a_journal_says_how_to_turn_it_on() {
    let server = TestServer::start(demo_data()).expect("starts");
    get(&server, "/api/v1/event", DEMO_TOKEN, &[]).await;

    assert_eq!(server.received_requests(), None);
    assert_eq!(server.received(&Expect::any()), None);
    let off = server.check(&Expect::any()).expect_err("no journal");
    assert!(off.message().contains(".journal("), "{off}");
}

#[test]
fn an_expectation_the_filters_refuse_panics_at_once() {
    for bad in [
        || drop(Expect::any().status("6xx")),
        || drop(Expect::get("api/v1/event")),
        || drop(Expect::request("", "/x")),
        // The journal keeps the query apart: this could never match, so times(0) would pass.
        || drop(Expect::get("/api/v1/payments/details?reference=PG1")),
    ] {
        let panicked = std::panic::catch_unwind(bad).expect_err("refused");
        let text = panicked
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(text.starts_with("Expect::"), "{text}");
    }
}

/// Every client of a test is one address: a `TestServer` takes as many connections from it as
/// a test opens (the shared server's per-address limit, 64, closed the 65th at once), also
/// when other options are set (`options` edits the test server's own, it does not replace them
/// with `serve`'s defaults).
#[tokio::test]
async fn a_test_server_takes_a_hundred_connections_from_one_client_at_once() {
    let server = TestServer::from_folder(demo_data())
        .options(|o| o.journal = 10)
        .allow_control_headers(true)
        .start()
        .expect("starts");
    let url = server.url("/api/v1/event");
    let calls = (0..100).map(|_| {
        // A client each: a connection each, all held during the delay.
        let request = crate::helpers::client()
            .get(&url)
            .header("Authorization-Token", DEMO_TOKEN)
            .header("X-Eventbox-Delay", "400");
        tokio::spawn(async move { request.send().await.map(|r| r.status().as_u16()) })
    });
    let mut statuses = Vec::new();
    for call in calls.collect::<Vec<_>>() {
        statuses.push(call.await.expect("task").map_err(|e| e.to_string()));
    }
    let failed: Vec<_> = statuses.iter().filter(|s| *s != &Ok(200)).collect();
    assert!(
        failed.is_empty(),
        "{} failed: {:?}",
        failed.len(),
        failed.first()
    );
}

/// An option `eventbox serve` refuses is refused by `start`, not quietly changed.
#[test]
fn an_option_serve_refuses_is_refused_at_start() {
    let refused = TestServer::from_folder(demo_data())
        .journal(1_000_000)
        .start()
        .expect_err("more than 100,000 requests");
    assert!(matches!(refused, StartError::Options(_)), "{refused:?}");
    assert_eq!(
        refused.to_string(),
        "--journal keeps at most 100000 requests, not 1000000"
    );
    // A duration no clock can add (it stopped the server at its first connection).
    let refused = TestServer::from_folder(demo_data())
        .max_delay(std::time::Duration::MAX)
        .start()
        .expect_err("past a year");
    assert_eq!(
        refused.to_string(),
        "--max-delay must be at most a year (1y)"
    );
    // The watch options are not a test server's: not checked.
    TestServer::from_folder(demo_data())
        .options(|o| o.debounce = std::time::Duration::from_millis(1))
        .start()
        .expect("starts");
}

/// Tests sharing one server tell their requests apart by bundle; an `http::StatusCode` is
/// taken by its code.
#[tokio::test]
async fn expectations_narrow_to_one_bundle_and_take_a_status_code() {
    let server = TestServer::from_bundles([
        summit(),
        Bundle::new("expo")
            .token("expo-token")
            .json("event", event("Expo", 2)),
    ])
    .journal(100)
    .start()
    .expect("starts");
    assert_eq!(
        get(&server, "/api/v1/event", "summit-token", &[])
            .await
            .status,
        200
    );

    server.verify(&Expect::get("/api/v1/event").bundle("summit").times(1));
    let other = server
        .check(&Expect::get("/api/v1/event").bundle("expo"))
        .expect_err("expo's client called nothing");
    assert!(
        other.message().starts_with(
            "expected GET /api/v1/event to bundle \"expo\" at least once, received 0 times."
        ),
        "{other}"
    );
    // Expected of one bundle, the requests listed say which bundle they went to.
    assert!(
        other
            .message()
            .ends_with("received 1 request in all:\n  GET /api/v1/event → 200 (bundle \"summit\")"),
        "{other}"
    );
    server.verify(&Expect::any().status(reqwest::StatusCode::OK).times(1));
    server.verify(&Expect::any().status(reqwest::StatusCode::CREATED).times(0));
}

/// A journal that had to drop requests cannot count exactly: the check fails and says so,
/// rather than passing `times(0)` on a partial history. Clearing it starts the count afresh.
#[tokio::test]
async fn an_exact_count_fails_once_the_journal_dropped_requests_and_clearing_starts_afresh() {
    let server = TestServer::from_folder(demo_data())
        .journal(2)
        .start()
        .expect("starts");
    get(&server, "/api/v1/payments", DEMO_TOKEN, &[]).await;
    for _ in 0..2 {
        get(&server, "/api/v1/event", DEMO_TOKEN, &[]).await;
    }
    let partial = server
        .check(&Expect::get("/api/v1/payments").times(0))
        .expect_err("the payments request was dropped, not absent");
    assert!(
        partial
            .message()
            .contains("the journal is full: 1 request before these were dropped"),
        "{partial}"
    );
    server.verify(&Expect::get("/api/v1/event"));
    let listed = answer(crate::helpers::client().get(server.url("/_journal")))
        .await
        .json();
    assert_eq!(
        (listed["dropped"].as_u64(), listed["count"].as_u64()),
        (Some(1), Some(2))
    );

    server.clear_journal();
    server.verify(&Expect::any().times(0));
    get(&server, "/api/v1/event", DEMO_TOKEN, &[]).await;
    server.verify(&Expect::get("/api/v1/event").times(1));
}

/// With `strict`, a warning fails the start as `check --strict` fails: a misspelt file name
/// would otherwise be served without that file.
#[test]
fn strict_turns_a_misspelt_file_into_a_failed_start() {
    let misspelt = || summit().file("payment.json", r#"{"count": 0, "data": []}"#);
    let lenient = TestServer::from_bundles([misspelt()])
        .start()
        .expect("a warning does not stop serve");
    assert_eq!(lenient.token("summit"), Some("summit-token"));
    let err = TestServer::from_bundles([misspelt()])
        .strict(true)
        .start()
        .expect_err("strict");
    let StartError::Bundles(problems) = &err else {
        panic!("{err}");
    };
    assert_eq!(problems.problems.len(), 1, "{err}");
    let shown = format!("{err:?}");
    assert!(
        shown.starts_with("1 problem in the bundles, so the test server did not start:\n  warning: summit/payment.json"),
        "Debug reads as Display: {shown}"
    );
}

/// A test that edits its data reloads with `reload()`: it returns once the new data is served,
/// and a broken edit is an error naming the file and place (the last good data keeps being
/// served, so a test going on would read old data).
#[tokio::test]
async fn reload_serves_an_edit_and_reports_a_broken_one() {
    let server = TestServer::from_bundles([summit()])
        .start()
        .expect("starts");
    let event_json = server.data_dir().join("summit").join("event.json");
    std::fs::write(
        &event_json,
        serde_json::to_vec(&event("Summit, edited", 1)).expect("JSON"),
    )
    .expect("edited");
    server.reload().expect("the edit is good");
    let answer = get(&server, "/api/v1/event", "summit-token", &[]).await;
    assert_eq!(answer.json()["data"][0]["title"], "Summit, edited");

    std::fs::write(&event_json, "{\"data\": [").expect("broken");
    let err = server.reload().expect_err("the edit is broken");
    let shown = err.to_string();
    assert!(shown.contains("error: summit/event.json:1:"), "{shown}");
    assert!(
        shown.starts_with("1 problem in the bundles at reload; the test server runs on"),
        "not 'did not start': {shown}"
    );
    let answer = get(&server, "/api/v1/event", "summit-token", &[]).await;
    assert_eq!(answer.json()["data"][0]["title"], "Summit, edited");
}

/// On a server shared by tests, one bundle's dropped requests do not make another bundle's
/// exact counts fail, and forgetting one bundle's requests forgets its dropped count too.
#[tokio::test]
async fn dropped_requests_count_per_bundle() {
    let server = TestServer::from_bundles([
        summit(),
        Bundle::new("expo")
            .token("expo-token")
            .json("event", event("Expo", 2)),
    ])
    .journal(3)
    .start()
    .expect("starts");
    get(&server, "/api/v1/event", "expo-token", &[]).await;
    for _ in 0..3 {
        get(&server, "/api/v1/event", "summit-token", &[]).await;
    }
    server.verify(&Expect::get("/api/v1/event").bundle("summit").times(3));
    let expo = server
        .check(&Expect::get("/api/v1/event").bundle("expo").times(0))
        .expect_err("expo's request was dropped, not absent");
    assert!(
        expo.message()
            .contains("1 request before these were dropped"),
        "{expo}"
    );
    let listed = answer(crate::helpers::client().get(server.url("/_journal?bundle=expo")))
        .await
        .json();
    assert_eq!(listed["dropped"].as_u64(), Some(1));

    let forgotten = crate::helpers::client()
        .delete(server.url("/_journal?bundle=expo"))
        .send()
        .await
        .expect("answered");
    assert_eq!(forgotten.status().as_u16(), 204);
    server.verify(&Expect::get("/api/v1/event").bundle("expo").times(0));
}
