//! HTTP done properly: encodings chosen by `Accept-Encoding` (bodies compressed once, decoded
//! equal to the plain one), strong ETags and 304, `Cache-Control`, `Vary` and `Server`.

use std::io::Read;

use eventbox::app::App;
use reqwest::Method;

use crate::fixtures::{self, TOKEN};
use crate::helpers::{demo_data, serve_app, spawn_app, Answer, TempData, DEMO_TOKEN};

pub(crate) fn decode(res: &Answer) -> Vec<u8> {
    let mut out = Vec::new();
    match res.header("content-encoding") {
        None => out.extend_from_slice(&res.body),
        Some("gzip") => {
            flate2::read::GzDecoder::new(&res.body[..])
                .read_to_end(&mut out)
                .expect("valid gzip");
        }
        Some("br") => {
            brotli::Decompressor::new(&res.body[..], 4096)
                .read_to_end(&mut out)
                .expect("valid brotli");
        }
        Some(other) => panic!("unexpected content-encoding {other}"),
    }
    out
}

#[tokio::test]
async fn accept_encoding_picks_the_encoding_and_every_one_decodes_to_the_plain_body() {
    let app = spawn_app(&demo_data()).await;
    let plain = app.get("/api/v1/payments", DEMO_TOKEN).await;
    assert!(plain.header("content-encoding").is_none());
    let table: [(&str, Option<&str>); 9] = [
        ("gzip", Some("gzip")),
        ("br", Some("br")),
        ("gzip, br", Some("br")),
        ("gzip;q=1, br;q=0.5", Some("gzip")),
        ("*", Some("br")),
        ("deflate", None),
        ("br;q=0, gzip;q=0", None),
        ("identity;q=0, gzip", Some("gzip")),
        ("identity, gzip;q=0.5", None),
    ];
    for (accept, expected) in table {
        let res = app
            .get_with(
                "/api/v1/payments",
                DEMO_TOKEN,
                &[("accept-encoding", accept)],
            )
            .await;

        assert_eq!(res.status, 200, "{accept}");
        assert_eq!(
            res.header("content-encoding"),
            expected,
            "Accept-Encoding: {accept}"
        );
        assert_eq!(res.header("vary"), Some("accept-encoding"), "{accept}");
        assert_eq!(
            res.header("content-length"),
            Some(res.body.len().to_string().as_str()),
            "{accept}"
        );
        assert_eq!(
            decode(&res),
            plain.body.to_vec(),
            "{accept}: decodes to the plain body"
        );
        if expected.is_some() {
            assert!(
                res.body.len() < plain.body.len() / 3,
                "{accept}: actually compressed"
            );
        }
    }
}

#[tokio::test]
async fn small_bodies_stay_plain_unless_identity_is_refused_and_nothing_acceptable_is_406() {
    let data = TempData::new();
    fixtures::write_json(&data, "tiny");
    let app = spawn_app(data.path()).await;
    let small = app.get("/api/v1/submission/", TOKEN).await;
    assert!(
        small.body.len() < 1024,
        "the fixture's submission body is small"
    );

    let plain = app
        .get_with(
            "/api/v1/submission/",
            TOKEN,
            &[("accept-encoding", "gzip, br")],
        )
        .await;
    assert!(
        plain.header("content-encoding").is_none(),
        "under 1 KiB stays plain"
    );
    let forced = app
        .get_with(
            "/api/v1/submission/",
            TOKEN,
            &[("accept-encoding", "identity;q=0, gzip")],
        )
        .await;
    assert_eq!(forced.header("content-encoding"), Some("gzip"));
    assert_eq!(decode(&forced), small.body.to_vec());
    let refused = app
        .get_with(
            "/api/v1/submission/",
            TOKEN,
            &[("accept-encoding", "identity;q=0, *;q=0")],
        )
        .await;
    refused.assert_error(406, "not_acceptable");
    assert_eq!(refused.header("vary"), Some("accept-encoding"));
}

