//! Error cases, each with the status a verbs user would see.

use core::time::Duration;
use uroce_transport::engine::{
    AccessFlags, Counter, Engine, EngineConfig, Error, Event, MrStorage, Mtu, QpAttr, QpAttrMask, QpState, QpType,
    RecvWr, SendFlags, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion, WrOp,
};
use uroce_transport::sim::probe::{mr_contents, parse, poll_all};
use uroce_transport::sim::{create_endpoint, LinkConfig, Pair, QpOptions, Sim, REGION_ACCESS};
use uroce_transport::wire::{BthRepr, Opcode, RoceRepr};
use uroce_transport::Psn;

const SEED: u64 = 7;

/// An RC pair at path MTU 1024, without regions.
fn pair() -> Pair {
    Pair::new(SEED, &QpOptions::new(QpType::Rc, Mtu::Mtu1024))
}

/// Runs until `n` completions are on node 0's send CQ (bounded).
fn run_for_sends(p: &mut Pair, n: usize) -> Vec<WorkCompletion> {
    let (e, cq) = (0, p.a.send_cq);
    p.sim.run_until(1_000_000, Duration::from_secs(600), |s| s.engines[e].cq_len(cq) >= n);
    poll_all(&mut p.sim.engines[0], cq)
}

fn events(e: &mut Engine) -> Vec<Event> {
    std::iter::from_fn(|| e.poll_event()).collect()
}

/// Node 0 sends a 100-byte buffer with `op`; returns its source key.
fn post(p: &mut Pair, wr_id: u64, op: WrOp, len: u32) -> u32 {
    let src = p.reg_mr(0, 0x1000, vec![0x5a; 4096], REGION_ACCESS);
    let sge = Sge { addr: 0x1000, length: len, lkey: src };
    p.sim.engines[0].post_send(p.a.qpn, SendWr::new(wr_id, op, vec![sge])).unwrap();
    src
}

fn post_recv(p: &mut Pair, wr_id: u64, len: u32) -> u32 {
    let dst = p.reg_mr(1, 0x8000, vec![0; 4096], REGION_ACCESS);
    let sge = Sge { addr: 0x8000, length: len, lkey: dst };
    p.sim.engines[1].post_recv(p.b.qpn, RecvWr { wr_id, sg_list: sge.into() }).unwrap();
    dst
}

#[test]
fn no_receive_posted_is_rnr_nak_then_success() {
    let mut p = pair();
    post(&mut p, 1, WrOp::Send, 100);
    p.sim.run_until(1_000, Duration::from_millis(5), |_| false);
    assert_eq!(p.sim.engines[0].cq_len(p.a.send_cq), 0, "no completion while the peer has no receive");
    assert!(p.sim.engines[0].counters().get(Counter::RcvdRnrErr) > 0);
    assert!(p.sim.engines[1].counters().get(Counter::SendRnrErr) > 0);
    post_recv(&mut p, 9, 4096);
    let wcs = run_for_sends(&mut p, 1);
    assert_eq!(wcs.len(), 1);
    assert_eq!(wcs[0].status, WcStatus::Success);
    let r = poll_all(&mut p.sim.engines[1], p.b.recv_cq);
    assert_eq!((r[0].wr_id, r[0].status, r[0].byte_len), (9, WcStatus::Success, 100));
}

#[test]
fn rnr_retries_exhausted() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.rnr_retry = 2;
    let mut p = Pair::new(SEED, &o);
    post(&mut p, 1, WrOp::Send, 100);
    post(&mut p, 2, WrOp::Send, 100);
    let wcs = run_for_sends(&mut p, 2);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::RnrRetryExcErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(wcs[0].status.to_string(), "RNR retry counter exceeded");
    // The first try and two retries: three RNR NAKs.
    assert_eq!(p.sim.engines[0].counters().get(Counter::RcvdRnrErr), 3);
    assert_eq!(p.sim.engines[0].counters().get(Counter::RetryRnrExceededErr), 1);
    assert_eq!(p.sim.engines[0].query_qp(p.a.qpn).unwrap().qp_state, QpState::Err);
}

