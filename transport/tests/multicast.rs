//! Multicast in the simulation: UD QPs attached to a group on two engines,
//! a datagram to the group's GID and QPN 0xFFFFFF reaching each of them
//! (the sender's engine included) and none detached; the rules of attach.

use core::time::Duration;
use uroce_transport::engine::{
    Counter, Engine, Error, Gid, Mtu, QpType, RecvWr, SendWr, Sge, UdDest, WcStatus, WrOp, GRH_LEN,
    MAX_MCAST_QP_ATTACH, MULTICAST_QPN,
};
use uroce_transport::sim::probe::poll_all;
use uroce_transport::sim::{create_endpoint, ready_ud, Endpoint, LinkConfig, QpOptions, Sim, REGION_ACCESS};

const GROUP: Gid = Gid::from_ipv4([239, 1, 2, 3]);

struct Node {
    qps: Vec<Endpoint>,
    buf: u32,
}

fn options() -> QpOptions {
    QpOptions::new(QpType::Ud, Mtu::Mtu1024)
}

/// `n` ready UD QPs on engine `e` sharing one region of receive slots.
fn node(e: &mut Engine, n: usize) -> Node {
    let o = options();
    let first = create_endpoint(e, &o, None, None);
    let mut qps = vec![first];
    for _ in 1..n {
        qps.push(create_endpoint(e, &o, Some(first.pd), None));
    }
    for qp in &qps {
        ready_ud(e, qp, &o);
    }
    let buf = e.reg_mr(first.pd, 0x10_0000, Box::new(vec![0u8; 64 * 1024]), REGION_ACCESS).unwrap().lkey;
    Node { qps, buf }
}

impl Node {
    fn post_recvs(&self, e: &mut Engine, count: u64) {
        for (i, qp) in self.qps.iter().enumerate() {
            for k in 0..count {
                let at = 0x10_0000 + (i as u64 * 16 + k) * 512;
                let sge = Sge { addr: at, length: 512, lkey: self.buf };
                e.post_recv(qp.qpn, RecvWr { wr_id: k, sg_list: sge.into() }).unwrap();
            }
        }
    }

    /// How many datagrams each QP received (all successfully, from `src`).
    fn received(&self, e: &mut Engine, src: u32) -> Vec<usize> {
        self.qps
            .iter()
            .map(|qp| {
                let wcs = poll_all(e, qp.recv_cq);
                assert!(wcs.iter().all(|w| w.status == WcStatus::Success && w.src_qp == src), "{wcs:?}");
                assert!(wcs.iter().all(|w| w.byte_len as usize == GRH_LEN + 16));
                wcs.len()
            })
            .collect()
    }
}

fn send_to_group(sim: &mut Sim, from: &Node, qkey: u32) {
    let qp = from.qps[0];
    let sge = Sge { addr: 0x10_0000 + 60 * 1024, length: 16, lkey: from.buf };
    let mut wr = SendWr::new(1, WrOp::Send, vec![sge]);
    wr.ud = Some(UdDest { dgid: GROUP, remote_qpn: MULTICAST_QPN, remote_qkey: qkey });
    sim.engines[0].post_send(qp.qpn, wr).unwrap();
    sim.run_until(100_000, Duration::from_millis(100), |_| false);
    assert!(poll_all(&mut sim.engines[0], qp.send_cq).iter().all(|w| w.status == WcStatus::Success));
}

/// Node 0: the sender (QP 0, not attached) and QP 1, attached; node 1: QPs
/// 0 and 1 attached, QP 2 not. Each attached QP gets the datagram once; after
/// a detach, the detached one gets nothing more.
#[test]
fn a_datagram_to_a_group_reaches_every_attached_qp_on_both_engines() {
    let mut sim = Sim::new(3, LinkConfig::clean());
    let (a, b) = (node(&mut sim.engines[0], 2), node(&mut sim.engines[1], 3));
    a.post_recvs(&mut sim.engines[0], 4);
    b.post_recvs(&mut sim.engines[1], 4);
    sim.engines[0].attach_mcast(a.qps[1].qpn, GROUP).unwrap();
    for qp in &b.qps[..2] {
        sim.engines[1].attach_mcast(qp.qpn, GROUP).unwrap();
    }
    let qkey = options().qkey;
    send_to_group(&mut sim, &a, qkey);
    let src = a.qps[0].qpn;
    assert_eq!(a.received(&mut sim.engines[0], src), [0, 1], "the sender's engine: its attached QP");
    assert_eq!(b.received(&mut sim.engines[1], src), [1, 1, 0]);

    sim.engines[1].detach_mcast(b.qps[1].qpn, GROUP).unwrap();
    send_to_group(&mut sim, &a, qkey);
    assert_eq!(b.received(&mut sim.engines[1], src), [1, 0, 0]);
    // Node 1's last QP leaves: its link leaves the group, and datagrams to
    // it no longer reach node 1 at all.
    sim.engines[1].detach_mcast(b.qps[0].qpn, GROUP).unwrap();
    send_to_group(&mut sim, &a, qkey);
    assert!(!sim.joined[1].contains(&GROUP) && sim.joined[0].contains(&GROUP));
    assert_eq!(b.received(&mut sim.engines[1], src), [0, 0, 0]);
    // Node 1 took in the two datagrams it was a member for.
    assert_eq!(sim.engines[1].counters().get(Counter::McastRcvd), 2);
    assert_eq!(a.received(&mut sim.engines[0], src), [0, 2], "the two sends since");
}

