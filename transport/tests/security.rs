//! The attacks of ReDMArk (USENIX Security 2021) against the engine, each
//! with the pass condition of `shared/SECURITY-NOTES.md` ("Test cases to
//! add"; the numbers below are its). A third host forges packets with the
//! right QPN, PSN and keys; the real peers' traffic must go on untouched.

use core::time::Duration;
use std::collections::{HashMap, HashSet};
use uroce_transport::engine::{
    AccessFlags, Counter, Engine, EngineConfig, Event, Gid, Mtu, QpCap, QpInitAttr, QpState, QpType, SendWr, Sge,
    WcStatus, WrOp, UC_RKEY_VIOLATION_LIMIT,
};
use uroce_transport::sim::probe::{drain_packets, mr_contents, parse, poll_all, read_mr};
use uroce_transport::sim::{create_endpoint, Pair, QpOptions, REGION_ACCESS};
use uroce_transport::wire::{AethRepr, AethSyndrome, BthRepr, NakCode, Opcode, RethRepr, RoceRepr};
use uroce_transport::{Psn, Seed};

/// A host that is neither peer.
fn third() -> Gid {
    Gid::from_ipv4([10, 0, 0, 66])
}

/// A seed as the verbs API makes one: 32 bytes from the OS.
fn secret() -> Seed {
    Seed::Secret(rand::random())
}

fn packet(r: &RoceRepr, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; r.buffer_len(payload.len())];
    r.emit(&mut buf, payload);
    buf
}

fn write_only(qpn: u32, psn: u32, rkey: u32, va: u64, payload: &[u8]) -> Vec<u8> {
    let mut r = RoceRepr::new(BthRepr::new(Opcode::RcWriteOnly, qpn, Psn::new(psn)));
    r.bth.ack_req = true;
    r.reth = Some(RethRepr { va, rkey, dma_len: payload.len() as u32 });
    packet(&r, payload)
}

fn rc_pair() -> Pair {
    Pair::new(11, &QpOptions::new(QpType::Rc, Mtu::Mtu1024)).with_regions(vec![0x5a; 4096], vec![0; 4096])
}

fn run(p: &mut Pair) {
    p.sim.run_until(1_000_000, Duration::from_millis(100), |_| false);
}

/// The share of the most frequent difference between consecutive values
/// (ReDMArk's test of key generators: rxe's +0x100 steps score ~1).
fn top_delta_share(v: &[u32]) -> f64 {
    let mut deltas: HashMap<u32, usize> = HashMap::new();
    for w in v.windows(2) {
        *deltas.entry(w[1].wrapping_sub(w[0])).or_default() += 1;
    }
    *deltas.values().max().unwrap() as f64 / (v.len() - 1) as f64
}

/// Each of the low `bits` bits set in half the values, +- `tolerance`.
fn assert_bits_balanced(what: &str, v: &[u32], bits: u32, tolerance: f64) {
    for bit in 0..bits {
        let share = v.iter().filter(|x| *x >> bit & 1 == 1).count() as f64 / v.len() as f64;
        assert!((share - 0.5).abs() <= tolerance, "{what}: bit {bit} set in {:.4} of them", share);
    }
}

/// 2: 10^6 keys of one PD are unique, every bit of them balanced, and no
/// step between consecutive keys common; QPNs and PSNs too.
#[test]
fn keys_qpns_and_psns_are_full_width_and_patternless() {
    let mut e = Engine::new(EngineConfig { seed: secret(), ..Default::default() });
    let pd = e.alloc_pd();
    let keys: Vec<u32> =
        (0..1_000_000).map(|_| e.reg_mr(pd, 0, Box::new(Vec::new()), REGION_ACCESS).unwrap().rkey).collect();
    assert_eq!(keys.iter().collect::<HashSet<_>>().len(), keys.len(), "two live keys collide");
    assert_bits_balanced("rkeys", &keys, 32, 0.005);
    assert!(top_delta_share(&keys) < 1e-3, "a step between keys repeats");

    let cq = e.create_cq(1);
    let init = QpInitAttr {
        qp_type: QpType::Rc,
        pd,
        send_cq: cq,
        recv_cq: cq,
        srq: None,
        cap: QpCap::default(),
        sq_sig_all: false,
    };
    let mut qpns = Vec::new();
    for _ in 0..1_000_000 {
        let qpn = e.create_qp(init).unwrap();
        qpns.push(qpn);
        e.destroy_qp(qpn).unwrap();
    }
    assert_bits_balanced("QPNs", &qpns, 24, 0.005);
    assert!(top_delta_share(&qpns) < 1e-3, "a step between QPNs repeats");
    let psns: Vec<u32> = (0..1_000_000).map(|_| e.random_psn()).collect();
    assert_bits_balanced("PSNs", &psns, 24, 0.005);
    assert!(top_delta_share(&psns) < 1e-3, "a step between PSNs repeats");
}

