//! What the engine puts on the wire, against the facts of real rxe traffic
//! (shared/captures/README.md), and the responder's answers to duplicates.

use core::time::Duration;
use uroce_transport::engine::{
    flow_label_of_qps, flow_label_to_udp_sport, ud_udp_sport, AccessFlags, Counter, Event, Mtu, QpAttr, QpAttrMask,
    QpState, QpType, RecvWr, SendFlags, SendWr, Sge, UdDest, WrOp, MAX_PACKET_LEN,
};
use uroce_transport::sim::probe::{drain_transmits, parse, record};
use uroce_transport::sim::{Pair, QpOptions, REGION_ACCESS};
use uroce_transport::wire::{AethSyndrome, Opcode, RocePacket};

const SEED: u64 = 11;

/// Node 0's source region at 0x1000 holds 16 KiB counting up (bytes `i as
/// u8`), node 1's destination region at 0x8000 16 KiB of zeros.
fn setup(o: QpOptions) -> Pair {
    let counting = (0..16384u32).map(|i| i as u8).collect();
    Pair::new(SEED, &o).with_regions(counting, vec![0u8; 16384])
}

#[test]
fn rc_send_is_segmented_acked_once_per_message_with_counting_msn() {
    let Pair { mut sim, a, b, src, dst } = setup(QpOptions::new(QpType::Rc, Mtu::Mtu1024));
    for i in 0..3u64 {
        let sge = Sge { addr: 0x8000 + 4096 * i, length: 4096, lkey: dst };
        sim.engines[1].post_recv(b.qpn, RecvWr { wr_id: i, sg_list: sge.into() }).unwrap();
        let wr = SendWr::new(i, WrOp::Send, vec![Sge { addr: 0x1000, length: 4096, lkey: src }]);
        sim.engines[0].post_send(a.qpn, wr).unwrap();
    }
    let log = record(&mut sim);
    sim.run_until(100_000, Duration::from_millis(10), |_| false);
    let log = log.lock().unwrap();
    let requests: Vec<_> = log.iter().filter(|(to, _)| *to == 1).map(|(_, r)| r).collect();
    let acks: Vec<_> = log.iter().filter(|(to, _)| *to == 0).map(|(_, r)| r).collect();
    assert_eq!(requests.len(), 12);
    for (i, r) in requests.iter().enumerate() {
        let want = [Opcode::RcSendFirst, Opcode::RcSendMiddle, Opcode::RcSendMiddle, Opcode::RcSendLast][i % 4];
        assert_eq!(r.bth.opcode, want);
        assert_eq!(r.bth.ack_req, i % 4 == 3, "AckReq only on the last packet");
        assert_eq!(r.bth.pkey, 0xffff);
        assert_eq!(r.bth.psn, requests[0].bth.psn + i as u32);
    }
    assert_eq!(acks.len(), 3, "one ACK a message");
    for (i, ack) in acks.iter().enumerate() {
        let aeth = ack.aeth.unwrap();
        assert_eq!(aeth.syndrome.to_byte(), 0x1f);
        assert_eq!(aeth.msn, i as u32 + 1);
        assert_eq!(ack.bth.psn, requests[4 * i + 3].bth.psn);
    }
}

#[test]
fn read_request_advances_the_psn_by_its_responses() {
    let Pair { mut sim, a, src, dst, .. } = setup(QpOptions::new(QpType::Rc, Mtu::Mtu1024));
    for i in 0..2u64 {
        let wr = SendWr::new(
            i,
            WrOp::RdmaRead { remote_addr: 0x8000, rkey: dst },
            vec![Sge { addr: 0x1000, length: 3000, lkey: src }],
        );
        sim.engines[0].post_send(a.qpn, wr).unwrap();
    }
    let log = record(&mut sim);
    sim.run_until(100_000, Duration::from_millis(10), |_| false);
    let log = log.lock().unwrap();
    let reqs: Vec<_> = log.iter().filter(|(to, _)| *to == 1).map(|(_, r)| r).collect();
    assert_eq!(reqs.len(), 2);
    assert!(reqs.iter().all(|r| r.bth.opcode == Opcode::RcReadRequest && r.bth.ack_req));
    assert_eq!(reqs[1].bth.psn, reqs[0].bth.psn + 3, "3000 bytes at MTU 1024: three responses");
    let resp: Vec<_> = log.iter().filter(|(to, _)| *to == 0).map(|(_, r)| r).collect();
    let ops: Vec<_> = resp.iter().map(|r| (r.bth.opcode, r.aeth.is_some())).collect();
    let one = [
        (Opcode::RcReadResponseFirst, true),
        (Opcode::RcReadResponseMiddle, false),
        (Opcode::RcReadResponseLast, true),
    ];
    assert_eq!(ops, [one, one].concat());
}

