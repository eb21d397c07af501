//! `balancer-routes`: the engine adapters of ballot's balancer. Routes: which client
//! requests are searches, and where each search engine's API puts the query text the
//! balancer routes by (a URL parameter, a form field, a field of a JSON
//! body). The `[[routes]]` of the config are checked and compiled here once, at load
//! ([`Routes::compile`]); a request is then matched by method and path ([`Routes::find`],
//! no allocation) and its query read by its route ([`extract`]). The HAProxy and Envoy
//! way: an ordered list of matchers on the request line, the first match wins.
//!
//! A route matches a method (`GET`, which covers `HEAD`, or `POST`) and a path: `path`
//! exactly, or `path_prefix` and `path_suffix` (a prefix matches whole segments: `/api`
//! matches `/api` and `/api/x`, not `/apix`; the two must not overlap). Routes are for
//! read-only search endpoints: the balancer retries a routed request on another replica,
//! whatever its method, so a route's method list is the operator's promise that those
//! requests only read. `/healthz` stays the balancer's own: the client listener answers it
//! before looking at routes. With no `[[routes]]` the one route is the `ballot` preset,
//! `GET /search?q=`.
//!
//! What becomes of a request that matches no route or whose query cannot be read is the
//! config's [`Fallback`]: refused with a 4xx JSON error, or routed with no query by a
//! policy that needs none (`round-robin`, `random`, `least-loaded`, `p2c`).

pub mod encoding;
pub mod es_dsl;
pub mod extract;
pub mod merge;
pub mod pointer;
pub mod preset;
pub mod sink;
pub mod solr_json;

use std::fmt;
use std::str::FromStr;

use balancer::policy::PolicyKind;
use http::Method;
use serde::Deserialize;

pub use extract::{Field, Request, Unreadable};
pub use pointer::{Pointer, PointerError};
pub use preset::{Preset, UnknownPreset};

/// The client listener's own liveness path, which no route can take.
pub const HEALTHZ: &str = "/healthz";
/// Most routes in a config (each request is matched against them in turn).
pub const MAX_ROUTES: usize = 64;

/// Method bit of `GET` (and `HEAD`, answered as a `GET` without its body).
pub const GET: u8 = 1;
/// Method bit of `POST`.
pub const POST: u8 = 2;

/// The bit of `method` (0 for a method no route can take).
#[inline]
pub fn method_bit(method: &Method) -> u8 {
    if method == Method::GET || method == Method::HEAD {
        GET
    } else if method == Method::POST {
        POST
    } else {
        0
    }
}

/// One `[[routes]]` table as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// A [`Preset`] name, instead of `method`, the path keys and `query`.
    #[serde(default)]
    pub preset: Option<String>,
    /// With a preset: the query field's name (see [`Preset`]).
    #[serde(default)]
    pub field: Option<String>,
    /// `"GET"`, `"POST"` or a list of them.
    #[serde(default)]
    pub method: Option<Methods>,
    /// The whole path.
    #[serde(default)]
    pub path: Option<String>,
    /// The path's first segments.
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// The path's end (`/_search`, `/select`).
    #[serde(default)]
    pub path_suffix: Option<String>,
    /// Where the query text is.
    #[serde(default)]
    pub query: Option<QueryConfig>,
}

/// `method = "GET"` or `method = ["GET", "POST"]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(
    untagged,
    expecting = "a method (\"GET\" or \"POST\") or a list of them"
)]
pub enum Methods {
    /// One method.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// `query = { param = "q" }`, `{ form = "q" }` or `{ json = "/query/query_string/query" }`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct QueryConfig {
    /// A parameter of the URL's query string.
    #[serde(default)]
    pub param: Option<String>,
    /// A field of an `application/x-www-form-urlencoded` body (or of the query string).
    #[serde(default)]
    pub form: Option<String>,
    /// An RFC 6901 pointer into a JSON body.
    #[serde(default)]
    pub json: Option<String>,
}

