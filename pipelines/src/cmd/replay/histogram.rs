//! Latency histograms of `ballot replay`: the `hdrhistogram` crate (Gil Tene's
//! HdrHistogram, Rust port), three significant digits, auto-resizing, behind the handful
//! of calls the replay makes (record, merge, count, min, max, mean, percentile), so a
//! recorded latency is known to within 0.1% of itself, memory stays fixed per histogram,
//! and each worker merges its histogram once at the end.

/// Counts of values (nanoseconds here), HdrHistogram-bucketed.
#[derive(Clone, Debug)]
pub struct Histogram(hdrhistogram::Histogram<u64>);

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty auto-resizing histogram with three significant digits.
    pub fn new() -> Self {
        // 3 significant digits is within the supported 0..=5: this cannot fail.
        Histogram(hdrhistogram::Histogram::new(3).expect("3 significant digits are valid"))
    }

    /// Records one value (the histogram grows to hold it; a value beyond what it can ever
    /// track saturates).
    pub fn record(&mut self, v: u64) {
        if self.0.record(v).is_err() {
            self.0.saturating_record(v);
        }
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        // Both auto-resize, so adding cannot run out of range.
        let _ = self.0.add(&other.0);
    }

    /// Values recorded.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The smallest value (0 when empty).
    pub fn min(&self) -> u64 {
        self.0.min()
    }

    /// The largest value (0 when empty).
    pub fn max(&self) -> u64 {
        self.0.max()
    }

    /// The mean (0 when empty).
    pub fn mean(&self) -> f64 {
        self.0.mean()
    }

    /// The value at percentile `p` (0–100).
    pub fn percentile(&self, p: f64) -> u64 {
        self.0.value_at_quantile(p / 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_within_a_thousandth() {
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.record(v * 1_000);
        }
        assert_eq!(h.len(), 100_000);
        for (p, want) in [
            (50.0, 50_000_000.0),
            (99.0, 99_000_000.0),
            (99.9, 99_900_000.0),
        ] {
            let got = h.percentile(p) as f64;
            assert!((got / want - 1.0).abs() < 1e-3, "p{p}: {got} vs {want}");
        }
        let mut other = Histogram::new();
        other.record(u64::MAX);
        h.merge(&other);
        assert_eq!(h.len(), 100_001);
        assert!(h.max() > 100_000_000);
        assert_eq!(Histogram::new().percentile(99.0), 0);
    }
}
