//! Reads a data folder into bundles. The only module that touches the filesystem.
//!
//! Loading never fails because of a bundle's content: it returns a report per bundle folder with
//! the bundle (when it had no error) and every problem found, so `serve` can start with the good
//! bundles and `check` can list everything at once. Only a data folder that cannot be listed at
//! all is an `Err`. Deciding between bundles (token clashes, reloads) is `catalog`'s job.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::api::{self, Decode, Feed, FileBody, OnDisk};
use crate::model::decode::{self, Diag};
use crate::model::payments;
use crate::model::{self, Bundle, Format, Slot};
use crate::prepare::{Payments, PaymentsWriter, Pieces};
use crate::problem::{Location, Problem};
use crate::read;
use crate::timed::Progress;
use crate::token::Token;

/// The data folder itself cannot be used: it cannot be read, is not a folder, or is a bundle.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    #[error("cannot read the data folder {}: {source}", path.display())]
    Unreadable { path: PathBuf, source: io::Error },
    #[error("the data folder {} is not a folder", path.display())]
    NotAFolder { path: PathBuf },
    #[error("the data folder {} is a bundle itself (it holds bundle.toml): give the folder that holds its bundles, {}", path.display(), parent.display())]
    IsABundle { path: PathBuf, parent: PathBuf },
}

/// The outcome for one bundle folder.
#[derive(Debug)]
pub(crate) struct BundleReport {
    /// The folder's name, which is the bundle's name.
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    /// The bundle, when it had no error.
    pub(crate) bundle: Option<Bundle>,
    /// Every error and warning, in the order found.
    pub(crate) problems: Vec<Problem>,
    /// When the folder was read.
    pub(crate) loaded_at: chrono::DateTime<chrono::Utc>,
    /// The tokens its bundle.toml names, even when another file has errors, so token clashes
    /// are found across every bundle: none when there is no bundle.toml (or `tokens = []`);
    /// `None` when bundle.toml itself has an error, which tells nothing of them.
    pub(crate) tokens: Option<Vec<Token>>,
    /// The app keys its bundle.toml names, even when another file has errors (`None` when
    /// bundle.toml has an error): a last good version takes them at once, as it does tokens.
    pub(crate) app_keys: Option<crate::model::AppKeys>,
    /// The folder holds no data file, only a `bundle.toml` without errors naming a `[source]`:
    /// a desk set up before its first refresh, which fills it (docs/kiosk.md). Not served
    /// until then.
    pub(crate) awaits_source: bool,
}

impl BundleReport {
    pub(crate) fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| p.is_error())
    }

    pub(crate) fn warnings(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| !p.is_error())
    }
}

/// Whether a name in the data folder is never a bundle: it starts with `_` (the staging folders
/// of `pull` and `gen`, or a bundle put aside) or `.` (hidden: editor and system files). The one
/// rule, used by loading, watching, `pull`, `gen` and the test server.
pub(crate) fn ignored(name: &str) -> bool {
    name.starts_with(['_', '.'])
}

/// Whether a name inside a bundle folder is skipped: it starts with `.` (editor and system
/// files, a temporary file to be renamed over a bundle file), or is an editor's backup or
/// autosave copy (`event.json~`, `#event.json#`). A `_` is a name like another there: a payment
/// reference may start with one. The one rule, used by loading and by the fingerprint of what
/// loading reads.
pub(crate) fn hidden(name: &str) -> bool {
    name.starts_with('.')
        || name.ends_with('~')
        || (name.len() > 1 && name.starts_with('#') && name.ends_with('#'))
}