#[test]
fn vanished_peer_is_retry_exceeded_then_flush() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.retry_cnt = 3;
    o.timeout = 8; // 1.05 ms
    let mut p = Pair::new(SEED, &o);
    p.sim.link.loss = 1.0;
    for id in 1..=3 {
        post(&mut p, id, WrOp::Send, 2000);
    }
    let start = p.sim.now;
    let wcs = run_for_sends(&mut p, 3);
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    assert_eq!(
        got,
        [
            (1, WcStatus::RetryExcErr, WcOpcode::Send),
            (2, WcStatus::WrFlushErr, WcOpcode::Send),
            (3, WcStatus::WrFlushErr, WcOpcode::Send)
        ]
    );
    // The first try and three retries, each waiting one local ACK timeout.
    let waited = p.sim.now - start;
    assert!(waited >= Duration::from_nanos(4 * (4096 << 8)) && waited < Duration::from_millis(6), "{waited:?}");
    let c = p.sim.engines[0].counters();
    assert_eq!((c.get(Counter::RetryExceededErr), c.get(Counter::CompleterRetryErr)), (1, 3));
    // Posting to the QP in ERR completes at once, flushed.
    post(&mut p, 4, WrOp::Send, 1);
    let w = poll_all(&mut p.sim.engines[0], p.a.send_cq);
    assert_eq!((w[0].wr_id, w[0].status), (4, WcStatus::WrFlushErr));
}

/// A WRITE of 16 bytes at `va` under `rkey` to a 64-byte region at 0x8000 of
/// node 1 that the test registered with `access` in `pd_other` or the QP's PD.
fn remote_write_fails(access: AccessFlags, other_pd: bool, va: u64, rkey_offset: u32) {
    let mut p = pair();
    let pd = if other_pd { p.sim.engines[1].alloc_pd() } else { p.b.pd };
    let before = vec![0xeeu8; 64];
    let key = p.sim.engines[1].reg_mr(pd, 0x8000, Box::new(before.clone()), access).unwrap().rkey;
    post(&mut p, 1, WrOp::RdmaWrite { remote_addr: va, rkey: key.wrapping_add(rkey_offset) }, 16);
    post(&mut p, 2, WrOp::Send, 1);
    let wcs = run_for_sends(&mut p, 2);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(mr_contents(&p.sim.engines[1], key), before, "responder memory untouched");
    assert_eq!(p.sim.engines[1].query_qp(p.b.qpn).unwrap().qp_state, QpState::Err);
    assert!(events(&mut p.sim.engines[1]).contains(&Event::QpAccessError { qpn: p.b.qpn }));
}

#[test]
fn bad_rkey_is_remote_access_error() {
    remote_write_fails(REGION_ACCESS, false, 0x8000, 0x1000);
}

#[test]
fn out_of_bounds_is_remote_access_error() {
    remote_write_fails(REGION_ACCESS, false, 0x8000 + 56, 0);
}

#[test]
fn missing_remote_write_is_remote_access_error() {
    remote_write_fails(AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ, false, 0x8000, 0);
}

#[test]
fn wrong_pd_is_remote_access_error() {
    remote_write_fails(REGION_ACCESS, true, 0x8000, 0);
}

#[test]
fn read_and_atomic_need_their_access_flags() {
    for op in [0, 1] {
        let mut p = pair();
        let key = p.reg_mr(1, 0x8000, vec![7; 64], AccessFlags::LOCAL_WRITE);
        let wr = if op == 0 {
            WrOp::RdmaRead { remote_addr: 0x8000, rkey: key }
        } else {
            WrOp::AtomicFetchAdd { remote_addr: 0x8000, rkey: key, add: 1 }
        };
        post(&mut p, 1, wr, 8);
        let wcs = run_for_sends(&mut p, 1);
        assert_eq!(wcs[0].status, WcStatus::RemAccessErr, "{wr:?}");
        assert_eq!(mr_contents(&p.sim.engines[1], key), vec![7; 64]);
    }
}

#[test]
fn misaligned_atomic_is_remote_invalid_request() {
    let mut p = pair();
    let key = p.reg_mr(1, 0x8000, vec![0; 64], REGION_ACCESS);
    post(&mut p, 1, WrOp::AtomicCmpSwp { remote_addr: 0x8004, rkey: key, compare: 0, swap: 9 }, 8);
    let wcs = run_for_sends(&mut p, 1);
    assert_eq!(wcs[0].status, WcStatus::RemInvReqErr);
    assert_eq!(wcs[0].status.to_string(), "remote invalid request error");
    assert_eq!(mr_contents(&p.sim.engines[1], key), vec![0; 64]);
}

