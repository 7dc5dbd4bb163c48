//! The CM MADs of the kernel rxe's `rping -C 5 -S 64`
//! (tests/data/captures/rdma_cm_rping.pcap): every one parses to what tshark
//! shows and re-emits byte for byte.

// It reads the capture file: a test from outside the sans-IO code.
#![allow(clippy::disallowed_methods)]

use uroce_transport::cm::ip::{flow_label_of_ports, parse_service_id, CmaHdr, PortSpace};
use uroce_transport::cm::mad::{Mad, MadHeaderRepr, MAD_LEN};
use uroce_transport::cm::msg::{attr, CmMessage, PathRepr, TRANSPORT_RC};
use uroce_transport::cm::{GSI_QKEY, GSI_QPN};
use uroce_transport::engine::Gid;
use uroce_transport::Seed;

const CAPTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/captures/rdma_cm_rping.pcap");

/// Ethernet (14), IPv4 (20), UDP (8), BTH (12), DETH (8).
const MAD_OFFSET: usize = 62;

/// The frames of a classic little-endian pcap file.
fn frames(path: &str) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "little-endian pcap");
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let caplen = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(b[at + 16..at + 16 + caplen].to_vec());
        at += 16 + caplen;
    }
    out
}

/// The QP1 frames: UD SEND ONLY (0x64) to QP 1.
fn cm_frames() -> Vec<Vec<u8>> {
    frames(CAPTURE).into_iter().filter(|f| f[42] == 0x64 && f[46..50] == [0, 0, 0, 1]).collect()
}

fn mad(frame: &[u8]) -> &[u8] {
    &frame[MAD_OFFSET..MAD_OFFSET + MAD_LEN]
}

fn parse(frame: &[u8]) -> (MadHeaderRepr, CmMessage) {
    CmMessage::parse(&Mad::new_checked(mad(frame)).unwrap()).unwrap()
}

