//! A bundle built beside its target and swapped in whole: `pull` and `gen` write into
//! `DIR/_NAME.<what>-<pid>-<n>` (the server skips names starting with `_`), and
//! [`Staging::commit`] puts it in place of `DIR/NAME`. Shared by both (with [`human_bytes`], the
//! sizes their summaries print), so `gen` builds without `pull`'s HTTP client (Cargo features).
//!
//! The swap is an atomic exchange on Linux (`renameat2` with `RENAME_EXCHANGE`, through rustix's
//! safe wrapper): at every instant `DIR/NAME` is either the whole old copy or the whole new one.
//! The old copy then sits at the staging name and is deleted. Where the exchange is not available
//! (another OS, a file system without it), the old copy is renamed aside and the new one renamed
//! in: two renames, with a moment in between when `DIR/NAME` is missing (a server reloading just
//! then drops the bundle until the second rename, a moment later).
//!
//! A `Staging` that is dropped without being committed (an error, an early return, a cancelled
//! future, a panic) removes its folder, so a failed run leaves nothing behind.
//!
//! Nothing is replaced that is not a bundle: [`check_target`] is the one rule, applied when the
//! staging folder is made and again at the swap. The target must be absent, an empty folder, or
//! a bundle folder (`bundle.toml` at its top); a folder of other bundles or other files (say
//! `--into data` for `--into data/NAME`) is refused unless the caller forces it.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The staging folders this process has named: part of each name.
static NEXT_STAGING: AtomicU64 = AtomicU64::new(0);

/// The staging folder could not be made, or swapped in.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("{}: name the bundle folder, e.g. data/summit", path.display())]
    NoName { path: PathBuf },
    #[error("cannot prepare the staging folder {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}: {refusal}", path.display())]
    Refused { path: PathBuf, refusal: Refusal },
    #[error("cannot swap the new copy into {}: {source}; the earlier copy is as it was", target.display())]
    Swap { target: PathBuf, source: io::Error },
}

use crate::load::is_bundle_folder;
pub(crate) use crate::load::BUNDLE_FILE;

/// How many names a refusal lists of each kind before it says "…".
const NAMES_SHOWN: usize = 5;

/// Why a new bundle may not be put at a target; see `check_target`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A symbolic link: the swap would replace the link, not its target.
    #[error("it is a symbolic link; name the folder itself; nothing was changed")]
    Symlink,
    /// A file, a socket, anything but a folder.
    #[error("it exists and is not a folder; nothing was changed")]
    NotAFolder,
    /// A folder with entries but no `bundle.toml` at its top: replacing it would delete them.
    #[error("{}", not_a_bundle(dir, bundles, others))]
    NotABundle {
        dir: PathBuf,
        /// The bundle folders it holds, sorted.
        bundles: Vec<String>,
        /// Its other entries (files, folders, links), sorted.
        others: Vec<String>,
    },
    /// Its entries could not be listed, so it cannot be known to be safe to replace.
    #[error("cannot list it ({0}); nothing was changed")]
    Unreadable(String),
}

