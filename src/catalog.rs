//! The served state across reloads: per bundle folder, its latest load attempt and the version it
//! serves. `serve` and `check` both go through it, so `check` reports what `serve` would serve.
//!
//! A reload never stops a bundle from being served: a new version with errors leaves the last good
//! version in place, and token clashes are decided here, with bundles already serving keeping
//! their tokens. See ARCHITECTURE.md, "Reload".

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::api;
use crate::kiosk::Sources;
use crate::load::{self, BundleReport, LoadError};
use crate::model::bodies::EventBody;
use crate::model::{Bundle, Slot};
use crate::prepare::{self, Prepared};
use crate::problem::{Location, Problem, Severity};
use crate::store::Snapshot;
use crate::timed;
use crate::token::Token;

/// What a bundle holds, for `/status`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Summary {
    pub(crate) id_event: i64,
    pub(crate) title: String,
    pub(crate) records: Records,
}

/// How many records of each kind, in the endpoint table's order (each body names its kinds;
/// a streamed file and a folder of files by reference count under their endpoint's key).
#[derive(Debug, Clone, Default)]
pub(crate) struct Records(pub Vec<(&'static str, usize)>);

impl Serialize for Records {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl Summary {
    fn of(b: &Bundle) -> Summary {
        let event = b.body::<EventBody>().map(|e| &e.event);
        let mut records = Vec::new();
        for (slot, e) in b.slots.iter().zip(&api::API) {
            match slot {
                Slot::Body(body) => records.extend(body.records()),
                Slot::Stream(p) => records.push((e.key, p.count())),
                Slot::PerReference(files) => records.push((e.key, files.len())),
                Slot::Elsewhere => {}
            }
        }
        Summary {
            id_event: event.map_or(0, |e| e.id_event),
            title: event.map(|e| e.title.clone()).unwrap_or_default(),
            records: Records(records),
        }
    }
}

/// One loaded version of a bundle: its answers, the tokens that open it, what it holds.
#[derive(Debug)]
pub(crate) struct Version {
    pub(crate) prepared: Arc<Prepared>,
    /// The tokens that open it: those its bundle.toml named ([`Version::loaded_tokens`]) that
    /// the latest bundle.toml still names.
    pub(crate) tokens: Vec<Token>,
    /// The tokens its own bundle.toml named when it loaded.
    loaded_tokens: Vec<Token>,
    pub(crate) summary: Summary,
    pub(crate) loaded_at: DateTime<Utc>,
    /// The warnings of the load that made it, shown by `/status` while it serves after a
    /// later attempt failed (the entry's own problems are that attempt's).
    pub(crate) warnings: Arc<[Problem]>,
}

/// A bundle folder's state.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    /// The problems of the latest load attempt.
    pub(crate) problems: Vec<Problem>,
    /// Token clashes found when the last snapshot was built.
    pub(crate) conflicts: Vec<Problem>,
    /// The tokens the latest bundle.toml that told them names (also when another file has
    /// errors; one with errors of its own, or a load abandoned, leaves them).
    pub(crate) tokens: Vec<Token>,
    /// The latest attempt's version, when it had no error.
    pub(crate) candidate: Option<Arc<Version>>,
    /// The newest version that was served; kept when a clash or a token taken out keeps it
    /// from being served, so it can come back when the token is free or named again.
    pub(crate) last_good: Option<Arc<Version>>,
    /// The version served now.
    pub(crate) serving: Option<Arc<Version>>,
    /// When the folder was last read.
    pub(crate) checked_at: DateTime<Utc>,
    /// The digests of the folder the candidate was prepared from ([`load::fingerprint`]), when
    /// known: a reload finding the same bytes keeps the prepared answers.
    fingerprint: Option<load::Fingerprint>,
    /// New in the last refresh, servable, and naming every token a folder that vanished in it
    /// served: the same bundle renamed, which claims them before any copy (as it would serving).
    renamed: bool,
    /// While a token it names is not served: the note a request with one logs once, kept across
    /// snapshots (a kiosk publishes one each refresh) until the folder is read again.
    unserved: Option<Arc<crate::store::Unserved>>,
    /// The latest read found `bundle.toml` alone, naming a source (`BundleReport`).
    pub(crate) awaits_source: bool,
}

/// What reading a bundle folder again gave.
enum Attempt {
    /// A load, and the folder's digests when nothing in it changed during the load.
    Read(Box<BundleReport>, Option<load::Fingerprint>),
    /// The folder holds the bytes the candidate was prepared from (as it is now: its
    /// modification times may be new): nothing was loaded.
    Unchanged(load::Fingerprint),
}

impl Entry {
    fn new(report: BundleReport, compression: bool, sources: &Sources) -> Entry {
        let mut entry = Entry {
            name: report.name.clone(),
            dir: report.dir.clone(),
            problems: Vec::new(),
            conflicts: Vec::new(),
            tokens: Vec::new(),
            candidate: None,
            last_good: None,
            serving: None,
            checked_at: report.loaded_at,
            fingerprint: None,
            renamed: false,
            unserved: None,
            awaits_source: false,
        };
        entry.update(report, compression, sources);
        entry
    }

    /// Takes a new load attempt; the served version stays until the next snapshot decides.
    fn update(&mut self, mut report: BundleReport, compression: bool, sources: &Sources) {
        self.candidate =
            report
                .bundle
                .take()
                .and_then(|bundle| match Prepared::new(&bundle, compression) {
                    Ok(mut prepared) => Some(Arc::new(Version {
                        prepared: {
                            prepared.source = match &bundle.config.source {
                                Some(source) => Some(sources.loaded(&bundle.name, source)),
                                None => {
                                    if sources.forget(&bundle.name) {
                                        // Writes are queued for a source only while their
                                        // bundle names one (docs/kiosk.md): say so now, not
                                        // when a desk finds its check-ins never arrived.
                                        tracing::warn!(
                                            bundle = %bundle.name,
                                            "bundle.toml names no [source] any more: writes made here from now on are kept at the desk and never sent to a source"
                                        );
                                    }
                                    None
                                }
                            };
                            Arc::new(prepared)
                        },
                        tokens: bundle.config.tokens.clone(),
                        loaded_tokens: bundle.config.tokens.clone(),
                        summary: Summary::of(&bundle),
                        loaded_at: report.loaded_at,
                        warnings: report.problems.iter().filter(|p| !p.is_error()).cloned().collect(),
                    })),
                    Err(e) => {
                        report.problems.push(Problem::error(
                            &report.dir,
                            Location::File,
                            format!("cannot prepare the answers: {e}"),
                        ));
                        None
                    }
                });
        // The latest bundle.toml that reads decides which tokens open the bundle, also while
        // another file has errors or the new version's tokens clash: the last good version
        // serves only under the tokens it loaded with that the latest one still names (a token
        // taken out, say a leaked one, stops at once; one added waits for a version without
        // errors or clashes; one named again opens it again). Named: read from a bundle.toml
        // without errors, or none without one (`tokens = []`, or no bundle.toml: every token
        // taken out).
        let named = report.tokens.as_deref();
        if let Some(named) = named {
            if let Some(good) = self.last_good.take() {
                let kept: Vec<Token> = good
                    .loaded_tokens
                    .iter()
                    .filter(|t| named.contains(t))
                    .cloned()
                    .collect();
                self.last_good = Some(if kept == good.tokens {
                    good
                } else {
                    Arc::new(Version {
                        prepared: Arc::clone(&good.prepared),
                        tokens: kept,
                        loaded_tokens: good.loaded_tokens.clone(),
                        summary: good.summary.clone(),
                        loaded_at: good.loaded_at,
                        warnings: Arc::clone(&good.warnings),
                    })
                });
            }
        }
        // So does its `app_keys` (secrets too): the last good version's company routes take
        // the keys the latest bundle.toml names, once it reads without error.
        if let (Some(_), Some(keys)) = (named, &report.app_keys) {
            if let Some(good) = self
                .last_good
                .take_if(|good| !good.prepared.takes_app_keys(keys))
            {
                self.last_good = Some(Arc::new(Version {
                    prepared: Arc::new(good.prepared.with_app_keys(keys)),
                    tokens: good.tokens.clone(),
                    loaded_tokens: good.loaded_tokens.clone(),
                    summary: good.summary.clone(),
                    loaded_at: good.loaded_at,
                    warnings: Arc::clone(&good.warnings),
                }));
            }
        }
        self.problems = report.problems;
        // A bundle.toml that told nothing leaves those the latest one that did named.
        if let Some(tokens) = report.tokens {
            self.tokens = tokens;
        }
        self.checked_at = report.loaded_at;
        self.awaits_source = report.awaits_source;
        self.unserved = None;
    }

    /// A new version of the candidate sharing its prepared answers, for a folder that reads the
    /// same (its problems, warnings only, stay what they were).
    fn renew(&mut self) {
        let now = Utc::now();
        if let Some(c) = &self.candidate {
            self.candidate = Some(Arc::new(Version {
                prepared: Arc::new(c.prepared.renewed()),
                tokens: c.tokens.clone(),
                loaded_tokens: c.loaded_tokens.clone(),
                summary: c.summary.clone(),
                loaded_at: now,
                warnings: Arc::clone(&c.warnings),
            }));
        }
        self.checked_at = now;
    }

    /// Every problem: the latest attempt's, then token clashes.
    pub(crate) fn all_problems(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().chain(&self.conflicts)
    }

    /// Whether the latest attempt (or a token clash) left errors.
    pub(crate) fn has_errors(&self) -> bool {
        self.all_problems().any(Problem::is_error)
    }
}

/// Which bundles a reload reads again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every bundle folder.
    All,
    /// These bundle folders (plus any folder that appeared or vanished).
    Bundles(BTreeSet<String>),
}

impl Scope {
    fn includes(&self, name: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Bundles(names) => names.contains(name),
        }
    }
}