#[tokio::test]
async fn compression_off_always_sends_identity() {
    let app = App::with_options(&eventbox::config::ServeOptions {
        compression: eventbox::config::Switch::Off,
        ..eventbox::config::ServeOptions::for_folder(demo_data())
    })
    .expect("options serve takes");
    app.load().expect("loads");
    let app = serve_app(app).await;

    let res = app
        .get_with(
            "/api/v1/payments",
            DEMO_TOKEN,
            &[("accept-encoding", "br, gzip")],
        )
        .await;

    assert_eq!(res.status, 200);
    assert!(res.header("content-encoding").is_none());
}

#[tokio::test]
async fn head_announces_the_encoded_length() {
    let app = spawn_app(&demo_data()).await;
    let get = app
        .get_with("/api/v1/event", DEMO_TOKEN, &[("accept-encoding", "br")])
        .await;

    let head = app
        .request(
            Method::HEAD,
            "/api/v1/event",
            DEMO_TOKEN,
            &[("accept-encoding", "br")],
        )
        .await;

    assert_eq!(head.header("content-encoding"), Some("br"));
    assert_eq!(
        head.header("content-length"),
        Some(get.body.len().to_string().as_str())
    );
    assert_eq!(head.header("etag"), get.header("etag"));
}

#[tokio::test]
async fn answers_carry_cache_control_server_and_a_strong_etag_per_encoding() {
    let app = spawn_app(&demo_data()).await;

    let plain = app.get("/api/v1/event", DEMO_TOKEN).await;
    let gz = app
        .get_with("/api/v1/event", DEMO_TOKEN, &[("accept-encoding", "gzip")])
        .await;

    assert_eq!(plain.header("cache-control"), Some("no-cache"));
    assert_eq!(
        plain.header("server"),
        Some(concat!("eventbox/", env!("CARGO_PKG_VERSION")))
    );
    let tag = plain.header("etag").expect("an etag");
    assert!(
        tag.starts_with('"') && tag.ends_with('"') && !tag.starts_with("W/"),
        "strong: {tag}"
    );
    assert_ne!(gz.header("etag"), Some(tag), "one tag per encoding");
    let err = app.get("/api/v1/event", "nope").await;
    assert_eq!(err.header("server"), plain.header("server"));
}

#[tokio::test]
async fn if_none_match_answers_304_on_a_match_and_200_otherwise() {
    let app = spawn_app(&demo_data()).await;
    let first = app.get("/api/v1/event", DEMO_TOKEN).await;
    let tag = first.header("etag").expect("an etag").to_string();

    for inm in [
        tag.clone(),
        format!("\"other\", {tag}"),
        format!("W/{tag}"),
        "*".to_string(),
    ] {
        let res = app
            .get_with("/api/v1/event", DEMO_TOKEN, &[("if-none-match", &inm)])
            .await;
        assert_eq!(res.status, 304, "If-None-Match: {inm}");
        assert!(res.body.is_empty());
        assert_eq!(res.header("etag"), Some(tag.as_str()));
        assert_eq!(res.header("cache-control"), Some("no-cache"));
    }
    let miss = app
        .get_with(
            "/api/v1/event",
            DEMO_TOKEN,
            &[("if-none-match", "\"0000\"")],
        )
        .await;
    assert_eq!(miss.status, 200);
    assert_eq!(miss.body, first.body);
    // The tag of another encoding does not match this one.
    let gz = app
        .get_with(
            "/api/v1/event",
            DEMO_TOKEN,
            &[("accept-encoding", "gzip"), ("if-none-match", &tag)],
        )
        .await;
    assert_eq!(gz.status, 200);
}

async fn tag_of(app: &crate::helpers::TestApp) -> Option<String> {
    app.get("/api/v1/event", DEMO_TOKEN)
        .await
        .header("etag")
        .map(str::to_string)
}

