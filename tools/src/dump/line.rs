//! The one-line form: number, time, addresses, opcode, QPN, PSN, AckReq, the
//! fields of each extension header that matter, data length, ICRC verdict.

use super::{Decoded, Verdict};
use std::fmt::Write;
use std::time::Duration;
use uroce_stack::frame::ParsedFrame;

pub(crate) fn time(rel: Duration) -> String {
    format!("{}.{:06}", rel.as_secs(), rel.subsec_micros())
}

fn addresses(out: &mut String, frame: &ParsedFrame) {
    let _ = write!(out, "{} > {}", frame.repr.ip.src(), frame.repr.ip.dst());
}

pub(crate) fn malformed(out: &mut String, number: u64, rel: Duration, frame: &ParsedFrame, why: String) {
    let _ = write!(out, "{number:>5} {} ", time(rel));
    addresses(out, frame);
    let _ = writeln!(out, " MALFORMED {why}");
}

pub(crate) fn packet(out: &mut String, number: u64, rel: Duration, d: &Decoded) {
    let _ = write!(out, "{number:>5} {} ", time(rel));
    addresses(out, &d.frame);
    let bth = &d.repr.bth;
    let _ = write!(out, " {} QP=0x{:06x} PSN={}", bth.opcode, bth.dest_qp, bth.psn.value());
    if bth.ack_req {
        out.push_str(" A");
    }
    if bth.solicited {
        out.push_str(" SE");
    }
    for h in d.repr.ext_displays() {
        let _ = write!(out, " {h}");
    }
    if bth.opcode.has_payload() || bth.opcode.info().is_none() {
        let _ = write!(out, " len={}", d.packet.payload().len());
    }
    super::cm::line(out, d);
    let carried = d.icrc_carried;
    match d.icrc_verdict() {
        Verdict::IcrcOk => {
            let _ = writeln!(out, " ICRC ok");
        }
        Verdict::Sealed => {
            let _ = writeln!(out, " sealed (MAC, no ICRC)");
        }
        _ => {
            let _ = writeln!(out, " ICRC BAD (carried 0x{carried:08x}, expected 0x{:08x})", d.icrc_expected);
        }
    }
}
