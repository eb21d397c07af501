//! Reads back the Prometheus text the balancer renders on `/metrics`, so the status page
//! shows the very counters a scraper sees (the `metrics` handles are write-only).
//!
//! Only what the balancer itself writes is understood: one sample per line,
//! `name{label="value",...} number`, label values with `\\`, `\"` and `\n` escapes, and `#`
//! comment lines; anything else is skipped.

/// One sample: the metric name, its labels in the order written, and the value.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The metric (with `_bucket`, `_sum` or `_count` for histogram parts).
    pub name: String,
    /// `(label, value)` pairs.
    pub labels: Vec<(String, String)>,
    /// The sample value.
    pub value: f64,
}

impl Series {
    /// The value of label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Every sample of `text` that parses.
pub fn parse(text: &str) -> Vec<Series> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Series> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(inner)?;
        labels = parsed;
        rest = after;
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    (!name.is_empty()).then(|| Series {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// Parses `label="value",...}` and returns the pairs and what follows the `}`.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start_matches([',', ' ']);
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_owned();
        s = s[eq + 1..].strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '"' => break i,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                c => value.push(c),
            }
        };
        labels.push((key, value));
        s = &s[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_labels_and_escapes() {
        let text = "# HELP x y\n# TYPE x counter\nx 3\n\
                    ballot_requests_total{replica=\"r0\",reason=\"vote\"} 12\n\
                    ballot_upstream_seconds_bucket{replica=\"r\\\"1\",le=\"+Inf\"} 4\n\
                    bad{unterminated=\"x} 1\n\
                    nan_value abc\n";
        let s = parse(text);
        assert_eq!(s.len(), 3, "{s:?}");
        assert_eq!((s[0].name.as_str(), s[0].value), ("x", 3.0));
        assert_eq!(s[1].label("reason"), Some("vote"));
        assert_eq!(s[1].value, 12.0);
        assert_eq!(s[2].label("replica"), Some("r\"1"));
        assert_eq!(s[2].label("le"), Some("+Inf"));
        assert_eq!(s[2].label("nope"), None);
    }
}
