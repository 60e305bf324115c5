//! The writes over real HTTP: `POST /attendees/create`, `/checkin/attendees`,
//! `/checkin/sessions`, what later reads show, what is refused (and that a refusal changes
//! nothing), `--read-only`, `/_writes/reset`, and durability with `--state`: restarts, SIGKILL,
//! reloads and concurrent writers.

use std::path::Path;

use eventbox::app::App;
use eventbox::config::ServeOptions;
use reqwest::Method;
use serde_json::{json, Value};

use crate::cli::serve_demo;
use crate::helpers::{answer, demo_data, serve_app, Answer, TempData, TestApp, DEMO_TOKEN};

const JSON: &str = "application/json";

/// The demo served in process, with writes kept in `state` when given.
async fn demo_app(state: Option<&Path>, read_only: bool) -> TestApp {
    let options = ServeOptions {
        state: state.map(Path::to_path_buf),
        read_only,
        ..ServeOptions::for_folder(demo_data())
    };
    let app = App::with_options(&options).expect("options serve takes");
    app.open_state().expect("the state folder opens");
    app.load().expect("the demo loads");
    serve_app(app).await
}

/// The first ticket price of the demo event.
pub(crate) async fn a_price(app: &TestApp) -> i64 {
    first_price(&app.get("/api/v1/event", DEMO_TOKEN).await.json())
}

/// The first ticket price of an event body.
fn first_price(event: &Value) -> i64 {
    event["data"][0]["tickets"][0]["prices"][0]["id_ticket_price"]
        .as_i64()
        .expect("a ticket price")
}

pub(crate) fn person(name: &str, email: &str, price: i64) -> Value {
    json!({
        "name": name,
        "bagde_name": name,
        "email": email,
        "gender": "F",
        "photo": "",
        "registration_confirmed": true,
        "registration": {"id_ticket_price": price, "price": 0}
    })
}

async fn post(app: &TestApp, path: &str, body: &Value) -> crate::helpers::Answer {
    let bytes = serde_json::to_vec(body).expect("JSON");
    app.send(Method::POST, path, Some(DEMO_TOKEN), Some((JSON, &bytes)))
        .await
}

async fn attendees(app: &TestApp) -> Value {
    let res = app.get("/api/v1/attendees", DEMO_TOKEN).await;
    assert_eq!(res.status, 200, "{}", res.text());
    res.json()
}

/// After a write the attendees list is made anew, and compressed in the background: a client
/// asking for gzip or brotli gets it once it is ready (identity meanwhile), and it decodes to
/// the plain body.
#[tokio::test]
async fn the_attendees_with_writes_are_compressed_soon_after() {
    let app = demo_app(None, false).await;
    let price = a_price(&app).await;
    let made = post(
        &app,
        "/api/v1/attendees/create",
        &person("Ana Souza", "ana.souza@example.org", price),
    )
    .await;
    assert_eq!(made.status, 200);
    let plain = app.get("/api/v1/attendees", DEMO_TOKEN).await;
    assert!(plain.text().contains("ana.souza@example.org"));
    for encoding in ["gzip", "br"] {
        let res = crate::kiosk::until(
            std::time::Duration::from_secs(10),
            "a compressed answer",
            || async {
                let res = app
                    .get_with(
                        "/api/v1/attendees",
                        DEMO_TOKEN,
                        &[("accept-encoding", encoding)],
                    )
                    .await;
                (res.header("content-encoding") == Some(encoding)).then_some(res)
            },
        )
        .await;
        assert_eq!(crate::http::decode(&res), plain.body);
    }
}

#[tokio::test]
async fn a_registration_flat_or_wrapped_appears_in_the_list_and_by_id() {
    let app = demo_app(None, false).await;
    let price = a_price(&app).await;
    let before = attendees(&app).await;
    let n = before["count"].as_u64().expect("count");

    let flat = post(
        &app,
        "/api/v1/attendees/create",
        &person("Ana Flat", "ana@exemplo.com", price),
    )
    .await;
    let wrapped = post(
        &app,
        "/api/v1/attendees/create/",
        &json!({"attendee": person("Bia Wrapped", "bia@exemplo.com", price)}),
    )
    .await;

    for res in [&flat, &wrapped] {
        assert_eq!(res.status, 200, "{}", res.text());
        assert_eq!(res.json(), json!("Data entered successfully."));
    }
    let after = attendees(&app).await;
    assert_eq!(after["count"], n + 2);
    let data = after["data"].as_array().expect("data");
    assert_eq!(
        &data[..n as usize],
        before["data"].as_array().expect("data").as_slice()
    );
    let (ana, bia) = (&data[n as usize], &data[n as usize + 1]);
    let keys: Vec<&str> = ana
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id_attendees",
            "id_event",
            "checkin_code",
            "name",
            "bagde_name",
            "email",
            "gender",
            "photo",
            "document",
            "confirmed",
            "registration_category",
            "registration_date",
            "registration_hour"
        ],
        "the documented fields, in order"
    );
    assert_eq!(ana["name"], "Ana Flat");
    assert_eq!(bia["email"], "bia@exemplo.com");
    assert_eq!(ana["confirmed"], true);
    assert_eq!(ana["id_event"], before["data"][0]["id_event"]);
    let code = ana["checkin_code"].as_i64().expect("a code");
    assert!(
        (10_000_000..100_000_000).contains(&code),
        "8 digits: {code}"
    );
    assert_ne!(ana["id_attendees"], bia["id_attendees"]);
    assert_ne!(ana["checkin_code"], bia["checkin_code"]);

    let one = app
        .get(
            &format!("/api/v1/attendees/{}", bia["id_attendees"]),
            DEMO_TOKEN,
        )
        .await;
    assert_eq!(one.status, 200);
    assert_eq!(one.json(), json!({"data": [bia], "count": 1}));
    let page = app
        .get(
            &format!("/api/v1/attendees/?page={}&per_page=1", n + 1),
            DEMO_TOKEN,
        )
        .await;
    assert_eq!(page.json(), json!({"data": [ana], "count": 1}));
}

