//! An explained routing decision as a document: the JSON that `GET /admin/explain` serves
//! and `ballot explain --json` prints, and the text of its terminal form ([`to_text`]).
//! [`explain`](crate::explain::explain) makes the decision; this module names the replicas
//! and adds what the caller knows besides ([`Context`]: the table's version, the ramp's
//! side, the shadow caches' estimates).

use std::fmt::Write;

use data::tokenizer::Tokens;
use serde_json::{json, Value};

use crate::explain::Explanation;
use crate::policy::{hash_tokens, Reason};

/// What the balancer adds to an [`Explanation`].
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// Replica names by index (missing or `None`: an empty slot).
    pub names: Vec<Option<String>>,
    /// The routing policy's name.
    pub policy: String,
    /// The load view's name.
    pub load: String,
    /// `(version, content hash)` of the table.
    pub table: Option<(u64, String)>,
    /// During a ramp: its progress, and whether the query follows the new table.
    pub ramp: Option<(f64, bool)>,
    /// Per replica index, the shadow cache's estimate of the query's flash bytes there.
    pub shadow_miss: Option<Vec<Option<u64>>>,
}

impl Context {
    fn name(&self, index: usize) -> String {
        self.names
            .get(index)
            .cloned()
            .flatten()
            .unwrap_or_else(|| format!("#{index}"))
    }
}

/// The sentence that says why the chosen replica took the query.
fn why(e: &Explanation, ctx: &Context, homes: f64) -> String {
    let Some(d) = e.decision else {
        return "no live replica".to_owned();
    };
    let chosen = ctx.name(usize::from(d.replica));
    let top = e.top.map(|t| ctx.name(t)).unwrap_or_default();
    let seen = |r: usize| &e.replicas[r];
    let backlog = |r: usize| seen(r).backlog.map_or("?".to_owned(), |b| b.to_string());
    match d.reason {
        Reason::Vote
            if seen(usize::from(d.replica)).votes + seen(usize::from(d.replica)).evidence
                <= 0.0 =>
        {
            format!(
            "no term of the query is in the table: {chosen} has the largest stand-in vote (the \
             postings bytes of its terms) and is under the load bound"
        )
        }
        Reason::Vote => format!("{chosen} has the most votes and is under the load bound"),
        Reason::Home => {
            let (b, c) = (e.best.unwrap_or(0), usize::from(d.replica));
            format!(
                "{chosen} is a home (its votes reach {:.0}% of {top}'s) and has less backlog \
                 ({} in flight and queued, against {} on {top})",
                100.0 * homes,
                backlog(c),
                backlog(b)
            )
        }
        Reason::Overflow | Reason::Stalled => {
            let t = e.top.unwrap_or(0);
            let full = if d.reason == Reason::Stalled {
                format!(
                    "is full by the stall guard (backlog {}, load counted as infinite)",
                    backlog(t)
                )
            } else {
                format!(
                    "is at or over the load bound ({} >= {})",
                    seen(t).load,
                    e.cap
                )
            };
            let took = match e.best {
                Some(b) if b == usize::from(d.replica) => {
                    format!("the next-ranked replica under the bound, {chosen}, took the query")
                }
                Some(b) => format!(
                    "the next-ranked replica under the bound is {}, and {chosen}, one of its \
                     homes with less backlog, took the query",
                    ctx.name(b)
                ),
                None => format!(
                    "every replica with votes was full, so a random live replica under the \
                     bound, {chosen}, took the query"
                ),
            };
            format!("{top}, the top vote, {full}; {took}")
        }
        Reason::NoVote => {
            format!("no term voted: a random live replica under the bound, {chosen}, took it")
        }
        // Explanations are of routing decisions; late binding moves a query after one.
        Reason::Stolen => format!(
            "the query waited for another replica's place, and {chosen}, free with nobody \
             waiting, took it"
        ),
    }
}