#[test]
fn operation_the_qp_does_not_enable_is_remote_invalid_request() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.access = AccessFlags::REMOTE_WRITE;
    let mut p = Pair::new(SEED, &o);
    let key = p.reg_mr(1, 0x8000, vec![3; 64], REGION_ACCESS);
    post(&mut p, 1, WrOp::RdmaRead { remote_addr: 0x8000, rkey: key }, 8);
    let wcs = run_for_sends(&mut p, 1);
    assert_eq!(wcs[0].status, WcStatus::RemInvReqErr);
    assert!(events(&mut p.sim.engines[1]).contains(&Event::QpRequestError { qpn: p.b.qpn }));
}

/// The packets node 1 answers an injected request with.
fn answers(p: &mut Pair, pkt: &[u8]) -> Vec<RoceRepr> {
    p.sim.inject(1, pkt);
    let mut buf = vec![0u8; uroce_transport::engine::MAX_PACKET_LEN];
    let mut out = Vec::new();
    while let Some(tx) = p.sim.engines[1].poll_transmit(p.sim.now, &mut buf) {
        out.push(parse(&buf[..tx.len]));
    }
    out
}

fn request(p: &Pair, op: Opcode, payload: &[u8]) -> Vec<u8> {
    let rq_psn = Psn::new(p.sim.engines[1].query_qp(p.b.qpn).unwrap().rq_psn);
    let mut repr = RoceRepr::new(BthRepr::new(op, p.b.qpn, rq_psn));
    repr.bth.ack_req = true;
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    repr.emit(&mut buf, payload);
    buf
}

#[test]
fn invalid_opcode_for_the_qp_is_nak_invalid_request() {
    // A SEND MIDDLE with no FIRST before it.
    let mut p = pair();
    post_recv(&mut p, 1, 4096);
    let pkt = request(&p, Opcode::RcSendMiddle, &[0; 1024]);
    let out = answers(&mut p, &pkt);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].aeth.unwrap().syndrome.to_byte(), 0x61, "NAK invalid request");
    assert_eq!(p.sim.engines[1].query_qp(p.b.qpn).unwrap().qp_state, QpState::Err);
    // The receive the responder held is flushed.
    let r = poll_all(&mut p.sim.engines[1], p.b.recv_cq);
    assert_eq!(r[0].status, WcStatus::WrFlushErr);

    // A UC opcode sent to an RC QP is dropped without an answer.
    let mut p = pair();
    let pkt = request(&p, Opcode::UcSendOnly, &[]);
    assert!(answers(&mut p, &pkt).is_empty());
    assert_eq!(p.sim.engines[1].query_qp(p.b.qpn).unwrap().qp_state, QpState::Rts);
}