#[test]
fn udp_source_ports_follow_rxe() {
    let Pair { mut sim, a, b, src, dst } = setup(QpOptions::new(QpType::Rc, Mtu::Mtu1024));
    let wr = SendWr::new(
        1,
        WrOp::RdmaWrite { remote_addr: 0x8000, rkey: dst },
        vec![Sge { addr: 0x1000, length: 8, lkey: src }],
    );
    sim.engines[0].post_send(a.qpn, wr).unwrap();
    let out = drain_transmits(&mut sim.engines[0]);
    let port = flow_label_to_udp_sport(flow_label_of_qps(a.qpn, b.qpn));
    assert_eq!(out[0].0.src_port, port);
    sim.inject(1, &out[0].1);
    let back = drain_transmits(&mut sim.engines[1]);
    assert_eq!(back[0].0.src_port, port, "the same port both ways");
    assert_eq!(back[0].0.dest_gid, sim.gids[0]);

    let mut o = QpOptions::new(QpType::Ud, Mtu::Mtu1024);
    o.sq_sig_all = true;
    let Pair { mut sim, a, b, src, .. } = setup(o);
    let mut wr = SendWr::new(1, WrOp::Send, vec![Sge { addr: 0x1000, length: 8, lkey: src }]);
    wr.ud = Some(UdDest { dgid: sim.gids[1], remote_qpn: b.qpn, remote_qkey: 0x8000_0000 });
    sim.engines[0].post_send(a.qpn, wr).unwrap();
    let out = drain_transmits(&mut sim.engines[0]);
    assert_eq!(out[0].0.src_port, ud_udp_sport(a.qpn));
    let r = parse(&out[0].1);
    assert_eq!(r.deth.unwrap().qkey, o.qkey, "a Q_Key with the top bit set means the QP's own");
}

#[test]
fn duplicate_atomic_is_answered_from_the_resource_not_executed_again() {
    let Pair { mut sim, a, src, dst, .. } = setup(QpOptions::new(QpType::Rc, Mtu::Mtu1024));
    let wr = SendWr::new(
        1,
        WrOp::AtomicFetchAdd { remote_addr: 0x8000, rkey: dst, add: 5 },
        vec![Sge { addr: 0x1000, length: 8, lkey: src }],
    );
    sim.engines[0].post_send(a.qpn, wr).unwrap();
    let req = drain_transmits(&mut sim.engines[0]).remove(0).1;
    let mut answers = Vec::new();
    for _ in 0..3 {
        sim.inject(1, &req);
        answers.extend(drain_transmits(&mut sim.engines[1]).into_iter().map(|(_, d)| parse(&d)));
    }
    assert_eq!(answers.len(), 3);
    assert!(answers.iter().all(|r| r.bth.opcode == Opcode::RcAtomicAck && r.atomic_ack_eth.unwrap().orig_data == 0));
    let mut v = [0u8; 8];
    sim.engines[1].mr(dst).unwrap().read(0, &mut v);
    assert_eq!(u64::from_le_bytes(v), 5, "executed once");
    assert_eq!(sim.engines[1].counters().get(Counter::DuplicateRequest), 2);
}

