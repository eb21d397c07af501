//! `term-vote`: each term votes for the replica `term_hash % R`, weighted by its postings
//! bytes, and the query goes to the top vote under the load bound — the voting scheme of
//! Archer et al., "Cache-aware load balancing of data center applications", PVLDB 2019, with
//! a hash in place of a learned table (DESIGN.md's "term-hash vote with bounded load";
//! docs/results.md has its miss bytes ratio on the standard evaluation).
//!
//! Weighting by bytes sends a query where its largest postings list is cached, since that
//! list costs the most flash bandwidth on a miss. The bounded-load pick (Mirrokni et al.,
//! SODA 2018, with the RJ-CH random jump of Chen et al.) is [`super::vote::pick`].

use std::sync::Arc;

use data::rng::Rng;

use crate::load::LoadView;
use crate::policy::vote::{pick, Scores, VoteSource};
use crate::policy::{
    BuildPolicy, Decision, PolicyError, PolicyKind, PolicyParams, QueryKey, RoutingPolicy,
    TermBytes,
};

/// Term-hash voting weighted by postings bytes, with bounded loads.
#[derive(Clone, Debug)]
pub struct TermVote {
    replicas: usize,
    eps: f64,
    term_bytes: Arc<TermBytes>,
}

impl TermVote {
    /// Term-hash voting over `params.replicas` replicas with `params.term_bytes` weights.
    pub fn new(params: &PolicyParams) -> Result<Self, PolicyError> {
        params.validate()?;
        Ok(TermVote {
            replicas: params.replicas,
            eps: params.eps,
            term_bytes: Arc::clone(&params.term_bytes),
        })
    }
}

impl VoteSource for TermVote {
    #[inline]
    fn add_votes(&self, term_hash: u64, scores: &mut Scores) {
        let r = (term_hash % self.replicas as u64) as usize;
        scores.add_vote(r, f64::from(self.term_bytes.get(term_hash)));
    }
}

impl BuildPolicy for TermVote {
    fn build(params: &PolicyParams) -> Result<Self, PolicyError> {
        Self::new(params)
    }
}

impl RoutingPolicy for TermVote {
    fn kind(&self) -> PolicyKind {
        PolicyKind::TermVote
    }

    fn route(&self, query: &QueryKey<'_>, load: &dyn LoadView, rng: &mut Rng) -> Option<Decision> {
        let scores = self.score(query.term_hashes);
        pick(&scores, self.replicas, self.eps, 0.0, load, rng)
    }
}