#[test]
fn bad_lkey_or_range_is_local_protection_error() {
    let mut p = pair();
    post_recv(&mut p, 1, 4096);
    let src = p.reg_mr(0, 0x1000, vec![1; 64], REGION_ACCESS);
    let wrs = [
        Sge { addr: 0x1000, length: 8, lkey: src ^ 0x100 },
        Sge { addr: 0x1000 + 60, length: 8, lkey: src },
        Sge { addr: 0x1000, length: 8, lkey: src },
    ];
    for (i, sge) in wrs.into_iter().enumerate() {
        p.sim.engines[0].post_send(p.a.qpn, SendWr::new(i as u64, WrOp::Send, vec![sge])).unwrap();
    }
    let wcs = run_for_sends(&mut p, 3);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(0, WcStatus::LocProtErr), (1, WcStatus::WrFlushErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(wcs[0].status.to_string(), "local protection error");
}

#[test]
fn read_into_a_region_without_local_write_is_local_protection_error() {
    let mut p = pair();
    let remote = p.reg_mr(1, 0x8000, vec![1; 64], REGION_ACCESS);
    let ro = p.reg_mr(0, 0x1000, vec![0; 64], AccessFlags::REMOTE_READ);
    let sge = Sge { addr: 0x1000, length: 8, lkey: ro };
    let wr = SendWr::new(5, WrOp::RdmaRead { remote_addr: 0x8000, rkey: remote }, vec![sge]);
    p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    let wcs = run_for_sends(&mut p, 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (5, WcStatus::LocProtErr));
}

#[test]
fn length_errors() {
    // An atomic needs an 8-byte local buffer.
    let mut p = pair();
    let key = p.reg_mr(1, 0x8000, vec![0; 64], REGION_ACCESS);
    post(&mut p, 1, WrOp::AtomicFetchAdd { remote_addr: 0x8000, rkey: key, add: 1 }, 4);
    let wcs = run_for_sends(&mut p, 1);
    assert_eq!(wcs[0].status, WcStatus::LocLenErr);
    assert_eq!(wcs[0].status.to_string(), "local length error");
    assert_eq!(mr_contents(&p.sim.engines[1], key), vec![0; 64]);

    // A message longer than 2^31 bytes, in two SGEs.
    let mut p = pair();
    let sges = vec![Sge { addr: 0x1000, length: 1 << 31, lkey: 1 }, Sge { addr: 0x1000, length: 8, lkey: 1 }];
    p.sim.engines[0].post_send(p.a.qpn, SendWr::new(3, WrOp::Send, sges)).unwrap();
    let wcs = run_for_sends(&mut p, 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (3, WcStatus::LocLenErr));

    // A SEND longer than the receive buffer: the receiver sees a local
    // length error, the sender a remote invalid request.
    let mut p = pair();
    post_recv(&mut p, 7, 50);
    post(&mut p, 1, WrOp::Send, 100);
    let wcs = run_for_sends(&mut p, 1);
    assert_eq!(wcs[0].status, WcStatus::RemInvReqErr);
    let r = poll_all(&mut p.sim.engines[1], p.b.recv_cq);
    assert_eq!((r[0].wr_id, r[0].status), (7, WcStatus::LocLenErr));
}

#[test]
fn modify_to_error_flushes_everything() {
    let mut p = pair();
    post_recv(&mut p, 10, 64);
    post_recv(&mut p, 11, 64);
    let attr = QpAttr { qp_state: QpState::Err, ..QpAttr::default() };
    p.sim.engines[1].modify_qp(p.b.qpn, &attr, QpAttrMask::STATE).unwrap();
    let r = poll_all(&mut p.sim.engines[1], p.b.recv_cq);
    assert_eq!(
        r.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect::<Vec<_>>(),
        [(10, WcStatus::WrFlushErr, WcOpcode::Recv), (11, WcStatus::WrFlushErr, WcOpcode::Recv)]
    );
    assert_eq!(WcStatus::WrFlushErr.to_string(), "Work Request Flushed Error");
}

#[test]
fn illegal_transitions_and_masks_are_errors_that_say_what() {
    let mut p = pair();
    let e = &mut p.sim.engines[0];
    let attr = QpAttr { qp_state: QpState::Rtr, ..QpAttr::default() };
    let err = e.modify_qp(p.a.qpn, &attr, QpAttrMask::STATE).unwrap_err();
    assert_eq!(err.to_string(), "modify QP: RTS -> RTR is not a valid transition for a Rc QP");
    let o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    let fresh = create_endpoint(e, &o, None, None);
    let attr = QpAttr { qp_state: QpState::Init, port_num: 1, ..QpAttr::default() };
    let err = e.modify_qp(fresh.qpn, &attr, QpAttrMask::STATE | QpAttrMask::PORT).unwrap_err();
    assert_eq!(
        err.to_string(),
        "modify QP RESET -> INIT: missing required attributes IBV_QP_ACCESS_FLAGS, IBV_QP_PKEY_INDEX"
    );
    let err = e.post_send(fresh.qpn, SendWr::new(1, WrOp::Send, vec![])).unwrap_err();
    assert_eq!(err.to_string(), format!("post_send: QP 0x{:06x} is in state RESET", fresh.qpn));
}

#[test]
fn unsignaled_wrs_complete_silently_unless_they_fail() {
    let mut p = pair();
    for id in 0..3 {
        post_recv(&mut p, id, 4096);
    }
    let src = p.reg_mr(0, 0x1000, vec![1; 64], REGION_ACCESS);
    for id in 0..3u64 {
        let mut wr = SendWr::new(id, WrOp::Send, vec![Sge { addr: 0x1000, length: 8, lkey: src }]);
        wr.flags = if id == 1 { SendFlags::SIGNALED } else { SendFlags::EMPTY };
        p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    }
    // Run until the link and the timers are quiet: every ACK has arrived.
    p.sim.run_until(10_000, Duration::from_millis(10), |_| false);
    assert_eq!(p.sim.engines[1].cq_len(p.b.recv_cq), 3);
    let wcs = poll_all(&mut p.sim.engines[0], p.a.send_cq);
    assert_eq!(wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [1]);
}

#[test]
fn cq_overflow_is_an_async_error() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.cq_size = 2;
    o.sq_sig_all = true;
    let mut p = Pair::new(SEED, &o);
    let key = p.reg_mr(1, 0x8000, vec![0; 64], REGION_ACCESS);
    for id in 0..4 {
        post(&mut p, id, WrOp::RdmaWrite { remote_addr: 0x8000, rkey: key }, 8);
    }
    p.sim.run_until(10_000, Duration::from_millis(10), |_| false);
    assert!(p.sim.engines[0].cq_overflowed(p.a.send_cq));
    // As on hardware: the CQ errs (once), and the QP that lost a completion
    // goes to ERR, since its user can no longer learn what became of its work.
    assert_eq!(events(&mut p.sim.engines[0]), [Event::CqError { cq: p.a.send_cq }, Event::QpFatal { qpn: p.a.qpn }]);
    assert_eq!(p.sim.engines[0].query_qp(p.a.qpn).unwrap().qp_state, QpState::Err);
    let kept: Vec<_> = poll_all(&mut p.sim.engines[0], p.a.send_cq).iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(kept, [(0, WcStatus::Success), (1, WcStatus::Success)]);
    // The CQ stays in error: nothing more lands in it, even with room.
    post(&mut p, 9, WrOp::RdmaWrite { remote_addr: 0x8000, rkey: key }, 8);
    assert_eq!(p.sim.engines[0].cq_len(p.a.send_cq), 0);
    assert!(p.sim.engines[0].poll_event().is_none(), "one CQ error event only");
}

