//! What the protocol did and why, read off the packets as each connection's
//! two ends would see them: a request PSN seen again is a resend (after a
//! sequence-error NAK: go-back-N; after an RNR NAK: the retry; otherwise
//! the ACK timeout), an ACK that covers several PSNs is coalesced, one
//! below the last is a duplicate acknowledged again, a READ or atomic asked
//! twice is answered from the responder's resources.

use super::endpoints::Endpoints;
use super::{Kind, Packet, Row};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use uroce_transport::engine::rnr_timer;
use uroce_transport::wire::{AethSyndrome, NakCode, Opcode, Transport};

/// One request stream (a requester's packets to its responder, and the
/// responses), as the ladder follows it.
#[derive(Default)]
struct Stream {
    /// The highest request PSN seen (responses count: they use the READ
    /// request's PSNs).
    max_psn: Option<u32>,
    last_request: Duration,
    last_was_read: bool,
    /// The last NAK that asks for a resend, until the resend comes.
    nak: Option<Nak>,
    /// In a burst of resent packets.
    resending: bool,
    /// The PSN the burst's next packet should carry.
    resend_next: u32,
    /// The PSN the last ACK acknowledged up to.
    acked: Option<u32>,
    first_psn: Option<u32>,
    /// READ requests seen twice, until their answer.
    read_again: BTreeSet<u32>,
    /// Atomic results sent, by PSN.
    atomic_results: BTreeMap<u32, u64>,
}

#[derive(Clone, Copy)]
enum Nak {
    Sequence { psn: u32 },
    Rnr { psn: u32, code: u8, at: Duration },
}

impl Nak {
    fn psn(self) -> u32 {
        match self {
            Nak::Sequence { psn } | Nak::Rnr { psn, .. } => psn,
        }
    }
}

/// PSN `a` minus PSN `b`, in the 24-bit circle.
fn psn_diff(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

pub fn duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.1} us")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.3} s", us / 1e6)
    }
}

/// Every packet as a row, with its kind and notes.
pub fn annotate(packets: &[Packet], ends: &Endpoints) -> Vec<Row> {
    let mut streams: BTreeMap<(usize, usize), Stream> = BTreeMap::new();
    let mut rows = Vec::with_capacity(packets.len());
    for (p, &(from, to)) in packets.iter().zip(&ends.of_packet) {
        let mut notes = Vec::new();
        let connected = matches!(p.opcode.transport(), Transport::Rc);
        let kind = if !p.icrc_ok {
            notes.push("ICRC bad: the receiver drops it, as if it were lost".to_string());
            Kind::BadIcrc
        } else if p.is_cm {
            Kind::Cm
        } else if !connected {
            Kind::Request
        } else if p.opcode.is_response() {
            response(streams.entry((to, from)).or_default(), p, &mut notes)
        } else {
            request(streams.entry((from, to)).or_default(), p, &mut notes)
        };
        rows.push(Row { first: p.clone(), count: 1, last_psn: p.psn, from, to, kind, notes });
    }
    rows
}

fn request(s: &mut Stream, p: &Packet, notes: &mut Vec<String>) -> Kind {
    let psn = p.psn;
    s.first_psn.get_or_insert(psn);
    let since_last = p.time.saturating_sub(s.last_request);
    s.last_request = p.time;
    let is_read = p.opcode == Opcode::RcReadRequest;
    let new = s.max_psn.is_none_or(|m| psn_diff(psn, m) > 0);
    if new {
        if let Some(m) = s.max_psn.filter(|&m| psn_diff(psn, m) > 1 && !s.last_was_read) {
            let missing = psn_diff(psn, m) - 1;
            notes.push(format!(
                "PSN gap: {missing} packet(s) from PSN {} never passed the capture point (lost before it)",
                (m + 1) & 0xff_ffff
            ));
        }
        s.max_psn = Some(psn);
        s.resending = false;
        s.last_was_read = is_read;
        return Kind::Request;
    }
    if is_read {
        s.read_again.insert(psn);
    }
    // Going on with a burst, or (a PSN below the burst's next) starting
    // over: a NAK or a timeout again.
    let continuing = s.resending && psn_diff(psn, s.resend_next) >= 0;
    if continuing && psn_diff(psn, s.resend_next) > 0 && !matches!(s.nak, Some(n) if n.psn() == psn) {
        notes.push(format!(
            "PSN gap in the resend: {} packet(s) from PSN {} lost again (never passed the capture point)",
            psn_diff(psn, s.resend_next),
            s.resend_next
        ));
    }
    s.resend_next = (psn + 1) & 0xff_ffff;
    match s.nak {
        Some(Nak::Sequence { psn: n }) if n == psn => {
            notes.push(format!(
                "PSN {psn} again: go-back-N after NAK PSN sequence error (0x60): every packet from it is sent again"
            ));
            s.nak = None;
            s.resending = true;
        }
        Some(Nak::Rnr { psn: n, code, at }) if n == psn => {
            notes.push(format!(
                "PSN {psn} again: the retry after the RNR NAK, {} later (the NAK asked for {}, timer code {code})",
                duration(p.time.saturating_sub(at)),
                duration(rnr_timer(code))
            ));
            s.nak = None;
            s.resending = true;
        }
        _ if continuing => {}
        _ if s.acked.is_some_and(|a| psn_diff(a, psn) >= 0) => {
            notes.push(format!(
                "PSN {psn} again: resent after {}, though its ACK passed the capture point: the ACK never reached the requester intact (lost or corrupted after this point), so its ACK timeout fired",
                duration(since_last)
            ));
            s.resending = true;
        }
        _ => {
            notes.push(format!(
                "PSN {psn} again: resent after {} with no ACK for it (the requester's ACK timeout)",
                duration(since_last)
            ));
            s.resending = true;
        }
    }
    Kind::Resend
}

