//! Route presets: the search APIs of the engines the balancer is put in front of, each
//! written once as the routes an operator would write by hand (`Preset::routes`, one per
//! endpoint). OpenSearch keeps Elasticsearch's search API: `opensearch` is the same preset
//! as `elasticsearch`.
//!
//! | preset | methods | paths | query text |
//! |---|---|---|---|
//! | `ballot` | GET | `/search` | parameter `q` (ballot's replica) |
//! | `elasticsearch`, `opensearch` | GET, POST | `…/_search`, `…/_count`, `…/_msearch` | URI search's `q`, else the query DSL's text clauses (NDJSON searches for `_msearch`): [`crate::es_dsl`] |
//! | `solr` | GET, POST | `/solr/<core>/select`, `…/select/`, `…/query`, `…/query/` | `q` or `q.alt` of the URL or a form body, or the JSON Request API: [`crate::solr_json`]; with `field`, that form field only |
//! | `elasticsearch-uri` | GET | `…/_search` | parameter `q` (URI search) |
//! | `elasticsearch-query-string` | POST | `…/_search` | JSON `/query/query_string/query` |
//! | `elasticsearch-match` | POST | `…/_search` | JSON `/query/match/<field>` |
//! | `tantivy` | GET | `/api` (tantivy-cli `serve`) | parameter `q` |
//!
//! `_search/template` is left to the fallback policy on purpose: a template's text is in
//! its stored script, which the balancer cannot see. `_count` reads the same DSL as
//! `_search`. `_msearch` is routed by the union of its searches' texts, as one request to
//! one replica: splitting it would need a fan-out and a merged answer, and the replica that
//! holds most of the searches' lists serves them all.

use std::fmt;
use std::str::FromStr;

use super::pointer::Pointer;
use super::{PathMatch, Route, RouteError, Source, GET, POST};

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
    /// Solr's `select` and `query` handlers: `q` in the URL or a form, or a JSON request.
    Solr => "solr";
    /// Elasticsearch's search, count and multi-search: URI search or the query DSL.
    Elasticsearch => "elasticsearch";
    /// OpenSearch: the same API as Elasticsearch.
    Opensearch => "opensearch";
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

/// The `suffix` endpoint (`/_search`) of any index (or of all of them: `/_search`).
fn endpoint(suffix: &str) -> PathMatch {
    PathMatch::Affix {
        prefix: String::new(),
        suffix: suffix.into(),
    }
}

/// One route of `methods` and `path` reading `source`.
fn route(methods: u8, path: PathMatch, source: Source) -> Route {
    Route {
        methods,
        path,
        source,
    }
}

impl Preset {
    /// The routes of this preset. `field` names the query field: the parameter or form
    /// field of the presets that read one (default `q`), the matched field of
    /// `elasticsearch-match` (required there); `elasticsearch`, `opensearch` and
    /// `elasticsearch-query-string` take none, nor does `ballot` (its replica reads `q`
    /// only, so another name would route by a parameter the replica never searches).
    pub(super) fn routes(self, field: Option<&str>) -> Result<Vec<Route>, RouteError> {
        let named = |default: &str| field.unwrap_or(default).to_owned();
        let no_field = || match field {
            Some(_) => Err(RouteError::PresetField(self)),
            None => Ok(()),
        };
        Ok(match self {
            Preset::Ballot => {
                no_field()?;
                let path = PathMatch::Exact("/search".into());
                vec![route(GET, path, Source::Param("q".into()))]
            }
            Preset::Solr => ["/select", "/select/", "/query", "/query/"]
                .into_iter()
                .map(|suffix| {
                    let path = PathMatch::Affix {
                        prefix: "/solr/".into(),
                        suffix: suffix.into(),
                    };
                    let source = match field {
                        Some(f) => Source::Form(f.to_owned()),
                        None => Source::Solr,
                    };
                    route(GET | POST, path, source)
                })
                .collect(),
            Preset::Elasticsearch | Preset::Opensearch => {
                no_field()?;
                vec![
                    route(GET | POST, endpoint("/_search"), Source::Elasticsearch),
                    route(GET | POST, endpoint("/_count"), Source::Elasticsearch),
                    route(
                        GET | POST,
                        endpoint("/_msearch"),
                        Source::ElasticsearchNdjson,
                    ),
                ]
            }
            Preset::ElasticsearchUri => {
                vec![route(GET, endpoint("/_search"), Source::Param(named("q")))]
            }
            Preset::ElasticsearchQueryString => {
                no_field()?;
                let p = Pointer::parse("/query/query_string/query").map_err(RouteError::Json)?;
                vec![route(POST, endpoint("/_search"), Source::Json(p))]
            }
            Preset::ElasticsearchMatch => {
                let f = field.ok_or(RouteError::MatchField)?;
                let p = Pointer::parse("/query/match").map_err(RouteError::Json)?;
                vec![route(POST, endpoint("/_search"), Source::Json(p.child(f)))]
            }
            Preset::Tantivy => {
                let path = PathMatch::Affix {
                    prefix: "/api".into(),
                    suffix: String::new(),
                };
                vec![route(GET, path, Source::Param(named("q")))]
            }
        })
    }
}