/// Why a route was refused at load.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// An unknown preset.
    #[error(transparent)]
    Preset(#[from] UnknownPreset),
    /// A preset with keys it sets itself.
    #[error("preset `{0}` sets the method, path and query itself: remove `{1}`, or write the route without a preset")]
    PresetAndFields(Preset, &'static str),
    /// `field` on a preset that has no field to name.
    #[error("preset `{0}` takes no `field`")]
    PresetField(Preset),
    /// `elasticsearch-match` without its field.
    #[error("preset `elasticsearch-match` needs `field`, the field of the match query (`{{\"query\": {{\"match\": {{FIELD: ...}}}}}}`)")]
    MatchField,
    /// `field` without a preset.
    #[error("`field` goes with a preset; an explicit route names its field in `query`")]
    FieldWithoutPreset,
    /// No `method`.
    #[error("needs `method` (\"GET\", \"POST\" or a list), or a `preset`")]
    NoMethod,
    /// A method other than GET and POST.
    #[error("method {0:?}: routes are for read-only search endpoints, \"GET\" or \"POST\" (HTTP methods are upper case)")]
    Method(String),
    /// `method = []`.
    #[error("`method` lists no method")]
    NoMethods,
    /// No path key.
    #[error("needs a path: `path`, or `path_prefix` and/or `path_suffix`")]
    NoPath,
    /// `path` with a prefix or suffix.
    #[error("`path` is the whole path; it goes without `path_prefix` and `path_suffix`")]
    PathAndAffix,
    /// An empty path key.
    #[error("`{0}` is empty")]
    EmptyPath(&'static str),
    /// A path or prefix not starting with `/`.
    #[error("`{0}` {1:?} must start with `/`")]
    PathSlash(&'static str, String),
    /// A query string, fragment, space or control character in a path key.
    #[error(
        "`{0}` {1:?}: a route matches the path alone (no `?`, `#`, spaces or control characters)"
    )]
    PathChar(&'static str, String),
    /// `path = "/healthz"`.
    #[error("`path` {HEALTHZ:?} is the balancer's own liveness check")]
    Healthz,
    /// No `query`.
    #[error("needs `query`: {{ param = \"q\" }}, {{ form = \"q\" }} or {{ json = \"/query/query_string/query\" }}, or a `preset`")]
    NoQuery,
    /// Zero or several of `param`, `form`, `json`.
    #[error("`query` takes exactly one of `param`, `form` and `json`")]
    QuerySources,
    /// A parameter or form field name that no request could carry unescaped.
    #[error("field name {0:?} must be non-empty, without `&`, `=`, `+`, `%`, `#`, spaces or control characters")]
    FieldName(String),
    /// A bad JSON pointer.
    #[error("query.json: {0}")]
    Json(PointerError),
    /// More than [`MAX_ROUTES`].
    #[error("at most {MAX_ROUTES} routes, got {0}")]
    TooMany(usize),
}

/// How a route matches a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathMatch {
    /// The whole path.
    Exact(String),
    /// A prefix of whole segments (empty: any) and a suffix (empty: any), not overlapping.
    Affix {
        /// The first segments.
        prefix: String,
        /// The end.
        suffix: String,
    },
}

impl PathMatch {
    /// Whether `path` matches.
    #[inline]
    pub fn matches(&self, path: &str) -> bool {
        match self {
            PathMatch::Exact(p) => path == p,
            PathMatch::Affix { prefix, suffix } => {
                path.len() >= prefix.len() + suffix.len()
                    && path.ends_with(suffix.as_str())
                    && path.starts_with(prefix.as_str())
                    && (prefix.is_empty()
                        || prefix.ends_with('/')
                        || matches!(path.as_bytes().get(prefix.len()), None | Some(b'/')))
            }
        }
    }
}

/// Where a route reads the query text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The URL query string's parameter of this name.
    Param(String),
    /// The form field of this name: in an `application/x-www-form-urlencoded` body (then
    /// in the query string, as Solr merges them), or in the query string of a request
    /// without a body.
    Form(String),
    /// The string at this pointer in a JSON body (or the string `query` member of the
    /// object there, as Elasticsearch's `match` takes both).
    Json(Pointer),
    /// An Elasticsearch or OpenSearch search or count: URI search's `q`, else the query
    /// DSL's text clauses ([`es_dsl`]).
    Elasticsearch,
    /// An Elasticsearch or OpenSearch `_msearch`: the union of its searches' text clauses.
    ElasticsearchNdjson,
    /// A Solr search: `q` (or `q.alt`) of the URL or a form body, or the JSON Request API
    /// ([`solr_json`]).
    Solr,
}

/// A compiled route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// [`GET`] and [`POST`] bits.
    pub methods: u8,
    /// The path it matches.
    pub path: PathMatch,
    /// Where its query text is.
    pub source: Source,
}

impl Route {
    /// Whether a request with method bit `bit` to `path` takes this route.
    #[inline]
    pub fn matches(&self, bit: u8, path: &str) -> bool {
        self.methods & bit != 0 && self.path.matches(path)
    }
}

