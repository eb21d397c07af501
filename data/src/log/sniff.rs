//! What the first lines of a text log look like: the evidence content detection weighs
//! before it settles for "one query per line", and the message that refuses to guess.
//!
//! The sample is the first [`SAMPLE_LINES`] lines (at most [`SAMPLE_BYTES`]). Lines look
//! *delimited* when most of them ([`MOST`]) split into the same number (two or more) of
//! tab-separated fields, or of comma-separated fields when one of those columns also has a
//! structure (times, ids). Each column is then classified: a time in some format
//! (ISO, `YYMMDDhhmmss`, `YYYYMMDDhhmmss`, epoch seconds or milliseconds in a plausible
//! range), hex ids, digit ids, empty, or text. Lines look like *TREC topics* when most of
//! them start with a `qid:` whose qid holds a digit. Either way, reading them as one query
//! per line would turn ids and times into terms, so the reader stops with a message showing
//! the first lines, the columns, and the exact `--format`/`--columns` to use.

use super::fields::split_owned;
use super::format::{Delimiter, LogFormat, Role};
use crate::time::{format_timestamp, TimeFormat};

/// Lines sampled for detection.
pub const SAMPLE_LINES: usize = 200;
/// Bytes sampled for detection (the sample stops at the line that crosses it).
pub const SAMPLE_BYTES: usize = 256 * 1024;
/// The share of sampled lines that must agree for a pattern to count.
pub const MOST: f64 = 0.8;
/// The share of a column's non-empty values that must fit a kind.
const COLUMN: f64 = 0.9;
/// Lines shown in a refusal.
const SHOW_LINES: usize = 5;
/// Characters shown of each line or value in a refusal.
const SHOW_CHARS: usize = 100;
/// Epoch times are taken for times only between 1990 and 2040 (unless the column is known
/// to be a time column).
const PLAUSIBLE_MS: std::ops::Range<i64> = 631_152_000_000..2_208_988_800_000;

/// What a column of the sample holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Times in this format.
    Time(TimeFormat),
    /// Hexadecimal ids (six digits or more, some with a letter); `repeats` if a value occurs
    /// twice.
    HexId { repeats: bool },
    /// Decimal ids; `repeats` if a value occurs twice.
    DigitId { repeats: bool },
    /// Nothing in it.
    Empty,
    /// Anything else.
    Text,
}

impl Kind {
    fn structural(&self) -> bool {
        matches!(
            self,
            Kind::Time(_) | Kind::HexId { .. } | Kind::DigitId { .. }
        )
    }

    fn describe(&self) -> String {
        match self {
            Kind::Time(TimeFormat::Iso) => "times (YYYY-MM-DD HH:MM:SS)".to_owned(),
            Kind::Time(f) => format!("times ({f})"),
            Kind::HexId { .. } => "hex ids".to_owned(),
            Kind::DigitId { .. } => "numbers or ids".to_owned(),
            Kind::Empty => "empty".to_owned(),
            Kind::Text => "text".to_owned(),
        }
    }
}

/// The sample seen as delimited columns.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Table {
    pub(crate) delimiter: Delimiter,
    /// The most common number of fields.
    pub(crate) width: usize,
    /// Non-blank lines with that many fields.
    pub(crate) agree: usize,
    /// Non-blank lines sampled.
    pub(crate) total: usize,
    /// Each column's kind (over the lines of `width` fields).
    pub(crate) kinds: Vec<Kind>,
    /// Each column's first non-empty value.
    pub(crate) examples: Vec<String>,
    /// Each column's mean length in characters.
    mean_len: Vec<f64>,
}

impl Table {
    /// Whether most lines agree on `width >= 2` fields.
    fn consistent(&self) -> bool {
        self.width >= 2 && self.agree as f64 >= MOST * self.total as f64
    }

