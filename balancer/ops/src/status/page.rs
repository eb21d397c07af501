//! The status page's HTML: one self-contained document (inline CSS and SVG, no script, no
//! external asset) that refreshes itself with `<meta http-equiv="refresh">`, drawn from
//! plain data ([`Page`]) so that it can be tested without a server.
//!
//! Every figure a test may check sits in an element with an `id`: `{replica}-{field}` for
//! the replica rows (`r0-state`, `r0-in-flight`, `r0-queued`, `r0-requests`, ...) and
//! `table-{field}` for the table (`table-version`, `table-hash`, ...).

use std::fmt::Write;

/// One replica's row.
#[derive(Clone, Debug, Default)]
pub struct ReplicaRow {
    /// Its name.
    pub name: String,
    /// Its shard, with `[shards]`.
    pub shard: Option<usize>,
    /// Its address.
    pub address: String,
    /// `up`, `ejected` or `drained`.
    pub state: &'static str,
    /// Requests in flight there now.
    pub in_flight: u64,
    /// Requests waiting for a place there now.
    pub queued: u64,
    /// Answers per second over the page's window.
    pub rate: f64,
    /// Its share of the flash bytes read over the window.
    pub flash_share: Option<f64>,
    /// Flash bytes per second over the window.
    pub flash_rate: f64,
    /// Flash bytes it reported since the balancer started (`None`: it reports none).
    pub reported_miss_total: Option<f64>,
    /// Upstream p99 over the window, seconds (the bucket bound).
    pub p99: Option<f64>,
    /// Answers since the balancer started.
    pub requests_total: f64,
}

/// The voting table's box.
#[derive(Clone, Debug, Default)]
pub struct TableBox {
    /// Its version.
    pub version: u64,
    /// Its content hash, hex.
    pub hash: String,
    /// Seconds since it was loaded.
    pub age: Option<f64>,
    /// Ramp progress, 0 to 1.
    pub ramp_progress: f64,
}

/// A line chart: named series of `(seconds before now, value)` points.
#[derive(Clone, Debug, Default)]
pub struct Chart {
    /// The title.
    pub title: String,
    /// How to print a value.
    pub unit: Unit,
    /// `(legend, points)`.
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    /// A dashed reference line and its legend.
    pub reference: Option<(f64, String)>,
}

/// How a chart's values print.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unit {
    /// A plain number.
    #[default]
    Number,
    /// A share, printed as a percentage.
    Share,
    /// Seconds, printed as milliseconds.
    Seconds,
}

impl Unit {
    fn show(self, v: f64) -> String {
        match self {
            Unit::Number if v >= 100.0 => format!("{v:.0}"),
            Unit::Number => format!("{v:.1}"),
            Unit::Share => format!("{:.1}%", 100.0 * v),
            Unit::Seconds if v >= 0.1 => format!("{:.0} ms", 1e3 * v),
            Unit::Seconds => format!("{:.1} ms", 1e3 * v),
        }
    }
}

/// Everything the page shows.
#[derive(Clone, Debug, Default)]
pub struct Page {
    /// The routing policy's name.
    pub policy: String,
    /// The load view's name.
    pub load: String,
    /// Seconds the "now" figures span.
    pub window: f64,
    /// Seconds between refreshes.
    pub refresh: u64,
    /// Replica rows.
    pub replicas: Vec<ReplicaRow>,
    /// Where the flash shares come from (`reported`, `shadow`), if measured.
    pub flash_source: Option<&'static str>,
    /// The table, for `table`.
    pub table: Option<TableBox>,
    /// Share of routed queries that overflowed, and the stall guard's part, over the window.
    pub overflow: Option<(f64, f64)>,
    /// Share of answers to requests whose query could not be read (routed blind).
    pub blind: Option<f64>,
    /// Answers per second by reason over the window.
    pub reasons: Vec<(&'static str, f64)>,
    /// Upstream p99 of every replica over the window, seconds.
    pub p99: Option<f64>,
    /// The charts of the last ten minutes.
    pub charts: Vec<Chart>,
}

/// Colours of the chart lines, in turn.
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn opt(v: Option<f64>, show: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "–".to_owned(), show)
}

fn bytes(v: f64) -> String {
    match v {
        v if v >= 1e9 => format!("{:.2} GB", v / 1e9),
        v if v >= 1e6 => format!("{:.2} MB", v / 1e6),
        v if v >= 1e3 => format!("{:.1} kB", v / 1e3),
        v => format!("{v:.0} B"),
    }
}

