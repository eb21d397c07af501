//! `table`: routing by a learned voting table (Archer et al., "Cache-aware load balancing of
//! data center applications", PVLDB 2019), with bounded loads (Mirrokni et al., SODA 2018)
//! and the RJ-CH random jump (Chen et al.) when every voted replica is full.
//!
//! A table row `(term, replica, weight)` is one vote; a term may vote for several replicas
//! (hot terms are cached on each). At construction the rows are compiled into
//! [`TableVotes`]: an `FxHashMap<term_hash, (start, len)>` into one flat `Vec<(replica,
//! weight)>`, so scoring a query is one hash lookup per term and a scan of its few votes.
//!
//! * A row of weight 0 is kept as an abstention: the term is in the table and casts no vote
//!   for that replica. A term whose rows all weigh 0 abstains entirely.
//! * A term missing from the table casts a stand-in vote like `term-vote`: for replica
//!   `term_hash % R`, weighing its postings bytes ([`TermBytes`]). Stand-in votes are added
//!   to [`Scores`] as *fallback* votes, which rank strictly below any difference in real
//!   votes (the scores are compared as `(votes, fallback)` pairs). This is the limit of a
//!   weight `fallback_scale * bytes` with `fallback_scale -> 0`: however many missing terms
//!   a query has and however large their postings, they never outweigh any table vote, yet
//!   among themselves (a query with no table term, or replicas tied on table votes) they
//!   still rank by bytes. No scale has to be chosen, so none can be chosen wrong.
//! * Two distinct terms with the same 64-bit hash (vanishingly rare) share their votes.
//!
//! With shadow caches in the view ([`LoadView::cached`]) and `evidence > 0`, what the
//! caches hold of the query is added to the votes ([`add_cache_evidence`]): the table is
//! the prior, the caches the evidence. The pick is [`super::vote::pick`].

use std::sync::Arc;

use data::rng::Rng;
use data::table::VotingTable;

use crate::load::{LoadView, MAX_REPLICAS};
use crate::policy::vote::{add_cache_evidence, pick, top_ranked, Scores, VoteSource};
use crate::policy::{
    BuildPolicy, Decision, FxHashMap, PolicyError, PolicyKind, PolicyParams, QueryKey,
    RoutingPolicy, TermBytes,
};

/// A voting table compiled for routing: term hash to a slice of `(replica, weight)` votes.
#[derive(Clone, Debug)]
pub struct TableVotes {
    replicas: usize,
    index: FxHashMap<u64, (u32, u16)>,
    votes: Vec<(u16, f32)>,
    term_bytes: Arc<TermBytes>,
    /// The cache size the table was trained for (its `ballot.train.capacity_bytes`), if
    /// it says.
    trained_cache_bytes: Option<u64>,
}