fn response(s: &mut Stream, p: &Packet, notes: &mut Vec<String>) -> Kind {
    let psn = p.psn;
    if s.max_psn.is_none_or(|m| psn_diff(psn, m) > 0) {
        s.max_psn = Some(psn);
    }
    let syndrome = p.aeth.map(|a| a.syndrome);
    match syndrome {
        Some(AethSyndrome::RnrNak { timer }) => {
            notes.push(format!(
                "RNR NAK: the responder had no receive posted; the requester waits {} (timer code {timer}) and sends PSN {psn} again",
                duration(rnr_timer(timer))
            ));
            s.nak = Some(Nak::Rnr { psn, code: timer, at: p.time });
            return Kind::Nak;
        }
        Some(AethSyndrome::Nak(NakCode::PsnSequenceError)) if matches!(s.nak, Some(Nak::Rnr { psn: p, .. }) if p == psn) =>
        {
            notes.push(format!(
                "NAK PSN sequence error (0x60) for PSN {psn}, which the RNR NAK named: a later packet came first; the requester already waits out the RNR timer, then resends from PSN {psn}"
            ));
            return Kind::Nak;
        }
        Some(AethSyndrome::Nak(NakCode::PsnSequenceError)) => {
            notes.push(format!(
                "NAK PSN sequence error (0x60): the responder expected PSN {psn} and dropped what came after; the requester goes back to it (go-back-N)"
            ));
            s.nak = Some(Nak::Sequence { psn });
            s.acked = Some(psn.wrapping_sub(1) & 0xff_ffff);
            return Kind::Nak;
        }
        Some(AethSyndrome::Nak(code)) => {
            let byte = syndrome.map_or(0, AethSyndrome::to_byte);
            notes.push(format!("NAK {code} (0x{byte:02x}): fatal, the requester's QP goes to the error state"));
            return Kind::Nak;
        }
        _ => {}
    }
    match p.opcode {
        Opcode::RcAck => acknowledged(s, psn, notes),
        Opcode::RcAtomicAck => {
            let orig = p.atomic_orig.unwrap_or_default();
            if s.atomic_results.insert(psn, orig).is_some() {
                notes.push(format!(
                    "atomic replayed: the responder sent its saved result (0x{orig:x}) again; the atomic ran once"
                ));
            }
            s.acked = Some(psn);
        }
        Opcode::RcReadResponseFirst | Opcode::RcReadResponseOnly if s.read_again.remove(&psn) => {
            notes.push("duplicate READ answered from responder resources: read and sent again".to_string());
        }
        _ => {}
    }
    if p.aeth.is_some() && p.opcode != Opcode::RcAck {
        s.acked = Some(psn);
    }
    if p.opcode == Opcode::RcAck {
        Kind::Ack
    } else {
        Kind::Response
    }
}

