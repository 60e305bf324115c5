//! The write forwarder (kiosk mode): sends the writes made on site to the bundle's source, in
//! order, with their original bodies, once each (`crate::writes::queue` keeps what happened).
//!
//! One task for every bundle. It wakes when a write becomes durable, when a source comes
//! online, and on a backoff tick; for each bundle with a source that is not offline, it sends
//! the bundle's entries in `seq` order. A 2xx takes an entry out of the queue; a refusal of the
//! entry itself ([`refuses_entry`]: a 4xx of the API, but those about the source or the
//! sender) moves it to the rejected list and goes on; anything else (a 5xx, no answer, a token
//! refused, a proxy's page) stops that bundle until later, each bundle on its own backoff, so
//! the order is kept. An entry that was maybe sent before a crash is checked first: a registration whose e-mail the source lists already is taken as
//! accepted, not sent twice (check-ins are the same when sent again).
//!
//! Check-ins naming someone registered here are sent with the source's id and code for them,
//! looked up by e-mail when not known; those of someone the source does not list are parked
//! (the desk's code may be someone else's there). Parked check-ins are looked up again each
//! time the bundle's data changes here (a refresh brought the source's new list), and on
//! start, before anything else of the bundle goes; those of someone the source lists now go
//! first, so each person's check-ins reach the source in the order they were made (also one
//! made since by the code the new data shows for them).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{changed, Sources};
use crate::api::Route;
use crate::reload::Reloader;
use crate::token::{Token, TOKEN_HEADER};
use crate::writes::queue::{with_items, Entry, Ids, Kind, LeftOut, Outcome};
use crate::writes::Writes;

/// The longest wait between two rounds (a source that went away is tried again this often).
const MAX_WAIT: Duration = Duration::from_secs(5);
/// The first wait after a round that left entries behind.
const FIRST_WAIT: Duration = Duration::from_millis(200);

/// The running forwarder; dropping it stops it.
#[derive(Debug)]
pub struct Forwarder {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts forwarding. Needs a tokio runtime.
pub(crate) fn spawn(
    writes: Arc<Writes>,
    sources: Arc<Sources>,
    reloader: Arc<Reloader>,
    max_bytes: u64,
) -> Forwarder {
    Forwarder {
        task: tokio::spawn(run(writes, sources, reloader, max_bytes)),
    }
}

/// Where a bundle's writes go, and the bundle here.
struct Source<'a> {
    client: &'a reqwest::Client,
    base: String,
    token: Token,
    reloader: &'a Arc<Reloader>,
    bundle: &'a str,
    /// The most bytes of the source's participant list read (`--max-file-bytes`).
    max_bytes: u64,
}

/// What the forwarder needs of a bundle as served here.
struct Served {
    /// Its first token: the one sent to its source.
    token: Token,
    /// When the version it serves was loaded.
    loaded: DateTime<Utc>,
    /// The `id_event` of that version's data.
    event: i64,
}

/// How `bundle` is served now, or why its writes cannot go: only while the version served is
/// the folder's latest files (its bundle.toml's first token, its event), never an older one
/// kept while new files have errors or their token clashes: that one's event and the latest
/// bundle.toml's token and `[source]` may be two events'. The catalog's lock is a blocking
/// one (a reload may hold it): off the async threads.
async fn served(reloader: &Arc<Reloader>, bundle: &str) -> Result<Served, &'static str> {
    const GONE: &str = "the bundle is not loaded here";
    let (reloader, name) = (Arc::clone(reloader), bundle.to_string());
    tokio::task::spawn_blocking(move || {
        reloader.with_catalog(|c| {
            let e = c.entry(&name).ok_or(GONE)?;
            let v = e.serving.as_ref().ok_or(
                "the bundle is not served (its files have errors, or a token clash): writes \
                 wait until it is",
            )?;
            if !e.candidate.as_ref().is_some_and(|c| Arc::ptr_eq(c, v)) {
                return Err(
                    "the bundle's latest files are not served (errors, or a token clash; \
                     /status says which): writes wait until they are",
                );
            }
            Ok(Served {
                token: v.tokens.first().cloned().ok_or(GONE)?,
                loaded: v.loaded_at,
                event: v.summary.id_event,
            })
        })
    })
    .await
    .unwrap_or(Err(GONE))
}

