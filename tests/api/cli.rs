//! The command line itself, run as the real binary: `check` (problems, locations, exit codes),
//! `serve` (startup output, an unusable data folder), `pull` and `gen` (output, exit codes).

use std::path::Path;
use std::process::{Command, Output};

use crate::fixtures;
use crate::helpers::{demo_data, TempData};

fn eventbox(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_eventbox"))
        .args(args)
        .current_dir(cwd)
        .env_remove("EVENTBOX_DATA")
        .env_remove("EVENTBOX_ADDR")
        .output()
        .expect("run eventbox")
}

/// Runs `eventbox check <data folder> [extra]` from the folder's parent, so paths in the report
/// start with the data folder's own name.
fn check(data: &TempData, extra: &[&str]) -> (i32, String, String) {
    let root = data.path();
    let name = root
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a UTF-8 name");
    let parent = root.parent().expect("a parent");
    let mut args = vec!["check", name];
    args.extend_from_slice(extra);
    let out = eventbox(&args, parent);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), stdout, name.to_string())
}

/// The tiny fixture bundle without its deliberate warning (areas with ordem 1, 2, 2, 3).
fn clean_bundle(data: &TempData, name: &str) {
    fixtures::write_json(data, name);
    data.write(
        &format!("{name}/hotsite.json"),
        r#"{"capa": null, "areasSite": [{"idAreaSite": null, "titulo": "Abertura", "subtitulo": "", "ordem": 1, "jsonObj": [], "template": ""}]}"#,
    );
}

/// A clean tiny bundle named `name`, with its own token, then `file` replaced by `contents`. A
/// `.toml` file replaces its `.json` twin.
fn bundle_with(data: &TempData, name: &str, file: &str, contents: impl AsRef<[u8]>) {
    clean_bundle(data, name);
    data.write(
        &format!("{name}/bundle.toml"),
        format!("tokens = [\"tok-{name}\"]\n"),
    );
    if let Some(stem) = file.strip_suffix(".toml").filter(|s| *s != "bundle") {
        let _ = std::fs::remove_file(data.path().join(name).join(format!("{stem}.json")));
    }
    data.write(&format!("{name}/{file}"), contents);
}

#[test]
fn check_names_the_file_and_place_of_every_kind_of_problem() {
    let data = TempData::new();
    let p = fixtures::PAYMENTS_JSON;
    let e = fixtures::EVENT_JSON;
    let cases: Vec<(&str, &str, Vec<u8>, &str)> = vec![
        ("json-syntax", "event.json", b"{\n  \"data\": [\n    }\n".to_vec(), "json-syntax/event.json:3:5: "),
        ("toml-syntax", "payments.toml", b"count = 2\n[[data]]\nid_event = \n".to_vec(), "toml-syntax/payments.toml:3:12: "),
        ("wrong-type", "payments.json", p.replacen("\"id_event\": 7001", "\"id_event\": \"7001\"", 1).into_bytes(), "wrong-type/payments.json: [0].id_event: expected an integer, found the string \"7001\""),
        ("missing-field", "payments.json", p.replacen("\"buyer\": \"João Lima\", ", "", 1).into_bytes(), "missing-field/payments.json: [1].buyer: missing required field"),
        ("bad-datetime", "event.json", e.replacen("2026-10-05T08:00:00", "2026-10-05 08:00", 1).into_bytes(), "bad-datetime/event.json: data[0].start_date: \"2026-10-05 08:00\" is not a YYYY-MM-DDTHH:MM:SS date-time"),
        ("bad-date", "payments.json", p.replacen("03/08/2026", "2026-13-01", 1).into_bytes(), "bad-date/payments.json: [1].date_payment: \"2026-13-01\" is not a DD/MM/YYYY date"),
        ("newline-value", "payments.json", p.replacen("02/06/2026", "02/06/2026\\nerror: fake line", 1).into_bytes(), "newline-value/payments.json: [0].date_payment: \"02/06/2026\\nerror: fake line\" is not a DD/MM/YYYY date"),
        ("bad-hour", "payments.json", p.replacen("09:15", "9:15", 1).into_bytes(), "bad-hour/payments.json: [0].hour_payment: \"9:15\" is not an HH:MM hour"),
        ("bad-latitude", "event.json", e.replacen("-19.9245", "-19,9245", 1).into_bytes(), "bad-latitude/event.json: data[0].latitude: \"-19,9245\" is not a decimal number"),
        ("bad-count", "event.json", e.replacen("\"count\": 1", "\"count\": 2", 1).into_bytes(), "bad-count/event.json: count: count is 2 but data has 1"),
        ("dup-reference", "payments.json", p.replacen("R-002", "R-001", 1).into_bytes(), "dup-reference/payments.json: [1].reference_payment: \"R-001\" is also the reference of [0]"),
        ("nested-path", "event.json", e.replacen("\"price\": 120.25", "\"price\": \"120.25\"", 1).into_bytes(), "nested-path/event.json: data[0].tickets[0].prices[1].price: expected a number, found the string \"120.25\""),
        ("two-formats", "event.toml", fixtures::EVENT_TOML.as_bytes().to_vec(), "two-formats/event.json: "),
        ("tokens-string", "bundle.toml", b"tokens = \"secret-xyz-token\"\n".to_vec(), "tokens-string/bundle.toml: tokens: expected an array of strings, found a string"),
        ("no-tokens", "bundle.toml", b"tokens = []\n".to_vec(), "no-tokens/bundle.toml: tokens: at least one token is required"),
        // Said as empty, streamed or not (it read as "EOF while parsing", or a missing field).
        ("empty-toml", "attendees.toml", b"\n".to_vec(), "empty-toml/attendees.toml: the file is empty: write its data, or remove it"),
        // Beyond a double: every JavaScript or Python client would read Infinity.
        ("huge-number", "payments.json", p.replacen("\"amount_payment\": 301", "\"amount_payment\": 1e400", 1).into_bytes(), "huge-number/payments.json: [1].amount_payment: expected a number, found the number 1e+400, beyond a double's range"),
        ("empty-streamed", "payments.json", b" \n".to_vec(), "empty-streamed/payments.json: the file is empty"),
        // After a byte-order mark columns count from the first character after it, streamed or not.
        ("bom-streamed", "payments.json", b"\xEF\xBB\xBF{\"data\": [}".to_vec(), "bom-streamed/payments.json:1:11: "),
        ("bom-parsed", "event.json", b"\xEF\xBB\xBF{\"data\": [}".to_vec(), "bom-parsed/event.json:1:11: "),
        ("not-utf8-bom", "hotsite.json", b"\xEF\xBB\xBF{\"capa\": \"caf\xe9\"}".to_vec(), "not-utf8-bom/hotsite.json:1:14: not valid UTF-8: byte 0xE9 (offset 16)"),
        // Placed as an editor shows it: line 2, column 17 in characters (í is two bytes).
        ("not-utf8", "hotsite.json", b"{\n  \"t\xc3\xadtulo\": \"caf\xe9\"}".to_vec(), "not-utf8/hotsite.json:2:17: not valid UTF-8: byte 0xE9 (offset 19); save the file as UTF-8"),
        // A list file takes its envelope or a bare list: the message names both.
        ("scalar-list", "speaker.json", b"5".to_vec(), "scalar-list/speaker.json: expected an object or a bare list at the top level, found the number 5"),
    ];
    for (name, file, contents, _) in &cases {
        bundle_with(&data, name, file, contents);
    }
    data.write("two-formats/event.json", fixtures::EVENT_JSON);
    bundle_with(&data, "missing-event", "payments.json", p);
    std::fs::remove_file(data.path().join("missing-event/event.json")).expect("remove event.json");
    data.with_demo("zz-good");
    std::fs::create_dir_all(data.path().join("zz-good/payment_details/sub")).expect("folder");

    let (code, out, root) = check(&data, &[]);

    assert_eq!(code, 1, "errors exit 1:\n{out}");
    for (name, _, _, expected) in &cases {
        let expected = format!("error: {root}/{expected}");
        assert!(
            out.lines().any(|l| l.starts_with(&expected)),
            "{name}: no line starting with\n  {expected}\nin:\n{out}"
        );
    }
    assert!(
        out.contains(&format!(
            "error: {root}/missing-event: no event.json or event.toml: every bundle needs its event"
        )),
        "{out}"
    );
    // A folder is said to be one.
    assert!(
        out.contains(&format!(
            "warning: {root}/zz-good/payment_details/sub: unknown folder, ignored"
        )),
        "{out}"
    );
    assert!(
        !out.contains("secret-xyz-token"),
        "a token in the report:\n{out}"
    );
    assert!(
        out.contains(&format!(
            "{root}/two-formats/event.toml holds the same data"
        )),
        "{out}"
    );
    let summary = out.lines().last().expect("a summary line");
    assert_eq!(
        summary,
        format!(
            "{} bundles checked, 1 would be served; {} errors, 1 warning",
            cases.len() + 2,
            cases.len() + 1
        )
    );
}