/// An ACK: coalesced (it covers several PSNs), a duplicate acknowledged
/// again, or one for one.
fn acknowledged(s: &mut Stream, psn: u32, notes: &mut Vec<String>) {
    let from = s.acked.map(|a| (a + 1) & 0xff_ffff).or(s.first_psn);
    match s.acked.map(|a| psn_diff(psn, a)) {
        Some(d) if d <= 0 => notes.push(format!(
            "duplicate request acknowledged again (PSN {psn}, already acknowledged): it was executed once"
        )),
        _ => {
            if let Some(f) = from.filter(|&f| psn_diff(psn, f) > 0) {
                let n = psn_diff(psn, f) + 1;
                notes.push(format!("coalesced ACK: acknowledges PSN {f} to {psn}, {n} packets"));
            }
            s.acked = Some(psn);
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};
    use uroce_transport::wire::AethRepr;

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    /// A packet at `ms` from A to B (request) or B to A (response).
    fn packet(ms: u64, op: Opcode, psn: u32, aeth: Option<AethSyndrome>) -> Packet {
        let (src, dst, dest_qp) = if op.is_response() { (B, A, 0x11) } else { (A, B, 0x22) };
        Packet {
            number: 0,
            time: Duration::from_millis(ms),
            src,
            dst,
            sport: 0xc000,
            opcode: op,
            dest_qp,
            src_qp: None,
            psn,
            aeth: aeth.map(|syndrome| AethRepr { syndrome, msn: 1 }),
            atomic_orig: (op == Opcode::RcAtomicAck).then_some(7),
            label: String::new(),
            icrc_ok: true,
            is_cm: false,
            explain: String::new(),
        }
    }

    fn notes(packets: &[Packet]) -> Vec<Vec<String>> {
        annotate(packets, &Endpoints::of(packets)).into_iter().map(|r| r.notes).collect()
    }

    const ACK: Option<AethSyndrome> = Some(AethSyndrome::Ack { credits: 31 });

    #[test]
    fn an_rnr_nak_and_its_retry() {
        let n = notes(&[
            packet(0, Opcode::RcSendOnly, 5, None),
            packet(1, Opcode::RcAck, 5, Some(AethSyndrome::RnrNak { timer: 12 })),
            packet(3, Opcode::RcSendOnly, 5, None),
            packet(4, Opcode::RcAck, 5, ACK),
        ]);
        assert!(n[1][0].starts_with("RNR NAK: the responder had no receive posted; the requester waits 640.0 us"));
        assert_eq!(
            n[2],
            ["PSN 5 again: the retry after the RNR NAK, 2.00 ms later (the NAK asked for 640.0 us, timer code 12)"]
        );
        assert!(n[3].is_empty(), "{:?}", n[3]);
    }

    #[test]
    fn a_resend_after_the_timeout_and_its_duplicate_acked_again() {
        let n = notes(&[
            packet(0, Opcode::RcSendOnly, 5, None),
            packet(20, Opcode::RcSendOnly, 5, None),
            packet(21, Opcode::RcAck, 5, ACK),
            packet(22, Opcode::RcAck, 5, ACK),
        ]);
        assert_eq!(n[1], ["PSN 5 again: resent after 20.00 ms with no ACK for it (the requester's ACK timeout)"]);
        assert_eq!(n[3], ["duplicate request acknowledged again (PSN 5, already acknowledged): it was executed once"]);
        // The ACK went by, yet the requester resent: it never got there.
        let n = notes(&[
            packet(0, Opcode::RcSendOnly, 5, None),
            packet(1, Opcode::RcAck, 5, ACK),
            packet(20, Opcode::RcSendOnly, 5, None),
        ]);
        assert!(n[2][0].starts_with("PSN 5 again: resent after 20.00 ms, though its ACK passed the capture point"));
    }

    #[test]
    fn a_read_and_an_atomic_asked_twice_are_answered_from_the_responders_resources() {
        let n = notes(&[
            packet(0, Opcode::RcReadRequest, 5, None),
            packet(1, Opcode::RcReadResponseOnly, 5, ACK),
            packet(20, Opcode::RcReadRequest, 5, None),
            packet(21, Opcode::RcReadResponseOnly, 5, ACK),
            packet(22, Opcode::RcFetchAdd, 6, None),
            packet(23, Opcode::RcAtomicAck, 6, ACK),
            packet(40, Opcode::RcFetchAdd, 6, None),
            packet(41, Opcode::RcAtomicAck, 6, ACK),
        ]);
        assert!(n[1].is_empty() && n[5].is_empty());
        assert_eq!(n[3], ["duplicate READ answered from responder resources: read and sent again"]);
        assert_eq!(n[7], ["atomic replayed: the responder sent its saved result (0x7) again; the atomic ran once"]);
    }

    #[test]
    fn psns_compare_around_the_circle() {
        assert_eq!(psn_diff(5, 3), 2);
        assert_eq!(psn_diff(1, 0xff_ffff), 2);
        assert_eq!(psn_diff(0xff_ffff, 1), -2);
        assert_eq!(duration(Duration::from_micros(640)), "640.0 us");
        assert_eq!(duration(Duration::from_micros(1_280)), "1.28 ms");
    }
}
