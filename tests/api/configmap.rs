//! The kubelet's atomic ConfigMap update, reproduced on a real folder (no cluster): the mounted
//! folder holds `..<timestamp>/demo/...`, `..data -> ..<timestamp>` and `demo -> ..data/demo`;
//! an update writes a new timestamped folder, renames a new `..data` link over the old one (one
//! atomic step) and removes the old folder. eventbox must reload once, list one bundle named
//! `demo` (the `..` folders are not bundles) and never show a reader an error or a mix.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eventbox::app::App;
use eventbox::watch::WatchMode;
use reqwest::Method;
use serde_json::Value;

use crate::helpers::{copy_dir, demo_data, serve_app, TempData, DEMO_TOKEN};

const PATIENCE: Duration = Duration::from_secs(10);

/// The demo event file with another title (the served body is this text, compact).
fn event_titled(title: &str) -> String {
    let text = std::fs::read_to_string(demo_data().join("demo/event.json")).expect("demo event");
    let mut v: Value = serde_json::from_str(&text).expect("JSON");
    v["data"][0]["title"] = Value::String(title.to_string());
    v.to_string()
}

/// Writes the demo bundle, its event titled `title`, under `root/<stamp>/demo`, as the kubelet
/// writes a ConfigMap's files into a new timestamped folder.
fn write_version(root: &Path, stamp: &str, title: &str) {
    let bundle = root.join(stamp).join("demo");
    copy_dir(&demo_data().join("demo"), &bundle);
    std::fs::write(bundle.join("event.json"), event_titled(title)).expect("write event.json");
}

/// `..data` now points at `stamp`: a new link renamed over the old one, then the old folder
/// removed, as the kubelet's AtomicWriter does.
#[cfg(unix)]
fn swap_data_link(root: &Path, stamp: &str, old: &str) {
    let tmp = root.join("..data_tmp");
    std::os::unix::fs::symlink(stamp, &tmp).expect("the new ..data link");
    std::fs::rename(&tmp, root.join("..data")).expect("rename over ..data");
    std::fs::remove_dir_all(root.join(old)).expect("remove the old timestamped folder");
}

fn loads_ok(metrics: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(r#"eventbox_bundle_loads_total{result="ok"} "#))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[cfg(unix)]
async fn a_configmap_update_is_one_reload_with_no_duplicate_and_no_torn_read(mode: WatchMode) {
    use std::os::unix::fs::symlink;

    // Arrange: the folder as the kubelet mounts a ConfigMap with the demo bundle's files.
    let data = TempData::new();
    let root = data.path();
    let (first, second) = ("..2026_01_01_00_00_00.000", "..2026_01_01_00_01_00.000");
    write_version(root, first, "Versão A");
    symlink(first, root.join("..data")).expect("..data");
    symlink("..data/demo", root.join("demo")).expect("demo");
    let app = App::new(root);
    let _watcher = app
        .watch(mode, Duration::from_millis(50))
        .await
        .expect("watching starts");
    app.load().expect("loads");
    let app = serve_app(app).await;
    let old_body = event_titled("Versão A");
    let new_body = event_titled("Versão B");
    let first_answer = app.get("/api/v1/event", DEMO_TOKEN).await;
    assert_eq!(first_answer.text(), old_body, "the first version is served");
    let before = app.send(Method::GET, "/metrics", None, None).await.text();

    // Act: readers read throughout while the kubelet writes the new version and swaps it in.
    let done = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..6 {
        let (client, url, done) = (
            app.client.clone(),
            format!("{}/api/v1/event", app.base),
            Arc::clone(&done),
        );
        let (old_body, new_body) = (old_body.clone(), new_body.clone());
        readers.push(tokio::spawn(async move {
            let (mut olds, mut news, mut bad) = (0usize, 0usize, Vec::new());
            while !done.load(Ordering::Relaxed) {
                let res = client
                    .get(&url)
                    .header("Authorization-Token", DEMO_TOKEN)
                    .send()
                    .await;
                match res {
                    Ok(r) if r.status() == 200 => {
                        let body = r.text().await.unwrap_or_default();
                        if body == new_body {
                            news += 1;
                        } else if body == old_body && news == 0 {
                            olds += 1;
                        } else if body == old_body {
                            bad.push("the old version after the new one".to_string());
                        } else {
                            bad.push(format!("200 with another body: {body:.120}"));
                        }
                    }
                    Ok(r) => bad.push(format!("status {}", r.status())),
                    Err(e) => bad.push(format!("request failed: {e}")),
                }
            }
            (olds, news, bad)
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    write_version(root, second, "Versão B");
    swap_data_link(root, second, first);
    let started = Instant::now();
    loop {
        let res = app.get("/api/v1/event", DEMO_TOKEN).await;
        if res.text() == new_body {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the new version is not served within {PATIENCE:?}; last answer {} {:.200}",
            res.status,
            res.text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let the readers see the new version for a while, and any late second reload happen.
    tokio::time::sleep(Duration::from_millis(500)).await;
    done.store(true, Ordering::Relaxed);

    // Assert: no reader saw an error, another body, or the old version after the new one.
    let (mut olds, mut news) = (0, 0);
    for r in readers {
        let (o, n, bad) = r.await.expect("a reader");
        assert!(bad.is_empty(), "a reader saw: {bad:#?}");
        olds += o;
        news += n;
    }
    assert!(
        olds > 0 && news > 0,
        "both versions were read: {olds} old, {news} new"
    );
    // One bundle named demo: neither `..data` nor the timestamped folders are bundles.
    let status = app.send(Method::GET, "/status", None, None).await.json();
    let bundles = status["bundles"].as_array().expect("a bundles list");
    let names: Vec<&str> = bundles.iter().filter_map(|b| b["name"].as_str()).collect();
    assert_eq!(names, ["demo"], "bundles in /status: {status}");
    assert_eq!(bundles[0]["served"], true, "{status}");
    // One reload of the bundle for the one swap.
    let after = app.send(Method::GET, "/metrics", None, None).await.text();
    assert_eq!(
        loads_ok(&after) - loads_ok(&before),
        1.0,
        "bundle loads for one ConfigMap update; before:\n{before}\nafter:\n{after}"
    );
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_configmap_update_is_seen_by_file_events() {
    a_configmap_update_is_one_reload_with_no_duplicate_and_no_torn_read(WatchMode::Native).await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_configmap_update_is_seen_by_polling() {
    a_configmap_update_is_one_reload_with_no_duplicate_and_no_torn_read(WatchMode::Poll(
        Duration::from_millis(100),
    ))
    .await;
}
