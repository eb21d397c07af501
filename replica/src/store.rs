//! The flash store: positional reads of postings lists, bypassing the OS page cache.
//!
//! A replica's RAM cache is only meaningful if it is the *only* cache: otherwise the kernel's
//! page cache silently turns misses into memory reads and flash bandwidth never shows. So the
//! postings file is opened with `O_DIRECT` and read with `pread` into 4 KiB-aligned buffers
//! covering the aligned span around the list. Where the filesystem refuses `O_DIRECT`
//! (tmpfs, some overlay filesystems) the store falls back to buffered `pread` followed by
//! `posix_fadvise(POSIX_FADV_DONTNEED)` on the range just read, which drops those pages
//! again. [`IoMode`] says which one is active; the binary prints it at start-up.
//!
//! Optional flash emulation for machines whose disk is too fast or too slow to show the
//! effect: a fixed latency per read, and a token bucket in bytes shared by every request
//! (reservation style: a read takes its bytes at once, possibly going into debt, and sleeps
//! until the debt is paid, so readers are served in arrival order at the configured rate).
//!
//! Every list's CRC-32 is checked on read ([`crate::index::format::decode_list`]).

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::index::format::{decode_list, CorruptList, IndexError};
use crate::index::{open_directory, Directory};
use crate::postings::Postings;

/// Alignment of `O_DIRECT` offsets, lengths and buffers.
const ALIGN: usize = 4096;

/// How reads avoid the page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoMode {
    /// `O_DIRECT` with aligned buffers.
    Direct,
    /// Buffered `pread`, then `POSIX_FADV_DONTNEED` on the range.
    FadviseDontNeed,
}

impl std::fmt::Display for IoMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IoMode::Direct => "O_DIRECT",
            IoMode::FadviseDontNeed => "buffered+fadvise(DONTNEED)",
        })
    }
}

/// Flash emulation and I/O options.
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreOptions {
    /// Refuse `O_DIRECT` even where it works (for comparisons).
    pub no_direct: bool,
    /// Emulated flash bandwidth in MB/s (10^6 bytes), shared by every read; None: unlimited.
    pub read_mbps: Option<f64>,
    /// Emulated latency added to every read.
    pub latency: Duration,
}

/// A failed list read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The read itself failed.
    #[error("{path}: reading term {term_id}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The term id.
        term_id: u32,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The list failed verification.
    #[error("{path}: term {term_id} is corrupt: {source}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The term id.
        term_id: u32,
        /// The underlying error.
        source: CorruptList,
    },
    /// No such term id.
    #[error("no term id {0}")]
    NoTerm(u32),
}

/// The postings file and its directory.
#[derive(Debug)]
pub struct FlashStore {
    directory: Directory,
    file: File,
    mode: IoMode,
    latency: Duration,
    bucket: Option<Mutex<Bucket>>,
}

/// A list read from flash.
#[derive(Debug)]
pub struct ReadList {
    /// The verified list, in its cached form.
    pub postings: Postings,
    /// Stored bytes of the list (what the cache accounts).
    pub bytes: u64,
    /// Time the read took, emulation included.
    pub elapsed: Duration,
}

impl FlashStore {
    /// Opens the index in `dir` and chooses the I/O mode.
    pub fn open(dir: &Path, opts: StoreOptions) -> Result<Self, IndexError> {
        let directory = open_directory(dir)?;
        let path = directory.postings_path.clone();
        let direct = if opts.no_direct {
            None
        } else {
            try_direct(&path, directory.manifest.postings_bytes)
        };
        let (file, mode) = match direct {
            Some(f) => (f, IoMode::Direct),
            None => (
                File::open(&path).map_err(IndexError::io(&path))?,
                IoMode::FadviseDontNeed,
            ),
        };
        let bucket = match opts.read_mbps {
            Some(mbps) if !(mbps.is_finite() && mbps > 0.0) => {
                return Err(IndexError::Input(format!(
                    "--flash-read-mbps must be positive, got {mbps}"
                )))
            }
            Some(mbps) => {
                let rate = mbps * 1e6;
                Some(Mutex::new(Bucket {
                    rate,
                    // Up to 10 ms of bandwidth may be used in a burst.
                    burst: (rate * 0.01).max(ALIGN as f64),
                    tokens: 0.0,
                    last: Instant::now(),
                }))
            }
            None => None,
        };
        Ok(FlashStore {
            directory,
            file,
            mode,
            latency: opts.latency,
            bucket,
        })
    }

    /// The term directory.
    pub fn directory(&self) -> &Directory {
        &self.directory
    }

    /// The active I/O mode.
    pub fn mode(&self) -> IoMode {
        self.mode
    }