/// What a refresh did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Refreshed {
    /// Bundles read (new ones included), in name order.
    pub loaded: Vec<String>,
    /// Those of `loaded` found holding the same bytes: their answers were kept.
    pub unchanged: Vec<String>,
    /// Bundles whose folder is gone.
    pub removed: Vec<String>,
    /// Those of `removed` found again under a new name (old, new): the same bundle renamed,
    /// its tokens opening it there.
    pub renamed: Vec<(String, String)>,
}

/// The bundles in object storage the mirror could not take, by name: state (`incomplete`,
/// `failing`) and reason (`/status`'s `storage_bundles`, with since when).
pub(crate) type StorageTroubles = BTreeMap<String, (&'static str, String)>;

/// What a catalog reads and prepares by: the part of `serve`'s options it takes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading {
    /// Answers are prepared with compressed variants (`--compression`).
    pub(crate) compression: bool,
    /// The largest bundle file read (`--max-file-bytes`): a larger one is an error of its bundle.
    pub(crate) max_file_bytes: u64,
    /// The longest simulated delay served (`--max-delay`): a `[simulate]` delay past it is a
    /// warning of its bundle.
    pub(crate) max_delay: std::time::Duration,
}

/// Every bundle folder of a data folder, across reloads.
#[derive(Debug)]
pub(crate) struct Catalog {
    data_dir: PathBuf,
    entries: BTreeMap<String, Entry>,
    reading: Reading,
    /// Where the data folder's files come from when it mirrors object storage (its URL, e.g.
    /// `s3://bucket/events`): problems name the object, not the mirror's copy.
    files_from: Option<String>,
    /// Why the last refresh could not list the data folder (shown in `/status`). The next one
    /// reads every bundle: the changes the failed one was for were not read.
    data_folder_error: Option<String>,
    /// How long one bundle's load may take.
    load_time_limit: std::time::Duration,
    /// Set while the file watch is lost (shown in `/status` and `/readyz`).
    watch_lost: Option<prepare::Condition>,
    /// Set while object storage cannot be read (`--data s3://...`; shown in `/status`).
    storage_failing: Option<prepare::Condition>,
    /// The bundles in object storage the mirror could not take at its last poll, and why
    /// (shown in `/status`).
    storage_bundles: BTreeMap<String, prepare::Condition>,
    /// The sources bundles name (`crate::kiosk`).
    sources: Arc<Sources>,
    /// The pieces of large bodies alive in its versions: a reload shares those it makes again.
    pieces: prepare::Pieces,
}

/// A warning for a `[simulate]` delay longer than `max` (`--max-delay`), which cuts every delay
/// to it: otherwise `/status` shows a delay that is never served, and a client's timeout test
/// passes or fails without a word of why.
fn say_cut_delays(report: &mut BundleReport, max: std::time::Duration) {
    let Some(simulate) = report
        .bundle
        .as_ref()
        .and_then(|b| b.config.simulate.as_ref())
    else {
        return;
    };
    // Which endpoints: with a table per endpoint, the one to change is named.
    let cut: Vec<(&str, u64)> = simulate
        .endpoints
        .iter()
        .zip(&api::API)
        .filter(|(s, _)| u128::from(s.latency_ms.1) > max.as_millis())
        .map(|(s, e)| (e.key, s.latency_ms.1))
        .collect();
    if let Some(longest) = cut.iter().map(|(_, ms)| *ms).max() {
        let keys: Vec<&str> = cut.iter().map(|(key, _)| *key).collect();
        let which = if keys.len() == api::API.len() {
            "every endpoint".to_string()
        } else {
            keys.join(", ")
        };
        report.problems.push(Problem::warning(
            report.dir.join("bundle.toml"),
            Location::File,
            format!(
                "simulate: a delay of up to {longest} ms ({which}) is longer than --max-delay ({}): such delays are cut to it",
                humantime::format_duration(max)
            ),
        ));
    }
}

/// `file` as its problems name it: under `files_from` (the object storage URL the data folder
/// mirrors) when it is in `data_dir`, else as it is.
fn shown(file: &Path, data_dir: &Path, files_from: Option<&str>) -> PathBuf {
    match (files_from, file.strip_prefix(data_dir)) {
        (Some(url), Ok(rel)) => {
            let rel: Vec<_> = rel.iter().map(|c| c.to_string_lossy()).collect();
            PathBuf::from(format!("{}/{}", url.trim_end_matches('/'), rel.join("/")))
        }
        _ => file.to_path_buf(),
    }
}