/// The explanation as a JSON document.
pub fn to_json(query: &str, terms: &[String], e: &Explanation, ctx: &Context, homes: f64) -> Value {
    let votes = |v: &[(usize, f64)]| -> Vec<Value> {
        v.iter()
            .map(|&(r, w)| json!({ "replica": ctx.name(r), "weight": w }))
            .collect()
    };
    let term_list: Vec<Value> = terms
        .iter()
        .zip(&e.terms)
        .map(|(t, v)| {
            json!({
                "term": t,
                "in_table": !v.votes.is_empty() || v.stand_in.is_empty(),
                "votes": votes(&v.votes),
                "stand_in": votes(&v.stand_in),
            })
        })
        .collect();
    let shadow = |r: usize| {
        ctx.shadow_miss
            .as_ref()
            .and_then(|s| s.get(r).copied().flatten())
    };
    let replicas: Vec<Value> = e
        .replicas
        .iter()
        .filter(|r| ctx.names.get(r.index).is_some_and(Option::is_some))
        .map(|r| {
            json!({
                "name": ctx.name(r.index),
                "index": r.index,
                "live": r.live,
                "votes": r.votes,
                "cache_evidence_votes": r.evidence,
                "stand_in_votes": r.stand_in,
                "load": if r.load == u64::MAX { Value::Null } else { json!(r.load) },
                "stalled": r.load == u64::MAX,
                "backlog": r.backlog,
                "under_cap": r.under_cap,
                "home": r.home,
                "shadow_miss_bytes": shadow(r.index),
            })
        })
        .collect();
    let chosen = e.decision.map(|d| usize::from(d.replica));
    let flash = chosen.and_then(|c| {
        let live: Vec<u64> = e
            .replicas
            .iter()
            .filter(|r| r.live)
            .filter_map(|r| shadow(r.index))
            .collect();
        let mine = shadow(c)?;
        let rr = live.iter().sum::<u64>() as f64 / live.len().max(1) as f64;
        Some(json!({
            "chosen_miss_bytes": mine,
            "round_robin_miss_bytes": rr,
            "saved_bytes": rr - mine as f64,
        }))
    });
    let rule = e.decision.map(|d| d.reason.as_str());
    let mut why = why(e, ctx, homes);
    if let Some((progress, new)) = ctx.ramp {
        let side = if new { "new" } else { "old" };
        why = format!(
            "ramp at {:.0}%: scored by the {side} table; {why}",
            100.0 * progress
        );
    }
    json!({
        "query": query,
        "policy": ctx.policy,
        "load": ctx.load,
        "table": ctx.table.as_ref().map(|(v, h)| json!({ "version": v, "content_hash": h })),
        "ramp": ctx.ramp.map(|(p, new)| json!({
            "progress": p,
            "table": if new { "new" } else { "old" },
        })),
        "terms": term_list,
        "replicas": replicas,
        "total_load": e.total,
        "cap": e.cap,
        "top": e.top.map(|t| ctx.name(t)),
        "chosen": chosen.map(|c| ctx.name(c)),
        "rule": rule,
        "why": why,
        "flash": flash,
    })
}

/// The JSON document of [`to_json`] as text for a terminal.
pub fn to_text(v: &Value) -> String {
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    };
    let mut out = String::new();
    let _ = writeln!(out, "query: {}", s(&v["query"]));
    for t in v["terms"].as_array().into_iter().flatten() {
        let list = |key: &str| {
            t[key]
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| {
                    format!(
                        "{} {:.4}",
                        s(&x["replica"]),
                        x["weight"].as_f64().unwrap_or(0.0)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let votes = list("votes");
        let line = if !votes.is_empty() {
            format!("votes {votes}")
        } else if !list("stand_in").is_empty() {
            format!("not in the table; stand-in vote {}", list("stand_in"))
        } else {
            "abstains".to_owned()
        };
        let _ = writeln!(out, "  term {:<20} {line}", s(&t["term"]));
    }
    let _ = writeln!(
        out,
        "  {:<8} {:>5} {:>10} {:>9} {:>10} {:>9} {:>9} {:>5} {:>12}",
        "replica",
        "live",
        "votes",
        "stand-in",
        "load",
        "backlog",
        "under cap",
        "home",
        "shadow miss"
    );
    for r in v["replicas"].as_array().into_iter().flatten() {
        let load = if r["stalled"].as_bool() == Some(true) {
            "stalled".to_owned()
        } else {
            s(&r["load"])
        };
        let _ = writeln!(
            out,
            "  {:<8} {:>5} {:>10.4} {:>9.0} {:>10} {:>9} {:>9} {:>5} {:>12}",
            s(&r["name"]),
            s(&r["live"]),
            r["votes"].as_f64().unwrap_or(0.0),
            r["stand_in_votes"].as_f64().unwrap_or(0.0),
            load,
            s(&r["backlog"]),
            s(&r["under_cap"]),
            s(&r["home"]),
            s(&r["shadow_miss_bytes"])
        );
    }
    let _ = writeln!(
        out,
        "  load bound {} (total load {}, load view {})",
        s(&v["cap"]),
        s(&v["total_load"]),
        s(&v["load"])
    );
    let _ = writeln!(
        out,
        "  chosen: {} by rule {}: {}",
        s(&v["chosen"]),
        s(&v["rule"]),
        s(&v["why"])
    );
    if v["flash"].is_object() {
        let f = &v["flash"];
        let _ = writeln!(
            out,
            "  flash (shadow estimate): {} bytes here, round-robin {:.0} on average, saved {:.0}",
            s(&f["chosen_miss_bytes"]),
            f["round_robin_miss_bytes"].as_f64().unwrap_or(0.0),
            f["saved_bytes"].as_f64().unwrap_or(0.0)
        );
    }
    out
}

/// Hashes `q` as routing does: its terms (as text) and their hashes.
pub fn terms_of(q: &str) -> (Vec<String>, Vec<u64>) {
    let mut tokens = Tokens::new();
    tokens.tokenize(q);
    let mut hashes = Vec::new();
    hash_tokens(&tokens, &mut hashes);
    (tokens.iter().map(str::to_owned).collect(), hashes)
}