#[test]
fn duplicate_send_is_acked_again_and_received_once() {
    let Pair { mut sim, a, b, src, dst } = setup(QpOptions::new(QpType::Rc, Mtu::Mtu1024));
    sim.engines[1]
        .post_recv(b.qpn, RecvWr { wr_id: 1, sg_list: Sge { addr: 0x8000, length: 64, lkey: dst }.into() })
        .unwrap();
    sim.engines[1]
        .post_recv(b.qpn, RecvWr { wr_id: 2, sg_list: Sge { addr: 0x8000, length: 64, lkey: dst }.into() })
        .unwrap();
    let wr = SendWr::new(1, WrOp::Send, vec![Sge { addr: 0x1000, length: 10, lkey: src }]);
    sim.engines[0].post_send(a.qpn, wr).unwrap();
    let req = drain_transmits(&mut sim.engines[0]).remove(0).1;
    for _ in 0..2 {
        sim.inject(1, &req);
        let acks = drain_transmits(&mut sim.engines[1]);
        assert_eq!(acks.len(), 1);
        assert_eq!(parse(&acks[0].1).aeth.unwrap().syndrome, AethSyndrome::Ack { credits: 31 });
    }
    assert_eq!(sim.engines[1].cq_len(b.recv_cq), 1);
}

#[test]
fn duplicate_read_is_replayed() {
    let Pair { mut sim, a, src, dst, .. } = setup(QpOptions::new(QpType::Rc, Mtu::Mtu1024));
    sim.engines[1].mr_mut(dst).unwrap().write(0, b"remote bytes");
    let wr = SendWr::new(
        1,
        WrOp::RdmaRead { remote_addr: 0x8000, rkey: dst },
        vec![Sge { addr: 0x1000, length: 12, lkey: src }],
    );
    sim.engines[0].post_send(a.qpn, wr).unwrap();
    let req = drain_transmits(&mut sim.engines[0]).remove(0).1;
    for _ in 0..2 {
        sim.inject(1, &req);
        let resp = drain_transmits(&mut sim.engines[1]);
        assert_eq!(resp.len(), 1);
        let p = RocePacket::new_checked(&resp[0].1[..]).unwrap();
        assert_eq!(p.bth().opcode(), Opcode::RcReadResponseOnly);
        assert_eq!(p.payload(), b"remote bytes");
    }
}

#[test]
fn max_rd_atomic_and_fence_hold_the_requester_back() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.max_rd_atomic = 1;
    let Pair { mut sim, a, src, dst, .. } = setup(o);
    let read = |id| {
        SendWr::new(
            id,
            WrOp::RdmaRead { remote_addr: 0x8000, rkey: dst },
            vec![Sge { addr: 0x1000, length: 8, lkey: src }],
        )
    };
    sim.engines[0].post_send(a.qpn, read(1)).unwrap();
    sim.engines[0].post_send(a.qpn, read(2)).unwrap();
    assert_eq!(drain_transmits(&mut sim.engines[0]).len(), 1, "one READ outstanding at a time");

    let Pair { mut sim, a, src, dst, .. } = setup(QpOptions::new(QpType::Rc, Mtu::Mtu1024));
    let write = SendWr::new(
        1,
        WrOp::RdmaWrite { remote_addr: 0x8000, rkey: dst },
        vec![Sge { addr: 0x1000, length: 8, lkey: src }],
    );
    let mut fenced = write.clone();
    fenced.wr_id = 2;
    fenced.flags |= SendFlags::FENCE;
    sim.engines[0].post_send(a.qpn, write).unwrap();
    sim.engines[0].post_send(a.qpn, fenced).unwrap();
    assert_eq!(drain_transmits(&mut sim.engines[0]).len(), 1, "the fenced WR waits for the older one");
    sim.run_until(10_000, Duration::from_millis(10), |s| s.engines[0].cq_len(a.send_cq) == 2);
    assert_eq!(sim.engines[0].cq_len(a.send_cq), 2);
}

#[test]
fn sqd_stops_new_work_and_reports_drained() {
    let Pair { mut sim, a, src, dst, .. } = setup(QpOptions::new(QpType::Rc, Mtu::Mtu1024));
    let wr = |id| {
        SendWr::new(
            id,
            WrOp::RdmaWrite { remote_addr: 0x8000, rkey: dst },
            vec![Sge { addr: 0x1000, length: 8, lkey: src }],
        )
    };
    sim.engines[0].post_send(a.qpn, wr(1)).unwrap();
    sim.transmit_all();
    let attr = QpAttr { qp_state: QpState::Sqd, en_sqd_async_notify: true, ..QpAttr::default() };
    sim.engines[0].modify_qp(a.qpn, &attr, QpAttrMask::STATE | QpAttrMask::EN_SQD_ASYNC_NOTIFY).unwrap();
    sim.engines[0].post_send(a.qpn, wr(2)).unwrap();
    sim.run_until(10_000, Duration::from_millis(10), |_| false);
    assert_eq!(sim.engines[0].cq_len(a.send_cq), 1, "only the WR started before SQD");
    assert_eq!(sim.engines[0].poll_event(), Some(Event::SqDrained { qpn: a.qpn }));
    let attr = QpAttr { qp_state: QpState::Rts, ..QpAttr::default() };
    sim.engines[0].modify_qp(a.qpn, &attr, QpAttrMask::STATE).unwrap();
    sim.run_until(10_000, Duration::from_millis(10), |_| false);
    assert_eq!(sim.engines[0].cq_len(a.send_cq), 2);
}

