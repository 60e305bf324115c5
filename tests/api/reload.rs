//! Hot reload as operators use it: every common way of saving, broken edits, new and removed
//! bundles, token changes, poll mode, and the guarantee that a reader always sees one whole
//! version. File watching is asynchronous, so these tests poll the server (bounded) until the
//! change shows.

use std::path::Path;
use std::time::{Duration, Instant};

use eventbox::app::App;
use eventbox::watch::{WatchMode, Watcher};
use reqwest::Method;
use serde_json::Value;

use crate::helpers::{demo_data, serve_app, Answer, TempData, TestApp, DEMO_TOKEN};

const DEBOUNCE: Duration = Duration::from_millis(50);
const PATIENCE: Duration = Duration::from_secs(10);

/// A demo bundle in a temporary folder, served and watched.
struct Watched {
    data: TempData,
    app: TestApp,
    _watcher: Option<Watcher>,
}

async fn watched(mode: WatchMode) -> Watched {
    watched_with(mode, DEBOUNCE).await
}

/// As [`watched`], with another quiet time.
async fn watched_with(mode: WatchMode, debounce: Duration) -> Watched {
    let data = TempData::new();
    data.with_demo("demo");
    let root = data.path().to_path_buf();
    watching(data, &root, mode, debounce).await
}

/// Serves `root` (the data folder, or a path into `data`) as `serve` does: watch first, then
/// load.
async fn watching(data: TempData, root: &Path, mode: WatchMode, debounce: Duration) -> Watched {
    let app = App::new(root);
    let watcher = app.watch(mode, debounce).await.expect("watching starts");
    app.load().expect("loads");
    Watched {
        app: serve_app(app).await,
        data,
        _watcher: watcher,
    }
}

