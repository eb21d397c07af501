//! How the server reads its index's files: the term dictionary from the process's memory or
//! mapped, the postings mapped or by positional reads. Every path but the dictionary held in
//! memory goes through the kernel's page cache.
//!
//! ballot's replica keeps its term directory in RAM and puts only postings behind its cache;
//! a Lucene-style engine that keeps its terms index on the heap does the same. With
//! [`Dictionary::Ram`] the server reads each segment's term dictionary (`.term`: the FST and
//! the term infos) into memory when it opens the index and evicts the file's pages, so the
//! page cache, which the benchmark's memory cgroup sizes like the demo's caches, holds
//! postings only and a term lookup never waits on the device. With [`Dictionary::PageCache`]
//! the dictionary is mapped, and a lookup's pages compete with the postings for the cache.
//!
//! The other files (the postings) are read as [`PostingsIo`] says: mapped ([`MmapDirectory`],
//! a page fault per page not cached), or with `pread` of each list's byte range into a
//! buffer of the process, in reads of at most [`PREAD_CHUNK_BYTES`], as Lucene's
//! `NIOFSDirectory` reads and so as Elasticsearch's default store (`hybridfs`: the term
//! dictionary, norms and doc values mapped, every other file read with NIO) reads
//! postings. The chunks let a short read at a throttled device wait behind a piece of a
//! long list rather than all of it. The two differ in how the kernel learns that a cached page
//! is used again: a read marks the page accessed at once (a second read moves it to the
//! active list), a mapped page only shows a reference bit when reclaim scans it.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::ValueEnum;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, OwnedBytes, WatchCallback,
    WatchHandle, WritePtr,
};
use tantivy::HasLen;

/// Where the term dictionary is read from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Dictionary {
    /// Read into the process's memory at open.
    #[default]
    Ram,
    /// Mapped, through the page cache.
    PageCache,
}

/// How postings (every file but the term dictionary) are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum PostingsIo {
    /// Mapped: Tantivy's `MmapDirectory`.
    #[default]
    Mmap,
    /// `pread` of each requested range into the process's memory.
    Pread,
}

/// The longest single `pread` (Lucene's `NIOFSIndexInput.CHUNK_SIZE`).
pub const PREAD_CHUNK_BYTES: usize = 16 * 1024;

/// The extension of Tantivy's term dictionary files.
const TERM_EXTENSION: &str = "term";

/// The index directory as the server reads it: an mmap directory, with the term dictionary
/// files served from memory ([`Dictionary::Ram`]) and the other files read with `pread`
/// ([`PostingsIo::Pread`]) when asked.
#[derive(Clone, Debug)]
pub struct IndexFiles {
    mapped: MmapDirectory,
    dir: PathBuf,
    in_ram: Arc<HashMap<PathBuf, OwnedBytes>>,
    postings: PostingsIo,
    /// `posix_fadvise` advice for files read with `pread` (`POSIX_FADV_RANDOM`: the kernel
    /// reads the requested pages and nothing around them).
    advice: libc::c_int,
}

