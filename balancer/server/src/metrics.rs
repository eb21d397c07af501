//! Prometheus metrics: a `metrics` recorder from `metrics-exporter-prometheus` (no HTTP
//! listener of its own; the admin listener renders it on `GET /metrics`), with the metric
//! names in one place. Per-replica handles are registered once when a replica joins, so the
//! request path only bumps atomics (the Envoy and HAProxy stats model: counters per
//! upstream, gauges sampled at scrape time).

use std::sync::OnceLock;

use balancer::policy::Reason;
use metrics::{describe_counter, describe_gauge, describe_histogram, Counter};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Requests answered by a replica, by replica and reason.
pub const REQUESTS: &str = "ballot_requests_total";
/// Upstream attempts that failed and were retried on another replica.
pub const RETRIES: &str = "ballot_retries_total";
/// Client requests that failed upstream (every attempt failed or the deadline passed).
pub const UPSTREAM_FAILURES: &str = "ballot_upstream_failures_total";
/// Replicas ejected (by health checks or passively), by replica.
pub const EJECTIONS: &str = "ballot_ejections_total";
/// Queries a replica shed with 503 (full, not ejected) and the balancer retried elsewhere,
/// by replica.
pub const SHED: &str = "ballot_upstream_shed_total";
/// Requests in flight, by replica.
pub const IN_FLIGHT: &str = "ballot_in_flight";
/// Client requests waiting in the replicas' queues (their replica at
/// `replica_max_in_flight`).
pub const QUEUED: &str = "ballot_queued";
/// Client requests waiting in one replica's queue.
pub const REPLICA_QUEUED: &str = "ballot_replica_queued";
/// Whether a replica is live (healthy, enabled), by replica.
pub const REPLICA_UP: &str = "ballot_replica_up";
/// Routing-decision latency (the policy over the load view), seconds: one decision in
/// [`ROUTE_SAMPLE`](crate::pipeline::ROUTE_SAMPLE) is timed.
pub const ROUTE_SECONDS: &str = "ballot_route_seconds";
/// Upstream latency until the response headers, seconds, by replica (rendered from
/// [`crate::stats`]).
pub const UPSTREAM_SECONDS: &str = "ballot_upstream_seconds";
/// Version of the voting table in use (1 at start, +1 per accepted reload).
pub const TABLE_VERSION: &str = "ballot_table_version";
/// 1 for the content hash of the voting table in use, 0 for the one it replaced, by `hash`.
pub const TABLE_CONTENT: &str = "ballot_table_content";
/// Seconds it took to read and compile the current voting table.
pub const TABLE_LOAD_SECONDS: &str = "ballot_table_load_seconds";
/// Unix time the current voting table was loaded.
pub const TABLE_LOADED_AT: &str = "ballot_table_loaded_timestamp_seconds";
/// Rejected table reloads.
pub const RELOAD_FAILURES: &str = "ballot_table_reload_failures_total";
/// Progress of the table ramp, 0 to 1 (1 when no ramp runs).
pub const RAMP_PROGRESS: &str = "ballot_table_ramp_progress";
/// Client requests the balancer could not route as asked, by kind: refused (400, 404,
/// 405, 408, 413; 503 when full or no replica is left) or, under a fallback policy, routed
/// without a query (no route, or an unreadable one; kinds in
/// [`Unreadable::kind`](balancer_routes::Unreadable::kind)).
pub const CLIENT_ERRORS: &str = "ballot_client_errors_total";
/// Answers by where their `work` came from: `source` = `header`, `orca`, `shadow`, or
/// `none` (the fixed per-query cost alone).
pub const WORK_SOURCE: &str = "ballot_work_source_total";
/// ORCA load reports (`endpoint-load-metrics`) that could not be read, and were ignored.
pub const LOAD_REPORTS_MALFORMED: &str = "ballot_load_reports_malformed_total";
/// Flash bytes a replica read, as it reported them (header or ORCA report), by replica.
pub const REPORTED_MISS_BYTES: &str = "ballot_reported_miss_bytes_total";
/// Flash bytes a replica read, as its shadow cache estimates them, by replica.
pub const SHADOW_MISS_BYTES: &str = "ballot_shadow_miss_bytes_total";
/// Postings bytes a replica's shadow cache holds, by replica.
pub const SHADOW_CACHED_BYTES: &str = "ballot_shadow_cached_bytes";
/// Queries routed while a table ramps in, by the table that scored them (`table` = `old` or
/// `new`): the `ramp` branch of the routing rule.
pub const RAMP_QUERIES: &str = "ballot_ramp_queries_total";
/// Shadow-cache estimates of the flash bytes of one query in [`crate::hooks::shadow::SAMPLE`],
/// by `route`: `chosen` (at the replica that took it) and `round-robin` (the mean over the
/// live replicas, what round-robin would read on average); their difference is what the
/// routing saved.
pub const SAMPLED_MISS_BYTES: &str = "ballot_sampled_miss_bytes_total";
/// Memory the shadow caches and their term ids take, estimated.
pub const SHADOW_MEMORY_BYTES: &str = "ballot_shadow_memory_bytes";
/// With `[shards]`: client queries fanned out, by answer (`full`, `partial`, `failed`).
pub const FANOUT: &str = "ballot_fanout_total";
/// With `[policy] cache_admission`: queries forwarded with a no-cache hint
/// ([`crate::hooks::hint`]), and the terms those hints named.
pub const CACHE_HINTS: &str = "ballot_cache_hints_total";

