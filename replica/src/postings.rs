//! A postings list as the RAM cache holds it: still compressed (the stored d-gap varints),
//! plus a skip table, so a cached list costs about its stored bytes (what the cache
//! accounts) instead of four bytes per doc id.
//!
//! This is the self-indexing inverted file of Moffat & Zobel ("Self-indexing inverted files
//! for fast text retrieval", TOIS 1996): every [`SKIP_EVERY`] ids, a skip entry records the
//! block's first doc id, the doc before it (the delta base) and the block's byte offset. A
//! [`Cursor`] walks the list in order and `advance_to` jumps over whole blocks by binary
//! search on the skip table, then decodes inside one block. The skip table adds 12 bytes per
//! 128 ids (under 10% of a one-byte-per-id list).
//!
//! Dense lists (`df ≥ N/8`) are held as a bitmap of `N` bits instead: that is never more
//! memory than their stored bytes (about one byte per id), and it turns membership tests
//! into one bit probe and the intersection of two dense lists into a word-wise AND (the
//! hybrid list/bitmap layout of Roaring, Chambi et al. 2016, at list granularity).
//!
//! A list is built only from bytes that passed verification
//! ([`crate::index::format::decode_list`]), so decoding here cannot fail; it still never
//! panics on malformed bytes (it just ends the list).

use crate::varint;

/// Doc ids per skip block.
pub const SKIP_EVERY: usize = 128;

/// One skip entry: block `b` starts at id index `b * SKIP_EVERY`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Skip {
    /// First doc id of the block.
    first: u32,
    /// The doc id before the block (0 for the first block): the base of its first gap.
    base: u32,
    /// Byte offset of the block's first varint in the payload.
    offset: u32,
}

/// A postings list in memory: compressed and skip-indexed, or a bitmap when dense.
#[derive(Debug, PartialEq, Eq)]
pub struct Postings {
    df: u32,
    repr: Repr,
}

#[derive(Debug, PartialEq, Eq)]
enum Repr {
    Compressed {
        payload: Box<[u8]>,
        skips: Box<[Skip]>,
    },
    Bitmap {
        words: Box<[u64]>,
    },
}

/// True when a list of `df` ids among `docs` is held as a bitmap.
pub fn is_dense(df: u64, docs: u32) -> bool {
    df * 8 >= u64::from(docs) && docs > 0
}

/// Builds a [`Postings`] while its ids are decoded once (for verification).
#[derive(Debug)]
pub(crate) struct PostingsBuilder {
    skips: Vec<Skip>,
    words: Option<Vec<u64>>,
    count: usize,
    prev: u32,
}

impl PostingsBuilder {
    /// A builder for a list announced as `df` ids below `docs`.
    pub(crate) fn new(df: u32, docs: u32) -> Self {
        let dense = is_dense(u64::from(df), docs);
        PostingsBuilder {
            skips: Vec::new(),
            words: dense.then(|| vec![0u64; (docs as usize).div_ceil(64)]),
            count: 0,
            prev: 0,
        }
    }

    /// Records the id at `offset` (the byte offset of its varint). Ids must be below the
    /// `docs` given to [`new`](Self::new) (the caller verifies).
    #[inline]
    pub(crate) fn push(&mut self, doc: u32, offset: usize) {
        match &mut self.words {
            Some(words) => {
                if let Some(w) = words.get_mut(doc as usize / 64) {
                    *w |= 1u64 << (doc % 64);
                }
            }
            None => {
                if self.count.is_multiple_of(SKIP_EVERY) {
                    self.skips.push(Skip {
                        first: doc,
                        base: self.prev,
                        offset: offset as u32,
                    });
                }
            }
        }
        self.prev = doc;
        self.count += 1;
    }

    /// The list over `payload`, whose ids were all pushed.
    pub(crate) fn finish(self, payload: &[u8]) -> Postings {
        let repr = match self.words {
            Some(words) => Repr::Bitmap {
                words: words.into_boxed_slice(),
            },
            None => Repr::Compressed {
                payload: payload.into(),
                skips: self.skips.into_boxed_slice(),
            },
        };
        Postings {
            df: self.count as u32,
            repr,
        }
    }
}

impl Postings {
    /// Encodes sorted distinct ids below `docs`, as a bitmap if dense (tests and tools).
    pub fn from_ids(ids: &[u32], docs: u32) -> Postings {
        let mut payload = Vec::new();
        let mut b = PostingsBuilder::new(ids.len() as u32, docs);
        let mut prev = 0;
        for &d in ids {
            b.push(d, payload.len());
            varint::put(&mut payload, d - prev);
            prev = d;
        }
        b.finish(&payload)
    }

