//! The routing-policy trait, the policy registry ([`PolicyKind`]) and [`build_policy`].
//!
//! Every policy sits behind one tiny trait, [`RoutingPolicy::route`], lives in one file
//! named after it (a type implementing [`RoutingPolicy`] and [`BuildPolicy`]), and is
//! listed once in the `registry!` invocation below, which declares its module and generates
//! [`PolicyKind`], [`PolicyKind::ALL`], the names (`FromStr`/`Display`) and
//! [`build_policy`]: adding a policy is one new file plus one line here. The golden and
//! property tests iterate [`PolicyKind::ALL`], so a new policy is tested at once (and its
//! golden test fails until its expected routing is written down). Policies are built off
//! the request path (rings, tables) and routing only reads them: `route` never allocates
//! and never locks, takes randomness only from the caller's seeded [`Rng`], and sends
//! queries only to live replicas.
//!
//! The voting policies follow Archer et al., "Cache-aware load balancing of data center
//! applications", PVLDB 2019; the bounded-load rule follows Mirrokni et al., "Consistent
//! hashing with bounded loads", SODA 2018. Each policy module names its own paper.

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;
use std::str::FromStr;
use std::sync::Arc;

use data::rng::Rng;
use data::table::VotingTable;
use data::tokenizer::Tokens;
use rustc_hash::FxHasher;

use crate::load::{LoadView, MAX_REPLICAS};
use crate::ring::{RingError, DEFAULT_VNODES, MAX_VNODES, MIN_VNODES};

pub mod admission;
#[cfg(test)]
mod test_view;
pub mod vote;

/// `HashMap` keyed by already-mixed 64-bit hashes; Fx is enough and is one multiply.
pub(crate) type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Default bound slack `eps` (DESIGN.md: bounded loads with epsilon = 0.05).
pub const DEFAULT_EPS: f64 = 0.05;
/// Default home share of `table` ([`vote`]): a replica whose votes reach 85% of the
/// chosen replica's is a home too, and the least loaded home takes the query. Chosen on
/// AOL (R = 8, 5% caches, standard split) among shares from 0.5 to 0.97.
pub const DEFAULT_HOMES: f64 = 0.85;
/// Default weight of the shadow caches' evidence in `table` ([`vote::add_cache_evidence`]):
/// none, the table alone. Weight 1 (the best of 0.25 to 4 on the standard evaluation) cuts
/// the simulated miss bytes but served fewer queries per second at a higher p99 live
/// (docs/results.md, "The peers side by side").
pub const DEFAULT_EVIDENCE: f64 = 0.0;
/// Postings bytes of a term with no known size: `16 + df` with `df = 5` (DESIGN.md).
pub const DEFAULT_TERM_BYTES: u32 = 21;

/// What a policy sees of a query: hashes only, so routing never touches strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryKey<'a> {
    /// `data::hash::term_hash(tokens.normalized())`.
    pub query_hash: u64,
    /// `data::hash::term_hash` of each term, in query order.
    pub term_hashes: &'a [u64],
}

impl<'a> QueryKey<'a> {
    /// A key from precomputed hashes.
    #[inline]
    pub fn new(query_hash: u64, term_hashes: &'a [u64]) -> Self {
        QueryKey {
            query_hash,
            term_hashes,
        }
    }
}

/// Hashes a tokenized query into a caller-owned buffer: fills `term_hashes` with the hash of
/// each term and returns the query hash, ready for [`QueryKey::new`]. Allocates only when
/// `term_hashes` must grow (never once it holds [`data::tokenizer::MAX_TERMS`]).
pub fn hash_tokens(tokens: &Tokens, term_hashes: &mut Vec<u64>) -> u64 {
    term_hashes.clear();
    term_hashes.extend(tokens.iter().map(data::hash::term_hash));
    data::hash::term_hash(tokens.normalized())
}

