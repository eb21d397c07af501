//! The voting-table loader against hostile tables (issue 12): each is rejected with a
//! [`TableError::Limit`] naming the file and the limit, and rejecting it takes little memory
//! (measured with a counting allocator), however much the file describes.

#[path = "support/peak_alloc.rs"]
mod peak_alloc;
#[path = "support/tables.rs"]
mod tables;

use std::path::Path;

use data::table::{Limit, TableError, TableLimits, VotingTable};
use data::tokenizer::MAX_TERM_BYTES;
use peak_alloc::peak_during;
use tables::{repeated_term_table, table_bytes, write_table, Layout};
use tempfile::TempDir;

const MIB: usize = 1 << 20;

/// Loads `bytes` from a file and from memory with `limits`; both must fail on `limit`,
/// naming the source, within `max_peak` bytes. Returns the file's error message.
fn expect_limit(bytes: Vec<u8>, limits: &TableLimits, limit: Limit, max_peak: usize) -> String {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("hostile.parquet");
    std::fs::write(&path, &bytes).unwrap();
    let (from_file, peak_file) =
        peak_during(|| VotingTable::read_parquet_with_limits(&path, None, limits));
    let label = Path::new("<upload>");
    let (from_bytes, peak_bytes) =
        peak_during(|| VotingTable::from_parquet_bytes_with_limits(bytes, label, None, limits));
    let mut message = String::new();
    for (result, peak, name) in [
        (from_file, peak_file, path.display().to_string()),
        (from_bytes, peak_bytes, "<upload>".to_owned()),
    ] {
        match result {
            Err(e @ TableError::Limit { limit: got, .. }) if got == limit => {
                let msg = e.to_string();
                assert!(msg.contains(&name), "{msg} does not name {name}");
                assert!(msg.contains(limit.name()), "{msg} does not name the limit");
                assert!(msg.len() < 400, "message too long: {msg}");
                assert!(
                    peak <= max_peak,
                    "{name}: rejecting took {peak} bytes (at most {max_peak})"
                );
                eprintln!("{msg} (peak {peak} bytes)");
                if message.is_empty() {
                    message = msg;
                }
            }
            Err(e) => panic!("{name}: expected {limit}, got {e}"),
            Ok(t) => panic!("{name}: expected {limit}, accepted {} rows", t.rows.len()),
        }
    }
    message
}

#[test]
fn a_30_kb_term_in_a_million_rows_is_rejected_before_decoding() {
    // Dictionary encoding makes these 30 GB of rows a file of a few tens of kilobytes.
    let bytes = repeated_term_table(1_000_000, &"x".repeat(30_000));
    assert!(bytes.len() < 64 << 10, "{} bytes", bytes.len());
    let msg = expect_limit(
        bytes,
        &TableLimits::default(),
        Limit::TermBytes,
        bytes_len_bound(),
    );
    assert!(msg.contains("dictionary entry 0 is 30000 bytes"), "{msg}");
}

/// What rejecting a small hostile file may take: the file, its pages and the reader's
/// buffers, far below what the file describes.
fn bytes_len_bound() -> usize {
    4 * MIB
}

#[test]
fn a_30_kb_term_in_100k_rows_is_rejected_before_decoding() {
    let bytes = repeated_term_table(100_000, &"x".repeat(30_000));
    expect_limit(
        bytes,
        &TableLimits::default(),
        Limit::TermBytes,
        bytes_len_bound(),
    );
}

#[test]
fn huge_terms_are_rejected_by_their_page_size_or_length() {
    // Three 4 MB terms: each longer than any term; dictionary-encoded, the dictionary says so.
    let big = |i: usize| char::from(b'a' + i as u8).to_string().repeat(4 * MIB);
    let bytes = table_bytes(3, big, Layout::default());
    expect_limit(
        bytes.clone(),
        &TableLimits::default(),
        Limit::TermBytes,
        16 * MIB,
    );
    // With smaller pages allowed, the page size stops them before any decompression.
    let small_pages = TableLimits {
        max_page_bytes: MIB as u64,
        ..TableLimits::default()
    };
    expect_limit(bytes, &small_pages, Limit::PageBytes, bytes_len_bound());
    // PLAIN-encoded, the record batch check finds them (each page holds one value).
    let plain = table_bytes(
        3,
        big,
        Layout {
            dictionary: false,
            ..Layout::default()
        },
    );
    let msg = expect_limit(plain, &TableLimits::default(), Limit::TermBytes, 48 * MIB);
    assert!(msg.contains("row 0"), "{msg}");
}

