//! Property-based fuzzing of the voting-table loader (issue 12): arbitrary bytes, valid
//! tables mutated byte by byte, and truncated files never panic; each is a valid table or a
//! typed error naming its source, and loading it never holds more than a bounded amount of
//! memory (a counting allocator measures every case). Run long with
//! `BALLOT_FUZZ_CASES=1000000`.

#[path = "support/fuzz.rs"]
mod fuzz;
#[path = "support/peak_alloc.rs"]
mod peak_alloc;
#[path = "support/tables.rs"]
mod tables;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use data::table::{TableLimits, TableRow, VotingTable};
use peak_alloc::peak_during;
use proptest::prelude::*;
use proptest::sample::Index;
use tables::{repeated_term_table, table_bytes, Layout};

/// Small limits, so that the memory bound below is tight.
const LIMITS: TableLimits = TableLimits {
    max_rows: 100_000,
    max_terms: 50_000,
    max_term_bytes: 256,
    max_total_term_bytes: 1 << 20,
    max_decoded_bytes: 4 << 20,
    max_page_bytes: 1 << 20,
    max_metadata_bytes: 1 << 20,
};

/// The most a load within [`LIMITS`] may hold at once: pages and dictionaries of three
/// columns, one record batch of 4,096 rows of 256-byte terms, the rows and their checks.
const MAX_PEAK: usize = 24 << 20;

const LABEL: &str = "<fuzz>";

/// Valid tables (and one with duplicate votes) in several layouts, to mutate.
fn seeds() -> &'static [Vec<u8>] {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let plain = Layout {
            dictionary: false,
            ..Layout::default()
        };
        let groups = Layout {
            row_group_rows: 16,
            ..Layout::default()
        };
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("t.parquet");
        let rows = (0..40)
            .map(|i| TableRow {
                term: format!("térm{}", i / 2),
                replica: (i % 2) as u16,
                weight: i as f32 / 4.0,
            })
            .collect();
        let meta = BTreeMap::from([("trained_on".to_owned(), "fuzz".to_owned())]);
        VotingTable::new(2, rows, meta)
            .unwrap()
            .write_parquet(&path)
            .unwrap();
        vec![
            table_bytes(50, |i| format!("term{}", i / 4), Layout::default()),
            table_bytes(30, |i| format!("{i}"), plain),
            table_bytes(100, |i| format!("w{}", i / 4), groups),
            std::fs::read(&path).unwrap(),
            repeated_term_table(500, "abc"),
        ]
    })
}

/// Loads `bytes` (from memory, or from a file when `via_file`) within [`LIMITS`] and checks
/// the outcome and the memory it took.
fn check(bytes: Vec<u8>, via_file: bool) -> Result<(), TestCaseError> {
    // The loader catches the panics of the Parquet decoder; print their message without a
    // backtrace, whose symbolization (RUST_BACKTRACE=1) would count in the memory measured.
    static QUIET: OnceLock<()> = OnceLock::new();
    QUIET.get_or_init(|| std::panic::set_hook(Box::new(|info| eprintln!("{info}"))));
    let (result, peak) = if via_file {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("fuzz.parquet");
        std::fs::write(&path, &bytes).unwrap();
        let (r, peak) = peak_during(|| VotingTable::read_parquet_with_limits(&path, None, &LIMITS));
        (
            r.map_err(|e| e.to_string().replace(&path.display().to_string(), LABEL)),
            peak,
        )
    } else {
        let (r, peak) = peak_during(|| {
            VotingTable::from_parquet_bytes_with_limits(bytes, Path::new(LABEL), None, &LIMITS)
        });
        (r.map_err(|e| e.to_string()), peak)
    };
    prop_assert!(peak <= MAX_PEAK, "loading took {peak} bytes: {result:?}");
    match result {
        Ok(t) => {
            prop_assert!(!t.rows.is_empty() && t.rows.len() as u64 <= LIMITS.max_rows);
            for r in &t.rows {
                prop_assert!(!r.term.is_empty() && r.term.len() <= LIMITS.max_term_bytes);
                prop_assert!(r.replica < t.replicas);
                prop_assert!(r.weight.is_finite() && r.weight >= 0.0);
            }
            prop_assert!(t.validate(Path::new(LABEL)).is_ok());
        }
        Err(msg) => prop_assert!(msg.starts_with(LABEL), "{msg}"),
    }
    Ok(())
}

