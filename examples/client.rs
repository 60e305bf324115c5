//! A small API client: reads the event a token opens and lists its payments. It shows how a
//! client of the platform's API talks to eventbox, and doubles as a smoke test of a running one.
//!
//! ```sh
//! cargo run --example client                                  # an in-process demo server
//! cargo run --example client -- http://127.0.0.1:8080 demo-token
//! EVENTBOX_URL=http://127.0.0.1:8080 EVENTBOX_TOKEN=demo-token cargo run --example client
//! ```
//!
//! Without a URL it starts a `TestServer` on the demo bundle (`data/`), so it runs anywhere in
//! the repository with nothing else started; the token defaults to `demo-token`. The logic is
//! [`report`], which the integration tests run against a `TestServer`.

use std::fmt::Write as _;

use serde_json::Value;

/// What went wrong talking to the API.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach {url}: {source}")]
    Http { url: String, source: reqwest::Error },
    /// The API's error body: the stable code is in `erros[0].description`.
    #[error("{url} answered {status} {code}: {message}")]
    Api {
        url: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("{url} answered something that is not the API's shape: {what}")]
    Shape { url: String, what: String },
}

/// GETs one endpoint with the token and returns its JSON body, or the API's error.
async fn get(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    token: &str,
) -> Result<Value, ClientError> {
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let http = |source| ClientError::Http {
        url: url.clone(),
        source,
    };
    let res = client
        .get(&url)
        .header("Authorization-Token", token)
        .send()
        .await
        .map_err(http)?;
    let status = res.status();
    let bytes = res.bytes().await.map_err(http)?;
    let body: Value = serde_json::from_slice(&bytes).map_err(|e| ClientError::Shape {
        url: url.clone(),
        what: format!("not JSON ({e})"),
    })?;
    if !status.is_success() {
        return Err(ClientError::Api {
            url,
            status: status.as_u16(),
            code: body["erros"][0]["description"]
                .as_str()
                .unwrap_or("?")
                .to_string(),
            message: body["message"].as_str().unwrap_or_default().to_string(),
        });
    }
    Ok(body)
}

/// The event and its payments, as text: the event's title, dates and place, then one line per
/// payment (reference, date, amount as the API wrote it, status, buyer).
pub async fn report(base: &str, token: &str) -> Result<String, ClientError> {
    let client = reqwest::Client::new();
    let event_body = get(&client, base, "/api/v1/event", token).await?;
    let event = &event_body["data"][0];
    let Some(title) = event["title"].as_str() else {
        return Err(ClientError::Shape {
            url: format!("{base}/api/v1/event"),
            what: "no data[0].title".into(),
        });
    };
    let payments = get(&client, base, "/api/v1/payments", token).await?;
    let list = payments["data"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();

    let mut out = String::new();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let _ = writeln!(out, "{title}");
    let _ = writeln!(
        out,
        "{} to {}, {}, {}",
        text(&event["start_date"]),
        text(&event["end_date"]),
        text(&event["venue"]),
        text(&event["city"]),
    );
    let _ = writeln!(out, "{} payments:", list.len());
    for p in list {
        let _ = writeln!(
            out,
            "  {:<14} {} {:>10} {:<8} {}",
            text(&p["reference_payment"]),
            text(&p["date_payment"]),
            // Display of a JSON number is its text as served (`210.50`).
            p["amount_payment"].to_string(),
            text(&p["status_payment"]),
            text(&p["buyer"]),
        );
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("client: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args.next().or_else(|| std::env::var("EVENTBOX_URL").ok());
    let token = args
        .next()
        .or_else(|| std::env::var("EVENTBOX_TOKEN").ok())
        .unwrap_or_else(|| "demo-token".to_string());
    // Kept alive until the end of main: dropping it stops the server.
    let mut _server = None;
    let base = match url {
        Some(url) => url,
        None => {
            let data = eventbox::testing::demo_data();
            let server = eventbox::testing::TestServer::start(data)?;
            eprintln!(
                "no URL given: serving the demo bundle in-process at {}",
                server.base_url()
            );
            let base = server.base_url();
            _server = Some(server);
            base
        }
    };
    print!("{}", report(&base, &token).await?);
    Ok(())
}