fn not_a_bundle(dir: &Path, bundles: &[String], others: &[String]) -> String {
    fn some(n: usize, one: &str, many: &str, names: &[String]) -> String {
        let mut shown = names
            .iter()
            .take(NAMES_SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if names.len() > NAMES_SHOWN {
            shown.push_str(", …");
        }
        format!("{n} {} ({shown})", if n == 1 { one } else { many })
    }
    let mut held = Vec::new();
    if !bundles.is_empty() {
        held.push(some(bundles.len(), "bundle", "bundles", bundles));
    }
    if !others.is_empty() {
        held.push(some(others.len(), "other entry", "other entries", others));
    }
    format!(
        "{} holds {} but no {BUNDLE_FILE}, so it is not a bundle folder and nothing was \
         changed; did you mean --into {}? (--force replaces the folder and everything in it)",
        dir.display(),
        held.join(" and "),
        dir.join("NAME").display(),
    )
}

/// The one rule for every command that puts a new bundle folder at `target` (replacing whatever
/// is there): the target must be absent, an empty folder, or a bundle folder (a folder with
/// [`BUNDLE_FILE`] at its top, whatever else it holds: that is what a refresh replaces). A folder
/// holding anything else (other bundles, stray files) is refused unless `force` is set. A target
/// that is not a folder, or is a symbolic link, is refused even with `force`.
pub(crate) fn check_target(target: &Path, force: bool) -> Result<(), Refusal> {
    let meta = match std::fs::symlink_metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Refusal::Unreadable(e.to_string())),
    };
    if meta.file_type().is_symlink() {
        return Err(Refusal::Symlink);
    }
    if !meta.is_dir() {
        return Err(Refusal::NotAFolder);
    }
    if force || is_bundle_folder(target) {
        return Ok(());
    }
    let (mut bundles, mut others) = (Vec::new(), Vec::new());
    let entries = std::fs::read_dir(target).map_err(|e| Refusal::Unreadable(e.to_string()))?;
    for entry in entries {
        let entry = entry.map_err(|e| Refusal::Unreadable(e.to_string()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && is_bundle_folder(&entry.path()) {
            bundles.push(name);
        } else {
            others.push(name);
        }
    }
    if bundles.is_empty() && others.is_empty() {
        return Ok(());
    }
    bundles.sort();
    others.sort();
    Err(Refusal::NotABundle {
        dir: target.to_path_buf(),
        bundles,
        others,
    })
}

/// A staging folder; removed on drop unless committed.
#[derive(Debug)]
pub(crate) struct Staging {
    dir: PathBuf,
    target: PathBuf,
    /// Replace a target that [`check_target`] would refuse for what it holds.
    force: bool,
    committed: bool,
}

impl Staging {
    /// Creates `PARENT/_NAME.<what>-<pid>-<n>` for `target` = `PARENT/NAME`, creating `PARENT`
    /// when missing; `n` counts the staging folders of this process, so two runs into the same
    /// target in one process (library use) never share one. The folder is made with
    /// `create_dir`, never emptied first: a name already taken (a folder left by a crashed process
    /// with the same id) is skipped for the next `n`, and left alone.
    /// A target that [`check_target`] refuses (with this `force`) is refused here, before the
    /// folder is made, and again at [`Staging::commit`].
    pub(crate) fn create(target: &Path, what: &str, force: bool) -> Result<Staging, StageError> {
        refuse(target, force)?;
        let name =
            target
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| StageError::NoName {
                    path: target.to_path_buf(),
                })?;
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StageError::Io { path, source }
        };
        std::fs::create_dir_all(&parent).map_err(io_err(&parent))?;
        sweep(&parent, name, target);
        let mut tries = 0;
        let dir = loop {
            let n = NEXT_STAGING.fetch_add(1, Ordering::Relaxed);
            let dir = parent.join(format!("_{name}.{what}-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 100 => tries += 1,
                Err(e) => return Err(io_err(&dir)(e)),
            }
        };
        Ok(Staging {
            dir,
            target: target.to_path_buf(),
            force,
            committed: false,
        })
    }

    /// The staging folder to write into.
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// Puts the staged folder in place of the target and deletes the old copy. On an error the
    /// target is as it was and the staging folder is removed. A target that [`check_target`]
    /// refuses now (it became a file, or a folder of other things, meanwhile) is not replaced.
    /// Durable: what was staged is on disk before it replaces the target, and the swap before
    /// the old copy is deleted, so a power cut leaves one whole copy or the other. Blocks (it
    /// syncs): async callers use [`Staging::commit_in_place`].
    pub(crate) fn commit(mut self) -> Result<(), StageError> {
        refuse(&self.target, self.force)?;
        let swap_err = |source| StageError::Swap {
            target: self.target.clone(),
            source,
        };
        sync_staged(&self.dir).map_err(|source| StageError::Io {
            path: self.dir.clone(),
            source,
        })?;
        let target_exists = std::fs::symlink_metadata(&self.target).is_ok();
        if !target_exists {
            std::fs::rename(&self.dir, &self.target).map_err(swap_err)?;
        } else if exchange(&self.dir, &self.target).map_err(swap_err)? {
            sync_parent(&self.target);
            // The staging name now holds the old copy.
            if let Err(e) = std::fs::remove_dir_all(&self.dir) {
                tracing::warn!("cannot remove the old copy {}: {e}", self.dir.display());
            }
        } else {
            // Beside the staging folder, named after it: as unique as it is.
            let mut aside = self.dir.clone().into_os_string();
            aside.push(".old");
            let aside = PathBuf::from(aside);
            swap_aside(&self.dir, &self.target, &aside).map_err(swap_err)?;
        }
        self.committed = true;
        sync_parent(&self.target);
        nudge(&self.target);
        Ok(())
    }

    /// [`Staging::commit`] from async code: on a multi-threaded runtime the worker's other tasks
    /// move to another thread meanwhile (a kiosk's refresh keeps the server answering while it
    /// syncs). Not an await point: a caller racing it against Ctrl-C (`pull`) sees it done or
    /// not begun, never half made.
    pub(crate) fn commit_in_place(self) -> Result<(), StageError> {
        in_place(|| self.commit())
    }
}