#[test]
fn a_destroyed_cq_and_a_freed_pd_are_gone_from_the_engine() {
    let mut e = Engine::new(EngineConfig::default());
    let cq = e.create_cq(4096);
    assert!(e.cq_ring(cq).is_some());
    e.destroy_cq(cq).unwrap();
    // Its ring (4096 completions' room) went with it, and its handle names nothing.
    assert!(e.cq_ring(cq).is_none());
    assert_eq!(e.destroy_cq(cq), Err(Error::NoSuchCq(cq)));
    let (pd, kept) = (e.alloc_pd(), e.alloc_pd());
    e.dealloc_pd(pd).unwrap();
    assert_eq!(e.dealloc_pd(pd), Err(Error::NoSuchPd(pd)));
    let storage = |len| Box::new(vec![0u8; len]) as Box<dyn MrStorage>;
    let refused = e.reg_mr(pd, 0x1000, storage(64), AccessFlags::LOCAL_WRITE).unwrap_err();
    assert_eq!(refused, Error::NoSuchPd(pd));
    assert!(e.reg_mr(kept, 0x1000, storage(64), AccessFlags::LOCAL_WRITE).is_ok());
}

#[test]
fn receive_cq_overflow_fails_the_responder_and_the_requester_times_out() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.retry_cnt = 1;
    o.timeout = 8;
    let mut sim = Sim::new(SEED, LinkConfig::clean());
    let a = create_endpoint(&mut sim.engines[0], &o, None, None);
    let b = create_endpoint(&mut sim.engines[1], &QpOptions { cq_size: 1, ..o }, None, None);
    let mut p = Pair::connect(sim, a, b, &o);
    for id in 0..3 {
        post_recv(&mut p, 100 + id, 64);
    }
    for id in 0..3 {
        post(&mut p, id, WrOp::Send, 8);
    }
    let wcs = run_for_sends(&mut p, 1);
    assert_eq!(p.sim.engines[1].query_qp(p.b.qpn).unwrap().qp_state, QpState::Err);
    assert_eq!(events(&mut p.sim.engines[1]), [Event::CqError { cq: p.b.recv_cq }, Event::QpFatal { qpn: p.b.qpn }]);
    // The first SEND was received and acknowledged; the second filled a
    // receive whose completion was lost, so it is never acknowledged.
    assert_eq!((wcs[0].wr_id, wcs[0].status), (0, WcStatus::Success));
    let rest = run_for_sends(&mut p, 2);
    assert_eq!(
        rest.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)]
    );
}

