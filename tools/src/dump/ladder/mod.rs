//! `uroce dump --ladder`: the sequence diagram of a capture. One column per
//! endpoint (address and QPN), time flowing down, an arrow per packet, and
//! annotations that name the protocol rule at work: a go-back-N resend
//! after a sequence-error NAK, an RNR NAK and the wait it imposes, a
//! coalesced ACK, a duplicate answered again, an atomic replayed from the
//! responder's saved result, a bad ICRC.
//!
//! [`Ladder`] collects the packets; `endpoints` names each packet's two
//! ends (a BTH carries only the destination QPN); `rules` annotates them
//! by following each connection as its two ends would; `text` draws it.

mod endpoints;
mod html;
mod rules;
mod text;

use super::{cm, decode, Decoded, Verdict};
use std::net::IpAddr;
use std::time::Duration;
use uroce_stack::frame::FrameError;
use uroce_stack::pcap::LinkType;
use uroce_transport::wire::{AethRepr, Opcode, Position};

pub use text::{render, Style};

/// One RoCEv2 packet, as the ladder shows it.
#[derive(Debug, Clone)]
pub struct Packet {
    /// Its frame number in the capture (as the one-line dump numbers it).
    pub number: u64,
    /// Since the capture's first frame.
    pub time: Duration,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub opcode: Opcode,
    pub dest_qp: u32,
    /// A UD packet's source QPN (DETH).
    pub src_qp: Option<u32>,
    pub psn: u32,
    pub aeth: Option<AethRepr>,
    /// An ATOMIC_ACKNOWLEDGE's original value.
    pub atomic_orig: Option<u64>,
    /// What the arrow says: opcode, PSN and the fields that matter.
    pub label: String,
    pub icrc_ok: bool,
    /// A CM message to QP1 (its name is in the label).
    pub is_cm: bool,
    /// Its `-V` text, for the HTML page (empty unless asked for).
    pub explain: String,
}

impl Packet {
    fn of(number: u64, time: Duration, d: &Decoded) -> Packet {
        let bth = &d.repr.bth;
        let cm = cm::name(d);
        Packet {
            number,
            time,
            src: d.frame.repr.ip.src(),
            dst: d.frame.repr.ip.dst(),
            sport: d.frame.repr.udp.src_port,
            opcode: bth.opcode,
            dest_qp: bth.dest_qp,
            src_qp: d.repr.deth.map(|h| h.src_qp),
            psn: bth.psn.value(),
            aeth: d.repr.aeth,
            atomic_orig: d.repr.atomic_ack_eth.map(|h| h.orig_data),
            label: label(d, cm.as_deref()),
            icrc_ok: d.icrc_verdict() != Verdict::IcrcBad,
            is_cm: cm.is_some(),
            explain: String::new(),
        }
    }

    /// The opcode without its transport and "RDMA_": `WRITE_FIRST`.
    pub fn short_opcode(&self) -> String {
        short_opcode(self.opcode)
    }

    pub fn position(&self) -> Option<Position> {
        self.opcode.position()
    }
}

fn short_opcode(op: Opcode) -> String {
    let name = op.name().map_or_else(|| format!("opcode 0x{:02x}", u8::from(op)), str::to_string);
    let name = name
        .split_once('_')
        .filter(|(t, _)| ["RC", "UC", "UD", "RD", "XRC"].contains(t))
        .map_or(name.as_str(), |(_, r)| r);
    let name = name.strip_prefix("RDMA_").unwrap_or(name);
    name.replace("ACKNOWLEDGE", "ACK")
}

/// `WRITE_FIRST PSN 784306 RETH va=0x56.. rkey=0x1a59 len=4096 (1024 B)`.
fn label(d: &Decoded, cm: Option<&str>) -> String {
    let bth = &d.repr.bth;
    if let Some(m) = cm {
        return format!("CM {m}");
    }
    let mut s = format!("{} PSN {}", short_opcode(bth.opcode), bth.psn.value());
    for h in d.repr.ext_displays() {
        // The AETH's syndrome says what it is: "ACK credits=31 MSN=1".
        let h = h.to_string();
        let h = h.strip_prefix("AETH ").unwrap_or(&h);
        let h = if bth.opcode == Opcode::RcAck { h.strip_prefix("ACK ").unwrap_or(h) } else { h };
        s.push_str(&format!(" {h}"));
    }
    if bth.opcode.has_payload() {
        s.push_str(&format!(" ({} B)", d.packet.payload().len()));
    }
    s
}

