//! Entry points for the coverage-guided fuzzers (`fuzz/`, `scripts/fuzz.sh`) and for the test
//! that replays their corpora and regressions. Not an API: compiled with the `fuzzing` feature
//! (and in this crate's own tests), hidden from the documentation.
//!
//! Each function takes whatever bytes a fuzzer draws and drives one real path of eventbox with
//! them: a bundle file through the loader and `prepare`, raw bytes through the HTTP server's
//! connection and request pipeline, a write body through its endpoint, an upstream answer
//! through `pull`'s parsing. They panic only where an invariant breaks (a fuzzer finding).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::api::{self, Feed};
use crate::app::App;
use crate::http::Service;

/// What a loader target may replace: every file an endpoint is fed from, `bundle.toml`, and a
/// payment's detail file.
fn loadable() -> Vec<String> {
    let mut names: Vec<String> = api::on_disk(api::OnDisk::File)
        .map(str::to_string)
        .collect();
    names.push("bundle".to_string());
    names.push("payment_details/PG2026000104".to_string());
    names
}

/// A folder for the loader targets, made once per process.
fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("eventbox-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch folder for the fuzzer");
        dir
    })
}

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data")
        .join("demo")
}

/// Loads a bundle whose file `selector` picks (see [`loadable`]) holds `bytes`, in JSON or
/// TOML, the others taken from the demo bundle (its `bundle.toml` and `event.json`, the files
/// a bundle needs); prepares the answers when it loads.
pub fn load(toml: bool, selector: u8, bytes: &[u8]) {
    let names = loadable();
    let name = &names[usize::from(selector) % names.len()];
    let dir = scratch().join("bundle");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("payment_details")).expect("the bundle folder");
    for needed in ["bundle.toml", "event.json"] {
        // libFuzzer's timer signal can interrupt the copy (EINTR, which `fs::copy` passes on).
        let copied = loop {
            match std::fs::copy(demo().join(needed), dir.join(needed)) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        copied.expect("a demo file");
    }
    if name == "event" || name == "bundle" {
        let _ = std::fs::remove_file(dir.join(format!("{name}.json")));
        let _ = std::fs::remove_file(dir.join(format!("{name}.toml")));
    }
    let format = if toml || name == "bundle" {
        "toml"
    } else {
        "json"
    };
    std::fs::write(dir.join(format!("{name}.{format}")), bytes).expect("the fuzzed file");
    if name == "payments" && format == "json" {
        crate::model::payments::split_agrees(bytes);
    }

    let report =
        crate::load::load_bundle_capped(&dir, "bundle", crate::read::DEFAULT_MAX_FILE_BYTES);
    match &report.bundle {
        Some(bundle) => {
            let prepared = crate::prepare::Prepared::new(bundle, false);
            assert!(prepared.is_ok(), "a loaded bundle prepares");
        }
        None => assert!(
            report
                .problems
                .iter()
                .any(crate::problem::Problem::is_error),
            "a bundle that does not load says why"
        ),
    }
}

/// The demo bundle's app and a runtime to serve it on, made once per process.
fn served() -> &'static (tokio::runtime::Runtime, App, Service) {
    static SERVED: OnceLock<(tokio::runtime::Runtime, App, Service)> = OnceLock::new();
    SERVED.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let app = App::new(&demo().join(".."));
        app.load().expect("the demo bundle loads");
        let service = app.service();
        (runtime, app, service)
    })
}

