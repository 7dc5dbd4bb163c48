//! Verbs semantics a user relies on, each shown over the simulated link:
//! completions (signaled, sq_sig_all), inline data, multi-SGE, fences, the
//! read/atomic limits, SQD/SQE, UC and UD loss rules, ACK behaviour, the
//! timers, the counters and the seed.

use core::time::Duration;
use std::sync::{Arc, Mutex};
use uroce_transport::engine::{
    required_mask, AccessFlags, AddressVector, Counter, Engine, EngineConfig, Error, Gid, Mtu, NetworkHdr, QpAttr,
    QpAttrMask, QpState, QpType, RecvWr, SendFlags, SendWr, Sge, UdDest, WcOpcode, WcStatus, WorkCompletion, WrOp,
    MAX_PACKET_LEN,
};
use uroce_transport::sim::probe::{drain_packets, parse, poll_all, read_mr, record};
use uroce_transport::sim::{create_endpoint, create_qp_on, ready_ud, LinkConfig, Pair, QpOptions, REGION_ACCESS};
use uroce_transport::wire::{BthRepr, DethRepr, Opcode, RoceRepr};
use uroce_transport::{Psn, Seed};

/// Node 0's source region at 0x1000 holds `src_bytes(0, REGION)`, node 1's
/// destination region at 0x8000 zeros.
const REGION: usize = 65536;

fn pair_with(o: QpOptions) -> Pair {
    Pair::new(21, &o).with_regions(src_bytes(0, REGION), vec![0u8; REGION])
}

fn pair(t: QpType) -> Pair {
    pair_with(QpOptions::new(t, Mtu::Mtu1024))
}

fn src_bytes(off: usize, len: usize) -> Vec<u8> {
    (off..off + len).map(|i| (i % 251) as u8).collect()
}

fn quiesce(p: &mut Pair) {
    p.sim.run_until(1_000_000, Duration::from_millis(50), |_| false);
}

