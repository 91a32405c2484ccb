//! `http-load report`: turns the JSON lines that `bench/proxy-pair.sh`
//! collects into a markdown table of medians over rounds, with ratios
//! against the direct connection, meshlink against haproxy, and the link
//! (Listener → router → link → router → Connector) against the meshlink
//! sidecar pair. Only variants with figures get a column.
//!
//! Each input line is a flat object `{"variant": V, "round": R, figure: number, ...}`;
//! a figure may be spread over several lines of the same round.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde_json::{Map, Value};

const VARIANTS: [&str; 4] = ["direct", "haproxy", "meshlink", "link"];

/// Column titles of the variants.
fn title(variant: &str) -> &'static str {
    match variant {
        "direct" => "direct",
        "haproxy" => "haproxy pair",
        "meshlink" => "meshlink pair",
        _ => "meshlink link",
    }
}

/// Median of each figure of one variant.
type Figures = BTreeMap<String, f64>;
/// Figures per variant.
type Medians = BTreeMap<String, Figures>;

/// Reads JSON lines and prints the table and one JSON line of medians.
pub(crate) fn run(input: impl BufRead) -> anyhow::Result<()> {
    let mut values: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    let mut rounds: BTreeMap<String, std::collections::BTreeSet<i64>> = BTreeMap::new();
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let obj: Map<String, Value> = serde_json::from_str(&line)
            .map_err(|e| anyhow::anyhow!("input line {}: {e}", i + 1))?;
        let variant = obj
            .get("variant")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        if let Some(r) = obj.get("round").and_then(Value::as_i64) {
            rounds.entry(variant.clone()).or_default().insert(r);
        }
        for (k, v) in &obj {
            if let (false, Some(x)) = (k == "round", v.as_f64()) {
                values
                    .entry(variant.clone())
                    .or_default()
                    .entry(k.clone())
                    .or_default()
                    .push(x);
            }
        }
    }
    let med: Medians = values
        .into_iter()
        .map(|(v, figs)| (v, figs.into_iter().map(|(k, xs)| (k, median(xs))).collect()))
        .collect();
    let n: Vec<String> = VARIANTS
        .iter()
        .map(|v| format!("{v} {}", rounds.get(*v).map_or(0, |r| r.len())))
        .collect();
    println!(
        "Medians over rounds (rounds per variant: {}).\n",
        n.join(", ")
    );
    print_table(&med);
    println!("\n{}", serde_json::to_string(&med)?);
    Ok(())
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// How one row reads its value from a variant's medians and shows it.
struct Row {
    label: &'static str,
    value: fn(&Figures, &Figures) -> Option<f64>,
    show: fn(&Figures, f64) -> String,
}

fn get(m: &Figures, k: &str) -> Option<f64> {
    m.get(k).copied()
}

fn pair(m: &Figures, a: &str, b: &str) -> Option<f64> {
    Some(get(m, a)? + get(m, b)?)
}

/// CPU of both proxies, in % of one core, scaled to exactly 1,000 req/s.
fn cpu(m: &Figures) -> Option<f64> {
    let scale = 1000.0 / get(m, "achieved_rate")?;
    Some(100.0 * pair(m, "cpu_a_ms", "cpu_b_ms")? / get(m, "cpu_wall_ms")? * scale)
}

fn us(_: &Figures, x: f64) -> String {
    if x >= 10_000.0 {
        format!("{:.1} ms", x / 1e3)
    } else {
        format!("{x:.0} µs")
    }
}

fn mib_pair(m: &Figures, a: &str, b: &str) -> String {
    let f = |k| get(m, k).map_or("?".to_string(), |x| format!("{:.1}", x / 1024.0));
    format!("{} + {} MiB", f(a), f(b))
}