impl IndexFiles {
    /// The files of `dir` as `mapped` maps them; with [`Dictionary::Ram`], every `.term` file
    /// is read into memory and its pages dropped from the page cache (they would serve no
    /// one). Files read with `pread` get the `posix_fadvise` `advice`.
    pub fn open(
        dir: &Path,
        mapped: MmapDirectory,
        dictionary: Dictionary,
        postings: PostingsIo,
        advice: libc::c_int,
    ) -> Result<IndexFiles> {
        let mut in_ram = HashMap::new();
        if dictionary == Dictionary::Ram {
            let entries =
                std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))?;
            for entry in entries {
                let entry = entry?;
                let path = entry.path();
                if path.extension().is_none_or(|e| e != TERM_EXTENSION)
                    || !entry.file_type()?.is_file()
                {
                    continue;
                }
                let data =
                    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                crate::page_cache::evict_file(&path)?;
                in_ram.insert(PathBuf::from(entry.file_name()), OwnedBytes::new(data));
            }
        }
        Ok(IndexFiles {
            mapped,
            dir: dir.to_path_buf(),
            in_ram: Arc::new(in_ram),
            postings,
            advice,
        })
    }

    /// The files served from memory (names within the directory) and their bytes.
    pub fn files(&self) -> Vec<(&Path, usize)> {
        let mut files: Vec<_> = self
            .in_ram
            .iter()
            .map(|(name, bytes)| (name.as_path(), bytes.len()))
            .collect();
        files.sort();
        files
    }

    /// `path` opened for `pread`, with the directory's read advice.
    fn pread_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        let full = self.dir.join(path);
        let wrap = |e: std::io::Error| OpenReadError::wrap_io_error(e, path.to_path_buf());
        let file = File::open(&full).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => OpenReadError::FileDoesNotExist(path.to_path_buf()),
            _ => wrap(e),
        })?;
        let len = usize::try_from(file.metadata().map_err(wrap)?.len())
            .map_err(|_| wrap(std::io::Error::other("file larger than the address space")))?;
        // SAFETY: posix_fadvise only reads its arguments; the descriptor is open for the call.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, self.advice) };
        if rc != 0 {
            return Err(wrap(std::io::Error::from_raw_os_error(rc)));
        }
        Ok(Arc::new(PreadFile { file, len }))
    }
}

/// A file read with `pread`: each requested range is copied into a new buffer, in reads of
/// at most [`PREAD_CHUNK_BYTES`].
#[derive(Debug)]
struct PreadFile {
    file: File,
    len: usize,
}

impl FileHandle for PreadFile {
    fn read_bytes(&self, range: Range<usize>) -> std::io::Result<OwnedBytes> {
        if range.start > range.end || range.end > self.len {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("range {range:?} outside a file of {} bytes", self.len),
            ));
        }
        let mut buffer = vec![0u8; range.len()];
        let mut offset = range.start as u64;
        for chunk in buffer.chunks_mut(PREAD_CHUNK_BYTES) {
            self.file.read_exact_at(chunk, offset)?;
            offset += chunk.len() as u64;
        }
        Ok(OwnedBytes::new(buffer))
    }
}

impl HasLen for PreadFile {
    fn len(&self) -> usize {
        self.len
    }
}

impl Directory for IndexFiles {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        if let Some(bytes) = self.in_ram.get(path) {
            return Ok(Arc::new(bytes.clone()));
        }
        let is_dictionary = path.extension().is_some_and(|e| e == TERM_EXTENSION);
        match self.postings {
            PostingsIo::Pread if !is_dictionary => self.pread_handle(path),
            _ => self.mapped.get_file_handle(path),
        }
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.mapped.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.mapped.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        self.mapped.open_write(path)
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.mapped.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> std::io::Result<()> {
        self.mapped.atomic_write(path, data)
    }

    fn sync_directory(&self) -> std::io::Result<()> {
        self.mapped.sync_directory()
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        self.mapped.acquire_lock(lock)
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.mapped.watch(watch_callback)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pread_file_reads_its_ranges_in_chunks_and_refuses_one_past_its_end() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.idx"), b"0123456789").unwrap();
        let mapped = MmapDirectory::open(tmp.path()).unwrap();
        let files = IndexFiles::open(
            tmp.path(),
            mapped,
            Dictionary::Ram,
            PostingsIo::Pread,
            libc::POSIX_FADV_RANDOM,
        )
        .unwrap();
        let handle = files.get_file_handle(Path::new("a.idx")).unwrap();
        assert_eq!(handle.len(), 10);
        assert_eq!(handle.read_bytes(2..5).unwrap().as_slice(), b"234");
        assert_eq!(handle.read_bytes(10..10).unwrap().as_slice(), b"");
        // A range of several chunks comes back whole and in order.
        let long: Vec<u8> = (0..3 * PREAD_CHUNK_BYTES + 5)
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(tmp.path().join("b.idx"), &long).unwrap();
        let b = files.get_file_handle(Path::new("b.idx")).unwrap();
        assert_eq!(b.read_bytes(7..long.len()).unwrap().as_slice(), &long[7..]);
        let err = handle.read_bytes(8..11).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
        assert!(matches!(
            files.get_file_handle(Path::new("missing.idx")),
            Err(OpenReadError::FileDoesNotExist(_))
        ));
    }
}
