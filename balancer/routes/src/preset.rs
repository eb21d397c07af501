//! Route presets: the search APIs of the engines the balancer is put in front of, each
//! written once as the route an operator would write by hand (`Preset::route`). OpenSearch
//! keeps Elasticsearch's search API, so it takes the Elasticsearch presets.
//!
//! | preset | methods | path | query text |
//! |---|---|---|---|
//! | `ballot` | GET | `/search` | parameter `q` (ballot's replica) |
//! | `solr` | GET, POST | `/solr/…/select` | parameter `q`, or form field `q` of a POST |
//! | `elasticsearch-uri` | GET | `…/_search` | parameter `q` (URI search) |
//! | `elasticsearch-query-string` | POST | `…/_search` | JSON `/query/query_string/query` |
//! | `elasticsearch-match` | POST | `…/_search` | JSON `/query/match/<field>` |
//! | `tantivy` | GET | `/api` (tantivy-cli `serve`) | parameter `q` |

use std::fmt;
use std::str::FromStr;

use super::pointer::Pointer;
use super::{PathMatch, RouteError, Source, GET, POST};

/// Defines [`Preset`], its names and [`Preset::ALL`] from one line per preset.
macro_rules! presets {
    ($($(#[$doc:meta])* $variant:ident => $name:literal;)+) => {
        /// A named route for one engine's search API.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Preset {
            $($(#[$doc])* $variant,)+
        }

        impl Preset {
            /// Every preset.
            pub const ALL: [Preset; [$($name),+].len()] = [$(Preset::$variant),+];

            /// Its name in the config.
            pub fn name(self) -> &'static str {
                match self {
                    $(Preset::$variant => $name,)+
                }
            }
        }
    };
}

presets! {
    /// ballot's replica: `GET /search?q=`.
    Ballot => "ballot";
    /// Solr's `select` handler: `GET /solr/<core>/select?q=`, or a POSTed form.
    Solr => "solr";
    /// Elasticsearch and OpenSearch URI search: `GET /<index>/_search?q=`.
    ElasticsearchUri => "elasticsearch-uri";
    /// Elasticsearch and OpenSearch: a POSTed `query_string` query.
    ElasticsearchQueryString => "elasticsearch-query-string";
    /// Elasticsearch and OpenSearch: a POSTed `match` query on one field.
    ElasticsearchMatch => "elasticsearch-match";
    /// tantivy-cli's `serve`: `GET /api/?q=`.
    Tantivy => "tantivy";
}

/// An unknown preset name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown preset {name:?}; valid presets: {valid}",
    valid = Preset::ALL.map(Preset::name).join(", ")
)]
pub struct UnknownPreset {
    /// The name given.
    pub name: String,
}

impl FromStr for Preset {
    type Err = UnknownPreset;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownPreset { name: s.to_owned() })
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The `/_search` endpoint of any index (or of all of them: `/_search`).
fn search_suffix() -> PathMatch {
    PathMatch::Affix {
        prefix: String::new(),
        suffix: "/_search".into(),
    }
}

impl Preset {
    /// The methods, path and query source of this preset. `field` names the query field:
    /// the parameter or form field of the presets that read one (default `q`), the
    /// matched field of `elasticsearch-match` (required there); `elasticsearch-query-string`
    /// takes none, nor does `ballot` (its replica reads `q` only, so another name would
    /// route by a parameter the replica never searches).
    pub(super) fn route(self, field: Option<&str>) -> Result<(u8, PathMatch, Source), RouteError> {
        let named = |default: &str| field.unwrap_or(default).to_owned();
        Ok(match self {
            Preset::Ballot => {
                if field.is_some() {
                    return Err(RouteError::PresetField(self));
                }
                (
                    GET,
                    PathMatch::Exact("/search".into()),
                    Source::Param("q".into()),
                )
            }
            Preset::Solr => (
                GET | POST,
                PathMatch::Affix {
                    prefix: "/solr/".into(),
                    suffix: "/select".into(),
                },
                Source::Form(named("q")),
            ),
            Preset::ElasticsearchUri => (GET, search_suffix(), Source::Param(named("q"))),
            Preset::ElasticsearchQueryString => {
                if field.is_some() {
                    return Err(RouteError::PresetField(self));
                }
                let p = Pointer::parse("/query/query_string/query").map_err(RouteError::Json)?;
                (POST, search_suffix(), Source::Json(p))
            }
            Preset::ElasticsearchMatch => {
                let f = field.ok_or(RouteError::MatchField)?;
                let p = Pointer::parse("/query/match").map_err(RouteError::Json)?;
                (POST, search_suffix(), Source::Json(p.child(f)))
            }
            Preset::Tantivy => (
                GET,
                PathMatch::Affix {
                    prefix: "/api".into(),
                    suffix: String::new(),
                },
                Source::Param(named("q")),
            ),
        })
    }
}
