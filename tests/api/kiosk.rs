//! Kiosk mode, with two eventbox servers in one test: the source (an in-process eventbox on
//! port 0, playing the live service) and the kiosk (another in-process `App` whose bundle was
//! pulled from it, refreshing every 200 ms). Waits poll with a deadline, never a fixed sleep.
//! Bad sources are tiny TCP servers answering garbage, a web page, half a body, a redirect
//! loop, or nothing at all.

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use eventbox::app::App;
use eventbox::config::{ServeOptions, WatchKind};
use eventbox::pull::{self, ProgressMode, PullOptions};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::helpers::{
    copy_dir, metric, serve_app, serve_app_on, spawn_app, Answer, TempData, TestApp, DEMO_TOKEN,
};

const PERIOD: Duration = Duration::from_millis(200);

/// The kiosk's options: the data folder, no watching (the refresher reloads what it pulls),
/// refreshing every [`PERIOD`].
fn kiosk_options(data: &Path) -> ServeOptions {
    ServeOptions {
        watch: WatchKind::Off,
        refresh_every: Some(PERIOD),
        ..ServeOptions::for_folder(data)
    }
}

/// A kiosk serving `data`, loaded, refreshing.
async fn kiosk(data: &Path) -> (TestApp, eventbox::kiosk::Refresher) {
    let app = App::with_options(&kiosk_options(data)).expect("options serve takes");
    app.load().expect("the kiosk's data folder lists");
    let refresher = app.refresh_as_configured().expect("refreshing is on");
    (serve_app(app).await, refresher)
}

/// Pulls `from` into `into` as `eventbox pull --force` does (over the bundle there, if any).
pub(crate) async fn pull_into(from: &str, into: &Path) {
    let mut o = PullOptions::new(from, DEMO_TOKEN, into);
    o.force = true;
    o.progress = ProgressMode::Quiet;
    o.timeout = Duration::from_secs(5);
    pull::run(&o).await.expect("the first pull");
}

/// A source serving the demo as `summit` and a kiosk data folder it was pulled into:
/// (the source's data, the source, the kiosk's data).
async fn pulled_summit() -> (TempData, TestApp, TempData) {
    let source_data = TempData::new();
    source_data.with_demo("summit");
    let source = spawn_app(source_data.path()).await;
    let kiosk_data = TempData::new();
    pull_into(&source.base, &kiosk_data.path().join("summit")).await;
    (source_data, source, kiosk_data)
}

/// Takes the `[source]` table out of the bundle.toml at `path` (a pull wrote one): its text
/// before.
pub(crate) fn without_source(path: &Path) -> String {
    let with_source = std::fs::read_to_string(path).expect("bundle.toml");
    let without = with_source.split("[source]").next().expect("the tokens");
    assert_ne!(without, with_source, "the pull wrote a [source]");
    std::fs::write(path, without).expect("write");
    with_source
}

/// Polls `probe` until it gives `Some`, failing the test with `what` after `within`.
pub(crate) async fn until<T, F: Future<Output = Option<T>>>(
    within: Duration,
    what: &str,
    mut probe: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `source` of bundle `name` in the kiosk's /status.
async fn source_status(kiosk: &TestApp, name: &str) -> Value {
    let status = kiosk
        .send(reqwest::Method::GET, "/status", None, None)
        .await
        .json();
    status["bundles"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["name"] == name))
        .map(|b| b["source"].clone())
        .unwrap_or(Value::Null)
}

/// Waits (up to 10 s) until the kiosk's source of `summit` is online.
async fn until_online(kiosk: &TestApp, what: &str) {
    until(Duration::from_secs(10), what, || async move {
        (source_status(kiosk, "summit").await["state"] == "online").then_some(())
    })
    .await;
}

/// Waits (up to `within`) until the kiosk serves the event titled `wanted`.
async fn until_title(kiosk: &TestApp, wanted: &str, within: Duration) {
    until(within, wanted, || async move {
        let a = kiosk.get("/api/v1/event", DEMO_TOKEN).await;
        (title(&a) == wanted).then_some(())
    })
    .await;
}