#[test]
fn srq_serves_receives_and_raises_its_limit_event() {
    let o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    let attr = uroce_transport::engine::SrqAttr { max_wr: 16, max_sge: 1, srq_limit: 2 };
    let (mut p, srq) = Pair::with_srq(3, &o, attr);
    let dst = p.reg_mr(1, 0x8000, vec![0u8; 4 * 64], REGION_ACCESS);
    let Pair { mut sim, a, b, .. } = p;
    for i in 0..4u64 {
        let sge = Sge { addr: 0x8000 + 64 * i, length: 64, lkey: dst };
        sim.engines[1].post_srq_recv(srq, RecvWr { wr_id: 100 + i, sg_list: sge.into() }).unwrap();
    }
    let src = sim.engines[0].reg_mr(a.pd, 0x1000, Box::new(vec![9u8; 64]), REGION_ACCESS).unwrap().lkey;
    for i in 0..3 {
        let wr = SendWr::new(i, WrOp::Send, vec![Sge { addr: 0x1000, length: 10, lkey: src }]);
        sim.engines[0].post_send(a.qpn, wr).unwrap();
    }
    sim.run_until(10_000, Duration::from_millis(10), |s| s.engines[1].cq_len(b.recv_cq) == 3);
    let r = poll_all(&mut sim.engines[1], b.recv_cq);
    assert_eq!(r.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [100, 101, 102]);
    assert_eq!(sim.engines[1].srq_len(srq), 1);
    assert_eq!(events(&mut sim.engines[1]), [Event::SrqLimitReached { srq }]);
}

#[test]
fn ud_qkey_mismatch_is_dropped() {
    let mut o = QpOptions::new(QpType::Ud, Mtu::Mtu1024);
    o.sq_sig_all = true;
    let mut p = Pair::new(SEED, &o);
    post_recv(&mut p, 1, 4096);
    let src = p.reg_mr(0, 0x1000, vec![1; 64], REGION_ACCESS);
    for (id, qkey) in [(1u64, 0x2222_2222u32), (2, o.qkey)] {
        let mut wr = SendWr::new(id, WrOp::Send, vec![Sge { addr: 0x1000, length: 8, lkey: src }]);
        wr.ud = Some(uroce_transport::engine::UdDest { dgid: p.sim.gids[1], remote_qpn: p.b.qpn, remote_qkey: qkey });
        p.sim.engines[0].post_send(p.a.qpn, wr).unwrap();
    }
    p.sim.run_until(10_000, Duration::from_millis(10), |_| false);
    assert_eq!(poll_all(&mut p.sim.engines[0], p.a.send_cq).len(), 2, "both sends complete");
    let r = poll_all(&mut p.sim.engines[1], p.b.recv_cq);
    assert_eq!(r.len(), 1, "only the right Q_Key is received");
    assert_eq!((r[0].byte_len, r[0].src_qp), (40 + 8, p.a.qpn));
}

#[test]
fn rnr_on_a_multi_packet_send_spends_rnr_retries_not_transport_retries() {
    // The packets after the RNR-NAKed FIRST arrive out of sequence and draw
    // one PSN sequence NAK per RNR round; that NAK is stale (the requester
    // already waits on the RNR timer) and must not use up retry_cnt.
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.retry_cnt = 0;
    let mut p = Pair::new(SEED, &o);
    post(&mut p, 1, WrOp::Send, 4000);
    p.sim.run_until(100_000, Duration::from_millis(5), |_| false);
    let rnr = p.sim.engines[0].counters().get(Counter::RcvdRnrErr);
    assert!(rnr > 7, "rnr_retry 7 retries forever ({rnr} RNR NAKs so far)");
    assert_eq!(p.sim.engines[0].cq_len(p.a.send_cq), 0);
    post_recv(&mut p, 9, 4096);
    let wcs = run_for_sends(&mut p, 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (1, WcStatus::Success));
    let r = poll_all(&mut p.sim.engines[1], p.b.recv_cq);
    assert_eq!((r[0].wr_id, r[0].status, r[0].byte_len), (9, WcStatus::Success, 4000));
}

