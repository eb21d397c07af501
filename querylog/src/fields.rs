//! Splitting one line of a delimited log into its fields, with `csv-core`'s reader, into
//! buffers the [`Splitter`] owns and reuses line after line (nothing is allocated per line
//! once they have grown to the longest line).
//!
//! Comma-separated lines follow RFC 4180 within a line: a field that starts with `"` runs
//! to the matching `"`, with `""` standing for one `"`, and a `"` inside an unquoted field
//! is taken literally. `csv-core` prefers a parse to an error, so text after a closing
//! quote is kept (`"a"b` reads `ab`); the one thing it cannot read within a line is a
//! quoted field left open (a quoted line break is not supported): the line is then
//! malformed ("unterminated quoted field"). Tab-separated lines are split on every `\t`
//! without quoting: the AOL and Excite logs have literal `"` in queries.

use csv_core::{ReadRecordResult, Reader, ReaderBuilder, Terminator};

use crate::format::Delimiter;

/// Splits lines into fields; owns `csv-core`'s reader and the field buffers, reused line
/// after line.
#[derive(Debug)]
pub struct Splitter {
    reader: Reader,
    /// The unquoted bytes of every field of the line last split, concatenated.
    out: Vec<u8>,
    /// `ends[i]` is where field `i` ends in `out` (it starts at `ends[i - 1]`).
    ends: Vec<usize>,
    /// Fields of the line last split.
    fields: usize,
}

impl Splitter {
    /// A splitter of `delimiter`-separated lines (quoting for commas only).
    pub fn new(delimiter: Delimiter) -> Self {
        let reader = ReaderBuilder::new()
            .delimiter(delimiter.byte())
            .quoting(delimiter == Delimiter::Comma)
            .double_quote(true)
            // Lines arrive one by one without their ending; a `\n` fed after a line ends
            // the record, and a `\r` inside a line is data.
            .terminator(Terminator::Any(b'\n'))
            .build();
        Splitter {
            reader,
            out: vec![0; 256],
            ends: vec![0; 16],
            fields: 0,
        }
    }

    /// Splits `line` (without its line ending); returns the number of fields, or why the
    /// line cannot be split. An empty line is one empty field.
    pub fn split(&mut self, line: &[u8]) -> Result<usize, &'static str> {
        self.fields = 0;
        if line.is_empty() {
            self.ends[0] = 0;
            self.fields = 1;
            return Ok(1);
        }
        let (mut input, mut ended) = (line, false);
        let mut written = 0;
        loop {
            let (result, nin, nout, nends) = self.reader.read_record(
                input,
                &mut self.out[written..],
                &mut self.ends[self.fields..],
            );
            input = &input[nin..];
            written += nout;
            self.fields += nends;
            match result {
                ReadRecordResult::Record => return Ok(self.fields),
                ReadRecordResult::OutputFull => {
                    let n = self.out.len() * 2;
                    self.out.resize(n, 0);
                }
                ReadRecordResult::OutputEndsFull => {
                    let n = self.ends.len() * 2;
                    self.ends.resize(n, 0);
                }
                ReadRecordResult::InputEmpty if !ended => {
                    input = b"\n";
                    ended = true;
                }
                // The `\n` went into a quoted field: the quote is never closed.
                ReadRecordResult::InputEmpty | ReadRecordResult::End => {
                    self.reader.reset();
                    self.fields = 0;
                    return Err("unterminated quoted field");
                }
            }
        }
    }

    /// Field `i` of the line last split (None past the last field).
    pub fn field(&self, i: usize) -> Option<&str> {
        if i >= self.fields {
            return None;
        }
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        // The line was valid UTF-8 and fields are cut at ASCII bytes, so this holds.
        std::str::from_utf8(self.out.get(start..self.ends[i])?).ok()
    }
}

/// All fields of `line` (for the sample read before the layout is settled; allocates), or
/// None if the line cannot be split.
pub fn split_owned(line: &str, delimiter: Delimiter) -> Option<Vec<String>> {
    let mut s = Splitter::new(delimiter);
    let n = s.split(line.as_bytes()).ok()?;
    (0..n).map(|i| s.field(i).map(str::to_owned)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(s: &mut Splitter, line: &str) -> Result<Vec<String>, &'static str> {
        let n = s.split(line.as_bytes())?;
        Ok((0..n).map(|i| s.field(i).unwrap().to_owned()).collect())
    }

    #[test]
    fn tabs() {
        let s = &mut Splitter::new(Delimiter::Tab);
        assert_eq!(all(s, "a\tb\tc").unwrap(), ["a", "b", "c"]);
        assert_eq!(all(s, "a\t\"b\"\t").unwrap(), ["a", "\"b\"", ""]);
        assert_eq!(all(s, "").unwrap(), [""]);
        assert_eq!(all(s, "é\t漢").unwrap(), ["é", "漢"]);
        assert_eq!(all(s, "\"open\tquote").unwrap(), ["\"open", "quote"]);
        assert_eq!(all(s, "a,b\tc\r").unwrap(), ["a,b", "c\r"]);
        assert_eq!(s.field(2), None);
    }

    #[test]
    fn csv_quoting() {
        let s = &mut Splitter::new(Delimiter::Comma);
        assert_eq!(all(s, "a,b,c").unwrap(), ["a", "b", "c"]);
        assert_eq!(all(s, "a,").unwrap(), ["a", ""]);
        assert_eq!(all(s, "").unwrap(), [""]);
        assert_eq!(
            all(s, "1,\"paris, france\",x").unwrap(),
            ["1", "paris, france", "x"]
        );
        assert_eq!(
            all(s, "\"say \"\"hi\"\"\",\"\"").unwrap(),
            ["say \"hi\"", ""]
        );
        assert_eq!(all(s, "\"a\",").unwrap(), ["a", ""]);
        assert_eq!(all(s, "5 \"inch\",b").unwrap(), ["5 \"inch\"", "b"]);
        assert_eq!(all(s, "\"open,b"), Err("unterminated quoted field"));
        // The reader is usable again after a broken line.
        assert_eq!(all(s, "x,y").unwrap(), ["x", "y"]);
        // Text after a closing quote is kept, as csv-core reads it.
        assert_eq!(all(s, "\"a\"b,c").unwrap(), ["ab", "c"]);
        assert_eq!(all(s, ",,").unwrap(), ["", "", ""]);
    }

    #[test]
    fn buffers_grow_and_are_reused() {
        let s = &mut Splitter::new(Delimiter::Comma);
        let long = format!("{},{}", "x".repeat(10_000), vec!["y"; 100].join(","));
        let fields = all(s, &long).unwrap();
        assert_eq!(fields.len(), 101);
        assert_eq!(fields[0].len(), 10_000);
        let (out, ends) = (s.out.capacity(), s.ends.capacity());
        for _ in 0..3 {
            assert_eq!(all(s, &long).unwrap().len(), 101);
        }
        assert_eq!((s.out.capacity(), s.ends.capacity()), (out, ends));
        assert_eq!(
            split_owned("a,\"b,c\"", Delimiter::Comma).unwrap(),
            ["a", "b,c"]
        );
        assert_eq!(split_owned("\"a", Delimiter::Comma), None);
    }
}