#[tokio::test]
async fn refused_writes_are_4xx_with_a_clear_message_and_change_nothing() {
    let app = demo_app(None, false).await;
    let price = a_price(&app).await;
    let existing = attendees(&app).await["data"][0]["email"]
        .as_str()
        .expect("an e-mail")
        .to_uppercase();
    let before = app.get("/api/v1/attendees", DEMO_TOKEN).await.body;
    let create = "/api/v1/attendees/create";

    let dup = post(&app, create, &person("Again", &existing, price)).await;
    dup.assert_error(400, "already_registered");
    assert_eq!(dup.json()["message"], "Participante já está inscrito");

    let unknown = post(&app, create, &person("P", "p@exemplo.com", 999_999_999)).await;
    unknown.assert_error(400, "unknown_ticket_price");
    assert!(unknown.text().contains("999999999"), "{}", unknown.text());

    let cases: Vec<(&str, Vec<u8>, u16, &str, &str)> = vec![
        (
            "malformed",
            b"{\"name\": ".to_vec(),
            400,
            "invalid_json",
            "line 1",
        ),
        (
            "an array",
            b"[{\"name\":\"x\"}]".to_vec(),
            400,
            "invalid_write",
            "expected an object",
        ),
        (
            "a missing field",
            br#"{"name":"x","registration":{"id_ticket_price":1,"price":0}}"#.to_vec(),
            400,
            "invalid_write",
            "email",
        ),
        (
            "a name of 2,049 characters",
            serde_json::to_vec(&person(&"x".repeat(2049), "long@exemplo.com", price))
                .expect("JSON"),
            400,
            "invalid_write",
            "name: longer than 2048 characters",
        ),
        (
            "10 MB",
            vec![b' '; 10 * 1024 * 1024],
            413,
            "body_too_large",
            "1 MiB",
        ),
    ];
    for (what, body, status, code, says) in cases {
        let res = app
            .send(Method::POST, create, Some(DEMO_TOKEN), Some((JSON, &body)))
            .await;
        res.assert_error(status, code);
        assert!(
            res.json()["message"].as_str().unwrap_or("").contains(says),
            "{what}: {}",
            res.text()
        );
    }
    let form = serde_json::to_vec(&person("F", "f@exemplo.com", price)).expect("JSON");
    let res = app
        .send(
            Method::POST,
            create,
            Some(DEMO_TOKEN),
            Some(("text/plain", &form)),
        )
        .await;
    res.assert_error(415, "unsupported_media_type");
    // A Content-Type that is not text (hyper lets bytes over 0x7F through) names no JSON type
    // either: before, it was taken as no Content-Type, that is as JSON, and the write made.
    let mut raw = format!(
        "POST {create} HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         Content-Length: {}\r\nConnection: close\r\nContent-Type: text/plain",
        form.len()
    )
    .into_bytes();
    raw.extend_from_slice(b"\xff\r\n\r\n");
    raw.extend_from_slice(&form);
    let sent = crate::helpers::raw_http1(&app.base, &raw).await;
    let text = String::from_utf8_lossy(&sent.received);
    assert!(text.starts_with("HTTP/1.1 415 "), "{text}");
    assert!(text.contains("unsupported_media_type"), "{text}");
    let get = app.get(create, DEMO_TOKEN).await;
    get.assert_error(405, "method_not_allowed");
    assert_eq!(get.header("allow"), Some("POST, OPTIONS"));
    let no_token = app
        .send(Method::POST, create, None, Some((JSON, &form)))
        .await;
    no_token.assert_error(401, "missing_token");

    assert_eq!(app.get("/api/v1/attendees", DEMO_TOKEN).await.body, before);

    // The longest text is counted in characters: 2,048 of two bytes each are taken.
    let longest = "é".repeat(2048);
    let taken = post(
        &app,
        create,
        &person(&longest, "longest@exemplo.com", price),
    )
    .await;
    assert_eq!(taken.status.as_u16(), 200, "{}", taken.text());
    let listed = attendees(&app).await;
    let last = listed["data"].as_array().and_then(|l| l.last()).cloned();
    assert_eq!(last.map(|a| a["name"].clone()), Some(json!(longest)));
}

