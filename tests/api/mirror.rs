//! `serve --data s3://bucket/prefix` against moto in server mode (a local S3; PyPI `moto[server]`
//! installed into a venv under target/ by .ci/moto.sh). Skipped, saying why, without python3
//! and its venv module.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as StorePath;
use object_store::ObjectStore;

use crate::cli::{get_event, start_binary, Served};
use crate::helpers::{client, demo_data};
use crate::pull::pull_binary_with;

/// A storage server started by a test (moto, WsgiDAV), killed when the test ends.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// moto, the S3 of these tests.
type Moto = Server;

/// Installs (once) and starts moto on a free port, once it answers; `None` (with the reason
/// printed) when it cannot be installed here.
async fn moto() -> Option<Moto> {
    moto_with(&[]).await
}

/// As [`moto`], with moto's own environment variables set (its authentication, say).
async fn moto_with(env: &[(&str, &str)]) -> Option<Moto> {
    start_server(
        "moto",
        &["-m", "moto.server", "-H", "127.0.0.1", "-p", "{port}"],
        env,
    )
    .await
}

/// Runs the venv's python of .ci/moto.sh (installed once) with `args` (`{port}` becomes a free
/// port) until `http://127.0.0.1:{port}` answers: these servers print nothing reliable when
/// ready, their answering is the signal. `None` (said) when the venv cannot be installed.
async fn start_server(what: &str, args: &[&str], env: &[(&str, &str)]) -> Option<Server> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let installed = Command::new("bash")
        .arg(root.join(".ci/moto.sh"))
        .stderr(Stdio::inherit())
        .output();
    let python = match installed {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        Ok(out) => {
            eprintln!(
                "skipped: {what} could not be installed (.ci/moto.sh exited {})",
                out.status
            );
            return None;
        }
        Err(e) => {
            eprintln!("skipped: cannot run .ci/moto.sh: {e}");
            return None;
        }
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
        .to_string();
    let child = Command::new(root.join(&python))
        .args(args.iter().map(|a| a.replace("{port}", &port)))
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let server = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let start = Instant::now();
    while client().get(&server.url).send().await.is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what} did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Some(server)
}

impl Server {
    /// A new bucket and a client for it.
    async fn bucket(&self, name: &str) -> AmazonS3 {
        moto_bucket(&self.url, name).await
    }

    /// The AWS environment that points eventbox at this moto.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ENDPOINT_URL", self.url.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }
}

/// A new bucket in the moto at `url` (moto takes an unsigned PUT) and a client for it.
pub(crate) async fn moto_bucket(url: &str, name: &str) -> AmazonS3 {
    let res = client()
        .put(format!("{url}/{name}"))
        .send()
        .await
        .expect("create bucket");
    assert!(res.status().is_success(), "create bucket: {}", res.status());
    AmazonS3Builder::new()
        .with_endpoint(url)
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .with_bucket_name(name)
        .build()
        .expect("S3 client")
}

pub(crate) async fn put(store: &AmazonS3, key: &str, body: impl Into<bytes::Bytes>) {
    let body: bytes::Bytes = body.into();
    store
        .put(&StorePath::from(key), body.into())
        .await
        .expect("put object");
}

/// Every file of the demo bundle under `prefix/demo/`.
pub(crate) async fn put_demo(store: &AmazonS3, prefix: &str) {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let demo = demo_data().join("demo");
    let mut files = Vec::new();
    walk(&demo, &mut files);
    for f in files {
        let rel = f
            .strip_prefix(&demo)
            .expect("inside")
            .to_string_lossy()
            .to_string();
        put(
            store,
            &format!("{prefix}/demo/{rel}"),
            std::fs::read(&f).expect("read"),
        )
        .await;
    }
}

fn serve(source: &str, poll: &str, moto: &Moto) -> Served {
    let env = moto.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    start_binary(
        &[
            "--addr",
            "127.0.0.1:0",
            "--data",
            source,
            "--poll-interval",
            poll,
        ],
        &env,
    )
}