/// A secret seed gives other numbers each time; a fixed one repeats them.
#[test]
fn a_secret_seed_differs_run_to_run_and_a_fixed_one_repeats() {
    let first = |seed: Seed| {
        let mut e = Engine::new(EngineConfig { seed, ..Default::default() });
        let pd = e.alloc_pd();
        let key = e.reg_mr(pd, 0, Box::new(Vec::new()), REGION_ACCESS).unwrap().rkey;
        (create_endpoint(&mut e, &QpOptions::new(QpType::Rc, Mtu::Mtu1024), Some(pd), None).qpn, key)
    };
    assert_ne!(first(secret()), first(secret()));
    assert_eq!(first(Seed::Fixed(3)), first(Seed::Fixed(3)));
    assert_eq!(format!("{:?}", secret()), "Seed::Secret(..)", "a secret seed is never printed");
}

/// 3: 10^6 UC WRITEs with random wrong keys change no byte, complete
/// nothing, and are all counted: the first UC_RKEY_VIOLATION_LIMIT + 1 as
/// violations (then the QP goes to ERR), the rest as drops at a QP in ERR.
#[test]
fn uc_rkey_guessing_is_counted_and_stopped() {
    let mut p = Pair::new(12, &QpOptions::new(QpType::Uc, Mtu::Mtu1024)).with_regions(vec![1; 64], vec![7; 4096]);
    let before = mr_contents(&p.sim.engines[1], p.dst);
    let real = p.dst;
    let mut rng = rand::thread_rng();
    const GUESSES: u64 = 1_000_000;
    for i in 0..GUESSES {
        let rkey = loop {
            let k = rand::Rng::gen::<u32>(&mut rng);
            if k != real {
                break k;
            }
        };
        let va = Pair::DST_ADDR + rand::Rng::gen_range(&mut rng, 0..4088);
        let mut r = RoceRepr::new(BthRepr::new(Opcode::UcWriteOnly, p.b.qpn, Psn::new(i as u32)));
        r.reth = Some(RethRepr { va, rkey, dma_len: 8 });
        p.sim.inject(1, &packet(&r, &[0xee; 8]));
    }
    let e = &mut p.sim.engines[1];
    assert_eq!(mr_contents(e, p.dst), before, "a guessed key changed memory");
    assert!(poll_all(e, p.b.recv_cq).is_empty());
    let c = e.counters();
    let limit = u64::from(UC_RKEY_VIOLATION_LIMIT) + 1;
    assert_eq!(c.get(Counter::RkeyViolation), limit);
    assert_eq!(c.get(Counter::UcRkeyLimit), 1);
    assert_eq!(c.get(Counter::RcvdQpNotReady), GUESSES - limit, "the rest dropped and counted");
    assert_eq!(e.query_qp(p.b.qpn).unwrap().qp_state, QpState::Err);
    assert!(std::iter::from_fn(|| e.poll_event()).any(|ev| ev == Event::QpAccessError { qpn: p.b.qpn }));
}

/// 4 and 13: a WRITE from a third host with the right QPN, PSN, rkey and
/// address is dropped and counted; B's memory and expected PSN stay as
/// they were, so A's real WRITE at that PSN lands (and is not taken for a
/// duplicate of the forged one, ReDMArk's one-packet swap).
#[test]
fn a_write_from_a_third_host_is_dropped_and_the_peers_go_on() {
    let mut p = rc_pair();
    let epsn = p.sim.engines[1].query_qp(p.b.qpn).unwrap().rq_psn;
    p.sim.inject_from(1, third(), &write_only(p.b.qpn, epsn, p.dst, Pair::DST_ADDR, &[0xee; 16]));
    let c = p.sim.engines[1].counters().clone();
    assert_eq!((c.get(Counter::RcvdBadSrc), c.get(Counter::RcvdPkts)), (1, 0));
    assert_eq!(read_mr(&p.sim.engines[1], p.dst, 0, 16), vec![0; 16]);
    assert_eq!(p.sim.engines[1].query_qp(p.b.qpn).unwrap().rq_psn, epsn, "B's expected PSN moved");
    assert!(drain_packets(&mut p.sim.engines[1]).is_empty(), "B answered the forger");

    let wr = SendWr::new(
        1,
        WrOp::RdmaWrite { remote_addr: Pair::DST_ADDR, rkey: p.dst },
        vec![Sge { addr: Pair::SRC_ADDR, length: 16, lkey: p.src }],
    );
    p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    run(&mut p);
    let wcs = poll_all(&mut p.sim.engines[0], p.a.send_cq);
    assert_eq!(wcs.iter().map(|w| w.status).collect::<Vec<_>>(), [WcStatus::Success]);
    assert_eq!(read_mr(&p.sim.engines[1], p.dst, 0, 16), vec![0x5a; 16], "A's bytes, not the forger's");
    assert_eq!(p.sim.engines[1].counters().get(Counter::DuplicateRequest), 0);
}

