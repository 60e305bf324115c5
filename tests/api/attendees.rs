//! `GET /api/v1/attendees`: the participants, from the bundle's `attendees` file, in the shape
//! and field order the platform's documentation shows (tests/fixtures/apidocs).

use crate::helpers::{spawn_app, TempData, DEMO_TOKEN};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/apidocs");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{name}")).expect("a fixture")
}

/// The documentation's example, saved as a bundle file, is served byte for byte (compact), with
/// and without the trailing slash clients use, typos (`bagde_name`) and the record without a
/// `checkin_code` included.
#[tokio::test]
async fn the_documented_example_is_served_as_documented() {
    let example = fixture("pessoas-attendees.json");
    let data = TempData::new();
    data.with_demo("demo")
        .write("demo/attendees.json", &example);
    let app = spawn_app(data.path()).await;
    let compact = serde_json::from_str::<serde_json::Value>(&example)
        .expect("the fixture is JSON")
        .to_string();

    for path in [
        "/api/v1/attendees",
        "/api/v1/attendees/",
        "/API/V1/Attendees",
    ] {
        let res = app.get(path, DEMO_TOKEN).await;

        assert_eq!(res.status, 200, "{path}: {}", res.text());
        assert_eq!(res.text(), compact, "{path}");
    }
    let body = app.get("/api/v1/attendees", DEMO_TOKEN).await.json();
    assert_eq!(
        body["data"][2].get("checkin_code"),
        None,
        "absent stays absent"
    );
    assert_eq!(body["count"], 3);
}

/// A bundle without the file answers the empty list (200), and a wrong token the usual 401.
#[tokio::test]
async fn a_bundle_without_attendees_answers_an_empty_list() {
    let data = TempData::new();
    data.with_demo("demo");
    std::fs::remove_file(data.path().join("demo/attendees.json")).expect("remove");
    let app = spawn_app(data.path()).await;

    let res = app.get("/api/v1/attendees", DEMO_TOKEN).await;
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(res.text(), r#"{"data":[],"count":0}"#);

    app.get("/api/v1/attendees", "wrong-token")
        .await
        .assert_error(401, "invalid_token");
}

/// A broken attendees file is reported with its place, and the bundle is not served.
#[tokio::test]
async fn a_bad_date_or_a_duplicate_id_is_an_error_with_its_path() {
    let record = |id: u32, code: u32, date: &str| {
        format!(
            r#"{{"id_attendees": {id}, "id_event": 1, "checkin_code": {code}, "name": "A",
                "bagde_name": "A", "email": "a@x", "gender": "F", "photo": " ", "document": "1",
                "confirmed": true, "registration_category": "", "registration_date": "{date}",
                "registration_hour": ""}}"#
        )
    };
    let cases = [
        (
            format!(r#"{{"data": [{}]}}"#, record(1, 5, "2026-01-01")),
            "attendees.json: data[0].registration_date: \"2026-01-01\" is not a DD/MM/YYYY date",
        ),
        (
            format!(
                r#"{{"data": [{}, {}]}}"#,
                record(1, 5, ""),
                record(1, 6, "01/02/2026")
            ),
            "attendees.json: data[1].id_attendees: id_attendees 1 is also that of data[0]",
        ),
    ];
    for (file, expected) in cases {
        let data = TempData::new();
        data.with_demo("demo").write("demo/attendees.json", &file);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_eventbox"))
            .arg("check")
            .arg(data.path())
            .output()
            .expect("run eventbox check");
        let text = String::from_utf8_lossy(&out.stdout);

        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(text.contains(expected), "{expected} not in: {text}");
    }
}