async fn run(writes: Arc<Writes>, sources: Arc<Sources>, reloader: Arc<Reloader>, max_bytes: u64) {
    let client = match reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(20))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("eventbox-forward/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "the write forwarder could not start");
            return;
        }
    };
    // Per bundle, why its writes wait, said once.
    let mut said: HashMap<String, String> = HashMap::new();
    let mut backoff = Backoff::default();
    // Per bundle, when the data served was loaded as its parked check-ins were last looked up.
    let mut looked: HashMap<String, DateTime<Utc>> = HashMap::new();
    // Per bundle holding writes made for another event, how many and which events, said once.
    let mut held: HashMap<String, (usize, std::collections::BTreeSet<i64>)> = HashMap::new();
    // Bundles without a source to send to while writes wait for them, and why, each said once.
    let mut stranded: std::collections::BTreeMap<String, &'static str> = Default::default();
    // A new snapshot may list someone parked (a refresh, a reload, SIGHUP): a round at once.
    let mut published = reloader.published();
    loop {
        // Every source's next change between online and offline is caught from here on, also
        // one during the round (a source back online is tried at once).
        let healths = sources.all();
        let mut flips: Vec<_> = healths.iter().map(|(_, h)| Box::pin(h.changed())).collect();
        for flip in &mut flips {
            flip.as_mut().enable();
        }
        let was_offline: std::collections::HashSet<String> = healths
            .iter()
            .filter(|(_, h)| h.is_offline())
            .map(|(b, _)| b.clone())
            .collect();
        for bundle in writes.queue.bundles_ready() {
            let Some(health) = sources.get(&bundle) else {
                // No source now, though these writes were made for one: its folder went away,
                // or its bundle.toml names none. They are kept until it is back: say so.
                let (reloader, name) = (Arc::clone(&reloader), bundle.clone());
                let known = tokio::task::spawn_blocking(move || {
                    reloader.with_catalog(|c| c.entry(&name).is_some())
                })
                .await
                .unwrap_or(true);
                let why = if known {
                    "writes wait for a bundle whose bundle.toml names no [source] now: they are \
                     kept, and sent once it names one again"
                } else {
                    "writes wait for a bundle whose folder is gone: they are kept, and sent once a \
                     folder of that name is back"
                };
                if stranded.insert(bundle.clone(), why) != Some(why) {
                    tracing::warn!(bundle = %bundle, pending = writes.queue.pending(&bundle), "{why}");
                }
                continue;
            };
            stranded.remove(&bundle);
            // Not served as its latest files: nothing is sent, and the queue says why.
            let Served { token, event, .. } = match served(&reloader, &bundle).await {
                Ok(served) => served,
                Err(why) => {
                    writes.queue.waits(&bundle, Some((None, why)));
                    if said.get(&bundle).map(String::as_str) != Some(why) {
                        tracing::warn!(bundle = %bundle, pending = writes.queue.pending(&bundle), "writes wait: {why}");
                        said.insert(bundle.clone(), why.to_string());
                    }
                    continue;
                }
            };
            // Writes made for another event (its data pulled into this folder since) are held,
            // also while the source is offline (`/_queue` shows them): said once each change.
            writes.queue.serves(&bundle, event);
            let (count, events) = writes.queue.held(&bundle);
            let now_held = (count > 0).then(|| (count, events.clone()));
            if held.get(&bundle) != now_held.as_ref() {
                if count > 0 {
                    let made: Vec<String> = events.iter().map(i64::to_string).collect();
                    tracing::warn!(bundle = %bundle, held = count, "writes made for event {} are held: the bundle serves event {event} now (another event pulled into its folder?); they are sent if it serves that event again, or dismiss them one by one (DELETE /_queue?seq=N, /_queue lists them as held)", made.join(", "));
                }
                match now_held {
                    Some(h) => held.insert(bundle.clone(), h),
                    None => held.remove(&bundle),
                };
            }
            if health.is_offline() || !backoff.is_due(&bundle, tokio::time::Instant::now()) {
                continue;
            }
            let to = Source {
                client: &client,
                base: health.url(),
                token,
                reloader: &reloader,
                bundle: &bundle,
                max_bytes,
            };
            match round(&to, &writes, &mut looked, &mut said).await.err() {
                None => {
                    backoff.succeeded(&bundle);
                    writes.queue.waits(&bundle, None);
                }
                Some(Stop { why, seq, .. }) => {
                    backoff.failed(&bundle, tokio::time::Instant::now());
                    writes.queue.waits(&bundle, Some((seq, &why)));
                    if said.get(&bundle) != Some(&why) {
                        tracing::warn!(bundle = %bundle, pending = writes.queue.pending(&bundle), "writes wait for the source: {why}");
                        said.insert(bundle.clone(), why);
                    }
                }
            }
        }
        let due = backoff.next_due(tokio::time::Instant::now());
        let flipped = std::future::poll_fn(|cx| {
            use std::future::Future;
            match flips.iter_mut().any(|f| f.as_mut().poll(cx).is_ready()) {
                true => std::task::Poll::Ready(()),
                false => std::task::Poll::Pending,
            }
        });
        tokio::select! {
            _ = writes.queue.ready.notified() => {}
            // A source back online is tried at once; the others keep their backoff.
            () = flipped => {
                backoff.back_online(|b| {
                    was_offline.contains(b) && sources.get(b).is_some_and(|h| !h.is_offline())
                });
            }
            () = changed(&mut published) => {}
            () = tokio::time::sleep_until(due) => {}
        }
    }
}

