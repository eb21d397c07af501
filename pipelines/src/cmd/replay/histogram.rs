//! A log-bucketed latency histogram in the style of HdrHistogram (Gil Tene): values below
//! 2^SUB_BITS have a bucket each; above, every power-of-two octave is split into 2^(SUB_BITS-1)
//! equal buckets, so any recorded value is known to within 1/2^(SUB_BITS-1) (0.8%) of itself.
//! Fixed memory (7,424 counters for the whole `u64` range), O(1) record, mergeable.

/// Bits of sub-bucket resolution.
const SUB_BITS: u32 = 8;
/// Buckets per octave above the linear range.
const HALF: u64 = 1 << (SUB_BITS - 1);
/// Total buckets: the linear range plus one half-range per possible shift.
const BUCKETS: usize = ((64 - SUB_BITS + 1) as usize) * HALF as usize + HALF as usize;

/// Counts of values (nanoseconds here) in logarithmic buckets.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    min: u64,
    max: u64,
    sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

fn index(v: u64) -> usize {
    if v < 2 * HALF {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - (SUB_BITS - 1);
    (u64::from(shift) * HALF + (v >> shift)) as usize
}

/// The largest value that lands in bucket `i`.
fn highest(i: usize) -> u64 {
    let i = i as u64;
    if i < 2 * HALF {
        return i;
    }
    let shift = i / HALF - 1;
    let m = i % HALF + HALF;
    // The last bucket's upper end is u64::MAX; avoid overflowing the shift.
    ((m + 1) << shift).wrapping_sub(1).max(m << shift)
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }

    /// Records one value.
    pub fn record(&mut self, v: u64) {
        self.counts[index(v)] += 1;
        self.total += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    /// Values recorded.
    pub fn len(&self) -> u64 {
        self.total
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Smallest value recorded (0 when empty).
    pub fn min(&self) -> u64 {
        if self.total == 0 {
            0
        } else {
            self.min
        }
    }

    /// Largest value recorded.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Mean of the recorded values (exact; 0 when empty).
    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// The value at percentile `p` (0..=100): the highest value equivalent to the
    /// `ceil(p/100 * n)`-th smallest recorded value, capped at the maximum (0 when empty).
    pub fn percentile(&self, p: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((p / 100.0) * self.total as f64).ceil().max(1.0) as u64;
        let rank = rank.min(self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return highest(i).min(self.max).max(self.min);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut prev = 0;
        for v in (0..5000u64).chain([1 << 20, (1 << 40) + 12345, u64::MAX / 3, u64::MAX]) {
            let i = index(v);
            assert!(i < BUCKETS, "{v} -> {i}");
            assert!(highest(i) >= v, "{v}: bucket {i} ends at {}", highest(i));
            if i > 0 {
                assert!(highest(i - 1) < v, "{v} belongs before bucket {i}");
            }
            // Relative width at most 1/HALF.
            let lo = if i > 0 { highest(i - 1) + 1 } else { 0 };
            assert!((highest(i) - lo) as f64 <= v as f64 / HALF as f64 + 1.0);
            if v < 5000 {
                assert!(i >= prev);
                prev = i;
            }
        }
        assert_eq!(highest(BUCKETS - 1), u64::MAX);
    }

    #[test]
    fn percentiles_of_a_uniform_range() {
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        for (p, want) in [(50.0, 50_000.0), (90.0, 90_000.0), (99.0, 99_000.0)] {
            let got = h.percentile(p) as f64;
            assert!((got - want).abs() / want < 0.01, "p{p}: {got}");
        }
        assert_eq!(h.percentile(100.0), 100_000);
        assert_eq!(h.percentile(0.0), 1);
        assert_eq!(h.len(), 100_000);
        assert!((h.mean() - 50_000.5).abs() < 1e-6);
        let mut g = Histogram::new();
        g.record(1_000_000);
        g.merge(&h);
        assert_eq!(g.len(), 100_001);
        assert_eq!(g.max(), 1_000_000);
        assert_eq!(Histogram::new().percentile(99.0), 0);
    }
}