/// Runs blocking file work from async code: on a multi-threaded runtime the worker's other
/// tasks move to another thread meanwhile; elsewhere (no runtime, or a current-thread one) it
/// just runs.
pub(crate) fn in_place<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Clears what a process that is gone left beside `target` (`PARENT/NAME`): its staging
/// folders `_NAME.<what>-<pid>-<n>` (`what` being `pull` or `gen`: a pull killed with SIGKILL,
/// a power cut) are removed, and an old copy `_NAME.<what>-<pid>-<n>.old` that the fallback
/// swap had set aside is put back when `target` is missing (the process stopped between its
/// two renames) and it is a bundle (it has a `bundle.toml`), else removed. A folder of a
/// process still running, this one included, is left alone, and so is any other `_` name (an
/// operator's `_NAME.bak-20261127-1`). Each is logged. Linux only: elsewhere nothing is swept.
fn sweep(parent: &Path, name: &str, target: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let prefix = format!("_{name}.");
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let (rest, old) = match rest.strip_suffix(".old") {
            Some(rest) => (rest, true),
            None => (rest, false),
        };
        // `<what>-<pid>-<n>`, `what` a word.
        let mut parts = rest.rsplitn(3, '-');
        let (Some(n), Some(pid), Some(what)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let named = STAGED_BY.contains(&what) && n.bytes().all(|b| b.is_ascii_digit());
        let Some(pid) = pid.parse::<u32>().ok().filter(|_| named) else {
            continue;
        };
        if pid == std::process::id() || !process_gone(pid) {
            continue;
        }
        let path = entry.path();
        if old && std::fs::symlink_metadata(target).is_err() && path.join(BUNDLE_FILE).is_file() {
            match std::fs::rename(&path, target) {
                Ok(()) => tracing::warn!(
                    "put back {}: process {pid} stopped while replacing it, leaving its old copy at {}",
                    target.display(),
                    path.display()
                ),
                Err(e) => tracing::warn!(
                    "cannot put back {} from {}: {e}",
                    target.display(),
                    path.display()
                ),
            }
            continue;
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => tracing::info!(
                "removed {}, left by process {pid}, which is gone",
                path.display()
            ),
            Err(e) => tracing::warn!("cannot remove {}: {e}", path.display()),
        }
    }
}

/// The `what` of the commands that stage: only their folders are ever swept.
const STAGED_BY: [&str; 2] = ["pull", "gen"];

/// Whether no process has id `pid` (on Linux; elsewhere none is ever said to be gone). A
/// process of another PID namespace (another container sharing the folder) looks gone: at
/// worst its pull then fails, its target as it was.
fn process_gone(pid: u32) -> bool {
    #[cfg(target_os = "linux")]
    {
        let Some(pid) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return false;
        };
        rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        false
    }
}

/// Puts every file written into the staging folder `dir` on disk: on Linux one `syncfs` of
/// its file system (one call however many files the writers made), elsewhere each file.
fn sync_staged(dir: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        rustix::fs::syncfs(std::fs::File::open(dir)?)?;
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.is_dir() {
                sync_staged(&path)?;
            } else {
                std::fs::File::open(&path)?.sync_all()?;
            }
        }
        Ok(())
    }
}

/// Makes the swap of `target` durable: its parent folder's entries synced. Best effort (some
/// systems cannot sync a folder): the swap is made either way; a failure is logged.
fn sync_parent(target: &Path) {
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    #[cfg(unix)]
    if let Err(e) = std::fs::File::open(parent).and_then(|d| d.sync_all()) {
        tracing::warn!(folder = %parent.display(), error = %e, "cannot sync the folder after a swap: a power cut may undo it");
    }
    #[cfg(not(unix))]
    let _ = parent;
}

