//! `ballot explain --table T.parquet [--sizes S.parquet] "some query" ...`: how the `table`
//! policy routes each query, offline: each term's votes, the query's homes, the load view's
//! numbers, and the replica chosen with the rule that chose it. The same computation and the
//! same document as a running balancer's `GET /admin/explain` (`balancer::explain_doc`),
//! over a view given on the command line (idle unless `--loads` and `--backlog` say
//! otherwise) instead of the live one. Replicas are named `r0`, `r1`, ... in table order,
//! as the demo and the examples name them.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use balancer::explain::{explain, Rule};
use balancer::explain_doc::{terms_of, to_json, to_text, Context as Seen};
use balancer::load::{Guarded, StaticLoad};
use balancer::policy::table::TableVotes;
use balancer::policy::{TermBytes, DEFAULT_EPS, DEFAULT_HOMES};
use clap::Args;
use data::rng::Rng;
use data::table::VotingTable;

/// Arguments of `ballot explain`.
#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The voting table (Parquet).
    #[arg(long)]
    pub table: PathBuf,
    /// Postings sizes (Parquet, `ballot sizes`): the weights of the stand-in votes of
    /// terms missing from the table, as the balancer's `[policy] sizes`.
    #[arg(long)]
    pub sizes: Option<PathBuf>,
    /// Load-bound slack (the balancer's `eps`).
    #[arg(long, default_value_t = DEFAULT_EPS)]
    pub eps: f64,
    /// Home share (the balancer's `[policy] homes`).
    #[arg(long, default_value_t = DEFAULT_HOMES)]
    pub homes: f64,
    /// Each replica's load in the view, comma-separated (default: all 0).
    #[arg(long, value_delimiter = ',')]
    pub loads: Vec<u64>,
    /// Each replica's backlog (requests in flight and queued), comma-separated (default:
    /// all 0).
    #[arg(long, value_delimiter = ',')]
    pub backlog: Vec<u64>,
    /// Replicas that are down (ejected or drained), by index, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub down: Vec<usize>,
    /// More queries, one per line (blank lines skipped).
    #[arg(long)]
    pub queries: Option<PathBuf>,
    /// Print one JSON document per query and line (the balancer's `/admin/explain`
    /// document) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Seed of the random jump (a query whose voted replicas are all full).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Queries to explain.
    pub query: Vec<String>,
}

/// A per-replica list from the command line: empty means all `fill`.
fn per_replica(flag: &str, given: &[u64], replicas: usize, fill: u64) -> Result<Vec<u64>> {
    match given.len() {
        0 => Ok(vec![fill; replicas]),
        n if n == replicas => Ok(given.to_vec()),
        n => bail!("{flag} has {n} values; the table routes over {replicas} replicas"),
    }
}

/// Runs `ballot explain`.
pub fn run(args: &ExplainArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&args.homes) {
        bail!("--homes must be between 0 and 1, got {}", args.homes);
    }
    if args.eps.is_nan() || args.eps < 0.0 {
        bail!("--eps must be >= 0, got {}", args.eps);
    }
    let table = VotingTable::read_parquet(&args.table, None)?;
    let replicas = usize::from(table.replicas);
    let mut term_bytes = TermBytes::default();
    if let Some(p) = &args.sizes {
        let sizes = data::sizes::SizeTable::read_parquet(p)?;
        for (term, bytes) in sizes.sorted() {
            term_bytes.insert(data::hash::term_hash(term), bytes);
        }
    }
    let votes = TableVotes::build(&table, replicas, Arc::new(term_bytes))
        .with_context(|| format!("{}: cannot compile the table", args.table.display()))?;
    let loads = per_replica("--loads", &args.loads, replicas, 0)?;
    let backlog = per_replica("--backlog", &args.backlog, replicas, 0)?;
    let mut live = balancer::load::first_n_bits(replicas);
    for &d in &args.down {
        if d >= replicas {
            bail!(
                "--down {d}: the table routes over replicas 0 to {}",
                replicas - 1
            );
        }
        live &= !(1u64 << d);
    }
    let mut queries = args.query.clone();
    if let Some(p) = &args.queries {
        let text = std::fs::read_to_string(p)
            .with_context(|| format!("{}: cannot read the queries", p.display()))?;
        queries.extend(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_owned),
        );
    }
    if queries.is_empty() {
        bail!("no query to explain: give queries as arguments or --queries FILE");
    }
    let base = StaticLoad::new(loads);
    let backlog = StaticLoad::new(backlog);
    let view = Guarded::new(&base, &backlog, replicas, live, None);
    let seen = Seen {
        names: (0..replicas).map(|i| Some(format!("r{i}"))).collect(),
        policy: "table".to_owned(),
        load: "given".to_owned(),
        table: Some((1, format!("{:016x}", votes.content_hash()))),
        ramp: None,
        shadow_miss: None,
    };
    let mut rng = Rng::new(args.seed);
    let mut out = std::io::stdout().lock();
    for (i, q) in queries.iter().enumerate() {
        let (terms, hashes) = terms_of(q);
        // No shadow caches here: the table's votes alone.
        let rule = Rule {
            replicas,
            eps: args.eps,
            homes: args.homes,
            evidence: 0.0,
        };
        let e = explain(&votes, &hashes, rule, &view, &mut rng);
        let doc = to_json(q, &terms, &e, &seen, args.homes);
        if args.json {
            writeln!(out, "{doc}")?;
        } else {
            if i > 0 {
                writeln!(out)?;
            }
            write!(out, "{}", to_text(&doc))?;
        }
    }
    Ok(())
}