fn ids(wcs: &[WorkCompletion]) -> Vec<(u64, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

fn write_wr(p: &Pair, id: u64, off: u64, len: u32) -> SendWr {
    SendWr::new(
        id,
        WrOp::RdmaWrite { remote_addr: 0x8000 + off, rkey: p.dst },
        vec![Sge { addr: 0x1000 + off, length: len, lkey: p.src }],
    )
}

#[test]
fn sq_sig_all_completes_unsignaled_work_requests_too() {
    for sig_all in [false, true] {
        let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
        o.sq_sig_all = sig_all;
        let mut p = pair_with(o);
        for id in 0..4 {
            let mut wr = write_wr(&p, id, 64 * id, 64);
            wr.flags = if id == 2 { SendFlags::SIGNALED } else { SendFlags::EMPTY };
            p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
        }
        quiesce(&mut p);
        let got: Vec<u64> = poll_all(&mut p.sim.engines[0], p.a.send_cq).iter().map(|w| w.wr_id).collect();
        assert_eq!(got, if sig_all { vec![0, 1, 2, 3] } else { vec![2] }, "sq_sig_all {sig_all}");
        assert_eq!(read_mr(&p.sim.engines[1], p.dst, 0, 256), src_bytes(0, 256));
    }
}

#[test]
fn inline_data_is_copied_when_posted() {
    let mut p = pair(QpType::Rc);
    let sge = Sge { addr: 0x8000, length: 256, lkey: p.dst };
    p.sim.engines[1].post_recv(p.b.qpn, RecvWr { wr_id: 1, sg_list: sge.into() }).unwrap();
    let mut wr = SendWr::new(1, WrOp::Send, vec![Sge { addr: 0x1000, length: 100, lkey: p.src }]);
    wr.flags |= SendFlags::INLINE;
    p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    // The user reuses the buffer at once: the message is what it held at post.
    p.sim.engines[0].mr_mut(p.src).unwrap().write(0, &[0xee; 100]);
    let mut wr = write_wr(&p, 2, 0, 100);
    wr.flags |= SendFlags::INLINE;
    wr.op = WrOp::RdmaWrite { remote_addr: 0x9000, rkey: p.dst };
    p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    quiesce(&mut p);
    assert_eq!(ids(&poll_all(&mut p.sim.engines[0], p.a.send_cq)), [(1, WcStatus::Success), (2, WcStatus::Success)]);
    assert_eq!(read_mr(&p.sim.engines[1], p.dst, 0, 100), src_bytes(0, 100));
    assert_eq!(read_mr(&p.sim.engines[1], p.dst, 0x1000, 100), vec![0xee; 100]);
    // More than max_inline_data is refused at post, as ibv_post_send does.
    let mut wr = SendWr::new(3, WrOp::Send, vec![Sge { addr: 0x1000, length: 257, lkey: p.src }]);
    wr.flags |= SendFlags::INLINE;
    assert_eq!(p.sim.engines[0].post_send(p.a.qpn, wr), Err(Error::InlineTooLong { given: 257, max: 256 }));
}

#[test]
fn multi_sge_gathers_and_scatters_across_regions() {
    let mut p = pair(QpType::Rc);
    let src2 = p.sim.engines[0].reg_mr(p.a.pd, 0x10_0000, Box::new(vec![0x77u8; 4096]), REGION_ACCESS).unwrap().lkey;
    let dst2 = p.sim.engines[1].reg_mr(p.b.pd, 0x20_0000, Box::new(vec![0u8; 8192]), REGION_ACCESS).unwrap().lkey;
    // 3000 bytes: 1500 from one region, nothing, 1000 from another, 500 more.
    let gather = vec![
        Sge { addr: 0x1000, length: 1500, lkey: p.src },
        Sge { addr: 0x1000, length: 0, lkey: 0 },
        Sge { addr: 0x10_0000, length: 1000, lkey: src2 },
        Sge { addr: 0x1000 + 2000, length: 500, lkey: p.src },
    ];
    let mut want = src_bytes(0, 1500);
    want.extend(vec![0x77; 1000]);
    want.extend(src_bytes(2000, 500));
    let scatter = vec![
        Sge { addr: 0x8000, length: 700, lkey: p.dst },
        Sge { addr: 0x20_0000, length: 1800, lkey: dst2 },
        Sge { addr: 0x8000 + 4000, length: 600, lkey: p.dst },
    ];
    p.sim.engines[1].post_recv(p.b.qpn, RecvWr { wr_id: 9, sg_list: scatter.into() }).unwrap();
    p.sim.engines[0].post_send(p.a.qpn, SendWr::new(1, WrOp::Send, gather.clone())).unwrap();
    // And a READ of the same 3000 bytes back into three local pieces.
    let back = p.sim.engines[0].reg_mr(p.a.pd, 0x30_0000, Box::new(vec![0u8; 4096]), REGION_ACCESS).unwrap().lkey;
    let pieces = vec![
        Sge { addr: 0x30_0000, length: 1, lkey: back },
        Sge { addr: 0x30_0000 + 100, length: 2998, lkey: back },
        Sge { addr: 0x30_0000 + 3500, length: 1, lkey: back },
    ];
    p.sim.engines[1].mr_mut(dst2).unwrap().write(4096, &want);
    let read_wr = SendWr::new(2, WrOp::RdmaRead { remote_addr: 0x20_0000 + 4096, rkey: dst2 }, pieces);
    p.sim.engines[0].post_send(p.a.qpn, read_wr).unwrap();
    quiesce(&mut p);
    let r = poll_all(&mut p.sim.engines[1], p.b.recv_cq);
    assert_eq!((r[0].status, r[0].byte_len), (WcStatus::Success, 3000));
    let mut got = read_mr(&p.sim.engines[1], p.dst, 0, 700);
    got.extend(read_mr(&p.sim.engines[1], dst2, 0, 1800));
    got.extend(read_mr(&p.sim.engines[1], p.dst, 4000, 500));
    assert!(got == want, "the SEND scattered");
    assert_eq!(read_mr(&p.sim.engines[1], p.dst, 4500, 100), vec![0; 100], "nothing past the message");
    let s = poll_all(&mut p.sim.engines[0], p.a.send_cq);
    assert_eq!(ids(&s), [(1, WcStatus::Success), (2, WcStatus::Success)]);
    assert_eq!(s[1].byte_len, 3000);
    let mut back_bytes = read_mr(&p.sim.engines[0], back, 0, 1);
    back_bytes.extend(read_mr(&p.sim.engines[0], back, 100, 2998));
    back_bytes.extend(read_mr(&p.sim.engines[0], back, 3500, 1));
    assert!(back_bytes == want, "the READ scattered");
    assert_eq!(read_mr(&p.sim.engines[0], back, 1, 99), vec![0; 99], "gaps between SGEs untouched");
}

#[test]
fn a_fence_holds_a_request_until_the_read_before_it_completes() {
    for fence in [false, true] {
        let mut p = pair(QpType::Rc);
        let read_wr = SendWr::new(
            1,
            WrOp::RdmaRead { remote_addr: 0x8000, rkey: p.dst },
            vec![Sge { addr: 0x1000, length: 8192, lkey: p.src }],
        );
        p.sim.engines[0].post_send(p.a.qpn, read_wr).unwrap();
        let mut w = write_wr(&p, 2, 0x9000, 8);
        w.op = WrOp::RdmaWrite { remote_addr: 0x8000 + 0x9000, rkey: p.dst };
        if fence {
            w.flags |= SendFlags::FENCE;
        }
        p.sim.engines[0].post_send(p.a.qpn, w).unwrap();
        let log = record(&mut p.sim);
        quiesce(&mut p);
        let log = log.lock().unwrap();
        let pos = |f: &dyn Fn(&(usize, RoceRepr)) -> bool| log.iter().position(f).unwrap();
        let write_at = pos(&|(to, r)| *to == 1 && r.bth.opcode == Opcode::RcWriteOnly);
        let read_done_at = pos(&|(to, r)| *to == 0 && r.bth.opcode == Opcode::RcReadResponseLast);
        assert_eq!(write_at > read_done_at, fence, "fence {fence}: write at {write_at}, read done at {read_done_at}");
        assert_eq!(
            ids(&poll_all(&mut p.sim.engines[0], p.a.send_cq)),
            [(1, WcStatus::Success), (2, WcStatus::Success)]
        );
    }
}

#[test]
fn max_rd_atomic_bounds_the_reads_and_atomics_in_flight() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.max_rd_atomic = 3;
    let mut p = pair_with(o);
    for id in 0..20u64 {
        let op = if id % 4 == 3 {
            WrOp::AtomicFetchAdd { remote_addr: 0x8000 + 0x8000, rkey: p.dst, add: 1 }
        } else {
            WrOp::RdmaRead { remote_addr: 0x8000 + 100 * id, rkey: p.dst }
        };
        let len = if op.is_atomic() { 8 } else { 100 };
        let sge = Sge { addr: 0x1000 + 128 * id, length: len, lkey: p.src };
        p.sim.engines[0].post_send(p.a.qpn, SendWr::new(id, op, vec![sge])).unwrap();
    }
    let log = record(&mut p.sim);
    quiesce(&mut p);
    let (mut in_flight, mut most) = (0i32, 0i32);
    for (to, r) in log.lock().unwrap().iter() {
        match (to, r.bth.opcode) {
            (1, Opcode::RcReadRequest | Opcode::RcFetchAdd) => in_flight += 1,
            (0, Opcode::RcReadResponseOnly | Opcode::RcAtomicAck) => in_flight -= 1,
            _ => {}
        }
        most = most.max(in_flight);
    }
    assert_eq!(most, 3, "never more than max_rd_atomic, and the limit is used");
    assert_eq!(poll_all(&mut p.sim.engines[0], p.a.send_cq).len(), 20);
}

