//! Zipf sampling without tables: rejection-inversion (Hörmann and Derflinger, "Rejection-
//! inversion to generate variates from monotone discrete distributions", ACM TOMACS 1996),
//! in the form Apache Commons RNG uses (`RejectionInversionZipfSampler`). Constant memory and
//! a few `ln`/`exp` per draw for any number of elements and any exponent `s > 0`, which lets
//! the query pool hold millions of ids.

use crate::rng::Rng;

/// Zipf distribution over ranks `1..=n`: `P(k) ∝ k^-s`.
#[derive(Clone, Debug)]
pub(crate) struct Zipf {
    n: u64,
    s: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    squeeze: f64,
    /// `1 / Σ_{k=1..n} k^-s`.
    norm: f64,
}

/// `ln(1 + x) / x`, continuous at 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(exp(x) - 1) / x`, continuous at 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

impl Zipf {
    /// `n >= 1` ranks with exponent `s > 0` (callers validate; `n` is raised to 1 and `s` to
    /// a tiny positive value otherwise).
    pub(crate) fn new(n: u64, s: f64) -> Self {
        let n = n.max(1);
        let s = if s.is_finite() && s > 1e-6 { s } else { 1e-6 };
        let mut z = Zipf {
            n,
            s,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            squeeze: 0.0,
            norm: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(n as f64 + 0.5);
        z.squeeze = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z.norm = 1.0 / z.harmonic();
        z
    }

    /// `x^-s`.
    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    /// `∫_1^x t^-s dt`.
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.s) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (helper1(t) * x).exp()
    }

    /// `Σ_{k=1..n} k^-s`: exact for the first 10,000 ranks, then the midpoint rule (relative
    /// error far below 1e-9 there).
    fn harmonic(&self) -> f64 {
        const EXACT: u64 = 10_000;
        let m = self.n.min(EXACT);
        let mut sum = 0.0;
        for k in (1..=m).rev() {
            sum += self.h(k as f64);
        }
        if self.n > m {
            sum += self.h_integral(self.n as f64 + 0.5) - self.h_integral(m as f64 + 0.5);
        }
        sum
    }

    /// Probability of rank `k` (1-based).
    pub(crate) fn pmf(&self, k: u64) -> f64 {
        if k == 0 || k > self.n {
            0.0
        } else {
            self.h(k as f64) * self.norm
        }
    }

    /// A rank in `1..=n`.
    pub(crate) fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_integral_n + rng.unit() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n as f64);
            if k - x <= self.squeeze || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_pmf() {
        for &(n, s) in &[(1u64, 1.0), (5, 0.5), (50, 1.0), (1000, 1.3), (20, 2.5)] {
            let z = Zipf::new(n, s);
            let total: f64 = (1..=n).map(|k| z.pmf(k)).sum();
            assert!((total - 1.0).abs() < 1e-9, "n={n} s={s} total={total}");
            let mut rng = Rng::new(42);
            let draws = 200_000;
            let mut counts = vec![0u32; n as usize + 1];
            for _ in 0..draws {
                let k = z.sample(&mut rng);
                assert!((1..=n).contains(&k));
                counts[k as usize] += 1;
            }
            for k in 1..=n.min(5) {
                let expect = z.pmf(k) * draws as f64;
                let got = f64::from(counts[k as usize]);
                assert!(
                    (got - expect).abs() < 5.0 * expect.sqrt() + 5.0,
                    "n={n} s={s} k={k} got={got} expect={expect}"
                );
            }
        }
    }

    #[test]
    fn huge_n_normalizes() {
        let z = Zipf::new(3_000_000, 0.8);
        let exact: f64 = (1..=3_000_000u64).map(|k| (k as f64).powf(-0.8)).sum();
        assert!((z.pmf(1) * exact - 1.0).abs() < 1e-9);
    }
}
