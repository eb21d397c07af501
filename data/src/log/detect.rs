//! Settling a text log's [`Layout`] from the flags ([`LayoutSpec`]) and its first lines.
//!
//! With `--format`, the format is taken as given and only what it leaves open is read from
//! the content (whether a header line is there, a time column's format). Without it, the
//! first line decides when it is a header:
//!
//! | first line | layout |
//! |---|---|
//! | starts with `AnonID` + tab (any case) | [`LogFormat::Aol`] |
//! | exactly `Query` (any case) | [`LogFormat::QueryColumn`] |
//! | tab-separated header names, one of them a query column (`timestamp\tanon_id\tquery`) | [`LogFormat::Tsv`] |
//! | comma-separated header names, one of them a query column | [`LogFormat::Csv`] |
//!
//! and otherwise the lines are one query each ([`LogFormat::Lines`]) — unless they look
//! delimited or like TREC topics ([`sniff`]), in which case reading stops with
//! [`LogError::Ambiguous`] rather than guess. Column flags without `--format` read
//! delimited columns, tab-separated unless the lines are consistently comma-separated.
//! A header line is recognised by its names ([`header_role`]) and skipped, with or without
//! flags; a time column without `--time-format` gets the format its sampled values are in.

use std::path::Path;

use super::fields::split_owned;
use super::format::{header_role, Delimiter, LogFormat, Role};
use super::layout::{ColumnRef, Columns, Layout, LayoutSpec, Shape};
use super::sniff;
use super::LogError;
use crate::time::TimeFormat;

/// The AOL collection's column names.
const AOL_NAMES: [&str; 5] = ["AnonID", "Query", "QueryTime", "ItemRank", "ClickURL"];

/// The layout of a text log whose first lines (numbered, valid UTF-8, BOM and line ending
/// stripped, blank ones included) are `sample`.
pub(crate) fn resolve(
    path: &Path,
    spec: &LayoutSpec,
    sample: &[(u64, &str)],
) -> Result<Layout, LogError> {
    let r = Resolver {
        path,
        spec,
        sample,
        lines: sample.iter().map(|x| x.1).collect(),
        first: sample.first().filter(|x| x.0 == 1).map(|x| x.1),
    };
    let layout = match spec.format {
        None => r.auto()?,
        Some(LogFormat::Parquet) => {
            return Err(r.err(
                "--format parquet, but the file is not Parquet (it does not start with PAR1)"
                    .to_owned(),
            ))
        }
        Some(f @ (LogFormat::Lines | LogFormat::QueryColumn)) => Layout {
            format: f,
            header: f == LogFormat::QueryColumn,
            detected: false,
            shape: Shape::Lines,
        },
        Some(LogFormat::TrecTopics) => Layout {
            format: LogFormat::TrecTopics,
            header: false,
            detected: false,
            shape: Shape::TrecTopics {
                priority: sniff::trec_priority(&r.lines),
            },
        },
        Some(LogFormat::Aol) => r.aol(r.first.is_some_and(is_aol_header), false),
        Some(LogFormat::Excite) => r.excite(),
        Some(f @ (LogFormat::Tsv | LogFormat::Csv)) => {
            let d = f.delimiter().unwrap_or(Delimiter::Tab);
            r.delimited(d, false)?
        }
    };
    Ok(layout)
}

fn is_aol_header(line: &str) -> bool {
    line.get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("AnonID\t"))
}

/// Whether `fields` read as header names: every field empty or a name (a letter, at most
/// 64 characters, not a time), and at least one a known column name.
fn header_like(fields: &[String]) -> bool {
    fields.iter().all(|f| {
        let t = f.trim();
        t.is_empty()
            || (t.chars().count() <= 64
                && t.chars().any(char::is_alphabetic)
                && TimeFormat::Iso.parse_ms(t).is_none())
    }) && fields.iter().any(|f| header_role(f).is_some())
}

struct Resolver<'a> {
    path: &'a Path,
    spec: &'a LayoutSpec,
    sample: &'a [(u64, &'a str)],
    lines: Vec<&'a str>,
    first: Option<&'a str>,
}

