//! eventbox inside a program: a `TestServer` on the demo bundle and one on a bundle built in
//! code, side by side on ports the system picks, each called over HTTP. This is how a client's
//! test suite uses eventbox as a fixture (`cargo run --example in_process`).

use eventbox::testing::{Bundle, TestServer};
use serde_json::json;

#[tokio::main]
pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The demo bundle, from the repository's data folder.
    let demo = TestServer::start(eventbox::testing::demo_data())?;
    // A bundle written in code: it goes through the same validation as files on disk.
    let workshop =
        TestServer::from_bundles([Bundle::new("workshop").token("workshop-token").json(
            "event",
            json!({"data": [{
                "id_event": 1, "title": "Oficina de drenagem", "url": "drenagem",
                "start_date": "2026-11-10T09:00:00", "end_date": "2026-11-10T17:00:00",
                "start_date_registration": "01/10/2026", "end_date_registration": "09/11/2026",
                "summary": "Um dia de prática.", "description": null,
                "url_image": "https://img.example/oficina.png", "credit_hour": 8,
                "country": "Brasil", "state": "PR", "city": "Curitiba", "venue": "Sala 2",
                "latitude": "-25.4284", "longitude": "-49.2733", "banner": null,
                "tickets": []
            }]}),
        )])
        .start()?;

    let client = reqwest::Client::new();
    for (server, bundle) in [(&demo, "demo"), (&workshop, "workshop")] {
        let token = server.token(bundle).unwrap_or_default();
        let event: serde_json::Value = serde_json::from_slice(
            &client
                .get(server.url("/api/v1/event"))
                .header("Authorization-Token", token)
                .send()
                .await?
                .error_for_status()?
                .bytes()
                .await?,
        )?;
        println!("{} serves {}", server.base_url(), event["data"][0]["title"]);
    }
    // Both servers stop here, when they are dropped.
    Ok(())
}
