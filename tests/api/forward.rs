//! Kiosk mode's write forwarding, with two eventbox servers in one test: writes made at the
//! kiosk reach the source in order with their bodies, wait while the source is away, and one the
//! source refuses is kept aside (`/_queue`) without blocking the rest.

use std::time::Duration;

use eventbox::app::App;
use eventbox::config::{ServeOptions, WatchKind};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::helpers::{serve_app, serve_app_on, Answer, TempData, TestApp, DEMO_TOKEN};
use crate::kiosk::{pull_into, until, without_source};
use crate::writes::{a_price, person};

async fn post(app: &TestApp, path: &str, body: &Value) -> Answer {
    let bytes = serde_json::to_vec(body).expect("JSON");
    app.send(
        Method::POST,
        path,
        Some(DEMO_TOKEN),
        Some(("application/json", &bytes)),
    )
    .await
}

async fn emails(app: &TestApp) -> Vec<String> {
    app.get("/api/v1/attendees", DEMO_TOKEN).await.json()["data"]
        .as_array()
        .map(|people| {
            people
                .iter()
                .filter_map(|p| p["email"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The source: an eventbox on the demo whose `App` outlives its server, so that, stopped, it
/// comes back at the same address with what was written to it.
pub(crate) struct Source {
    app: App,
    addr: std::net::SocketAddr,
    _data: TempData,
}

impl Source {
    pub(crate) async fn start() -> (Source, TestApp) {
        Source::start_with(false).await
    }

    /// The same, refusing every write with `read_only`.
    pub(crate) async fn start_with(read_only: bool) -> (Source, TestApp) {
        let data = TempData::new();
        data.with_demo("demo");
        let app = App::with_options(&ServeOptions {
            read_only,
            // What the desk asked of it, for the tests that wait on that.
            journal: 256,
            ..ServeOptions::for_folder(data.path())
        })
        .expect("options serve takes");
        app.load().expect("the source loads");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = serve_app_on(listener, app.clone());
        (
            Source {
                app,
                addr,
                _data: data,
            },
            server,
        )
    }

    /// Opens its bundle with `token` alone from now on (a token changed at the source).
    fn with_token(&self, token: &str) {
        self._data
            .write("demo/bundle.toml", format!("tokens = [\"{token}\"]\n"));
        self.app.load().expect("the source reloads");
    }

    /// Serves it again at its address.
    pub(crate) async fn again(&self) -> TestApp {
        let listener = TcpListener::bind(self.addr)
            .await
            .expect("the same address again");
        serve_app_on(listener, self.app.clone())
    }
}

/// A desk: a kiosk on a copy pulled from `source`, its writes kept in a state folder and
/// forwarded, refreshing as `configure` says.
pub(crate) struct Desk {
    pub(crate) server: TestApp,
    _forwarder: eventbox::kiosk::Forwarder,
    _refresher: Option<eventbox::kiosk::Refresher>,
    data: TempData,
    _state: tempfile::TempDir,
}

impl Desk {
    pub(crate) async fn of(source: &TestApp, configure: impl FnOnce(&mut ServeOptions)) -> Desk {
        Desk::of_url(&source.base, configure).await
    }

    /// A desk on a copy pulled from `base`, which its `[source]` names from then on.
    pub(crate) async fn of_url(base: &str, configure: impl FnOnce(&mut ServeOptions)) -> Desk {
        let data = TempData::new();
        pull_into(base, &data.path().join("demo")).await;
        let state = tempfile::tempdir().expect("tempdir");
        let mut options = ServeOptions {
            watch: WatchKind::Off,
            state: Some(state.path().to_path_buf()),
            ..ServeOptions::for_folder(data.path())
        };
        configure(&mut options);
        let app = App::with_options(&options).expect("options serve takes");
        app.open_state().expect("the state folder opens");
        app.load().expect("the kiosk loads");
        let refresher = app.refresh_as_configured();
        let forwarder = app.forward_as_configured().expect("forwarding is on");
        Desk {
            server: serve_app(app).await,
            _forwarder: forwarder,
            _refresher: refresher,
            data,
            _state: state,
        }
    }

    /// A desk whose refresh waits an hour: the source's own writes reach it only when
    /// [`Desk::pull_again`] says.
    pub(crate) async fn slow(source: &TestApp) -> Desk {
        Desk::of(source, |o| {
            o.refresh_every = Some(Duration::from_secs(3600))
        })
        .await
    }

    /// Takes `source`'s files now, as a refresh does: pulled over the bundle, then reloaded.
    pub(crate) async fn pull_again(&self, source: &TestApp) {
        pull_into(&source.base, &self.data.path().join("demo")).await;
        self.server.app.load().expect("the kiosk reloads");
    }
}

/// Registers someone at `app` (200 asserted).
async fn register(app: &TestApp, name: &str, email: &str) {
    let made = post(
        app,
        "/api/v1/attendees/create",
        &person(name, email, a_price(app).await),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
}

/// Checks someone in at `app` by the code `app` lists them with (200 asserted).
async fn check_in(app: &TestApp, email: &str, date: &str) {
    let code = by_email(app, email).await.expect("listed")["checkin_code"].to_string();
    let body = json!([{"checkin_code": code, "checkin": 1, "checkin_date": date}]);
    let done = post(app, "/api/v1/checkin/attendees", &body).await;
    assert_eq!(done.status, 200, "{}", done.text());
}

/// The kiosk's queue once nothing is pending any more (an empty queue leaves the bundle out).
async fn settled(kiosk: &TestApp) -> Value {
    until(
        Duration::from_secs(15),
        "the kiosk's queue to settle",
        || async {
            let q = kiosk.send(Method::GET, "/_queue", None, None).await.json();
            let pending = &q["bundles"]["demo"]["pending"];
            (pending.is_null() || *pending == 0).then_some(q)
        },
    )
    .await
}

/// Hugo's record at the source once the desk's queue is empty, asserting his check-in was
/// undone there last.
async fn undone_at_source(kiosk: &TestApp, source: &TestApp) -> Value {
    until(
        Duration::from_secs(15),
        "the desk's queue to empty",
        || async {
            let q = kiosk.send(Method::GET, "/_queue", None, None).await.json();
            q["bundles"].get("demo").is_none().then_some(())
        },
    )
    .await;
    let there = by_email(source, "hugo.site@exemplo.com")
        .await
        .expect("Hugo there");
    assert_eq!(there["checkin"], 0, "the undo went last: {there}");
    there
}

/// Someone's record in `app`'s attendees, by e-mail.
async fn by_email(app: &TestApp, email: &str) -> Option<Value> {
    app.get("/api/v1/attendees", DEMO_TOKEN).await.json()["data"]
        .as_array()?
        .iter()
        .find(|a| a["email"] == email)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_made_at_the_kiosk_reach_the_source_wait_through_its_outage_and_a_refused_one_is_kept_aside(
) {
    let (source_at, source) = Source::start().await;
    // The kiosk's refresh is slow here, so the source's own writes do not reach it.
    let desk = Desk::slow(&source).await;
    let kiosk = &desk.server;
    let price = a_price(kiosk).await;
    let first = kiosk.get("/api/v1/attendees", DEMO_TOKEN).await.json()["data"][0].clone();

    // Online: a registration made at the kiosk reaches the source.
    assert_eq!(
        post(
            kiosk,
            "/api/v1/attendees/create",
            &person("Ana Site", "ana.site@exemplo.com", price)
        )
        .await
        .status,
        200
    );
    until(
        Duration::from_secs(10),
        "the registration at the source",
        || async {
            emails(&source)
                .await
                .contains(&"ana.site@exemplo.com".to_string())
                .then_some(())
        },
    )
    .await;

    // The source refuses one (Bia registered there directly meanwhile): kept aside, and the
    // check-in after it still goes.
    assert_eq!(
        post(
            &source,
            "/api/v1/attendees/create",
            &person("Bia", "bia@exemplo.com", price)
        )
        .await
        .status,
        200
    );
    assert_eq!(
        post(
            kiosk,
            "/api/v1/attendees/create",
            &person("Bia Site", "bia@exemplo.com", price)
        )
        .await
        .status,
        200,
        "the kiosk does not know Bia yet"
    );
    let checkin = json!([{"checkin_code": first["checkin_code"].to_string(), "checkin": 1,
                          "checkin_date": "2026-09-15T08:00:00"}]);
    assert_eq!(
        post(kiosk, "/api/v1/checkin/attendees", &checkin)
            .await
            .status,
        200
    );
    until(
        Duration::from_secs(10),
        "the check-in at the source",
        || async {
            let people = source.get("/api/v1/attendees", DEMO_TOKEN).await.json();
            (people["data"][0]["checkin"] == 1).then_some(())
        },
    )
    .await;
    let queue = until(
        Duration::from_secs(10),
        "the kiosk to record the outcomes",
        || async {
            let q = kiosk.send(Method::GET, "/_queue", None, None).await.json();
            let pending = &q["bundles"]["demo"]["pending"];
            (pending.is_null() || *pending == 0).then_some(q)
        },
    )
    .await;
    let rejected = &queue["bundles"]["demo"]["rejected"];
    assert_eq!(rejected.as_array().map(Vec::len), Some(1), "{queue}");
    assert_eq!(rejected[0]["status"], 400);
    assert_eq!(rejected[0]["body"]["email"], "bia@exemplo.com");
    assert!(rejected[0]["answer"]
        .as_str()
        .unwrap_or("")
        .contains("already_registered"));
    assert_eq!(queue["bundles"]["demo"]["pending"], 0);
    // /status shows the same queue beside the bundle.
    let status = kiosk.send(Method::GET, "/status", None, None).await.json();
    let demo = status["bundles"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["name"] == "demo"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(demo["queue"], queue["bundles"]["demo"], "{status}");
    let bias = emails(&source)
        .await
        .iter()
        .filter(|e| *e == "bia@exemplo.com")
        .count();
    assert_eq!(bias, 1);

    // The source goes away: writes are still acknowledged, and wait.
    source.shutdown().await;
    let undo = json!([{"checkin_code": first["checkin_code"].to_string(), "checkin": 0,
                       "checkin_date": "2026-09-15T09:00:00"}]);
    assert_eq!(
        post(kiosk, "/api/v1/checkin/attendees", &undo).await.status,
        200
    );
    assert_eq!(
        post(
            kiosk,
            "/api/v1/attendees/create",
            &person("Caio Site", "caio.site@exemplo.com", price)
        )
        .await
        .status,
        200
    );
    let waiting = kiosk.send(Method::GET, "/_queue", None, None).await.json();
    assert_eq!(waiting["bundles"]["demo"]["pending"], 2, "{waiting}");

    // It comes back at the same address: they arrive, in order.
    let source = source_at.again().await;
    until(
        Duration::from_secs(15),
        "the waiting writes at the source",
        || async {
            let people = source.get("/api/v1/attendees", DEMO_TOKEN).await.json();
            let caio = people["data"]
                .as_array()
                .is_some_and(|p| p.iter().any(|a| a["email"] == "caio.site@exemplo.com"));
            (caio && people["data"][0]["checkin"] == 0).then_some(())
        },
    )
    .await;
    // The kiosk records each outcome just after the source answered: the queue empties then.
    until(
        Duration::from_secs(10),
        "the kiosk's queue to empty",
        || async {
            let q = kiosk.send(Method::GET, "/_queue", None, None).await.json();
            (q["bundles"]["demo"]["pending"] == 0).then_some(())
        },
    )
    .await;

    // Someone registered at the desk and checked in there by the desk's code (and at an
    // activity by the desk's id): the source gets the check-ins under its own code and id,
    // which differ (Eva, registered at the source meanwhile, took the next ones there).
    assert_eq!(
        post(
            &source,
            "/api/v1/attendees/create",
            &person("Eva", "eva@exemplo.com", price)
        )
        .await
        .status,
        200
    );
    assert_eq!(
        post(
            kiosk,
            "/api/v1/attendees/create",
            &person("Dora Site", "dora.site@exemplo.com", price)
        )
        .await
        .status,
        200
    );
    let here = kiosk.get("/api/v1/attendees", DEMO_TOKEN).await.json();
    let dora = here["data"]
        .as_array()
        .and_then(|p| p.iter().find(|a| a["email"] == "dora.site@exemplo.com"))
        .cloned()
        .expect("Dora at the desk");
    let session =
        kiosk.get("/api/v1/session", DEMO_TOKEN).await.json()["data"][0]["id_session"].clone();
    let checkin = json!([{"checkin_code": dora["checkin_code"].to_string(), "checkin": 1,
                          "checkin_date": "2026-09-15T10:00:00"}]);
    assert_eq!(
        post(kiosk, "/api/v1/checkin/attendees", &checkin)
            .await
            .status,
        200
    );
    let at_activity = json!([{"id_attendees": dora["id_attendees"], "id_session": session,
                              "checkin": 1, "checkin_date": "2026-09-15T10:05:00"}]);
    assert_eq!(
        post(kiosk, "/api/v1/checkin/sessions", &at_activity)
            .await
            .status,
        200
    );
    until(
        Duration::from_secs(15),
        "Dora checked in at the source",
        || async {
            let people = source.get("/api/v1/attendees", DEMO_TOKEN).await.json();
            let there = people["data"]
                .as_array()
                .and_then(|p| p.iter().find(|a| a["email"] == "dora.site@exemplo.com"))
                .cloned()?;
            (there["checkin"] == 1 && there["checkin_sessions"][0]["id_session"] == session)
                .then_some(())
        },
    )
    .await;
    let there = source.get("/api/v1/attendees", DEMO_TOKEN).await.json()["data"]
        .as_array()
        .and_then(|p| p.iter().find(|a| a["email"] == "dora.site@exemplo.com"))
        .cloned()
        .expect("Dora at the source");
    assert_ne!(
        there["checkin_code"], dora["checkin_code"],
        "the codes differ"
    );
    assert_ne!(
        there["id_attendees"], dora["id_attendees"],
        "the ids differ"
    );
    let after = kiosk.send(Method::GET, "/_queue", None, None).await.json();
    assert_eq!(
        after["bundles"]["demo"]["rejected"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "only Bia's: {after}"
    );
}

/// The source and the desk number registrations alike: Eva, registered at the source, and Dora,
/// registered at the desk before it saw Eva, get the same code. Once the desk has the source's
/// files again, that code checks in Eva, as the list shows it, at the desk and at the source;
/// Dora's check-in made before stays hers at both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_two_people_were_given_checks_in_the_one_the_list_shows_at_the_desk_and_the_source()
{
    let (_source_at, source) = Source::start().await;
    let desk = Desk::slow(&source).await;
    let kiosk = &desk.server;
    let price = a_price(kiosk).await;
    for (app, name, email) in [
        (&source, "Eva", "eva@exemplo.com"),
        (kiosk, "Dora Site", "dora.site@exemplo.com"),
    ] {
        let made = post(app, "/api/v1/attendees/create", &person(name, email, price)).await;
        assert_eq!(made.status, 200, "{}", made.text());
    }
    let eva = by_email(&source, "eva@exemplo.com").await.expect("Eva");
    let dora = by_email(kiosk, "dora.site@exemplo.com")
        .await
        .expect("Dora");
    assert_eq!(
        eva["checkin_code"], dora["checkin_code"],
        "one code, two badges"
    );
    let code = dora["checkin_code"].to_string();
    let checkin = |date: &str| json!([{"checkin_code": code, "checkin": 1, "checkin_date": date}]);

    // Dora checks in at the desk; it reaches the source under the code the source gave her.
    let done = post(
        kiosk,
        "/api/v1/checkin/attendees",
        &checkin("2026-09-15T08:00:00"),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.text());
    until(
        Duration::from_secs(15),
        "Dora checked in at the source",
        || async {
            let dora = by_email(&source, "dora.site@exemplo.com").await?;
            (dora["checkin"] == 1).then_some(())
        },
    )
    .await;

    // The desk takes the source's files: Eva has the code there, Dora another one.
    desk.pull_again(&source).await;
    let done = post(
        kiosk,
        "/api/v1/checkin/attendees",
        &checkin("2026-09-15T09:00:00"),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.text());
    let here = (
        by_email(kiosk, "eva@exemplo.com").await.expect("Eva here"),
        by_email(kiosk, "dora.site@exemplo.com")
            .await
            .expect("Dora here"),
    );
    assert_eq!(here.0["checkin_date"], "2026-09-15T09:00:00", "{}", here.0);
    assert_eq!(here.1["checkin_date"], "2026-09-15T08:00:00", "{}", here.1);
    let there = until(
        Duration::from_secs(15),
        "Eva checked in at the source",
        || async {
            let eva = by_email(&source, "eva@exemplo.com").await?;
            let dora = by_email(&source, "dora.site@exemplo.com").await?;
            (eva["checkin"] == 1).then_some((eva, dora))
        },
    )
    .await;
    assert_eq!(
        there.0["checkin_date"], "2026-09-15T09:00:00",
        "{}",
        there.0
    );
    assert_eq!(
        there.1["checkin_date"], "2026-09-15T08:00:00",
        "{}",
        there.1
    );
}

/// Bia registered at the source, then at the desk (refused there as registered already); Gil,
/// registered at the source before her, has there the code the desk gave Bia. Bia's check-in
/// at the desk reaches her record at the source (found by her e-mail), not Gil's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_in_of_someone_the_source_refused_as_registered_goes_to_their_record_there() {
    let (_source_at, source) = Source::start().await;
    let desk = Desk::slow(&source).await;
    let kiosk = &desk.server;
    register(&source, "Gil", "gil@exemplo.com").await;
    register(&source, "Bia", "bia@exemplo.com").await;
    register(kiosk, "Bia Site", "bia@exemplo.com").await;
    let gil = by_email(&source, "gil@exemplo.com").await.expect("Gil");
    let bia = by_email(kiosk, "bia@exemplo.com").await.expect("Bia here");
    assert_eq!(
        gil["checkin_code"], bia["checkin_code"],
        "the desk's code is Gil's there"
    );
    check_in(kiosk, "bia@exemplo.com", "2026-09-15T08:00:00").await;
    let queue = settled(kiosk).await;
    assert_eq!(
        queue["bundles"]["demo"]["rejected"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "only the registration: {queue}"
    );
    let there = by_email(&source, "bia@exemplo.com")
        .await
        .expect("Bia there");
    assert_eq!(there["checkin"], 1, "{there}");
    let gil = by_email(&source, "gil@exemplo.com").await.expect("Gil");
    assert!(
        gil.get("checkin").is_none(),
        "Gil got Bia's check-in: {gil}"
    );
}

/// A source that refuses every write: the desk's registration is refused, and a check-in of
/// that person is not sent at all (the source does not list them: the desk's code could be
/// someone else's there); the registration is rejected, the check-in parked, saying why. In a
/// batch the source refuses, only what was sent is rejected: Fia's item stays parked. The
/// rejected registration is dismissed by hand; a reset forgets the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_in_of_someone_the_source_does_not_list_is_parked_unsent() {
    let (_source_at, source) = Source::start_with(true).await;
    let desk = Desk::slow(&source).await;
    let kiosk = &desk.server;
    register(kiosk, "Fia Site", "fia.site@exemplo.com").await;
    check_in(kiosk, "fia.site@exemplo.com", "2026-09-15T08:00:00").await;
    let queue = settled(kiosk).await;
    let schema =
        crate::openapi::response_schema(&crate::helpers::openapi(), "/_queue", "200", true);
    let problems = crate::openapi::problems(&schema, &queue);
    assert!(problems.is_empty(), "as openapi.json says: {problems:#?}");
    let of = &queue["bundles"]["demo"];
    assert_eq!(of["rejected"].as_array().map(Vec::len), Some(1), "{queue}");
    assert_eq!(of["rejected"][0]["status"], 405, "{queue}");
    assert_eq!(of["parked"].as_array().map(Vec::len), Some(1), "{queue}");
    assert_eq!(of["parked"][0].get("status"), None, "{queue}");
    let answer = of["parked"][0]["answer"].as_str().unwrap_or_default();
    assert!(
        answer.starts_with("not sent") && answer.contains("fia.site@exemplo.com"),
        "{answer}"
    );

    // A batch with Fia and someone the source lists: the source refuses what is sent (it
    // takes no write); Fia's item stays parked.
    let fia = by_email(kiosk, "fia.site@exemplo.com").await.expect("Fia");
    let first = kiosk.get("/api/v1/attendees", DEMO_TOKEN).await.json()["data"][0].clone();
    let batch = json!([
        {"checkin_code": first["checkin_code"].to_string(), "checkin": 1,
         "checkin_date": "2026-09-15T08:01:00"},
        {"checkin_code": fia["checkin_code"].to_string(), "checkin": 0,
         "checkin_date": "2026-09-15T08:02:00"}]);
    let done = post(kiosk, "/api/v1/checkin/attendees", &batch).await;
    assert_eq!(done.status, 200, "{}", done.text());
    let queue = settled(kiosk).await;
    let of = &queue["bundles"]["demo"];
    assert_eq!(of["rejected"].as_array().map(Vec::len), Some(2), "{queue}");
    assert_eq!(of["rejected"][1]["body"], json!([batch[0]]), "{queue}");
    assert_eq!(of["rejected"][1]["status"], 405, "{queue}");
    assert_eq!(of["parked"].as_array().map(Vec::len), Some(2), "{queue}");
    assert_eq!(of["parked"][1]["body"], json!([batch[1]]), "{queue}");
    assert_eq!(of["parked"][1]["seq"], of["rejected"][1]["seq"], "{queue}");

    // Handled by hand: the refused registration is dismissed, once.
    let seq = of["rejected"][0]["seq"].clone();
    let dismiss = |query: String, token: Option<&'static str>| async move {
        let path = format!("/_queue{query}");
        kiosk.send(Method::DELETE, &path, token, None).await
    };
    dismiss(format!("?seq={seq}"), None)
        .await
        .assert_error(401, "missing_token");
    for bad in [
        "",
        "?seq=x",
        "?seq=0",
        "?seq=+1",
        "?seq=1&seq=2",
        "?other=1",
    ] {
        dismiss(bad.to_string(), Some(DEMO_TOKEN))
            .await
            .assert_error(400, "invalid_queue_entry");
    }
    // A whole number too large for any entry is no entry (schemathesis sent one).
    dismiss("?seq=313242804171643879424".to_string(), Some(DEMO_TOKEN))
        .await
        .assert_error(404, "not_in_queue");
    let done = dismiss(format!("?seq={seq}"), Some(DEMO_TOKEN)).await;
    assert_eq!(done.status, 204, "{}", done.text());
    dismiss(format!("?seq={seq}"), Some(DEMO_TOKEN))
        .await
        .assert_error(404, "not_in_queue");
    let queue = kiosk.send(Method::GET, "/_queue", None, None).await.json();
    let of = &queue["bundles"]["demo"];
    let left: Vec<&Value> = of["rejected"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| &r["seq"])
        .collect();
    assert!(!left.contains(&&seq) && left.len() == 1, "{queue}");
    assert_eq!(of["parked"].as_array().map(Vec::len), Some(2), "{queue}");

    let reset = kiosk
        .send(Method::POST, "/_writes/reset", Some(DEMO_TOKEN), None)
        .await;
    assert_eq!(reset.status, 204);
    let queue = kiosk.send(Method::GET, "/_queue", None, None).await.json();
    assert_eq!(queue["bundles"].get("demo"), None, "{queue}");
}

/// Registers Hugo at the desk while its bundle.toml names no source (so his registration is
/// never queued), then names the source again: his record at the desk.
async fn hugo_registered_while_no_source_was_named(desk: &Desk) -> Value {
    let kiosk = &desk.server;
    let toml = desk.data.path().join("demo/bundle.toml");
    let with_source = without_source(&toml);
    kiosk.app.load().expect("reloads");
    register(kiosk, "Hugo Site", "hugo.site@exemplo.com").await;
    std::fs::write(&toml, &with_source).expect("write");
    kiosk.app.load().expect("reloads");
    by_email(kiosk, "hugo.site@exemplo.com")
        .await
        .expect("Hugo")
}

/// Hugo, registered while no source was named, checked in at the desk at 08:00: that check-in
/// is parked. His record at the desk.
async fn hugo_parked(desk: &Desk) -> Value {
    let hugo = hugo_registered_while_no_source_was_named(desk).await;
    check_in_code(
        &desk.server,
        &hugo["checkin_code"],
        1,
        "2026-09-15T08:00:00",
    )
    .await;
    let queue = settled(&desk.server).await;
    let parked = &queue["bundles"]["demo"]["parked"];
    assert_eq!(parked.as_array().map(Vec::len), Some(1), "{queue}");
    hugo
}

/// Checks `code` in (`checkin` 1) or undoes it (0) at `app` (200 asserted).
async fn check_in_code(app: &TestApp, code: &Value, checkin: u8, date: &str) -> Value {
    let item = json!({"checkin_code": code.to_string(), "checkin": checkin, "checkin_date": date});
    let done = post(app, "/api/v1/checkin/attendees", &json!([item.clone()])).await;
    assert_eq!(done.status, 200, "{}", done.text());
    item
}

/// Hugo's registration was never queued, so the source does not list him: a batch checking
/// in Hugo and someone the source lists goes without Hugo's item, which is parked (the desk's
/// code for him may be someone else's at the source). Once he is registered at the source and
/// the desk has its new list, his check-in goes, with the source's code for him.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_in_of_someone_registered_while_no_source_was_named_goes_once_the_source_lists_them(
) {
    let (_source_at, source) = Source::start().await;
    let desk = Desk::slow(&source).await;
    let kiosk = &desk.server;
    let hugo = hugo_registered_while_no_source_was_named(&desk).await;
    let first = kiosk.get("/api/v1/attendees", DEMO_TOKEN).await.json()["data"][0].clone();
    let batch = json!({"attendees": [
        {"checkin_code": hugo["checkin_code"].to_string(), "checkin": 1,
         "checkin_date": "2026-09-15T08:00:00"},
        {"checkin_code": first["checkin_code"].to_string(), "checkin": 1,
         "checkin_date": "2026-09-15T08:01:00"}]});
    let done = post(kiosk, "/api/v1/checkin/attendees", &batch).await;
    assert_eq!(done.status, 200, "{}", done.text());
    let queue = settled(kiosk).await;
    let parked = &queue["bundles"]["demo"]["parked"];
    assert_eq!(parked.as_array().map(Vec::len), Some(1), "{queue}");
    assert_eq!(
        parked[0]["body"],
        json!({"attendees": [batch["attendees"][0]]}),
        "only Hugo's item: {queue}"
    );
    let answer = parked[0]["answer"].as_str().unwrap_or_default();
    assert!(answer.contains("named no source"), "{answer}");
    assert_eq!(queue["bundles"]["demo"]["rejected"], json!([]), "{queue}");
    assert!(
        by_email(&source, "hugo.site@exemplo.com").await.is_none(),
        "Hugo's registration was not forwarded"
    );
    let there = source.get("/api/v1/attendees", DEMO_TOKEN).await.json()["data"][0].clone();
    assert_eq!(there["checkin_date"], "2026-09-15T08:01:00", "{there}");

    // Gil, registered at the source first, gets there the code the desk gave Hugo.
    register(&source, "Gil", "gil@exemplo.com").await;
    register(&source, "Hugo", "hugo.site@exemplo.com").await;
    let gil = by_email(&source, "gil@exemplo.com").await.expect("Gil");
    assert_eq!(
        gil["checkin_code"], hugo["checkin_code"],
        "Hugo's desk code is Gil's there"
    );
    desk.pull_again(&source).await;
    let there = until(
        Duration::from_secs(15),
        "Hugo's parked check-in to reach the source",
        || async {
            let hugo = by_email(&source, "hugo.site@exemplo.com").await?;
            (hugo["checkin"] == 1).then_some(hugo)
        },
    )
    .await;
    assert_eq!(there["checkin_date"], "2026-09-15T08:00:00", "{there}");
    let gil = by_email(&source, "gil@exemplo.com").await.expect("Gil");
    assert!(
        gil.get("checkin").is_none(),
        "Gil got Hugo's check-in: {gil}"
    );
    let queue = kiosk.send(Method::GET, "/_queue", None, None).await.json();
    assert_eq!(queue["bundles"].get("demo"), None, "{queue}");
}

/// Hugo's check-in is parked; then he is registered at the source and, before the desk has
/// its new list, his check-in is undone at the desk. Looking Hugo up for the undo finds him:
/// the parked check-in goes first, then the undo, so the source ends as the desk did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_check_in_goes_before_a_later_one_of_the_same_person() {
    let (_source_at, source) = Source::start().await;
    let desk = Desk::slow(&source).await;
    let kiosk = &desk.server;
    let hugo = hugo_parked(&desk).await;
    register(&source, "Hugo", "hugo.site@exemplo.com").await;
    check_in_code(kiosk, &hugo["checkin_code"], 0, "2026-09-15T08:05:00").await;
    undone_at_source(kiosk, &source).await;
    let here = by_email(kiosk, "hugo.site@exemplo.com")
        .await
        .expect("Hugo");
    assert_eq!(here["checkin"], 0, "{here}");
}

/// Hugo's check-in is parked; he is registered at the source, the desk takes its new list
/// (which shows him with the source's code), and his check-in is undone at the desk by that
/// code. The parked check-in goes first, with the source's code, then the undo.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_check_in_goes_before_one_made_by_the_code_the_new_data_shows() {
    let (_source_at, source) = Source::start().await;
    let desk = Desk::slow(&source).await;
    let kiosk = &desk.server;
    hugo_parked(&desk).await;
    register(&source, "Gil", "gil@exemplo.com").await;
    register(&source, "Hugo", "hugo.site@exemplo.com").await;
    let there = by_email(&source, "hugo.site@exemplo.com")
        .await
        .expect("Hugo there");
    desk.pull_again(&source).await;
    let listed = until(
        Duration::from_secs(15),
        "the desk to list Hugo by the source's code",
        || async {
            let list = kiosk.get("/api/v1/attendees", DEMO_TOKEN).await.json();
            let codes: Vec<Value> = list["data"]
                .as_array()?
                .iter()
                .filter(|a| a["email"] == "hugo.site@exemplo.com")
                .map(|a| a["checkin_code"].clone())
                .collect();
            codes.contains(&there["checkin_code"]).then_some(codes)
        },
    )
    .await;
    assert!(!listed.is_empty());
    check_in_code(kiosk, &there["checkin_code"], 0, "2026-09-15T08:05:00").await;
    let there = undone_at_source(kiosk, &source).await;
    assert_eq!(there["checkin_date"], "2026-09-15T08:05:00", "{there}");
    let gil = by_email(&source, "gil@exemplo.com").await.expect("Gil");
    assert!(
        gil.get("checkin").is_none(),
        "Gil got Hugo's check-in: {gil}"
    );
}

/// The token the desk sends is changed at the source, which answers 401: that refuses no
/// write of the desk's in particular, so they wait (none is rejected) and go once the source
/// takes the token again. Before, every write made meanwhile was rejected at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_wait_while_the_source_refuses_the_desks_token_and_go_once_it_takes_it() {
    let (source_at, source) = Source::start().await;
    let desk = Desk::slow(&source).await;
    let kiosk = &desk.server;
    source_at.with_token("changed-token");
    register(kiosk, "Ana Site", "ana.site@exemplo.com").await;
    // Refused twice: the first try did not reject the entry, which was tried again.
    until(
        Duration::from_secs(15),
        "the source to refuse the desk's token twice",
        || async {
            let refused = source.get("/_journal?status=401", "").await.json()["entries"]
                .as_array()
                .map_or(0, Vec::len);
            (refused >= 2).then_some(())
        },
    )
    .await;
    let queue = kiosk.send(Method::GET, "/_queue", None, None).await.json();
    assert_eq!(queue["bundles"]["demo"]["pending"], 1, "{queue}");
    assert_eq!(queue["bundles"]["demo"]["rejected"], json!([]), "{queue}");

    source_at.with_token(DEMO_TOKEN);
    assert_reached(kiosk, &source, "ana.site@exemplo.com").await;
}

/// The eventbox binary as a desk: kiosk mode on `data` (refreshing hourly, no file watch),
/// its writes in `state`, logging warnings.
fn kiosk_process(data: &std::path::Path, state: &std::path::Path) -> crate::cli::Served {
    kiosk_process_logging(data, state, "warn")
}

/// [`kiosk_process`] logging at `level` and above.
fn kiosk_process_logging(
    data: &std::path::Path,
    state: &std::path::Path,
    level: &str,
) -> crate::cli::Served {
    crate::cli::start_binary(
        &[
            "--data",
            data.to_str().expect("UTF-8"),
            "--addr",
            "127.0.0.1:0",
            "--no-watch",
            "--refresh-every",
            "1h",
            "--state",
            state.to_str().expect("UTF-8"),
        ],
        &[("RUST_LOG", level)],
    )
}

/// A desk (kiosk mode, refreshing hourly) whose writes reach `source` through a proxy that
/// answers each registration as `create` says, or forwards it (`None`).
async fn desk_behind(
    source: &TestApp,
    create: impl Fn() -> Option<crate::pull::Act> + Send + Sync + 'static,
) -> (crate::pull::Proxy, Desk) {
    use crate::pull::{Act, Proxy};
    let proxy = Proxy::start(&source.base, move |path, _, _| {
        let answer = path.ends_with("/attendees/create").then(&create).flatten();
        answer.unwrap_or(Act::Forward)
    })
    .await;
    let desk = Desk::of_url(&proxy.base, |o| {
        o.refresh_every = Some(Duration::from_secs(3600))
    })
    .await;
    (proxy, desk)
}

/// A desk behind a proxy that answers its registrations `status` with the HTML `page` while
/// the switch returned is on (it starts on), and forwards them once it is off.
async fn desk_behind_page(
    source: &TestApp,
    status: u16,
    page: &'static str,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    crate::pull::Proxy,
    Desk,
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use crate::pull::Act;

    let on = Arc::new(AtomicBool::new(true));
    let answering = Arc::clone(&on);
    let (proxy, desk) = desk_behind(source, move || {
        answering.load(Ordering::SeqCst).then(|| {
            let html = vec![("content-type", "text/html".into())];
            Act::Answer(status, html, page.to_string())
        })
    })
    .await;
    (on, proxy, desk)
}

/// A firewall between desk and source answers the desk's registrations 403 with its own
/// HTML page: that refuses no write in particular, so they wait (none is rejected; before,
/// each was set aside, to be sent again by hand), `/_queue` shows the next one with why, and
/// they go once it lets them through. A pending entry the source keeps failing can be
/// dismissed by hand: the next one goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_a_firewall_blocks_wait_and_a_pending_one_can_be_dismissed() {
    let (_source_at, source) = Source::start().await;
    let (blocked, firewall, desk) =
        desk_behind_page(&source, 403, "<html><body>Request blocked</body></html>").await;
    let kiosk = &desk.server;
    register(kiosk, "Ana Muro", "ana.muro@exemplo.com").await;
    register(kiosk, "Bia Muro", "bia.muro@exemplo.com").await;
    register(kiosk, "Caio Muro", "caio.muro@exemplo.com").await;
    let firewall = &firewall;
    until(
        Duration::from_secs(15),
        "three blocked tries",
        || async move { (firewall.count("/attendees/create") >= 3).then_some(()) },
    )
    .await;
    let queue = kiosk.send(Method::GET, "/_queue", None, None).await.json();
    let of = &queue["bundles"]["demo"];
    assert_eq!(of["pending"], 3, "{queue}");
    assert_eq!(of["rejected"], json!([]), "{queue}");
    assert_eq!(
        of["next"]["body"]["email"], "ana.muro@exemplo.com",
        "{queue}"
    );
    let why = of["waits"]["answer"].as_str().unwrap_or("");
    assert!(why.contains("403") && why.contains("firewall"), "{queue}");
    assert_eq!(of["waits"]["seq"], of["next"]["seq"], "{queue}");

    let seq = of["next"]["seq"].as_u64().expect("a seq");
    let dismissed = kiosk
        .send(
            Method::DELETE,
            &format!("/_queue?seq={seq}"),
            Some(DEMO_TOKEN),
            None,
        )
        .await;
    assert_eq!(dismissed.status, 204, "{}", dismissed.text());
    blocked.store(false, std::sync::atomic::Ordering::SeqCst);
    assert_reached(kiosk, &source, "caio.muro@exemplo.com").await;
    let at_source = emails(&source).await;
    assert!(at_source.contains(&"bia.muro@exemplo.com".to_string()));
    assert!(
        !at_source.contains(&"ana.muro@exemplo.com".to_string()),
        "the dismissed one is not sent"
    );
}

/// Writes that waited go again: once the source takes the first one, `/_queue` stops saying
/// why they waited, also while the next one is still being sent. Before, the old failure
/// stayed until the round ended (a slow send: 20 s), under an online badge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_the_source_takes_a_write_the_queue_stops_saying_why_they_waited() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use crate::pull::Act;

    // 0: blocked by a firewall; then the first registration goes and the next ones hang.
    let phase = Arc::new(AtomicUsize::new(0));
    let sent = Arc::clone(&phase);
    let (_source_at, source) = Source::start().await;
    let (proxy, desk) = desk_behind(&source, move || match sent.load(Ordering::SeqCst) {
        0 => Some(Act::Answer(
            403,
            vec![("content-type", "text/html".into())],
            "<html>Request blocked</html>".into(),
        )),
        1 if sent
            .compare_exchange(1, 2, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok() =>
        {
            None
        }
        _ => Some(Act::Stall(Duration::from_secs(60))),
    })
    .await;
    let kiosk = &desk.server;
    let why = one_registration_waiting(kiosk, &proxy, "Ana Espera", "ana.espera@exemplo.com").await;
    assert!(why.contains("403"), "{why}");
    register(kiosk, "Bia Espera", "bia.espera@exemplo.com").await;

    phase.store(1, Ordering::SeqCst);
    let source = &source;
    until(
        Duration::from_secs(10),
        "Ana at the source",
        || async move {
            emails(source)
                .await
                .contains(&"ana.espera@exemplo.com".to_string())
                .then_some(())
        },
    )
    .await;
    let queue = until(
        Duration::from_secs(5),
        "the wait no longer shown",
        || async {
            let queue = kiosk.send(Method::GET, "/_queue", None, None).await.json();
            queue["bundles"]["demo"]["waits"].is_null().then_some(queue)
        },
    )
    .await;
    assert_eq!(
        queue["bundles"]["demo"]["pending"], 1,
        "Bia's send hangs: {queue}"
    );
}

/// A desk whose bundle.toml names its source by its origin, as written by hand
/// (`url = "http://host/"`, which a refresh now keeps): its writes go to the API's paths there.
/// Before, to `http://host//attendees/create`, which no source answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_named_by_its_origin_gets_the_desks_writes() {
    let (_source_at, source) = Source::start().await;
    let desk = Desk::slow(&source).await;
    let toml = desk.data.path().join("demo/bundle.toml");
    let text = std::fs::read_to_string(&toml).expect("bundle.toml");
    let base = format!("{}/api/v1", source.base);
    assert!(text.contains(&base), "{text}");
    std::fs::write(&toml, text.replace(&base, &format!("{}/", source.base))).expect("written");
    desk.server.app.load().expect("the desk reloads");
    register(&desk.server, "Olga Origem", "olga.origem@exemplo.com").await;
    assert_reached(&desk.server, &source, "olga.origem@exemplo.com").await;
}

/// A captive portal between desk and source answers the desk's registrations 200 with its
/// login page: that took nothing, so they wait, `/_queue` saying why, and go once it lets them
/// through. Before, a 200 of any kind counted as the source's, and the writes were never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_a_captive_portal_answers_200_wait_until_they_reach_the_source() {
    let (_source_at, source) = Source::start().await;
    let page = "<html><body>Sign in to the venue Wi-Fi</body></html>";
    let (portal, proxy, desk) = desk_behind_page(&source, 200, page).await;
    let kiosk = &desk.server;
    let why = one_registration_waiting(kiosk, &proxy, "Ana Portal", "ana.portal@exemplo.com").await;
    assert!(
        why.contains("200") && why.contains("not the API's JSON"),
        "{why}"
    );

    portal.store(false, std::sync::atomic::Ordering::SeqCst);
    assert_reached(kiosk, &source, "ana.portal@exemplo.com").await;
}

