//! Property tests over real HTTP (proptest draws the inputs and shrinks a failure): any valid
//! payments list is served back with the same values, numbers as written; its gzip and brotli
//! variants decode to the plain body; and the `ETag` changes exactly when the bytes do.

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};

use eventbox::testing::{Bundle, TestServer};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::Value;

use crate::helpers::{answer, Answer};

const TOKEN: &str = "property-token";

/// A JSON number as a file may write it: integers of any size, decimals with trailing zeros,
/// exponents, a negative zero.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        "-?(0|[1-9][0-9]{0,25})\\.[0-9]{1,8}",
        "-?[1-9][0-9]{18,40}",
        "-?[1-9]\\.[0-9]{1,6}[eE][+-]?[1-9][0-9]?",
        Just("-0".to_string()),
    ]
}

/// Any text: quotes, backslashes, control characters, any plane of Unicode.
fn text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("(?s).{0,16}").expect("a valid regex")
}

/// A number as served: as written, but for the exponent, normalised as docs/bundles.md says
/// (`1E5` and `1e5` are served as `1e+5`).
fn as_served(number: &str) -> String {
    match number.split_once(['e', 'E']) {
        Some((digits, exp)) if exp.starts_with(['+', '-']) => format!("{digits}e{exp}"),
        Some((digits, exp)) => format!("{digits}e+{exp}"),
        None => number.to_string(),
    }
}

#[derive(Debug, Clone)]
struct Payment {
    id_payment: i64,
    buyer: String,
    description: String,
    note: String,
    amount: String,
    received: String,
    extra: String,
}

fn payment() -> impl Strategy<Value = Payment> {
    (
        any::<i64>(),
        text(),
        text(),
        text(),
        number(),
        number(),
        number(),
    )
        .prop_map(
            |(id_payment, buyer, description, note, amount, received, extra)| Payment {
                id_payment,
                buyer,
                description,
                note,
                amount,
                received,
                extra,
            },
        )
}

/// The payments file, written by hand so that every number stays as drawn.
fn payments_file(payments: &[Payment]) -> String {
    let s = |t: &str| serde_json::to_string(t).expect("a string serialises");
    let records: Vec<String> = payments
        .iter()
        .enumerate()
        .map(|(i, p)| {
            format!(
                r#"{{"id_event": 1, "id_payment": {}, "reference_payment": "PG{i:06}", "buyer": {}, "email_buyer": "a@x", "country_buyer": "Brasil", "document_buyer": "1", "description_payment": {}, "date_payment": "01/02/2026", "hour_payment": "10:00", "type_payment": "Pix", "method_payment": "Pix", "amount_payment": {}, "amount_receive_payment": {}, "status_payment": "Pago", "cupom_payment": "", "note_payment": {}, "x_extra": {}}}"#,
                p.id_payment,
                s(&p.buyer),
                s(&p.description),
                p.amount,
                p.received,
                s(&p.note),
                p.extra,
            )
        })
        .collect();
    format!(
        "{{\"data\": [{}], \"count\": {}}}",
        records.join(",\n"),
        payments.len()
    )
}

async fn get(server: &TestServer, token: &str, encoding: &str) -> Answer {
    answer(
        crate::helpers::client()
            .get(server.url("/api/v1/payments"))
            .header("Authorization-Token", token)
            .header("Accept-Encoding", encoding),
    )
    .await
}

fn decoded(a: &Answer) -> Result<Vec<u8>, TestCaseError> {
    let mut out = Vec::new();
    match a.header("content-encoding") {
        None => out.extend_from_slice(&a.body),
        Some("gzip") => {
            flate2::read::GzDecoder::new(&a.body[..])
                .read_to_end(&mut out)
                .map_err(|e| TestCaseError::fail(format!("gzip: {e}")))?;
        }
        Some("br") => {
            brotli::Decompressor::new(&a.body[..], 4096)
                .read_to_end(&mut out)
                .map_err(|e| TestCaseError::fail(format!("brotli: {e}")))?;
        }
        Some(other) => return Err(TestCaseError::fail(format!("encoding {other}"))),
    }
    Ok(out)
}

fn etag(a: &Answer) -> String {
    a.header("etag").unwrap_or_default().to_string()
}

