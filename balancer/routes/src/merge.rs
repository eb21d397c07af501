//! The merged answer of a sharded query. Each shard of a document-partitioned index answers
//! with its matching documents in its replica's ranking (ballot's replica: doc-id order,
//! the first `k`) and its match count; the merged answer is the first `k` of the union in
//! that order and the sum of the counts, so it equals what one index of every document
//! answers. The cache counts are summed too (the query's flash bytes over every shard).

use data::query::CacheCounts as Cache;
use serde::{Deserialize, Serialize};

/// One shard's answer, as ballot's replica writes it (other fields are ignored).
#[derive(Clone, Debug, Deserialize)]
pub struct ShardAnswer {
    /// The query's terms.
    #[serde(default)]
    pub terms: Vec<String>,
    /// Matching documents in the shard.
    pub total_hits: u64,
    /// The first of them, in ranking (doc-id) order.
    pub doc_ids: Vec<u64>,
    /// Cache accesses.
    #[serde(default)]
    pub cache: Cache,
    /// The shard the replica's index holds, as its manifest says.
    #[serde(default)]
    pub shard: Option<ShardOf>,
}

/// A shard of a document-partitioned index: `index` of `count`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub struct ShardOf {
    /// The shard.
    pub index: usize,
    /// Shards of the index.
    pub count: usize,
}

impl ShardAnswer {
    /// Why this answer, from `replica`, cannot stand for shard `shard` of `count`: its
    /// index is another shard, or the whole index (its documents would count twice).
    pub fn misplaced(&self, replica: &str, shard: usize, count: usize) -> Option<String> {
        let expected = ShardOf {
            index: shard,
            count,
        };
        match self.shard {
            Some(s) if s == expected => None,
            Some(s) => Some(format!(
                "replica {replica} serves shard {} of {}, but is configured for shard \
                 {shard} of {count}",
                s.index, s.count
            )),
            None => Some(format!(
                "replica {replica} names no shard in its answer (a whole index, or not a \
                 ballot replica), but is configured for shard {shard} of {count}"
            )),
        }
    }
}

/// A shard that did not answer.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct AbsentShard {
    /// The shard.
    pub shard: usize,
    /// The status its last attempt ended with.
    pub status: u16,
    /// Why.
    pub error: String,
}

/// Which shards answered.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Shards {
    /// Shards of the index.
    pub count: usize,
    /// The shards that answered.
    pub answered: Vec<usize>,
    /// The shards that did not.
    pub missing: Vec<AbsentShard>,
}

/// The client's answer to a sharded query.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Merged {
    /// The query's terms.
    pub terms: Vec<String>,
    /// Matching documents over the shards that answered.
    pub total_hits: u64,
    /// The first `k` of them, in ranking (doc-id) order.
    pub doc_ids: Vec<u64>,
    /// Cache accesses, summed.
    pub cache: Cache,
    /// The replica that answered for each shard that answered, in shard order.
    pub replicas: Vec<String>,
    /// Which shards answered.
    pub shards: Shards,
    /// Some shard is missing: the counts and documents are those of the others.
    pub partial: bool,
}

/// Merges the answers of the shards that answered (`(shard, replica, answer)`, in shard
/// order) into the first `k` documents and the summed counts.
pub fn merge(
    answered: Vec<(usize, String, ShardAnswer)>,
    missing: Vec<AbsentShard>,
    count: usize,
    k: usize,
) -> Merged {
    let mut doc_ids = Vec::with_capacity(answered.iter().map(|a| a.2.doc_ids.len()).sum());
    let (mut total_hits, mut cache) = (0u64, Cache::default());
    let mut terms = Vec::new();
    let mut shards = Vec::with_capacity(answered.len());
    let mut replicas = Vec::with_capacity(answered.len());
    for (shard, replica, a) in answered {
        doc_ids.extend_from_slice(&a.doc_ids);
        total_hits += a.total_hits;
        cache.add(&a.cache);
        if terms.is_empty() {
            terms = a.terms;
        }
        shards.push(shard);
        replicas.push(replica);
    }
    // Each shard sends its first k in order; the first k of the union are among them.
    doc_ids.sort_unstable();
    doc_ids.dedup();
    doc_ids.truncate(k);
    Merged {
        terms,
        total_hits,
        doc_ids,
        cache,
        replicas,
        partial: !missing.is_empty(),
        shards: Shards {
            count,
            answered: shards,
            missing,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(total: u64, ids: &[u64], miss: u64) -> ShardAnswer {
        ShardAnswer {
            terms: vec!["a".into(), "b".into()],
            total_hits: total,
            doc_ids: ids.to_vec(),
            cache: Cache {
                misses: 1,
                miss_bytes: miss,
                ..Cache::default()
            },
            shard: None,
        }
    }

    #[test]
    fn first_k_of_the_union_and_summed_counts() {
        let m = merge(
            vec![
                (0, "s0r1".into(), answer(7, &[2, 4, 8], 100)),
                (1, "s1r1".into(), answer(5, &[1, 3, 9], 50)),
            ],
            Vec::new(),
            2,
            3,
        );
        assert_eq!(m.doc_ids, vec![1, 2, 3]);
        assert_eq!(m.total_hits, 12);
        assert_eq!((m.cache.misses, m.cache.miss_bytes), (2, 150));
        assert_eq!(m.replicas, vec!["s0r1", "s1r1"]);
        assert_eq!(m.shards.answered, vec![0, 1]);
        assert!(!m.partial);
    }

    #[test]
    fn a_missing_shard_makes_the_answer_partial() {
        let gone = AbsentShard {
            shard: 1,
            status: 503,
            error: "no live replica".into(),
        };
        let m = merge(
            vec![(0, "s0r0".into(), answer(3, &[5], 10))],
            vec![gone.clone()],
            2,
            10,
        );
        assert!(m.partial);
        assert_eq!(m.total_hits, 3);
        assert_eq!(m.shards.missing, vec![gone]);
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["shards"]["missing"][0]["shard"], 1);
        assert_eq!(json["partial"], true);
    }

    #[test]
    fn reads_the_replicas_answer() {
        let text = r#"{"query":"a b","terms":["a","b"],"total_hits":4,"doc_ids":[1,7],
            "cache":{"hits":1,"misses":1,"hit_bytes":20,"miss_bytes":30},"took_us":5,
            "replica":"r0"}"#;
        let a: ShardAnswer = serde_json::from_str(text).unwrap();
        assert_eq!(
            (a.total_hits, a.doc_ids.clone(), a.cache.hit_bytes),
            (4, vec![1, 7], 20)
        );
    }
}
