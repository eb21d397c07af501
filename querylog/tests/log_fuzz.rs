//! Fuzz-style property tests of the query-log readers: mutated gzip streams, mutated and
//! truncated Parquet logs, random and mutated TSV/CSV/lines/TREC text under every layout.
//!
//! Properties: no panic; a failure is a [`LogError`] whose message names the file; a
//! success is a consistent report (`lines == records + collapsed + malformed + blank`); no
//! delimited layout yields a query holding its delimiter; a delimited log is never read as
//! one query per line without `--format lines`; and memory stays bounded — a counting
//! allocator measures each read's peak, which must stay under [`PEAK_LIMIT`] whatever the
//! input claims (a line without a newline, a Parquet page header announcing gigabytes).
//!
//! Case counts are small by default so that CI runs them in seconds; set
//! `BALLOT_FUZZ_CASES=N` to run N cases per property (e.g. 100000 for a long run).

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::cell::Cell;
use std::io::Write;
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use querylog::time::TimeFormat;
use querylog::{
    parse_columns, read_log, write_log_parquet, ColumnRef, LayoutSpec, LogError, LogFormat,
    LogRecord, QueryLog, ReadOptions, Shape, MAX_LINE_BYTES,
};
use tempfile::TempDir;

// ---- a counting allocator: per-thread current and peak bytes ----

struct Counting;

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grow(n: usize) {
    let _ = CURRENT.try_with(|c| {
        let v = c.get().saturating_add(n);
        c.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

fn shrink(n: usize) {
    let _ = CURRENT.try_with(|c| c.set(c.get().saturating_sub(n)));
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are
// plain thread-local cells (no allocation, no destructor).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        // SAFETY: the caller's contract is the system allocator's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: AllocLayout) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) };
        shrink(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            shrink(layout.size());
            grow(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The most a single read may allocate above what was live before it. The readers' own
/// buffers are about 1.5 MiB (read buffer, gzip buffer, one line); the inputs here are small.
const PEAK_LIMIT: usize = 48 << 20;

/// Runs `f` and returns its result and the peak bytes it allocated on this thread.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = CURRENT.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get);
    (out, peak.saturating_sub(base))
}

// ---- helpers ----

fn cases(default: u32) -> u32 {
    std::env::var("BALLOT_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// One edit of a byte string.
#[derive(Clone, Debug)]
enum Mutation {
    FlipBit(usize, u8),
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    Duplicate(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Mutation::Remove(i, n)),
        (any::<usize>(), 1usize..256).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
    ]
}

fn mutate(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let at = |i: usize, len: usize| i % len;
    match m {
        Mutation::FlipBit(i, b) => {
            let i = at(*i, bytes.len());
            bytes[i] ^= 1 << b;
        }
        Mutation::Set(i, v) => {
            let i = at(*i, bytes.len());
            bytes[i] = *v;
        }
        Mutation::Truncate(i) => bytes.truncate(at(*i, bytes.len())),
        Mutation::Insert(i, v) => {
            let i = at(*i, bytes.len() + 1);
            bytes.splice(i..i, v.iter().copied());
        }
        Mutation::Remove(i, n) => {
            let i = at(*i, bytes.len());
            let end = (i + n).min(bytes.len());
            bytes.drain(i..end);
        }
        Mutation::Duplicate(i, n) => {
            let i = at(*i, bytes.len());
            let end = (i + n).min(bytes.len());
            let chunk: Vec<u8> = bytes[i..end].to_vec();
            bytes.splice(end..end, chunk);
        }
    }
}

/// The property every read must hold: a consistent report, or an error naming the file;
/// memory bounded either way. Returns the log when it was read.
fn check_read(path: &Path, opts: &ReadOptions) -> Result<Option<QueryLog>, TestCaseError> {
    // Process-wide, as a binary would: the decoder panics the reader catches stay silent.
    data::parquet_guard::quiet_decoder_panics();
    let (result, peak) = peak_of(|| read_log(path, opts));
    prop_assert!(
        peak < PEAK_LIMIT,
        "reading {} allocated {peak} bytes at peak",
        path.display()
    );
    match result {
        Ok(log) => {
            let r = &log.report;
            prop_assert_eq!(r.records as usize, log.records.len());
            prop_assert_eq!(r.lines, r.records + r.collapsed + r.malformed + r.blank);
            prop_assert!(r.malformed_examples.len() <= 5);
            prop_assert!(r.records > 0, "an Ok log has records");
            if let Shape::Delimited(c) = &r.layout.shape {
                if c.delimiter == querylog::Delimiter::Tab {
                    prop_assert!(log.queries().all(|q| !q.contains('\t')));
                }
            }
            Ok(Some(log))
        }
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(
                msg.contains(&path.display().to_string()),
                "error does not name the file: {}",
                msg
            );
            Ok(None)
        }
    }
}

// ---- generators of text logs ----

/// A field: text, ids, times, numbers, or troublemakers (quotes, colons, commas, control
/// characters, non-ASCII).
fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,8}( [a-z]{1,8}){0,3}",
        "[0-9A-F]{16}",
        "[0-9]{1,10}",
        "9[0-9](0[1-9]|1[0-2])(0[1-9]|1[0-9])[0-2][0-9][0-5][0-9][0-5][0-9]",
        "20(0[0-9])-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]) [0-2][0-9]:[0-5][0-9]:[0-5][0-9]",
        "\"[a-z ,]{0,10}\"",
        "[a-z]{1,4}:[a-z ]{0,8}",
        "[é漢ß ]{1,6}",
        "[\\x00-\\x1f\"',:;]{1,3}",
        Just(String::new()),
    ]
}

/// A line: 1 to 6 fields joined by one delimiter.
fn line() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(field(), 1..6),
        prop::sample::select(vec!["\t", ",", ":", " ", "\t\t"]),
    )
        .prop_map(|(fields, d)| fields.join(d))
}

