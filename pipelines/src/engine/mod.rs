//! The log aggregation engine (`--engine`): the log → (distinct query, count) stage of
//! training as an Apache DataFusion plan, run embedded in this process or on a Ballista
//! cluster (`ballot cluster scheduler|executor`). Built with the `cluster` feature only;
//! without it [`Engine`] still parses, so the flag's error says how to get the engine.

use std::str::FromStr;

#[cfg(feature = "cluster")]
pub mod cluster;
#[cfg(feature = "cluster")]
pub mod count;
#[cfg(feature = "cluster")]
pub mod fit;
#[cfg(feature = "cluster")]
pub mod input;

/// Where the aggregation runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Engine {
    /// DataFusion inside this process (`--engine datafusion`).
    Embedded,
    /// A Ballista cluster through its scheduler (`--engine ballista://HOST:PORT`).
    Ballista {
        /// The scheduler, `HOST:PORT`.
        scheduler: String,
    },
}

impl FromStr for Engine {
    type Err = String;

    fn from_str(s: &str) -> Result<Engine, String> {
        if s == "datafusion" {
            return Ok(Engine::Embedded);
        }
        match s.strip_prefix("ballista://") {
            Some(hp) if split_host_port(hp).is_some() => Ok(Engine::Ballista {
                scheduler: hp.to_owned(),
            }),
            _ => Err(format!(
                "unknown engine {s:?}: use `datafusion` (embedded) or `ballista://HOST:PORT` (a Ballista scheduler)"
            )),
        }
    }
}

/// `HOST:PORT` split into its host and a non-zero port (None for anything else).
pub fn split_host_port(hp: &str) -> Option<(&str, u16)> {
    let (host, port) = hp.rsplit_once(':')?;
    let port = port.parse::<u16>().ok().filter(|&p| p > 0)?;
    (!host.is_empty() && !host.contains('/')).then_some((host, port))
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Engine::Embedded => f.write_str("datafusion"),
            Engine::Ballista { scheduler } => write!(f, "ballista://{scheduler}"),
        }
    }
}

/// The error of `--engine` and `ballot cluster` in a build without the engine.
#[cfg(not(feature = "cluster"))]
pub fn not_built() -> anyhow::Error {
    anyhow::anyhow!(
        "this ballot was built without the aggregation engine: rebuild with \
         `cargo build --release -p pipelines --features cluster` (DataFusion and Ballista; \
         about half an hour on two cores)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_parse_and_bad_ones_are_named() {
        assert_eq!("datafusion".parse::<Engine>(), Ok(Engine::Embedded));
        assert_eq!(
            "ballista://127.0.0.1:50050".parse::<Engine>(),
            Ok(Engine::Ballista {
                scheduler: "127.0.0.1:50050".into()
            })
        );
        for bad in [
            "ballista://",
            "ballista://host",
            "ballista://:1",
            "ballista://h:0",
            "spark://h:1",
            "",
        ] {
            let e = bad.parse::<Engine>().unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        assert_eq!(
            Engine::Ballista {
                scheduler: "h:1".into()
            }
            .to_string(),
            "ballista://h:1"
        );
    }
}