#[test]
fn solicited_event_bit_only_on_the_last_packet_of_a_send_or_write_with_immediate() {
    let Pair { mut sim, a, b, src, dst } = setup(QpOptions::new(QpType::Rc, Mtu::Mtu1024));
    let sge = Sge { addr: 0x8000, length: 4096, lkey: dst };
    sim.engines[1].post_recv(b.qpn, RecvWr { wr_id: 1, sg_list: sge.into() }).unwrap();
    sim.engines[1].post_recv(b.qpn, RecvWr { wr_id: 2, sg_list: vec![].into() }).unwrap();
    let ops = [
        WrOp::Send,
        WrOp::RdmaWrite { remote_addr: 0x8000, rkey: dst },
        WrOp::RdmaWriteWithImm { remote_addr: 0x8000, rkey: dst, imm: 7 },
    ];
    for (i, op) in ops.into_iter().enumerate() {
        let mut wr = SendWr::new(i as u64, op, vec![Sge { addr: 0x1000, length: 2500, lkey: src }]);
        wr.flags |= SendFlags::SOLICITED;
        sim.engines[0].post_send(a.qpn, wr).unwrap();
    }
    let log = record(&mut sim);
    sim.run_until(100_000, Duration::from_millis(10), |_| false);
    let log = log.lock().unwrap();
    let se: Vec<_> = log.iter().filter(|(to, _)| *to == 1).map(|(_, r)| (r.bth.opcode, r.bth.solicited)).collect();
    use Opcode::*;
    assert_eq!(
        se,
        [
            (RcSendFirst, false),
            (RcSendMiddle, false),
            (RcSendLast, true),
            (RcWriteFirst, false),
            (RcWriteMiddle, false),
            (RcWriteLast, false),
            (RcWriteFirst, false),
            (RcWriteMiddle, false),
            (RcWriteLastWithImm, true),
        ]
    );
}

#[test]
fn duplicate_read_asking_for_other_bytes_is_dropped() {
    let Pair { mut sim, a, src, dst, .. } = setup(QpOptions::new(QpType::Rc, Mtu::Mtu1024));
    let wr = SendWr::new(
        1,
        WrOp::RdmaRead { remote_addr: 0x8000, rkey: dst },
        vec![Sge { addr: 0x1000, length: 100, lkey: src }],
    );
    sim.engines[0].post_send(a.qpn, wr).unwrap();
    let req = drain_transmits(&mut sim.engines[0]).remove(0).1;
    sim.inject(1, &req);
    assert_eq!(drain_transmits(&mut sim.engines[1]).len(), 1);
    // The same PSN asking for bytes beyond the first request's, or under
    // another key: rxe drops it, and so does this responder.
    for (va_delta, len, key_delta) in [(0u64, 101u32, 0u32), (8, 100, 0), (0, 100, 0x100)] {
        let mut r = parse(&req);
        let reth = r.reth.as_mut().unwrap();
        reth.va += va_delta;
        reth.dma_len = len;
        reth.rkey = reth.rkey.wrapping_add(key_delta);
        let mut bad = vec![0u8; r.buffer_len(0)];
        r.emit(&mut bad, &[]);
        sim.inject(1, &bad);
        assert!(drain_transmits(&mut sim.engines[1]).is_empty(), "{va_delta} {len} {key_delta}");
    }
    // A part of the first request is answered.
    let mut r = parse(&req);
    let reth = r.reth.as_mut().unwrap();
    reth.va += 50;
    reth.dma_len = 50;
    let mut part = vec![0u8; r.buffer_len(0)];
    r.emit(&mut part, &[]);
    sim.inject(1, &part);
    assert_eq!(drain_transmits(&mut sim.engines[1]).len(), 1);
}