    /// The roles a user most likely means: the first time column is the time, the first hex
    /// id column (or else the first id column whose values repeat, as users' do) the user,
    /// the text column with the longest values the query, and the rest skipped.
    pub(crate) fn roles(&self) -> Vec<Role> {
        let mut roles = vec![Role::Skip; self.width];
        let first = |f: &dyn Fn(&Kind) -> bool| self.kinds.iter().position(f);
        if let Some(t) = first(&|k| matches!(k, Kind::Time(_))) {
            roles[t] = Role::Time;
        }
        let user = first(&|k| matches!(k, Kind::HexId { .. }))
            .or_else(|| first(&|k| matches!(k, Kind::DigitId { repeats: true })));
        if let Some(u) = user {
            roles[u] = Role::User;
        }
        let query = (0..self.width)
            .filter(|&i| self.kinds[i] == Kind::Text)
            .max_by(|&a, &b| self.mean_len[a].total_cmp(&self.mean_len[b]))
            .or_else(|| (0..self.width).rev().find(|&i| roles[i] == Role::Skip));
        if let Some(q) = query.or(self.width.checked_sub(1)) {
            roles[q] = Role::Query;
        }
        roles
    }

    /// The time format of the column `roles` maps to time, if any.
    fn time_format(&self, roles: &[Role]) -> Option<&TimeFormat> {
        let t = roles.iter().position(|&r| r == Role::Time)?;
        match &self.kinds[t] {
            Kind::Time(f) => Some(f),
            _ => None,
        }
    }

    /// The flags that read the sample as these columns: the preset when one fits, then the
    /// plain `--format tsv|csv --columns ...`.
    pub(crate) fn suggestions(&self) -> Vec<String> {
        let roles = self.roles();
        let tf = self.time_format(&roles);
        let mut out = Vec::new();
        if self.delimiter == Delimiter::Tab
            && roles == [Role::User, Role::Time, Role::Query]
            && tf == Some(&TimeFormat::excite())
        {
            out.push("--format excite".to_owned());
        }
        let cols: Vec<&str> = roles.iter().map(|r| r.name()).collect();
        let mut plain = format!(
            "--format {} --columns {}",
            self.delimiter.format(),
            cols.join(",")
        );
        match tf {
            Some(TimeFormat::Iso) | None => {}
            Some(TimeFormat::Strftime(p)) => plain.push_str(&format!(" --time-format '{p}'")),
            Some(f) => plain.push_str(&format!(" --time-format {f}")),
        }
        out.push(plain);
        out
    }

    /// `columns seen (...)` and one line per column.
    fn describe(&self) -> String {
        let mut s = format!(
            "  columns seen ({}, {} on {} of {} sampled lines):\n",
            self.delimiter.adjective(),
            self.width,
            self.agree,
            self.total
        );
        for (i, kind) in self.kinds.iter().enumerate() {
            let example = &self.examples[i];
            let mut line = format!("    {}: {}", i + 1, kind.describe());
            if !example.is_empty() {
                line.push_str(&format!(", e.g. {}", show(example)));
                if let Kind::Time(f) = kind {
                    if let Some(ms) = f.parse_ms(example) {
                        line.push_str(&format!(" = {}", format_timestamp(ms)));
                    }
                }
            }
            s.push_str(&line);
            s.push('\n');
        }
        s
    }
}

/// Why content detection will not settle for one query per line.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Suspicion {
    /// Most lines split into the same columns.
    Delimited(Table),
    /// Most lines start with `qid:`.
    QidPrefix {
        /// Lines that do.
        agree: usize,
        /// Non-blank lines sampled.
        total: usize,
        /// An example qid.
        qid: String,
    },
}

/// The sample's non-blank lines seen as `delimiter`-separated columns (None without a
/// line that splits: CSV lines with broken quotes do not).
pub(crate) fn table(lines: &[&str], delimiter: Delimiter) -> Option<Table> {
    let non_blank: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let rows: Vec<Vec<String>> = non_blank
        .iter()
        .filter_map(|l| split_owned(l, delimiter))
        .collect();
    let mut counts: Vec<(usize, usize)> = Vec::new();
    for r in &rows {
        match counts.iter_mut().find(|(w, _)| *w == r.len()) {
            Some((_, n)) => *n += 1,
            None => counts.push((r.len(), 1)),
        }
    }
    // The most common width; ties go to the wider.
    let (width, agree) = counts.iter().copied().max_by_key(|&(w, n)| (n, w))?;
    if width == 0 {
        return None;
    }
    let mut kinds = Vec::with_capacity(width);
    let mut examples = Vec::with_capacity(width);
    let mut mean_len = Vec::with_capacity(width);
    for i in 0..width {
        let values: Vec<&str> = rows
            .iter()
            .filter(|r| r.len() == width)
            .map(|r| r[i].as_str())
            .collect();
        kinds.push(classify(&values));
        examples.push(
            values
                .iter()
                .find(|v| !v.trim().is_empty())
                .map(|v| v.to_string())
                .unwrap_or_default(),
        );
        let chars: usize = values.iter().map(|v| v.chars().count()).sum();
        mean_len.push(chars as f64 / values.len().max(1) as f64);
    }
    Some(Table {
        delimiter,
        width,
        agree,
        total: non_blank.len(),
        kinds,
        examples,
        mean_len,
    })
}