/// Serves the list (twice, under two tokens) and a copy with one number written otherwise.
async fn check(payments: Vec<Payment>, compressed_seen: &AtomicUsize) -> Result<(), TestCaseError> {
    let file = payments_file(&payments);
    // The same value, other bytes: a trailing zero added to the first amount's digits (or
    // `.0` to an integer), so the list's bytes differ and its values' texts do too.
    let mut changed = payments.clone();
    if let Some(first) = changed.first_mut() {
        first.amount = match first.amount.find(['e', 'E']) {
            Some(at) => format!("{}0{}", &first.amount[..at], &first.amount[at..]),
            None if first.amount.contains('.') => format!("{}0", first.amount),
            None => format!("{}.0", first.amount),
        };
    }
    let other = payments_file(&changed);
    let server = TestServer::from_bundles([
        Bundle::new("a")
            .file("event.json", crate::fixtures::EVENT_JSON)
            .token(TOKEN)
            .file("payments.json", file.clone()),
        Bundle::new("b")
            .file("event.json", crate::fixtures::EVENT_JSON)
            .token("same-bytes")
            .file("payments.json", file.clone()),
        Bundle::new("c")
            .file("event.json", crate::fixtures::EVENT_JSON)
            .token("other-bytes")
            .file("payments.json", other),
    ])
    .start()
    .map_err(|e| TestCaseError::fail(format!("the server starts: {e}")))?;

    let plain = get(&server, TOKEN, "identity").await;
    prop_assert_eq!(plain.status.as_u16(), 200, "{}", plain.text());
    let served: Value = serde_json::from_slice(&plain.body)
        .map_err(|e| TestCaseError::fail(format!("served JSON: {e}")))?;
    let written: Value = serde_json::from_str(&file).expect("the file is JSON");
    // Numbers compare by their text (serde_json's arbitrary_precision): as written.
    prop_assert_eq!(&served, &written);
    let text = plain.text();
    for p in &payments {
        let amount = format!("\"amount_payment\":{},", as_served(&p.amount));
        prop_assert!(text.contains(&amount), "{} in {}", amount, text);
    }

    for encoding in ["gzip", "br"] {
        let compressed = get(&server, TOKEN, encoding).await;
        prop_assert_eq!(compressed.status.as_u16(), 200);
        prop_assert_eq!(decoded(&compressed)?, plain.body.to_vec(), "{}", encoding);
        if compressed.header("content-encoding") == Some(encoding) {
            compressed_seen.fetch_add(1, Ordering::Relaxed);
        }
        let same = get(&server, "same-bytes", encoding).await;
        let differs = get(&server, "other-bytes", encoding).await;
        prop_assert_eq!(
            same.header("content-encoding"),
            compressed.header("content-encoding")
        );
        prop_assert_eq!(etag(&same), etag(&compressed), "same bytes, same tag");
        if !changed.is_empty() {
            prop_assert_ne!(etag(&differs), etag(&compressed), "other bytes, other tag");
        }
    }
    let same = get(&server, "same-bytes", "identity").await;
    let differs = get(&server, "other-bytes", "identity").await;
    prop_assert_eq!(&same.body, &plain.body);
    prop_assert_eq!(etag(&same), etag(&plain), "same bytes, same tag");
    prop_assert_eq!(differs.body != plain.body, !changed.is_empty());
    prop_assert_eq!(
        etag(&differs) != etag(&plain),
        differs.body != plain.body,
        "the tag changes exactly when the bytes do"
    );
    Ok(())
}

#[test]
fn any_payments_list_is_served_back_as_written_in_every_encoding_with_tags_that_follow_the_bytes() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let mut runner = TestRunner::new(Config {
        cases: 40,
        failure_persistence: None,
        ..Config::default()
    });
    // Up to 60 payments: past the size where a body is compressed at all.
    let lists = proptest::collection::vec(payment(), 0..60);
    let compressed_seen = AtomicUsize::new(0);
    if let Err(e) = runner.run(&lists, |payments| {
        rt.block_on(check(payments, &compressed_seen))
    }) {
        panic!("{e}");
    }
    // Not vacuous: most lists are large enough to be sent compressed when asked.
    assert!(compressed_seen.load(Ordering::Relaxed) > 10);
}
