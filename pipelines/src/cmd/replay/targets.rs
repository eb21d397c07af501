//! The addresses `ballot replay` sends to: one replica or balancer, or several balancers in
//! front of the same replicas, used as a frontend with two balancer addresses uses them.
//! Clients are spread over the targets (query or worker `i` starts at target `i mod n`),
//! and a query whose connection fails (refused, or reset before a whole answer: a balancer
//! that died) is sent again to the next target, each target tried once. A search is a
//! `GET`, so sending it twice is safe. A target that refused a connection is passed over
//! for [`DOWN_FOR`] (tried last), so a dead balancer costs one refused connection a second,
//! not one per query. An HTTP status or a timeout is the target's answer and is not retried.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hyper::body::Bytes;

use crate::client::{get, BaseUrl, Failure, HttpClient};

/// How long a target that refused a connection is passed over.
pub const DOWN_FOR: Duration = Duration::from_secs(1);

/// The targets, the search they all take, and what retrying did.
pub struct Targets {
    bases: Vec<BaseUrl>,
    search_path: String,
    k: usize,
    /// Per target: milliseconds after `start` until which it is passed over.
    down_until_ms: Vec<AtomicU64>,
    start: Instant,
    retried: AtomicU64,
}

impl Targets {
    /// `bases` (at least one), each searched at `search_path` for `k` results.
    pub fn new(bases: Vec<BaseUrl>, search_path: String, k: usize) -> Targets {
        let down_until_ms = bases.iter().map(|_| AtomicU64::new(0)).collect();
        Targets {
            bases,
            search_path,
            k,
            down_until_ms,
            start: Instant::now(),
            retried: AtomicU64::new(0),
        }
    }

    /// The targets.
    pub fn bases(&self) -> &[BaseUrl] {
        &self.bases
    }

    /// Queries sent again to another target after a failed connection.
    pub fn retried(&self) -> u64 {
        self.retried.load(Ordering::Relaxed)
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// The order in which query `first`'s targets are tried: from `first % n` on, the ones
    /// passed over last.
    fn order(&self, first: usize) -> Vec<usize> {
        let n = self.bases.len();
        let now = self.now_ms();
        let (mut up, mut down): (Vec<usize>, Vec<usize>) = (0..n)
            .map(|j| (first + j) % n)
            .partition(|&t| self.down_until_ms[t].load(Ordering::Relaxed) <= now);
        up.append(&mut down);
        up
    }

    /// GETs the search for `q`, starting at target `first % n` and moving on to the next
    /// target on a failed connection; the last failure when every target failed.
    pub async fn get(
        &self,
        client: &HttpClient,
        q: &str,
        first: usize,
        timeout: Duration,
    ) -> Result<Bytes, Failure> {
        let order = self.order(first);
        let mut last = Failure::Other;
        for (tries, &t) in order.iter().enumerate() {
            if tries > 0 {
                self.retried.fetch_add(1, Ordering::Relaxed);
            }
            let url = self.bases[t].search(&self.search_path, q, self.k);
            match get(client, &url, timeout).await {
                Ok(body) => return Ok(body),
                Err(Failure::Connect) => {
                    let until = self.now_ms() + DOWN_FOR.as_millis() as u64;
                    self.down_until_ms[t].store(until, Ordering::Relaxed);
                    last = Failure::Connect;
                }
                Err(Failure::Other) => last = Failure::Other,
                Err(answer) => return Err(answer),
            }
        }
        Err(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(n: usize) -> Targets {
        let bases = (0..n)
            .map(|i| BaseUrl::parse(&format!("http://127.0.0.1:{}", 1000 + i), "t").unwrap())
            .collect();
        Targets::new(bases, "/search".into(), 10)
    }

    #[test]
    fn queries_spread_and_a_target_that_refused_is_tried_last() {
        let t = targets(3);
        assert_eq!(t.order(0), vec![0, 1, 2]);
        assert_eq!(t.order(4), vec![1, 2, 0]);
        t.down_until_ms[1].store(u64::MAX, Ordering::Relaxed);
        assert_eq!(t.order(4), vec![2, 0, 1]);
        assert_eq!(t.order(0), vec![0, 2, 1]);
    }
}