fn rows() -> Vec<Row> {
    vec![
        Row {
            label: "latency p50 at 1,000 req/s",
            value: |m, _| get(m, "lat_p50_us"),
            show: us,
        },
        Row {
            label: "added latency p50 (− direct)",
            value: |m, d| Some(get(m, "lat_p50_us")? - get(d, "lat_p50_us")?),
            show: us,
        },
        Row {
            label: "latency p99 at 1,000 req/s",
            value: |m, _| get(m, "lat_p99_us"),
            show: us,
        },
        Row {
            label: "added latency p99 (− direct)",
            value: |m, d| Some(get(m, "lat_p99_us")? - get(d, "lat_p99_us")?),
            show: us,
        },
        Row {
            label: "latency p99.9 at 1,000 req/s",
            value: |m, _| get(m, "lat_p999_us"),
            show: us,
        },
        Row {
            label: "single-flow throughput (iperf3)",
            value: |m, _| get(m, "iperf_bps"),
            show: |_, x| format!("{:.2} Gbit/s", x / 1e9),
        },
        Row {
            label: "proxy CPU per MiB, single flow (A + B)",
            value: |m, _| get(m, "cpu_per_mib_us"),
            show: us,
        },
        Row {
            label: "new connections per second",
            value: |m, _| get(m, "conn_per_s"),
            show: |_, x| format!("{x:.0} /s"),
        },
        Row {
            label: "proxy CPU per new connection (A + B)",
            value: |m, _| get(m, "cpu_per_conn_us"),
            show: |_, x| format!("{:.2} ms", x / 1e3),
        },
        Row {
            label: "failed requests (latency run / connection run)",
            value: |m, _| pair(m, "lat_errors", "conn_errors"),
            show: |m, _| {
                format!(
                    "{} / {}",
                    get(m, "lat_errors").unwrap_or(0.0),
                    get(m, "conn_errors").unwrap_or(0.0)
                )
            },
        },
        Row {
            label: "proxy RSS idle (A + B)",
            value: |m, _| pair(m, "rss_idle_a_kib", "rss_idle_b_kib"),
            show: |m, _| mib_pair(m, "rss_idle_a_kib", "rss_idle_b_kib"),
        },
        Row {
            label: "proxy RSS at 1,000 req/s (A + B, max)",
            value: |m, _| pair(m, "rss_load_a_kib", "rss_load_b_kib"),
            show: |m, _| mib_pair(m, "rss_load_a_kib", "rss_load_b_kib"),
        },
        Row {
            label: "proxy CPU per 1,000 req/s (A + B)",
            value: |m, _| cpu(m),
            show: |_, x| format!("{x:.1} % of a core"),
        },
        Row {
            label: "proxy RSS with 1,000 open connections (A + B)",
            value: |m, _| pair(m, "rss_hold_a_kib", "rss_hold_b_kib"),
            show: |m, _| mib_pair(m, "rss_hold_a_kib", "rss_hold_b_kib"),
        },
    ]
}

fn print_table(med: &Medians) {
    let empty = BTreeMap::new();
    let direct = med.get("direct").unwrap_or(&empty);
    let shown: Vec<&str> = VARIANTS
        .iter()
        .copied()
        .filter(|v| med.contains_key(*v))
        .collect();
    let at = |v: &str| shown.iter().position(|x| *x == v);
    // (numerator, denominator) column pairs for the ratio columns.
    let mut ratios: Vec<(usize, usize)> = Vec::new();
    if let Some(d) = at("direct") {
        ratios.extend((0..shown.len()).filter(|i| *i != d).map(|i| (i, d)));
    }
    for (a, b) in [("meshlink", "haproxy"), ("link", "meshlink")] {
        if let (Some(x), Some(y)) = (at(a), at(b)) {
            ratios.push((x, y));
        }
    }
    let mut head: Vec<String> = shown.iter().map(|v| title(v).to_owned()).collect();
    head.extend(
        ratios
            .iter()
            .map(|(a, b)| format!("{} / {}", shown[*a], shown[*b])),
    );
    println!("| figure | {} |", head.join(" | "));
    println!("|---|{}", "---|".repeat(head.len()));
    for row in rows() {
        let cells: Vec<(Option<f64>, String)> = shown
            .iter()
            .map(|v| {
                let m = med.get(*v).unwrap_or(&empty);
                let x = (row.value)(m, direct);
                (x, x.map_or("—".to_string(), |x| (row.show)(m, x)))
            })
            .collect();
        let ratio = |a: usize, b: usize| match (cells[a].0, cells[b].0) {
            (Some(x), Some(y)) if y.abs() > 1e-9 => format!("{:.2}", x / y),
            _ => "—".to_string(),
        };
        let mut line: Vec<String> = cells.iter().map(|c| c.1.clone()).collect();
        line.extend(ratios.iter().map(|(a, b)| ratio(*a, *b)));
        println!("| {} | {} |", row.label, line.join(" | "));
    }
}