#[tokio::test]
async fn checkins_show_on_the_attendee_and_a_batch_is_all_or_nothing() {
    let app = demo_app(None, false).await;
    let list = attendees(&app).await;
    let first = &list["data"][0];
    let second = &list["data"][1];
    let code = first["checkin_code"].to_string();
    let id = first["id_attendees"].as_i64().expect("id");
    let session = app.get("/api/v1/session", DEMO_TOKEN).await.json()["data"][0]["id_session"]
        .as_i64()
        .expect("an activity");

    let bad_batch = json!([
        {"checkin_code": second["checkin_code"].to_string(), "checkin": 1, "checkin_date": "2026-09-15T08:00:00"},
        {"checkin_code": "1", "checkin": 1, "checkin_date": "2026-09-15T08:00:00"}
    ]);
    // A list of one is a list: its item's place is said too.
    let alone = json!([bad_batch[1].clone()]);
    for (batch, place) in [
        (&bad_batch, "[1] (check-in 2 of the list): "),
        (&alone, "[0] (check-in 1 of the list): "),
    ] {
        let refused = post(&app, "/api/v1/checkin/attendees", batch).await;
        refused.assert_error(404, "unknown_checkin_code");
        assert!(refused.text().contains(place), "{}", refused.text());
    }
    assert_eq!(
        attendees(&app).await,
        list,
        "nothing of a refused batch is applied"
    );

    let ok = post(
        &app,
        "/api/v1/checkin/attendees",
        &json!([{"checkin_code": code, "checkin": 1, "checkin_date": "2026-09-15T08:01:00"}]),
    )
    .await;
    assert_eq!((ok.status.as_u16(), ok.json()), (200, json!("OK")));
    // The code posted back as `/attendees` lists it, a number, as a check-in page may: the
    // service's framework puts a number into the model's string (before: 400).
    assert!(second["checkin_code"].is_i64(), "{second}");
    let as_listed = post(
        &app,
        "/api/v1/checkin/attendees",
        &json!([{"checkin_code": second["checkin_code"], "checkin": 1, "checkin_date": "2026-09-15T08:02:00"}]),
    )
    .await;
    assert_eq!(as_listed.status, 200, "{}", as_listed.text());
    let second_id = second["id_attendees"].as_i64().expect("id");
    let second_now = app
        .get(&format!("/api/v1/attendees/{second_id}"), DEMO_TOKEN)
        .await
        .json();
    assert_eq!(second_now["data"][0]["checkin"], 1, "{second_now}");
    let at = post(
        &app,
        "/api/v1/checkin/sessions",
        &json!([{"id_attendees": id, "id_session": session, "checkin": 1, "checkin_date": "2026-09-15T09:00:00"}]),
    )
    .await;
    assert_eq!((at.status.as_u16(), at.json()), (200, json!("OK")));
    post(
        &app,
        "/api/v1/checkin/sessions",
        &json!([{"id_attendees": id, "id_session": 1, "checkin": 1, "checkin_date": "2026-09-15T09:00:00"}]),
    )
    .await
    .assert_error(404, "unknown_session");
    post(
        &app,
        "/api/v1/checkin/attendees",
        &json!([{"checkin_code": code, "checkin": 2, "checkin_date": "2026-09-15T08:01:00"}]),
    )
    .await
    .assert_error(400, "invalid_write");

    let one = app
        .get(&format!("/api/v1/attendees/{id}"), DEMO_TOKEN)
        .await
        .json();
    let record = &one["data"][0];
    assert_eq!(record["checkin"], 1);
    assert_eq!(record["checkin_date"], "2026-09-15T08:01:00");
    assert_eq!(
        record["checkin_sessions"],
        json!([{"id_session": session, "checkin": 1, "checkin_date": "2026-09-15T09:00:00"}])
    );
    let undo = post(
        &app,
        "/api/v1/checkin/attendees",
        &json!({"attendees": [{"checkin_code": code, "checkin": 0, "checkin_date": "2026-09-15T10:00:00"}]}),
    )
    .await;
    assert_eq!(undo.status, 200);
    let record = app
        .get(&format!("/api/v1/attendees/{id}"), DEMO_TOKEN)
        .await
        .json();
    assert_eq!(record["data"][0]["checkin"], 0);
}