#[test]
fn max_dest_rd_atomic_resources_are_recycled_oldest_first() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.max_dest_rd_atomic = 2;
    let mut p = pair_with(o);
    for id in 0..3u64 {
        let wr = SendWr::new(
            id,
            WrOp::RdmaRead { remote_addr: 0x8000, rkey: p.dst },
            vec![Sge { addr: 0x1000, length: 16, lkey: p.src }],
        );
        p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    }
    let reqs = drain_packets(&mut p.sim.engines[0]);
    assert_eq!(reqs.len(), 3);
    // Each answered before the next comes (three at once would break the
    // responder's limit of 2: tests/security.rs).
    for r in &reqs {
        p.sim.inject(1, r);
        assert_eq!(drain_packets(&mut p.sim.engines[1]).len(), 1);
    }
    // The oldest READ's resource was recycled: its duplicate goes unanswered
    // (rxe's class D drop); the newer two are replayed.
    let replies: Vec<usize> = reqs
        .iter()
        .map(|r| {
            p.sim.inject(1, r);
            drain_packets(&mut p.sim.engines[1]).len()
        })
        .collect();
    assert_eq!(replies, [0, 1, 1]);
}

#[test]
fn sqd_reports_draining_until_the_started_work_is_acknowledged() {
    let mut p = pair(QpType::Rc);
    p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 1, 0, 4000)).unwrap();
    p.sim.transmit_all();
    let sqd = QpAttr { qp_state: QpState::Sqd, ..QpAttr::default() };
    p.sim.engines[0].modify_qp(p.a.qpn, &sqd, QpAttrMask::STATE).unwrap();
    let q = p.sim.engines[0].query_qp(p.a.qpn).unwrap();
    assert_eq!((q.qp_state, q.sq_draining), (QpState::Sqd, true));
    quiesce(&mut p);
    let q = p.sim.engines[0].query_qp(p.a.qpn).unwrap();
    assert_eq!((q.qp_state, q.sq_draining), (QpState::Sqd, false));
    // SQD -> SQD may change the timers and limits; SQD -> RTS resumes.
    let mut a = QpAttr { qp_state: QpState::Sqd, timeout: 12, retry_cnt: 3, ..QpAttr::default() };
    p.sim.engines[0].modify_qp(p.a.qpn, &a, QpAttrMask::STATE | QpAttrMask::TIMEOUT | QpAttrMask::RETRY_CNT).unwrap();
    assert_eq!(p.sim.engines[0].query_qp(p.a.qpn).unwrap().timeout, 12);
    a.qp_state = QpState::Rts;
    p.sim.engines[0].modify_qp(p.a.qpn, &a, QpAttrMask::STATE).unwrap();
    p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 2, 4000, 10)).unwrap();
    quiesce(&mut p);
    assert_eq!(ids(&poll_all(&mut p.sim.engines[0], p.a.send_cq)), [(1, WcStatus::Success), (2, WcStatus::Success)]);
}

#[test]
fn a_uc_local_error_moves_the_send_queue_to_sqe_and_back() {
    let mut p = pair(QpType::Uc);
    let sge = Sge { addr: 0x8000, length: 4096, lkey: p.dst };
    for id in 0..2 {
        p.sim.engines[1].post_recv(p.b.qpn, RecvWr { wr_id: 100 + id, sg_list: sge.into() }).unwrap();
    }
    let bad = SendWr::new(1, WrOp::Send, vec![Sge { addr: 0x1000, length: 8, lkey: p.src ^ 0x100 }]);
    p.sim.engines[0].post_send(p.a.qpn, bad).unwrap();
    p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 2, 0, 8)).unwrap();
    quiesce(&mut p);
    assert_eq!(p.sim.engines[0].query_qp(p.a.qpn).unwrap().qp_state, QpState::Sqe);
    assert_eq!(
        ids(&poll_all(&mut p.sim.engines[0], p.a.send_cq)),
        [(1, WcStatus::LocProtErr), (2, WcStatus::WrFlushErr)]
    );
    // Posting in SQE flushes at once; the receive side lives on.
    p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 3, 0, 8)).unwrap();
    assert_eq!(ids(&poll_all(&mut p.sim.engines[0], p.a.send_cq)), [(3, WcStatus::WrFlushErr)]);
    let back = SendWr::new(7, WrOp::Send, vec![Sge { addr: 0x8000, length: 5, lkey: p.dst }]);
    let rsge = Sge { addr: 0x1000 + 0x8000, length: 64, lkey: p.src };
    p.sim.engines[0].post_recv(p.a.qpn, RecvWr { wr_id: 70, sg_list: rsge.into() }).unwrap();
    p.sim.engines[1].post_send(p.b.qpn, back).unwrap();
    quiesce(&mut p);
    assert_eq!(ids(&poll_all(&mut p.sim.engines[0], p.a.recv_cq)), [(70, WcStatus::Success)]);
    // SQE -> RTS, and the send queue works again (RC has no SQE: ERR instead).
    let rts = QpAttr { qp_state: QpState::Rts, ..QpAttr::default() };
    p.sim.engines[0].modify_qp(p.a.qpn, &rts, QpAttrMask::STATE).unwrap();
    let ok = SendWr::new(4, WrOp::Send, vec![Sge { addr: 0x1000, length: 300, lkey: p.src }]);
    p.sim.engines[0].post_send(p.a.qpn, ok).unwrap();
    quiesce(&mut p);
    assert_eq!(ids(&poll_all(&mut p.sim.engines[0], p.a.send_cq)), [(4, WcStatus::Success)]);
    let r = poll_all(&mut p.sim.engines[1], p.b.recv_cq);
    assert_eq!((r[0].wr_id, r[0].byte_len), (100, 300));
    assert_eq!(read_mr(&p.sim.engines[1], p.dst, 0, 300), src_bytes(0, 300));
}

