//! The ladder in the terminal: a time column, one vertical line per
//! endpoint, an arrow per row with its label on it (or under it when it
//! does not fit between the lines), and each note on a line of its own
//! under its arrow. ASCII only; ANSI colour when asked.

use super::rules::duration;
use super::{Kind, Row};
use std::fmt::Write;

/// How to draw: the width to fit and whether to colour.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub width: usize,
    pub colour: bool,
}

impl Style {
    /// For stdout: `width` if given, else the terminal's (`COLUMNS`, then
    /// the terminal itself), else 120; colour only on a terminal, and not
    /// with `NO_COLOR` set.
    pub fn for_stdout(width: Option<usize>) -> Style {
        use std::io::IsTerminal;
        let tty = std::io::stdout().is_terminal();
        let from_env = || std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok());
        let from_tty = || terminal_size::terminal_size().filter(|_| tty).map(|(w, _)| usize::from(w.0));
        let width = width.or_else(from_env).or_else(from_tty).unwrap_or(120);
        Style { width, colour: tty && std::env::var_os("NO_COLOR").is_none() }
    }
}

/// The time column: seconds since the first frame, and the gap since the
/// previous row.
const TIME_WIDTH: usize = 22;
/// The least room a column gets.
const MIN_SPACING: usize = 14;

/// Where the columns' lines are, and the width to fit.
struct Layout {
    centers: Vec<usize>,
    width: usize,
}

/// The whole diagram.
pub fn render(titles: &[String], rows: &[Row], style: Style) -> String {
    let layout =
        Layout { centers: place_columns(titles, rows, style.width.saturating_sub(TIME_WIDTH)), width: style.width };
    let mut out = String::new();
    header(&mut out, titles, &layout);
    let mut prev = None;
    for row in rows {
        if row.kind == Kind::Elided {
            let _ = writeln!(out, "{:TIME_WIDTH$}{}", "", layout.verticals().trim_end());
            for note in &row.notes {
                layout.under_arrow(&mut out, note, "", row, None);
            }
            continue;
        }
        let gap = prev.map(|t| row.first.time.saturating_sub(t));
        prev = Some(row.first.time);
        let time = format!(
            "{:>10.6} {:>10}",
            row.first.time.as_secs_f64(),
            gap.map_or(String::new(), |g| format!("+{}", duration(g)))
        );
        let (line, label_under) = layout.arrow(row);
        let paint = colour_of(row.kind).filter(|_| style.colour);
        let _ = write!(out, "{time:<TIME_WIDTH$}");
        painted(&mut out, &line, paint);
        // A label too long for its arrow goes under it, as the notes do.
        if let Some(label) = label_under {
            layout.under_arrow(&mut out, &label, "", row, paint);
        }
        for note in &row.notes {
            layout.under_arrow(&mut out, note, "^ ", row, style.colour.then_some("33"));
        }
    }
    out
}

/// `text` and a newline, in ANSI colour `colour` if any.
fn painted(out: &mut String, text: &str, colour: Option<&str>) {
    let _ = match colour {
        Some(c) => writeln!(out, "\x1b[{c}m{text}\x1b[0m"),
        None => writeln!(out, "{text}"),
    };
}

/// Where each column's line goes: neighbours far enough apart for their
/// titles and for the labels of the arrows between them (columns of one
/// connection are neighbours), within `area` if it can be done; labels
/// that then do not fit go after the line.
fn place_columns(titles: &[String], rows: &[Row], area: usize) -> Vec<usize> {
    let half_title = |t: &String| t.split(" QP ").map(str::len).max().unwrap_or(0).div_ceil(2);
    let mut gaps: Vec<usize> =
        titles.windows(2).map(|w| (half_title(&w[0]) + half_title(&w[1]) + 2).max(MIN_SPACING)).collect();
    let floor = gaps.clone();
    for row in rows {
        let (lo, hi) = (row.from.min(row.to), row.from.max(row.to));
        if hi == lo + 1 {
            gaps[lo] = gaps[lo].max(row.label().len() + 6);
        }
    }
    let first = titles.first().map_or(1, half_title).max(1);
    // The last title reaches past its line by half its width.
    let area = area.saturating_sub(titles.last().map_or(0, half_title));
    let total: usize = first + gaps.iter().sum::<usize>();
    if total > area {
        // Shrink what labels asked for, never below what the titles need.
        let want: usize = gaps.iter().zip(&floor).map(|(g, f)| g - f).sum();
        let spare = area.saturating_sub(first + floor.iter().sum::<usize>());
        for (g, f) in gaps.iter_mut().zip(&floor) {
            *g = f + (*g - f) * spare / want.max(1);
        }
    }
    let mut centers = vec![first];
    for g in gaps {
        centers.push(centers[centers.len() - 1] + g);
    }
    centers
}