/// The bundle folders of a data folder, in name order. Folders [`ignored`] are skipped, and so
/// are plain files at the top of the data folder, but for `bundle.toml`: a data folder holding
/// one is a bundle given in place of its parent, an error that says so (its sub-folders, such as
/// `payment_details`, would otherwise be reported as broken bundles). A link that leads nowhere
/// is listed too: whether it is a bundle is the catalog's to say (one when it was one).
pub(crate) fn bundle_names(dir: &Path) -> Result<Vec<String>, LoadError> {
    let unreadable = |source| LoadError::Unreadable {
        path: dir.to_path_buf(),
        source,
    };
    let meta = fs::metadata(dir).map_err(unreadable)?;
    if !meta.is_dir() {
        return Err(LoadError::NotAFolder {
            path: dir.to_path_buf(),
        });
    }
    if is_bundle_folder(dir) {
        // From the text when it ends in a name; else (`.`, `demo/..`) one level up from it.
        let parent = match (dir.file_name(), dir.parent()) {
            (Some(_), Some(p)) if !p.as_os_str().is_empty() => p.to_path_buf(),
            (Some(_), _) => PathBuf::from("."),
            (None, _) => dir.join(".."),
        };
        return Err(LoadError::IsABundle {
            path: dir.to_path_buf(),
            parent,
        });
    }
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if ignored(&name) {
            continue;
        }
        // Follows links, so a bundle may be a symlink to a folder elsewhere. A link that leads
        // nowhere (its target missing, or a loop) is listed too: the catalog keeps it as a
        // bundle when it was one, whose load says where the link leads (switched by `ln -sfn`
        // to a mistyped release, a bundle keeps its last good version with an error, rather
        // than vanishing as if removed).
        let folder = match fs::metadata(entry.path()) {
            Ok(meta) => meta.is_dir(),
            Err(_) => entry.file_type().is_ok_and(|t| t.is_symlink()),
        };
        if folder {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// The stem of the file that names a bundle's tokens (`bundle.toml`).
const CONFIG: &str = "bundle";

/// The file whose presence at a folder's top makes it a bundle folder.
pub(crate) const BUNDLE_FILE: &str = "bundle.toml";

/// A bundle folder: [`BUNDLE_FILE`] is at its top (a file, not a folder of that name).
pub(crate) fn is_bundle_folder(dir: &Path) -> bool {
    dir.join(BUNDLE_FILE).is_file()
}

/// Whether a stem names a file of the endpoint table (a whole file or a streamed one).
fn is_endpoint_file(stem: &str) -> bool {
    api::is_on_disk(stem, OnDisk::File)
}

/// Whether a folder name is one of the endpoint table's folders of files by reference.
fn is_endpoint_folder(name: &str) -> bool {
    api::is_on_disk(name, OnDisk::Folder)
}

/// "bundle.toml, a, b and c as .json or .toml, and a d folder": what a bundle may hold.
fn known_files() -> String {
    let files: Vec<&str> = api::on_disk(OnDisk::File).collect();
    let folders: Vec<String> = api::on_disk(OnDisk::Folder)
        .map(|key| format!("a {key} folder"))
        .collect();
    let listed = match files.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    };
    let mut out = format!("bundle.toml, {listed} as .json or .toml");
    for folder in folders {
        out.push_str(", and ");
        out.push_str(&folder);
    }
    out
}

/// Loads one bundle folder; a file over `max_file_bytes` is an error, not read.
pub(crate) fn load_bundle_capped(dir: &Path, name: &str, max_file_bytes: u64) -> BundleReport {
    load_bundle_tracked(
        dir,
        name,
        max_file_bytes,
        &Progress::default(),
        &Pieces::default(),
    )
}

/// As [`load_bundle_capped`], noting in `progress` each file as it is read (so a load abandoned
/// for its time limit can name the file it was on), and sharing through `pieces` the pieces of
/// a large body that a version already loaded holds (`prepare::Pieces`).
pub(crate) fn load_bundle_tracked(
    dir: &Path,
    name: &str,
    max_file_bytes: u64,
    progress: &Progress,
    pieces: &Pieces,
) -> BundleReport {
    progress.set(dir);
    let mut problems = Vec::new();
    let mut tokens = None;
    let mut app_keys = None;
    let mut awaits_source = false;
    let bundle = BundleLoader {
        dir,
        max_file_bytes,
        progress,
        pieces,
        problems: &mut problems,
        tokens: &mut tokens,
        app_keys: &mut app_keys,
        awaits_source: &mut awaits_source,
    }
    .load(name);
    let bundle = bundle.filter(|_| !problems.iter().any(Problem::is_error));
    BundleReport {
        name: name.to_string(),
        dir: dir.to_path_buf(),
        bundle,
        problems,
        loaded_at: chrono::Utc::now(),
        tokens,
        app_keys,
        awaits_source,
    }
}

struct BundleLoader<'a> {
    dir: &'a Path,
    /// The largest file read (`--max-file-bytes`).
    max_file_bytes: u64,
    /// The file being read, for a load abandoned for its time limit.
    progress: &'a Progress,
    /// The pieces of large bodies alive in the catalog.
    pieces: &'a Pieces,
    problems: &'a mut Vec<Problem>,
    tokens: &'a mut Option<Vec<Token>>,
    app_keys: &'a mut Option<crate::model::AppKeys>,
    awaits_source: &'a mut bool,
}

/// A file found in a bundle, by what it is for.
type Found = BTreeMap<String, Vec<(Format, PathBuf)>>;