#[test]
fn uc_loses_a_whole_message_with_one_packet_and_reuses_its_receive() {
    let mut p = pair(QpType::Uc);
    let sge = |i: u64| Sge { addr: 0x8000 + 4096 * i, length: 4096, lkey: p.dst };
    for id in 0..2 {
        p.sim.engines[1].post_recv(p.b.qpn, RecvWr { wr_id: 100 + id, sg_list: sge(id).into() }).unwrap();
    }
    // Two 3-packet SENDs; the link loses the MIDDLE of the first.
    let mut middles = 0;
    p.sim.drop_if = Some(Box::new(move |to, data| {
        let hit = to == 1 && parse(data).bth.opcode == Opcode::UcSendMiddle;
        middles += usize::from(hit);
        hit && middles == 1
    }));
    for id in 0..2u64 {
        let wr = SendWr::new(id, WrOp::Send, vec![Sge { addr: 0x1000 + 3000 * id, length: 3000, lkey: p.src }]);
        p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    }
    quiesce(&mut p);
    assert_eq!(ids(&poll_all(&mut p.sim.engines[0], p.a.send_cq)), [(0, WcStatus::Success), (1, WcStatus::Success)]);
    let r = poll_all(&mut p.sim.engines[1], p.b.recv_cq);
    assert_eq!(r.iter().map(|w| (w.wr_id, w.byte_len)).collect::<Vec<_>>(), [(100, 3000)]);
    assert!(read_mr(&p.sim.engines[1], p.dst, 0, 3000) == src_bytes(3000, 3000), "the second message, whole");
}

#[test]
fn ud_messages_above_the_mtu_are_not_sent_and_not_received() {
    let mut o = QpOptions::new(QpType::Ud, Mtu::Mtu1024);
    o.sq_sig_all = true;
    let mut p = pair_with(o);
    let rsge = Sge { addr: 0x8000, length: 4096, lkey: p.dst };
    p.sim.engines[1].post_recv(p.b.qpn, RecvWr { wr_id: 1, sg_list: rsge.into() }).unwrap();
    let dest = UdDest { dgid: p.sim.gids[1], remote_qpn: p.b.qpn, remote_qkey: o.qkey };
    for (id, len) in [(1u64, 1025u32), (2, 1024)] {
        let mut wr = SendWr::new(id, WrOp::Send, vec![Sge { addr: 0x1000, length: len, lkey: p.src }]);
        wr.ud = Some(dest);
        p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    }
    quiesce(&mut p);
    // C10-93.1.1, as rxe: nothing goes out and no error is reported.
    assert_eq!(p.sim.stats.sent, 1, "only the 1024-byte message left");
    assert_eq!(ids(&poll_all(&mut p.sim.engines[0], p.a.send_cq)), [(1, WcStatus::Success), (2, WcStatus::Success)]);
    let r = poll_all(&mut p.sim.engines[1], p.b.recv_cq);
    assert_eq!((r.len(), r[0].byte_len), (1, 40 + 1024));
    // The GRH in front: an IPv4 header at byte 20 with both addresses.
    let grh = read_mr(&p.sim.engines[1], p.dst, 0, 40);
    assert_eq!((grh[20], &grh[32..36], &grh[36..40]), (0x45, &[10u8, 0, 0, 1][..], &[10u8, 0, 0, 2][..]));
    // A receiver drops a UD packet above its MTU.
    let rsge = Sge { addr: 0x8000 + 8192, length: 8192, lkey: p.dst };
    p.sim.engines[1].post_recv(p.b.qpn, RecvWr { wr_id: 2, sg_list: rsge.into() }).unwrap();
    let mut r = RoceRepr::new(BthRepr::new(Opcode::UdSendOnly, p.b.qpn, Psn::new(0)));
    r.deth = Some(DethRepr { qkey: o.qkey, src_qp: p.a.qpn, reserved: 0 });
    let mut pkt = vec![0u8; r.buffer_len(2048)];
    r.emit(&mut pkt, &[1; 2048]);
    p.sim.inject(1, &pkt);
    assert_eq!(p.sim.engines[1].cq_len(p.b.recv_cq), 0);
}

/// UD and UC have no RNR NAK: a datagram (or a UC SEND) for a QP with no
/// receive posted is dropped, the sender's completion is a success, and
/// the receiver counts the drop (`rcvd_no_recv`).
#[test]
fn messages_with_no_receive_posted_are_dropped_and_counted() {
    for t in [QpType::Ud, QpType::Uc] {
        let mut o = QpOptions::new(t, Mtu::Mtu1024);
        o.sq_sig_all = true;
        let mut p = pair_with(o);
        let rsge = Sge { addr: 0x8000, length: 4096, lkey: p.dst };
        p.sim.engines[1].post_recv(p.b.qpn, RecvWr { wr_id: 1, sg_list: rsge.into() }).unwrap();
        for id in 0..3u64 {
            let mut wr = SendWr::new(id, WrOp::Send, vec![Sge { addr: 0x1000, length: 64, lkey: p.src }]);
            if t == QpType::Ud {
                wr.ud = Some(UdDest { dgid: p.sim.gids[1], remote_qpn: p.b.qpn, remote_qkey: o.qkey });
            }
            p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
        }
        quiesce(&mut p);
        let sent = poll_all(&mut p.sim.engines[0], p.a.send_cq);
        assert!(sent.len() == 3 && sent.iter().all(|w| w.status == WcStatus::Success), "{t:?}: {sent:?}");
        assert_eq!(ids(&poll_all(&mut p.sim.engines[1], p.b.recv_cq)), [(1, WcStatus::Success)], "{t:?}");
        assert_eq!(p.sim.engines[1].counters().get(Counter::RcvdNoRecv), 2, "{t:?}");
    }
}