/// Registers `name` at the desk, waits until `proxy` saw it sent twice, and gives why
/// `/_queue` says it waits (the one entry pending).
async fn one_registration_waiting(
    kiosk: &TestApp,
    proxy: &crate::pull::Proxy,
    name: &str,
    email: &str,
) -> String {
    register(kiosk, name, email).await;
    until(Duration::from_secs(15), "two tries", || async move {
        (proxy.count("/attendees/create") >= 2).then_some(())
    })
    .await;
    let queue = kiosk.send(Method::GET, "/_queue", None, None).await.json();
    let of = &queue["bundles"]["demo"];
    assert_eq!(of["pending"], 1, "{queue}");
    of["waits"]["answer"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A 2xx whose answer broke off (the link dropped mid-answer): whether the source took the
/// write is not known, so it is sent again and `/_queue` says why (it was taken for a captive
/// portal's page, which it is not). The metrics count the write pending meanwhile, and none
/// once it is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_answer_broke_off_is_sent_again_and_counted_pending_meanwhile() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let (_source_at, source) = Source::start().await;
    let cutting = Arc::new(AtomicBool::new(true));
    let cuts = Arc::clone(&cutting);
    let (proxy, desk) = desk_behind(&source, move || {
        cuts.load(Ordering::SeqCst).then(|| {
            let json = vec![("content-type", "application/json".into())];
            crate::pull::Act::BreakOff(200, json, "\"O".into())
        })
    })
    .await;
    let kiosk = &desk.server;
    let why = one_registration_waiting(kiosk, &proxy, "Ana Corte", "ana.corte@exemplo.com").await;
    assert!(why.contains("200") && why.contains("broke off"), "{why}");
    let metrics = || async { kiosk.send(Method::GET, "/metrics", None, None).await.text() };
    let pending = "eventbox_writes_queued{bundle=\"demo\",state=\"pending\"} 1";
    assert!(metrics().await.contains(pending), "{}", metrics().await);
    assert!(metrics().await.contains("eventbox_state_log_failing 0"));

    cutting.store(false, Ordering::SeqCst);
    assert_reached(kiosk, &source, "ana.corte@exemplo.com").await;
    let settled = until(Duration::from_secs(10), "the queue emptied", || async {
        let text = metrics().await;
        (!text.contains("eventbox_writes_queued{")).then_some(text)
    })
    .await;
    assert!(
        settled.contains("eventbox_state_log_failing 0"),
        "{settled}"
    );
}

/// A source whose refusal echoes the request's headers: the answer kept for the rejected write
/// (logged, shown by `/_queue` and the status page, written to the state folder) shows the
/// token's hint only. Before, the whole token. The refusal is long (one error per field, over
/// 16 KiB): still the API's JSON, so the write is rejected, not taken for a proxy's page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_that_echoes_the_token_is_kept_without_it() {
    use crate::pull::Act;

    let (_source_at, source) = Source::start().await;
    let (_echo, desk) = desk_behind(&source, move || {
        let erros: Vec<Value> = (0..400)
            .map(|i| json!({"code": 400, "description": format!("field_{i} is not valid")}))
            .collect();
        let answer = json!({
            "message": format!("refused: you sent Authorization-Token: {DEMO_TOKEN}"),
            "erros": erros,
        });
        assert!(answer.to_string().len() > 16 * 1024);
        Some(Act::Answer(
            400,
            vec![("content-type", "application/json".into())],
            answer.to_string(),
        ))
    })
    .await;
    let kiosk = &desk.server;
    register(kiosk, "Eco Muro", "eco.muro@exemplo.com").await;
    let queue = until(Duration::from_secs(15), "the refusal kept", || async move {
        let queue = kiosk.send(Method::GET, "/_queue", None, None).await.json();
        (queue["bundles"]["demo"]["rejected"]
            .as_array()
            .map(Vec::len)
            == Some(1))
        .then_some(queue)
    })
    .await;
    let answer = queue["bundles"]["demo"]["rejected"][0]["answer"]
        .as_str()
        .unwrap_or_default();
    assert!(
        answer.contains("you sent Authorization-Token: demo"),
        "{queue}"
    );
    assert!(!queue.to_string().contains(DEMO_TOKEN), "{queue}");
}