#[tokio::test]
async fn read_only_refuses_every_write_and_reset_with_405_and_reset_forgets_the_writes() {
    let ro = demo_app(None, true).await;
    let price = a_price(&ro).await;
    let before = ro.get("/api/v1/attendees", DEMO_TOKEN).await.body;
    for path in [
        "/api/v1/attendees/create",
        "/api/v1/checkin/attendees",
        "/api/v1/checkin/sessions",
    ] {
        let res = post(&ro, path, &person("R", "r@exemplo.com", price)).await;
        res.assert_error(405, "read_only");
        assert!(res.header("allow").is_some(), "{path}: an Allow header");
    }
    // Nor are writes forgotten: a read-only fixture never changes.
    let reset = ro
        .send(Method::POST, "/_writes/reset", Some(DEMO_TOKEN), None)
        .await;
    reset.assert_error(405, "read_only");
    assert_eq!(reset.header("allow"), Some(""));
    assert_eq!(ro.get("/api/v1/attendees", DEMO_TOKEN).await.body, before);

    let app = demo_app(None, false).await;
    let pristine = app.get("/api/v1/attendees", DEMO_TOKEN).await.body;
    let res = post(
        &app,
        "/api/v1/attendees/create",
        &person("R", "r@exemplo.com", price),
    )
    .await;
    assert_eq!(res.status, 200);
    assert_ne!(
        app.get("/api/v1/attendees", DEMO_TOKEN).await.body,
        pristine
    );
    app.send(Method::POST, "/_writes/reset", None, None)
        .await
        .assert_error(401, "missing_token");
    // The token alone picks the bundle: a parameter that seems to pick another is refused, and
    // nothing is forgotten.
    app.send(
        Method::POST,
        "/_writes/reset?bundle=other",
        Some(DEMO_TOKEN),
        None,
    )
    .await
    .assert_error(400, "invalid_reset");
    app.send(
        Method::POST,
        "/_writes/reset",
        Some(DEMO_TOKEN),
        Some(("application/json", br#"{"bundle": "other"}"#)),
    )
    .await
    .assert_error(400, "invalid_reset");
    // A body announced and never sent is refused at once, not waited for and taken as empty.
    let held = crate::helpers::raw_http1(
        &app.base,
        &format!(
            "POST /_writes/reset HTTP/1.1\r\nHost: localhost\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
             Content-Length: 20\r\n\r\n"
        ),
    )
    .await;
    let head = String::from_utf8_lossy(&held.received);
    assert!(
        head.starts_with("HTTP/1.1 400") && head.contains("invalid_reset"),
        "{head}"
    );
    assert_ne!(
        app.get("/api/v1/attendees", DEMO_TOKEN).await.body,
        pristine
    );
    let reset = app
        .send(Method::POST, "/_writes/reset", Some(DEMO_TOKEN), None)
        .await;
    assert_eq!(reset.status, 204);
    assert_eq!(
        app.get("/api/v1/attendees", DEMO_TOKEN).await.body,
        pristine
    );
}

#[tokio::test]
async fn eight_concurrent_writers_lose_none_and_a_restart_keeps_them_all() {
    let state = tempfile::tempdir().expect("tempdir");
    let app = demo_app(Some(state.path()), false).await;
    let price = a_price(&app).await;
    let n = attendees(&app).await["count"].as_u64().expect("count");
    let app = std::sync::Arc::new(app);

    let writers: Vec<_> = (0..8)
        .map(|w| {
            let app = app.clone();
            tokio::spawn(async move {
                for i in 0..500 {
                    let email = format!("w{w}-{i}@exemplo.com");
                    let res = post(
                        &app,
                        "/api/v1/attendees/create",
                        &person("W", &email, price),
                    )
                    .await;
                    assert_eq!(res.status, 200, "{}", res.text());
                }
            })
        })
        .collect();
    for w in writers {
        w.await.expect("a writer");
    }

    let after = attendees(&app).await;
    assert_eq!(after["count"], n + 4000);
    let ids: std::collections::HashSet<&Value> = after["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|a| &a["id_attendees"])
        .collect();
    assert_eq!(ids.len() as u64, n + 4000, "every id is unique");
    // The log: one line per request, numbered in the order applied, with the request as it came
    // (what kiosk mode forwards).
    let log = std::fs::read_to_string(state.path().join("writes.jsonl")).expect("the log");
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 4000);
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["seq"], i as u64 + 1);
        assert_eq!(line["bundle"], "demo");
        assert_eq!(line["request"]["path"], "/api/v1/attendees/create");
        assert_eq!(
            line["request"]["body"]["registration"]["id_ticket_price"],
            price
        );
        assert_eq!(line["writes"][0]["write"], "registration");
    }
    // The demo names no source: nothing waits to be forwarded.
    let queue = app.send(Method::GET, "/_queue", None, None).await.json();
    assert_eq!(queue, json!({"bundles": {}}));
    std::sync::Arc::into_inner(app)
        .expect("the writers are done")
        .shutdown()
        .await;

    let again = demo_app(Some(state.path()), false).await;
    assert_eq!(
        attendees(&again).await,
        after,
        "the same list after a restart"
    );
}

/// The first ticket price of the demo served at `base` (another process).
async fn price_at(base: &str) -> i64 {
    first_price(&crate::cli::get_event(base, DEMO_TOKEN).await.1)
}

/// Registers `email` at the demo served at `base` (another process).
async fn register_at(client: &reqwest::Client, base: &str, email: &str, price: i64) -> Answer {
    answer(
        client
            .post(format!("{base}/api/v1/attendees/create"))
            .header("Authorization-Token", DEMO_TOKEN)
            .header("Content-Type", JSON)
            .body(person("K", email, price).to_string()),
    )
    .await
}

/// Runs eventbox on the demo with `--state state`, expecting it to refuse to start: what it
/// said. One that starts serves until killed: the time limit fails the test then.
async fn refused_start(state: &Path) -> std::process::Output {
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_eventbox"))
        .args(["--addr", "127.0.0.1:0", "--no-watch", "--state"])
        .arg(state)
        .env("EVENTBOX_DATA", demo_data())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(std::time::Duration::from_secs(30), run)
        .await
        .expect("eventbox exits rather than serve")
        .expect("eventbox runs")
}

/// A restart typed right after `kill -9` may find the state log still locked by the process
/// being torn down: it waits for that lock a moment, saying so, and starts. Before, it refused
/// to start.
#[tokio::test]
async fn a_start_waits_for_the_lock_of_a_process_that_is_stopping() {
    let state = tempfile::tempdir().expect("tempdir");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(state.path().join("writes.jsonl"))
        .expect("the log");
    // The lock of a process going away: let go of 1.5 s from now (within the 3 s waited).
    log.lock().expect("locked");
    let stopping = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        drop(log);
    });

    let served = serve_demo(&["--state", state.path().to_str().expect("UTF-8")], &[]).await;

    stopping.join().expect("the lock let go");
    let said = served.stderr();
    assert!(said.contains("held by another process"), "{said}");
    let client = crate::helpers::client();
    let price = price_at(&served.base).await;
    let made = register_at(&client, &served.base, "lock@exemplo.com", price).await;
    assert_eq!(made.status, 200, "{}", made.text());
}

