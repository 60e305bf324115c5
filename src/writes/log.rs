//! The write-ahead log of `serve --state DIR`: `DIR/writes.jsonl`, one JSON document per line,
//! appended and made durable (`fdatasync`) before a write is acknowledged.
//!
//! One thread owns the file. Writers hand it a line and wait for its answer; the thread takes
//! every line waiting, writes them, syncs once and answers them all (group commit), so eight
//! concurrent writers cost about one sync per round rather than one each.
//!
//! A line may be appended in an **epoch** (the write log's lines are): once a batch fails, every
//! later line of its epoch, or of an earlier one, is refused unwritten, since it was made on a
//! view that held the failed one (a check-in of a registration the disk refused). The writes
//! start a new epoch once they have taken the failed lines back (`Writes::forget`).
//!
//! A line cut short by a crash (the last one, without its newline, or not JSON) was never
//! acknowledged: on start it is copied aside to `writes.jsonl.torn-<unix time>` and cut off. A
//! bad line before the last is damage that eventbox did not make: start fails naming the file
//! and the line, and nothing is changed.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

use tokio::sync::oneshot;

/// The log's file name in the state folder.
pub(crate) const FILE: &str = "writes.jsonl";

/// The forwarding outcomes' file name in the state folder (kiosk mode).
pub(crate) const FORWARDED: &str = "forwarded.jsonl";

/// Why the log could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LogError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path}: in use by another eventbox process (or another App of this one), still after \
         {LOCK_GRACE:?}; a state folder belongs to one process (give each its own --state)"
    )]
    InUse { path: PathBuf },
    #[error("{path}:{line}: not a write eventbox logged ({message}); the file was left as it is")]
    Damaged {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// What opening the log found.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) log: Log,
    /// Every complete line, in order.
    pub(crate) lines: Vec<String>,
    /// Where a torn last line was copied, if there was one.
    pub(crate) torn: Option<PathBuf>,
}

/// A line of the write log: its number, and the epoch it was checked in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) seq: u64,
    pub(crate) epoch: u64,
}

type Request = (Vec<u8>, Option<Mark>, oneshot::Sender<io::Result<()>>);

/// The first line that failed in each epoch that had one, by epoch: what a failed or refused
/// line's writes take back from (`Writes::forget`), whichever of them is taken back first.
type Failed = Arc<Mutex<BTreeMap<u64, u64>>>;

/// The appending side of the log. Dropped, it waits for the lines queued to be written and the
/// file to be closed (and so unlocked): the same folder can be opened again at once.
#[derive(Debug)]
pub(crate) struct Log {
    path: PathBuf,
    tx: Option<mpsc::Sender<Request>>,
    thread: Option<thread::JoinHandle<()>>,
    failed: Failed,
}

