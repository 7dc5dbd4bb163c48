//! The UD responder: one packet a message, the Q_Key must match, and the
//! receive buffer gets the 40-byte GRH in front of the data.

use crate::engine::qp::Qp;
use crate::engine::status::WcStatus;
use crate::engine::wr::{Gid, NetworkHdr, WcFlags, WcOpcode, WorkCompletion};
use crate::engine::{EngineState, RxMeta, GRH_LEN};
use crate::wire::ip::{self, ipv4, ipv6, udp};
use crate::wire::RoceRepr;

pub(super) fn on_request(qp: &mut Qp, sh: &mut EngineState, meta: &RxMeta, repr: &RoceRepr, payload: &[u8]) {
    let Some(deth) = repr.deth else { return };
    // A UD QP takes only messages sent with its Q_Key, and none above the MTU.
    if deth.qkey != qp.attr.qkey {
        return sh.counters.inc(crate::engine::Counter::QkeyViolation);
    }
    if payload.len() > qp.mtu(sh.port_mtu) as usize {
        return sh.counters.inc(crate::engine::Counter::RcvdMalformed);
    }
    let Some(wr) = qp.take_recv(sh) else {
        return sh.counters.inc(crate::engine::Counter::RcvdNoRecv);
    };
    let grh = grh(meta.src_gid, meta.dst_gid, payload.len());
    let pd = qp.recv_pd(sh);
    let result =
        sh.mrs.scatter(pd, &wr.sg_list, 0, &grh).and_then(|_| sh.mrs.scatter(pd, &wr.sg_list, GRH_LEN as u64, payload));
    let status = result.err().unwrap_or(WcStatus::Success);
    let mut wc = WorkCompletion::new(wr.wr_id, status, WcOpcode::Recv, qp.qpn);
    if status == WcStatus::Success {
        wc.byte_len = (GRH_LEN + payload.len()) as u32;
        wc.src_qp = deth.src_qp;
        wc.wc_flags = WcFlags::GRH;
        wc.network_hdr = network_hdr_of(meta.src_gid);
        if let Some(imm) = repr.immdt {
            wc.imm_data = imm.imm;
            wc.wc_flags |= WcFlags::WITH_IMM;
        }
    }
    sh.complete(qp.init.recv_cq, wc);
    qp.resp.next_msn();
}

/// The network header a datagram from `src` came with.
fn network_hdr_of(src: Gid) -> NetworkHdr {
    match src.ipv4() {
        Some(_) => NetworkHdr::Ipv4,
        None => NetworkHdr::Ipv6,
    }
}

/// The 40 bytes a UD receive starts with. For IPv6 GIDs, the IPv6 header;
/// for IPv4-mapped ones, 20 zero bytes then the IPv4 header, as rxe writes it.
pub(crate) fn grh(src: Gid, dst: Gid, payload_len: usize) -> [u8; GRH_LEN] {
    let mut g = [0u8; GRH_LEN];
    // UDP (8) + BTH (12) + DETH (8) + payload + ICRC (4); close enough to
    // what the wire carried, since the engine does not see the pad.
    let udp_len = udp::HEADER_LEN + 12 + 8 + payload_len + 4;
    match (src.ipv4(), dst.ipv4()) {
        (Some(s), Some(d)) => {
            let h = &mut g[GRH_LEN - ipv4::HEADER_LEN..];
            ip::emit_ipv4(h, s, d, 0, udp_len);
            let sum = ipv4::checksum(h);
            h[ipv4::CHECKSUM].copy_from_slice(&sum.to_be_bytes());
        }
        _ => ip::emit_ipv6(&mut g[..ipv6::HEADER_LEN], src.0, dst.0, udp_len),
    }
    g
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn ipv4_grh_has_a_valid_header_at_20() {
        let g = grh(Gid::from_ipv4([198, 18, 0, 11]), Gid::from_ipv4([198, 18, 0, 12]), 512);
        assert_eq!(&g[..20], &[0u8; 20]);
        assert_eq!(g[20], 0x45);
        assert_eq!(ipv4::checksum(&g[20..]), 0);
        assert_eq!(&g[32..36], &[198, 18, 0, 11]);
    }

    #[test]
    fn a_datagram_names_its_network_header() {
        assert_eq!(network_hdr_of(Gid::from_ipv4([198, 18, 0, 11])), NetworkHdr::Ipv4);
        let v6 = Gid("2001:db8::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
        assert_eq!(network_hdr_of(v6), NetworkHdr::Ipv6);
    }

    #[test]
    fn ipv6_grh() {
        let mut a = Gid::default();
        a.0[0] = 0xfe;
        a.0[1] = 0x80;
        let g = grh(a, a, 0);
        assert_eq!(g[0] >> 4, 6);
        assert_eq!(&g[8..24], &a.0);
    }
}