/// A second eventbox given the state folder a running one uses refuses to start (exit 2),
/// naming the log: two would interleave their lines and number them alike. The same for a
/// second `App` in one process. The first keeps taking writes, and a restart reads them.
#[tokio::test]
async fn a_state_folder_in_use_is_refused_to_a_second_server() {
    let state = tempfile::tempdir().expect("tempdir");
    let dir = state.path().to_str().expect("UTF-8");
    let served = serve_demo(&["--state", dir], &[]).await;
    let second = refused_start(state.path()).await;
    let said = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{said}");
    let log = state.path().join("writes.jsonl");
    assert!(
        said.contains(&format!(
            "{}: in use by another eventbox process",
            log.display()
        )),
        "{said}"
    );
    let in_process = App::with_options(&ServeOptions {
        state: Some(state.path().to_path_buf()),
        ..ServeOptions::for_folder(demo_data())
    })
    .expect("options serve takes")
    .open_state()
    .expect_err("in use");
    assert!(in_process.to_string().contains("in use"), "{in_process}");

    let client = crate::helpers::client();
    let price = price_at(&served.base).await;
    let made = register_at(&client, &served.base, "ana@exemplo.com", price).await;
    assert_eq!(made.status, 200, "{}", made.text());
    drop(served);
    let again = demo_app(Some(state.path()), false).await;
    let listed = attendees(&again).await;
    assert!(listed.to_string().contains("ana@exemplo.com"), "{listed}");
}

/// A `--state` that cannot be used (a file, a damaged log) stops the start before anything
/// says it is listening, and says why.
#[tokio::test]
async fn a_state_folder_that_cannot_be_used_stops_the_start_before_it_listens() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("state.json");
    std::fs::write(&file, "{}").expect("write");
    let damaged = tmp.path().join("damaged");
    std::fs::create_dir(&damaged).expect("mkdir");
    std::fs::write(damaged.join("writes.jsonl"), "garbage\n{}\n").expect("write");
    for (state, why) in [
        (&file, "not a folder"),
        (&damaged, "writes.jsonl:1: not a write"),
    ] {
        let out = refused_start(state).await;
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(why), "{why}: {stderr}");
        assert!(!stdout.contains("listening"), "{stdout}");
    }
}

#[tokio::test]
async fn sigkill_between_writes_loses_no_acknowledged_write() {
    let state = tempfile::tempdir().expect("tempdir");
    // A folder the server makes: its user's only, as the log it holds (names, e-mails).
    let made = state.path().join("made");
    let dir = made.to_str().expect("UTF-8");
    let served = serve_demo(&["--state", dir], &[]).await;
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&made).expect("made").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        crate::helpers::assert_private(&made.join("writes.jsonl"));
    }
    let client = crate::helpers::client();
    let price = price_at(&served.base).await;
    let mut acknowledged = Vec::new();
    for i in 0..30 {
        let email = format!("k{i}@exemplo.com");
        let res = register_at(&client, &served.base, &email, price).await;
        assert_eq!(res.status, 200, "{}", res.text());
        acknowledged.push(email);
    }
    served.signal("KILL");
    drop(served);

    let again = serve_demo(&["--state", dir], &[]).await;
    let list = answer(
        client
            .get(format!("{}/api/v1/attendees", again.base))
            .header("Authorization-Token", DEMO_TOKEN),
    )
    .await
    .json();
    let emails: Vec<&str> = list["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|a| a["email"].as_str())
        .collect();
    for email in &acknowledged {
        assert!(emails.contains(&email.as_str()), "{email} lost");
    }
    let log = again.stderr();
    assert!(log.contains("writes are kept in the state folder"), "{log}");
    assert!(log.contains("lines=30 writes=30"), "{log}");
}

#[tokio::test]
async fn a_reload_keeps_the_writes_and_a_snapshot_that_caught_up_is_not_doubled() {
    let data = TempData::new();
    data.with_demo("demo");
    let app = App::new(data.path());
    app.load().expect("loads");
    let app = serve_app(app).await;
    let price = a_price(&app).await;
    let res = post(
        &app,
        "/api/v1/attendees/create",
        &person("Caught Up", "up@exemplo.com", price),
    )
    .await;
    assert_eq!(res.status, 200);
    let with_write = attendees(&app).await;
    let n = with_write["count"].as_u64().expect("count");

    // A reload of the same files: the write is still there.
    app.app.load().expect("reloads");
    assert_eq!(attendees(&app).await, with_write);

    // The snapshot now holds the registration itself (as a fresh pull would): not doubled.
    let path = data.path().join("demo/attendees.json");
    let mut file: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("JSON");
    let written = with_write["data"][n as usize - 1].clone();
    file["data"].as_array_mut().expect("data").push(written);
    file["count"] = json!(n);
    std::fs::write(&path, serde_json::to_vec(&file).expect("JSON")).expect("write");
    app.app.load().expect("reloads");
    let after = attendees(&app).await;
    assert_eq!(after["count"], n);
}