/// Per bundle whose last round had to stop, when to try again and the wait after that: each
/// bundle's own backoff, from [`FIRST_WAIT`] doubling to [`MAX_WAIT`]. Whatever wakes the loop
/// (a write, a new snapshot, another bundle's success) does not cut it short; its source
/// coming back online does.
#[derive(Debug, Default)]
struct Backoff(HashMap<String, (tokio::time::Instant, Duration)>);

impl Backoff {
    /// Whether `bundle` may be tried at `now`.
    fn is_due(&self, bundle: &str, now: tokio::time::Instant) -> bool {
        self.0.get(bundle).is_none_or(|(at, _)| *at <= now)
    }

    /// `bundle`'s round stopped at `now`: its next try waits, longer than the last.
    fn failed(&mut self, bundle: &str, now: tokio::time::Instant) {
        let wait = self.0.get(bundle).map_or(FIRST_WAIT, |(_, w)| *w);
        let next = (wait * 2).min(MAX_WAIT);
        self.0.insert(bundle.to_string(), (now + wait, next));
    }

    /// `bundle`'s round went through: no wait.
    fn succeeded(&mut self, bundle: &str) {
        self.0.remove(bundle);
    }

    /// The bundles `back` says came back online are tried at once.
    fn back_online(&mut self, back: impl Fn(&String) -> bool) {
        self.0.retain(|b, _| !back(b));
    }

    /// When the loop next has a bundle to try, at most [`MAX_WAIT`] from `now` (an offline
    /// source is looked at again then, besides when it flips).
    fn next_due(&self, now: tokio::time::Instant) -> tokio::time::Instant {
        self.0
            .values()
            .map(|(at, _)| *at)
            .filter(|at| *at > now)
            .min()
            .unwrap_or(now + MAX_WAIT)
            .min(now + MAX_WAIT)
    }
}

/// Why a bundle's round stopped: its writes wait.
struct Stop {
    why: String,
    /// The entry being sent when it failed (a maybe-sent registration's look-up included), if
    /// one was.
    seq: Option<u64>,
}

impl Stop {
    /// A failure of the round's own look-up at the source, no entry's.
    fn round(why: String) -> Stop {
        Stop { why, seq: None }
    }
}