/// 4: a fatal NAK (and an ACK, and an RNR NAK) forged from a third host in
/// A's window are dropped: A stays RTS and its WRITE completes Success once
/// B really acknowledges it.
#[test]
fn forged_naks_and_acks_from_a_third_host_are_dropped() {
    let mut p = rc_pair();
    let psn = p.sim.engines[0].query_qp(p.a.qpn).unwrap().sq_psn;
    let wr = SendWr::new(
        1,
        WrOp::RdmaWrite { remote_addr: Pair::DST_ADDR, rkey: p.dst },
        vec![Sge { addr: Pair::SRC_ADDR, length: 16, lkey: p.src }],
    );
    p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    let in_flight = drain_packets(&mut p.sim.engines[0]);
    assert_eq!(in_flight.len(), 1);
    for syndrome in [
        AethSyndrome::Nak(NakCode::RemoteAccessError),
        AethSyndrome::RnrNak { timer: 31 },
        AethSyndrome::Ack { credits: 0x1f },
    ] {
        let mut r = RoceRepr::new(BthRepr::new(Opcode::RcAck, p.a.qpn, Psn::new(psn)));
        r.aeth = Some(AethRepr { syndrome, msn: 1 });
        p.sim.inject_from(0, third(), &packet(&r, &[]));
    }
    let e = &mut p.sim.engines[0];
    assert_eq!(e.counters().get(Counter::RcvdBadSrc), 3);
    assert_eq!(e.query_qp(p.a.qpn).unwrap().qp_state, QpState::Rts);
    assert!(poll_all(e, p.a.send_cq).is_empty(), "a forged ACK completed the WRITE");
    // The real WRITE reaches B; B's ACK completes it.
    p.sim.inject(1, &in_flight[0]);
    for ack in drain_packets(&mut p.sim.engines[1]) {
        p.sim.inject(0, &ack);
    }
    let wcs = poll_all(&mut p.sim.engines[0], p.a.send_cq);
    assert_eq!(wcs.iter().map(|w| w.status).collect::<Vec<_>>(), [WcStatus::Success]);
}

/// 5: from the real peer, one wrong rkey costs the connection (IBTA): a
/// remote access NAK, B in ERR with an access error event, one violation.
#[test]
fn a_wrong_rkey_from_the_peer_is_nakked_and_counted() {
    let mut p = rc_pair();
    let wr = SendWr::new(
        1,
        WrOp::RdmaWrite { remote_addr: Pair::DST_ADDR, rkey: p.dst ^ 0x8000_0000 },
        vec![Sge { addr: Pair::SRC_ADDR, length: 16, lkey: p.src }],
    );
    p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    run(&mut p);
    assert_eq!(poll_all(&mut p.sim.engines[0], p.a.send_cq)[0].status, WcStatus::RemAccessErr);
    let e = &mut p.sim.engines[1];
    assert_eq!(e.counters().get(Counter::RkeyViolation), 1);
    assert_eq!(e.query_qp(p.b.qpn).unwrap().qp_state, QpState::Err);
    assert!(std::iter::from_fn(|| e.poll_event()).any(|ev| ev == Event::QpAccessError { qpn: p.b.qpn }));
}

/// 7: max_dest_rd_atomic READs sent at once are all answered; one more
/// before any is answered is NAKed as an invalid request (the QP to ERR),
/// and no more responses than the limit are ever queued.
#[test]
fn reads_beyond_max_dest_rd_atomic_are_invalid_requests() {
    const MAX: u8 = 4;
    for extra in [false, true] {
        let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
        o.max_dest_rd_atomic = MAX;
        let mut p = Pair::new(13, &o).with_regions(vec![0; 64], vec![9; 4096]);
        let epsn = p.sim.engines[1].query_qp(p.b.qpn).unwrap().rq_psn;
        let n = u32::from(MAX) + u32::from(extra);
        for i in 0..n {
            let mut r = RoceRepr::new(BthRepr::new(Opcode::RcReadRequest, p.b.qpn, Psn::new(epsn) + i));
            r.reth = Some(RethRepr { va: Pair::DST_ADDR, rkey: p.dst, dma_len: 1024 });
            p.sim.inject(1, &packet(&r, &[]));
        }
        let out: Vec<RoceRepr> = drain_packets(&mut p.sim.engines[1]).iter().map(|b| parse(b)).collect();
        let e = &p.sim.engines[1];
        if !extra {
            assert_eq!(out.len(), usize::from(MAX), "each READ answered");
            assert!(out.iter().all(|r| r.bth.opcode == Opcode::RcReadResponseOnly));
            assert_eq!(e.query_qp(p.b.qpn).unwrap().qp_state, QpState::Rts);
            continue;
        }
        // In ERR the queued READ responses are dropped; the NAK remains.
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].aeth.unwrap().syndrome, AethSyndrome::Nak(NakCode::InvalidRequest));
        assert_eq!(out[0].bth.psn, Psn::new(epsn) + u32::from(MAX));
        assert_eq!(e.counters().get(Counter::RdAtomicRefused), 1);
        assert_eq!(e.query_qp(p.b.qpn).unwrap().qp_state, QpState::Err);
    }
}