#[tokio::test]
async fn the_test_server_verifies_a_write_by_its_body_and_reset_forgets_it() {
    use eventbox::testing::{Expect, TestServer};

    let server = TestServer::from_folder(demo_data())
        .journal(100)
        .start()
        .expect("starts");
    let client = crate::helpers::client();
    let event = answer(
        client
            .get(server.url("/api/v1/event"))
            .header("Authorization-Token", DEMO_TOKEN),
    )
    .await
    .json();
    let price = event["data"][0]["tickets"][0]["prices"][0]["id_ticket_price"]
        .as_i64()
        .expect("a price");
    let body = person("Verified", "verified@exemplo.com", price);
    let res = answer(
        client
            .post(server.url("/api/v1/attendees/create"))
            .header("Authorization-Token", DEMO_TOKEN)
            .header("Content-Type", JSON)
            .body(serde_json::to_vec(&body).expect("JSON")),
    )
    .await;
    assert_eq!(res.status, 200);

    server.verify(
        &Expect::post("/api/v1/attendees/create")
            .json_body(body.clone())
            .status(200)
            .times(1),
    );
    let mut other = body.clone();
    other["email"] = json!("someone-else@exemplo.com");
    let failed = server
        .check(&Expect::post("/api/v1/attendees/create").json_body(other))
        .expect_err("no such body was sent");
    assert!(failed.message().contains("email"), "{}", failed.message());

    let list = |server: &TestServer| {
        let url = server.url("/api/v1/attendees");
        let client = client.clone();
        async move {
            answer(client.get(url).header("Authorization-Token", DEMO_TOKEN))
                .await
                .json()
        }
    };
    let with = list(&server).await;
    assert!(with.to_string().contains("verified@exemplo.com"));
    server.reset();
    let without = list(&server).await;
    assert!(!without.to_string().contains("verified@exemplo.com"));
}

#[tokio::test]
async fn an_empty_batch_is_refused_and_a_restart_after_it_reads_the_log() {
    let state = tempfile::tempdir().expect("tempdir");
    let app = demo_app(Some(state.path()), false).await;
    let code = attendees(&app).await["data"][0]["checkin_code"].to_string();
    post(&app, "/api/v1/checkin/attendees", &json!([]))
        .await
        .assert_error(400, "invalid_write");
    let ok = post(
        &app,
        "/api/v1/checkin/attendees",
        &json!([{"checkin_code": code, "checkin": 1, "checkin_date": "2026-09-15T08:00:00"}]),
    )
    .await;
    assert_eq!(ok.status, 200);
    let before = attendees(&app).await;
    app.shutdown().await;
    let again = demo_app(Some(state.path()), false).await;
    assert_eq!(attendees(&again).await, before);
}

/// Bodies as the service's framework reads them (`text/json`, a byte order mark, no
/// `registration.price`, integers as strings, a `checkin_date` without seconds) are taken, and all replay; a body
/// nested deeper than the log can read back is refused, not acknowledged and then lost on
/// restart (127 levels parse, but not inside the log's line).
#[tokio::test]
async fn bodies_the_framework_takes_are_taken_and_one_too_deep_for_the_log_is_refused() {
    let state = tempfile::tempdir().expect("tempdir");
    let app = demo_app(Some(state.path()), false).await;
    let price = a_price(&app).await;
    let send = |path: &'static str, content_type: &'static str, body: Vec<u8>| {
        let app = &app;
        async move {
            app.send(
                Method::POST,
                path,
                Some(DEMO_TOKEN),
                Some((content_type, &body)),
            )
            .await
        }
    };
    let nested = |levels: usize| {
        let mut person = person("Deep", &format!("deep{levels}@exemplo.com"), price);
        let deep = format!("{}{}", "[".repeat(levels - 1), "]".repeat(levels - 1));
        person["extra"] = serde_json::from_str(&deep).expect("nested arrays");
        serde_json::to_vec(&person).expect("JSON")
    };

    let too_deep = send("/api/v1/attendees/create", JSON, nested(127)).await;
    too_deep.assert_error(400, "invalid_json");
    assert!(too_deep.text().contains("64 levels"), "{}", too_deep.text());
    let deep = send("/api/v1/attendees/create", JSON, nested(64)).await;
    assert_eq!(deep.status, 200, "{}", deep.text());

    let mut no_price = b"\xEF\xBB\xBF".to_vec();
    no_price.extend(
        serde_json::to_vec(
            &json!({"name": "Sem Preço", "email": "semprego@exemplo.com",
            "registration": {"id_ticket_price": price.to_string()}}),
        )
        .expect("JSON"),
    );
    let res = send(
        "/api/v1/attendees/create",
        "text/json; charset=utf-8",
        no_price,
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.text());
    let made = |list: &Value| {
        list["data"]
            .as_array()
            .expect("data")
            .iter()
            .find(|a| a["email"] == "semprego@exemplo.com")
            .expect("the registration without a price is listed")
            .clone()
    };
    let list = attendees(&app).await;
    let code = made(&list)["checkin_code"].to_string();
    let checkin =
        json!([{"checkin_code": code, "checkin": "1", "checkin_date": "2026-09-15T08:00"}]);
    let res = send(
        "/api/v1/checkin/attendees",
        "text/json",
        serde_json::to_vec(&checkin).expect("JSON"),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.text());
    let before = attendees(&app).await;
    assert_eq!(
        made(&before)["checkin_date"],
        "2026-09-15T08:00",
        "shown as sent"
    );
    assert_eq!(
        before["count"].as_i64(),
        list["count"].as_i64(),
        "the check-in adds no one"
    );

    app.shutdown().await;
    let again = demo_app(Some(state.path()), false).await;
    assert_eq!(
        attendees(&again).await,
        before,
        "every acknowledged write replays"
    );
}