impl BundleLoader<'_> {
    fn load(mut self, name: &str) -> Option<Bundle> {
        let (files, folders) = self.scan()?;

        let config = self.config(&files);
        if let Some(config) = &config {
            *self.tokens = Some(config.tokens.clone());
            self.app_keys.clone_from(&config.app_keys);
            // Only the missing event is wrong with it yet (a bundle.toml without tokens, a
            // folder where a file belongs: errors of their own, said as such).
            *self.awaits_source = config.source.is_some()
                && folders.is_empty()
                && files.keys().all(|stem| stem == CONFIG)
                && !self.problems.iter().any(Problem::is_error);
        }
        // Whole files and the stream first: the references of the payments tell which detail
        // files belong to a payment.
        let mut slots: Vec<Option<Option<Slot>>> = Vec::with_capacity(api::API.len());
        for e in &api::API {
            slots.push(match e.feed {
                Feed::File(decode) => self.whole(&files, e.key, decode).map(|b| b.map(Slot::Body)),
                Feed::Stream => self
                    .payments(&files, e.key)
                    .map(|p| Some(Slot::Stream(p.unwrap_or_default()))),
                Feed::PerReference(_) => Some(None),
                Feed::Item { .. } | Feed::Derived { .. } | Feed::Write(_) | Feed::Server(_) => {
                    Some(Some(Slot::Elsewhere))
                }
            });
        }
        // The payments a detail file may belong to; unknown when payments had an error.
        let stream = api::API.iter().position(|e| matches!(e.feed, Feed::Stream));
        let payments = match stream.and_then(|i| slots.get(i)) {
            Some(Some(Some(Slot::Stream(p)))) => Some(p.clone()),
            _ => None,
        };
        for (slot, e) in slots.iter_mut().zip(&api::API) {
            if let Feed::PerReference(decode) = e.feed {
                *slot = match folders.get(e.key) {
                    Some(d) => self.by_reference(d, decode, payments.as_ref()),
                    None => Some(BTreeMap::new()),
                }
                .map(|m| Some(Slot::PerReference(m)));
            }
        }

        let mut out = Vec::with_capacity(slots.len());
        for slot in slots {
            // A whole file that is absent and required has been reported (and is `None`).
            out.push(slot??);
        }
        Some(Bundle {
            name: name.to_string(),
            config: config?,
            slots: out,
        })
    }

    /// Lists the bundle folder: known files by stem, the details folder, warnings for the rest.
    fn scan(&mut self) -> Option<(Found, BTreeMap<String, PathBuf>)> {
        let entries = match sorted_entries(self.dir) {
            Ok(e) => e,
            Err(e) => {
                let link = fs::read_link(self.dir)
                    .map(|to| format!(" (a link to {})", to.display()))
                    .unwrap_or_default();
                self.problems.push(Problem::error(
                    self.dir,
                    Location::File,
                    format!("cannot read the bundle folder{link}: {e}"),
                ));
                return None;
            }
        };
        let mut files = Found::new();
        let mut folders = BTreeMap::new();
        for (name, path, is_dir) in entries {
            if hidden(&name) {
                continue; // editor swap files, .DS_Store, partial downloads
            }
            if is_dir {
                if is_endpoint_folder(&name) {
                    folders.insert(name, path);
                } else if split_known(&name).is_some_and(|(stem, format)| {
                    is_endpoint_file(stem) || (stem == CONFIG && format == Format::Toml)
                }) {
                    self.wrong_kind(&path, "a folder where a file belongs");
                } else {
                    self.unknown(&path, "folder");
                }
                continue;
            }
            if is_endpoint_folder(&name) {
                self.wrong_kind(&path, "a file (or not a folder) where a folder belongs");
                continue;
            }
            match split_known(&name) {
                Some((stem, format))
                    if is_endpoint_file(stem) || (stem == CONFIG && format == Format::Toml) =>
                {
                    files
                        .entry(stem.to_string())
                        .or_default()
                        .push((format, path));
                }
                _ => self.unknown(&path, "file"),
            }
        }
        Some((files, folders))
    }

    /// A folder where a record file belongs, or the reverse: an error, so the bundle keeps its
    /// last good version rather than serving an endpoint empty.
    fn wrong_kind(&mut self, path: &Path, what: &str) {
        self.problems.push(Problem::error(
            path,
            Location::File,
            format!("{what}; the bundle keeps serving its last good version"),
        ));
    }

    fn unknown(&mut self, path: &Path, what: &str) {
        self.problems.push(Problem::warning(
            path,
            Location::File,
            format!("unknown {what}, ignored (a bundle holds {})", known_files()),
        ));
    }

    /// The one file of a stem, or an error when it exists in both formats.
    fn pick(
        &mut self,
        found: Option<&Vec<(Format, PathBuf)>>,
    ) -> Result<Option<(Format, PathBuf)>, ()> {
        match found.map(Vec::as_slice) {
            None | Some([]) => Ok(None),
            Some([one]) => Ok(Some(one.clone())),
            Some([first, rest @ ..]) => {
                let others: Vec<String> =
                    rest.iter().map(|(_, p)| p.display().to_string()).collect();
                self.problems.push(Problem::error(
                    &first.1,
                    Location::File,
                    format!(
                        "{} holds the same data; keep one of the two formats",
                        others.join(", ")
                    ),
                ));
                Err(())
            }
        }
    }

    /// `bundle.toml`, which every bundle needs.
    fn config(&mut self, files: &Found) -> Option<model::BundleConfig> {
        match self.optional(files, CONFIG, model::bundle_config)? {
            Some(config) => Some(config),
            None => {
                // No file names no token: a folder whose bundle.toml was removed opens to none.
                *self.tokens = Some(Vec::new());
                self.problems.push(Problem::error(
                    self.dir.join("bundle.toml"),
                    Location::File,
                    "missing: every bundle needs one, naming its tokens: tokens = [\"...\"]",
                ));
                None
            }
        }
    }

    /// A whole file's body: decoded, or the default body of an absent optional file. `None` when
    /// it had an error or is required and absent (reported); `Some(None)` never happens for a
    /// present or optional file.
    fn whole(
        &mut self,
        files: &Found,
        stem: &str,
        decode: &dyn Decode,
    ) -> Option<Option<Box<dyn FileBody>>> {
        let (format, path) = match self.pick(files.get(stem)) {
            Ok(None) => {
                return match decode.absent() {
                    Some(body) => Some(Some(body)),
                    None => {
                        // Said of the folder: naming one of the two files would name one that
                        // may never have been there.
                        self.problems.push(Problem::error(
                            self.dir,
                            Location::File,
                            format!("no {stem}.json or {stem}.toml: every bundle needs its {stem}"),
                        ));
                        Some(None)
                    }
                };
            }
            Ok(Some(f)) => f,
            Err(()) => return None,
        };
        self.file(&path, format, |v, diag| decode.decode(v, diag))
            .map(Some)
    }

    /// `Some(None)` when the file is absent; `None` when it is there with an error.
    fn optional<T>(
        &mut self,
        files: &Found,
        stem: &str,
        decode: fn(&Value, &mut Diag) -> Option<T>,
    ) -> Option<Option<T>> {
        let (format, path) = match self.pick(files.get(stem)) {
            Ok(None) => return Some(None),
            Ok(Some(f)) => f,
            Err(()) => return None,
        };
        self.file(&path, format, decode).map(Some)
    }

    /// The payments file: JSON is streamed record by record (see `model::payments`), TOML goes
    /// through the same builder from its parsed value.
    fn payments(&mut self, files: &Found, stem: &str) -> Option<Option<Payments>> {
        let (format, path) = match self.pick(files.get(stem)) {
            Ok(None) => return Some(None),
            Ok(Some(f)) => f,
            Err(()) => return None,
        };
        if format == Format::Toml {
            let writer = PaymentsWriter::new(self.pieces);
            return self
                .file(&path, format, |v, diag| {
                    payments::from_value(v, diag, writer)
                })
                .map(Some);
        }
        self.progress.set(&path);
        let max = self.max_file_bytes;
        let open = || -> Result<_, read::ReadError> {
            let mut reader = BufReader::with_capacity(256 * 1024, read::open(&path, max)?);
            read::skip_bom(&mut reader)?;
            Ok(reader)
        };
        // Split into records first (fast); a file that does not split or parse is read again
        // as a stream, whose errors say where in the file they are.
        let mut diag = Diag::default();
        let split = open().ok().and_then(|reader| {
            payments::from_json_split(reader, &mut diag, PaymentsWriter::new(self.pieces)).ok()
        });
        let result = match split {
            Some(payments) => Ok(payments),
            None => {
                diag = Diag::default();
                let reader = match open() {
                    Ok(r) => r,
                    Err(e) => {
                        self.problems
                            .push(Problem::error(&path, Location::File, e.to_string()));
                        return None;
                    }
                };
                payments::from_json_reader(reader, &mut diag, PaymentsWriter::new(self.pieces))
            }
        };
        self.push_findings(&path, diag);
        match result {
            Ok(p) => p.map(Some),
            // Read again only when small: a large file cut short is no empty one, and is not
            // to be held in memory whole.
            Err(e)
                if e.is_eof() && read::read(&path, 4096).is_ok_and(|b| self.empty(&path, &b)) =>
            {
                None
            }
            Err(e) => {
                let full = e.to_string();
                let suffix = format!(" at line {} column {}", e.line(), e.column());
                let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
                let line = e.line().max(1);
                let column = char_column_in_file(&path, line, e.column(), self.max_file_bytes);
                self.problems.push(Problem::error(
                    &path,
                    Location::Text { line, column },
                    message,
                ));
                None
            }
        }
    }

    /// Ties a file's content findings to it. A misspelt field comes from whatever wrote the
    /// file, so it is usually in every record: said once per field name, at its first record,
    /// with how many records have it.
    fn push_findings(&mut self, path: &Path, diag: Diag) {
        let mut slips: HashMap<(String, String), (usize, usize)> = HashMap::new();
        for f in diag.findings {
            if f.message.starts_with(decode::SLIP) {
                let field = f.path.rsplit('.').next().unwrap_or_default().to_string();
                let at = self.problems.len();
                let (_, records) = slips.entry((field, f.message.clone())).or_insert((at, 0));
                *records += 1;
                if *records > 1 {
                    continue;
                }
            }
            self.problems.push(Problem {
                severity: f.severity,
                file: path.to_path_buf(),
                location: Location::Path(f.path),
                message: f.message,
            });
        }
        for (at, records) in slips.into_values().filter(|(_, n)| *n > 1) {
            if let Some(p) = self.problems.get_mut(at) {
                p.message
                    .push_str(&format!(" ({records} records have it; the first is named)"));
            }
        }
    }

    /// Whether a file's `bytes` are empty (white space, a byte-order mark), said as a problem of
    /// `path`: an error, not an absent file (a write cut short must not serve an empty list), and
    /// said as such (JSON's "EOF while parsing" and TOML's missing field did not say why).
    fn empty(&mut self, path: &Path, bytes: &[u8]) -> bool {
        let bytes = read::without_bom(bytes);
        let empty = bytes.iter().all(u8::is_ascii_whitespace);
        if empty {
            self.problems.push(Problem::error(
                path,
                Location::File,
                "the file is empty: write its data, or remove it if the bundle can do without it \
                 (docs/bundles.md)",
            ));
        }
        empty
    }

    /// Reads, parses and decodes one file, turning every finding into a problem of that file.
    fn file<T>(
        &mut self,
        path: &Path,
        format: Format,
        decode: impl FnOnce(&Value, &mut Diag) -> Option<T>,
    ) -> Option<T> {
        self.progress.set(path);
        let bytes = match read::read(path, self.max_file_bytes) {
            Ok(b) => b,
            Err(e) => {
                self.problems
                    .push(Problem::error(path, Location::File, e.to_string()));
                return None;
            }
        };
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let bytes = e.into_bytes();
                // What comes before the first bad byte is valid UTF-8: its lines and characters
                // place the byte as an editor shows it.
                // As for syntax errors, columns count from after a byte-order mark.
                let before = std::str::from_utf8(&bytes[..at]).unwrap_or_default();
                let before = read::without_bom_str(before);
                let line_start = before.rfind('\n').map_or(0, |i| i + 1);
                let location = Location::Text {
                    line: before.matches('\n').count() + 1,
                    column: before[line_start..].chars().count() + 1,
                };
                self.problems.push(Problem::error(
                    path,
                    location,
                    format!(
                        "not valid UTF-8: byte 0x{:02X} (offset {at}); save the file as UTF-8",
                        bytes.get(at).copied().unwrap_or_default()
                    ),
                ));
                return None;
            }
        };
        let text_only = read::without_bom_str(&text);
        // bundle.toml's own message says what it must name.
        if path.file_stem().is_some_and(|s| s != CONFIG) && self.empty(path, text_only.as_bytes()) {
            return None;
        }
        let parsed = model::parse_text(text_only, format);
        // The text is not needed once parsed: freed before the value is decoded (a large file's
        // text, value tree and records would otherwise be held at once).
        drop(text);
        let value = match parsed {
            Ok(v) => v,
            Err(e) => {
                self.problems.push(Problem::error(
                    path,
                    Location::Text {
                        line: e.line,
                        column: e.column,
                    },
                    e.message,
                ));
                return None;
            }
        };
        let mut diag = Diag::default();
        let decoded = decode(&value, &mut diag);
        self.push_findings(path, diag);
        decoded
    }

    /// A folder of files by payment reference, each named after its reference.
    fn by_reference(
        &mut self,
        dir: &Path,
        decode: &dyn Decode,
        payments: Option<&Payments>,
    ) -> Option<BTreeMap<String, Box<dyn FileBody>>> {
        let entries = match sorted_entries(dir) {
            Ok(e) => e,
            Err(e) => {
                self.problems.push(Problem::error(
                    dir,
                    Location::File,
                    format!("cannot read the folder: {e}"),
                ));
                return None;
            }
        };
        let mut found = Found::new();
        let mut ok = true;
        for (name, path, is_dir) in entries {
            if hidden(&name) {
                continue;
            }
            match split_known(&name) {
                Some((reference, format)) if !is_dir && !reference.is_empty() => {
                    found
                        .entry(reference.to_string())
                        .or_default()
                        .push((format, path));
                }
                Some((reference, _)) if !reference.is_empty() => {
                    self.wrong_kind(&path, "a folder where a file belongs");
                    ok = false;
                }
                _ => self.problems.push(Problem::warning(
                    &path,
                    Location::File,
                    format!(
                        "unknown {}, ignored ({} holds <reference>.json or <reference>.toml files)",
                        if is_dir { "folder" } else { "file" },
                        dir.file_name().unwrap_or_default().to_string_lossy()
                    ),
                )),
            }
        }
        let mut out = BTreeMap::new();
        for (reference, files) in &found {
            let Ok(Some((format, path))) = self.pick(Some(files)) else {
                ok = false;
                continue;
            };
            let known = payments.is_none_or(|p| p.find(reference).is_some());
            if !known {
                self.problems.push(Problem::warning(
                    &path,
                    Location::File,
                    format!(
                        "no payment has the reference {}; this detail is served for it all the same",
                        crate::problem::quoted(reference)
                    ),
                ));
            }
            match self.file(&path, format, |v, diag| decode.decode(v, diag)) {
                Some(body) => {
                    out.insert(reference.clone(), body);
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    }
}

/// The character column of a byte column on one line of a file (reading only up to that
/// column, through [`read::open`], so at most `max` bytes of a regular file); the byte column
/// when the file cannot be opened or has no such line.
fn char_column_in_file(path: &Path, line: usize, byte_column: usize, max: u64) -> usize {
    read::open(path, max)
        .ok()
        .and_then(|f| chars_before(BufReader::new(f), line, byte_column))
        .unwrap_or(byte_column)
        .max(1)
}

/// How many characters of line `line` (from 1) start in its first `byte_column` bytes, reading
/// the file as a stream: a one-line file of 100 MB is never held, only counted. A byte-order
/// mark opening the file is not counted (the parser read past it).
fn chars_before(mut reader: impl BufRead, line: usize, byte_column: usize) -> Option<usize> {
    read::skip_bom(&mut reader).ok()?;
    let mut to_skip = line.saturating_sub(1);
    while to_skip > 0 {
        let buf = reader.fill_buf().ok()?;
        if buf.is_empty() {
            return None;
        }
        let n = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                to_skip -= 1;
                i + 1
            }
            None => buf.len(),
        };
        reader.consume(n);
    }
    let (mut left, mut chars) = (byte_column, 0);
    while left > 0 {
        let buf = reader.fill_buf().ok()?;
        let taken = &buf[..buf.len().min(left)];
        let line_end = taken.iter().position(|&b| b == b'\n');
        let mut taken = &taken[..line_end.unwrap_or(taken.len())];
        // A CRLF line ends before its `\r`.
        if line_end.is_some() {
            taken = taken.strip_suffix(b"\r").unwrap_or(taken);
        }
        if taken.is_empty() {
            break;
        }
        // A character starts at every byte that is not a UTF-8 continuation byte.
        chars += taken.iter().filter(|&&b| b & 0xC0 != 0x80).count();
        let n = taken.len();
        left -= n;
        reader.consume(n);
        if line_end.is_some() {
            break;
        }
    }
    Some(chars)
}

