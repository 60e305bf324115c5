//! Shared test set-up: data folders in temporary directories, and the server started in-process
//! on `127.0.0.1:0` (the listener is bound before the server task starts, so the first request
//! cannot race the start).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use eventbox::app::App;
use eventbox::config::ServeOptions;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// The repository's demo data folder.
pub fn demo_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data")
}

pub const DEMO_TOKEN: &str = "demo-token";

/// A client builder for tests: it sees answers as sent. The package turns on reqwest's gzip
/// decoding (for `pull`), which would otherwise ask for gzip on every request and decode it.
pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().no_gzip()
}

/// A client for tests (see [`client_builder`]).
pub fn client() -> reqwest::Client {
    client_builder().build().expect("a client")
}

/// A server running in this process.
pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub app: App,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// The app serving `data` with the options `configure` sets (as `serve`'s flags would), loaded.
pub fn loaded_with(data: &Path, configure: impl FnOnce(&mut ServeOptions)) -> App {
    let mut options = ServeOptions::for_folder(data);
    configure(&mut options);
    let app = App::with_options(&options).expect("options serve takes");
    app.load().expect("the data folder is readable");
    app
}

/// Serves `app` (loaded or not) on an ephemeral port until the returned app is dropped.
pub async fn serve_app(app: App) -> TestApp {
    serve_app_at(IpAddr::V4(Ipv4Addr::LOCALHOST), app).await
}

/// As [`serve_app`], listening on `ip` (a free port) instead of 127.0.0.1.
pub async fn serve_app_at(ip: IpAddr, app: App) -> TestApp {
    let listener = TcpListener::bind(SocketAddr::new(ip, 0))
        .await
        .unwrap_or_else(|e| panic!("bind {ip}:0: {e}"));
    serve_app_on(listener, app)
}

/// As [`serve_app`], on a listener already bound (a server started again at the address an
/// earlier one had).
pub fn serve_app_on(listener: TcpListener, app: App) -> TestApp {
    let addr = listener.local_addr().expect("a local address");
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(eventbox::http::serve(listener, app.service(), async move {
        let _ = stopped.await;
    }));
    TestApp {
        base: format!("http://{addr}"),
        client: client(),
        app,
        stop: Some(stop),
        server: Some(server),
    }
}

/// Loads `data` and serves it on an ephemeral port until the returned app is dropped.
pub async fn spawn_app(data: &Path) -> TestApp {
    let app = App::new(data);
    app.load().expect("the data folder is readable");
    serve_app(app).await
}

impl TestApp {
    /// Asks the server to stop (as SIGTERM does) and waits until it has drained.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            server
                .await
                .expect("the server task")
                .expect("the server ends cleanly");
        }
    }
}

/// What a test looks at in an answer.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: bytes::Bytes,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts the error contract: status, stable code, and the documented shape.
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(
            self.status.as_u16(),
            status,
            "status; body: {}",
            self.text()
        );
        let v = self.json();
        assert_eq!(v["erros"][0]["code"], status, "erros[0].code in {v}");
        assert_eq!(
            v["erros"][0]["description"], code,
            "erros[0].description in {v}"
        );
        assert_eq!(v["count_erros"], 1, "count_erros in {v}");
        assert!(
            v["message"].as_str().is_some_and(|m| !m.is_empty()),
            "message in {v}"
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/json; charset=utf-8")
        );
    }
}

/// Sends a request and keeps what a test looks at.
pub async fn answer(req: reqwest::RequestBuilder) -> Answer {
    let res = req.send().await.expect("the request is answered");
    let status = res.status();
    let headers = res.headers().clone();
    let body = res.bytes().await.expect("the body is read");
    Answer {
        status,
        headers,
        body,
    }
}

impl TestApp {
    /// Sends a request; `token` goes in `Authorization-Token`.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<(&str, &[u8])>,
    ) -> Answer {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.header("Authorization-Token", t);
        }
        if let Some((content_type, bytes)) = body {
            if !content_type.is_empty() {
                req = req.header("Content-Type", content_type);
            }
            req = req.body(bytes.to_vec());
        }
        answer(req).await
    }

    /// A GET with extra request headers.
    pub async fn get_with(&self, path: &str, token: &str, headers: &[(&str, &str)]) -> Answer {
        self.request(Method::GET, path, token, headers).await
    }

    /// Any method with a token and extra request headers (no body).
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        token: &str,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if !token.is_empty() {
            req = req.header("Authorization-Token", token);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        answer(req).await
    }

    pub async fn get(&self, path: &str, token: &str) -> Answer {
        self.send(Method::GET, path, Some(token), None).await
    }
}

