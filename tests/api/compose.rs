//! Several replicas, one truth: the Compose deployment users run (deploy/compose/: three eventbox
//! replicas reading one object-storage prefix behind HAProxy, on a private network), with
//! tests/compose/storage.yaml adding moto as the storage. Shown here:
//! - a bundle changed in storage is served by every replica within two poll periods;
//! - a replica stopped, killed or cut off from the network under load costs no request through
//!   the balancer (it retries on another replica), and the other replicas do not notice;
//! - a replica restarted while storage is unreachable starts, answers not-ready naming storage,
//!   and becomes ready when storage is back, while the others keep serving.
//!
//! Needs Docker and Compose (`docker compose`, or Debian's `docker-compose`); skipped, saying
//! why, without them. HAProxy and moto come from the testbed image, a debootstrap root file
//! system built once per machine by scripts/testbed-image.sh (no base image can be pulled).

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::container::{docker, docker_ok, image, say};
use crate::helpers::{client_builder, demo_data, DEMO_TOKEN};
use crate::mirror::{moto_bucket, put, put_demo};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The replicas' `--poll-interval`.
const POLL: Duration = Duration::from_secs(2);
const REPLICAS: [&str; 3] = ["replica-1", "replica-2", "replica-3"];
const ADMIN_TOKEN: &str = "compose-admin-token-81c2";
/// How long anything here may take before the test fails (a start, a health check turning).
const PATIENCE: Duration = Duration::from_secs(60);

/// One Compose project, taken down (with its volumes and network) when dropped.
struct Compose {
    program: Vec<String>,
    project: String,
    env: Vec<(&'static str, String)>,
}

impl Compose {
    /// `docker compose` or `docker-compose`, whichever answers; `None` (said) when neither.
    fn program() -> Option<Vec<String>> {
        let candidates: [&[&str]; 2] = [&["docker", "compose"], &["docker-compose"]];
        for candidate in candidates {
            let answers = Command::new(candidate[0])
                .args(&candidate[1..])
                .arg("version")
                .output()
                .is_ok_and(|o| o.status.success());
            if answers {
                return Some(candidate.iter().map(|s| s.to_string()).collect());
            }
        }
        say("compose test skipped: neither `docker compose` nor `docker-compose` runs here");
        None
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.program[0]);
        command
            .args(&self.program[1..])
            .args(["-p", &self.project])
            .args(["-f", "deploy/compose/compose.yaml"])
            .args(["-f", "tests/compose/storage.yaml"])
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(ROOT);
        command
    }

    /// Runs compose with `args`, which must succeed; its stdout, trimmed.
    fn run(&self, args: &[&str]) -> String {
        let out = self
            .command(args)
            .output()
            .unwrap_or_else(|e| panic!("compose {args:?}: {e}"));
        assert!(
            out.status.success(),
            "compose {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The container of `service`.
    fn container(&self, service: &str) -> String {
        let id = self.run(&["ps", "-q", service]);
        assert!(!id.is_empty(), "no container for {service}");
        id
    }

    /// `http://127.0.0.1:PORT` for `service`'s published `port` (it changes with a restart).
    fn base(&self, service: &str, port: u16) -> String {
        let published = docker_ok(&["port", &self.container(service), &format!("{port}/tcp")]);
        format!("http://{}", published.lines().next().unwrap_or_default())
    }

    /// The private network the services share, as Docker names it (after the project, in a
    /// way that differs between Compose versions): the one `service` is on.
    fn network(&self, service: &str) -> String {
        docker_ok(&[
            "inspect",
            "--format",
            "{{range $name, $_ := .NetworkSettings.Networks}}{{$name}}{{end}}",
            &self.container(service),
        ])
    }
}

impl Drop for Compose {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Ok(out) = self
                .command(&["logs", "--no-color", "--tail", "40"])
                .output()
            {
                say(&String::from_utf8_lossy(&out.stdout));
            }
        }
        let _ = self
            .command(&["down", "--volumes", "--remove-orphans", "-t", "1"])
            .output();
    }
}