/// `stem.json` → (`stem`, Json); anything else → None.
fn split_known(name: &str) -> Option<(&str, Format)> {
    let (stem, ext) = name.rsplit_once('.')?;
    Some((stem, Format::from_extension(ext)?))
}

/// What a bundle folder holds, as two digests (XXH3-128, entries in name order, sub-folders
/// included): `stamps` of every entry's name, kind, size, modification and change times and
/// inode (from its metadata alone), and `bytes` of every entry's name and kind and every file's
/// bytes, each file opened as the load opens it (only a regular file, at most the size limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub(crate) stamps: u128,
    pub(crate) bytes: u128,
}

/// The folder's [`Fingerprint`]; `None` when anything in it cannot be read as a regular file or
/// a folder (the load then says what).
pub(crate) fn fingerprint(
    dir: &Path,
    max_file_bytes: u64,
    progress: &Progress,
) -> Option<Fingerprint> {
    let mut stamps = xxhash_rust::xxh3::Xxh3::new();
    let mut bytes = xxhash_rust::xxh3::Xxh3::new();
    let mut digest = Digests {
        max: max_file_bytes,
        progress,
        stamps: &mut stamps,
        bytes: Some(&mut bytes),
    };
    digest.folder(dir, 0).ok()?;
    Some(Fingerprint {
        stamps: stamps.digest128(),
        bytes: bytes.digest128(),
    })
}

