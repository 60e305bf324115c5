//! `pull`, run in-process against eventbox served on an ephemeral port, directly or through a
//! scripted proxy that fails calls on purpose (503, 429 with Retry-After, a stall past the
//! timeout, 401, a 404 half way, a body that is not JSON) and logs every request it saw.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use eventbox::pull::{self, ProgressMode, PullError, PullOptions};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::fixtures;
use crate::helpers::{demo_data, spawn_app, whole_reads, TempData, TestApp, DEMO_TOKEN};

/// Options for tests: quiet, and short waits.
fn options(from: &str, token: &str, into: &Path) -> PullOptions {
    let mut o = PullOptions::new(from, token, into);
    o.progress = ProgressMode::Quiet;
    o.backoff = Duration::from_millis(10);
    o.timeout = Duration::from_secs(5);
    o
}

/// The payment references a server lists.
pub(crate) async fn references(app: &TestApp, token: &str) -> Vec<String> {
    let payments = app.get("/api/v1/payments", token).await.json();
    payments["data"]
        .as_array()
        .expect("a data list")
        .iter()
        .map(|p| {
            p["reference_payment"]
                .as_str()
                .expect("a reference")
                .to_string()
        })
        .collect()
}

/// Every whole-list endpoint (pulled or derived from one, from `openapi.json`) and every
/// payment's detail answer the same bytes on both servers; returns the number of references.
async fn assert_same_answers(source: &TestApp, copy: &TestApp, token: &str) -> usize {
    for path in whole_reads() {
        let (a, b) = (source.get(&path, token).await, copy.get(&path, token).await);
        assert_eq!(a.status.as_u16(), 200, "{path}: {}", a.text());
        assert_eq!(a.body, b.body, "{path} differs");
    }
    let refs = references(source, token).await;
    assert!(!refs.is_empty());
    for r in &refs {
        let path = format!("/api/v1/payments/details?reference={r}");
        let (a, b) = (source.get(&path, token).await, copy.get(&path, token).await);
        assert_eq!(a.status.as_u16(), 200, "{path}: {}", a.text());
        assert_eq!(a.body, b.body, "the detail of {r} differs");
    }
    refs.len()
}

/// Every file under `dir`, by relative path (gen's tests use it too).
pub(crate) fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("a folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).expect("inside").to_path_buf();
                out.insert(rel, std::fs::read(&path).expect("a file"));
            }
        }
    }
    out
}

/// No name in `dir` starts with `_` (a staging or aside folder left behind).
pub(crate) fn assert_no_leftovers(dir: &Path) {
    let left: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with('_'))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}

// ---- a scripted proxy ---------------------------------------------------------------------