/// Why a query went where it went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The policy's first choice (top vote, ring owner).
    Vote,
    /// Another of the query's homes than the top vote, under the load cap, took it by
    /// having less backlog ([`vote`]: the home share); its cache holds the query's terms
    /// as the top vote's does.
    Home,
    /// The first choice was over the load cap (or not live); a later choice or a random
    /// jump took the query.
    Overflow,
    /// As [`Reason::Overflow`], but the first choice was full by the stall guard (its
    /// backlog, not its load: [`crate::load::Guarded`]). Only the vote rule tells the two
    /// apart; the ring policies report both as `Overflow`.
    Stalled,
    /// The policy does not vote (load-only policies), or no term voted.
    NoVote,
    /// Not a policy's reason: the query waited `steal_after_ms` in its chosen replica's
    /// queue, and another replica with a free place took it (the balancer's late binding).
    Stolen,
}

impl Reason {
    /// Every reason.
    pub const ALL: [Reason; 6] = [
        Reason::Vote,
        Reason::Home,
        Reason::Overflow,
        Reason::Stalled,
        Reason::NoVote,
        Reason::Stolen,
    ];

    /// `"vote"`, `"home"`, `"overflow"`, `"stall-guard"`, `"no-vote"` or `"stolen"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Vote => "vote",
            Reason::Home => "home",
            Reason::Overflow => "overflow",
            Reason::Stalled => "stall-guard",
            Reason::NoVote => "no-vote",
            Reason::Stolen => "stolen",
        }
    }

    /// Whether the query left its first choice because that was full (by its load or by
    /// the stall guard): what the overflow shares count.
    #[inline]
    pub fn is_overflow(self) -> bool {
        matches!(self, Reason::Overflow | Reason::Stalled)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A routing decision (policies return `None` instead when no replica is live).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decision {
    /// The chosen replica.
    pub replica: u16,
    /// Why.
    pub reason: Reason,
}

impl Decision {
    /// A decision for `replica` (which is below [`MAX_REPLICAS`]).
    #[inline]
    pub(crate) fn to(replica: usize, reason: Reason) -> Self {
        Decision {
            replica: replica as u16,
            reason,
        }
    }
}

/// The share of a query's top vote a replica's votes must reach for late binding to move
/// the query there ([`RoutingPolicy::alternatives`]): the best of docs/results.md's sweep
/// ("Late binding").
pub const DEFAULT_STEAL_SHARE: f64 = 0.75;

/// A routing policy: picks a live replica for a query.
pub trait RoutingPolicy: Send + Sync {
    /// Which policy this is.
    fn kind(&self) -> PolicyKind;
    /// Picks the replica for `query`, or `None` when no replica is live. Reads only
    /// `self`, `load` and `rng`; never allocates. Only replicas below both the policy's
    /// replica count and `load.replicas()` are candidates.
    fn route(&self, query: &QueryKey<'_>, load: &dyn LoadView, rng: &mut Rng) -> Option<Decision>;
    /// Whether `route` reads the shadow caches ([`LoadView::cached`]): a router keeps
    /// them for this policy (the simulators build them only then).
    fn reads_shadow(&self) -> bool {
        false
    }
    /// The replicas that may serve `query` in place of the one chosen without giving up
    /// its placement, as a bit mask: the balancer's late binding moves a waiting query
    /// only to these. Every replica for a policy that places nothing (the default); for
    /// a voting table, the replicas whose real votes reach `share` of the top vote.
    fn alternatives(&self, query: &QueryKey<'_>, share: f64) -> u64 {
        let _ = (query, share);
        u64::MAX
    }
}

/// Builds a registered policy from [`PolicyParams`]; every policy in the registry
/// implements it.
pub trait BuildPolicy: RoutingPolicy + Sized + 'static {
    /// Whether [`build_policy`] needs [`PolicyParams::table`].
    const NEEDS_TABLE: bool = false;

    /// Builds the policy. `params` has passed [`PolicyParams::validate`].
    fn build(params: &PolicyParams) -> Result<Self, PolicyError>;
}

/// Generates the policy registry from one line per policy:
/// `Variant => "name", module::Type;` (the module is declared here too).
macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident => $name:literal, $module:ident :: $ty:ident;)+) => {
        $(pub mod $module;)+

        /// The registry of routing policies.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum PolicyKind {
            $($(#[$doc])* $variant,)+
        }

        impl PolicyKind {
            /// Every policy, in registry order.
            pub const ALL: [PolicyKind; [$($name),+].len()] = [$(PolicyKind::$variant),+];

            /// The policy's name on the command line and in reports.
            pub fn name(self) -> &'static str {
                match self {
                    $(PolicyKind::$variant => $name,)+
                }
            }

            /// Whether [`build_policy`] needs [`PolicyParams::table`].
            pub fn needs_table(self) -> bool {
                match self {
                    $(PolicyKind::$variant => <$module::$ty as BuildPolicy>::NEEDS_TABLE,)+
                }
            }
        }

        /// Builds the policy `kind` from `params`. All validation happens here, once.
        pub fn build_policy(
            kind: PolicyKind,
            params: &PolicyParams,
        ) -> Result<Box<dyn RoutingPolicy>, PolicyError> {
            params.validate()?;
            Ok(match kind {
                $(PolicyKind::$variant => Box::new(<$module::$ty as BuildPolicy>::build(params)?),)+
            })
        }
    };
}