/// Another event's data pulled into the desk's folder while a write made for the first still
/// waits: the new data shows none of the first event's writes and they are held, not sent to
/// the source (with the new event's token, they would register someone at that event), while
/// writes made for the new event go. Once the folder holds the first event again, its writes
/// show and go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_made_for_one_event_are_held_while_the_folder_holds_another() {
    let (source_at, source) = Source::start().await;
    let desk = Desk::slow(&source).await;
    let kiosk = &desk.server;
    let event_file = desk.data.path().join("demo/event.json");
    let first_event = std::fs::read_to_string(&event_file).expect("event.json");
    let id: i64 = kiosk.get("/api/v1/event", DEMO_TOKEN).await.json()["data"][0]["id_event"]
        .as_i64()
        .expect("an id_event");

    source_at.with_token("changed-token");
    register(kiosk, "Ana Evento", "ana.evento@exemplo.com").await;
    let other = first_event.replacen(&format!("\"id_event\":{id}"), "\"id_event\":77", 1);
    assert_ne!(other, first_event, "the id replaced");
    std::fs::write(&event_file, &other).expect("another event");
    kiosk.app.load().expect("the desk reloads");
    assert!(
        !emails(kiosk)
            .await
            .contains(&"ana.evento@exemplo.com".to_string()),
        "another event's data shows none of the first's writes"
    );
    register(kiosk, "Bia Evento", "bia.evento@exemplo.com").await;

    source_at.with_token(DEMO_TOKEN);
    until(Duration::from_secs(15), "Bia at the source", || async {
        emails(&source)
            .await
            .contains(&"bia.evento@exemplo.com".to_string())
            .then_some(())
    })
    .await;
    // The source has Bia before the desk has recorded so (it looks her up there first).
    let queue = until(Duration::from_secs(15), "Bia's entry recorded", || async {
        let q = kiosk.send(Method::GET, "/_queue", None, None).await.json();
        (q["bundles"]["demo"]["pending"] == 1).then_some(q)
    })
    .await;
    let of = &queue["bundles"]["demo"];
    assert_eq!(of["held"][0]["event"], id, "{queue}");
    assert_eq!(of["held"].as_array().map(Vec::len), Some(1), "{queue}");
    assert!(of.get("next").is_none(), "{queue}");
    assert!(!emails(&source)
        .await
        .contains(&"ana.evento@exemplo.com".to_string()));

    std::fs::write(&event_file, &first_event).expect("the first event again");
    kiosk.app.load().expect("the desk reloads");
    assert!(emails(kiosk)
        .await
        .contains(&"ana.evento@exemplo.com".to_string()));
    assert_reached(kiosk, &source, "ana.evento@exemplo.com").await;
    // Ana and Bia have ids and codes of their own at the desk (Bia's were not Ana's again):
    // Ana's check-in reaches Ana at the source, not Bia.
    let ana = by_email(kiosk, "ana.evento@exemplo.com")
        .await
        .expect("Ana at the desk");
    check_in_code(kiosk, &ana["checkin_code"], 1, "2026-09-15T09:00:00").await;
    settled(kiosk).await;
    let at_source = |email: &'static str| {
        let source = &source;
        async move { by_email(source, email).await.expect("at the source") }
    };
    assert_eq!(at_source("ana.evento@exemplo.com").await["checkin"], 1);
    assert!(at_source("bia.evento@exemplo.com")
        .await
        .get("checkin")
        .is_none());
}