    /// Number of doc ids.
    pub fn len(&self) -> usize {
        self.df as usize
    }

    /// True when the list has no ids.
    pub fn is_empty(&self) -> bool {
        self.df == 0
    }

    /// True when held as a bitmap.
    pub fn is_bitmap(&self) -> bool {
        matches!(self.repr, Repr::Bitmap { .. })
    }

    /// Bytes of memory it holds (payload and skip table, or bitmap).
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Compressed { payload, skips } => {
                payload.len() + skips.len() * std::mem::size_of::<Skip>()
            }
            Repr::Bitmap { words } => words.len() * 8,
        }
    }

    /// Whether `doc` is in a bitmap list (None for a compressed one).
    #[inline]
    fn bit(&self, doc: u32) -> Option<bool> {
        match &self.repr {
            Repr::Bitmap { words } => Some(
                words
                    .get(doc as usize / 64)
                    .is_some_and(|w| w & (1u64 << (doc % 64)) != 0),
            ),
            Repr::Compressed { .. } => None,
        }
    }

    /// A cursor before the first id.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor {
            list: self,
            pos: 0,
            base: 0,
            current: None,
            block: 0,
        }
    }

    /// All ids, decoded (tests and small lists).
    pub fn to_vec(&self) -> Vec<u32> {
        let mut c = self.cursor();
        std::iter::from_fn(|| c.next_doc()).collect()
    }
}

/// An in-order walk over a [`Postings`].
#[derive(Debug)]
pub struct Cursor<'a> {
    list: &'a Postings,
    /// Byte offset of the next varint.
    pos: usize,
    /// The last decoded doc (delta base of the next varint).
    base: u32,
    /// The doc the cursor is on.
    current: Option<u32>,
    /// A lower bound on the current block (narrows the skip search).
    block: usize,
}

impl Cursor<'_> {
    /// Moves to the next id.
    #[inline]
    pub fn next_doc(&mut self) -> Option<u32> {
        let p = match &self.list.repr {
            Repr::Compressed { payload, .. } => payload,
            Repr::Bitmap { words } => {
                let from = self.current.map_or(0, |c| u64::from(c) + 1);
                let d = next_set_bit(words, from)?;
                self.current = Some(d);
                return Some(d);
            }
        };
        let v = varint::read(p, &mut self.pos).ok()?;
        let doc = self.base.wrapping_add(v);
        self.base = doc;
        self.current = Some(doc);
        Some(doc)
    }

    /// Moves to the first id `>= target` at or after the current one.
    pub fn advance_to(&mut self, target: u32) -> Option<u32> {
        if let Some(c) = self.current {
            if c >= target {
                return Some(c);
            }
        }
        let all = match &self.list.repr {
            Repr::Compressed { skips, .. } => skips,
            Repr::Bitmap { words } => {
                let d = next_set_bit(words, u64::from(target))?;
                self.current = Some(d);
                return Some(d);
            }
        };
        let skips = &all[self.block.min(all.len())..];
        // The last block starting at or before target.
        let n = skips.partition_point(|s| s.first <= target);
        if n > 0 {
            let b = self.block + n - 1;
            let s = all[b];
            if s.offset as usize > self.pos {
                self.pos = s.offset as usize;
                self.base = s.base;
            }
            self.block = b;
        }
        loop {
            let d = self.next_doc()?;
            if d >= target {
                return Some(d);
            }
        }
    }
}

/// The first set bit at or after `from`.
#[inline]
fn next_set_bit(words: &[u64], from: u64) -> Option<u32> {
    let mut i = (from / 64) as usize;
    let mut w = words.get(i)? & (u64::MAX << (from % 64));
    loop {
        if w != 0 {
            return Some((i as u64 * 64 + u64::from(w.trailing_zeros())) as u32);
        }
        i += 1;
        w = *words.get(i)?;
    }
}

