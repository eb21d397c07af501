//! The deterministic synthetic query log that is ballot's embedded default dataset, and the
//! word-frequency table that gives its terms postings sizes.
//!
//! Model (a topical mixture with Zipf popularity at every level, in the spirit of latent
//! topic models of text — Blei, Ng and Jordan, "Latent Dirichlet allocation", JMLR 2003 —
//! and of the Zipf-like query and term popularity measured in search logs: Xie and
//! O'Hallaron, "Locality in search engine queries and its implications for caching",
//! INFOCOM 2002; Baeza-Yates et al., "The impact of caching on search engines", SIGIR 2007):
//!
//! - **Query popularity.** The stream draws query ids from a Zipf over a pool of
//!   [`SynthConfig::query_pool`] ids; an id's text is generated from its own seeded [`Rng`],
//!   so a popular id repeats the same text. Two ids may draw the same text, as `google`
//!   typed by many users does.
//! - **Length.** Popular ids are short navigational queries: the id of pool rank `r` takes
//!   its length from [`HEAD_LENGTHS`] with probability `1 / (1 + r / head_rank)`, otherwise
//!   from [`TAIL_LENGTHS`] (both measured on the AOL 2006 log). Length counts distinct terms
//!   after tokenization.
//! - **Terms.** Each id picks a topic (Zipf over [`SynthConfig::topics`]). Of its `len`
//!   terms, a share `novel_share` are *novel* words (one-offs such as typos and names,
//!   unique to the id), a share `common_share + common_share_step · (len − 2)` are *common*
//!   words (Zipf over a vocabulary shared by all topics; long queries have more function
//!   words), and the rest are words of the id's topic (Zipf over the topic's own
//!   vocabulary). The counts are the expected counts randomly rounded, so kinds mix evenly
//!   within a query (as in `bank of america`): in the real log the number of popular terms
//!   per query varies less than independent draws would make it. A one-term query is, with
//!   probability `rare_single`, a word of its own (a name such as `mapquest`, used alone):
//!   novel, or from deep in its topic's vocabulary.
//! - **Names.** Terms are pronounceable syllable strings, unique, lowercase ASCII letters
//!   (`words`); more popular words get shorter names.
//! - **Document frequencies.** Query popularity and document frequency correlate only
//!   loosely (`and` is everywhere in text but rare in queries, `mapquest` the reverse). A
//!   term's expected occurrences `c` per [`REF_QUERIES`] queries (from the model, not from
//!   the sample, so a term's frequency does not depend on the log's length) sets
//!   `log10 f = g(log10 c) + noise · Z` (`Z` standard normal), clamped to `[1e-8, 0.06]`.
//!   `g` has slope `freq_slope` up to `freq_knee` occurrences and `freq_slope_high` beyond:
//!   the most popular query words are names, topics and web tokens, whose frequency in text
//!   saturates; but a share `function_word_share` of the common words are function words
//!   and keep the steep slope (`of` and `the` are frequent in queries and in every
//!   document). With probability `min(1, rare_at_one · c^-rare_decay)` the term is instead a
//!   word no frequency list knows and gets a frequency that puts it in 1–10 documents (in
//!   the AOL log, 62% of distinct terms are missing from `wordfreq-large-en`). The
//!   parameters were fitted to the AOL log against `wordfreq-large-en` (see
//!   `data/CALIBRATION.md`).
//! - **Users and time.** Sessions of geometric length (mean `session_mean`) by users drawn
//!   from a Zipf over `users`; timestamps start at `start_ms` (2006-03-01, like AOL) with
//!   exponential gaps of mean `mean_gap_ms`.
//!
//! Everything is a function of [`SynthConfig`]: the same config gives a bit-identical log on
//! a given platform (floating-point `ln`/`exp` come from the platform's libm). The first `n`
//! queries do not depend on [`SynthConfig::queries`], and the frequency of a term does not
//! either. `data/CALIBRATION.md` compares the default (200,000 queries, seed 1) with the
//! real AOL log.

mod words;
mod zipf;

use std::collections::hash_map::Entry;
use std::io::Write;
use std::path::Path;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::hash::mix64;
use crate::rng::Rng;
use crate::sizes::SizeModel;
use zipf::Zipf;

/// Query lengths (distinct terms) 1, 2, … of unpopular queries: the AOL 2006 log's distinct
/// queries beyond popularity rank 20,000, after collapsing repeated clicks.
pub const TAIL_LENGTHS: [f64; 20] = [
    0.0888, 0.2708, 0.2905, 0.1650, 0.0887, 0.0455, 0.0227, 0.0118, 0.0066, 0.0036, 0.0019, 0.0013,
    0.0008, 0.0005, 0.0003, 0.0004, 0.0003, 0.0002, 0.0002, 0.0001,
];