#[tokio::test]
async fn etags_survive_restarts_and_change_with_the_data() {
    let data = TempData::new();
    data.with_demo("demo");
    let first = spawn_app(data.path()).await;
    let before = tag_of(&first).await;
    assert!(before.is_some(), "an etag");
    drop(first);
    let second = spawn_app(data.path()).await;
    assert_eq!(
        tag_of(&second).await,
        before,
        "same data, same tag after a restart"
    );

    let text = std::fs::read_to_string(data.path().join("demo/event.json")).expect("event");
    data.write(
        "demo/event.json",
        text.replace("33º Congresso", "34º Congresso"),
    );
    second.app.load().expect("reload");

    let after = tag_of(&second).await;
    assert_ne!(after, before, "the tag changes with the data");
    let stale = second
        .get_with(
            "/api/v1/event",
            DEMO_TOKEN,
            &[("if-none-match", before.as_deref().unwrap_or(""))],
        )
        .await;
    assert_eq!(
        stale.status, 200,
        "a client holding the old tag gets the new body"
    );
}

// ---- CORS ---------------------------------------------------------------------------------

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::loaded_with;

async fn demo_with(
    configure: impl FnOnce(&mut eventbox::config::ServeOptions),
) -> crate::helpers::TestApp {
    serve_app(loaded_with(&demo_data(), configure)).await
}

const PREFLIGHT: [(&str, &str); 3] = [
    ("origin", "https://app.example"),
    ("access-control-request-method", "GET"),
    ("access-control-request-headers", "authorization-token"),
];

#[tokio::test]
async fn a_preflight_is_answered_without_a_token() {
    let app = spawn_app(&demo_data()).await;

    let res = app
        .request(Method::OPTIONS, "/api/v1/payments/details", "", &PREFLIGHT)
        .await;

    assert_eq!(res.status, 204);
    assert!(res.body.is_empty());
    assert_eq!(res.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        res.header("access-control-allow-methods"),
        Some("GET, HEAD")
    );
    let allowed = res
        .header("access-control-allow-headers")
        .unwrap_or_default()
        .to_ascii_lowercase();
    assert!(
        allowed.contains("authorization-token") && allowed.contains("content-type"),
        "{allowed}"
    );
    assert!(res
        .header("access-control-max-age")
        .is_some_and(|a| a.parse::<u32>().is_ok()));
    let unknown = app
        .request(Method::OPTIONS, "/api/v1/nope", "", &PREFLIGHT)
        .await;
    assert_eq!(unknown.status, 404, "the path is checked first");
}

/// `/_queue` takes `DELETE`: no preflight allows it, so no web page can send one (as for
/// every admin route). A browser's preflight, from another origin, is refused as such; an
/// `OPTIONS` without `Origin` is a method the route does not take.
#[tokio::test]
async fn no_preflight_allows_a_delete_of_the_queue() {
    let app = spawn_app(&demo_data()).await;
    let preflight = [
        ("origin", "https://app.example"),
        ("access-control-request-method", "DELETE"),
    ];
    let res = app
        .request(Method::OPTIONS, "/_queue", "", &preflight)
        .await;
    res.assert_error(403, "admin_cross_origin");
    assert_eq!(res.header("access-control-allow-methods"), None);
    let res = app.request(Method::OPTIONS, "/_queue", "", &[]).await;
    assert_eq!(res.status, 405);
    assert_eq!(res.header("access-control-allow-methods"), None);
    assert_eq!(res.header("allow"), Some("GET, HEAD, DELETE"));
}

#[tokio::test]
async fn answers_and_errors_carry_cors_headers() {
    let app = spawn_app(&demo_data()).await;
    let origin = [("origin", "https://app.example")];

    let ok = app.get_with("/api/v1/event", DEMO_TOKEN, &origin).await;
    let refused = app.get_with("/api/v1/event", "wrong", &origin).await;

    assert_eq!(ok.header("access-control-allow-origin"), Some("*"));
    assert!(ok
        .header("access-control-expose-headers")
        .is_some_and(|h| h.contains("ETag")));
    refused.assert_error(401, "invalid_token");
    assert_eq!(
        refused.header("access-control-allow-origin"),
        Some("*"),
        "a browser can read the 401"
    );
}