/// The `stamps` digest of a [`Fingerprint`] alone: no file is opened.
pub(crate) fn stamps(dir: &Path) -> Option<u128> {
    let mut stamps = xxhash_rust::xxh3::Xxh3::new();
    let progress = Progress::default();
    let mut digest = Digests {
        max: 0,
        progress: &progress,
        stamps: &mut stamps,
        bytes: None,
    };
    digest.folder(dir, 0).ok()?;
    Some(stamps.digest128())
}

/// How deep a digest goes (a bundle has one level of folders; links could loop).
const DIGEST_DEPTH: usize = 4;

struct Digests<'a> {
    max: u64,
    progress: &'a Progress,
    stamps: &'a mut xxhash_rust::xxh3::Xxh3,
    /// `None`: metadata only.
    bytes: Option<&'a mut xxhash_rust::xxh3::Xxh3>,
}

impl Digests<'_> {
    fn both(&mut self, data: &[u8]) {
        self.stamps.update(data);
        if let Some(bytes) = self.bytes.as_deref_mut() {
            bytes.update(data);
        }
    }

    fn folder(&mut self, dir: &Path, depth: usize) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        if depth > DIGEST_DEPTH {
            return Err(io::Error::other("too deep"));
        }
        // What the load reads, only: a temporary file being written beside a bundle file (to be
        // renamed over it) must not make the same bytes look changed.
        let mut entries = sorted_entries(dir)?;
        entries.retain(|(name, _, _)| !hidden(name));
        self.both(&(entries.len() as u64).to_le_bytes());
        for (name, path, is_dir) in entries {
            self.both(&(name.len() as u64).to_le_bytes());
            self.both(name.as_bytes());
            // Links followed, as the load follows them.
            let meta = fs::metadata(&path)?;
            for n in [
                meta.len() as i64,
                meta.mtime(),
                meta.mtime_nsec(),
                meta.ctime(),
                meta.ctime_nsec(),
                meta.ino() as i64,
                meta.dev() as i64,
            ] {
                self.stamps.update(&n.to_le_bytes());
            }
            if is_dir {
                self.both(b"d");
                self.folder(&path, depth + 1)?;
            } else if let Some(bytes) = self.bytes.as_deref_mut() {
                self.progress.set(&path);
                let file = read::open(&path, self.max).map_err(io::Error::other)?;
                let mut reader = BufReader::with_capacity(256 * 1024, file);
                let len = io::copy(&mut reader, &mut Digest(bytes))?;
                bytes.update(b"f");
                bytes.update(&len.to_le_bytes());
            }
        }
        Ok(())
    }
}

