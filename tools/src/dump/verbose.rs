//! The `-V` form: every field of every header, with what it means, the way a
//! teacher would walk through a packet.

use super::{Decoded, Verdict};
use std::fmt::Write;
use std::time::Duration;
use uroce_stack::frame::{FrameRepr, IpFields, UdpChecksum};
use uroce_transport::wire::{AethSyndrome, BthRepr, Position, RoceRepr};

fn mac(m: &[u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn flag(b: bool) -> u8 {
    u8::from(b)
}

pub(crate) fn frame_headers(out: &mut String, f: &FrameRepr, frame_len: usize) {
    let _ = writeln!(out, "      frame length {frame_len} bytes");
    if let Some(e) = &f.eth {
        let _ = writeln!(out, "  Ethernet  dst {}  src {}", mac(&e.dst), mac(&e.src));
    }
    match &f.ip {
        IpFields::V4(h) => {
            let _ = writeln!(
                out,
                "  IPv4      {} -> {}  DSCP {} ECN {}  ID 0x{:04x}  DF {}  TTL {}",
                h.src,
                h.dst,
                h.dscp,
                h.ecn,
                h.ident,
                flag(h.dont_frag),
                h.ttl
            );
            let _ = writeln!(out, "            (the ICRC covers this header with DSCP/ECN, TTL and checksum masked)");
        }
        IpFields::V6(h) => {
            let _ = writeln!(
                out,
                "  IPv6      {} -> {}  traffic class 0x{:02x}  flow label 0x{:05x}  hop limit {}",
                h.src, h.dst, h.traffic_class, h.flow_label, h.hop_limit
            );
            let _ =
                writeln!(out, "            (the ICRC covers this header with class, flow label and hop limit masked)");
        }
    }
    let sum = match f.udp.checksum {
        UdpChecksum::Zero => "0 (none)".to_string(),
        UdpChecksum::Compute => "to be computed".to_string(),
        UdpChecksum::Value(v) => format!("0x{v:04x}"),
    };
    let _ = writeln!(
        out,
        "  UDP       port {} -> {}  checksum {sum}  (source port: entropy from the QP's flow label)",
        f.udp.src_port, f.udp.dst_port
    );
}

fn bth(out: &mut String, b: &BthRepr) {
    let op = b.opcode;
    let pos = match op.position() {
        Some(Position::First) => "first packet of a message",
        Some(Position::Middle) => "middle packet of a message",
        Some(Position::Last) => "last packet of a message",
        Some(Position::Only) => "a whole message in one packet",
        None => "not an opcode IBTA names",
    };
    let _ = writeln!(out, "  BTH       opcode 0x{:02x} {op}  ({:?}, {pos})", u8::from(op), op.transport());
    let _ = writeln!(
        out,
        "            solicited event {}  migration request {}  pad count {}  transport version {}",
        flag(b.solicited),
        flag(b.mig_req),
        b.pad_count,
        b.tver
    );
    let _ = writeln!(
        out,
        "            partition key 0x{:04x}  FECN {}  BECN {}  reserved 0x{:02x}",
        b.pkey,
        flag(b.fecn),
        flag(b.becn),
        b.resv6
    );
    let _ = writeln!(
        out,
        "            destination QP 0x{:06x}  ack request {}  reserved 0x{:02x}  PSN {} (0x{:06x})",
        b.dest_qp,
        flag(b.ack_req),
        b.resv7,
        b.psn.value(),
        b.psn.value()
    );
}

fn syndrome_meaning(s: AethSyndrome) -> String {
    match s {
        AethSyndrome::Ack { credits: 31 } => "ACK, no credit information".into(),
        AethSyndrome::Ack { credits } => format!("ACK, credit code {credits}"),
        AethSyndrome::RnrNak { timer } => format!("receiver not ready: retry after RNR timer code {timer}"),
        AethSyndrome::Nak(code) => format!("NAK: {code}"),
        AethSyndrome::Reserved(_) => "reserved syndrome type".into(),
    }
}

fn ext_headers(out: &mut String, r: &RoceRepr) {
    if let Some(h) = &r.deth {
        let _ = writeln!(
            out,
            "  DETH      Q_Key 0x{:08x}  source QP 0x{:06x}  reserved 0x{:02x}",
            h.qkey, h.src_qp, h.reserved
        );
    }
    if let Some(h) = &r.feth {
        let _ = writeln!(
            out,
            "  FETH      selectivity level {}  placement type {}  reserved 0x{:x}",
            h.selectivity, h.placement, h.reserved
        );
    }
    if let Some(h) = &r.reth {
        let _ = writeln!(
            out,
            "  RETH      virtual address 0x{:016x}  R_Key 0x{:08x}  DMA length {} (of the whole message)",
            h.va, h.rkey, h.dma_len
        );
    }
    if let Some(h) = &r.atomic_eth {
        let _ = writeln!(out, "  AtomicETH virtual address 0x{:016x}  R_Key 0x{:08x}", h.va, h.rkey);
        let _ = writeln!(out, "            swap/add data 0x{:016x}  compare data 0x{:016x}", h.swap_add, h.compare);
    }
    if let Some(h) = &r.immdt {
        let _ = writeln!(out, "  ImmDt     immediate 0x{:08x}  (delivered in the receiver's work completion)", h.imm);
    }
    if let Some(h) = &r.ieth {
        let _ = writeln!(out, "  IETH      R_Key to invalidate 0x{:08x}", h.rkey);
    }
    if let Some(h) = &r.aeth {
        let _ = writeln!(
            out,
            "  AETH      syndrome 0x{:02x} = {}  MSN {} (messages the responder completed)",
            h.syndrome.to_byte(),
            syndrome_meaning(h.syndrome),
            h.msn
        );
    }
    if let Some(h) = &r.atomic_ack_eth {
        let _ = writeln!(out, "  AtomicAckETH original remote data 0x{:016x}", h.orig_data);
    }
    if let Some(h) = &r.cnp {
        let _ = writeln!(out, "  CNP       16 reserved bytes {:02x?}", h.reserved);
    }
}

fn hex_preview(data: &[u8]) -> String {
    let shown: Vec<String> = data.iter().take(16).map(|b| format!("{b:02x}")).collect();
    let more = if data.len() > 16 { " ..." } else { "" };
    format!("{}{more}", shown.join(" "))
}

pub(crate) fn packet(out: &mut String, number: u64, rel: Duration, frame_len: usize, d: &Decoded) {
    let _ = writeln!(out, "Frame {number} at {}", super::line::time(rel));
    frame_headers(out, &d.frame.repr, frame_len);
    bth(out, &d.repr.bth);
    ext_headers(out, &d.repr);
    let payload = d.packet.payload();
    if !payload.is_empty() {
        let _ = writeln!(out, "  Payload   {} bytes: {}", payload.len(), hex_preview(payload));
        super::cm::verbose(out, d);
    }
    let pad = d.packet.pad();
    if !pad.is_empty() {
        let _ = writeln!(out, "  Pad       {} bytes {:02x?} (to a 4-byte boundary)", pad.len(), pad);
    }
    if let Some(s) = d.sealed {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let _ = writeln!(
            out,
            "  Trailer   nonce counter 0x{}  GMAC tag 0x{}  (uroce's authenticated mode)",
            hex(s.nonce),
            hex(s.tag)
        );
    }
    let carried = d.icrc_carried;
    let verdict = match d.icrc_verdict() {
        Verdict::IcrcOk => "ok".to_string(),
        Verdict::Sealed => "none: sealed by uroce's authenticated mode, whose MAC (before the ICRC) a uroce receiver \
                            with the key checks in its place"
            .to_string(),
        _ => format!("BAD, expected 0x{:08x}: a receiver drops this packet silently", d.icrc_expected),
    };
    let _ = writeln!(out, "  ICRC      0x{carried:08x} {verdict}");
    let _ = writeln!(out);
}
