//! The status page (`/_ui`) in a real browser: headless Chromium driven through ChromeDriver
//! (Debian's `chromium` and `chromium-driver`, installed by `.ci/run`). A kiosk follows a source
//! that goes away and comes back; the page, refreshing itself, shows the bundle going offline and
//! online again, and the writes waiting meanwhile. The screenshot it saves is the one
//! docs/kiosk.md shows (`EVENTBOX_BLESS=1` writes it there; otherwise under target/).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{ClientBuilder, Locator};
use serde_json::json;
use tokio::net::TcpListener;

use crate::forward::{Desk, Source};
use crate::helpers::DEMO_TOKEN;
use crate::kiosk::until;

/// ChromeDriver, stopped on drop.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| std::path::Path::new(dir).join(program))
        .find(|p| p.is_file())
}

/// A headless Chromium session through ChromeDriver on a free port, or `None` (saying so) when
/// they are not installed.
async fn browser() -> Option<(Driver, fantoccini::Client)> {
    let (Some(driver), Some(chromium)) = (which("chromedriver"), which("chromium")) else {
        // .ci/run installs both; a developer machine without them skips, saying so.
        eprintln!("skipped: chromedriver and chromium are not installed (apt-get install chromium chromium-driver)");
        return None;
    };
    // ChromeDriver on a free port; ready when its /status answers.
    let port = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let driver = Driver(
        Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver"),
    );
    let webdriver = format!("http://127.0.0.1:{port}");
    until(Duration::from_secs(20), "chromedriver to answer", || {
        let url = format!("{webdriver}/status");
        async move {
            crate::helpers::client()
                .get(url)
                .send()
                .await
                .ok()
                .map(|_| ())
        }
    })
    .await;
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"binary": chromium, "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                                             "--disable-dev-shm-usage", "--window-size=1000,700"]}),
    );
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&webdriver)
        .await
        .expect("a browser session");
    Some((driver, client))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_a_source_going_offline_and_back_and_the_writes_waiting() {
    let Some((_driver, browser)) = browser().await else {
        return;
    };

    // The source, which will go away and come back; the desk, following it every 200 ms.
    let (source_at, source) = Source::start().await;
    let desk = Desk::of(&source, |o| {
        o.refresh_every = Some(Duration::from_millis(200));
        o.offline_after = 1;
        o.journal = 50;
    })
    .await;
    let kiosk = &desk.server;

    // What the page shows of the demo bundle: its source's state and the writes waiting.
    let shown = |browser: fantoccini::Client| async move {
        let attr = |css: &'static str, name: &'static str| {
            let browser = browser.clone();
            async move {
                let e = browser.find(Locator::Css(css)).await.ok()?;
                e.attr(name).await.ok().flatten()
            }
        };
        let state = attr("[data-bundle=demo] [data-state]", "data-state").await;
        let pending = attr("[data-bundle=demo] [data-pending]", "data-pending").await;
        (state, pending)
    };
    browser
        .goto(&format!("{}/_ui", kiosk.base))
        .await
        .expect("the page opens");
    until(
        Duration::from_secs(15),
        "the page to show the source online",
        || {
            let b = browser.clone();
            async move { (shown(b).await.0.as_deref() == Some("online")).then_some(()) }
        },
    )
    .await;

    // The source goes away; a check-in made at the desk waits.
    source.shutdown().await;
    let code = kiosk.get("/api/v1/attendees", DEMO_TOKEN).await.json()["data"][0]["checkin_code"]
        .to_string();
    let body = serde_json::to_vec(&json!([{"checkin_code": code, "checkin": 1,
                                           "checkin_date": "2026-09-15T08:00:00"}]))
    .expect("JSON");
    let res = kiosk
        .send(
            reqwest::Method::POST,
            "/api/v1/checkin/attendees",
            Some(DEMO_TOKEN),
            Some(("application/json", &body)),
        )
        .await;
    assert_eq!(res.status, 200);
    until(
        Duration::from_secs(15),
        "the page to show offline and a write waiting",
        || {
            let b = browser.clone();
            async move {
                let (state, waiting) = shown(b).await;
                (state.as_deref() == Some("offline") && waiting.as_deref() == Some("1"))
                    .then_some(())
            }
        },
    )
    .await;
    let png = browser.screenshot().await.expect("a screenshot");
    let shot = if std::env::var_os("EVENTBOX_BLESS").is_some() {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/kiosk-ui.png")
    } else {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/kiosk-ui.png")
    };
    std::fs::write(&shot, &png).expect("the screenshot is saved");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");

    // On a phone's width the source's URL and its last error wrap inside the card: nothing
    // runs off the screen.
    browser.set_window_size(360, 800).await.expect("resized");
    let widths = browser
        .execute(
            "return [window.innerWidth, document.documentElement.scrollWidth]",
            vec![],
        )
        .await
        .expect("measured");
    let (inner, scroll) = (widths[0].as_u64(), widths[1].as_u64());
    assert!(
        inner.is_some_and(|i| i <= 400) && scroll <= inner,
        "the page is {scroll:?} px wide in a window {inner:?} px wide"
    );
    browser.set_window_size(1280, 800).await.expect("resized");

    // It comes back: online again, and the write has gone through.
    let _source = source_at.again().await;
    until(
        Duration::from_secs(20),
        "the page to show online, nothing waiting",
        || {
            let b = browser.clone();
            async move {
                let (state, waiting) = shown(b).await;
                (state.as_deref() == Some("online") && waiting.as_deref() == Some("0"))
                    .then_some(())
            }
        },
    )
    .await;
    browser.close().await.expect("the session closes");
}