/// Intersects lists: the size of the intersection and its first `k` ids, in doc order.
/// Document-at-a-time over the shortest list (Culpepper & Moffat, "Efficient set
/// intersection for inverted indexing", TOIS 2010): bitmaps answer membership with one
/// probe, compressed lists skip through their skip tables; when every list is a bitmap the
/// intersection is a word-wise AND. No lists: an empty answer.
pub fn intersect(lists: &[&Postings], k: usize) -> (u64, Vec<u32>) {
    let mut lists: Vec<&Postings> = lists.to_vec();
    lists.sort_by_key(|l| l.len());
    let Some((first, rest)) = lists.split_first() else {
        return (0, Vec::new());
    };
    if rest.is_empty() {
        let mut c = first.cursor();
        let top = std::iter::from_fn(|| c.next_doc()).take(k).collect();
        return (first.len() as u64, top);
    }
    if let Some(words) = all_bitmaps(&lists) {
        return intersect_bitmaps(&words, k);
    }
    let (bitmaps, compressed): (Vec<&Postings>, Vec<&Postings>) =
        rest.iter().partition(|l| l.is_bitmap());
    let mut lead = first.cursor();
    let mut others: Vec<Cursor<'_>> = compressed.iter().map(|l| l.cursor()).collect();
    let (mut total, mut top) = (0u64, Vec::with_capacity(k.min(1024)));
    let mut candidate = lead.next_doc();
    'docs: while let Some(doc) = candidate {
        for o in others.iter_mut() {
            match o.advance_to(doc) {
                None => break 'docs,
                Some(x) if x > doc => {
                    candidate = lead.advance_to(x);
                    continue 'docs;
                }
                Some(_) => {}
            }
        }
        if bitmaps.iter().all(|b| b.bit(doc) == Some(true)) {
            total += 1;
            if top.len() < k {
                top.push(doc);
            }
        }
        candidate = lead.next_doc();
    }
    (total, top)
}

fn all_bitmaps<'a>(lists: &[&'a Postings]) -> Option<Vec<&'a [u64]>> {
    lists
        .iter()
        .map(|l| match &l.repr {
            Repr::Bitmap { words } => Some(&words[..]),
            Repr::Compressed { .. } => None,
        })
        .collect()
}

fn intersect_bitmaps(words: &[&[u64]], k: usize) -> (u64, Vec<u32>) {
    let n = words.iter().map(|w| w.len()).min().unwrap_or(0);
    let (mut total, mut top) = (0u64, Vec::with_capacity(k.min(1024)));
    for i in 0..n {
        let mut w = words.iter().fold(u64::MAX, |acc, ws| acc & ws[i]);
        total += u64::from(w.count_ones());
        while w != 0 && top.len() < k {
            top.push((i * 64) as u32 + w.trailing_zeros());
            w &= w - 1;
        }
    }
    (total, top)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(lists: &[Vec<u32>]) -> Vec<u32> {
        let mut out = lists[0].clone();
        for l in &lists[1..] {
            out.retain(|d| l.binary_search(d).is_ok());
        }
        out
    }

    #[test]
    fn cursor_advance_matches_a_lower_bound() {
        let mut rng = data::rng::Rng::new(5);
        for len in [0usize, 1, 5, 127, 128, 129, 1000, 5000] {
            let mut ids: Vec<u32> = (0..len).map(|_| rng.below(50_000) as u32).collect();
            ids.sort_unstable();
            ids.dedup();
            let p = Postings::from_ids(&ids, u32::MAX);
            assert_eq!(p.to_vec(), ids);
            // Increasing targets from one cursor, with random strides.
            let mut c = p.cursor();
            let mut t = 0u32;
            while t < 51_000 {
                let want = ids.get(ids.partition_point(|&x| x < t)).copied();
                assert_eq!(c.advance_to(t), want, "len {len} target {t}");
                t += rng.below(2000) as u32;
            }
        }
    }

    #[test]
    fn bitmaps_walk_and_skip_like_lists() {
        let ids: Vec<u32> = (0..1000).filter(|d| d % 3 == 0 || d % 7 == 0).collect();
        let p = Postings::from_ids(&ids, 1000);
        assert!(p.is_bitmap());
        assert_eq!(p.to_vec(), ids);
        assert_eq!(p.heap_bytes(), 16 * 8);
        let mut c = p.cursor();
        for t in [0, 1, 4, 5, 500, 998, 999] {
            let want = ids.get(ids.partition_point(|&x| x < t)).copied();
            assert_eq!(c.advance_to(t), want, "target {t}");
        }
        assert_eq!(c.advance_to(1000), None);
    }

    #[test]
    fn intersection_matches_the_naive_one() {
        let mut rng = data::rng::Rng::new(3);
        for _ in 0..300 {
            let lists: Vec<Vec<u32>> = (0..1 + rng.below(4))
                .map(|_| {
                    let p = 1 + rng.below(10);
                    (0..3000u32).filter(|_| rng.below(10) < p).collect()
                })
                .collect();
            let want = naive(&lists);
            // Sparse lists are compressed, dense ones (df >= 375 of 3000) bitmaps.
            let postings: Vec<Postings> =
                lists.iter().map(|l| Postings::from_ids(l, 3000)).collect();
            let refs: Vec<&Postings> = postings.iter().collect();
            let (total, first) = intersect(&refs, 10);
            assert_eq!(total, want.len() as u64);
            assert_eq!(first, want[..want.len().min(10)]);
        }
        assert_eq!(intersect(&[], 10), (0, vec![]));
    }
}