/// 7, the other side: a requester within its max_rd_atomic never meets the
/// limit, even with loss, duplicates and retried READs.
#[test]
fn reads_within_the_limit_pass_a_lossy_link() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    (o.max_rd_atomic, o.max_dest_rd_atomic) = (2, 2);
    let link =
        uroce_transport::sim::LinkConfig { loss: 0.1, duplicate: 0.05, ..uroce_transport::sim::LinkConfig::clean() };
    let mut p = Pair::with_link(14, link, &o).with_regions(vec![0; 64 * 4096], vec![3; 64 * 4096]);
    for id in 0..64u64 {
        let len = if id % 2 == 0 { 4000 } else { 8 };
        let wr = SendWr::new(
            id,
            WrOp::RdmaRead { remote_addr: Pair::DST_ADDR + id * 4096, rkey: p.dst },
            vec![Sge { addr: Pair::SRC_ADDR + id * 4096, length: len, lkey: p.src }],
        );
        let mut wr = wr;
        wr.flags = uroce_transport::engine::SendFlags::SIGNALED;
        p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    }
    p.sim.run_until(10_000_000, Duration::from_secs(60), |s| s.engines[0].cq_len(p.a.send_cq) == 64);
    let wcs = poll_all(&mut p.sim.engines[0], p.a.send_cq);
    assert_eq!(wcs.len(), 64);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    assert_eq!(p.sim.engines[1].counters().get(Counter::RdAtomicRefused), 0);
}

/// 8: SEND_WITH_INV naming an ordinary MR is refused (NAK invalid request)
/// and the MR stays usable, locally and by peers; one registered with
/// REMOTE_INVALIDATE is invalidated.
#[test]
fn send_with_invalidate_of_an_ordinary_mr_is_refused() {
    let o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    let mut p = rc_pair();
    let post_recv = |p: &mut Pair| {
        let qpn = p.b.qpn;
        let key = p.reg_mr(1, 0x4_0000, vec![0; 64], REGION_ACCESS);
        let sge = Sge { addr: 0x4_0000, length: 64, lkey: key };
        p.sim.engines[1].post_recv(qpn, uroce_transport::engine::RecvWr { wr_id: 9, sg_list: sge.into() }).unwrap();
    };
    post_recv(&mut p);
    let victim = p.dst;
    let inv = |id, key| {
        SendWr::new(
            id,
            WrOp::SendWithInv { invalidate_rkey: key },
            vec![Sge { addr: Pair::SRC_ADDR, length: 8, lkey: p.src }],
        )
    };
    p.sim.engines[0].post_send(p.a.qpn, inv(1, victim)).unwrap();
    run(&mut p);
    assert_eq!(poll_all(&mut p.sim.engines[0], p.a.send_cq)[0].status, WcStatus::RemInvReqErr);
    assert_eq!(poll_all(&mut p.sim.engines[1], p.b.recv_cq)[0].status, WcStatus::RemInvReqErr);
    assert_eq!(p.sim.engines[1].counters().get(Counter::RemoteInvRefused), 1);

    // The victim still serves a new connection of its PD: a peer's WRITE
    // into it, and a local SEND out of it.
    let a2 = create_endpoint(&mut p.sim.engines[0], &o, Some(p.a.pd), None);
    let b2 = create_endpoint(&mut p.sim.engines[1], &o, Some(p.b.pd), None);
    uroce_transport::sim::connect(&mut p.sim, &a2, &b2, &o);
    let write = SendWr::new(
        2,
        WrOp::RdmaWrite { remote_addr: Pair::DST_ADDR, rkey: victim },
        vec![Sge { addr: Pair::SRC_ADDR, length: 8, lkey: p.src }],
    );
    p.sim.engines[0].post_send(a2.qpn, write).unwrap();
    run(&mut p);
    assert_eq!(poll_all(&mut p.sim.engines[0], a2.send_cq)[0].status, WcStatus::Success);
    assert_eq!(read_mr(&p.sim.engines[1], victim, 0, 8), vec![0x5a; 8]);
    let recv = p.reg_mr(0, 0x9_0000, vec![0; 64], REGION_ACCESS);
    let sge = Sge { addr: 0x9_0000, length: 64, lkey: recv };
    p.sim.engines[0].post_recv(a2.qpn, uroce_transport::engine::RecvWr { wr_id: 3, sg_list: sge.into() }).unwrap();
    let send = SendWr::new(4, WrOp::Send, vec![Sge { addr: Pair::DST_ADDR, length: 8, lkey: victim }]);
    p.sim.engines[1].post_send(b2.qpn, send).unwrap();
    run(&mut p);
    assert_eq!(poll_all(&mut p.sim.engines[1], b2.send_cq)[0].status, WcStatus::Success);
    assert_eq!(poll_all(&mut p.sim.engines[0], a2.recv_cq)[0].status, WcStatus::Success);
    assert_eq!(read_mr(&p.sim.engines[0], recv, 0, 8), vec![0x5a; 8], "the victim's bytes went out");

    // An MR registered as invalidatable is invalidated by the same request.
    let mut p = rc_pair();
    post_recv(&mut p);
    let access = REGION_ACCESS | AccessFlags::REMOTE_INVALIDATE;
    let willing = p.reg_mr(1, 0x6_0000, vec![0; 64], access);
    let inv = SendWr::new(
        1,
        WrOp::SendWithInv { invalidate_rkey: willing },
        vec![Sge { addr: Pair::SRC_ADDR, length: 8, lkey: p.src }],
    );
    p.sim.engines[0].post_send(p.a.qpn, inv).unwrap();
    run(&mut p);
    assert_eq!(poll_all(&mut p.sim.engines[0], p.a.send_cq)[0].status, WcStatus::Success);
    let write = SendWr::new(
        2,
        WrOp::RdmaWrite { remote_addr: 0x6_0000, rkey: willing },
        vec![Sge { addr: Pair::SRC_ADDR, length: 8, lkey: p.src }],
    );
    p.sim.engines[0].post_send(p.a.qpn, write).unwrap();
    run(&mut p);
    assert_eq!(poll_all(&mut p.sim.engines[0], p.a.send_cq)[0].status, WcStatus::RemAccessErr);
}