#[tokio::test]
async fn listed_origins_are_echoed_and_others_refused() {
    let app = demo_with(|o| o.cors_origin = vec!["https://app.example".into()]).await;

    let allowed = app
        .get_with(
            "/api/v1/event",
            DEMO_TOKEN,
            &[("origin", "https://app.example")],
        )
        .await;
    let other = app
        .get_with(
            "/api/v1/event",
            DEMO_TOKEN,
            &[("origin", "https://evil.example")],
        )
        .await;
    let preflight_other = app
        .request(
            Method::OPTIONS,
            "/api/v1/event",
            "",
            &[
                ("origin", "https://evil.example"),
                ("access-control-request-method", "GET"),
            ],
        )
        .await;
    let preflight_ok = app
        .request(Method::OPTIONS, "/api/v1/event", "", &PREFLIGHT)
        .await;

    assert_eq!(
        allowed.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    let vary: Vec<&str> = allowed
        .headers
        .get_all("vary")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert!(vary.iter().any(|v| v.contains("origin")), "{vary:?}");
    assert!(other.header("access-control-allow-origin").is_none());
    assert_eq!(
        other.status, 200,
        "the server answers; the browser hides it"
    );
    assert_eq!(preflight_other.status, 204);
    assert!(preflight_other
        .header("access-control-allow-origin")
        .is_none());
    assert_eq!(
        preflight_ok.header("access-control-allow-origin"),
        Some("https://app.example")
    );
}

#[tokio::test]
async fn cors_none_sends_no_cors_headers_and_options_is_405() {
    let app = demo_with(|o| o.cors_origin = vec!["none".into()]).await;

    let res = app
        .get_with(
            "/api/v1/event",
            DEMO_TOKEN,
            &[("origin", "https://app.example")],
        )
        .await;
    let options = app
        .request(Method::OPTIONS, "/api/v1/event", "", &PREFLIGHT)
        .await;

    assert!(res.header("access-control-allow-origin").is_none());
    options.assert_error(405, "method_not_allowed");
    assert_eq!(options.header("allow"), Some("GET, HEAD"), "no preflight");
}

// ---- limits -------------------------------------------------------------------------------

/// Reads until the server closes the connection; how long that took, bounded by `within`.
async fn closed_within(conn: &mut tokio::net::TcpStream, within: Duration) -> Option<Duration> {
    let start = std::time::Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(within.saturating_sub(start.elapsed()), conn.read(&mut buf))
            .await
        {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => continue,
            Err(_) => return None,
        }
    }
}

#[tokio::test]
async fn a_slow_client_is_cut_off_by_the_header_timeout_while_others_are_served() {
    let app = demo_with(|o| o.header_timeout = Duration::from_millis(300)).await;
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut slow = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    slow.write_all(b"GET /api/v1/event HTTP/1.1\r\nHost: x\r\nAuthoriz")
        .await
        .expect("write");

    for _ in 0..5 {
        assert_eq!(
            app.get("/api/v1/event", DEMO_TOKEN).await.status,
            200,
            "others are served meanwhile"
        );
    }
    let closed = closed_within(&mut slow, Duration::from_secs(5)).await;

    let took = closed.expect("the slow client was cut off");
    assert!(took < Duration::from_secs(3), "cut off after {took:?}");
}

#[tokio::test]
async fn a_connection_that_sends_no_request_is_cut_off_by_the_header_timeout() {
    // The idle timeout stays at its 60 s: only the header timeout can close these in time.
    let app = demo_with(|o| o.header_timeout = Duration::from_millis(300)).await;
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut silent = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    // A byte of HTTP/2's preface: hyper waits for the rest before any timer of its own starts.
    let mut preface = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    preface.write_all(b"P").await.expect("write");
    let mut kept = kept_alive(&addr).await;

    let silent = closed_within(&mut silent, Duration::from_secs(5)).await;
    let preface = closed_within(&mut preface, Duration::from_secs(5)).await;
    let kept = closed_within(&mut kept, Duration::from_secs(5)).await;

    for (what, closed) in [
        ("no byte", silent),
        ("one byte of HTTP/2's preface", preface),
    ] {
        let took = closed.unwrap_or_else(|| panic!("a connection that sent {what} stayed open"));
        assert!(
            took < Duration::from_secs(3),
            "{what}: closed after {took:?}"
        );
    }
    // hyper's header timer closes an idle HTTP/1 keep-alive connection too (docs/operations.md).
    assert!(kept.is_some(), "an idle keep-alive connection stayed open");
}