registry! {
    /// Next live replica in turn.
    RoundRobin => "round-robin", round_robin::RoundRobin;
    /// Uniformly random live replica.
    Random => "random", random::Random;
    /// Least loaded live replica.
    LeastLoaded => "least-loaded", least_loaded::LeastLoaded;
    /// Power of two choices.
    P2c => "p2c", p2c::P2c;
    /// Consistent hashing of the whole query.
    QueryHash => "query-hash", query_hash::QueryHash;
    /// Consistent hashing with bounded loads.
    ChBl => "ch-bl", ch_bl::ChBl;
    /// Random-jump consistent hashing.
    RjCh => "rj-ch", rj_ch::RjCh;
    /// Each term votes for `term_hash % R`, weighted by its postings bytes.
    TermVote => "term-vote", term_vote::TermVote;
    /// Votes from a learned voting table.
    Table => "table", table::TablePolicy;
    /// Elasticsearch's adaptive replica selection (C3's rank).
    Ars => "ars", ars::Ars;
    /// Solr's `replica.base:stable:hash`: the query's hash modulo the live replicas.
    StableHash => "stable-hash", stable_hash::StableHash;
    /// Prequal's hot-cold rule over probed replicas.
    Prequal => "prequal", prequal::Prequal;
    /// The LLM routers' rule over the shadow caches: where the query's bytes are cached.
    CacheAware => "cache-aware", cache_aware::CacheAware;
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown policy name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown routing policy `{name}`; valid policies: {valid}",
    valid = PolicyKind::ALL.map(PolicyKind::name).join(", ")
)]
pub struct ParsePolicyKindError {
    /// The name that did not parse.
    pub name: String,
}

impl FromStr for PolicyKind {
    type Err = ParsePolicyKindError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| ParsePolicyKindError { name: s.to_owned() })
    }
}