/// Query lengths 1, 2, … of navigational queries: the AOL 2006 log's 1,000 most popular
/// distinct queries.
pub const HEAD_LENGTHS: [f64; 7] = [0.424, 0.384, 0.153, 0.022, 0.013, 0.002, 0.001];

/// Query count that term popularity (and so term frequency) is expressed per.
pub const REF_QUERIES: f64 = 200_000.0;

/// Unix milliseconds of 2006-03-01T00:00:00Z, where the AOL log starts.
pub const AOL_START_MS: i64 = 1_141_171_200_000;

/// Lowest frequency a "known" word gets (the floor of `wordfreq-large-en`).
const MIN_KNOWN_FREQ: f64 = 1e-8;
/// Highest frequency any word gets (`the` has 0.054 in English text).
const MAX_FREQ: f64 = 0.06;
/// Unknown words get a document frequency in `1..=RARE_MAX_DF`.
const RARE_MAX_DF: u64 = 10;
/// Share of rare one-term queries whose term is novel (the rest come from deep in the topic).
const RARE_SINGLE_NOVEL: f64 = 0.5;
/// Longest query the model generates (the length tables stop at 20 < 32 positions).
const MAX_LEN: usize = TAIL_LENGTHS.len();
/// Draws per term before giving up on finding one not yet in the query (tiny vocabularies).
const MAX_ATTEMPTS: usize = 16;

// Stream tags, so that each random stream is independent of the others.
const TAG_STREAM: u64 = 0x5354_5245_414d;
const TAG_QUERY: u64 = 0x0051_5545_5259;
const TAG_FREQ: u64 = 0x4652_4551;
const TAG_USERS: u64 = 0x0055_5345_5253;
const TAG_TIME: u64 = 0x5449_4d45;

// Term keys: two kind bits, then the kind's coordinates.
const KIND_SHIFT: u32 = 62;
const KIND_COMMON: u64 = 0;
const KIND_TOPIC: u64 = 1;
const KIND_NOVEL: u64 = 2;
const POS_BITS: u32 = 5;

/// Why a [`SynthConfig`] is unusable.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SynthError {
    /// A knob is out of its range.
    #[error("synthetic log: {knob} = {value} must be {rule}")]
    Invalid {
        /// The knob's name.
        knob: &'static str,
        /// The value given.
        value: String,
        /// What the value must be.
        rule: &'static str,
    },
    /// [`SynthConfig::set`] got an unknown knob name.
    #[error("synthetic log: unknown knob {0:?} (known: {known})", known = SynthConfig::KNOBS.join(", "))]
    UnknownKnob(String),
    /// [`SynthConfig::set`] could not parse a value.
    #[error("synthetic log: {knob} = {value:?} is not a number")]
    NotANumber {
        /// The knob's name.
        knob: String,
        /// The value given.
        value: String,
    },
}

/// Parameters of the synthetic log. `Default` is the embedded default dataset (200,000
/// queries, seed 1) calibrated against the AOL 2006 log; the other defaults are that
/// calibration.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthConfig {
    /// Queries to generate (repeats included).
    pub queries: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// Distinct query ids the stream draws from.
    pub query_pool: u64,
    /// Zipf exponent of query popularity.
    pub query_zipf: f64,
    /// Pool rank scale of navigational queries (see [`HEAD_LENGTHS`]).
    pub head_rank: f64,
    /// Number of latent topics.
    pub topics: u32,
    /// Zipf exponent of topic popularity.
    pub topic_zipf: f64,
    /// Words per topic.
    pub topic_vocab: u32,
    /// Zipf exponent within a topic's vocabulary.
    pub topic_vocab_zipf: f64,
    /// Words shared by all topics.
    pub common_vocab: u32,
    /// Zipf exponent of the shared words.
    pub common_zipf: f64,
    /// Share of a two-term query's terms that are shared words.
    pub common_share: f64,
    /// Added to `common_share` per term beyond two (subtracted for one-term queries).
    pub common_share_step: f64,
    /// Share of a query's terms that are novel (one-off words unique to the query).
    pub novel_share: f64,
    /// Probability that a one-term query is a word of its own (novel or deep in its topic).
    pub rare_single: f64,
    /// Rare topic words are drawn from the topic's vocabulary beyond this rank.
    pub rare_rank_offset: u32,
    /// `log10` frequency of a term expected once per [`REF_QUERIES`] queries.
    pub freq_intercept: f64,
    /// Slope of `log10` frequency in `log10` expected occurrences, up to `freq_knee`.
    pub freq_slope: f64,
    /// Expected occurrences beyond which frequency grows with slope `freq_slope_high`.
    pub freq_knee: f64,
    /// Slope beyond `freq_knee`, except for function words (see `function_word_share`).
    pub freq_slope_high: f64,
    /// Share of the shared words that are function words, whose frequency keeps the steep
    /// slope beyond `freq_knee` (the others are generic query words such as `free`,
    /// `lyrics`, `www`).
    pub function_word_share: f64,
    /// Standard deviation of `log10` frequency around the fit.
    pub freq_noise: f64,
    /// Probability that a term expected once is unknown to frequency lists.
    pub rare_at_one: f64,
    /// Decay of that probability with expected occurrences (power law exponent).
    pub rare_decay: f64,
    /// Number of users.
    pub users: u32,
    /// Zipf exponent of user activity (user 0 is the most active).
    pub user_zipf: f64,
    /// Mean queries per session (geometric, at least 1).
    pub session_mean: f64,
    /// Timestamp of the first query, unix milliseconds.
    pub start_ms: i64,
    /// Mean gap between consecutive queries, milliseconds (exponential gaps, at least 1 ms).
    pub mean_gap_ms: f64,
}