/// The routes a request matches, in order: a bit per route index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouteSet(u64);

impl RouteSet {
    /// Whether no route matched.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The route indices, in order.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        let mut rest = self.0;
        std::iter::from_fn(move || {
            (rest != 0).then(|| {
                let i = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                i
            })
        })
    }
}

/// The compiled `[[routes]]`, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routes {
    routes: Vec<Route>,
}

impl Default for Routes {
    /// The `ballot` preset alone: `GET /search?q=`.
    fn default() -> Self {
        Routes {
            routes: Preset::Ballot
                .routes(None)
                .unwrap_or_else(|_| unreachable!("the ballot preset takes no required field")),
        }
    }
}

impl Routes {
    /// Checks and compiles `configs` (none: the `ballot` preset). An error gives the
    /// index of the route it is about.
    pub fn compile(configs: &[RouteConfig]) -> Result<Routes, (usize, RouteError)> {
        if configs.is_empty() {
            return Ok(Routes::default());
        }
        if configs.len() > MAX_ROUTES {
            return Err((MAX_ROUTES, RouteError::TooMany(configs.len())));
        }
        let mut routes = Vec::new();
        for (i, c) in configs.iter().enumerate() {
            routes.extend(compile(c).map_err(|e| (i, e))?);
        }
        if routes.len() > MAX_ROUTES {
            return Err((configs.len() - 1, RouteError::TooMany(routes.len())));
        }
        Ok(Routes { routes })
    }

    /// The index of the first route a `method` request to `path` takes.
    #[inline]
    pub fn find(&self, method: &Method, path: &str) -> Option<usize> {
        self.matching(method, path).iter().next()
    }

    /// Every route a `method` request to `path` matches: tried in order until one reads
    /// a query (no allocation: a bit per route, at most [`MAX_ROUTES`]).
    #[inline]
    pub fn matching(&self, method: &Method, path: &str) -> RouteSet {
        let bit = method_bit(method);
        if bit == 0 {
            return RouteSet(0);
        }
        let bits = self
            .routes
            .iter()
            .enumerate()
            .filter(|(_, r)| r.matches(bit, path))
            .fold(0u64, |set, (i, _)| set | 1 << i);
        RouteSet(bits)
    }

    /// Route `i` (an index [`Routes::find`] returned).
    pub fn get(&self, i: usize) -> &Route {
        &self.routes[i]
    }

    /// The routes in order.
    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter()
    }

    /// The `Allow` value for `path` when some route matches it with other methods
    /// (`None`: no route has the path).
    pub fn allow(&self, path: &str) -> Option<&'static str> {
        let bits = self
            .routes
            .iter()
            .filter(|r| r.path.matches(path))
            .fold(0, |b, r| b | r.methods);
        match bits {
            0 => None,
            GET => Some("GET,HEAD"),
            POST => Some("POST"),
            _ => Some("GET,HEAD,POST"),
        }
    }
}

fn methods(m: &Methods) -> Result<u8, RouteError> {
    let one = |name: &str| match name {
        "GET" => Ok(GET),
        "POST" => Ok(POST),
        other => Err(RouteError::Method(other.to_owned())),
    };
    match m {
        Methods::One(name) => one(name),
        Methods::Many(names) if names.is_empty() => Err(RouteError::NoMethods),
        Methods::Many(names) => names.iter().try_fold(0, |bits, n| Ok(bits | one(n)?)),
    }
}

/// Checks a path key: `/`-rooted (but a suffix), no `?`, `#`, space or control character.
fn path_key(key: &'static str, value: &str) -> Result<String, RouteError> {
    if value.is_empty() {
        return Err(RouteError::EmptyPath(key));
    }
    if key != "path_suffix" && !value.starts_with('/') {
        return Err(RouteError::PathSlash(key, value.to_owned()));
    }
    if value
        .chars()
        .any(|c| matches!(c, '?' | '#') || c.is_whitespace() || c.is_control())
    {
        return Err(RouteError::PathChar(key, value.to_owned()));
    }
    Ok(value.to_owned())
}

/// Checks a parameter or form field name: it is compared with the keys as written.
fn field_name(name: &str) -> Result<String, RouteError> {
    let bad =
        |c: char| matches!(c, '&' | '=' | '+' | '%' | '#') || c.is_whitespace() || c.is_control();
    if name.is_empty() || name.chars().any(bad) {
        return Err(RouteError::FieldName(name.to_owned()));
    }
    Ok(name.to_owned())
}