/// A QP destroyed or reset leaves none of its completions in its CQs (as
/// on mlx4/mlx5): a program frees what their `wr_id`s point at once the QP
/// is gone, and libfabric's rxm crashed on one polled afterwards. The
/// completions of another QP on the same CQ stay, in order.
#[test]
fn a_destroyed_or_reset_qp_leaves_no_completion_behind() {
    for destroy in [true, false] {
        let mut o = QpOptions::new(QpType::Ud, Mtu::Mtu1024);
        o.sq_sig_all = true;
        let mut p = pair_with(o);
        // A second UD QP on node 1, on the same CQs as the first.
        let e1 = &mut p.sim.engines[1];
        let other = create_qp_on(e1, &p.b, &o, None);
        ready_ud(e1, &other, &o);
        let targets = [p.b.qpn, other.qpn, p.b.qpn, other.qpn];
        for (id, &qpn) in targets.iter().enumerate() {
            let rsge = Sge { addr: 0x8000 + 1024 * id as u64, length: 1024, lkey: p.dst };
            p.sim.engines[1].post_recv(qpn, RecvWr { wr_id: id as u64, sg_list: rsge.into() }).unwrap();
            let mut wr = SendWr::new(id as u64, WrOp::Send, vec![Sge { addr: 0x1000, length: 64, lkey: p.src }]);
            wr.ud = Some(UdDest { dgid: p.sim.gids[1], remote_qpn: qpn, remote_qkey: o.qkey });
            p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
            quiesce(&mut p);
        }
        assert_eq!(p.sim.engines[1].cq_len(p.b.recv_cq), 4, "destroy {destroy}");
        let e1 = &mut p.sim.engines[1];
        if destroy {
            e1.destroy_qp(other.qpn).unwrap();
        } else {
            let reset = QpAttr { qp_state: QpState::Reset, ..QpAttr::default() };
            e1.modify_qp(other.qpn, &reset, QpAttrMask::STATE).unwrap();
        }
        let left = poll_all(e1, p.b.recv_cq);
        assert_eq!(ids(&left), [(0, WcStatus::Success), (2, WcStatus::Success)], "destroy {destroy}");
        assert!(left.iter().all(|w| w.qp_num == p.b.qpn), "destroy {destroy}: {left:?}");
        assert!(left.iter().all(|w| w.network_hdr == NetworkHdr::Ipv4), "{left:?}");
    }
}

/// A flow label is 20 bits, and the kernel takes any 32-bit value for one
/// (a NIC keeps the 20): UCX's rc_verbs passes 0xFFFFFFFF.
#[test]
fn a_flow_label_keeps_its_20_bits() {
    let o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    let mut e = Engine::new(EngineConfig::default());
    let ep = create_endpoint(&mut e, &o, None, None);
    let mask = |from, to| required_mask(QpType::Rc, from, to).unwrap();
    let mut attr = QpAttr { qp_state: QpState::Init, port_num: 1, ..QpAttr::default() };
    e.modify_qp(ep.qpn, &attr, mask(QpState::Reset, QpState::Init)).unwrap();
    attr.qp_state = QpState::Rtr;
    (attr.path_mtu, attr.dest_qp_num, attr.max_dest_rd_atomic) = (Mtu::Mtu1024, 0x12, 1);
    attr.ah_attr =
        AddressVector { dgid: Gid::from_ipv4([10, 0, 0, 2]), port_num: 1, flow_label: u32::MAX, ..Default::default() };
    e.modify_qp(ep.qpn, &attr, mask(QpState::Init, QpState::Rtr)).unwrap();
    assert_eq!(e.query_qp(ep.qpn).unwrap().ah_attr.flow_label, 0xf_ffff);
}

#[test]
fn a_link_mtu_below_the_path_mtu_loses_every_full_packet() {
    for (path, want) in [(Mtu::Mtu4096, WcStatus::RetryExcErr), (Mtu::Mtu1024, WcStatus::Success)] {
        let mut o = QpOptions::new(QpType::Rc, path);
        o.retry_cnt = 2;
        o.timeout = 8;
        let mut p = pair_with(o);
        p.sim.link.mtu = 1500;
        p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 1, 0, 8000)).unwrap();
        quiesce(&mut p);
        let w = poll_all(&mut p.sim.engines[0], p.a.send_cq);
        assert_eq!(ids(&w), [(1, want)], "path MTU {}", path.bytes());
        assert_eq!(p.sim.stats.dropped_mtu > 0, want != WcStatus::Success);
    }
}

#[test]
fn psns_wrap_around_24_bits() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu256);
    o.start_psn = Some(Psn::MASK - 20);
    let mut p = pair_with(o);
    let mut link = LinkConfig::clean();
    link.loss = 0.02;
    p.sim.link = link;
    let sge = Sge { addr: 0x8000, length: 20_000, lkey: p.dst };
    p.sim.engines[1].post_recv(p.b.qpn, RecvWr { wr_id: 1, sg_list: sge.into() }).unwrap();
    p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 1, 20_000, 20_000)).unwrap();
    let back = p.sim.engines[0].reg_mr(p.a.pd, 0x40_0000, Box::new(vec![0u8; 20_000]), REGION_ACCESS).unwrap().lkey;
    let rd = WrOp::RdmaRead { remote_addr: 0x8000 + 20_000, rkey: p.dst };
    p.sim.engines[0]
        .post_send(p.a.qpn, SendWr::new(2, rd, vec![Sge { addr: 0x40_0000, length: 20_000, lkey: back }]))
        .unwrap();
    p.sim.engines[0]
        .post_send(p.a.qpn, SendWr::new(3, WrOp::Send, vec![Sge { addr: 0x1000, length: 20_000, lkey: p.src }]))
        .unwrap();
    p.sim.run_until(10_000_000, Duration::from_secs(60), |s| s.engines[0].cq_len(p.a.send_cq) == 3);
    assert_eq!(
        ids(&poll_all(&mut p.sim.engines[0], p.a.send_cq)),
        [(1, WcStatus::Success), (2, WcStatus::Success), (3, WcStatus::Success)]
    );
    assert_eq!(read_mr(&p.sim.engines[0], back, 0, 20_000), src_bytes(20_000, 20_000));
    assert_eq!(read_mr(&p.sim.engines[1], p.dst, 0, 20_000), src_bytes(0, 20_000));
    assert!(p.sim.stats.lost > 0, "the wrap happened under loss");
}

