//! ORCA load reports: the `endpoint-load-metrics` answer header in which a backend tells its
//! load balancer what a request cost and how loaded it is (the Open Request Cost
//! Aggregation format that Envoy and gRPC read and vLLM writes; `xds.data.orca.v3.
//! OrcaLoadReport`). ballot's replica writes one on every answer, and the balancer reads
//! the one of any backend that sends it.
//!
//! Two of the header's three encodings are text and are read here:
//!
//! - `TEXT key=value, key=value, ...`: the report's scalar fields by name
//!   (`cpu_utilization`, `mem_utilization`, `rps_fractional`, `eps`,
//!   `application_utilization`) and its map entries as `map.name` (`request_cost.<name>`,
//!   `utilization.<name>`, `named_metrics.<name>`);
//! - `JSON {...}`: the report as JSON, maps as objects (`{"request_cost": {"miss_bytes":
//!   123}}`).
//!
//! The third, `BIN` (a base64 protobuf), is not read: a backend sending it is counted as
//! sending no report. A reader asks for one entry by its dotted name ([`find`]); the TEXT
//! form is scanned without allocating, the JSON form parsed. A malformed report is an error
//! the caller counts and ignores; it never fails the request it came with.

/// The answer header that carries a load report.
pub const HEADER: &str = "endpoint-load-metrics";

/// The entry ballot's replica reports each answer's flash bytes in.
pub const MISS_BYTES: &str = "request_cost.miss_bytes";

/// The entry ballot's replica reports its backlog in: the searches in flight there when it
/// sent the answer.
pub const BACKLOG: &str = "named_metrics.backlog";

/// The entry ballot's replica reports each answer's service time in, ms: the time the
/// search ran, without the time it waited for its turn (what Elasticsearch's adaptive
/// replica selection calls service time).
pub const SERVICE_MS: &str = "request_cost.service_ms";

/// Why a report could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// Neither `TEXT ` nor `JSON ` (nor `BIN `) starts the value.
    #[error("load report in an unknown encoding (expected TEXT or JSON)")]
    Encoding,
    /// A TEXT pair without `=`, with an empty name, or with a value that is not a finite
    /// number.
    #[error("malformed TEXT load report entry {0:?}")]
    Text(String),
    /// Not valid JSON, not an object, or the entry is not a finite number.
    #[error("malformed JSON load report: {0}")]
    Json(String),
    /// The encoding is `BIN`, which is not read.
    #[error("binary load reports are not read")]
    Binary,
}

/// The value of entry `name` (`cpu_utilization`, `request_cost.miss_bytes`, ...) in the
/// header value `value`; `Ok(None)` when the report has no such entry. A TEXT report is
/// checked whole, so a malformed pair anywhere is an error even when the asked-for entry
/// is well formed.
pub fn find(value: &[u8], name: &str) -> Result<Option<f64>, ReportError> {
    let value = value.trim_ascii();
    if let Some(text) = value.strip_prefix(b"TEXT ") {
        find_text(text, name)
    } else if let Some(json) = value.strip_prefix(b"JSON ") {
        find_json(json, name)
    } else if value.starts_with(b"BIN ") {
        Err(ReportError::Binary)
    } else {
        Err(ReportError::Encoding)
    }
}

fn find_text(text: &[u8], name: &str) -> Result<Option<f64>, ReportError> {
    let mut found = None;
    for pair in text.split(|&b| b == b',') {
        let pair = pair.trim_ascii();
        if pair.is_empty() {
            continue;
        }
        let bad = || ReportError::Text(String::from_utf8_lossy(pair).into_owned());
        let eq = pair.iter().position(|&b| b == b'=').ok_or_else(bad)?;
        let (key, val) = (pair[..eq].trim_ascii(), pair[eq + 1..].trim_ascii());
        if key.is_empty() {
            return Err(bad());
        }
        let v: f64 = std::str::from_utf8(val)
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(bad)?;
        if key == name.as_bytes() && found.is_none() {
            found = Some(v);
        }
    }
    Ok(found)
}