/// Why a policy could not be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// The replica count is 0 or above [`MAX_REPLICAS`].
    #[error("replicas must be between 1 and {MAX_REPLICAS}, got {0}")]
    Replicas(usize),
    /// `eps` is negative or NaN.
    #[error("eps must be a non-negative number, got {0}")]
    Eps(f64),
    /// The home share is outside `[0, 1]` (or NaN).
    #[error("homes must be between 0 and 1, got {0}")]
    Homes(f64),
    /// Too few (or too many) virtual nodes per replica.
    #[error("vnodes must be between {MIN_VNODES} and {MAX_VNODES}, got {0}")]
    Vnodes(usize),
    /// A parameter of a peer's policy ([`PeerParams::validate`]) or the evidence weight
    /// is out of its range.
    #[error("policy parameter {name} is out of range: {value}")]
    Param {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// The policy needs a voting table and none was given.
    #[error("policy `{0}` needs a voting table")]
    MissingTable(PolicyKind),
    /// The voting table was learned for a different replica count.
    #[error("the voting table has {table} replicas but the policy routes over {expected}")]
    TableReplicas {
        /// `VotingTable::replicas`.
        table: u16,
        /// `PolicyParams::replicas`.
        expected: usize,
    },
    /// A voting-table row is invalid (normally caught by the table's own validation).
    #[error("voting table row {row} (term `{term}`): {reason}")]
    TableRow {
        /// Row index.
        row: usize,
        /// The row's term.
        term: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The voting table has more votes than a `u32` index can address.
    #[error("the voting table has too many rows ({0})")]
    TableTooLarge(usize),
    /// The table's trained cache size (`ballot.train.capacity_bytes`) is not a byte count.
    #[error("the voting table's metadata {key} = {value:?} is not a byte count")]
    TableMetadata {
        /// The metadata key.
        key: &'static str,
        /// Its value.
        value: String,
    },
    /// A table over virtual homes cannot serve this replica count, or its homes are
    /// invalid ([`crate::virtual_homes`]).
    #[error("the voting table's virtual homes: {0}")]
    VirtualHomes(String),
}

impl From<RingError> for PolicyError {
    fn from(e: RingError) -> Self {
        match e {
            RingError::Replicas(n) => PolicyError::Replicas(n),
            RingError::Vnodes(n) => PolicyError::Vnodes(n),
        }
    }
}

/// Postings bytes per term hash, the weight of a term's vote in `term-vote` (and of a term
/// missing from the table in `table`). Sizes saturate at `u32::MAX`; unknown terms weigh
/// `default_bytes` ([`DEFAULT_TERM_BYTES`] unless told otherwise).
#[derive(Clone, Debug)]
pub struct TermBytes {
    bytes: FxHashMap<u64, u32>,
    default_bytes: u32,
}

impl TermBytes {
    /// An empty map whose unknown terms weigh `default_bytes`.
    pub fn new(default_bytes: u32) -> Self {
        TermBytes {
            bytes: FxHashMap::default(),
            default_bytes,
        }
    }

    /// Sets the postings bytes of the term with hash `term_hash` (saturating at `u32::MAX`).
    pub fn insert(&mut self, term_hash: u64, bytes: u64) {
        let b = u32::try_from(bytes).unwrap_or(u32::MAX);
        self.bytes.insert(term_hash, b);
    }

    /// Postings bytes of the term with hash `term_hash`, or the default.
    #[inline]
    pub fn get(&self, term_hash: u64) -> u32 {
        self.bytes
            .get(&term_hash)
            .copied()
            .unwrap_or(self.default_bytes)
    }

    /// The weight of unknown terms.
    pub fn default_bytes(&self) -> u32 {
        self.default_bytes
    }

    /// Number of terms with a known size.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True when no term has a known size.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

impl Default for TermBytes {
    fn default() -> Self {
        TermBytes::new(DEFAULT_TERM_BYTES)
    }
}

impl FromIterator<(u64, u64)> for TermBytes {
    /// `(term_hash, bytes)` pairs; unknown terms weigh [`DEFAULT_TERM_BYTES`].
    fn from_iter<I: IntoIterator<Item = (u64, u64)>>(iter: I) -> Self {
        let mut tb = TermBytes::default();
        for (h, b) in iter {
            tb.insert(h, b);
        }
        tb
    }
}

impl Extend<(u64, u64)> for TermBytes {
    fn extend<I: IntoIterator<Item = (u64, u64)>>(&mut self, iter: I) {
        for (h, b) in iter {
            self.insert(h, b);
        }
    }
}

/// How `cache-aware` scores the replicas once the loads are balanced ([`cache_aware`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CacheScorer {
    /// SGLang's router: the replica holding the largest share of the query's bytes if that
    /// share exceeds [`PeerParams::cache_threshold`], else the least loaded.
    Sglang,
    /// llm-d's weighted score: `prefix·match + queue·(max − q)/(max − min) + kv·(1 − fill)`,
    /// each term min–max normalised over the live replicas, the top score wins.
    LlmD {
        /// Weight of the cache match (llm-d's precise prefix-cache scorer).
        prefix: f64,
        /// Weight of the queue score.
        queue: f64,
        /// Weight of the free cache (llm-d's kv-cache utilisation scorer).
        kv: f64,
    },
}

impl CacheScorer {
    /// llm-d's weights in its current guide (prefix 2, queue 1, kv-cache 1).
    pub const LLM_D: CacheScorer = CacheScorer::LlmD {
        prefix: 2.0,
        queue: 1.0,
        kv: 1.0,
    };
}

/// The parameters of the peers' policies, each defaulting to the value its source ships
/// (`docs/peers.md` names the sources).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeerParams {
    /// `prequal`: replicas probed per query (the paper's `r_probe`, 3).
    pub probes: usize,
    /// `prequal`: the RIF quantile above which a probed replica is hot (`Q_RIF`, 0.84).
    pub q_rif: f64,
    /// `cache-aware`: the share of the query's bytes the best replica must hold for the
    /// query to go there (SGLang's `cache_threshold`, 0.3).
    pub cache_threshold: f64,
    /// `cache-aware`: the loads are imbalanced when `max − min` exceeds this (SGLang's
    /// `balance_abs_threshold`, 64)...
    pub balance_abs: u64,
    /// ...and `max` exceeds this times `min` (`balance_rel_threshold`, 1.5).
    pub balance_rel: f64,
    /// `cache-aware`: how balanced loads are scored (SGLang's rule by default).
    pub scorer: CacheScorer,
}

