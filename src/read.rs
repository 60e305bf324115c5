//! The one way a bundle file is opened and read, so that no file can stall or bloat a load.
//!
//! A bundle file may be anything a folder can hold: a named pipe (whose `open` blocks until a
//! writer comes), a link to `/dev/zero` (endless), a device, a socket, a folder, or a sparse file
//! of many gigabytes. [`open`] follows links, checks what the path is, opens it without blocking
//! (`O_NONBLOCK`), checks the opened file itself (`fstat`: the path may have changed in between)
//! and refuses anything but a regular file, and refuses a file over the size limit before a byte
//! is read. The reader it returns stops at the limit: a file that grows while it is read is cut
//! and reported, never read without bound.

use std::fs::{self, File, Metadata};
use std::io::{self, BufRead, Read};
use std::path::Path;

/// The default of `--max-file-bytes`: 1 GiB, several times the largest bundle file expected
/// (200,000 payments are about 100 MiB of JSON).
pub(crate) const DEFAULT_MAX_FILE_BYTES: u64 = 1 << 30;

/// Why a bundle file was not read. Each message reads after "path: ".
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("cannot read: {0}")]
    Io(#[from] io::Error),
    #[error("{0} where a file belongs; only regular files (or links to them) are read")]
    NotAFile(&'static str),
    #[error("{size} bytes, over the limit of {max} bytes (--max-file-bytes); not read")]
    TooLarge { size: u64, max: u64 },
}

/// What kind of thing a path is, in words, when it is not a regular file.
fn kind(meta: &Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a folder")
    } else if t.is_fifo() {
        Some("a named pipe (FIFO)")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// Checks a file's kind and size.
fn check(meta: &Metadata, max: u64) -> Result<(), ReadError> {
    if let Some(kind) = kind(meta) {
        return Err(ReadError::NotAFile(kind));
    }
    if meta.len() > max {
        return Err(ReadError::TooLarge {
            size: meta.len(),
            max,
        });
    }
    Ok(())
}

/// Opens without blocking: a FIFO swapped in after the check must not hang the open.
#[cfg(target_os = "linux")]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// Opens without blocking (the flag's value is the same on every Unix eventbox builds on but
/// Linux is the one tested).
#[cfg(not(target_os = "linux"))]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    fs::File::open(path)
}

/// A regular file opened for reading, at most `max` bytes of it.
#[derive(Debug)]
pub(crate) struct Capped {
    file: File,
    left: u64,
    max: u64,
}

impl Read for Capped {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            // At the limit: a file that grew while read is cut, and says so.
            let mut probe = [0u8; 1];
            return match self.file.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::other(format!(
                    "the file grew past the limit of {} bytes (--max-file-bytes) while read",
                    self.max
                ))),
            };
        }
        let len = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.file.read(&mut buf[..len])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// Opens a bundle file: only a regular file (links followed) of at most `max` bytes.
pub(crate) fn open(path: &Path, max: u64) -> Result<Capped, ReadError> {
    // The path first, for a clear word on a socket (which cannot be opened at all).
    check(&fs::metadata(path)?, max)?;
    let file = open_nonblocking(path)?;
    // Then the opened file itself: the path may have been replaced in between.
    check(&file.metadata()?, max)?;
    Ok(Capped {
        file,
        left: max,
        max,
    })
}

/// Reads a whole bundle file (see [`open`]).
pub(crate) fn read(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let mut reader = open(path, max)?;
    let hint = reader.file.metadata().map_or(0, |m| m.len());
    let mut bytes = Vec::with_capacity(usize::try_from(hint.min(max)).unwrap_or(0));
    reader.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The UTF-8 byte-order mark. It is not JSON, but editors on some systems start a file with
/// one, and the service's framework skips one before a request body: skipped alike in bundle
/// files, request bodies and a source's answers.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// `bytes` without the byte-order mark they may start with.
pub(crate) fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM).unwrap_or(bytes)
}

/// `text` without the byte-order mark it may start with.
pub(crate) fn without_bom_str(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Consumes the byte-order mark `reader` may start with.
pub(crate) fn skip_bom(reader: &mut impl BufRead) -> io::Result<()> {
    if reader.fill_buf()?.starts_with(BOM) {
        reader.consume(BOM.len());
    }
    Ok(())
}

/// A request body (or a source's answer) as JSON, a byte-order mark before it skipped.
pub(crate) fn parse_json(bytes: &[u8]) -> serde_json::Result<serde_json::Value> {
    serde_json::from_slice(without_bom(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_whole() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("a.json");
        fs::write(&path, b"{\"a\":1}").expect("write");

        assert_eq!(read(&path, 7).expect("read"), b"{\"a\":1}");
    }

    #[test]
    fn a_file_over_the_limit_is_refused_before_reading() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("a.json");
        fs::write(&path, b"12345678").expect("write");

        let err = read(&path, 7).expect_err("refused");

        assert_eq!(
            err.to_string(),
            "8 bytes, over the limit of 7 bytes (--max-file-bytes); not read"
        );
    }

    #[test]
    fn a_folder_is_refused() {
        let tmp = tempfile::tempdir().expect("tmp");

        let err = read(tmp.path(), 7).expect_err("refused");

        assert!(
            err.to_string().starts_with("a folder where a file belongs"),
            "{err}"
        );
    }

    #[test]
    fn a_growing_file_is_cut_at_the_limit() {
        // /dev/zero reports size 0 and never ends: the cap is what stops it (the kind check is
        // bypassed here by reading through Capped directly).
        let Ok(file) = File::open("/dev/zero") else {
            return;
        };
        let mut capped = Capped {
            file,
            left: 1000,
            max: 1000,
        };
        let mut out = Vec::new();

        let err = capped.read_to_end(&mut out).expect_err("cut");

        assert_eq!(out.len(), 1000);
        assert!(
            err.to_string()
                .contains("grew past the limit of 1000 bytes"),
            "{err}"
        );
    }
}