/// A row of the diagram: one packet, or a run of MIDDLE packets folded.
#[derive(Debug, Clone)]
pub struct Row {
    pub first: Packet,
    /// How many packets the row stands for (1 unless folded).
    pub count: usize,
    /// The PSN of the run's last packet.
    pub last_psn: u32,
    pub from: usize,
    pub to: usize,
    pub kind: Kind,
    /// What the protocol did and why, if anything worth saying.
    pub notes: Vec<String>,
}

/// What a row is, for colour and for filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Resend,
    Ack,
    Nak,
    Response,
    Cm,
    BadIcrc,
    /// Rows left out of a long run's excerpt (no arrow, a note).
    Elided,
}

/// The packets of a capture, collected for the diagram.
#[derive(Default)]
pub struct Ladder {
    packets: Vec<Packet>,
    first: Option<Duration>,
    frames: u64,
    /// Keep each packet's `-V` text (for the HTML page).
    explain: bool,
}

impl Ladder {
    /// A ladder that keeps each packet's `-V` text if `explain` (for the
    /// HTML page).
    pub fn new(explain: bool) -> Ladder {
        Ladder { explain, ..Ladder::default() }
    }

    /// Takes one captured frame and says what it was (a frame that is not
    /// a whole RoCEv2 packet is left out of the diagram; the summary line
    /// counts it).
    pub fn frame(&mut self, link: LinkType, time: Duration, data: &[u8]) -> Verdict {
        self.frames += 1;
        let first = *self.first.get_or_insert(time);
        match decode(link, data) {
            Err(FrameError::NotRoce) => Verdict::NotRoce,
            Err(FrameError::Malformed(_)) | Ok(Err(_)) => Verdict::Malformed,
            Ok(Ok(d)) => {
                let rel = time.saturating_sub(first);
                let mut p = Packet::of(self.frames, rel, &d);
                if self.explain {
                    super::verbose::packet(&mut p.explain, self.frames, rel, data.len(), &d);
                }
                self.packets.push(p);
                d.icrc_verdict()
            }
        }
    }

    /// The diagram as text.
    pub fn draw(&self, unfold: bool, style: Style) -> String {
        let (titles, rows) = self.rows(unfold);
        if rows.is_empty() {
            return "no RoCEv2 packet to draw\n".to_string();
        }
        render(&titles, &rows, style)
    }

    /// The diagram of a tool's run: whole if short; else the first and
    /// last rows and every row near a loss, NAK or retry, the rest
    /// summed up where it was left out.
    pub fn draw_excerpt(&self, style: Style) -> String {
        let (titles, rows) = self.rows(false);
        if rows.is_empty() {
            return "no RoCEv2 packet to draw\n".to_string();
        }
        render(&titles, &excerpt(rows), style)
    }

    /// The diagram as a self-contained HTML page (`source` names the
    /// capture in its title).
    pub fn html(&self, unfold: bool, source: &str) -> String {
        let (titles, rows) = self.rows(unfold);
        let explain: Vec<String> = rows.iter().map(|r| r.first.explain.clone()).collect();
        html::render(&titles, &rows, &explain, source)
    }

    /// The endpoints (column titles) and the rows, annotated, with runs of
    /// MIDDLE packets folded unless `unfold`.
    pub fn rows(&self, unfold: bool) -> (Vec<String>, Vec<Row>) {
        let ends = endpoints::Endpoints::of(&self.packets);
        let mut rows = rules::annotate(&self.packets, &ends);
        if !unfold {
            rows = fold(rows);
        }
        (ends.titles(), rows)
    }
}