fn title(answer: &Answer) -> String {
    answer.json()["data"][0]["title"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn age(answer: &Answer) -> u64 {
    answer
        .header("age")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("an Age header in {:?}", answer.headers))
}

/// Renames the event at the source and reloads it there.
fn retitle(source_data: &Path, app: &App, title: &str) {
    let path = source_data.join("summit/event.json");
    let mut event: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("event.json")).expect("JSON");
    event["data"][0]["title"] = Value::String(title.to_string());
    std::fs::write(&path, serde_json::to_vec(&event).expect("JSON")).expect("written");
    app.load().expect("the source reloads");
}

/// Points a pulled bundle's `[source]` from `source` to `proxy` (a proxy in front of it).
fn through(bundle: &Path, source: &str, proxy: &str) {
    let toml = std::fs::read_to_string(bundle.join("bundle.toml")).expect("bundle.toml");
    std::fs::write(bundle.join("bundle.toml"), toml.replace(source, proxy))
        .expect("the source is the proxy");
}

/// A file's inode and bytes: a file written anew has another inode.
fn identity(path: &Path) -> (u64, Vec<u8>) {
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(path).expect("the file").ino();
    (inode, std::fs::read(path).expect("the file"))
}

/// A file's status change time (ctime): a new link to it, or one removed, changes it.
fn changed_at(path: &Path) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).expect("the file");
    (meta.ctime(), meta.ctime_nsec())
}