/// A connection to `addr` that was answered one request and is kept alive.
async fn kept_alive(addr: &str) -> tokio::net::TcpStream {
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 1024];
    let n = conn.read(&mut buf).await.expect("an answer");
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    conn
}

#[tokio::test]
async fn an_idle_connection_is_closed() {
    let app = demo_with(|o| o.idle_timeout = Duration::from_millis(300)).await;
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut conn = kept_alive(&addr).await;

    let closed = closed_within(&mut conn, Duration::from_secs(5)).await;

    assert!(
        closed.is_some(),
        "the idle keep-alive connection was closed"
    );
}

#[tokio::test]
async fn a_delay_longer_than_the_idle_timeout_is_answered() {
    // The connection is silent while the server waits out the delay: the server's silence,
    // not the client's (it was closed at the idle timeout, and journaled as 499).
    let app = demo_with(|o| {
        o.idle_timeout = Duration::from_millis(300);
        o.allow_control_headers = true;
    })
    .await;

    for _ in 0..2 {
        let res = app
            .get_with("/api/v1/event", DEMO_TOKEN, &[("x-eventbox-delay", "1000")])
            .await;
        assert_eq!(res.status, 200, "{}", res.text());
    }
}

/// A connection to `base` whose receive buffer is 4 KiB: the server's sends fill it at once.
async fn small_window(base: &str) -> tokio::net::TcpStream {
    let addr: std::net::SocketAddr = base
        .trim_start_matches("http://")
        .parse()
        .expect("an address");
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket.set_recv_buffer_size(4096).expect("a small buffer");
    socket.connect(addr).await.expect("connect")
}

/// The largest send buffer the kernel may give a socket (Linux), if it says.
fn largest_send_buffer() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem").ok()?;
    text.split_whitespace().last()?.parse().ok()
}

#[tokio::test]
async fn a_client_that_stops_reading_its_answer_is_cut_off_over_http1_and_http2() {
    // A payments body of about 10 MB, sent in pieces. HTTP/1: the server's writes stall once
    // the sockets' buffers are full, with the request in flight: the client's silence, cut off
    // after the idle timeout. HTTP/2: flow control stops the server before its writes stall,
    // so only the bound on a request in flight (idle timeout plus --max-delay) cuts it off.
    let data = crate::helpers::TempData::new();
    let mut gen = eventbox::gen::GenOptions::new(data.path().join("big"));
    gen.payments = 20_000;
    gen.submissions = 1;
    gen.token = Some(eventbox::pull::Token::new("big-token"));
    eventbox::gen::run(&gen).expect("gen succeeds");
    let app = serve_app(loaded_with(data.path(), |o| {
        o.idle_timeout = Duration::from_millis(300);
        o.max_delay = Duration::from_secs(1);
    }))
    .await;
    let head = app
        .request(Method::HEAD, "/api/v1/payments", "big-token", &[])
        .await;
    let size: usize = head
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .expect("a length");
    assert!(size > 8 << 20, "{size} bytes");
    let url = format!("{}/api/v1/payments", app.base);

    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("a client");
    let mut res = h2
        .get(&url)
        .header("Authorization-Token", "big-token")
        .send()
        .await
        .expect("an answer's head");
    assert_eq!(res.version(), reqwest::Version::HTTP_2);
    // Not reading for twice the bound (no signal tells when the server gives up; reading
    // would end the stall).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut received = 0;
    let ended = loop {
        match tokio::time::timeout(Duration::from_secs(10), res.chunk()).await {
            Ok(Ok(Some(chunk))) => received += chunk.len(),
            other => break other,
        }
    };
    assert!(
        received < size && !matches!(ended, Ok(Ok(None))),
        "HTTP/2: the stream ended before the whole answer was sent: {received} of {size} bytes, {ended:?}"
    );

    // HTTP/1, where the sockets' buffers are smaller than the answer.
    if largest_send_buffer().is_none_or(|b| 2 * b > size) {
        eprintln!("HTTP/1 half skipped: the kernel's send buffers may hold the whole answer");
        return;
    }
    let mut conn = small_window(&app.base).await;
    conn.write_all(
        b"GET /api/v1/payments HTTP/1.1\r\nHost: x\r\nAuthorization-Token: big-token\r\n\r\n",
    )
    .await
    .expect("write");
    tokio::time::sleep(Duration::from_secs(3)).await;

    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut answer)).await;

    assert!(
        read.is_ok() && answer.len() < size,
        "HTTP/1: the connection was closed before the whole answer was sent: {} of {size} bytes, {read:?}",
        answer.len(),
    );
}

