//! Large-system predictions the simulator is tested against (`tests/queueing_theory.rs`).
//!
//! **Power of d choices** (the supermarket model: Vvedenskaya, Dobrushin and Karpelevich
//! 1996; Mitzenmacher, "The power of two choices in randomized load balancing", 2001).
//! N servers with exponential service of rate μ, Poisson arrivals at rate λμN, each job
//! joining the shortest of d queues drawn at random. As N → ∞ the fraction of servers with
//! at least i jobs tends to `s_i = λ^((d^i − 1)/(d − 1))` (`s_i = λ^i` for d = 1, random
//! assignment: independent M/M/1 queues). The queues become independent (propagation of
//! chaos), so an arriving job sees d independent draws of that law and joins the least
//! loaded: it finds at least i jobs with probability `s_i^d`. Counting itself, the number
//! `N` of jobs it waits for has the tail
//!
//! `P(N ≥ i) = s_{i−1}^d = λ^((d^i − d)/(d − 1))` (`λ^(i−1)` for d = 1), i ≥ 1,
//!
//! and `E[N] = Σ_{i≥1} λ^((d^i − d)/(d − 1))` (2.61 at λ = 0.9, d = 2; 10 for d = 1).
//! Service is first come first served, so the job's sojourn is the remaining service of
//! the job in service plus the services of the others and its own: with exponential
//! service (memoryless) that is `N` independent service times, an Erlang(N, μ), and the
//! mean sojourn is `E[N]/μ`.
//!
//! **Split-and-replicate** (Ghosh and Ramchandran, 2018): a job is k chunks; each chunk
//! goes to the shortest of d servers drawn from the pool, and the job is done when its
//! slowest chunk is. With chunks of mean service `m = 1/k` and per-server load ρ, each
//! server receives chunks at rate `ρ/m`: a chunk's delay is the d-choice sojourn at
//! λ = ρ in time units of m. The k chunks land on k servers whose queues are
//! asymptotically independent, so the job delay is the maximum of k independent chunk
//! delays, with CDF `F(t)^k` and mean `E[max] = ∫_0^∞ (1 − F(t)^k) dt`.
//!
//! A chunk's delay law ([`DelayLaw`]) is a mixture over what the chunk finds when it
//! arrives (the queue-length law seen at arrival) of the delay of a first-come first-served
//! queue holding that much work (the service times "convolved"). For the exponential and
//! the shifted exponential `S = δ + Exp(β)` every such delay is a constant plus an
//! Erlang(n, β), so the mixture's CDF is a sum of shifted Erlang CDFs:
//!
//! - [`Model::ClosedForm`]: the exponential fixed point above, `N` whole service times,
//!   `F(t) = Σ_n P(N = n) · Erlang(n, β)(t − nδ)`. Exact (in the limit) for the
//!   exponential; for the shifted exponential it ignores that the queue-length law and the
//!   residual of the job in service depend on the service law.
//! - [`Model::MeanField`]: the mean-field fixed point for the shifted exponential itself.
//!   The deterministic part is approximated by an Erlang of [`STAGES`] stages, so a server
//!   is a Markov chain on (jobs i, phase j of the job in service); the fraction `x(i, j)`
//!   of servers in each state follows the mean-field ODE (arrivals at rate `λ/m` per
//!   server join a server with exactly i jobs at rate `(λ/m)(s_i^d − s_{i+1}^d)`, spread
//!   over its phases in proportion to `x(i, j)`; phases advance at their rates; the last
//!   phase completes the job), integrated to its fixed point from the exponential one. A
//!   chunk joining `(i, j)` then waits for the remainder of the job in service (the
//!   deterministic stages left plus `Exp(β)`), `i − 1` whole services and its own. For the
//!   exponential this reproduces the closed form (a unit test checks it).
//!
//! The integral is Simpson's rule on a grid fine enough that its error is negligible next
//! to the tolerances.

use super::config::Service;

/// Erlang stages approximating the deterministic part of a shifted exponential in the
/// mean-field model.
pub const STAGES: usize = 40;