/// Waits (15 s at most) until the page holds an element `css` selects.
async fn until_found(browser: &fantoccini::Client, css: &'static str, what: &str) {
    until(Duration::from_secs(15), what, || {
        let b = browser.clone();
        async move { b.find(Locator::Css(css)).await.ok().map(|_| ()) }
    })
    .await;
}

/// Opens the status page of the server at `base` and waits until it shows the bundle `demo`.
async fn open_on_demo(browser: &fantoccini::Client, base: &str) {
    browser
        .goto(&format!("{base}/_ui"))
        .await
        .expect("the page opens");
    until_found(browser, "[data-bundle=demo]", "the page to show the bundle").await;
}

/// The text of the element `css` selects, if the page has one.
async fn text(browser: &fantoccini::Client, css: &'static str) -> Option<String> {
    browser
        .find(Locator::Css(css))
        .await
        .ok()?
        .text()
        .await
        .ok()
}

/// Waits (15 s at most) until the element `css` selects holds `wanted`.
async fn until_text(browser: &fantoccini::Client, css: &'static str, wanted: &str, what: &str) {
    until(Duration::from_secs(15), what, || async {
        text(browser, css)
            .await
            .filter(|t| t.contains(wanted))
            .map(|_| ())
    })
    .await;
}

const SECRET: &str = "ui-Admin-secret-5b1d";

/// Seen from another machine (a container's published port, a desk's tablet), the page opens
/// without the admin token (it holds no data), asks for the token when the server wants one,
/// and then shows the bundles: a browser cannot send a bearer by itself, and the page's own
/// requests sent none, so from elsewhere it could not be used at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_another_machine_the_status_page_asks_for_the_admin_token_then_shows_the_bundles() {
    let Some(ip) = crate::admin::remote_ip() else {
        return;
    };
    let Some((_driver, browser)) = browser().await else {
        return;
    };
    let app = crate::helpers::loaded_with(&crate::helpers::demo_data(), |o| {
        o.admin_token = Some(eventbox::token::Token::new(SECRET));
    });
    let server = crate::helpers::serve_app_at(ip, app).await;
    browser
        .goto(&format!("{}/_ui", server.base))
        .await
        .expect("the page opens");
    until(
        Duration::from_secs(15),
        "the page to ask for the token",
        || {
            let b = browser.clone();
            async move {
                let form = b.find(Locator::Css("#login")).await.ok()?;
                form.attr("hidden").await.ok()?.is_none().then_some(())
            }
        },
    )
    .await;
    assert!(
        browser
            .find(Locator::Css("[data-bundle=demo]"))
            .await
            .is_err(),
        "nothing shown without the token"
    );
    // Types `token` into the page's field and sends the form.
    let log_in = |token: &'static str| {
        let b = browser.clone();
        async move {
            let field = b.find(Locator::Css("#token")).await.expect("the field");
            field.clear().await.expect("cleared");
            field.send_keys(token).await.expect("typed");
            let button = b
                .find(Locator::Css("#login button"))
                .await
                .expect("the button");
            button.click().await.expect("clicked");
        }
    };
    log_in("not-the-secret").await;
    until(
        Duration::from_secs(15),
        "a wrong token to be refused",
        || {
            let b = browser.clone();
            async move {
                let why = b
                    .find(Locator::Css("#login-why"))
                    .await
                    .ok()?
                    .text()
                    .await
                    .ok()?;
                why.contains("not the admin token").then_some(())
            }
        },
    )
    .await;
    log_in(SECRET).await;
    until_found(
        &browser,
        "[data-bundle=demo]",
        "the page to show the demo bundle",
    )
    .await;
    let hidden = browser
        .find(Locator::Css("#login"))
        .await
        .expect("the form")
        .attr("hidden")
        .await
        .expect("an attribute");
    assert!(hidden.is_some(), "the form is put away");
    browser.close().await.expect("the session closes");
}

