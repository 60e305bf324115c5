//! Hostile and unlucky files in a bundle (issue 15, item 1): a named pipe, a link to
//! `/dev/zero`, a 3 GB sparse file, a file without read permission, a folder where a file
//! belongs and a file where a folder belongs. Each is an error naming the file in `/status`, the
//! last good version keeps serving, the other bundles keep reloading, and nothing blocks.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use eventbox::app::App;
use reqwest::Method;
use serde_json::Value;

use crate::helpers::{serve_app, TempData, TestApp, DEMO_TOKEN};

/// How long a reload may take here; a blocked one would take for ever.
const PATIENCE: Duration = Duration::from_secs(10);

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Two demo bundles: `demo` (the demo token) and `other` (its own token).
fn two_bundles() -> TempData {
    let data = TempData::new();
    data.with_demo("demo");
    data.with_demo("other");
    data.write("other/bundle.toml", "tokens = [\"other-token\"]\n");
    data
}

/// Reloads everything on a blocking thread, failing the test if it does not end in time.
async fn reload(app: &TestApp) {
    let served = app.app.clone();
    let done =
        tokio::time::timeout(PATIENCE, tokio::task::spawn_blocking(move || served.load())).await;
    let reloaded = done
        .expect("the reload ends (nothing blocks)")
        .expect("task");
    reloaded.expect("the data folder is readable");
}

/// The `/status` entry of a bundle.
async fn status_of(app: &TestApp, name: &str) -> Value {
    let status = app.send(Method::GET, "/status", None, None).await.json();
    status["bundles"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["name"] == name).cloned())
        .unwrap_or_else(|| panic!("no {name} in /status: {status}"))
}

async fn title(app: &TestApp, token: &str) -> Value {
    let res = app.get("/api/v1/event", token).await;
    assert_eq!(res.status, 200, "{}", res.text());
    res.json()["data"][0]["title"].clone()
}

/// Replaces `rel` in the `demo` bundle with something hostile (made by `make`), reloads, and
/// checks: an error naming the file and `reason`, the last good payments still served, and the
/// `other` bundle's edit picked up by the same reload.
async fn hostile(app: &TestApp, data: &TempData, rel: &str, reason: &str, make: impl Fn(&Path)) {
    let path = data.path().join("demo").join(rel);
    let good = app.get("/api/v1/payments", DEMO_TOKEN).await;
    assert_eq!(good.status, 200);
    let moved = data.path().join("_saved");
    std::fs::rename(&path, &moved).expect("set the good file aside");
    make(&path);
    let event = data.path().join("other/event.json");
    let text = std::fs::read_to_string(&event).expect("event");
    let retitled = format!("Other after {rel} became {reason}");
    let old_title = title(app, "other-token").await;
    let old_title = old_title.as_str().expect("a title");
    std::fs::write(&event, text.replace(old_title, &retitled)).expect("write");

    reload(app).await;

    let demo = status_of(app, "demo").await;
    let errors = demo["errors"].to_string();
    assert!(
        errors.contains(&path.display().to_string()) && errors.contains(reason),
        "/status should name {} and {reason:?}: {demo}",
        path.display()
    );
    assert_eq!(demo["served"], true, "the last good version serves: {demo}");
    let now = app.get("/api/v1/payments", DEMO_TOKEN).await;
    assert_eq!(now.status, 200);
    assert_eq!(
        now.body, good.body,
        "the last good payments keep being served"
    );
    assert_eq!(title(app, "other-token").await, retitled.as_str());

    // Put the good file back: the bundle loads cleanly again.
    if path.is_dir() {
        std::fs::remove_dir_all(&path).expect("remove");
    } else {
        std::fs::remove_file(&path).expect("remove");
    }
    std::fs::rename(&moved, &path).expect("restore");
    reload(app).await;
    let demo = status_of(app, "demo").await;
    assert_eq!(demo["errors"], serde_json::json!([]), "{demo}");
}

