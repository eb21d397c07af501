//! Prometheus metrics: a `metrics` recorder from `metrics-exporter-prometheus` (no HTTP
//! listener of its own; the admin listener renders it on `GET /metrics`), with the metric
//! names in one place. Per-replica handles are registered once when a replica joins, so the
//! request path only bumps atomics (the Envoy and HAProxy stats model: counters per
//! upstream, gauges sampled at scrape time).

use std::sync::OnceLock;

use balancer::policy::Reason;
use metrics::Counter;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Defines each metric's name as a constant, with its kind and help text, and
/// [`describe`], which registers the help texts: one line per metric.
macro_rules! metrics {
    ($($(#[$doc:meta])* $name:ident = $text:literal, $kind:ident, $help:literal;)+) => {
        $($(#[$doc])* pub const $name: &str = $text;)+

        fn describe() {
            $(metrics::$kind!($name, $help);)+
        }
    };
}

metrics! {
    /// Requests answered by a replica, by replica and reason ([`crate::stats`]).
    REQUESTS = "ballot_requests_total", describe_counter, "Requests answered by a replica, by replica and reason";
    /// Upstream attempts that failed and were retried on another replica.
    RETRIES = "ballot_retries_total", describe_counter, "Upstream attempts retried on another replica";
    /// Client requests that failed upstream (every attempt failed or the deadline passed).
    UPSTREAM_FAILURES = "ballot_upstream_failures_total", describe_counter, "Client requests that failed upstream";
    /// Replicas ejected (by health checks or passively), by replica.
    EJECTIONS = "ballot_ejections_total", describe_counter, "Replica ejections (health checks or passive)";
    /// Queries a replica shed with 503 and the balancer retried elsewhere, by replica.
    SHED = "ballot_upstream_shed_total", describe_counter, "Queries a replica shed with 503 and the balancer retried on another replica";
    /// Requests in flight, by replica.
    IN_FLIGHT = "ballot_in_flight", describe_gauge, "Requests in flight per replica";
    /// Client requests waiting in the replicas' queues.
    QUEUED = "ballot_queued", describe_gauge, "Client requests waiting for a replica place";
    /// Client requests waiting in one replica's queue.
    REPLICA_QUEUED = "ballot_replica_queued", describe_gauge, "Client requests waiting for a place on this replica";
    /// Whether a replica is live (healthy, enabled), by replica.
    REPLICA_UP = "ballot_replica_up", describe_gauge, "1 if the replica is healthy and enabled";
    /// Routing-decision latency, seconds (one decision in [`crate::pipeline::ROUTE_SAMPLE`]).
    ROUTE_SECONDS = "ballot_route_seconds", describe_histogram, "Routing decision latency in seconds (one decision in 16 is timed)";
    /// Version of the voting table in use (1 at start, +1 per accepted reload).
    TABLE_VERSION = "ballot_table_version", describe_gauge, "Version of the voting table in use";
    /// 1 for the content hash of the table in use, 0 for the one it replaced, by `hash`.
    TABLE_CONTENT = "ballot_table_content", describe_gauge, "1 for the content hash of the table in use (label hash), 0 for the one it replaced";
    /// Seconds it took to read and compile the current voting table.
    TABLE_LOAD_SECONDS = "ballot_table_load_seconds", describe_gauge, "Seconds to read and compile the table";
    /// Unix time the current voting table was loaded.
    TABLE_LOADED_AT = "ballot_table_loaded_timestamp_seconds", describe_gauge, "Unix time the table was loaded";
    /// Rejected table reloads.
    RELOAD_FAILURES = "ballot_table_reload_failures_total", describe_counter, "Rejected voting-table reloads";
    /// Tables over virtual homes mapped onto a changed replica set and ramped in.
    RESCALES = "ballot_table_rescales_total", describe_counter, "Tables over virtual homes remapped onto a changed replica set";
    /// Progress of the table ramp, 0 to 1 (1 when no ramp runs).
    RAMP_PROGRESS = "ballot_table_ramp_progress", describe_gauge, "Table ramp progress, 0 to 1";
    /// Client requests refused, or routed by the fallback policy without a query, by kind
    /// ([`Unreadable::kind`](balancer_routes::Unreadable::kind)).
    CLIENT_ERRORS = "ballot_client_errors_total", describe_counter, "Client requests refused, or routed by the fallback policy without a query, by kind";
    /// Answers by where their work came from (`header`, `orca`, `shadow`, `none`).
    WORK_SOURCE = "ballot_work_source_total", describe_counter, "Answers by where their work came from";
    /// ORCA load reports that could not be read, and were ignored.
    LOAD_REPORTS_MALFORMED = "ballot_load_reports_malformed_total", describe_counter, "Unreadable ORCA load reports, ignored";
    /// Flash bytes a replica read, as it reported them, by replica.
    REPORTED_MISS_BYTES = "ballot_reported_miss_bytes_total", describe_counter, "Flash bytes read, as replicas report them";
    /// Flash bytes a replica read, as its shadow cache estimates them, by replica.
    SHADOW_MISS_BYTES = "ballot_shadow_miss_bytes_total", describe_counter, "Flash bytes read, as shadow caches estimate them";
    /// Postings bytes a replica's shadow cache holds, by replica.
    SHADOW_CACHED_BYTES = "ballot_shadow_cached_bytes", describe_gauge, "Postings bytes held by a shadow cache";
    /// Queries routed while a table ramps in, by the table that scored them (`old`, `new`).
    RAMP_QUERIES = "ballot_ramp_queries_total", describe_counter, "Queries routed during a table ramp, by the table that scored them";
    /// Shadow estimates of sampled queries' flash bytes, by `route`: `chosen` and
    /// `round-robin` (the mean over the live replicas); the difference is what routing saved.
    SAMPLED_MISS_BYTES = "ballot_sampled_miss_bytes_total", describe_counter, "Shadow estimates of sampled queries' flash bytes: at the chosen replica, and round-robin's mean";
    /// Memory the shadow caches and their term ids take, estimated.
    SHADOW_MEMORY_BYTES = "ballot_shadow_memory_bytes", describe_gauge, "Memory of the shadow caches, estimated";
    /// With `[shards]`: client queries fanned out, by answer (`full`, `partial`, `failed`).
    FANOUT = "ballot_fanout_total", describe_counter, "Sharded queries by answer: full, partial (a shard missing) or failed";
    /// With `[policy] cache_admission`: queries forwarded with a no-cache hint, and its terms.
    CACHE_HINTS = "ballot_cache_hints_total", describe_counter, "No-cache hints sent with forwarded queries (what = queries, terms)";
}

/// Upstream latency until the response headers, seconds, by replica: rendered with its
/// help text from [`crate::stats`], not through the recorder.
pub const UPSTREAM_SECONDS: &str = "ballot_upstream_seconds";

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
/// `stall-guard`, `no-vote`, or `stolen` when late binding moved it), `failover` on a retry, `fallback` for a request whose query
/// could not be read (routed blind by the fallback policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestReason {
    /// The policy's reason.
    Policy(Reason),
    /// A retry on another replica after a failed attempt.
    Failover,
    /// A request with no query read, routed by the fallback policy.
    Fallback,
}

impl RequestReason {
    /// Every reason, in the order of [`crate::stats::ReplicaStats`]'s request counters.
    pub const ALL: [RequestReason; Reason::ALL.len() + 2] = [
        RequestReason::Policy(Reason::ALL[0]),
        RequestReason::Policy(Reason::ALL[1]),
        RequestReason::Policy(Reason::ALL[2]),
        RequestReason::Policy(Reason::ALL[3]),
        RequestReason::Policy(Reason::ALL[4]),
        RequestReason::Policy(Reason::ALL[5]),
        RequestReason::Failover,
        RequestReason::Fallback,
    ];

    /// The policy's reason for a first attempt.
    pub fn of(reason: Reason) -> Self {
        RequestReason::Policy(reason)
    }

    /// Its place in [`RequestReason::ALL`] (and of [`crate::stats::ReplicaStats`]'s request counters).
    pub fn index(self) -> usize {
        match self {
            RequestReason::Policy(r) => Reason::ALL.iter().position(|&a| a == r).unwrap_or(0),
            RequestReason::Failover => Reason::ALL.len(),
            RequestReason::Fallback => Reason::ALL.len() + 1,
        }
    }

    /// The `reason` label (and the `x-ballot-reason` header).
    pub fn name(self) -> &'static str {
        match self {
            RequestReason::Policy(r) => r.as_str(),
            RequestReason::Failover => "failover",
            RequestReason::Fallback => "fallback",
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
