//! The word-frequency file that prices terms: a TSV of `word<TAB>frequency_per_token`,
//! header optional, gzip-transparent, like `wordfreq-large-en.tsv.gz`, read into a
//! [`FreqTable`] for the size model of [`data::sizes`].
//!
//! Bad lines are errors naming the file and line (not skipped, as a query log's are): sizes
//! silently computed from half a table would make every number wrong. A first line whose
//! second column is not a number is the header. The first occurrence of a word wins.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use data::sizes::FreqTable;

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
    #[error("{}: frequency table has no entries", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// Reads a `word<TAB>frequency` TSV (gzip-transparent) into a [`FreqTable`].
pub fn read_freq_tsv(path: &Path) -> Result<FreqTable, FreqError> {
    let io_err = |source| FreqError::Io {
        path: path.to_owned(),
        source,
    };
    let mut reader = open_text(path).map_err(io_err)?;
    let mut pairs: Vec<(String, f64)> = Vec::new();
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
        let (word, value) = match (cols.next(), cols.next(), cols.next()) {
            (Some(w), Some(v), None) => (w, v),
            _ => {
                return Err(line_err(format!(
                    "expected `word<TAB>frequency`, found {line:?}"
                )))
            }
        };
        let f: f64 = match value.trim().parse() {
            Ok(f) => f,
            Err(_) if line_no == 1 => continue, // header
            Err(_) => return Err(line_err(format!("frequency {value:?} is not a number"))),
        };
        if !f.is_finite() || !(0.0..=1.0).contains(&f) {
            return Err(line_err(format!(
                "frequency {f} is not a share of tokens in [0, 1]"
            )));
        }
        pairs.push((word.to_owned(), f));
    }
    if pairs.is_empty() {
        return Err(FreqError::Empty {
            path: path.to_owned(),
        });
    }
    // `from_pairs` keeps the first occurrence of a word.
    Ok(FreqTable::from_pairs(pairs))
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
        assert!(err.contains("bad.tsv:3"), "{err}");

        let empty = dir.path().join("empty.tsv");
        std::fs::write(&empty, "word\tfrequency_per_token\n").unwrap();
        assert!(read_freq_tsv(&empty)
            .unwrap_err()
            .to_string()
            .contains("no entries"));
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