/// New files that do not load (another event's bundle copied in half, a typo): the desk keeps
/// serving its last good version, but its writes wait, saying why in `/_queue`, rather than
/// go with the latest bundle.toml's token and source (maybe another event's) or the old
/// version's; they go once the files load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_wait_while_the_latest_files_are_not_the_ones_served() {
    let (source_at, source) = Source::start().await;
    let desk = Desk::slow(&source).await;
    let kiosk = &desk.server;
    source_at.with_token("changed-token");
    register(kiosk, "Caio Quebra", "caio.quebra@exemplo.com").await;
    let event_file = desk.data.path().join("demo/event.json");
    let good = std::fs::read_to_string(&event_file).expect("event.json");
    std::fs::write(&event_file, "{ not json").expect("broken");
    let _ = kiosk.app.load();
    assert_eq!(
        kiosk.get("/api/v1/event", DEMO_TOKEN).await.status,
        200,
        "the last good version serves"
    );
    source_at.with_token(DEMO_TOKEN);
    let kiosk_ = kiosk;
    let queue = until(
        Duration::from_secs(15),
        "the queue to say why",
        || async move {
            let q = kiosk_.send(Method::GET, "/_queue", None, None).await.json();
            let why = q["bundles"]["demo"]["waits"]["answer"]
                .as_str()
                .unwrap_or("")
                .to_string();
            why.contains("latest files are not served").then_some(q)
        },
    )
    .await;
    assert_eq!(queue["bundles"]["demo"]["pending"], 1, "{queue}");
    assert!(!emails(&source)
        .await
        .contains(&"caio.quebra@exemplo.com".to_string()));

    std::fs::write(&event_file, good).expect("mended");
    kiosk.app.load().expect("the desk reloads");
    assert_reached(kiosk, &source, "caio.quebra@exemplo.com").await;
}

