//! The results table: one row per figure with uroce's value, the baseline's,
//! their ratio and whether the target is met, from the TSV file that
//! `bench/run` appends to (one line per figure; several runs of a figure are
//! comma-separated samples, reported by their median).
//!
//! Columns of a line (tab-separated; `#` starts a comment):
//! `section  figure  uroce-samples  baseline-name  baseline-samples  unit  better  target  note`
//! where `better` is `higher` or `lower`, `target` a bound on the ratio
//! uroce / baseline (`>=1`, `<=0.5`, ...) or `-`, and an empty or `-`
//! sample list means not measured (the note says why).

use std::fmt::Write as _;

/// Whether bigger numbers are better (throughput) or smaller (latency).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
}

/// A bound on the ratio uroce / baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    AtLeast(f64),
    AtMost(f64),
}

impl Target {
    fn parse(s: &str) -> Result<Option<Target>, String> {
        let s = s.trim();
        let num = |v: &str| v.trim().parse::<f64>().map_err(|_| format!("bad target {s:?}"));
        if s == "-" || s.is_empty() {
            Ok(None)
        } else if let Some(v) = s.strip_prefix(">=") {
            Ok(Some(Target::AtLeast(num(v)?)))
        } else if let Some(v) = s.strip_prefix("<=") {
            Ok(Some(Target::AtMost(num(v)?)))
        } else {
            Err(format!("bad target {s:?}: >=X, <=X or -"))
        }
    }

    fn met(self, ratio: f64) -> bool {
        match self {
            Target::AtLeast(t) => ratio >= t,
            Target::AtMost(t) => ratio <= t,
        }
    }

    fn describe(self) -> String {
        match self {
            Target::AtLeast(t) => format!(">= {t}x"),
            Target::AtMost(t) => format!("<= {t}x"),
        }
    }
}

/// One figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub section: String,
    pub figure: String,
    pub uroce: Vec<f64>,
    pub baseline_name: String,
    pub baseline: Vec<f64>,
    pub unit: String,
    pub better: Better,
    pub target: Option<Target>,
    pub note: String,
}

fn samples(s: &str) -> Result<Vec<f64>, String> {
    let s = s.trim();
    if s.is_empty() || s == "-" {
        return Ok(vec![]);
    }
    s.split(',').map(|v| v.trim().parse::<f64>().map_err(|_| format!("bad sample {v:?} in {s:?}"))).collect()
}

/// Parses the TSV text; errors name the line.
pub fn parse(text: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let at = |e: String| format!("line {}: {e}", i + 1);
        if f.len() < 8 {
            return Err(at(format!("{} fields, expected 9", f.len())));
        }
        let better = match f[6].trim() {
            "higher" => Better::Higher,
            "lower" => Better::Lower,
            b => return Err(at(format!("better is {b:?}, expected higher or lower"))),
        };
        rows.push(Row {
            section: f[0].trim().to_string(),
            figure: f[1].trim().to_string(),
            uroce: samples(f[2]).map_err(at)?,
            baseline_name: f[3].trim().to_string(),
            baseline: samples(f[4]).map_err(at)?,
            unit: f[5].trim().to_string(),
            better,
            target: Target::parse(f[7]).map_err(at)?,
            note: f.get(8).map(|n| n.trim().to_string()).unwrap_or_default(),
        });
    }
    Ok(rows)
}

/// The median (the mean of the middle two for an even count).
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 })
}

/// Three significant digits, no exponent.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

/// The figure of one core's memcpy rate (GB/s), which every throughput
/// figure is also given as a fraction of: the row whose figure starts
/// with this.
pub const MEMCPY_FIGURE: &str = "memcpy,";

/// One core's memcpy rate in GB/s, if the table has it.
pub fn memcpy_limit(rows: &[Row]) -> Option<f64> {
    rows.iter().find(|r| r.figure.starts_with(MEMCPY_FIGURE) && r.unit == "GB/s").and_then(|r| median(&r.uroce))
}