async fn wait_for(what: &str, served: &Served, mut done: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !done().await {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "never: {what}\n--- eventbox stderr ---\n{}",
            served.stderr()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn bundles_from_s3_are_served_and_follow_changes_within_two_polls() {
    let Some(moto) = moto().await else { return };
    let store = moto.bucket("bundles").await;
    put_demo(&store, "events").await;
    let served = serve("s3://bundles/events", "1s", &moto);
    let (status, body) = get_event(&served.base, "demo-token").await;
    assert_eq!(status, 200, "{body}");
    let title = body["data"][0]["title"]
        .as_str()
        .expect("a title")
        .to_string();

    // A changed object: served within two poll periods (plus the reload's own time).
    let mut event: serde_json::Value =
        serde_json::from_slice(&std::fs::read(demo_data().join("demo/event.json")).expect("read"))
            .expect("JSON");
    event["data"][0]["title"] = "Changed in storage".into();
    let changed_at = Instant::now();
    put(&store, "events/demo/event.json", event.to_string()).await;
    wait_for("the changed title served", &served, async || {
        get_event(&served.base, "demo-token").await.1["data"][0]["title"] == "Changed in storage"
    })
    .await;
    assert!(
        changed_at.elapsed() < Duration::from_millis(2500),
        "the change took {:?}",
        changed_at.elapsed()
    );

    // An object that is not valid JSON: /status and the log name it (the object, not the
    // mirror's local copy) and its place; the last good version keeps serving.
    put(&store, "events/demo/event.json", "{not json").await;
    let status_url = format!("{}/status", served.base);
    let named = "s3://bundles/events/demo/event.json:1:2: key must be a string";
    wait_for("/status naming the bad object", &served, async || {
        let text = client()
            .get(&status_url)
            .send()
            .await
            .expect("status")
            .text()
            .await;
        text.is_ok_and(|t| t.contains(named))
    })
    .await;
    wait_for("the log naming the bad object", &served, async || {
        served.stderr().contains(named)
    })
    .await;
    let (status, body) = get_event(&served.base, "demo-token").await;
    assert_eq!(status, 200);
    assert_eq!(body["data"][0]["title"], "Changed in storage");
    assert_ne!(title, "Changed in storage");

    // Storage gone: /status says since when and why; the last good bundles keep serving.
    drop(moto);
    wait_for("/status naming the storage failure", &served, async || {
        let text = client()
            .get(&status_url)
            .send()
            .await
            .expect("status")
            .text()
            .await;
        text.is_ok_and(|t| {
            t.contains(r#""storage":{"state":"failing""#)
                && t.contains("cannot list s3://bundles/events")
        })
    })
    .await;
    assert!(served
        .stderr()
        .contains("the last good bundles keep serving"));
    let readyz = client()
        .get(format!("{}/readyz", served.base))
        .send()
        .await
        .expect("readyz");
    assert_eq!(readyz.status(), 200, "still ready: it serves");
    assert_eq!(
        readyz.text().await.expect("body"),
        r#"{"status":"ready","storage":"failing"}"#
    );
    let (status, body) = get_event(&served.base, "demo-token").await;
    assert_eq!(status, 200);
    assert_eq!(body["data"][0]["title"], "Changed in storage");
}

#[tokio::test]
async fn a_bucket_that_does_not_exist_is_not_ready_and_says_so() {
    let Some(moto) = moto().await else { return };
    let served = serve("s3://no-such-bucket/events", "200ms", &moto);
    wait_for("the listing error in the log", &served, async || {
        served
            .stderr()
            .contains("cannot list s3://no-such-bucket/events")
    })
    .await;
    not_ready_naming(&served, "cannot list s3://no-such-bucket/events").await;
    assert!(served
        .stderr()
        .contains("not ready until the first sync succeeds"));
}

/// The address line means the process is up: a SIGTERM sent as soon as it is read stops the
/// server gracefully (exit 0), never kills it. (The handler was installed once the server's
/// task first ran, after the line: a mirror's first poll, which starts then, made the gap one
/// a test fell into most times.)
#[tokio::test]
async fn a_sigterm_as_soon_as_the_address_line_is_read_is_a_graceful_stop() {
    let Some(moto) = moto().await else { return };
    let bucket = moto.bucket("stopped-at-once").await;
    put(&bucket, "elsewhere/readme.txt", "not a bundle").await;
    for _ in 0..3 {
        let mut served = serve("s3://stopped-at-once/events", "200ms", &moto);
        served.signal("TERM");
        assert_eq!(served.wait_exit(), Some(0), "{}", served.stderr());
    }
}

/// A prefix with no bundle is said to be where one is added, not the local folder it is
/// mirrored into (which the mirror manages).
#[tokio::test]
async fn a_prefix_with_no_bundle_says_to_add_one_there() {
    let Some(moto) = moto().await else { return };
    let bucket = moto.bucket("empty-prefix").await;
    put(&bucket, "elsewhere/readme.txt", "not a bundle").await;
    let served = serve("s3://empty-prefix/events", "200ms", &moto);

    let stdout = served.stdout_until("no bundle is served").await;
    assert!(
        stdout.contains("no bundle is served: add one under s3://empty-prefix/events ("),
        "{stdout}"
    );
}

/// `/readyz` answers 503 with a message naming `what`, once the first sync has failed.
async fn not_ready_naming(served: &Served, what: &str) {
    let url = format!("{}/readyz", served.base);
    wait_for("/readyz naming what is awaited", served, async || {
        let res = client().get(&url).send().await.expect("readyz");
        let status = res.status();
        let body: serde_json::Value =
            serde_json::from_slice(&res.bytes().await.expect("a body")).expect("a JSON body");
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["erros"][0]["description"], "not_ready", "{body}");
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("Object storage:") && m.contains(what))
    })
    .await;
    // Alive all along: only readiness waits for storage.
    let health = client()
        .get(format!("{}/healthz", served.base))
        .send()
        .await
        .expect("healthz");
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn storage_that_hangs_fails_the_poll_after_the_store_timeout_and_says_so() {
    let url = hanging_store();
    let served = start_binary(
        &[
            "--addr",
            "127.0.0.1:0",
            "--data",
            "s3://hanging/events",
            "--poll-interval",
            "200ms",
            "--store-timeout",
            "300ms",
        ],
        &[
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ENDPOINT_URL", &url),
            ("AWS_ALLOW_HTTP", "true"),
        ],
    );
    not_ready_naming(&served, "s3://hanging/events").await;
    let log = served.stderr();
    assert!(
        log.contains("timed out") || log.contains("did not answer within"),
        "{log}"
    );
}

/// During an outage each poll logs one line of its own; the store client's retries within it
/// are not logged at the default level (two INFO lines a poll before), only with `-v`.
#[tokio::test]
async fn a_failing_store_is_one_line_a_poll_without_the_clients_retries() {
    let url = failing_store();
    let env = [
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", url.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
    ];
    let args = ["--addr", "127.0.0.1:0", "--data", "s3://down/events"];
    let quiet = start_binary(&[&args[..], &["--poll-interval", "200ms"]].concat(), &env);
    let verbose = start_binary(
        &[&args[..], &["--poll-interval", "200ms", "-v"]].concat(),
        &env,
    );
    for served in [&quiet, &verbose] {
        not_ready_naming(served, "s3://down/events").await;
        wait_for("two failed polls logged", served, async || {
            served
                .stderr()
                .matches("cannot list s3://down/events")
                .count()
                >= 2
        })
        .await;
    }
    let log = quiet.stderr();
    assert!(!log.contains("backing off"), "{log}");
    let log = verbose.stderr();
    assert!(
        log.contains("backing off"),
        "with -v the retries show: {log}"
    );
}

#[tokio::test]
async fn wrong_credentials_are_refused_by_the_store_and_said_so() {
    // moto checks signatures once its authentication is on; no such key exists in it.
    let Some(moto) = moto_with(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")]).await else {
        return;
    };
    let mut env = moto.env();
    for (k, v) in &mut env {
        if *k == "AWS_ACCESS_KEY_ID" {
            *v = "AKIAWRONGWRONGWRONG0".into();
        }
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let served = start_binary(
        &[
            "--addr",
            "127.0.0.1:0",
            "--data",
            "s3://bundles/events",
            "--poll-interval",
            "200ms",
        ],
        &env,
    );
    not_ready_naming(&served, "cannot list s3://bundles/events").await;
    let log = served.stderr();
    assert!(
        log.contains("InvalidAccessKeyId") || log.contains("403"),
        "the store's refusal is in the log: {log}"
    );
}

#[tokio::test]
async fn a_bundle_gone_from_storage_leaves_the_mirror_even_one_from_an_earlier_run() {
    let Some(moto) = moto().await else { return };
    let store = moto.bucket("kept").await;
    put_demo(&store, "events").await;
    // An earlier run mirrored a bundle `old` into --state's folder; storage no longer has it.
    let state = tempfile::tempdir().expect("tempdir");
    let old = state.path().join("mirror/old");
    crate::helpers::copy_dir(&demo_data().join("demo"), &old);
    let toml = std::fs::read_to_string(old.join("bundle.toml")).expect("bundle.toml");
    std::fs::write(
        old.join("bundle.toml"),
        toml.replace("demo-token", "old-token"),
    )
    .expect("write");
    let state_arg = state.path().to_str().expect("UTF-8");
    let env = moto.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let served = start_binary(
        &[
            "--addr",
            "127.0.0.1:0",
            "--data",
            "s3://kept/events",
            "--poll-interval",
            "200ms",
            "--state",
            state_arg,
        ],
        &env,
    );
    assert_eq!(get_event(&served.base, "demo-token").await.0, 200);
    assert_ne!(get_event(&served.base, "old-token").await.0, 200);
    assert!(!old.exists(), "the stale bundle is still mirrored");
    assert!(state.path().join("mirror/demo/bundle.toml").is_file());

    // Deleted from storage while served: removed within a poll or two.
    for key in ["events/demo/bundle.toml", "events/demo/event.json"] {
        store.delete(&StorePath::from(key)).await.expect("delete");
    }
    let list = store.list(Some(&StorePath::from("events/demo")));
    let rest: Vec<_> = futures_util::TryStreamExt::try_collect(list)
        .await
        .expect("list");
    for meta in rest {
        store.delete(&meta.location).await.expect("delete");
    }
    wait_for("the deleted bundle no longer served", &served, async || {
        get_event(&served.base, "demo-token").await.0 != 200
    })
    .await;
}

/// The mirror's copy is its owner's only, as `pull` writes one: the state folder it makes first
/// (0700, as `--state` alone makes it), the mirror's folders (0700) and every file copied (0600:
/// people's data, and `bundle.toml` names the tokens). Before, 0755 folders and 0644 files. A
/// state folder an earlier version left open gets its mirror folder closed, which closes the
/// copies in it (the operator's own state folder is left as it is).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mirrored_copy_and_the_state_folder_it_makes_are_the_owners_only() {
    use std::os::unix::fs::PermissionsExt;

    let Some(moto) = moto().await else { return };
    let store = moto.bucket("private").await;
    put_demo(&store, "events").await;
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .permissions()
            .mode()
            & 0o777
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let earlier = tmp.path().join("earlier");
    std::fs::create_dir_all(earlier.join("mirror/old")).expect("mkdir");
    for folder in [earlier.clone(), earlier.join("mirror")] {
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let env = moto.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for (state, made_here) in [(tmp.path().join("state"), true), (earlier, false)] {
        let served = start_binary(
            &[
                "--addr",
                "127.0.0.1:0",
                "--data",
                "s3://private/events",
                "--state",
                state.to_str().expect("UTF-8"),
            ],
            &env,
        );
        assert_eq!(get_event(&served.base, "demo-token").await.0, 200);
        let copy = state.join("mirror/demo");
        for folder in [state.join("mirror"), copy.clone()] {
            assert_eq!(mode(&folder), 0o700, "{}", folder.display());
        }
        let own = if made_here { 0o700 } else { 0o755 };
        assert_eq!(mode(&state), own, "{}", state.display());
        for file in ["bundle.toml", "event.json", "payments.json"] {
            assert_eq!(mode(&copy.join(file)), 0o600, "{file}");
        }
    }
}

/// The manifest a bundle folder's files make (what `pull --into s3://` writes last).
fn manifest_of(files: &[(&str, Vec<u8>)]) -> String {
    use sha2::Digest;
    let files: serde_json::Map<String, serde_json::Value> = files
        .iter()
        .map(|(name, bytes)| {
            let sha = hex::encode(sha2::Sha256::digest(bytes));
            (
                (*name).to_string(),
                serde_json::json!({"size": bytes.len(), "sha256": sha}),
            )
        })
        .collect();
    serde_json::json!({ "files": files }).to_string()
}

#[tokio::test]
async fn a_bundle_with_a_manifest_is_served_only_when_its_objects_are_the_manifests() {
    let Some(moto) = moto().await else { return };
    let store = moto.bucket("manifested").await;
    let demo = demo_data().join("demo");
    let read = |name: &str| std::fs::read(demo.join(name)).expect("read");
    let (toml, event) = (read("bundle.toml"), read("event.json"));
    let mut renamed: serde_json::Value = serde_json::from_slice(&event).expect("JSON");
    let title = renamed["data"][0]["title"]
        .as_str()
        .expect("a title")
        .to_string();
    // Same length as the original title, other bytes: only the digest tells them apart.
    let other: String = title.chars().rev().collect();
    renamed["data"][0]["title"] = other.clone().into();
    let renamed = serde_json::to_vec(&renamed).expect("JSON");
    let event =
        serde_json::to_vec(&serde_json::from_slice::<serde_json::Value>(&event).expect("JSON"))
            .expect("JSON");
    assert_eq!(renamed.len(), event.len());

    // The manifest first, naming a file not uploaded yet: not served.
    let manifest = manifest_of(&[("bundle.toml", toml.clone()), ("event.json", event.clone())]);
    put(&store, "events/demo/_manifest.json", manifest).await;
    put(&store, "events/demo/bundle.toml", toml.clone()).await;
    let served = serve("s3://manifested/events", "200ms", &moto);
    wait_for("the incomplete bundle reported", &served, async || {
        served.stderr().contains("missing event.json")
    })
    .await;
    assert_eq!(get_event(&served.base, "demo-token").await.0, 401);
    assert!(
        served
            .stderr()
            .contains("(missing event.json); not served until it can be"),
        "{}",
        served.stderr()
    );
    // /status says which bundle waits, since when and why (it used to be in the log alone).
    let trouble = served.status().await["storage_bundles"]["demo"].clone();
    assert_eq!(trouble["state"], "incomplete", "{trouble}");
    assert_eq!(
        trouble["reason"], "not complete by its manifest: missing event.json",
        "{trouble}"
    );
    let since = trouble["since"].clone();
    assert!(since.is_string(), "{trouble}");

    // The file with the right size and other bytes: refused by its digest.
    put(&store, "events/demo/event.json", renamed.clone()).await;
    wait_for("the digest mismatch reported", &served, async || {
        served
            .stderr()
            .contains("event.json has other bytes than the manifest's")
    })
    .await;
    assert_eq!(get_event(&served.base, "demo-token").await.0, 401);
    // Still incomplete: the latest reason, since the first time.
    wait_for("/status giving the new reason", &served, async || {
        served.status().await["storage_bundles"]["demo"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("has other bytes than the manifest's"))
    })
    .await;
    assert_eq!(
        served.status().await["storage_bundles"]["demo"]["since"],
        since
    );

    // The manifest's bytes: served.
    put(&store, "events/demo/event.json", event).await;
    wait_for("the complete bundle served", &served, async || {
        get_event(&served.base, "demo-token").await.0 == 200
    })
    .await;
    assert_eq!(
        get_event(&served.base, "demo-token").await.1["data"][0]["title"],
        title.as_str()
    );
    wait_for("/status clear of the bundle", &served, async || {
        served.status().await.get("storage_bundles").is_none()
    })
    .await;

    // A new version: its file first (old manifest: not taken), then its manifest (taken).
    put(&store, "events/demo/event.json", renamed.clone()).await;
    wait_for(
        "the file ahead of its manifest reported",
        &served,
        async || {
            served
                .stderr()
                .matches("has other bytes than the manifest's")
                .count()
                >= 2
        },
    )
    .await;
    assert_eq!(
        get_event(&served.base, "demo-token").await.1["data"][0]["title"],
        title.as_str()
    );
    put(
        &store,
        "events/demo/_manifest.json",
        manifest_of(&[("bundle.toml", toml), ("event.json", renamed)]),
    )
    .await;
    wait_for("the new version served", &served, async || {
        get_event(&served.base, "demo-token").await.1["data"][0]["title"] == other.as_str()
    })
    .await;
}

#[tokio::test]
async fn pull_into_s3_publishes_a_bundle_that_serve_reads_back_byte_for_byte() {
    let Some(moto) = moto().await else { return };
    let store = moto.bucket("published").await;
    // An earlier version of the bundle, with a file the new one has not: deleted by the publish.
    put(&store, "events/copy/bundle.toml", "tokens = [\"old\"]\n").await;
    put(&store, "events/copy/stale.json", "{}").await;
    let source = crate::helpers::spawn_app(&demo_data()).await;
    let env = moto.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let into = Path::new("s3://published/events/copy");
    let (code, said) = pull_binary_with(&source.base, "demo-token", into, &[], &env).await;
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains("files to s3://published/events/copy, its manifest first"),
        "{said}"
    );

    let manifest = store
        .get(&StorePath::from("events/copy/_manifest.json"))
        .await
        .expect("the manifest")
        .bytes()
        .await
        .expect("its bytes");
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).expect("JSON");
    let names: Vec<&String> = manifest["files"]
        .as_object()
        .expect("files")
        .keys()
        .collect();
    assert!(
        names.iter().any(|n| *n == "bundle.toml") && names.iter().any(|n| *n == "payments.json"),
        "{names:?}"
    );
    assert!(
        store
            .head(&StorePath::from("events/copy/stale.json"))
            .await
            .is_err(),
        "the stale object is gone"
    );

    let served = serve("s3://published/events", "200ms", &moto);
    assert_served_as(
        &source.base,
        &served,
        &["/api/v1/event", "/api/v1/payments", "/api/v1/attendees"],
    )
    .await;
}

/// `--into s3://bucket/prefix` with the bundle's name forgotten: publishing there would delete
/// every bundle under the prefix. Refused before anything is pulled, as a local folder of
/// bundles is; nothing in storage changes.
#[tokio::test]
async fn pull_into_a_prefix_of_bundles_is_refused_and_deletes_nothing() {
    let Some(moto) = moto().await else { return };
    let store = moto.bucket("shared").await;
    put_demo(&store, "events").await;
    let before: Vec<String> = listed(&store).await;
    let env = moto.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let into = Path::new("s3://shared/events");
    // A source that cannot answer: a pull would fail (exit 1) where the refusal comes first.
    let nowhere = "http://127.0.0.1:9";
    let (code, said) = pull_binary_with(nowhere, "demo-token", into, &[], &env).await;
    assert_eq!(code, 2, "{said}");
    assert!(
        said.contains("s3://shared/events holds 1 bundle (demo)")
            && said.contains("--into s3://shared/events/NAME"),
        "{said}"
    );
    assert_eq!(listed(&store).await, before, "storage changed");
}

/// Storage that cannot be asked (here: no such bucket) fails the pull (exit 1: another try may
/// do), where a prefix of other bundles is unusable as given (exit 2).
#[tokio::test]
async fn pull_into_storage_that_cannot_be_listed_fails_and_names_it() {
    let Some(moto) = moto().await else { return };
    let env = moto.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let into = Path::new("s3://no-such-bucket/events/demo");
    let (code, said) = pull_binary_with("http://127.0.0.1:9", "demo-token", into, &[], &env).await;
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("eventbox pull: s3://no-such-bucket/events: cannot list events/demo"),
        "{said}"
    );
}