/// Once the kiosk's queue settles, nothing of the bundle is left in it and the source lists
/// `email`.
async fn assert_reached(kiosk: &TestApp, source: &TestApp, email: &str) {
    let queue = settled(kiosk).await;
    assert!(queue["bundles"].get("demo").is_none(), "{queue}");
    assert!(emails(source).await.contains(&email.to_string()));
}

/// A write made by a path in another case, with a trailing slash, as the router takes it,
/// reaches the source at the path the API documents (before: `<url>/API/V1/...`, a 404).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_made_by_a_path_in_another_case_reaches_the_source_at_the_documented_path() {
    let (_source_at, source) = Source::start().await;
    let desk = Desk::slow(&source).await;
    let kiosk = &desk.server;
    let made = post(
        kiosk,
        "/API/V1/Attendees/Create/",
        &person("Ana Site", "ana.site@exemplo.com", a_price(kiosk).await),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    assert_reached(kiosk, &source, "ana.site@exemplo.com").await;
}

/// After `/_writes/reset`, the desk numbers registrations from where it started: Cai gets the
/// id and code Ana had here. Cai's check-in reaches Cai at the source, not Ana.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_reset_a_check_in_reaches_the_new_registration_not_the_forgotten_one() {
    let (_source_at, source) = Source::start().await;
    let desk = Desk::slow(&source).await;
    let kiosk = &desk.server;
    // Eva, registered at the source, makes its numbers differ from the desk's.
    register(&source, "Eva", "eva@exemplo.com").await;
    register(kiosk, "Ana Site", "ana.site@exemplo.com").await;
    let ana = by_email(kiosk, "ana.site@exemplo.com").await.expect("Ana");
    settled(kiosk).await;
    let reset = kiosk
        .send(Method::POST, "/_writes/reset", Some(DEMO_TOKEN), None)
        .await;
    assert_eq!(reset.status, 204, "{}", reset.text());
    register(kiosk, "Cai Site", "cai.site@exemplo.com").await;
    let cai = by_email(kiosk, "cai.site@exemplo.com").await.expect("Cai");
    assert_eq!(cai["checkin_code"], ana["checkin_code"], "Ana's code again");
    check_in(kiosk, "cai.site@exemplo.com", "2026-09-15T08:00:00").await;
    settled(kiosk).await;
    let cai = by_email(&source, "cai.site@exemplo.com")
        .await
        .expect("Cai there");
    let ana = by_email(&source, "ana.site@exemplo.com")
        .await
        .expect("Ana there");
    assert_eq!(cai["checkin"], 1, "{cai}");
    assert!(
        ana.get("checkin").is_none(),
        "Ana got Cai's check-in: {ana}"
    );
}