#[test]
fn a_qp_moved_to_error_stops_answering() {
    let Pair { mut sim, a, b, src, dst } = setup(QpOptions::new(QpType::Rc, Mtu::Mtu1024));
    let wr = SendWr::new(
        1,
        WrOp::RdmaRead { remote_addr: 0x8000, rkey: dst },
        vec![Sge { addr: 0x1000, length: 8192, lkey: src }],
    );
    sim.engines[0].post_send(a.qpn, wr).unwrap();
    let req = drain_transmits(&mut sim.engines[0]).remove(0).1;
    sim.inject(1, &req);
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let now = uroce_transport::engine::Instant::ZERO;
    assert!(sim.engines[1].poll_transmit(now, &mut buf).is_some(), "the first of eight responses");
    let err = QpAttr { qp_state: QpState::Err, ..QpAttr::default() };
    sim.engines[1].modify_qp(b.qpn, &err, QpAttrMask::STATE).unwrap();
    assert!(sim.engines[1].poll_transmit(now, &mut buf).is_none(), "no more READ responses from ERR");
}

#[test]
fn atomic_write_and_flush_on_the_wire_and_their_replay() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.max_rd_atomic = 1;
    let mut p = Pair::new(SEED, &o);
    let access = REGION_ACCESS | AccessFlags::FLUSH_GLOBAL | AccessFlags::FLUSH_PERSISTENT;
    let dst = p.reg_mr(1, 0x8000, vec![0u8; 64], access);
    let Pair { mut sim, a, .. } = p;
    let aw = |id, data: [u8; 8]| SendWr::new(id, WrOp::AtomicWrite { remote_addr: 0x8008, rkey: dst, data }, vec![]);
    sim.engines[0].post_send(a.qpn, aw(1, *b"ABCDEFGH")).unwrap();
    sim.engines[0].post_send(a.qpn, aw(2, *b"abcdefgh")).unwrap();
    let flush = WrOp::Flush { remote_addr: 0x8000, rkey: dst, len: 64, placement: 1, whole_region: false };
    sim.engines[0].post_send(a.qpn, SendWr::new(3, flush, vec![])).unwrap();
    // max_rd_atomic 1: ATOMIC_WRITE and FLUSH count like READs and atomics.
    let first = drain_transmits(&mut sim.engines[0]);
    assert_eq!(first.len(), 1);
    let r = parse(&first[0].1);
    assert_eq!((r.bth.opcode, r.bth.ack_req, r.reth.unwrap().dma_len), (Opcode::RcAtomicWrite, true, 8));
    assert_eq!(RocePacket::new_checked(&first[0].1[..]).unwrap().payload(), b"ABCDEFGH");
    sim.inject(1, &first[0].1);
    let ans = drain_transmits(&mut sim.engines[1]);
    let r = parse(&ans[0].1);
    assert_eq!((r.bth.opcode, r.aeth.unwrap().syndrome.to_byte()), (Opcode::RcReadResponseOnly, 0x1f));
    assert!(RocePacket::new_checked(&ans[0].1[..]).unwrap().payload().is_empty());
    sim.inject(0, &ans[0].1);
    let second = drain_transmits(&mut sim.engines[0]);
    sim.inject(1, &second[0].1);
    let ans = drain_transmits(&mut sim.engines[1]);
    sim.inject(0, &ans[0].1);
    let third = drain_transmits(&mut sim.engines[0]);
    let f = parse(&third[0].1);
    assert_eq!(f.bth.opcode, Opcode::RcFlush);
    assert_eq!((f.feth.unwrap().selectivity, f.feth.unwrap().placement), (0, 1));
    assert_eq!((f.reth.unwrap().va, f.reth.unwrap().dma_len), (0x8000, 64));
    sim.inject(1, &third[0].1);
    let ans = drain_transmits(&mut sim.engines[1]);
    sim.inject(0, &ans[0].1);
    let wcs: Vec<_> = std::iter::from_fn(|| sim.engines[0].poll_cq(a.send_cq)).collect();
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.opcode, w.byte_len)).collect();
    use uroce_transport::engine::WcOpcode;
    assert_eq!(got, [(1, WcOpcode::AtomicWrite, 8), (2, WcOpcode::AtomicWrite, 8), (3, WcOpcode::Flush, 0)]);
    // A duplicate of the first ATOMIC_WRITE is answered, not executed again.
    sim.inject(1, &first[0].1);
    assert_eq!(parse(&drain_transmits(&mut sim.engines[1])[0].1).bth.opcode, Opcode::RcReadResponseOnly);
    let mut word = [0u8; 8];
    sim.engines[1].mr(dst).unwrap().read(8, &mut word);
    assert_eq!(&word, b"abcdefgh");
}