/// 10: every one of the 2^24 PSNs forged once from a third host (about a
/// second: the source check comes first); none accepted, all counted, B's
/// expected PSN unchanged, A <-> B fine.
#[test]
fn every_psn_forged_from_a_third_host_is_dropped() {
    let mut p = rc_pair();
    let epsn = p.sim.engines[1].query_qp(p.b.qpn).unwrap().rq_psn;
    let mut pkt = write_only(p.b.qpn, 0, p.dst, Pair::DST_ADDR, &[0xee; 8]);
    for psn in 0..1u32 << 24 {
        pkt[9..12].copy_from_slice(&psn.to_be_bytes()[1..]);
        p.sim.inject_from(1, third(), &pkt);
    }
    let e = &p.sim.engines[1];
    assert_eq!(e.counters().get(Counter::RcvdBadSrc), 1 << 24);
    assert_eq!(e.counters().get(Counter::RcvdPkts), 0);
    assert_eq!(e.query_qp(p.b.qpn).unwrap().rq_psn, epsn);
    assert_eq!(read_mr(e, p.dst, 0, 8), vec![0; 8]);
    let wr = SendWr::new(
        1,
        WrOp::RdmaWrite { remote_addr: Pair::DST_ADDR, rkey: p.dst },
        vec![Sge { addr: Pair::SRC_ADDR, length: 8, lkey: p.src }],
    );
    p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    run(&mut p);
    assert_eq!(poll_all(&mut p.sim.engines[0], p.a.send_cq)[0].status, WcStatus::Success);
    assert_eq!(read_mr(&p.sim.engines[1], p.dst, 0, 8), vec![0x5a; 8]);
}

/// Packets to a GID that is not the one the QP was connected from are
/// dropped too (rxe's check of the destination address).
#[test]
fn a_packet_to_another_gid_of_ours_is_dropped() {
    let mut p = rc_pair();
    let epsn = p.sim.engines[1].query_qp(p.b.qpn).unwrap().rq_psn;
    let other = Gid::from_ipv4([10, 0, 0, 99]);
    p.sim.engines[1].set_gid_table(vec![Some(p.sim.gids[1]), Some(other)]);
    let meta = uroce_transport::engine::RxMeta { src_gid: p.sim.gids[0], dst_gid: other, icrc_skipped: false };
    let pkt = write_only(p.b.qpn, epsn, p.dst, Pair::DST_ADDR, &[0xee; 8]);
    p.sim.engines[1].handle_packet(p.sim.now, meta, &pkt);
    assert_eq!(p.sim.engines[1].counters().get(Counter::RcvdBadSrc), 1);
    p.sim.inject(1, &pkt);
    assert_eq!(read_mr(&p.sim.engines[1], p.dst, 0, 8), vec![0xee; 8], "the same packet to the QP's GID lands");
}

// The authenticated mode (SECURITY-NOTES test 14).

