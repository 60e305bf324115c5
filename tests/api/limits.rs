//! The wire's limits (issue 15, items 3 and 4): ambiguous requests refused, long URLs and bodies
//! where none is read refused, a request body deadline, per-client connection limits so a
//! body-dripping client cannot take every connection slot, and refusals over HTTP/2 answered on
//! the stream.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::helpers::{
    client, demo_data, loaded_with, raw_http1, serve_app, spawn_app, TestApp, DEMO_TOKEN,
};

/// The demo, served with the options `configure` sets.
async fn demo_with(configure: impl FnOnce(&mut eventbox::config::ServeOptions)) -> TestApp {
    serve_app(loaded_with(&demo_data(), configure)).await
}

fn addr(app: &TestApp) -> std::net::SocketAddr {
    app.base
        .trim_start_matches("http://")
        .parse()
        .expect("an address")
}

/// The status line and the body of a raw exchange.
fn status_and_body(received: &[u8]) -> (String, String) {
    let text = String::from_utf8_lossy(received);
    let status = text.lines().next().unwrap_or_default().to_string();
    let body = text
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    (status, body)
}

#[tokio::test]
async fn two_different_tokens_are_refused_the_same_one_twice_is_not() {
    let app = spawn_app(&demo_data()).await;
    let two = format!(
        "GET /api/v1/event HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         Authorization-Token: another\r\nConnection: close\r\n\r\n"
    );
    let same = format!(
        "GET /api/v1/event HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         Authorization-Token: {DEMO_TOKEN}\r\nConnection: close\r\n\r\n"
    );
    let apps = format!(
        "GET /api/v1/event HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         Authorization-App: a\r\nAuthorization-App: b\r\nConnection: close\r\n\r\n"
    );

    let (status, body) = status_and_body(&raw_http1(&app.base, &two).await.received);
    assert_eq!(status, "HTTP/1.1 400 Bad Request", "{body}");
    assert!(body.contains("\"ambiguous_token\""), "{body}");
    let (status, _) = status_and_body(&raw_http1(&app.base, &same).await.received);
    assert_eq!(status, "HTTP/1.1 200 OK");
    let (status, body) = status_and_body(&raw_http1(&app.base, &apps).await.received);
    assert_eq!(status, "HTTP/1.1 400 Bad Request", "{body}");
    assert!(body.contains("\"ambiguous_app\""), "{body}");
}

/// RFC 9112 §3.2: an HTTP/1.1 request without `Host`, any request with two, or one whose `Host`
/// is not a host is 400, in the error envelope; HTTP/1.0 may send none. Before, all were served.
#[tokio::test]
async fn a_request_without_one_valid_host_is_400() {
    let app = spawn_app(&demo_data()).await;
    let get = |version: &str, hosts: &str| {
        format!(
            "GET /api/v1/event {version}\r\n{hosts}Authorization-Token: {DEMO_TOKEN}\r\n\
             Connection: close\r\n\r\n"
        )
    };
    for (version, hosts) in [
        ("HTTP/1.1", ""),
        ("HTTP/1.1", "Host: x\r\nHost: x\r\n"),
        ("HTTP/1.1", "Host: a.example\r\nHost: b.example\r\n"),
        ("HTTP/1.0", "Host: a.example\r\nHost: b.example\r\n"),
        ("HTTP/1.1", "Host: user@x\r\n"),
        ("HTTP/1.1", "Host: x:port\r\n"),
    ] {
        let (status, body) =
            status_and_body(&raw_http1(&app.base, get(version, hosts)).await.received);
        assert!(
            status.ends_with(" 400 Bad Request"),
            "{version} {hosts:?}: {status} {body}"
        );
        let envelope: serde_json::Value = serde_json::from_str(&body).expect("the envelope");
        assert_eq!(
            envelope["erros"][0]["description"], "invalid_host",
            "{body}"
        );
    }
    for (version, hosts) in [
        ("HTTP/1.1", "Host: x\r\n"),
        ("HTTP/1.1", "Host: [::1]:8080\r\n"),
        ("HTTP/1.0", ""),
    ] {
        let (status, body) =
            status_and_body(&raw_http1(&app.base, get(version, hosts)).await.received);
        assert!(
            status.ends_with(" 200 OK"),
            "{version} {hosts:?}: {status} {body}"
        );
    }
}