/// The testbed image's tag (scripts/testbed-image.sh builds it when missing).
fn testbed() -> String {
    let out = Command::new("bash")
        .arg("scripts/testbed-image.sh")
        .current_dir(ROOT)
        .output()
        .expect("run scripts/testbed-image.sh");
    assert!(
        out.status.success(),
        "scripts/testbed-image.sh failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout.lines().last().unwrap_or_default().trim().to_string()
}

fn http() -> reqwest::Client {
    client_builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("a client")
}

/// GET `base/api/v1/event` with the demo token: the event's title, or why not.
async fn title(client: &reqwest::Client, base: &str) -> Result<String, String> {
    let res = client
        .get(format!("{base}/api/v1/event"))
        .header("Authorization-Token", DEMO_TOKEN)
        .send()
        .await
        .map_err(|e| format!("GET {base}/api/v1/event: {e}"))?;
    let status = res.status();
    let body = res.text().await.map_err(|e| format!("body: {e}"))?;
    if status != 200 {
        return Err(format!("{status}: {body}"));
    }
    let json: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("{e}"))?;
    json["data"][0]["title"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("no title in {body}"))
}

/// `/readyz`: (status, body), or `None` when nothing answers.
async fn readyz(client: &reqwest::Client, base: &str) -> Option<(u16, String)> {
    let res = client.get(format!("{base}/readyz")).send().await.ok()?;
    let status = res.status().as_u16();
    Some((status, res.text().await.unwrap_or_default()))
}

/// Polls `check` until it holds; fails naming `what` after [`PATIENCE`]. Returns the time taken.
async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < PATIENCE, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

/// The balancer's view of one replica, from HAProxy's CSV statistics: (status, retries,
/// redispatches), e.g. ("UP", 3, 1).
async fn balancer_view(client: &reqwest::Client, stats: &str, replica: &str) -> (String, u64, u64) {
    let csv = client
        .get(format!("{stats}/stats;csv"))
        .send()
        .await
        .expect("HAProxy's statistics")
        .text()
        .await
        .expect("their body");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let column = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let (status, retries, redispatches) = (column("status"), column("wretr"), column("wredis"));
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        if fields.first() == Some(&"eventbox") && fields.get(1) == Some(&replica) {
            let number = |i: usize| fields[i].parse().unwrap_or(0);
            return (
                fields[status].to_string(),
                number(retries),
                number(redispatches),
            );
        }
    }
    panic!("{replica} is not in HAProxy's statistics:\n{csv}");
}

