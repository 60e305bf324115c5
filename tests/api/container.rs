//! The container image, run by Docker: small, read-only, non-root, every endpoint answered as
//! in-process; a bundle mounted from the host and changed there is served; SIGTERM under a slow
//! request answers it and exits within the drain timeout; the health check (`eventbox probe`)
//! turns healthy; and the Testcontainers way of starting it. Also, without Docker: the
//! Kubernetes base's bundle is the demo bundle.
//!
//! Without Docker (`docker info` fails) the Docker tests pass after saying once, on the test
//! output, that they were skipped and why. With Docker, the image is built once per test run
//! (`scripts/image.sh`, its own target folder) when it is missing or older than the files it is
//! made from, and shared: with Cargo's `image-test` profile unless `EVENTBOX_IMAGE_PROFILE`
//! names another (CI builds the release image before the tests, so they find it fresh). Each container has a unique name and is removed when dropped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::helpers::{client, demo_data, spawn_app, TempData, DEMO_TOKEN};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The largest image the issue accepts.
const MAX_IMAGE_BYTES: u64 = 30 * 1024 * 1024;
/// The admin token every container is given (`EVENTBOX_ADMIN_TOKEN`): the host reaches a
/// container from the Docker bridge's address, not loopback, so `/status` and `/_journal` need it.
const ADMIN_TOKEN: &str = "container-admin-token-5d1f";
/// How long a container may take to answer 200 on /readyz.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// The image's tag, as `scripts/image.sh` names it.
fn tag() -> String {
    format!("eventbox:{}", env!("CARGO_PKG_VERSION"))
}

/// A line on the test output even when libtest captures the test's own output.
pub(crate) fn say(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

pub(crate) fn docker(args: &[&str]) -> Output {
    Command::new("docker")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("docker {args:?}: cannot run docker: {e}"))
}

/// `docker ARGS`, which must succeed; its stdout, trimmed.
pub(crate) fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(
        out.status.success(),
        "docker {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The image to run, or `None` (after saying why, once) when Docker is not there. Builds it
/// once per test run when it is missing or older than its sources; a failed build fails.
pub(crate) fn image() -> Option<String> {
    static IMAGE: OnceLock<Result<String, String>> = OnceLock::new();
    let ready = IMAGE.get_or_init(|| {
        let info = Command::new("docker")
            .args(["info", "--format", "{{.ServerVersion}}"])
            .output();
        match info {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                let reason = String::from_utf8_lossy(&out.stderr).trim().to_string();
                say(&format!(
                    "container tests skipped: `docker info` failed: {reason}"
                ));
                return Err(reason);
            }
            Err(e) => {
                say(&format!("container tests skipped: no docker command: {e}"));
                return Err(e.to_string());
            }
        }
        build_if_stale();
        Ok(tag())
    });
    ready.as_ref().ok().cloned()
}

/// Runs `scripts/image.sh` unless the image exists and is newer than every file it is made from.
fn build_if_stale() {
    let created = docker(&["image", "inspect", "--format", "{{.Created}}", &tag()]);
    let created = created
        .status
        .success()
        .then(|| String::from_utf8_lossy(&created.stdout).trim().to_string())
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
        .map(SystemTime::from);
    let root = Path::new(ROOT);
    let sources = [
        "src",
        "data",
        "Cargo.toml",
        "Cargo.lock",
        "Dockerfile",
        ".dockerignore",
        // Compiled into the binary (`include_bytes!`).
        "openapi.json",
        "scripts/image.sh",
    ];
    let newest = sources
        .iter()
        .filter_map(|s| newest_mtime(&root.join(s)))
        .max();
    let why = match (created, newest) {
        (None, _) => "it is missing",
        (Some(c), Some(n)) if n > c => "its sources changed",
        _ => return,
    };
    say(&format!(
        "building the image {} ({why}): scripts/image.sh",
        tag()
    ));
    let started = Instant::now();
    let mut command = Command::new("bash");
    command
        .arg(root.join("scripts/image.sh"))
        .arg(tag())
        .current_dir(root);
    // As from a shell: without the variables `cargo test` sets for its test binaries, which
    // would make the image's cargo build differ from scripts/image.sh run by hand (and rebuild).
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if (name.starts_with("CARGO") && name != "CARGO_HOME")
            || name == "RUST_RECURSION_COUNT"
            || name == "LD_LIBRARY_PATH"
        {
            command.env_remove(&*name);
        }
    }
    if std::env::var_os("EVENTBOX_IMAGE_PROFILE").is_none() {
        command.env("EVENTBOX_IMAGE_PROFILE", "image-test");
    }
    let out = command.output().expect("run scripts/image.sh");
    assert!(
        out.status.success(),
        "scripts/image.sh failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    say(&format!(
        "built {} in {:.0?}",
        String::from_utf8_lossy(&out.stdout).trim(),
        started.elapsed()
    ));
}