/// What the proxy does with one request.
pub(crate) enum Act {
    Forward,
    Answer(u16, Vec<(&'static str, String)>, String),
    /// As `Answer`, but the body breaks off after the text: the connection is cut mid-answer.
    BreakOff(u16, Vec<(&'static str, String)>, String),
    /// Waits this long, then forwards (the client has usually given up by then).
    Stall(Duration),
}

/// A request the proxy saw.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    reference: Option<String>,
    at: Instant,
    accept_encoding: String,
}

/// Decides per request: (path, reference, how many times this path and reference came before).
type Script = dyn Fn(&str, Option<&str>, usize) -> Act + Send + Sync;

pub(crate) struct Proxy {
    pub(crate) base: String,
    log: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    pub(crate) async fn start(
        upstream: &str,
        script: impl Fn(&str, Option<&str>, usize) -> Act + Send + Sync + 'static,
    ) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let log = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(ProxyState {
            upstream: upstream.to_string(),
            script: Box::new(script),
            log: Arc::clone(&log),
            counts: Mutex::new(HashMap::new()),
            client: crate::helpers::client(),
        });
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = Arc::clone(&state);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let state = Arc::clone(&state);
                        async move { Ok::<_, Infallible>(state.handle(req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Proxy { base, log, task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.log.lock().expect("the log").clone()
    }

    pub(crate) fn count(&self, path_end: &str) -> usize {
        self.seen()
            .iter()
            .filter(|s| s.path.ends_with(path_end))
            .count()
    }
}

struct ProxyState {
    upstream: String,
    script: Box<Script>,
    log: Arc<Mutex<Vec<Seen>>>,
    counts: Mutex<HashMap<(String, Option<String>), usize>>,
    client: reqwest::Client,
}

/// A body that sends its text, then, once that is out (100 ms), fails: hyper cuts the
/// connection before the body's end.
struct BrokenOff(Option<Bytes>, std::pin::Pin<Box<tokio::time::Sleep>>);

impl BrokenOff {
    fn new(text: Bytes) -> BrokenOff {
        let out = tokio::time::sleep(Duration::from_millis(100));
        BrokenOff(Some(text), Box::pin(out))
    }
}

impl hyper::body::Body for BrokenOff {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        if let Some(text) = self.0.take() {
            return std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(text))));
        }
        std::future::Future::poll(self.1.as_mut(), cx)
            .map(|()| Some(Err(std::io::Error::other("cut off"))))
    }
}

type ProxyBody = http_body_util::Either<Full<Bytes>, BrokenOff>;

impl ProxyState {
    async fn handle(&self, req: Request<Incoming>) -> Response<ProxyBody> {
        let header = |name: &str| {
            req.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        let (token, content_type, accept_encoding) = (
            header("authorization-token"),
            header("content-type"),
            header("accept-encoding"),
        );
        let path = req.uri().path().to_string();
        let method = req.method().clone();
        let path_and_query = req
            .uri()
            .path_and_query()
            .map_or_else(|| path.clone(), |p| p.as_str().to_string());
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let reference = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["reference"].as_str().map(str::to_string));
        let n = {
            let mut counts = self.counts.lock().expect("counts");
            let n = counts.entry((path.clone(), reference.clone())).or_insert(0);
            *n += 1;
            *n - 1
        };
        self.log.lock().expect("the log").push(Seen {
            path: path.clone(),
            reference: reference.clone(),
            at: Instant::now(),
            accept_encoding,
        });
        let act = (self.script)(&path, reference.as_deref(), n);
        let broken = matches!(act, Act::BreakOff(..));
        match act {
            Act::Answer(status, headers, text) | Act::BreakOff(status, headers, text) => {
                let body = Bytes::from(text);
                let mut res = Response::new(if broken {
                    ProxyBody::Right(BrokenOff::new(body))
                } else {
                    ProxyBody::Left(Full::new(body))
                });
                *res.status_mut() = hyper::StatusCode::from_u16(status).expect("a status");
                for (k, v) in headers {
                    res.headers_mut()
                        .insert(k, v.parse().expect("a header value"));
                }
                res
            }
            act => {
                if let Act::Stall(d) = act {
                    tokio::time::sleep(d).await;
                }
                let mut up = self
                    .client
                    .request(method, format!("{}{path_and_query}", self.upstream))
                    .header("Authorization-Token", token)
                    .body(body.to_vec());
                if !content_type.is_empty() {
                    up = up.header("Content-Type", content_type);
                }
                let res = up.send().await.expect("the upstream answers");
                let status = res.status().as_u16();
                let bytes = res.bytes().await.expect("the upstream body");
                let mut out = Response::new(ProxyBody::Left(Full::new(bytes)));
                *out.status_mut() = hyper::StatusCode::from_u16(status).expect("a status");
                out
            }
        }
    }
}

/// The length of the list at `at` in a demo file.
fn demo_count(at: &[&str], file: &str) -> Option<usize> {
    let text = std::fs::read_to_string(demo_data().join("demo").join(file)).expect("a demo file");
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    at.iter().fold(&v, |v, k| &v[*k]).as_array().map(Vec::len)
}

/// The summary's line of the files fetched one per payment reference.
const PER_PAYMENT: &str = "payment_details";

/// The list requests of a pull: one per line of its summary but the one of the files fetched per
/// payment (`payment_details`).
fn list_requests(summary: &pull::PullSummary) -> u64 {
    summary
        .endpoints
        .iter()
        .filter(|e| e.name != PER_PAYMENT)
        .count() as u64
}

// ---- tests --------------------------------------------------------------------------------

#[tokio::test]
async fn a_pulled_bundle_serves_byte_identical_answers_from_an_origin_or_the_api_base() {
    let source = spawn_app(&demo_data()).await;
    let data = TempData::new();
    let into = data.path().join("kiosk");

    let summary = pull::run(&options(&source.base, DEMO_TOKEN, &into))
        .await
        .expect("the pull succeeds");

    let copy = spawn_app(data.path()).await;
    let details = assert_same_answers(&source, &copy, DEMO_TOKEN).await;
    assert_eq!(summary.base, format!("{}/api/v1", source.base));
    let by_name: HashMap<&str, Option<usize>> = summary
        .endpoints
        .iter()
        .map(|e| (e.name, e.records))
        .collect();
    assert_eq!(by_name["payment_details"], Some(details), "{summary}");
    assert_eq!(by_name["payments"], Some(details), "{summary}");
    assert_eq!(by_name["event"], Some(1), "{summary}");
    // Every line counted its records where the answer keeps them (the demo has some of each).
    for e in &summary.endpoints {
        assert!(e.records.is_some_and(|n| n > 0), "{}: {summary}", e.name);
    }
    assert_eq!(
        by_name["certificates"],
        demo_count(&["certificates", "data"], "certificates.json")
    );
    assert_eq!(by_name["session"], demo_count(&["data"], "session.json"));
    // One request per list endpoint of the table (each a line of the summary), then one per
    // reference (the summary's payment_details line).
    assert_eq!(
        summary.requests,
        list_requests(&summary) + details as u64,
        "{summary}"
    );
    // A file per list, the folder of details: what the demo bundle holds.
    let mut expected: Vec<String> = summary
        .endpoints
        .iter()
        .map(|e| {
            if e.name == PER_PAYMENT {
                e.name.to_string()
            } else {
                format!("{}.json", e.name)
            }
        })
        .chain(["bundle.toml".to_string()])
        .collect();
    expected.sort();
    assert_eq!(crate::helpers::entry_names(&into), expected);
    // People's data and tokens: the copy is its owner's only.
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| {
            std::fs::metadata(p).expect("pulled").permissions().mode() & 0o777
        };
        assert_eq!(mode(&into), 0o700);
        assert_eq!(mode(&into.join(PER_PAYMENT)), 0o700);
        assert_eq!(mode(&into.join("payments.json")), 0o600);
        assert_eq!(mode(&into.join("bundle.toml")), 0o600);
    }
    assert_eq!(pulled_part_of(&demo_data().join("demo")), expected);
    assert_eq!(summary.retries, 0);
    assert!(summary.warnings.is_empty(), "{:?}", summary.warnings);
    let toml = std::fs::read_to_string(into.join("bundle.toml")).expect("bundle.toml");
    assert!(toml.contains("tokens = [\"demo-token\"]"), "{toml}");
    #[cfg(unix)]
    crate::helpers::assert_private(&into.join("bundle.toml"));
    // The source answers a client that accepts gzip (as the pull does) with gzip: the copy's
    // bytes went through the decoder.
    let gzipped = source
        .get_with(
            "/api/v1/payments",
            DEMO_TOKEN,
            &[("accept-encoding", "gzip")],
        )
        .await;
    assert_eq!(gzipped.header("content-encoding"), Some("gzip"));
    // Bodies are kept as received: the compact bytes the source serves.
    let served = source.get("/api/v1/event", DEMO_TOKEN).await.body;
    assert_eq!(
        std::fs::read(into.join("event.json")).expect("event.json"),
        served
    );

    // Pulling again from the API base (trailing slash and all) replaces the copy in place.
    let again = pull::run(&options(
        &format!("{}/api/v1/", source.base),
        DEMO_TOKEN,
        &into,
    ))
    .await
    .expect("the second pull succeeds");
    assert_eq!(again.base, summary.base);
    let copy = spawn_app(data.path()).await;
    assert_same_answers(&source, &copy, DEMO_TOKEN).await;
    assert_no_leftovers(data.path());
}

#[tokio::test]
async fn pretty_re_indents_and_the_copy_still_serves_the_same_bytes() {
    let source = spawn_app(&demo_data()).await;
    let data = TempData::new();
    let into = data.path().join("pretty");
    // White space around a pasted token is trimmed, in the header and in bundle.toml.
    let mut o = options(&source.base, &format!(" {DEMO_TOKEN}\n"), &into);
    o.pretty = true;

    pull::run(&o).await.expect("the pull succeeds");

    let event = std::fs::read_to_string(into.join("event.json")).expect("event.json");
    assert!(event.starts_with("{\n  \"data\": [\n"), "{event}");
    assert!(
        event.contains("\"price\": 890.00"),
        "numbers keep their text: {event}"
    );
    let copy = spawn_app(data.path()).await;
    assert_same_answers(&source, &copy, DEMO_TOKEN).await;
}

#[tokio::test]
async fn retries_a_503_a_429_after_its_retry_after_and_a_timeout_then_completes() {
    let source = spawn_app(&demo_data()).await;
    let refs = references(&source, DEMO_TOKEN).await;
    let slow = refs[1].clone();
    let stalled = slow.clone();
    let proxy = Proxy::start(&source.base, move |path, reference, n| {
        match (path, reference, n) {
            ("/api/v1/event", None, 0) => Act::Answer(503, vec![], "busy".into()),
            ("/api/v1/payments", None, 0) => {
                Act::Answer(429, vec![("retry-after", "1".into())], "slow down".into())
            }
            ("/api/v1/payments/details", Some(r), 0) if r == stalled => {
                Act::Stall(Duration::from_secs(6))
            }
            _ => Act::Forward,
        }
    })
    .await;
    let data = TempData::new();
    let into = data.path().join("flaky");
    let mut o = options(&proxy.base, DEMO_TOKEN, &into);
    // Long enough that a forwarded request never times out on a loaded machine; the stall
    // (6 s) is three times longer.
    o.timeout = Duration::from_secs(2);
    o.retries = 2;

    let summary = pull::run(&o).await.expect("the pull completes");

    assert_eq!(summary.retries, 3, "{summary}");
    assert_eq!(
        summary.requests,
        list_requests(&summary) + refs.len() as u64 + 3,
        "{summary}"
    );
    let seen = proxy.seen();
    let payments: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.path == "/api/v1/payments")
        .collect();
    assert_eq!(payments.len(), 2, "{seen:?}");
    let waited = payments[1].at - payments[0].at;
    assert!(
        waited >= Duration::from_millis(950),
        "Retry-After: 1 was not honoured: {waited:?}"
    );
    let slow_calls = seen
        .iter()
        .filter(|s| s.reference.as_deref() == Some(&slow))
        .count();
    assert_eq!(slow_calls, 2, "the stalled detail is asked again");
    assert!(
        seen.iter().all(|s| s.accept_encoding.contains("gzip")),
        "gzip is accepted: {seen:?}"
    );
    let copy = spawn_app(data.path()).await;
    assert_same_answers(&source, &copy, DEMO_TOKEN).await;
}