#[test]
fn an_ack_is_requested_every_64_packets_and_at_the_end() {
    let mut p = pair_with(QpOptions::new(QpType::Rc, Mtu::Mtu256));
    p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 1, 0, 150 * 256)).unwrap();
    let log = record(&mut p.sim);
    quiesce(&mut p);
    let log = log.lock().unwrap();
    let reqs: Vec<_> = log.iter().filter(|(to, _)| *to == 1).map(|(_, r)| r).collect();
    assert_eq!(reqs.len(), 150);
    let asked: Vec<usize> = reqs.iter().enumerate().filter(|(_, r)| r.bth.ack_req).map(|(i, _)| i).collect();
    assert_eq!(asked, [63, 127, 149]);
    let acks: Vec<Psn> = log.iter().filter(|(to, _)| *to == 0).map(|(_, r)| r.bth.psn).collect();
    assert_eq!(acks, asked.iter().map(|&i| reqs[i].bth.psn).collect::<Vec<_>>(), "each one answered");
}

#[test]
fn acks_waiting_to_be_sent_are_coalesced_into_one() {
    let mut p = pair(QpType::Rc);
    for id in 0..5 {
        let sge = Sge { addr: 0x8000 + 64 * id, length: 64, lkey: p.dst };
        p.sim.engines[1].post_recv(p.b.qpn, RecvWr { wr_id: id, sg_list: sge.into() }).unwrap();
        let wr = SendWr::new(id, WrOp::Send, vec![Sge { addr: 0x1000, length: 10, lkey: p.src }]);
        p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    }
    let reqs = drain_packets(&mut p.sim.engines[0]);
    assert_eq!(reqs.len(), 5);
    for r in &reqs {
        p.sim.inject(1, r);
    }
    let acks = drain_packets(&mut p.sim.engines[1]);
    assert_eq!(acks.len(), 1, "one ACK for five messages");
    let ack = parse(&acks[0]);
    assert_eq!((ack.bth.psn, ack.aeth.unwrap().msn), (parse(&reqs[4]).bth.psn, 5));
    assert_eq!(p.sim.engines[1].counters().get(Counter::AckDeferred), 4);
    p.sim.inject(0, &acks[0]);
    assert_eq!(poll_all(&mut p.sim.engines[0], p.a.send_cq).len(), 5, "the one ACK completes all five");
}

#[test]
fn the_requester_waits_the_rnr_timer_it_was_given() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.min_rnr_timer = 14; // 1.28 ms
    let mut p = pair_with(o);
    p.sim.engines[0].post_send(p.a.qpn, SendWr::new(1, WrOp::Send, vec![])).unwrap();
    p.sim.run_until(10_000, Duration::from_secs(1), |s| s.engines[0].counters().get(Counter::RcvdRnrErr) == 1);
    let nak_at = p.sim.now;
    let before = p.sim.engines[1].counters().get(Counter::RcvdPkts);
    p.sim.run_until(10_000, Duration::from_secs(1), |s| s.engines[1].counters().get(Counter::RcvdPkts) > before);
    let waited = p.sim.now - nak_at;
    // The wait, then one trip over the link (5 us and a few ns of serialisation).
    assert!(waited >= Duration::from_micros(1280) && waited < Duration::from_micros(1290), "{waited:?}");
}

#[test]
fn counters_count_what_rxe_counts() {
    let mut p = pair(QpType::Rc);
    for id in 0..3u64 {
        let sge = Sge { addr: 0x8000 + 4096 * id, length: 4096, lkey: p.dst };
        p.sim.engines[1].post_recv(p.b.qpn, RecvWr { wr_id: id, sg_list: sge.into() }).unwrap();
        let mut wr = SendWr::new(id, WrOp::Send, vec![Sge { addr: 0x1000, length: 2000, lkey: p.src }]);
        wr.flags = SendFlags::EMPTY;
        p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    }
    p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 3, 0x9000, 10)).unwrap();
    // The link loses the second packet of the first message once.
    let mut seen = 0;
    p.sim.drop_if = Some(Box::new(move |to, data| {
        seen += usize::from(to == 1 && parse(data).bth.opcode == Opcode::RcSendLast);
        to == 1 && seen == 1 && parse(data).bth.opcode == Opcode::RcSendLast
    }));
    quiesce(&mut p);
    let (c0, c1) = (p.sim.engines[0].counters().clone(), p.sim.engines[1].counters().clone());
    let s = p.sim.stats;
    assert_eq!(c0.get(Counter::SentPkts) + c1.get(Counter::SentPkts), s.sent);
    assert_eq!(c0.get(Counter::RcvdPkts) + c1.get(Counter::RcvdPkts), s.delivered);
    assert_eq!(c0.get(Counter::RdmaSends), 3, "SEND WRs completed, signaled or not");
    assert_eq!(c1.get(Counter::RdmaRecvs), 3, "receives completed");
    assert_eq!(c1.get(Counter::OutOfSeqRequest), 1, "the FIRST of message 2 came after a gap");
    assert_eq!(c0.get(Counter::RcvdSeqErr), 1, "its NAK acknowledged the FIRST of message 1");
    assert_eq!(c0.get(Counter::CompleterRetryErr), 1, "one go-back-N");
    assert!(c1.get(Counter::DuplicateRequest) == 0 && c0.get(Counter::RetryExceededErr) == 0);
    let names: Vec<&str> = c0.iter().map(|(n, _)| n).take(Counter::RXE_COUNT).collect();
    assert_eq!(
        names,
        [
            "sent_pkts",
            "rcvd_pkts",
            "duplicate_request",
            "out_of_seq_request",
            "rcvd_rnr_err",
            "send_rnr_err",
            "rcvd_seq_err",
            "ack_deferred",
            "retry_exceeded_err",
            "retry_rnr_exceeded_err",
            "completer_retry_err",
            "send_err",
            "link_downed",
            "rdma_sends",
            "rdma_recvs"
        ],
        "rxe_hw_counters.c, in its order"
    );
}

