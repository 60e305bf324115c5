//! Large served bytes kept in a memory file, so that a socket is sent them from the file
//! (`sendfile`) rather than copied out of memory.
//!
//! nginx sends a large body with `sendfile`: the kernel hands the socket the page cache's pages
//! and copies nothing. eventbox's bodies are in memory, and a write copies them into the socket:
//! 29 % of the server's CPU serving a 526 KB body, profiled (docs/performance.md). So the bytes
//! of a large piece ([`copy`]) are kept not on the heap but in a memory file (`memfd`) mapped
//! into the process: still one copy, read through the mapping as any `Bytes`, and found again
//! by its address when a connection writes it, so that the socket is sent that part from the
//! file ([`locate`]). Elsewhere than Linux, or when no memory file can be made, bytes stay on the
//! heap and are written as they are.
//!
//! What makes the `unsafe` below sound:
//! - an arena is one memory file mapped once, read-only and shared, at its full size; the
//!   mapping lives as long as the arena, and every region holds its arena (`Arc`);
//! - a region's bytes are written once, into the file, before its `Bytes` exists, and never
//!   after: regions are handed out by an offset that only grows, whole pages each, so no two
//!   regions share a page and no offset is handed out twice; a region's pages are freed (a hole
//!   punched in the file) only when its last `Bytes` is dropped;
//! - nothing outside this module holds the file (it is closed on exec; a process allowed to
//!   open it through `/proc` could as well write this process's memory).

use bytes::Bytes;

/// Bytes shorter than this stay on the heap, and a buffer shorter than this is written as it is
/// without being looked up: a region takes whole pages, copying a few kilobytes into a socket
/// costs less than a second system call, and an HTTP/2 frame (16 KiB unless the client asks
/// for more) is written as it is.
pub(crate) const MIN_LEN: usize = 32 * 1024;

/// `bytes`, copied into a memory file when they are large enough and one can be had, else
/// onto the heap.
pub(crate) fn copy(bytes: &[u8]) -> Bytes {
    if bytes.len() >= MIN_LEN {
        if let Some(kept) = imp::copy(bytes) {
            return kept;
        }
    }
    Bytes::copy_from_slice(bytes)
}

/// `bytes`, moved into a memory file when they are large enough, not there yet and one can be
/// had (the heap copy is freed when the last clone of `bytes` is), else as they are.
pub(crate) fn keep(bytes: Bytes) -> Bytes {
    if bytes.len() < MIN_LEN || imp::is_kept(&bytes) {
        return bytes;
    }
    imp::copy(&bytes).unwrap_or(bytes)
}

/// What the memory files hold and have sent, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Whether new large bodies go to a memory file (if not, an `info` line said why).
    pub(crate) in_use: bool,
    /// Bytes of memory file pages holding live bodies (whole pages).
    pub(crate) held: u64,
    /// Bytes sent to sockets from memory files since the process started.
    pub(crate) sent: u64,
}

/// Keeps every body made from now on out of memory files, and sends none from them (the
/// process's `--memory-file off`): an escape hatch, say for a sandbox that kills a process on a
/// call the memory file makes. There is no turning it back on.
pub(crate) fn turn_off() {
    imp::turn_off();
}