/// A datagram with another Q_Key is dropped by each attached QP and counted.
#[test]
fn attached_qps_check_the_qkey() {
    let mut sim = Sim::new(4, LinkConfig::clean());
    let (a, b) = (node(&mut sim.engines[0], 1), node(&mut sim.engines[1], 2));
    b.post_recvs(&mut sim.engines[1], 2);
    for qp in &b.qps {
        sim.engines[1].attach_mcast(qp.qpn, GROUP).unwrap();
    }
    send_to_group(&mut sim, &a, 0x0bad_0bad);
    assert_eq!(b.received(&mut sim.engines[1], a.qps[0].qpn), [0, 0]);
    assert_eq!(sim.engines[1].counters().get(Counter::QkeyViolation), 2);
    // A datagram for a group nobody here attached to is dropped and counted.
    for qp in &b.qps {
        sim.engines[1].detach_mcast(qp.qpn, GROUP).unwrap();
    }
    let mut datagram = vec![0u8; 64];
    let mut repr = uroce_transport::wire::RoceRepr::new(uroce_transport::wire::BthRepr::new(
        uroce_transport::wire::Opcode::UdSendOnly,
        MULTICAST_QPN,
        uroce_transport::Psn::new(1),
    ));
    repr.deth = Some(uroce_transport::wire::DethRepr { qkey: options().qkey, src_qp: 5, reserved: 0 });
    datagram.resize(repr.buffer_len(0), 0);
    repr.emit(&mut datagram, &[]);
    let meta = uroce_transport::engine::RxMeta { src_gid: sim.gids[0], dst_gid: GROUP, icrc_skipped: false };
    sim.engines[1].handle_packet(sim.now, meta, &datagram);
    assert_eq!(sim.engines[1].counters().get(Counter::McastNoGroup), 1);
}

/// Over a link that loses a fifth of its packets, the attached QPs of the
/// other engine get what arrives, and never a datagram twice.
#[test]
fn multicast_under_loss_delivers_each_datagram_at_most_once_per_qp() {
    let link = LinkConfig { loss: 0.2, ..LinkConfig::clean() };
    let mut sim = Sim::new(5, link);
    let (a, b) = (node(&mut sim.engines[0], 1), node(&mut sim.engines[1], 3));
    b.post_recvs(&mut sim.engines[1], 16);
    for qp in &b.qps {
        sim.engines[1].attach_mcast(qp.qpn, GROUP).unwrap();
    }
    for _ in 0..16 {
        send_to_group(&mut sim, &a, options().qkey);
    }
    let got = b.received(&mut sim.engines[1], a.qps[0].qpn);
    // One copy crosses the link per datagram: the three QPs see the same ones.
    assert!(got.iter().all(|&n| n == got[0] && n < 16 && n > 0), "{got:?}");
    assert_eq!(sim.stats.lost as usize, 16 - got[0]);
}

#[test]
fn attach_takes_ud_qps_and_multicast_gids_within_rxes_limits() {
    let mut e = Engine::new(Default::default());
    let ud = create_endpoint(&mut e, &options(), None, None);
    let rc = create_endpoint(&mut e, &QpOptions::new(QpType::Rc, Mtu::Mtu1024), Some(ud.pd), None);
    assert!(matches!(e.attach_mcast(rc.qpn, GROUP), Err(Error::InvalidOperation { .. })));
    let unicast = Gid::from_ipv4([10, 0, 0, 9]);
    assert_eq!(e.attach_mcast(ud.qpn, unicast), Err(Error::NotMulticast(unicast)));
    assert_eq!(e.detach_mcast(ud.qpn, GROUP), Err(Error::NotAttached { qpn: ud.qpn, gid: GROUP }));
    let v6: Gid = Gid("ff0e::8:9".parse::<std::net::Ipv6Addr>().unwrap().octets());
    e.attach_mcast(ud.qpn, v6).unwrap();
    e.attach_mcast(ud.qpn, v6).unwrap();
    let mut qps = vec![ud];
    while qps.len() < MAX_MCAST_QP_ATTACH {
        qps.push(create_endpoint(&mut e, &options(), Some(ud.pd), None));
        e.attach_mcast(qps.last().unwrap().qpn, v6).unwrap();
    }
    let one_more = create_endpoint(&mut e, &options(), Some(ud.pd), None);
    assert!(matches!(e.attach_mcast(one_more.qpn, v6), Err(Error::McastLimit(_))));
    // Destroying a QP detaches it.
    e.destroy_qp(ud.qpn).unwrap();
    e.attach_mcast(one_more.qpn, v6).unwrap();
}