#[test]
fn five_cm_mads_to_qp1_with_the_gsi_qkey() {
    let cm = cm_frames();
    assert_eq!(cm.len(), 5);
    for f in &cm {
        // DETH: Q_Key 0x80010000 from QP1; the payload is one whole MAD.
        assert_eq!(u32::from_be_bytes(f[54..58].try_into().unwrap()), GSI_QKEY);
        assert_eq!(u32::from_be_bytes(f[58..62].try_into().unwrap()), GSI_QPN);
        assert_eq!(f.len(), MAD_OFFSET + MAD_LEN + 4);
    }
    let names: Vec<_> = cm.iter().map(|f| parse(f).1.name()).collect();
    assert_eq!(names, ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"]);
}

#[test]
fn every_mad_re_emits_byte_for_byte() {
    for f in cm_frames() {
        let (h, m) = parse(&f);
        assert!(h.is_cm_send());
        assert_eq!(&m.to_mad(h.tid)[..], mad(&f), "{m}");
    }
}

#[test]
fn the_req_as_tshark_decodes_it() {
    let cm = cm_frames();
    let (h, m) = parse(&cm[0]);
    assert_eq!(h.tid, 0x0000_0002_45b7_c33c);
    let CmMessage::Req(req) = m else { panic!("not a REQ") };
    assert_eq!(req.local_comm_id, 0x3cc3_b745);
    // The kernel's TID: an agent number over the comm ID as x86 stores it.
    assert_eq!(h.tid as u32, req.local_comm_id.swap_bytes());
    assert_eq!(parse_service_id(req.service_id), Some((PortSpace::Tcp, 7174)));
    assert_eq!(req.local_ca_guid, 0x5054_00ff_fe12_0011);
    assert_eq!((req.local_qkey, req.local_qpn), (0, 0x2d));
    assert_eq!((req.responder_resources, req.initiator_depth), (1, 1));
    assert_eq!((req.remote_cm_response_timeout, req.local_cm_response_timeout), (20, 20));
    assert_eq!(req.transport_service_type, TRANSPORT_RC);
    assert!(!req.end_to_end_flow_control);
    assert_eq!(req.starting_psn, 0x92_9a5b);
    assert_eq!((req.retry_count, req.rnr_retry_count, req.max_cm_retries), (7, 7, 15));
    assert_eq!((req.partition_key, req.path_mtu), (0xffff, 3));
    assert!(!req.srq && !req.rdc_exists);
    let p = req.primary;
    assert_eq!((p.local_lid, p.remote_lid), (0xffff, 0xffff));
    assert_eq!(p.local_gid, Gid::from_ipv4([198, 18, 0, 11]));
    assert_eq!(p.remote_gid, Gid::from_ipv4([198, 18, 0, 12]));
    assert_eq!(p.flow_label, 0x8a2bc);
    assert_eq!((p.packet_rate, p.traffic_class, p.hop_limit, p.sl), (0, 0, 64, 0));
    assert!(!p.subnet_local);
    assert_eq!(p.local_ack_timeout, 19);
    assert_eq!(req.alternate, PathRepr::default());
    let hdr = CmaHdr::parse(&req.private_data).unwrap();
    assert_eq!(hdr.src_port, 0xca8a);
    assert_eq!(hdr.src_addr.to_string(), "198.18.0.11");
    assert_eq!(hdr.dst_addr.to_string(), "198.18.0.12");
    assert_eq!(flow_label_of_ports(hdr.src_port, 7174), p.flow_label);
    assert!(req.private_data[36..].iter().all(|&b| b == 0));
}

#[test]
fn rep_rtu_dreq_drep_as_tshark_decodes_them() {
    let cm = cm_frames();
    let tid = parse(&cm[0]).0.tid;
    let (h, m) = parse(&cm[1]);
    assert_eq!((h.tid, h.attr_id), (tid, attr::REP));
    let CmMessage::Rep(rep) = m else { panic!("not a REP") };
    assert_eq!((rep.local_comm_id, rep.remote_comm_id), (0xea29_d7d8, 0x3cc3_b745));
    assert_eq!((rep.local_qpn, rep.starting_psn), (0x2d, 0x62_b072));
    assert_eq!((rep.responder_resources, rep.initiator_depth), (1, 1));
    assert_eq!((rep.target_ack_delay, rep.failover_accepted, rep.rnr_retry_count), (15, 0, 7));
    assert!(!rep.end_to_end_flow_control && !rep.srq);
    assert_eq!(rep.local_ca_guid, 0x5054_00ff_fe12_0012);

    let CmMessage::Rtu(rtu) = parse(&cm[2]).1 else { panic!("not an RTU") };
    assert_eq!((rtu.local_comm_id, rtu.remote_comm_id), (0x3cc3_b745, 0xea29_d7d8));
    // The active side's DREQ reuses its REQ's TID; the DREP answers with it.
    let (h, m) = parse(&cm[3]);
    assert_eq!(h.tid, tid);
    let CmMessage::Dreq(dreq) = m else { panic!("not a DREQ") };
    assert_eq!((dreq.local_comm_id, dreq.remote_comm_id, dreq.remote_qpn), (0x3cc3_b745, 0xea29_d7d8, 0x2d));
    let (h, m) = parse(&cm[4]);
    assert_eq!(h.tid, tid);
    let CmMessage::Drep(drep) = m else { panic!("not a DREP") };
    assert_eq!((drep.local_comm_id, drep.remote_comm_id), (0xea29_d7d8, 0x3cc3_b745));
}

#[test]
fn short_and_hostile_mads_never_panic() {
    let cm = cm_frames();
    let good = mad(&cm[0]).to_vec();
    assert!(Mad::new_checked(&good[..MAD_LEN - 1]).is_err());
    // Every attribute ID over every byte pattern parses to something.
    let mut b = good.clone();
    for attr_id in 0..0x40u16 {
        for fill in [0x00u8, 0xff, 0x5a] {
            b[24..].fill(fill);
            b[16..18].copy_from_slice(&attr_id.to_be_bytes());
            let (h, m) = CmMessage::parse(&Mad::new_checked(&b[..]).unwrap()).unwrap();
            assert_eq!(h.attr_id, m.attr_id());
            let _ = m.to_mad(h.tid);
            let _ = m.to_string();
        }
    }
}

mod qp1 {
    use super::*;
    use uroce_transport::engine::*;

    fn gsi_engine(gid: Gid) -> (Engine, u32, Pd, CqHandle) {
        let mut e =
            Engine::new(EngineConfig { seed: Seed::Fixed(7), port_mtu: Mtu::Mtu1024, gid, ..Default::default() });
        let pd = e.alloc_pd();
        let cq = e.create_cq(16);
        let init = QpInitAttr {
            qp_type: QpType::Ud,
            pd,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            cap: QpCap::default(),
            sq_sig_all: true,
        };
        let qpn = e.create_gsi_qp(init).unwrap();
        assert_eq!(qpn, GSI_QPN);
        assert_eq!(e.create_gsi_qp(init), Err(Error::GsiQpExists));
        let attr = QpAttr { qp_state: QpState::Init, port_num: 1, qkey: GSI_QKEY, ..QpAttr::default() };
        e.modify_qp(qpn, &attr, QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY)
            .unwrap();
        e.modify_qp(qpn, &QpAttr { qp_state: QpState::Rtr, ..QpAttr::default() }, QpAttrMask::STATE).unwrap();
        let rts = QpAttr { qp_state: QpState::Rts, sq_psn: 9, ..QpAttr::default() };
        e.modify_qp(qpn, &rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN).unwrap();
        (e, qpn, pd, cq)
    }

    /// uroce's QP1 sends the REQ as the kernel did: BTH (UD SEND ONLY, P_Key
    /// 0xFFFF, QP 1, AckReq, PSN 9), DETH (Q_Key 0x80010000, QP 1), the MAD,
    /// from UDP source port 0xC000 + hash_32(1, 14).
    #[test]
    fn our_qp1_send_is_the_kernel_frame() {
        let frame = cm_frames().remove(0);
        let (mut e, qpn, pd, cq) = gsi_engine(Gid::from_ipv4([198, 18, 0, 11]));
        let keys = e.reg_mr(pd, 0x1000, Box::new(mad(&frame).to_vec()), AccessFlags::LOCAL_WRITE).unwrap();
        let mut wr = SendWr::new(1, WrOp::Send, vec![Sge { addr: 0x1000, length: MAD_LEN as u32, lkey: keys.lkey }]);
        let dgid = Gid::from_ipv4([198, 18, 0, 12]);
        // QP1 sends with its own Q_Key: the high bit says so, as the kernel's MAD layer asks.
        wr.ud = Some(UdDest { dgid, remote_qpn: GSI_QPN, remote_qkey: GSI_QKEY });
        e.post_send(qpn, wr).unwrap();
        let mut buf = vec![0u8; MAX_PACKET_LEN];
        let tx = e.poll_transmit(Instant::from_nanos(0), &mut buf).unwrap();
        assert_eq!((tx.dest_gid, tx.src_port), (dgid, u16::from_be_bytes([frame[34], frame[35]])));
        // Everything but the ICRC, which the link writes.
        assert_eq!(&buf[..tx.len - 4], &frame[42..frame.len() - 4]);
        assert_eq!(e.poll_cq(cq).unwrap().status, WcStatus::Success);
    }

    /// A MAD to QP1 arrives in a receive with its GRH; other Q_Keys do not.
    #[test]
    fn qp1_takes_mads_with_the_gsi_qkey_only() {
        let frame = cm_frames().remove(1);
        let (mut e, qpn, pd, cq) = gsi_engine(Gid::from_ipv4([198, 18, 0, 11]));
        let keys = e.reg_mr(pd, 0x1000, Box::new(vec![0u8; 2 * 296]), AccessFlags::LOCAL_WRITE).unwrap();
        for i in 0..2u64 {
            let sge = Sge { addr: 0x1000 + i * 296, length: 296, lkey: keys.lkey };
            e.post_recv(qpn, RecvWr { wr_id: i, sg_list: sge.into() }).unwrap();
        }
        let meta = RxMeta {
            src_gid: Gid::from_ipv4([198, 18, 0, 12]),
            dst_gid: Gid::from_ipv4([198, 18, 0, 11]),
            icrc_skipped: false,
        };
        let mut wrong = frame[42..].to_vec();
        wrong[12..16].copy_from_slice(&0x1111_1111u32.to_be_bytes());
        e.handle_packet(Instant::from_nanos(0), meta, &wrong);
        assert!(e.poll_cq(cq).is_none());
        e.handle_packet(Instant::from_nanos(0), meta, &frame[42..]);
        let wc = e.poll_cq(cq).unwrap();
        assert_eq!((wc.status, wc.byte_len, wc.src_qp), (WcStatus::Success, 40 + MAD_LEN as u32, 1));
        let mut got = vec![0u8; MAD_LEN];
        e.mr(keys.lkey).unwrap().read(40, &mut got);
        assert_eq!(&got[..], mad(&frame));
    }
}
