//! Splitting one line of a delimited log into its fields, into a reused buffer of spans.
//!
//! Tab-separated lines are split on every `\t`, without quoting (the AOL and Excite logs
//! have literal `"` in queries). Comma-separated lines follow RFC 4180 within a line: a
//! field that starts with `"` runs to the matching `"`, with `""` standing for one `"`; a
//! quoted field must be followed by a comma or the end of the line; a `"` inside an
//! unquoted field is taken literally. A quoted line break is not supported: the line is
//! then malformed ("unterminated quoted field").

use std::borrow::Cow;

use super::format::Delimiter;

/// Where one field lies in its line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
    /// The field was quoted and holds `""` escapes to undo.
    escaped: bool,
}

/// Splits lines into fields; owns the span buffer, reused line after line.
#[derive(Debug, Default)]
pub(crate) struct Splitter {
    spans: Vec<Span>,
}

impl Splitter {
    /// Splits `line` on `delimiter`; returns the number of fields, or why a CSV line
    /// cannot be split.
    pub(crate) fn split(
        &mut self,
        line: &str,
        delimiter: Delimiter,
    ) -> Result<usize, &'static str> {
        self.spans.clear();
        match delimiter {
            Delimiter::Tab => {
                let mut start = 0;
                for field in line.split('\t') {
                    let end = start + field.len();
                    self.spans.push(Span {
                        start,
                        end,
                        escaped: false,
                    });
                    start = end + 1;
                }
            }
            Delimiter::Comma => self.split_csv(line.as_bytes())?,
        }
        Ok(self.spans.len())
    }

    fn split_csv(&mut self, b: &[u8]) -> Result<(), &'static str> {
        let mut i = 0;
        loop {
            if b.get(i) == Some(&b'"') {
                let start = i + 1;
                let mut j = start;
                let mut escaped = false;
                loop {
                    match b[j..].iter().position(|&c| c == b'"') {
                        None => return Err("unterminated quoted field"),
                        Some(k) => {
                            j += k;
                            if b.get(j + 1) == Some(&b'"') {
                                escaped = true;
                                j += 2;
                            } else {
                                break;
                            }
                        }
                    }
                }
                self.spans.push(Span {
                    start,
                    end: j,
                    escaped,
                });
                i = j + 1;
                match b.get(i) {
                    None => return Ok(()),
                    Some(b',') => i += 1,
                    Some(_) => return Err("text after a closing quote"),
                }
            } else {
                match b[i..].iter().position(|&c| c == b',') {
                    Some(k) => {
                        self.spans.push(Span {
                            start: i,
                            end: i + k,
                            escaped: false,
                        });
                        i += k + 1;
                    }
                    None => {
                        self.spans.push(Span {
                            start: i,
                            end: b.len(),
                            escaped: false,
                        });
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Field `i` of the line last split (the same `line` must be passed again).
    pub(crate) fn field<'a>(&self, line: &'a str, i: usize) -> Option<Cow<'a, str>> {
        let s = self.spans.get(i)?;
        let text = line.get(s.start..s.end)?;
        Some(if s.escaped {
            Cow::Owned(text.replace("\"\"", "\""))
        } else {
            Cow::Borrowed(text)
        })
    }
}

/// All fields of `line` (for sampling; allocates).
pub(crate) fn split_owned(line: &str, delimiter: Delimiter) -> Option<Vec<String>> {
    let mut s = Splitter::default();
    let n = s.split(line, delimiter).ok()?;
    Some(
        (0..n)
            .filter_map(|i| s.field(line, i).map(Cow::into_owned))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(line: &str, d: Delimiter) -> Result<Vec<String>, &'static str> {
        let mut s = Splitter::default();
        let n = s.split(line, d)?;
        Ok((0..n)
            .map(|i| s.field(line, i).unwrap().into_owned())
            .collect())
    }

    #[test]
    fn tabs() {
        assert_eq!(all("a\tb\tc", Delimiter::Tab).unwrap(), ["a", "b", "c"]);
        assert_eq!(
            all("a\t\"b\"\t", Delimiter::Tab).unwrap(),
            ["a", "\"b\"", ""]
        );
        assert_eq!(all("", Delimiter::Tab).unwrap(), [""]);
        assert_eq!(all("é\t漢", Delimiter::Tab).unwrap(), ["é", "漢"]);
    }

    #[test]
    fn csv_quoting() {
        let c = Delimiter::Comma;
        assert_eq!(all("a,b,c", c).unwrap(), ["a", "b", "c"]);
        assert_eq!(all("a,", c).unwrap(), ["a", ""]);
        assert_eq!(all("", c).unwrap(), [""]);
        assert_eq!(
            all("1,\"paris, france\",x", c).unwrap(),
            ["1", "paris, france", "x"]
        );
        assert_eq!(
            all("\"say \"\"hi\"\"\",\"\"", c).unwrap(),
            ["say \"hi\"", ""]
        );
        assert_eq!(all("\"a\",", c).unwrap(), ["a", ""]);
        assert_eq!(all("5 \"inch\",b", c).unwrap(), ["5 \"inch\"", "b"]);
        assert_eq!(all("\"open,b", c), Err("unterminated quoted field"));
        assert_eq!(all("\"a\"b,c", c), Err("text after a closing quote"));
    }
}