/// A text log: optional header, lines, optional CRLF and BOM, optional stray bytes.
fn text_log() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(vec![
            "",
            "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n",
            "Query\n",
            "timestamp\tanon_id\tquery\n",
            "user,time,query\n",
            "QUERY\tTS\n",
        ]),
        prop::collection::vec(line(), 0..40),
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(mutation(), 0..3),
    )
        .prop_map(|(header, lines, crlf, bom, muts)| {
            let mut s = String::new();
            if bom {
                s.push('\u{feff}');
            }
            s.push_str(header);
            let end = if crlf { "\r\n" } else { "\n" };
            for l in lines {
                s.push_str(&l);
                s.push_str(end);
            }
            let mut bytes = s.into_bytes();
            for m in &muts {
                mutate(&mut bytes, m);
            }
            bytes
        })
}

/// The layouts a user may ask for.
fn layout_spec() -> impl Strategy<Value = LayoutSpec> {
    let spec = |format: Option<&str>, columns: Option<&str>, tf: Option<&str>| LayoutSpec {
        format: format.map(|f| f.parse().unwrap()),
        columns: columns.map(|c| parse_columns(c).unwrap()),
        time_format: tf.map(|t| t.parse().unwrap()),
        ..LayoutSpec::default()
    };
    prop::sample::select(vec![
        LayoutSpec::default(),
        spec(Some("lines"), None, None),
        spec(Some("query-column"), None, None),
        spec(Some("aol"), None, None),
        spec(Some("excite"), None, None),
        spec(Some("trec-topics"), None, None),
        spec(Some("tsv"), None, None),
        spec(Some("csv"), None, None),
        spec(Some("tsv"), Some("user,time,query"), Some("%y%m%d%H%M%S")),
        spec(Some("tsv"), Some("-,query"), None),
        spec(Some("csv"), Some("time,user,query"), None),
        spec(Some("csv"), Some("query,-,-,time"), Some("epoch-s")),
        spec(None, Some("user,query"), None),
        LayoutSpec {
            format: Some(LogFormat::Tsv),
            query_column: Some(ColumnRef::Index(1)),
            time_column: Some(ColumnRef::Name("ts".into())),
            ..LayoutSpec::default()
        },
        LayoutSpec {
            time_format: Some(TimeFormat::EpochMs),
            ..LayoutSpec::default()
        },
    ])
}