/// A pair whose QPs both have `keys` (or none), over `link`.
fn auth_pair(qp_type: QpType, keys: [Option<[u8; 32]>; 2], link: uroce_transport::sim::LinkConfig) -> Pair {
    auth_pair_from(qp_type, keys, link, None)
}

fn auth_pair_from(
    qp_type: QpType,
    keys: [Option<[u8; 32]>; 2],
    link: uroce_transport::sim::LinkConfig,
    start_psn: Option<u32>,
) -> Pair {
    let o = QpOptions { start_psn, ..QpOptions::new(qp_type, Mtu::Mtu1024) };
    let mut sim = uroce_transport::sim::Sim::new(15, link);
    let a = create_endpoint(&mut sim.engines[0], &o, None, None);
    let b = create_endpoint(&mut sim.engines[1], &o, None, None);
    for (node, (ep, key)) in [(a, keys[0]), (b, keys[1])].into_iter().enumerate() {
        if let Some(k) = key {
            sim.engines[node].set_qp_auth_key(ep.qpn, k).unwrap();
        }
    }
    Pair::connect(sim, a, b, &o).with_regions((0..=255).cycle().take(65536).collect(), vec![0; 65536])
}

/// The packet of a 64-byte WRITE node 0 posts at once (its region's first
/// 64 bytes to the peer's), taken off the engine unsent.
fn first_write_packet(p: &mut Pair) -> Vec<u8> {
    let op = WrOp::RdmaWrite { remote_addr: Pair::DST_ADDR, rkey: p.dst };
    p.sim.engines[0].post_send(p.a.qpn, wr(1, op, 0, 64, p.src)).unwrap();
    drain_packets(&mut p.sim.engines[0]).pop().unwrap()
}

/// Every packet node 0 sends to node 1 from now on, as bytes.
fn tap_to_b(p: &mut Pair) -> std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>> {
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let l = log.clone();
    p.sim.tap = Some(Box::new(move |to, data| {
        if to == 1 {
            l.lock().unwrap().push(data.to_vec())
        }
    }));
    log
}

fn wr(id: u64, op: WrOp, off: u64, len: u32, lkey: u32) -> SendWr {
    let mut wr = SendWr::new(id, op, vec![Sge { addr: Pair::SRC_ADDR + off, length: len, lkey }]);
    wr.flags = uroce_transport::engine::SendFlags::SIGNALED;
    wr
}

const KEY: [u8; 32] = [0x42; 32];

/// Authenticated RC under loss, duplication and reordering: SENDs, WRITEs,
/// READs and atomics complete and land as without the mode; each packet
/// carries the trailer (AUTH_TRAILER_LEN bytes more).
#[test]
fn authenticated_rc_works_under_loss() {
    let link = uroce_transport::sim::LinkConfig {
        loss: 0.05,
        duplicate: 0.02,
        reorder: 0.05,
        ..uroce_transport::sim::LinkConfig::clean()
    };
    let mut p = auth_pair(QpType::Rc, [Some(KEY), Some(KEY)], link);
    let key = p.reg_mr(1, 0x4_0000, vec![0; 8192], REGION_ACCESS);
    for i in 0..8 {
        let sge = Sge { addr: 0x4_0000 + i * 1024, length: 1024, lkey: key };
        p.sim.engines[1].post_recv(p.b.qpn, uroce_transport::engine::RecvWr { wr_id: i, sg_list: sge.into() }).unwrap();
    }
    let (src, dst) = (p.src, p.dst);
    let mut n = 0;
    for i in 0..8u64 {
        let ops = [
            WrOp::RdmaWrite { remote_addr: Pair::DST_ADDR + i * 4096, rkey: dst },
            WrOp::Send,
            WrOp::RdmaRead { remote_addr: Pair::DST_ADDR + i * 4096, rkey: dst },
            WrOp::AtomicFetchAdd { remote_addr: Pair::DST_ADDR + 60_000 + i * 8, rkey: dst, add: 5 },
        ];
        for op in ops {
            let len = match op {
                WrOp::AtomicFetchAdd { .. } => 8,
                WrOp::Send => 1000,
                _ => 3000,
            };
            let off = match op {
                WrOp::RdmaRead { .. } => 32_768 + i * 4096,
                WrOp::AtomicFetchAdd { .. } => 61_440 + i * 8,
                _ => i * 4096,
            };
            p.sim.engines[0].post_send(p.a.qpn, wr(n, op, off, len, src)).unwrap();
            n += 1;
        }
    }
    let done = p.sim.run_until(10_000_000, Duration::from_secs(60), |s| s.engines[0].cq_len(p.a.send_cq) == n as usize);
    assert!(done);
    let wcs = poll_all(&mut p.sim.engines[0], p.a.send_cq);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let sent = read_mr(&p.sim.engines[0], src, 4096, 3000);
    assert!(read_mr(&p.sim.engines[1], dst, 4096, 3000) == sent, "a WRITE did not land");
    assert!(read_mr(&p.sim.engines[0], src, 32_768 + 4096, 3000) == sent, "a READ read something else");
    let counter = read_mr(&p.sim.engines[1], dst, 60_000 + 8, 8);
    assert_eq!(u64::from_le_bytes(counter.try_into().unwrap()), 5, "one FETCH_ADD, applied once");
    assert_eq!(poll_all(&mut p.sim.engines[1], p.b.recv_cq).len(), 8);
    for e in &p.sim.engines {
        assert_eq!(e.counters().get(Counter::AuthBadMac), 0);
    }
}