#[tokio::test]
async fn a_request_head_over_the_cap_is_refused() {
    let app = demo_with(|o| o.max_header_bytes = 16 * 1024).await;
    let big = "x".repeat(20 * 1024);

    let res = app
        .get_with("/api/v1/event", DEMO_TOKEN, &[("x-padding", &big)])
        .await;

    assert_eq!(res.status, 431);
    assert_eq!(
        app.get_with("/api/v1/event", DEMO_TOKEN, &[("x-padding", "small")])
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn connections_over_the_cap_wait_for_a_free_slot() {
    let app = demo_with(|o| o.max_connections = 1).await;
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut first = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    first
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 1024];
    assert!(first.read(&mut buf).await.expect("answered") > 0);

    // The only slot is held by the idle keep-alive connection: a second client is not served.
    let client = crate::helpers::client();
    let url = format!("{}/healthz", app.base);
    let waiting = tokio::time::timeout(Duration::from_millis(400), client.get(&url).send()).await;
    assert!(
        waiting.is_err(),
        "a second connection was served over the cap"
    );

    drop(first);
    let served = tokio::time::timeout(Duration::from_secs(5), client.get(&url).send()).await;
    assert_eq!(
        served
            .expect("served once the slot is free")
            .expect("answered")
            .status(),
        200
    );
}

/// A payments file of `n` payments, each note 200 bytes of `note`.
pub(crate) fn many_payments(n: usize, note: char) -> String {
    let one: serde_json::Value = serde_json::from_str(fixtures::PAYMENTS_JSON).expect("JSON");
    let data: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let mut p = one[0].clone();
            p["id_payment"] = i.into();
            p["reference_payment"] = format!("PG{i:06}").into();
            p["note_payment"] = note.to_string().repeat(200).into();
            p
        })
        .collect();
    serde_json::to_string(&serde_json::json!({ "data": data })).expect("JSON")
}

