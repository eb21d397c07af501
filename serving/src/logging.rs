//! Logging of the servers: `tracing` events written to stderr (stdout carries only the
//! `listening on ADDR` lines scripts read), filtered by `RUST_LOG` (env-filter syntax,
//! default `info`), as plain text or as one JSON object per line.

use std::str::FromStr;

/// The environment variable naming the default log format.
pub const FORMAT_ENV: &str = "BALLOT_LOG_FORMAT";

/// How log lines look.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// `2026-01-01T00:00:00.000000Z  INFO target: message key=value`.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `fields`).
    Json,
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("log format `{other}`: expected text or json")),
        }
    }
}

impl LogFormat {
    /// `flag` if given, else `$BALLOT_LOG_FORMAT`, else text.
    pub fn choose(flag: Option<&str>) -> Result<LogFormat, String> {
        match flag {
            Some(f) => f.parse(),
            None => match std::env::var(FORMAT_ENV) {
                Ok(v) if !v.is_empty() => v.parse().map_err(|e| format!("{FORMAT_ENV}: {e}")),
                _ => Ok(LogFormat::Text),
            },
        }
    }
}

/// Installs the global subscriber (once per process; later calls do nothing). A `RUST_LOG`
/// that does not parse falls back to `info` with a warning.
pub fn init(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let (filter, bad) = match std::env::var("RUST_LOG") {
        Ok(v) if !v.is_empty() => match EnvFilter::try_new(&v) {
            Ok(f) => (f, None),
            Err(e) => (EnvFilter::new("info"), Some(format!("RUST_LOG={v:?}: {e}"))),
        },
        _ => (EnvFilter::new("info"), None),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    if installed.is_ok() {
        if let Some(bad) = bad {
            tracing::warn!("{bad}; logging at info");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse() {
        assert_eq!("json".parse(), Ok(LogFormat::Json));
        assert_eq!(LogFormat::choose(Some("text")), Ok(LogFormat::Text));
        assert!(LogFormat::choose(Some("xml")).unwrap_err().contains("xml"));
    }
}
