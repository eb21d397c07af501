//! Golden tests for the eviction policies.
//!
//! - Exact hits, misses, hit bytes and miss bytes of every policy at four capacities on the
//!   committed trace `testdata/golden-trace.txt`. The numbers were produced by the policies
//!   and, independently, by the slow reference implementations in [`reference`] (plain `Vec`s,
//!   linear scans, written from the papers), and pinned once both agreed; the test checks both
//!   against the literals. The LRU numbers are derived a third way, from stack distances.
//! - Property tests that the fast policies match the reference implementations step by step
//!   on random operation sequences (hit/miss of every operation, cached set, bytes).
//! - One hand-worked sequence per policy whose expected outcome is derived in the comments.
//! - The committed trace is exactly what [`generate_trace`] produces.

use eviction::{new_cache, Cache, EvictionKind, Lru, S3Fifo, Sieve};
use proptest::prelude::*;

const TRACE: &str = include_str!("../testdata/golden-trace.txt");
const TRACE_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/golden-trace.txt");

/// Capacities of the golden table: below the largest object (255 bytes), so some objects are
/// never cached and at most a few fit at once (the three policies then make the same
/// choices), then roughly 5%, 15% and 40% of the trace's 18,277 distinct bytes.
const CAPACITIES: [u64; 4] = [200, 1_000, 3_000, 8_000];

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Stats {
    hits: u64,
    misses: u64,
    hit_bytes: u64,
    miss_bytes: u64,
}

impl Stats {
    fn record(&mut self, hit: bool, size: u64) {
        if hit {
            self.hits += 1;
            self.hit_bytes += size;
        } else {
            self.misses += 1;
            self.miss_bytes += size;
        }
    }
}

fn parse_trace(text: &str) -> Vec<(u32, u64)> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let mut fields = line.split_whitespace();
            let key = fields.next().unwrap().parse().unwrap();
            let size = fields.next().unwrap().parse().unwrap();
            assert!(fields.next().is_none(), "extra field in {line:?}");
            (key, size)
        })
        .collect()
}

fn replay(mut access: impl FnMut(u32, u64) -> bool, trace: &[(u32, u64)]) -> Stats {
    let mut stats = Stats::default();
    for &(key, size) in trace {
        stats.record(access(key, size), size);
    }
    stats
}

fn golden(kind: EvictionKind, capacity: u64) -> Stats {
    let [hits, misses, hit_bytes, miss_bytes] = match (kind, capacity) {
        (EvictionKind::Lru, 200) => [24, 376, 2_581, 54_087],
        (EvictionKind::Lru, 1_000) => [90, 310, 11_349, 45_319],
        (EvictionKind::Lru, 3_000) => [180, 220, 24_400, 32_268],
        (EvictionKind::Lru, 8_000) => [250, 150, 35_118, 21_550],
        (EvictionKind::Sieve, 200) => [24, 376, 2_581, 54_087],
        (EvictionKind::Sieve, 1_000) => [133, 267, 16_179, 40_489],
        (EvictionKind::Sieve, 3_000) => [207, 193, 28_453, 28_215],
        (EvictionKind::Sieve, 8_000) => [257, 143, 35_977, 20_691],
        (EvictionKind::S3Fifo, 200) => [24, 376, 2_581, 54_087],
        (EvictionKind::S3Fifo, 1_000) => [141, 259, 17_059, 39_609],
        (EvictionKind::S3Fifo, 3_000) => [217, 183, 29_972, 26_696],
        (EvictionKind::S3Fifo, 8_000) => [259, 141, 36_507, 20_161],
        _ => panic!("no golden numbers for {kind} at {capacity} bytes"),
    };
    Stats {
        hits,
        misses,
        hit_bytes,
        miss_bytes,
    }
}

#[test]
fn golden_numbers_on_the_committed_trace() {
    let trace = parse_trace(TRACE);
    assert_eq!(trace.len(), 400);
    for kind in EvictionKind::ALL {
        for capacity in CAPACITIES {
            let mut cache = new_cache(kind, capacity);
            let fast = replay(|key, size| cache.access(key, size), &trace);
            let mut model = reference::new(kind, capacity);
            let slow = replay(|key, size| model.access(key, size), &trace);
            assert_eq!(
                fast, slow,
                "{kind} at {capacity} bytes: policy vs reference"
            );
            assert_eq!(fast, golden(kind, capacity), "{kind} at {capacity} bytes");
        }
    }
}