/// The source answered a write of `bundle`: its writes go. At once, not when the round ends
/// (a later entry may take long): `/_queue` stops saying why they waited, and the log says they
/// go again when it had said they wait (`said`; also when the round stops after, so two
/// outages in a row do not read as one).
fn going(writes: &Writes, bundle: &str, said: &mut HashMap<String, String>) {
    writes.queue.waits(bundle, None);
    if said.remove(bundle).is_some() {
        tracing::info!(bundle = %bundle, pending = writes.queue.pending(bundle), "writes reach the source again");
    }
}

/// One round of a bundle: its parked check-ins that can go now, then its pending entries, in
/// order, until none is left or one must wait (`Err`, with why). `looked`: per bundle, when
/// the data served here was loaded as the source's list was last read for its parked
/// check-ins; `said`: per bundle, the wait the log said last ([`going`]).
async fn round(
    to: &Source<'_>,
    writes: &Writes,
    looked: &mut HashMap<String, DateTime<Utc>>,
    said: &mut HashMap<String, String>,
) -> Result<(), Stop> {
    let bundle = to.bundle;
    let mut looked_up = false;
    let mut reached = false;
    let mut tried: Vec<u64> = Vec::new();
    loop {
        // Check-ins parked before go first: a person's check-ins keep their order.
        let picked = match writes.queue.next_parked(bundle, &tried) {
            Some(entry) => Some((entry, true)),
            None => writes.queue.next_for(bundle).map(|entry| (entry, false)),
        };
        // New data here may list someone parked: looked up before anything else goes, so a
        // check-in made since by the code the new data shows cannot overtake theirs. Read
        // after the entry was picked: it was acknowledged on the data served then, or older.
        if writes.queue.parked_to_look_up(bundle) {
            let loaded = served(to.reloader, bundle).await.ok().map(|s| s.loaded);
            if looked.get(bundle) != loaded.as_ref() {
                look_up(to, writes, looked).await.map_err(Stop::round)?;
                looked_up = true;
                continue;
            }
        }
        let Some((entry, parked)) = picked else {
            return Ok(());
        };
        // Someone registered here whose ids at the source are not known: looked up by e-mail
        // (once a round), then parked check-ins of theirs go before this entry.
        if !looked_up && writes.queue.needs_look_up(&entry) {
            look_up(to, writes, looked).await.map_err(Stop::round)?;
            looked_up = true;
            continue;
        }
        let went = send(to, writes, &entry).await.map_err(|why| Stop {
            why,
            seq: Some(entry.seq),
        })?;
        if parked {
            tried.push(entry.seq);
            if went == Went::Accepted {
                tracing::info!(bundle, seq = entry.seq, path = %entry.request.path, "parked check-ins sent: the source lists whom they name now");
            }
        }
        if !reached && matches!(went, Went::Accepted | Went::Refused) {
            reached = true;
            going(writes, bundle, said);
        }
        // The source lists one more person now: a later look-up reads its list again.
        if writes.queue.registration_of(&entry).is_some() {
            looked_up = false;
        }
    }
}

/// Reads the source's list and learns from it what the source calls the registrations made
/// here; notes which data served here it was read with.
async fn look_up(
    to: &Source<'_>,
    writes: &Writes,
    looked: &mut HashMap<String, DateTime<Utc>>,
) -> Result<(), String> {
    let loaded = served(to.reloader, to.bundle).await?.loaded;
    let learnt = writes.queue.learn(to.bundle, &people_at_source(to).await?);
    for ids in &learnt {
        say_if_renumbered(writes, to.bundle, Some(ids));
    }
    looked.insert(to.bundle.to_string(), loaded);
    Ok(())
}

/// What became of an entry sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Went {
    /// The source has it (but the items parked).
    Accepted,
    /// The source refused it: rejected.
    Refused,
    /// Not sent: all its check-ins were parked.
    Parked,
    /// Not sent: since it was picked, it was dismissed or its bundle's writes reset.
    Gone,
}