impl Catalog {
    /// An empty catalog for `data_dir`, reading by `reading`, sharing `sources` with the
    /// refresher, the metrics and the answers; nothing is read until [`Catalog::refresh`].
    pub(crate) fn new(data_dir: &Path, reading: Reading, sources: Arc<Sources>) -> Catalog {
        Catalog {
            data_dir: data_dir.to_path_buf(),
            entries: BTreeMap::new(),
            reading,
            watch_lost: None,
            storage_failing: None,
            storage_bundles: BTreeMap::new(),
            data_folder_error: None,
            files_from: None,
            load_time_limit: timed::LOAD_TIME_LIMIT,
            sources,
            pieces: prepare::Pieces::default(),
        }
    }

    /// Names the files of problems under `url`, the object storage the data folder mirrors,
    /// from the next load on.
    pub(crate) fn set_files_from(&mut self, url: String) {
        self.files_from = Some(url);
    }

    /// Records that the file watch is lost (`Some(reason)`) or restored (`None`); the next
    /// snapshot shows it.
    pub(crate) fn set_watch_lost(&mut self, reason: Option<String>) {
        self.watch_lost = reason.map(|r| prepare::Condition::now("lost", r));
    }

    /// Records that object storage cannot be read (`Some(reason)`; the first failure's time is
    /// kept while it goes on) or answers again (`None`); the next snapshot shows it.
    pub(crate) fn set_storage_failing(&mut self, reason: Option<String>) {
        let before = self.storage_failing.take();
        self.storage_failing = reason.map(|r| prepare::Condition::after(before, "failing", r));
    }

    /// Records the bundles the mirror could not take, each with its state and reason: one kept
    /// in the same state keeps the time it was first seen in it; the next snapshot shows them.
    pub(crate) fn set_storage_bundles(&mut self, bundles: &StorageTroubles) {
        let mut before = std::mem::take(&mut self.storage_bundles);
        self.storage_bundles = bundles
            .iter()
            .map(|(name, &(state, ref reason))| {
                let was = before.remove(name);
                let now = prepare::Condition::after(was, state, reason.clone());
                (name.clone(), now)
            })
            .collect();
    }

    /// A catalog of `data_dir` as `serve` reads by default.
    #[cfg(test)]
    fn at(data_dir: &Path) -> Catalog {
        let reading = crate::config::ServeOptions::default().reading();
        Catalog::new(data_dir, reading, Arc::default())
    }

    /// Whether answers are prepared with compressed variants.
    pub(crate) fn compression(&self) -> bool {
        self.reading.compression
    }

    /// Reads every bundle of `data_dir` by `reading` and decides the token clashes.
    pub(crate) fn load(data_dir: &Path, reading: Reading) -> Result<Catalog, LoadError> {
        let mut catalog = Catalog::new(data_dir, reading, Arc::default());
        catalog.refresh(&Scope::All)?;
        catalog.resolve_tokens();
        Ok(catalog)
    }