async fn metrics(app: &TestApp) -> String {
    app.send(reqwest::Method::GET, "/metrics", None, None)
        .await
        .text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kiosk_follows_its_source_serves_through_its_outage_and_comes_back_online() {
    let (source_data, source, kiosk_data) = pulled_summit().await;
    let bundle = kiosk_data.path().join("summit");

    // The bundle remembers its source: the API base, and when.
    let toml = std::fs::read_to_string(bundle.join("bundle.toml")).expect("bundle.toml");
    assert!(
        toml.contains(&format!(
            "[source]\nurl = \"{}/api/v1\"\npulled_at = ",
            source.base
        )),
        "{toml}"
    );

    let (kiosk_app, refresher) = kiosk(kiosk_data.path()).await;
    let kiosk = &kiosk_app;
    let first = kiosk.get("/api/v1/event", DEMO_TOKEN).await;
    assert_eq!(first.status.as_u16(), 200, "{}", first.text());
    assert!(age(&first) < 60, "{:?}", first.headers);
    assert_eq!(first.header("eventbox-source"), None);

    // A change at the source shows at the kiosk on a later refresh: the refresh pulls, stages,
    // checks and swaps it in. Bounded generously (25 periods), not timed: a machine running
    // two test suites at once took longer than two periods and a little slack.
    until_online(kiosk, "the first refresh").await;
    retitle(source_data.path(), &source.app, "Changed at the source");
    until_title(kiosk, "Changed at the source", Duration::from_secs(5)).await;

    // Unchanged refreshes are conditional: the source answers 304, and nothing is written.
    let source_ref = &source;
    let not_modified = || async move {
        let text = metrics(source_ref).await;
        metric(
            &text,
            "eventbox_http_requests_total{endpoint=\"event\",status=\"304\"}",
        )
        .unwrap_or(0.0)
    };
    until(
        Duration::from_secs(5),
        "a 304 at the source",
        || async move { (not_modified().await >= 1.0).then_some(()) },
    )
    .await;
    // A swap writes a new bundle.toml: a new inode, whatever its text. Nor is any file
    // touched: a link made to a kept file changes its ctime, which a watch sees as a change.
    let written = identity(&bundle.join("bundle.toml"));
    let touched = changed_at(&bundle.join("event.json"));
    let seen = not_modified().await;
    until(Duration::from_secs(5), "two more 304s", || async move {
        (not_modified().await >= seen + 2.0).then_some(())
    })
    .await;
    assert_eq!(
        identity(&bundle.join("bundle.toml")),
        written,
        "an unchanged refresh rewrote the bundle"
    );
    assert_eq!(
        changed_at(&bundle.join("event.json")),
        touched,
        "an unchanged refresh touched a file of the bundle"
    );
    assert!(age(&kiosk.get("/api/v1/event", DEMO_TOKEN).await) <= 1);

    // The source stops: the kiosk keeps answering, says so, and the age grows.
    let addr = source.base.trim_start_matches("http://").to_string();
    source.shutdown().await;
    let status = until(
        Duration::from_secs(10),
        "offline in /status",
        || async move {
            let s = source_status(kiosk, "summit").await;
            (s["state"] == "offline").then_some(s)
        },
    )
    .await;
    assert!(
        status["last_error"]
            .as_str()
            .is_some_and(|e| e.contains(&addr)),
        "{status}"
    );
    assert!(status["failures_in_a_row"].as_u64() >= Some(2), "{status}");
    assert!(status["last_success"].is_string(), "{status}");
    let offline = kiosk.get("/api/v1/event", DEMO_TOKEN).await;
    assert_eq!(offline.status.as_u16(), 200);
    assert_eq!(title(&offline), "Changed at the source");
    assert_eq!(offline.header("eventbox-source"), Some("offline"));
    let before = age(&offline);
    until(Duration::from_secs(5), "the Age grows", || async move {
        let a = kiosk.get("/api/v1/event", DEMO_TOKEN).await;
        assert_eq!(a.header("eventbox-source"), Some("offline"));
        (age(&a) > before).then_some(())
    })
    .await;
    let text = metrics(kiosk).await;
    assert_eq!(
        metric(&text, "eventbox_upstream_up{bundle=\"summit\"}"),
        Some(0.0),
        "{text}"
    );
    assert!(
        metric(&text, "eventbox_snapshot_age_seconds{bundle=\"summit\"}").is_some_and(|a| a >= 1.0),
        "{text}"
    );

    // The source is back at the same address: online after one success.
    let listener = TcpListener::bind(&addr).await.expect("the address again");
    let again = App::new(source_data.path());
    again.load().expect("the source loads");
    let _source = serve_app_on(listener, again);
    until_online(kiosk, "online again").await;
    let back = kiosk.get("/api/v1/event", DEMO_TOKEN).await;
    assert_eq!(back.header("eventbox-source"), None);
    assert!(age(&back) <= 1, "{:?}", back.headers);
    let text = metrics(kiosk).await;
    assert_eq!(
        metric(&text, "eventbox_upstream_up{bundle=\"summit\"}"),
        Some(1.0),
        "{text}"
    );
    refresher.stop().await;
    crate::pull::assert_no_leftovers(kiosk_data.path());
}

/// A file broken at the kiosk is not kept by the source's 304: once another file changes there,
/// the refresh that fails on it is followed by one that asks for every file anew; once the
/// kiosk has read it broken, the next refresh asks for every file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_broken_at_the_kiosk_is_replaced_when_the_source_changes_another() {
    let (source_data, source, kiosk_data) = pulled_summit().await;
    let bundle = kiosk_data.path().join("summit");
    let (kiosk_app, _refresher) = kiosk(kiosk_data.path()).await;
    let kiosk = &kiosk_app;
    until_online(kiosk, "the first refresh").await;

    let hotsite = bundle.join("hotsite.json");
    let good = std::fs::read(&hotsite).expect("hotsite.json");
    std::fs::write(&hotsite, b"{\"broken\": ").expect("broken");
    retitle(
        source_data.path(),
        &source.app,
        "Changed while a file was broken",
    );
    until_title(
        kiosk,
        "Changed while a file was broken",
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(std::fs::read(&hotsite).expect("hotsite.json"), good);
    let state = source_status(kiosk, "summit").await;
    assert_eq!(state["state"], "online", "{state}");

    // Broken again, and read so (as a watch would): with nothing changed at the source, the
    // next refresh asks for every file and mends it.
    std::fs::write(&hotsite, b"{\"broken\": ").expect("broken");
    kiosk_app.app.load().expect("the kiosk reloads");
    let hotsite = &hotsite;
    let good = &good;
    until(
        Duration::from_secs(10),
        "the broken file mended",
        || async move { (std::fs::read(hotsite).ok().as_ref() == Some(good)).then_some(()) },
    )
    .await;
}

/// A refresh replaces what it pulls, and nothing else: files the source was not asked for
/// (`company_events.json`, which a refresh never asks for, even with the key `pull --app`
/// named in `app_keys`; a hand-written `custom_getdata.json`) stay in the bundle and keep being
/// served. A refresh's swap used to drop them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_keeps_the_files_it_does_not_pull() {
    let (source_data, source, kiosk_data) = pulled_summit().await;
    let bundle = kiosk_data.path().join("summit");
    for file in ["custom_getdata.json", "company_events.json"] {
        assert!(
            !bundle.join(file).exists(),
            "{file} is not pulled without --app"
        );
        std::fs::copy(
            crate::helpers::demo_data().join("demo").join(file),
            bundle.join(file),
        )
        .expect("copied in");
    }
    // The operator's own: a hidden file and a folder, which the loader ignores.
    std::fs::write(bundle.join(".notes"), "desk 3 printer jams").expect("written");
    // An operator's copy named after a pulled file, and a pipe (never read: left behind).
    std::fs::write(bundle.join("event.bak"), "{}").expect("written");
    let fifo = std::process::Command::new("mkfifo")
        .arg(bundle.join(".pipe"))
        .status()
        .expect("mkfifo");
    assert!(fifo.success());
    std::fs::create_dir_all(bundle.join("backups/old")).expect("a folder");
    std::fs::write(bundle.join("backups/old/event.json"), "{}").expect("written");
    let toml = bundle.join("bundle.toml");
    let text = std::fs::read_to_string(&toml).expect("bundle.toml");
    std::fs::write(&toml, format!("app_keys = [\"a-company\"]\n{text}")).expect("write");
    let (kiosk_app, _refresher) = kiosk(kiosk_data.path()).await;
    let kiosk = &kiosk_app;
    let company = || {
        kiosk.get_with(
            "/api/v1/customclient/events",
            DEMO_TOKEN,
            &[("authorization-app", "a-company")],
        )
    };
    let before = company().await;
    assert_eq!(before.status.as_u16(), 200, "{}", before.text());
    assert_ne!(
        before.json()["data"],
        serde_json::json!([]),
        "{}",
        before.text()
    );
    until_online(kiosk, "the first refresh").await;

    retitle(source_data.path(), &source.app, "Changed at the source");
    until_title(kiosk, "Changed at the source", Duration::from_secs(10)).await;

    for file in [
        "custom_getdata.json",
        "company_events.json",
        ".notes",
        "backups/old/event.json",
        "event.bak",
    ] {
        assert!(bundle.join(file).is_file(), "the refresh dropped {file}");
    }
    assert_eq!(
        std::fs::read_to_string(bundle.join(".notes")).expect("kept"),
        "desk 3 printer jams"
    );
    let after = company().await;
    assert_eq!(after.status.as_u16(), 200, "{}", after.text());
    assert_eq!(after.text(), before.text());
}