/// What a column's values are.
fn classify(values: &[&str]) -> Kind {
    let vals: Vec<&str> = values
        .iter()
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .collect();
    if vals.is_empty() {
        return Kind::Empty;
    }
    let most = |n: usize| n as f64 >= COLUMN * vals.len() as f64;
    if let Some(f) = sniff_time(&vals, true) {
        return Kind::Time(f);
    }
    let repeats = {
        let mut sorted = vals.clone();
        sorted.sort_unstable();
        sorted.windows(2).any(|w| w[0] == w[1])
    };
    let hex = |v: &&&str| (6..=40).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_hexdigit());
    if most(vals.iter().filter(hex).count())
        && vals
            .iter()
            .any(|v| v.bytes().any(|b| b.is_ascii_alphabetic()))
    {
        return Kind::HexId { repeats };
    }
    let digits = |v: &&&str| v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit());
    if most(vals.iter().filter(digits).count()) {
        return Kind::DigitId { repeats };
    }
    Kind::Text
}

/// The time format most (90%) of `values` are written in, trying ISO, `%y%m%d%H%M%S`,
/// `%Y%m%d%H%M%S`, epoch seconds and epoch milliseconds in that order. With `plausible`,
/// epoch values must fall between 1990 and 2040 (so that ids are not taken for times).
pub(crate) fn sniff_time(values: &[&str], plausible: bool) -> Option<TimeFormat> {
    let vals: Vec<&str> = values
        .iter()
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .collect();
    if vals.is_empty() {
        return None;
    }
    let candidates = [
        TimeFormat::Iso,
        TimeFormat::excite(),
        TimeFormat::Strftime("%Y%m%d%H%M%S".to_owned()),
        TimeFormat::EpochS,
        TimeFormat::EpochMs,
    ];
    candidates.into_iter().find(|f| {
        let epoch = matches!(f, TimeFormat::EpochS | TimeFormat::EpochMs);
        let fixed_digits = match f {
            TimeFormat::Strftime(p) if p == "%y%m%d%H%M%S" => Some(12),
            TimeFormat::Strftime(_) => Some(14),
            _ => None,
        };
        let ok = vals
            .iter()
            .filter(|v| {
                if fixed_digits.is_some_and(|n| v.len() != n) {
                    return false;
                }
                match f.parse_ms(v) {
                    Some(ms) => !(epoch && plausible) || PLAUSIBLE_MS.contains(&ms),
                    None => false,
                }
            })
            .count();
        ok as f64 >= COLUMN * vals.len() as f64
    })
}

/// The qid of a `qid:query` line: before the first `:`, 1 to 32 characters of letters,
/// digits, `_ - .`, at least one digit.
fn qid(line: &str) -> Option<(&str, &str)> {
    let (q, rest) = line.split_once(':')?;
    let ok = (1..=32).contains(&q.len())
        && q.bytes().any(|b| b.is_ascii_digit())
        && q.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    ok.then_some((q, rest))
}

