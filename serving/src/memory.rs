//! Giving freed heap memory back to the system. glibc's allocator keeps the memory of a
//! burst (thousands of connections and requests at once, a table reload) in its arenas after
//! it is freed, so a server's resident memory stays at its highest burst: the soak measured
//! the balancer at 143 MB after one burst, against 52 MB before it, with no leak behind it.
//! [`spawn_trim`] calls glibc's `malloc_trim(0)` (which returns the free pages of every
//! arena) every interval, off the request path, so resident memory follows what is in use.
//! On other C libraries it does nothing.

use std::time::Duration;

/// How often the servers trim by default.
pub const DEFAULT_TRIM_INTERVAL: Duration = Duration::from_secs(10);

/// Spawns a task on the current tokio runtime that trims the heap every `interval`.
pub fn spawn_trim(interval: Duration) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            // A blocking thread: malloc_trim walks every arena, taking each one's lock.
            let _ = tokio::task::spawn_blocking(trim).await;
        }
    });
}

/// Returns the free pages of the heap to the system; `true` if some were.
pub fn trim() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks and releases the allocator's own free memory; it
        // takes the arena locks itself and is safe to call from any thread at any time.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_after_a_burst_returns_memory() {
        // Allocate 64 MiB in small blocks and one more block after them, which keeps the
        // top of the heap in use so that `free` cannot give the space back by itself; free
        // the 64 MiB (they stay in the arena), then trim.
        let blocks: Vec<Vec<u8>> = (0..16_384).map(|i| vec![i as u8; 4096]).collect();
        let pin = vec![1u8; 4096];
        drop(blocks);
        let released = trim();
        drop(pin);
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert!(
                released,
                "malloc_trim released nothing after freeing 64 MiB"
            );
        }
    }
}