    /// The bundle folders, in name order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values()
    }

    /// The bundle folder `name`.
    pub(crate) fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }

    /// Re-lists the data folder and reads the bundles in `scope`, every new folder, and forgets
    /// vanished ones. Only a data folder that cannot be used ([`LoadError`]: unreadable, not a
    /// folder, a bundle itself) is an error (nothing changes then).
    pub(crate) fn refresh(&mut self, scope: &Scope) -> Result<Refreshed, LoadError> {
        let scope = if self.data_folder_error.is_some() {
            &Scope::All
        } else {
            scope
        };
        let names: BTreeSet<String> = match load::bundle_names(&self.data_dir) {
            Ok(names) => {
                if self.data_folder_error.take().is_some() {
                    // Its loss was logged (by the reload); so is its return, whichever watch.
                    tracing::info!(data = %self.data_dir.display(), "the data folder can be read again: reading every bundle");
                }
                // A link that leads nowhere is a bundle only when it was one: then its error
                // keeps the last good version serving. Seen so first, it is no folder, and is
                // skipped as other entries that are not are (a link to a file gone, say).
                names
                    .into_iter()
                    .filter(|n| {
                        self.entries.contains_key(n)
                            || std::fs::metadata(self.data_dir.join(n)).is_ok()
                    })
                    .collect()
            }
            Err(e) => {
                self.data_folder_error = Some(e.to_string());
                return Err(e);
            }
        };
        let removed: Vec<String> = self
            .entries
            .keys()
            .filter(|n| !names.contains(*n))
            .cloned()
            .collect();
        let mut freed = Vec::new();
        let mut renamed = Vec::new();
        for name in &removed {
            if let Some(serving) = self.entries.remove(name).and_then(|e| e.serving) {
                freed.push((name, serving.tokens.clone()));
            }
            let _ = self.sources.forget(name);
        }
        for entry in self.entries.values_mut() {
            entry.renamed = false;
        }
        let (mut loaded, mut unchanged) = (Vec::new(), Vec::new());
        for name in names {
            if self.entries.contains_key(&name) && !scope.includes(&name) {
                continue;
            }
            match (self.load_timed(&name), self.entries.get_mut(&name)) {
                (Attempt::Unchanged(fingerprint), Some(entry)) => {
                    tracing::debug!(bundle = %name, "bundle folder holds the same bytes; its prepared answers are kept");
                    entry.renew();
                    entry.fingerprint = Some(fingerprint);
                    unchanged.push(name.clone());
                }
                (Attempt::Read(mut report, fingerprint), Some(entry)) => {
                    say_cut_delays(&mut report, self.reading.max_delay);
                    entry.update(*report, self.reading.compression, &self.sources);
                    entry.fingerprint = fingerprint.filter(|_| entry.candidate.is_some());
                }
                (Attempt::Read(mut report, fingerprint), None) => {
                    say_cut_delays(&mut report, self.reading.max_delay);
                    let mut entry = Entry::new(*report, self.reading.compression, &self.sources);
                    entry.fingerprint = fingerprint.filter(|_| entry.candidate.is_some());
                    // A broken one claims nothing: it must not keep a copy from the tokens.
                    let was = freed.iter().find(|(_, served)| {
                        entry.candidate.is_some() && served.iter().all(|t| entry.tokens.contains(t))
                    });
                    entry.renamed = was.is_some();
                    if let Some((was, _)) = was {
                        renamed.push((was.to_string(), name.clone()));
                    }
                    self.entries.insert(name.clone(), entry);
                }
                (Attempt::Unchanged(_), None) => {} // not asked for without an entry
            }
            // Its problems name the files as the operator knows them (the objects of a mirror).
            if let (Some(entry), Some(from)) = (self.entries.get_mut(&name), &self.files_from) {
                for p in &mut entry.problems {
                    p.file = shown(&p.file, &self.data_dir, Some(from));
                }
            }
            loaded.push(name);
        }
        Ok(Refreshed {
            loaded,
            unchanged,
            removed,
            renamed,
        })
    }

    /// Loads one bundle under [`timed::LOAD_TIME_LIMIT`]; past it, the load is abandoned and the
    /// bundle gets an error naming the file it was on (it keeps its last good version and its
    /// tokens, and is read again on its next change).
    ///
    /// Every load is digested ([`load::fingerprint`]): first the folder's stamps and bytes, then
    /// after the load its stamps again; the digests are kept when the stamps did not change (so
    /// they name what the load read). A reload of a bundle with a candidate first compares: the
    /// same stamps, or else the same bytes, and nothing is loaded or prepared again.
    fn load_timed(&self, name: &str) -> Attempt {
        let dir = self.data_dir.join(name);
        let max = self.reading.max_file_bytes;
        let (d, n, pieces) = (dir.clone(), name.to_string(), self.pieces.clone());
        let previous = self
            .entries
            .get(name)
            .filter(|e| e.candidate.is_some())
            .and_then(|e| e.fingerprint);
        match timed::run(self.load_time_limit, move |progress| {
            if let Some(previous) = previous {
                if load::stamps(&d) == Some(previous.stamps) {
                    return Attempt::Unchanged(previous);
                }
            }
            let before = load::fingerprint(&d, max, progress);
            if let (Some(now), Some(previous)) = (before, previous) {
                if now.bytes == previous.bytes {
                    return Attempt::Unchanged(now);
                }
            }
            let report = load::load_bundle_tracked(&d, &n, max, progress, &pieces);
            let same = before.is_some()
                && report.bundle.is_some()
                && load::stamps(&d) == before.map(|b| b.stamps);
            Attempt::Read(Box::new(report), before.filter(|_| same))
        }) {
            Ok(attempt) => attempt,
            Err(abandoned) => {
                let file = abandoned.file.unwrap_or_else(|| dir.clone());
                let report = BundleReport {
                    name: name.to_string(),
                    dir,
                    bundle: None,
                    problems: vec![Problem::error(
                        &file,
                        Location::File,
                        format!(
                            "reload abandoned after {:?} while reading this file (a file system that does not answer?); the last good version keeps serving, and the bundle is read again on its next change",
                            abandoned.limit
                        ),
                    )],
                    loaded_at: Utc::now(),
                    awaits_source: false,
                    // Not read: nothing is known of them (the last good version keeps its own).
                    tokens: None,
                    // Not read: a last good version keeps its own.
                    app_keys: None,
                };
                Attempt::Read(Box::new(report), None)
            }
        }
    }

    /// Decides which version of each bundle serves which token.
    ///
    /// Bundles serving now reserve their tokens first: an incumbent keeps what it serves, whatever
    /// its neighbours' edits say. Then each bundle, serving ones first and the rest in name order,
    /// takes its new version if none of its tokens is held by another bundle, else its last good
    /// version if that one's are free, else nothing. Every clash is reported on the bundle that
    /// did not get the token. A round can free tokens (a bundle's new version drops one), so
    /// rounds repeat until nothing changes.
    pub(crate) fn resolve_tokens(&mut self) {
        for _ in 0..4 {
            if !self.resolve_round() {
                break;
            }
        }
    }

    /// One round of [`Catalog::resolve_tokens`]; whether any bundle's served version changed.
    fn resolve_round(&mut self) -> bool {
        let mut owner: HashMap<Token, String> = HashMap::new();
        for e in self.entries.values() {
            for t in e.serving.iter().flat_map(|v| &v.tokens) {
                owner.entry(t.clone()).or_insert_with(|| e.name.clone());
            }
        }
        let rank = |e: &Entry| match (&e.serving, &e.candidate, &e.last_good) {
            (Some(_), _, _) => 0,
            (None, _, _) if e.renamed => 0,
            // A last good version no token opens any more serves nothing: ranked with the
            // broken bundles, it takes no token a servable one names.
            (None, Some(_), _) => 1,
            (None, None, Some(g)) if !g.tokens.is_empty() => 1,
            (None, None, _) => 2,
        };
        let mut order: Vec<(u8, String)> = self
            .entries
            .values()
            .map(|e| (rank(e), e.name.clone()))
            .collect();
        order.sort();

        let mut changed = false;
        for (_, name) in order {
            let Some(entry) = self.entries.get_mut(&name) else {
                continue;
            };
            let held_by_others = |tokens: &[Token]| -> Vec<(String, String)> {
                tokens
                    .iter()
                    .filter_map(|t| {
                        owner
                            .get(t)
                            .filter(|o| **o != name)
                            .map(|o| (t.hint(), o.clone()))
                    })
                    .collect()
            };
            let mut chosen: Option<Arc<Version>> = None;
            let mut reported = Vec::new();
            // A version no token opens (every one taken out) is not served, only kept.
            let openable = entry.candidate.iter().chain(entry.last_good.iter());
            for version in openable.filter(|v| !v.tokens.is_empty()) {
                let clashes = held_by_others(&version.tokens);
                if clashes.is_empty() {
                    chosen = Some(Arc::clone(version));
                    break;
                }
                if reported.is_empty() {
                    reported = clashes;
                }
            }
            if entry.candidate.is_none() && reported.is_empty() {
                // The latest attempt had errors: its bundle.toml's tokens may still clash.
                reported = held_by_others(&entry.tokens);
            }
            // Release what this bundle held, then claim what it serves now.
            for t in entry.serving.iter().flat_map(|v| &v.tokens) {
                if owner.get(t) == Some(&name) {
                    owner.remove(t);
                }
            }
            let claimed: &[Token] = match &chosen {
                Some(v) => &v.tokens,
                // A broken bundle claims its tokens only so that other broken ones report clashes.
                None if reported.is_empty()
                    && entry.last_good.as_ref().is_none_or(|g| g.tokens.is_empty()) =>
                {
                    &entry.tokens
                }
                None => &[],
            };
            for t in claimed {
                owner.entry(t.clone()).or_insert_with(|| name.clone());
            }
            if let (Some(c), Some(v)) = (&entry.candidate, &chosen) {
                if Arc::ptr_eq(c, v) {
                    entry.last_good = Some(Arc::clone(c));
                }
            }
            let outcome = if chosen.is_some() {
                "keeps serving its previous version"
            } else {
                "is not served"
            };
            entry.conflicts = reported
                .into_iter()
                .map(|(hint, other)| {
                    Problem::error(
                        shown(
                            &entry.dir.join("bundle.toml"),
                            &self.data_dir,
                            self.files_from.as_deref(),
                        ),
                        Location::File,
                        format!(
                            "token {hint} is also named by bundle {other:?}, which has it (a token opens one bundle): bundle {:?} {outcome}",
                            entry.name
                        ),
                    )
                })
                .collect();
            let same = match (&entry.serving, &chosen) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            changed |= !same;
            entry.serving = chosen;
        }
        changed
    }

    /// Resolves the tokens and builds the snapshot to publish.
    pub(crate) fn snapshot(&mut self) -> Snapshot {
        self.resolve_tokens();
        let mut by_token = HashMap::new();
        for entry in self.entries.values() {
            if let Some(v) = &entry.serving {
                for t in &v.tokens {
                    by_token.insert(t.clone(), Arc::clone(&v.prepared));
                }
            }
        }
        // Tokens a bundle.toml names that no served version has: a bundle with errors and
        // nothing loaded, or a token added while another file has errors.
        let mut unserved = HashMap::new();
        for entry in self.entries.values_mut() {
            let mut named = entry.tokens.iter().filter(|t| !by_token.contains_key(*t));
            let Some(first) = named.next() else {
                continue;
            };
            let bundle =
                Arc::clone(entry.unserved.get_or_insert_with(|| {
                    Arc::new(crate::store::Unserved::new(entry.name.clone()))
                }));
            for t in std::iter::once(first).chain(named) {
                unserved.insert(t.clone(), Arc::clone(&bundle));
            }
        }
        Snapshot::new(by_token, self.status())
            .with_unserved(unserved)
            .with_watch_lost(self.watch_lost.is_some())
            .with_storage_failing(self.storage_failing.is_some())
    }

    /// How many problems of a severity the catalog has.
    pub(crate) fn count(&self, severity: Severity) -> usize {
        self.entries
            .values()
            .flat_map(Entry::all_problems)
            .filter(|p| p.severity == severity)
            .count()
    }

    fn status(&self) -> prepare::Status {
        prepare::Status::new(
            self.entries.values(),
            self.watch_lost.as_ref(),
            self.storage_failing.as_ref(),
            &self.storage_bundles,
            self.data_folder_error.as_deref(),
            &self.sources,
        )
    }
}