#[test]
fn qp_numbers_psns_and_keys_come_from_the_seed() {
    let draw = |seed: u64| {
        let mut e = Engine::new(EngineConfig {
            seed: Seed::Fixed(seed),
            gid: Gid::from_ipv4([10, 0, 0, 1]),
            ..Default::default()
        });
        let o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
        let ep = create_endpoint(&mut e, &o, None, None);
        let key = e.reg_mr(ep.pd, 0, Box::new(vec![0u8; 8]), REGION_ACCESS).unwrap().lkey;
        (ep.qpn, e.random_psn(), e.random_psn(), key)
    };
    assert_eq!(draw(5), draw(5));
    assert_ne!(draw(5), draw(6));
    let (qpn, psn, _, _) = draw(5);
    assert!((0x11..=Psn::MASK).contains(&qpn) && psn <= Psn::MASK);
    // And a whole simulated run is a function of its seed.
    let run = |seed: u64| {
        let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
        o.sq_sig_all = true;
        let mut p = Pair::with_link(seed, LinkConfig { loss: 0.1, ..LinkConfig::clean() }, &o);
        let trace = Arc::new(Mutex::new(Vec::new()));
        let t = trace.clone();
        p.sim.tap = Some(Box::new(move |to, data| t.lock().unwrap().push((to, data.to_vec()))));
        let src = p.reg_mr(0, 0, vec![3u8; 50_000], REGION_ACCESS);
        let dst = p.reg_mr(1, 0, vec![0u8; 50_000], REGION_ACCESS);
        let Pair { mut sim, a, .. } = p;
        let wr = SendWr::new(
            1,
            WrOp::RdmaWrite { remote_addr: 0, rkey: dst },
            vec![Sge { addr: 0, length: 50_000, lkey: src }],
        );
        sim.engines[0].post_send(a.qpn, wr).unwrap();
        sim.run_until(1_000_000, Duration::from_secs(10), |s| s.engines[0].cq_len(a.send_cq) == 1);
        let wc = sim.engines[0].poll_cq(a.send_cq).unwrap();
        assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::RdmaWrite));
        let t = trace.lock().unwrap().clone();
        (t, sim.now, sim.stats)
    };
    assert!(run(9) == run(9), "same seed, same packets, same times");
    assert!(run(9) != run(10));
}

#[test]
fn attributes_modified_in_rts_take_effect() {
    // Access flags: the responder stops allowing remote writes.
    let mut p = pair(QpType::Rc);
    let a = QpAttr { qp_state: QpState::Rts, qp_access_flags: AccessFlags::REMOTE_READ, ..QpAttr::default() };
    p.sim.engines[1].modify_qp(p.b.qpn, &a, QpAttrMask::STATE | QpAttrMask::ACCESS_FLAGS).unwrap();
    assert_eq!(p.sim.engines[1].query_qp(p.b.qpn).unwrap().qp_access_flags, AccessFlags::REMOTE_READ);
    p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 1, 0, 8)).unwrap();
    quiesce(&mut p);
    assert_eq!(ids(&poll_all(&mut p.sim.engines[0], p.a.send_cq)), [(1, WcStatus::RemInvReqErr)]);

    // min_rnr_timer: the RNR NAK carries the new code.
    let mut p = pair(QpType::Rc);
    let a = QpAttr { qp_state: QpState::Rts, min_rnr_timer: 18, ..QpAttr::default() };
    p.sim.engines[1].modify_qp(p.b.qpn, &a, QpAttrMask::STATE | QpAttrMask::MIN_RNR_TIMER).unwrap();
    p.sim.engines[0].post_send(p.a.qpn, SendWr::new(1, WrOp::Send, vec![])).unwrap();
    let req = drain_packets(&mut p.sim.engines[0]);
    p.sim.inject(1, &req[0]);
    let nak = parse(&drain_packets(&mut p.sim.engines[1])[0]);
    assert_eq!(nak.aeth.unwrap().syndrome.to_byte(), 0x20 | 18, "RNR NAK with timer code 18");

    // Q_Key of a UD QP: messages under the old key are dropped afterwards.
    let mut o = QpOptions::new(QpType::Ud, Mtu::Mtu1024);
    o.sq_sig_all = true;
    let mut p = pair_with(o);
    let a = QpAttr { qp_state: QpState::Rts, qkey: 0x2222, ..QpAttr::default() };
    p.sim.engines[1].modify_qp(p.b.qpn, &a, QpAttrMask::STATE | QpAttrMask::QKEY).unwrap();
    let rsge = Sge { addr: 0x8000, length: 4096, lkey: p.dst };
    for id in 0..2 {
        p.sim.engines[1].post_recv(p.b.qpn, RecvWr { wr_id: id, sg_list: rsge.into() }).unwrap();
    }
    for (id, qkey) in [(1, o.qkey), (2, 0x2222)] {
        let mut wr = SendWr::new(id, WrOp::Send, vec![Sge { addr: 0x1000, length: 8, lkey: p.src }]);
        wr.ud = Some(UdDest { dgid: p.sim.gids[1], remote_qpn: p.b.qpn, remote_qkey: qkey });
        p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    }
    quiesce(&mut p);
    assert_eq!(poll_all(&mut p.sim.engines[1], p.b.recv_cq).len(), 1, "only the new Q_Key gets in");

    // The path MTU, destination and PSNs set on the way up are what query says.
    let p = pair_with(QpOptions { start_psn: Some(0x1234), ..QpOptions::new(QpType::Rc, Mtu::Mtu2048) });
    let q = p.sim.engines[0].query_qp(p.a.qpn).unwrap();
    assert_eq!((q.path_mtu, q.dest_qp_num, q.sq_psn, q.rq_psn), (Mtu::Mtu2048, p.b.qpn, 0x1234, 0x1234));
    assert_eq!((q.timeout, q.retry_cnt, q.rnr_retry, q.max_rd_atomic), (10, 7, 7, 16));
    assert_eq!(q.ah_attr.dgid, Gid::from_ipv4([10, 0, 0, 2]));
    // After traffic, the PSNs query reports are the live ones.
    let mut p = p;
    p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 1, 0, 5000)).unwrap();
    quiesce(&mut p);
    assert_eq!(p.sim.engines[0].query_qp(p.a.qpn).unwrap().sq_psn, 0x1234 + 3, "5000 bytes at 2048: 3 packets");
    assert_eq!(p.sim.engines[1].query_qp(p.b.qpn).unwrap().rq_psn, 0x1234 + 3);
}

