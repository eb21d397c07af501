//! Where the term dictionary lives: in the process's memory, or in the page cache with the
//! postings.
//!
//! ballot's replica keeps its term directory in RAM and puts only postings behind its cache;
//! a Lucene-style engine that keeps its terms index on the heap does the same. With
//! [`Dictionary::Ram`] the Tantivy server reads each segment's term dictionary (`.term`:
//! the FST and the term infos) into memory when it opens the index and evicts the file's
//! pages, so the page cache, which the benchmark's memory cgroup sizes like the demo's
//! caches, holds postings only and a term lookup never waits on the device. With
//! [`Dictionary::PageCache`] the dictionary is mapped like everything else, and a lookup's
//! pages compete with the postings for the same cache.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::ValueEnum;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, OwnedBytes, WatchCallback,
    WatchHandle, WritePtr,
};

/// Where the term dictionary is read from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Dictionary {
    /// Read into the process's memory at open.
    #[default]
    Ram,
    /// Mapped, through the page cache.
    PageCache,
}

/// The extension of Tantivy's term dictionary files.
const TERM_EXTENSION: &str = "term";

/// An mmap directory whose term dictionary files are served from memory.
#[derive(Clone, Debug)]
pub struct RamDictionary {
    mapped: MmapDirectory,
    in_ram: Arc<HashMap<PathBuf, OwnedBytes>>,
}

impl RamDictionary {
    /// Reads every `.term` file of `dir` into memory and drops its pages from the page cache
    /// (they would serve no one); the other files stay with `mapped`.
    pub fn load(dir: &Path, mapped: MmapDirectory) -> Result<RamDictionary> {
        let mut in_ram = HashMap::new();
        for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
            let entry = entry?;
            let path = entry.path();
            if path.extension().is_none_or(|e| e != TERM_EXTENSION) || !entry.file_type()?.is_file()
            {
                continue;
            }
            let data =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            crate::page_cache::evict_file(&path)?;
            in_ram.insert(PathBuf::from(entry.file_name()), OwnedBytes::new(data));
        }
        Ok(RamDictionary {
            mapped,
            in_ram: Arc::new(in_ram),
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
}

impl Directory for RamDictionary {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        match self.in_ram.get(path) {
            Some(bytes) => Ok(Arc::new(bytes.clone())),
            None => self.mapped.get_file_handle(path),
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