impl TableVotes {
    /// Compiles `table` for `replicas` replicas; terms missing from it fall back to
    /// `term_bytes`-weighted stand-in votes.
    ///
    /// A table over virtual homes is first mapped onto the replicas
    /// ([`crate::virtual_homes::for_replicas`]).
    ///
    /// Errors if a plain table was learned for another replica count, or (for a table that
    /// skipped `data`'s validation) a row names a replica out of range or has a negative or
    /// non-finite weight.
    pub fn build(
        table: &VotingTable,
        replicas: usize,
        term_bytes: Arc<TermBytes>,
    ) -> Result<Self, PolicyError> {
        if replicas == 0 || replicas > MAX_REPLICAS {
            return Err(PolicyError::Replicas(replicas));
        }
        let mapped = crate::virtual_homes::for_replicas(table, replicas)
            .map_err(|e| PolicyError::VirtualHomes(e.to_string()))?;
        if let Some(mapped) = mapped {
            return Self::build(&mapped, replicas, term_bytes);
        }
        if usize::from(table.replicas) != replicas {
            return Err(PolicyError::TableReplicas {
                table: table.replicas,
                expected: replicas,
            });
        }
        let mut rows: Vec<(u64, u16, f32)> = Vec::with_capacity(table.rows.len());
        for (i, row) in table.rows.iter().enumerate() {
            let bad = |reason| PolicyError::TableRow {
                row: i,
                term: row.term.clone(),
                reason,
            };
            if usize::from(row.replica) >= replicas {
                return Err(bad("replica out of range"));
            }
            if !row.weight.is_finite() || row.weight < 0.0 {
                return Err(bad("weight must be finite and non-negative"));
            }
            rows.push((data::hash::term_hash(&row.term), row.replica, row.weight));
        }
        rows.sort_unstable_by_key(|&(h, r, _)| (h, r));

        let mut index = FxHashMap::default();
        index.reserve(rows.len());
        let mut votes: Vec<(u16, f32)> = Vec::with_capacity(rows.len());
        let mut i = 0;
        while i < rows.len() {
            let h = rows[i].0;
            let start = votes.len();
            while i < rows.len() && rows[i].0 == h {
                let (_, r, mut w) = rows[i];
                i += 1;
                // Only a hash collision repeats (hash, replica): merge.
                while i < rows.len() && rows[i].0 == h && rows[i].1 == r {
                    w += rows[i].2;
                    i += 1;
                }
                if w > 0.0 {
                    votes.push((r, w));
                }
            }
            let start32 =
                u32::try_from(start).map_err(|_| PolicyError::TableTooLarge(table.rows.len()))?;
            // At most one vote per replica, so len <= MAX_REPLICAS.
            let len = (votes.len() - start) as u16;
            index.insert(h, (start32, len));
        }
        if u32::try_from(votes.len()).is_err() {
            return Err(PolicyError::TableTooLarge(table.rows.len()));
        }
        votes.shrink_to_fit();
        // A size that does not parse is refused rather than read as "no size": the
        // admission rule would then apply at every cache size.
        let key = data::table::KEY_TRAINED_CACHE_BYTES;
        let trained_cache_bytes = match table.metadata.get(key) {
            None => None,
            Some(v) => Some(v.trim().parse::<u64>().map_err(|_| {
                PolicyError::TableMetadata {
                    key,
                    value: v.clone(),
                }
            })?),
        };
        Ok(TableVotes {
            replicas,
            index,
            votes,
            term_bytes,
            trained_cache_bytes,
        })
    }

    /// Number of replicas.
    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// Number of distinct terms (term hashes) in the table.
    pub fn terms(&self) -> usize {
        self.index.len()
    }

    /// Number of positive votes.
    pub fn vote_count(&self) -> usize {
        self.votes.len()
    }

    /// A 64-bit hash of what the table votes: the replica count and each term hash's
    /// `(replica, weight)` votes, in term-hash order. Equal for tables with equal votes
    /// however their rows were ordered or encoded, so balancers (or a balancer and a
    /// retraining job) can tell whether they serve the same table; versions cannot, as each
    /// balancer counts its own reloads.
    pub fn content_hash(&self) -> u64 {
        use data::hash::mix64;
        let mut terms: Vec<(u64, (u32, u16))> = self.index.iter().map(|(&h, &s)| (h, s)).collect();
        terms.sort_unstable_by_key(|&(h, _)| h);
        let mut acc = mix64(self.replicas as u64);
        for (h, (start, len)) in terms {
            acc = mix64(acc ^ h);
            let start = start as usize;
            for &(r, w) in &self.votes[start..start + usize::from(len)] {
                acc = mix64(acc ^ (u64::from(r) << 32 | u64::from(w.to_bits())));
            }
            // The vote count closes the term, so votes cannot slide between terms.
            acc = mix64(acc ^ u64::from(len));
        }
        acc
    }

    /// The per-replica cache size the table was trained for, if its metadata says
    /// (`ballot train` writes it).
    pub fn trained_cache_bytes(&self) -> Option<u64> {
        self.trained_cache_bytes
    }

    /// The positive votes of the term with hash `term_hash`, by replica; `None` if the term
    /// is not in the table (an abstaining term has an empty slice).
    #[inline]
    pub fn get(&self, term_hash: u64) -> Option<&[(u16, f32)]> {
        let &(start, len) = self.index.get(&term_hash)?;
        let start = start as usize;
        self.votes.get(start..start + usize::from(len))
    }
}

impl VoteSource for TableVotes {
    #[inline]
    fn add_votes(&self, term_hash: u64, scores: &mut Scores) {
        match self.get(term_hash) {
            Some(votes) => {
                for &(r, w) in votes {
                    scores.add_vote(usize::from(r), f64::from(w));
                }
            }
            None => {
                let r = (term_hash % self.replicas as u64) as usize;
                scores.add_fallback(r, f64::from(self.term_bytes.get(term_hash)));
            }
        }
    }
}