#[test]
fn the_footer_row_count_is_checked_before_any_page() {
    let limits = TableLimits {
        max_rows: 1_000,
        ..TableLimits::default()
    };
    let bytes = table_bytes(1_001, |i| format!("t{i}"), Layout::default());
    let msg = expect_limit(bytes, &limits, Limit::Rows, bytes_len_bound());
    assert!(msg.contains("1001 rows"), "{msg}");
    // At the limit, the table loads.
    let ok = table_bytes(1_000, |i| format!("t{i}"), Layout::default());
    let t = VotingTable::from_parquet_bytes_with_limits(ok, Path::new("ok"), None, &limits)
        .expect("a table at the limit loads");
    assert_eq!(t.rows.len(), 1_000);
}

#[test]
fn distinct_terms_are_counted_in_dictionaries_and_batches() {
    let limits = TableLimits {
        max_terms: 100,
        ..TableLimits::default()
    };
    let many = |i: usize| format!("t{}", i / 4);
    // 101 distinct terms: the dictionary holds them all.
    expect_limit(
        table_bytes(404, many, Layout::default()),
        &limits,
        Limit::Terms,
        bytes_len_bound(),
    );
    // Without a dictionary, the batch loop counts them.
    let plain = Layout {
        dictionary: false,
        ..Layout::default()
    };
    let msg = expect_limit(
        table_bytes(404, many, plain),
        &limits,
        Limit::Terms,
        bytes_len_bound(),
    );
    assert!(msg.contains("row 400"), "{msg}");
    let ok = table_bytes(400, many, plain);
    VotingTable::from_parquet_bytes_with_limits(ok, Path::new("ok"), None, &limits)
        .expect("100 distinct terms load");
}

#[test]
fn total_term_bytes_and_decoded_bytes_are_bounded() {
    let term = |i: usize| format!("{i:0>100}");
    let bytes = table_bytes(10_000, term, Layout::default());
    let limits = TableLimits {
        max_total_term_bytes: 100 * 5_000,
        ..TableLimits::default()
    };
    expect_limit(bytes.clone(), &limits, Limit::TotalTermBytes, 8 * MIB);
    let limits = TableLimits {
        max_decoded_bytes: 100_000,
        ..TableLimits::default()
    };
    expect_limit(bytes, &limits, Limit::DecodedBytes, bytes_len_bound());
}

#[test]
fn the_footer_length_is_checked_before_parsing() {
    let limits = TableLimits {
        max_metadata_bytes: 64,
        ..TableLimits::default()
    };
    let bytes = table_bytes(10, |i| format!("t{i}"), Layout::default());
    expect_limit(bytes, &limits, Limit::MetadataBytes, bytes_len_bound());
}

#[test]
fn the_longest_term_loads_and_one_byte_more_does_not() {
    let dir = TempDir::new().unwrap();
    for (dictionary, len, ok) in [
        (true, MAX_TERM_BYTES, true),
        (true, MAX_TERM_BYTES + 1, false),
        (false, MAX_TERM_BYTES, true),
        (false, MAX_TERM_BYTES + 1, false),
    ] {
        let path = dir.path().join("t.parquet");
        let layout = Layout {
            dictionary,
            ..Layout::default()
        };
        write_table(&path, 8, |i| format!("{i}{}", "y".repeat(len - 1)), layout);
        match VotingTable::read_parquet(&path, Some(4)) {
            Ok(t) => assert!(ok, "{len} bytes accepted: {} rows", t.rows.len()),
            Err(TableError::Limit {
                limit: Limit::TermBytes,
                ..
            }) if !ok => {}
            Err(e) => panic!("{len} bytes (dictionary {dictionary}): {e}"),
        }
    }
}

#[test]
fn a_valid_table_round_trips_within_a_small_multiple_of_its_size() {
    // 200k rows of AOL-like terms: what the loader holds is the rows themselves plus the
    // validation set; the reader's transient buffers stay small beside them.
    let term = |i: usize| format!("term{}", i / 3);
    let bytes = table_bytes(200_000, term, Layout::default());
    let (table, peak) = peak_during(|| {
        VotingTable::from_parquet_bytes(bytes, Path::new("valid"), Some(4)).expect("valid")
    });
    assert_eq!(table.rows.len(), 200_000);
    let held: usize = table
        .rows
        .iter()
        .map(|r| std::mem::size_of_val(r) + r.term.len())
        .sum();
    eprintln!("rows hold {held} bytes; loading peaked at {peak}");
    assert!(peak <= 3 * held, "peak {peak} for {held} bytes of rows");
}
