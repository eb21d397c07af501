//! What the simulator benches share: the embedded synthetic default as a trace.

use cache_sim::sim::Trace;
use data::sizes::{FreqTable, SizeModel, Sizes};
use data::synth::{generate, SynthConfig};

/// The synthetic log's generator (200,000 queries, seed 1) with sizes from the standard size
/// model over its own frequencies, split 80% train / 20% test.
pub fn synthetic_trace() -> Trace {
    let log = generate(&SynthConfig::default());
    let sizes = Sizes::Model {
        freq: FreqTable::from_pairs(log.freq),
        model: SizeModel::default(),
    };
    let n = log.queries.len();
    Trace::build(log.queries.iter().map(String::as_str), n * 4 / 5, &sizes)
}

/// Whether this run measures (`cargo bench` passes `--bench`) rather than checks that the
/// bench works (`cargo test --benches`, as CI runs it): speed floors are asserted only
/// when measuring, on a machine the caller keeps quiet, never in the test suite, which
/// must pass beside other load.
pub fn benchmarking() -> bool {
    std::env::args().any(|a| a == "--bench")
}