/// A valid `timestamp anon_id query` TSV of `n` lines.
fn tsv_log(n: usize) -> Vec<u8> {
    let mut s = String::from("timestamp\tanon_id\tquery\n");
    for i in 0..n {
        s.push_str(&format!(
            "2006-03-01 {:02}:{:02}:{:02}\t{}\tquery number {} about {}\n",
            i / 3600 % 24,
            i / 60 % 60,
            i % 60,
            i % 17,
            i,
            i * 7919 % 1013
        ));
    }
    s.into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(96), failure_persistence: None, ..ProptestConfig::default() })]

    /// Mutated gzip streams (header, deflate body, trailer, member boundaries).
    #[test]
    fn mutated_gzip_streams(
        n in 1usize..3000,
        muts in prop::collection::vec(mutation(), 1..6),
        spec in layout_spec(),
    ) {
        let dir = TempDir::new().unwrap();
        let mut bytes = gzip(&tsv_log(n));
        if n % 3 == 0 {
            bytes.extend(gzip(b"2006-03-02 00:00:00\t1\tsecond member\n"));
        }
        for m in &muts {
            mutate(&mut bytes, m);
        }
        let path = dir.path().join("log.tsv.gz");
        std::fs::write(&path, &bytes).unwrap();
        check_read(&path, &ReadOptions { keep_repeats: n % 2 == 0, layout: spec, ..Default::default() })?;
    }

    /// Mutated and truncated Parquet logs.
    #[test]
    fn mutated_parquet_logs(
        rows in prop::collection::vec(
            (prop::option::of(0i64..4_000_000_000_000), prop::option::of("[0-9]{1,6}"), "[a-z ]{0,20}"),
            1..400),
        muts in prop::collection::vec(mutation(), 1..6),
        time_column_in_seconds in any::<bool>(),
    ) {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("log.parquet");
        let records: Vec<LogRecord> = rows
            .into_iter()
            .map(|(ts, user, query)| LogRecord { ts, user, query })
            .collect();
        write_log_parquet(&path, &records).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        for m in &muts {
            mutate(&mut bytes, m);
        }
        std::fs::write(&path, &bytes).unwrap();
        let layout = LayoutSpec {
            time_format: time_column_in_seconds.then_some(TimeFormat::EpochS),
            ..LayoutSpec::default()
        };
        check_read(&path, &ReadOptions { keep_repeats: true, layout, ..Default::default() })?;
    }

    /// Random and mutated TSV, CSV, lines and TREC text, plain or gzip, under every layout.
    #[test]
    fn random_text_under_every_layout(
        bytes in text_log(),
        spec in layout_spec(),
        zipped in any::<bool>(),
    ) {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, if zipped { gzip(&bytes) } else { bytes }).unwrap();
        check_read(&path, &ReadOptions { keep_repeats: false, layout: spec, ..Default::default() })?;
    }

    /// A headerless delimited log (two or more columns on every line) is never read as one
    /// query per line unless `--format lines` says so.
    #[test]
    fn delimited_logs_are_never_read_as_lines(
        width in 2usize..5,
        rows in prop::collection::vec(
            prop::collection::vec("[a-z0-9]{1,8}( [a-z0-9]{1,8}){0,2}", 5), 1..60),
    ) {
        let dir = TempDir::new().unwrap();
        let text: String = rows
            .iter()
            .map(|r| format!("{}\n", r[..width].join("\t")))
            .collect();
        let path = dir.path().join("cols.tsv");
        std::fs::write(&path, &text).unwrap();
        match read_log(&path, &ReadOptions::default()) {
            Ok(log) => prop_assert!(
                log.report.format != LogFormat::Lines,
                "read as lines: {}", log.report.summary()
            ),
            Err(e) => {
                let m = e.to_string();
                prop_assert!(m.contains("--format tsv --columns"), "{}", m);
            }
        }
    }
}

/// A gzip stream that decompresses to `total` bytes of `x` without a newline, then `tail`.
fn gzip_no_newline(total: usize, tail: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    let chunk = vec![b'x'; 1 << 20];
    let mut left = total;
    while left > 0 {
        let n = left.min(chunk.len());
        enc.write_all(&chunk[..n]).unwrap();
        left -= n;
    }
    enc.write_all(tail).unwrap();
    enc.finish().unwrap()
}

#[test]
fn a_huge_line_without_newline_is_refused_in_bounded_memory() {
    let dir = TempDir::new().unwrap();
    // 256 MiB of one line, gzip-compressed to a few hundred KiB.
    let path = dir.path().join("one-line.gz");
    std::fs::write(&path, gzip_no_newline(256 << 20, b"")).unwrap();
    let (result, peak) = peak_of(|| read_log(&path, &ReadOptions::default()));
    eprintln!("peak allocation reading a 256 MiB line: {peak} bytes");
    assert!(peak < 8 << 20, "peak {peak}");
    let e = result.unwrap_err();
    assert!(matches!(e, LogError::AllMalformed { count: 1, .. }), "{e}");
    let m = e.to_string();
    assert!(m.contains(&path.display().to_string()), "{m}");
    assert!(
        m.contains(&format!("line 1: line longer than {MAX_LINE_BYTES} bytes")),
        "{m}"
    );

    // The same line followed by good ones: skipped, the rest read.
    let path = dir.path().join("then-good.gz");
    std::fs::write(
        &path,
        gzip_no_newline(8 << 20, b"\nmiran ruban\nkon min run\n"),
    )
    .unwrap();
    let (log, peak) = peak_of(|| read_log(&path, &ReadOptions::default()));
    assert!(peak < 8 << 20, "peak {peak}");
    let log = log.unwrap();
    assert_eq!(
        log.queries().collect::<Vec<_>>(),
        ["miran ruban", "kon min run"]
    );
    assert_eq!(log.report.malformed, 1);
}