/// The newest modification time of a file, or of any file under a folder.
fn newest_mtime(path: &Path) -> Option<SystemTime> {
    let meta = std::fs::metadata(path).ok()?;
    let own = meta.modified().ok();
    if !meta.is_dir() {
        return own;
    }
    let entries = std::fs::read_dir(path).ok()?;
    entries
        .flatten()
        .filter_map(|e| newest_mtime(&e.path()))
        .chain(own)
        .max()
}

/// A running container, removed (with its anonymous volumes) when dropped.
struct Container {
    name: String,
}

/// The options every container of these tests runs with: the hardening the issue asks for.
const HARDENED: [&str; 5] = [
    "--read-only",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
];

impl Container {
    /// `docker run -d` of `image` with `options`, port 8080 published on 127.0.0.1 (a port
    /// Docker picks), [`ADMIN_TOKEN`] as `EVENTBOX_ADMIN_TOKEN`, and `command` after the image.
    fn run(image: &str, options: &[&str], command: &[&str]) -> Container {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "eventbox-test-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        let container = Container { name };
        let mut args = vec![
            "run",
            "-d",
            "--name",
            &container.name,
            "--label",
            "eventbox-test=1",
            "-p",
            "127.0.0.1::8080",
            "-e",
        ];
        let admin = format!("EVENTBOX_ADMIN_TOKEN={ADMIN_TOKEN}");
        args.push(&admin);
        args.extend_from_slice(options);
        args.push(image);
        args.extend_from_slice(command);
        docker_ok(&args);
        container
    }

    /// `http://127.0.0.1:PORT`, the published port 8080.
    fn base(&self) -> String {
        let port = docker_ok(&["port", &self.name, "8080/tcp"]);
        let first = port.lines().next().unwrap_or_default();
        format!("http://{first}")
    }

    fn inspect(&self, template: &str) -> String {
        docker_ok(&["inspect", "--format", template, &self.name])
    }