/// Routing by a voting table with bounded loads.
#[derive(Clone, Debug)]
pub struct TablePolicy {
    votes: Arc<TableVotes>,
    eps: f64,
    homes: f64,
    evidence: f64,
}

impl TablePolicy {
    /// Compiles `params.table` for `params.replicas` replicas.
    pub fn new(params: &PolicyParams) -> Result<Self, PolicyError> {
        params.validate()?;
        let table = params
            .table
            .as_ref()
            .ok_or(PolicyError::MissingTable(PolicyKind::Table))?;
        let votes = TableVotes::build(table, params.replicas, Arc::clone(&params.term_bytes))?;
        Ok(
            TablePolicy::from_votes(Arc::new(votes), params.eps, params.homes)
                .with_evidence(params.evidence),
        )
    }

    /// Routes by an already compiled table with slack `eps` and home share `homes`.
    pub fn from_votes(votes: Arc<TableVotes>, eps: f64, homes: f64) -> Self {
        TablePolicy {
            votes,
            eps,
            homes,
            evidence: 0.0,
        }
    }

    /// The same policy, adding the shadow caches' evidence with weight `evidence`
    /// ([`add_cache_evidence`]; 0: the table alone).
    pub fn with_evidence(mut self, evidence: f64) -> Self {
        self.evidence = evidence;
        self
    }

    /// The compiled table.
    pub fn votes(&self) -> &Arc<TableVotes> {
        &self.votes
    }

    /// Routes like [`RoutingPolicy::route`] and also returns the query's first choice,
    /// its top-ranked replica before the load bound ([`top_ranked`]), from the same scores:
    /// the learner prices each replica by the queries that would pick it first.
    pub fn route_ranked(
        &self,
        query: &QueryKey<'_>,
        load: &dyn LoadView,
        rng: &mut Rng,
    ) -> (Option<Decision>, Option<usize>) {
        let mut scores = self.votes.score(query.term_hashes);
        if self.evidence > 0.0 {
            add_cache_evidence(&mut scores, self.votes.replicas, self.evidence, load, query);
        }
        let top = top_ranked(&scores, self.votes.replicas);
        let decision = pick(
            &scores,
            self.votes.replicas,
            self.eps,
            self.homes,
            load,
            rng,
        );
        (decision, top)
    }
}

impl BuildPolicy for TablePolicy {
    const NEEDS_TABLE: bool = true;

    fn build(params: &PolicyParams) -> Result<Self, PolicyError> {
        Self::new(params)
    }
}