impl PeerParams {
    /// Checks the ranges: at least one probe, shares and quantiles in `[0, 1]`, a relative
    /// threshold of at least 1, finite non-negative weights.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let bad = |name: &'static str, value: f64| Err(PolicyError::Param { name, value });
        if self.probes == 0 || self.probes > MAX_REPLICAS {
            return bad("probes", self.probes as f64);
        }
        for (name, v) in [
            ("q_rif", self.q_rif),
            ("cache_threshold", self.cache_threshold),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(name, v);
            }
        }
        if !(self.balance_rel >= 1.0 && self.balance_rel.is_finite()) {
            return bad("balance_rel", self.balance_rel);
        }
        if let CacheScorer::LlmD { prefix, queue, kv } = self.scorer {
            for (name, w) in [("prefix", prefix), ("queue", queue), ("kv", kv)] {
                if !(w >= 0.0 && w.is_finite()) {
                    return bad(name, w);
                }
            }
        }
        Ok(())
    }
}

impl Default for PeerParams {
    fn default() -> Self {
        PeerParams {
            probes: 3,
            q_rif: 0.84,
            cache_threshold: 0.3,
            balance_abs: 64,
            balance_rel: 1.5,
            scorer: CacheScorer::Sglang,
        }
    }
}

/// Everything [`build_policy`] may need. Each policy reads only what it uses.
#[derive(Clone, Debug)]
pub struct PolicyParams {
    /// Number of replicas R (the table's index space), `1..=MAX_REPLICAS`.
    pub replicas: usize,
    /// Load-bound slack: a replica takes a query only while below
    /// `load_cap(eps, total, live)`. Default [`DEFAULT_EPS`].
    pub eps: f64,
    /// Virtual nodes per replica on the consistent-hashing ring. Default
    /// [`DEFAULT_VNODES`], at least [`MIN_VNODES`].
    pub vnodes: usize,
    /// `table`'s home share in `[0, 1]` ([`vote`]; 0: always the top vote). Default
    /// [`DEFAULT_HOMES`].
    pub homes: f64,
    /// `table`: the weight of the shadow caches' evidence ([`vote::add_cache_evidence`];
    /// 0: the table alone). Only views with shadow caches have evidence. Default
    /// [`DEFAULT_EVIDENCE`].
    pub evidence: f64,
    /// Postings bytes per term (term-vote weights; table fallback weights).
    pub term_bytes: Arc<TermBytes>,
    /// The voting table (required by [`PolicyKind::Table`]).
    pub table: Option<Arc<VotingTable>>,
    /// The peers' parameters.
    pub peers: PeerParams,
}

