//! A log's records in little memory, for logs of tens of millions of rows.
//!
//! A query log repeats itself: the AOL log has about 1.9 records per distinct query text, a
//! search engine's daily log far more. [`QueryColumn`] stores each distinct text once and a
//! `u32` id per record, so a log costs its distinct texts plus 4 bytes a record, instead of
//! a `String` (24 bytes, a heap block and its allocator overhead) a record. Timestamps are
//! one `i64` a record ([`Times`]), users only their distinct count.
//!
//! [`read_log_compact`](crate::read_log_compact) fills these while reading; nothing per
//! record is allocated.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::{ReadReport, TimeRange};
use data::hash::term_hash;

/// Query texts in record order, each distinct text stored once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueryColumn {
    /// The distinct texts, concatenated in order of first appearance.
    text: String,
    /// `ends[d]` is where distinct text `d` ends in `text` (it starts at `ends[d - 1]`).
    ends: Vec<usize>,
    /// Each record's distinct-text id.
    ids: Vec<u32>,
}

impl QueryColumn {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when there are no records.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Record `i`'s query text. Panics when `i >= len()`, like slice indexing.
    #[inline]
    pub fn get(&self, i: usize) -> &str {
        self.distinct(self.ids[i])
    }

    /// Distinct text `d`. Panics when `d >= distinct_len()`.
    #[inline]
    pub fn distinct(&self, d: u32) -> &str {
        let d = d as usize;
        let start = if d == 0 { 0 } else { self.ends[d - 1] };
        &self.text[start..self.ends[d]]
    }

    /// Number of distinct texts.
    pub fn distinct_len(&self) -> usize {
        self.ends.len()
    }

    /// The distinct texts, in order of first appearance.
    pub fn distinct_texts(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.ends.len() as u32).map(|d| self.distinct(d))
    }

    /// The texts in record order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.ids.iter().map(|&d| self.distinct(d))
    }

    /// Heap bytes held (texts, offsets and ids), for memory reports.
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity()
            + self.ends.capacity() * std::mem::size_of::<usize>()
            + self.ids.capacity() * std::mem::size_of::<u32>()
    }
}

impl<'a> FromIterator<&'a str> for QueryColumn {
    fn from_iter<I: IntoIterator<Item = &'a str>>(iter: I) -> Self {
        let mut b = QueryColumnBuilder::default();
        for q in iter {
            b.push(q);
        }
        b.finish()
    }
}

/// Builds a [`QueryColumn`] one record at a time.
#[derive(Debug, Default)]
pub struct QueryColumnBuilder {
    column: QueryColumn,
    /// Text hash → the first distinct id with that hash.
    by_hash: FxHashMap<u64, u32>,
    /// Texts whose hash collided with a different earlier text (practically never).
    collided: FxHashMap<String, u32>,
}

impl QueryColumnBuilder {
    /// Appends a record with text `query`.
    pub fn push(&mut self, query: &str) {
        let h = term_hash(query);
        let id = match self.by_hash.get(&h) {
            None => {
                let id = self.add(query);
                self.by_hash.insert(h, id);
                id
            }
            Some(&id) if self.column.distinct(id) == query => id,
            Some(_) => match self.collided.get(query) {
                Some(&id) => id,
                None => {
                    let id = self.add(query);
                    self.collided.insert(query.to_owned(), id);
                    id
                }
            },
        };
        self.column.ids.push(id);
    }

    fn add(&mut self, query: &str) -> u32 {
        let id = u32::try_from(self.column.ends.len()).expect("more than 2^32 distinct queries");
        self.column.text.push_str(query);
        self.column.ends.push(self.column.text.len());
        id
    }

    /// True when nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.column.ids.is_empty()
    }

    /// The column, with spare capacity released.
    pub fn finish(self) -> QueryColumn {
        let mut c = self.column;
        c.text.shrink_to_fit();
        c.ends.shrink_to_fit();
        c.ids.shrink_to_fit();
        c
    }
}

/// Optional timestamps, one `i64` a record (unix ms, UTC).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Times {
    /// `NONE` marks a record without a time.
    ms: Vec<i64>,
    missing: usize,
}

impl Times {
    /// Stands for "no time" (no real log is dated 292 million years BC).
    const NONE: i64 = i64::MIN;

    /// Appends a record's time.
    pub fn push(&mut self, ts: Option<i64>) {
        match ts {
            Some(t) if t != Self::NONE => self.ms.push(t),
            _ => {
                self.ms.push(Self::NONE);
                self.missing += 1;
            }
        }
    }

