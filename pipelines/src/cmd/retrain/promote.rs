//! Promotion to every balancer or to none (`ballot retrain`): a table the rule promotes is
//! switched in on all the listed balancers or left off all of them, so no replica's traffic
//! is split between two partitions for longer than a switch and its undo.
//!
//! 1. **Check**: each balancer's table is fetched (`GET /admin/table/parquet`, what a
//!    rollback restores) and the new table validated there without switching (`POST
//!    /admin/table?check=true`: same reading, same checks, its content hash back). Any
//!    refusal (down, a wrong token, a table it rejects) stops here: no balancer switched.
//! 2. **Switch**: `POST /admin/table` on each in turn. If one fails, the ones that switched
//!    are rolled back (their previous table posted again; it ramps back in as any reload),
//!    and the record says which switched, which failed, which were rolled back.
//!
//! Every call retries with a doubling backoff on connection errors and 5xx; a 4xx is final.

use std::time::Duration;

use serde::Serialize;

use crate::client;

/// One admin call's outcome at one balancer.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// The balancer's admin address.
    pub balancer: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// Attempts made.
    pub attempts: u32,
    /// The table version it reports after a switch or rollback.
    pub version: Option<u64>,
    /// The content hash it reports for the checked table.
    pub content_hash: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
}

/// What a promotion did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Promotion {
    /// `all` (every balancer switched), `none` (none did, or every one that did was rolled
    /// back), `partial` (a rollback failed: those balancers serve the new table), or
    /// `skipped` (the rule refused the table).
    pub outcome: &'static str,
    /// The balancers that refused (check or switch), with why.
    pub refused: Vec<String>,
    /// The check of each balancer.
    pub checks: Vec<Step>,
    /// The switches, in order, up to the first that failed.
    pub switches: Vec<Step>,
    /// The rollbacks of the balancers that had switched when one failed.
    pub rollbacks: Vec<Step>,
}

/// How the calls retry.
#[derive(Clone, Copy, Debug)]
pub struct Retry {
    /// Attempts per call.
    pub attempts: u32,
    /// Seconds before the second attempt, doubling after.
    pub backoff: f64,
}

/// A call's answer: status and body, or the transport error.
type Answer = Result<(u16, Vec<u8>), String>;

/// `method path` on balancer `b` with `body`, retried by `retry`; the last answer and the
/// attempts it took.
fn call(
    b: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    retry: Retry,
) -> (Answer, u32) {
    let mut backoff = retry.backoff;
    let mut last: Answer = Err("no attempt".to_owned());
    for attempt in 1..=retry.attempts.max(1) {
        last = client::call(b, method, path, headers, body, Duration::from_secs(60))
            .map(|r| (r.status, r.body.to_vec()))
            .map_err(|e| format!("{e:#}"));
        let final_answer = match &last {
            Ok((s, _)) => *s < 500 || *s == 501,
            Err(_) => false,
        };
        if final_answer || attempt == retry.attempts.max(1) {
            return (last, attempt);
        }
        let why = describe(&last);
        eprintln!(
            "{method} {path} on {b}: attempt {attempt} failed ({why}); retrying in {backoff:.1}s"
        );
        std::thread::sleep(Duration::from_secs_f64(backoff));
        backoff *= 2.0;
    }
    (last, retry.attempts)
}

/// What a failed answer says: its status and body, or the transport error.
fn describe(answer: &Answer) -> String {
    match answer {
        Ok((status, body)) => format!("HTTP {status}: {}", String::from_utf8_lossy(body).trim()),
        Err(e) => e.clone(),
    }
}

/// The step of an answer: ok on 200, with the version and content hash `read` finds in its
/// JSON body, and the body itself.
fn step(
    b: &str,
    (answer, attempts): (Answer, u32),
    read: impl Fn(&serde_json::Value) -> (Option<u64>, Option<String>),
) -> (Step, Option<Vec<u8>>) {
    let mut step = Step {
        balancer: b.to_owned(),
        ok: false,
        attempts,
        version: None,
        content_hash: None,
        error: None,
    };
    match answer {
        Ok((200, body)) => {
            let json = serde_json::from_slice::<serde_json::Value>(&body).unwrap_or_default();
            (step.version, step.content_hash) = read(&json);
            step.ok = true;
            (step, Some(body))
        }
        failed => {
            step.error = Some(describe(&failed));
            (step, None)
        }
    }
}

/// Promotes the Parquet table `table` to every balancer of `balancers` or to none.
pub fn promote(balancers: &[String], table: &[u8], token: Option<&str>, retry: Retry) -> Promotion {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut get_headers: Vec<(&str, &str)> = Vec::new();
    if let Some(a) = auth.as_deref() {
        get_headers.push(("Authorization", a));
    }
    let mut post_headers = get_headers.clone();
    post_headers.push(("Content-Type", "application/vnd.apache.parquet"));
    let no_fields = |_: &serde_json::Value| (None, None);
    let loaded = |v: &serde_json::Value| (v["loaded"]["version"].as_u64(), None);

    // 1. Check: the table each serves now (for a rollback), and the new one validated.
    let mut p = Promotion::default();
    let mut previous: Vec<Vec<u8>> = Vec::new();
    for b in balancers {
        let (fetched, old) = step(
            b,
            call(b, "GET", "/admin/table/parquet", &get_headers, b"", retry),
            no_fields,
        );
        let (checked, _) = if fetched.ok {
            step(
                b,
                call(
                    b,
                    "POST",
                    "/admin/table?check=true",
                    &post_headers,
                    table,
                    retry,
                ),
                |v| (None, v["content_hash"].as_str().map(str::to_owned)),
            )
        } else {
            (fetched, None)
        };
        if !checked.ok {
            let why = checked.error.clone().unwrap_or_default();
            p.refused.push(format!("{b}: {why}"));
        }
        previous.push(old.unwrap_or_default());
        p.checks.push(checked);
    }
    if !p.refused.is_empty() {
        p.outcome = "none";
        return p;
    }

    // 2. Switch each in turn; on the first failure, roll back the ones that switched.
    for b in balancers {
        let (switched, _) = step(
            b,
            call(b, "POST", "/admin/table", &post_headers, table, retry),
            loaded,
        );
        let failed = !switched.ok;
        if failed {
            let why = switched.error.clone().unwrap_or_default();
            p.refused.push(format!("{b}: {why}"));
        }
        p.switches.push(switched);
        if failed {
            break;
        }
    }
    if p.refused.is_empty() {
        p.outcome = "all";
        return p;
    }
    let switched: Vec<usize> = p
        .switches
        .iter()
        .enumerate()
        .filter(|(_, s)| s.ok)
        .map(|(i, _)| i)
        .collect();
    for i in switched {
        let b = &balancers[i];
        let (undone, _) = step(
            b,
            call(
                b,
                "POST",
                "/admin/table",
                &post_headers,
                &previous[i],
                retry,
            ),
            loaded,
        );
        p.rollbacks.push(undone);
    }
    p.outcome = if p.rollbacks.iter().all(|r| r.ok) {
        "none"
    } else {
        "partial"
    };
    p
}