/// A data folder in a temporary directory, written file by file.
pub struct TempData {
    pub dir: tempfile::TempDir,
}

impl TempData {
    pub fn new() -> Self {
        TempData {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `contents` at `rel` (creating folders).
    pub fn write(&self, rel: &str, contents: impl AsRef<[u8]>) -> &Self {
        let path = self.dir.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create folders");
        }
        std::fs::write(&path, contents).expect("write a file");
        self
    }

    /// Copies the demo bundle in under `name`.
    pub fn with_demo(&self, name: &str) -> &Self {
        copy_dir(&demo_data().join("demo"), &self.dir.path().join(name));
        self
    }

    /// Copies the demo bundle in under `name`, its bundle.toml given `simulate` (TOML text: a
    /// `[simulate]` table and its endpoint tables) after the demo token.
    pub fn with_simulating_demo(&self, name: &str, simulate: &str) -> &Self {
        self.with_demo(name);
        self.write(
            &format!("{name}/bundle.toml"),
            format!("tokens = [\"{DEMO_TOKEN}\"]\n{simulate}"),
        )
    }
}

/// How a raw HTTP/1.1 exchange ended, read until the server closed the connection.
#[derive(Debug)]
pub struct RawExchange {
    /// Every byte received.
    pub received: Vec<u8>,
    /// `Ok` for an orderly close (FIN), the read error otherwise (an RST is `ConnectionReset`).
    pub end: std::io::Result<()>,
}

/// Writes `request` (raw HTTP/1.1) on a new connection and reads until the server closes it;
/// fails the test if that takes over 5 s.
pub async fn raw_http1(base: &str, request: impl AsRef<[u8]>) -> RawExchange {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    conn.write_all(request.as_ref()).await.expect("write");
    let mut received = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let end = loop {
        let read = tokio::time::timeout(std::time::Duration::from_secs(5), conn.read(&mut buf))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the server did not close the connection within 5 s; received {:?}",
                    String::from_utf8_lossy(&received)
                )
            });
        match read {
            Ok(0) => break Ok(()),
            Ok(n) => received.extend_from_slice(&buf[..n]),
            Err(e) => break Err(e),
        }
    };
    RawExchange { received, end }
}

/// The names of a folder's entries, sorted.
pub fn entry_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("a folder")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// Copies the demo bundle to `to` (any folder, not only a [`TempData`]).
pub fn copy_demo(to: &Path) {
    copy_dir(&demo_data().join("demo"), to);
}

/// Copies a folder's files and folders, recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create folder");
    for entry in std::fs::read_dir(from).expect("read folder") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy file");
        }
    }
}

/// The file is readable by its owner only (0600): `bundle.toml` names the token.
#[cfg(unix)]
pub fn assert_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .expect("the file")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "{}: mode {mode:o}", path.display());
}

/// The OpenAPI document, as built into the binary. That it lists exactly the endpoint table's
/// routes is a unit test of `src/api.rs`, so tests derive the endpoints from it.
pub fn openapi() -> Value {
    serde_json::from_slice(include_bytes!("../../openapi.json")).expect("openapi.json is JSON")
}

/// The API's reads of a whole body with the token alone: every documented `GET /api/v1/...`
/// without a path parameter (`{id}`) or a `reference` and without a second header, as the
/// document writes the path.
pub fn whole_reads() -> Vec<String> {
    let doc = openapi();
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        let get = &item["get"];
        let token_only = get["security"][0]
            .as_object()
            .is_some_and(|s| s.len() == 1 && s.contains_key("token"));
        if !token_only {
            continue;
        }
        let params = item["get"]["parameters"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let named = |n: &str| params.iter().any(|p| p["name"] == n);
        if path.starts_with("/api/v1/") && !path.contains('{') && !named("reference") {
            out.push(path.clone());
        }
    }
    assert!(out.len() >= 6, "{out:?}");
    out
}

/// The value of one series (`name{labels}`) of a metrics text, if shown.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}