    /// Record `i`'s time.
    #[inline]
    pub fn get(&self, i: usize) -> Option<i64> {
        let t = self.ms[i];
        (t != Self::NONE).then_some(t)
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.ms.len()
    }

    /// True when there are no records.
    pub fn is_empty(&self) -> bool {
        self.ms.is_empty()
    }

    /// True when at least one record and every record has a time.
    pub fn complete(&self) -> bool {
        !self.ms.is_empty() && self.missing == 0
    }

    /// Heap bytes held, for memory reports.
    pub fn heap_bytes(&self) -> usize {
        self.ms.capacity() * std::mem::size_of::<i64>()
    }

    /// The times that are present, in record order.
    pub fn present(&self) -> impl Iterator<Item = i64> + '_ {
        self.ms.iter().copied().filter(|&t| t != Self::NONE)
    }
}

impl FromIterator<Option<i64>> for Times {
    fn from_iter<I: IntoIterator<Item = Option<i64>>>(iter: I) -> Self {
        let mut t = Times::default();
        for ts in iter {
            t.push(ts);
        }
        t
    }
}

/// What [`CompactLog`]'s reader accumulates.
#[derive(Debug, Default)]
pub(crate) struct CompactBuilder {
    pub(crate) queries: QueryColumnBuilder,
    pub(crate) times: Times,
    pub(crate) users: FxHashSet<Box<str>>,
}

impl CompactBuilder {
    #[inline]
    pub(crate) fn push(&mut self, ts: Option<i64>, user: Option<&str>, query: &str) {
        self.queries.push(query);
        self.times.push(ts);
        if let Some(u) = user {
            if !self.users.contains(u) {
                self.users.insert(u.into());
            }
        }
    }
}

/// A log read into a [`QueryColumn`]: the kept records' queries and times in file order,
/// and how reading went.
#[derive(Clone, Debug)]
pub struct CompactLog {
    /// The kept records' query texts.
    pub queries: QueryColumn,
    /// Their times.
    pub times: Times,
    /// Distinct users, when the log has a user column (0 when it has none).
    pub distinct_users: usize,
    /// What reading found.
    pub report: ReadReport,
}

impl CompactLog {
    /// Keeps only the records whose time is inside `range` and returns how many were
    /// dropped; `Err(i)` (nothing changed) when record `i` has no time to judge.
    pub fn retain_in(&mut self, range: &TimeRange) -> Result<u64, usize> {
        if range.is_all() {
            return Ok(0);
        }
        if let Some(i) = (0..self.times.len()).find(|&i| self.times.get(i).is_none()) {
            return Err(i);
        }
        let mut queries = QueryColumnBuilder::default();
        let mut times = Times::default();
        for (i, q) in self.queries.iter().enumerate() {
            let t = self.times.get(i);
            if t.is_some_and(|t| range.contains(t)) {
                queries.push(q);
                times.push(t);
            }
        }
        let dropped = (self.queries.len() - queries.column.ids.len()) as u64;
        self.queries = queries.finish();
        self.times = times;
        Ok(dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_keeps_order_and_stores_each_text_once() {
        let rows = ["a b", "c", "a b", "", "c", "d", ""];
        let col: QueryColumn = rows.iter().copied().collect();
        assert_eq!(col.len(), rows.len());
        assert_eq!(col.iter().collect::<Vec<_>>(), rows);
        assert_eq!(col.distinct_len(), 4);
        assert_eq!(
            col.distinct_texts().collect::<Vec<_>>(),
            ["a b", "c", "", "d"]
        );
        assert_eq!(col.ids, [0, 1, 0, 2, 1, 3, 2]);
        assert_eq!(col.get(5), "d");
    }

    #[test]
    fn a_hash_collision_keeps_both_texts() {
        // Force a collision: plant a wrong id under the second text's hash.
        let mut b = QueryColumnBuilder::default();
        b.push("first");
        b.by_hash.insert(term_hash("second"), 0);
        b.push("second");
        b.push("second");
        b.push("first");
        let col = b.finish();
        assert_eq!(
            col.iter().collect::<Vec<_>>(),
            ["first", "second", "second", "first"]
        );
        assert_eq!(col.distinct_len(), 2);
    }

    #[test]
    fn times_mark_missing_records() {
        let t: Times = [Some(5), None, Some(-1)].into_iter().collect();
        assert_eq!((t.get(0), t.get(1), t.get(2)), (Some(5), None, Some(-1)));
        assert!(!t.complete());
        assert_eq!(t.present().collect::<Vec<_>>(), [5, -1]);
        let full: Times = [Some(1), Some(2)].into_iter().collect();
        assert!(full.complete());
        assert!(!Times::default().complete());
    }
}