#[test]
fn check_reports_every_problem_of_a_file_not_only_the_first() {
    let data = TempData::new();
    let broken = fixtures::PAYMENTS_JSON
        .replacen("09:15", "25:00", 1)
        .replacen("\"amount_payment\": 301", "\"amount_payment\": null", 1)
        .replacen("\"status_payment\": \"Pago\", ", "", 1);
    bundle_with(&data, "many", "payments.json", &broken);

    let (code, out, root) = check(&data, &[]);

    assert_eq!(code, 1);
    for expected in [
        format!(
            "error: {root}/many/payments.json: [0].hour_payment: \"25:00\" is not an HH:MM hour"
        ),
        format!("error: {root}/many/payments.json: [0].status_payment: missing required field"),
        format!(
            "error: {root}/many/payments.json: [1].amount_payment: expected a number, found null"
        ),
    ] {
        assert!(out.contains(&expected), "missing\n  {expected}\nin:\n{out}");
    }
}

#[test]
fn warnings_pass_unless_strict() {
    let data = TempData::new();
    let p = fixtures::PAYMENTS_JSON.replacen(
        "\"amount_receive_payment\": 119.5",
        "\"amount_receive_payment\": 130",
        1,
    );
    bundle_with(&data, "w", "payments.json", &p);
    data.write("w/hotsite.json", fixtures::HOTSITE_JSON);
    data.write(
        "w/event.json",
        fixtures::EVENT_JSON
            .replacen(
                "\"id_ticket\": 1, \"id_ticket_price\": 11",
                "\"id_ticket\": 2, \"id_ticket_price\": 12",
                1,
            )
            .replacen(
                "\"registration_quantity\": 3",
                "\"registration_quantity\": -3",
                1,
            ),
    );
    data.write("w/payment_details/R-404.json", fixtures::DETAIL_JSON);
    data.write("w/notes.txt", "hello");

    let (code, out, root) = check(&data, &[]);

    assert_eq!(code, 0, "warnings only exit 0:\n{out}");
    for expected in [
        format!("warning: {root}/w/event.json: data[0].tickets[0].prices[1].id_ticket: id_ticket 2 differs from 1"),
        format!("warning: {root}/w/event.json: data[0].tickets[0].prices[1].id_ticket_price: 12 is also data[0].tickets[0].prices[0].id_ticket_price's: a registration taking it gets the first"),
        format!("warning: {root}/w/event.json: data[0].tickets[0].registration_quantity: is -3, below 0"),
        format!("warning: {root}/w/hotsite.json: areasSite: ordem values are 1, 2, 2, 3"),
        format!("warning: {root}/w/notes.txt: unknown file"),
        format!("warning: {root}/w/payment_details/R-404.json: no payment has the reference \"R-404\""),
        format!("warning: {root}/w/payments.json: [0].amount_receive_payment: 130 is above amount_payment 120.25"),
    ] {
        assert!(out.contains(&expected), "missing\n  {expected}\nin:\n{out}");
    }
    assert!(
        out.ends_with("1 bundle checked, 1 would be served; 0 errors, 7 warnings\n"),
        "{out}"
    );

    let (strict_code, strict_out, _) = check(&data, &["--strict"]);
    assert_eq!(strict_code, 1, "--strict fails on warnings:\n{strict_out}");
    assert!(
        strict_out.contains("error: ")
            && strict_out.contains("(--strict: warnings count as errors)"),
        "{strict_out}"
    );
}

#[test]
fn a_due_date_before_the_start_date_is_no_problem() {
    // The fixture's first price tier ends before it starts, as the service's data may.
    let data = TempData::new();
    clean_bundle(&data, "tiny");

    let (code, out, _) = check(&data, &["--strict"]);

    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        "1 bundle checked, 1 would be served; 0 errors, 0 warnings\n"
    );
}

#[test]
fn the_demo_bundle_is_clean_even_when_strict() {
    let out = eventbox(
        &["check", "--strict"],
        demo_data().parent().expect("repo root"),
    );

    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_token_named_by_two_bundles_is_an_error_naming_both() {
    let data = TempData::new();
    clean_bundle(&data, "alpha");
    clean_bundle(&data, "beta");

    let (code, out, root) = check(&data, &[]);

    assert_eq!(code, 1, "{out}");
    let expected = format!("error: {root}/beta/bundle.toml: token tiny… is also named by bundle \"alpha\", which has it (a token opens one bundle): bundle \"beta\" is not served");
    assert!(out.contains(&expected), "missing\n  {expected}\nin:\n{out}");
    assert!(
        !out.contains("tiny-token"),
        "a whole token in the output:\n{out}"
    );
    assert!(
        out.ends_with("2 bundles checked, 1 would be served; 2 errors, 0 warnings\n"),
        "{out}"
    );
}

/// A folder with no bundle is a warning (`--strict`: a failure): `serve` on it is never
/// ready. Before, it checked clean.
#[test]
fn a_folder_with_no_bundle_is_a_warning() {
    let data = TempData::new();
    let (code, out, root) = check(&data, &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        format!("warning: {root} holds no bundle (a folder of its own per event): serve on it would never be ready\n0 bundles checked, 0 would be served; 0 errors, 1 warning\n")
    );
    let (code, out, _) = check(&data, &["--strict"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("error: "), "{out}");
}

#[test]
fn an_unreadable_data_folder_exits_2() {
    let data = TempData::new();

    let check = eventbox(&["check", "no-such-folder"], data.path());
    let serve = eventbox(
        &["serve", "--data", "no-such-folder", "--addr", "127.0.0.1:0"],
        data.path(),
    );

    assert_eq!(check.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&check.stdout)
        .contains("cannot read the data folder no-such-folder"));
    assert_eq!(serve.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&serve.stderr)
        .contains("cannot read the data folder no-such-folder"));
}

#[test]
fn a_bundle_given_as_the_data_folder_is_refused_naming_the_folder_to_give() {
    let data = TempData::new();
    clean_bundle(&data, "tiny");
    data.write("tiny/payment_details/R1.json", "{}");

    let check = eventbox(&["check", "tiny"], data.path());
    let serve = eventbox(
        &["serve", "--data", "tiny", "--addr", "127.0.0.1:0"],
        data.path(),
    );

    let said = String::from_utf8_lossy(&check.stdout).into_owned();
    assert_eq!(check.status.code(), Some(2), "{said}");
    assert!(
        said.contains("the data folder tiny is a bundle itself (it holds bundle.toml): give the folder that holds its bundles, ."),
        "{said}"
    );
    // Not its sub-folder reported as a broken bundle.
    assert!(!said.contains("payment_details"), "{said}");
    assert_eq!(serve.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&serve.stderr).contains("is a bundle itself"));
}

#[test]
fn skipped_folders_are_not_bundles() {
    let data = TempData::new();
    clean_bundle(&data, "tiny");
    data.write("_drafts/event.json", "{ not even json");
    data.write(".hidden/event.json", "{ not even json");
    data.write("README.md", "files at the top are not bundles");

    let (code, out, _) = check(&data, &[]);

    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        "1 bundle checked, 1 would be served; 0 errors, 0 warnings\n"
    );
}