fn find_json(json: &[u8], name: &str) -> Result<Option<f64>, ReportError> {
    let doc: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| ReportError::Json(e.to_string()))?;
    if !doc.is_object() {
        return Err(ReportError::Json("not an object".to_owned()));
    }
    let entry = match name.split_once('.') {
        Some((map, key)) => doc.get(map).and_then(|m| m.get(key)),
        None => doc.get(name),
    };
    match entry {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|v| v.is_finite())
            .map(Some)
            .ok_or_else(|| ReportError::Json(format!("{name} is not a number: {v}"))),
    }
}

/// Writes ballot's replica's report, `TEXT request_cost.miss_bytes=M,
/// request_cost.service_ms=S, named_metrics.backlog=B`, into `out` (cleared first).
pub fn write_text(out: &mut String, miss_bytes: u64, service_ms: f64, backlog: u64) {
    use std::fmt::Write;
    out.clear();
    let _ = write!(
        out,
        "TEXT {MISS_BYTES}={miss_bytes}, {SERVICE_MS}={service_ms:.3}, {BACKLOG}={backlog}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_reports_are_read_by_entry() {
        let v = b"TEXT cpu_utilization=0.3, mem_utilization=0.8, request_cost.miss_bytes=4096, named_metrics.backlog=3";
        assert_eq!(find(v, "request_cost.miss_bytes"), Ok(Some(4096.0)));
        assert_eq!(find(v, "named_metrics.backlog"), Ok(Some(3.0)));
        assert_eq!(find(v, "cpu_utilization"), Ok(Some(0.3)));
        assert_eq!(find(v, "named_metrics.other"), Ok(None));
        // Spaces and an empty pair are tolerated, as Envoy's parser does.
        assert_eq!(find(b"  TEXT  a=1 ,, b = 2 ", "b"), Ok(Some(2.0)));
        let mut out = String::new();
        write_text(&mut out, 123, 2.5, 7);
        assert_eq!(
            out,
            "TEXT request_cost.miss_bytes=123, request_cost.service_ms=2.500, named_metrics.backlog=7"
        );
        assert_eq!(find(out.as_bytes(), MISS_BYTES), Ok(Some(123.0)));
        assert_eq!(find(out.as_bytes(), SERVICE_MS), Ok(Some(2.5)));
        assert_eq!(find(out.as_bytes(), BACKLOG), Ok(Some(7.0)));
    }

    #[test]
    fn json_reports_are_read_by_entry() {
        let v = br#"JSON {"cpu_utilization": 0.5, "request_cost": {"miss_bytes": 2048}, "named_metrics": {"backlog": 2}}"#;
        assert_eq!(find(v, "request_cost.miss_bytes"), Ok(Some(2048.0)));
        assert_eq!(find(v, "named_metrics.backlog"), Ok(Some(2.0)));
        assert_eq!(find(v, "cpu_utilization"), Ok(Some(0.5)));
        assert_eq!(find(v, "utilization.x"), Ok(None));
    }

    #[test]
    fn malformed_reports_are_errors() {
        for bad in [
            &b"TEXT a"[..],
            b"TEXT a=",
            b"TEXT =1",
            b"TEXT a=x",
            b"TEXT a=1, b=inf",
            b"TEXT a=1, b=NaN",
        ] {
            assert!(
                matches!(find(bad, "a"), Err(ReportError::Text(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        for bad in [
            &b"JSON {"[..],
            b"JSON [1]",
            br#"JSON {"request_cost": {"miss_bytes": "12"}}"#,
        ] {
            assert!(
                matches!(
                    find(bad, "request_cost.miss_bytes"),
                    Err(ReportError::Json(_))
                ),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(find(b"BIN AAAA", "a"), Err(ReportError::Binary));
        assert_eq!(find(b"cpu=1", "cpu"), Err(ReportError::Encoding));
        assert_eq!(find(b"", "cpu"), Err(ReportError::Encoding));
    }
}