/// This process's [`Usage`].
pub(crate) fn usage() -> Usage {
    imp::usage()
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
pub(crate) use imp::{locate, refused};

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
mod imp {
    use std::io;
    use std::os::fd::{AsFd, OwnedFd};
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};

    use bytes::Bytes;
    use rustix::fs::{FallocateFlags, MemfdFlags};
    use rustix::mm::{MapFlags, ProtFlags};

    /// The address space one memory file takes. Its pages cost memory only while written and
    /// not yet freed; when the offsets run out, the next region starts a new file, and the
    /// old one goes when its last region does.
    const ARENA_LEN: usize = 16 << 30;

    /// One memory file, mapped.
    struct Arena {
        fd: OwnedFd,
        /// Where the mapping starts (an address, kept as a number so that the arena is `Send`).
        base: usize,
    }

    /// The arena new regions go to, and its next free offset (a whole number of pages; only
    /// grows).
    static CURRENT: Mutex<Option<(Arc<Arena>, usize)>> = Mutex::new(None);
    /// Every arena that may be alive, by where it is mapped: what [`locate`] looks a slice up in.
    static MAPPED: RwLock<Vec<(usize, Weak<Arena>)>> = RwLock::new(Vec::new());
    /// No memory file could be made: bytes stay on the heap from then on.
    static UNAVAILABLE: AtomicBool = AtomicBool::new(false);
    /// The kernel refused to `sendfile` from a memory file: buffers are written from then on.
    static UNSENDABLE: AtomicBool = AtomicBool::new(false);
    /// The pages of live regions, in bytes.
    static HELD: AtomicU64 = AtomicU64::new(0);
    /// The bytes sent from memory files.
    static SENT: AtomicU64 = AtomicU64::new(0);

    pub(super) fn turn_off() {
        let was_sending = !UNSENDABLE.swap(true, Ordering::Relaxed);
        let was_keeping = !UNAVAILABLE.swap(true, Ordering::Relaxed);
        if was_sending || was_keeping {
            tracing::info!(
                "large bodies are kept on the heap and copied when sent: --memory-file off"
            );
        }
    }

    pub(super) fn usage() -> super::Usage {
        super::Usage {
            in_use: !UNAVAILABLE.load(Ordering::Relaxed) && unusable().is_none(),
            held: HELD.load(Ordering::Relaxed),
            sent: SENT.load(Ordering::Relaxed),
        }
    }

    /// Why this process should not keep bodies in a memory file, if it should not (checked
    /// once, logged once).
    pub(super) fn unusable() -> Option<&'static str> {
        static WHY: OnceLock<Option<&'static str>> = OnceLock::new();
        *WHY.get_or_init(|| {
            use rustix::process::{getrlimit, Resource};
            let why = if getrlimit(Resource::Fsize)
                .current
                .is_some_and(|max| max < ARENA_LEN as u64)
            {
                // Growing the file past the limit would kill the process (SIGXFSZ).
                Some("a file size limit (ulimit -f) below the memory file's size")
            } else if getrlimit(Resource::As).current.is_some() {
                // The reservation would take from what the heap may use.
                Some("an address-space limit (ulimit -v)")
            } else if large_pages_possible(Path::new(TRANSPARENT_HUGEPAGE)) {
                Some("the kernel may give memory files pages larger than 4 KiB (transparent huge pages for shmem), whose parts cannot be freed safely while a socket sends them")
            } else {
                None
            };
            if let Some(why) = why {
                tracing::info!("large bodies are kept on the heap and copied when sent: {why}");
            }
            why
        })
    }

    const TRANSPARENT_HUGEPAGE: &str = "/sys/kernel/mm/transparent_hugepage";

    /// Whether the kernel may give a memory file's pages in folios larger than one page
    /// (transparent huge pages for shmem, `root` being the sysfs folder): punching a hole in
    /// part of one zeroes that part in place, while a socket may still be sending it. The
    /// setting for memory files is the top one (a size's own setting is for anonymous shared
    /// memory); a size set on its own to `always` or `within_size` counts too, to be safe. A
    /// setting that cannot be read counts as yes; no such folder where `/sys/kernel/mm` is
    /// there (a kernel without them) as no, and no `/sys/kernel/mm` (not mounted) as yes.
    pub(super) fn large_pages_possible(root: &Path) -> bool {
        if !root.exists() {
            return !root.parent().is_some_and(Path::exists);
        }
        let chosen = |path: &Path| {
            let text = std::fs::read_to_string(path).ok()?;
            let word = text.split_whitespace().find(|w| w.starts_with('['))?;
            Some(word.trim_matches(['[', ']']).to_string())
        };
        match chosen(&root.join("shmem_enabled")).as_deref() {
            Some("never" | "advise" | "deny") => {}
            _ => return true,
        }
        let Ok(entries) = std::fs::read_dir(root) else {
            return true;
        };
        entries.flatten().any(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("hugepages-")
                && matches!(
                    chosen(&entry.path().join("shmem_enabled")).as_deref(),
                    Some("always" | "within_size")
                )
        })
    }

    impl Arena {
        fn new() -> io::Result<Arc<Arena>> {
            let fd = rustix::fs::memfd_create("eventbox-bodies", MemfdFlags::CLOEXEC)?;
            rustix::fs::ftruncate(&fd, ARENA_LEN as u64)?;
            // SAFETY: a new mapping at an address the kernel chooses, of a file no one else
            // holds; it is unmapped only when the arena is dropped (see the module's notes).
            let base = unsafe {
                rustix::mm::mmap(
                    std::ptr::null_mut(),
                    ARENA_LEN,
                    ProtFlags::READ,
                    MapFlags::SHARED | MapFlags::NORESERVE,
                    &fd,
                    0,
                )?
            } as usize;
            let arena = Arc::new(Arena { fd, base });
            // SAFETY: advice on the mapping just made, which changes no byte of it. A core dump
            // would otherwise read the whole 16 GiB (its holes as zero pages made for it).
            unsafe {
                rustix::mm::madvise(base as *mut _, ARENA_LEN, rustix::mm::Advice::LinuxDontDump)?;
            }
            // A file system that cannot free part of a file (a sandbox's) would keep every
            // region's pages until the whole file goes: then no memory file at all.
            let whole = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
            let page = rustix::param::page_size() as u64;
            rustix::fs::fallocate(&arena.fd, whole, 0, page)?;
            let mut mapped = MAPPED.write().unwrap_or_else(PoisonError::into_inner);
            mapped.retain(|(_, a)| a.strong_count() > 0);
            mapped.push((base, Arc::downgrade(&arena)));
            Ok(arena)
        }
    }

    impl Drop for Arena {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`; no region is left to read it (each holds the
            // arena), and `locate` reaches an arena only through a live `Arc`.
            let unmapped = unsafe { rustix::mm::munmap(self.base as *mut _, ARENA_LEN) };
            if let Err(e) = unmapped {
                tracing::warn!(error = %e, "cannot unmap a memory file of bodies");
            }
        }
    }

    /// Bytes in an arena: whole pages from `offset`, of which the first `len` bytes are used.
    struct Region {
        arena: Arc<Arena>,
        offset: usize,
        len: usize,
        pages: usize,
    }

    impl AsRef<[u8]> for Region {
        fn as_ref(&self) -> &[u8] {
            // SAFETY: inside the arena's mapping, alive while `self.arena` is; written once
            // before the region was made and never since (see the module's notes).
            unsafe {
                std::slice::from_raw_parts((self.arena.base + self.offset) as *const u8, self.len)
            }
        }
    }

    impl Drop for Region {
        fn drop(&mut self) {
            // The pages go back to the system; the offsets are never handed out again. Pages
            // a socket is still sending stay alive in the kernel until sent.
            let mode = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
            let freed =
                rustix::fs::fallocate(&self.arena.fd, mode, self.offset as u64, self.pages as u64);
            if let Err(e) = freed {
                tracing::warn!(error = %e, "cannot free bytes of a memory file of bodies");
            }
            HELD.fetch_sub(self.pages as u64, Ordering::Relaxed);
        }
    }

    /// Whether `e` is one of `errors`.
    fn is_one_of(e: &io::Error, errors: &[rustix::io::Errno]) -> bool {
        errors
            .iter()
            .any(|n| e.raw_os_error() == Some(n.raw_os_error()))
    }

    /// A region for `len` bytes, from a new arena if the current one is full.
    fn region(len: usize) -> Option<Region> {
        let pages = len.checked_next_multiple_of(rustix::param::page_size())?;
        if pages > ARENA_LEN {
            return None;
        }
        let mut current = CURRENT.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some((arena, next)) = current.as_mut() {
                let offset = *next;
                if offset + pages <= ARENA_LEN {
                    *next += pages;
                    HELD.fetch_add(pages as u64, Ordering::Relaxed);
                    let arena = Arc::clone(arena);
                    return Some(Region {
                        arena,
                        offset,
                        len,
                        pages,
                    });
                }
            }
            match Arena::new() {
                Ok(arena) => *current = Some((arena, 0)),
                Err(e) => {
                    *current = None;
                    use rustix::io::Errno;
                    if is_one_of(&e, &[Errno::MFILE, Errno::NFILE]) {
                        // Out of file descriptors for now: tried again for the next body.
                        tracing::debug!(error = %e, "no memory file for bodies for now");
                    } else {
                        UNAVAILABLE.store(true, Ordering::Relaxed);
                        tracing::info!(error = %e, "no memory file for bodies: large bodies are kept on the heap and copied when sent");
                    }
                    return None;
                }
            }
        }
    }

    pub(super) fn copy(bytes: &[u8]) -> Option<Bytes> {
        if UNAVAILABLE.load(Ordering::Relaxed) || unusable().is_some() {
            return None;
        }
        let region = region(bytes.len())?;
        // Written into the file, not through the mapping (which is read-only): the kernel
        // fills the pages without a page fault each (written through the mapping, 200,000
        // payments were ready 0.1 s later, bench/scale.py), and reads through the mapping
        // later map them many pages a fault.
        let mut written = 0;
        while written < bytes.len() {
            let at = (region.offset + written) as u64;
            match rustix::io::pwrite(&region.arena.fd, &bytes[written..], at) {
                Ok(0) | Err(_) => return None,
                Ok(n) => written += n,
            }
        }
        Some(Bytes::from_owner(region))
    }

    /// Where a slice of bytes lies in a memory file.
    pub(crate) struct Located {
        arena: Arc<Arena>,
        offset: u64,
        len: usize,
    }

    /// Where `slice` lies in a memory file, if it does.
    pub(crate) fn locate(slice: &[u8]) -> Option<Located> {
        if UNSENDABLE.load(Ordering::Relaxed) {
            return None;
        }
        find(slice)
    }

    fn find(slice: &[u8]) -> Option<Located> {
        let start = slice.as_ptr() as usize;
        let mapped = MAPPED.read().unwrap_or_else(PoisonError::into_inner);
        let (base, arena) = mapped
            .iter()
            .find(|(base, _)| start >= *base && start + slice.len() <= base + ARENA_LEN)?;
        Some(Located {
            arena: arena.upgrade()?,
            offset: (start - base) as u64,
            len: slice.len(),
        })
    }

    /// Whether `e`, from [`Located::send`] or the write of the buffers before it, says that the
    /// kernel refuses the calls (a sandbox that refuses them, an old kernel): if so,
    /// nothing is sent from memory files from then on, and the caller writes the bytes instead.
    pub(crate) fn refused(e: &io::Error) -> bool {
        use rustix::io::Errno;
        let refused = is_one_of(
            e,
            &[Errno::INVAL, Errno::NOSYS, Errno::OPNOTSUPP, Errno::PERM],
        );
        if refused && !UNSENDABLE.swap(true, Ordering::Relaxed) {
            // Nothing to gain from the file any more: new bodies go on the heap.
            UNAVAILABLE.store(true, Ordering::Relaxed);
            tracing::info!(error = %e, "sendfile refused: large bodies are copied when sent");
        }
        refused
    }

    pub(super) fn is_kept(slice: &[u8]) -> bool {
        find(slice).is_some()
    }

    impl Located {
        /// Sends the bytes to `socket` from the file: how many were sent, as a write would
        /// say. On a non-blocking socket that is full, `WouldBlock`.
        pub(crate) fn send(&self, socket: impl AsFd) -> io::Result<usize> {
            let mut offset = self.offset;
            let sent = rustix::fs::sendfile(socket, &self.arena.fd, Some(&mut offset), self.len)?;
            SENT.fetch_add(sent as u64, Ordering::Relaxed);
            Ok(sent)
        }
    }
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
mod imp {
    pub(super) fn copy(_: &[u8]) -> Option<bytes::Bytes> {
        None
    }

    pub(super) fn is_kept(_: &[u8]) -> bool {
        false
    }

    pub(super) fn turn_off() {}

    pub(super) fn usage() -> super::Usage {
        super::Usage::default()
    }
}

#[cfg(all(test, target_os = "linux", target_pointer_width = "64"))]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn large_bytes_are_kept_in_a_memory_file_and_read_back_the_same() {
        let bytes: Vec<u8> = (0..MIN_LEN * 3 + 17).map(|i| (i * 7 % 251) as u8).collect();
        let kept = copy(&bytes);
        assert_eq!(kept[..], bytes[..]);
        if let Some(why) = imp::unusable() {
            assert!(
                locate(&kept).is_none(),
                "kept in a memory file despite: {why}"
            );
            return;
        }
        // A slice of it is found in the file; heap bytes are not.
        let (a, b) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
        let found = locate(&kept[100..200]).expect("found in a memory file");
        let before = usage();
        assert_eq!(found.send(&a).expect("sent"), 100);
        let mut got = [0u8; 100];
        (&b).read_exact(&mut got).expect("read");
        assert_eq!(got[..], bytes[100..200]);
        // Counted for /metrics (other tests may add to the figures meanwhile, never take from
        // the bytes sent, nor free this test's pages).
        let after = usage();
        assert!(after.in_use);
        assert!(after.sent >= before.sent + 100, "{before:?} then {after:?}");
        assert!(after.held >= kept.len() as u64, "{after:?}");
        assert!(locate(&bytes[..]).is_none());
        assert!(
            locate(&copy(&bytes[..10])[..]).is_none(),
            "small bytes stay on the heap"
        );
        // Kept bytes are not copied again; heap bytes are moved.
        assert_eq!(keep(kept.clone()).as_ptr(), kept.as_ptr());
        let moved = keep(Bytes::from(bytes.clone()));
        assert_eq!(moved[..], bytes[..]);
        assert!(locate(&moved[..]).is_some());
    }

    /// The bytes a socket has taken but not yet delivered reach the client whole after their
    /// region is freed (its pages' hole punched), and the region beside it is untouched.
    #[test]
    fn bytes_still_being_sent_survive_their_region_being_freed() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let client =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        let first: Vec<u8> = (0..MIN_LEN + 5000).map(|i| (i % 250 + 1) as u8).collect();
        let second: Vec<u8> = (0..MIN_LEN).map(|i| (i % 13 + 1) as u8).collect();
        let (kept, beside) = (copy(&first), copy(&second));
        // The loopback socket's buffers take it all at once; the client has read nothing. Where
        // no memory file may be used (imp::unusable), the bytes are on the heap and written.
        let sent = match locate(&kept) {
            Some(found) => found.send(&server),
            None => std::io::Write::write(&mut &server, &kept),
        };
        assert_eq!(sent.expect("sent"), first.len());
        drop(kept);
        let mut got = vec![0u8; first.len()];
        (&client).read_exact(&mut got).expect("read");
        assert!(
            got == first,
            "bytes sent changed when their region was freed"
        );
        assert!(beside[..] == second[..]);
    }

    #[test]
    fn transparent_huge_pages_for_shmem_keep_bodies_off_the_memory_file() {
        let root = tempfile::tempdir().expect("tempdir");
        let set = |rel: &str, chosen: &str| {
            let path = root.path().join(rel);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            let all = [
                "always",
                "inherit",
                "within_size",
                "advise",
                "never",
                "deny",
                "force",
            ];
            let line: Vec<String> = all
                .iter()
                .map(|w| {
                    if *w == chosen {
                        format!("[{w}]")
                    } else {
                        w.to_string()
                    }
                })
                .collect();
            std::fs::write(path, line.join(" ")).expect("write");
        };
        let possible = || imp::large_pages_possible(root.path());
        set("shmem_enabled", "never");
        assert!(!possible(), "never, and no sizes of their own");
        set("shmem_enabled", "within_size");
        assert!(possible(), "within_size");
        set("hugepages-2048kB/shmem_enabled", "never");
        set("hugepages-64kB/shmem_enabled", "never");
        assert!(
            possible(),
            "the top setting is the memory file's, whatever the sizes say"
        );
        set("shmem_enabled", "advise");
        set("hugepages-2048kB/shmem_enabled", "inherit");
        assert!(
            !possible(),
            "advise: only mappings asked for, which this one is not"
        );
        set("hugepages-64kB/shmem_enabled", "always");
        assert!(possible(), "one size always");
        set("hugepages-64kB/shmem_enabled", "never");
        set("shmem_enabled", "force");
        assert!(possible(), "force");
        set("shmem_enabled", "deny");
        assert!(!possible(), "deny");
        // Linux 6.8 to 6.10: folders a size, without a shmem setting.
        std::fs::create_dir_all(root.path().join("hugepages-32kB")).expect("mkdir");
        assert!(!possible(), "a size without a shmem setting");
        std::fs::write(root.path().join("shmem_enabled"), "").expect("write");
        assert!(possible(), "a setting that cannot be read counts as yes");
        let kernel = root.path().join("mm");
        std::fs::create_dir_all(&kernel).expect("mkdir");
        assert!(
            !imp::large_pages_possible(&kernel.join("absent")),
            "a kernel without them"
        );
        assert!(
            imp::large_pages_possible(&root.path().join("none/absent")),
            "no sysfs"
        );
    }
}