impl Watched {
    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.data.path().join(rel)
    }

    /// Polls `path` until `done` holds for the answer; fails after [`PATIENCE`].
    async fn until(
        &self,
        path: &str,
        token: &str,
        what: &str,
        done: impl Fn(&Answer) -> bool,
    ) -> Answer {
        let start = Instant::now();
        loop {
            let res = self.app.get(path, token).await;
            if done(&res) {
                return res;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "{what}: not seen within {PATIENCE:?}; last answer {} {}",
                res.status,
                res.text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn until_title(&self, title: &str) -> Answer {
        self.until(
            "/api/v1/event",
            DEMO_TOKEN,
            &format!("title {title:?}"),
            |r| r.status == 200 && r.json()["data"][0]["title"] == title,
        )
        .await
    }
}

/// The demo event file with another title.
fn event_titled(title: &str) -> String {
    let text = std::fs::read_to_string(demo_data().join("demo/event.json")).expect("demo event");
    let mut v: Value = serde_json::from_str(&text).expect("JSON");
    v["data"][0]["title"] = Value::String(title.to_string());
    v.to_string()
}

fn write(path: &Path, contents: impl AsRef<[u8]>) {
    std::fs::write(path, contents).expect("write");
}

#[tokio::test]
async fn writing_in_place_is_served() {
    let w = watched(WatchMode::Native).await;

    write(&w.path("demo/event.json"), event_titled("Escrito no lugar"));

    w.until_title("Escrito no lugar").await;
}

#[tokio::test]
async fn a_temporary_file_renamed_over_is_served() {
    let w = watched(WatchMode::Native).await;

    write(
        &w.path("demo/.event.json.swp"),
        event_titled("Renomeado por cima"),
    );
    std::fs::rename(w.path("demo/.event.json.swp"), w.path("demo/event.json")).expect("rename");

    w.until_title("Renomeado por cima").await;
}

#[tokio::test]
async fn deleting_and_recreating_is_served() {
    let w = watched(WatchMode::Native).await;

    std::fs::remove_file(w.path("demo/event.json")).expect("remove");
    write(
        &w.path("demo/event.json"),
        event_titled("Apagado e recriado"),
    );

    w.until_title("Apagado e recriado").await;
}

#[tokio::test]
async fn a_bundle_folder_copied_in_starts_serving_and_a_removed_one_stops() {
    let w = watched(WatchMode::Native).await;

    w.data.with_demo("copied");
    write(
        &w.path("copied/bundle.toml"),
        "tokens = [\"copied-token\"]\n",
    );
    w.until("/api/v1/event", "copied-token", "the copied bundle", |r| {
        r.status == 200
    })
    .await;

    std::fs::remove_dir_all(w.path("copied")).expect("remove folder");
    let gone = w
        .until("/api/v1/event", "copied-token", "the removed bundle", |r| {
            r.status == 401
        })
        .await;
    gone.assert_error(401, "invalid_token");
    assert_eq!(
        w.app.get("/api/v1/event", DEMO_TOKEN).await.status,
        200,
        "the other bundle still serves"
    );
}

#[tokio::test]
async fn a_folder_renamed_in_from_a_staging_name_starts_serving() {
    let w = watched(WatchMode::Native).await;

    w.data.with_demo("_staging");
    write(
        &w.path("_staging/bundle.toml"),
        "tokens = [\"staged-token\"]\n",
    );
    std::fs::rename(w.path("_staging"), w.path("staged")).expect("rename folder");

    w.until(
        "/api/v1/event",
        "staged-token",
        "the renamed-in bundle",
        |r| r.status == 200,
    )
    .await;
}

#[tokio::test]
async fn a_broken_edit_keeps_the_last_good_version_until_it_is_fixed() {
    let w = watched(WatchMode::Native).await;
    let before = w.app.get("/api/v1/payments", DEMO_TOKEN).await;

    write(
        &w.path("demo/payments.json"),
        "{\"data\": [\n  {\"id_event\": }\n]}",
    );
    let status = w
        .until("/status", DEMO_TOKEN, "the error in /status", |r| {
            r.json()["bundles"][0]["errors"]
                .as_array()
                .is_some_and(|e| !e.is_empty())
        })
        .await
        .json();
    let error = status["bundles"][0]["errors"][0]
        .as_str()
        .expect("an error line");
    assert!(
        error.ends_with("demo/payments.json:2:16: expected value"),
        "{error}"
    );
    assert_eq!(
        status["bundles"][0]["served"], true,
        "the last good version is served"
    );
    let during = w.app.get("/api/v1/payments", DEMO_TOKEN).await;
    assert_eq!(
        during.body, before.body,
        "the last good version is served byte for byte"
    );

    write(&w.path("demo/payments.json"), r#"{"data": [], "count": 0}"#);
    w.until("/api/v1/payments", DEMO_TOKEN, "the fix", |r| {
        r.text() == r#"{"data":[],"count":0}"#
    })
    .await;
    let status = w.app.send(Method::GET, "/status", None, None).await.json();
    assert_eq!(status["bundles"][0]["errors"], serde_json::json!([]));
}

/// After a failed reload, `/status` shows the failed attempt's problems and, apart, the served
/// version's own warnings: they are still true of what is answered (before, they vanished with
/// the attempt that replaced them).
#[tokio::test]
async fn the_served_versions_warnings_stay_in_status_after_a_failed_reload() {
    let w = watched(WatchMode::Native).await;
    let status = || async { w.app.send(Method::GET, "/status", None, None).await.json() };
    let lines = |v: &Value, key: &str| -> Vec<String> {
        v[key].as_array().map_or_else(Vec::new, |a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
    };
    let bundle_toml = w.path("demo/bundle.toml");
    let tokens = format!("tokens = [\"{DEMO_TOKEN}\"]\n");
    write(&bundle_toml, format!("{tokens}colour = \"blue\"\n"));
    w.until("/status", DEMO_TOKEN, "the unknown key's warning", |r| {
        lines(&bundle_status(&r.json(), "demo"), "warnings")
            .iter()
            .any(|l| l.contains("colour"))
    })
    .await;
    let served = bundle_status(&status().await, "demo");
    assert!(served.get("served_warnings").is_none(), "{served}");

    // A broken file, then the warning fixed: the attempt has the error and no warning, the
    // version still served has its warning.
    write(&w.path("demo/payments.json"), "{\"data\": [");
    w.until("/status", DEMO_TOKEN, "the broken file's error", |r| {
        !errors_of(&r.json(), "demo").is_empty()
    })
    .await;
    write(&bundle_toml, &tokens);
    let failed = w
        .until(
            "/status",
            DEMO_TOKEN,
            "the attempt without the warning",
            |r| {
                let demo = bundle_status(&r.json(), "demo");
                lines(&demo, "warnings").is_empty() && !lines(&demo, "errors").is_empty()
            },
        )
        .await;
    let demo = bundle_status(&failed.json(), "demo");
    assert_eq!(demo["served"], true, "{demo}");
    let kept = lines(&demo, "served_warnings");
    assert!(
        kept.len() == 1 && kept[0].contains("demo/bundle.toml") && kept[0].contains("colour"),
        "{demo}"
    );

    // Fixed: the new version serves, with no warning of its own.
    write(
        &w.path("demo/payments.json"),
        std::fs::read(demo_data().join("demo/payments.json")).expect("the demo payments"),
    );
    w.until("/status", DEMO_TOKEN, "the fixed version served", |r| {
        errors_of(&r.json(), "demo").is_empty()
    })
    .await;
    let demo = bundle_status(&status().await, "demo");
    assert!(demo.get("served_warnings").is_none(), "{demo}");
}

#[tokio::test]
async fn a_token_change_takes_effect_and_the_old_token_stops() {
    let w = watched(WatchMode::Native).await;

    write(
        &w.path("demo/bundle.toml"),
        "tokens = [\"rotated-token\"]\n",
    );

    w.until("/api/v1/event", "rotated-token", "the new token", |r| {
        r.status == 200
    })
    .await;
    w.app
        .get("/api/v1/event", DEMO_TOKEN)
        .await
        .assert_error(401, "invalid_token");
}

/// A leaked only token taken out while another file is broken: the last good version, which
/// goes on serving through the broken file, stops for it too.
#[tokio::test]
async fn emptying_the_token_list_stops_the_last_good_version_at_once() {
    let w = watched(WatchMode::Native).await;
    write(&w.path("demo/event.json"), "{\"data\": 3}");
    w.until("/status", "", "the broken file reported", |r| {
        !errors_of(&r.json(), "demo").is_empty()
    })
    .await;
    let kept = w.app.get("/api/v1/event", DEMO_TOKEN).await;
    assert_eq!(kept.status, 200, "the last good version serves");

    write(&w.path("demo/bundle.toml"), "tokens = []\n");
    w.until("/api/v1/event", DEMO_TOKEN, "the token stopped", |r| {
        r.status == 401
    })
    .await;
    let status = w.app.send(Method::GET, "/status", None, None).await.json();
    let errors = errors_of(&status, "demo");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("at least one token is required")),
        "{errors:?}"
    );
}

#[tokio::test]
async fn poll_mode_picks_changes_up() {
    let w = watched(WatchMode::Poll(Duration::from_millis(100))).await;

    write(
        &w.path("demo/event.json"),
        event_titled("Visto por varredura"),
    );

    w.until_title("Visto por varredura").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_see_one_whole_version_while_a_writer_rewrites_it() {
    let w = watched(WatchMode::Native).await;
    let versions = [event_titled("Versão A"), event_titled("Versão B")];
    write(&w.path("demo/event.json"), &versions[0]);
    w.until_title("Versão A").await;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));

    let mut readers = Vec::new();
    for _ in 0..8 {
        let (client, url, done) = (
            w.app.client.clone(),
            format!("{}/api/v1/event", w.app.base),
            done.clone(),
        );
        let versions = versions.clone();
        readers.push(tokio::spawn(async move {
            let (mut seen, mut bad) = ([0usize; 2], Vec::new());
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let res = client
                    .get(&url)
                    .header("Authorization-Token", DEMO_TOKEN)
                    .send()
                    .await;
                match res {
                    Ok(r) if r.status() == 200 => {
                        let body = r.text().await.unwrap_or_default();
                        match versions.iter().position(|v| *v == body) {
                            Some(i) => seen[i] += 1,
                            None => bad.push(format!("200 with another body: {body:.120}")),
                        }
                    }
                    Ok(r) => bad.push(format!("status {}", r.status())),
                    Err(e) => bad.push(format!("request failed: {e}")),
                }
            }
            (seen, bad)
        }));
    }
    // Each rewrite is followed by a pause longer than the quiet time, so that each version is
    // loaded and served while the readers keep reading (rewrites closer together are coalesced).
    for i in 0..20 {
        write(&w.path("demo/event.json"), &versions[(i + 1) % 2]);
        tokio::time::sleep(DEBOUNCE * 2).await;
    }
    w.until_title("Versão A").await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);

    let mut total = [0usize; 2];
    for r in readers {
        let (seen, bad) = r.await.expect("reader");
        assert!(bad.is_empty(), "a reader saw: {bad:#?}");
        total[0] += seen[0];
        total[1] += seen[1];
    }
    assert!(
        total[0] > 0 && total[1] > 0,
        "both versions were seen: {total:?}"
    );
}

