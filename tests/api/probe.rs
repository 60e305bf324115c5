//! `eventbox probe URL`, run as the real binary against a real server: exit 0 on 2xx, 1 on any
//! other answer, on a refused connection and on a server that never answers (within --timeout).

use std::time::{Duration, Instant};

use eventbox::app::App;
use tokio::net::TcpListener;

use crate::helpers::{demo_data, serve_app, spawn_app};

/// Runs `eventbox probe ARGS`; returns (exit code, stdout, stderr).
async fn probe(args: &[&str]) -> (i32, String, String) {
    probe_with(args, &[]).await
}

/// [`probe`] with these variables set (and no other `EVENTBOX_*` or `PORT`).
async fn probe_with(args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_eventbox"));
    for (name, _) in std::env::vars() {
        if name.starts_with("EVENTBOX_") || name == "PORT" {
            command.env_remove(name);
        }
    }
    let out = command
        .arg("probe")
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .await
        .expect("run eventbox probe");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_2xx_answer_exits_0_and_any_other_exits_1() {
    let app = spawn_app(&demo_data()).await;
    let ready = format!("{}/readyz", app.base);
    let (code, stdout, stderr) = probe(&[&ready]).await;
    assert_eq!(code, 0, "stdout: {stdout} stderr: {stderr}");
    assert_eq!(stdout.lines().count(), 1, "one line: {stdout}");
    assert!(stdout.contains("200"), "the status line: {stdout}");

    let missing = format!("{}/no/such/path", app.base);
    let (code, stdout, stderr) = probe(&[&missing]).await;
    assert_eq!(code, 1, "stdout: {stdout} stderr: {stderr}");
    assert!(stderr.contains("404"), "the status line: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
}

/// Without a URL, `/readyz` where `serve` would listen with the same environment, on loopback
/// when that is every interface: the image's health check follows a port set with
/// `EVENTBOX_ADDR` (a `docker run --health-cmd` of its own cannot run: the image has no shell).
#[tokio::test]
async fn without_a_url_it_asks_readyz_where_serve_would_listen() {
    let app = spawn_app(&demo_data()).await;
    let port = app.base.rsplit(':').next().expect("a port").to_string();
    let every = format!("0.0.0.0:{port}");
    let every6 = format!("[::]:{port}");
    for envs in [
        vec![("EVENTBOX_ADDR", every.as_str())],
        vec![("EVENTBOX_ADDR", every6.as_str())],
        vec![("EVENTBOX_ADDR", "0.0.0.0"), ("PORT", port.as_str())],
        vec![("EVENTBOX_PORT", port.as_str())],
    ] {
        let (code, stdout, stderr) = probe_with(&[], &envs).await;
        assert_eq!(code, 0, "{envs:?}: stdout: {stdout} stderr: {stderr}");
        assert_eq!(
            stdout.trim(),
            format!("http://127.0.0.1:{port}/readyz: HTTP/1.1 200 OK"),
            "{envs:?}"
        );
    }
    // Elsewhere: not this server.
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let other = closed.local_addr().expect("an address").to_string();
    drop(closed);
    let (code, _, stderr) = probe_with(&[], &[("EVENTBOX_ADDR", other.as_str())]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("http://{other}/readyz")),
        "{stderr}"
    );
    // A setting serve would refuse is said.
    let (code, _, stderr) = probe_with(&[], &[("EVENTBOX_ADDR", "nowhere")]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("serve's address cannot be told"),
        "{stderr}"
    );
}

#[tokio::test]
async fn readyz_before_the_first_load_exits_1() {
    // Never loaded: /readyz answers 503.
    let app = serve_app(App::new(&demo_data())).await;
    let (code, _, stderr) = probe(&[&format!("{}/readyz", app.base)]).await;
    assert_eq!(code, 1, "stderr: {stderr}");
    assert!(stderr.contains("503"), "the status line: {stderr}");
}

#[tokio::test]
async fn a_refused_connection_and_a_silent_server_exit_1_with_the_reason() {
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let closed_addr = closed.local_addr().expect("an address");
    drop(closed);
    let (code, _, stderr) = probe(&[&format!("http://{closed_addr}/readyz")]).await;
    assert_eq!(code, 1, "stderr: {stderr}");
    assert!(stderr.contains("cannot connect"), "the reason: {stderr}");

    // Accepts the connection and reads the request, but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let silent_addr = silent.local_addr().expect("an address");
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let started = Instant::now();
    let (code, _, stderr) = probe(&[
        "--timeout",
        "300ms",
        &format!("http://{silent_addr}/readyz"),
    ])
    .await;
    let took = started.elapsed();
    assert_eq!(code, 1, "stderr: {stderr}");
    assert!(
        stderr.contains("no answer within 300ms"),
        "the reason: {stderr}"
    );
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "the timeout is obeyed: took {took:?}"
    );
    holder.abort();
}

#[tokio::test]
async fn https_and_malformed_urls_exit_1_not_2() {
    // Docker reserves a health check's exit code 2.
    for url in ["https://127.0.0.1:8443/readyz", "not a url"] {
        let (code, _, stderr) = probe(&[url]).await;
        assert_eq!(code, 1, "{url}: {stderr}");
        assert!(
            stderr.contains(url),
            "{url}: the message names the URL: {stderr}"
        );
    }
}
