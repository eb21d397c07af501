//! The open-file limit: raised from the soft to the hard limit at start, as HAProxy and
//! nginx do (the soft limit is often 1,024 while the hard one allows far more), and the
//! connection cap sized to it, as HAProxy derives `maxconn` from `ulimit -n`: each client
//! connection may need `fds_per_connection` descriptors (the balancer: the client's and an
//! upstream one), and a reserve stays free for listeners, files and health checks, so the
//! process does not run out of descriptors before it reaches its cap.

/// The open-file limits after [`raise_nofile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoFile {
    /// The soft limit in effect now.
    pub soft: u64,
    /// The hard limit.
    pub hard: u64,
    /// The soft limit before, when it was raised.
    pub raised_from: Option<u64>,
}

/// Highest soft limit tried when the hard limit is unlimited.
const UNLIMITED_TARGET: u64 = 1 << 20;

fn get() -> std::io::Result<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct that we own.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if rc == 0 {
        Ok(lim)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Raises the soft open-file limit to the hard limit (or to the kernel's `nr_open` when the
/// hard limit is unlimited). Returns the limits in effect afterwards.
pub fn raise_nofile() -> std::io::Result<NoFile> {
    let lim = get()?;
    let before = lim.rlim_cur;
    let target = if lim.rlim_max == libc::RLIM_INFINITY {
        std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(UNLIMITED_TARGET)
    } else {
        lim.rlim_max
    };
    if before != libc::RLIM_INFINITY && before < target {
        let new = libc::rlimit {
            rlim_cur: target,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit struct; it changes no memory of ours.
        let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    let now = get()?;
    Ok(NoFile {
        soft: now.rlim_cur,
        hard: now.rlim_max,
        raised_from: (now.rlim_cur != before).then_some(before),
    })
}

/// The connection cap that fits `soft` descriptors: `wanted`, lowered to
/// `(soft - reserve) / fds_per_connection` where the reserve is a quarter of the limit, at
/// most 256, and at least 1.
pub fn fit_connections(wanted: usize, soft: u64, fds_per_connection: u64) -> usize {
    let reserve = (soft / 4).min(256);
    let fit = soft.saturating_sub(reserve) / fds_per_connection.max(1);
    wanted
        .min(usize::try_from(fit).unwrap_or(usize::MAX))
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_fits_the_limit() {
        assert_eq!(fit_connections(10_000, 1_048_576, 2), 10_000);
        assert_eq!(fit_connections(10_000, 1024, 2), 384);
        assert_eq!(fit_connections(10_000, 1024, 1), 768);
        assert_eq!(fit_connections(10_000, 256, 2), 96);
        assert_eq!(fit_connections(10_000, 0, 2), 1);
        assert_eq!(fit_connections(50, 1024, 2), 50);
    }

    #[test]
    fn raising_is_idempotent() {
        let first = raise_nofile().expect("getrlimit");
        let again = raise_nofile().expect("getrlimit");
        assert_eq!(again.soft, first.soft);
        assert_eq!(again.raised_from, None);
        assert!(first.soft <= first.hard);
    }
}
