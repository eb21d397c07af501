//! The promotion rule of `ballot retrain`: promote the candidate table when it serves
//! more, and say how sure the decision is.
//!
//! The deciding figure is the throughput the queueing simulator predicts for each table on
//! the held-out day ([`mod@super::predict`]): the candidate must serve at least `--min-gain`
//! more. The total flash bytes per query of the trace replay stay a guard
//! (`--max-miss-rise`), so a table never trades many more flash reads for balance. The
//! held-out day can also be cut into parts (hours, or equal slices of a day without times)
//! on which the replay's busiest replica must read less on a share of them
//! (`--min-part-wins`; off by default: on the time-ordered AOL log it refused the candidate
//! that served 20% more live). First of all, the candidate may move the top vote of at most
//! `--max-move` of the train days' requested bytes ([`cache_sim::sim::movement`]): what it
//! moves, the replicas' caches read again.

use cache_sim::sim::movement::Movement;
use serde::Serialize;

/// One table's figures over a stretch of test queries (the day, or one part of it).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Figures {
    /// Test queries.
    pub queries: u64,
    /// Flash bytes read per query, all replicas together.
    pub flash_bytes_per_query: f64,
    /// The busiest replica's flash bytes per query of the whole cluster (compared part by
    /// part under `--min-part-wins`).
    pub busiest_flash_bytes_per_query: f64,
    /// Flash bytes / postings bytes requested.
    pub miss_bytes_ratio: f64,
    /// The busiest replica's share of the flash bytes.
    pub busiest_flash_share: f64,
}

impl Figures {
    /// The figures of `queries` queries that requested `requested` postings bytes and read
    /// `flash[r]` bytes from replica `r`'s flash.
    pub fn new(queries: u64, requested: u64, flash: &[u64]) -> Figures {
        let total: u64 = flash.iter().sum();
        let busiest = flash.iter().copied().max().unwrap_or(0);
        let per = |b: u64| {
            if queries == 0 {
                0.0
            } else {
                b as f64 / queries as f64
            }
        };
        let of = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        Figures {
            queries,
            flash_bytes_per_query: per(total),
            busiest_flash_bytes_per_query: per(busiest),
            miss_bytes_ratio: of(total, requested),
            busiest_flash_share: of(busiest, total),
        }
    }
}

/// Default of `--min-gain`.
pub const DEFAULT_MIN_GAIN: f64 = 0.02;

/// Default of `--min-part-wins`: the parts do not decide.
pub const DEFAULT_MIN_PART_WINS: f64 = 0.0;

/// The margins of the rule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rule {
    /// The candidate's predicted throughput must be at least this much higher, relative to
    /// the served table's (0.02 = 2%).
    pub min_gain: f64,
    /// Its total flash bytes per query may be at most this much higher, relative (the
    /// guard).
    pub max_miss_rise: f64,
    /// Share of the parts (with queries) on which the candidate's busiest flash bytes per
    /// query must be lower than the served table's.
    pub min_part_wins: f64,
    /// The largest share of the train days' requested bytes whose top vote may move.
    pub max_move: f64,
}

/// The rule's answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// Promote the candidate.
    pub promote: bool,
    /// The figure that decided: `moved_share`, `throughput_qps`, `flash_bytes_per_query`
    /// (the guard) or `part_wins`.
    pub deciding: &'static str,
    /// Why, with the numbers.
    pub reason: String,
    /// Parts (with queries) on which the candidate's replayed busiest flash bytes per query
    /// are lower.
    pub part_wins: usize,
    /// Parts with queries.
    pub parts: usize,
    /// Wins needed.
    pub wins_needed: usize,
}

/// The predicted throughputs, queries/s, of the two tables.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throughputs {
    pub served: f64,
    pub candidate: f64,
}