/// Kills the child when the test ends, pass or fail.
pub(crate) struct Running(pub(crate) std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn eventbox_alone_serves_and_prints_the_address_and_bundles() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let mut child = Command::new(env!("CARGO_BIN_EXE_eventbox"))
        .env("EVENTBOX_DATA", demo_data())
        .env("EVENTBOX_ADDR", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start eventbox");
    let stdout = child.stdout.take().expect("stdout");
    let _running = Running(child);
    // The address line is printed once the listener is bound: it is the readiness signal.
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().expect("a first line").expect("UTF-8");
    let second = lines.next().expect("a bundle line").expect("UTF-8");

    let base = first
        .strip_prefix("eventbox listening on ")
        .expect("the address line")
        .to_string();
    assert!(
        second.contains("demo") && second.contains("token demo…"),
        "{second}"
    );
    assert!(
        !second.contains("demo-token"),
        "the whole token printed: {second}"
    );
    let res = crate::helpers::client()
        .get(format!("{base}/api/v1/event"))
        .header("Authorization-Token", "demo-token")
        .send()
        .await
        .expect("answered");
    assert_eq!(res.status(), 200);
}

/// A served `eventbox` process, its base URL once the address line is printed, its stderr, and
/// its stdout (copied to a file by a thread as it comes).
pub(crate) struct Served {
    running: Running,
    pub(crate) base: String,
    stderr_path: std::path::PathBuf,
    stdout_path: std::path::PathBuf,
    stdout_copy: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

/// A configuration file's key that a variable overrides, and a variable no option reads, are
/// said at start, and so is the data folder served (the image's `EVENTBOX_DATA` beat a file's
/// `data` without a word, and a typo in a variable's name went unnoticed).
#[test]
fn overridden_file_keys_and_unknown_variables_are_warned_of_at_start() {
    let data = TempData::new();
    data.with_demo("demo");
    let conf = tempfile::tempdir().expect("tempdir");
    let file = conf.path().join("eventbox.toml");
    std::fs::write(&file, "watch = \"off\"\ndata = \"/srv/nowhere\"\n").expect("config");
    let dir = data.path().to_str().expect("UTF-8");
    let served = start_binary(
        &[
            "--addr",
            "127.0.0.1:0",
            "--config",
            file.to_str().expect("UTF-8"),
        ],
        &[("EVENTBOX_DATA", dir), ("EVENTBOX_ACESS_LOG", "true")],
    );
    let stderr = served.stderr();
    for said in [
        format!(
            "{}:2: data is not used: EVENTBOX_DATA is set, and wins over the file",
            file.display()
        ),
        "EVENTBOX_ACESS_LOG is not a variable eventbox reads; did you mean EVENTBOX_ACCESS_LOG?"
            .to_string(),
        format!("bundles from {dir}"),
    ] {
        assert!(stderr.contains(&said), "{said}\nnot in:\n{stderr}");
    }
}

/// A desk set up with a bundle.toml alone (its files come with the first refresh) is told so at
/// start, not only that every bundle has errors: the refresher takes its source after that
/// line is printed.
#[tokio::test]
async fn a_desk_from_a_bundle_toml_alone_is_told_it_waits_for_the_first_refresh() {
    let data = TempData::new();
    // A source nobody answers at: the files never come in this test.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/api/v1", dead.local_addr().expect("addr"));
    drop(dead);
    data.write(
        "hall/bundle.toml",
        format!("tokens = [\"desk-token\"]\n[source]\nurl = \"{url}\"\n"),
    );
    let dir = data.path().to_str().expect("UTF-8");
    let args = ["--addr", "127.0.0.1:0", "--data", dir, "--watch", "off"];
    let waits = "no bundle is served: every bundle has errors (logged above), or waits for its source's first refresh";
    for (follow, says_waits) in [(&["--refresh-every", "1h"][..], true), (&[][..], false)] {
        let served = start_binary(&[&args[..], follow].concat(), &[]);
        let stdout = served.stdout_until("no bundle is served").await;
        assert_eq!(stdout.contains(waits), says_waits, "{follow:?}: {stdout}");
    }
}

/// A token of a bundle that is not served (its files have errors, no earlier version loaded) is
/// 503 `bundle_unavailable`, not a wrong token's 401 (a client would drop a good token; a
/// balancer would not try another replica), and the log says why, once per reload rather than
/// once per request.
#[tokio::test]
async fn a_token_of_a_bundle_not_served_is_503_and_the_log_says_why_once() {
    let data = TempData::new();
    data.with_demo("demo");
    data.write("broken/bundle.toml", "tokens = [\"broken-token\"]\n");
    data.write("broken/event.json", "{\"data\": [");
    let dir = data.path().to_str().expect("UTF-8");
    let served = start_binary(
        &["--addr", "127.0.0.1:0", "--data", dir, "--watch", "off"],
        &[],
    );
    served.ready().await;
    for _ in 0..3 {
        let answer = crate::helpers::answer(
            crate::helpers::client()
                .get(format!("{}/api/v1/event", served.base))
                .header("Authorization-Token", "broken-token"),
        )
        .await;
        answer.assert_error(503, "bundle_unavailable");
    }
    let said = "a request's token is one bundle \"broken\" names, but no version of that bundle this token opens is served";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !served.stderr().contains(said) {
        assert!(std::time::Instant::now() < deadline, "{}", served.stderr());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // A wrong token of no bundle says nothing.
    crate::helpers::answer(
        crate::helpers::client()
            .get(format!("{}/api/v1/event", served.base))
            .header("Authorization-Token", "nobodys-token"),
    )
    .await
    .assert_error(401, "invalid_token");
    let stderr = served.stderr();
    assert_eq!(stderr.matches(said).count(), 1, "{stderr}");
    assert!(
        !stderr.contains("broken-token"),
        "a whole token logged: {stderr}"
    );
    assert!(!stderr.contains("nobody"), "{stderr}");
}

/// A server with a state folder on a copy that names a `[source]` (a pulled copy used for a
/// rehearsal or a staging server) keeps its writes: only kiosk mode sends them, and the start
/// says so. It used to send test registrations to the live service.
#[tokio::test]
async fn writes_go_to_a_source_only_in_kiosk_mode() {
    let data = TempData::new();
    let bundle = data.path().join("summit");
    crate::helpers::copy_demo(&bundle);
    std::fs::write(
        bundle.join("bundle.toml"),
        "tokens = [\"demo-token\"]\n[source]\nurl = \"http://127.0.0.1:9/api/v1\"\n",
    )
    .expect("bundle.toml");
    let state = tempfile::tempdir().expect("tempdir");
    let args = |kiosk: bool| {
        let mut a = vec![
            "--data".to_string(),
            data.path().to_str().expect("utf-8").to_string(),
            "--addr".into(),
            "127.0.0.1:0".into(),
            "--no-watch".into(),
            "--state".into(),
            state.path().to_str().expect("utf-8").to_string(),
        ];
        if kiosk {
            a.extend(["--refresh-every".to_string(), "1h".to_string()]);
        }
        a
    };
    let said = "writes made here are kept in the state folder and not sent to the [source]";
    // Kiosk mode's own start line comes after the one under test.
    for (kiosk, last) in [(false, said), (true, "following the sources bundles name")] {
        let a = args(kiosk);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let served = start_binary(&a, &[]);
        let start = std::time::Instant::now();
        while !served.stderr().contains(last) {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "{}",
                served.stderr()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(
            served.stderr().contains(said),
            !kiosk,
            "{}",
            served.stderr()
        );
        assert!(!served.stderr().contains(NONE_YET), "{}", served.stderr());
    }
    // On data that names no source, nothing is said: it read as a fault on a plain server. A
    // desk on it says that no bundle names a source yet (a desk set up before its pull).
    std::fs::write(bundle.join("bundle.toml"), "tokens = [\"demo-token\"]\n").expect("toml");
    for kiosk in [false, true] {
        let a = args(kiosk);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let mut served = start_binary(&a, &[]);
        served.ready().await;
        let start = std::time::Instant::now();
        while kiosk && !served.stderr().contains("following the sources") {
            let waited = start.elapsed() < std::time::Duration::from_secs(10);
            assert!(waited, "{}", served.stderr());
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        served.signal("TERM");
        assert_eq!(served.wait_exit(), Some(0));
        let stderr = served.stderr();
        assert!(
            stderr.contains("stopped") && !stderr.contains(said),
            "{stderr}"
        );
        assert_eq!(stderr.contains(NONE_YET), kiosk, "{stderr}");
    }
}

/// A desk set up with a bundle.toml alone (its files come with the first pull) follows that
/// source from the start, and says so. It used to say that no bundle named one: the start line
/// counted only the bundles served. Its missing event is no fault yet: a warning says the
/// bundle waits for its first refresh, where two errors were logged.
#[tokio::test]
async fn a_desk_set_up_with_bundle_toml_alone_says_it_follows_that_source() {
    let data = TempData::new();
    let bundle = data.path().join("summit");
    std::fs::create_dir_all(&bundle).expect("bundle folder");
    std::fs::write(
        bundle.join("bundle.toml"),
        "tokens = [\"demo-token\"]\n[source]\nurl = \"http://127.0.0.1:9/api/v1\"\n",
    )
    .expect("bundle.toml");
    let data_arg = data.path().to_str().expect("utf-8");
    let served = start_binary(
        &[
            "--data",
            data_arg,
            "--addr",
            "127.0.0.1:0",
            "--no-watch",
            "--refresh-every",
            "1h",
        ],
        &[],
    );

    let start = std::time::Instant::now();
    let line = loop {
        let stderr = served.stderr();
        if let Some(line) = stderr.lines().find(|l| l.contains("following the sources")) {
            break line.to_string();
        }
        let waited = start.elapsed() < std::time::Duration::from_secs(10);
        assert!(waited, "{stderr}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };

    assert!(line.contains("sources=1"), "{line}");
    assert!(!line.contains(NONE_YET), "{line}");
    let stderr = served.stderr();
    assert!(
        stderr.contains("bundle not served yet: its folder holds no data file"),
        "{stderr}"
    );
    assert!(!stderr.contains("ERROR"), "{stderr}");

    // Not followed (no --refresh-every), or a bundle.toml with an error of its own (no
    // token): its problems are errors, said as such.
    let fine = "tokens = [\"demo-token\"]\n[source]\nurl = \"http://127.0.0.1:9/api/v1\"\n";
    let no_token = "tokens = []\n[source]\nurl = \"http://127.0.0.1:9/api/v1\"\n";
    for (toml, refresh) in [(fine, &[][..]), (no_token, &["--refresh-every", "1h"][..])] {
        std::fs::write(bundle.join("bundle.toml"), toml).expect("bundle.toml");
        let mut args = vec!["--data", data_arg, "--addr", "127.0.0.1:0", "--no-watch"];
        args.extend_from_slice(refresh);
        let served = start_binary(&args, &[]);
        served.stdout_until("no bundle is served").await;
        let stderr = served.stderr();
        assert!(stderr.contains("ERROR"), "{toml} {refresh:?}: {stderr}");
        assert!(
            !stderr.contains("not served yet"),
            "{toml} {refresh:?}: {stderr}"
        );
    }
}

/// What a desk's start says when no bundle names a source.
const NONE_YET: &str = "following the sources bundles name (none names one yet";

pub(crate) fn start_binary(args: &[&str], envs: &[(&str, &str)]) -> Served {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;

    let dir = tempfile::tempdir().expect("tempdir");
    let stderr_path = dir.path().join("stderr.log");
    let stdout_path = dir.path().join("stdout.log");
    let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
    let mut stdout_file = std::fs::File::create(&stdout_path).expect("stdout file");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_eventbox"));
    cmd.args(args)
        .env_remove("EVENTBOX_DATA")
        .env_remove("EVENTBOX_ADDR")
        .stdout(Stdio::piped())
        .stderr(stderr);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start eventbox");
    let stdout = child.stdout.take().expect("stdout");
    let running = Running(child);
    // Every line goes to the file; the first also comes back here (the readiness signal).
    let (first_line, first) = std::sync::mpsc::channel::<String>();
    let stdout_copy = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = writeln!(stdout_file, "{line}");
            let _ = first_line.send(line);
        }
    });
    let first = first.recv().expect("a first line");
    // Text, or with --log-format json a JSON line with the URL among its fields.
    let base = match serde_json::from_str::<serde_json::Value>(&first) {
        Ok(line) => line["fields"]["url"].as_str().map(str::to_string),
        Err(_) => first
            .strip_prefix("eventbox listening on ")
            .map(str::to_string),
    }
    .unwrap_or_else(|| panic!("not the address line: {first}"));
    Served {
        running,
        base,
        stderr_path,
        stdout_path,
        stdout_copy: Some(stdout_copy),
        _dir: dir,
    }
}

impl Served {
    pub(crate) fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.running.0.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits (bounded) until the process has written `line` on stdout (lines come to the file
    /// as they are written); returns all it wrote so far.
    pub(crate) async fn stdout_until(&self, line: &str) -> String {
        let start = std::time::Instant::now();
        loop {
            let stdout = std::fs::read_to_string(&self.stdout_path).unwrap_or_default();
            if stdout.contains(line) {
                return stdout;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(20),
                "{line:?} not on stdout:\n{stdout}\nstderr:\n{}",
                self.stderr()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Everything the process wrote on stdout, once it has exited (see [`Served::wait_exit`]).
    pub(crate) fn stdout_after_exit(&mut self) -> String {
        assert!(
            self.running.0.try_wait().expect("try_wait").is_some(),
            "the process is still running"
        );
        if let Some(copy) = self.stdout_copy.take() {
            copy.join().expect("the stdout copy");
        }
        std::fs::read_to_string(&self.stdout_path).unwrap_or_default()
    }

    /// Returns once `/readyz` answers 200: the first load is published (the address line comes
    /// before it).
    pub(crate) async fn ready(&self) {
        let start = std::time::Instant::now();
        loop {
            let ready = crate::helpers::client()
                .get(format!("{}/readyz", self.base))
                .send()
                .await
                .map(|r| r.status().as_u16());
            if ready.ok() == Some(200) {
                return;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "never ready: {}",
                self.stderr()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    pub(crate) fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Its `/status` (asked from loopback), or `null` when it gives no JSON.
    pub(crate) async fn status(&self) -> serde_json::Value {
        let res = crate::helpers::client()
            .get(format!("{}/status", self.base))
            .send()
            .await
            .expect("status");
        let body = res.bytes().await.unwrap_or_default();
        serde_json::from_slice(&body).unwrap_or_default()
    }

    /// Waits for the process to exit (bounded) and returns its exit code.
    pub(crate) fn wait_exit(&mut self) -> Option<i32> {
        let start = std::time::Instant::now();
        loop {
            if let Some(status) = self.running.0.try_wait().expect("try_wait") {
                return status.code();
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(15),
                "the process did not exit"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// The demo served by the binary on a free port without watching, with `args` and `envs`, once
/// it answers the event.
pub(crate) async fn serve_demo(args: &[&str], envs: &[(&str, &str)]) -> Served {
    let demo = demo_data();
    let mut all_args = vec!["--addr", "127.0.0.1:0", "--no-watch"];
    all_args.extend_from_slice(args);
    let mut all_envs = vec![("EVENTBOX_DATA", demo.to_str().expect("UTF-8"))];
    all_envs.extend_from_slice(envs);
    let served = start_binary(&all_args, &all_envs);
    assert_eq!(get_event(&served.base, "demo-token").await.0, 200);
    served
}

pub(crate) async fn get_event(base: &str, token: &str) -> (u16, serde_json::Value) {
    let client = crate::helpers::client();
    for _ in 0..200 {
        if let Ok(res) = client
            .get(format!("{base}/api/v1/event"))
            .header("Authorization-Token", token)
            .send()
            .await
        {
            let status = res.status().as_u16();
            let body: serde_json::Value =
                serde_json::from_str(&res.text().await.unwrap_or_default()).unwrap_or_default();
            // Only the first load's 503 waits; a bundle's own (`bundle_unavailable`) is an answer.
            if status != 503 || body["erros"][0]["description"] != "not_ready" {
                return (status, body);
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("eventbox never became ready at {base}");
}

/// The body of a GET of `path`, with `token` if given.
async fn fetch(base: &str, path: &str, token: Option<&str>) -> bytes::Bytes {
    let mut req = crate::helpers::client().get(format!("{base}{path}"));
    if let Some(token) = token {
        req = req.header("Authorization-Token", token);
    }
    let res = req.send().await.expect("answered");
    assert!(res.status().is_success(), "{path}: {}", res.status());
    res.bytes().await.expect("a body")
}

#[tokio::test]
async fn sighup_reloads_every_bundle_now() {
    let data = TempData::new();
    data.with_demo("demo");
    let dir = data.path().to_str().expect("UTF-8").to_string();
    let served = start_binary(
        &["--data", &dir, "--addr", "127.0.0.1:0", "--no-watch"],
        &[],
    );
    let (status, before) = get_event(&served.base, "demo-token").await;
    assert_eq!(status, 200);
    let text = std::fs::read_to_string(data.path().join("demo/event.json")).expect("event");
    data.write(
        "demo/event.json",
        text.replace("33º Congresso", "Recarregado por SIGHUP"),
    );
    // Longer than any debounce: had anything been watching, it would have reloaded by now.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(
        get_event(&served.base, "demo-token").await.1,
        before,
        "--no-watch: nothing reloads by itself"
    );

    served.signal("HUP");

    let start = std::time::Instant::now();
    loop {
        let (_, now) = get_event(&served.base, "demo-token").await;
        if now["data"][0]["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("Recarregado por SIGHUP"))
        {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "SIGHUP did not reload"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The log says when it is done (the answer can show it a moment before the line).
    while !served
        .stderr()
        .contains("SIGHUP: every bundle reloaded bundles=1")
    {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "no end of the reload logged:\n{}",
            served.stderr()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let log = stop(served);
    assert!(
        log.lines().last().is_some_and(|l| l.ends_with("stopped")),
        "{log}"
    );
}

/// A bundle folder renamed is logged as renamed, serving its tokens under the new name, or
/// not served there (a clash) with a warning. It was logged "removed; its tokens no longer
/// open it" while they did.
#[tokio::test]
async fn a_renamed_bundle_folder_is_logged_as_renamed_served_or_not() {
    let data = TempData::new();
    data.with_demo("old");
    data.with_demo("aaa")
        .write("aaa/bundle.toml", "tokens = [\"other-token\"]\n");
    let dir = data.path().to_str().expect("UTF-8").to_string();
    let served = start_binary(
        &["--data", &dir, "--addr", "127.0.0.1:0", "--no-watch"],
        &[("RUST_LOG", "info")],
    );
    served.ready().await;
    let until_logged = |line: &'static str| {
        let served = &served;
        async move {
            let start = std::time::Instant::now();
            while !served.stderr().contains(line) {
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(10),
                    "{line:?} not logged:\n{}",
                    served.stderr()
                );
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    };

    std::fs::rename(data.path().join("old"), data.path().join("new")).expect("renamed");
    served.signal("HUP");
    until_logged("bundle folder renamed; its tokens open it under its new name").await;
    let log = served.stderr();
    assert!(
        log.contains("bundle=old") && log.contains("renamed=new"),
        "{log}"
    );
    assert!(!log.contains("no longer open it"), "{log}");

    // Renamed again, now naming a token the other bundle serves: not served there.
    std::fs::rename(data.path().join("new"), data.path().join("newer")).expect("renamed");
    let both = format!(
        "tokens = [\"{}\", \"other-token\"]\n",
        crate::helpers::DEMO_TOKEN
    );
    data.write("newer/bundle.toml", both);
    served.signal("HUP");
    until_logged("bundle folder renamed, and not served under its new name").await;
}

/// A registration whose id and code the bundle's files give to someone else after a reload is
/// numbered anew, and the log says so with the new numbers (the badge must be reprinted); it
/// said nothing.
#[tokio::test]
async fn a_registration_numbered_anew_is_logged_once_with_its_new_numbers() {
    use crate::helpers::DEMO_TOKEN;
    let data = TempData::new();
    data.with_demo("demo");
    let dir = data.path().to_str().expect("UTF-8").to_string();
    let served = start_binary(
        &["--data", &dir, "--addr", "127.0.0.1:0", "--no-watch"],
        &[("RUST_LOG", "warn")],
    );
    served.ready().await;
    let client = crate::helpers::client();
    let get = |path: &'static str| {
        let client = client.clone();
        let url = format!("{}{path}", served.base);
        async move {
            let res = client
                .get(url)
                .header("Authorization-Token", DEMO_TOKEN)
                .send();
            let body = res.await.expect("an answer").bytes().await.expect("a body");
            serde_json::from_slice::<serde_json::Value>(&body).expect("JSON")
        }
    };
    let event = get("/api/v1/event").await;
    let price = event["data"][0]["tickets"][0]["prices"][0]["id_ticket_price"]
        .as_i64()
        .expect("a price");
    let made = client
        .post(format!("{}/api/v1/attendees/create", served.base))
        .header("Authorization-Token", DEMO_TOKEN)
        .header("Content-Type", "application/json")
        .body(crate::writes::person("Eva Nova", "eva.nova@exemplo.com", price).to_string())
        .send()
        .await
        .expect("registered");
    assert_eq!(made.status(), 200);
    let attendees = || async {
        let list = get("/api/v1/attendees").await;
        list["data"].as_array().cloned().unwrap_or_default()
    };
    let eva = attendees()
        .await
        .into_iter()
        .find(|a| a["email"] == "eva.nova@exemplo.com")
        .expect("Eva listed");

    // The files now give Eva's id and code to someone else.
    let path = data.path().join("demo/attendees.json");
    let mut files: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("attendees")).expect("JSON");
    let rows = files["data"].as_array_mut().expect("a list");
    let mut other = rows[0].clone();
    other["id_attendees"] = eva["id_attendees"].clone();
    other["checkin_code"] = eva["checkin_code"].clone();
    other["email"] = "outra@exemplo.com".into();
    rows.push(other);
    let rows = rows.len();
    if let Some(count) = files.get_mut("count") {
        *count = rows.into();
    }
    std::fs::write(&path, serde_json::to_vec(&files).expect("JSON")).expect("written");
    served.signal("HUP");
    let start = std::time::Instant::now();
    let renumbered = loop {
        let now = attendees().await;
        let eva_now = now
            .iter()
            .find(|a| a["email"] == "eva.nova@exemplo.com")
            .cloned();
        if let Some(e) = eva_now.filter(|e| e["id_attendees"] != eva["id_attendees"]) {
            break e;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "not renumbered"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let said = "a registration made here is numbered anew";
    let log = served.stderr();
    assert_eq!(log.matches(said).count(), 1, "{log}");
    assert!(
        log.contains(&format!("id_attendees={}", renumbered["id_attendees"]))
            && log.contains(&format!("checkin_code={}", renumbered["checkin_code"])),
        "{log}"
    );
    // Shown again: said once.
    attendees().await;
    assert_eq!(served.stderr().matches(said).count(), 1);
}

#[tokio::test]
async fn a_reload_finding_the_same_bytes_logs_nothing_and_a_change_logs_the_bundle_loaded() {
    let data = TempData::new();
    data.with_demo("demo");
    let dir = data.path().to_str().expect("UTF-8").to_string();
    let mut served = start_binary(
        &["--data", &dir, "--addr", "127.0.0.1:0", "--no-watch"],
        &[("RUST_LOG", "info")],
    );
    let loads = || async {
        let text = reqwest::get(format!("{}/metrics", served.base))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text");
        text.lines()
            .find_map(|l| l.strip_prefix(r#"eventbox_bundle_loads_total{result="ok"} "#))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let until_loads = |n: u64| async move {
        let start = std::time::Instant::now();
        while loads().await < n {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "no reload {n}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    until_loads(1).await;
    // The same bytes in a new file (as `cp` over it, or a kiosk's refresh then its watch).
    let path = data.path().join("demo/event.json");
    let text = std::fs::read_to_string(&path).expect("event");
    std::fs::write(data.path().join("demo/.event.tmp"), &text).expect("write");
    std::fs::rename(data.path().join("demo/.event.tmp"), &path).expect("rename");
    served.signal("HUP");
    until_loads(2).await;
    data.write("demo/event.json", text.replace("33º Congresso", "Mudado"));
    served.signal("HUP");
    until_loads(3).await;
    served.signal("TERM");
    assert_eq!(served.wait_exit(), Some(0));

    let log = served.stderr();
    assert_eq!(log.matches("bundle loaded").count(), 2, "{log}");
}

/// The demo served by the binary with `extra`: its log once it served and stopped.
async fn demo_log(extra: &[&str]) -> String {
    let demo = demo_data();
    let mut args = vec![
        "--data",
        demo.to_str().expect("UTF-8"),
        "--addr",
        "127.0.0.1:0",
        "--no-watch",
    ];
    args.extend_from_slice(extra);
    let mut served = start_binary(&args, &[("RUST_LOG", "info")]);
    // The warning comes with the first load.
    assert_eq!(get_event(&served.base, "demo-token").await.0, 200);
    served.signal("TERM");
    assert_eq!(served.wait_exit(), Some(0));
    served.stderr()
}

#[tokio::test]
async fn following_sources_without_a_state_folder_warns_that_desk_writes_are_not_kept() {
    let warned = "writes made here are kept in memory only";
    let without = demo_log(&["--refresh-every", "1h"]).await;
    assert!(without.contains(warned), "{without}");
    let state = TempData::new();
    let dir = state.path().to_str().expect("UTF-8");
    let with = demo_log(&["--refresh-every", "1h", "--state", dir]).await;
    assert!(!with.contains(warned), "{with}");
    assert!(!demo_log(&[]).await.contains(warned));
}

#[tokio::test]
async fn json_logs_carry_an_access_line_per_request_with_the_token_cut() {
    let demo = demo_data();
    let mut served = start_binary(
        &[
            "--addr",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--access-log",
            "--no-watch",
        ],
        &[
            ("EVENTBOX_DATA", demo.to_str().expect("UTF-8")),
            ("RUST_LOG", "info"),
        ],
    );
    assert_eq!(get_event(&served.base, "demo-token").await.0, 200);

    served.signal("TERM");
    assert_eq!(served.wait_exit(), Some(0), "SIGTERM exits 0");

    let stderr = served.stderr();
    assert!(
        !stderr.contains("demo-token"),
        "a whole token in the logs:\n{stderr}"
    );
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    let access = lines
        .iter()
        .find(|l| l["target"] == "eventbox::access" && l["fields"]["status"] == 200)
        .unwrap_or_else(|| panic!("no access line in:\n{stderr}"));
    let f = &access["fields"];
    assert_eq!(f["method"], "GET");
    assert_eq!(f["path"], "/api/v1/event");
    assert_eq!(f["bundle"], "demo");
    assert_eq!(f["token"], "demo…");
    assert!(f["duration_us"].is_u64(), "{f}");
}

#[tokio::test]
async fn a_config_file_sets_options_and_flags_override_it() {
    let data = TempData::new();
    data.with_demo("from-file");
    let config = data.path().join("eventbox.toml");
    std::fs::write(
        &config,
        format!(
            "data = {:?}\naddr = \"127.0.0.1:1\"\nwatch = \"off\"\nidle-timeout = \"1m30s\"\n\
             cors-origin = [\"https://kiosk.example\"]\n",
            data.path().to_str().expect("UTF-8")
        ),
    )
    .expect("write config");

    // --port overrides the file's (unusable) port 1; data and CORS come from the file.
    let served = start_binary(
        &["--config", config.to_str().expect("UTF-8"), "--port", "0"],
        &[],
    );
    assert_eq!(get_event(&served.base, "demo-token").await.0, 200);
    let res = crate::helpers::client()
        .get(format!("{}/api/v1/event", served.base))
        .header("Authorization-Token", "demo-token")
        .header("Origin", "https://kiosk.example")
        .send()
        .await
        .expect("answered");
    assert_eq!(
        res.headers()
            .get("access-control-allow-origin")
            .and_then(|v| v.to_str().ok()),
        Some("https://kiosk.example"),
        "cors-origin from the file"
    );
}

#[test]
fn a_config_file_with_a_misspelt_key_or_a_bad_value_fails_naming_the_line() {
    let dir = TempData::new();
    for (text, expected) in [
        (
            "watch = \"off\"\nidle-timout = \"60s\"\n",
            ":2:1: unknown key \"idle-timout\"; did you mean \"idle-timeout\"?",
        ),
        (
            "watch = \"off\"\n\nidle-timeout = 60\n",
            ":3:16: idle-timeout: 60: add a unit, e.g. \"60s\" or \"60ms\"",
        ),
        (
            "watch = \"sometimes\"\n",
            ":1:9: watch: unknown variant `sometimes`, expected one of `native`, `poll`, `off`",
        ),
    ] {
        let config = dir.path().join("eventbox.toml");
        std::fs::write(&config, text).expect("write");
        let out = eventbox(&["--config", config.to_str().expect("UTF-8")], dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        let line = format!("eventbox: {}{expected}", config.display());
        assert!(
            stderr.lines().any(|l| l == line),
            "missing {line:?} in:\n{stderr}"
        );
    }
}

/// A variable of `serve` counts for `serve` only, and only where no flag gives the value: a bad
/// one stopped `check` and a `serve` whose flag was right. An empty one counts as unset, as
/// Compose gives `${VAR}` of a variable that is not set.
#[test]
fn serve_variables_count_only_for_serve_without_its_flag_and_empty_ones_are_unset() {
    let dir = TempData::new();
    let missing = dir.path().join("missing");
    let run = |args: &[&str], envs: &[(&str, &str)]| {
        let out = Command::new(env!("CARGO_BIN_EXE_eventbox"))
            .args(args)
            .envs(envs.iter().copied())
            .env_remove("EVENTBOX_DATA")
            .env_remove("EVENTBOX_ADDR")
            .output()
            .expect("run eventbox");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let demo = demo_data();
    let bad = [("EVENTBOX_IDLE_TIMEOUT", "60"), ("EVENTBOX_PORT", "eighty")];
    let (code, stderr) = run(&["check", demo.to_str().expect("UTF-8")], &bad);
    assert_eq!(code, Some(0), "check: {stderr}");

    // The options pass, then serve stops at the missing data folder: exit 2, its own message.
    let data = missing.to_str().expect("UTF-8");
    let flags = [
        "serve",
        "--data",
        data,
        "--idle-timeout",
        "60s",
        "--port",
        "0",
    ];
    for (args, envs) in [
        (&flags[..], &bad[..]),
        (
            &["serve", "--data", data][..],
            &[("EVENTBOX_PORT", ""), ("EVENTBOX_LOG_LEVEL", "")][..],
        ),
        (
            &["--data", data][..],
            &[("EVENTBOX_IDLE_TIMEOUT", ""), ("EVENTBOX_STATE", "")][..],
        ),
    ] {
        let (code, stderr) = run(args, envs);
        assert_eq!(code, Some(2), "{args:?} {envs:?}: {stderr}");
        assert!(stderr.contains("missing"), "{args:?} {envs:?}: {stderr}");
    }
    // Without its flag, a bad variable is still refused, naming it.
    let (code, stderr) = run(&["serve", "--data", data], &bad[..1]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("60: add a unit"), "{stderr}");

    // Kubernetes' service link for a Service named eventbox is no port: not read, said.
    let link = [("EVENTBOX_PORT", "tcp://10.0.0.1:8080")];
    let (code, stderr) = run(&["--data", data], &link);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("missing"), "{stderr}");
    assert!(
        stderr.contains("EVENTBOX_PORT=tcp://10.0.0.1:8080 is a Kubernetes service link"),
        "{stderr}"
    );
}

#[test]
fn durations_take_units_and_a_bare_number_is_refused_with_the_unit_to_add() {
    let dir = TempData::new();
    let missing = dir.path().join("missing");
    let data = missing.to_str().expect("UTF-8");
    // Accepted: the options pass, then serve stops at the missing data folder (exit 2 with its
    // own message), so the durations were taken.
    for d in ["60s", "1m30s", "250ms"] {
        let out = eventbox(&["--data", data, "--idle-timeout", d], dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{d}: {stderr}");
        assert!(stderr.contains("missing"), "{d}: {stderr}");
        assert!(!stderr.contains("add a unit"), "{d}: {stderr}");
    }
    let flag = eventbox(&["--data", data, "--idle-timeout", "60"], dir.path());
    let env = Command::new(env!("CARGO_BIN_EXE_eventbox"))
        .args(["--data", data])
        .env("EVENTBOX_MAX_DELAY", "60")
        .env_remove("EVENTBOX_ADDR")
        .output()
        .expect("run eventbox");
    let pull = eventbox(
        &[
            "pull",
            "--from",
            "http://127.0.0.1:1",
            "--token",
            "t",
            "--into",
            data,
            "--timeout",
            "5",
        ],
        dir.path(),
    );
    for (out, number) in [(flag, "60"), (env, "60"), (pull, "5")] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "{number}: add a unit, e.g. {number}s or {number}ms"
            )),
            "{stderr}"
        );
    }
}

#[tokio::test]
async fn serve_flags_and_env_turn_on_control_headers_max_delay_and_the_journal() {
    let served = serve_demo(
        &["--allow-control-headers", "--max-delay", "200ms"],
        &[("EVENTBOX_JOURNAL", "2")],
    )
    .await;
    let client = crate::helpers::client();

    let start = std::time::Instant::now();
    let status = client
        .get(format!("{}/api/v1/event", served.base))
        .header("Authorization-Token", "demo-token")
        .header("X-Eventbox-Status", "429")
        .header("X-Eventbox-Delay", "5000")
        .send()
        .await
        .expect("answered")
        .status();
    let took = start.elapsed();
    let journal = fetch(&served.base, "/_journal", None).await;
    let journal: serde_json::Value = serde_json::from_slice(&journal).expect("JSON");

    assert_eq!(status, 429);
    assert!(
        took >= std::time::Duration::from_millis(200) && took < std::time::Duration::from_secs(4),
        "--max-delay 200ms caps the 5 s asked for: {took:?}"
    );
    assert_eq!(journal["capacity"], 2);
    assert_eq!(journal["entries"][1]["status"], 429, "{journal}");
}

#[test]
fn check_strict_takes_the_max_delay_serve_will_run_with() {
    let data = TempData::new();
    bundle_with(
        &data,
        "slow",
        "bundle.toml",
        "tokens = [\"tok-slow\"]\n[simulate]\nlatency_ms = 45000\n",
    );

    // Against serve's default (30 s) the delay is cut: a warning, which --strict fails on.
    let (code, out, root) = check(&data, &["--strict"]);
    assert_eq!(code, 1, "{out}");
    let cut = format!("error: {root}/slow/bundle.toml: simulate: a delay of up to 45000 ms (every endpoint) is longer than --max-delay (30s): such delays are cut to it");
    assert!(out.lines().any(|l| l == cut), "missing {cut:?} in:\n{out}");

    // For a server run with --max-delay 1m the bundle is clean.
    let (code, out, _) = check(&data, &["--strict", "--max-delay", "1m"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn check_reports_simulate_problems_with_the_bundle_toml_key() {
    let data = TempData::new();
    bundle_with(
        &data,
        "sim",
        "bundle.toml",
        "tokens = [\"tok-sim\"]\n[simulate]\nerror_rate = 2\n\
         [simulate.endpoints.payments]\nlatency_ms = [800, 200]\n[simulate.endpoints.tickets]\n",
    );

    let (code, out, root) = check(&data, &[]);

    assert_eq!(code, 1, "{out}");
    for line in [
        format!("error: {root}/sim/bundle.toml: simulate.endpoints.payments.latency_ms: the range [800, 200] has its minimum above its maximum"),
        format!("error: {root}/sim/bundle.toml: simulate.error_rate: expected a number from 0 to 1, found the number 2"),
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in:\n{out}");
    }
    // The known endpoints are the table's keys: among them the one this file names rightly.
    let unknown = format!("warning: {root}/sim/bundle.toml: simulate.endpoints.tickets: unknown endpoint, ignored (known: ");
    let known = out
        .lines()
        .find_map(|l| l.strip_prefix(unknown.as_str()))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("missing {unknown:?} in:\n{out}"));
    let known: Vec<&str> = known.split(", ").collect();
    assert!(
        known.contains(&"payments") && !known.contains(&"tickets"),
        "{known:?}"
    );
}

#[test]
fn a_journal_over_100000_is_refused_from_the_flag_and_the_environment() {
    // A data folder that is not there: had the option been taken, serve would stop there (exit 2
    // too, with another message) rather than serve on.
    let dir = TempData::new();
    let missing = dir.path().join("missing");
    let data = missing.to_str().expect("UTF-8");
    let flag = eventbox(&["--data", data, "--journal", "100001"], dir.path());
    let env = Command::new(env!("CARGO_BIN_EXE_eventbox"))
        .args(["--data", data])
        .env("EVENTBOX_JOURNAL", "100001")
        .env_remove("EVENTBOX_ADDR")
        .output()
        .expect("run eventbox");

    for out in [flag, env] {
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("--journal keeps at most 100000 requests, not 100001"),
            "{stderr}"
        );
    }
}

/// Runs the binary without blocking the runtime (the test's server answers meanwhile).
async fn eventbox_async(args: &[&str]) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_eventbox"))
        .args(args)
        .env_remove("EVENTBOX_TOKEN")
        .output()
        .await
        .expect("run eventbox");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn pull_prints_plain_progress_and_a_summary_and_never_the_token() {
    let source = crate::helpers::spawn_app(&demo_data()).await;
    let data = TempData::new();
    let into = data.path().join("kiosk");
    let into = into.to_str().expect("a UTF-8 path");

    let (code, stdout, stderr) = eventbox_async(&[
        "pull",
        "--from",
        &source.base,
        "--token",
        "demo-token",
        "--into",
        into,
    ])
    .await;

    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.starts_with(&format!("pulled {}/api/v1 into {into}", source.base)),
        "{stdout}"
    );
    for line in ["payments", "payment_details", "total", "0 retries"] {
        assert!(stdout.contains(line), "{line} in:\n{stdout}");
    }
    // stderr is not a terminal here: plain lines, no bar.
    assert!(stderr.contains("pull: event: 1 record,"), "{stderr}");
    assert!(stderr.contains("pull: payment details:"), "{stderr}");
    assert!(!stderr.contains('\r'), "a bar was drawn: {stderr:?}");
    assert!(
        !(stdout.clone() + &stderr).contains("demo-token"),
        "the token was printed"
    );

    let (code, _, stderr) = eventbox_async(&[
        "pull",
        "--from",
        &source.base,
        "--token",
        "wrong-secret",
        "--into",
        into,
    ])
    .await;

    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("the server refused the token wron… (401)"),
        "{stderr}"
    );
    assert!(!stderr.contains("wrong-secret"), "{stderr}");
    let (code, _, stderr) =
        eventbox_async(&["pull", "--from", "ftp://x", "--token", "t", "--into", into]).await;
    assert_eq!(code, 2, "unusable options exit 2: {stderr}");
}

#[test]
fn gen_writes_a_bundle_that_check_strict_accepts() {
    let data = TempData::new();
    let into = data.path().join("big");

    let out = eventbox(
        &[
            "gen",
            "--into",
            into.to_str().expect("UTF-8"),
            "--payments",
            "500",
            "--seed",
            "9",
        ],
        data.path(),
    );

    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("500 payments") && stdout.contains("token big-…"),
        "{stdout}"
    );
    assert!(!stdout.contains("big-token"), "{stdout}");
    let (code, report, _) = check(&data, &["--strict"]);
    assert_eq!(code, 0, "{report}");
}

#[tokio::test]
async fn port_0_and_the_port_variable_choose_the_port() {
    let demo = demo_data();
    let demo = demo.to_str().expect("UTF-8");
    // --port 0 (and -p): any free port, read back from the listening line.
    for flag in ["--port", "-p"] {
        let served = start_binary(&["-d", demo, "--no-watch", flag, "0"], &[]);
        assert!(
            served.base.starts_with("http://127.0.0.1:"),
            "{}",
            served.base
        );
        assert_eq!(get_event(&served.base, "demo-token").await.0, 200);
    }
    // PORT when --addr has no port: a port known free a moment ago.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let served = start_binary(
        &["-d", demo, "--no-watch", "-a", "127.0.0.1"],
        &[("PORT", &free.to_string())],
    );
    assert_eq!(served.base, format!("http://127.0.0.1:{free}"));
    assert_eq!(get_event(&served.base, "demo-token").await.0, 200);
    // --addr with a port wins over PORT.
    let served = start_binary(
        &["-d", demo, "--no-watch", "--addr", "127.0.0.1:0"],
        &[("PORT", "1")],
    );
    assert_ne!(served.base, "http://127.0.0.1:1");
    assert_eq!(get_event(&served.base, "demo-token").await.0, 200);
}

/// Stops a served binary with SIGTERM and returns its stderr, every line written.
fn stop(mut served: Served) -> String {
    served.signal("TERM");
    assert_eq!(served.wait_exit(), Some(0), "SIGTERM exits 0");
    served.stderr()
}

#[tokio::test]
async fn logs_written_to_a_file_have_no_colour_codes() {
    let demo = demo_data();
    let envs = [
        ("EVENTBOX_DATA", demo.to_str().expect("UTF-8")),
        ("NO_COLOR", ""),
        ("RUST_LOG", "info"),
    ];
    let args = [
        "--addr",
        "127.0.0.1:0",
        "--no-watch",
        "--access-log",
        "--allow-control-headers",
    ];
    let served = start_binary(&args, &envs);
    assert_eq!(get_event(&served.base, "demo-token").await.0, 200);
    assert_eq!(get_event(&served.base, "wrong-token").await.0, 401);
    // A truncated answer: its line counts the half sent, not the length announced.
    let whole = crate::helpers::client()
        .get(format!("{}/api/v1/payments", served.base))
        .header("Authorization-Token", "demo-token")
        .header("Accept-Encoding", "identity")
        .send()
        .await
        .expect("an answer")
        .bytes()
        .await
        .expect("a body")
        .len();
    let _ = crate::helpers::client()
        .get(format!("{}/api/v1/payments", served.base))
        .header("Authorization-Token", "demo-token")
        .header("Accept-Encoding", "identity")
        .header("X-Eventbox-Fault", "truncate")
        .send()
        .await;
    let stderr = stop(served);
    let truncated = stderr
        .lines()
        .filter(|l| l.contains("/api/v1/payments"))
        .nth(1)
        .unwrap_or_else(|| panic!("two payments lines:\n{stderr}"));
    assert!(
        truncated.contains(&format!("bytes={} ", whole / 2)),
        "{whole} bytes whole: {truncated}"
    );

    // -q on the command line wins over RUST_LOG: warnings only.
    let quiet = start_binary(&[&args[..], &["-q"]].concat(), &envs);
    assert_eq!(get_event(&quiet.base, "demo-token").await.0, 200);
    let quiet = stop(quiet);

    assert!(
        stderr.contains("/api/v1/event"),
        "the access lines:\n{stderr}"
    );
    for field in [
        "client=127.0.0.1:",
        "status=200",
        "bytes=",
        "user_agent=",
        "bundle=demo",
        "token=demo…",
    ] {
        assert!(
            stderr.contains(field),
            "{field} not in the access lines:\n{stderr}"
        );
    }
    assert!(stderr.contains(" WARN "), "a warning:\n{stderr}");
    assert!(
        !stderr.as_bytes().contains(&0x1b),
        "an escape byte in logs written to a file:\n{stderr:?}"
    );
    assert!(quiet.contains(" WARN "), "-q keeps warnings:\n{quiet}");
    assert!(!quiet.contains(" INFO "), "-q: no info lines:\n{quiet}");
}

#[tokio::test]
async fn json_logs_and_the_startup_lines_are_all_json() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let dir = tempfile::tempdir().expect("tempdir");
    let stderr_path = dir.path().join("stderr.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_eventbox"))
        .args([
            "--addr",
            "127.0.0.1:0",
            "--no-watch",
            "--log-format",
            "json",
        ])
        .args(["--allow-control-headers"])
        .env("EVENTBOX_DATA", demo_data())
        .env("RUST_LOG", "debug")
        .env_remove("EVENTBOX_ADDR")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("start eventbox");
    let stdout = child.stdout.take().expect("stdout");
    let running = Running(child);
    let mut lines = BufReader::new(stdout).lines();
    let parse = |line: String| -> serde_json::Value {
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    };
    let listening = parse(lines.next().expect("a line").expect("UTF-8"));
    let bundle = parse(lines.next().expect("a line").expect("UTF-8"));
    let base = listening["fields"]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("no url in {listening}"))
        .to_string();
    assert_eq!(get_event(&base, "demo-token").await.0, 200);
    let served = Served {
        running,
        base,
        stderr_path,
        stdout_path: dir.path().join("stdout.log"),
        stdout_copy: None,
        _dir: dir,
    };
    let stderr = stop(served);

    assert_eq!(listening["level"], "INFO", "{listening}");
    assert!(
        listening["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("eventbox listening on http://127.0.0.1:")),
        "{listening}"
    );
    assert_eq!(bundle["fields"]["bundle"], "demo", "{bundle}");
    assert_eq!(bundle["fields"]["token"], "demo…", "{bundle}");
    assert!(stderr.lines().count() >= 2, "some log lines:\n{stderr}");
    for line in stderr.lines() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
        assert!(v["level"].is_string(), "{line}");
    }
    assert!(stderr.contains("control headers are obeyed"), "{stderr}");
}

#[test]
fn completions_and_the_man_page_are_printed() {
    let dir = TempData::new();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = eventbox(&["completions", shell], dir.path());
        let script = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        assert!(
            script.contains("eventbox") && script.contains("idle-timeout"),
            "{shell}: {script}"
        );
    }
    let bad = eventbox(&["completions", "cmd.exe"], dir.path());
    assert_eq!(bad.status.code(), Some(2));

    let man = eventbox(&["man"], dir.path());
    let page = String::from_utf8_lossy(&man.stdout);
    assert_eq!(man.status.code(), Some(0));
    assert!(
        page.starts_with(".ie") || page.contains(".TH eventbox 1"),
        "{page}"
    );
    assert!(page.contains(".TH eventbox 1"), "{page}");
    assert!(page.contains("idle\\-timeout"), "{page}");
}

#[test]
fn check_format_json_is_one_document_with_every_problem() {
    let data = TempData::new();
    clean_bundle(&data, "good");
    data.write("good/bundle.toml", "tokens = [\"tok-good\"]\n");
    bundle_with(
        &data,
        "broken",
        "payments.toml",
        "count = 2\n[[data]]\nid_event = \n",
    );

    let (code, out, root) = check(&data, &["--format", "json"]);

    assert_eq!(code, 1, "{out}");
    assert_eq!(out.lines().count(), 1, "one line: {out}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(doc["ok"], false, "{doc}");
    assert_eq!(doc["strict"], false, "{doc}");
    assert_eq!(doc["summary"]["bundles"], 2, "{doc}");
    assert_eq!(doc["summary"]["served"], 1, "{doc}");
    assert_eq!(doc["summary"]["errors"], 1, "{doc}");
    let bundles = doc["bundles"].as_array().expect("bundles");
    let broken = bundles
        .iter()
        .find(|b| b["name"] == "broken")
        .unwrap_or_else(|| panic!("no broken bundle in {doc}"));
    assert_eq!(broken["served"], false);
    let problem = &broken["problems"][0];
    assert_eq!(problem["severity"], "error", "{problem}");
    assert_eq!(
        problem["file"],
        format!("{root}/broken/payments.toml"),
        "{problem}"
    );
    assert_eq!(
        (problem["line"].as_u64(), problem["column"].as_u64()),
        (Some(3), Some(12))
    );
    assert!(problem["message"].is_string(), "{problem}");
    let good = bundles.iter().find(|b| b["name"] == "good").expect("good");
    assert_eq!(good["served"], true);
    assert_eq!(good["problems"], serde_json::json!([]));

    let clean = TempData::new();
    clean_bundle(&clean, "good");
    clean.write("good/bundle.toml", "tokens = [\"tok-good\"]\n");
    let (code, out, _) = check(&clean, &["--format", "json"]);
    assert_eq!(code, 0, "{out}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(doc["ok"], true, "{doc}");
}

#[tokio::test]
async fn with_a_fifo_in_a_bundle_serve_answers_the_others_reloads_and_exits_on_sigterm() {
    let data = TempData::new();
    data.with_demo("demo");
    data.with_demo("piped");
    data.write("piped/bundle.toml", "tokens = [\"piped-token\"]\n");
    let fifo = data.path().join("piped/payments.json");
    std::fs::remove_file(&fifo).expect("remove");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let dir = data.path().to_str().expect("UTF-8").to_string();
    let mut served = start_binary(&["--data", &dir, "--addr", "127.0.0.1:0"], &[]);

    assert_eq!(get_event(&served.base, "demo-token").await.0, 200);
    assert_eq!(get_event(&served.base, "piped-token").await.0, 503);
    let status = served.status().await;
    let piped = status["bundles"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["name"] == "piped"))
        .cloned()
        .unwrap_or_default();
    assert!(
        piped["errors"]
            .to_string()
            .contains("payments.json: a named pipe (FIFO)"),
        "{piped}"
    );
    // The watch keeps reloading the other bundle.
    let text = std::fs::read_to_string(data.path().join("demo/event.json")).expect("event");
    data.write(
        "demo/event.json",
        text.replace("33º Congresso", "Recarregado ao lado do pipe"),
    );
    let start = std::time::Instant::now();
    loop {
        let (_, now) = get_event(&served.base, "demo-token").await;
        if now["data"][0]["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("Recarregado ao lado do pipe"))
        {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "the other bundle did not reload"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let stopping = std::time::Instant::now();
    served.signal("TERM");
    served.wait_exit();

    assert!(
        stopping.elapsed() < std::time::Duration::from_secs(10),
        "exit took {:?}, more than the drain time",
        stopping.elapsed()
    );
}

/// `--memory-file off` (here from the environment) keeps bodies out of the memory file, for the
/// whole process: `/metrics` says so, the log says why, and a large body is served whole. (Only
/// Linux has the memory file.)
#[cfg(target_os = "linux")]
#[tokio::test]
async fn memory_file_off_keeps_bodies_on_the_heap_and_says_so() {
    let (data, _) = crate::http::big_payments();
    let dir = data.path().to_str().expect("UTF-8");
    // For each setting: the memory file's three series after a large body was served, and the log.
    let mut runs = Vec::new();
    for memory_file in ["on", "off"] {
        let served = start_binary(
            &["--addr", "127.0.0.1:0", "--no-watch", "-d", dir],
            &[("EVENTBOX_MEMORY_FILE", memory_file), ("RUST_LOG", "info")],
        );
        // Bound first, then loaded: the event answers when it is.
        assert_eq!(get_event(&served.base, fixtures::TOKEN).await.0, 200);
        let body = fetch(&served.base, "/api/v1/payments", Some(fixtures::TOKEN)).await;
        let served_json: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(served_json["data"].as_array().map(Vec::len), Some(12_000));
        let text =
            String::from_utf8_lossy(&fetch(&served.base, "/metrics", None).await).into_owned();
        let series = ["in_use", "bytes", "sent_bytes_total"]
            .map(|s| crate::helpers::metric(&text, &format!("eventbox_memory_file_{s}")));
        runs.push((series, body.len() as f64, stop(served)));
    }
    let ([in_use, held, sent], _, log) = &runs[1];
    assert_eq!(
        (*in_use, *held, *sent),
        (Some(0.0), Some(0.0), Some(0.0)),
        "off: {log}"
    );
    assert!(log.contains("--memory-file off"), "{log}");
    // On, it is in use and the body went out of it, unless this machine cannot have one (the
    // log then says why).
    let ([in_use, _, sent], len, log) = &runs[0];
    if *in_use == Some(1.0) {
        assert!(
            sent.is_some_and(|s| s >= len / 2.0),
            "on: {sent:?} of {len}"
        );
    } else {
        let why = [
            "large bodies are kept on the heap",
            "large bodies are copied when sent",
        ];
        assert!(why.iter().any(|w| log.contains(w)), "{log}");
    }
}

/// Connections over `--max-connections-per-ip` are closed at once; the log says so (once in a
/// while, with how many), where it used to say nothing at the default level.
#[test]
fn connections_over_the_per_address_limit_are_logged() {
    let served = start_binary(
        &[
            "--data",
            demo_data().to_str().expect("utf-8"),
            "--addr",
            "127.0.0.1:0",
            "--max-connections-per-ip",
            "1",
        ],
        &[],
    );
    let addr = served.base.trim_start_matches("http://").to_string();
    let _held = std::net::TcpStream::connect(&addr).expect("the first connection");
    let start = std::time::Instant::now();
    loop {
        // Each connection over the limit is closed at once; the first one closed is logged.
        let _ = std::net::TcpStream::connect(&addr);
        let log = served.stderr();
        if log.contains("over --max-connections-per-ip 1 from one address") {
            assert!(log.contains("client=127.0.0.1"), "{log}");
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "not logged: {log}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A bundle whose bundle.toml loses its `[source]` (a hand edit, a file restored) keeps its
/// writes at the desk from then on: the log says so when it happens, not when a desk finds
/// its check-ins never arrived.
#[tokio::test]
async fn a_bundle_that_stops_naming_its_source_is_said_to_keep_its_writes_at_the_desk() {
    let data = TempData::new();
    let bundle = data.path().join("summit");
    crate::helpers::copy_demo(&bundle);
    let toml = bundle.join("bundle.toml");
    std::fs::write(
        &toml,
        "tokens = [\"demo-token\"]\n[source]\nurl = \"http://127.0.0.1:9/api/v1\"\n",
    )
    .expect("bundle.toml");
    let served = start_binary(
        &[
            "--data",
            data.path().to_str().expect("utf-8"),
            "--addr",
            "127.0.0.1:0",
        ],
        &[],
    );
    let said = "names no [source] any more: writes made here from now on are kept at the desk";
    served.ready().await;
    assert!(!served.stderr().contains(said));
    std::fs::write(&toml, "tokens = [\"demo-token\"]\n").expect("bundle.toml");
    let start = std::time::Instant::now();
    while !served.stderr().contains(said) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "not said: {}",
            served.stderr()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        served.stderr().contains("bundle=summit"),
        "{}",
        served.stderr()
    );
}

/// A stop during the first load (a large bundle takes seconds) does not wait for the load:
/// the process exits 0, saying it stopped before the load was done (the line is said only
/// when the stop wins the race; without it the stop waited for the load).
#[tokio::test]
async fn a_stop_during_the_first_load_does_not_wait_for_it() {
    let data = TempData::new();
    fixtures::write_json(&data, "big");
    // About 15 MB: seconds of decoding in a debug build, far longer than the stop takes.
    data.write("big/payments.json", crate::http::many_payments(30_000, 'a'));
    let dir = data.path().to_str().expect("UTF-8");
    let mut served = start_binary(&["serve", "--data", dir, "--addr", "127.0.0.1:0"], &[]);
    // Listening, not loaded yet: the stop comes during the load.
    let ready = crate::helpers::client()
        .get(format!("{}/readyz", served.base))
        .send()
        .await
        .expect("an answer");
    assert_eq!(ready.status(), 503);

    served.signal("TERM");

    assert_eq!(served.wait_exit(), Some(0));
    let log = served.stderr();
    assert!(
        log.contains("stopped before the first load was done"),
        "waited for the load: {log}"
    );
}