/// The kiosk binary killed with SIGKILL at random moments while it takes writes, 50 rounds:
/// every acknowledged registration reaches the source exactly once, and none is refused there
/// as a duplicate (an entry maybe sent before a kill is checked, not sent twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kiosk_killed_at_random_moments_loses_no_acknowledged_write_and_doubles_none() {
    let source_data = TempData::new();
    source_data.with_demo("demo");
    let source = crate::helpers::spawn_app(source_data.path()).await;
    let kiosk_data = TempData::new();
    pull_into(&source.base, &kiosk_data.path().join("demo")).await;
    let state = tempfile::tempdir().expect("tempdir");
    let price = a_price(&source).await;
    let client = crate::helpers::client();
    let mut acknowledged: Vec<String> = Vec::new();
    // A cheap, varying delay before each kill (the point is the randomness of the moment).
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.subsec_nanos() as u64);
    for round in 0..50 {
        let served = kiosk_process(kiosk_data.path(), state.path());
        crate::cli::get_event(&served.base, DEMO_TOKEN).await;
        let base = served.base.clone();
        let client2 = client.clone();
        let writer = tokio::spawn(async move {
            let mut ok = Vec::new();
            for i in 0..4 {
                let email = format!("r{round}-{i}@exemplo.com");
                let body = serde_json::to_vec(&person("K", &email, price)).expect("JSON");
                let sent = client2
                    .post(format!("{base}/api/v1/attendees/create"))
                    .header("Authorization-Token", DEMO_TOKEN)
                    .header("Content-Type", "application/json")
                    .body(body)
                    .send()
                    .await;
                match sent {
                    Ok(res) if res.status() == 200 => ok.push(email),
                    _ => break,
                }
            }
            ok
        });
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        tokio::time::sleep(Duration::from_millis((seed >> 33) % 25)).await;
        served.signal("KILL");
        acknowledged.extend(writer.await.expect("the writer"));
        drop(served);
    }
    assert!(
        acknowledged.len() >= 20,
        "{} writes acknowledged",
        acknowledged.len()
    );

    // Once more, to the end: the queue empties.
    let served = kiosk_process(kiosk_data.path(), state.path());
    crate::cli::get_event(&served.base, DEMO_TOKEN).await;
    let queue_of = |base: String| {
        let client = client.clone();
        async move {
            crate::helpers::answer(client.get(format!("{base}/_queue")))
                .await
                .json()
        }
    };
    let queue = until(Duration::from_secs(30), "the queue to empty", || {
        let q = queue_of(served.base.clone());
        async move {
            let q = q.await;
            (q["bundles"]["demo"]["pending"].as_u64().unwrap_or(0) == 0).then_some(q)
        }
    })
    .await;
    let rejected = queue["bundles"]["demo"]["rejected"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(rejected, 0, "nothing refused as a duplicate: {queue}");
    let at_source = emails(&source).await;
    for email in &acknowledged {
        let n = at_source.iter().filter(|e| *e == email).count();
        assert_eq!(n, 1, "{email} is at the source {n} times");
    }
}