#[test]
fn segmentation_and_pad_at_every_path_mtu() {
    for mtu in [Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024, Mtu::Mtu2048, Mtu::Mtu4096] {
        let m = mtu.bytes() as usize;
        let Pair { mut sim, a, src, dst, .. } = setup(QpOptions::new(QpType::Rc, mtu));
        for (id, size) in [0, 1, 2, 3, 4, 5, m - 1, m, m + 1, 2 * m + 3].into_iter().enumerate() {
            let wr = SendWr::new(
                id as u64,
                WrOp::RdmaWrite { remote_addr: 0x8000, rkey: dst },
                vec![Sge { addr: 0x1000, length: size as u32, lkey: src }],
            );
            sim.engines[0].post_send(a.qpn, wr).unwrap();
            let pkts = drain_transmits(&mut sim.engines[0]);
            assert_eq!(pkts.len(), size.div_ceil(m).max(1), "MTU {m} size {size}");
            let mut data = Vec::new();
            for (i, (_, bytes)) in pkts.iter().enumerate() {
                let p = RocePacket::new_checked(&bytes[..]).unwrap();
                let len = p.payload().len();
                let pad = (4 - len % 4) % 4;
                assert_eq!(usize::from(p.bth().pad_count()), pad, "MTU {m} size {size} packet {i}");
                assert_eq!(p.pad(), &[0u8; 3][..pad], "pad bytes are zero");
                assert_eq!(bytes.len() % 4, 0, "a whole number of 32-bit words");
                if i + 1 < pkts.len() {
                    assert_eq!(len, m, "FIRST and MIDDLE packets are full");
                }
                data.extend_from_slice(p.payload());
            }
            let want: Vec<u8> = (0..size as u32).map(|i| i as u8).collect();
            assert!(data == want, "MTU {m} size {size}: the payloads are the message");
        }
    }
}

#[test]
fn a_gap_draws_one_sequence_nak_for_the_expected_psn() {
    let Pair { mut sim, a, src, dst, .. } = setup(QpOptions::new(QpType::Rc, Mtu::Mtu1024));
    for id in 0..4u64 {
        let wr = SendWr::new(
            id,
            WrOp::RdmaWrite { remote_addr: 0x8000, rkey: dst },
            vec![Sge { addr: 0x1000, length: 8, lkey: src }],
        );
        sim.engines[0].post_send(a.qpn, wr).unwrap();
    }
    let reqs = drain_transmits(&mut sim.engines[0]);
    let psn0 = parse(&reqs[0].1).bth.psn;
    // The first is lost: the second and third arrive out of sequence.
    let mut answers = Vec::new();
    // Then go-back-N resends all four, and a late copy of the second comes.
    for i in [1, 2, 0, 1, 2, 3, 1] {
        sim.inject(1, &reqs[i].1);
        answers.extend(drain_transmits(&mut sim.engines[1]).into_iter().map(|(_, d)| parse(&d)));
    }
    let got: Vec<_> = answers.iter().map(|r| (r.aeth.unwrap().syndrome.to_byte(), r.bth.psn - psn0)).collect();
    // One NAK (0x60) for the expected PSN, an ACK for each resent packet,
    // and the duplicate ACKed with the newest PSN received.
    assert_eq!(got, [(0x60, 0), (0x1f, 0), (0x1f, 1), (0x1f, 2), (0x1f, 3), (0x1f, 3)]);
    assert_eq!(sim.engines[1].counters().get(Counter::DuplicateRequest), 1);
    assert_eq!(sim.engines[1].counters().get(Counter::OutOfSeqRequest), 1);
}
