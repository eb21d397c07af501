//! Routing explained, `GET /admin/explain?q=...` (JSON, or `&format=text`): how the
//! balancer would route a query now, from [`balancer::explain`] over the live view (the
//! view a request sees, the table serving it and, during a ramp, the side of the ramp the
//! query follows), plus what only the balancer knows: each replica's shadow-cache estimate
//! of the query's flash bytes and round-robin's (their mean over the live replicas), so the
//! bytes the choice saves. Nothing is routed, counted or fed: the shadow caches are read
//! with a peek. The document is [`balancer::explain_doc`]'s, which `ballot explain` prints
//! offline.

use std::sync::Arc;

use axum::extract::{Query, State as AxState};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use balancer::explain::{explain, Rule};
use balancer::explain_doc::{terms_of, to_json, to_text, Context};
use balancer::load::Signaled;
use balancer::policy::vote::VoteSource;
use balancer_server::pipeline::json_error;
use balancer_server::router::hash_hex;
use serde::Deserialize;

use crate::App;

/// The query string of `GET /admin/explain`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplainParams {
    q: Option<String>,
    format: Option<String>,
}

/// `GET /admin/explain?q=...[&format=text]`.
pub async fn explain_query(
    AxState(app): AxState<Arc<App>>,
    params: Result<Query<ExplainParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(params)) = params else {
        return json_error(
            StatusCode::BAD_REQUEST,
            "expected ?q=<query>[&format=json|text] and no other parameter",
        );
    };
    let text = match params.format.as_deref() {
        None | Some("json") => false,
        Some("text") => true,
        Some(other) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                format!("format must be json or text, got `{other}`"),
            )
        }
    };
    let Some(q) = params.q.filter(|q| !q.trim().is_empty()) else {
        return json_error(StatusCode::BAD_REQUEST, "missing query: ?q=<query>");
    };
    let lb = &app.lb;
    let routing = lb.router.snapshot();
    let Some(table) = &routing.table else {
        return json_error(
            StatusCode::CONFLICT,
            format!(
                "explain covers the table policy; this balancer routes by `{}`",
                lb.router.kind.name()
            ),
        );
    };
    let (terms, hashes) = terms_of(&q);
    let shard = &lb.shards[0];
    let members = shard.members.load();
    let Some(view) = shard.view(&members, 0) else {
        return json_error(StatusCode::SERVICE_UNAVAILABLE, "no live replica");
    };
    let ramp_at = table.ramp.as_ref().map(|r| r.ramp().at(r.progress()));
    let source: &dyn VoteSource = match &ramp_at {
        Some(at) => at.side(&hashes),
        None => &*table.current,
    };
    let homes = lb.cfg.config.policy.homes;
    let rule = Rule {
        replicas: table.replicas,
        eps: lb.cfg.config.eps,
        homes,
        evidence: lb.cfg.config.policy.cache_evidence,
    };
    let view = Signaled::new(&view, shard.signals(&members));
    let e = explain(
        source,
        &hashes,
        rule,
        &view,
        // A draw of its own: asking routes nothing, so it leaves the routing seed alone.
        &mut data::rng::Rng::new(hashes.first().copied().unwrap_or(1)),
    );
    let shadow_miss = shard.shadow.as_ref().map(|shadow| {
        (0..table.replicas)
            .map(|i| {
                let rep = members.slots.get(i)?.as_ref()?;
                Some(shadow.peek(i, rep.owner(), &hashes))
            })
            .collect()
    });
    let ctx = Context {
        names: members
            .slots
            .iter()
            .map(|s| s.as_ref().map(|r| r.name.clone()))
            .collect(),
        policy: lb.router.kind.name().to_owned(),
        load: lb.cfg.load.name().to_owned(),
        table: Some((table.version, hash_hex(table.content_hash))),
        ramp: ramp_at.map(|at| (at.progress(), at.query_follows_new(&hashes))),
        shadow_miss,
    };
    let doc = to_json(&q, &terms, &e, &ctx, homes);
    if text {
        (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            to_text(&doc),
        )
            .into_response()
    } else {
        Json(doc).into_response()
    }
}