/// Token arbitration across bundles, on real bundle folders.
#[cfg(test)]
mod arbitration {
    use std::path::Path;

    use super::*;

    const EVENT: &str = r#"{"data": [{
        "id_event": 7, "title": "Summit", "url": "summit",
        "start_date": "2026-05-04T09:00:00", "end_date": "2026-05-05T18:00:00",
        "start_date_registration": "01/02/2026", "end_date_registration": "03/05/2026",
        "summary": "Two days", "description": null, "url_image": "",
        "credit_hour": 0, "country": "Brasil", "state": "SP", "city": "Santos",
        "venue": "Porto", "latitude": "-23.96", "longitude": "-46.33",
        "banner": null, "tickets": []
    }]}"#;

    /// Writes bundle `name` naming `tokens`; a broken one has an event file with an error.
    fn write(data: &Path, name: &str, tokens: &[&str], broken: bool) {
        let dir = data.join(name);
        std::fs::create_dir_all(&dir).expect("bundle folder");
        let list: Vec<String> = tokens.iter().map(|t| format!("{t:?}")).collect();
        std::fs::write(
            dir.join("bundle.toml"),
            format!("tokens = [{}]\n", list.join(", ")),
        )
        .expect("bundle.toml");
        let event = if broken { "{\"data\": 3}" } else { EVENT };
        std::fs::write(dir.join("event.json"), event).expect("event.json");
    }

    /// Re-reads everything and publishes: which bundle each token opens.
    fn serve(catalog: &mut Catalog, tokens: &[&str]) -> Vec<Option<String>> {
        published(catalog, tokens)
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    }

    /// Re-reads everything and publishes: for each token, the bundle it opens and the bundle
    /// that names it without serving it (503 `bundle_unavailable`).
    fn published(catalog: &mut Catalog, tokens: &[&str]) -> Vec<(Option<String>, Option<String>)> {
        catalog.refresh(&Scope::All).expect("the data folder lists");
        let snapshot = catalog.snapshot();
        tokens
            .iter()
            .map(|t| {
                let token = crate::token::TokenRef::new(t);
                let serving = snapshot.bundle(token).map(|p| p.name.to_string());
                let unserved = snapshot.unserved(token).map(|(n, _)| n.to_string());
                (serving, unserved)
            })
            .collect()
    }

    fn conflicts(catalog: &Catalog, name: &str) -> Vec<String> {
        catalog
            .entry(name)
            .map(|e| e.conflicts.iter().map(|p| p.message.clone()).collect())
            .unwrap_or_default()
    }

    fn some(name: &str) -> Option<String> {
        Some(name.to_string())
    }

    /// A token is unserved when its bundle names it and no served version has it: a bundle
    /// with errors and nothing loaded, a bundle that lost a clash for another of its tokens,
    /// or a token added while another file has errors (the last good version serves without
    /// it). A token no bundle names, or one another bundle serves, is not.
    #[test]
    fn a_token_named_but_not_served_is_unserved_whatever_the_reason() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "alpha", &["alpha-token"], false);
        write(tmp.path(), "broken", &["broken-token"], true);
        write(tmp.path(), "a-copy", &["alpha-token"], false);
        write(tmp.path(), "zeta", &["alpha-token", "zeta-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        let all = ["alpha-token", "broken-token", "zeta-token", "nobody"];
        assert_eq!(
            published(&mut catalog, &all),
            vec![
                (some("a-copy"), None),
                (None, some("broken")),
                (None, some("zeta")),
                (None, None)
            ]
        );

        // A token added while event.json is broken: the last good version serves the old one.
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "solo", &["solo-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        assert_eq!(serve(&mut catalog, &["solo-token"]), vec![some("solo")]);
        write(tmp.path(), "solo", &["solo-token", "new-token"], true);
        assert_eq!(
            published(&mut catalog, &["solo-token", "new-token"]),
            vec![(some("solo"), None), (None, some("solo"))]
        );
    }

    #[test]
    fn the_same_token_in_two_bundles_opens_the_first_and_the_other_reports_it() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "alpha", &["shared-token", "alpha-token"], false);
        write(tmp.path(), "beta", &["shared-token"], false);
        let mut catalog = Catalog::at(tmp.path());

        let served = serve(&mut catalog, &["shared-token", "alpha-token"]);

        assert_eq!(served, vec![some("alpha"), some("alpha")]);
        assert!(catalog.entry("beta").is_some_and(|e| e.serving.is_none()));
        assert_eq!(
            conflicts(&catalog, "beta"),
            vec!["token shar… is also named by bundle \"alpha\", which has it (a token opens one bundle): bundle \"beta\" is not served"]
        );
        assert!(conflicts(&catalog, "alpha").is_empty());
        // Derived Debug of everything holding tokens shows only their hints.
        let shown = format!("{catalog:?} {:?}", catalog.snapshot());
        assert!(!shown.contains("shared-token"), "{shown}");
        assert!(shown.contains("Token(shar…)"), "{shown}");
    }

    /// Whether bundle `name` as served takes `key` on the company routes.
    fn takes(catalog: &Catalog, name: &str, key: &str) -> bool {
        catalog
            .entry(name)
            .and_then(|e| e.serving.as_ref())
            .is_some_and(|v| v.prepared.takes_app(key))
    }

    /// `app_keys` are secrets as tokens are: the latest bundle.toml that reads decides them at
    /// once, also while another file has errors and the last good version serves (keys added to
    /// close the company routes, or a leaked one taken out). One with an error changes nothing
    /// and still leaves the bundle's tokens known, so a clash is still found.
    #[test]
    fn app_keys_apply_to_the_last_good_version_at_once_and_an_error_in_them_hides_no_token() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "summit", &["summit-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        assert_eq!(serve(&mut catalog, &["summit-token"]), vec![some("summit")]);
        assert!(takes(&catalog, "summit", "any-key"));

        write(tmp.path(), "summit", &["summit-token"], true);
        let toml = tmp.path().join("summit/bundle.toml");
        std::fs::write(
            &toml,
            "tokens = [\"summit-token\"]\napp_keys = [\"key-1\"]\n",
        )
        .expect("write");
        assert_eq!(serve(&mut catalog, &["summit-token"]), vec![some("summit")]);
        assert!(catalog.entry("summit").is_some_and(Entry::has_errors));
        assert!(takes(&catalog, "summit", "key-1"));
        assert!(!takes(&catalog, "summit", "any-key"));

        // A blank key: an error, and the keys in force stay; the token is still known, so a
        // bundle naming it too is refused it.
        std::fs::write(&toml, "tokens = [\"summit-token\"]\napp_keys = [\" \"]\n").expect("write");
        write(tmp.path(), "twin", &["summit-token"], false);
        let served = serve(&mut catalog, &["summit-token"]);
        assert_eq!(served, vec![some("summit")]);
        assert!(takes(&catalog, "summit", "key-1"));
        assert!(!takes(&catalog, "summit", "any-key"));
        assert_eq!(conflicts(&catalog, "twin").len(), 1, "{catalog:?}");
    }

    #[test]
    fn a_bundle_serving_keeps_its_token_when_a_copy_appears_earlier_in_name_order() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "main", &["event-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        assert_eq!(serve(&mut catalog, &["event-token"]), vec![some("main")]);

        write(tmp.path(), "a-copy", &["event-token"], false);
        let served = serve(&mut catalog, &["event-token"]);

        assert_eq!(served, vec![some("main")]);
        assert_eq!(conflicts(&catalog, "a-copy").len(), 1);
    }

    #[test]
    fn a_clash_resolves_when_the_holder_is_removed() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "alpha", &["shared-token"], false);
        write(tmp.path(), "beta", &["shared-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        assert_eq!(serve(&mut catalog, &["shared-token"]), vec![some("alpha")]);

        std::fs::remove_dir_all(tmp.path().join("alpha")).expect("removed");
        let served = serve(&mut catalog, &["shared-token"]);

        assert_eq!(served, vec![some("beta")]);
        assert!(catalog.entry("alpha").is_none());
        assert!(conflicts(&catalog, "beta").is_empty());
    }

    #[test]
    fn a_renamed_bundle_keeps_serving_its_tokens_under_its_new_name() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "old-name", &["event-token"], false);
        write(tmp.path(), "other", &["other-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        assert_eq!(
            serve(&mut catalog, &["event-token"]),
            vec![some("old-name")]
        );

        std::fs::rename(tmp.path().join("old-name"), tmp.path().join("new-name")).expect("rename");
        let refreshed = catalog.refresh(&Scope::All).expect("the data folder lists");
        assert_eq!(refreshed.removed, ["old-name"]);
        assert_eq!(refreshed.renamed, [("old-name".into(), "new-name".into())]);
        let served = serve(&mut catalog, &["event-token", "other-token"]);

        assert_eq!(served, vec![some("new-name"), some("other")]);
        assert!(catalog.entry("old-name").is_none());
        assert!(conflicts(&catalog, "new-name").is_empty());
    }

    /// A leaked token taken out of bundle.toml while another file has an error: the last good
    /// version keeps serving, under the tokens bundle.toml still names only.
    #[test]
    fn a_token_taken_out_stops_even_while_the_bundle_has_errors() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "alpha", &["kept-token", "leaked-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        let both = ["kept-token", "leaked-token", "added-token"];
        assert_eq!(
            serve(&mut catalog, &both),
            vec![some("alpha"), some("alpha"), None]
        );

        write(tmp.path(), "alpha", &["kept-token", "added-token"], true);
        assert_eq!(serve(&mut catalog, &both), vec![some("alpha"), None, None]);
        assert!(catalog.entry("alpha").is_some_and(Entry::has_errors));

        // Every token taken out: not served at all; fixed, it serves its new tokens.
        write(tmp.path(), "alpha", &["added-token"], true);
        assert_eq!(serve(&mut catalog, &both), vec![None, None, None]);
        write(tmp.path(), "alpha", &["added-token"], false);
        assert_eq!(serve(&mut catalog, &both), vec![None, None, some("alpha")]);
    }

    /// Every token taken out, by `tokens = []`, by deleting the `tokens` line or by removing
    /// bundle.toml: an error, and the last good version stops at once too; an unreadable
    /// bundle.toml (not TOML) tells nothing, so the last good version keeps its tokens.
    #[test]
    fn no_token_named_stops_the_last_good_version() {
        let tmp = tempfile::tempdir().expect("tmp");
        let toml = tmp.path().join("alpha/bundle.toml");
        // With a [source] in error too: the empty list still counts.
        for take_out in [
            "tokens = []\n",
            "tokens = []\n[source]\nurl = 3\n",
            "app_keys = [\"x\"]\n",
            "",
            "removed",
        ] {
            write(tmp.path(), "alpha", &["alpha-token"], false);
            let mut catalog = Catalog::at(tmp.path());
            assert_eq!(serve(&mut catalog, &["alpha-token"]), vec![some("alpha")]);

            std::fs::write(&toml, "tokens = [\"alpha-token\"\n").expect("broken");
            assert_eq!(serve(&mut catalog, &["alpha-token"]), vec![some("alpha")]);
            assert!(catalog.entry("alpha").is_some_and(Entry::has_errors));

            if take_out == "removed" {
                std::fs::remove_file(&toml).expect("removed");
            } else {
                std::fs::write(&toml, take_out).expect("emptied");
            }
            assert_eq!(
                serve(&mut catalog, &["alpha-token"]),
                vec![None],
                "{take_out}"
            );
            assert!(catalog.entry("alpha").is_some_and(Entry::has_errors));

            write(tmp.path(), "alpha", &["alpha-token"], false);
            assert_eq!(serve(&mut catalog, &["alpha-token"]), vec![some("alpha")]);
        }
    }

    /// A load abandoned for its time limit read nothing, so it takes no token away: after a
    /// bundle.toml with an error of its own (the last good version serving), the bundle keeps
    /// serving. Before, the abandoned load passed on the empty list that error had left, and
    /// the bundle answered 401 to everyone.
    #[test]
    fn an_abandoned_load_takes_no_token_away() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "alpha", &["alpha-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        assert_eq!(serve(&mut catalog, &["alpha-token"]), vec![some("alpha")]);
        std::fs::write(tmp.path().join("alpha/bundle.toml"), "tokens = [").expect("broken");
        assert_eq!(serve(&mut catalog, &["alpha-token"]), vec![some("alpha")]);

        catalog.load_time_limit = std::time::Duration::ZERO;
        std::fs::write(tmp.path().join("alpha/event.json"), EVENT).expect("touched");
        assert_eq!(serve(&mut catalog, &["alpha-token"]), vec![some("alpha")]);
        let abandoned = catalog.entry("alpha").map(|e| format!("{:?}", e.problems));
        assert!(
            abandoned
                .as_deref()
                .is_some_and(|p| p.contains("abandoned")),
            "{abandoned:?}"
        );
    }

    /// A reload that could not list the data folder read nothing: the next one reads every
    /// bundle, whatever its own events name (the edit made meanwhile is not lost).
    #[test]
    fn after_a_failed_listing_the_next_refresh_reads_every_bundle() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "alpha", &["alpha-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        assert_eq!(serve(&mut catalog, &["alpha-token"]), vec![some("alpha")]);

        // The data folder is a bundle itself for a while; alpha is edited meanwhile.
        std::fs::write(tmp.path().join("bundle.toml"), "").expect("write");
        std::fs::write(tmp.path().join("alpha/event.json"), "{\"data\": 3}").expect("edit");
        let alpha = Scope::Bundles(["alpha".to_string()].into());
        assert!(catalog.refresh(&alpha).is_err());
        std::fs::remove_file(tmp.path().join("bundle.toml")).expect("remove");

        // The event of the removal names only the data folder's own file.
        catalog
            .refresh(&Scope::Bundles(BTreeSet::new()))
            .expect("lists again");
        assert!(catalog.entry("alpha").is_some_and(Entry::has_errors));
        assert!(catalog.refresh(&Scope::Bundles(BTreeSet::new())).is_ok());
    }

    /// A copy waits while the original serves; the original renamed keeps its token, as it
    /// would under its old name. In name order the copy would have come first.
    #[test]
    fn a_renamed_bundle_keeps_its_token_from_a_copy_waiting_for_it() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "summit", &["event-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        assert_eq!(serve(&mut catalog, &["event-token"]), vec![some("summit")]);
        write(tmp.path(), "backup", &["event-token"], false);
        assert_eq!(serve(&mut catalog, &["event-token"]), vec![some("summit")]);

        std::fs::rename(tmp.path().join("summit"), tmp.path().join("zsummit")).expect("rename");
        assert_eq!(serve(&mut catalog, &["event-token"]), vec![some("zsummit")]);
        assert_eq!(conflicts(&catalog, "backup").len(), 1);
        // Later refreshes change nothing: it is the bundle serving now.
        assert_eq!(serve(&mut catalog, &["event-token"]), vec![some("zsummit")]);

        // Removed for good, the copy takes over.
        std::fs::remove_dir_all(tmp.path().join("zsummit")).expect("remove");
        assert_eq!(serve(&mut catalog, &["event-token"]), vec![some("backup")]);
    }

    /// The original renamed while it has errors has nothing to serve under its new name (a new
    /// folder has no last good version): the copy serves, as it would were it removed.
    #[test]
    fn a_broken_bundle_renamed_does_not_keep_a_copy_from_its_token() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "summit", &["event-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        serve(&mut catalog, &[]);
        write(tmp.path(), "backup", &["event-token"], false);
        write(tmp.path(), "summit", &["event-token"], true);
        assert_eq!(serve(&mut catalog, &["event-token"]), vec![some("summit")]);

        std::fs::rename(tmp.path().join("summit"), tmp.path().join("zsummit")).expect("rename");
        assert_eq!(serve(&mut catalog, &["event-token"]), vec![some("backup")]);
    }

    #[test]
    fn a_broken_bundle_never_takes_a_token_and_reports_the_clash() {
        let tmp = tempfile::tempdir().expect("tmp");
        // In name order the broken one comes first; servable bundles claim first all the same.
        write(tmp.path(), "a-broken", &["shared-token"], true);
        write(tmp.path(), "b-good", &["shared-token"], false);
        let mut catalog = Catalog::at(tmp.path());

        let served = serve(&mut catalog, &["shared-token"]);

        assert_eq!(served, vec![some("b-good")]);
        assert_eq!(conflicts(&catalog, "a-broken").len(), 1, "{catalog:?}");
        assert!(conflicts(&catalog, "b-good").is_empty());
        assert!(catalog.entry("a-broken").is_some_and(Entry::has_errors));
    }

    #[test]
    fn a_broken_bundle_whose_tokens_were_all_taken_out_takes_no_token_from_a_good_one() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "alpha", &["alpha-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        serve(&mut catalog, &["alpha-token"]);

        // In one refresh alpha breaks and names a new token, which a new good bundle names too:
        // alpha's last good version keeps no token, so alpha ranks with the broken ones.
        write(tmp.path(), "alpha", &["shared-token"], true);
        write(tmp.path(), "beta", &["shared-token"], false);
        let served = serve(&mut catalog, &["alpha-token", "shared-token"]);

        assert_eq!(served, vec![None, some("beta")]);
        assert!(conflicts(&catalog, "beta").is_empty(), "{catalog:?}");
        assert_eq!(conflicts(&catalog, "alpha").len(), 1, "{catalog:?}");
    }

    #[test]
    fn two_broken_bundles_naming_one_token_report_the_clash_once() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "a-broken", &["shared-token"], true);
        write(tmp.path(), "b-broken", &["shared-token"], true);
        let mut catalog = Catalog::at(tmp.path());

        let served = serve(&mut catalog, &["shared-token"]);

        assert_eq!(served, vec![None]);
        assert!(conflicts(&catalog, "a-broken").is_empty());
        assert_eq!(
            conflicts(&catalog, "b-broken"),
            vec!["token shar… is also named by bundle \"a-broken\", which has it (a token opens one bundle): bundle \"b-broken\" is not served"]
        );
    }

    #[test]
    fn an_edit_that_takes_a_held_token_keeps_the_last_good_version_until_the_token_is_free() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "alpha", &["alpha-token"], false);
        write(tmp.path(), "beta", &["beta-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        serve(&mut catalog, &[]);

        write(tmp.path(), "beta", &["beta-token", "alpha-token"], false);
        let served = serve(&mut catalog, &["alpha-token", "beta-token"]);

        assert_eq!(served, vec![some("alpha"), some("beta")]);
        assert_eq!(
            conflicts(&catalog, "beta"),
            vec!["token alph… is also named by bundle \"alpha\", which has it (a token opens one bundle): bundle \"beta\" keeps serving its previous version"]
        );

        // The holder lets the token go: the new version of beta takes it.
        write(tmp.path(), "alpha", &["alpha-new-token"], false);
        let served = serve(
            &mut catalog,
            &["alpha-token", "beta-token", "alpha-new-token"],
        );

        assert_eq!(served, vec![some("beta"), some("beta"), some("alpha")]);
        assert!(conflicts(&catalog, "beta").is_empty());
    }

    /// A `[simulate]` delay past `--max-delay` is a warning that says it is cut; one within it
    /// is not. Before, `/status` showed the delay and every request waited the cap, unsaid.
    #[test]
    fn a_simulated_delay_past_the_cap_is_a_warning() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "alpha", &["alpha-token"], false);
        let toml = tmp.path().join("alpha/bundle.toml");
        let reading = Reading {
            max_delay: std::time::Duration::from_secs(5),
            ..crate::config::ServeOptions::default().reading()
        };
        let mut catalog = Catalog::new(tmp.path(), reading, Arc::default());
        let every = "a delay of up to 60000 ms (every endpoint) is longer than --max-delay (5s)";
        // With a table per endpoint, the endpoints that go past the cap are named.
        let named = "a delay of up to 7000 ms (payments, speaker) is longer than --max-delay (5s)";
        for (table, said) in [
            ("latency_ms = [100, 60000]", Some(every)),
            ("latency_ms = 5000", None),
            (
                "[simulate.endpoints.payments]\nlatency_ms = 6000\n\
                 [simulate.endpoints.speaker]\nlatency_ms = [1, 7000]\n",
                Some(named),
            ),
        ] {
            let text = format!("tokens = [\"alpha-token\"]\n[simulate]\n{table}\n");
            std::fs::write(&toml, text).expect("bundle.toml");
            assert_eq!(serve(&mut catalog, &["alpha-token"]), vec![some("alpha")]);
            let problems = catalog.entry("alpha").map(|e| format!("{:?}", e.problems));
            let problems = problems.unwrap_or_default();
            match said {
                Some(said) => assert!(problems.contains(said), "{table}: {problems}"),
                None => assert!(
                    !problems.contains("a delay of up to"),
                    "{table}: {problems}"
                ),
            }
        }
    }

    /// A token taken out stops at once also when the new list clashes: rotating a leaked token
    /// out for one another bundle holds must not leave the leaked one open. Before, the last good
    /// version kept every token it had while the clash lasted. Named again, it opens again.
    #[test]
    fn a_token_taken_out_stops_while_the_new_list_clashes() {
        let tmp = tempfile::tempdir().expect("tmp");
        write(tmp.path(), "alpha", &["alpha-token"], false);
        write(tmp.path(), "beta", &["beta-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        let tokens = ["alpha-token", "beta-token", "beta-new"];
        assert_eq!(
            serve(&mut catalog, &tokens),
            vec![some("alpha"), some("beta"), None]
        );

        write(tmp.path(), "beta", &["beta-new", "alpha-token"], false);
        assert_eq!(
            serve(&mut catalog, &tokens),
            vec![some("alpha"), None, None]
        );
        assert_eq!(
            conflicts(&catalog, "beta"),
            vec!["token alph… is also named by bundle \"alpha\", which has it (a token opens one bundle): bundle \"beta\" is not served"]
        );

        // The leaked token named again: the last good version, kept, opens with it again.
        write(tmp.path(), "beta", &["beta-token", "alpha-token"], false);
        assert_eq!(
            serve(&mut catalog, &tokens),
            vec![some("alpha"), some("beta"), None]
        );
    }

    /// Every token taken out while another file has errors keeps the last good version (not
    /// served): naming its token again serves it again before the file is mended. Before, it
    /// was dropped, and the bundle answered 401 until the file was fixed.
    #[test]
    fn tokens_named_again_reopen_the_last_good_version() {
        let tmp = tempfile::tempdir().expect("tmp");
        let toml = tmp.path().join("alpha/bundle.toml");
        write(tmp.path(), "alpha", &["alpha-token"], false);
        let mut catalog = Catalog::at(tmp.path());
        assert_eq!(serve(&mut catalog, &["alpha-token"]), vec![some("alpha")]);

        write(tmp.path(), "alpha", &["alpha-token"], true);
        assert_eq!(serve(&mut catalog, &["alpha-token"]), vec![some("alpha")]);
        std::fs::write(&toml, "tokens = []\n").expect("emptied");
        assert_eq!(serve(&mut catalog, &["alpha-token"]), vec![None]);

        std::fs::write(&toml, "tokens = [\"alpha-token\"]\n").expect("named again");
        assert_eq!(serve(&mut catalog, &["alpha-token"]), vec![some("alpha")]);
        assert!(catalog.entry("alpha").is_some_and(Entry::has_errors));
    }
}

#[cfg(test)]
mod reuse {
    use std::path::Path;

    use super::*;

    /// Copies the demo bundle (files and its folder of detail files) to `data/demo`.
    fn copy_demo(data: &Path) -> PathBuf {
        fn copy(from: &Path, to: &Path) {
            std::fs::create_dir_all(to).expect("folder");
            for entry in std::fs::read_dir(from).expect("demo folder") {
                let path = entry.expect("entry").path();
                let target = to.join(path.file_name().expect("name"));
                if path.is_dir() {
                    copy(&path, &target);
                } else {
                    std::fs::copy(&path, &target).expect("copy");
                }
            }
        }
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/demo");
        copy(&demo, &data.join("demo"));
        data.join("demo")
    }

    /// Reloads everything, publishes, and returns the version served.
    fn reload(catalog: &mut Catalog) -> Arc<Version> {
        catalog.refresh(&Scope::All).expect("the data folder lists");
        catalog.snapshot();
        let entry = catalog.entry("demo").expect("the demo bundle");
        assert!(!entry.has_errors(), "{:?}", entry.problems);
        Arc::clone(entry.serving.as_ref().expect("served"))
    }

    #[test]
    fn a_folder_read_with_the_same_bytes_keeps_its_answers_and_any_change_prepares_them_again() {
        let data = tempfile::tempdir().expect("temporary folder");
        let dir = copy_demo(data.path());
        let mut catalog = Catalog::at(data.path());
        let first = reload(&mut catalog);
        // Nothing changed (the same stamps): a new version, same answers.
        let second = reload(&mut catalog);
        assert!(
            !Arc::ptr_eq(&first, &second),
            "a reload makes a new version"
        );
        assert!(second.prepared.shares_answers(&first.prepared));

        // Rewritten with the same bytes (a new modification time): a new version, same answers.
        let payments = dir.join("payments.json");
        let bytes = std::fs::read(&payments).expect("payments");
        std::fs::write(&payments, &bytes).expect("rewrite");
        let third = reload(&mut catalog);
        assert!(
            !Arc::ptr_eq(&second, &third),
            "a reload makes a new version"
        );
        assert!(third.prepared.shares_answers(&second.prepared));
        assert!(third.loaded_at >= second.loaded_at);

        // One byte more in a detail file (in the bundle's sub-folder): prepared again.
        let detail = dir.join("payment_details/PG2026000104.json");
        let mut changed = std::fs::read(&detail).expect("detail");
        changed.push(b'\n');
        std::fs::write(&detail, &changed).expect("change");
        let fourth = reload(&mut catalog);
        assert!(!fourth.prepared.shares_answers(&third.prepared));

        // A new file in the folder: prepared again too.
        std::fs::write(dir.join("notes.txt"), "hello").expect("new file");
        let fifth = reload(&mut catalog);
        assert!(!fifth.prepared.shares_answers(&fourth.prepared));
        let sixth = reload(&mut catalog);
        assert!(sixth.prepared.shares_answers(&fifth.prepared));
    }

    #[test]
    fn a_bundle_with_errors_is_read_again_whatever_its_bytes() {
        let data = tempfile::tempdir().expect("temporary folder");
        let dir = copy_demo(data.path());
        let mut catalog = Catalog::at(data.path());
        let good = reload(&mut catalog);
        std::fs::write(dir.join("event.json"), "{\"data\": 3}").expect("break");
        for _ in 0..2 {
            catalog.refresh(&Scope::All).expect("lists");
            catalog.snapshot();
            let entry = catalog.entry("demo").expect("the demo bundle");
            assert!(entry.has_errors());
            assert!(entry.fingerprint.is_none());
            let serving = entry.serving.as_ref().expect("the last good version");
            assert!(Arc::ptr_eq(serving, &good));
        }
    }
}