/// Before its first refresh, a followed bundle is `pending` in `/status` (it said
/// `not_followed` until that refresh). Its bundle.toml then loses its `[source]` and gets it
/// back: it is still followed, and `/status` says so (it said `not_followed` for good, while
/// the refresh loop went on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_bundle_is_pending_before_its_first_refresh_and_after_its_source_comes_back() {
    let (_source_data, _source, kiosk_data) = pulled_summit().await;
    let app = App::with_options(&ServeOptions {
        refresh_every: Some(Duration::from_secs(3600)),
        ..kiosk_options(kiosk_data.path())
    })
    .expect("options serve takes");
    app.load().expect("the kiosk loads");
    let _refresher = app.refresh_as_configured().expect("refreshing is on");
    let kiosk = &serve_app(app).await;
    let state = || async { source_status(kiosk, "summit").await["state"].clone() };
    until(
        Duration::from_secs(10),
        "pending before the first refresh",
        || async { (state().await == "pending").then_some(()) },
    )
    .await;
    let toml = kiosk_data.path().join("summit/bundle.toml");
    let with_source = without_source(&toml);
    kiosk.app.load().expect("reloads");
    assert_eq!(source_status(kiosk, "summit").await, Value::Null);
    std::fs::write(&toml, &with_source).expect("write");
    kiosk.app.load().expect("reloads");
    // Followed again at that reload, not a period (an hour) later.
    until(Duration::from_secs(10), "pending again", || async {
        (state().await == "pending").then_some(())
    })
    .await;
}