/// Once the server stops answering, what the page shows stays but is greyed (the page's
/// `stale` class) and the line at the top says why: a stopped desk never looks online. A data
/// folder with no bundle says so rather than showing nothing.
#[tokio::test]
async fn a_page_whose_server_stopped_greys_what_it_shows_and_says_why() {
    let Some((_driver, browser)) = browser().await else {
        return;
    };
    let data = crate::helpers::TempData::new();
    data.with_demo("demo");
    let server = crate::helpers::spawn_app(data.path()).await;
    let empty = crate::helpers::TempData::new();
    let nothing = crate::helpers::spawn_app(empty.path()).await;

    browser
        .goto(&format!("{}/_ui", nothing.base))
        .await
        .expect("the page opens");
    until_text(
        &browser,
        "#bundles",
        "No bundle in the data folder",
        "the page to say no bundle",
    )
    .await;

    open_on_demo(&browser, &server.base).await;
    let stale = |b: fantoccini::Client| async move {
        b.find(Locator::Css("body"))
            .await
            .ok()?
            .attr("class")
            .await
            .ok()
            .flatten()
            .is_some_and(|c| c.contains("stale"))
            .then_some(())
    };
    assert!(
        stale(browser.clone()).await.is_none(),
        "fresh while answered"
    );

    server.shutdown().await;
    until(
        Duration::from_secs(15),
        "the page to grey what it shows",
        || stale(browser.clone()),
    )
    .await;
    let said = text(&browser, "#when").await.unwrap_or_default();
    assert!(
        said.starts_with("cannot reach eventbox") && said.contains("(shown: its last answer)"),
        "{said}"
    );
    // Since the first failed round, not the latest: how long the desk has been down.
    let since = |s: &str| {
        Some(
            s.split(" since ")
                .nth(1)?
                .split(" (tried")
                .next()?
                .to_string(),
        )
    };
    let first = since(&said).unwrap_or_else(|| panic!("since when: {said}"));
    let browser_ref = &browser;
    let later = until(Duration::from_secs(15), "a later failed round", || async {
        let now = text(browser_ref, "#when").await.unwrap_or_default();
        (now != said).then_some(now)
    })
    .await;
    assert_eq!(since(&later), Some(first), "{later}");
    assert!(
        browser
            .find(Locator::Css("[data-bundle=demo]"))
            .await
            .is_ok(),
        "what it showed stays"
    );
    browser.close().await.expect("the session closes");
}

/// What is wrong with the server as a whole, not one bundle (here its data folder cannot be
/// read), is said above the bundles, which stay shown as what is still served; it goes once
/// the folder is back. The page used to show the bundles alone: nothing said they were the
/// last ones read.
#[tokio::test]
async fn the_page_says_when_the_data_folder_cannot_be_read_and_when_it_can_again() {
    let Some((_driver, browser)) = browser().await else {
        return;
    };
    let data = crate::helpers::TempData::new();
    data.with_demo("demo");
    let server = crate::helpers::spawn_app(data.path()).await;
    open_on_demo(&browser, &server.base).await;
    assert_eq!(text(&browser, "#server").await.as_deref(), Some(""));

    let moved = tempfile::tempdir().expect("tmp");
    let aside = moved.path().join("data");
    std::fs::rename(data.path(), &aside).expect("move the data folder away");
    let app = server.app.clone();
    let failed = tokio::task::spawn_blocking(move || app.load())
        .await
        .expect("task");
    assert!(failed.is_err());
    until_text(
        &browser,
        "#server",
        "Cannot read the data folder",
        "the page to say the data folder cannot be read",
    )
    .await;
    let said = text(&browser, "#server").await.unwrap_or_default();
    assert!(said.contains("the last ones read"), "{said}");
    assert!(
        browser
            .find(Locator::Css("[data-bundle=demo]"))
            .await
            .is_ok(),
        "the bundle still served stays shown"
    );

    std::fs::rename(&aside, data.path()).expect("move it back");
    let app = server.app.clone();
    tokio::task::spawn_blocking(move || app.load())
        .await
        .expect("task")
        .expect("reloads");
    until(Duration::from_secs(15), "the problem to go", || async {
        text(&browser, "#server")
            .await
            .filter(String::is_empty)
            .map(|_| ())
    })
    .await;
    browser.close().await.expect("the session closes");
}