/// `P(N ≥ i)`: the chance that a job arriving under power of `d` choices at per-server
/// load `lambda` (exponential service) waits for at least `i` jobs (itself included).
pub fn pod_tail(lambda: f64, d: usize, i: usize) -> f64 {
    if i == 0 {
        return 1.0;
    }
    if d == 1 {
        return lambda.powi(i as i32 - 1);
    }
    let d = d as f64;
    // (d^i − d)/(d − 1), in floating point (+inf for huge i: tail 0).
    lambda.powf((d.powi(i as i32) - d) / (d - 1.0))
}

/// `E[N] = Σ_{i≥1} P(N ≥ i)`: the mean sojourn in units of the mean service time.
pub fn pod_mean_jobs(lambda: f64, d: usize) -> f64 {
    if d == 1 {
        return 1.0 / (1.0 - lambda);
    }
    (1..64)
        .map(|i| pod_tail(lambda, d, i))
        .take_while(|&t| t > 0.0)
        .sum()
}

/// M/M/1 mean sojourn time `1/(μ − λ)`.
pub fn mm1_mean_sojourn(lambda: f64, mu: f64) -> f64 {
    1.0 / (mu - lambda)
}

/// M/G/1 mean sojourn time (Pollaczek–Khinchine): `E[S] + λE[S²]/(2(1 − λE[S]))`.
pub fn mg1_mean_sojourn(lambda: f64, service: &Service) -> Option<f64> {
    let (m1, m2) = (service.mean()?, service.second_moment()?);
    Some(m1 + lambda * m2 / (2.0 * (1.0 - lambda * m1)))
}

/// `P(Erlang(n, rate) ≤ x)`.
fn erlang_cdf(n: usize, rate: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let y = rate * x;
    // 1 − e^{−y} Σ_{j<n} y^j/j!, the sum built term by term.
    let (mut term, mut sum) = (1.0f64, 1.0f64);
    for j in 1..n {
        term *= y / j as f64;
        sum += term;
    }
    (1.0 - (-y).exp() * sum).clamp(0.0, 1.0)
}

/// Which delay law a prediction uses (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// The exponential's closed-form fixed point, whole service times.
    ClosedForm,
    /// The mean-field fixed point of the service law itself.
    MeanField,
}

/// One component of a delay law: with probability `p`, `det` plus an Erlang of `stages`
/// exponential stages.
#[derive(Clone, Copy, Debug)]
struct Part {
    p: f64,
    det: f64,
    stages: usize,
}

/// A task's delay law: a mixture of shifted Erlangs of a common rate.
#[derive(Clone, Debug)]
pub struct DelayLaw {
    parts: Vec<Part>,
    rate: f64,
    /// The service mean (a time scale for the integration).
    scale: f64,
}

/// `(δ, β)` of the exponential or shifted exponential; None for other laws.
fn shifted_exp(service: &Service) -> Option<(f64, f64)> {
    match *service {
        Service::Exp { mean } => Some((0.0, 1.0 / mean)),
        Service::ShiftedExp { shift, mean } => Some((shift, 1.0 / (mean - shift))),
        _ => None,
    }
}

impl DelayLaw {
    /// The delay law of one task under power of `d` choices at per-server load `lambda`
    /// (below 1) with `service` (exponential or shifted exponential; None otherwise).
    pub fn new(lambda: f64, d: usize, service: &Service, model: Model) -> Option<DelayLaw> {
        let (shift, rate) = shifted_exp(service)?;
        let scale = service.mean()?;
        if !(0.0..1.0).contains(&lambda) || d == 0 {
            return None;
        }
        let parts = match model {
            Model::ClosedForm => closed_form_parts(lambda, d, shift),
            Model::MeanField if d == 1 && shift == 0.0 => closed_form_parts(lambda, d, shift),
            Model::MeanField => mean_field_parts(lambda, d, shift, rate)?,
        };
        Some(DelayLaw { parts, rate, scale })
    }

    /// `P(delay ≤ t)`.
    pub fn cdf(&self, t: f64) -> f64 {
        self.parts
            .iter()
            .map(|q| q.p * erlang_cdf(q.stages, self.rate, t - q.det))
            .sum()
    }

    /// The mean delay.
    pub fn mean(&self) -> f64 {
        self.parts
            .iter()
            .map(|q| q.p * (q.det + q.stages as f64 / self.rate))
            .sum()
    }

