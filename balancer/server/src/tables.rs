//! Table files an admin `{"path": ...}` reload may read: only regular files inside the
//! configured `tables_dir`, never through a symlink that leads out of it, and never a FIFO
//! or device (opened non-blocking and checked with `fstat` on the open descriptor, so a
//! FIFO cannot block the loader and a file swapped for a symlink after the check is not
//! followed).
//!
//! Every refusal carries its reason for the log only: the admin API answers every file
//! that is not a valid table in the directory (missing, outside, not regular, unreadable,
//! too large, invalid) with the one message [`NOT_A_TABLE`], so the API cannot be used to
//! learn which files exist. A path outside the directory is refused from its text alone,
//! before the file system is touched.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// The one answer to a path that is not a valid voting table in `tables_dir`.
pub const NOT_A_TABLE: &str =
    "not a valid voting table in tables_dir (the balancer's log says why)";

/// `path` with `.` and `..` resolved lexically, or `None` if it climbs above the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    Some(out)
}

/// Reads the table file `requested` (relative to `dir`, or absolute inside it) of at most
/// `limit` bytes. `dir` must be canonical. The error is the reason, for the log.
pub fn read_in_dir(dir: &Path, requested: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let joined = dir.join(requested);
    let lexical = normalize(&joined)
        .filter(|p| p.starts_with(dir) && p != dir)
        .ok_or("the path is outside tables_dir")?;
    let real = std::fs::canonicalize(&lexical).map_err(|e| format!("cannot resolve: {e}"))?;
    if !real.starts_with(dir) || real == dir {
        return Err("the path resolves outside tables_dir".into());
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&real)
        .map_err(|e| format!("cannot open: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    if !meta.file_type().is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > limit {
        return Err(format!(
            "{} bytes, more than admin_max_upload_bytes ({limit})",
            meta.len()
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!("more than admin_max_upload_bytes ({limit})"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_inside_the_directory_are_read() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let dir = root.join("tables");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("t.parquet"), b"table").unwrap();
        std::fs::write(root.join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(root.join("secret"), dir.join("link")).unwrap();
        std::os::unix::fs::symlink(dir.join("t.parquet"), dir.join("inner-link")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);

        let read = |p: &str| read_in_dir(&dir, Path::new(p), 1 << 20);
        assert_eq!(read("t.parquet").unwrap(), b"table");
        assert_eq!(read("inner-link").unwrap(), b"table");
        assert_eq!(
            read(dir.join("t.parquet").to_str().unwrap()).unwrap(),
            b"table"
        );
        for bad in [
            "missing.parquet",
            "../secret",
            "link",
            "fifo",
            ".",
            "",
            "/etc/passwd",
            "../../../../../../etc/passwd",
        ] {
            assert!(read(bad).is_err(), "{bad} was read");
        }
        assert!(read_in_dir(&dir, Path::new("t.parquet"), 3)
            .unwrap_err()
            .contains("admin_max_upload_bytes"));
    }
}
