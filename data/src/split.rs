//! Train/test splits of a query stream.
//!
//! The standard evaluation (DESIGN.md) shuffles the collapsed log with a fixed seed and
//! trains on the first 80%; a time split trains on everything before an instant and tests
//! on the rest, in log order (for train-on-the-past, test-on-the-future evaluations).
//! A split is an order of record indices plus the length of its train prefix, so callers
//! keep their records where they are.

use crate::rng::Rng;

/// How to split a log into a train and a test part.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Split {
    /// Shuffle with `seed`, then the first `train_frac` is train.
    Shuffle {
        /// Share of the records that form the train part.
        train_frac: f64,
        /// Seed of the shuffle.
        seed: u64,
    },
    /// Records before `at_ms` (unix ms) are train, the rest test, in log order.
    Time {
        /// The split time, unix milliseconds (UTC).
        at_ms: i64,
    },
}

impl Default for Split {
    fn default() -> Self {
        Split::Shuffle {
            train_frac: 0.8,
            seed: 1,
        }
    }
}

/// Why a split cannot be made.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SplitError {
    /// `train_frac` outside `[0, 1]`.
    #[error("train fraction {0} is not in [0, 1]")]
    BadFraction(f64),
    /// A time split needs a timestamp on every record.
    #[error("a time split needs timestamps, but record {index} has none (this log format has no time column)")]
    MissingTimestamp {
        /// The record's index.
        index: usize,
    },
    /// One side of the split would be empty.
    #[error("the split leaves the {0} part empty")]
    EmptyPart(&'static str),
}

/// Record indices in evaluation order; the first `train_len` are the train part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitOrder {
    /// Indices into the caller's records.
    pub order: Vec<u32>,
    /// Length of the train prefix of `order`.
    pub train_len: usize,
}

impl SplitOrder {
    /// Train indices.
    pub fn train(&self) -> &[u32] {
        &self.order[..self.train_len]
    }

    /// Test indices.
    pub fn test(&self) -> &[u32] {
        &self.order[self.train_len..]
    }
}

impl Split {
    /// Splits `n` records; `timestamp(i)` gives record `i`'s time for a time split.
    pub fn apply(
        &self,
        n: usize,
        timestamp: impl Fn(usize) -> Option<i64>,
    ) -> Result<SplitOrder, SplitError> {
        let n32 = u32::try_from(n).expect("more than 2^32 records");
        match *self {
            Split::Shuffle { train_frac, seed } => {
                if !(0.0..=1.0).contains(&train_frac) {
                    return Err(SplitError::BadFraction(train_frac));
                }
                let mut order: Vec<u32> = (0..n32).collect();
                Rng::new(seed).shuffle(&mut order);
                let train_len = (n as f64 * train_frac).floor() as usize;
                let split = SplitOrder { order, train_len };
                if split.test().is_empty() {
                    return Err(SplitError::EmptyPart("test"));
                }
                Ok(split)
            }
            Split::Time { at_ms } => {
                let mut train = Vec::new();
                let mut test = Vec::new();
                for i in 0..n {
                    let ts = timestamp(i).ok_or(SplitError::MissingTimestamp { index: i })?;
                    if ts < at_ms {
                        train.push(i as u32);
                    } else {
                        test.push(i as u32);
                    }
                }
                if test.is_empty() {
                    return Err(SplitError::EmptyPart("test"));
                }
                let train_len = train.len();
                train.extend(test);
                Ok(SplitOrder {
                    order: train,
                    train_len,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_split_is_deterministic_and_complete() {
        let s = Split::default();
        let a = s.apply(1000, |_| None).unwrap();
        let b = s.apply(1000, |_| None).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.train_len, 800);
        let mut all = a.order.clone();
        all.sort_unstable();
        assert_eq!(all, (0..1000).collect::<Vec<_>>());
        let other = Split::Shuffle {
            train_frac: 0.8,
            seed: 2,
        }
        .apply(1000, |_| None)
        .unwrap();
        assert_ne!(a.order, other.order);
    }

    #[test]
    fn time_split_keeps_log_order() {
        let ts = [5, 1, 9, 10, 3];
        let s = Split::Time { at_ms: 6 }.apply(5, |i| Some(ts[i])).unwrap();
        assert_eq!(s.train(), &[0, 1, 4]);
        assert_eq!(s.test(), &[2, 3]);
        assert_eq!(
            Split::Time { at_ms: 6 }.apply(2, |_| None),
            Err(SplitError::MissingTimestamp { index: 0 })
        );
        assert_eq!(
            Split::Time { at_ms: 100 }.apply(5, |i| Some(ts[i])),
            Err(SplitError::EmptyPart("test"))
        );
    }

    #[test]
    fn bad_fraction_is_rejected() {
        assert!(Split::Shuffle {
            train_frac: 1.5,
            seed: 1
        }
        .apply(10, |_| None)
        .is_err());
    }
}
