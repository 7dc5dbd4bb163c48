//! Queues resized on the engine: a CQ (`ibv_resize_cq`) keeps its
//! completions in order, holds the new number and refuses a size below what
//! waits, and a poller on another thread (which holds the CQ's ring from
//! before any resize, as verbs-api's does) sees every completion once; an
//! SRQ (`ibv_modify_srq` with IBV_SRQ_MAX_WR) likewise with its receives.
// The poller is a thread with a deadline.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use core::time::Duration;
use uroce_transport::engine::{
    CqHandle, Error, Mtu, QpType, RecvWr, SendWr, Sge, SrqAttr, SrqHandle, WorkCompletion, WrOp,
};
use uroce_transport::sim::probe::poll_all;
use uroce_transport::sim::{Pair, QpOptions, REGION_ACCESS};

const SEED: u64 = 11;

/// A pair whose requester's CQ holds `cq_size`, every send signaled, and
/// the keys of node 0's source and node 1's target (64 bytes each).
fn pair(cq_size: usize) -> (Pair, Keys) {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.cq_size = cq_size;
    o.sq_sig_all = true;
    let mut p = Pair::new(SEED, &o);
    let lkey = p.reg_mr(0, 0x1000, vec![0x5a; 64], REGION_ACCESS);
    let rkey = p.reg_mr(1, 0x8000, vec![0; 64], REGION_ACCESS);
    (p, Keys { lkey, rkey })
}

#[derive(Clone, Copy)]
struct Keys {
    lkey: u32,
    rkey: u32,
}

/// Node 0 WRITEs 8 bytes, and the pair runs until the link is quiet.
fn write(p: &mut Pair, wr_id: u64, keys: Keys) {
    let sge = Sge { addr: 0x1000, length: 8, lkey: keys.lkey };
    let op = WrOp::RdmaWrite { remote_addr: 0x8000, rkey: keys.rkey };
    p.sim.engines[0].post_send(p.a.qpn, SendWr::new(wr_id, op, vec![sge])).unwrap();
    p.sim.run_until(10_000, Duration::from_millis(10), |_| false);
}

#[test]
fn a_resized_cq_keeps_its_completions_in_order_and_holds_the_new_number() {
    let (mut p, keys) = pair(2);
    for id in 0..2 {
        write(&mut p, id, keys);
    }
    let (e, cq) = (&mut p.sim.engines[0], p.a.send_cq);
    // Two wait: one entry cannot hold them, and the refusal changes nothing.
    assert_eq!(e.resize_cq(cq, 1), Err(Error::QueueTooSmall { asked: 1, waiting: 2 }));
    assert_eq!(e.cq_len(cq), 2);
    e.resize_cq(cq, 5).unwrap();
    for id in 2..5 {
        write(&mut p, id, keys);
    }
    // Five fit where two did before, the first two still first.
    assert!(!p.sim.engines[0].cq_overflowed(p.a.send_cq));
    let ids: Vec<_> = poll_all(&mut p.sim.engines[0], p.a.send_cq).iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [0, 1, 2, 3, 4]);
    // Shrunk to one entry: the second of two more completions overflows it.
    p.sim.engines[0].resize_cq(p.a.send_cq, 1).unwrap();
    write(&mut p, 5, keys);
    write(&mut p, 6, keys);
    assert!(p.sim.engines[0].cq_overflowed(p.a.send_cq));
    assert_eq!(p.sim.engines[0].resize_cq(CqHandle(9999), 4), Err(Error::NoSuchCq(CqHandle(9999))));
}

#[test]
fn a_poller_on_another_thread_sees_every_completion_once_across_resizes() {
    const N: u64 = 2_000;
    let (mut p, keys) = pair(4);
    let ring = p.sim.engines[0].cq_ring(p.a.send_cq).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let poller = std::thread::spawn(move || {
        let (mut seen, mut out) = (Vec::new(), [WorkCompletion::default(); 3]);
        while (seen.len() as u64) < N && std::time::Instant::now() < deadline {
            let n = ring.pop_into(&mut out);
            seen.extend(out[..n].iter().map(|w| w.wr_id));
        }
        seen
    });
    for id in 0..N {
        // Grow and shrink as a program might; refused when more wait.
        let _ = p.sim.engines[0].resize_cq(p.a.send_cq, 3 + (id % 5) as usize);
        while p.sim.engines[0].cq_len(p.a.send_cq) >= 3 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        write(&mut p, id, keys);
    }
    let seen = poller.join().unwrap();
    assert!(!p.sim.engines[0].cq_overflowed(p.a.send_cq), "the poller stopped seeing the CQ's queue");
    assert_eq!(seen, (0..N).collect::<Vec<_>>());
}

#[test]
fn a_resized_srq_keeps_its_receives_in_order_and_takes_the_new_number() {
    let o = QpOptions { sq_sig_all: true, ..QpOptions::new(QpType::Rc, Mtu::Mtu1024) };
    let (mut p, srq) = Pair::with_srq(12, &o, SrqAttr { max_wr: 2, max_sge: 1, srq_limit: 0 });
    let lkey = p.reg_mr(0, 0x1000, vec![0x5a; 64], REGION_ACCESS);
    let key = p.reg_mr(1, 0x8000, vec![0; 64], REGION_ACCESS);
    let recv = |id| RecvWr { wr_id: id, sg_list: Sge { addr: 0x8000, length: 64, lkey: key }.into() };
    for id in 0..2 {
        p.sim.engines[1].post_srq_recv(srq, recv(id)).unwrap();
    }
    let e = &mut p.sim.engines[1];
    assert_eq!(e.resize_srq(srq, 1), Err(Error::QueueTooSmall { asked: 1, waiting: 2 }));
    assert_eq!((e.srq_len(srq), e.srq_attr(srq).unwrap().max_wr), (2, 2));
    e.resize_srq(srq, 5).unwrap();
    assert_eq!(e.srq_attr(srq).unwrap().max_wr, 5);
    for id in 2..5 {
        e.post_srq_recv(srq, recv(id)).unwrap();
    }
    assert!(matches!(e.post_srq_recv(srq, recv(5)), Err(Error::QueueFull { .. })));
    // Five SENDs take the five receives, the first two posted first.
    for id in 0..5 {
        let sge = Sge { addr: 0x1000, length: 8, lkey };
        p.sim.engines[0].post_send(p.a.qpn, SendWr::new(id, WrOp::Send, vec![sge])).unwrap();
    }
    p.sim.run_until(10_000, Duration::from_millis(10), |_| false);
    let ids: Vec<_> = poll_all(&mut p.sim.engines[1], p.b.recv_cq).iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [0, 1, 2, 3, 4]);
    assert_eq!(p.sim.engines[1].resize_srq(SrqHandle(9999), 4), Err(Error::NoSuchSrq(SrqHandle(9999))));
}
