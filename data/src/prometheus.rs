//! Reads the Prometheus text exposition format (version 0.0.4) that the servers' `/metrics`
//! write: one sample per line, `name{label="value",...} number`, `#` lines skipped. The one
//! reader of those pages in the workspace: `ballot demo` reads the balancer's routing
//! reasons with it, the end-to-end tests their counters. (The balancer's own status page
//! reads typed counters, not this text.)

/// One sample line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample<'a> {
    /// The metric (with `_bucket`, `_sum` or `_count` for histogram parts).
    pub name: &'a str,
    /// The labels as written, between the braces (empty without labels).
    pub labels: &'a str,
    /// The value (`+Inf`, `-Inf` and `NaN` as floats).
    pub value: f64,
}

impl<'a> Sample<'a> {
    /// The value of label `key`, as written (label values with `\"` escapes keep them).
    pub fn label(&self, key: &str) -> Option<&'a str> {
        let mut rest = self.labels;
        while !rest.is_empty() {
            let (k, after) = rest.split_once("=\"")?;
            let end = value_end(after)?;
            if k.trim_start_matches([',', ' ']) == key {
                return Some(&after[..end]);
            }
            rest = &after[end + 1..];
        }
        None
    }
}

/// The offset of the quote that ends a label value starting at `s`.
fn value_end(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match (c, escaped) {
            ('"', false) => return Some(i),
            ('\\', false) => escaped = true,
            _ => escaped = false,
        }
    }
    None
}

/// Every sample of `text` that parses, in order.
pub fn samples(text: &str) -> impl Iterator<Item = Sample<'_>> {
    text.lines().filter_map(|line| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let (series, value) = line.rsplit_once(' ')?;
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.strip_suffix('}')?),
            None => (series.trim_end(), ""),
        };
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().ok()?,
        };
        Some(Sample {
            name,
            labels,
            value,
        })
    })
}

/// The sum of every sample of metric `name` whose labels `keep` (`None`: no such sample).
pub fn sum(text: &str, name: &str, keep: impl Fn(&Sample<'_>) -> bool) -> Option<f64> {
    samples(text)
        .filter(|s| s.name == name && keep(s))
        .map(|s| s.value)
        .reduce(|a, b| a + b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_labels_and_sums() {
        let text = "# HELP x y\n# TYPE x counter\nx 3\n\
                    ballot_requests_total{replica=\"r0\",reason=\"vote\"} 12\n\
                    ballot_requests_total{replica=\"r1\",reason=\"failover\"} 2\n\
                    up{q=\"a\\\"b\",le=\"+Inf\"} +Inf\n\
                    broken{x=\"1\" 3\nnot_a_number abc\n";
        let s: Vec<Sample<'_>> = samples(text).collect();
        assert_eq!(s.len(), 4, "{s:?}");
        assert_eq!((s[0].name, s[0].labels, s[0].value), ("x", "", 3.0));
        assert_eq!(s[1].label("reason"), Some("vote"));
        assert_eq!(s[1].label("replica"), Some("r0"));
        assert_eq!(s[1].label("nope"), None);
        assert_eq!(s[3].label("q"), Some("a\\\"b"));
        assert_eq!(s[3].label("le"), Some("+Inf"));
        assert_eq!(s[3].value, f64::INFINITY);
        assert_eq!(sum(text, "ballot_requests_total", |_| true), Some(14.0));
        let first = |s: &Sample<'_>| s.label("reason") != Some("failover");
        assert_eq!(sum(text, "ballot_requests_total", first), Some(12.0));
        assert_eq!(sum(text, "absent", |_| true), None);
    }
}