/// RFC 3986 §6.2.2.2: a percent-encoded letter, digit or `-._~` in the path is the character:
/// `/api/v1/%65vent` is the event (it was 404), an id can be encoded too; `%2F` is not a `/`.
#[tokio::test]
async fn encoded_unreserved_characters_in_the_path_are_the_characters() {
    let app = spawn_app(&demo_data()).await;
    let event = app.get("/api/v1/event", DEMO_TOKEN).await;
    let encoded = app.get("/api/v1/%65v%45nt", DEMO_TOKEN).await;
    assert_eq!(encoded.status, 200, "{}", encoded.text());
    assert_eq!(encoded.body, event.body);

    let list: serde_json::Value =
        serde_json::from_slice(&app.get("/api/v1/attendees", DEMO_TOKEN).await.body).expect("JSON");
    let id = list["data"][0]["id_attendees"]
        .as_i64()
        .expect("an attendee id")
        .to_string();
    let escaped: String = id.bytes().map(|b| format!("%{b:02X}")).collect();
    let one = app
        .get(&format!("/api/v1/attendees/{id}"), DEMO_TOKEN)
        .await;
    let one_escaped = app
        .get(&format!("/api/v1/attendees/{escaped}"), DEMO_TOKEN)
        .await;
    assert_eq!(one.status, 200);
    assert_eq!(one_escaped.status, 200, "{}", one_escaped.text());
    assert_eq!(one_escaped.body, one.body);

    let slash = app.get("/api/v1%2Fevent", DEMO_TOKEN).await;
    assert_eq!(slash.status, 404, "{}", slash.text());

    // The URL's length is the one sent: decoding does not bring a long one under the limit.
    let long = format!("/api/v1/event/{}", "%61".repeat(3000));
    let refused = app.get(&long, DEMO_TOKEN).await;
    assert_eq!(refused.status, 414, "{}", refused.text());
}

#[tokio::test]
async fn a_url_over_8_kib_is_414_with_the_error_envelope() {
    let app = spawn_app(&demo_data()).await;
    let long = format!("/api/v1/event?x={}", "a".repeat(9000));
    let short = format!("/api/v1/event?x={}", "a".repeat(8000));

    let res = app.get(&long, DEMO_TOKEN).await;

    res.assert_error(414, "uri_too_long");
    assert_eq!(app.get(&short, DEMO_TOKEN).await.status, 200);
}

#[tokio::test]
async fn a_body_on_a_get_that_reads_none_is_413_and_the_connection_closes() {
    let app = spawn_app(&demo_data()).await;
    // Announces 5000 bytes and sends 10: the answer does not wait for the rest.
    let request = format!(
        "GET /api/v1/event HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         Content-Length: 5000\r\n\r\n0123456789"
    );

    let exchange = raw_http1(&app.base, &request).await;

    let (status, body) = status_and_body(&exchange.received);
    assert_eq!(status, "HTTP/1.1 413 Payload Too Large", "{body}");
    assert!(body.contains("\"body_too_large\""), "{body}");
    // A small body is accepted (and ignored).
    let small = app
        .client
        .get(format!("{}/api/v1/event", app.base))
        .header("Authorization-Token", DEMO_TOKEN)
        .body("x".repeat(100))
        .send()
        .await
        .expect("answer");
    assert_eq!(small.status(), 200);
    // A small body that never ends does not hold the connection: answered, then closed.
    let dripping = format!(
        "GET /api/v1/event HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         Content-Length: 500\r\n\r\n0123456789"
    );
    let (status, _) = status_and_body(&raw_http1(&app.base, &dripping).await.received);
    assert_eq!(status, "HTTP/1.1 200 OK");
}

/// A body of unknown length (chunked) on a GET that reads none is read up to the limit: an
/// empty or small one is answered as without a body (some clients send an empty chunked body
/// on every request; it was 413 before), and the connection stays usable; a larger one is 413.
#[tokio::test]
async fn a_chunked_body_on_a_get_is_read_up_to_the_limit() {
    let app = spawn_app(&demo_data()).await;
    let get = |body: &str, close: &str| {
        format!(
            "GET /api/v1/event HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
             Transfer-Encoding: chunked\r\n{close}\r\n{body}"
        )
    };
    let chunk = |n: usize| format!("{n:x}\r\n{}\r\n", "x".repeat(n));
    // An empty body, then a second request on the same connection.
    let two = format!(
        "{}{}",
        get("0\r\n\r\n", ""),
        get(&format!("{}0\r\n\r\n", chunk(10)), "Connection: close\r\n")
    );
    let text = String::from_utf8_lossy(&raw_http1(&app.base, &two).await.received).into_owned();
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");

    let large = get(&format!("{}{}0\r\n\r\n", chunk(1000), chunk(100)), "");
    let (status, body) = status_and_body(&raw_http1(&app.base, &large).await.received);
    assert_eq!(status, "HTTP/1.1 413 Payload Too Large", "{body}");
    assert!(body.contains("\"body_too_large\""), "{body}");
}

#[tokio::test]
async fn invalid_header_bytes_get_a_4xx_and_the_server_stays_up() {
    let app = spawn_app(&demo_data()).await;
    let request = "GET /api/v1/event HTTP/1.1\r\nHost: x\r\nX-Bad: a\u{1}b\r\n\r\n";

    let (status, _) = status_and_body(&raw_http1(&app.base, request).await.received);

    assert!(status.starts_with("HTTP/1.1 4"), "{status}");
    assert_eq!(app.get("/api/v1/event", DEMO_TOKEN).await.status, 200);
}

#[tokio::test]
async fn content_length_with_transfer_encoding_is_answered_once_and_closed() {
    let app = spawn_app(&demo_data()).await;
    // A smuggling attempt: the second request must never run.
    let request = format!(
        "GET /api/v1/payments/details HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n\
         GET /api/v1/event HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\r\n"
    );

    let exchange = raw_http1(&app.base, &request).await;

    let text = String::from_utf8_lossy(&exchange.received);
    assert_eq!(
        text.matches("HTTP/1.1 ").count(),
        1,
        "one answer only: {text}"
    );
}