impl Default for SynthConfig {
    fn default() -> Self {
        SynthConfig {
            queries: 200_000,
            seed: 1,
            query_pool: 5_500_000,
            query_zipf: 0.82,
            head_rank: 10_000.0,
            topics: 200,
            topic_zipf: 0.7,
            topic_vocab: 50_000,
            topic_vocab_zipf: 1.3,
            common_vocab: 2_000,
            common_zipf: 1.15,
            common_share: 0.1,
            common_share_step: 0.1,
            novel_share: 0.06,
            rare_single: 0.8,
            rare_rank_offset: 100,
            freq_intercept: -6.45,
            freq_slope: 1.08,
            freq_knee: 150.0,
            freq_slope_high: 0.15,
            function_word_share: 0.5,
            freq_noise: 0.8,
            rare_at_one: 0.4,
            rare_decay: 0.75,
            users: 10_000,
            user_zipf: 0.8,
            session_mean: 2.5,
            start_ms: AOL_START_MS,
            mean_gap_ms: 40_000.0,
        }
    }
}

fn invalid(knob: &'static str, value: impl ToString, rule: &'static str) -> SynthError {
    SynthError::Invalid {
        knob,
        value: value.to_string(),
        rule,
    }
}

fn check_positive(knob: &'static str, v: f64) -> Result<(), SynthError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(invalid(knob, v, "finite and > 0"))
    }
}

fn check_share(knob: &'static str, v: f64) -> Result<(), SynthError> {
    if (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(invalid(knob, v, "in [0, 1]"))
    }
}

fn check_finite(knob: &'static str, v: f64) -> Result<(), SynthError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(invalid(knob, v, "finite"))
    }
}

fn check_count(knob: &'static str, v: u64, max: u64) -> Result<(), SynthError> {
    if (1..=max).contains(&v) {
        Ok(())
    } else {
        Err(invalid(knob, v, "at least 1 and within its maximum"))
    }
}