impl RoutingPolicy for TablePolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Table
    }

    fn route(&self, query: &QueryKey<'_>, load: &dyn LoadView, rng: &mut Rng) -> Option<Decision> {
        self.route_ranked(query, load, rng).0
    }

    fn reads_shadow(&self) -> bool {
        self.evidence > 0.0
    }

    fn alternatives(&self, query: &QueryKey<'_>, share: f64) -> u64 {
        self.votes
            .score(query.term_hashes)
            .near_top(self.votes.replicas, share)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::StaticLoad;
    use crate::policy::Reason;
    use data::table::TableRow;
    use std::collections::BTreeMap;

    fn table(replicas: u16, rows: &[(&str, u16, f32)]) -> VotingTable {
        VotingTable {
            replicas,
            rows: rows
                .iter()
                .map(|&(t, r, w)| TableRow {
                    term: t.to_owned(),
                    replica: r,
                    weight: w,
                })
                .collect(),
            metadata: BTreeMap::new(),
        }
    }

    #[test]
    fn rejects_tables_that_skipped_validation() {
        let tb = Arc::new(TermBytes::default());
        let build = |t: &VotingTable, r| TableVotes::build(t, r, Arc::clone(&tb));
        assert!(matches!(
            build(&table(4, &[("a", 4, 1.0)]), 4),
            Err(PolicyError::TableRow { row: 0, .. })
        ));
        for w in [-1.0, f32::NAN, f32::INFINITY] {
            assert!(matches!(
                build(&table(4, &[("a", 0, 1.0), ("b", 1, w)]), 4),
                Err(PolicyError::TableRow { row: 1, .. })
            ));
        }
        assert!(matches!(
            build(&table(0, &[]), 0),
            Err(PolicyError::Replicas(0))
        ));
        assert!(matches!(
            build(&table(4, &[]), 5),
            Err(PolicyError::TableReplicas {
                table: 4,
                expected: 5
            })
        ));
        let empty = build(&table(4, &[]), 4).expect("an empty table is valid");
        assert_eq!((empty.terms(), empty.vote_count()), (0, 0));
        // The trained cache size is a byte count or absent.
        let key = data::table::KEY_TRAINED_CACHE_BYTES;
        let with_size = |v: &str| {
            let mut t = table(4, &[("a", 0, 1.0)]);
            t.metadata.insert(key.to_owned(), v.to_owned());
            build(&t, 4)
        };
        assert_eq!(with_size("1000").unwrap().trained_cache_bytes(), Some(1000));
        assert_eq!(empty.trained_cache_bytes(), None);
        for bad in ["1.5e8", "-1", "", "lots"] {
            assert!(
                matches!(with_size(bad), Err(PolicyError::TableMetadata { value, .. }) if value == bad),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_first_choice_is_the_top_vote_wherever_the_bound_sends_the_query() {
        let tb = Arc::new(TermBytes::default());
        let rows = [("a", 2, 5.0), ("b", 3, 4.0), ("b", 1, 1.0)];
        let votes = TableVotes::build(&table(4, &rows), 4, tb).unwrap();
        let policy = TablePolicy::from_votes(Arc::new(votes), 0.05, 0.0);
        let hashes = [data::hash::term_hash("a"), data::hash::term_hash("b")];
        let key = QueryKey::new(0, &hashes);
        let route = |load: &StaticLoad| {
            let ranked = policy.route_ranked(&key, load, &mut Rng::new(7));
            assert_eq!(ranked.0, policy.route(&key, load, &mut Rng::new(7)));
            ranked
        };
        // Idle: the top vote takes it.
        let (d, top) = route(&StaticLoad::idle(4));
        assert_eq!((d.map(|d| d.replica), top), (Some(2), Some(2)));
        // Replica 2 over the bound: the query goes to 3, its first choice is still 2.
        let (d, top) = route(&StaticLoad::new(vec![0, 0, 9, 0]));
        assert_eq!(d.map(|d| (d.replica, d.reason)), Some((3, Reason::Overflow)));
        assert_eq!(top, Some(2));
        // No term, no vote: no first choice.
        let (d, top) = policy.route_ranked(
            &QueryKey::new(0, &[]),
            &StaticLoad::idle(4),
            &mut Rng::new(7),
        );
        assert_eq!((d.map(|d| d.reason), top), (Some(Reason::NoVote), None));
    }

    #[test]
    fn the_content_hash_names_the_votes_not_the_rows() {
        let tb = Arc::new(TermBytes::default());
        let hash = |r: u16, rows: &[(&str, u16, f32)]| {
            TableVotes::build(&table(r, rows), usize::from(r), Arc::clone(&tb))
                .unwrap()
                .content_hash()
        };
        let base = hash(4, &[("a", 0, 1.0), ("a", 2, 0.5), ("b", 1, 2.0)]);
        // The same votes in another row order.
        assert_eq!(base, hash(4, &[("b", 1, 2.0), ("a", 2, 0.5), ("a", 0, 1.0)]));
        // Any change to a vote, a term, the replica count or an abstention shows.
        for other in [
            hash(4, &[("a", 0, 1.0), ("a", 2, 0.25), ("b", 1, 2.0)]),
            hash(4, &[("a", 0, 1.0), ("a", 3, 0.5), ("b", 1, 2.0)]),
            hash(4, &[("a", 0, 1.0), ("a", 2, 0.5), ("c", 1, 2.0)]),
            hash(5, &[("a", 0, 1.0), ("a", 2, 0.5), ("b", 1, 2.0)]),
            hash(4, &[("a", 0, 1.0), ("a", 2, 0.5), ("b", 1, 2.0), ("z", 0, 0.0)]),
            hash(4, &[("a", 0, 1.0), ("a", 2, 0.5)]),
        ] {
            assert_ne!(base, other);
        }
    }
}