impl Drop for Log {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Whether `e` says the file system has no locks: unsupported, or (NFS without its lock
/// service) no locks available.
fn cannot_lock(e: &io::Error) -> bool {
    #[cfg(target_os = "linux")]
    if e.raw_os_error() == Some(rustix::io::Errno::NOLCK.raw_os_error()) {
        return true;
    }
    e.kind() == io::ErrorKind::Unsupported
}

/// How long a start waits for the lock of another process: one killed a moment ago holds it
/// until the kernel has torn it down (a restart typed right after `kill -9` met it).
const LOCK_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// Takes `file`'s exclusive lock (`flock`), held until it is closed: a second process on the
/// same state folder fails to start (after [`LOCK_GRACE`]) rather than interleave its lines
/// and numbers with this one's. A file system that has no such locks (some network ones) is
/// used without, with a warning.
fn lock(file: &File, path: &Path) -> Result<(), LogError> {
    let deadline = std::time::Instant::now() + LOCK_GRACE;
    let mut waited = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                if !waited {
                    tracing::info!(path = %path.display(), "the state log is held by another process: waiting up to {LOCK_GRACE:?} for it to stop");
                    waited = true;
                }
                thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(LogError::InUse {
                    path: path.to_path_buf(),
                })
            }
            Err(std::fs::TryLockError::Error(e)) if cannot_lock(&e) => {
                tracing::warn!(path = %path.display(), error = %e, "the state folder's file system cannot lock files: make sure no other process uses it");
                return Ok(());
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(LogError::Io {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
}

impl Log {
    /// Opens (or creates) `dir/name`, reads its lines, and starts the writing thread.
    /// `is_record` tells whether a line is one (a last line that is not is torn, see above).
    pub(crate) fn open(
        dir: &Path,
        name: &str,
        is_record: impl Fn(&str) -> bool,
    ) -> Result<Opened, LogError> {
        let path = dir.join(name);
        let io = |source| LogError::Io {
            path: path.clone(),
            source,
        };
        if dir.exists() && !dir.is_dir() {
            return Err(LogError::Io {
                path: dir.to_path_buf(),
                source: io::Error::other(
                    "not a folder (--state names a folder to keep the log in)",
                ),
            });
        }
        // People's names and e-mails: the folder and its files are the server's user's only.
        private_dirs(dir).map_err(|source| LogError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut file = private(OpenOptions::new().read(true).append(true).create(true))
            .open(&path)
            .map_err(io)?;
        // Before anything is read: another process's line being written is not torn.
        lock(&file, &path)?;
        let (lines, good_len, torn_at) = read_lines(&mut file, &path, &is_record)?;
        let torn = match torn_at {
            Some(at) => {
                let mut bytes = Vec::new();
                file.seek(SeekFrom::Start(at)).map_err(io)?;
                io::Read::read_to_end(&mut file, &mut bytes).map_err(io)?;
                let aside = write_aside(&path, &bytes)?;
                file.set_len(good_len).map_err(io)?;
                file.sync_all().map_err(io)?;
                Some(aside)
            }
            None => None,
        };
        // The log's name (and a torn line's copy) must outlive a power loss too.
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|source| LogError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        let len = file.seek(SeekFrom::End(0)).map_err(io)?;
        let (tx, rx) = mpsc::channel::<Request>();
        let thread_path = path.clone();
        let failed = Failed::default();
        let thread_failed = Arc::clone(&failed);
        let thread = thread::Builder::new()
            .name("eventbox-log".into())
            .spawn(move || run(Synced(file), len, rx, &thread_path, &thread_failed))
            .map_err(io)?;
        Ok(Opened {
            log: Log {
                path,
                tx: Some(tx),
                thread: Some(thread),
                failed,
            },
            lines,
            torn,
        })
    }

    /// The log file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Queues `line` (without its newline); the receiver answers once it is durable, or why not.
    /// Lines are written in the order this is called.
    pub(crate) fn append(&self, line: Vec<u8>) -> oneshot::Receiver<io::Result<()>> {
        self.append_in(line, None)
    }

    /// The first line that failed in `epoch`, if one did: known before any line of it is
    /// answered as failed or refused.
    pub(crate) fn first_failed(&self, epoch: u64) -> Option<u64> {
        let failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        failed.get(&epoch).copied()
    }

    /// [`Log::append`] of line `mark.seq` in `mark.epoch`: refused unwritten when a batch of
    /// this epoch, or of a later one, failed before it (see the module's documentation).
    pub(crate) fn append_in(
        &self,
        mut line: Vec<u8>,
        mark: Option<Mark>,
    ) -> oneshot::Receiver<io::Result<()>> {
        line.push(b'\n');
        let (done, wait) = oneshot::channel();
        let sent = match &self.tx {
            Some(tx) => tx
                .send((line, mark, done))
                .map_err(|mpsc::SendError((_, _, done))| done),
            None => Err(done),
        };
        if let Err(done) = sent {
            let _ = done.send(Err(io::Error::other("the write log has stopped")));
        }
        wait
    }
}

/// Copies a torn line to `writes.jsonl.torn-<unix seconds>[-n]`, a name no file has (created
/// new, never overwriting), made durable; returns its path.
fn write_aside(path: &Path, bytes: &[u8]) -> Result<PathBuf, LogError> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for n in 0u32.. {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".torn-{secs}"));
        if n > 0 {
            name.push(format!("-{n}"));
        }
        let candidate = PathBuf::from(name);
        let err = |source| LogError::Io {
            path: candidate.clone(),
            source,
        };
        match private(OpenOptions::new().write(true).create_new(true)).open(&candidate) {
            Ok(mut f) => {
                f.write_all(bytes)
                    .and_then(|()| f.sync_all())
                    .map_err(err)?;
                return Ok(candidate);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(err(e)),
        }
    }
    Err(LogError::Io {
        path: path.to_path_buf(),
        source: io::Error::other("no free name for the torn line's copy"),
    })
}

/// The complete lines, the length they span, and where a torn last line starts. The log is read
/// whole: it holds one event's writes, kilobytes to a few megabytes.
fn read_lines(
    file: &mut File,
    path: &Path,
    is_record: &dyn Fn(&str) -> bool,
) -> Result<(Vec<String>, u64, Option<u64>), LogError> {
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))
        .and_then(|_| io::Read::read_to_end(file, &mut bytes))
        .map_err(|source| LogError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    let mut lines = Vec::new();
    let mut offset = 0usize;
    while offset < bytes.len() {
        let rest = &bytes[offset..];
        let Some(end) = rest.iter().position(|b| *b == b'\n') else {
            // No newline: the last append was cut short.
            return Ok((lines, offset as u64, Some(offset as u64)));
        };
        let text = std::str::from_utf8(&rest[..end]).unwrap_or("");
        if text.is_empty() || !is_record(text) {
            // The last line (nothing but blanks after it) is torn; an earlier one is damage.
            if rest[end..].iter().all(u8::is_ascii_whitespace) {
                return Ok((lines, offset as u64, Some(offset as u64)));
            }
            return Err(LogError::Damaged {
                path: path.to_path_buf(),
                line: lines.len() + 1,
                message: "not JSON of a write".into(),
            });
        }
        lines.push(text.to_string());
        offset += end + 1;
    }
    Ok((lines, offset as u64, None))
}

/// What the writing thread does to its file: append and sync, or cut back to a length and
/// sync. A test gives it a file that fails.
trait Sink {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    fn cut(&mut self, len: u64) -> io::Result<()>;
}

/// The log's file, synced after each change.
struct Synced(File);

impl Sink for Synced {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.write_all(bytes).and_then(|()| self.0.sync_data())
    }

    fn cut(&mut self, len: u64) -> io::Result<()> {
        self.0.set_len(len)?;
        self.0.seek(SeekFrom::Start(len))?;
        self.0.sync_all()
    }
}

/// The writing thread: batches what is waiting, writes, syncs, answers. A batch that fails is
/// cut off again (the file back to its length before it), so what follows is not appended to a
/// half-written line; if even that fails, the log is broken and every later write is refused.
/// After a failed batch, lines of its epochs are refused (the module's documentation), and
/// `failed` holds each such epoch's first failed line before any of them is answered.
fn run(
    mut file: impl Sink,
    mut len: u64,
    rx: mpsc::Receiver<Request>,
    path: &Path,
    failed: &Mutex<BTreeMap<u64, u64>>,
) {
    let mut broken = false;
    // Lines of this epoch or an earlier one are refused.
    let mut fence: Option<u64> = None;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let fenced = |mark: Option<Mark>| mark.is_some_and(|m| Some(m.epoch) <= fence);
        let mut bytes = Vec::with_capacity(batch.iter().map(|(l, ..)| l.len()).sum());
        for (line, mark, _) in &batch {
            if !fenced(*mark) {
                bytes.extend_from_slice(line);
            }
        }
        let result = if broken {
            Err(io::Error::other(
                "the write log is broken (an earlier write failed and could not be undone)",
            ))
        } else if bytes.is_empty() {
            Ok(())
        } else {
            match file.append(&bytes) {
                Ok(()) => {
                    len += bytes.len() as u64;
                    Ok(())
                }
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "the write log could not be written");
                    if let Err(undo) = file.cut(len) {
                        tracing::error!(path = %path.display(), error = %undo, "the failed write could not be cut off: no more writes are taken");
                        broken = true;
                    }
                    Err(e)
                }
            }
        };
        // The epoch-marked lines that failed (not refused), in seq order: the first of each
        // epoch is its first failed line.
        let failing: Vec<Mark> = batch
            .iter()
            .filter_map(|(_, mark, _)| mark.filter(|_| result.is_err() && !fenced(*mark)))
            .collect();
        {
            let mut failed = failed.lock().unwrap_or_else(|e| e.into_inner());
            for m in &failing {
                failed.entry(m.epoch).or_insert(m.seq);
            }
        }
        let fence_after = fence.max(failing.iter().map(|m| m.epoch).max());
        for (_, mark, done) in batch {
            let answer = match &result {
                _ if fenced(mark) => Err(io::Error::other(
                    "not written: a write made before it could not be made durable, and this one may depend on it",
                )),
                Ok(()) => Ok(()),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            };
            let _ = done.send(answer);
        }
        fence = fence_after;
    }
}