#[tokio::test]
async fn readyz_is_503_until_the_first_load_then_200() {
    let data = TempData::new();
    data.with_demo("demo");
    let app = serve_app(App::new(data.path())).await;

    let before = app.send(Method::GET, "/readyz", None, None).await;
    before.assert_error(503, "not_ready");
    assert_eq!(before.header("retry-after"), Some("1"));
    app.get("/api/v1/event", DEMO_TOKEN)
        .await
        .assert_error(503, "not_ready");
    assert_eq!(
        app.send(Method::GET, "/healthz", None, None).await.status,
        200,
        "alive while loading"
    );
    // The desk's status page holds no data: it is served from the start (its script shows
    // what /status's 503 says is awaited). Before, 503 too: an error page at the desk.
    let page = app.send(Method::GET, "/_ui", None, None).await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains("<html"), "{}", page.text());
    // Never framed by another site (a remote operator types the admin token into it).
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(
        page.header("content-security-policy"),
        Some("frame-ancestors 'none'")
    );
    app.send(Method::GET, "/status", None, None)
        .await
        .assert_error(503, "not_ready");

    app.app.load().expect("loads");

    let after = app.send(Method::GET, "/readyz", None, None).await;
    assert_eq!(after.status, 200);
    assert_eq!(app.get("/api/v1/event", DEMO_TOKEN).await.status, 200);
}

