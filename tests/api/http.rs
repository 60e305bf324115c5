//! HTTP done properly: encodings chosen by `Accept-Encoding` (bodies compressed once, decoded
//! equal to the plain one), strong ETags and 304, `Cache-Control`, `Vary` and `Server`.

use std::io::Read;

use eventbox::app::App;
use reqwest::Method;

use crate::fixtures::{self, TOKEN};
use crate::helpers::{demo_data, serve_app, spawn_app, Answer, TempData, DEMO_TOKEN};

fn decode(res: &Answer) -> Vec<u8> {
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
    app.get_with(
        "/api/v1/submission/",
        TOKEN,
        &[("accept-encoding", "identity;q=0, *;q=0")],
    )
    .await
    .assert_error(406, "not_acceptable");
}

#[tokio::test]
async fn compression_off_always_sends_identity() {
    let app = App::with_compression(&demo_data(), false);
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