/// Decides between the served table (`served`) and the candidate by their predicted
/// throughputs (`qps`), their replays of the whole held-out day and of its parts
/// (`(served, candidate)` per part); `moved` is what the candidate moves of the train
/// days' requested bytes.
pub fn decide(
    rule: &Rule,
    moved: &Movement,
    qps: Throughputs,
    served: &Figures,
    candidate: &Figures,
    parts: &[(Figures, Figures)],
) -> Verdict {
    let counted: Vec<_> = parts.iter().filter(|(s, _)| s.queries > 0).collect();
    let part_wins = counted
        .iter()
        .filter(|(s, c)| c.busiest_flash_bytes_per_query < s.busiest_flash_bytes_per_query)
        .count();
    let wins_needed = (rule.min_part_wins * counted.len() as f64).ceil() as usize;
    let verdict = |promote, deciding, reason| Verdict {
        promote,
        deciding,
        reason,
        part_wins,
        parts: counted.len(),
        wins_needed,
    };
    if !moved.within(rule.max_move) {
        return verdict(
            false,
            "moved_share",
            format!(
                "it moves the top vote of {:.1}% of the train days' requested bytes, more than \
                 --max-move {:.1}%",
                moved.share() * 100.0,
                rule.max_move * 100.0
            ),
        );
    }
    if !(qps.served > 0.0 && qps.candidate.is_finite()) {
        return verdict(
            false,
            "throughput_qps",
            format!(
                "no throughput to compare: predicted {:.1} queries/s served, {:.1} candidate",
                qps.served, qps.candidate
            ),
        );
    }
    let needed = qps.served * (1.0 + rule.min_gain);
    let predicted = format!(
        "predicted throughput {:.1} {} {:.1} queries/s (served {:.1} plus {:.1}%)",
        qps.candidate,
        if qps.candidate >= needed { ">=" } else { "<" },
        needed,
        qps.served,
        rule.min_gain * 100.0
    );
    if qps.candidate < needed {
        return verdict(false, "throughput_qps", predicted);
    }
    let cap = served.flash_bytes_per_query * (1.0 + rule.max_miss_rise);
    if candidate.flash_bytes_per_query > cap {
        return verdict(
            false,
            "flash_bytes_per_query",
            format!(
                "{predicted}, but flash bytes per query {:.0} > {:.0} (served {:.0} plus {:.1}%): it would read much more from flash for its balance",
                candidate.flash_bytes_per_query,
                cap,
                served.flash_bytes_per_query,
                rule.max_miss_rise * 100.0
            ),
        );
    }
    let wins = format!(
        "the busiest replica lower on {part_wins} of {} parts (needs {wins_needed})",
        counted.len()
    );
    if part_wins < wins_needed {
        return verdict(false, "part_wins", format!("{predicted}, but {wins}"));
    }
    verdict(
        true,
        "throughput_qps",
        format!(
            "{predicted}, flash bytes per query {:.0} <= {:.0}, {wins}",
            candidate.flash_bytes_per_query, cap
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: Rule = Rule {
        min_gain: 0.02,
        max_miss_rise: 0.05,
        min_part_wins: 0.5,
        max_move: 0.2,
    };

    /// A movement of `per_mille` thousandths of the requested bytes.
    fn moved(per_mille: u64) -> Movement {
        Movement {
            moved_bytes: per_mille,
            requested_bytes: 1000,
        }
    }

    /// Figures with a given miss bytes ratio and busiest share, for 1,000 queries that
    /// request 10,000 bytes each.
    fn fig(miss_bytes_ratio: f64, busiest_share: f64) -> Figures {
        let total = (miss_bytes_ratio * 1e7).round() as u64;
        let busiest = (busiest_share * total as f64).round() as u64;
        let rest = (total - busiest) / 7;
        let mut flash = vec![rest; 8];
        flash[3] = busiest;
        Figures::new(1_000, 10_000_000, &flash)
    }

    fn parts(
        served: Figures,
        candidate: Figures,
        n: usize,
        wins: usize,
    ) -> Vec<(Figures, Figures)> {
        (0..n)
            .map(|i| {
                if i < wins {
                    (served, candidate)
                } else {
                    (candidate, served)
                }
            })
            .collect()
    }

    /// Throughputs predicted for the served table and the candidate.
    fn qps(served: f64, candidate: f64) -> Throughputs {
        Throughputs { served, candidate }
    }

    #[test]
    fn a_candidate_predicted_to_serve_more_is_promoted_whatever_its_busiest_replica_reads() {
        // The throughputs of the 14-day fresh candidate of the time-ordered AOL log:
        // predicted 358.9 queries/s against 290.3 (live 1.20x the served table). The
        // replay's figures here are made up so that its busiest replica reads more
        // (0.2074 x 0.160 = 331.8 against 0.2048 x 0.138 = 282.6 bytes per query) and on
        // most parts of the day: the prediction decides, not that figure (the parts do
        // not by default).
        let served = fig(0.2048, 0.138);
        let candidate = fig(0.2074, 0.160);
        assert!(candidate.busiest_flash_bytes_per_query > served.busiest_flash_bytes_per_query);
        let default = Rule {
            min_part_wins: DEFAULT_MIN_PART_WINS,
            ..RULE
        };
        let v = decide(
            &default,
            &moved(100),
            qps(290.3, 358.9),
            &served,
            &candidate,
            &parts(served, candidate, 24, 20),
        );
        assert!(v.promote, "{v:?}");
        assert_eq!(v.deciding, "throughput_qps");
        assert_eq!((v.part_wins, v.parts, v.wins_needed), (4, 24, 0));
        assert!(v.reason.contains("358.9 >= 296.1"), "{}", v.reason);
        // Nothing to compare (no flash work at all): refused.
        let v = decide(
            &default,
            &moved(100),
            qps(0.0, 0.0),
            &served,
            &candidate,
            &[],
        );
        assert!(!v.promote && v.deciding == "throughput_qps", "{v:?}");
    }

    #[test]
    fn a_candidate_predicted_to_serve_less_is_refused_with_a_cooler_busiest_replica() {
        // Fewer bytes in all and a cooler busiest replica, but predicted 1.5% slower.
        let served = fig(0.2048, 0.160);
        let candidate = fig(0.1946, 0.138);
        let v = decide(
            &RULE,
            &moved(100),
            qps(300.0, 295.5),
            &served,
            &candidate,
            &parts(served, candidate, 24, 24),
        );
        assert!(!v.promote, "{v:?}");
        assert_eq!(v.deciding, "throughput_qps");
        assert!(v.reason.contains("295.5 < 306.0"), "{}", v.reason);
        // A gain below --min-gain is refused too.
        let v = decide(
            &RULE,
            &moved(100),
            qps(300.0, 305.9),
            &served,
            &candidate,
            &parts(served, candidate, 24, 24),
        );
        assert!(!v.promote && v.deciding == "throughput_qps", "{v:?}");
    }

    #[test]
    fn the_guard_refuses_balance_bought_with_many_more_flash_reads() {
        // Predicted faster, but 2250 flash bytes per query in all is 9.9% more than 2048.
        let served = fig(0.2048, 0.160);
        let candidate = fig(0.2250, 0.125);
        let v = decide(
            &RULE,
            &moved(100),
            qps(300.0, 320.0),
            &served,
            &candidate,
            &parts(served, candidate, 24, 24),
        );
        assert!(!v.promote, "{v:?}");
        assert_eq!(v.deciding, "flash_bytes_per_query");
    }

    #[test]
    fn a_win_on_the_day_but_on_too_few_parts_is_refused() {
        let served = fig(0.2048, 0.160);
        let candidate = fig(0.2074, 0.138);
        let faster = qps(300.0, 320.0);
        let v = decide(
            &RULE,
            &moved(100),
            faster,
            &served,
            &candidate,
            &parts(served, candidate, 24, 11),
        );
        assert!(!v.promote, "{v:?}");
        assert_eq!(v.deciding, "part_wins");
        assert!(
            v.reason.contains("lower on 11 of 24 parts (needs 12)"),
            "{}",
            v.reason
        );
        // Parts without queries do not count.
        let mut p = parts(served, candidate, 24, 12);
        p.push((Figures::new(0, 0, &[0; 8]), Figures::new(0, 0, &[0; 8])));
        assert!(decide(&RULE, &moved(100), faster, &served, &candidate, &p).promote);
        // With the default share of parts (none), the parts do not decide.
        let off = Rule {
            min_part_wins: DEFAULT_MIN_PART_WINS,
            ..RULE
        };
        let p = parts(served, candidate, 24, 0);
        assert!(decide(&off, &moved(100), faster, &served, &candidate, &p).promote);
    }

    #[test]
    fn a_candidate_that_moves_more_than_allowed_is_refused_with_the_figure_named() {
        let served = fig(0.2048, 0.160);
        let candidate = fig(0.2074, 0.138);
        let p = parts(served, candidate, 24, 20);
        let faster = qps(300.0, 320.0);
        assert!(decide(&RULE, &moved(200), faster, &served, &candidate, &p).promote);
        let v = decide(&RULE, &moved(835), faster, &served, &candidate, &p);
        assert!(!v.promote, "{v:?}");
        assert_eq!(v.deciding, "moved_share");
        assert!(
            v.reason
                .contains("83.5% of the train days' requested bytes")
                && v.reason.contains("--max-move 20.0%"),
            "{}",
            v.reason
        );
    }
}
