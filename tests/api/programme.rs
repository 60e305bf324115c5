//! The programme and the other reads of issue #12 over real HTTP: the activities
//! (`/session`, one by id), the speakers, the schedule by day (`/session/getschedule`), the
//! certificates and one participant by id (`/attendees/{id}`), paging, and what a bundle without
//! their file answers. Shapes and field order are compared with the platform's documented
//! examples (tests/fixtures/apidocs).

use chrono::{Datelike, NaiveDate, Weekday};
use eventbox::testing::{Bundle, TestServer};
use serde_json::Value;

use crate::fixtures;
use crate::helpers::{answer, demo_data, spawn_app, Answer, TestApp, DEMO_TOKEN};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/apidocs");

fn fixture(name: &str) -> Value {
    let text = std::fs::read_to_string(format!("{FIXTURES}/{name}")).expect("a fixture");
    serde_json::from_str(&text).expect("the fixture is JSON")
}

/// A demo file as compact JSON: what its endpoint answers, byte for byte.
fn demo_file(name: &str) -> Value {
    let text = std::fs::read_to_string(demo_data().join("demo").join(name)).expect("demo file");
    serde_json::from_str(&text).expect("demo file is JSON")
}

/// Every member name of `v` in order, as a path (`data[].speakers[].name`); an array stands for
/// its first item. Compares shapes and field order, not values.
fn shape(v: &Value) -> Vec<String> {
    fn walk(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    let here = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    out.push(here.clone());
                    walk(v, &here, out);
                }
            }
            Value::Array(items) => {
                if let Some(first) = items.first() {
                    walk(first, &format!("{at}[]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, "", &mut out);
    out
}

/// The variants of a path a client may send: as documented, with a trailing slash, in other
/// ASCII case.
fn spellings(path: &str) -> [String; 3] {
    [
        path.to_string(),
        format!("{path}/"),
        path.to_ascii_uppercase().replace("/API/V1", "/api/V1"),
    ]
}

async fn json_200(app: &TestApp, path: &str) -> Answer {
    let res = app.get(path, DEMO_TOKEN).await;
    assert_eq!(res.status, 200, "{path}: {}", res.text());
    assert_eq!(
        res.header("content-type"),
        Some("application/json; charset=utf-8"),
        "{path}"
    );
    res
}

/// The record of `list` (a `{"data": [...]}` body) whose `key` is `id`, in the list's envelope.
fn one_of(list: &Value, key: &str, id: i64) -> Value {
    let record = list["data"]
        .as_array()
        .expect("data")
        .iter()
        .find(|r| r[key] == id)
        .unwrap_or_else(|| panic!("no {key} {id}"))
        .clone();
    let mut out = serde_json::json!({ "data": [record] });
    if list.get("count").is_some() {
        out["count"] = 1.into();
    }
    out
}

#[tokio::test]
async fn activities_and_speakers_list_and_answer_one_by_id() {
    let app = spawn_app(&demo_data()).await;
    let not_found = fixture("programacao-session-404.json").to_string();
    for (path, file, key, id) in [
        ("/api/v1/session", "session.json", "id_session", 9102),
        ("/api/v1/speaker", "speaker.json", "id_speaker", 7102),
    ] {
        let whole = demo_file(file);
        assert!(whole.get("count").is_none(), "{file} has no count");
        for spelled in spellings(path) {
            let res = json_200(&app, &spelled).await;
            assert_eq!(res.text(), whole.to_string(), "{spelled}");
        }
        let one = one_of(&whole, key, id);
        for spelled in spellings(&format!("{path}/{id}")) {
            let res = json_200(&app, &spelled).await;
            assert_eq!(res.text(), one.to_string(), "{spelled}");
        }
        // An id no record has, and one that is not a number: the documented 404 body.
        for missing in ["1", "abc", "9102x", "-0"] {
            let res = app.get(&format!("{path}/{missing}"), DEMO_TOKEN).await;
            assert_eq!(res.status, 404, "{path}/{missing}: {}", res.text());
            assert_eq!(res.text(), not_found, "{path}/{missing}");
            assert_eq!(
                res.header("content-type"),
                Some("application/json; charset=utf-8")
            );
        }
    }
}

#[tokio::test]
async fn answers_have_the_documented_shapes_and_field_order() {
    let app = spawn_app(&demo_data()).await;
    for (path, example) in [
        ("/api/v1/session", "programacao-session.json"),
        ("/api/v1/session/9101", "programacao-session.json"),
        ("/api/v1/speaker", "programacao-speaker.json"),
        ("/api/v1/speaker/7101", "programacao-speaker.json"),
        (
            "/api/v1/session/getschedule",
            "programacao-getschedule.json",
        ),
        ("/api/v1/certificates", "certificados-certificates.json"),
        ("/api/v1/attendees", "pessoas-attendees.json"),
        ("/api/v1/attendees/1204312", "pessoas-attendees.json"),
    ] {
        let served = json_200(&app, path).await.json();
        assert_eq!(
            shape(&served),
            shape(&fixture(example)),
            "{path} vs {example}"
        );
    }
    // The documented example files themselves, served as a bundle's files: byte for byte.
    let server = TestServer::from_bundles([Bundle::new("docs")
        .token("docs-token")
        .json(
            "event",
            serde_json::from_str(fixtures::EVENT_JSON).expect("JSON"),
        )
        .json("session", fixture("programacao-session.json"))
        .json("speaker", fixture("programacao-speaker.json"))
        .json("certificates", fixture("certificados-certificates.json"))])
    .start()
    .expect("the documented examples load");
    for (path, example) in [
        ("/api/v1/session", "programacao-session.json"),
        ("/api/v1/speaker", "programacao-speaker.json"),
        ("/api/v1/certificates", "certificados-certificates.json"),
    ] {
        let res = get(&server, path, "docs-token").await;
        assert_eq!(res.status, 200, "{path}: {}", res.text());
        assert_eq!(res.text(), fixture(example).to_string(), "{path}");
    }
    let schedule = get(&server, "/api/v1/session/getschedule", "docs-token").await;
    assert_eq!(schedule.status, 200, "{}", schedule.text());
    let documented = fixture("programacao-getschedule.json");
    assert_eq!(
        shape(&schedule.json()["data"][0]),
        shape(&documented["data"][0]),
        "a day of the schedule derived from the documented activity"
    );
}

async fn get(server: &TestServer, path: &str, token: &str) -> Answer {
    answer(
        crate::helpers::client()
            .get(server.url(path))
            .header("Authorization-Token", token),
    )
    .await
}

fn weekday_pt(d: Weekday) -> &'static str {
    [
        "segunda-feira",
        "terça-feira",
        "quarta-feira",
        "quinta-feira",
        "sexta-feira",
        "sábado",
        "domingo",
    ][d.num_days_from_monday() as usize]
}

/// `YYYY-MM-DDTHH:MM:SS.fffffff`: seven fractional digits.
fn seven_digits(s: &str) -> bool {
    let b = s.as_bytes();
    s.len() == 27
        && b[10] == b'T'
        && b[19] == b'.'
        && b[20..].iter().all(u8::is_ascii_digit)
        && NaiveDate::parse_from_str(&s[..10], "%Y-%m-%d").is_ok()
}

#[tokio::test]
async fn the_schedule_lists_days_in_order_with_a_two_day_activity_under_both() {
    let app = spawn_app(&demo_data()).await;
    let activities = demo_file("session.json");
    for spelled in spellings("/api/v1/session/getschedule") {
        json_200(&app, &spelled).await;
    }
    let schedule = json_200(&app, "/api/v1/session/getschedule").await.json();
    let days = schedule["data"].as_array().expect("days");
    assert_eq!(schedule["count"], days.len());
    // One day per date any activity is held on.
    let mut dates: Vec<String> = activities["data"]
        .as_array()
        .expect("activities")
        .iter()
        .flat_map(|a| a["times"].as_array().expect("times").clone())
        .map(|t| t["date"].as_str().expect("a date")[..10].to_string())
        .collect();
    dates.sort();
    dates.dedup();
    assert_eq!(days.len(), dates.len(), "{schedule}");

    let mut previous: Option<NaiveDate> = None;
    for (day, date) in days.iter().zip(&dates) {
        let d = NaiveDate::parse_from_str(date, "%Y-%m-%d").expect("a date");
        assert!(previous < Some(d), "days in date order");
        previous = Some(d);
        assert_eq!(day["id_schedule"], d.format("%d%m%Y").to_string());
        assert_eq!(day["date"], format!("{date}T00:00:00.0000000"));
        assert_eq!(day["day"], weekday_pt(d.weekday()), "{date}");
        let sessions = day["sessions"].as_array().expect("sessions");
        let starts: Vec<&str> = sessions
            .iter()
            .map(|s| s["start_time"].as_str().expect("start"))
            .collect();
        assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");
        for s in sessions {
            let utc = s["date_UTC"].as_str().expect("date_UTC");
            assert!(seven_digits(utc), "{utc}");
            assert_eq!(&utc[..10], date.as_str());
            assert_eq!(s["date"], d.format("%d/%m/%Y").to_string());
            assert_eq!(s["title_schedule"], "Atividades");
        }
    }
    // The minicourse held on two days is under both, with both dates in all_dates.
    let held: Vec<&Value> = days
        .iter()
        .filter(|d| {
            d["sessions"]
                .as_array()
                .is_some_and(|s| s.iter().any(|e| e["id_session"] == 9103))
        })
        .collect();
    assert_eq!(held.len(), 2, "{schedule}");
    assert_eq!(held[0]["id_schedule"], "16092026");
    assert_eq!(held[1]["id_schedule"], "17092026");
    let entry = held[1]["sessions"]
        .as_array()
        .and_then(|s| s.iter().find(|e| e["id_session"] == 9103))
        .expect("the entry");
    assert_eq!(entry["all_dates"].as_array().map(Vec::len), Some(2));
    assert_eq!(entry["all_dates"][0]["day"], "quarta-feira");
}

#[tokio::test]
async fn certificates_are_served_in_their_nested_envelope() {
    let app = spawn_app(&demo_data()).await;
    let file = demo_file("certificates.json");
    for spelled in spellings("/api/v1/certificates") {
        let res = json_200(&app, &spelled).await;
        assert_eq!(res.text(), file.to_string(), "{spelled}");
    }
    let body = file;
    assert_eq!(body["count"], 1);
    assert_eq!(
        body["certificates"]["count"],
        body["certificates"]["data"].as_array().map_or(0, Vec::len)
    );
}

#[tokio::test]
async fn one_attendee_by_id_or_the_documented_empty_404() {
    let app = spawn_app(&demo_data()).await;
    let all = demo_file("attendees.json");
    let first = all["data"][0]["id_attendees"].as_i64().expect("an id");
    let one = one_of(&all, "id_attendees", first);
    assert_eq!(one["count"], 1);
    for spelled in spellings(&format!("/api/v1/attendees/{first}")) {
        let res = json_200(&app, &spelled).await;
        assert_eq!(res.text(), one.to_string(), "{spelled}");
    }
    let documented = fixture("pessoas-attendees-404.json").to_string();
    assert_eq!(documented, r#"{"data":[],"count":0}"#);
    for missing in ["1", "abc", "1204312.0"] {
        let res = app
            .get(&format!("/api/v1/attendees/{missing}"), DEMO_TOKEN)
            .await;
        assert_eq!(res.status, 404, "{missing}: {}", res.text());
        assert_eq!(res.text(), documented, "{missing}");
    }
}

#[tokio::test]
async fn lists_page_with_page_and_per_page() {
    let app = spawn_app(&demo_data()).await;
    let attendees = demo_file("attendees.json");
    let records = attendees["data"].as_array().expect("data").clone();
    let n = records.len();
    assert!(n > 5, "the demo has {n} attendees");
    let page = |from: usize, to: usize| {
        let data: Vec<Value> = records[from.min(n)..to.min(n)].to_vec();
        let count = data.len();
        serde_json::json!({"data": data, "count": count}).to_string()
    };
    for (query, expected) in [
        ("page=1&per_page=5", page(0, 5)),
        ("page=2&per_page=5", page(5, 10)),
        ("PAGE=2&Per_Page=5", page(5, 10)),
        (
            &format!("page={}&per_page=5", n.div_ceil(5)) as &str,
            page((n.div_ceil(5) - 1) * 5, n),
        ),
        (
            &format!("page={}&per_page=5", n.div_ceil(5) + 1),
            page(n, n),
        ),
        ("page=1", page(0, 100)),
        ("page=2", page(100, 200)),
        ("per_page=2", page(0, 2)),
        ("page=1&per_page=1000000", page(0, n)),
        ("other=1", attendees.to_string()),
        ("page=2&per_page=2&page=2", page(2, 4)),
    ] {
        for path in ["/api/v1/attendees", "/api/v1/attendees/"] {
            let res = json_200(&app, &format!("{path}?{query}")).await;
            assert_eq!(res.text(), expected, "{path}?{query}");
        }
    }
    for bad in [
        "page=0",
        "page=-1",
        "per_page=x",
        "page=",
        "page=1.5",
        "per_page=0",
        "page=1&page=2",
    ] {
        for path in ["/api/v1/attendees", "/api/v1/session", "/api/v1/speaker"] {
            app.get(&format!("{path}?{bad}"), DEMO_TOKEN)
                .await
                .assert_error(400, "invalid_paging");
        }
    }
    // The activities and the speakers page in their own envelope, without a count.
    for (path, file) in [
        ("/api/v1/session", "session.json"),
        ("/api/v1/speaker", "speaker.json"),
    ] {
        let all = demo_file(file);
        let second = all["data"][1].clone();
        let res = json_200(&app, &format!("{path}?page=2&per_page=1")).await;
        assert_eq!(
            res.text(),
            serde_json::json!({"data": [second]}).to_string()
        );
        let past = json_200(&app, &format!("{path}?page=50&per_page=10")).await;
        assert_eq!(past.text(), r#"{"data":[]}"#);
    }
}

#[tokio::test]
async fn a_wrong_or_missing_token_is_refused_on_every_new_read() {
    let app = spawn_app(&demo_data()).await;
    for path in [
        "/api/v1/session",
        "/api/v1/session/9101",
        "/api/v1/session/getschedule",
        "/api/v1/speaker",
        "/api/v1/speaker/7101",
        "/api/v1/certificates",
        "/api/v1/attendees/1204312",
        "/api/v1/attendees?page=1",
    ] {
        app.get(path, "wrong-token")
            .await
            .assert_error(401, "invalid_token");
        app.send(reqwest::Method::GET, path, None, None)
            .await
            .assert_error(401, "missing_token");
    }
}

#[tokio::test]
async fn a_bundle_without_the_files_answers_as_an_event_without_such_data() {
    let server = TestServer::from_bundles([Bundle::new("bare").token("bare-token").json(
        "event",
        serde_json::from_str(fixtures::EVENT_JSON).expect("JSON"),
    )])
    .start()
    .expect("starts");
    let documented_404 = fixture("programacao-session-404.json").to_string();
    for (path, status, body) in [
        ("/api/v1/session", 200, r#"{"data":[]}"#),
        ("/api/v1/session/", 200, r#"{"data":[]}"#),
        ("/api/v1/session?page=1&per_page=10", 200, r#"{"data":[]}"#),
        ("/api/v1/speaker", 200, r#"{"data":[]}"#),
        (
            "/api/v1/session/getschedule",
            200,
            r#"{"data":[],"count":0}"#,
        ),
        (
            "/api/v1/certificates",
            200,
            r#"{"certificates":{"data":[],"count":0},"count":1}"#,
        ),
        ("/api/v1/attendees", 200, r#"{"data":[],"count":0}"#),
        ("/api/v1/attendees/1", 404, r#"{"data":[],"count":0}"#),
        ("/api/v1/session/1", 404, documented_404.as_str()),
        ("/api/v1/speaker/1", 404, documented_404.as_str()),
    ] {
        let res = get(&server, path, "bare-token").await;
        assert_eq!(res.status, status, "{path}: {}", res.text());
        assert_eq!(res.text(), body, "{path}");
    }
    get(&server, "/api/v1/session", "demo-token")
        .await
        .assert_error(401, "invalid_token");
}