impl SynthConfig {
    /// Names accepted by [`SynthConfig::set`].
    pub const KNOBS: &'static [&'static str] = &[
        "queries",
        "seed",
        "query_pool",
        "query_zipf",
        "head_rank",
        "topics",
        "topic_zipf",
        "topic_vocab",
        "topic_vocab_zipf",
        "common_vocab",
        "common_zipf",
        "common_share",
        "common_share_step",
        "novel_share",
        "rare_single",
        "rare_rank_offset",
        "freq_intercept",
        "freq_slope",
        "freq_knee",
        "freq_slope_high",
        "function_word_share",
        "freq_noise",
        "rare_at_one",
        "rare_decay",
        "users",
        "user_zipf",
        "session_mean",
        "start_ms",
        "mean_gap_ms",
    ];

    /// Sets the knob named `knob` (a field name) from its text form, for command lines
    /// (`--set topics=300`). Does not validate ranges: call [`SynthConfig::validate`].
    pub fn set(&mut self, knob: &str, value: &str) -> Result<(), SynthError> {
        let v = value.trim();
        let nan = || SynthError::NotANumber {
            knob: knob.to_owned(),
            value: value.to_owned(),
        };
        let float = || v.parse::<f64>().map_err(|_| nan());
        let int = || v.parse::<u64>().map_err(|_| nan());
        let small = || v.parse::<u32>().map_err(|_| nan());
        match knob {
            "queries" => self.queries = usize::try_from(int()?).map_err(|_| nan())?,
            "seed" => self.seed = int()?,
            "query_pool" => self.query_pool = int()?,
            "query_zipf" => self.query_zipf = float()?,
            "head_rank" => self.head_rank = float()?,
            "topics" => self.topics = small()?,
            "topic_zipf" => self.topic_zipf = float()?,
            "topic_vocab" => self.topic_vocab = small()?,
            "topic_vocab_zipf" => self.topic_vocab_zipf = float()?,
            "common_vocab" => self.common_vocab = small()?,
            "common_zipf" => self.common_zipf = float()?,
            "common_share" => self.common_share = float()?,
            "common_share_step" => self.common_share_step = float()?,
            "novel_share" => self.novel_share = float()?,
            "rare_single" => self.rare_single = float()?,
            "rare_rank_offset" => self.rare_rank_offset = small()?,
            "freq_intercept" => self.freq_intercept = float()?,
            "freq_slope" => self.freq_slope = float()?,
            "freq_knee" => self.freq_knee = float()?,
            "freq_slope_high" => self.freq_slope_high = float()?,
            "function_word_share" => self.function_word_share = float()?,
            "freq_noise" => self.freq_noise = float()?,
            "rare_at_one" => self.rare_at_one = float()?,
            "rare_decay" => self.rare_decay = float()?,
            "users" => self.users = small()?,
            "user_zipf" => self.user_zipf = float()?,
            "session_mean" => self.session_mean = float()?,
            "start_ms" => self.start_ms = v.parse::<i64>().map_err(|_| nan())?,
            "mean_gap_ms" => self.mean_gap_ms = float()?,
            _ => return Err(SynthError::UnknownKnob(knob.to_owned())),
        }
        Ok(())
    }

    /// Checks every knob's range. [`generate`] clamps out-of-range knobs instead of failing,
    /// so call this on configs that come from users.
    pub fn validate(&self) -> Result<(), SynthError> {
        check_count("query_pool", self.query_pool, 1 << 40)?;
        check_positive("query_zipf", self.query_zipf)?;
        check_positive("head_rank", self.head_rank)?;
        check_count("topics", u64::from(self.topics), 1 << 30)?;
        check_positive("topic_zipf", self.topic_zipf)?;
        check_count(
            "topic_vocab",
            u64::from(self.topic_vocab),
            u64::from(u32::MAX),
        )?;
        check_positive("topic_vocab_zipf", self.topic_vocab_zipf)?;
        check_count(
            "common_vocab",
            u64::from(self.common_vocab),
            u64::from(u32::MAX),
        )?;
        check_positive("common_zipf", self.common_zipf)?;
        check_share("common_share", self.common_share)?;
        check_finite("common_share_step", self.common_share_step)?;
        check_share("novel_share", self.novel_share)?;
        check_share("rare_single", self.rare_single)?;
        if self.rare_rank_offset >= self.topic_vocab {
            return Err(invalid(
                "rare_rank_offset",
                self.rare_rank_offset,
                "below topic_vocab",
            ));
        }
        check_finite("freq_intercept", self.freq_intercept)?;
        check_finite("freq_slope", self.freq_slope)?;
        check_positive("freq_knee", self.freq_knee)?;
        check_finite("freq_slope_high", self.freq_slope_high)?;
        check_share("function_word_share", self.function_word_share)?;
        if !(self.freq_noise.is_finite() && self.freq_noise >= 0.0) {
            return Err(invalid("freq_noise", self.freq_noise, "finite and >= 0"));
        }
        if !(self.rare_at_one.is_finite() && self.rare_at_one >= 0.0) {
            return Err(invalid("rare_at_one", self.rare_at_one, "finite and >= 0"));
        }
        check_finite("rare_decay", self.rare_decay)?;
        check_count("users", u64::from(self.users), u64::from(u32::MAX))?;
        check_positive("user_zipf", self.user_zipf)?;
        if !(self.session_mean.is_finite() && self.session_mean >= 1.0) {
            return Err(invalid(
                "session_mean",
                self.session_mean,
                "finite and >= 1",
            ));
        }
        check_positive("mean_gap_ms", self.mean_gap_ms)?;
        Ok(())
    }
}

/// A generated log and its frequency table.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthLog {
    /// Queries in stream order (already normalized: lowercase terms joined by one space).
    pub queries: Vec<String>,
    /// The user of each query.
    pub users: Vec<u32>,
    /// The time of each query, unix milliseconds, strictly increasing.
    pub timestamps_ms: Vec<i64>,
    /// `(word, frequency_per_token)` for every term the log uses, most frequent first
    /// (ties by word), rounded to four significant digits like `wordfreq-large-en`.
    pub freq: Vec<(String, f64)>,
}

