//! The examples, run as tests: `examples/client.rs`'s logic against a `TestServer`, and
//! `examples/in_process.rs` whole.

use eventbox::testing::TestServer;

use crate::helpers::{demo_data, DEMO_TOKEN};

#[path = "../../examples/client.rs"]
#[allow(dead_code)]
mod client;

#[tokio::test]
async fn the_client_example_reads_the_event_and_lists_every_payment() {
    let server = TestServer::start(demo_data()).expect("the demo starts");

    let report = client::report(&server.base_url(), DEMO_TOKEN)
        .await
        .expect("the report");

    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(
        lines[0], "33º Congresso Brasileiro de Engenharia Sanitária e Ambiental",
        "{report}"
    );
    assert_eq!(lines[2], "32 payments:", "{report}");
    assert_eq!(lines.len(), 3 + 32, "{report}");
    assert!(
        lines[3].starts_with("  PG2026000104") && lines[3].contains(" 210.50 "),
        "amounts as written: {report}"
    );
}

#[tokio::test]
async fn the_client_example_reports_the_apis_error_code() {
    let server = TestServer::start(demo_data()).expect("the demo starts");

    let err = client::report(&server.base_url(), "not-a-token")
        .await
        .expect_err("a wrong token fails");

    assert!(
        matches!(&err, client::ClientError::Api { status: 401, code, .. } if code == "invalid_token"),
        "{err}"
    );
}

#[path = "../../examples/in_process.rs"]
mod in_process;

#[test]
fn the_in_process_example_runs() {
    // Its own runtime, two servers, a request to each; any failure is its error.
    in_process::main().expect("the in_process example runs");
}