/// A third derivation of the LRU numbers, sharing nothing with either implementation: byte
/// LRU always holds the longest most-recent-first prefix of the recency stack that fits
/// (Mattson's stack property), so an access hits exactly when its key was accessed before and
/// the distinct keys accessed since, plus itself, fit in the capacity. Objects larger than the
/// capacity are never inserted, so they never enter the stack.
#[test]
fn lru_golden_numbers_match_stack_distances() {
    let trace = parse_trace(TRACE);
    for capacity in CAPACITIES {
        let mut stats = Stats::default();
        for (i, &(key, size)) in trace.iter().enumerate() {
            let previous = trace[..i]
                .iter()
                .rposition(|&(k, s)| k == key && s <= capacity);
            let hit = previous.is_some_and(|p| {
                let mut since: Vec<(u32, u64)> = trace[p..i]
                    .iter()
                    .copied()
                    .filter(|&(_, s)| s <= capacity)
                    .collect();
                since.sort_unstable();
                since.dedup_by_key(|o| o.0);
                since.iter().map(|o| o.1).sum::<u64>() <= capacity
            });
            stats.record(hit, size);
        }
        assert_eq!(
            stats,
            golden(EvictionKind::Lru, capacity),
            "{capacity} bytes"
        );
    }
}

#[test]
fn committed_trace_is_reproducible() {
    let generated = generate_trace();
    if std::env::var_os("REGENERATE_GOLDEN_TRACE").is_some() {
        std::fs::write(TRACE_PATH, &generated).unwrap();
    }
    assert!(
        TRACE == generated,
        "{TRACE_PATH} differs from generate_trace(); rerun with REGENERATE_GOLDEN_TRACE=1 \
         only if the change is intended, then re-pin the golden numbers"
    );
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The golden trace: integer arithmetic only, so it is the same on every platform.
fn generate_trace() -> String {
    const LINES: usize = 400;
    const POPULAR: u64 = 60;
    let weights: Vec<u64> = (0..POPULAR).map(|rank| 1_000_000 / (rank + 1)).collect();
    let total: u64 = weights.iter().sum();
    let size_of = |key: u64| {
        let mut state = key;
        16 + splitmix64(&mut state) % 240
    };
    let mut rng = 2024;
    let mut next_fresh = 1_000;
    let mut out = String::from(
        "# Golden trace for eviction/tests/golden.rs: 400 lines `key size`.\n\
         # Made by generate_trace() in that file (rewrite it with REGENERATE_GOLDEN_TRACE=1\n\
         # cargo test --release -p eviction --test golden). splitmix64 seeded with\n\
         # 2024; each line is, with probability 1/5, a fresh one-hit key (1000, 1001, ...),\n\
         # otherwise one of 60 popular keys: rank r drawn with integer weight 1000000/(r+1)\n\
         # (Zipf 1), key id (7r + 3) mod 60. A key's size is fixed: 16 + splitmix64(key) mod\n\
         # 240 bytes (splitmix64 seeded with the key, first output).\n",
    );
    for _ in 0..LINES {
        let key = if splitmix64(&mut rng).is_multiple_of(5) {
            next_fresh += 1;
            next_fresh - 1
        } else {
            let mut point = splitmix64(&mut rng) % total;
            let mut rank = 0;
            while point >= weights[rank as usize] {
                point -= weights[rank as usize];
                rank += 1;
            }
            (7 * rank + 3) % POPULAR
        };
        out.push_str(&format!("{key} {}\n", size_of(key)));
    }
    out
}

/// Slow, obviously-correct implementations written from the papers: `Vec`s in queue order
/// (index 0 = oldest / least recent), linear searches, no shared code with the policies.
mod reference {
    use eviction::EvictionKind;

    pub trait Model {
        fn get(&mut self, key: u32) -> bool;
        fn insert(&mut self, key: u32, size: u64);
        fn access(&mut self, key: u32, size: u64) -> bool {
            let hit = self.get(key);
            if !hit {
                self.insert(key, size);
            }
            hit
        }
        /// Cached keys with their sizes, sorted by key.
        fn contents(&self) -> Vec<(u32, u64)>;
    }

    pub fn new(kind: EvictionKind, capacity: u64) -> Box<dyn Model> {
        match kind {
            EvictionKind::Lru => Box::new(Lru::new(capacity)),
            EvictionKind::Sieve => Box::new(Sieve::new(capacity)),
            EvictionKind::S3Fifo => Box::new(S3Fifo::new(capacity)),
        }
    }

    fn bytes<T>(objects: &[T], size: impl Fn(&T) -> u64) -> u64 {
        objects.iter().map(size).sum()
    }

    fn sorted(mut objects: Vec<(u32, u64)>) -> Vec<(u32, u64)> {
        objects.sort_unstable();
        objects
    }

    /// `(key, size)`, least recently used first.
    pub struct Lru {
        capacity: u64,
        objects: Vec<(u32, u64)>,
    }

    impl Lru {
        pub fn new(capacity: u64) -> Self {
            Lru {
                capacity,
                objects: Vec::new(),
            }
        }
    }

    impl Model for Lru {
        fn get(&mut self, key: u32) -> bool {
            match self.objects.iter().position(|o| o.0 == key) {
                Some(i) => {
                    let object = self.objects.remove(i);
                    self.objects.push(object);
                    true
                }
                None => false,
            }
        }

        fn insert(&mut self, key: u32, size: u64) {
            if self.get(key) || size > self.capacity {
                return;
            }
            while bytes(&self.objects, |o| o.1) + size > self.capacity {
                self.objects.remove(0);
            }
            self.objects.push((key, size));
        }

        fn contents(&self) -> Vec<(u32, u64)> {
            sorted(self.objects.clone())
        }
    }

    /// `(key, size, visited)`, oldest (tail) first; the hand names the key it points at.
    pub struct Sieve {
        capacity: u64,
        objects: Vec<(u32, u64, bool)>,
        hand: Option<u32>,
    }

    impl Sieve {
        pub fn new(capacity: u64) -> Self {
            Sieve {
                capacity,
                objects: Vec::new(),
                hand: None,
            }
        }

        fn evict(&mut self) {
            let mut i = match self.hand {
                Some(key) => self.objects.iter().position(|o| o.0 == key).unwrap(),
                None => 0,
            };
            while self.objects[i].2 {
                self.objects[i].2 = false;
                i = (i + 1) % self.objects.len(); // toward the head, wrapping to the tail
            }
            self.objects.remove(i);
            // The evicted object's newer neighbour slid into index i.
            self.hand = self.objects.get(i).map(|o| o.0);
        }
    }

    impl Model for Sieve {
        fn get(&mut self, key: u32) -> bool {
            match self.objects.iter_mut().find(|o| o.0 == key) {
                Some(object) => {
                    object.2 = true;
                    true
                }
                None => false,
            }
        }

        fn insert(&mut self, key: u32, size: u64) {
            if self.get(key) || size > self.capacity {
                return;
            }
            while bytes(&self.objects, |o| o.1) + size > self.capacity {
                self.evict();
            }
            self.objects.push((key, size, false));
        }

        fn contents(&self) -> Vec<(u32, u64)> {
            sorted(self.objects.iter().map(|o| (o.0, o.1)).collect())
        }
    }

    /// Queues of `(key, size, freq)` (ghost: `(key, size)`), oldest first.
    pub struct S3Fifo {
        capacity: u64,
        small: Vec<(u32, u64, u8)>,
        main: Vec<(u32, u64, u8)>,
        ghost: Vec<(u32, u64)>,
    }

    impl S3Fifo {
        pub fn new(capacity: u64) -> Self {
            S3Fifo {
                capacity,
                small: Vec::new(),
                main: Vec::new(),
                ghost: Vec::new(),
            }
        }

        fn small_share(&self) -> u64 {
            self.capacity / 10
        }

        fn main_share(&self) -> u64 {
            self.capacity - self.small_share()
        }

        fn used(&self) -> u64 {
            bytes(&self.small, |o| o.1) + bytes(&self.main, |o| o.1)
        }

        fn evict(&mut self) {
            let small_bytes = bytes(&self.small, |o| o.1);
            if !self.small.is_empty() && (small_bytes >= self.small_share() || self.main.is_empty())
            {
                self.evict_small();
            } else {
                self.evict_main();
            }
        }

        fn evict_small(&mut self) {
            while !self.small.is_empty() {
                let (key, size, freq) = self.small.remove(0);
                if freq >= 1 {
                    self.main.push((key, size, 0));
                    if bytes(&self.main, |o| o.1) > self.main_share() {
                        self.evict_main();
                    }
                } else {
                    self.ghost.push((key, size));
                    while bytes(&self.ghost, |o| o.1) > self.main_share() {
                        self.ghost.remove(0);
                    }
                    return;
                }
            }
        }

        fn evict_main(&mut self) {
            while !self.main.is_empty() {
                let (key, size, freq) = self.main.remove(0);
                if freq > 0 {
                    self.main.push((key, size, freq - 1));
                } else {
                    return;
                }
            }
        }
    }

    impl Model for S3Fifo {
        fn get(&mut self, key: u32) -> bool {
            let found = self.small.iter_mut().chain(self.main.iter_mut());
            match found.into_iter().find(|o| o.0 == key) {
                Some(object) => {
                    object.2 = (object.2 + 1).min(3);
                    true
                }
                None => false,
            }
        }

        fn insert(&mut self, key: u32, size: u64) {
            if self.get(key) || size > self.capacity {
                return;
            }
            let ghost = self.ghost.iter().position(|g| g.0 == key);
            if let Some(i) = ghost {
                self.ghost.remove(i);
            }
            while self.used() + size > self.capacity {
                self.evict();
            }
            if ghost.is_some() {
                self.main.push((key, size, 0));
            } else {
                self.small.push((key, size, 0));
            }
        }

        fn contents(&self) -> Vec<(u32, u64)> {
            let both = self.small.iter().chain(&self.main);
            sorted(both.map(|o| (o.0, o.1)).collect())
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Get(u32),
    Insert(u32, u64),
    Access(u32, u64),
}

fn op(max_size: u64) -> impl Strategy<Value = Op> {
    let key = 0u32..48;
    prop_oneof![
        key.clone().prop_map(Op::Get),
        (key.clone(), 0..=max_size).prop_map(|(k, s)| Op::Insert(k, s)),
        (key, 0..=max_size).prop_map(|(k, s)| Op::Access(k, s)),
    ]
}

fn ops() -> impl Strategy<Value = (u64, Vec<Op>)> {
    (0u64..600).prop_flat_map(|capacity| {
        // Mostly objects that fit, some that do not.
        let max_size = capacity / 4 + capacity / 2 * u64::from(capacity % 3 == 0) + 1;
        (Just(capacity), prop::collection::vec(op(max_size), 1..400))
    })
}

fn check_against_reference(kind: EvictionKind, capacity: u64, ops: &[Op]) {
    let mut cache = new_cache(kind, capacity);
    let mut model = reference::new(kind, capacity);
    for (step, &op) in ops.iter().enumerate() {
        match op {
            Op::Get(key) => assert_eq!(cache.get(key), model.get(key), "step {step}: {op:?}"),
            Op::Insert(key, size) => {
                cache.insert(key, size);
                model.insert(key, size);
            }
            Op::Access(key, size) => assert_eq!(
                cache.access(key, size),
                model.access(key, size),
                "step {step}: {op:?}"
            ),
        }
        let contents = model.contents();
        let cached: Vec<u32> = (0..48).filter(|&k| cache.contains(k)).collect();
        let expected: Vec<u32> = contents.iter().map(|o| o.0).collect();
        assert_eq!(cached, expected, "step {step}: {op:?}");
        let expected_bytes: u64 = contents.iter().map(|o| o.1).sum();
        assert_eq!(cache.used_bytes(), expected_bytes, "step {step}: {op:?}");
        assert_eq!(cache.len(), contents.len(), "step {step}: {op:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn lru_matches_reference_model((capacity, ops) in ops()) {
        check_against_reference(EvictionKind::Lru, capacity, &ops);
    }

    #[test]
    fn sieve_matches_reference_model((capacity, ops) in ops()) {
        check_against_reference(EvictionKind::Sieve, capacity, &ops);
    }

    #[test]
    fn s3fifo_matches_reference_model((capacity, ops) in ops()) {
        check_against_reference(EvictionKind::S3Fifo, capacity, &ops);
    }
}

/// Replays `(key, size)` accesses and returns which hit.
fn hits(cache: &mut dyn Cache, accesses: &[(u32, u64)]) -> Vec<bool> {
    accesses.iter().map(|&(k, s)| cache.access(k, s)).collect()
}

fn cached(cache: &dyn Cache, keys: std::ops::Range<u32>) -> Vec<u32> {
    keys.filter(|&k| cache.contains(k)).collect()
}

#[test]
fn lru_hand_worked() {
    // Capacity 10; the list is written most recent first.
    let mut c = Lru::new(10);
    let accesses = [
        (1, 4),  // miss: [1], 4 bytes
        (2, 3),  // miss: [2 1], 7
        (1, 4),  // hit:  [1 2]
        (3, 5),  // miss: 3 free < 5, evict 2 (LRU) -> 6 free: [3 1], 9
        (2, 3),  // miss: 1 free < 3, evict 1 -> 5 free: [2 3], 8
        (3, 5),  // hit:  [3 2]
        (4, 11), // miss: larger than the capacity, not cached: [3 2]
        (1, 4),  // miss: 2 free < 4, evict 2 -> 5 free: [1 3], 9
    ];
    let expected = [false, false, true, false, false, true, false, false];
    assert_eq!(hits(&mut c, &accesses), expected);
    assert_eq!(cached(&c, 0..10), [1, 3]);
    assert_eq!((c.used_bytes(), c.len()), (9, 2));
}

#[test]
fn sieve_hand_worked() {
    // Capacity 3, unit sizes until the last access. The queue is written head (newest) to
    // tail (oldest); `*` marks visited, `^` the hand (none: start at the tail).
    let mut c = Sieve::new(3);
    let accesses = [
        (1, 1), // miss: 1
        (2, 1), // miss: 2 1
        (3, 1), // miss: 3 2 1
        (1, 1), // hit:  3 2 1*
        // miss: scan from the tail: 1* cleared, 2 evicted, hand -> 3 (2's newer neighbour)
        (4, 1), //       4 3^ 1
        (3, 1), // hit:  4 3*^ 1
        // miss: 3* cleared, 4 evicted; 4 was the head, so the hand resets to the tail
        (5, 1), //       5 3 1
        // miss: from the tail, 1 evicted, hand -> 3
        (2, 1), //       2 5 3^
        (3, 1), // hit:  2 5 3*^
        // miss: 3* cleared, 5 evicted, hand -> 2
        (1, 1), //       1 2^ 3
        (2, 1), // hit:  1 2*^ 3
        (1, 1), // hit:  1* 2*^ 3
        // miss: 2* cleared, 1* cleared, past the head the hand wraps to the tail: 3 evicted,
        // hand -> 2
        (6, 1), //       6 1 2^
        // miss, 2 bytes: 2 evicted (hand -> 1), still 1 free < 2, 1 evicted (hand -> 6)
        (7, 2), //       7 6^
    ];
    let expected = [
        false, false, false, true, false, true, false, false, true, false, true, true, false, false,
    ];
    assert_eq!(hits(&mut c, &accesses), expected);
    assert_eq!(cached(&c, 0..10), [6, 7]);
    assert_eq!((c.used_bytes(), c.len()), (3, 2));
    // 6 was never visited and the hand points at it: next to go.
    c.insert(8, 1);
    assert_eq!(cached(&c, 0..10), [7, 8]);
}

#[test]
fn s3fifo_hand_worked_ghost_admission() {
    // Capacity 20: S's share is 2 bytes, M's (and G's bound) 18. Queues are written head
    // (newest) to tail (oldest) with sizes, frequencies after `/`.
    let mut c = S3Fifo::new(20);
    let accesses = [
        (1, 2), // miss: S 1/0                                        used 2
        (1, 2), // hit:  S 1/1
        (2, 2), // miss: S 2 1/1                                      used 4
        (3, 8), // miss: S 3 2 1/1                                    used 12
        (4, 8), // miss: exactly fits, S 4 3 2 1/1                    used 20
        // miss, 0 free: S holds 20 >= 2, evict from S: tail 1 was hit, moves to M with freq 0;
        // tail 2 was not, goes to G. 2 free < 4: evict from S again: 3 to G. 10 free.
        (5, 4), //       S 5 4, M 1/0, G 3 2 (10 bytes)                used 14
        // miss, 2 is in G: leaves G, enters M                         used 16
        (2, 2), //       S 5 4, M 2 1, G 3
        (1, 2), // hit:  M 2 1/1
        (1, 2), // hit:  M 2 1/2
        // miss, 4 free < 6: S holds 12, evict from S: 4 to G          used 14
        (6, 6), //       S 6 5, M 2 1/2, G 4 3 (16 bytes)
        // miss, 6 free < 7: evict from S: 5 to G, which now holds 20 > 18 bytes, so it forgets
        // its oldest key, 3                                           used 17
        (7, 7), //       S 7 6, M 2 1/2, G 5 4 (12 bytes)
        // miss, and 3 is no longer in G: it enters S. 3 free < 8: evict from S: 6 to G
        // (18 bytes, not over the bound)                              used 19
        (3, 8), //       S 3 7, M 2 1/2, G 6 5 4
    ];
    let expected = [
        false, true, false, false, false, false, false, true, true, false, false, false,
    ];
    assert_eq!(hits(&mut c, &accesses), expected);
    assert_eq!(cached(&c, 0..10), [1, 2, 3, 7]);
    assert_eq!((c.small_bytes(), c.main_bytes()), (15, 4));
    assert_eq!((c.used_bytes(), c.len()), (19, 4));
    assert_eq!((c.ghost_len(), c.ghost_bytes()), (3, 18));
}

#[test]
fn s3fifo_hand_worked_main_reinsertion() {
    // Capacity 10, unit sizes: S's share is 1 byte, M's 9. Notation as above.
    let mut c = S3Fifo::new(10);
    let mut expected = Vec::new();
    let mut accesses = Vec::new();
    let mut step = |key: u32, hit: bool| {
        accesses.push((key, 1));
        expected.push(hit);
    };
    // 10 misses fill S: S 10 9 .. 1.
    (1..=10).for_each(|k| step(k, false));
    // Hits on 1..=5: frequency 1 each.
    (1..=5).for_each(|k| step(k, true));
    // Miss on 11, 0 free: evict from S: tails 1..=5 were hit and move to M (freq 0), 6 goes to
    // G. S 11 10 9 8 7, M 5 4 3 2 1, G 6.
    step(11, false);
    // Hits: 1 four times (frequency saturates at 3), 2 once.
    [1, 1, 1, 1, 2].into_iter().for_each(|k| step(k, true));
    // Miss on 6, in G: leaves G; to make room S's tail 7 goes to G; 6 enters M.
    // S 11 10 9 8, M 6 5 4 3 2/1 1/3, G 7.
    step(6, false);
    // Hits on 8..=11.
    (8..=11).for_each(|k| step(k, true));
    // Miss on 12, 0 free: evict from S: 8, 9, 10 move to M; 11 moves too, and M holds 10 > 9
    // bytes, so evict from M: tail 1/3 goes back to the head as 1/2, 2/1 as 2/0, 3/0 is
    // evicted. S is now empty; 1 free, 12 enters S.
    // S 12, M 2 1/2 11 10 9 8 6 5 4, G 7.
    step(12, false);
    // Miss on 3 (evicted from M, so not in G): evict from S: 12 to G. S 3, G 12 7.
    step(3, false);
    // Miss on 12, in G: leaves G; evict from S: 3 to G; 12 enters M, which now holds 10 bytes.
    // S empty, M 12 2 1/2 11 10 9 8 6 5 4, G 3 7.
    step(12, false);
    // Miss on 13: S is empty, so evict from M: tail 4/0 is evicted. S 13.
    step(13, false);

    assert_eq!(hits(&mut c, &accesses), expected);
    assert_eq!(cached(&c, 0..20), [1, 2, 5, 6, 8, 9, 10, 11, 12, 13]);
    assert_eq!((c.small_bytes(), c.main_bytes()), (1, 9));
    assert_eq!((c.ghost_len(), c.ghost_bytes()), (2, 2));
    // M's tail is now 5/0: the next eviction from M takes it, not the older-but-hit 1/2.
    c.insert(14, 1); // S 13 holds 1 >= 1 byte: 13 goes to G
    c.insert(13, 1); // ghost hit: evict from S (14 to G), 13 enters M (10 bytes)
    c.insert(15, 1); // S is empty: evict from M, whose tail is 5/0
    assert!(!c.contains(5) && c.contains(1) && c.contains(15));
}
