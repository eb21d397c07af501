//! Evicting an index's pages from the kernel's page cache (`posix_fadvise(DONTNEED)` on
//! every file), so a server starts with a cold cache whatever ran before it. Pages that a
//! live process maps, or that are dirty, stay: call it before opening the index.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// Asks the kernel to drop the cached pages of every regular file directly in `dir`;
/// returns the bytes of the files it was asked about.
pub fn evict(dir: &Path) -> Result<u64> {
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        let meta = std::fs::metadata(&path)?;
        if meta.is_file() {
            evict_file(&path)?;
            bytes += meta.len();
        }
    }
    Ok(bytes)
}

/// Asks the kernel to drop the cached pages of the file at `path`.
pub fn evict_file(path: &Path) -> Result<()> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: posix_fadvise only reads its arguments; the descriptor is open for the whole
    // call.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        bail!(
            "posix_fadvise(DONTNEED) on {}: {}",
            path.display(),
            std::io::Error::from_raw_os_error(rc)
        );
    }
    Ok(())
}