/// Serves `bytes` as one connection's input (any number of HTTP/1.1 requests, or an HTTP/2
/// preface and frames) and returns what was answered. A 5xx other than the documented 501,
/// 502 and 503 is a finding; so is an answer that takes more than ten seconds.
pub fn request(bytes: &[u8]) -> Vec<u8> {
    let (runtime, app, service) = served();
    let answered = runtime.block_on(async {
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            crate::http::server::answer_bytes(service, bytes),
        )
        .await
    });
    // Writes made by the input are forgotten: the next input starts from the same state.
    drop(app.writes.reset("demo"));
    let answered = answered
        .expect("the connection is answered within ten seconds")
        .expect("the in-memory connection works");
    for status in statuses(&answered) {
        assert!(
            !(500..600).contains(&status) || [501, 502, 503].contains(&status),
            "status {status} for {:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    answered
}

/// The status of each HTTP/1.1 answer in `bytes`.
fn statuses(bytes: &[u8]) -> Vec<u16> {
    let text = String::from_utf8_lossy(bytes);
    text.match_indices("HTTP/1.1 ")
        .filter_map(|(at, head)| text.get(at + head.len()..at + head.len() + 3))
        .filter_map(|code| code.parse().ok())
        .collect()
}

/// Sends `body` to the write endpoint `selector` picks, as JSON or as a form (bit 7), with the
/// demo bundle's token.
pub fn write(selector: u8, body: &[u8]) -> Vec<u8> {
    let writes: Vec<&api::Endpoint> = api::API
        .iter()
        .filter(|e| matches!(e.feed, Feed::Write(_)))
        .collect();
    let endpoint = writes[usize::from(selector & 0x7f) % writes.len()];
    let content_type = if selector & 0x80 == 0 {
        "application/json"
    } else {
        "application/x-www-form-urlencoded"
    };
    let mut raw = format!(
        "POST {} HTTP/1.1\r\nHost: fuzz\r\nAuthorization-Token: demo-token\r\n\
         Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        endpoint.path,
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(body);
    request(&raw)
}

/// Runs `pull`'s parsing of an upstream answer over `bytes`: the payment references, each
/// endpoint's record count, and `--pretty`'s re-indentation, which must give back the same
/// JSON value when the input is JSON.
#[cfg(feature = "pull")]
pub fn upstream(bytes: &[u8]) {
    crate::pull::fuzz_upstream(bytes);
}

/// The regression test's view of the targets: which function each corpus folder feeds.
#[cfg(test)]
mod tests {
    use std::path::Path;

    /// A target's corpus and regression inputs, as committed.
    fn inputs(target: &str) -> Vec<(std::path::PathBuf, Vec<u8>)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
        let mut out = Vec::new();
        for folder in ["corpus", "regressions"] {
            let Ok(entries) = std::fs::read_dir(root.join(folder).join(target)) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if let Ok(bytes) = std::fs::read(&path) {
                    out.push((path, bytes));
                }
            }
        }
        out.sort();
        out
    }

    fn split(bytes: &[u8]) -> (u8, &[u8]) {
        bytes
            .split_first()
            .map_or((0, &[][..]), |(s, rest)| (*s, rest))
    }

    #[test]
    fn every_committed_fuzz_input_runs_without_a_finding() {
        let mut ran = 0;
        for (target, run) in [
            (
                "load_json",
                &(|b: &[u8]| {
                    let (s, rest) = split(b);
                    super::load(false, s, rest);
                }) as &dyn Fn(&[u8]),
            ),
            ("load_toml", &|b: &[u8]| {
                let (s, rest) = split(b);
                super::load(true, s, rest);
            }),
            ("request", &|b: &[u8]| drop(super::request(b))),
            ("write", &|b: &[u8]| {
                let (s, rest) = split(b);
                drop(super::write(s, rest));
            }),
            #[cfg(feature = "pull")]
            ("upstream", &|b: &[u8]| super::upstream(b)),
        ] {
            let inputs = inputs(target);
            assert!(!inputs.is_empty(), "fuzz/corpus/{target} has inputs");
            for (path, bytes) in inputs {
                let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&bytes)));
                assert!(caught.is_ok(), "{} fails", path.display());
                ran += 1;
            }
        }
        assert!(ran > 0);
    }

    #[test]
    fn the_demo_requests_are_answered_and_statuses_are_read() {
        let answered = super::request(
            b"GET /api/v1/event HTTP/1.1\r\nHost: x\r\nAuthorization-Token: demo-token\r\n\r\n\
              GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(super::statuses(&answered), [200, 404]);
        let written = super::write(0, br#"{"name": "Ana", "email": "ana@x.org"}"#);
        assert_eq!(
            super::statuses(&written).len(),
            1,
            "{}",
            String::from_utf8_lossy(&written)
        );
    }
}
