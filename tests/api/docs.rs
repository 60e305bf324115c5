//! The documentation stays true: every `sh` block of README.md and docs/*.md runs against a real
//! eventbox, and every path ARCHITECTURE.md names exists.
//!
//! A file's `sh` blocks run in order as one bash script (`set -euo pipefail`), as a reader
//! following the page would type them: in a fresh folder holding a copy of `data/`, with the
//! built `eventbox` first on `PATH`, and an `eventbox serve` of that copy already running and
//! ready; `http://127.0.0.1:8080` in the text is replaced by its address. Two kinds of line are
//! not run as written: `cargo ...` (the README's two commands: running `cargo test` inside
//! `cargo test` would recurse), and `eventbox serve ...` (or `eventbox` with options only),
//! which is started, must print its address, and is then stopped with SIGTERM and must exit 0.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::helpers::copy_dir;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// README.md and every docs/*.md, in name order.
fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![Path::new(ROOT).join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The fenced blocks of `lang` in a Markdown text, with the line each starts on.
fn blocks(text: &str, lang: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match (&mut current, fence) {
            (None, true) if line.trim_start().trim_start_matches('`').trim() == lang => {
                current = Some((i + 1, String::new()));
            }
            (None, true) => current = Some((0, String::new())), // another language: skipped
            (Some(_), true) => {
                if let Some((start, body)) = current.take().filter(|(start, _)| *start > 0) {
                    out.push((start, body));
                }
            }
            (Some((_, body)), false) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, false) => {}
        }
    }
    out
}

/// The bash prologue: `eventbox serve` lines are started and stopped, not left running.
const PROLOGUE: &str = r#"set -euo pipefail
serve_check() {
    local log; log=$(mktemp)
    command eventbox "$@" >"$log" 2>&1 &
    local pid=$!
    for _ in $(seq 200); do
        grep -q 'listening on' "$log" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    if ! grep -q 'listening on' "$log"; then
        echo "eventbox $* did not start:" >&2; cat "$log" >&2; kill "$pid" 2>/dev/null; return 1
    fi
    kill -TERM "$pid"; wait "$pid"
}
eventbox() {
    case "${1-}" in
        serve|"") serve_check "$@" ;;
        -h|--help|-V|--version) command eventbox "$@" ;;
        -*) serve_check "$@" ;;
        *) command eventbox "$@" ;;
    esac
}
"#;

/// The script a file's `sh` blocks make, for a server at `base`.
fn script(blocks: &[(usize, String)], base: &str) -> String {
    let mut s = String::from(PROLOGUE);
    for (line, body) in blocks {
        s.push_str(&format!("echo '--- block at line {line}' >&2\n"));
        for l in body.lines() {
            if l.trim_start().starts_with("cargo ") {
                s.push_str("# (not run) ");
            }
            s.push_str(&l.replace("http://127.0.0.1:8080", base));
            s.push('\n');
        }
    }
    s
}

/// An `eventbox serve` of `data`, killed on drop.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the binary on `data` and returns it with its base URL once `/readyz` says ready.
fn serve(data: &Path) -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_eventbox"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data"])
        .arg(data)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start eventbox");
    let stdout = child.stdout.take().expect("stdout");
    let server = Server(child);
    let first = BufReader::new(stdout)
        .lines()
        .next()
        .expect("the address line")
        .expect("UTF-8");
    let base = first
        .strip_prefix("eventbox listening on ")
        .unwrap_or_else(|| panic!("not the address line: {first}"))
        .to_string();
    // Bound first, loaded next: wait for the readiness probe, as a reader's client would.
    let ready = format!("{base}/readyz");
    for _ in 0..200 {
        let ok = Command::new("curl")
            .args(["-sf", "-o", "/dev/null", &ready])
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return (server, base);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{base} never became ready");
}

#[test]
fn every_sh_block_of_the_docs_runs() {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_eventbox"))
        .parent()
        .expect("the binary's folder")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).expect("a readable doc");
        let sh = blocks(&text, "sh");
        if sh.is_empty() {
            continue;
        }
        let work = tempfile::tempdir().expect("tempdir");
        copy_dir(&Path::new(ROOT).join("data"), &work.path().join("data"));
        let (_server, base) = serve(&work.path().join("data"));
        let out = Command::new("timeout")
            .args(["120", "bash", "-c", &script(&sh, &base)])
            .current_dir(work.path())
            .env("PATH", &path)
            .env_remove("EVENTBOX_DATA")
            .env_remove("EVENTBOX_ADDR")
            .env("EVENTBOX_ADDR", "127.0.0.1:0")
            .output()
            .expect("run bash");
        assert!(
            out.status.success(),
            "{}: a shell example failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
            file.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ran += sh.len();
    }
    assert!(
        ran >= 3,
        "only {ran} sh blocks found: the harness lost them"
    );
}

#[test]
fn a_failing_example_fails_the_harness() {
    let (_server, base) = serve(&Path::new(ROOT).join("data"));
    let bad = [(1, "eventbox check --no-such-flag\n".to_string())];
    let out = Command::new("bash")
        .args(["-c", &script(&bad, &base)])
        .env(
            "PATH",
            format!(
                "{}:{}",
                Path::new(env!("CARGO_BIN_EXE_eventbox"))
                    .parent()
                    .expect("folder")
                    .display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .output()
        .expect("run bash");
    assert!(!out.status.success(), "a stale flag passed");
}

#[test]
fn blocks_are_found_by_language() {
    let text = "a\n```sh\necho 1\n```\n```toml\nx = 1\n```\n```sh\necho 2\necho 3\n```\n";
    assert_eq!(
        blocks(text, "sh"),
        vec![(2, "echo 1\n".into()), (8, "echo 2\necho 3\n".into())]
    );
}

/// Every path ARCHITECTURE.md names in backquotes (`src/...`, `tests/...`, ...) exists.
#[test]
fn architecture_names_only_paths_that_exist() {
    let text =
        std::fs::read_to_string(Path::new(ROOT).join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let prefixes = [
        "src/",
        "tests/",
        "bench/",
        "docs/",
        "data/",
        "examples/",
        ".ci/",
        "deploy/",
        "scripts/",
    ];
    let mut named = 0;
    let mut missing = Vec::new();
    for quoted in text.split('`').skip(1).step_by(2) {
        let pattern = quoted.contains([' ', '<', '*', '|']);
        if !prefixes.iter().any(|p| quoted.starts_with(p)) || pattern {
            continue;
        }
        named += 1;
        // `src/http/` names a folder; `src/load.rs:12` a place in a file.
        let path = quoted.split(':').next().unwrap_or(quoted);
        if !Path::new(ROOT).join(path).exists() {
            missing.push(quoted.to_string());
        }
    }
    assert!(named >= 10, "only {named} paths found: the check lost them");
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}