/// Every key in `store`, sorted.
async fn listed(store: &AmazonS3) -> Vec<String> {
    use futures_util::TryStreamExt;
    let mut keys: Vec<String> = store
        .list(None)
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .expect("listed");
    keys.sort();
    keys
}

/// WsgiDAV (from PyPI, as moto) serving `root` on a free port, with `extra` arguments.
async fn wsgidav(root: &str, extra: &[&str]) -> Option<Server> {
    let mut args = vec![
        "-c",
        "from wsgidav.server.server_cli import run; run()",
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        "--root",
        root,
    ];
    args.extend_from_slice(extra);
    start_server("WsgiDAV", &args, &[]).await
}

#[tokio::test]
async fn a_webdav_server_is_a_store_too_published_into_and_served_from() {
    let root = tempfile::tempdir().expect("tempdir");
    let folder = root.path().to_str().expect("UTF-8");
    let Some(dav) = wsgidav(folder, &["--auth", "anonymous"]).await else {
        return;
    };
    let source = crate::helpers::spawn_app(&demo_data()).await;
    let into = format!("{}/events/copy", dav.url);
    let (code, said) =
        pull_binary_with(&source.base, "demo-token", Path::new(&into), &[], &[]).await;
    assert_eq!(code, 0, "{said}");
    assert!(
        root.path().join("events/copy/_manifest.json").is_file(),
        "{said}"
    );
    assert!(
        root.path().join("events/copy/payment_details").is_dir(),
        "{said}"
    );

    let served = start_binary(
        &[
            "--addr",
            "127.0.0.1:0",
            "--data",
            &format!("{}/events", dav.url),
            "--poll-interval",
            "200ms",
        ],
        &[],
    );
    assert_served_as(
        &source.base,
        &served,
        &[
            "/api/v1/event",
            "/api/v1/payments",
            "/api/v1/payments/details?reference=PG2026000104",
        ],
    )
    .await;
}