#[tokio::test]
async fn a_body_not_arriving_in_time_is_408_and_the_connection_closes() {
    let app = demo_with(|o| o.body_timeout = Duration::from_millis(300)).await;
    let request = format!(
        "GET /api/v1/payments/details HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 60000\r\n\r\n{{"
    );
    let start = Instant::now();

    let exchange = raw_http1(&app.base, &request).await;

    let (status, body) = status_and_body(&exchange.received);
    assert_eq!(status, "HTTP/1.1 408 Request Timeout", "{body}");
    assert!(body.contains("\"body_timeout\""), "{body}");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}

/// A connection from `source` that sends a details request announcing a 60,000-byte body and
/// then one byte of it (and, held open by the caller, nothing more for a while).
async fn dripper(server: std::net::SocketAddr, source: [u8; 4]) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind((std::net::Ipv4Addr::from(source), 0).into())
        .expect("bind the source address");
    let mut conn = socket.connect(server).await.ok()?;
    let head = format!(
        "GET /api/v1/payments/details HTTP/1.1\r\nHost: x\r\nAuthorization-Token: {DEMO_TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 60000\r\n\r\n{{"
    );
    conn.write_all(head.as_bytes()).await.ok()?;
    Some(conn)
}

#[tokio::test]
async fn body_drippers_beyond_max_connections_leave_a_normal_client_answered_within_a_second() {
    let app = demo_with(|o| {
        o.max_connections = 16;
        o.max_connections_per_ip = 4;
    })
    .await;
    let server = addr(&app);
    // 24 dripping connections from 127.0.0.2, more than --max-connections.
    let mut drippers = Vec::new();
    for _ in 0..24 {
        if let Some(c) = dripper(server, [127, 0, 0, 2]).await {
            drippers.push(c);
        }
    }
    // Those over the per-address limit are closed at once: read their end.
    let mut closed = 0;
    for conn in &mut drippers {
        let mut buf = [0u8; 64];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(200), conn.read(&mut buf)).await
        {
            closed += 1;
        }
    }
    assert_eq!(
        closed, 20,
        "all but 4 of 24 dripping connections are closed"
    );

    let start = Instant::now();
    let res = tokio::time::timeout(
        Duration::from_secs(1),
        client()
            .get(format!("{}/api/v1/event", app.base))
            .header("Authorization-Token", DEMO_TOKEN)
            .send(),
    )
    .await
    .expect("a normal client is answered within a second")
    .expect("an answer");

    assert_eq!(res.status(), 200);
    assert!(start.elapsed() < Duration::from_secs(1));
    drop(drippers);
}

#[tokio::test]
async fn over_http2_a_refused_body_is_answered_413_on_the_stream() {
    let app = spawn_app(&demo_data()).await;
    let h2 = crate::helpers::client_builder()
        .http2_prior_knowledge()
        .build()
        .expect("client");

    let res = h2
        .get(format!("{}/api/v1/event", app.base))
        .header("Authorization-Token", DEMO_TOKEN)
        .body("x".repeat(5000))
        .send()
        .await
        .expect("an answer, not a stream error");
    assert_eq!(res.status(), 413);
    let big = h2
        .get(format!("{}/api/v1/payments/details", app.base))
        .header("Authorization-Token", DEMO_TOKEN)
        .body("x".repeat(70_000))
        .send()
        .await
        .expect("an answer, not a stream error");

    assert_eq!(big.status(), 413);
    let post = h2
        .post(format!("{}/api/v1/event", app.base))
        .header("Authorization-Token", DEMO_TOKEN)
        .body("x".repeat(70_000))
        .send()
        .await
        .expect("an answer, not a stream error");
    assert_eq!(post.status(), 405);
}

#[tokio::test]
async fn shutdown_does_not_wait_for_idle_connections_http1_or_http2() {
    let app = spawn_app(&demo_data()).await;
    let h2 = crate::helpers::client_builder()
        .http2_prior_knowledge()
        .build()
        .expect("client");
    let h1 = client();
    for c in [&h1, &h2] {
        let res = c
            .get(format!("{}/api/v1/event", app.base))
            .header("Authorization-Token", DEMO_TOKEN)
            .send()
            .await
            .expect("an answer");
        assert_eq!(res.status(), 200);
    }
    // A bare HTTP/2 connection too: the preface and an empty SETTINGS frame, then silence.
    let mut bare = TcpStream::connect(addr(&app)).await.expect("connect");
    bare.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .expect("preface");
    let mut first = [0u8; 9];
    bare.read_exact(&mut first)
        .await
        .expect("the server's SETTINGS");
    // Both clients keep their connection open, idle.
    let start = Instant::now();

    app.shutdown().await;

    assert!(
        start.elapsed() < Duration::from_secs(2),
        "shutdown took {:?} with idle connections open",
        start.elapsed()
    );
    drop((h1, h2, bare));
}
