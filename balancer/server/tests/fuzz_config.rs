//! Property-based fuzzing of the balancer's TOML configuration parser (issue 12): on any
//! text, and on valid configurations mutated line by line and byte by byte, `Config::parse`
//! never panics and returns either a configuration that keeps every validated invariant or
//! an error naming the file. Run long with `BALLOT_FUZZ_CASES=1000000`.

use std::path::Path;

use balancer::load::MAX_REPLICAS;
use balancer::ring::{MAX_VNODES, MIN_VNODES};
use balancer_server::config::{Config, ConfigError, Validated};
use balancer_server::replicas::{check_address, check_name};
use balancer_server::routes::{Fallback, GET, MAX_ROUTES, POST};
use proptest::prelude::*;
use proptest::sample::Index;

const PATH: &str = "/etc/b/balancer.toml";

/// A configuration that sets every key.
const FULL: &str = r#"listen = "127.0.0.1:8080"
admin_listen = "127.0.0.1:8081"
admin_token = "secret"
eps = 0.05
load = "window"
load_window = 10000
stall_eps = 1.0
stall_slack = 8
request_timeout_ms = 1000
deadline_ms = 3000
retries = 2
ramp_queries = 2000
max_query_bytes = 4096
max_body_bytes = 65536
fallback = "round-robin"

[health]
interval_ms = 1000
timeout_ms = 500
fall = 3
rise = 2

[policy]
name = "table"
table = "table.parquet"
sizes = "sizes.parquet"
vnodes = 160

[[replicas]]
name = "r0"
address = "127.0.0.1:9000"

[[replicas]]
name = "r1"
address = "localhost:9001"

[[routes]]
preset = "solr"

[[routes]]
preset = "elasticsearch-match"
field = "title"

[[routes]]
method = ["GET", "POST"]
path_prefix = "/v1"
path_suffix = "/_search"
query = { json = "/query/query_string/query" }
"#;

/// `BALLOT_FUZZ_CASES` when set, else `ci_default`.
fn cases(ci_default: u32) -> u32 {
    std::env::var("BALLOT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(ci_default)
}

fn parse(text: &str) -> Result<Validated, ConfigError> {
    Config::parse(text, Path::new(PATH), |v| {
        (v == "TOK").then(|| "from-env".to_owned())
    })
}

/// Parses `text`: a valid result keeps the invariants, an error names the file.
fn check(text: &str) -> Result<(), TestCaseError> {
    match parse(text) {
        Ok(v) => {
            let c = &v.config;
            prop_assert_eq!(v.path.as_path(), Path::new(PATH));
            prop_assert!((1..=MAX_REPLICAS).contains(&c.replicas.len()));
            for (i, r) in c.replicas.iter().enumerate() {
                prop_assert!(check_name(&r.name).is_ok() && check_address(&r.address).is_ok());
                prop_assert!(c.replicas[..i].iter().all(|o| o.name != r.name));
            }
            prop_assert!(c.eps >= 0.0 && c.stall_eps >= 0.0);
            prop_assert!((1..=data::query::MAX_QUERY_BYTES).contains(&c.max_query_bytes));
            prop_assert!(c.load_window >= 1 && c.retries <= 16);
            prop_assert!((MIN_VNODES..=MAX_VNODES).contains(&c.policy.vnodes));
            prop_assert!(c.ramp_queries <= 1 << 40);
            prop_assert!((0.0..=1.0).contains(&c.policy.homes));
            prop_assert!(!v.request_timeout().is_zero() && !v.deadline().is_zero());
            prop_assert_eq!(v.policy().needs_table(), c.policy.table.is_some());
            for p in [&c.policy.table, &c.policy.sizes].into_iter().flatten() {
                prop_assert!(p.is_absolute(), "{} not resolved", p.display());
            }
            prop_assert!(v.admin_token.as_deref() != Some(""));
            prop_assert!((1024..=64 << 20).contains(&c.max_body_bytes));
            prop_assert_eq!(
                v.fallback.to_string().parse::<Fallback>().ok(),
                Some(v.fallback)
            );
            prop_assert!(c.fallback.is_none_or(|f| f == v.fallback));
            let routes = v.routes.iter().count();
            prop_assert!((1..=MAX_ROUTES).contains(&routes));
            // A preset may cover several endpoints (`solr`: four paths), one route each.
            prop_assert!(c.routes.is_empty() || routes >= c.routes.len());
            for r in v.routes.iter() {
                prop_assert!(r.methods != 0 && r.methods & !(GET | POST) == 0);
            }
        }
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(msg.contains(PATH), "{msg}");
        }
    }
    Ok(())
}