/// Files the Parquet fuzzing found that crashed the reader (assertions inside the `parquet`
/// and `arrow` crates: `column start and length should not be negative`, `offset + len out
/// of bounds`, `slice must not be empty`, an index out of bounds, `Decoder for dict should
/// have been set`, ...): each is now a [`LogError`] naming the file.
#[test]
fn corrupt_parquet_found_by_fuzzing_are_errors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/logs/corrupt-parquet");
    data::parquet_guard::quiet_decoder_panics();
    let expected = [
        (
            "bit-range-out-of-bounds.parquet",
            "offset + len out of bounds",
        ),
        (
            "chunk-past-end.parquet",
            "column `ts`: bytes 4 to 4+3860 are not inside the file",
        ),
        ("index-out-of-bounds.parquet", "index out of bounds"),
        (
            "missing-dictionary.parquet",
            "has Thrift type 6 instead of i32",
        ),
        (
            "negative-offset.parquet",
            "bytes -1689 to -1689+1566 are not inside the file",
        ),
        ("negative-rows.parquet", "row group 0 has -157 rows"),
        ("vlq-too-long.parquet", "MAX_VLQ_BYTE_LEN"),
    ];
    for (name, needle) in expected {
        let path = dir.join(name);
        let (result, peak) = peak_of(|| read_log(&path, &ReadOptions::default()));
        let e = result
            .err()
            .unwrap_or_else(|| panic!("{name} must not read"));
        assert!(matches!(e, LogError::ParquetCorrupt { .. }), "{name}: {e}");
        let m = e.to_string();
        assert!(m.starts_with(&path.display().to_string()), "{m}");
        assert!(m.contains(needle), "{name}: {m}");
        assert!(peak < PEAK_LIMIT, "{name}: peak {peak}");
    }
}

/// A page header announcing 2 GiB uncompressed made the `parquet` crate reserve 2 GiB
/// before decompressing a few bytes; the page walk refuses it first.
#[test]
fn a_page_announcing_gigabytes_is_refused_before_any_allocation() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("log.parquet");
    let records: Vec<LogRecord> = (0..100)
        .map(|i| LogRecord {
            ts: Some(i),
            user: None,
            query: format!("q{i}"),
        })
        .collect();
    write_log_parquet(&path, &records).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    // The first page header sits right after `PAR1`: field 1 (0x15, varint), then field 2,
    // the uncompressed size (0x15, zigzag varint). Replace that varint.
    assert_eq!(bytes[4], 0x15);
    let skip_varint = |mut i: usize| {
        while bytes[i] & 0x80 != 0 {
            i += 1;
        }
        i + 1
    };
    let size_at = skip_varint(5) + 1;
    assert_eq!(bytes[size_at - 1], 0x15);
    let mut evil = bytes[..size_at].to_vec();
    evil.extend([0xfe, 0xff, 0xff, 0xff, 0x0f]); // zigzag(2^31 - 1)
    evil.extend(&bytes[skip_varint(size_at)..]);
    let path = dir.path().join("evil.parquet");
    std::fs::write(&path, &evil).unwrap();
    let (result, peak) = peak_of(|| read_log(&path, &ReadOptions::default()));
    let e = result.unwrap_err();
    assert!(matches!(e, LogError::ParquetCorrupt { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("announces 2147483647 bytes uncompressed"),
        "{e}"
    );
    assert!(peak < 8 << 20, "peak {peak}");
}

/// Text inputs the fuzzing found that crashed the reader: each is now a result or an error
/// naming the file.
#[test]
fn text_found_by_fuzzing() {
    let dir = TempDir::new().unwrap();
    // `--format csv` on a line whose only field has text after its closing quote: the
    // column view of the sample had no columns, and suggesting a mapping underflowed.
    let path = dir.path().join("quote.csv");
    std::fs::write(&path, b"\" ,\":aaaa\n").unwrap();
    let layout = LayoutSpec {
        format: Some(LogFormat::Csv),
        ..LayoutSpec::default()
    };
    let e = read_log(
        &path,
        &ReadOptions {
            keep_repeats: false,
            layout,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, LogError::Layout { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&path.display().to_string()),
        "{e}"
    );
}