/// The routes of one `[[routes]]` table: a preset's (one per endpoint it covers), or the
/// one explicit route.
fn compile(c: &RouteConfig) -> Result<Vec<Route>, RouteError> {
    if let Some(name) = &c.preset {
        let preset: Preset = name.parse()?;
        let explicit = [
            ("method", c.method.is_some()),
            ("path", c.path.is_some()),
            ("path_prefix", c.path_prefix.is_some()),
            ("path_suffix", c.path_suffix.is_some()),
            ("query", c.query.is_some()),
        ];
        if let Some((key, _)) = explicit.iter().find(|(_, set)| *set) {
            return Err(RouteError::PresetAndFields(preset, key));
        }
        let routes = preset.routes(c.field.as_deref())?;
        for r in &routes {
            if let Source::Param(n) | Source::Form(n) = &r.source {
                field_name(n)?;
            }
        }
        return Ok(routes);
    }
    if c.field.is_some() {
        return Err(RouteError::FieldWithoutPreset);
    }
    let methods = methods(c.method.as_ref().ok_or(RouteError::NoMethod)?)?;
    let path = match (&c.path, &c.path_prefix, &c.path_suffix) {
        (None, None, None) => return Err(RouteError::NoPath),
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => return Err(RouteError::PathAndAffix),
        (Some(p), None, None) => {
            let p = path_key("path", p)?;
            if p == HEALTHZ {
                return Err(RouteError::Healthz);
            }
            PathMatch::Exact(p)
        }
        (None, prefix, suffix) => PathMatch::Affix {
            prefix: prefix
                .as_deref()
                .map(|p| path_key("path_prefix", p))
                .transpose()?
                .unwrap_or_default(),
            suffix: suffix
                .as_deref()
                .map(|s| path_key("path_suffix", s))
                .transpose()?
                .unwrap_or_default(),
        },
    };
    let q = c.query.as_ref().ok_or(RouteError::NoQuery)?;
    let source = match (&q.param, &q.form, &q.json) {
        (Some(p), None, None) => Source::Param(field_name(p)?),
        (None, Some(f), None) => Source::Form(field_name(f)?),
        (None, None, Some(j)) => Source::Json(Pointer::parse(j).map_err(RouteError::Json)?),
        _ => return Err(RouteError::QuerySources),
    };
    Ok(vec![Route {
        methods,
        path,
        source,
    }])
}

/// What becomes of a request that matches no route or whose query cannot be read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fallback {
    /// A 4xx JSON error: 404 (or 405) for no route, 400 for an unreadable query.
    #[default]
    Refuse,
    /// Routed with no query by this policy, one of [`QUERYLESS`].
    Policy(PolicyKind),
}

/// The policies that route without reading the query: the ones a fallback may use.
pub const QUERYLESS: [PolicyKind; 4] = [
    PolicyKind::RoundRobin,
    PolicyKind::Random,
    PolicyKind::LeastLoaded,
    PolicyKind::P2c,
];

/// Why a `fallback` value was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "fallback {0:?}: expected \"refuse\" or a policy that needs no query ({valid})",
    valid = QUERYLESS.map(PolicyKind::name).join(", ")
)]
pub struct BadFallback(pub String);