/// One flipped bit anywhere in a packet (the ICRC recomputed by the
/// forger, so it passes the link) gets it dropped and counted; the real
/// packet after it is taken.
#[test]
fn an_authenticated_packet_with_one_bit_flipped_is_dropped() {
    let mut p = auth_pair(QpType::Rc, [Some(KEY), Some(KEY)], uroce_transport::sim::LinkConfig::clean());
    let (src, dst) = (p.src, p.dst);
    let pkt = first_write_packet(&mut p);
    let plain = 12 + 16 + 64 + 4;
    assert_eq!(pkt.len(), plain + uroce_transport::engine::AUTH_TRAILER_LEN, "the trailer is in the packet");
    let body = pkt.len() - 4;
    let bits: Vec<usize> = (0..body * 8).step_by(7).collect();
    for &bit in &bits {
        let mut forged = pkt.clone();
        forged[bit / 8] ^= 1 << (bit % 8);
        p.sim.inject(1, &forged);
    }
    let e = &p.sim.engines[1];
    // A flip in the destination QPN finds no QP (or one without the key).
    let c = e.counters();
    let dropped = c.get(Counter::AuthBadMac) + c.get(Counter::RcvdUnknownQpn);
    assert_eq!(dropped, bits.len() as u64);
    assert!(c.get(Counter::AuthBadMac) > bits.len() as u64 * 9 / 10);
    assert!(read_mr(e, dst, 0, 64) == vec![0; 64], "a changed packet was executed");
    p.sim.inject(1, &pkt);
    assert_eq!(read_mr(&p.sim.engines[1], dst, 0, 64), read_mr(&p.sim.engines[0], src, 0, 64));
}

/// A packet the link let through without checking its ICRC (it carries the
/// authenticated mode's mark, whose MAC stands in for the ICRC) is taken
/// only by an authenticated QP whose tag it matches.
#[test]
fn a_packet_whose_icrc_went_unchecked_needs_a_good_mac() {
    use uroce_transport::engine::{marked_authenticated, RxMeta};
    let unchecked = |p: &Pair| RxMeta { src_gid: p.sim.gids[0], dst_gid: p.sim.gids[1], icrc_skipped: true };
    // A QP without a key: only the ICRC could vouch for the packet.
    let mut p = rc_pair();
    let (src, dst) = (p.src, p.dst);
    let pkt = first_write_packet(&mut p);
    assert!(!marked_authenticated(&pkt));
    let meta = unchecked(&p);
    p.sim.engines[1].handle_packet(p.sim.now, meta, &pkt);
    assert_eq!(p.sim.engines[1].counters().get(Counter::AuthBadMac), 1);
    assert_eq!(read_mr(&p.sim.engines[1], dst, 0, 64), vec![0; 64]);
    p.sim.inject(1, &pkt);
    assert_eq!(read_mr(&p.sim.engines[1], dst, 0, 64), read_mr(&p.sim.engines[0], src, 0, 64), "checked, it lands");

    // An authenticated QP: its packets carry the mark; the tag decides.
    let mut p = auth_pair(QpType::Rc, [Some(KEY), Some(KEY)], uroce_transport::sim::LinkConfig::clean());
    let (src, dst) = (p.src, p.dst);
    let pkt = first_write_packet(&mut p);
    assert!(marked_authenticated(&pkt));
    let mut changed = pkt.clone();
    changed[40] ^= 0x10;
    let meta = unchecked(&p);
    p.sim.engines[1].handle_packet(p.sim.now, meta, &changed);
    assert_eq!(p.sim.engines[1].counters().get(Counter::AuthBadMac), 1);
    assert_eq!(read_mr(&p.sim.engines[1], dst, 0, 64), vec![0; 64]);
    p.sim.engines[1].handle_packet(p.sim.now, meta, &pkt);
    assert_eq!(
        read_mr(&p.sim.engines[1], dst, 0, 64),
        read_mr(&p.sim.engines[0], src, 0, 64),
        "its tag vouches for it"
    );
    // The mark is under the tag: cleared on the way, the packet fails.
    let mut unmarked = pkt.clone();
    unmarked[8] &= !uroce_transport::engine::AUTH_MARK;
    p.sim.inject(1, &unmarked);
    assert_eq!(p.sim.engines[1].counters().get(Counter::AuthBadMac), 2);
}