/// Bytes written into a digest.
struct Digest<'a>(&'a mut xxhash_rust::xxh3::Xxh3);

impl io::Write for Digest<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A folder's entries as (name, path, is a folder), in name order. Names that are not UTF-8 are
/// kept (lossily) so that they are reported rather than silently skipped.
fn sorted_entries(dir: &Path) -> io::Result<Vec<(String, PathBuf, bool)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let is_dir = fs::metadata(&path).is_ok_and(|m| m.is_dir());
        out.push((
            entry.file_name().to_string_lossy().into_owned(),
            path,
            is_dir,
        ));
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_is_counted_in_characters_without_holding_the_line() {
        let text = "{\"a\": 1,\n  \"é\": \"ção\", x\n\"last\"";
        for (line, byte_column) in [
            (1, 1),
            (1, 8),
            (1, 99),
            (2, 1),
            (2, 9),
            (2, 10),
            (2, 13),
            (3, 2),
        ] {
            let expected = crate::model::char_column(text, line, byte_column).max(1);
            let got = chars_before(text.as_bytes(), line, byte_column).map(|c| c.max(1));
            assert_eq!(got, Some(expected), "line {line} column {byte_column}");
        }
        // A byte-order mark is not counted; a line past the end is unknown.
        let marked = format!("\u{feff}{text}");
        assert_eq!(
            chars_before(marked.as_bytes(), 2, 9),
            chars_before(text.as_bytes(), 2, 9)
        );
        assert_eq!(chars_before(marked.as_bytes(), 1, 3), Some(3));
        assert_eq!(chars_before(text.as_bytes(), 9, 1), None);
        // A CRLF line ends before its `\r`, as a LF line before its `\n`.
        let crlf = text.replace('\n', "\r\n");
        for (line, byte_column) in [(1, 99), (2, 13), (2, 99)] {
            assert_eq!(
                chars_before(crlf.as_bytes(), line, byte_column),
                chars_before(text.as_bytes(), line, byte_column),
                "line {line} column {byte_column}"
            );
        }
    }

    /// The demo's bundle.toml and event.json, and the demo's `file` as `edit` makes it, in a
    /// bundle folder `b`, loaded.
    fn demo_with(file: &str, edit: impl FnOnce(String) -> String) -> BundleReport {
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/demo");
        let tmp = tempfile::tempdir().expect("tmp");
        let bundle = tmp.path().join("b");
        fs::create_dir(&bundle).expect("folder");
        for file in ["bundle.toml", "event.json"] {
            fs::copy(demo.join(file), bundle.join(file)).expect("copied");
        }
        let text = fs::read_to_string(demo.join(file)).expect("a demo file");
        fs::write(bundle.join(file), edit(text)).expect("written");
        load_bundle_capped(&bundle, "b", crate::read::DEFAULT_MAX_FILE_BYTES)
    }

    /// A field misspelt in every record of a file is one warning, at its first record, with
    /// how many records have it (it was one warning a record: a flood in the log and /status).
    #[test]
    fn a_field_misspelt_in_every_record_is_one_warning_with_the_count() {
        let mut records = 0;
        let report = demo_with("speaker.json", |speakers| {
            records = speakers.matches("\"resume\":").count();
            speakers.replace("\"resume\":", "\"resme\":")
        });
        assert!(records > 1, "the demo has speakers");

        assert!(report.bundle.is_some(), "{:?}", report.problems);
        let warnings: Vec<String> = report.warnings().map(ToString::to_string).collect();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].ends_with(&format!(
                "speaker.json: data[0].resme: unknown field, served as it is; did you mean \
                 \"resume\", which this record lacks? ({records} records have it; the first is named)"
            )),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_huge_bad_value_is_quoted_cut_short() {
        let long_date = "x".repeat(500_000);
        let long_number = "9".repeat(200_000);
        let report = demo_with("payments.json", |payments| {
            payments
                .replacen("\"02/03/2026\"", &format!("\"{long_date}\""), 1)
                .replacen("210.50", &long_number, 1)
        });

        let errors: Vec<String> = report.errors().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        for (error, shown) in errors.iter().zip([&long_date, &long_number]) {
            assert!(
                error.len() < 400,
                "{} bytes: {}…",
                error.len(),
                &error[..400]
            );
            assert!(
                error.contains(&shown[..80]) && !error.contains(&shown[..81]),
                "{error}"
            );
            assert!(error.contains('…'), "{error}");
        }
    }

    #[test]
    fn a_reports_debug_never_shows_a_token() {
        let demo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("data")
            .join("demo");

        let report = load_bundle_capped(&demo, "demo", crate::read::DEFAULT_MAX_FILE_BYTES);
        let shown = format!("{report:?}");

        assert!(report.bundle.is_some(), "{shown}");
        assert!(shown.contains("demo"), "{shown}");
        assert!(!shown.contains("demo-token"), "{shown}");
    }

    #[test]
    fn names_starting_with_an_underscore_or_a_dot_are_ignored() {
        for name in ["_summit.pull-12-0", "_old", ".git", ".DS_Store"] {
            assert!(ignored(name), "{name}");
        }
        for name in ["summit", "summit_", "a.b", "-x"] {
            assert!(!ignored(name), "{name}");
        }
    }

    #[test]
    fn editor_files_inside_a_bundle_are_skipped() {
        for name in [
            ".event.json.swp",
            "event.json~",
            "#event.json#",
            ".#event.json",
        ] {
            assert!(hidden(name), "{name}");
        }
        for name in ["event.json", "_R-1.json", "#R-1.json", "R~1.json", "#"] {
            assert!(!hidden(name), "{name}");
        }
    }

    #[test]
    fn the_fingerprint_follows_the_bytes_read_and_not_ignored_files() {
        let tmp = tempfile::tempdir().expect("tmp");
        let bundle = tmp.path();
        fs::write(bundle.join("event.json"), "{}").expect("file");
        let progress = Progress::default();
        let digest = || fingerprint(bundle, 1 << 20, &progress).expect("digested");
        let first = digest();

        fs::write(bundle.join(".event.json.tmp"), "{\"partial").expect("file");
        fs::create_dir(bundle.join(".old")).expect("folder");
        let with_ignored = digest();
        fs::write(bundle.join("event.json"), "{ }").expect("file");
        let changed = digest();

        assert_eq!(with_ignored.bytes, first.bytes);
        assert_eq!(with_ignored.stamps, first.stamps);
        assert_ne!(changed.bytes, first.bytes);

        // A detail file whose reference starts with `_` is loaded, so its bytes count.
        fs::create_dir(bundle.join("payment_details")).expect("folder");
        fs::write(bundle.join("payment_details/_R-1.json"), "{}").expect("file");
        let detail = digest();
        fs::write(bundle.join("payment_details/_R-1.json"), "{ }").expect("file");
        assert_ne!(digest().bytes, detail.bytes);
    }

    #[test]
    fn only_bundle_folders_not_ignored_are_listed() {
        let tmp = tempfile::tempdir().expect("tmp");
        for dir in ["summit", "_summit.gen-1-0", ".hidden", "forum"] {
            fs::create_dir(tmp.path().join(dir)).expect("folder");
        }
        fs::write(tmp.path().join("notes.txt"), "x").expect("file");

        let names = bundle_names(tmp.path()).expect("listed");

        assert_eq!(names, vec!["forum", "summit"]);
    }

    #[test]
    fn a_data_folder_that_is_a_bundle_is_refused_naming_the_folder_above_it() {
        let tmp = tempfile::tempdir().expect("tmp");
        let bundle = tmp.path().join("demo");
        fs::create_dir_all(bundle.join("payment_details")).expect("folders");
        fs::write(bundle.join("bundle.toml"), "tokens = [\"t\"]\n").expect("bundle.toml");
        let to_give = |dir: &Path| match bundle_names(dir) {
            Err(LoadError::IsABundle { parent, .. }) => Some(parent),
            _ => None,
        };
        assert_eq!(to_give(&bundle), Some(tmp.path().to_path_buf()));
        assert_eq!(to_give(&bundle.join("")), Some(tmp.path().to_path_buf()));
        // Ending in `..`: one level up from the path as given.
        let back = bundle.join("payment_details/..");
        assert_eq!(to_give(&back), Some(back.join("..")));
        assert_eq!(
            bundle_names(tmp.path()).expect("the folder above"),
            ["demo"]
        );
    }
}