/// Loaded, but with nothing to serve (every bundle broken, or none there): not ready, so a
/// rollout whose bundles all have errors does not replace replicas that serve. Once a bundle
/// is served, ready.
#[tokio::test]
async fn readyz_is_503_while_no_bundle_is_served() {
    let data = TempData::new();
    let app = serve_app(App::new(data.path())).await;
    app.app.load().expect("an empty folder loads");
    let empty = app.send(Method::GET, "/readyz", None, None).await;
    empty.assert_error(503, "not_ready");
    assert!(
        empty.text().contains("no bundle is served") && !empty.text().contains("still loading"),
        "{}",
        empty.text()
    );

    data.with_demo("demo");
    write(&data.path().join("demo/event.json"), "{");
    app.app.load().expect("loads");
    app.send(Method::GET, "/readyz", None, None)
        .await
        .assert_error(503, "not_ready");
    assert_eq!(
        app.send(Method::GET, "/healthz", None, None).await.status,
        200
    );

    write(
        &data.path().join("demo/event.json"),
        event_titled("Consertada"),
    );
    app.app.load().expect("loads");
    assert_eq!(
        app.send(Method::GET, "/readyz", None, None).await.status,
        200
    );
}

/// The value of one series of the metrics text, 0 when absent.
fn sample(metrics: &str, series: &str) -> f64 {
    crate::helpers::metric(metrics, series).unwrap_or(0.0)
}

#[tokio::test]
async fn metrics_move_when_requests_are_made_and_bundles_reload() {
    let w = watched(WatchMode::Native).await;
    let scrape = || async { w.app.send(Method::GET, "/metrics", None, None).await };
    let first = scrape().await;
    assert_eq!(first.status, 200);
    assert!(first
        .header("content-type")
        .is_some_and(|c| c.starts_with("application/openmetrics-text")));
    let before = first.text();

    for _ in 0..3 {
        w.app.get("/api/v1/event", DEMO_TOKEN).await;
    }
    w.app.get("/api/v1/event", "wrong").await;
    write(&w.path("demo/event.json"), event_titled("Métricas"));
    w.until_title("Métricas").await;
    let after = scrape().await.text();

    let ok = r#"eventbox_http_requests_total{endpoint="event",status="200"}"#;
    let refused = r#"eventbox_http_requests_total{endpoint="event",status="401"}"#;
    assert!(sample(&after, ok) >= sample(&before, ok) + 4.0, "{after}");
    assert_eq!(
        sample(&after, refused),
        sample(&before, refused) + 1.0,
        "{after}"
    );
    let count = r#"eventbox_http_request_duration_seconds_count{endpoint="event"}"#;
    assert!(
        sample(&after, count) >= sample(&before, count) + 4.0,
        "{after}"
    );
    let loads = r#"eventbox_bundle_loads_total{result="ok"}"#;
    assert!(sample(&after, loads) > sample(&before, loads), "{after}");
    assert_eq!(sample(&after, "eventbox_bundles_served"), 1.0);
    assert!(
        sample(&after, "eventbox_last_reload_timestamp_seconds")
            >= sample(&before, "eventbox_last_reload_timestamp_seconds")
    );
    assert_eq!(
        sample(&after, r#"eventbox_bundle_load_errors{bundle="demo"}"#),
        0.0
    );
}

/// The demo served with an event answer of about `title_bytes` (its title that long).
async fn large_event(title_bytes: usize) -> (TempData, crate::helpers::TestApp) {
    let data = TempData::new();
    data.with_demo("demo");
    let path = data.path().join("demo/event.json");
    let mut event: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("event.json")).expect("JSON");
    event["data"][0]["title"] = Value::String("x".repeat(title_bytes));
    write(&path, serde_json::to_string(&event).expect("JSON"));
    let app = crate::helpers::spawn_app(data.path()).await;
    (data, app)
}

