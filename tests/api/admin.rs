//! The admin rule (issue 13, item 7): `/status`, `/_journal` and `/_writes/reset` answer a
//! loopback peer freely and any other peer only with `--admin-token` as a bearer; the probes'
//! and scrapers' routes, the document and the API stay open.
//!
//! A peer that is not loopback is real here: the server listens on this machine's own address
//! of the default route (found with a UDP socket's `connect`, which sends nothing), and the
//! client connects to it, so the server sees that address as the peer. Without such an address
//! the remote tests say why and stop (the unit tests of `src/http/admin.rs` cover the rule on
//! addresses alone).

use std::net::{IpAddr, SocketAddr, UdpSocket};

use eventbox::app::App;
use eventbox::token::Token;
use reqwest::Method;

use crate::cli::{get_event, start_binary};
use crate::helpers::{answer, demo_data, raw_http1, serve_app_at, Answer, TestApp, DEMO_TOKEN};

const SECRET: &str = "adm1n-Secret-0f-the-kiosk-7c4e";

/// This machine's address on its default route, if it has one that is not loopback and can be
/// listened on; `None` with the reason printed otherwise.
pub(crate) fn remote_ip() -> Option<IpAddr> {
    let found = (|| -> Result<IpAddr, String> {
        let socket = UdpSocket::bind("0.0.0.0:0").map_err(|e| format!("udp bind: {e}"))?;
        // TEST-NET-3: routed like any outside address, and nothing is sent by `connect`.
        socket
            .connect("203.0.113.1:9")
            .map_err(|e| format!("no default route: {e}"))?;
        let ip = socket
            .local_addr()
            .map_err(|e| format!("no local address: {e}"))?
            .ip();
        if ip.is_loopback() || ip.is_unspecified() {
            return Err(format!("the default route's address is {ip}"));
        }
        std::net::TcpListener::bind(SocketAddr::new(ip, 0))
            .map_err(|e| format!("cannot listen on {ip}: {e}"))?;
        Ok(ip)
    })();
    match found {
        Ok(ip) => Some(ip),
        Err(reason) => {
            println!("skipped: no address of this machine but loopback to test from ({reason})");
            None
        }
    }
}

/// The demo, loaded, with the journal on and `admin_token` configured as `serve` would be.
fn demo_app(admin_token: Option<&str>) -> App {
    crate::helpers::loaded_with(&demo_data(), |o| {
        o.journal = 50;
        o.admin_token = admin_token.map(Token::new);
    })
}

/// The admin routes, every method of each.
const ADMIN: [(&str, &str); 5] = [
    ("GET", "/status"),
    ("HEAD", "/status"),
    ("GET", "/_journal"),
    ("DELETE", "/_journal"),
    ("POST", "/_writes/reset"),
];

/// A request to `app` with the demo token and, when given, `Authorization: <authorization>`.
async fn call(app: &TestApp, method: &str, path: &str, authorization: Option<&str>) -> Answer {
    let method = Method::from_bytes(method.as_bytes()).expect("a method");
    let mut req = app
        .client
        .request(method, format!("{}{path}", app.base))
        .header("Authorization-Token", DEMO_TOKEN);
    if let Some(value) = authorization {
        req = req.header("Authorization", value);
    }
    answer(req).await
}

/// The status an admin route answers when let through.
fn ok_status(method: &str, path: &str) -> u16 {
    match (method, path) {
        ("DELETE", _) | (_, "/_writes/reset") => 204,
        _ => 200,
    }
}

#[tokio::test]
async fn loopback_clients_use_the_admin_routes_without_a_token_configured_or_not() {
    for configured in [None, Some(SECRET)] {
        let app = serve_app_at([127, 0, 0, 1].into(), demo_app(configured)).await;
        for (method, path) in ADMIN {
            let res = call(&app, method, path, None).await;
            assert_eq!(
                res.status.as_u16(),
                ok_status(method, path),
                "{configured:?} {method} {path}: {}",
                res.text()
            );
            let wrong = call(&app, method, path, Some("Bearer wrong")).await;
            assert_eq!(wrong.status.as_u16(), ok_status(method, path));
        }
    }
}

