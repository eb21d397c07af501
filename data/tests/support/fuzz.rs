//! Case counts of the property-based fuzz tests: small enough for CI by default, raised for
//! long runs with `BALLOT_FUZZ_CASES` (for example `BALLOT_FUZZ_CASES=1000000`).

use proptest::test_runner::Config;

/// `BALLOT_FUZZ_CASES` when set (a positive number), else `ci_default`.
pub fn cases(ci_default: u32) -> u32 {
    std::env::var("BALLOT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(ci_default)
}

/// A proptest configuration running [`cases`]`(ci_default)` cases.
pub fn config(ci_default: u32) -> Config {
    Config {
        cases: cases(ci_default),
        ..Config::default()
    }
}