#[tokio::test]
async fn hostile_files_while_serving_are_errors_and_the_last_good_data_stays() {
    let data = two_bundles();
    let app = App::new(data.path());
    app.load().expect("loads");
    let app = serve_app(app).await;

    hostile(&app, &data, "payments.json", "a named pipe (FIFO)", mkfifo).await;
    hostile(&app, &data, "payments.json", "a character device", |p| {
        std::os::unix::fs::symlink("/dev/zero", p).expect("link to /dev/zero");
    })
    .await;
    hostile(&app, &data, "payments.json", "--max-file-bytes", |p| {
        let file = std::fs::File::create(p).expect("create");
        file.set_len(3_000_000_000).expect("a 3 GB sparse file");
    })
    .await;
    hostile(
        &app,
        &data,
        "payments.json",
        "a folder where a file belongs",
        |p| {
            std::fs::create_dir(p).expect("a folder");
        },
    )
    .await;
    hostile(
        &app,
        &data,
        "event.json",
        "a folder where a file belongs",
        |p| {
            std::fs::create_dir(p).expect("a folder");
        },
    )
    .await;
    hostile(
        &app,
        &data,
        "payment_details",
        "where a folder belongs",
        |p| std::fs::write(p, "{}").expect("a file"),
    )
    .await;
}

#[tokio::test]
async fn a_file_without_read_permission_is_an_error_naming_it() {
    use std::os::unix::fs::PermissionsExt;
    let data = two_bundles();
    let app = App::new(data.path());
    app.load().expect("loads");
    let app = serve_app(app).await;
    let probe = data.path().join("probe");
    std::fs::write(&probe, "x").expect("write");
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    if std::fs::read(&probe).is_ok() {
        eprintln!("skipped: running as root, which reads a file without read permission");
        return;
    }

    hostile(&app, &data, "payments.json", "Permission denied", |p| {
        std::fs::write(p, "[]").expect("write");
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    })
    .await;
}

#[tokio::test]
async fn a_fifo_at_start_fails_its_bundle_only() {
    let data = two_bundles();
    let payments = data.path().join("demo/payments.json");
    std::fs::remove_file(&payments).expect("remove");
    mkfifo(&payments);
    let app = App::new(data.path());
    let loading = tokio::task::spawn_blocking({
        let app = app.clone();
        move || app.load()
    });

    tokio::time::timeout(PATIENCE, loading)
        .await
        .expect("the first load ends")
        .expect("task")
        .expect("the data folder is readable");
    let app = serve_app(app).await;

    assert_eq!(app.get("/readyz", "").await.status, 200);
    assert_eq!(app.get("/api/v1/event", DEMO_TOKEN).await.status, 503);
    assert_eq!(app.get("/api/v1/event", "other-token").await.status, 200);
    let demo = status_of(&app, "demo").await;
    assert!(
        demo["errors"]
            .to_string()
            .contains("payments.json: a named pipe (FIFO)"),
        "{demo}"
    );
}

#[test]
fn check_refuses_a_file_over_max_file_bytes_and_a_fifo_without_hanging() {
    let data = two_bundles();
    data.with_demo("piped");
    let fifo = data.path().join("piped/event.json");
    std::fs::remove_file(&fifo).expect("remove");
    mkfifo(&fifo);
    let out = Command::new(env!("CARGO_BIN_EXE_eventbox"))
        .args(["check", data.path().to_str().expect("UTF-8")])
        .args(["--max-file-bytes", "1000"])
        .output()
        .expect("run eventbox check");
    let stdout = String::from_utf8_lossy(&out.stdout);

    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("payments.json: ") && stdout.contains("over the limit of 1000 bytes"),
        "{stdout}"
    );
    assert!(
        stdout.contains("piped/event.json: a named pipe (FIFO) where a file belongs"),
        "check does not hang on a FIFO and names it: {stdout}"
    );
}