/// A web page open in a browser on the kiosk itself reaches eventbox from loopback. It must
/// not read the journal (names, e-mails) nor reset writes: admin answers carry no CORS
/// headers, admin routes answer no preflight, a request from a page of another origin is 403
/// `admin_cross_origin`, and a host name rebound to 127.0.0.1 (DNS rebinding) makes the client
/// remote. Before, all of these were answered, with `Access-Control-Allow-Origin: *`.
#[tokio::test]
async fn a_web_page_on_the_machine_itself_cannot_use_the_admin_routes() {
    let app = serve_app_at([127, 0, 0, 1].into(), demo_app(None)).await;
    let own_origin = app.base.clone();
    let host = app.base.trim_start_matches("http://").to_string();
    let with = |method: &str, path: &str, headers: Vec<(&'static str, String)>| {
        let method = Method::from_bytes(method.as_bytes()).expect("a method");
        let mut req = app
            .client
            .request(method, format!("{}{path}", app.base))
            .header("Authorization-Token", DEMO_TOKEN);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        answer(req)
    };
    for (method, path) in ADMIN {
        let res = with(
            method,
            path,
            vec![("Origin", "https://evil.example".into())],
        )
        .await;
        if method != "HEAD" {
            res.assert_error(403, "admin_cross_origin");
        } else {
            assert_eq!(res.status.as_u16(), 403, "{method} {path}");
        }
        assert_eq!(res.header("access-control-allow-origin"), None, "{path}");

        // Rebound: the page's own name for 127.0.0.1.
        let rebound = with(method, path, vec![("Host", "evil.example:8080".into())]).await;
        if method != "HEAD" {
            rebound.assert_error(403, "admin_host_not_local");
        } else {
            assert_eq!(rebound.status.as_u16(), 403, "{method} {path} rebound");
        }

        // The status page's own requests: same origin, answered, still without CORS headers.
        let own = with(
            method,
            path,
            vec![("Origin", own_origin.clone()), ("Host", host.clone())],
        )
        .await;
        assert_eq!(
            own.status.as_u16(),
            ok_status(method, path),
            "{method} {path}"
        );
        assert_eq!(own.header("access-control-allow-origin"), None, "{path}");
    }
    for path in ["/status", "/_journal", "/_writes/reset", "/_queue"] {
        let preflight = with(
            "OPTIONS",
            path,
            vec![
                ("Origin", "https://evil.example".into()),
                ("Access-Control-Request-Method", "POST".into()),
                (
                    "Access-Control-Request-Headers",
                    "authorization-token".into(),
                ),
            ],
        )
        .await;
        assert_ne!(preflight.status.as_u16(), 204, "{path}");
        assert_eq!(
            preflight.header("access-control-allow-origin"),
            None,
            "{path}"
        );
        assert_eq!(
            preflight.header("access-control-allow-methods"),
            None,
            "{path}"
        );
    }
    // The metrics are open, but not to pages of other origins: every bundle's name, for any
    // page the operator's browser opens. The probes keep CORS.
    for (path, cors) in [("/metrics", None), ("/healthz", Some("*"))] {
        let res = with("GET", path, vec![("Origin", "https://evil.example".into())]).await;
        assert_eq!(res.status.as_u16(), 200, "{path}");
        assert_eq!(res.header("access-control-allow-origin"), cors, "{path}");
        // Nor does a preflight allow it (405, as on the admin routes).
        let preflight = with(
            "OPTIONS",
            path,
            vec![
                ("Origin", "https://evil.example".into()),
                ("Access-Control-Request-Method", "GET".into()),
            ],
        )
        .await;
        let status = if cors.is_some() { 204 } else { 405 };
        assert_eq!(preflight.status.as_u16(), status, "{path}");
    }
    // The API keeps its CORS.
    let api = with(
        "GET",
        "/api/v1/event",
        vec![("Origin", "https://evil.example".into())],
    )
    .await;
    assert_eq!(api.status.as_u16(), 200);
    assert_eq!(api.header("access-control-allow-origin"), Some("*"));
}