#[test]
fn send_with_invalidate_of_an_unknown_key_is_remote_invalid_request() {
    for foreign_pd in [false, true] {
        let mut p = pair();
        post_recv(&mut p, 1, 4096);
        let key = if foreign_pd {
            let pd = p.sim.engines[1].alloc_pd();
            p.sim.engines[1].reg_mr(pd, 0x20_0000, Box::new(vec![0u8; 8]), REGION_ACCESS).unwrap().rkey
        } else {
            0xdead_be00
        };
        post(&mut p, 1, WrOp::SendWithInv { invalidate_rkey: key }, 10);
        let wcs = run_for_sends(&mut p, 1);
        assert_eq!(wcs[0].status, WcStatus::RemInvReqErr, "foreign PD: {foreign_pd}");
        let r = poll_all(&mut p.sim.engines[1], p.b.recv_cq);
        assert_eq!((r[0].wr_id, r[0].status), (1, WcStatus::RemInvReqErr));
        assert_eq!(p.sim.engines[1].query_qp(p.b.qpn).unwrap().qp_state, QpState::Err);
    }
}

#[test]
fn receive_with_a_bad_lkey_is_remote_operational_error() {
    let mut p = pair();
    let sge = Sge { addr: 0x8000, length: 64, lkey: 0x0bad_0100 };
    p.sim.engines[1].post_recv(p.b.qpn, RecvWr { wr_id: 5, sg_list: sge.into() }).unwrap();
    post(&mut p, 1, WrOp::Send, 10);
    let wcs = run_for_sends(&mut p, 1);
    assert_eq!(wcs[0].status, WcStatus::RemOpErr);
    assert_eq!(wcs[0].status.to_string(), "remote operational error");
    let r = poll_all(&mut p.sim.engines[1], p.b.recv_cq);
    assert_eq!((r[0].wr_id, r[0].status), (5, WcStatus::LocProtErr));
    assert_eq!(p.sim.engines[1].query_qp(p.b.qpn).unwrap().qp_state, QpState::Err);
}

#[test]
fn an_empty_last_packet_is_an_invalid_request() {
    let mut p = pair();
    post_recv(&mut p, 1, 4096);
    let first = request(&p, Opcode::RcSendFirst, &[1; 1024]);
    let ack = answers(&mut p, &first);
    assert_eq!(ack[0].aeth.unwrap().syndrome.to_byte(), 0x1f, "the FIRST is fine");
    // query_qp reports the live rq_psn: the one after the FIRST.
    let rq_psn = Psn::new(p.sim.engines[1].query_qp(p.b.qpn).unwrap().rq_psn);
    let mut repr = RoceRepr::new(BthRepr::new(Opcode::RcSendLast, p.b.qpn, rq_psn));
    repr.bth.ack_req = true;
    let mut last = vec![0u8; repr.buffer_len(0)];
    repr.emit(&mut last, &[]);
    let out = answers(&mut p, &last);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].aeth.unwrap().syndrome.to_byte(), 0x61, "NAK invalid request");
    assert_eq!(out[0].bth.psn, rq_psn);
}

fn flush_pair(qp_access: AccessFlags) -> Pair {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.access = qp_access;
    Pair::new(SEED, &o)
}