/// Makes a folder its owner's only (0700 on unix; elsewhere nothing changes).
pub(crate) fn private_folder(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let _ = dir;
    Ok(())
}

/// Writes a new file only its owner may read (0600 on unix): `bundle.toml`, which names the
/// tokens, and every file of a pulled or mirrored copy (people's data). The file must not
/// exist yet (a fresh staging folder).
pub(crate) fn write_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    use std::io::Write;
    crate::writes::log::private(std::fs::OpenOptions::new().write(true).create_new(true))
        .open(path)?
        .write_all(contents)
}

fn refuse(target: &Path, force: bool) -> Result<(), StageError> {
    check_target(target, force).map_err(|refusal| StageError::Refused {
        path: target.to_path_buf(),
        refusal,
    })
}

/// Sets the swapped-in folder's modification time to now, so that a server watching the data
/// folder reloads it. The swap reaches a watcher as renames, which its debouncing may fold away
/// (notify-debouncer-full pairs renames by file id, and an exchange is two crossing renames; the
/// old copy's deletion may be reported under the staging name, which is ignored). A change of
/// the folder's own attributes is reported on the data folder under the bundle's name. Best
/// effort: a failure only means the watcher relies on the renames.
fn nudge(dir: &Path) {
    if let Ok(folder) = std::fs::File::open(dir) {
        let _ = folder.set_modified(std::time::SystemTime::now());
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        // A second try covers a file that a cancelled worker was finishing during the first.
        for attempt in 0..2 {
            match std::fs::remove_dir_all(&self.dir) {
                Ok(()) => return,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return,
                Err(e) if attempt == 1 => {
                    tracing::warn!("cannot remove {}: {e}", self.dir.display());
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
            }
        }
    }
}

/// Exchanges two folders atomically; `Ok(false)` when the system cannot.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> io::Result<bool> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    use rustix::io::Errno;
    match renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(true),
        Err(e) if e == Errno::INVAL || e == Errno::NOSYS || e == Errno::NOTSUP => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> io::Result<bool> {
    Ok(false)
}

/// The fallback swap: `target` → `aside`, `staged` → `target`, then `aside` is deleted. When the
/// second rename fails, the old copy is put back.
pub(crate) fn swap_aside(staged: &Path, target: &Path, aside: &Path) -> io::Result<()> {
    std::fs::rename(target, aside)?;
    if let Err(e) = std::fs::rename(staged, target) {
        let _ = std::fs::rename(aside, target);
        return Err(e);
    }
    sync_parent(target);
    if let Err(e) = std::fs::remove_dir_all(aside) {
        tracing::warn!("cannot remove the old copy {}: {e}", aside.display());
    }
    Ok(())
}

/// `526.3 KB`, `101.2 MB`: decimal units, one decimal (the sizes `pull` and `gen` report).
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1000.0;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_like_people_write_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(5_500), "5.5 KB");
        assert_eq!(human_bytes(101_200_000), "101.2 MB");
    }

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap_or_default()
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .expect("list")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('_'))
            .collect()
    }

    /// Stages one file for `target` and commits it.
    fn commit_file(target: &Path, name: &str, text: &str) {
        let s = Staging::create(target, "gen", false).expect("staging");
        std::fs::write(s.path().join(name), text).expect("write");
        s.commit().expect("commit");
    }

    #[test]
    fn commit_replaces_the_old_copy_and_leaves_nothing_else() {
        let tmp = tempfile::tempdir().expect("tmp");
        let target = tmp.path().join("data/x");
        std::fs::create_dir_all(&target).expect("mkdir");
        std::fs::write(target.join(BUNDLE_FILE), "").expect("write");
        std::fs::write(target.join("event.json"), "old").expect("write");
        commit_file(&target, "event.json", "new");
        assert_eq!(read(&target.join("event.json")), "new");
        assert!(leftovers(&tmp.path().join("data")).is_empty());
    }

    #[test]
    fn absent_empty_and_bundle_targets_may_be_replaced() {
        let tmp = tempfile::tempdir().expect("tmp");
        assert_eq!(check_target(&tmp.path().join("absent"), false), Ok(()));
        assert_eq!(check_target(tmp.path(), false), Ok(()), "an empty folder");
        // A bundle with files the loader does not know is still a bundle: a refresh replaces it.
        std::fs::write(tmp.path().join(BUNDLE_FILE), "").expect("write");
        std::fs::write(tmp.path().join("notes.txt"), "mine").expect("write");
        std::fs::create_dir(tmp.path().join("extra")).expect("mkdir");
        assert_eq!(check_target(tmp.path(), false), Ok(()));
    }

    #[test]
    fn a_folder_of_bundles_or_other_files_is_refused_unless_forced() {
        let tmp = tempfile::tempdir().expect("tmp");
        let data = tmp.path().join("data");
        for name in ["gamma", "alpha", "beta"] {
            std::fs::create_dir_all(data.join(name)).expect("mkdir");
            std::fs::write(data.join(name).join(BUNDLE_FILE), "").expect("write");
        }
        // A folder holding a folder named bundle.toml is not a bundle.
        std::fs::create_dir_all(data.join("odd").join(BUNDLE_FILE)).expect("mkdir");
        std::fs::write(data.join("README"), "x").expect("write");

        let refusal = check_target(&data, false).expect_err("refused");
        assert_eq!(
            refusal,
            Refusal::NotABundle {
                dir: data.clone(),
                bundles: vec!["alpha".into(), "beta".into(), "gamma".into()],
                others: vec!["README".into(), "odd".into()],
            }
        );
        let text = refusal.to_string();
        assert!(
            text.contains("holds 3 bundles (alpha, beta, gamma) and 2 other entries (README, odd)"),
            "{text}"
        );
        let suggested = format!("--into {}?", data.join("NAME").display());
        assert!(text.contains(&suggested), "{text}");
        assert_eq!(check_target(&data, true), Ok(()));

        let stray = tmp.path().join("stray");
        std::fs::create_dir(&stray).expect("mkdir");
        std::fs::write(stray.join(".hidden"), "x").expect("write");
        let text = check_target(&stray, false)
            .expect_err("refused")
            .to_string();
        assert!(text.contains("holds 1 other entry (.hidden)"), "{text}");
        // Force never replaces a file.
        assert_eq!(
            check_target(&stray.join(".hidden"), true),
            Err(Refusal::NotAFolder)
        );
    }

    #[test]
    fn commit_refuses_a_target_that_gained_other_files_meanwhile() {
        let tmp = tempfile::tempdir().expect("tmp");
        let target = tmp.path().join("x");
        let s = Staging::create(&target, "gen", false).expect("staging");
        std::fs::create_dir(&target).expect("mkdir");
        std::fs::write(target.join("keep"), "k").expect("write");
        let err = s.commit().expect_err("refused");
        assert!(err.to_string().contains("nothing was changed"), "{err}");
        assert_eq!(read(&target.join("keep")), "k");
        assert!(leftovers(tmp.path()).is_empty());
    }

    #[test]
    fn commit_creates_a_missing_target() {
        let tmp = tempfile::tempdir().expect("tmp");
        let target = tmp.path().join("fresh/x");
        commit_file(&target, "a", "1");
        assert_eq!(read(&target.join("a")), "1");
        assert!(leftovers(&tmp.path().join("fresh")).is_empty());
    }

    #[test]
    fn a_target_that_is_not_a_folder_is_never_replaced() {
        let tmp = tempfile::tempdir().expect("tmp");
        let target = tmp.path().join("x");
        std::fs::write(&target, "a file").expect("write");
        assert!(matches!(
            Staging::create(&target, "gen", false),
            Err(StageError::Refused {
                refusal: Refusal::NotAFolder,
                ..
            })
        ));
        // It became a file after the staging folder was made: commit refuses it.
        std::fs::remove_file(&target).expect("rm");
        let s = Staging::create(&target, "gen", false).expect("staging");
        std::fs::write(&target, "a file").expect("write");
        let err = s.commit().expect_err("refused");
        assert!(err.to_string().contains("is not a folder"), "{err}");
        assert_eq!(read(&target), "a file");
        assert!(leftovers(tmp.path()).is_empty());
        #[cfg(unix)]
        {
            let real = tmp.path().join("real");
            std::fs::create_dir(&real).expect("mkdir");
            let link = tmp.path().join("link");
            std::os::unix::fs::symlink(&real, &link).expect("symlink");
            assert!(Staging::create(&link, "gen", true).is_err());
        }
    }

    #[test]
    fn two_stagings_of_one_target_in_one_process_keep_apart_and_spare_a_leftover() {
        let tmp = tempfile::tempdir().expect("tmp");
        let target = tmp.path().join("x");
        let a = Staging::create(&target, "pull", false).expect("a");
        std::fs::write(a.path().join("a"), "1").expect("write");
        // A folder at the name the next staging would take: left by a crashed process.
        let next = NEXT_STAGING.load(Ordering::Relaxed);
        let taken = tmp
            .path()
            .join(format!("_x.pull-{}-{next}", std::process::id()));
        std::fs::create_dir(&taken).expect("mkdir");
        std::fs::write(taken.join("keep"), "k").expect("write");
        let b = Staging::create(&target, "pull", false).expect("b");

        assert_ne!(a.path(), b.path());
        assert_eq!(read(&a.path().join("a")), "1", "b emptied a");
        assert_eq!(read(&taken.join("keep")), "k", "the leftover was removed");
        drop(b);
        a.commit().expect("commit");
        assert_eq!(read(&target.join("a")), "1");
    }

    /// What a killed process left is cleared when the next staging of that target starts: its
    /// staging folder removed, an old copy set aside by a fallback swap put back when the target
    /// is missing. Folders of live processes and of other targets are left.
    #[test]
    #[cfg(target_os = "linux")]
    fn leftovers_of_a_process_that_is_gone_are_cleared_at_the_next_staging() {
        let tmp = tempfile::tempdir().expect("tmp");
        let mut child = std::process::Command::new("true").spawn().expect("a child");
        child.wait().expect("it ends");
        let gone = child.id();
        let folder = |name: String| {
            let dir = tmp.path().join(name);
            std::fs::create_dir(&dir).expect("mkdir");
            std::fs::write(dir.join("event.json"), "{}").expect("write");
            dir
        };
        let staged = folder(format!("_x.pull-{gone}-0"));
        let aside = folder(format!("_x.gen-{gone}-3.old"));
        std::fs::write(aside.join(BUNDLE_FILE), "tokens = [\"t\"]\n").expect("a bundle");
        let own = folder(format!("_x.pull-{}-999", std::process::id()));
        let alive = folder("_x.pull-1-0".to_string());
        let other = folder(format!("_y.pull-{gone}-0"));
        // An operator's backup, its "pid" past any pid_max: not a staging folder.
        let backup = folder("_x.bak-20261127-1".to_string());

        let target = tmp.path().join("x");
        let s = Staging::create(&target, "pull", false).expect("staging");

        assert!(!staged.exists(), "a dead pull's staging folder stays");
        assert!(!aside.exists());
        assert!(
            target.join("event.json").is_file(),
            "the old copy is put back"
        );
        for kept in [&own, &alive, &other, &backup] {
            assert!(kept.is_dir(), "{}", kept.display());
        }
        drop(s);
    }

    #[test]
    fn a_dropped_staging_folder_is_removed() {
        let tmp = tempfile::tempdir().expect("tmp");
        let target = tmp.path().join("x");
        let s = Staging::create(&target, "pull", false).expect("staging");
        std::fs::write(s.path().join("a"), "1").expect("write");
        let dir = s.path().to_path_buf();
        drop(s);
        assert!(!dir.exists());
        assert!(!target.exists());
    }

    #[test]
    fn the_fallback_swap_replaces_and_cleans_up() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (staged, target, aside) = (
            tmp.path().join("_x.pull-1"),
            tmp.path().join("x"),
            tmp.path().join("_x.old-1"),
        );
        for (dir, text) in [(&staged, "new"), (&target, "old")] {
            std::fs::create_dir(dir).expect("mkdir");
            std::fs::write(dir.join("f"), text).expect("write");
        }
        swap_aside(&staged, &target, &aside).expect("swap");
        assert_eq!(read(&target.join("f")), "new");
        assert!(!staged.exists() && !aside.exists());
    }

    #[test]
    fn a_failed_fallback_swap_puts_the_old_copy_back() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (target, aside) = (tmp.path().join("x"), tmp.path().join("_x.old-1"));
        std::fs::create_dir(&target).expect("mkdir");
        std::fs::write(target.join("f"), "old").expect("write");
        let missing = tmp.path().join("_x.pull-1");
        assert!(swap_aside(&missing, &target, &aside).is_err());
        assert_eq!(read(&target.join("f")), "old");
        assert!(!aside.exists());
    }
}