/// A Host the check cannot read names no loopback host: one that is not visible ASCII (hyper
/// lets bytes over 0x7F through), or two different ones. Before, both counted as local: a page
/// or a client could read `/status` and `POST /_writes/reset` wiped the writes. Both are now
/// refused before routing (400 `invalid_host`, `http::guard`) and the admin check's own
/// refusal (403 `admin_host_not_local`) stands behind it, tested in `src/http/admin.rs`.
#[tokio::test]
async fn a_host_that_cannot_be_read_names_no_loopback_host() {
    let app = serve_app_at([127, 0, 0, 1].into(), demo_app(None)).await;
    let host = app.base.trim_start_matches("http://").to_string();
    let request = |method: &str, path: &str, hosts: &[u8]| {
        let mut req = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
        req.extend_from_slice(hosts);
        req.extend_from_slice(
            format!(
                "Authorization-Token: {DEMO_TOKEN}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        );
        req
    };
    let unreadable = b"Host: evil.example\xff\r\n".to_vec();
    let two = format!("Host: {host}\r\nHost: evil.example\r\n").into_bytes();
    for hosts in [&unreadable, &two] {
        for (method, path) in [("GET", "/status"), ("POST", "/_writes/reset")] {
            let got = raw_http1(&app.base, request(method, path, hosts)).await;
            let text = String::from_utf8_lossy(&got.received);
            assert!(text.starts_with("HTTP/1.1 400 "), "{method} {path}: {text}");
            // Said as the Host's fault: "loopback clients only" to a loopback client misled.
            assert!(text.contains("invalid_host"), "{text}");
        }
    }
    // The same requests with the one readable Host are answered: the refusals are the Host's.
    let own = format!("Host: {host}\r\n").into_bytes();
    for (method, path) in [("GET", "/status"), ("POST", "/_writes/reset")] {
        let got = raw_http1(&app.base, request(method, path, &own)).await;
        let text = String::from_utf8_lossy(&got.received);
        assert!(text.starts_with("HTTP/1.1 20"), "{method} {path}: {text}");
    }
}

/// An absolute-form target names the host the request went to, whatever its `Host` says
/// (RFC 9112 §3.2.2): a rebound name there is refused, a loopback one answered.
#[tokio::test]
async fn an_absolute_form_target_names_the_host_over_the_host_header() {
    let app = serve_app_at([127, 0, 0, 1].into(), demo_app(None)).await;
    let own = app.base.trim_start_matches("http://").to_string();
    let request = |target_host: &str, host: &str| {
        format!(
            "GET http://{target_host}/status HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .into_bytes()
    };

    let rebound = raw_http1(&app.base, request("evil.example:8080", &own)).await;
    let local = raw_http1(&app.base, request(&own, "evil.example:8080")).await;

    let rebound = String::from_utf8_lossy(&rebound.received);
    assert!(rebound.starts_with("HTTP/1.1 403 "), "{rebound}");
    assert!(rebound.contains("admin_host_not_local"), "{rebound}");
    let local = String::from_utf8_lossy(&local.received);
    assert!(local.starts_with("HTTP/1.1 200 "), "{local}");
}

#[tokio::test]
async fn remote_clients_get_403_from_admin_routes_without_a_configured_token() {
    let Some(ip) = remote_ip() else { return };
    let app = serve_app_at(ip, demo_app(None)).await;
    for (method, path) in ADMIN {
        for authorization in [None, Some("Bearer anything")] {
            let res = call(&app, method, path, authorization).await;
            if method == "HEAD" {
                assert_eq!(res.status, 403, "{method} {path}");
                continue;
            }
            res.assert_error(403, "admin_local_only");
            assert_documented(method, path, &res);
            assert!(
                res.json()["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("--admin-token")),
                "{}",
                res.text()
            );
            assert_eq!(res.header("www-authenticate"), None);
        }
    }
    // Another method on an admin route: the rule still comes first.
    call(&app, "PUT", "/status", None)
        .await
        .assert_error(403, "admin_local_only");
    assert_open_routes(&app).await;
}

#[tokio::test]
async fn remote_clients_need_the_admin_token_as_a_bearer() {
    let Some(ip) = remote_ip() else { return };
    let app = serve_app_at(ip, demo_app(Some(SECRET))).await;
    let right = format!("Bearer {SECRET}");
    let cut = format!("Bearer {}", &SECRET[..SECRET.len() - 1]);
    let longer = format!("Bearer {SECRET}x");
    let basic = format!("Basic {SECRET}");
    for (method, path) in ADMIN {
        for wrong in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer wrong"),
            Some(SECRET),
            Some(basic.as_str()),
            Some(cut.as_str()),
            Some(longer.as_str()),
        ] {
            let res = call(&app, method, path, wrong).await;
            if method != "HEAD" {
                res.assert_error(401, "admin_token_required");
                assert_documented(method, path, &res);
            }
            assert_eq!(res.status, 401, "{method} {path} {wrong:?}");
            assert_eq!(
                res.header("www-authenticate"),
                Some("Bearer realm=\"eventbox\""),
                "{method} {path}"
            );
        }
        let res = call(&app, method, path, Some(&right)).await;
        assert_eq!(
            res.status.as_u16(),
            ok_status(method, path),
            "{method} {path}: {}",
            res.text()
        );
        // The scheme is case-insensitive.
        let lower = call(&app, method, path, Some(&format!("bearer {SECRET}"))).await;
        assert_eq!(lower.status.as_u16(), ok_status(method, path));
    }
    // The bundle's token is still needed by /_writes/reset, after the admin rule.
    let res = answer(
        app.client
            .post(format!("{}/_writes/reset", app.base))
            .header("Authorization", &right),
    )
    .await;
    res.assert_error(401, "missing_token");
    // The journal lists the refusals, and never the bearer.
    let journal = call(&app, "GET", "/_journal?status=401", Some(&right)).await;
    assert_eq!(journal.status, 200);
    assert!(journal.json()["count"].as_u64().is_some_and(|n| n > 0));
    assert!(!journal.text().contains(SECRET), "{}", journal.text());
    assert_open_routes(&app).await;
}

/// A GET's error answer is one `openapi.json` documents for its path and status.
fn assert_documented(method: &str, path: &str, res: &Answer) {
    if method != "GET" {
        return;
    }
    let doc = crate::helpers::openapi();
    let status = res.status.as_u16().to_string();
    let schema = crate::openapi::response_schema(&doc, path, &status, true);
    assert!(!schema.is_null(), "GET {path}: {status} is not documented");
    let problems = crate::openapi::problems(&schema, &res.json());
    assert!(problems.is_empty(), "GET {path} {status}: {problems:#?}");
}

/// `/healthz`, `/readyz`, `/metrics`, `/openapi.json` and the API answer this client, with no
/// `Authorization` header.
async fn assert_open_routes(app: &TestApp) {
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/openapi.json",
        "/api/v1/event",
        // The status page holds no data: its script reads the admin routes with the token.
        "/_ui",
    ] {
        let res = app.get(path, DEMO_TOKEN).await;
        assert_eq!(res.status, 200, "{path}: {}", res.text());
    }
}

#[tokio::test]
async fn the_admin_token_never_appears_in_the_logs_the_startup_lines_or_help() {
    // Remote when this machine has an address to be reached on, so the bearer is checked.
    let ip = remote_ip().unwrap_or([127, 0, 0, 1].into());
    let addr = SocketAddr::new(ip, 0).to_string();
    let demo = demo_data();
    let mut served = start_binary(
        &[
            "serve",
            "--addr",
            &addr,
            "--no-watch",
            "--access-log",
            "--journal",
            "20",
            "--log-level",
            "debug",
            "--admin-token",
            SECRET,
        ],
        &[("EVENTBOX_DATA", demo.to_str().expect("UTF-8"))],
    );
    assert_eq!(get_event(&served.base, DEMO_TOKEN).await.0, 200);
    let client = crate::helpers::client();
    let mut seen = Vec::new();
    for (path, bearer) in [
        ("/status", SECRET),
        ("/status", "wrong-guess"),
        (&format!("/status?token={SECRET}") as &str, SECRET),
    ] {
        let res = client
            .get(format!("{}{path}", served.base))
            .header("Authorization", format!("Bearer {bearer}"))
            .send()
            .await
            .expect("answered");
        seen.push(res.status().as_u16());
        let body = res.text().await.expect("a body");
        assert!(!body.contains(SECRET), "{path}: {body}");
    }
    let expected = if ip.is_loopback() {
        [200, 200, 200]
    } else {
        [200, 401, 200]
    };
    assert_eq!(seen, expected);
    served.signal("TERM");
    assert_eq!(served.wait_exit(), Some(0));
    let stdout = served.stdout_after_exit();
    let stderr = served.stderr();
    assert!(stdout.contains("listening on"), "{stdout}");
    assert!(stderr.contains("admin token set"), "{stderr}");
    assert!(
        stderr.contains("status=401") || ip.is_loopback(),
        "{stderr}"
    );
    for (name, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert!(!text.contains(SECRET), "the admin token in {name}:\n{text}");
        assert!(
            !text.contains(&SECRET[..4]),
            "its first characters in {name}:\n{text}"
        );
    }

    // `--help` shows the variable's name, never its value.
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_eventbox"))
        .args(["serve", "--help"])
        .env("EVENTBOX_ADMIN_TOKEN", SECRET)
        .output()
        .expect("help");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("EVENTBOX_ADMIN_TOKEN"), "{help}");
    assert!(!help.contains(SECRET), "{help}");

    // A token that cannot be sent in a header is refused without being echoed.
    let spaced = format!("{SECRET} more");
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_eventbox"))
        .args(["serve", "--no-watch", "--data"])
        .arg(&demo)
        .env("EVENTBOX_ADMIN_TOKEN", &spaced)
        .output()
        .expect("run");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&refused.stdout),
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(text.contains("--admin-token takes visible ASCII"), "{text}");
    assert!(!text.contains(SECRET), "{text}");
}