/// Sends one entry (after checking a maybe-sent registration), but its check-ins of someone
/// the source does not list, which are parked, and records the outcome.
async fn send(to: &Source<'_>, writes: &Writes, entry: &Entry) -> Result<Went, String> {
    let registered = writes.queue.registration_of(entry);
    if let (true, Some((.., email))) = (entry.maybe_sent, &registered) {
        if let Some(found) = at_source(to, email).await? {
            let mut o = Outcome::new(entry.seq, Kind::Accepted);
            o.ids = ids(registered.as_ref(), found);
            return accepted(writes, to.bundle, o).await;
        }
    }
    // Sent with the desk's code, they could check in someone else at the source.
    let unknown = writes.queue.unknown_at_source(entry);
    let locals: Vec<i64> = unknown.keys().copied().collect();
    let (left_out, items) = writes.queue.items_naming(entry, &locals);
    let parked = (!left_out.is_empty()).then(|| LeftOut {
        items: left_out,
        answer: format!(
            "not sent: {}",
            unknown.into_values().collect::<Vec<_>>().join("; ")
        ),
    });
    if let Some(left) = &parked {
        if left.items.len() == items {
            tracing::warn!(seq = entry.seq, path = %entry.request.path, items = left.items.len(), "check-ins made here name someone registered here whom the source does not list; they are parked until it does");
            let mut o = Outcome::new(entry.seq, Kind::Parked);
            o.answer = Some(left.answer.clone());
            return record(writes, o).await.map(|()| Went::Parked);
        }
        tracing::warn!(seq = entry.seq, path = %entry.request.path, items = left.items.len(), "check-ins made here name someone registered here whom the source does not list; they are parked until it does, the rest is sent");
    }
    record(writes, Outcome::new(entry.seq, Kind::Sending)).await?;
    // Picked before a look-up or two and the line above's sync: a dismissal or a reset since
    // then stops it here (one in the moment before the request goes out may still miss it).
    if !writes.queue.may_send(entry) {
        return Ok(Went::Gone);
    }
    // The path as the table spells it: the router took the request's in any case, with or
    // without a trailing slash.
    let logged = entry.request.path.as_str();
    let path = Route::of(logged).map_or_else(
        || logged.strip_prefix(crate::api::BASE).unwrap_or(logged),
        |route| route.endpoint().relative(),
    );
    // A check-in naming someone registered here goes with the id and code the source knows.
    let mut body = writes.queue.translated(entry);
    if let Some(left) = &parked {
        body = with_items(&body, &left.items, false);
    }
    let base = &to.base;
    let sent = to
        .client
        .post(format!("{base}{path}"))
        .header(TOKEN_HEADER, to.token.expose())
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await;
    let res = match sent {
        Ok(res) => res,
        Err(e) => {
            if e.is_connect() {
                // It never left: the next try sends a registration rather than take an e-mail
                // the source lists (someone registered there meanwhile) for it.
                record(writes, Outcome::new(entry.seq, Kind::Unsent)).await?;
            }
            return Err(format!(
                "no answer from {base}: {}",
                crate::pull::fetch::causes(e)
            ));
        }
    };
    let status = res.status();
    // At most 64 KiB of it (a source answering gigabytes costs nothing; a refusal naming each
    // item of a batch is whole, to be told apart from a proxy's page), and never the token if
    // the source echoes it: the answer is shown by /_queue and the status page, cut there to
    // its first 2 KiB, so a token cut at 64 KiB is never shown in part either.
    const ANSWER_READ: usize = 64 * 1024;
    let page = crate::pull::fetch::html(res.headers()).is_some();
    let (bytes, broke) = crate::pull::fetch::error_body(res, ANSWER_READ).await;
    if status.is_success() && broke {
        // Taken or not, nothing tells: sent again (a check-in twice changes nothing; a
        // registration is looked for first, `at_source`).
        return Err(format!(
            "{base} answered {status}, but the answer broke off: whether the write was taken is not known, so it is sent again"
        ));
    }
    let answer = crate::pull::hide_token(&String::from_utf8_lossy(&bytes), to.token.expose());
    // The service takes a write with a JSON string ("OK"): a 2xx that is a web page, or whose
    // whole answer is something else than JSON (a byte order mark skipped, as the endpoints
    // skip one), is a captive portal's or a proxy's, which took nothing. An empty answer, or
    // one cut at the limit, is taken as the source's.
    let not_json = !bytes.trim_ascii().is_empty()
        && bytes.len() < ANSWER_READ
        && crate::read::parse_json(&bytes).is_err();
    if status.is_success() && (page || not_json) {
        return Err(format!(
            "{base} answered {status} with an answer that is not the API's JSON (a captive portal's or a proxy's page?): writes wait until it lets them through"
        ));
    }
    if status.is_success() {
        let mut o = Outcome::new(entry.seq, Kind::Accepted);
        o.status = Some(status.as_u16());
        // A registration: learn what the source calls the person, for later check-ins.
        if let Some((.., email)) = &registered {
            let found = at_source(to, email).await.ok().flatten().flatten();
            o.ids = ids(registered.as_ref(), found);
        }
        o.parked = parked;
        return accepted(writes, to.bundle, o).await;
    }
    if refuses_entry(status, &answer) {
        tracing::warn!(seq = entry.seq, status = status.as_u16(), path = %entry.request.path, "the source refused a write made here; it is kept in the rejected list");
        let mut o = Outcome::new(entry.seq, Kind::Rejected);
        o.status = Some(status.as_u16());
        o.answer = Some(answer);
        o.parked = parked;
        return record(writes, o).await.map(|()| Went::Refused);
    }
    let mended = match status.as_u16() {
        401 | 407 => " (the token sent, or a proxy's credentials, refused: writes wait until they are mended)",
        404 | 405 => " without the platform's error envelope (no such route there: is the source's url right?)",
        408 | 429 => "",
        400..500 => " with an answer that is not the API's JSON (a proxy's or a firewall's page?): writes wait until it lets them through",
        _ => "",
    };
    Err(format!("{base} answered {status}{mended}"))
}