#[test]
fn flush_needs_the_placement_access_of_the_qp_and_of_the_region() {
    let flush =
        |rkey, placement, whole_region| WrOp::Flush { remote_addr: 0x8000, rkey, len: 16, placement, whole_region };
    // The QP does not allow persistent flushes: an invalid request.
    let mut p = flush_pair(AccessFlags::REMOTE_WRITE | AccessFlags::FLUSH_GLOBAL);
    let key = p.reg_mr(1, 0x8000, vec![0; 64], REGION_ACCESS | AccessFlags::FLUSH_PERSISTENT);
    p.sim.engines[0].post_send(p.a.qpn, SendWr::new(1, flush(key, 2, false), vec![])).unwrap();
    assert_eq!(run_for_sends(&mut p, 1)[0].status, WcStatus::RemInvReqErr);
    // The region does not: a remote access error, for a range or the whole.
    for whole in [false, true] {
        let all_flush = AccessFlags::FLUSH_GLOBAL | AccessFlags::FLUSH_PERSISTENT;
        let mut p = flush_pair(AccessFlags::REMOTE_WRITE | all_flush);
        let key = p.reg_mr(1, 0x8000, vec![0; 64], REGION_ACCESS | AccessFlags::FLUSH_GLOBAL);
        p.sim.engines[0].post_send(p.a.qpn, SendWr::new(1, flush(key, 3, whole), vec![])).unwrap();
        assert_eq!(run_for_sends(&mut p, 1)[0].status, WcStatus::RemAccessErr, "whole region {whole}");
        // Global visibility alone is allowed; out of bounds is not, unless whole.
        let mut p = flush_pair(AccessFlags::REMOTE_WRITE | all_flush);
        let key = p.reg_mr(1, 0x8000, vec![0; 8], REGION_ACCESS | AccessFlags::FLUSH_GLOBAL);
        p.sim.engines[0].post_send(p.a.qpn, SendWr::new(1, flush(key, 1, whole), vec![])).unwrap();
        let want = if whole { WcStatus::Success } else { WcStatus::RemAccessErr };
        assert_eq!(run_for_sends(&mut p, 1)[0].status, want, "16 bytes of an 8-byte region, whole {whole}");
    }
}

#[test]
fn atomic_write_needs_remote_write_and_alignment() {
    let mut p = pair();
    let ro = p.reg_mr(1, 0x8000, vec![5; 64], AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ);
    let aw = |addr, rkey| WrOp::AtomicWrite { remote_addr: addr, rkey, data: [9; 8] };
    p.sim.engines[0].post_send(p.a.qpn, SendWr::new(1, aw(0x8000, ro), vec![])).unwrap();
    assert_eq!(run_for_sends(&mut p, 1)[0].status, WcStatus::RemAccessErr);
    assert_eq!(mr_contents(&p.sim.engines[1], ro), vec![5; 64]);
    let mut p = pair();
    let rw = p.reg_mr(1, 0x8000, vec![5; 64], REGION_ACCESS);
    p.sim.engines[0].post_send(p.a.qpn, SendWr::new(1, aw(0x8004, rw), vec![])).unwrap();
    assert_eq!(run_for_sends(&mut p, 1)[0].status, WcStatus::RemInvReqErr);
    assert_eq!(mr_contents(&p.sim.engines[1], rw), vec![5; 64]);
}

#[test]
fn operations_a_qp_type_does_not_have_are_refused_at_post() {
    for (t, op) in [
        (QpType::Uc, WrOp::RdmaRead { remote_addr: 0, rkey: 1 }),
        (QpType::Uc, WrOp::AtomicFetchAdd { remote_addr: 0, rkey: 1, add: 1 }),
        (QpType::Uc, WrOp::SendWithInv { invalidate_rkey: 1 }),
        (QpType::Uc, WrOp::Flush { remote_addr: 0, rkey: 1, len: 0, placement: 1, whole_region: true }),
        (QpType::Ud, WrOp::RdmaWrite { remote_addr: 0, rkey: 1 }),
        (QpType::Ud, WrOp::AtomicWrite { remote_addr: 0, rkey: 1, data: [0; 8] }),
    ] {
        let mut p = Pair::new(SEED, &QpOptions::new(t, Mtu::Mtu1024));
        let err = p.sim.engines[0].post_send(p.a.qpn, SendWr::new(1, op, vec![])).unwrap_err();
        assert!(matches!(err, uroce_transport::engine::Error::InvalidOperation { .. }), "{t:?} {op:?}: {err}");
    }
    let mut p = Pair::new(SEED, &QpOptions::new(QpType::Uc, Mtu::Mtu1024));
    let err = p.sim.engines[0].post_send(p.a.qpn, SendWr::new(1, WrOp::RdmaRead { remote_addr: 0, rkey: 1 }, vec![]));
    assert_eq!(err.unwrap_err().to_string(), "RDMA_READ is not an operation of a Uc QP");
}