/// Each title centred on its line, split into address and QP.
fn header(out: &mut String, titles: &[String], layout: &Layout) {
    for part in 0..2 {
        let mut line = vec![b' '; layout.area() + 40];
        let mut free = 0;
        for (t, &c) in titles.iter().zip(&layout.centers) {
            let text = match t.split_once(" QP ") {
                Some((ip, _)) if part == 0 => ip.to_string(),
                Some((_, qp)) => format!("QP {qp}"),
                None if part == 0 => t.clone(),
                None => String::new(),
            };
            let start = c.saturating_sub(text.len() / 2).max(free);
            if start + text.len() > line.len() {
                line.resize(start + text.len(), b' ');
            }
            line[start..start + text.len()].copy_from_slice(text.as_bytes());
            free = start + text.len() + 1;
        }
        let _ = writeln!(out, "{:TIME_WIDTH$}{}", "", String::from_utf8_lossy(&line).trim_end());
    }
    let _ = writeln!(out, "{:TIME_WIDTH$}{}", "", layout.verticals());
}

impl Layout {
    /// The columns' span: up to the last line.
    fn area(&self) -> usize {
        self.centers.last().map_or(1, |&c| c + 1)
    }

    fn verticals(&self) -> String {
        let mut line = vec![b' '; self.area()];
        for &c in &self.centers {
            line[c] = b'|';
        }
        String::from_utf8_lossy(&line).into_owned()
    }

    /// The row's line of verticals with its arrow, the label on the arrow
    /// if it fits there, else returned to go under it.
    fn arrow(&self, row: &Row) -> (String, Option<String>) {
        let mut line = self.verticals().into_bytes();
        let label = row.label();
        let (a, b) = (self.centers[row.from], self.centers[row.to]);
        if a == b {
            // To itself (a QP connected to itself): a loop mark.
            return (String::from_utf8_lossy(&line).into_owned(), Some(format!("<-' {label}")));
        }
        let (lo, hi) = (a.min(b), a.max(b));
        for cell in &mut line[lo + 1..hi] {
            *cell = b'-';
        }
        if b > a {
            line[hi - 1] = b'>';
        } else {
            line[lo + 1] = b'<';
        }
        let room = hi - lo - 1;
        if label.len() + 4 <= room {
            let start = lo + 1 + (room - label.len()) / 2;
            line[start - 1] = b' ';
            line[start..start + label.len()].copy_from_slice(label.as_bytes());
            line[start + label.len()] = b' ';
            return (String::from_utf8_lossy(&line).into_owned(), None);
        }
        (String::from_utf8_lossy(&line).into_owned(), Some(label))
    }

    /// A text under its arrow (a note, or a label too long for it), from
    /// just right of the arrow's left end, wrapped to the width; the
    /// verticals it does not cover stay.
    fn under_arrow(&self, out: &mut String, text: &str, mark: &str, row: &Row, colour: Option<&str>) {
        let start = self.centers[row.from].min(self.centers[row.to]) + 2;
        let room = self.width.saturating_sub(TIME_WIDTH + start + mark.len()).max(8);
        for (i, chunk) in wrap(text, room).into_iter().enumerate() {
            let text = format!("{}{chunk}", if i == 0 { mark.to_string() } else { " ".repeat(mark.len()) });
            let mut line = self.verticals().into_bytes();
            let end = start + text.len();
            if end > line.len() {
                line.resize(end, b' ');
            }
            // The text and a space after it, clear of the next vertical.
            line[start..end].copy_from_slice(text.as_bytes());
            if let Some(c) = line.get_mut(end) {
                *c = b' ';
            }
            let line = String::from_utf8_lossy(&line).trim_end().to_string();
            let (before, after) = line.split_at(start.min(line.len()));
            let _ = write!(out, "{:TIME_WIDTH$}{before}", "");
            painted(out, after, colour);
        }
    }
}

/// `text` in lines of at most `width` characters, broken at spaces (a word
/// longer than a line is cut).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        let mut word = word;
        while line.len() + word.len() > width {
            let cut = width - line.len();
            let at = (0..=cut).rev().find(|&i| word.is_char_boundary(i)).unwrap_or(0);
            line.push_str(&word[..at]);
            lines.push(std::mem::take(&mut line));
            word = &word[at..];
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The ANSI colour of a kind of row.
fn colour_of(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::Request => None,
        Kind::Resend => Some("33"),
        Kind::Ack => Some("32"),
        Kind::Nak | Kind::BadIcrc => Some("1;31"),
        Kind::Response => Some("36"),
        Kind::Cm => Some("35"),
        Kind::Elided => None,
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn notes_wrap_at_spaces() {
        assert_eq!(wrap("one two three", 7), ["one two", "three"]);
        assert_eq!(wrap("a-long-word b", 4), ["a-lo", "ng-w", "ord", "b"]);
    }
}