impl Resolver<'_> {
    fn err(&self, detail: String) -> LogError {
        LogError::Layout {
            path: self.path.to_owned(),
            detail,
        }
    }

    /// Content detection (no `--format`).
    fn auto(&self) -> Result<Layout, LogError> {
        if self.spec.has_mapping() {
            return self.delimited(self.sniff_delimiter(), true);
        }
        if let Some(first) = self.first {
            if is_aol_header(first) {
                return Ok(self.aol(true, true));
            }
            if first.eq_ignore_ascii_case("query") {
                self.no_time_format(LogFormat::QueryColumn)?;
                return Ok(Layout {
                    format: LogFormat::QueryColumn,
                    header: true,
                    detected: true,
                    shape: Shape::Lines,
                });
            }
            for d in [Delimiter::Tab, Delimiter::Comma] {
                if let Some(fields) = split_owned(first, d) {
                    if fields.len() >= 2
                        && header_like(&fields)
                        && fields.iter().any(|f| header_role(f) == Some(Role::Query))
                    {
                        return self.with_header(d, &fields, true);
                    }
                }
            }
        }
        if let Some(s) = sniff::suspect(&self.lines) {
            return Err(LogError::Ambiguous {
                path: self.path.to_owned(),
                detail: s.message(self.sample),
            });
        }
        self.no_time_format(LogFormat::Lines)?;
        Ok(Layout {
            format: LogFormat::Lines,
            header: false,
            detected: true,
            shape: Shape::Lines,
        })
    }

    fn no_time_format(&self, f: LogFormat) -> Result<(), LogError> {
        match &self.spec.time_format {
            Some(tf) => Err(self.err(format!(
                "--time-format {tf} was given, but the log reads as {f}, which has no time \
                 column; give --format and the columns too"
            ))),
            None => Ok(()),
        }
    }

    /// Tab-separated unless the sample is consistently comma-separated.
    fn sniff_delimiter(&self) -> Delimiter {
        let consistent = |d| {
            sniff::table(&self.lines, d).is_some_and(|t| t.width >= 2 && t.agree * 5 >= t.total * 4)
        };
        if !consistent(Delimiter::Tab) && consistent(Delimiter::Comma) {
            Delimiter::Comma
        } else {
            Delimiter::Tab
        }
    }

    fn aol(&self, header: bool, detected: bool) -> Layout {
        Layout {
            format: LogFormat::Aol,
            header,
            detected,
            shape: Shape::Delimited(Columns {
                delimiter: Delimiter::Tab,
                names: AOL_NAMES.map(String::from).to_vec(),
                query: 1,
                user: Some(0),
                time: Some(2),
                time_format: self.spec.time_format.clone().unwrap_or(TimeFormat::Iso),
            }),
        }
    }

    fn excite(&self) -> Layout {
        let header = self
            .first
            .and_then(|f| split_owned(f, Delimiter::Tab))
            .is_some_and(|f| header_like(&f));
        Layout {
            format: LogFormat::Excite,
            header,
            detected: false,
            shape: Shape::Delimited(Columns {
                delimiter: Delimiter::Tab,
                names: ["user", "time", "query"].map(String::from).to_vec(),
                query: 2,
                user: Some(0),
                time: Some(1),
                time_format: self
                    .spec
                    .time_format
                    .clone()
                    .unwrap_or_else(TimeFormat::excite),
            }),
        }
    }

    /// Field `i` of every sampled data line (header excluded).
    fn column_values(&self, d: Delimiter, i: usize, header: bool) -> Vec<String> {
        self.sample
            .iter()
            .filter(|(no, _)| !(header && *no == 1))
            .filter_map(|(_, l)| split_owned(l, d).and_then(|f| f.into_iter().nth(i)))
            .collect()
    }

    /// `--time-format`, or the format of the sampled values of column `t` (ISO if none fits).
    fn time_format(&self, d: Delimiter, t: Option<usize>, header: bool) -> TimeFormat {
        if let Some(tf) = &self.spec.time_format {
            return tf.clone();
        }
        let Some(t) = t else {
            return TimeFormat::Iso;
        };
        let values = self.column_values(d, t, header);
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        sniff::sniff_time(&refs, false).unwrap_or(TimeFormat::Iso)
    }

    /// A delimited log read by `--format tsv|csv` or by column flags.
    fn delimited(&self, d: Delimiter, detected: bool) -> Result<Layout, LogError> {
        let first_fields = self.first.and_then(|f| split_owned(f, d));
        let names_a_field = |fields: &[String]| {
            self.spec.column_refs().any(|(_, c)| match c {
                ColumnRef::Name(n) => fields.iter().any(|f| f.trim().eq_ignore_ascii_case(n)),
                ColumnRef::Index(_) => false,
            })
        };
        let header = first_fields.filter(|f| header_like(f) || names_a_field(f));
        if let Some(roles) = &self.spec.columns {
            let at = |r: Role| roles.iter().position(|&x| x == r);
            let Some(query) = at(Role::Query) else {
                return Err(self.err("--columns names no query column".to_owned()));
            };
            let time = at(Role::Time);
            return Ok(Layout {
                format: d.format(),
                header: header.is_some(),
                detected,
                shape: Shape::Delimited(Columns {
                    delimiter: d,
                    names: roles.iter().map(|r| r.name().to_owned()).collect(),
                    query,
                    user: at(Role::User),
                    time,
                    time_format: self.time_format(d, time, header.is_some()),
                }),
            });
        }
        if let Some(fields) = header {
            return self.with_header(d, &fields, detected);
        }
        // No header: positions only.
        if let Some((role, ColumnRef::Name(n))) = self
            .spec
            .column_refs()
            .find(|(_, c)| matches!(c, ColumnRef::Name(_)))
        {
            return Err(self.err(sniff::needs_mapping(
                &format!(
                    "--{role}-column {n:?} names a header column, but the first line is not \
                     a header naming it; give columns by number (--{role}-column 2) or \
                     --columns"
                ),
                &self.lines,
                self.sample,
                d,
            )));
        }
        let index = |c: Option<&ColumnRef>| match c {
            Some(ColumnRef::Index(i)) => Some(*i),
            _ => None,
        };
        let Some(query) = index(self.spec.query_column.as_ref()) else {
            return Err(self.err(sniff::needs_mapping(
                &format!(
                    "--format {} needs to know which column holds the queries: the first line \
                     is not a header naming it; give --columns (or --query-column N)",
                    d.format()
                ),
                &self.lines,
                self.sample,
                d,
            )));
        };
        let user = index(self.spec.user_column.as_ref());
        let time = index(self.spec.time_column.as_ref());
        let sampled = sniff::table(&self.lines, d).map_or(1, |t| t.width);
        let width = sampled.max(1 + query.max(user.unwrap_or(0)).max(time.unwrap_or(0)));
        let mut names = vec!["-".to_owned(); width];
        for (i, r) in [
            (Some(query), Role::Query),
            (user, Role::User),
            (time, Role::Time),
        ] {
            if let Some(i) = i {
                names[i] = r.name().to_owned();
            }
        }
        Ok(Layout {
            format: d.format(),
            header: false,
            detected,
            shape: Shape::Delimited(Columns {
                delimiter: d,
                names,
                query,
                user,
                time,
                time_format: self.time_format(d, time, false),
            }),
        })
    }

    /// A delimited log with the header line `fields`: roles from the flags, else from the
    /// header names.
    fn with_header(
        &self,
        d: Delimiter,
        fields: &[String],
        detected: bool,
    ) -> Result<Layout, LogError> {
        let listing = || {
            fields
                .iter()
                .enumerate()
                .map(|(i, f)| format!("{} {:?}", i + 1, f.trim()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let find = |role: Role, given: Option<&ColumnRef>| -> Result<Option<usize>, LogError> {
            match given {
                Some(ColumnRef::Index(i)) if *i < fields.len() => Ok(Some(*i)),
                Some(ColumnRef::Index(i)) => Err(self.err(format!(
                    "--{role}-column {}: the header has only {} columns ({})",
                    i + 1,
                    fields.len(),
                    listing()
                ))),
                Some(ColumnRef::Name(n)) => fields
                    .iter()
                    .position(|f| f.trim() == n)
                    .or_else(|| fields.iter().position(|f| f.trim().eq_ignore_ascii_case(n)))
                    .map(Some)
                    .ok_or_else(|| {
                        self.err(format!(
                            "--{role}-column {n:?}: no such column in the header ({})",
                            listing()
                        ))
                    }),
                None => Ok(fields.iter().position(|f| header_role(f) == Some(role))),
            }
        };
        let query = find(Role::Query, self.spec.query_column.as_ref())?.ok_or_else(|| {
            self.err(format!(
                "the header line names no query column ({}); pass --query-column NAME or N",
                listing()
            ))
        })?;
        let user = find(Role::User, self.spec.user_column.as_ref())?;
        let time = find(Role::Time, self.spec.time_column.as_ref())?;
        if user == Some(query) || time == Some(query) || (user.is_some() && user == time) {
            return Err(self.err(format!(
                "one column cannot hold two roles (query = column {}, user = {}, time = {})",
                query + 1,
                user.map_or("none".to_owned(), |u| (u + 1).to_string()),
                time.map_or("none".to_owned(), |t| (t + 1).to_string()),
            )));
        }
        let names = fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let t = f.trim();
                if t.is_empty() {
                    format!("column {}", i + 1)
                } else {
                    t.to_owned()
                }
            })
            .collect();
        Ok(Layout {
            format: d.format(),
            header: true,
            detected,
            shape: Shape::Delimited(Columns {
                delimiter: d,
                names,
                query,
                user,
                time,
                time_format: self.time_format(d, time, true),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered<'a>(lines: &[&'a str]) -> Vec<(u64, &'a str)> {
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| (i as u64 + 1, *l))
            .collect()
    }

    fn auto(lines: &[&str]) -> Result<Layout, LogError> {
        resolve(Path::new("t.log"), &LayoutSpec::default(), &numbered(lines))
    }

    fn columns(l: &Layout) -> &Columns {
        match &l.shape {
            Shape::Delimited(c) => c,
            other => panic!("not delimited: {other:?}"),
        }
    }

    #[test]
    fn headers_decide() {
        let l = auto(&[
            "AnonID\tQuery\tQueryTime\tItemRank\tClickURL",
            "1\ta\t2006-03-01",
        ])
        .unwrap();
        assert_eq!((l.format, l.header), (LogFormat::Aol, true));
        let l = auto(&["query", "a"]).unwrap();
        assert_eq!((l.format, l.header), (LogFormat::QueryColumn, true));
        let l = auto(&["timestamp\tanon_id\tquery", "2006-03-01 00:01:44\t1\ta"]).unwrap();
        assert_eq!(l.format, LogFormat::Tsv);
        let c = columns(&l);
        assert_eq!((c.query, c.user, c.time), (2, Some(1), Some(0)));
        let l = auto(&["TS,User,Query", "1141171304,1,a"]).unwrap();
        assert_eq!(l.format, LogFormat::Csv);
        let c = columns(&l);
        assert_eq!((c.query, c.user, c.time), (2, Some(1), Some(0)));
        assert_eq!(c.time_format, TimeFormat::EpochS, "sniffed from the values");
        let l = auto(&["kon min run", "free tickets"]).unwrap();
        assert_eq!((l.format, l.header), (LogFormat::Lines, false));
    }

    #[test]
    fn delimited_without_header_is_refused() {
        let e = auto(&["1\t2006-03-01 00:01:44\ta", "2\t2006-03-01 00:01:45\tb"]).unwrap_err();
        assert!(matches!(e, LogError::Ambiguous { .. }), "{e}");
        let m = e.to_string();
        assert!(m.starts_with("t.log: refusing to guess"), "{m}");
        assert!(m.contains("--format tsv --columns -,time,query"), "{m}");
    }

    #[test]
    fn columns_flag_with_or_without_header() {
        let spec = LayoutSpec {
            columns: Some(vec![Role::Time, Role::User, Role::Query]),
            ..LayoutSpec::default()
        };
        let l = resolve(
            Path::new("t"),
            &spec,
            &numbered(&["1141171304\t7\ta", "1141171305\t7\tb"]),
        )
        .unwrap();
        assert_eq!((l.format, l.header), (LogFormat::Tsv, false));
        assert_eq!(columns(&l).time_format, TimeFormat::EpochS);
        let l = resolve(
            Path::new("t"),
            &spec,
            &numbered(&["ts\tuser\tquery", "1141171304\t7\ta"]),
        )
        .unwrap();
        assert!(l.header, "a header line is skipped");
    }

    #[test]
    fn tsv_without_mapping_says_how() {
        let spec = LayoutSpec {
            format: Some(LogFormat::Tsv),
            ..LayoutSpec::default()
        };
        let e = resolve(
            Path::new("t"),
            &spec,
            &numbered(&[
                "2A9EABFB35F5B954\t970916105432\ta b",
                "2A9EABFB35F5B954\t970916105433\tc",
            ]),
        )
        .unwrap_err();
        let m = e.to_string();
        assert!(m.contains("--format excite"), "{m}");
        assert!(m.contains("columns seen"), "{m}");
    }

    #[test]
    fn header_names_by_flag() {
        let spec = LayoutSpec {
            format: Some(LogFormat::Csv),
            query_column: Some(ColumnRef::Name("TEXT".into())),
            ..LayoutSpec::default()
        };
        let l = resolve(Path::new("t"), &spec, &numbered(&["id,text", "1,a"])).unwrap();
        assert_eq!(columns(&l).query, 1);
        let spec = LayoutSpec {
            format: Some(LogFormat::Csv),
            query_column: Some(ColumnRef::Name("nope".into())),
            ..LayoutSpec::default()
        };
        let e = resolve(Path::new("t"), &spec, &numbered(&["id,query", "1,a"])).unwrap_err();
        assert!(e.to_string().contains("no such column"), "{e}");
    }
}