/// Creates a folder and its missing parents, each created one its owner's only (0700 on unix):
/// the state folder and the mirror's copy hold people's data. A folder that exists is left as
/// it is.
pub(crate) fn private_dirs(dir: &Path) -> io::Result<()> {
    let mut folder = std::fs::DirBuilder::new();
    folder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut folder, 0o700);
    folder.create(dir)
}

/// Options that create a file readable by its owner only (0600 on unix): the state folder's
/// logs, and (`stage::write_private`) `bundle.toml` and every file of a pulled or mirrored copy.
pub(crate) fn private(options: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(options, 0o600);
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_json(line: &str) -> bool {
        serde_json::from_str::<serde_json::Value>(line).is_ok()
    }

    /// A folder whose log holds `text`, and the log's path.
    fn log_holding(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(FILE);
        std::fs::write(&path, text).expect("write");
        (dir, path)
    }

    #[tokio::test]
    async fn lines_appended_are_read_back_on_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opened = Log::open(dir.path(), FILE, is_json).expect("opens");
        assert!(opened.lines.is_empty());
        let waits: Vec<_> = (0..20)
            .map(|i| opened.log.append(format!("{{\"n\":{i}}}").into_bytes()))
            .collect();
        for w in waits {
            w.await.expect("answered").expect("durable");
        }
        drop(opened);
        let again = Log::open(dir.path(), FILE, is_json).expect("opens");
        let expected: Vec<String> = (0..20).map(|i| format!("{{\"n\":{i}}}")).collect();
        assert_eq!(again.lines, expected);
        assert!(again.torn.is_none());
    }

    /// A file whose appends fail while they hold `fail`; what it took.
    struct Failing(Arc<Mutex<Vec<u8>>>);

    impl Sink for Failing {
        fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
            if bytes.windows(4).any(|w| w == b"fail") {
                return Err(io::Error::other("no space left"));
            }
            self.0
                .lock()
                .expect("not poisoned")
                .extend_from_slice(bytes);
            Ok(())
        }

        fn cut(&mut self, _len: u64) -> io::Result<()> {
            Ok(())
        }
    }

    /// After a failed batch, later lines of its epoch are refused unwritten (a check-in of the
    /// registration the disk refused); a later epoch's are written, and so are lines of no
    /// epoch (the outcome log's). The epoch's first failed line is known before any answer.
    #[test]
    fn after_a_failed_line_its_epoch_is_refused_and_the_next_written() {
        let file = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel::<Request>();
        let sink = Failing(Arc::clone(&file));
        let failed = Failed::default();
        let thread_failed = Arc::clone(&failed);
        let queue = |line: &str, mark: Option<(u64, u64)>| {
            let (done, wait) = oneshot::channel();
            let mark = mark.map(|(seq, epoch)| Mark { seq, epoch });
            tx.send((format!("{line}\n").into_bytes(), mark, done))
                .expect("the thread runs");
            wait
        };
        let ok = |wait: oneshot::Receiver<io::Result<()>>| {
            wait.blocking_recv().expect("answered").is_ok()
        };
        // Queued before the thread starts: one batch, lines 2 to 4, which fails (line 3 holds
        // `fail`).
        let first_batch: Vec<_> = [("a", 2), ("fail", 3), ("b", 4)]
            .into_iter()
            .map(|(line, seq)| queue(line, Some((seq, 0))))
            .collect();
        let thread =
            thread::spawn(move || run(sink, 0, rx, Path::new("test.jsonl"), &thread_failed));
        let answers: Vec<bool> = first_batch.into_iter().map(ok).collect();
        assert_eq!(answers, [false; 3]);
        assert_eq!(failed.lock().expect("not poisoned").get(&0), Some(&2));

        assert!(
            !ok(queue("c", Some((5, 0)))),
            "checked on a view that held the failed lines"
        );
        assert!(ok(queue("d", Some((6, 1)))));
        assert!(ok(queue("e", None)));
        assert!(!ok(queue("f", Some((7, 0)))));
        drop(tx);
        thread.join().expect("the thread ends");
        let written = file.lock().expect("not poisoned").clone();
        assert_eq!(String::from_utf8_lossy(&written), "d\ne\n");
    }

    #[test]
    fn a_torn_last_line_is_copied_aside_and_cut() {
        let (dir, path) = log_holding("{\"n\":1}\n{\"n\":2}\n{\"n\":");
        let opened = Log::open(dir.path(), FILE, is_json).expect("opens");
        assert_eq!(opened.lines, vec!["{\"n\":1}", "{\"n\":2}"]);
        let aside = opened.torn.expect("torn");
        assert_eq!(std::fs::read_to_string(aside).expect("aside"), "{\"n\":");
        assert_eq!(
            std::fs::read_to_string(&path).expect("log"),
            "{\"n\":1}\n{\"n\":2}\n"
        );
    }

    #[test]
    fn a_last_line_that_is_not_json_is_torn_too() {
        let (dir, path) = log_holding("{\"n\":1}\n\0\0\0\n");
        let opened = Log::open(dir.path(), FILE, is_json).expect("opens");
        assert_eq!(opened.lines, vec!["{\"n\":1}"]);
        assert!(opened.torn.is_some());
        assert_eq!(std::fs::read_to_string(&path).expect("log"), "{\"n\":1}\n");
    }

    #[test]
    fn damage_before_the_last_line_fails_naming_the_line_and_changes_nothing() {
        let text = "{\"n\":1}\nnot json\n{\"n\":3}\n";
        let (dir, path) = log_holding(text);
        let err = Log::open(dir.path(), FILE, is_json).expect_err("refused");
        assert!(err.to_string().contains("writes.jsonl:2:"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).expect("log"), text);
    }
}