/// Whether a source's answer refuses the entry itself, which is then kept aside (rejected),
/// rather than saying the source takes no writes from here for now, when the entry waits and
/// is tried again. A 4xx the API answered, but: 408 and 429 (try later); 401 and 407 (the
/// token sent, or a proxy's credentials: every entry would be refused alike until they are
/// mended); and a 404 or 405 without the platform's error envelope (`erros`), which is no
/// refusal of the write but no such route there: a wrong source url, a proxy's page, an API's
/// unknown-path answer. Any other 4xx is the API's only when its answer is JSON, an object or
/// a string (the service answers its writes with bare strings): a firewall's or a proxy's page
/// (a 403 in HTML, an empty 413) would otherwise set aside every write that reaches it, each
/// to be sent again by hand.
fn refuses_entry(status: reqwest::StatusCode, answer: &str) -> bool {
    let json = crate::read::parse_json(answer.as_bytes()).ok();
    match status.as_u16() {
        401 | 407 | 408 | 429 => false,
        404 | 405 => json.is_some_and(|v| v.get("erros").is_some_and(Value::is_array)),
        code => (400..500).contains(&code) && json.is_some_and(|v| v.is_object() || v.is_string()),
    }
}

async fn record(writes: &Writes, outcome: Outcome) -> Result<(), String> {
    writes
        .queue
        .record(outcome)
        .await
        .map_err(|e| format!("the outcome log: {e}"))
}

/// Records that the source took an entry, then says whose badge to reprint if the source gave
/// the registration another code: once `/status` shows it (its `reprint`), as the log says.
async fn accepted(writes: &Writes, bundle: &str, o: Outcome) -> Result<Went, String> {
    let ids = o.ids;
    record(writes, o).await?;
    say_if_renumbered(writes, bundle, ids.as_ref());
    Ok(Went::Accepted)
}

