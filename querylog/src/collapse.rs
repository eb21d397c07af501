//! Collapsing repeated queries, and the collector every reader pushes its rows into.
//!
//! The AOL logs have one row per click, so a search whose results were clicked three times
//! appears three times in a row. A cache sees it once. The rule: a record is a repeat when the
//! record kept just before it has the same query and the same user. Formats without a user
//! column give every record `user: None`, so there it means "the same line as the previous
//! one"; the Parquet format may mix users and nulls, and a null user only repeats a null user.
//! Timestamps are ignored, the first record of a run is kept.
//!
//! `Collector` applies the rule while reading, before the row's strings are allocated, and
//! counts malformed and blank lines for the [`ReadReport`](crate::ReadReport). It keeps the
//! records as [`LogRecord`]s, or (compact) in a `CompactBuilder` with only the first two
//! as records, for the preview.

use crate::compact::CompactBuilder;
use crate::{LogRecord, Malformed};

/// Records a compact collector keeps as [`LogRecord`]s (the preview of `on_start`).
pub(crate) const PREVIEW_RECORDS: usize = 2;

/// How many malformed lines a report keeps as examples.
pub const MAX_EXAMPLES: usize = 5;

/// Removes consecutive repeats (same query, same user) and returns the kept records and how
/// many were removed. Order is preserved; the first record of each run is kept.
pub fn collapse_repeats(mut records: Vec<LogRecord>) -> (Vec<LogRecord>, u64) {
    let before = records.len();
    records.dedup_by(|next, kept| next.query == kept.query && next.user == kept.user);
    let removed = (before - records.len()) as u64;
    (records, removed)
}

/// Accumulates records and the counters of a [`ReadReport`](crate::ReadReport) while a reader
/// walks a file.
#[derive(Debug)]
pub(crate) struct Collector {
    keep_repeats: bool,
    /// Every kept record, or only the first [`PREVIEW_RECORDS`] when `compact` is set.
    pub(crate) records: Vec<LogRecord>,
    /// Every kept record, compactly (see [`Collector::compact`]).
    pub(crate) compact: Option<CompactBuilder>,
    /// Records kept.
    pub(crate) kept: u64,
    /// The last kept record's query and user (the repeat rule compares against them).
    last: Option<(String, Option<String>)>,
    /// Data lines (or Parquet rows) seen, good or bad.
    pub(crate) lines: u64,
    pub(crate) malformed: u64,
    pub(crate) examples: Vec<Malformed>,
    pub(crate) collapsed: u64,
    pub(crate) blank: u64,
}

impl Collector {
    pub(crate) fn new(keep_repeats: bool) -> Self {
        Collector {
            keep_repeats,
            records: Vec::new(),
            compact: None,
            kept: 0,
            last: None,
            lines: 0,
            malformed: 0,
            examples: Vec::new(),
            collapsed: 0,
            blank: 0,
        }
    }

    /// A collector that keeps the records in a [`CompactBuilder`].
    pub(crate) fn compact(keep_repeats: bool) -> Self {
        Self::compact_into(keep_repeats, CompactBuilder::default())
    }

    /// A collector that adds the records to `builder` (which may hold earlier files').
    pub(crate) fn compact_into(keep_repeats: bool, builder: CompactBuilder) -> Self {
        Collector {
            compact: Some(builder),
            ..Collector::new(keep_repeats)
        }
    }

    /// Keeps a good row unless it repeats the previous kept record.
    #[inline]
    pub(crate) fn push(&mut self, ts: Option<i64>, user: Option<&str>, query: &str) {
        if !self.keep_repeats {
            match &mut self.last {
                Some((q, u)) if q == query && u.as_deref() == user => {
                    self.collapsed += 1;
                    return;
                }
                Some((q, u)) => {
                    q.clear();
                    q.push_str(query);
                    match (u.as_mut(), user) {
                        (Some(u), Some(user)) => {
                            u.clear();
                            u.push_str(user);
                        }
                        (_, user) => *u = user.map(str::to_owned),
                    }
                }
                None => self.last = Some((query.to_owned(), user.map(str::to_owned))),
            }
        }
        self.kept += 1;
        match &mut self.compact {
            Some(c) => {
                c.push(ts, user, query);
                if self.records.len() < PREVIEW_RECORDS {
                    self.records.push(LogRecord {
                        ts,
                        user: user.map(str::to_owned),
                        query: query.to_owned(),
                    });
                }
            }
            None => self.records.push(LogRecord {
                ts,
                user: user.map(str::to_owned),
                query: query.to_owned(),
            }),
        }
    }

    /// Counts a malformed line (`line` is its 1-based line number in the file, or row number
    /// in a Parquet file), keeping the first few as examples.
    #[cold]
    pub(crate) fn malformed(&mut self, line: u64, reason: impl Into<String>) {
        self.malformed += 1;
        if self.examples.len() < MAX_EXAMPLES {
            self.examples.push(Malformed {
                line,
                reason: reason.into(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(user: Option<&str>, query: &str) -> LogRecord {
        LogRecord {
            ts: None,
            user: user.map(str::to_owned),
            query: query.to_owned(),
        }
    }

    #[test]
    fn collector_and_function_agree() {
        let rows = [
            (Some("1"), "a"),
            (Some("1"), "a"),
            (Some("2"), "a"),
            (None, "a"),
            (None, "a"),
            (Some("2"), "b"),
            (Some("2"), "a"),
            (Some("2"), "a"),
        ];
        let records: Vec<_> = rows.iter().map(|&(u, q)| rec(u, q)).collect();
        let (kept, removed) = collapse_repeats(records);
        let mut c = Collector::new(false);
        for &(u, q) in &rows {
            c.push(None, u, q);
        }
        assert_eq!(removed, 3);
        assert_eq!(c.collapsed, 3);
        assert_eq!(c.records, kept);
        let mut c = Collector::new(true);
        for &(u, q) in &rows {
            c.push(None, u, q);
        }
        assert_eq!(c.collapsed, 0);
        assert_eq!(c.records.len(), rows.len());
        let mut c = Collector::compact(false);
        for &(u, q) in &rows {
            c.push(None, u, q);
        }
        assert_eq!((c.collapsed, c.kept), (3, kept.len() as u64));
        assert_eq!(c.records, kept[..PREVIEW_RECORDS]);
        let column = c.compact.unwrap().queries.finish();
        let queries: Vec<&str> = kept.iter().map(|r| r.query.as_str()).collect();
        assert_eq!(column.iter().collect::<Vec<_>>(), queries);
    }
}