impl PolicyParams {
    /// Defaults for `replicas` replicas: eps 0.05, 160 vnodes, default term sizes, no table.
    pub fn new(replicas: usize) -> Self {
        PolicyParams {
            replicas,
            eps: DEFAULT_EPS,
            vnodes: DEFAULT_VNODES,
            homes: DEFAULT_HOMES,
            evidence: DEFAULT_EVIDENCE,
            term_bytes: Arc::new(TermBytes::default()),
            table: None,
            peers: PeerParams::default(),
        }
    }

    /// The same parameters with a voting table.
    pub fn with_table(mut self, table: Arc<VotingTable>) -> Self {
        self.table = Some(table);
        self
    }

    /// The same parameters with term sizes.
    pub fn with_term_bytes(mut self, term_bytes: Arc<TermBytes>) -> Self {
        self.term_bytes = term_bytes;
        self
    }

    /// Checks the parameters every policy shares (replicas, eps, vnodes).
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.replicas == 0 || self.replicas > MAX_REPLICAS {
            return Err(PolicyError::Replicas(self.replicas));
        }
        if self.eps.is_nan() || self.eps < 0.0 {
            return Err(PolicyError::Eps(self.eps));
        }
        if !(MIN_VNODES..=MAX_VNODES).contains(&self.vnodes) {
            return Err(PolicyError::Vnodes(self.vnodes));
        }
        if !(0.0..=1.0).contains(&self.homes) {
            return Err(PolicyError::Homes(self.homes));
        }
        if !(self.evidence >= 0.0 && self.evidence.is_finite()) {
            return Err(PolicyError::Param {
                name: "evidence",
                value: self.evidence,
            });
        }
        self.peers.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in PolicyKind::ALL {
            assert_eq!(k.name().parse::<PolicyKind>(), Ok(k));
            assert_eq!(k.to_string(), k.name());
        }
        let err = "nope".parse::<PolicyKind>().unwrap_err().to_string();
        assert!(err.contains("nope") && err.contains("term-vote"), "{err}");
    }

    #[test]
    fn term_bytes_saturate_and_default() {
        let mut tb = TermBytes::default();
        tb.insert(1, 100);
        tb.insert(2, u64::MAX);
        assert_eq!(tb.get(1), 100);
        assert_eq!(tb.get(2), u32::MAX);
        assert_eq!(tb.get(3), DEFAULT_TERM_BYTES);
        let tb: TermBytes = [(5, 7)].into_iter().collect();
        assert_eq!((tb.get(5), tb.get(6)), (7, 21));
    }

    #[test]
    fn params_are_validated() {
        let ok = PolicyParams::new(8);
        assert!(ok.validate().is_ok());
        for (bad, want) in [
            (PolicyParams::new(0), PolicyError::Replicas(0)),
            (PolicyParams::new(65), PolicyError::Replicas(65)),
            (
                PolicyParams {
                    vnodes: 99,
                    ..ok.clone()
                },
                PolicyError::Vnodes(99),
            ),
            (
                PolicyParams {
                    eps: -0.1,
                    ..ok.clone()
                },
                PolicyError::Eps(-0.1),
            ),
        ] {
            assert_eq!(bad.validate(), Err(want));
        }
        let nan = PolicyParams {
            eps: f64::NAN,
            ..ok.clone()
        };
        assert!(matches!(nan.validate(), Err(PolicyError::Eps(_))));
        assert!(matches!(
            build_policy(PolicyKind::Table, &ok).err(),
            Some(PolicyError::MissingTable(PolicyKind::Table))
        ));
    }
}