/// The cells of a row: figure, uroce, baseline, ratio, target met? A
/// throughput in Gbit/s also says what fraction it is of one core's
/// memcpy rate (`limit`, GB/s).
pub fn cells(r: &Row, limit: Option<f64>) -> [String; 5] {
    let u = median(&r.uroce);
    let b = median(&r.baseline);
    let with_unit = |v: f64| if r.unit.is_empty() { fmt_num(v) } else { format!("{} {}", fmt_num(v), r.unit) };
    let of_memcpy = |v: f64| match limit.filter(|l| *l > 0.0 && r.unit == "Gbit/s") {
        Some(l) => format!("{} ({}% of memcpy)", with_unit(v), fmt_num(100.0 * v / 8.0 / l)),
        None => with_unit(v),
    };
    let uroce = u.map(of_memcpy).unwrap_or_else(|| "not measured".into());
    let baseline = match b {
        Some(b) => format!("{} {}", r.baseline_name, with_unit(b)).trim().to_string(),
        None if r.baseline_name.is_empty() => "-".into(),
        None => format!("{}: not measured", r.baseline_name),
    };
    let ratio = match (u, b) {
        (Some(u), Some(b)) if b != 0.0 => Some(u / b),
        _ => None,
    };
    let met = match (r.target, ratio) {
        (None, _) => "-".to_string(),
        (Some(t), Some(x)) if t.met(x) => format!("yes ({})", t.describe()),
        (Some(t), Some(_)) => format!("NO ({})", t.describe()),
        (Some(t), None) => format!("n/a ({}, not measured)", t.describe()),
    };
    let ratio = ratio.map(|x| format!("{}x", fmt_num(x))).unwrap_or_else(|| "-".into());
    [r.figure.clone(), uroce, baseline, ratio, met]
}

const HEAD: [&str; 5] = ["figure", "uroce", "baseline", "ratio", "target met?"];

/// The table as aligned text, sections as headings, notes after their row.
pub fn text(rows: &[Row]) -> String {
    let limit = memcpy_limit(rows);
    let all: Vec<[String; 5]> = rows.iter().map(|r| cells(r, limit)).collect();
    let mut w = HEAD.map(str::len);
    for c in &all {
        for (k, s) in c.iter().enumerate() {
            w[k] = w[k].max(s.chars().count());
        }
    }
    let line = |c: &[String; 5]| -> String {
        let mut s = String::new();
        for (k, cell) in c.iter().enumerate() {
            let pad = w[k] - cell.chars().count();
            s.push_str(cell);
            if k < 4 {
                s.push_str(&" ".repeat(pad + 2));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&HEAD.map(String::from));
    out.push_str(&line(&w.map(|n| "-".repeat(n))));
    let mut section = None;
    for (r, c) in rows.iter().zip(&all) {
        if section != Some(&r.section) {
            let _ = writeln!(out, "== {}", r.section);
            section = Some(&r.section);
        }
        out.push_str(&line(c));
        if !r.note.is_empty() {
            let _ = writeln!(out, "     note: {}", r.note);
        }
    }
    out
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The table as markdown: one table, a bold row per section, notes in the figure cell.
pub fn markdown(rows: &[Row]) -> String {
    let limit = memcpy_limit(rows);
    let mut out = format!("| {} |\n|{}\n", HEAD.join(" | "), " --- |".repeat(5));
    let mut section = None;
    for r in rows {
        if section != Some(&r.section) {
            let _ = writeln!(out, "| **{}** | | | | |", md_escape(&r.section));
            section = Some(&r.section);
        }
        let mut c = cells(r, limit).map(|s| md_escape(&s));
        if !r.note.is_empty() {
            c[0] = format!("{} <br><sub>{}</sub>", c[0], md_escape(&r.note));
        }
        let _ = writeln!(out, "| {} |", c.join(" | "));
    }
    out
}

/// Every sample behind the medians, one line per figure.
pub fn samples_text(rows: &[Row]) -> String {
    let list = |v: &[f64]| v.iter().map(|x| fmt_num(*x)).collect::<Vec<_>>().join(", ");
    let mut out = String::new();
    for r in rows {
        if r.uroce.is_empty() && r.baseline.is_empty() {
            continue;
        }
        let _ = write!(out, "{} / {}: uroce [{}]", r.section, r.figure, list(&r.uroce));
        if !r.baseline.is_empty() {
            let _ = write!(out, "; {} [{}]", r.baseline_name, list(&r.baseline));
        }
        let _ = writeln!(out, " {}", r.unit);
    }
    out
}

/// How many targets are met, missed and not measured.
pub fn verdicts(rows: &[Row]) -> (usize, usize, usize) {
    let mut v = (0, 0, 0);
    for r in rows.iter().filter(|r| r.target.is_some()) {
        let c = cells(r, None);
        if c[4].starts_with("yes") {
            v.0 += 1;
        } else if c[4].starts_with("NO") {
            v.1 += 1;
        } else {
            v.2 += 1;
        }
    }
    v
}