impl FromStr for Fallback {
    type Err = BadFallback;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "refuse" {
            return Ok(Fallback::Refuse);
        }
        match s.parse::<PolicyKind>() {
            Ok(kind) if QUERYLESS.contains(&kind) => Ok(Fallback::Policy(kind)),
            _ => Err(BadFallback(s.to_owned())),
        }
    }
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fallback::Refuse => f.write_str("refuse"),
            Fallback::Policy(kind) => f.write_str(kind.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(text: &str) -> Result<Route, RouteError> {
        #[derive(Deserialize)]
        struct One {
            routes: Vec<RouteConfig>,
        }
        let one: One = toml::from_str(text).expect("TOML");
        Routes::compile(&one.routes)
            .map(|r| r.get(0).clone())
            .map_err(|(_, e)| e)
    }

    fn preset(name: &str) -> Route {
        route(&format!("[[routes]]\npreset = \"{name}\"\n")).expect(name)
    }

    #[test]
    fn no_routes_is_the_ballot_preset() {
        let r = Routes::compile(&[]).unwrap();
        assert_eq!(r, Routes::default());
        assert_eq!(*r.get(0), preset("ballot"));
        assert_eq!(r.find(&Method::GET, "/search"), Some(0));
        assert_eq!(r.find(&Method::HEAD, "/search"), Some(0));
        for (m, p) in [
            (Method::POST, "/search"),
            (Method::GET, "/search/"),
            (Method::GET, "/searchx"),
            (Method::GET, "/"),
            (Method::PUT, "/search"),
        ] {
            assert_eq!(r.find(&m, p), None, "{m} {p}");
        }
        assert_eq!(r.allow("/search"), Some("GET,HEAD"));
        assert_eq!(r.allow("/nope"), None);
    }

    #[test]
    fn presets_match_their_engines_paths() {
        let cases: [(&str, Method, &str, bool); 20] = [
            ("solr", Method::GET, "/solr/products/select", true),
            ("solr", Method::POST, "/solr/products/select", true),
            ("solr", Method::GET, "/solr/select", false),
            ("solr", Method::GET, "/solr/products/update", false),
            ("solr", Method::GET, "/other/products/select", false),
            ("elasticsearch-uri", Method::GET, "/books/_search", true),
            ("elasticsearch-uri", Method::GET, "/a,b/_search", true),
            ("elasticsearch-uri", Method::GET, "/_search", true),
            ("elasticsearch-uri", Method::POST, "/books/_search", false),
            ("elasticsearch-uri", Method::GET, "/books/_doc/1", false),
            (
                "elasticsearch-query-string",
                Method::POST,
                "/books/_search",
                true,
            ),
            (
                "elasticsearch-query-string",
                Method::GET,
                "/books/_search",
                false,
            ),
            ("tantivy", Method::GET, "/api/", true),
            ("tantivy", Method::GET, "/api", true),
            ("tantivy", Method::GET, "/apix", false),
            ("tantivy", Method::POST, "/api/", false),
            ("ballot", Method::GET, "/search", true),
            ("ballot", Method::GET, "/api/", false),
            ("solr", Method::DELETE, "/solr/c/select", false),
            ("elasticsearch-uri", Method::HEAD, "/i/_search", true),
        ];
        for (name, m, path, want) in cases {
            let r = preset(name);
            assert_eq!(r.matches(method_bit(&m), path), want, "{name} {m} {path}");
        }
        let m = route("[[routes]]\npreset = \"elasticsearch-match\"\nfield = \"title\"\n").unwrap();
        assert_eq!(m.methods, POST);
        assert_eq!(
            m.source,
            Source::Json(Pointer::parse("/query/match/title").unwrap())
        );
        let s = route("[[routes]]\npreset = \"solr\"\nfield = \"qq\"\n").unwrap();
        assert_eq!(s.source, Source::Form("qq".into()));
    }

    #[test]
    fn explicit_routes_match_in_order_and_the_first_wins() {
        #[derive(Deserialize)]
        struct All {
            routes: Vec<RouteConfig>,
        }
        let all: All = toml::from_str(
            r#"
[[routes]]
method = "POST"
path = "/special/_search"
query = { form = "text" }
[[routes]]
method = ["GET", "POST"]
path_suffix = "/_search"
query = { json = "/query/query_string/query" }
[[routes]]
method = "GET"
path_prefix = "/v1/"
query = { param = "query" }
"#,
        )
        .unwrap();
        let r = Routes::compile(&all.routes).unwrap();
        assert_eq!(r.find(&Method::POST, "/special/_search"), Some(0));
        assert_eq!(r.find(&Method::GET, "/special/_search"), Some(1));
        assert_eq!(r.find(&Method::POST, "/x/_search"), Some(1));
        assert_eq!(r.find(&Method::GET, "/v1/x"), Some(2));
        assert_eq!(r.find(&Method::GET, "/v1"), None, "the prefix ends in `/`");
        assert_eq!(r.find(&Method::POST, "/v1/x"), None);
        assert_eq!(r.allow("/v1/x"), Some("GET,HEAD"));
        assert_eq!(r.allow("/special/_search"), Some("GET,HEAD,POST"));
        assert_eq!(r.find(&Method::GET, "/healthz"), None);
    }

    #[test]
    fn prefixes_match_whole_segments_and_do_not_overlap_suffixes() {
        let affix = |prefix: &str, suffix: &str| PathMatch::Affix {
            prefix: prefix.into(),
            suffix: suffix.into(),
        };
        let p = affix("/api", "");
        assert!(p.matches("/api") && p.matches("/api/") && p.matches("/api/x"));
        assert!(!p.matches("/apix") && !p.matches("/ap") && !p.matches("/"));
        let p = affix("/a/", "/s");
        assert!(p.matches("/a/x/s") && p.matches("/a//s"));
        assert!(!p.matches("/a/s"), "prefix and suffix overlap");
        let any = affix("", "");
        assert!(any.matches("/") && any.matches("/anything"));
    }

    #[test]
    fn bad_routes_are_refused_with_the_reason() {
        let cases: [(&str, &str); 20] = [
            ("preset = \"nope\"", "unknown preset \"nope\""),
            ("preset = \"solr\"\nmethod = \"GET\"", "remove `method`"),
            ("preset = \"solr\"\npath = \"/x\"", "remove `path`"),
            (
                "preset = \"solr\"\nquery = { param = \"q\" }",
                "remove `query`",
            ),
            ("preset = \"elasticsearch-match\"", "needs `field`"),
            (
                "preset = \"elasticsearch-query-string\"\nfield = \"x\"",
                "takes no `field`",
            ),
            ("preset = \"solr\"\nfield = \"a b\"", "field name"),
            (
                "field = \"q\"\nmethod = \"GET\"\npath = \"/x\"\nquery = { param = \"q\" }",
                "goes with a preset",
            ),
            ("path = \"/x\"\nquery = { param = \"q\" }", "needs `method`"),
            (
                "method = \"PUT\"\npath = \"/x\"\nquery = { param = \"q\" }",
                "read-only",
            ),
            (
                "method = \"get\"\npath = \"/x\"\nquery = { param = \"q\" }",
                "upper case",
            ),
            (
                "method = []\npath = \"/x\"\nquery = { param = \"q\" }",
                "lists no method",
            ),
            (
                "method = \"GET\"\nquery = { param = \"q\" }",
                "needs a path",
            ),
            (
                "method = \"GET\"\npath = \"\"\nquery = { param = \"q\" }",
                "`path` is empty",
            ),
            (
                "method = \"GET\"\npath_suffix = \"\"\nquery = { param = \"q\" }",
                "`path_suffix` is empty",
            ),
            (
                "method = \"GET\"\npath = \"x\"\nquery = { param = \"q\" }",
                "must start with `/`",
            ),
            (
                "method = \"GET\"\npath = \"/x?q=1\"\nquery = { param = \"q\" }",
                "path alone",
            ),
            (
                "method = \"GET\"\npath = \"/x\"\npath_suffix = \"/s\"\nquery = { param = \"q\" }",
                "whole path",
            ),
            (
                "method = \"GET\"\npath = \"/healthz\"\nquery = { param = \"q\" }",
                "liveness",
            ),
            ("method = \"GET\"\npath = \"/x\"", "needs `query`"),
        ];
        for (body, want) in cases {
            let err = route(&format!("[[routes]]\n{body}\n"))
                .expect_err(want)
                .to_string();
            assert!(err.contains(want), "{body}: {err}");
        }
        let more: [(&str, &str); 5] = [
            ("query = { param = \"q\", form = \"q\" }", "exactly one"),
            ("query = {}", "exactly one"),
            ("query = { param = \"\" }", "field name"),
            ("query = { json = \"query/x\" }", "starts with `/`"),
            ("query = { json = \"/a~2\" }", "escapes `~`"),
        ];
        for (q, want) in more {
            let text = format!("[[routes]]\nmethod = \"POST\"\npath = \"/x\"\n{q}\n");
            let err = route(&text).expect_err(want).to_string();
            assert!(err.contains(want), "{q}: {err}");
        }
        let many: Vec<RouteConfig> = (0..=MAX_ROUTES)
            .map(|_| RouteConfig {
                preset: Some("ballot".into()),
                ..RouteConfig::default()
            })
            .collect();
        assert!(matches!(
            Routes::compile(&many),
            Err((_, RouteError::TooMany(65)))
        ));
    }

    #[test]
    fn fallbacks_are_refuse_or_a_policy_that_reads_no_query() {
        assert_eq!("refuse".parse(), Ok(Fallback::Refuse));
        for kind in QUERYLESS {
            assert_eq!(kind.name().parse(), Ok(Fallback::Policy(kind)));
            assert_eq!(Fallback::Policy(kind).to_string(), kind.name());
        }
        for bad in ["table", "ch-bl", "term-vote", "query-hash", "nope", ""] {
            let err = bad.parse::<Fallback>().unwrap_err().to_string();
            assert!(err.contains("round-robin"), "{bad}: {err}");
        }
    }
}