/// Says so when a registration made here has another check-in code at the source (two offline
/// desks gave out one code, and the source numbered one of them anew): its badge's code names
/// no one, or someone else, once the desk shows the source's list. Once per registration and
/// run. Ids only, no name: the person at the desk finds them by id in `/attendees`.
fn say_if_renumbered(writes: &Writes, bundle: &str, ids: Option<&Ids>) {
    let renumbered = ids.filter(|i| i.source_code != i.local_code);
    if let Some(ids) = renumbered.filter(|i| writes.queue.first_renumbering(bundle, i.local_id)) {
        tracing::warn!(
            bundle,
            local_id = ids.local_id,
            source_id = ids.source_id,
            "a registration made here (id {}) has check-in code {} at the source, not {}: reprint its badge with the source's code",
            ids.local_id,
            ids.source_code,
            ids.local_code,
        );
    }
}

/// A registration's local id and code beside the source's (`found`: its id and code there).
fn ids(registered: Option<&(i64, i64, String)>, found: Option<(i64, i64)>) -> Option<Ids> {
    let &(local_id, local_code, _) = registered?;
    let (source_id, source_code) = found?;
    Some(Ids {
        local_id,
        local_code,
        source_id,
        source_code,
    })
}

/// Whether the source lists a participant with `email` (any case), and if so their id and
/// check-in code when it gives both.
async fn at_source(to: &Source<'_>, email: &str) -> Result<Option<Option<(i64, i64)>>, String> {
    Ok(people_at_source(to)
        .await?
        .remove(&email.trim().to_lowercase()))
}

/// Every participant the source lists, by lower-case e-mail (the first of an e-mail listed
/// twice), with their id and check-in code when it gives both, each a number or a string of
/// one. Without them the person is listed (a registration of theirs is there) but not learnt:
/// a check-in of them is not sent with a code they do not have.
async fn people_at_source(to: &Source<'_>) -> Result<HashMap<String, Option<(i64, i64)>>, String> {
    let base = &to.base;
    let res = to
        .client
        .get(format!("{base}/attendees"))
        .header(TOKEN_HEADER, to.token.expose())
        .send()
        .await
        .map_err(|e| format!("no answer from {base}: {}", crate::pull::fetch::causes(e)))?;
    if !res.status().is_success() {
        return Err(format!("{base}/attendees answered {}", res.status()));
    }
    let bytes = crate::pull::fetch::limited(res, to.max_bytes)
        .await
        .map_err(|cut| match cut {
            crate::pull::fetch::Cut::TooLarge => format!(
                "{base}/attendees answered more than {} bytes (--max-file-bytes)",
                to.max_bytes
            ),
            crate::pull::fetch::Cut::Transport(e) => {
                format!("{base}/attendees: {}", crate::pull::fetch::causes(e))
            }
        })?;
    let body = crate::read::parse_json(&bytes)
        .map_err(|e| format!("{base}/attendees is not JSON: {e}"))?;
    Ok(people(&body))
}

/// [`people_at_source`] of the source's answer: its `data` list, or a bare list.
fn people(body: &Value) -> HashMap<String, Option<(i64, i64)>> {
    let list = body.get("data").unwrap_or(body);
    let mut people = HashMap::new();
    for p in list.as_array().into_iter().flatten() {
        let Some(email) = p.get("email").and_then(Value::as_str) else {
            continue;
        };
        let number = |key: &str| {
            let v = p.get(key)?;
            v.as_i64().or_else(|| v.as_str()?.trim().parse().ok())
        };
        let ids = number("id_attendees").zip(number("checkin_code"));
        // The first listing of an e-mail that gives both wins.
        let known = people.entry(email.trim().to_lowercase()).or_insert(None);
        if known.is_none() {
            *known = ids;
        }
    }
    people
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// A participant the source lists without a number for their id or code is listed but not
    /// learnt (before, as 0: their check-ins went with code "0"); a number in a string is one.
    #[test]
    fn only_participants_with_an_id_and_a_code_are_learnt() {
        let body = json!({"data": [
            {"email": "Ana@X ", "id_attendees": 7, "checkin_code": 10000007},
            {"email": "bia@x", "id_attendees": 8, "checkin_code": "10000008"},
            {"email": "cai@x", "id_attendees": 9, "checkin_code": null},
            {"email": "dora@x", "checkin_code": 10000010},
            {"email": "ana@x", "id_attendees": 11, "checkin_code": 10000011},
            {"id_attendees": 12, "checkin_code": 10000012},
            {"email": "eva@x", "id_attendees": null},
            {"email": "EVA@x", "id_attendees": 13, "checkin_code": 10000013}
        ]});
        let people = super::people(&body);
        assert_eq!(people.len(), 5, "{people:?}");
        assert_eq!(
            people["ana@x"],
            Some((7, 10000007)),
            "the first of an e-mail listed twice"
        );
        assert_eq!(people["bia@x"], Some((8, 10000008)));
        // Listed, so a registration maybe sent before a crash is not sent again; not learnt.
        assert_eq!(people["cai@x"], None);
        assert_eq!(people["dora@x"], None);
        // Listed twice, first without them: the listing that gives them is learnt.
        assert_eq!(people["eva@x"], Some((13, 10000013)));
        assert_eq!(super::people(&body["data"]), people, "a bare list");
    }
}