/// Requests sent without pause by a few tasks until stopped: how many succeeded, and every
/// failure described.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failures: Arc<Mutex<Vec<String>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(bases: &[String], tasks: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let tasks = (0..tasks)
            .map(|i| {
                let (stop, ok, failures) = (stop.clone(), ok.clone(), failures.clone());
                let base = bases[i % bases.len()].clone();
                tokio::spawn(async move {
                    let client = http();
                    while !stop.load(Ordering::Relaxed) {
                        match title(&client, &base).await {
                            Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                            Err(e) => {
                                failures.lock().expect("not poisoned").push(e);
                                0
                            }
                        };
                    }
                })
            })
            .collect();
        Load {
            stop,
            ok,
            failures,
            tasks,
        }
    }

    fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    /// Waits for `n` more successful requests than now.
    async fn until_more(&self, n: u64, what: &str) {
        let target = self.ok() + n;
        until(what, async || self.ok() >= target).await;
    }

    /// Stops the tasks: (successes, failures).
    async fn finish(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.expect("a load task");
        }
        let failures = std::mem::take(&mut *self.failures.lock().expect("not poisoned"));
        (self.ok.load(Ordering::Relaxed), failures)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_behind_haproxy_converge_lose_no_request_and_wait_for_storage() {
    let Some(image) = image() else { return };
    let Some(program) = Compose::program() else {
        return;
    };
    let testbed = testbed();
    let compose = Compose {
        program,
        project: format!("eventbox-compose-{}", std::process::id()),
        env: vec![
            ("EVENTBOX_IMAGE", image),
            ("BALANCER_IMAGE", testbed.clone()),
            ("TESTBED_IMAGE", testbed),
            ("EVENTBOX_DATA", "s3://bundles/events".into()),
            ("EVENTBOX_POLL_INTERVAL", format!("{}s", POLL.as_secs())),
            // `127.0.0.1::8080`: a port Docker picks on loopback.
            ("EVENTBOX_PUBLISH", "127.0.0.1:".into()),
            ("EVENTBOX_ADMIN_TOKEN", ADMIN_TOKEN.into()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ENDPOINT_URL", "http://storage:5000".into()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ],
    };
    let client = http();

    // Storage first, with the demo bundle in it.
    compose.run(&["up", "-d", "storage"]);
    let storage = compose.base("storage", 5000);
    until("moto answering", async || {
        client.get(&storage).send().await.is_ok()
    })
    .await;
    let bucket = moto_bucket(&storage, "bundles").await;
    put_demo(&bucket, "events").await;

    // Then the replicas and the balancer: every one ready, the balancer serving.
    let started = Instant::now();
    compose.run(&["up", "-d"]);
    let mut bases: Vec<String> = REPLICAS.iter().map(|r| compose.base(r, 8080)).collect();
    let balancer = compose.base("balancer", 8080);
    let stats = compose.base("balancer", 8404);
    for base in &bases {
        until(&format!("{base} ready"), async || {
            readyz(&client, base).await.is_some_and(|(s, _)| s == 200)
        })
        .await;
    }
    // HAProxy may still be starting (its port mapped, nothing listening yet) or checking the
    // replicas: it serves once it has found one up.
    let mut through = Err(String::new());
    until("the balancer serving", async || {
        through = title(&client, &balancer).await;
        through.is_ok()
    })
    .await;
    let title_before = through.expect("served through HAProxy");
    say(&format!(
        "compose: three replicas ready and the balancer serving {:.1?} after `up`",
        started.elapsed()
    ));

    // A change in storage: every replica serves it within two poll periods.
    let event_file = demo_data().join("demo/event.json");
    let mut event: serde_json::Value =
        serde_json::from_slice(&std::fs::read(event_file).expect("read")).expect("JSON");
    event["data"][0]["title"] = "Changed in storage for three replicas".into();
    let changed = Instant::now();
    put(&bucket, "events/demo/event.json", event.to_string()).await;
    let mut converged = Vec::new();
    for base in &bases {
        until(&format!("{base} serving the change"), async || {
            title(&client, base)
                .await
                .is_ok_and(|t| t == "Changed in storage for three replicas")
        })
        .await;
        converged.push(changed.elapsed());
    }
    let slowest = converged.iter().max().copied().unwrap_or_default();
    say(&format!(
        "compose: replicas served the change after {converged:.1?} (poll {POLL:?})"
    ));
    assert!(
        slowest <= 2 * POLL,
        "the slowest replica took {slowest:?}, more than two polls of {POLL:?}"
    );
    assert_ne!(title_before, "Changed in storage for three replicas");

    // A bundle that simulates errors (a staging setup testing a client's retries): its 502s
    // reach the client through the balancer, which does not retry them on another replica (it
    // retries 503, which a replica not ready yet answers: below).
    put(
        &bucket,
        "events/flaky/bundle.toml",
        "tokens = [\"flaky-token\"]\n[simulate]\nerror_rate = 1\nerror_status = 502\n",
    )
    .await;
    put(
        &bucket,
        "events/flaky/event.json",
        std::fs::read(demo_data().join("demo/event.json")).expect("read"),
    )
    .await;
    let flaky = async |base: &str| {
        let res = client
            .get(format!("{base}/api/v1/event"))
            .header("Authorization-Token", "flaky-token")
            .send()
            .await
            .ok()?;
        Some((res.status().as_u16(), res.text().await.unwrap_or_default()))
    };
    for base in &bases {
        until(&format!("{base} serving the flaky bundle"), async || {
            flaky(base).await.is_some_and(|(s, _)| s == 502)
        })
        .await;
    }
    let mut retries_before = 0;
    for replica in REPLICAS {
        retries_before += balancer_view(&client, &stats, replica).await.1;
    }
    for _ in 0..5 {
        let (status, body) = flaky(&balancer).await.expect("an answer");
        assert_eq!(status, 502, "{body}");
        assert!(body.contains("simulated_error"), "{body}");
    }
    let mut retries_after = 0;
    for replica in REPLICAS {
        retries_after += balancer_view(&client, &stats, replica).await.1;
    }
    assert_eq!(retries_after, retries_before, "simulated errors retried");

    // A replica lost under load: stopped, killed, cut off from the network. The balancer
    // marks it down and retries what it had on another replica: no request fails; requests
    // straight to the other two never fail either.
    let network = compose.network("storage");
    let disruptions: [(&str, &str); 3] = [
        ("docker stop", REPLICAS[0]),
        ("docker kill", REPLICAS[1]),
        ("docker network disconnect", REPLICAS[2]),
    ];
    for (index, (how, replica)) in disruptions.into_iter().enumerate() {
        let others: Vec<String> = (0..3)
            .filter(|i| *i != index)
            .map(|i| bases[i].clone())
            .collect();
        let through_balancer = Load::start(std::slice::from_ref(&balancer), 4);
        let direct = Load::start(&others, 2);
        through_balancer
            .until_more(200, "requests through the balancer")
            .await;
        let (_, retries_before, redispatches_before) =
            balancer_view(&client, &stats, replica).await;
        let container = compose.container(replica);
        match how {
            "docker stop" => drop(docker_ok(&["stop", "-t", "5", &container])),
            "docker kill" => drop(docker_ok(&["kill", &container])),
            _ => drop(docker_ok(&["network", "disconnect", &network, &container])),
        }
        let noticed = until(&format!("HAProxy marking {replica} down"), async || {
            balancer_view(&client, &stats, replica)
                .await
                .0
                .starts_with("DOWN")
        })
        .await;
        through_balancer
            .until_more(200, "requests while a replica is down")
            .await;
        match how {
            "docker network disconnect" => drop(docker_ok(&[
                "network", "connect", "--alias", replica, &network, &container,
            ])),
            _ => drop(docker_ok(&["start", &container])),
        }
        bases[index] = compose.base(replica, 8080);
        until(&format!("HAProxy marking {replica} up again"), async || {
            balancer_view(&client, &stats, replica).await.0 == "UP"
        })
        .await;
        through_balancer
            .until_more(200, "requests after the replica came back")
            .await;
        let (_, retries, redispatches) = balancer_view(&client, &stats, replica).await;
        let (served, failed) = through_balancer.finish().await;
        let (direct_served, direct_failed) = direct.finish().await;
        say(&format!(
            "compose: {how} {replica}: {served} requests through the balancer, {} failed \
             (HAProxy: down after {noticed:.1?}, {} retries, {} redispatches); \
             {direct_served} straight to the others, {} failed",
            failed.len(),
            retries - retries_before,
            redispatches - redispatches_before,
            direct_failed.len()
        ));
        assert!(
            failed.is_empty(),
            "{how}: failed through the balancer: {failed:?}"
        );
        assert!(
            direct_failed.is_empty(),
            "{how}: the other replicas noticed: {direct_failed:?}"
        );
    }

    // A replica restarted while storage is unreachable: it starts, is not ready and says why;
    // the balancer keeps serving from the others; storage back, it becomes ready.
    let storage_container = compose.container("storage");
    docker_ok(&["network", "disconnect", &network, &storage_container]);
    let restarted = compose.container(REPLICAS[0]);
    docker_ok(&["restart", "-t", "5", &restarted]);
    bases[0] = compose.base(REPLICAS[0], 8080);
    let base = bases[0].clone();
    let mut said = String::new();
    until(
        "the restarted replica answering not-ready",
        async || match readyz(&client, &base).await {
            Some((503, body)) => {
                said = body;
                true
            }
            _ => false,
        },
    )
    .await;
    assert!(
        said.contains("not_ready") && said.contains("Object storage"),
        "{said}"
    );
    let still = title(&client, &balancer).await;
    assert_eq!(
        still.as_deref(),
        Ok("Changed in storage for three replicas"),
        "the others keep serving through the balancer"
    );
    let back = Instant::now();
    let output = docker(&[
        "network",
        "connect",
        "--alias",
        "storage",
        &network,
        &storage_container,
    ]);
    assert!(output.status.success(), "{output:?}");
    until(
        "the restarted replica ready once storage is back",
        async || readyz(&client, &base).await.is_some_and(|(s, _)| s == 200),
    )
    .await;
    assert_eq!(
        title(&client, &base).await.as_deref(),
        Ok("Changed in storage for three replicas")
    );
    say(&format!(
        "compose: a replica restarted without storage said {said}; ready {:.1?} after storage came back",
        back.elapsed()
    ));
}