/// Two people given one check-in code, one at the source and one at an offline desk: when the
/// desk's registration reaches the source, which gives it a new code, the desk's log says which
/// registration's badge to reprint (by id, with both codes), and so does `/status` (what the
/// status page reads: an operator watching it sees it too). Before, nothing said so,
/// then only the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_the_source_numbered_anew_is_named_in_the_log_with_both_codes() {
    let (_source_at, source) = Source::start().await;
    let data = TempData::new();
    pull_into(&source.base, &data.path().join("demo")).await;
    let state = TempData::new();
    let served = kiosk_process(data.path(), state.path());
    crate::cli::get_event(&served.base, DEMO_TOKEN).await;
    let price = a_price(&source).await;
    let made = post(
        &source,
        "/api/v1/attendees/create",
        &person("Eva", "eva@exemplo.com", price),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let client = crate::helpers::client();
    let made = crate::helpers::answer(
        client
            .post(format!("{}/api/v1/attendees/create", served.base))
            .header("Authorization-Token", DEMO_TOKEN)
            .header("Content-Type", "application/json")
            .body(person("Dora Site", "dora.site@exemplo.com", price).to_string()),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let listed = crate::helpers::answer(
        client
            .get(format!("{}/api/v1/attendees", served.base))
            .header("Authorization-Token", DEMO_TOKEN),
    )
    .await
    .json();
    let dora = listed["data"]
        .as_array()
        .and_then(|l| l.iter().find(|p| p["email"] == "dora.site@exemplo.com"))
        .cloned()
        .expect("Dora at the desk");
    let eva = by_email(&source, "eva@exemplo.com").await.expect("Eva");
    assert_eq!(
        eva["checkin_code"], dora["checkin_code"],
        "one code, two badges"
    );
    let at_source = until(Duration::from_secs(15), "Dora at the source", || async {
        by_email(&source, "dora.site@exemplo.com").await
    })
    .await;
    let said = format!(
        "a registration made here (id {}) has check-in code {} at the source, not {}",
        dora["id_attendees"], at_source["checkin_code"], dora["checkin_code"]
    );
    let served = &served;
    let said = &said;
    until(
        Duration::from_secs(15),
        "the reprint warning",
        || async move { served.stderr().contains(said.as_str()).then_some(()) },
    )
    .await;
    let reprint = json!([{
        "id": dora["id_attendees"],
        "email": "dora.site@exemplo.com",
        "code": dora["checkin_code"],
        "code_at_source": at_source["checkin_code"],
    }]);
    let status = crate::helpers::answer(client.get(format!("{}/status", served.base)))
        .await
        .json();
    assert_eq!(status["bundles"][0]["reprint"], reprint, "{status}");
}

/// Writes whose bundle folder is removed are kept, and the log says so: they wait for a folder
/// of that name; `/status` shows them (before, only `/_queue` and the metrics did).
#[tokio::test]
async fn writes_of_a_removed_bundle_are_kept_and_the_log_says_so() {
    let data = TempData::new();
    data.with_demo("demo");
    // A source that refuses every connection (a port just freed): the writes are queued for it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let toml = data.path().join("demo/bundle.toml");
    let mut text = std::fs::read_to_string(&toml).expect("bundle.toml");
    text.push_str(&format!(
        "\n[source]\nurl = \"http://127.0.0.1:{port}/api/v1\"\n"
    ));
    std::fs::write(&toml, text).expect("bundle.toml");
    let state = TempData::new();
    let served = kiosk_process(data.path(), state.path());
    crate::cli::get_event(&served.base, DEMO_TOKEN).await;
    let client = crate::helpers::client();
    let code = std::fs::read_to_string(data.path().join("demo/attendees.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["data"][0]["checkin_code"].as_i64())
        .expect("a check-in code in the demo");
    let body = json!([{"checkin_code": code.to_string(), "checkin": 1, "checkin_date": "2026-09-15T08:00:00"}]);
    let ok = crate::helpers::answer(
        client
            .post(format!("{}/api/v1/checkin/attendees", served.base))
            .header("Authorization-Token", DEMO_TOKEN)
            .header("Content-Type", "application/json")
            .body(serde_json::to_vec(&body).expect("JSON")),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.text());

    std::fs::remove_dir_all(data.path().join("demo")).expect("removed");
    served.signal("HUP");
    let said = "writes wait for a bundle whose folder is gone";
    let served = &served;
    until(Duration::from_secs(15), "the warning", || async move {
        served.stderr().contains(said).then_some(())
    })
    .await;
    let queue = crate::helpers::answer(client.get(format!("{}/_queue", served.base)))
        .await
        .json();
    assert_eq!(queue["bundles"]["demo"]["pending"], 1, "{queue}");
    // `/status` lists no such bundle, yet shows its writes waiting.
    let status = served.status().await;
    assert_eq!(status["bundles"], json!([]), "{status}");
    assert_eq!(
        status["queues_of_missing_bundles"]["demo"]["pending"], 1,
        "{status}"
    );
}

/// A registration whose tries could not connect never reached the source: once it is back it is
/// sent, and an e-mail someone registered there meanwhile makes the source refuse it, kept in
/// the rejected list. Before, each try counted as maybe received, the source's record of the
/// e-mail was taken for it, and the desk's registration was replaced with no word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_that_never_reached_the_source_is_sent_not_taken_for_anothers() {
    let (source_at, source) = Source::start().await;
    let desk = Desk::of(&source, |o| {
        o.refresh_every = Some(Duration::from_secs(3600));
    })
    .await;
    let kiosk = &desk.server;
    register(&source, "Fay At Source", "fay@exemplo.com").await;
    source.shutdown().await;
    register(kiosk, "Fay Desk", "fay@exemplo.com").await;
    until(
        Duration::from_secs(15),
        "a refused connection",
        || async move {
            let q = kiosk.send(Method::GET, "/_queue", None, None).await.json();
            let why = q["bundles"]["demo"]["waits"]["answer"]
                .as_str()
                .unwrap_or_default();
            why.contains("Connection refused").then_some(())
        },
    )
    .await;

    let source = source_at.again().await;
    let queue = until(Duration::from_secs(15), "the source's answer", || async {
        let q = kiosk.send(Method::GET, "/_queue", None, None).await.json();
        let rejected = q["bundles"]["demo"]["rejected"]
            .as_array()
            .map_or(0, Vec::len);
        (rejected == 1).then_some(q)
    })
    .await;
    let rejected = &queue["bundles"]["demo"]["rejected"][0];
    assert_eq!(rejected["body"]["name"], "Fay Desk", "{queue}");
    assert!(
        rejected["answer"]
            .as_str()
            .is_some_and(|a| a.contains("already_registered")),
        "{queue}"
    );
    let at_source = by_email(&source, "fay@exemplo.com").await.expect("listed");
    assert_eq!(at_source["name"], "Fay At Source");
}

/// Why writes wait names the cause: a source that refuses connections is told apart from one
/// that hangs (both read "error sending request for url (...)").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_writes_wait_names_a_refused_connection() {
    let source = crate::helpers::spawn_app(&crate::helpers::demo_data()).await;
    let desk = Desk::of(&source, |_| {}).await;
    source.shutdown().await;
    let kiosk = &desk.server;
    register(kiosk, "Dora Fechada", "dora.fechada@exemplo.com").await;
    let why = until(
        Duration::from_secs(15),
        "the queue to say why",
        || async move {
            let q = kiosk.send(Method::GET, "/_queue", None, None).await.json();
            q["bundles"]["demo"]["waits"]["answer"]
                .as_str()
                .filter(|w| !w.is_empty())
                .map(str::to_string)
        },
    )
    .await;
    assert!(
        why.contains("cannot connect") && why.contains("Connection refused"),
        "{why}"
    );
}

/// A check-in the source took, then changed there (another desk or the organiser undid it),
/// shows the source's state at the desk once a refresh has pulled data newer than that: the
/// desk's own check-in no longer covers it. It did, for as long as the desk ran, and two desks
/// disagreed about who was in. A check-in the source has not taken still shows at the desk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_in_the_source_took_and_changed_shows_the_sources_state_after_a_refresh() {
    let (_source_at, source) = Source::start().await;
    let desk = Desk::of(&source, |o| {
        o.refresh_every = Some(Duration::from_millis(200));
    })
    .await;
    let kiosk = &desk.server;
    let first = kiosk.get("/api/v1/attendees", DEMO_TOKEN).await.json()["data"][0].clone();
    let code = first["checkin_code"].to_string();
    let checkin = |value: i64, date: &str| json!([{"checkin_code": code.clone(), "checkin": value, "checkin_date": date}]);
    let done = post(
        kiosk,
        "/api/v1/checkin/attendees",
        &checkin(1, "2026-09-15T08:00:00"),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.text());
    let source_ = &source;
    until(
        Duration::from_secs(10),
        "the check-in at the source",
        || async move {
            let people = source_.get("/api/v1/attendees", DEMO_TOKEN).await.json();
            (people["data"][0]["checkin"] == 1).then_some(())
        },
    )
    .await;
    settled(kiosk).await;
    // A refresh that started after the source took it has passed: the one that brings the
    // undo cannot have begun before (a refresh under way then is told apart by its start).
    let after = chrono::Utc::now();
    until(
        Duration::from_secs(10),
        "a refresh begun since",
        || async move {
            let status = kiosk.send(Method::GET, "/status", None, None).await.json();
            let began = status["bundles"][0]["source"]["last_success"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())?;
            (began > after).then_some(())
        },
    )
    .await;

    // Undone at the source.
    let undone = post(
        &source,
        "/api/v1/checkin/attendees",
        &checkin(0, "2026-09-15T08:30:00"),
    )
    .await;
    assert_eq!(undone.status, 200, "{}", undone.text());
    let shown = until(
        Duration::from_secs(10),
        "the source's state at the desk",
        || async {
            let people = kiosk.get("/api/v1/attendees", DEMO_TOKEN).await.json();
            let p = people["data"][0].clone();
            (p["checkin"] == 0).then_some(p)
        },
    )
    .await;
    assert_eq!(shown["checkin_date"], "2026-09-15T08:30:00", "{shown}");
}