#[cfg(test)]
mod backoff {
    use super::{Backoff, FIRST_WAIT, MAX_WAIT};
    use tokio::time::Instant;

    /// One bundle's failures lengthen its own wait only, doubling to the cap; another's
    /// success does not cut it short (it did: the wait was shared); its source coming back
    /// does, and no other's.
    #[test]
    fn each_bundle_backs_off_on_its_own() {
        let now = Instant::now();
        let mut b = Backoff::default();
        b.failed("a", now);
        assert!(!b.is_due("a", now) && b.is_due("a", now + FIRST_WAIT));
        assert!(b.is_due("b", now), "another bundle waits for nothing");
        b.failed("b", now);
        b.succeeded("b");
        assert!(!b.is_due("a", now), "b's success leaves a's wait");
        let mut waits = Vec::new();
        let mut at = now;
        for _ in 0..6 {
            // Another bundle's writes go through between a's tries.
            b.failed("b", at);
            b.succeeded("b");
            b.failed("a", at);
            let due = b.next_due(at);
            waits.push(due - at);
            at = due;
        }
        assert_eq!(waits[0], FIRST_WAIT * 2);
        assert_eq!(waits.last().copied(), Some(MAX_WAIT), "{waits:?}");
        assert!(waits.windows(2).all(|w| w[1] >= w[0]), "{waits:?}");
        b.failed("c", at);
        b.back_online(|name| name == "a");
        assert!(
            b.is_due("a", at) && !b.is_due("c", at),
            "only a's source came back"
        );
        assert_eq!(b.next_due(at), at + FIRST_WAIT, "c's wait");
    }
}

#[cfg(test)]
mod refusals {
    use reqwest::StatusCode;

    use super::refuses_entry;

    /// Which answers set an entry aside and which make it wait (docs/kiosk.md).
    #[test]
    fn only_a_refusal_of_the_write_itself_sets_it_aside() {
        let envelope =
            r#"{"message":"no","erros":[{"code":404,"description":"x"}],"count_erros":1}"#;
        let unknown_path =
            r#"{"Message":"No HTTP resource was found that matches the request URI"}"#;
        for (status, answer, refused) in [
            (400, envelope, true),
            (403, envelope, true),
            (404, envelope, true),
            (405, envelope, true),
            (422, r#"{"message":"Participante já está inscrito"}"#, true),
            (400, r#""Participante já está inscrito""#, true),
            (413, "", false),
            (403, "<html>Request blocked</html>", false),
            (400, "Bad Request", false),
            (404, unknown_path, false),
            (404, "<html>Not Found</html>", false),
            (405, "", false),
            (401, envelope, false),
            (407, "", false),
            (408, "", false),
            (429, "", false),
            (500, envelope, false),
        ] {
            let status = StatusCode::from_u16(status).expect("a status");
            assert_eq!(refuses_entry(status, answer), refused, "{status} {answer}");
        }
    }
}