/// A WebDAV server that asks for a password: `user:password@` in the URL (percent-encoded)
/// is sent as Basic credentials, and never printed: not by a failed listing (object_store's
/// errors print the URL of the request), not in `/readyz`.
#[tokio::test]
async fn a_webdav_password_in_the_url_is_sent_and_never_shown() {
    let root = tempfile::tempdir().expect("tempdir");
    let config = root.path().join("dav.yaml");
    std::fs::write(
        &config,
        "simple_dc:\n  user_mapping:\n    \"*\":\n      \"me\":\n        password: \"p@ss-w0rd\"\n\
         http_authenticator:\n  accept_basic: true\n  accept_digest: false\n  default_to_digest: false\n",
    )
    .expect("config");
    let folder = root.path().join("dav");
    std::fs::create_dir(&folder).expect("mkdir");
    let config = ["--config", config.to_str().expect("UTF-8")];
    let Some(dav) = wsgidav(folder.to_str().expect("UTF-8"), &config).await else {
        return;
    };
    let host = dav.url.trim_start_matches("http://");
    let source = crate::helpers::spawn_app(&demo_data()).await;
    let into = format!("http://me:p%40ss-w0rd@{host}/events/copy");
    let (code, said) =
        pull_binary_with(&source.base, "demo-token", Path::new(&into), &[], &[]).await;
    assert_eq!(code, 0, "{said}");
    assert!(!said.contains("w0rd"), "{said}");
    assert!(
        folder.join("events/copy/_manifest.json").is_file(),
        "{said}"
    );

    let served = start_binary(
        &[
            "--addr",
            "127.0.0.1:0",
            "--data",
            &format!("http://me:p%40ss-w0rd@{host}/events"),
            "--poll-interval",
            "200ms",
        ],
        &[],
    );
    assert_served_as(&source.base, &served, &["/api/v1/event"]).await;
    assert!(!served.stderr().contains("w0rd"), "{}", served.stderr());

    // A wrong password: refused by the server, said so, and not shown.
    let refused = start_binary(
        &[
            "--addr",
            "127.0.0.1:0",
            "--data",
            &format!("http://me:wr0ng-secret@{host}/events"),
            "--poll-interval",
            "200ms",
        ],
        &[],
    );
    let ready = client()
        .get(format!("{}/readyz", refused.base))
        .send()
        .await
        .expect("an answer");
    assert_eq!(ready.status().as_u16(), 503);
    let said = ready.text().await.expect("a body") + &refused.stderr();
    assert!(
        said.contains("401") || said.contains("Unauthorized"),
        "{said}"
    );
    assert!(!said.contains("wr0ng"), "{said}");
}