/// A second copy of the bundle, naming the same token, loses the clash and is not served:
/// `/status` still shows where it comes from, beside the clash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_that_loses_a_token_clash_still_shows_its_source() {
    let (_source_data, _source, kiosk_data) = pulled_summit().await;
    let (kiosk_app, _refresher) = kiosk(kiosk_data.path()).await;
    let kiosk = &kiosk_app;
    until_online(kiosk, "the first refresh").await;
    copy_dir(
        &kiosk_data.path().join("summit"),
        &kiosk_data.path().join("summit2"),
    );
    kiosk_app.app.load().expect("the kiosk reloads");
    let status = kiosk
        .send(reqwest::Method::GET, "/status", None, None)
        .await
        .json();
    let copy = status["bundles"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["name"] == "summit2"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(copy["served"], false, "{status}");
    assert!(copy["errors"].to_string().contains("also named"), "{copy}");
    let source = &copy["source"];
    assert_eq!(
        source["url"],
        source_status(kiosk, "summit").await["url"],
        "{copy}"
    );
    assert!(source["url"].as_str().is_some(), "{copy}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_logs_each_change_of_state_once_not_each_failure() {
    let source_data = TempData::new();
    source_data.with_demo("summit");
    let source = spawn_app(source_data.path()).await;
    let kiosk_data = TempData::new();
    pull_into(&source.base, &kiosk_data.path().join("summit")).await;
    let data = kiosk_data.path().to_str().expect("UTF-8");
    let mut served = crate::cli::start_binary(
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--no-watch",
            "--data",
            data,
            "--refresh-every",
            "200ms",
            "--offline-after",
            "2",
        ],
        &[("RUST_LOG", "info")],
    );
    let client = crate::helpers::client();
    let status_of = |client: reqwest::Client, base: String| async move {
        let Ok(res) = client.get(format!("{base}/status")).send().await else {
            return Value::Null;
        };
        let body = res.bytes().await.unwrap_or_default();
        let status: Value = serde_json::from_slice(&body).unwrap_or_default();
        status["bundles"][0]["source"].clone()
    };
    let base = served.base.clone();
    let (c, b) = (&client, &base);
    until(Duration::from_secs(10), "online", || async move {
        (status_of(c.clone(), b.clone()).await["state"] == "online").then_some(())
    })
    .await;

    let addr = source.base.trim_start_matches("http://").to_string();
    source.shutdown().await;
    // Offline, then several more failures: still one line.
    until(
        Duration::from_secs(15),
        "five failures in a row",
        || async move {
            let s = status_of(c.clone(), b.clone()).await;
            (s["failures_in_a_row"].as_u64() >= Some(5)).then_some(())
        },
    )
    .await;
    let listener = TcpListener::bind(&addr).await.expect("the address again");
    let again = App::new(source_data.path());
    again.load().expect("the source loads");
    let _source = serve_app_on(listener, again);
    until(Duration::from_secs(10), "online again", || async move {
        (status_of(c.clone(), b.clone()).await["state"] == "online").then_some(())
    })
    .await;
    served.signal("TERM");
    assert_eq!(served.wait_exit(), Some(0));

    let log = served.stderr();
    assert_eq!(log.matches("source offline").count(), 1, "{log}");
    assert_eq!(log.matches("source back online").count(), 1, "{log}");
    assert!(log.contains("following the sources bundles name"), "{log}");
    assert!(
        !log.contains(DEMO_TOKEN),
        "a whole token in the log:\n{log}"
    );
    crate::pull::assert_no_leftovers(kiosk_data.path());
}