/// Asks for `path` until `done` holds for the answer (at most a minute).
async fn until(
    app: &crate::helpers::TestApp,
    path: &str,
    headers: &[(&str, &str)],
    done: impl Fn(&Answer) -> bool,
) -> Answer {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let res = app.get_with(path, TOKEN, headers).await;
        if done(&res) {
            return res;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never: {path} {headers:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A bundle `big` whose payments body is about 5 MB (12,000 payments), and its payments file.
pub(crate) fn big_payments() -> (TempData, std::path::PathBuf) {
    let data = TempData::new();
    fixtures::write_json(&data, "big");
    let path = data.path().join("big/payments.json");
    std::fs::write(&path, many_payments(12_000, 'a')).expect("write");
    (data, path)
}

/// A client that reads through a small window gets a large answer whole over HTTP/1: the
/// server's sends from the memory file its pieces live in stop when the socket is full and go on
/// from where they stopped. The bytes are checked against the gzip variant (sent from the heap)
/// and the records against the file.
#[tokio::test]
async fn a_large_answer_read_through_a_small_window_is_whole() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (data, path) = big_payments();
    let app = App::new(data.path());
    app.load().expect("loads");
    let app = serve_app(app).await;
    let gzip = until(
        &app,
        "/api/v1/payments",
        &[("accept-encoding", "gzip")],
        |r| r.header("content-encoding").is_some(),
    )
    .await;
    let expected = decode(&gzip);
    assert!(expected.len() > 4 << 20, "{} bytes", expected.len());
    let memory_file = |name: &'static str| {
        let app = &app;
        async move {
            let text = app.get("/metrics", "").await.text();
            crate::helpers::metric(&text, name).unwrap_or_else(|| panic!("{name} in {text}"))
        }
    };
    let sent_before = memory_file("eventbox_memory_file_sent_bytes_total").await;

    let mut conn = small_window(&app.base).await;
    let request = format!(
        "GET /api/v1/payments HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = conn.read(&mut chunk).await.expect("read");
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&chunk[..n]);
    }
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("content-length: {}", expected.len())),
        "{head}"
    );
    let body = &answer[end + 4..];
    assert_eq!(body.len(), expected.len());
    assert!(
        body == &expected[..],
        "the body differs from its gzip variant"
    );
    // And from the file: the variant is compressed from the same memory.
    let served: serde_json::Value = serde_json::from_slice(body).expect("JSON");
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("JSON");
    assert!(
        served["data"] == file["data"],
        "the records differ from the file's"
    );
    // Where the memory file is in use (Linux, no huge pages for shmem...), the body was sent
    // from it: most of it (its pieces of 32 KiB and more), other tests' bodies maybe besides.
    if memory_file("eventbox_memory_file_in_use").await == 1.0 {
        let half = (expected.len() / 2) as f64;
        let sent = memory_file("eventbox_memory_file_sent_bytes_total").await - sent_before;
        assert!(sent >= half, "{sent} bytes sent from the memory file");
        let held = memory_file("eventbox_memory_file_bytes").await;
        assert!(held >= half, "{held} bytes held in the memory file");
    }
}

/// A large body is served in pieces (a reload shares the unchanged ones): every encoding is one
/// valid stream of the whole, its length announced, and a reload serves the new bytes whole.
#[tokio::test]
async fn a_large_body_in_pieces_is_whole_in_every_encoding_and_after_a_reload() {
    let (data, path) = big_payments();
    // As `serve` does: watch first, then load.
    let app = App::new(data.path());
    let _watch = app
        .watch(
            eventbox::watch::WatchMode::Native,
            std::time::Duration::from_millis(50),
        )
        .await
        .expect("watching starts");
    app.load().expect("loads");
    let app = serve_app(app).await;
    let mut before: Option<String> = None;

    for note in ['a', 'b'] {
        if note != 'a' {
            // The same length, other bytes in every record but the envelope.
            std::fs::write(&path, many_payments(12_000, note)).expect("write");
        }
        let plain = until(&app, "/api/v1/payments", &[], |r| {
            r.header("etag").map(str::to_string) != before
        })
        .await;
        before = plain.header("etag").map(str::to_string);
        assert_eq!(plain.status, 200);
        let json: serde_json::Value = serde_json::from_slice(&plain.body).expect("JSON");
        assert_eq!(json["count"], 12_000);
        let noted = note.to_string().repeat(200);
        assert_eq!(json["data"][11_999]["note_payment"], noted);
        assert!(plain.body.len() > 4 << 20, "{} bytes", plain.body.len());
        for accept in ["gzip", "br"] {
            // Compressed in the background: identity is sent until the variant is ready.
            let headers = [("accept-encoding", accept)];
            let res = until(&app, "/api/v1/payments", &headers, |r| {
                r.header("content-encoding").is_some()
            })
            .await;
            assert_eq!(res.header("content-encoding"), Some(accept));
            assert_eq!(
                res.header("content-length"),
                Some(res.body.len().to_string().as_str())
            );
            assert_eq!(decode(&res), plain.body.to_vec(), "{accept}");
            assert!(res.body.len() < plain.body.len() / 5, "{accept} compressed");
            let head = app
                .request(Method::HEAD, "/api/v1/payments", TOKEN, &headers)
                .await;
            assert_eq!(head.header("content-length"), res.header("content-length"));
            assert_eq!(head.header("etag"), res.header("etag"));
        }
        let detail = app
            .get("/api/v1/payments/details?reference=PG011999", TOKEN)
            .await;
        assert_eq!(detail.json()["data"][0]["reference_payment"], "PG011999");
    }
}