/// Whether most lines are `qid:priority:query` (the Million Query track's topics).
pub(crate) fn trec_priority(lines: &[&str]) -> bool {
    let lines: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let n = lines
        .iter()
        .filter(|l| {
            qid(l)
                .and_then(|(_, rest)| rest.split_once(':'))
                .is_some_and(|(p, _)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    !lines.is_empty() && n as f64 >= MOST * lines.len() as f64
}

/// Why the sample must not be read as one query per line, if it must not.
pub(crate) fn suspect(lines: &[&str]) -> Option<Suspicion> {
    if let Some(t) = table(lines, Delimiter::Tab).filter(Table::consistent) {
        return Some(Suspicion::Delimited(t));
    }
    if let Some(t) = table(lines, Delimiter::Comma)
        .filter(|t| t.consistent() && t.kinds.iter().any(Kind::structural))
    {
        return Some(Suspicion::Delimited(t));
    }
    let non_blank: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let with_qid: Vec<&str> = non_blank
        .iter()
        .filter_map(|l| qid(l).map(|q| q.0))
        .collect();
    if !non_blank.is_empty() && with_qid.len() as f64 >= MOST * non_blank.len() as f64 {
        return Some(Suspicion::QidPrefix {
            agree: with_qid.len(),
            total: non_blank.len(),
            qid: with_qid[0].to_owned(),
        });
    }
    None
}

/// A line or value as shown in a message: tabs as `\t`, at most [`SHOW_CHARS`] characters.
fn show(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == SHOW_CHARS {
            out.push('…');
            break;
        }
        match c {
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&c.escape_default().to_string()),
            c => out.push(c),
        }
    }
    out
}

/// `  first lines:` and up to [`SHOW_LINES`] numbered lines.
pub(crate) fn show_lines(first: &[(u64, &str)]) -> String {
    let mut s = "  first lines:\n".to_owned();
    for (no, line) in first.iter().take(SHOW_LINES) {
        s.push_str(&format!("    {no}: {}\n", show(line)));
    }
    s
}

/// `  read it with: ...` lines, then the `--format lines` way out.
fn show_suggestions(suggestions: &[String]) -> String {
    let mut s = String::new();
    for (i, sug) in suggestions.iter().enumerate() {
        let lead = if i == 0 {
            "  read it with:"
        } else {
            "            or:"
        };
        s.push_str(&format!("{lead} {sug}\n"));
    }
    s.push_str(&format!(
        "  or, if every line really is one whole query: --format {}",
        LogFormat::Lines
    ));
    s
}

impl Suspicion {
    /// The refusal: what the lines look like, the first lines, the columns seen and the
    /// flags to use.
    pub(crate) fn message(&self, first: &[(u64, &str)]) -> String {
        match self {
            Suspicion::Delimited(t) => format!(
                "refusing to guess the layout: the lines look like {} columns, not one query \
                 per line\n{}{}{}",
                t.delimiter.adjective(),
                show_lines(first),
                t.describe(),
                show_suggestions(&t.suggestions())
            ),
            Suspicion::QidPrefix { agree, total, qid } => format!(
                "refusing to guess the layout: {agree} of {total} sampled lines start with a \
                 query id and a colon (`{qid}:`), like TREC topics, not one query per line\n{}  \
                 columns seen: 1: query ids (the text before the first ':'), 2: the query\n{}",
                show_lines(first),
                show_suggestions(&[format!("--format {}", LogFormat::TrecTopics)])
            ),
        }
    }
}

/// The message for a delimited format without a usable header or mapping: the lines, the
/// columns seen, and the flags to use.
pub(crate) fn needs_mapping(
    lead: &str,
    lines: &[&str],
    first: &[(u64, &str)],
    d: Delimiter,
) -> String {
    let mut s = format!("{lead}\n{}", show_lines(first));
    if let Some(t) = table(lines, d) {
        s.push_str(&t.describe());
        s.push_str(&show_suggestions(&t.suggestions()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXCITE: &[&str] = &[
        "2A9EABFB35F5B954\t970916105432\t+mirun miten +milon",
        "BED75271605EBD0C\t970916001949\truten rulon",
        "BED75271605EBD0C\t970916001954\truten rulon",
        "824F413FA37520BF\t970916184809\tnen tin",
    ];

    #[test]
    fn excite_lines_are_suspect_and_the_preset_is_suggested() {
        let Some(Suspicion::Delimited(t)) = suspect(EXCITE) else {
            panic!("excite lines must be suspect");
        };
        assert_eq!((t.width, t.agree, t.total), (3, 4, 4));
        assert_eq!(t.kinds[0], Kind::HexId { repeats: true });
        assert_eq!(t.kinds[1], Kind::Time(TimeFormat::excite()));
        assert_eq!(t.kinds[2], Kind::Text);
        assert_eq!(
            t.suggestions(),
            [
                "--format excite",
                "--format tsv --columns user,time,query --time-format '%y%m%d%H%M%S'"
            ]
        );
    }

    #[test]
    fn ordinary_queries_are_not_suspect() {
        let lines = [
            "kon min run",
            "koten kokon kolon kosan koven kodin",
            "third\tcolumn",
            "http://www.google.com",
            "paris, france",
            "c++: a tutorial",
        ];
        assert_eq!(suspect(&lines), None);
    }

    #[test]
    fn trec_topics_are_suspect() {
        let lines = [
            "301:international organized crime",
            "302:poliomyelitis and post-polio",
        ];
        assert!(matches!(
            suspect(&lines),
            Some(Suspicion::QidPrefix {
                agree: 2,
                total: 2,
                ..
            })
        ));
        assert!(!trec_priority(&lines));
        assert!(trec_priority(&[
            "20001:1:obama family tree",
            "20002:3:lymes disease"
        ]));
    }

    #[test]
    fn csv_needs_a_structured_column() {
        let plain = ["red, green", "blue, yellow", "black, white"];
        assert_eq!(suspect(&plain), None);
        let with_time = ["2006-03-01 00:01:44,7,a", "2006-03-01 00:01:45,7,b c"];
        let Some(Suspicion::Delimited(t)) = suspect(&with_time) else {
            panic!("a CSV with a time column is suspect");
        };
        assert_eq!(t.suggestions(), ["--format csv --columns time,user,query"]);
    }

    #[test]
    fn lines_that_do_not_split_make_no_table() {
        // Found by the fuzz tests: a CSV line with text after a closing quote.
        assert_eq!(table(&["\" ,\":aaaa"], Delimiter::Comma), None);
        let t = table(&["\" ,\":aaaa", "a,b", "c,d"], Delimiter::Comma).unwrap();
        assert_eq!((t.width, t.agree, t.total), (2, 2, 3));
        let m = needs_mapping(
            "lead",
            &["\" ,\":aaaa"],
            &[(1, "\" ,\":aaaa")],
            Delimiter::Comma,
        );
        assert!(m.starts_with("lead\n  first lines:"), "{m}");
    }

    #[test]
    fn time_sniffing() {
        assert_eq!(
            sniff_time(&["2006-03-01 00:01:44"], true),
            Some(TimeFormat::Iso)
        );
        assert_eq!(sniff_time(&["1141171304"], true), Some(TimeFormat::EpochS));
        assert_eq!(
            sniff_time(&["1141171304123"], true),
            Some(TimeFormat::EpochMs)
        );
        assert_eq!(
            sniff_time(&["20060301000144"], true),
            Some(TimeFormat::Strftime("%Y%m%d%H%M%S".into()))
        );
        assert_eq!(
            sniff_time(&["4100001", "4100002"], true),
            None,
            "ids are not times"
        );
        assert_eq!(sniff_time(&["4100001"], false), Some(TimeFormat::EpochS));
        assert_eq!(sniff_time(&[""], true), None);
    }

    #[test]
    fn refusal_shows_lines_columns_and_flags() {
        let Some(s) = suspect(EXCITE) else { panic!() };
        let first: Vec<(u64, &str)> = EXCITE
            .iter()
            .enumerate()
            .map(|(i, l)| (i as u64 + 1, *l))
            .collect();
        let m = s.message(&first);
        assert!(
            m.contains("1: 2A9EABFB35F5B954\\t970916105432\\t+mirun miten +milon"),
            "{m}"
        );
        assert!(
            m.contains("tab-separated, 3 on 4 of 4 sampled lines"),
            "{m}"
        );
        assert!(
            m.contains("2: times (%y%m%d%H%M%S), e.g. 970916105432 = 1997-09-16 10:54:32"),
            "{m}"
        );
        assert!(m.contains("read it with: --format excite"), "{m}");
        assert!(m.contains("--format lines"), "{m}");
    }
}