    /// (stdout, stderr) of the container so far.
    fn logs(&self) -> (String, String) {
        let out = docker(&["logs", &self.name]);
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Polls /readyz until 200; returns how long that took. Fails with the container's output
    /// after [`READY_WITHIN`].
    async fn until_ready(&self, base: &str) -> Duration {
        let started = Instant::now();
        let client = client();
        loop {
            let res = client.get(format!("{base}/readyz")).send().await;
            if res.is_ok_and(|r| r.status() == 200) {
                return started.elapsed();
            }
            if started.elapsed() > READY_WITHIN {
                let (stdout, stderr) = self.logs();
                panic!(
                    "{}: not ready within {READY_WITHIN:?}; state {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
                    self.name,
                    self.inspect("{{json .State}}")
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = docker(&["rm", "--force", "--volumes", &self.name]);
    }
}

/// GET `base/path` with the demo token and the admin token as a bearer: (status, body).
async fn get(base: &str, path: &str) -> (u16, String) {
    let res = client()
        .get(format!("{base}{path}"))
        .header("Authorization-Token", DEMO_TOKEN)
        .header("Authorization", format!("Bearer {ADMIN_TOKEN}"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {base}{path}: {e}"));
    let status = res.status().as_u16();
    (status, res.text().await.unwrap_or_default())
}

/// Every answer of the demo that does not change from one server to another.
const FIXED_ANSWERS: [&str; 9] = [
    "/healthz",
    "/openapi.json",
    "/api/v1/event",
    "/api/v1/hotsite/",
    "/api/v1/payments",
    "/api/v1/payments/details?reference=PG2026000104",
    "/api/v1/payments/details?reference=PG2026000122",
    "/api/v1/submission/",
    "/api/v1/submission/list",
];

#[tokio::test]
async fn the_image_is_small_and_serves_every_endpoint_read_only_as_non_root() {
    let Some(image) = image() else { return };
    // Arrange: what the image is.
    let size: u64 = docker_ok(&["image", "inspect", "--format", "{{.Size}}", &image])
        .parse()
        .expect("a size");
    say(&format!(
        "image {image}: {size} bytes ({:.1} MB)",
        size as f64 / 1_048_576.0
    ));
    assert!(size <= MAX_IMAGE_BYTES, "{image} is {size} bytes");
    let config: Value = serde_json::from_str(&docker_ok(&[
        "image",
        "inspect",
        "--format",
        "{{json .Config}}",
        &image,
    ]))
    .expect("the image's config as JSON");
    assert_eq!(config["User"], "10001:10001", "{config}");
    let labels = &config["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION"),
        "{labels}"
    );
    assert_eq!(
        labels["org.opencontainers.image.licenses"],
        env!("CARGO_PKG_LICENSE"),
        "{labels}"
    );
    assert!(
        labels["org.opencontainers.image.source"].is_string(),
        "{labels}"
    );
    let env: Vec<&str> = config["Env"]
        .as_array()
        .map(|e| e.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(env.contains(&"EVENTBOX_ADDR=0.0.0.0:8080"), "{env:?}");
    assert!(env.contains(&"EVENTBOX_LOG_FORMAT=json"), "{env:?}");
    assert!(
        config["Healthcheck"]["Test"].to_string().contains("probe"),
        "{config}"
    );
    // No shell in the image.
    let shell = docker(&[
        "run",
        "--rm",
        "--entrypoint",
        "/bin/sh",
        &image,
        "-c",
        "true",
    ]);
    assert!(!shell.status.success(), "/bin/sh ran in the image");

    // Act: start it hardened, and serve the same data in-process to compare with.
    let started = Instant::now();
    let container = Container::run(&image, &HARDENED, &[]);
    let base = container.base();
    container.until_ready(&base).await;
    say(&format!(
        "image {image}: start to ready (docker run to /readyz 200) in {:.0?}",
        started.elapsed()
    ));
    let local = spawn_app(&demo_data()).await;

    // Assert: every answer is the in-process one, byte for byte.
    for path in FIXED_ANSWERS {
        let (status, body) = get(&base, path).await;
        let (local_status, local_body) = get(&local.base, path).await;
        assert_eq!(status, 200, "{path}: {body:.200}");
        assert_eq!(
            (status, &body),
            (local_status, &local_body),
            "{path}: the container answers as in-process"
        );
    }
    let (status, body) = get(&base, "/status").await;
    assert_eq!(status, 200, "{body}");
    let status_json: Value = serde_json::from_str(&body).expect("/status is JSON");
    assert_eq!(status_json["bundles"][0]["name"], "demo", "{status_json}");
    assert_eq!(status_json["bundles"][0]["served"], true, "{status_json}");
    // From the host the peer is the bridge's address, not loopback: no bearer, no /status.
    let bare = client()
        .get(format!("{base}/status"))
        .send()
        .await
        .expect("answered");
    assert_eq!(bare.status(), 401, "/status without the admin token");
    let (stdout, stderr) = container.logs();
    assert!(stderr.contains("admin token set"), "{stderr}");
    assert!(!stdout.contains(ADMIN_TOKEN) && !stderr.contains(ADMIN_TOKEN));
    let (status, metrics) = get(&base, "/metrics").await;
    assert_eq!(status, 200);
    assert!(metrics.contains("eventbox_bundles_served 1"), "{metrics}");
    // Non-root, read-only, no capabilities.
    assert_eq!(container.inspect("{{.Config.User}}"), "10001:10001");
    assert_eq!(container.inspect("{{.HostConfig.ReadonlyRootfs}}"), "true");
    assert_eq!(
        container.inspect("{{json .HostConfig.CapDrop}}"),
        r#"["ALL"]"#
    );
    let processes = docker_ok(&["top", &container.name, "-o", "pid,uid,gid"]);
    let ids: Vec<Vec<&str>> = processes
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().skip(1).collect())
        .collect();
    assert!(
        !ids.is_empty() && ids.iter().all(|i| *i == ["10001", "10001"]),
        "processes: {processes}"
    );
    // The startup line on stdout, JSON log lines on stderr.
    let (stdout, stderr) = container.logs();
    assert!(
        stdout.contains("eventbox listening on http://0.0.0.0:8080"),
        "{stdout}"
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "no log line");
    for line in lines {
        assert!(
            serde_json::from_str::<Value>(line).is_ok(),
            "not a JSON log line: {line}"
        );
    }
}

/// The demo event file with another title (served compact, as this text).
fn event_titled(title: &str) -> String {
    let text = std::fs::read_to_string(demo_data().join("demo/event.json")).expect("demo event");
    let mut v: Value = serde_json::from_str(&text).expect("JSON");
    v["data"][0]["title"] = Value::String(title.to_string());
    v.to_string()
}

/// A data folder holding the demo bundle, readable by the image's user (10001).
fn shared_demo() -> TempData {
    let data = TempData::new();
    data.with_demo("demo");
    readable_by_all(data.path());
    data
}

#[cfg(unix)]
fn readable_by_all(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).expect("metadata");
    let mode = if meta.is_dir() { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).expect("read folder").flatten() {
            readable_by_all(&entry.path());
        }
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_bundle_mounted_from_the_host_and_changed_there_is_served() {
    let Some(image) = image() else { return };
    let data = shared_demo();
    let mount = format!("{}:/data:ro", data.path().display());
    let mut options = HARDENED.to_vec();
    options.extend(["-v", &mount]);
    let container = Container::run(
        &image,
        &options,
        &["serve", "--watch", "poll", "--poll-interval", "200ms"],
    );
    let base = container.base();
    container.until_ready(&base).await;
    assert_eq!(
        get(&base, "/api/v1/event").await.1,
        event_titled_from_file()
    );
    // Mounted over /data: not the image's own demo, so no warning that it is.
    let (_, log) = container.logs();
    assert!(log.contains("bundles from /data"), "{log}");
    assert!(!log.contains(DEMO_WARNING), "{log}");

    std::fs::write(
        data.path().join("demo/event.json"),
        event_titled("Mudado no host"),
    )
    .expect("write on the host");

    let started = Instant::now();
    loop {
        let (status, body) = get(&base, "/api/v1/event").await;
        if body == event_titled("Mudado no host") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the change is not served; last answer {status} {body:.200}\nlogs: {:?}",
            container.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The demo event as served (compact).
fn event_titled_from_file() -> String {
    let text = std::fs::read_to_string(demo_data().join("demo/event.json")).expect("demo event");
    let v: Value = serde_json::from_str(&text).expect("JSON");
    v.to_string()
}

#[tokio::test]
async fn sigterm_answers_the_request_in_flight_and_exits_within_the_drain_timeout() {
    let Some(image) = image() else { return };
    let container = Container::run(&image, &HARDENED, &["serve", "--allow-control-headers"]);
    let base = container.base();
    container.until_ready(&base).await;

    // A request the server holds for 2 s.
    let slow = tokio::spawn({
        let url = format!("{base}/api/v1/event");
        async move {
            let res = client()
                .get(url)
                .header("Authorization-Token", DEMO_TOKEN)
                .header("X-Eventbox-Delay", "2000")
                .send()
                .await?;
            let status = res.status().as_u16();
            Ok::<_, reqwest::Error>((status, res.text().await?))
        }
    });
    // An answer on another connection after it was sent: the slow one has reached the server.
    assert_eq!(get(&base, "/healthz").await.0, 200);

    let stopping = Instant::now();
    let name = container.name.clone();
    // SIGTERM; SIGKILL only after 30 s, well past the 10 s drain.
    let stop = tokio::task::spawn_blocking(move || docker(&["stop", "--time", "30", &name]))
        .await
        .expect("docker stop");
    let took = stopping.elapsed();
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );

    let (status, body) = slow
        .await
        .expect("the slow request's task")
        .expect("the slow request is answered, not cut");
    assert_eq!(status, 200, "{body:.200}");
    assert_eq!(body, event_titled_from_file());
    let drain = eventbox::http::DRAIN_TIMEOUT;
    assert!(
        took < drain + Duration::from_secs(3),
        "docker stop took {took:?} (drain timeout {drain:?})"
    );
    assert_eq!(
        container.inspect("{{.State.ExitCode}}"),
        "0",
        "a clean exit, not a kill; logs {:?}",
        container.logs()
    );
    let (_, stderr) = container.logs();
    assert!(stderr.contains("shutting down"), "{stderr}");
}

#[test]
fn object_storage_without_a_state_folder_exits_saying_to_give_one() {
    let Some(image) = image() else { return };
    // Read-only and FROM scratch: no /tmp to mirror into.
    let container = Container::run(
        &image,
        &HARDENED,
        &["serve", "--data", "s3://bundles/events"],
    );
    let code = docker_ok(&["wait", &container.name]);
    let (stdout, stderr) = container.logs();
    let said = format!("{stdout}{stderr}");
    assert_eq!(code, "2", "{said}");
    assert!(
        said.contains("cannot create a folder to mirror s3://bundles/events into")
            && said.contains("give --state DIR"),
        "{said}"
    );
}

#[tokio::test]
async fn the_health_check_turns_healthy() {
    let Some(image) = image() else { return };
    // The image checks every 10 s; a shorter interval here, the same command.
    let mut options = HARDENED.to_vec();
    options.extend(["--health-interval", "500ms", "--health-start-period", "0s"]);
    let container = Container::run(&image, &options, &[]);

    let started = Instant::now();
    loop {
        let health = container.inspect("{{.State.Health.Status}}");
        if health == "healthy" {
            break;
        }
        assert_ne!(
            health,
            "unhealthy",
            "{}",
            container.inspect("{{json .State.Health}}")
        );
        assert!(
            started.elapsed() < READY_WITHIN,
            "not healthy within {READY_WITHIN:?}: {}",
            container.inspect("{{json .State.Health}}")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let health: Value =
        serde_json::from_str(&container.inspect("{{json .State.Health}}")).expect("JSON");
    let last = health["Log"]
        .as_array()
        .and_then(|l| l.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(last["ExitCode"], 0, "{health}");
    assert!(
        last["Output"].as_str().is_some_and(|o| o.contains("200")),
        "the probe's line: {health}"
    );
    // Nothing mounted: the start says that the image's own demo is what is served.
    let (_, log) = container.logs();
    assert!(log.contains(DEMO_WARNING), "{log}");
}

/// What `serve` says when it serves the demo folder built into the image.
const DEMO_WARNING: &str = "/data is the demo bundle built into the image, not bundles of yours";

/// The Testcontainers way, as a team outside this repository would write it: a generic image,
/// a bundle folder mounted, the journal on, wait on /readyz, call the API, read the journal.
#[tokio::test]
async fn testcontainers_starts_the_image_with_a_mounted_bundle_and_the_journal() {
    use testcontainers::{clients::Cli, GenericImage, RunnableImage};

    let Some(image) = image() else { return };
    let (name, version) = image.split_once(':').expect("name:tag");
    let data = shared_demo();
    let docker = Cli::default();
    let eventbox = GenericImage::new(name, version)
        .with_exposed_port(8080)
        .with_env_var("EVENTBOX_ADMIN_TOKEN", ADMIN_TOKEN);
    let args = ["serve", "--journal", "100"].map(String::from).to_vec();
    let runnable = RunnableImage::from((eventbox, args))
        .with_volume((data.path().display().to_string(), "/data".to_string()));
    let container = docker.run(runnable);
    let base = format!("http://127.0.0.1:{}", container.get_host_port_ipv4(8080));

    let client = client();
    let started = Instant::now();
    while !client
        .get(format!("{base}/readyz"))
        .send()
        .await
        .is_ok_and(|r| r.status() == 200)
    {
        assert!(started.elapsed() < READY_WITHIN, "not ready at {base}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, body) = get(&base, "/api/v1/payments/details?reference=PG2026000104").await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = get(&base, "/api/v1/event").await;
    assert_eq!(status, 200);

    let (status, body) = get(&base, "/_journal").await;
    assert_eq!(status, 200, "{body}");
    let journal: Value = serde_json::from_str(&body).expect("the journal as JSON");
    let seen: Vec<(&str, &str, u64)> = journal["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["path"] != "/readyz")
        .map(|e| {
            (
                e["path"].as_str().unwrap_or("?"),
                e["reference"].as_str().unwrap_or("-"),
                e["status"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("/api/v1/payments/details", "PG2026000104", 200),
            ("/api/v1/event", "-", 200),
        ],
        "{journal}"
    );
}

/// The bundle the Kubernetes base mounts is the demo bundle, file for file (kustomize reads only
/// files under its own folder, so it is a copy).
#[test]
fn the_kubernetes_base_bundle_is_the_demo_bundle() {
    let base = Path::new(ROOT).join("deploy/kubernetes/base/bundle");
    let demo = demo_data().join("demo");
    let files = |root: &Path| -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("read folder").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    out.push(path.strip_prefix(root).expect("under root").to_path_buf());
                }
            }
        }
        out.sort();
        out
    };
    assert_eq!(files(&base), files(&demo));
    for rel in files(&demo) {
        assert_eq!(
            std::fs::read(base.join(&rel)).expect("the base's copy"),
            std::fs::read(demo.join(&rel)).expect("the demo file"),
            "{} differs from data/demo",
            rel.display()
        );
    }
    // Every file of the bundle is mounted: one configMapGenerator or secretGenerator line each.
    let kustomization =
        std::fs::read_to_string(Path::new(ROOT).join("deploy/kubernetes/base/kustomization.yaml"))
            .expect("the kustomization");
    for rel in files(&demo) {
        let line = format!("=bundle/{}", rel.display());
        assert!(kustomization.contains(&line), "{line} in the kustomization");
    }
}