/// One edit of a configuration's text.
#[derive(Clone, Debug)]
enum Edit {
    /// Sets the value of the line's key (if it has one) to `value`.
    Value(Index, &'static str),
    /// Deletes `len` bytes.
    Delete(Index, usize),
    /// Inserts `text`.
    Insert(Index, String),
    /// Repeats a line.
    Duplicate(Index),
    /// Cuts the text.
    Truncate(Index),
}

const VALUES: &[&str] = &[
    "-1",
    "0",
    "1",
    "2",
    "-0.0",
    "nan",
    "inf",
    "-inf",
    "+inf",
    "1e309",
    "1e-320",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "4096",
    "4097",
    "65",
    "86400.0",
    "86400.5",
    "1.5",
    "0x10",
    "1_000",
    "true",
    "[]",
    "{}",
    "[1, 2]",
    "{ a = 1 }",
    "\"\"",
    "\"x\"",
    "\"TOK\"",
    "\"NOPE\"",
    "\"127.0.0.1:0\"",
    "\"[::1]:8080\"",
    "\"a@b:1\"",
    "\"h:0\"",
    "\"h:65536\"",
    "\"h:1\"",
    "\"table\"",
    "\"term-vote\"",
    "\"round-robin\"",
    "\"nope\"",
    "\"in-flight\"",
    "\"window\"",
    "\"/abs/t.parquet\"",
    "\"../t.parquet\"",
    "'''multi\nline'''",
    "1979-05-27T07:32:00Z",
    "\"\\u0000\"",
    "\"é\"",
    "\"r0\"",
    "\"solr\"",
    "\"elasticsearch-query-string\"",
    "\"refuse\"",
    "\"POST\"",
    "[\"GET\", \"POST\"]",
    "\"/_search\"",
    "\"/query/match/title\"",
    "\"/a~2\"",
    "{ param = \"q\" }",
    "{ form = \"q\", json = \"/q\" }",
];

const SNIPPETS: &[&str] = &[
    "\n",
    "=",
    "\"",
    "[",
    "]",
    "[[replicas]]\nname = \"r2\"\naddress = \"h:2\"\n",
    "[health]\n",
    "[policy]\n",
    "admin_token_env = \"TOK\"\n",
    "admin_token_env = \"NOPE\"\n",
    "#",
    "\\",
    "'",
    "{",
    "}",
    ",",
    "\u{0}",
    "é",
    "\r\n",
    "\t",
    "deadline_ms = 0\n",
    "unknown = 1\n",
    "[[routes]]\npreset = \"tantivy\"\n",
    "[[routes]]\nmethod = \"GET\"\npath = \"/s\"\nquery = { param = \"q\" }\n",
    "fallback = \"p2c\"\n",
];

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<Index>(), prop::sample::select(VALUES)).prop_map(|(i, v)| Edit::Value(i, v)),
        2 => (any::<Index>(), 1usize..40).prop_map(|(i, n)| Edit::Delete(i, n)),
        2 => (
            any::<Index>(),
            prop_oneof![
                prop::sample::select(SNIPPETS).prop_map(str::to_owned),
                any::<String>(),
            ]
        )
            .prop_map(|(i, s)| Edit::Insert(i, s)),
        1 => any::<Index>().prop_map(Edit::Duplicate),
        1 => any::<Index>().prop_map(Edit::Truncate),
    ]
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(text: &mut String, e: &Edit) {
    let at = |i: &Index, s: &str| floor_boundary(s, i.index(s.len() + 1));
    match e {
        Edit::Value(i, v) => {
            let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
            if lines.is_empty() {
                return;
            }
            let k = i.index(lines.len());
            let line = &mut lines[k];
            if let Some((key, _)) = line.split_once('=') {
                *line = format!("{key}= {v}");
            }
            *text = lines.join("\n");
        }
        Edit::Delete(i, n) => {
            let start = at(i, text);
            let end = floor_boundary(text, (start + n).min(text.len()));
            text.replace_range(start..end, "");
        }
        Edit::Insert(i, s) => {
            let p = at(i, text);
            text.insert_str(p, s);
        }
        Edit::Duplicate(i) => {
            let lines: Vec<&str> = text.lines().collect();
            if lines.is_empty() {
                return;
            }
            let k = i.index(lines.len());
            let mut out: Vec<&str> = lines[..=k].to_vec();
            out.extend(&lines[k..]);
            *text = out.join("\n");
        }
        Edit::Truncate(i) => {
            let p = at(i, text);
            text.truncate(p);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(1_000)))]

    #[test]
    fn any_text(text in any::<String>()) {
        check(&text)?;
    }

    #[test]
    fn any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn mutated_valid_configs(edits in prop::collection::vec(edit(), 1..6)) {
        let mut text = FULL.to_owned();
        for e in &edits {
            apply(&mut text, e);
        }
        check(&text)?;
    }

    #[test]
    fn valid_configs_with_values_changed(
        edits in prop::collection::vec(
            (any::<Index>(), prop::sample::select(VALUES)).prop_map(|(i, v)| Edit::Value(i, v)),
            1..4,
        ),
    ) {
        let mut text = FULL.to_owned();
        for e in &edits {
            apply(&mut text, e);
        }
        check(&text)?;
    }

    #[test]
    fn valid_configs_with_any_numbers(
        // Mostly in range, so that most configurations pass and their invariants are checked.
        eps in prop_oneof![9 => 0.0..2.0, 1 => any::<f64>()],
        stall_eps in prop_oneof![9 => 0.0..4.0, 1 => any::<f64>()],
        ramp in prop_oneof![9 => 0u64..100_000, 1 => any::<u64>()],
        window in prop_oneof![9 => 0u64..2_000_000, 1 => any::<u64>()],
        retries in prop_oneof![9 => 0u32..20, 1 => any::<u32>()],
        timeout in prop_oneof![9 => 0u64..10_000, 1 => any::<u64>()],
        deadline in prop_oneof![9 => 0u64..10_000, 1 => any::<u64>()],
        vnodes in prop_oneof![9 => 0u64..10_000, 1 => any::<u64>()],
        query in prop_oneof![9 => 0u64..5_000, 1 => any::<u64>()],
        policy in prop::sample::select(vec!["ch-bl", "rj-ch", "term-vote", "round-robin", "p2c"]),
        replicas in 0usize..70,
    ) {
        // TOML integers are i64: larger values are parse errors, which is fine too.
        let mut text = format!(
            "listen = \"127.0.0.1:0\"\neps = {eps:?}\nstall_eps = {stall_eps:?}\n\
             ramp_queries = {ramp}\nload_window = {window}\nretries = {retries}\n\
             request_timeout_ms = {timeout}\ndeadline_ms = {deadline}\n\
             max_query_bytes = {query}\n[policy]\nname = \"{policy}\"\nvnodes = {vnodes}\n"
        );
        for r in 0..replicas {
            text += &format!("[[replicas]]\nname = \"r{r}\"\naddress = \"127.0.0.1:{}\"\n", 9000 + r);
        }
        check(&text)?;
    }
}

#[test]
fn the_full_config_is_valid() {
    let v = parse(FULL).expect("FULL is valid");
    assert_eq!(v.config.replicas.len(), 2);
    // `solr` covers four paths (select and query, each with and without a trailing slash).
    assert_eq!(v.routes.iter().count(), 6);
    assert_eq!(
        v.fallback,
        Fallback::Policy(balancer::policy::PolicyKind::RoundRobin)
    );
}