    /// The mean of the largest of `k` independent delays: `∫ (1 − F(t)^k) dt`.
    pub fn mean_max(&self, k: usize) -> f64 {
        let tail = |t: f64| 1.0 - self.cdf(t).powi(k as i32);
        let mut upper = self.scale;
        while tail(upper) > 1e-13 {
            upper *= 2.0;
        }
        let steps = 40_000usize; // even
        let h = upper / steps as f64;
        let mut sum = tail(0.0) + tail(upper);
        for i in 1..steps {
            let w = if i % 2 == 1 { 4.0 } else { 2.0 };
            sum += w * tail(i as f64 * h);
        }
        sum * h / 3.0
    }
}

/// `N` whole service times with the exponential fixed point's `P(N = n)`.
fn closed_form_parts(lambda: f64, d: usize, shift: f64) -> Vec<Part> {
    let mut parts = Vec::new();
    for n in 1..=100_000 {
        let (a, b) = (pod_tail(lambda, d, n), pod_tail(lambda, d, n + 1));
        parts.push(Part {
            p: a - b,
            det: n as f64 * shift,
            stages: n,
        });
        if b < 1e-15 {
            break;
        }
    }
    parts
}

/// The mean-field fixed point of power of `d` with `shift + Exp(rate)` service; see the
/// module docs. None if it does not settle.
fn mean_field_parts(lambda: f64, d: usize, shift: f64, rate: f64) -> Option<Vec<Part>> {
    // Queue lengths 1..=L; the mass beyond is checked to be negligible.
    const L: usize = 48;
    let k = if shift > 0.0 { STAGES } else { 0 };
    let phases = k + 1;
    let nu = if k > 0 { k as f64 / shift } else { 0.0 };
    let mean = shift + 1.0 / rate;
    let a = lambda / mean;
    let idx = |i: usize, j: usize| (i - 1) * phases + j;
    // Start from the exponential fixed point, each queue's phases in proportion to their
    // mean durations.
    let mut x = vec![0.0f64; L * phases];
    let s_exp = |i: usize| lambda.powf(((d as f64).powi(i as i32) - 1.0) / (d as f64 - 1.0));
    for i in 1..=L {
        let share = if d == 1 {
            lambda.powi(i as i32) - lambda.powi(i as i32 + 1)
        } else {
            s_exp(i) - s_exp(i + 1)
        };
        for j in 0..phases {
            let dur = if j < k { 1.0 / nu } else { 1.0 / rate };
            x[idx(i, j)] = share * dur / mean;
        }
    }
    let mut dx = vec![0.0f64; L * phases];
    let mut s = vec![0.0f64; L + 2];
    let fill_s = |x: &[f64], s: &mut [f64]| {
        s[L + 1] = 0.0;
        for i in (1..=L).rev() {
            s[i] = s[i + 1] + x[(i - 1) * phases..i * phases].iter().sum::<f64>();
        }
        s[0] = 1.0;
    };
    let dt = 0.5 / (nu + rate + a * d as f64);
    let mut settled = false;
    for step in 0..20_000_000u64 {
        fill_s(&x, &mut s);
        dx.iter_mut().for_each(|v| *v = 0.0);
        // Arrivals.
        dx[idx(1, 0)] += a * (1.0 - s[1].powi(d as i32));
        for i in 1..=L {
            let width = s[i] - s[i + 1];
            if width <= 0.0 {
                continue;
            }
            let join = a * (s[i].powi(d as i32) - s[i + 1].powi(d as i32)) / width;
            for j in 0..phases {
                let f = join * x[idx(i, j)];
                dx[idx(i, j)] -= f;
                if i < L {
                    dx[idx(i + 1, j)] += f;
                }
            }
        }
        // Service.
        for i in 1..=L {
            for j in 0..k {
                let f = nu * x[idx(i, j)];
                dx[idx(i, j)] -= f;
                dx[idx(i, j + 1)] += f;
            }
            let f = rate * x[idx(i, k)];
            dx[idx(i, k)] -= f;
            if i > 1 {
                dx[idx(i - 1, 0)] += f;
            }
        }
        let mut change = 0.0f64;
        for (v, dv) in x.iter_mut().zip(&dx) {
            *v += dt * dv;
            change = change.max(dv.abs());
        }
        if step % 64 == 0 && change < 1e-12 * a {
            settled = true;
            break;
        }
    }
    fill_s(&x, &mut s);
    if !settled || s[L] > 1e-12 {
        return None;
    }
    // What an arriving chunk finds, and the delay it then has.
    let mut parts = vec![Part {
        p: 1.0 - s[1].powi(d as i32),
        det: shift,
        stages: 1,
    }];
    for i in 1..L {
        let width = s[i] - s[i + 1];
        if width <= 0.0 {
            continue;
        }
        let join = (s[i].powi(d as i32) - s[i + 1].powi(d as i32)) / width;
        for j in 0..phases {
            let p = join * x[idx(i, j)];
            if p < 1e-16 {
                continue;
            }
            // Deterministic stages left of the job in service (midpoint of the current one).
            let left = if j < k { (k - j) as f64 - 0.5 } else { 0.0 };
            parts.push(Part {
                p,
                det: left * shift / k.max(1) as f64 + i as f64 * shift,
                stages: i + 1,
            });
        }
    }
    Some(parts)
}

