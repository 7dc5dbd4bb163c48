//! The ladder as one self-contained HTML file: the diagram as SVG (drawn
//! here, so it shows without script), a panel with the `-V` explanation of
//! the packet clicked, filters by connection and by kind, zoom. No network
//! fetch: styles, script and data are all inline. Opening the file with
//! `#selftest` runs the page's own check (a click, a filter) and writes
//! the result into the page, for a headless browser to read; `#pick=N`
//! (or `#pick=nak`, the first NAK) opens with that row's packet shown.

use super::{Kind, Row};
use std::fmt::Write;

const LEFT: usize = 190;
/// The least gap between two columns (their titles side by side).
const MIN_GAP: usize = 210;
/// About the width of a character of the labels' monospace font.
const CHAR_WIDTH: usize = 7;
const TOP: usize = 70;
const ROW_HEIGHT: usize = 30;
const LINE_HEIGHT: usize = 15;

/// The page: `titles` (one a column), `rows`, and for each row the `-V`
/// explanation of its first packet.
pub fn render(titles: &[String], rows: &[Row], explain: &[String], source: &str) -> String {
    let xs = columns(titles.len(), rows);
    let width = xs.last().copied().unwrap_or(LEFT) + 200;
    let mut svg = String::new();
    let mut y = TOP;
    for (i, t) in titles.iter().enumerate() {
        let x = xs[i];
        let (ip, qp) = t.split_once(" QP ").unwrap_or((t, ""));
        let _ = write!(
            svg,
            r#"<text class="title" x="{x}" y="20" text-anchor="middle">{}</text><text class="title" x="{x}" y="38" text-anchor="middle">QP {}</text>"#,
            esc(ip),
            esc(qp)
        );
    }
    let mut body = String::new();
    for (i, row) in rows.iter().enumerate() {
        y += ROW_HEIGHT;
        row_svg(&mut body, i, row, y, &xs);
        y += LINE_HEIGHT * row.notes.len();
    }
    let height = y + 40;
    for &x in &xs {
        let _ = write!(svg, r#"<line class="life" x1="{x}" y1="48" x2="{x}" y2="{}"/>"#, height - 10);
    }
    svg.push_str(&body);
    let connections = connections(titles, rows);
    let data = json_strings(explain);
    PAGE.replace("{{SOURCE}}", &esc(source))
        .replace("{{WIDTH}}", &width.to_string())
        .replace("{{HEIGHT}}", &height.to_string())
        .replace("{{SVG}}", &svg)
        .replace("{{CONNECTIONS}}", &connections)
        .replace("{{DATA}}", &data)
}

/// Each column's x: neighbours far enough apart for the labels of the
/// arrows between them.
fn columns(n: usize, rows: &[Row]) -> Vec<usize> {
    let mut gaps = vec![MIN_GAP; n.saturating_sub(1)];
    for row in rows {
        let (lo, hi) = (row.from.min(row.to), row.from.max(row.to));
        if hi == lo + 1 {
            gaps[lo] = gaps[lo].max(row.label().len() * CHAR_WIDTH + 40);
        }
    }
    let mut xs = vec![LEFT];
    for g in gaps {
        xs.push(xs[xs.len() - 1] + g);
    }
    xs
}

/// One row: its time, its arrow with the label on it, its notes, as a
/// group the script finds by its index, kind and connection.
fn row_svg(out: &mut String, i: usize, row: &Row, y: usize, xs: &[usize]) {
    let (x1, x2) = (xs[row.from], xs[row.to]);
    let kind = match row.kind {
        Kind::Request | Kind::Response | Kind::Elided => "data",
        Kind::Resend => "data resend",
        Kind::BadIcrc => "data bad",
        Kind::Ack => "ack",
        Kind::Nak => "ack nak",
        Kind::Cm => "cm",
    };
    let conn = format!("{}-{}", row.from.min(row.to), row.from.max(row.to));
    let label = row.label();
    let _ = write!(
        out,
        r#"<g class="row {kind}" data-i="{i}" data-conn="{conn}"><title>frame {}: {}</title>"#,
        row.first.number,
        esc(&label)
    );
    let _ = write!(out, r#"<text class="time" x="8" y="{y}">{:.6}</text>"#, row.first.time.as_secs_f64());
    let (a, b) = if x1 == x2 { (x1, x1 + 40) } else { (x1, x2) };
    let _ = write!(out, r#"<line class="arrow" x1="{a}" y1="{y}" x2="{b}" y2="{y}" marker-end="url(#head)"/>"#);
    let _ = write!(out, r#"<line class="hit" x1="{a}" y1="{y}" x2="{b}" y2="{y}"/>"#);
    let mid = (a + b) / 2;
    let _ = write!(out, r#"<text class="label" x="{mid}" y="{}" text-anchor="middle">{}</text>"#, y - 6, esc(&label));
    for (k, note) in row.notes.iter().enumerate() {
        let _ = write!(
            out,
            r#"<text class="note" x="{}" y="{}">{}</text>"#,
            x1.min(x2) + 8,
            y + LINE_HEIGHT * (k + 1),
            esc(&format!("^ {note}"))
        );
    }
    out.push_str("</g>");
}

/// The `<option>`s of the connection filter: each pair of columns that
/// rows join.
fn connections(titles: &[String], rows: &[Row]) -> String {
    let mut pairs: Vec<(usize, usize)> = rows.iter().map(|r| (r.from.min(r.to), r.from.max(r.to))).collect();
    pairs.sort_unstable();
    pairs.dedup();
    pairs
        .iter()
        .map(|&(a, b)| format!(r#"<option value="{a}-{b}">{} &#8596; {}</option>"#, esc(&titles[a]), esc(&titles[b])))
        .collect()
}

/// `s` for HTML text and attributes.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

/// A JSON array of strings, safe inside `<script>` (no `</`).
fn json_strings(items: &[String]) -> String {
    let mut out = String::from("[");
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '<' => out.push_str("\\u003c"),
                '>' => out.push_str("\\u003e"),
                '&' => out.push_str("\\u0026"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push(']');
    out
}

const PAGE: &str = r##"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>uroce ladder: {{SOURCE}}</title>
<style>
body { margin: 0; font: 13px/1.35 system-ui, sans-serif; color: #1d2330; background: #fbfbfd; }
header { position: sticky; top: 0; z-index: 2; display: flex; gap: 14px; align-items: center; padding: 8px 12px; background: #eef0f6; border-bottom: 1px solid #cdd2e0; }
header b { font-size: 14px; }
header select { max-width: 420px; }
#wrap { display: flex; height: calc(100vh - 44px); }
#scroll { flex: 1; overflow: auto; }
#panel { width: 440px; overflow: auto; border-left: 1px solid #cdd2e0; background: #fff; }
#panel pre { margin: 0; padding: 10px; font: 12px/1.4 ui-monospace, monospace; white-space: pre-wrap; }
svg text { font: 12px ui-monospace, monospace; }
.title { font-weight: bold; fill: #1d2330; }
.life { stroke: #9aa3b8; stroke-width: 1.5; }
.arrow { stroke: #2b4c9a; stroke-width: 1.6; }
.hit { stroke: transparent; stroke-width: 14; cursor: pointer; }
.label { fill: #1d2330; cursor: pointer; }
.time { fill: #6b7489; }
.note { fill: #9a5b00; font-style: italic; }
.ack .arrow { stroke: #1f8a3b; } .ack .label { fill: #1f6d31; }
.nak .arrow, .bad .arrow { stroke: #c62828; } .nak .label, .bad .label { fill: #b71c1c; }
.resend .arrow { stroke: #d08700; stroke-dasharray: 6 3; }
.cm .arrow { stroke: #8e24aa; } .cm .label { fill: #7b1fa2; }
.row.picked .arrow { stroke-width: 3.5; }
.row.hidden { display: none; }
#selftest, #errors { font: 12px monospace; padding: 0 12px; }
</style></head>
<body>
<header><b>{{SOURCE}}</b>
<label>connection <select id="conn"><option value="all">all</option>{{CONNECTIONS}}</select></label>
<label><input type="checkbox" class="kind" value="data" checked> data</label>
<label><input type="checkbox" class="kind" value="ack" checked> ACK/NAK</label>
<label><input type="checkbox" class="kind" value="cm" checked> CM</label>
<button id="zoomout" title="zoom out">&#8722;</button><button id="zoomin" title="zoom in">+</button>
<span id="selftest"></span><span id="errors"></span></header>
<div id="wrap"><div id="scroll">
<svg id="ladder" xmlns="http://www.w3.org/2000/svg" width="{{WIDTH}}" height="{{HEIGHT}}" viewBox="0 0 {{WIDTH}} {{HEIGHT}}">
<defs><marker id="head" viewBox="0 0 10 10" refX="10" refY="5" markerUnits="userSpaceOnUse" markerWidth="11" markerHeight="11" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker></defs>
{{SVG}}
</svg></div>
<aside id="panel"><pre id="explain">Click an arrow to see its packet, field by field.</pre></aside></div>
<script type="application/json" id="packets">{{DATA}}</script>
<script>
"use strict";
window.onerror = function (msg) { document.getElementById("errors").textContent += " script error: " + msg; };
const packets = JSON.parse(document.getElementById("packets").textContent);
const rows = Array.from(document.querySelectorAll("g.row"));
const svg = document.getElementById("ladder");
const size = [svg.width.baseVal.value, svg.height.baseVal.value];
let zoom = 1;
function pick(g) {
  rows.forEach(r => r.classList.remove("picked"));
  g.classList.add("picked");
  document.getElementById("explain").textContent = packets[Number(g.dataset.i)];
}
rows.forEach(g => g.addEventListener("click", () => pick(g)));
function filter() {
  const conn = document.getElementById("conn").value;
  const kinds = Array.from(document.querySelectorAll("input.kind")).filter(c => c.checked).map(c => c.value);
  rows.forEach(g => {
    const shown = (conn === "all" || g.dataset.conn === conn) && kinds.some(k => g.classList.contains(k));
    g.classList.toggle("hidden", !shown);
  });
}
document.getElementById("conn").addEventListener("change", filter);
document.querySelectorAll("input.kind").forEach(c => c.addEventListener("change", filter));
function setZoom(z) {
  zoom = Math.min(4, Math.max(0.25, z));
  svg.setAttribute("width", size[0] * zoom);
  svg.setAttribute("height", size[1] * zoom);
}
document.getElementById("zoomin").addEventListener("click", () => setZoom(zoom * 1.25));
document.getElementById("zoomout").addEventListener("click", () => setZoom(zoom / 1.25));
// #pick=N shows row N's packet; #pick=nak the first NAK's.
const wanted = location.hash.match(/^#pick=(\w+)$/);
if (wanted) {
  const g = wanted[1] === "nak" ? document.querySelector("g.row.nak") : rows[Number(wanted[1])];
  if (g) {
    pick(g);
    const scroller = document.getElementById("scroll");
    scroller.scrollTop = g.getBBox().y * zoom - scroller.clientHeight / 2;
  }
}
if (location.hash === "#selftest") {
  const fail = [];
  if (rows.length === 0 || rows.length !== packets.length) fail.push("rows " + rows.length + " packets " + packets.length);
  rows[0].dispatchEvent(new MouseEvent("click", { bubbles: true }));
  const shown = document.getElementById("explain").textContent;
  if (!shown.startsWith("Frame ")) fail.push("the click showed no explanation");
  const box = document.querySelector("#explain").getBoundingClientRect();
  if (box.height <= 0) fail.push("the panel is not visible");
  document.querySelector("input.kind[value=data]").click();
  const hidden = rows.filter(g => g.classList.contains("hidden")).length;
  const data = rows.filter(g => g.classList.contains("data")).length;
  if (hidden !== data) fail.push("the data filter hid " + hidden + " of " + data);
  document.querySelector("input.kind[value=data]").click();
  setZoom(1.25);
  if (svg.width.baseVal.value <= size[0]) fail.push("zoom did nothing");
  setZoom(1);
  document.getElementById("selftest").textContent =
    fail.length ? "selftest: FAIL " + fail.join("; ") : "selftest: ok (" + rows.length + " rows, " + document.querySelectorAll("text.note").length + " notes)";
}
</script>
</body></html>
"##;