/// One corruption of a file's bytes.
#[derive(Clone, Debug)]
enum Mutation {
    /// XORs a byte with a non-zero mask.
    Flip(Index, u8),
    /// Sets a byte to a value that often means something in Thrift or Parquet.
    Set(Index, u8),
    /// Writes a 5-byte varint of about 2^31 (a huge size or count).
    Varint(Index),
    /// Deletes up to `n` bytes.
    Delete(Index, usize),
    /// Inserts bytes.
    Insert(Index, Vec<u8>),
    /// Copies `n` bytes from one place over another.
    Copy(Index, Index, usize),
    /// Cuts the file.
    Truncate(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let special = prop::sample::select(vec![
        0x00u8, 0x01, 0x02, 0x0c, 0x15, 0x16, 0x18, 0x19, 0x1c, 0x7f, 0x80, 0xf5, 0xff,
    ]);
    prop_oneof![
        4 => (any::<Index>(), 1u8..=255).prop_map(|(i, m)| Mutation::Flip(i, m)),
        3 => (any::<Index>(), special).prop_map(|(i, b)| Mutation::Set(i, b)),
        2 => any::<Index>().prop_map(Mutation::Varint),
        1 => (any::<Index>(), 1usize..64).prop_map(|(i, n)| Mutation::Delete(i, n)),
        1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => (any::<Index>(), any::<Index>(), 1usize..64)
            .prop_map(|(a, b, n)| Mutation::Copy(a, b, n)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let len = bytes.len();
    match m {
        Mutation::Flip(i, mask) => bytes[i.index(len)] ^= mask,
        Mutation::Set(i, b) => bytes[i.index(len)] = *b,
        Mutation::Varint(i) => {
            let at = i.index(len);
            for (k, b) in [0xfe, 0xff, 0xff, 0xff, 0x0f].into_iter().enumerate() {
                if let Some(slot) = bytes.get_mut(at + k) {
                    *slot = b;
                }
            }
        }
        Mutation::Delete(i, n) => {
            let at = i.index(len);
            bytes.drain(at..(at + n).min(len));
        }
        Mutation::Insert(i, new) => {
            let at = i.index(len + 1);
            bytes.splice(at..at, new.iter().copied());
        }
        Mutation::Copy(from, to, n) => {
            let (from, to) = (from.index(len), to.index(len));
            let n = (*n).min(len - from).min(len - to);
            bytes.copy_within(from..from + n, to);
        }
        Mutation::Truncate(i) => bytes.truncate(i.index(len)),
    }
}

proptest! {
    #![proptest_config(fuzz::config(300))]

    #[test]
    fn any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        check(bytes, false)?;
    }

    #[test]
    fn any_bytes_with_a_parquet_frame(body in prop::collection::vec(any::<u8>(), 0..2048), footer in any::<Index>()) {
        // "PAR1", the body, a footer length within the body, "PAR1": past the magic checks.
        let footer_len = footer.index(body.len() + 1) as u32;
        let mut bytes = b"PAR1".to_vec();
        bytes.extend(&body);
        bytes.extend(footer_len.to_le_bytes());
        bytes.extend(b"PAR1");
        check(bytes, false)?;
    }

    #[test]
    fn mutated_valid_tables(
        seed in any::<Index>(),
        mutations in prop::collection::vec(mutation(), 1..8),
        via_file in prop::bool::weighted(0.1),
    ) {
        let seeds = seeds();
        let mut bytes = seeds[seed.index(seeds.len())].clone();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        check(bytes, via_file)?;
    }

    #[test]
    fn truncated_tables(seed in any::<Index>(), at in any::<Index>(), via_file in any::<bool>()) {
        let seeds = seeds();
        let bytes = &seeds[seed.index(seeds.len())];
        check(bytes[..at.index(bytes.len())].to_vec(), via_file)?;
    }
}

#[test]
fn the_seeds_load() {
    for (i, seed) in seeds().iter().enumerate() {
        let r = VotingTable::from_parquet_bytes_with_limits(
            seed.clone(),
            Path::new(LABEL),
            None,
            &LIMITS,
        );
        // The last seed holds duplicate votes: it parses, then fails validation.
        assert_eq!(r.is_ok(), i + 1 < seeds().len(), "seed {i}: {r:?}");
    }
}
