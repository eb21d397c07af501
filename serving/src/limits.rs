//! The per-listener limits of [`serve`](crate::serve): timeouts and the connection cap, with
//! the defaults both servers use (HAProxy's `timeout http-request 10s`, a keep-alive timeout
//! a little under the minute a browser or pooled client keeps a connection).

use std::time::Duration;

/// Default header read timeout.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default idle keep-alive timeout.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default cap on open client connections (lowered to what the open-file limit allows).
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Largest accepted cap.
pub const MAX_CONNECTIONS_LIMIT: usize = 1_000_000;

/// Timeouts and the connection cap of one listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// From a connection's start, or from the first byte of a later request, until the
    /// request head is complete.
    pub header_timeout: Duration,
    /// From the end of a response until the first byte of the next request.
    pub idle_timeout: Duration,
    /// Open client connections at most; past it new ones wait in the listen backlog.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl Limits {
    /// Checks the values; the message names the offending one.
    pub fn validate(&self) -> Result<(), String> {
        let day = Duration::from_secs(86_400);
        for (name, d) in [
            ("header timeout", self.header_timeout),
            ("idle timeout", self.idle_timeout),
        ] {
            if d.is_zero() || d > day {
                return Err(format!(
                    "{name} must be between 1 ms and 1 day, got {} ms",
                    d.as_millis()
                ));
            }
        }
        if !(1..=MAX_CONNECTIONS_LIMIT).contains(&self.max_connections) {
            return Err(format!(
                "the connection cap must be between 1 and {MAX_CONNECTIONS_LIMIT}, got {}",
                self.max_connections
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_zero_is_not() {
        assert_eq!(Limits::default().validate(), Ok(()));
        let bad = Limits {
            header_timeout: Duration::ZERO,
            ..Limits::default()
        };
        assert!(bad.validate().unwrap_err().contains("header timeout"));
        let bad = Limits {
            max_connections: 0,
            ..Limits::default()
        };
        assert!(bad.validate().unwrap_err().contains("connection cap"));
    }
}