    /// Reads, verifies and decodes term `term_id`'s list. Blocks (I/O and emulation).
    pub fn read(&self, term_id: u32) -> Result<ReadList, ReadError> {
        let start = Instant::now();
        let entry = *self
            .directory
            .entry(term_id)
            .ok_or(ReadError::NoTerm(term_id))?;
        let path = &self.directory.postings_path;
        let io = |source| ReadError::Io {
            path: path.clone(),
            term_id,
            source,
        };
        let len = entry.len as usize;
        let mut buf;
        let bytes: &[u8] = match self.mode {
            IoMode::Direct => {
                let first = entry.offset & !(ALIGN as u64 - 1);
                let skip = (entry.offset - first) as usize;
                let span = (skip + len).div_ceil(ALIGN) * ALIGN;
                buf = vec![0u8; span + ALIGN];
                let pad = buf.as_ptr().align_offset(ALIGN);
                let aligned = &mut buf[pad..pad + span];
                read_full(&self.file, aligned, first, skip + len).map_err(io)?;
                &buf[pad + skip..pad + skip + len]
            }
            IoMode::FadviseDontNeed => {
                buf = vec![0u8; len];
                read_full(&self.file, &mut buf, entry.offset, len).map_err(io)?;
                drop_cached(&self.file, entry.offset, len as u64);
                &buf
            }
        };
        self.emulate(len as u64);
        let postings = decode_list(bytes, term_id, &entry, self.directory.manifest.docs).map_err(
            |source| ReadError::Corrupt {
                path: path.clone(),
                term_id,
                source,
            },
        )?;
        Ok(ReadList {
            postings,
            bytes: len as u64,
            elapsed: start.elapsed(),
        })
    }

    /// Sleeps for the emulated latency and bandwidth of a read of `bytes`.
    fn emulate(&self, bytes: u64) {
        let mut wait = self.latency;
        if let Some(bucket) = &self.bucket {
            let mut b = bucket.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            let refill = now.duration_since(b.last).as_secs_f64() * b.rate;
            b.tokens = (b.tokens + refill).min(b.burst);
            b.last = now;
            b.tokens -= bytes as f64;
            if b.tokens < 0.0 {
                wait += Duration::from_secs_f64(-b.tokens / b.rate);
            }
        }
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
}

/// The shared token bucket (bytes).
#[derive(Debug)]
struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

/// Opens `path` with `O_DIRECT` and proves an aligned read works; None if it does not.
fn try_direct(path: &Path, file_len: u64) -> Option<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .ok()?;
    if file_len > 0 {
        let mut buf = vec![0u8; 2 * ALIGN];
        let pad = buf.as_ptr().align_offset(ALIGN);
        file.read_at(&mut buf[pad..pad + ALIGN], 0).ok()?;
    }
    Some(file)
}

/// Reads until `need` bytes of `buf` are filled from `offset` (end of file allowed after).
fn read_full(file: &File, buf: &mut [u8], offset: u64, need: usize) -> std::io::Result<()> {
    let mut done = 0usize;
    while done < need {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("file ends {done} bytes into a {need}-byte read at {offset}"),
                ))
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Asks the kernel to drop the page-cache pages of a range just read.
fn drop_cached(file: &File, offset: u64, len: u64) {
    // SAFETY: posix_fadvise only takes a file descriptor and integers; an invalid fd or
    // range makes it return an error code, which is ignored (the advice is best effort).
    unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            offset as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::build::{build_index, doc_ids};

    #[test]
    fn reads_lists_in_both_modes_and_catches_corruption() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let terms = (0..50).map(|i| (format!("t{i}"), 10 + i * 37));
        build_index(dir, 5000, terms).unwrap();
        for no_direct in [false, true] {
            let store = FlashStore::open(
                dir,
                StoreOptions {
                    no_direct,
                    ..Default::default()
                },
            )
            .unwrap();
            if no_direct {
                assert_eq!(store.mode(), IoMode::FadviseDontNeed);
            }
            for i in 0..50u64 {
                let term = format!("t{i}");
                let id = store.directory().id(&term).unwrap();
                let got = store.read(id).unwrap();
                let want: Vec<u32> = doc_ids(&term, (10 + i * 37) as u32, 5000).collect();
                assert_eq!(got.postings.to_vec(), want);
                assert_eq!(
                    got.bytes,
                    u64::from(store.directory().entry(id).unwrap().len)
                );
            }
        }
        let store = FlashStore::open(dir, StoreOptions::default()).unwrap();
        let id = store.directory().id("t3").unwrap();
        let e = *store.directory().entry(id).unwrap();
        let p = dir.join("postings.bin");
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[e.offset as usize + 20] ^= 0xff;
        std::fs::write(&p, bytes).unwrap();
        let store = FlashStore::open(dir, StoreOptions::default()).unwrap();
        assert!(matches!(store.read(id), Err(ReadError::Corrupt { .. })));
        assert!(store.read(store.directory().id("t4").unwrap()).is_ok());
    }

    #[test]
    fn token_bucket_bounds_bandwidth() {
        let tmp = tempfile::tempdir().unwrap();
        build_index(tmp.path(), 100_000, [("big".to_string(), 100_000u64)]).unwrap();
        let store = FlashStore::open(
            tmp.path(),
            StoreOptions {
                read_mbps: Some(10.0),
                ..Default::default()
            },
        )
        .unwrap();
        let start = Instant::now();
        for _ in 0..5 {
            store.read(0).unwrap();
        }
        // 5 x ~100 kB at 10 MB/s = ~50 ms (minus one 10 ms burst).
        let t = start.elapsed();
        assert!(t >= Duration::from_millis(35), "{t:?}");
    }
}