/// Buckets of [`ROUTE_SECONDS`]: 250 ns to 1 ms.
const ROUTE_BUCKETS: [f64; 9] = [250e-9, 500e-9, 1e-6, 2e-6, 5e-6, 10e-6, 50e-6, 200e-6, 1e-3];
static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the global recorder once and returns its handle (later calls return the same
/// handle).
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            // A real histogram (not a summary) for the routing latency; the buckets are
            // constants, so this cannot fail, but a failure would only cost the buckets.
            let with_buckets = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(ROUTE_SECONDS.into()), &ROUTE_BUCKETS);
            let recorder = with_buckets
                .unwrap_or_else(|_| PrometheusBuilder::new())
                .build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder is already installed; metrics then go there.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            handle
        })
        .clone()
}

fn describe() {
    describe_counter!(
        REQUESTS,
        "Requests answered by a replica, by replica and reason"
    );
    describe_counter!(RETRIES, "Upstream attempts retried on another replica");
    describe_counter!(
        FANOUT,
        "Sharded queries by answer: full, partial (a shard missing) or failed"
    );
    describe_counter!(UPSTREAM_FAILURES, "Client requests that failed upstream");
    describe_counter!(EJECTIONS, "Replica ejections (health checks or passive)");
    describe_counter!(
        SHED,
        "Queries a replica shed with 503 and the balancer retried on another replica"
    );
    describe_gauge!(IN_FLIGHT, "Requests in flight per replica");
    describe_gauge!(QUEUED, "Client requests waiting for a replica place");
    describe_gauge!(
        REPLICA_QUEUED,
        "Client requests waiting for a place on this replica"
    );
    describe_gauge!(REPLICA_UP, "1 if the replica is healthy and enabled");
    describe_histogram!(
        ROUTE_SECONDS,
        "Routing decision latency in seconds (one decision in 16 is timed)"
    );
    describe_gauge!(TABLE_VERSION, "Version of the voting table in use");
    describe_gauge!(
        TABLE_CONTENT,
        "1 for the content hash of the table in use (label hash), 0 for the one it replaced"
    );
    describe_gauge!(TABLE_LOAD_SECONDS, "Seconds to read and compile the table");
    describe_gauge!(TABLE_LOADED_AT, "Unix time the table was loaded");
    describe_counter!(RELOAD_FAILURES, "Rejected voting-table reloads");
    describe_gauge!(RAMP_PROGRESS, "Table ramp progress, 0 to 1");
    describe_counter!(
        CLIENT_ERRORS,
        "Client requests refused, or routed by the fallback policy without a query, by kind"
    );
    describe_counter!(WORK_SOURCE, "Answers by where their work came from");
    describe_counter!(
        LOAD_REPORTS_MALFORMED,
        "Unreadable ORCA load reports, ignored"
    );
    describe_counter!(
        REPORTED_MISS_BYTES,
        "Flash bytes read, as replicas report them"
    );
    describe_counter!(
        SHADOW_MISS_BYTES,
        "Flash bytes read, as shadow caches estimate them"
    );
    describe_gauge!(SHADOW_CACHED_BYTES, "Postings bytes held by a shadow cache");
    describe_counter!(
        RAMP_QUERIES,
        "Queries routed during a table ramp, by the table that scored them"
    );
    describe_counter!(
        SAMPLED_MISS_BYTES,
        "Shadow estimates of sampled queries' flash bytes: at the chosen replica, and round-robin's mean"
    );
    describe_gauge!(
        SHADOW_MEMORY_BYTES,
        "Memory of the shadow caches, estimated"
    );
    describe_counter!(
        CACHE_HINTS,
        "No-cache hints sent with forwarded queries (what = queries, terms)"
    );
}

/// The handles of one replica's counters that only `/metrics` shows, registered when it
/// joins (the others are [`crate::stats::ReplicaStats`]).
#[derive(Clone)]
pub struct ReplicaMetrics {
    /// `EJECTIONS`.
    pub ejections: Counter,
    /// `SHED`.
    pub shed: Counter,
}

/// Why a request went to its replica, as `ballot_requests_total{reason}` counts it: the
/// policy's [`Reason`] at a query's first attempt (`vote`, `home`, `overflow`,
/// `stall-guard`, `no-vote`), `failover` on a retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestReason {
    /// The policy's reason.
    Policy(Reason),
    /// A retry on another replica after a failed attempt.
    Failover,
}

impl RequestReason {
    /// Every reason, in the order of [`ReplicaMetrics::requests`].
    pub const ALL: [RequestReason; Reason::ALL.len() + 1] = [
        RequestReason::Policy(Reason::ALL[0]),
        RequestReason::Policy(Reason::ALL[1]),
        RequestReason::Policy(Reason::ALL[2]),
        RequestReason::Policy(Reason::ALL[3]),
        RequestReason::Policy(Reason::ALL[4]),
        RequestReason::Failover,
    ];

    /// The policy's reason for a first attempt.
    pub fn of(reason: Reason) -> Self {
        RequestReason::Policy(reason)
    }

    /// Its place in [`RequestReason::ALL`] (and [`ReplicaMetrics::requests`]).
    pub fn index(self) -> usize {
        match self {
            RequestReason::Policy(r) => Reason::ALL.iter().position(|&a| a == r).unwrap_or(0),
            RequestReason::Failover => Reason::ALL.len(),
        }
    }

    /// The `reason` label (and the `x-ballot-reason` header).
    pub fn name(self) -> &'static str {
        match self {
            RequestReason::Policy(r) => r.as_str(),
            RequestReason::Failover => "failover",
        }
    }
}

impl ReplicaMetrics {
    /// Registers the handles of replica `name`.
    pub fn new(name: &str) -> Self {
        ReplicaMetrics {
            ejections: metrics::counter!(EJECTIONS, "replica" => name.to_owned()),
            shed: metrics::counter!(SHED, "replica" => name.to_owned()),
        }
    }
}