/// `Some` once `app` lists `email`.
async fn listed(app: &TestApp, email: &str) -> Option<()> {
    emails(app).await.iter().any(|e| e == email).then_some(())
}

/// A log that lost a line it had synced (a disk that did not keep it; here cut by hand) while
/// `forwarded.jsonl` says the source took it: the next write at the restarted desk is numbered
/// after it and reaches the source, through one more restart while the source is away, and
/// the start says what was lost. Before, it took the lost line's `seq`, and on the next start
/// that line's `accepted`: acknowledged, never sent, nothing said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_after_a_log_lost_a_sent_line_is_numbered_after_it_and_reaches_the_source() {
    let (source_at, source) = Source::start().await;
    let data = TempData::new();
    pull_into(&source.base, &data.path().join("demo")).await;
    let state = TempData::new();
    let price = a_price(&source).await;
    let client = crate::helpers::client();
    let register_at = |base: String, email: &'static str| {
        let client = client.clone();
        async move {
            let body = serde_json::to_vec(&person("Lost", email, price)).expect("JSON");
            let res = client
                .post(format!("{base}/api/v1/attendees/create"))
                .header("Authorization-Token", DEMO_TOKEN)
                .header("Content-Type", "application/json")
                .body(body);
            let made = crate::helpers::answer(res).await;
            assert_eq!(made.status, 200, "{}", made.text());
        }
    };
    let queue_empty = |base: String| {
        let client = client.clone();
        async move {
            let q = crate::helpers::answer(client.get(format!("{base}/_queue")))
                .await
                .json();
            q["bundles"]["demo"].is_null().then_some(())
        }
    };

    let served = kiosk_process(data.path(), state.path());
    served.ready().await;
    register_at(served.base.clone(), "sent@exemplo.com").await;
    until(Duration::from_secs(15), "the first at the source", || {
        listed(&source, "sent@exemplo.com")
    })
    .await;
    until(Duration::from_secs(15), "its outcome logged", || {
        queue_empty(served.base.clone())
    })
    .await;
    served.signal("KILL");
    drop(served);
    // The log loses its last line's end: on start it is torn, cut off.
    let log = state.path().join("writes.jsonl");
    let bytes = std::fs::read(&log).expect("the log");
    std::fs::write(&log, &bytes[..bytes.len() - 10]).expect("cut");
    source.shutdown().await;

    let served = kiosk_process(data.path(), state.path());
    served.ready().await;
    let stderr = served.stderr();
    assert!(
        stderr.contains("past the log's last") && stderr.contains("numbered from 2"),
        "{stderr}"
    );
    register_at(served.base.clone(), "after@exemplo.com").await;
    served.signal("KILL");
    drop(served);
    let served = kiosk_process(data.path(), state.path());
    served.ready().await;
    let source = source_at.again().await;
    until(
        Duration::from_secs(15),
        "the write made after it at the source",
        || listed(&source, "after@exemplo.com"),
    )
    .await;
}

/// A round that reaches the source and then stops (a second outage) says both: `writes reach
/// the source again`, then `writes wait for the source` anew. Before, the round's stop kept the
/// first line unsaid, and two outages read as one with the writes between them unsaid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_reach_the_source_between_two_outages_are_said_to() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let (_source_at, source) = Source::start().await;
    // How many more registrations the proxy lets through; every other one is answered 503.
    let budget = Arc::new(AtomicUsize::new(0));
    let left = Arc::clone(&budget);
    let proxy = crate::pull::Proxy::start(&source.base, move |path, _, _| {
        let through = !path.ends_with("/attendees/create")
            || left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        match through {
            true => crate::pull::Act::Forward,
            false => crate::pull::Act::Answer(503, vec![], "busy".into()),
        }
    })
    .await;
    let data = TempData::new();
    pull_into(&proxy.base, &data.path().join("demo")).await;
    let state = TempData::new();
    let served = kiosk_process_logging(data.path(), state.path(), "info");
    crate::cli::get_event(&served.base, DEMO_TOKEN).await;
    let price = a_price(&source).await;
    let client = crate::helpers::client();
    let emails_made = ["una@exemplo.com", "duo@exemplo.com", "tre@exemplo.com"];
    for email in emails_made {
        let made = crate::helpers::answer(
            client
                .post(format!("{}/api/v1/attendees/create", served.base))
                .header("Authorization-Token", DEMO_TOKEN)
                .header("Content-Type", "application/json")
                .body(person("Três", email, price).to_string()),
        )
        .await;
        assert_eq!(made.status, 200, "{}", made.text());
    }
    let lines = |what: &'static str| {
        let log = served.stderr();
        move || log.matches(what).count()
    };
    const WAIT: &str = "writes wait for the source";
    const REACH: &str = "writes reach the source again";
    until(Duration::from_secs(10), "the first wait said", || async {
        (lines(WAIT)() == 1).then_some(())
    })
    .await;

    // One goes through, the next is refused again: a second outage.
    budget.store(1, Ordering::SeqCst);
    until(Duration::from_secs(15), "the second wait said", || async {
        (lines(WAIT)() == 2).then_some(())
    })
    .await;
    budget.store(usize::MAX, Ordering::SeqCst);
    until(
        Duration::from_secs(15),
        "every registration at the source",
        || async {
            let at = emails(&source).await;
            emails_made
                .iter()
                .all(|e| at.iter().any(|a| a == e))
                .then_some(())
        },
    )
    .await;

    until(
        Duration::from_secs(10),
        "the writes said to reach it twice",
        || async { (lines(REACH)() == 2).then_some(()) },
    )
    .await;
}
