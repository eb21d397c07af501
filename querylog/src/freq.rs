//! The two-column files that price terms, header optional, gzip-transparent:
//!
//! - the word-frequency file, `word<TAB>frequency_per_token` (like
//!   `wordfreq-large-en.tsv.gz`), read into a [`FreqTable`] for the size model of
//!   [`data::sizes`];
//! - a search engine's terms dump, `term<TAB>document_frequency` (what Lucene's, Solr's or
//!   Elasticsearch's term statistics give, or a Tantivy term dictionary walk), read into a
//!   [`SizeTable`] of the postings bytes a list of that many documents takes.
//!
//! Bad lines are errors naming the file and line (not skipped, as a query log's are): sizes
//! silently computed from half a table would make every number wrong. A first line whose
//! second column is not a number is the header. The first occurrence of a term wins.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use data::sizes::{FreqTable, SizeTable, LIST_HEADER_BYTES};

use crate::io::{open_text, trim_newline};

/// Why a word-frequency file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FreqError {
    /// The file could not be read (including a truncated gzip stream).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A line is malformed.
    #[error("{}:{line}: {detail}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: u64,
        /// What is wrong.
        detail: String,
    },
    /// The file has no entries.
    #[error("{}: {what} has no entries", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
        /// What it should have held.
        what: &'static str,
    },
}

/// Reads a `word<TAB>frequency` TSV (gzip-transparent) into a [`FreqTable`].
pub fn read_freq_tsv(path: &Path) -> Result<FreqTable, FreqError> {
    let pairs = read_pairs(path, "frequency table", "word<TAB>frequency", |value| {
        let Ok(f) = value.parse::<f64>() else {
            return Ok(None);
        };
        if !f.is_finite() || !(0.0..=1.0).contains(&f) {
            return Err(format!("frequency {f} is not a share of tokens in [0, 1]"));
        }
        Ok(Some(f))
    })?;
    // `from_pairs` keeps the first occurrence of a word.
    Ok(FreqTable::from_pairs(pairs))
}

/// Reads a `term<TAB>document_frequency` TSV (gzip-transparent) into the size table of
/// the postings lists it describes: [`LIST_HEADER_BYTES`] plus a byte per document, the
/// size model's bytes for that document frequency (ballot's own index writes about that:
/// a header and a delta-coded document id per posting).
pub fn read_term_df_tsv(path: &Path) -> Result<SizeTable, FreqError> {
    let mut pairs =
        read_pairs(
            path,
            "terms dump",
            "term<TAB>document_frequency",
            |value| match value.parse::<u64>() {
                Ok(df) => Ok(Some(LIST_HEADER_BYTES.saturating_add(df))),
                Err(_) if value.parse::<f64>().is_ok() => Err(format!(
                    "document frequency {value:?} is not a whole number of documents"
                )),
                Err(_) => Ok(None),
            },
        )?;
    // `SizeTable::from_pairs` keeps the last occurrence: keep the first, as for words.
    let mut seen = rustc_hash::FxHashSet::default();
    pairs.retain(|(t, _)| seen.insert(t.clone()));
    Ok(SizeTable::from_pairs(pairs))
}

/// The `(name, value)` pairs of a two-column TSV: `parse` reads a second column
/// (`Ok(None)`: not a number, which only the first line, the header, may be).
fn read_pairs<T>(
    path: &Path,
    what: &'static str,
    layout: &str,
    parse: impl Fn(&str) -> Result<Option<T>, String>,
) -> Result<Vec<(String, T)>, FreqError> {
    let io_err = |source| FreqError::Io {
        path: path.to_owned(),
        source,
    };
    let mut reader = open_text(path).map_err(io_err)?;
    let mut pairs = Vec::new();
    let mut buf = Vec::with_capacity(256);
    let mut line_no = 0u64;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).map_err(io_err)? == 0 {
            break;
        }
        line_no += 1;
        let line_err = |detail: String| FreqError::Line {
            path: path.to_owned(),
            line: line_no,
            detail,
        };
        let line = std::str::from_utf8(trim_newline(&buf))
            .map_err(|_| line_err("invalid UTF-8".into()))?;
        if line.is_empty() {
            continue;
        }
        let mut cols = line.split('\t');
        let (name, value) = match (cols.next(), cols.next(), cols.next()) {
            (Some(n), Some(v), None) => (n, v.trim()),
            _ => return Err(line_err(format!("expected `{layout}`, found {line:?}"))),
        };
        match parse(value).map_err(line_err)? {
            Some(v) => pairs.push((name.to_owned(), v)),
            None if line_no == 1 => {} // the header
            None => return Err(line_err(format!("{value:?} is not a number"))),
        }
    }
    if pairs.is_empty() {
        return Err(FreqError::Empty {
            path: path.to_owned(),
            what,
        });
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::Write;

    #[test]
    fn freq_tsv_reads_header_and_rejects_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("f.tsv");
        std::fs::write(
            &good,
            "word\tfrequency_per_token\nthe\t5.37e-02\nzebra\t1e-6\n",
        )
        .unwrap();
        let t = read_freq_tsv(&good).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.get("zebra"), Some(1e-6));

        let bad = dir.path().join("bad.tsv");
        let mut f = File::create(&bad).unwrap();
        writeln!(f, "word\tfrequency_per_token\nthe\t0.05\nzebra\tlots").unwrap();
        let err = read_freq_tsv(&bad).unwrap_err().to_string();
        assert!(err.contains("bad.tsv:3: \"lots\" is not a number"), "{err}");

        let empty = dir.path().join("empty.tsv");
        std::fs::write(&empty, "word\tfrequency_per_token\n").unwrap();
        assert!(read_freq_tsv(&empty)
            .unwrap_err()
            .to_string()
            .contains("no entries"));
    }

    #[test]
    fn a_terms_dump_becomes_postings_bytes_and_bad_lines_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("terms.tsv");
        std::fs::write(&good, "term\tdf\nthe\t9000000\nzebra\t12\nzebra\t99\n").unwrap();
        let t = read_term_df_tsv(&good).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.get("the"), Some(9_000_016));
        assert_eq!(t.get("zebra"), Some(28), "the first occurrence wins");
        for (text, want) in [
            ("a\t3\nb\t2.5\n", "terms.tsv:2: document frequency \"2.5\""),
            ("a\t3\nb\tmany\n", "terms.tsv:2: \"many\" is not a number"),
            (
                "a\t3\t4\n",
                "terms.tsv:1: expected `term<TAB>document_frequency`",
            ),
            ("term\tdf\n", "terms.tsv: terms dump has no entries"),
        ] {
            std::fs::write(&good, text).unwrap();
            let err = read_term_df_tsv(&good).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn the_first_occurrence_of_a_word_wins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dup.tsv");
        std::fs::write(&path, "a\t0.5\na\t0.25\n").unwrap();
        assert_eq!(read_freq_tsv(&path).unwrap().get("a"), Some(0.5));
    }

    /// What the synthetic generator writes reads back (moved here from `data::synth`, whose
    /// crate no longer reads files).
    #[test]
    fn freq_tsv_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("freq.tsv");
        let freq = vec![("ba".to_string(), 1.234e-3), ("be".to_string(), 5.0e-9)];
        data::synth::write_freq_tsv(&path, &freq).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "word\tfrequency_per_token\nba\t1.234e-3\nbe\t5.000e-9\n"
        );
        let table = read_freq_tsv(&path).unwrap();
        assert_eq!(table.get("ba"), Some(1.234e-3));
        assert_eq!(table.get("be"), Some(5.0e-9));
    }
}