/// Two prices with one `id_ticket_price` (a warning of `check`): a registration taking it
/// gets the first's ticket in file order (it got the last's).
#[tokio::test]
async fn a_price_id_two_tickets_share_registers_with_the_first_ticket() {
    let data = TempData::new();
    data.with_demo("demo");
    let event = std::fs::read_to_string(data.path().join("demo/event.json")).expect("event");
    let shared = event.replacen(
        "\"id_ticket_price\": 30419",
        "\"id_ticket_price\": 30417",
        1,
    );
    assert_ne!(
        shared, event,
        "the second ticket's price takes the first's id"
    );
    data.write("demo/event.json", shared);
    let app =
        App::with_options(&ServeOptions::for_folder(data.path())).expect("options serve takes");
    app.load().expect("loads, with a warning");
    let app = serve_app(app).await;
    let made = post(
        &app,
        "/api/v1/attendees/create",
        &person("Duda", "duda@exemplo.com", 30417),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let list = attendees(&app).await;
    let duda = list["data"]
        .as_array()
        .expect("data")
        .iter()
        .find(|a| a["email"] == "duda@exemplo.com")
        .expect("registered")
        .clone();
    assert_eq!(duda["registration_category"], "Profissional", "{duda}");
}

/// Opening a state folder counts its lines and the writes they hold now: a reset forgets
/// the writes before it.
#[tokio::test]
async fn a_restart_counts_the_writes_a_reset_left() {
    let state = tempfile::tempdir().expect("tempdir");
    let app = demo_app(Some(state.path()), false).await;
    let price = a_price(&app).await;
    for who in ["a", "b"] {
        let res = post(
            &app,
            "/api/v1/attendees/create",
            &person(who, &format!("{who}@exemplo.com"), price),
        )
        .await;
        assert_eq!(res.status, 200, "{}", res.text());
    }
    let reset = app
        .send(Method::POST, "/_writes/reset", Some(DEMO_TOKEN), None)
        .await;
    assert_eq!(reset.status, 204);
    let res = post(
        &app,
        "/api/v1/attendees/create",
        &person("c", "c@exemplo.com", price),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.text());
    app.shutdown().await;
    let options = ServeOptions {
        state: Some(state.path().to_path_buf()),
        ..ServeOptions::for_folder(demo_data())
    };
    let opened = App::with_options(&options)
        .expect("options serve takes")
        .open_state()
        .expect("opens")
        .expect("a state folder");
    assert_eq!((opened.lines, opened.writes), (4, 1));
    let queued = opened.queue;
    assert_eq!(
        (queued.waiting, queued.parked, queued.refused),
        (0, 0, 0),
        "no source: nothing queued"
    );
}

/// The writes of `data` kept in `state`, served in process.
async fn app_with_state(data: &Path, state: &Path) -> TestApp {
    let options = ServeOptions {
        state: Some(state.to_path_buf()),
        ..ServeOptions::for_folder(data)
    };
    let app = App::with_options(&options).expect("options serve takes");
    app.open_state().expect("the state folder opens");
    app.load().expect("loads");
    serve_app(app).await
}

#[tokio::test]
async fn a_reload_that_takes_a_registrations_id_keeps_its_check_ins_on_it() {
    let data = TempData::new();
    data.with_demo("demo");
    let state = tempfile::tempdir().expect("tempdir");
    let app = app_with_state(data.path(), state.path()).await;
    let price = a_price(&app).await;
    let session = app.get("/api/v1/session", DEMO_TOKEN).await.json()["data"][0]["id_session"]
        .as_i64()
        .expect("an activity");
    assert_eq!(
        post(
            &app,
            "/api/v1/attendees/create",
            &person("Ana Local", "ana.local@exemplo.com", price)
        )
        .await
        .status,
        200
    );
    let list = attendees(&app).await;
    let n = list["count"].as_u64().expect("count") as usize;
    let ana = list["data"][n - 1].clone();
    let (id, code) = (ana["id_attendees"].clone(), ana["checkin_code"].clone());
    for (path, body) in [
        (
            "/api/v1/checkin/attendees",
            json!([{"checkin_code": code.to_string(), "checkin": 1, "checkin_date": "2026-09-15T08:00:00"}]),
        ),
        (
            "/api/v1/checkin/sessions",
            json!([{"id_attendees": id, "id_session": session, "checkin": 1, "checkin_date": "2026-09-15T09:00:00"}]),
        ),
    ] {
        assert_eq!(post(&app, path, &body).await.status, 200);
    }
    // Bea registers after her: the next id and code.
    let made = post(
        &app,
        "/api/v1/attendees/create",
        &person("Bea Local", "bea.local@exemplo.com", price),
    )
    .await;
    assert_eq!(made.status, 200);
    let bea = attendees(&app).await["data"][n].clone();
    assert_eq!(bea["email"], "bea.local@exemplo.com");

    // The live site gave Ana's id and code to Bruno, and a new snapshot brings him.
    let path = data.path().join("demo/attendees.json");
    let mut file: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("JSON");
    let mut bruno = file["data"][0].clone();
    bruno["id_attendees"] = id.clone();
    bruno["checkin_code"] = code.clone();
    bruno["name"] = json!("Bruno Remoto");
    bruno["email"] = json!("bruno.remoto@exemplo.com");
    file["data"].as_array_mut().expect("data").push(bruno);
    file["count"] = json!(n);
    std::fs::write(&path, serde_json::to_vec(&file).expect("JSON")).expect("write");
    app.app.load().expect("reloads");

    let after = attendees(&app).await;
    let by_email = |email: &str| {
        after["data"]
            .as_array()
            .expect("data")
            .iter()
            .find(|a| a["email"] == email)
            .cloned()
            .unwrap_or_else(|| panic!("{email} missing"))
    };
    let bruno = by_email("bruno.remoto@exemplo.com");
    let ana = by_email("ana.local@exemplo.com");
    assert!(
        bruno.get("checkin").is_none(),
        "Bruno got Ana's check-in: {bruno}"
    );
    assert_eq!(ana["checkin"], 1, "{ana}");
    assert_eq!(ana["checkin_sessions"][0]["id_session"], session);
    assert_ne!(ana["id_attendees"], id, "Ana has a new id");
    // Ana's new ones are not Bea's: Bea keeps hers (her badge has them).
    let bea_now = by_email("bea.local@exemplo.com");
    assert_eq!(
        (&bea_now["id_attendees"], &bea_now["checkin_code"]),
        (&bea["id_attendees"], &bea["checkin_code"])
    );
    assert_ne!(ana["checkin_code"], bea["checkin_code"]);

    // Bruno checks in by his code and id, which the list shows as his: the check-ins are his,
    // not Ana's (whose badge, printed before, carries the same code).
    for (path, body) in [
        (
            "/api/v1/checkin/attendees",
            json!([{"checkin_code": code.to_string(), "checkin": 1, "checkin_date": "2026-09-15T10:00:00"}]),
        ),
        (
            "/api/v1/checkin/sessions",
            json!([{"id_attendees": id, "id_session": session, "checkin": 1, "checkin_date": "2026-09-15T10:30:00"}]),
        ),
        (
            "/api/v1/checkin/attendees",
            json!([{"checkin_code": bea["checkin_code"].to_string(), "checkin": 1, "checkin_date": "2026-09-15T11:00:00"}]),
        ),
    ] {
        assert_eq!(post(&app, path, &body).await.status, 200);
    }
    let three = |list: &Value| {
        let find = |email: &str| {
            list["data"]
                .as_array()
                .and_then(|people| people.iter().find(|a| a["email"] == email))
                .cloned()
                .unwrap_or_else(|| panic!("{email} missing"))
        };
        (
            find("bruno.remoto@exemplo.com"),
            find("ana.local@exemplo.com"),
            find("bea.local@exemplo.com"),
        )
    };
    let now = attendees(&app).await;
    let (bruno, ana, bea) = three(&now);
    assert_eq!(bea["checkin_date"], "2026-09-15T11:00:00", "{bea}");
    assert_eq!(bruno["checkin_date"], "2026-09-15T10:00:00", "{bruno}");
    assert_eq!(
        bruno["checkin_sessions"][0]["checkin_date"],
        "2026-09-15T10:30:00"
    );
    assert_eq!(ana["checkin_date"], "2026-09-15T08:00:00", "{ana}");
    assert_eq!(
        ana["checkin_sessions"][0]["checkin_date"],
        "2026-09-15T09:00:00"
    );

    // A restart replays the log over the same files: each check-in stays with its person.
    app.shutdown().await;
    let again = app_with_state(data.path(), state.path()).await;
    assert_eq!(three(&attendees(&again).await), three(&now));
}

/// A log written before check-ins named their person (no `person`): replayed as it was
/// acknowledged then, a code going to the registration made here that had it.
#[tokio::test]
async fn check_ins_logged_without_a_person_replay_as_they_were_acknowledged() {
    let data = TempData::new();
    data.with_demo("demo");
    let file: Value = serde_json::from_slice(
        &std::fs::read(data.path().join("demo/attendees.json")).expect("read"),
    )
    .expect("JSON");
    let first = file["data"][0].clone();
    let (id, code) = (
        first["id_attendees"].as_i64().expect("id"),
        first["checkin_code"].as_i64().expect("code"),
    );
    let state = tempfile::tempdir().expect("tempdir");
    // Ana was registered here with the first attendee's id and code (the files did not have
    // them then), and checked in by them.
    let lines = [
        json!({"seq": 1, "at": "2026-09-15T08:00:00Z", "bundle": "demo", "writes": [
            {"write": "registration", "attendee": {"id_attendees": id, "checkin_code": code,
             "name": "Ana Local", "email": "ana.local@exemplo.com"}}]}),
        json!({"seq": 2, "at": "2026-09-15T08:01:00Z", "bundle": "demo", "writes": [
            {"write": "checkin", "checkin_code": code.to_string(), "checkin": 1,
             "checkin_date": "2026-09-15T08:01:00"}]}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(state.path().join("writes.jsonl"), text).expect("write the log");
    let app = app_with_state(data.path(), state.path()).await;
    let list = attendees(&app).await;
    let people = list["data"].as_array().expect("data");
    let ana = people
        .iter()
        .find(|a| a["email"] == "ana.local@exemplo.com")
        .expect("Ana");
    assert_eq!(ana["checkin"], 1, "{ana}");
    assert_ne!(ana["checkin_code"], json!(code), "Ana has a new code");
    let listed = people
        .iter()
        .find(|a| a["id_attendees"] == json!(id))
        .expect("the first attendee");
    assert!(listed.get("checkin").is_none(), "{listed}");
}