/// How a bad source answers every request.
#[derive(Debug, Clone, Copy)]
enum Bad {
    Garbage,
    Html,
    HalfBody,
    RedirectLoop,
    Hang,
    /// 401: the token in bundle.toml is not the source's.
    Refused,
}

/// A source that answers every connection the same bad way; dropped, it stops.
struct BadSource {
    base: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for BadSource {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl BadSource {
    async fn start(bad: Bad) -> BadSource {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut head = [0u8; 4096];
                let _ = socket.read(&mut head).await;
                let answer: &[u8] = match bad {
                    Bad::Garbage => b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\nconnection: close\r\n\r\n\x00\x01garbage}{",
                    Bad::Html => b"HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: 39\r\nconnection: close\r\n\r\n<html><body>Please log in</body></html>",
                    Bad::HalfBody => b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\nconnection: close\r\n\r\n{\"data\": [{\"id_event\": 1,",
                    Bad::RedirectLoop => b"HTTP/1.1 302 Found\r\nlocation: /api/v1/event\r\ncontent-length: 0\r\n\r\n",
                    Bad::Refused => b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    Bad::Hang => {
                        // Keep the connection open, say nothing.
                        held.push(socket);
                        continue;
                    }
                };
                let _ = socket.write_all(answer).await;
                if matches!(bad, Bad::RedirectLoop) {
                    // Keep-alive: answer the follow-ups on this connection too.
                    let mut socket = socket;
                    tokio::spawn(async move {
                        let mut buf = [0u8; 4096];
                        while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {
                            if socket.write_all(answer).await.is_err() {
                                break;
                            }
                        }
                    });
                } else {
                    let _ = socket.shutdown().await;
                }
            }
        });
        BadSource { base, task }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_source_is_a_failed_refresh_with_a_clear_message_and_the_old_snapshot_serves() {
    let cases = [
        (
            Bad::Garbage,
            "the payments answer does not list references: expected value",
        ),
        (Bad::Html, "a web page, not the API's JSON"),
        (Bad::HalfBody, "gave up after 2 attempts"),
        (Bad::RedirectLoop, "redirect"),
        (Bad::Hang, "no complete answer within 1000 ms"),
        // The token is bundle.toml's, not a --token's (serve has none).
        (Bad::Refused, "(401) at"),
    ];
    let data = TempData::new();
    let mut sources = Vec::new();
    for (i, (bad, _)) in cases.iter().enumerate() {
        let source = BadSource::start(*bad).await;
        let name = format!("bad{i}");
        data.with_demo(&name);
        data.write(
            &format!("{name}/bundle.toml"),
            format!(
                "tokens = [\"token-{i}\"]\n\n[source]\nurl = \"{}\"\npulled_at = 2026-11-23T14:03:27Z\n",
                source.base
            ),
        );
        sources.push(source);
    }
    let (kiosk_app, refresher) = kiosk(data.path()).await;
    let kiosk = &kiosk_app;

    for (i, (bad, expected)) in cases.iter().enumerate() {
        let name = &format!("bad{i}");
        let status = until(
            Duration::from_secs(20),
            &format!("{bad:?} fails"),
            || async move {
                let s = source_status(kiosk, name).await;
                s["last_error"].is_string().then_some(s)
            },
        )
        .await;
        let error = status["last_error"].as_str().unwrap_or_default();
        assert!(error.contains(expected), "{bad:?}: {error}");
        if let Bad::Refused = bad {
            assert!(error.contains("check the first token of"), "{error}");
            assert!(error.ends_with("bundle.toml"), "{error}");
        }
        assert!(!error.contains(&format!("token-{i}")), "{error}");
        assert_eq!(status["last_success"], Value::Null, "{bad:?}: {status}");
        // The old snapshot serves, with its age from the pulled_at it was written with.
        let a = kiosk.get("/api/v1/event", &format!("token-{i}")).await;
        assert_eq!(a.status.as_u16(), 200, "{bad:?}");
        assert!(title(&a).starts_with("33º Congresso"), "{bad:?}");
        assert!(age(&a) > 60, "{bad:?}: {:?}", a.headers);
    }
    // Nothing half-written is left in the data folder, nothing was swapped in.
    refresher.stop().await;
    crate::pull::assert_no_leftovers(data.path());
    drop(sources);
}

/// A source serving the demo as `summit`, and a kiosk data folder whose `desk` holds only a
/// bundle.toml: `head` (its tokens and other tables), then `[source]` naming that source.
async fn bundle_toml_alone(head: &str) -> (TempData, TestApp, TempData) {
    let source_data = TempData::new();
    source_data.with_demo("summit");
    let source = spawn_app(source_data.path()).await;
    let data = TempData::new();
    data.write(
        "desk/bundle.toml",
        format!("{head}[source]\nurl = \"{}\"\n", source.base),
    );
    (source_data, source, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kiosk_set_up_with_a_bundle_toml_alone_fills_itself_from_its_source() {
    let head = format!(
        "# The desk in hall B.\ntokens = [\"{DEMO_TOKEN}\"]  # the organiser's\n[simulate]\nlatency_ms = 0\n"
    );
    let (_source_data, source, data) = bundle_toml_alone(&head).await;
    let (kiosk_app, refresher) = kiosk(data.path()).await;
    let kiosk = &kiosk_app;
    // Not served yet: the folder holds no event (its token is good: 503, not 401).
    kiosk
        .get("/api/v1/event", DEMO_TOKEN)
        .await
        .assert_error(503, "bundle_unavailable");

    let served = until(
        Duration::from_secs(10),
        "the first refresh fills it",
        || async move {
            let a = kiosk.get("/api/v1/event", DEMO_TOKEN).await;
            (a.status.as_u16() == 200).then_some(a)
        },
    )
    .await;
    assert!(title(&served).starts_with("33º Congresso"));
    assert!(age(&served) <= 1, "{:?}", served.headers);
    refresher.stop().await;
    // The refresh kept bundle.toml as it was written, comments included, and added the time.
    let toml = std::fs::read_to_string(data.path().join("desk/bundle.toml")).expect("bundle.toml");
    assert!(
        toml.starts_with(&format!(
            "{head}[source]\nurl = \"{}\"\npulled_at = ",
            source.base
        )),
        "{toml}"
    );
}

#[tokio::test]
async fn a_hand_written_source_is_checked() {
    let data = TempData::new();
    data.with_demo("summit").write(
        "summit/bundle.toml",
        "tokens = [\"demo-token\"]\n[source]\nurl = \"ftp://host/api/v1\"\npulled_at = \"last week\"\n",
    );
    let app = spawn_app(data.path()).await;
    let status = app
        .send(reqwest::Method::GET, "/status", None, None)
        .await
        .json();
    let errors = status["bundles"][0]["errors"].to_string();
    assert!(
        errors.contains("source.url: only http and https sources can be pulled from"),
        "{errors}"
    );
    assert!(errors.contains("source.pulled_at"), "{errors}");
    assert_eq!(status["bundles"][0]["served"], false);
}

/// A source that sends no `ETag` (ASP.NET's default; here a proxy that passes on bodies and
/// statuses only): an unchanged refresh finds every answer equal to the file in place and
/// rewrites nothing. Before, each period rewrote, swapped and reloaded the whole bundle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_without_etags_does_not_make_each_refresh_rewrite_the_bundle() {
    use crate::pull::{Act, Proxy};

    let (source_data, source, kiosk_data) = pulled_summit().await;
    let proxy = Proxy::start(&source.base, |_, _, _| Act::Forward).await;
    let bundle = kiosk_data.path().join("summit");
    through(&bundle, &source.base, &proxy.base);
    let (kiosk_app, _refresher) = kiosk(kiosk_data.path()).await;
    let kiosk = &kiosk_app;
    until_online(kiosk, "the first refresh").await;

    let written = identity(&bundle.join("bundle.toml"));
    let event = identity(&bundle.join("event.json"));
    let proxy_ref = &proxy;
    let seen = proxy.count("/event");
    until(
        Duration::from_secs(10),
        "three more refreshes",
        || async move { (proxy_ref.count("/event") >= seen + 3).then_some(()) },
    )
    .await;
    assert_eq!(
        identity(&bundle.join("bundle.toml")),
        written,
        "an unchanged refresh rewrote the bundle"
    );
    assert_eq!(identity(&bundle.join("event.json")), event);

    // A change still comes through.
    retitle(source_data.path(), &source.app, "Changed at the source");
    until_title(kiosk, "Changed at the source", Duration::from_secs(10)).await;
}

/// One detail the source fails to give (503, twice) no longer fails the whole refresh: its
/// earlier copy is kept, everything else comes through, and the log says which. On a flaky
/// venue link one detail of thousands failing twice kept a kiosk stale, every period. The copy
/// is not wholly current, so its `pulled_at` (where `Age` counts from) stays (it was set anew
/// when anything else changed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detail_the_source_does_not_give_keeps_its_copy_and_the_rest_refreshes() {
    use crate::pull::{references, Act, Proxy};

    let (source_data, source, kiosk_data) = pulled_summit().await;
    let failing = references(&source, DEMO_TOKEN)
        .await
        .first()
        .expect("a reference")
        .clone();
    let refused = failing.clone();
    let proxy = Proxy::start(&source.base, move |_, reference, _| match reference {
        Some(r) if r == refused => Act::Answer(503, vec![], "busy".into()),
        _ => Act::Forward,
    })
    .await;
    let bundle = kiosk_data.path().join("summit");
    let detail = bundle
        .join("payment_details")
        .join(format!("{failing}.json"));
    let before = std::fs::read(&detail).expect("pulled");
    through(&bundle, &source.base, &proxy.base);
    let pulled_at = || {
        let toml = std::fs::read_to_string(bundle.join("bundle.toml")).expect("bundle.toml");
        toml.lines()
            .find(|l| l.starts_with("pulled_at"))
            .map(str::to_string)
            .expect("a pulled_at line")
    };
    let pulled = pulled_at();
    let (kiosk_app, _refresher) = kiosk(kiosk_data.path()).await;
    let kiosk = &kiosk_app;

    retitle(source_data.path(), &source.app, "Changed at the source");
    until_title(kiosk, "Changed at the source", Duration::from_secs(10)).await;
    assert_eq!(std::fs::read(&detail).expect("kept"), before);
    assert_eq!(
        pulled_at(),
        pulled,
        "a copy with a detail kept is not wholly current"
    );
    let served = kiosk
        .get(
            &format!("/api/v1/payments/details?reference={failing}"),
            DEMO_TOKEN,
        )
        .await;
    assert_eq!(served.status.as_u16(), 200, "{}", served.text());
}

/// A desk set up with a bundle.toml alone whose token the source refuses is never served, and
/// `/status` still shows its source with the refusal (it showed no source at all, so the status
/// page said "no source" and only the log told the real cause).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_toml_alone_with_a_refused_token_shows_its_source_and_why() {
    let (_source_data, _source, data) = bundle_toml_alone("tokens = [\"demo-tokn\"]\n").await;
    let (kiosk_app, _refresher) = kiosk(data.path()).await;
    let kiosk = &kiosk_app;
    let status = until(
        Duration::from_secs(10),
        "the refusal shown",
        || async move {
            let s = source_status(kiosk, "desk").await;
            s["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("(401)"))
                .then_some(s)
        },
    )
    .await;
    assert!(status["state"].is_string(), "{status}");
}
