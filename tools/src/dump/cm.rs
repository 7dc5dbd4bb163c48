//! CM MADs on QP1 (UD SEND to QP 1 with Q_Key 0x80010000): the message by
//! the name tshark gives it, and with -V its MAD header and fields.

use super::Decoded;
use std::fmt::Write;
use uroce_transport::cm::ip::{parse_service_id, CmaHdr};
use uroce_transport::cm::{CmMessage, Mad, MadHeaderRepr, GSI_QKEY, GSI_QPN};

/// The CM message a packet carries, if it is one.
fn message(d: &Decoded) -> Option<(MadHeaderRepr, CmMessage)> {
    let deth = d.repr.deth?;
    if d.repr.bth.dest_qp != GSI_QPN || deth.qkey != GSI_QKEY {
        return None;
    }
    let (h, m) = CmMessage::parse(&Mad::new_checked(d.packet.payload()).ok()?).ok()?;
    h.is_cm_send().then_some((h, m))
}

/// ` CM ConnectRequest`, for the one-line form.
pub(crate) fn line(out: &mut String, d: &Decoded) {
    if let Some(name) = name(d) {
        let _ = write!(out, " CM {name}");
    }
}

/// The name of the CM message a packet carries, if it is one.
pub(crate) fn name(d: &Decoded) -> Option<String> {
    message(d).map(|(_, m)| m.name().to_string())
}

/// The MAD header, the message's fields and, in a REQ or SIDR_REQ, rdma_cm's IP header.
pub(crate) fn verbose(out: &mut String, d: &Decoded) {
    let Some((h, m)) = message(d) else { return };
    let _ = writeln!(
        out,
        "  MAD       base version {}  class 0x{:02x} (CM) version {}  method 0x{:02x} (Send)  TID 0x{:016x}  attribute 0x{:04x} {}",
        h.base_version,
        h.mgmt_class,
        h.class_version,
        h.method,
        h.tid,
        h.attr_id,
        m.name()
    );
    let _ = writeln!(out, "  CM        {m}");
    // rdma_cm's IP header rides in a REQ's private data, and a SIDR_REQ's.
    let ip_request = match &m {
        CmMessage::Req(req) => Some((req.service_id, &req.private_data[..])),
        CmMessage::SidrReq(req) => Some((req.service_id, &req.private_data[..])),
        _ => None,
    };
    if let Some((service_id, private_data)) = ip_request {
        if let (Some((ps, port)), Ok(ip)) = (parse_service_id(service_id), CmaHdr::parse(private_data)) {
            let _ = writeln!(
                out,
                "  rdma_cm   {ps:?} port {port}: {} port {} -> {} (IP CM header version {})",
                ip.src_addr, ip.src_port, ip.dst_addr, ip.version
            );
        }
    }
}