#[test]
fn a_qp_on_an_srq_reports_its_last_wqe_and_leaves_the_srq_alone() {
    use uroce_transport::engine::{Event, SrqAttr};
    let o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    let (mut p, srq) = Pair::with_srq(4, &o, SrqAttr { max_wr: 2, max_sge: 1, srq_limit: 0 });
    let key = p.reg_mr(1, 0x8000, vec![0u8; 64], REGION_ACCESS);
    let Pair { mut sim, b, .. } = p;
    let wr = |id| RecvWr { wr_id: id, sg_list: Sge { addr: 0x8000, length: 64, lkey: key }.into() };
    sim.engines[1].post_srq_recv(srq, wr(1)).unwrap();
    sim.engines[1].post_srq_recv(srq, wr(2)).unwrap();
    assert!(matches!(sim.engines[1].post_srq_recv(srq, wr(3)), Err(Error::QueueFull { .. })));
    assert!(matches!(sim.engines[1].post_recv(b.qpn, wr(4)), Err(Error::InvalidOperation { .. })));
    let err = QpAttr { qp_state: QpState::Err, ..QpAttr::default() };
    sim.engines[1].modify_qp(b.qpn, &err, QpAttrMask::STATE).unwrap();
    assert_eq!(sim.engines[1].poll_event(), Some(Event::QpLastWqeReached { qpn: b.qpn, srq }));
    assert_eq!(sim.engines[1].srq_len(srq), 2, "the SRQ's receives belong to its other QPs");
    assert_eq!(sim.engines[1].cq_len(b.recv_cq), 0);
}

#[test]
fn a_qp_reset_with_requests_in_flight_gives_back_its_share_of_the_budget() {
    let mut p = pair(QpType::Rc);
    p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 1, 0, 8192)).unwrap();
    // Sent, not yet delivered: 8 PSNs unacknowledged.
    let sent = drain_packets(&mut p.sim.engines[0]);
    assert_eq!((sent.len(), p.sim.engines[0].inflight_psns()), (8, 8));
    assert!(p.sim.engines[0].poll_timeout().is_some(), "the retransmit timer runs");
    let reset = QpAttr { qp_state: QpState::Reset, ..QpAttr::default() };
    p.sim.engines[0].modify_qp(p.a.qpn, &reset, QpAttrMask::STATE).unwrap();
    assert_eq!(p.sim.engines[0].inflight_psns(), 0, "the reset QP still holds PSNs of the budget");
    // Its timer stopped: at the old deadline nothing is resent, and then
    // nothing is due any more.
    if let Some(at) = p.sim.engines[0].poll_timeout() {
        p.sim.engines[0].handle_timeout(at);
    }
    assert!(drain_packets(&mut p.sim.engines[0]).is_empty(), "the reset QP retransmitted");
    assert_eq!(p.sim.engines[0].poll_timeout(), None, "the reset QP's timer still runs");
}

#[test]
fn a_target_region_deregistered_in_mid_message_stops_the_write_with_a_remote_access_error() {
    let mut p = pair(QpType::Rc);
    p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 1, 0, 8192)).unwrap();
    let packets = drain_packets(&mut p.sim.engines[0]);
    p.sim.inject(1, &packets[0]);
    let before = read_mr(&p.sim.engines[1], p.dst, 0, 8192);
    let gone = p.sim.engines[1].dereg_mr(p.dst).unwrap();
    for pkt in &packets[1..] {
        p.sim.inject(1, pkt);
    }
    let mut after = vec![0u8; 8192];
    gone.read(0, &mut after);
    assert!(after == before, "a packet after deregistration was written");
    quiesce(&mut p);
    let cq = p.a.send_cq;
    assert_eq!(ids(&poll_all(&mut p.sim.engines[0], cq)), vec![(1, WcStatus::RemAccessErr)]);
}

#[test]
fn a_source_region_deregistered_in_mid_message_fails_the_request_locally() {
    let mut p = pair(QpType::Rc);
    p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 1, 0, 8192)).unwrap();
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let first = p.sim.engines[0].poll_transmit(uroce_transport::engine::Instant::ZERO, &mut buf).unwrap();
    p.sim.inject(1, &buf[..first.len]);
    p.sim.engines[0].dereg_mr(p.src).unwrap();
    quiesce(&mut p);
    let cq = p.a.send_cq;
    assert_eq!(ids(&poll_all(&mut p.sim.engines[0], cq)), vec![(1, WcStatus::LocProtErr)]);
}

/// What a QP about to be destroyed still owes its peer: the ACK of a WRITE
/// it took in, but not the READ responses queued behind it (the QP goes
/// away mid-answer, as an RNIC's would).
#[test]
fn a_qp_owes_its_acks_but_not_its_read_responses() {
    let mut p = pair(QpType::Rc);
    let read_wr = SendWr::new(
        2,
        WrOp::RdmaRead { remote_addr: 0x8000, rkey: p.dst },
        vec![Sge { addr: 0x1000, length: 4096, lkey: p.src }],
    );
    p.sim.engines[0].post_send(p.a.qpn, write_wr(&p, 1, 0, 8)).unwrap();
    p.sim.engines[0].post_send(p.a.qpn, read_wr).unwrap();
    for packet in drain_packets(&mut p.sim.engines[0]) {
        p.sim.inject(1, &packet);
    }
    let b = &mut p.sim.engines[1];
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let owed = b.poll_owed_ack(p.b.qpn, &mut buf).expect("the WRITE's ACK");
    let ack = parse(&buf[..owed.len]);
    assert_eq!((ack.bth.opcode, owed.ack_only), (Opcode::RcAck, true));
    assert!(b.poll_owed_ack(p.b.qpn, &mut buf).is_none(), "a READ response is not owed");
    assert_eq!(drain_packets(b).len(), 4, "the READ's responses stay for poll_transmit");
}