/// A large answer still being read when shutdown comes is sent whole: hyper takes a prepared
/// body as one buffer and writes it as the client reads, and the connection used to be closed
/// as soon as hyper had taken it, cutting the answer.
#[tokio::test]
async fn shutdown_lets_a_large_answer_being_read_slowly_finish() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let (_data, app) = large_event(12_000_000).await;
    let addr: std::net::SocketAddr = app
        .base
        .trim_start_matches("http://")
        .parse()
        .expect("an address");
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .set_recv_buffer_size(64 * 1024)
        .expect("a small buffer");
    let mut conn = socket.connect(addr).await.expect("connect");
    conn.write_all(
        format!(
            "GET /api/v1/event HTTP/1.1\r\nHost: {addr}\r\nAuthorization-Token: {DEMO_TOKEN}\r\nAccept-Encoding: identity\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .expect("write");
    // The head and a first part of the body: the answer is under way.
    let mut received = vec![0u8; 256 * 1024];
    conn.read_exact(&mut received).await.expect("a first part");

    let stopping = tokio::spawn(app.shutdown());
    // The rest, read slowly (about 20 MB/s): hyper still holds much of it when shutdown comes.
    let mut chunk = vec![0u8; 128 * 1024];
    loop {
        let n = conn.read(&mut chunk).await.expect("read");
        if n == 0 {
            break;
        }
        received.extend_from_slice(&chunk[..n]);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let text = String::from_utf8_lossy(&received[..received.len().min(4096)]).to_string();
    let (head, _) = text.split_once("\r\n\r\n").expect("a head");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .expect("a length")
        .parse()
        .expect("a number");
    let body = received.len() - head.len() - 4;
    assert_eq!(
        body, length,
        "the answer was cut at {body} of {length} bytes"
    );
    tokio::time::timeout(Duration::from_secs(15), stopping)
        .await
        .expect("shutdown completes")
        .expect("clean");
}

/// As [`shutdown_lets_a_large_answer_being_read_slowly_finish`], over HTTP/2: hyper hands the
/// answer to h2 whole and h2 sends it as the client's window opens, so the connection moves
/// nothing while the reader pauses; a pause shorter than `drain::SETTLE` (1 s) is waited for.
#[tokio::test]
async fn over_http2_shutdown_lets_a_large_answer_being_read_slowly_finish() {
    let (_data, app) = large_event(3_000_000).await;
    let h2 = crate::helpers::client_builder()
        .http2_prior_knowledge()
        .http2_initial_stream_window_size(256 * 1024)
        .http2_initial_connection_window_size(256 * 1024)
        .build()
        .expect("client");
    let mut res = h2
        .get(format!("{}/api/v1/event", app.base))
        .header("Authorization-Token", DEMO_TOKEN)
        .header("Accept-Encoding", "identity")
        .send()
        .await
        .expect("an answer");
    let length = res.content_length().expect("a length");
    let mut received = 0;
    while received < 256 * 1024 {
        received += res.chunk().await.expect("a chunk").expect("more").len() as u64;
    }
    let stopping = tokio::spawn(app.shutdown());
    // The rest, a window at a time with a pause after each: while the reader pauses the
    // window is shut and nothing moves either way (pauses up to a second are waited for).
    let mut window = 0;
    loop {
        match res.chunk().await {
            Ok(Some(chunk)) => {
                received += chunk.len() as u64;
                window += chunk.len();
            }
            Ok(None) => break,
            Err(e) => panic!("cut at {received} of {length} bytes: {e}"),
        }
        if window >= 256 * 1024 {
            window = 0;
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
    }
    assert_eq!(received, length);
    tokio::time::timeout(Duration::from_secs(15), stopping)
        .await
        .expect("shutdown completes")
        .expect("clean");
}

#[tokio::test]
async fn shutdown_lets_a_request_in_flight_finish() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let app = crate::helpers::spawn_app(&demo_data()).await;
    let addr = app.base.trim_start_matches("http://").to_string();
    let body = br#"{"reference":"PG2026000104"}"#;
    let mut conn = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let head = format!(
        "GET /api/v1/payments/details HTTP/1.1\r\nHost: {addr}\r\nAuthorization-Token: {DEMO_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.expect("write head");
    conn.write_all(&body[..5])
        .await
        .expect("write part of the body");
    // Give the server time to take the request in (its headers are read): it is now in flight.
    let warm = app.get("/healthz", "").await;
    assert_eq!(warm.status, 200);

    let stopping = tokio::spawn(app.shutdown());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !stopping.is_finished(),
        "shutdown waits for the request in flight"
    );
    conn.write_all(&body[5..]).await.expect("write the rest");
    let mut raw = String::new();
    conn.read_to_string(&mut raw)
        .await
        .expect("read the answer");

    assert!(raw.starts_with("HTTP/1.1 200 OK"), "{raw}");
    assert!(
        raw.contains("\"reference_payment\":\"PG2026000104\""),
        "{raw}"
    );
    tokio::time::timeout(Duration::from_secs(5), stopping)
        .await
        .expect("shutdown completes")
        .expect("clean");
    assert!(
        tokio::net::TcpStream::connect(&addr).await.is_err(),
        "no new connections after shutdown"
    );
}

/// The `/status` entry of one bundle.
fn bundle_status(status: &Value, name: &str) -> Value {
    status["bundles"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["name"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("no bundle {name} in {status}"))
}

fn errors_of(status: &Value, name: &str) -> Vec<String> {
    bundle_status(status, name)["errors"]
        .as_array()
        .map(|e| {
            e.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn an_edit_never_takes_a_token_another_bundle_serves() {
    let w = watched(WatchMode::Native).await;
    w.data.with_demo("b");
    write(&w.path("b/bundle.toml"), "tokens = [\"b-token\"]\n");
    write(&w.path("b/event.json"), event_titled("Bundle B"));
    let title_of = |r: &Answer| r.json()["data"][0]["title"].as_str().map(str::to_string);
    w.until("/api/v1/event", "b-token", "bundle b", |r| {
        r.status == 200 && title_of(r).as_deref() == Some("Bundle B")
    })
    .await;

    // demo's new bundle.toml claims b's token as well: b keeps it, demo keeps its old version.
    write(
        &w.path("demo/bundle.toml"),
        "tokens = [\"demo-token\", \"b-token\"]\n",
    );
    let clash = "demo/bundle.toml: token b-t… is also named by bundle \"b\", which has it (a token opens one bundle): bundle \"demo\" keeps serving its previous version";
    w.until("/status", "", "the clash on demo", |r| {
        errors_of(&r.json(), "demo")
            .iter()
            .any(|e| e.ends_with(clash))
    })
    .await;
    assert_eq!(
        title_of(&w.app.get("/api/v1/event", "b-token").await).as_deref(),
        Some("Bundle B")
    );
    assert_eq!(w.app.get("/api/v1/event", DEMO_TOKEN).await.status, 200);
    let status = w.app.send(Method::GET, "/status", None, None).await.json();
    assert_eq!(bundle_status(&status, "b")["served"], true);
    assert!(errors_of(&status, "b").is_empty());

    // b breaks: it keeps its last good version and its token, whatever demo claims.
    write(&w.path("b/payments.json"), "[{}]");
    w.until("/status", "", "b's error", |r| {
        !errors_of(&r.json(), "b").is_empty()
    })
    .await;
    assert_eq!(
        title_of(&w.app.get("/api/v1/event", "b-token").await).as_deref(),
        Some("Bundle B")
    );

    // demo gives the token back and b is fixed: both clean, each with its own token.
    write(&w.path("demo/bundle.toml"), "tokens = [\"demo-token\"]\n");
    std::fs::copy(
        demo_data().join("demo/payments.json"),
        w.path("b/payments.json"),
    )
    .expect("copy");
    w.until("/status", "", "both clean", |r| {
        let s = r.json();
        errors_of(&s, "demo").is_empty() && errors_of(&s, "b").is_empty()
    })
    .await;
    assert_eq!(
        title_of(&w.app.get("/api/v1/event", "b-token").await).as_deref(),
        Some("Bundle B")
    );
    w.app.get("/api/v1/event", "b-token").await;
    assert_ne!(
        title_of(&w.app.get("/api/v1/event", DEMO_TOKEN).await).as_deref(),
        Some("Bundle B")
    );
}

#[tokio::test]
async fn poll_mode_sees_folders_copied_in_and_removed() {
    let w = watched(WatchMode::Poll(Duration::from_millis(50))).await;

    w.data.with_demo("copied");
    write(
        &w.path("copied/bundle.toml"),
        "tokens = [\"copied-token\"]\n",
    );
    w.until("/api/v1/event", "copied-token", "the copied bundle", |r| {
        r.status == 200
    })
    .await;

    std::fs::remove_dir_all(w.path("copied")).expect("remove");
    w.until("/api/v1/event", "copied-token", "the removed bundle", |r| {
        r.status == 401
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_written_file_by_file_is_never_served_half_written() {
    // The files land 15 ms apart; a quiet time of a second keeps a wide margin on a loaded
    // machine, where a 15 ms sleep can take far longer (with 50 ms the test failed under load).
    let w = watched_with(WatchMode::Native, Duration::from_secs(1)).await;
    let full = std::fs::read_to_string(demo_data().join("demo/payments.json")).expect("payments");
    let full: String = serde_json::from_str::<Value>(&full)
        .expect("JSON")
        .to_string();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (client, url, done) = (
            w.app.client.clone(),
            format!("{}/api/v1/payments", w.app.base),
            done.clone(),
        );
        tokio::spawn(async move {
            let mut served = Vec::new();
            // Until told to stop, and then until it has seen the bundle served itself (the
            // poller below may see it first), within a bound.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while (served.is_empty() || !done.load(std::sync::atomic::Ordering::Relaxed))
                && tokio::time::Instant::now() < deadline
            {
                if let Ok(r) = client
                    .get(&url)
                    .header("Authorization-Token", "slow-token")
                    .send()
                    .await
                {
                    if r.status() == 200 {
                        served.push(r.text().await.unwrap_or_default());
                    }
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            served
        })
    };

    // Each file lands 15 ms after the one before: far less than the quiet time, so the bundle is
    // read once, whole. payments.json comes last; without it the bundle would be valid but empty.
    let slow = w.path("slow");
    std::fs::create_dir(&slow).expect("mkdir");
    write(&slow.join("bundle.toml"), "tokens = [\"slow-token\"]\n");
    for file in [
        "event.json",
        "submission.json",
        "submission_list.json",
        "hotsite.json",
        "payment_details",
    ] {
        tokio::time::sleep(Duration::from_millis(15)).await;
        let from = demo_data().join("demo").join(file);
        if from.is_dir() {
            std::fs::create_dir(slow.join(file)).expect("mkdir");
            for d in std::fs::read_dir(&from).expect("read").flatten() {
                tokio::time::sleep(Duration::from_millis(15)).await;
                std::fs::copy(d.path(), slow.join(file).join(d.file_name())).expect("copy");
            }
        } else {
            std::fs::copy(&from, slow.join(file)).expect("copy");
        }
    }
    tokio::time::sleep(Duration::from_millis(15)).await;
    write(&slow.join("payments.json"), &full);
    w.until("/api/v1/payments", "slow-token", "the whole bundle", |r| {
        r.status == 200
    })
    .await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);

    let served = reader.await.expect("reader");
    assert!(!served.is_empty());
    for body in served {
        assert_eq!(body, full, "a half-written bundle was served");
    }
}

#[tokio::test]
async fn a_removed_and_recreated_data_folder_is_watched_again_and_status_said_so_meanwhile() {
    let w = watched(WatchMode::Native).await;
    let root = w.data.path().to_path_buf();

    std::fs::remove_dir_all(&root).expect("remove the data folder");

    let status = w
        .until("/status", DEMO_TOKEN, "the watch lost in /status", |r| {
            r.status == 200 && r.json()["watch"]["state"] == "lost"
        })
        .await
        .json();
    assert!(
        status["watch"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("is missing")),
        "{status}"
    );
    let ready = w.app.get("/readyz", DEMO_TOKEN).await;
    assert_eq!(ready.status, 200, "the last data keeps being served");
    assert_eq!(ready.json()["watch"], "lost");
    assert_eq!(w.app.get("/api/v1/event", DEMO_TOKEN).await.status, 200);

    std::fs::create_dir(&root).expect("re-create the data folder");
    w.data.with_demo("demo");
    write(&w.path("demo/event.json"), event_titled("Pasta recriada"));

    w.until_title("Pasta recriada").await;
    let status = w.app.get("/status", DEMO_TOKEN).await.json();
    assert!(status.get("watch").is_none(), "restored: {status}");
    assert_eq!(
        w.app.get("/readyz", DEMO_TOKEN).await.json()["watch"],
        Value::Null
    );
    // The watch itself is back: a later edit is seen without SIGHUP.
    write(&w.path("demo/event.json"), event_titled("Editado depois"));
    w.until_title("Editado depois").await;
}

#[tokio::test]
async fn a_data_folder_swapped_by_mv_is_watched_again() {
    let w = watched(WatchMode::Native).await;
    let root = w.data.path().to_path_buf();
    let parent = tempfile::tempdir().expect("tmp");
    let new = parent.path().join("new");
    std::fs::create_dir(&new).expect("folder");
    crate::helpers::copy_demo(&new.join("demo"));
    write(&new.join("demo/event.json"), event_titled("Trocada por mv"));

    std::fs::rename(&root, parent.path().join("old")).expect("move the old folder away");
    std::fs::rename(&new, &root).expect("move the new one in");

    w.until_title("Trocada por mv").await;
    write(&w.path("demo/event.json"), event_titled("Editada na nova"));
    w.until_title("Editada na nova").await;
}

#[tokio::test]
async fn a_data_folder_that_cannot_be_listed_shows_in_status_until_it_can() {
    let data = TempData::new();
    data.with_demo("demo");
    let app = App::new(data.path());
    app.load().expect("loads");
    let app = serve_app(app).await;
    let moved = tempfile::tempdir().expect("tmp");
    let aside = moved.path().join("data");
    std::fs::rename(data.path(), &aside).expect("move the data folder away");

    let served = app.app.clone();
    let failed = tokio::task::spawn_blocking(move || served.load())
        .await
        .expect("task");

    assert!(failed.is_err());
    let status = app.get("/status", DEMO_TOKEN).await.json();
    assert!(
        status["data_folder_error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot read the data folder")),
        "{status}"
    );
    assert_eq!(app.get("/api/v1/event", DEMO_TOKEN).await.status, 200);
    std::fs::rename(&aside, data.path()).expect("move it back");
    let served = app.app.clone();
    tokio::task::spawn_blocking(move || served.load())
        .await
        .expect("task")
        .expect("reloads");
    let status = app.get("/status", DEMO_TOKEN).await.json();
    assert!(status.get("data_folder_error").is_none(), "{status}");
}

/// A data folder that is a link (`current` → `releases/v1`, as a release script or git-sync
/// keeps it): pointing it at another folder is served, and edits there are seen. The watch
/// once followed the folder the link named at start, and saw nothing more.
#[tokio::test]
async fn a_data_folder_link_pointed_elsewhere_is_followed() {
    for mode in [WatchMode::Native, WatchMode::Poll(DEBOUNCE)] {
        let data = TempData::new();
        data.with_demo("releases/v1/demo");
        data.with_demo("releases/v2/demo");
        write(
            &data.path().join("releases/v2/demo/event.json"),
            event_titled("Versão 2"),
        );
        let link = data.path().join("current");
        std::os::unix::fs::symlink("releases/v1", &link).expect("link");
        let w = watching(data, &link, mode, DEBOUNCE).await;
        let first = w.app.get("/api/v1/event", DEMO_TOKEN).await;
        assert_eq!(first.status, 200, "{mode:?}");

        // Pointed elsewhere as `ln -sfn` does it in one step: a new link renamed over the old.
        std::os::unix::fs::symlink("releases/v2", w.path("current.new")).expect("link");
        std::fs::rename(w.path("current.new"), &link).expect("rename over");
        w.until_title("Versão 2").await;

        write(
            &w.path("releases/v2/demo/event.json"),
            event_titled("Editada na v2"),
        );
        w.until_title("Editada na v2").await;
    }
}

/// A bundle that is a link made after the start (`ln -s /srv/b/v1 data/linked`), then
/// pointed elsewhere: served each time, and edits in the folder it leads to are seen. The
/// native watch followed only the links there at its start.
#[tokio::test]
async fn a_bundle_link_made_or_pointed_elsewhere_while_serving_is_watched() {
    let w = watched(WatchMode::Native).await;
    let elsewhere = tempfile::tempdir().expect("tmp");
    for version in ["v1", "v2"] {
        crate::helpers::copy_demo(&elsewhere.path().join(version));
        // The demo's token belongs to `demo`: the linked bundle has its own.
        write(
            &elsewhere.path().join(version).join("bundle.toml"),
            "tokens = [\"linked-token\"]\n",
        );
    }
    let linked = |title: &str| {
        let title = title.to_string();
        move |r: &Answer| r.status == 200 && r.json()["data"][0]["title"] == title
    };
    let link = w.path("linked");
    write(
        &elsewhere.path().join("v1/event.json"),
        event_titled("Ligada"),
    );
    write(
        &elsewhere.path().join("v2/event.json"),
        event_titled("Versão 2"),
    );
    std::os::unix::fs::symlink(elsewhere.path().join("v1"), &link).expect("link");
    w.until(
        "/api/v1/event",
        "linked-token",
        "the linked bundle",
        linked("Ligada"),
    )
    .await;
    write(
        &elsewhere.path().join("v1/event.json"),
        event_titled("Editada na v1"),
    );
    w.until(
        "/api/v1/event",
        "linked-token",
        "an edit through the link",
        linked("Editada na v1"),
    )
    .await;

    std::os::unix::fs::symlink(elsewhere.path().join("v2"), w.path("linked.new")).expect("link");
    std::fs::rename(w.path("linked.new"), &link).expect("rename over");
    w.until(
        "/api/v1/event",
        "linked-token",
        "the new target",
        linked("Versão 2"),
    )
    .await;
    write(
        &elsewhere.path().join("v2/event.json"),
        event_titled("Editada na v2"),
    );
    w.until(
        "/api/v1/event",
        "linked-token",
        "an edit in the new target",
        linked("Editada na v2"),
    )
    .await;
}

/// A bundle link pointed at a folder that is not there (a mistyped `ln -sfn` release), or at
/// itself: the bundle keeps its last good version, with an error naming where the link leads.
/// It had vanished as if removed: 401 for its token, nothing in `/status`. `check`, with no
/// earlier read, skips such a link, as it skips one to a file that is gone.
#[tokio::test]
async fn a_bundle_link_leading_nowhere_keeps_the_last_good_version_with_an_error() {
    let w = watched(WatchMode::Native).await;
    let before = w.app.get("/api/v1/event", DEMO_TOKEN).await;
    assert_eq!(before.status, 200);
    let releases = tempfile::tempdir().expect("tmp");
    crate::helpers::copy_demo(&releases.path().join("v1"));
    // `demo` becomes a link to a copy of itself, then to a release that does not exist.
    std::fs::remove_dir_all(w.path("demo")).expect("removed");
    std::os::unix::fs::symlink(releases.path().join("v1"), w.path("demo")).expect("link");
    let missing = releases.path().join("v2");
    for target in [missing.as_path(), Path::new("demo")] {
        std::os::unix::fs::symlink(target, w.path("demo.new")).expect("link");
        std::fs::rename(w.path("demo.new"), w.path("demo")).expect("rename over");
        let wanted = format!("(a link to {})", target.display());
        let status = w
            .until("/status", DEMO_TOKEN, "the link's error in /status", |r| {
                r.json()["bundles"][0]["errors"][0]
                    .as_str()
                    .is_some_and(|e| e.contains(&wanted))
            })
            .await
            .json();
        assert_eq!(status["bundles"][0]["served"], true, "{status}");
        let during = w.app.get("/api/v1/event", DEMO_TOKEN).await;
        assert_eq!(during.status, 200, "{}", during.text());
        assert_eq!(during.body, before.body, "the last good version");
    }
    let mut report = Vec::new();
    let code = eventbox::cli::check(
        &eventbox::cli::CheckArgs {
            dir: w.data.path().to_path_buf(),
            strict: false,
            format: eventbox::cli::CheckFormat::Text,
            max_file_bytes: 1 << 30,
            max_delay: Duration::from_secs(30),
        },
        &mut report,
    )
    .expect("the report is written");
    let report = String::from_utf8_lossy(&report);
    assert_eq!(code, 0, "{report}");
    assert!(report.contains("0 bundles checked"), "{report}");
}