/// Once `served` serves the demo token, each of `paths` answers it with the status and the
/// bytes `source` answers.
async fn assert_served_as(source: &str, served: &Served, paths: &[&str]) {
    assert_eq!(
        get_event(&served.base, "demo-token").await.0,
        200,
        "{}",
        served.stderr()
    );
    let get = async |base: &str, path: &str| {
        let res = client()
            .get(format!("{base}{path}"))
            .header("Authorization-Token", "demo-token")
            .send()
            .await
            .expect("GET");
        (res.status().as_u16(), res.bytes().await.expect("body"))
    };
    for path in paths {
        let want = get(source, path).await;
        assert_eq!(want.0, 200, "{path}");
        assert_eq!(want, get(&served.base, path).await, "{path}");
    }
}

/// A stop during the first sync does not wait for it: a store that never answers holds the
/// sync for its whole `--store-timeout` (a minute here), and the process exits 0 at once,
/// saying it stopped before the sync was done.
#[tokio::test]
async fn a_stop_during_the_first_sync_does_not_wait_for_it() {
    let url = hanging_store();
    let mut served = start_binary(
        &[
            "--addr",
            "127.0.0.1:0",
            "--data",
            "s3://hanging/events",
            "--store-timeout",
            "60s",
        ],
        &[
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ENDPOINT_URL", &url),
            ("AWS_ALLOW_HTTP", "true"),
        ],
    );

    served.signal("TERM");

    // Bounded at 15 s: the sync alone would hold it for a minute.
    assert_eq!(served.wait_exit(), Some(0));
    let log = served.stderr();
    assert!(
        log.contains("stopped before the first sync was done"),
        "{log}"
    );
}

/// The URL of a store that answers every request 503 (its client retries those).
fn failing_store() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0; 65536];
                while stream.read(&mut buf).is_ok_and(|n| n > 0) {
                    let answer = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";
                    if stream.write_all(answer.as_bytes()).is_err() {
                        break;
                    }
                }
            });
        }
    });
    url
}

/// The URL of a store that accepts connections and never answers.
fn hanging_store() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    url
}