/// Mean of a length table (lengths 1, 2, …).
fn mean_length(table: &[f64]) -> f64 {
    let total: f64 = table.iter().sum();
    table
        .iter()
        .enumerate()
        .map(|(i, p)| (i + 1) as f64 * p)
        .sum::<f64>()
        / total
}

/// A length from a table (lengths 1, 2, …).
fn sample_length(table: &[f64], rng: &mut Rng) -> usize {
    let total: f64 = table.iter().sum();
    let mut u = rng.unit() * total;
    for (i, p) in table.iter().enumerate() {
        if u < *p {
            return i + 1;
        }
        u -= p;
    }
    table.len()
}

/// A standard normal variate (Box–Muller).
fn normal(rng: &mut Rng) -> f64 {
    let r = (-2.0 * (1.0 - rng.unit()).ln()).sqrt();
    r * (std::f64::consts::TAU * rng.unit()).cos()
}

/// Seed of the `index`-th generator of stream `tag`.
fn derive(seed: u64, tag: u64, index: u64) -> u64 {
    mix64(mix64(seed ^ tag).wrapping_add(index.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
}

/// The sampling side of a config: Zipf samplers and clamped knobs.
struct Model {
    seed: u64,
    query: Zipf,
    topic: Zipf,
    vocab: Zipf,
    deep: Zipf,
    common: Zipf,
    head_rank: f64,
    common_share: f64,
    common_share_step: f64,
    novel_share: f64,
    rare_single: f64,
    rare_rank_offset: u64,
    common_vocab: u64,
    freq_intercept: f64,
    freq_slope: f64,
    freq_log_knee: f64,
    freq_slope_high: f64,
    function_word_share: f64,
    freq_noise: f64,
    rare_at_one: f64,
    rare_decay: f64,
    size_model: SizeModel,
}

impl Model {
    fn new(cfg: &SynthConfig) -> Self {
        let topic_vocab = u64::from(cfg.topic_vocab.max(1));
        let rare_rank_offset = u64::from(cfg.rare_rank_offset).min(topic_vocab - 1);
        let share = |v: f64| {
            if v.is_finite() {
                v.clamp(0.0, 1.0)
            } else {
                0.0
            }
        };
        let finite = |v: f64, default: f64| if v.is_finite() { v } else { default };
        let d = SynthConfig::default();
        Model {
            seed: cfg.seed,
            query: Zipf::new(cfg.query_pool.clamp(1, 1 << 40), cfg.query_zipf),
            topic: Zipf::new(u64::from(cfg.topics).clamp(1, 1 << 30), cfg.topic_zipf),
            vocab: Zipf::new(topic_vocab, cfg.topic_vocab_zipf),
            deep: Zipf::new(topic_vocab - rare_rank_offset, cfg.topic_vocab_zipf),
            common: Zipf::new(u64::from(cfg.common_vocab), cfg.common_zipf),
            head_rank: if cfg.head_rank > 0.0 {
                cfg.head_rank
            } else {
                f64::MIN_POSITIVE
            },
            common_share: share(cfg.common_share),
            common_share_step: finite(cfg.common_share_step, d.common_share_step),
            novel_share: share(cfg.novel_share),
            rare_single: share(cfg.rare_single),
            rare_rank_offset,
            common_vocab: u64::from(cfg.common_vocab.max(1)),
            freq_intercept: finite(cfg.freq_intercept, d.freq_intercept),
            freq_slope: finite(cfg.freq_slope, d.freq_slope),
            freq_log_knee: if cfg.freq_knee > 0.0 && cfg.freq_knee.is_finite() {
                cfg.freq_knee.log10()
            } else {
                d.freq_knee.log10()
            },
            freq_slope_high: finite(cfg.freq_slope_high, d.freq_slope_high),
            function_word_share: share(cfg.function_word_share),
            freq_noise: finite(cfg.freq_noise, d.freq_noise).max(0.0),
            rare_at_one: finite(cfg.rare_at_one, d.rare_at_one).max(0.0),
            rare_decay: finite(cfg.rare_decay, d.rare_decay),
            size_model: SizeModel::default(),
        }
    }

    /// Probability that a term of a `len`-term query is a common word.
    fn common_share_at(&self, len: f64) -> f64 {
        (self.common_share + self.common_share_step * (len - 2.0))
            .clamp(0.0, 1.0 - self.novel_share)
    }

    /// The terms (keys) of pool id `rank`, into `out`.
    fn query_terms(&self, rank: u64, out: &mut Vec<u64>) {
        out.clear();
        let mut rng = Rng::new(derive(self.seed, TAG_QUERY, rank));
        let head = rng.unit() * (1.0 + rank as f64 / self.head_rank) < 1.0;
        let len = if head {
            sample_length(&HEAD_LENGTHS, &mut rng)
        } else {
            sample_length(&TAIL_LENGTHS, &mut rng)
        }
        .min(MAX_LEN);
        let topic = self.topic.sample(&mut rng);
        let topic_key = (KIND_TOPIC << KIND_SHIFT) | (topic << 32);
        let novel_key = (KIND_NOVEL << KIND_SHIFT) | (rank << POS_BITS);
        if len == 1 && rng.unit() < self.rare_single {
            if rng.unit() < RARE_SINGLE_NOVEL {
                out.push(novel_key);
            } else {
                out.push(topic_key | (self.rare_rank_offset + self.deep.sample(&mut rng)));
            }
            return;
        }
        // How many terms of each kind: randomized rounding of the expected counts, so a
        // query mixes kinds evenly (as "bank of america" does) rather than binomially.
        let lenf = len as f64;
        let novel = ((lenf * self.novel_share + rng.unit()).floor() as usize).min(len);
        let common =
            ((lenf * self.common_share_at(lenf) + rng.unit()).floor() as usize).min(len - novel);
        let mut kinds = [KIND_TOPIC; MAX_LEN];
        kinds[..novel].fill(KIND_NOVEL);
        kinds[novel..novel + common].fill(KIND_COMMON);
        rng.shuffle(&mut kinds[..len]);
        for &kind in &kinds[..len] {
            for _ in 0..MAX_ATTEMPTS {
                let key = match kind {
                    KIND_NOVEL => novel_key | out.len() as u64,
                    KIND_COMMON => (KIND_COMMON << KIND_SHIFT) | self.common.sample(&mut rng),
                    _ => topic_key | self.vocab.sample(&mut rng),
                };
                if !out.contains(&key) {
                    out.push(key);
                    break;
                }
            }
        }
    }

    /// Appends the name of term `key`.
    fn push_name(&self, key: u64, out: &mut String) {
        let body = key & ((1 << KIND_SHIFT) - 1);
        match key >> KIND_SHIFT {
            KIND_COMMON => words::push_vocab_word(body - 1, out),
            KIND_TOPIC => {
                // Cantor pairing of (topic, rank), both 0-based: popular topics' popular
                // words get small indices, so short names.
                // Fits in u64: topic < 2^30 and rank < 2^32 (validated and clamped).
                let (t, w) = ((body >> 32) - 1, (body & 0xffff_ffff) - 1);
                let diagonal = u128::from(t + w);
                let pair = diagonal * (diagonal + 1) / 2 + u128::from(w);
                words::push_vocab_word(self.common_vocab + pair as u64, out);
            }
            _ => words::push_novel_word(
                ((body >> POS_BITS) - 1) * (1 << POS_BITS) + (body & ((1 << POS_BITS) - 1)),
                out,
            ),
        }
    }

    /// Expected occurrences of term `key` per [`REF_QUERIES`] queries (approximate: it uses
    /// the tail length distribution for every query).
    fn popularity(&self, key: u64) -> f64 {
        let body = key & ((1 << KIND_SHIFT) - 1);
        let mean_len = mean_length(&TAIL_LENGTHS);
        let common = self.common_share_at(mean_len);
        let draws = REF_QUERIES * mean_len;
        match key >> KIND_SHIFT {
            KIND_COMMON => draws * common * self.common.pmf(body),
            KIND_TOPIC => {
                let topical = (1.0 - common - self.novel_share).max(0.0);
                draws * topical * self.topic.pmf(body >> 32) * self.vocab.pmf(body & 0xffff_ffff)
            }
            _ => REF_QUERIES * self.query.pmf(body >> POS_BITS),
        }
    }

    /// Per-token frequency of term `key` (see the module docs), rounded to four significant
    /// digits.
    fn frequency(&self, key: u64) -> f64 {
        let mut rng = Rng::new(derive(self.seed, TAG_FREQ, key));
        let c = self.popularity(key).max(1e-12);
        let function_word =
            key >> KIND_SHIFT == KIND_COMMON && rng.unit() < self.function_word_share;
        let p_unknown = (self.rare_at_one * c.powf(-self.rare_decay)).min(1.0);
        let f = if rng.unit() < p_unknown {
            // Aim at the middle of the df bucket, so rounding cannot push it over.
            let df = (1 + rng.below(RARE_MAX_DF)) as f64 - 0.5;
            let docs = self.size_model.docs as f64;
            -(-df / docs).ln_1p() / self.size_model.doc_len
        } else {
            let log_c = c.log10();
            let fit = if log_c <= self.freq_log_knee || function_word {
                self.freq_intercept + self.freq_slope * log_c
            } else {
                self.freq_intercept
                    + self.freq_slope * self.freq_log_knee
                    + self.freq_slope_high * (log_c - self.freq_log_knee)
            };
            let log_f = fit + self.freq_noise * normal(&mut rng);
            10f64.powf(log_f).clamp(MIN_KNOWN_FREQ, MAX_FREQ)
        };
        format!("{f:.3e}").parse().unwrap_or(f)
    }
}

/// Generates the log described by `cfg` (out-of-range knobs are clamped; see
/// [`SynthConfig::validate`]).
pub fn generate(cfg: &SynthConfig) -> SynthLog {
    let model = Model::new(cfg);
    let n = cfg.queries;

    let mut stream = Rng::new(derive(cfg.seed, TAG_STREAM, 0));
    let mut text_of: FxHashMap<u64, usize> = FxHashMap::default();
    let mut texts: Vec<String> = Vec::new();
    let mut used: FxHashSet<u64> = FxHashSet::default();
    let mut keys = Vec::with_capacity(MAX_LEN);
    let mut queries = Vec::with_capacity(n);
    for _ in 0..n {
        let rank = model.query.sample(&mut stream);
        let idx = match text_of.entry(rank) {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => {
                model.query_terms(rank, &mut keys);
                let mut text = String::with_capacity(keys.len() * 8);
                for (i, &key) in keys.iter().enumerate() {
                    if i > 0 {
                        text.push(' ');
                    }
                    model.push_name(key, &mut text);
                    used.insert(key);
                }
                texts.push(text);
                *e.insert(texts.len() - 1)
            }
        };
        queries.push(texts[idx].clone());
    }

    let mut users = Vec::with_capacity(n);
    let user_zipf = Zipf::new(u64::from(cfg.users.max(1)), cfg.user_zipf);
    let stay = 1.0 - 1.0 / cfg.session_mean.max(1.0);
    let mut rng = Rng::new(derive(cfg.seed, TAG_USERS, 0));
    let mut user = 0u32;
    for i in 0..n {
        if i == 0 || rng.unit() >= stay {
            user = (user_zipf.sample(&mut rng) - 1) as u32;
        }
        users.push(user);
    }

    let mut timestamps_ms = Vec::with_capacity(n);
    let mean_gap = if cfg.mean_gap_ms.is_finite() && cfg.mean_gap_ms > 0.0 {
        cfg.mean_gap_ms
    } else {
        1.0
    };
    let mut rng = Rng::new(derive(cfg.seed, TAG_TIME, 0));
    let mut t = cfg.start_ms;
    for _ in 0..n {
        timestamps_ms.push(t);
        let gap = -(1.0 - rng.unit()).ln() * mean_gap;
        t = t.saturating_add((gap.round() as i64).max(1));
    }

    let mut keys: Vec<u64> = used.into_iter().collect();
    keys.sort_unstable();
    let mut freq: Vec<(String, f64)> = keys
        .into_iter()
        .map(|key| {
            let mut name = String::new();
            model.push_name(key, &mut name);
            (name, model.frequency(key))
        })
        .collect();
    freq.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));

    SynthLog {
        queries,
        users,
        timestamps_ms,
        freq,
    }
}