#[tokio::test]
async fn a_refused_token_stops_at_once_with_a_message_and_changes_nothing() {
    let source = spawn_app(&demo_data()).await;
    let proxy = Proxy::start(&source.base, |_, _, _| Act::Forward).await;
    let data = TempData::new();
    let into = data.path().join("kiosk");

    let err = pull::run(&options(&proxy.base, "wrong-secret-token", &into))
        .await
        .expect_err("the token is refused");

    assert!(matches!(err, PullError::TokenRefused { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("the server refused the token wron… (401)"),
        "{message}"
    );
    assert!(
        !message.contains("wrong-secret-token"),
        "the token in: {message}"
    );
    assert_eq!(
        proxy.seen().len(),
        1,
        "no retry after a 401: {:?}",
        proxy.seen()
    );
    assert!(!into.exists());
    assert_no_leftovers(data.path());
}

#[tokio::test]
async fn a_pull_that_fails_half_way_leaves_the_earlier_copy_intact() {
    let source = spawn_app(&demo_data()).await;
    let data = TempData::new();
    let into = data.path().join("kiosk");
    pull::run(&options(&source.base, DEMO_TOKEN, &into))
        .await
        .expect("the first pull succeeds");
    let before = files(&into);
    let refs = references(&source, DEMO_TOKEN).await;
    let last = refs.last().expect("a reference").clone();
    let proxy = Proxy::start(&source.base, move |_, reference, _| match reference {
        Some(r) if r == last => Act::Answer(403, vec![], r#"{"message": "Acesso negado"}"#.into()),
        _ => Act::Forward,
    })
    .await;
    let mut o = options(&proxy.base, DEMO_TOKEN, &into);
    o.concurrency = 1;

    let err = pull::run(&o).await.expect_err("the pull fails");

    assert!(
        matches!(err, PullError::Status { status: 403, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("Acesso negado"), "{err}");
    assert_eq!(
        proxy.count("/payments/details"),
        refs.len(),
        "every other detail first, and the 403 once (not retried)"
    );
    assert!(files(&into) == before, "the earlier copy changed");
    assert_no_leftovers(data.path());
}

#[tokio::test]
async fn a_server_that_keeps_failing_is_given_up_on_after_the_retries() {
    let source = spawn_app(&demo_data()).await;
    let proxy = Proxy::start(&source.base, |path, _, _| match path {
        "/api/v1/hotsite/" => Act::Answer(502, vec![], "bad gateway".into()),
        _ => Act::Forward,
    })
    .await;
    let data = TempData::new();
    let into = data.path().join("kiosk");
    let mut o = options(&proxy.base, DEMO_TOKEN, &into);
    o.retries = 2;

    let err = pull::run(&o).await.expect_err("the pull gives up");

    assert!(
        matches!(err, PullError::GaveUp { attempts: 3, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("502 Bad Gateway: \"bad gateway\""),
        "{err}"
    );
    assert_eq!(proxy.count("/hotsite/"), 3);
    assert!(!into.exists());
    assert_no_leftovers(data.path());
}

#[tokio::test]
async fn a_pulled_bundle_that_fails_check_is_not_swapped_in() {
    let source = spawn_app(&demo_data()).await;
    let data = TempData::new();
    data.with_demo("kiosk");
    let into = data.path().join("kiosk");
    let before = files(&into);
    let proxy = Proxy::start(&source.base, |path, _, _| match path {
        "/api/v1/hotsite/" => Act::Answer(200, vec![], "<html>maintenance</html>".into()),
        _ => Act::Forward,
    })
    .await;

    let err = pull::run(&options(&proxy.base, DEMO_TOKEN, &into))
        .await
        .expect_err("check refuses the copy");

    assert!(matches!(err, PullError::Check { .. }), "{err:?}");
    assert!(err.to_string().contains("hotsite.json:1:1"), "{err}");
    assert!(files(&into) == before, "the earlier copy changed");
    assert_no_leftovers(data.path());
}

#[tokio::test]
async fn a_reference_that_would_be_a_path_refuses_the_pull() {
    let served = TempData::new();
    fixtures::write_json(&served, "tiny");
    served.write(
        "tiny/payments.json",
        fixtures::PAYMENTS_JSON.replacen("\"R-001\"", "\"../../escape\"", 1),
    );
    let source = spawn_app(served.path()).await;
    let data = TempData::new();
    let into = data.path().join("copy");

    let err = pull::run(&options(&source.base, fixtures::TOKEN, &into))
        .await
        .expect_err("the reference is refused");

    assert!(matches!(err, PullError::UnsafeReference { .. }), "{err:?}");
    assert!(err.to_string().contains("\"../../escape\""), "{err}");
    assert!(!into.exists());
    assert_no_leftovers(data.path());
    assert!(!data
        .path()
        .parent()
        .expect("a parent")
        .join("escape.json")
        .exists());
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_not_followed_with_the_token() {
    let elsewhere = spawn_app(&demo_data()).await;
    let target = format!("{}/api/v1/event", elsewhere.base);
    // The proxy listens on another port: another origin, which would accept the token.
    let proxy = Proxy::start(&elsewhere.base, move |path, _, _| match path {
        "/api/v1/event" => Act::Answer(302, vec![("location", target.clone())], String::new()),
        _ => Act::Forward,
    })
    .await;
    let data = TempData::new();
    let from = proxy.base.clone();

    let err = pull::run(&options(&from, DEMO_TOKEN, &data.path().join("x")))
        .await
        .expect_err("the redirect is refused");

    assert!(
        matches!(err, PullError::Status { status: 302, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("not followed"), "{err}");
}

#[tokio::test]
async fn a_watching_server_switches_to_the_pulled_copy_without_a_gap() {
    // The source: the demo bundle with another title.
    let served = TempData::new();
    served.with_demo("demo");
    let event = std::fs::read_to_string(served.path().join("demo/event.json")).expect("event");
    let new_title = "Congresso atualizado às 10h";
    served.write(
        "demo/event.json",
        event.replacen("33º Congresso Brasileiro", new_title, 1),
    );
    let source = spawn_app(served.path()).await;
    // The kiosk: the original demo bundle, served and watched, as `serve` runs it.
    let data = TempData::new();
    data.with_demo("demo");
    let app = eventbox::app::App::new(data.path());
    let _watcher = app
        .watch(
            eventbox::watch::WatchMode::Native,
            Duration::from_millis(50),
        )
        .await
        .expect("watching starts");
    app.load().expect("loads");
    let kiosk = crate::helpers::serve_app(app).await;
    let old_title = kiosk.get("/api/v1/event", DEMO_TOKEN).await.json()["data"][0]["title"]
        .as_str()
        .expect("a title")
        .to_string();

    // Readers keep asking while the pull runs and the server reloads.
    let opts = options(&source.base, DEMO_TOKEN, &data.path().join("demo"));
    let pulling = pull::run(&opts);
    let reading = async {
        let start = Instant::now();
        loop {
            let res = kiosk.get("/api/v1/event", DEMO_TOKEN).await;
            assert_eq!(res.status.as_u16(), 200, "a gap: {}", res.text());
            let title = res.json()["data"][0]["title"]
                .as_str()
                .expect("a title")
                .to_string();
            assert!(
                title == old_title || title.starts_with(new_title),
                "{title}"
            );
            if title.starts_with(new_title) {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the new copy never showed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (pulled, ()) = tokio::join!(pulling, reading);

    pulled.expect("the pull succeeds");
    assert_same_answers(&source, &kiosk, DEMO_TOKEN).await;
}

#[tokio::test]
async fn a_cancelled_pull_removes_its_staging_folder() {
    let source = spawn_app(&demo_data()).await;
    let proxy = Proxy::start(&source.base, |path, _, _| match path {
        "/api/v1/payments/details" => Act::Stall(Duration::from_secs(30)),
        _ => Act::Forward,
    })
    .await;
    let data = TempData::new();
    let into = data.path().join("kiosk");
    let mut o = options(&proxy.base, DEMO_TOKEN, &into);
    o.timeout = Duration::from_secs(60);
    let staging_seen = async {
        // The first detail request means the list endpoints are written into the staging folder.
        while proxy.count("/payments/details") == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        std::fs::read_dir(data.path())
            .expect("the data folder")
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with("_kiosk.pull-"))
    };

    // Ctrl-C in `eventbox pull` drops the pull's future the same way.
    let seen = tokio::select! {
        r = pull::run(&o) => panic!("the pull ended: {:?}", r.map(|s| s.to_string())),
        seen = staging_seen => seen,
    };

    assert!(seen, "the staging folder existed while the pull ran");
    assert_no_leftovers(data.path());
    assert!(!into.exists());
}

#[tokio::test]
async fn a_signal_stops_the_binary_with_its_code_and_no_staging_folder_outlives_it() {
    let source = spawn_app(&demo_data()).await;
    // Details stall: the pull is inside its details phase, staging folder written, when signalled.
    let proxy = Proxy::start(&source.base, |path, _, _| match path {
        "/api/v1/payments/details" => Act::Stall(Duration::from_secs(60)),
        _ => Act::Forward,
    })
    .await;
    // SIGHUP: a closed terminal, a dropped ssh session. SIGKILL cannot be caught: its staging
    // folder stays until the next pull of that target clears it.
    for (signal, code) in [
        ("TERM", Some(143)),
        ("INT", Some(130)),
        ("HUP", Some(129)),
        ("KILL", None),
    ] {
        let data = TempData::new();
        let into = data.path().join("kiosk");
        let details_before = proxy.count("/payments/details");
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_eventbox"))
            .args([
                "pull",
                "--progress",
                "quiet",
                "--from",
                &proxy.base,
                "--into",
            ])
            .arg(&into)
            .env("EVENTBOX_TOKEN", DEMO_TOKEN)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start eventbox pull");
        let pid = child.id().expect("a process id");
        let start = Instant::now();
        while proxy.count("/payments/details") == details_before {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no detail was asked for"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let staged = std::fs::read_dir(data.path())
            .expect("the data folder")
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with("_kiosk.pull-"));
        assert!(staged, "the staging folder exists while the pull runs");

        let status = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let out = tokio::time::timeout(Duration::from_secs(15), child.wait_with_output())
            .await
            .expect("the pull stops")
            .expect("its output");

        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), code, "SIG{signal}: {stderr}");
        if code.is_none() {
            pull::run(&options(&source.base, DEMO_TOKEN, &into))
                .await
                .expect("the next pull");
            assert_no_leftovers(data.path());
            continue;
        }
        assert!(stderr.contains("interrupted"), "{stderr}");
        assert_no_leftovers(data.path());
        assert!(!into.exists());
    }
}

/// A scripted answer's headers.
type Headers = Vec<(&'static str, String)>;

/// Runs `eventbox pull` (plain progress, token from the environment) and returns its exit code
/// and its stdout and stderr together.
async fn pull_binary(from: &str, token: &str, into: &Path, extra: &[&str]) -> (i32, String) {
    pull_binary_with(from, token, into, extra, &[]).await
}

/// `eventbox pull` run as a process, with `env` added to its environment: (exit code, what it
/// printed on stdout then stderr).
pub(crate) async fn pull_binary_with(
    from: &str,
    token: &str,
    into: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (i32, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_eventbox"))
        .args(["pull", "--progress", "plain", "--from", from, "--into"])
        .arg(into)
        .args(extra)
        .env("EVENTBOX_TOKEN", token)
        .envs(env.iter().copied())
        .output()
        .await
        .expect("run eventbox pull");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test]
async fn server_text_that_echoes_the_token_never_shows_it_whole() {
    let source = spawn_app(&demo_data()).await;
    let echo = format!("request headers: Authorization-Token: {DEMO_TOKEN}; user-agent: x");
    let json_echo = serde_json::json!({ "message": echo }).to_string();
    // One scripted failure at a time, on the event (the first request).
    let cases: Vec<(u16, Headers, String)> = vec![
        (503, vec![], echo.clone()),
        (401, vec![], echo.clone()),
        (404, vec![], json_echo),
        (
            302,
            vec![(
                "location",
                format!("http://elsewhere.invalid/?token={DEMO_TOKEN}"),
            )],
            String::new(),
        ),
    ];
    let data = TempData::new();
    let into = data.path().join("kiosk");
    for (status, headers, body) in cases {
        let proxy = Proxy::start(&source.base, move |path, _, _| match path {
            "/api/v1/event" => Act::Answer(status, headers.clone(), body.clone()),
            _ => Act::Forward,
        })
        .await;

        let (code, output) = pull_binary(&proxy.base, DEMO_TOKEN, &into, &["--retries", "1"]).await;
        let mut o = options(&proxy.base, DEMO_TOKEN, &into);
        o.retries = 1;
        let error = pull::run(&o).await.expect_err("the pull fails").to_string();

        assert_eq!(code, 1, "{status}: {output}");
        for shown in [&output, &error] {
            assert!(
                !shown.contains(DEMO_TOKEN),
                "{status}: the token whole: {shown}"
            );
        }
        if status != 401 {
            // The 401 message names the token by its hint and quotes no body.
            assert!(
                error.contains("demo…"),
                "{status}: the hint in its place: {error}"
            );
        }
        if status == 503 {
            assert!(output.contains("retrying in"), "a retry line: {output}");
            assert!(
                output.contains("Authorization-Token: demo…; user-agent"),
                "{output}"
            );
        }
    }
    assert_no_leftovers(data.path());
}

#[tokio::test]
async fn pull_refuses_a_target_that_is_a_file_or_a_symbolic_link_before_any_request() {
    let source = spawn_app(&demo_data()).await;
    let proxy = Proxy::start(&source.base, |_, _, _| Act::Forward).await;
    let data = TempData::new();
    let file = data.path().join("notes");
    std::fs::write(&file, "keep me").expect("write");
    let real = data.path().join("real");
    std::fs::create_dir(&real).expect("mkdir");
    let link = data.path().join("link");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&real, &link).expect("symlink");

    let targets = if cfg!(unix) {
        vec![&file, &link]
    } else {
        vec![&file]
    };
    for target in targets {
        let err = pull::run(&options(&proxy.base, DEMO_TOKEN, target))
            .await
            .expect_err("refused");
        assert!(matches!(err, PullError::BadTarget { .. }), "{err:?}");
    }

    assert_eq!(std::fs::read_to_string(&file).expect("read"), "keep me");
    assert!(proxy.seen().is_empty(), "requests: {:?}", proxy.seen());
    assert_no_leftovers(data.path());
}

#[tokio::test]
async fn a_zero_time_limit_is_refused_as_unusable_before_any_request() {
    let source = spawn_app(&demo_data()).await;
    let proxy = Proxy::start(&source.base, |_, _, _| Act::Forward).await;
    let data = TempData::new();
    let into = data.path().join("copy");

    for option in ["--timeout", "--connect-timeout"] {
        let (code, text) = pull_binary(&proxy.base, DEMO_TOKEN, &into, &[option, "0s"]).await;
        assert_eq!(code, 2, "{text}");
        assert!(
            text.contains(&format!("eventbox pull: {option} must be more than 0")),
            "{text}"
        );
    }
    assert!(proxy.seen().is_empty(), "requests: {:?}", proxy.seen());
    assert!(!into.exists());
}

/// A bare TCP server: counts connections, reads what comes, writes `answer` (when there is one)
/// and keeps every connection open until it is dropped.
struct RawServer {
    addr: std::net::SocketAddr,
    connections: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RawServer {
    async fn start(answer: Option<Vec<u8>>) -> RawServer {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("an address");
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&connections);
        let task = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                if let Some(answer) = &answer {
                    let _ = stream.write_all(answer).await;
                }
                open.push(stream);
            }
        });
        RawServer {
            addr,
            connections,
            task,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[tokio::test]
async fn an_endless_error_body_is_read_only_so_far() {
    // A 503 announcing 100 MB, sending 8 KiB, then nothing more: the message needs no more.
    let mut answer =
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 100000000\r\n\r\n".to_vec();
    answer.extend(std::iter::repeat_n(b'x', 8192));
    let server = RawServer::start(Some(answer)).await;
    let data = TempData::new();
    let mut o = options(
        &format!("http://{}", server.addr),
        DEMO_TOKEN,
        &data.path().join("x"),
    );
    o.retries = 0;
    o.timeout = Duration::from_secs(30);
    let started = Instant::now();

    let err = pull::run(&o).await.expect_err("the pull gives up");

    assert!(
        matches!(err, PullError::GaveUp { attempts: 1, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("503 Service Unavailable: \"xxxx"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the body was waited for: {:?}",
        started.elapsed()
    );
    assert_no_leftovers(data.path());
}

#[tokio::test]
async fn a_failed_tls_handshake_is_not_retried() {
    // https to a server that does not speak TLS: the handshake fails; another try would too.
    let server = RawServer::start(Some(b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec())).await;
    let data = TempData::new();
    let mut o = options(
        &format!("https://{}", server.addr),
        DEMO_TOKEN,
        &data.path().join("x"),
    );
    o.retries = 2;

    let err = pull::run(&o).await.expect_err("the pull fails");

    assert!(matches!(err, PullError::Transport { .. }), "{err:?}");
    assert_eq!(server.connections(), 1, "retried: {err}");
    assert_no_leftovers(data.path());
}

#[tokio::test]
async fn a_redirect_loop_is_not_retried() {
    let source = spawn_app(&demo_data()).await;
    let proxy = Proxy::start(&source.base, |path, _, _| match path {
        "/api/v1/event" => Act::Answer(
            302,
            vec![("location", "/api/v1/event".into())],
            String::new(),
        ),
        _ => Act::Forward,
    })
    .await;
    let data = TempData::new();
    let mut o = options(&proxy.base, DEMO_TOKEN, &data.path().join("x"));
    o.retries = 2;

    let err = pull::run(&o).await.expect_err("the pull fails");

    assert!(matches!(err, PullError::Transport { .. }), "{err:?}");
    assert!(err.to_string().contains("more than 5 redirects"), "{err}");
    assert!(
        proxy.count("/api/v1/event") <= 7,
        "retried: {}",
        proxy.count("/api/v1/event")
    );
    assert_no_leftovers(data.path());
}

/// A data folder `ROOT/data` holding three bundles (`alpha`, `beta`, `gamma`), each with a file
/// the loader does not know; gen's tests use it too.
pub(crate) fn three_bundles(root: &TempData) -> PathBuf {
    for name in ["alpha", "beta", "gamma"] {
        root.with_demo(&format!("data/{name}"));
        root.write(&format!("data/{name}/notes.txt"), format!("{name}'s notes"));
    }
    root.path().join("data")
}

/// The refusal of a folder of bundles: named, with its bundles, and the `DIR/NAME` suggestion.
pub(crate) fn assert_refused_folder_of_bundles(code: i32, output: &str, data: &Path) {
    assert_eq!(code, 2, "{output}");
    let named = format!("{} holds 3 bundles (alpha, beta, gamma)", data.display());
    assert!(output.contains(&named), "{output}");
    let suggested = format!("did you mean --into {}?", data.join("NAME").display());
    assert!(output.contains(&suggested), "{output}");
    assert!(output.contains("--force"), "{output}");
}

#[tokio::test]
async fn pull_into_a_folder_of_bundles_or_a_stray_file_is_refused_before_any_request() {
    let source = spawn_app(&demo_data()).await;
    let proxy = Proxy::start(&source.base, |_, _, _| Act::Forward).await;
    let root = TempData::new();
    let data = three_bundles(&root);
    root.write("notes/todo.txt", "keep me");
    let notes = root.path().join("notes");
    let before = files(root.path());

    let (code, output) = pull_binary(&proxy.base, DEMO_TOKEN, &data, &[]).await;
    assert_refused_folder_of_bundles(code, &output, &data);
    let (code, output) = pull_binary(&proxy.base, DEMO_TOKEN, &notes, &[]).await;
    assert_eq!(code, 2, "{output}");
    assert!(
        output.contains("holds 1 other entry (todo.txt)"),
        "{output}"
    );

    assert_eq!(files(root.path()), before, "a file changed");
    assert!(proxy.seen().is_empty(), "requests: {:?}", proxy.seen());
    assert_no_leftovers(root.path());
}

#[tokio::test]
async fn pull_force_replaces_the_folder_and_absent_empty_or_bundle_targets_need_no_force() {
    let source = spawn_app(&demo_data()).await;
    let root = TempData::new();
    let data = three_bundles(&root);
    std::fs::create_dir(root.path().join("empty")).expect("mkdir");
    let pulled = crate::helpers::entry_names;
    // The demo bundle holds a file of every endpoint pull fetches (the first test checks it).
    let bundle = pulled_part_of(&demo_data().join("demo"));

    // Absent, empty, and a bundle with a stray file (what a refresh replaces): no --force.
    for target in ["fresh", "empty", "data/alpha"] {
        let into = root.path().join(target);
        let (code, output) = pull_binary(&source.base, DEMO_TOKEN, &into, &[]).await;
        assert_eq!(code, 0, "{target}: {output}");
        assert_eq!(pulled(&into), bundle, "{target}");
    }
    // The folder of bundles, forced: it becomes the pulled bundle, its bundles gone.
    let (code, output) = pull_binary(&source.base, DEMO_TOKEN, &data, &["--force"]).await;
    assert_eq!(code, 0, "{output}");
    assert_eq!(pulled(&data), bundle);
    assert_no_leftovers(root.path());
}

/// The entries of a bundle folder that `pull` copies without `--app`: all but the files of the
/// two-header routes (`customclient/events`, `custom/*`), which need the company's app key
/// (docs/api.md); `custom/*` are POSTs, never pulled.
fn pulled_part_of(bundle: &std::path::Path) -> Vec<String> {
    let two_header_files = [
        "company_events.json",
        "custom_getdata.json",
        "custom_getdatasubscribed.json",
    ];
    crate::helpers::entry_names(bundle)
        .into_iter()
        .filter(|name| !two_header_files.contains(&name.as_str()))
        .collect()
}

#[tokio::test]
async fn with_the_companys_app_key_the_companys_events_are_pulled_too() {
    let source = spawn_app(&demo_data()).await;
    let root = TempData::new();
    let into = root.path().join("company");
    let (code, output) =
        pull_binary(&source.base, DEMO_TOKEN, &into, &["--app", "c0mpany-key"]).await;
    assert_eq!(code, 0, "{output}");
    assert!(
        !output.contains("c0mpany-key"),
        "the app key printed: {output}"
    );
    let pulled = std::fs::read(into.join("company_events.json")).expect("pulled");
    let served = source
        .get_with(
            "/api/v1/customclient/events",
            DEMO_TOKEN,
            &[("Authorization-App", "c0mpany-key")],
        )
        .await;
    assert_eq!(served.status, 200);
    assert_eq!(pulled, served.body.to_vec());
    // The copy takes that key alone on the company routes, as its source would.
    let copy = spawn_app(root.path()).await;
    for (key, status) in [("c0mpany-key", 200), ("another-key", 401)] {
        let got = copy
            .get_with(
                "/api/v1/customclient/events",
                DEMO_TOKEN,
                &[("Authorization-App", key)],
            )
            .await;
        assert_eq!(got.status, status, "{key}: {}", got.text());
    }
    // Without the key, the file is left out (the first test checks the rest).
    let without = root.path().join("plain");
    let (code, output) = pull_binary(&source.base, DEMO_TOKEN, &without, &[]).await;
    assert_eq!(code, 0, "{output}");
    assert!(!without.join("company_events.json").exists());
    assert!(
        output.contains(
            "the company's event list (customclient/events) was not pulled: if the account has a company plan, give --app KEY"
        ),
        "{output}"
    );

    // A source taking one key: another is named as the app key refused, not the token; a
    // blank one is refused before anything is asked.
    let locked = TempData::new();
    locked.with_demo("demo");
    std::fs::write(
        locked.path().join("demo/bundle.toml"),
        "tokens = [\"demo-token\"]\napp_keys = [\"c0mpany-key\"]\n",
    )
    .expect("write");
    let locked_source = spawn_app(locked.path()).await;
    for (app, says) in [
        (
            "wrong-key",
            "the server refused the app key (401 InvalidAuthorizationApp)",
        ),
        (" ", "--app: the app key is blank"),
    ] {
        let into = root.path().join("refused");
        let (code, output) =
            pull_binary(&locked_source.base, DEMO_TOKEN, &into, &["--app", app]).await;
        assert_ne!(code, 0, "{output}");
        assert!(output.contains(says), "{app:?}: {output}");
        assert!(!output.contains("check --token"), "{output}");
        assert!(!into.exists());
    }
}

/// A 429 is the server's limit, not one request's: after one, no worker sends anything until
/// its `Retry-After` has passed (each used to wait only for its own, so the others went on
/// being refused and a pull could fail on a limit it was told about).
#[tokio::test]
async fn a_429_holds_every_worker_until_its_retry_after() {
    let served = TempData::new();
    let mut g = eventbox::gen::GenOptions::new(served.path().join("gen"));
    g.payments = 120;
    g.submissions = 4;
    g.token = Some(eventbox::token::Token::new("gen-token"));
    eventbox::gen::run(&g).expect("gen");
    let source = spawn_app(served.path()).await;
    let refused = Arc::new(Mutex::new(None::<Instant>));
    let at = Arc::clone(&refused);
    let proxy = Proxy::start(&source.base, move |path, _, _| {
        if path != "/api/v1/payments/details" {
            return Act::Forward;
        }
        let mut at = at.lock().expect("lock");
        if at.is_none() {
            *at = Some(Instant::now());
            return Act::Answer(429, vec![("retry-after", "1".into())], "slow down".into());
        }
        // Spread the details over time, so that the workers are busy when the 429 comes.
        Act::Stall(Duration::from_millis(5))
    })
    .await;
    let data = TempData::new();
    let mut o = options(&proxy.base, "gen-token", &data.path().join("copy"));
    o.concurrency = 4;

    let summary = pull::run(&o).await.expect("the pull completes");

    assert_eq!(summary.retries, 1, "{summary}");
    let refused = refused.lock().expect("lock").expect("a 429 was answered");
    // Requests already on their way when the 429 left may arrive just after it.
    let during: Vec<Duration> = proxy
        .seen()
        .iter()
        .filter(|s| s.at > refused)
        .map(|s| s.at - refused)
        .filter(|d| *d > Duration::from_millis(100) && *d < Duration::from_millis(900))
        .collect();
    assert!(during.is_empty(), "sent during the Retry-After: {during:?}");
}

/// An answer larger than `--max-file-bytes` (as decoded) is refused as it arrives, not held
/// whole: a source answering gigabytes must not take the memory of the server a kiosk's
/// refresh runs in.
#[tokio::test]
async fn an_answer_over_max_file_bytes_is_refused_and_changes_nothing() {
    let source = spawn_app(&demo_data()).await;
    let data = TempData::new();
    data.with_demo("kiosk");
    let into = data.path().join("kiosk");
    let before = files(&into);
    let mut o = options(&source.base, DEMO_TOKEN, &into);
    // The largest answer of the demo, one byte too many.
    let payments = source
        .get("/api/v1/payments", DEMO_TOKEN)
        .await
        .text()
        .len() as u64;
    o.max_file_bytes = payments - 1;

    let err = pull::run(&o).await.expect_err("refused");

    assert!(
        matches!(&err, PullError::TooLarge { url, limit } if url.ends_with("/payments") && *limit == payments - 1),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("bytes, the largest file a bundle may hold (--max-file-bytes)"),
        "{err}"
    );
    assert!(files(&into) == before, "the earlier copy changed");
    assert_no_leftovers(data.path());
}

/// A payments answer of another shape is refused with serde's reason, which quotes the
/// server's text: the token in it is hidden and the text cut, as other server text is.
#[tokio::test]
async fn a_payments_answer_of_another_shape_never_shows_the_token_or_a_whole_page() {
    let source = spawn_app(&demo_data()).await;
    let echo = format!(
        "debug: Authorization-Token {DEMO_TOKEN} {}",
        "x".repeat(5_000)
    );
    let body = serde_json::json!({ "data": echo }).to_string();
    let proxy = Proxy::start(&source.base, move |path, _, _| match path {
        "/api/v1/payments" => Act::Answer(200, vec![], body.clone()),
        _ => Act::Forward,
    })
    .await;
    let data = TempData::new();
    let err = pull::run(&options(&proxy.base, DEMO_TOKEN, &data.path().join("copy")))
        .await
        .expect_err("not a list");

    let said = err.to_string();
    assert!(matches!(err, PullError::Payments(_)), "{err:?}");
    assert!(!said.contains(DEMO_TOKEN), "{said}");
    assert!(said.len() < 400, "{} bytes: {said}", said.len());
    assert_no_leftovers(data.path());
}

/// The platform's 404s that mean "none": a list with nothing in it (`{"data": [], "count": 0}`,
/// more-api.md's attendees) is pulled as the empty list, and a payment without a detail gets no
/// file (its detail is then made from the payment), with a warning naming it. Either used to
/// fail the whole pull, so such an event could never be copied to a kiosk.
#[tokio::test]
async fn a_404_meaning_none_is_an_empty_list_or_a_detail_without_a_file() {
    let source = spawn_app(&demo_data()).await;
    let refs = references(&source, DEMO_TOKEN).await;
    let missing = refs.first().expect("a reference").clone();
    let gone = missing.clone();
    let proxy = Proxy::start(&source.base, move |path, reference, _| {
        if path.ends_with("/attendees") {
            return Act::Answer(404, vec![], r#"{"data": [], "count": 0}"#.into());
        }
        match reference {
            Some(r) if r == gone => Act::Answer(
                404,
                vec![],
                r#"{"message": "Pagamento não encontrado", "erros": [], "count_erros": 1}"#.into(),
            ),
            _ => Act::Forward,
        }
    })
    .await;
    let data = TempData::new();
    let into = data.path().join("kiosk");

    let summary = pull::run(&options(&proxy.base, DEMO_TOKEN, &into))
        .await
        .expect("the pull succeeds");

    let warned = summary.warnings.join("\n");
    assert!(
        warned.contains(&format!(
            "the source has no detail for 1 payment (\"{missing}\")"
        )),
        "{warned}"
    );
    assert!(!into
        .join("payment_details")
        .join(format!("{missing}.json"))
        .exists());
    let copy = spawn_app(data.path()).await;
    let attendees = copy.get("/api/v1/attendees", DEMO_TOKEN).await;
    assert_eq!(
        attendees.json()["data"],
        serde_json::json!([]),
        "{}",
        attendees.text()
    );
    let detail = copy
        .get(
            &format!("/api/v1/payments/details?reference={missing}"),
            DEMO_TOKEN,
        )
        .await;
    assert_eq!(detail.status.as_u16(), 200, "{}", detail.text());
    assert!(detail.json()["data"]
        .as_array()
        .is_some_and(|rows| !rows.is_empty()));
    assert_no_leftovers(data.path());
}

/// A 404 means "none" only in the platform's own shapes, and only where the platform answers
/// so: the framework's `{"Message": ...}` for a detail (a route the source lacks) and an empty
/// list for the payments (whose 404 is no answer) still fail the pull, leaving nothing.
#[tokio::test]
async fn a_404_of_another_shape_or_for_the_payments_fails_the_pull() {
    let source = spawn_app(&demo_data()).await;
    for (on, body) in [
        (
            "/payments/details",
            r#"{"Message": "No HTTP resource was found that matches the request URI."}"#,
        ),
        ("/payments", r#"{"data": [], "count": 0}"#),
    ] {
        let proxy = Proxy::start(&source.base, move |path, _, _| {
            if path.ends_with(on) {
                Act::Answer(404, vec![], body.into())
            } else {
                Act::Forward
            }
        })
        .await;
        let data = TempData::new();
        let into = data.path().join("kiosk");
        let err = pull::run(&options(&proxy.base, DEMO_TOKEN, &into))
            .await
            .expect_err("no answer");
        assert!(
            matches!(err, PullError::Status { status: 404, .. }),
            "{on}: {err:?}"
        );
        assert!(!into.exists(), "{on}");
        assert_no_leftovers(data.path());
    }
}

/// A 429 without `Retry-After` holds every worker for the first backoff (250 ms): its wait is
/// no shorter, and the retry line says it (it said a jittered wait shorter than the one held);
/// 429s in a row back off as any retry does (the waits double, from 250 ms).
#[tokio::test]
async fn a_429_without_retry_after_waits_at_least_the_first_backoff_and_backs_off() {
    let source = spawn_app(&demo_data()).await;
    let proxy = Proxy::start(&source.base, |path, _, n| match (path, n) {
        ("/api/v1/event", 0..=2) => Act::Answer(429, vec![], "slow down".into()),
        _ => Act::Forward,
    })
    .await;
    let data = TempData::new();
    let into = data.path().join("limited");

    let (code, output) = pull_binary(&proxy.base, DEMO_TOKEN, &into, &[]).await;

    assert_eq!(code, 0, "{output}");
    let waits: Vec<std::time::Duration> = output
        .lines()
        .filter_map(|l| l.split_once("; retrying in ").map(|(_, w)| w))
        .map(|w| humantime::parse_duration(w.trim()).expect("a duration"))
        .collect();
    assert_eq!(waits.len(), 3, "{output}");
    let ms = std::time::Duration::from_millis;
    assert_eq!(waits[0], ms(250), "{output}");
    // Jitter draws each backoff from the upper half: 250–500 ms, then 500 ms–1 s.
    assert!(waits[1] >= ms(250) && waits[1] <= ms(500), "{output}");
    assert!(waits[2] >= ms(500) && waits[2] <= ms(1000), "{output}");
}