fn ms(v: f64) -> String {
    if v.is_infinite() {
        "> 10 s".to_owned()
    } else {
        format!("≤ {}", Unit::Seconds.show(v))
    }
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.2em;color:#222}\
h1{font-size:1.3em;margin:0 0 .2em}h2{font-size:1.05em;margin:1.2em 0 .4em}\
table{border-collapse:collapse}td,th{padding:.25em .7em;border-bottom:1px solid #ddd;\
text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}\
.up{color:#176317;font-weight:600}.ejected{color:#b00;font-weight:600}\
.drained{color:#a60;font-weight:600}.muted{color:#777}\
.charts{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0}\
figcaption{font-weight:600;margin-bottom:.2em}form{display:inline}";

/// The whole page.
pub fn render(p: &Page) -> String {
    let mut h = String::with_capacity(16 << 10);
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{}\"><title>ballot balancer</title>\
         <style>{STYLE}</style></head><body>",
        p.refresh
    );
    let _ = write!(
        h,
        "<h1>ballot balancer</h1><p class=\"muted\">policy <b id=\"policy\">{}</b>, load \
         view <b>{}</b>; figures over the last {:.0} s, charts over the last 10 minutes; \
         this page refreshes every {} s. <a href=\"/metrics\">metrics</a> · \
         <a href=\"/admin/replicas\">replicas (JSON)</a> · \
         <a href=\"/admin/table\">table (JSON)</a></p>",
        esc(&p.policy),
        esc(&p.load),
        p.window,
        p.refresh
    );
    table_box(&mut h, p);
    replica_table(&mut h, p);
    h.push_str("<h2>Last 10 minutes</h2><div class=\"charts\">");
    for c in &p.charts {
        chart(&mut h, c);
    }
    h.push_str(
        "</div><h2>Explain a query</h2><form method=\"get\" action=\"/admin/explain\">\
         <input name=\"q\" size=\"40\" placeholder=\"a query\"> <button>explain</button>\
         </form> <form method=\"post\" action=\"/admin/logout\"><button>log out</button>\
         </form></body></html>\n",
    );
    h
}

fn table_box(h: &mut String, p: &Page) {
    h.push_str("<h2>Routing</h2><table><tr>");
    if p.table.is_some() {
        h.push_str("<th>table version</th><th>content hash</th><th>age</th><th>ramp</th>");
    }
    h.push_str("<th>overflow</th><th>of it stall guard</th><th>read blind</th><th>p99 (all)</th>");
    for (name, _) in &p.reasons {
        let _ = write!(h, "<th>{} /s</th>", esc(name));
    }
    h.push_str("</tr><tr>");
    if let Some(t) = &p.table {
        let _ = write!(
            h,
            "<td id=\"table-version\">{}</td><td><code id=\"table-hash\">{}</code></td>\
             <td id=\"table-age\">{}</td><td id=\"table-ramp\">{:.0}%</td>",
            t.version,
            esc(&t.hash),
            opt(t.age, |a| format!("{a:.0} s")),
            100.0 * t.ramp_progress
        );
    }
    let _ = write!(
        h,
        "<td id=\"overflow\">{}</td><td id=\"stalled\">{}</td><td id=\"blind\">{}</td>\
         <td id=\"p99\">{}</td>",
        opt(p.overflow.map(|o| o.0), |v| Unit::Share.show(v)),
        opt(p.overflow.map(|o| o.1), |v| Unit::Share.show(v)),
        opt(p.blind, |v| Unit::Share.show(v)),
        opt(p.p99, ms)
    );
    for (name, rate) in &p.reasons {
        let _ = write!(h, "<td id=\"reason-{}\">{rate:.1}</td>", esc(name));
    }
    h.push_str("</tr></table>");
}

fn replica_table(h: &mut String, p: &Page) {
    let source = p.flash_source.unwrap_or("none measured");
    let sharded = p.replicas.iter().any(|r| r.shard.is_some());
    let _ = write!(
        h,
        "<h2>Replicas</h2><table><tr><th>replica</th>{}<th>address</th><th>state</th>\
         <th>answers /s</th><th>in flight</th><th>queued</th><th>flash share ({})</th>\
         <th>flash /s</th><th>reported flash bytes</th><th>p99</th><th>answers</th></tr>",
        if sharded { "<th>shard</th>" } else { "" },
        esc(source)
    );
    for r in &p.replicas {
        let id = esc(&r.name);
        let shard = match r.shard {
            Some(s) => format!("<td id=\"{id}-shard\">{s}</td>"),
            None if sharded => "<td></td>".to_owned(),
            None => String::new(),
        };
        let _ = write!(
            h,
            "<tr><td>{id}</td>{shard}<td class=\"muted\">{}</td>\
             <td id=\"{id}-state\" class=\"{}\">{}</td><td id=\"{id}-rate\">{:.1}</td>\
             <td id=\"{id}-in-flight\">{}</td><td id=\"{id}-queued\">{}</td>\
             <td id=\"{id}-flash-share\">{}</td><td id=\"{id}-flash-rate\">{}</td>\
             <td id=\"{id}-reported-bytes\">{}</td><td id=\"{id}-p99\">{}</td>\
             <td id=\"{id}-requests\">{:.0}</td></tr>",
            esc(&r.address),
            r.state,
            r.state,
            r.rate,
            r.in_flight,
            r.queued,
            opt(r.flash_share, |v| Unit::Share.show(v)),
            bytes(r.flash_rate),
            opt(r.reported_miss_total, bytes),
            opt(r.p99, ms),
            r.requests_total
        );
    }
    h.push_str("</table>");
}

/// Chart geometry: the SVG's size and the plot area's margins.
const W: f64 = 420.0;
const H: f64 = 160.0;
const LEFT: f64 = 58.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 22.0;
/// The time axis: ten minutes before now to now.
const SPAN: f64 = 600.0;

fn chart(h: &mut String, c: &Chart) {
    let mut top = c
        .series
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(|p| p.1))
        .chain(c.reference.as_ref().map(|r| r.0))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    if c.unit == Unit::Share {
        top = top.clamp(0.05, 1.0);
    }
    if top <= 0.0 {
        top = 1.0;
    }
    top *= 1.1;
    let x = |age: f64| LEFT + (W - LEFT - RIGHT) * (1.0 - (age / SPAN).clamp(0.0, 1.0));
    let y = |v: f64| TOP + (H - TOP - BOTTOM) * (1.0 - (v / top).clamp(0.0, 1.0));
    let _ = write!(
        h,
        "<figure><figcaption>{}</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" \
         width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" role=\"img\">\
         <rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" \
         stroke=\"#ccc\"/>\
         <text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>\
         <text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">0</text>\
         <text x=\"{LEFT}\" y=\"{}\" font-size=\"11\">−10 min</text>\
         <text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">now</text>",
        esc(&c.title),
        W - LEFT - RIGHT,
        H - TOP - BOTTOM,
        LEFT - 4.0,
        TOP + 10.0,
        esc(&c.unit.show(top)),
        LEFT - 4.0,
        H - BOTTOM,
        H - 6.0,
        W - RIGHT,
        H - 6.0
    );
    if let Some((v, _)) = &c.reference {
        let _ = write!(
            h,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{1:.1}\" y2=\"{1:.1}\" stroke=\"#555\" \
             stroke-dasharray=\"4 3\"/>",
            W - RIGHT,
            y(*v)
        );
    }
    for (i, (_, pts)) in c.series.iter().enumerate() {
        let finite: Vec<String> = pts
            .iter()
            .filter(|p| p.1.is_finite())
            .map(|&(age, v)| format!("{:.1},{:.1}", x(age), y(v)))
            .collect();
        if finite.is_empty() {
            continue;
        }
        let _ = write!(
            h,
            "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"{}\" points=\"{}\"/>",
            COLOURS[i % COLOURS.len()],
            finite.join(" ")
        );
    }
    h.push_str("</svg><div>");
    for (i, (name, _)) in c.series.iter().enumerate() {
        let _ = write!(
            h,
            "<span style=\"color:{}\">■</span> {} ",
            COLOURS[i % COLOURS.len()],
            esc(name)
        );
    }
    if let Some((_, name)) = &c.reference {
        let _ = write!(h, "<span>┄</span> {}", esc(name));
    }
    h.push_str("</div></figure>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_self_contained_and_escapes_what_it_shows() {
        let page = Page {
            policy: "table".into(),
            load: "work".into(),
            window: 60.0,
            refresh: 5,
            replicas: vec![ReplicaRow {
                name: "r<0>".into(),
                address: "127.0.0.1:1".into(),
                state: "ejected",
                in_flight: 3,
                requests_total: 42.0,
                p99: Some(0.025),
                ..ReplicaRow::default()
            }],
            table: Some(TableBox {
                version: 2,
                hash: "00ff".into(),
                age: Some(12.0),
                ramp_progress: 0.5,
            }),
            charts: vec![Chart {
                title: "answers /s".into(),
                series: vec![("r<0>".into(), vec![(600.0, 1.0), (0.0, 2.0)])],
                reference: Some((1.5, "even".into())),
                ..Chart::default()
            }],
            ..Page::default()
        };
        let html = render(&page);
        assert!(html.contains("<meta http-equiv=\"refresh\" content=\"5\">"));
        assert!(
            !html.contains("<script") && !html.contains("src="),
            "no script or asset"
        );
        assert!(html.contains("id=\"r&lt;0&gt;-state\" class=\"ejected\">ejected<"));
        assert!(html.contains("id=\"r&lt;0&gt;-in-flight\">3<"));
        assert!(html.contains("id=\"r&lt;0&gt;-requests\">42<"));
        assert!(html.contains("id=\"r&lt;0&gt;-p99\">≤ 25.0 ms<"));
        assert!(html.contains("id=\"table-version\">2<"));
        assert!(html.contains("id=\"table-ramp\">50%<"));
        assert!(html.contains("<polyline") && html.contains("stroke-dasharray"));
        assert!(!html.contains("r<0>"), "the name is escaped everywhere");
        assert!(
            !html.contains("<th>shard</th>"),
            "no shard column without shards"
        );
    }

    #[test]
    fn sharded_replicas_show_their_shard() {
        let row = |name: &str, shard| ReplicaRow {
            name: name.into(),
            shard: Some(shard),
            ..ReplicaRow::default()
        };
        let page = Page {
            replicas: vec![row("s0r0", 0), row("s1r0", 1)],
            ..Page::default()
        };
        let html = render(&page);
        assert!(html.contains("<th>shard</th>"));
        assert!(html.contains("id=\"s0r0-shard\">0<"));
        assert!(html.contains("id=\"s1r0-shard\">1<"));
    }
}