/// The large-system mean delay of a job of `k` chunks, each served under power of `d`
/// choices at per-server load `lambda` with `service` (exponential or shifted
/// exponential; None otherwise).
pub fn split_mean_delay(
    lambda: f64,
    d: usize,
    k: usize,
    service: &Service,
    model: Model,
) -> Option<f64> {
    Some(DelayLaw::new(lambda, d, service, model)?.mean_max(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supermarket_numbers() {
        assert!((pod_mean_jobs(0.9, 2) - 2.6140).abs() < 1e-3);
        assert!((pod_mean_jobs(0.9, 1) - 10.0).abs() < 1e-9);
        assert_eq!(pod_tail(0.5, 2, 1), 1.0);
        assert_eq!(pod_tail(0.5, 2, 2), 0.25);
    }

    #[test]
    fn closed_form_means() {
        let exp = Service::Exp { mean: 0.5 };
        for lambda in [0.3, 0.9] {
            let law = DelayLaw::new(lambda, 2, &exp, Model::ClosedForm).unwrap();
            assert!((law.mean() - 0.5 * pod_mean_jobs(lambda, 2)).abs() < 1e-9);
            assert!((law.mean_max(1) - law.mean()).abs() < 1e-6);
        }
        // Random assignment, one chunk: M/M/1.
        let exp1 = Service::Exp { mean: 1.0 };
        let law = DelayLaw::new(0.5, 1, &exp1, Model::ClosedForm).unwrap();
        assert!((law.mean_max(1) - mm1_mean_sojourn(0.5, 1.0)).abs() < 1e-6);
        // The max of two i.i.d. Exp(1) has mean 1.5 (no queueing).
        let law = DelayLaw::new(1e-9, 2, &exp1, Model::ClosedForm).unwrap();
        assert!((law.mean_max(2) - 1.5).abs() < 1e-6);
    }

    #[test]
    fn mean_field_reproduces_the_exponential_fixed_point() {
        let exp = Service::Exp { mean: 1.0 };
        for lambda in [0.5, 0.9] {
            let mf = DelayLaw::new(lambda, 2, &exp, Model::MeanField).unwrap();
            let cf = DelayLaw::new(lambda, 2, &exp, Model::ClosedForm).unwrap();
            assert!(
                (mf.mean() - cf.mean()).abs() < 1e-6,
                "{} {}",
                mf.mean(),
                cf.mean()
            );
            assert!((mf.mean_max(3) - cf.mean_max(3)).abs() < 1e-6);
        }
    }

    #[test]
    fn mean_field_shifted_exponential_is_between_bounds() {
        // Less variable service than the exponential: shorter queues, so below the closed
        // form (which also counts the job in service as a whole service), and above the
        // no-queueing delay.
        let s = Service::ShiftedExp {
            shift: 0.5,
            mean: 1.0,
        };
        let mf = DelayLaw::new(0.7, 2, &s, Model::MeanField).unwrap();
        let cf = DelayLaw::new(0.7, 2, &s, Model::ClosedForm).unwrap();
        assert!(mf.mean() < cf.mean() && mf.mean() > 1.0, "{}", mf.mean());
    }
}