impl Row {
    /// What its arrow says: the packet's label, or for a folded run the
    /// opcode, the count and the PSNs.
    pub fn label(&self) -> String {
        if self.count > 1 {
            return format!("{} x{} PSN {}..{}", self.first.short_opcode(), self.count, self.first.psn, self.last_psn);
        }
        self.first.label.clone()
    }
}

/// Rows a tool's ladder always shows whole.
const EXCERPT_WHOLE: usize = 60;
/// Rows kept at each end of a long run, and around each event.
const EXCERPT_HEAD: usize = 20;
const EXCERPT_TAIL: usize = 10;
const EXCERPT_AROUND: usize = 3;

impl Row {
    /// A loss, a NAK, a resend, a bad ICRC: what a long run's excerpt keeps
    /// with the rows around it.
    pub fn is_event(&self) -> bool {
        matches!(self.kind, Kind::Nak | Kind::Resend | Kind::BadIcrc)
            || self.notes.iter().any(|n| !n.starts_with("coalesced ACK"))
    }
}

/// `rows`, or for a long run its first and last rows and those near an
/// event; each gap becomes one row that says what was left out.
fn excerpt(rows: Vec<Row>) -> Vec<Row> {
    if rows.len() <= EXCERPT_WHOLE {
        return rows;
    }
    let n = rows.len();
    let mut keep = vec![false; n];
    keep[..EXCERPT_HEAD].iter_mut().for_each(|k| *k = true);
    keep[n - EXCERPT_TAIL..].iter_mut().for_each(|k| *k = true);
    for i in (0..n).filter(|&i| rows[i].is_event()) {
        let (lo, hi) = (i.saturating_sub(EXCERPT_AROUND), (i + EXCERPT_AROUND).min(n - 1));
        keep[lo..=hi].iter_mut().for_each(|k| *k = true);
    }
    // Every CM message: how connections (and UD services) are set up and torn down.
    for (k, row) in keep.iter_mut().zip(&rows) {
        *k |= row.kind == Kind::Cm;
    }
    let mut out = Vec::new();
    let mut skipped: Vec<Row> = Vec::new();
    for (row, kept) in rows.into_iter().zip(keep) {
        if kept {
            if let Some(gap) = elided(&skipped) {
                out.push(gap);
            }
            skipped.clear();
            out.push(row);
        } else {
            skipped.push(row);
        }
    }
    out
}

/// The row standing for `skipped` rows: drawn as a note, no arrow.
fn elided(skipped: &[Row]) -> Option<Row> {
    let first = skipped.first()?;
    let packets: usize = skipped.iter().map(|r| r.count).sum();
    let mut row = first.clone();
    row.kind = Kind::Elided;
    row.notes = vec![format!("... {} rows ({packets} packets) without a loss, NAK or retry left out", skipped.len())];
    Some(row)
}

/// Runs of MIDDLE packets of one direction with consecutive PSNs and
/// nothing to say about them become one row.
fn fold(rows: Vec<Row>) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::with_capacity(rows.len());
    for row in rows {
        if let Some(prev) = out.last_mut() {
            let middle = |r: &Row| r.first.position() == Some(Position::Middle) && r.notes.is_empty();
            if middle(prev)
                && middle(&row)
                && (prev.from, prev.to, prev.kind) == (row.from, row.to, row.kind)
                && prev.first.opcode == row.first.opcode
                && row.first.psn == (prev.last_psn + 1) & 0xff_ffff
            {
                prev.count += 1;
                prev.last_psn = row.first.psn;
                continue;
            }
        }
        out.push(row);
    }
    out
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn opcodes_lose_their_transport() {
        assert_eq!(short_opcode(Opcode::RcWriteFirst), "WRITE_FIRST");
        assert_eq!(short_opcode(Opcode::RcReadResponseOnly), "READ_RESPONSE_ONLY");
        assert_eq!(short_opcode(Opcode::UdSendOnly), "SEND_ONLY");
        assert_eq!(short_opcode(Opcode::RcAck), "ACK");
        assert_eq!(short_opcode(Opcode::RcAtomicAck), "ATOMIC_ACK");
    }
}