/// Writes `freq` as a TSV with header `word<TAB>frequency_per_token`, frequencies in
/// `{:.3e}` form (like `wordfreq-large-en.tsv.gz`, uncompressed).
pub fn write_freq_tsv(path: &Path, freq: &[(String, f64)]) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(out, "word\tfrequency_per_token")?;
    for (word, f) in freq {
        writeln!(out, "{word}\t{f:.3e}")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::Tokens;

    fn small(seed: u64) -> SynthConfig {
        SynthConfig {
            queries: 5_000,
            seed,
            ..SynthConfig::default()
        }
    }

    #[test]
    fn default_is_valid_and_the_embedded_dataset() {
        let cfg = SynthConfig::default();
        assert_eq!(cfg.validate(), Ok(()));
        assert_eq!((cfg.queries, cfg.seed), (200_000, 1));
    }

    #[test]
    fn validate_names_the_bad_knob() {
        let cfg = SynthConfig {
            novel_share: 1.5,
            ..SynthConfig::default()
        };
        match cfg.validate() {
            Err(SynthError::Invalid { knob, .. }) => assert_eq!(knob, "novel_share"),
            other => panic!("{other:?}"),
        }
        let cfg = SynthConfig {
            rare_rank_offset: 50_000,
            ..SynthConfig::default()
        };
        assert!(cfg.validate().is_err());
        // generate clamps instead of panicking.
        let log = generate(&SynthConfig {
            queries: 100,
            topics: 0,
            query_zipf: -1.0,
            novel_share: 7.0,
            session_mean: 0.0,
            mean_gap_ms: f64::NAN,
            ..SynthConfig::default()
        });
        assert_eq!(log.queries.len(), 100);
    }

    #[test]
    fn set_knobs_by_name() {
        let mut cfg = SynthConfig::default();
        cfg.set("topics", "321").unwrap();
        cfg.set("query_zipf", "0.9").unwrap();
        cfg.set("start_ms", "-5").unwrap();
        assert_eq!((cfg.topics, cfg.query_zipf, cfg.start_ms), (321, 0.9, -5));
        assert!(matches!(
            cfg.set("nope", "1"),
            Err(SynthError::UnknownKnob(_))
        ));
        assert!(matches!(
            cfg.set("topics", "x"),
            Err(SynthError::NotANumber { .. })
        ));
        // Every listed knob is settable.
        for knob in SynthConfig::KNOBS {
            let mut c = SynthConfig::default();
            c.set(knob, "1").unwrap();
        }
    }

    #[test]
    fn same_seed_same_log_and_prefix_stable() {
        let a = generate(&small(3));
        let b = generate(&small(3));
        assert_eq!(a, b);
        let c = generate(&small(4));
        assert_ne!(a.queries, c.queries);
        let short = generate(&SynthConfig {
            queries: 1_000,
            ..small(3)
        });
        assert_eq!(short.queries[..], a.queries[..1_000]);
        assert_eq!(short.users[..], a.users[..1_000]);
        assert_eq!(short.timestamps_ms[..], a.timestamps_ms[..1_000]);
        // A term's frequency does not depend on the log's length.
        let long: FxHashMap<&str, f64> = a.freq.iter().map(|(w, f)| (w.as_str(), *f)).collect();
        for (w, f) in &short.freq {
            assert_eq!(long.get(w.as_str()), Some(f));
        }
    }

    #[test]
    fn queries_are_normalized_and_freq_covers_them() {
        let log = generate(&small(5));
        let freq: FxHashMap<&str, f64> = log.freq.iter().map(|(w, f)| (w.as_str(), *f)).collect();
        assert_eq!(freq.len(), log.freq.len(), "duplicate words in freq");
        let mut tokens = Tokens::new();
        let mut used = FxHashSet::default();
        for q in &log.queries {
            tokens.tokenize(q);
            assert!(!tokens.is_empty());
            assert_eq!(tokens.normalized(), q, "not normalized: {q:?}");
            for t in tokens.iter() {
                assert!(t.bytes().all(|b| b.is_ascii_lowercase()));
                assert!(freq.contains_key(t), "{t} has no frequency");
                used.insert(t.to_owned());
            }
        }
        assert_eq!(used.len(), freq.len(), "freq lists unused words");
        for (w, f) in &log.freq {
            assert!(f.is_finite() && *f > 0.0 && *f < 1.0, "{w}: {f}");
        }
        assert!(log.freq.windows(2).all(|p| p[0].1 >= p[1].1));
    }

    #[test]
    fn users_and_timestamps() {
        let log = generate(&small(6));
        assert_eq!(log.users.len(), log.queries.len());
        assert_eq!(log.timestamps_ms.len(), log.queries.len());
        assert_eq!(log.timestamps_ms[0], AOL_START_MS);
        assert!(log.timestamps_ms.windows(2).all(|w| w[0] < w[1]));
        let span = (log.timestamps_ms[log.queries.len() - 1] - AOL_START_MS) as f64;
        let mean = span / (log.queries.len() - 1) as f64;
        assert!((mean / 40_000.0 - 1.0).abs() < 0.1, "mean gap {mean}");
        assert!(log.users.iter().all(|&u| u < 10_000));
        let changes = log.users.windows(2).filter(|w| w[0] != w[1]).count();
        let sessions = changes as f64 + 1.0;
        let per_session = log.queries.len() as f64 / sessions;
        assert!((2.0..3.2).contains(&per_session), "{per_session}");
    }

    #[test]
    fn unknown_words_get_a_few_documents() {
        let m = Model::new(&SynthConfig::default());
        let model = SizeModel::default();
        // A novel word of a deep-tail query is unknown to frequency lists.
        let key = (KIND_NOVEL << KIND_SHIFT) | (2_000_000 << POS_BITS);
        let df = model.df(Some(m.frequency(key)));
        assert!((1..=RARE_MAX_DF).contains(&df), "df {df}");
        // The most common word is in most documents.
        let top = (KIND_COMMON << KIND_SHIFT) | 1;
        assert!(m.popularity(top) > 10_000.0);
    }
}