/// A list-valued header sent on several lines is one list (RFC 9110 §5.3): `If-None-Match` on
/// two lines matches its second tag, and `Accept-Encoding` on two lines offers both codings.
/// Only the first line was read.
#[tokio::test]
async fn a_header_sent_on_several_lines_is_read_whole() {
    let app = spawn_app(&demo_data()).await;
    let first = app.get("/api/v1/event", DEMO_TOKEN).await;
    let etag = first.header("etag").expect("an ETag").to_string();
    let sent = crate::helpers::raw_http1(
        &app.base,
        &format!(
            "GET /api/v1/event HTTP/1.1\r\nHost: localhost\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
             If-None-Match: \"other\"\r\nIf-None-Match: {etag}\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    let head = String::from_utf8_lossy(&sent.received);
    assert!(head.starts_with("HTTP/1.1 304"), "{head}");

    let sent = crate::helpers::raw_http1(
        &app.base,
        &format!(
            "GET /api/v1/event HTTP/1.1\r\nHost: localhost\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
             Accept-Encoding: identity;q=0\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    let head = String::from_utf8_lossy(&sent.received).to_ascii_lowercase();
    assert!(
        head.starts_with("http/1.1 200") && head.contains("content-encoding: gzip"),
        "{head}"
    );
}

/// A page (made per request) for a client that refuses identity: compressed in the coding it
/// asked for, and decoded to the plain page.
#[tokio::test]
async fn a_page_for_a_client_refusing_identity_comes_in_its_coding() {
    let app = spawn_app(&demo_data()).await;
    let path = "/api/v1/attendees?page=1&per_page=2";
    let plain = app.get(path, DEMO_TOKEN).await;
    assert_eq!(plain.status, 200, "{}", plain.text());
    for coding in ["br", "gzip"] {
        let accept = format!("{coding}, identity;q=0");
        let res = app
            .get_with(path, DEMO_TOKEN, &[("accept-encoding", &accept)])
            .await;
        assert_eq!(res.status, 200, "{}", res.text());
        assert_eq!(res.header("content-encoding"), Some(coding));
        assert_eq!(decode(&res), plain.body);
        let tag = res.header("etag").expect("an ETag");
        assert!(tag.ends_with(&format!("-{coding}\"")), "{tag}");
    }
}

/// A page over a megabyte (made per request) for a client that refuses identity: compressed
/// off the async threads and answered, where it used to get a 503 that no retry mended.
#[tokio::test]
async fn a_large_page_for_a_client_refusing_identity_is_answered_in_its_coding() {
    let data = TempData::new();
    let mut g = eventbox::gen::GenOptions::new(data.path().join("gen"));
    g.payments = 3000;
    g.submissions = 4;
    g.token = Some(eventbox::token::Token::new("gen-token"));
    eventbox::gen::run(&g).expect("gen");
    let app = spawn_app(data.path()).await;
    let path = "/api/v1/attendees?page=1&per_page=100000";
    let plain = app.get(path, "gen-token").await;
    assert_eq!(plain.status, 200, "{}", plain.text());
    assert!(
        plain.body.len() > 1 << 20,
        "{} bytes: not over a megabyte",
        plain.body.len()
    );
    let res = app
        .get_with(
            path,
            "gen-token",
            &[("accept-encoding", "br, identity;q=0")],
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(res.header("content-encoding"), Some("br"));
    assert_eq!(decode(&res), plain.body);
}