/// A recorded packet sent again is never executed: RC takes it for the
/// duplicate it is (acknowledged, not written again); UC, which has no
/// duplicates, drops it (auth_replay).
#[test]
fn a_replayed_authenticated_packet_is_never_executed() {
    for qp_type in [QpType::Rc, QpType::Uc] {
        let mut p = auth_pair(qp_type, [Some(KEY), Some(KEY)], uroce_transport::sim::LinkConfig::clean());
        let (src, dst) = (p.src, p.dst);
        let log = tap_to_b(&mut p);
        let write = |p: &mut Pair, id, off| {
            let op = WrOp::RdmaWrite { remote_addr: Pair::DST_ADDR, rkey: dst };
            p.sim.engines[0].post_send(p.a.qpn, wr(id, op, off, 16, src)).unwrap();
            p.sim.run_until(100_000, Duration::from_millis(10), |_| false);
        };
        write(&mut p, 1, 0);
        let first = log.lock().unwrap().last().unwrap().clone();
        write(&mut p, 2, 100);
        let now = read_mr(&p.sim.engines[1], dst, 0, 16);
        assert_eq!(now, read_mr(&p.sim.engines[0], src, 100, 16));
        p.sim.inject(1, &first);
        assert_eq!(read_mr(&p.sim.engines[1], dst, 0, 16), now, "{qp_type:?}: the replay was executed");
        let c = p.sim.engines[1].counters();
        match qp_type {
            QpType::Uc => assert_eq!(c.get(Counter::AuthReplay), 1),
            _ => assert_eq!(c.get(Counter::DuplicateRequest), 1),
        }
    }
}

/// Keys that differ (or a peer without the mode) exchange nothing.
#[test]
fn authenticated_qps_with_other_keys_take_nothing() {
    for keys in [[Some(KEY), Some([7; 32])], [Some(KEY), None]] {
        let mut p = auth_pair(QpType::Rc, keys, uroce_transport::sim::LinkConfig::clean());
        let (src, dst) = (p.src, p.dst);
        let op = WrOp::RdmaWrite { remote_addr: Pair::DST_ADDR, rkey: dst };
        p.sim.engines[0].post_send(p.a.qpn, wr(1, op, 0, 16, src)).unwrap();
        p.sim.run_until(1_000_000, Duration::from_secs(30), |s| s.engines[0].cq_len(p.a.send_cq) == 1);
        assert_eq!(poll_all(&mut p.sim.engines[0], p.a.send_cq)[0].status, WcStatus::RetryExcErr, "{keys:?}");
        assert_eq!(read_mr(&p.sim.engines[1], dst, 0, 16), vec![0; 16]);
    }
}

/// UD has no peer to share a key with; a QP past INIT is too late.
#[test]
fn the_authenticated_mode_is_for_rc_and_uc_before_rtr() {
    let mut p = Pair::new(16, &QpOptions::new(QpType::Ud, Mtu::Mtu1024));
    assert_eq!(p.sim.engines[0].set_qp_auth_key(p.a.qpn, KEY), Err(uroce_transport::engine::Error::AuthNotForUd));
    let mut p = rc_pair();
    let err = p.sim.engines[0].set_qp_auth_key(p.a.qpn, KEY).unwrap_err();
    assert!(matches!(err, uroce_transport::engine::Error::InvalidState { .. }), "{err}");
    let _ = &mut p;
}

/// The MAC covers the 64-bit PSN: across the 24-bit wrap, both ends agree
/// on it (under loss, with retransmissions on both sides of the wrap).
#[test]
fn authenticated_traffic_crosses_the_psn_wrap() {
    let link = uroce_transport::sim::LinkConfig { loss: 0.05, ..uroce_transport::sim::LinkConfig::clean() };
    let mut p = auth_pair_from(QpType::Rc, [Some(KEY), Some(KEY)], link, Some(0xff_ffe0));
    let (src, dst) = (p.src, p.dst);
    for i in 0..32u64 {
        let op = WrOp::RdmaWrite { remote_addr: Pair::DST_ADDR + i * 2048, rkey: dst };
        p.sim.engines[0].post_send(p.a.qpn, wr(i, op, i * 2048, 2048, src)).unwrap();
    }
    let done = p.sim.run_until(10_000_000, Duration::from_secs(60), |s| s.engines[0].cq_len(p.a.send_cq) == 32);
    assert!(done);
    assert!(poll_all(&mut p.sim.engines[0], p.a.send_cq).iter().all(|w| w.status == WcStatus::Success));
    assert!(read_mr(&p.sim.engines[1], dst, 0, 65536) == read_mr(&p.sim.engines[0], src, 0, 65536));
    assert!(p.sim.engines[1].query_qp(p.b.qpn).unwrap().rq_psn < 0x100, "the PSNs wrapped");
}
