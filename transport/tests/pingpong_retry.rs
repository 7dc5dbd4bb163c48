//! ibv_rc_pingpong's traffic in the simulator: RC, path MTU 1024, 4 KiB SENDs
//! (4 packets, AckReq on the last) alternating directions with one in flight
//! each way, QP timeout 14 (67.1 ms) and retry_cnt 7, over a link that loses
//! and reorders (holds back 200 us) 5% of packets each.
//!
//! The model. The retry counter counts consecutive retries without progress:
//! any response that moves the completer (an ACK, a READ response, or a PSN
//! sequence NAK, which acknowledges every PSN before its own) gives back the
//! whole budget. A message fails only after retry_cnt + 1 = 8 go-back-N
//! rounds in a row none of which moved the completer. With p = 0.05 for each
//! impairment:
//! - a message needs a retry at all when any of its 4 packets or its ACK is
//!   lost or (but the last) overtaken: about 1 - 0.9025^4 = 0.34;
//! - the round after that retry moves nothing when its first packet is lost or
//!   overtaken (the NAK names the same PSN, or nothing answers) or its one
//!   response is lost: at most 0.0975 + 0.05, measured 0.1;
//! - a further round moves nothing mostly when its one response is lost (the
//!   responder by then holds the packets and acknowledges their duplicates):
//!   about p.
//!
//! So the hazard per message is about 0.34 for retry_cnt 0 (any retry fails)
//! and 0.34 x 0.1 x 0.05^(k-1) for retry_cnt k. Measured
//! (`hazard_by_retry_cnt`, 2000 seeds of 100 exchanges): 3.2e-1, 3.1e-2,
//! 1.6e-3, 7.8e-5 for retry_cnt 0..3 (loss alone 2.1e-1, 2.1e-2, 1.1e-3,
//! 4.5e-5; reordering alone 1.4e-1, 2.2e-4, 0, 0). For retry_cnt 7 that is
//! about 5e-10 a message, 1e-7 a 200-message run: never, in practice
//! (`sweep_pingpong`: no failure in 5000 runs, 10^6 messages; 0.41 retries a
//! message on average, at most 7 for one).
//!
//! What does fail is a peer that does not answer for 8 timeouts (0.54 s):
//! `a_silent_peer_is_given_eight_timeouts` shows the budget. On a loaded
//! machine the thread that drives an end can stop that long (captures of
//! `uroce pingpong --loopback` show the silent end's socket holding all eight
//! retransmissions, read within a millisecond when it runs again).

use core::time::Duration;
use std::sync::{Arc, Mutex};
use uroce_transport::engine::{
    AccessFlags, Counter, Engine, Mtu, QpType, RecvWr, SendWr, Sge, WcStatus, WorkCompletion, WrOp,
};
use uroce_transport::sim::{connect, create_endpoint, Endpoint, LinkConfig, QpOptions, Sim};
use uroce_transport::wire::{RocePacket, RoceRepr};

const SIZE: u32 = 4096;
const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
const RX_DEPTH: usize = 500;

/// Both ends of the C tool's loop: the client (node 0) sends first; an end
/// sends again once its last send completed and a message came in.
struct PingPong {
    sim: Sim,
    eps: [Endpoint; 2],
    keys: [u32; 2],
    iters: u32,
    /// WR ids still awaited before the next send, per node.
    pending: [u64; 2],
    /// Sends and receives completed, per node.
    sends: [u32; 2],
    recvs: [u32; 2],
    /// The retry counter of each node when it posted its current send.
    retries_at_post: [u64; 2],
    /// Retries each completed message took.
    per_msg: Vec<u64>,
    /// The first failed completion: node and status.
    failed: Option<(usize, WcStatus)>,
}

fn register(e: &mut Engine, ep: &Endpoint) -> u32 {
    e.reg_mr(ep.pd, 0x1000, Box::new(vec![0x7bu8; SIZE as usize]), AccessFlags::LOCAL_WRITE).unwrap().lkey
}

impl PingPong {
    fn new(seed: u64, link: LinkConfig, iters: u32, retry_cnt: u8) -> PingPong {
        let mut sim = Sim::new(seed, link);
        // ibv_rc_pingpong's attributes.
        let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
        o.timeout = 14;
        o.retry_cnt = retry_cnt;
        o.rnr_retry = 7;
        o.min_rnr_timer = 12;
        o.max_rd_atomic = 1;
        o.max_dest_rd_atomic = 1;
        o.access = AccessFlags::EMPTY;
        o.cap.max_send_wr = 1;
        o.cap.max_recv_wr = RX_DEPTH as u32;
        let eps = [0, 1].map(|i| create_endpoint(&mut sim.engines[i], &o, None, None));
        connect(&mut sim, &eps[0], &eps[1], &o);
        let keys = [0, 1].map(|i| register(&mut sim.engines[i], &eps[i]));
        let mut pp = PingPong {
            sim,
            eps,
            keys,
            iters,
            pending: [RECV_WRID | SEND_WRID, RECV_WRID],
            sends: [0; 2],
            recvs: [0; 2],
            retries_at_post: [0; 2],
            per_msg: Vec::new(),
            failed: None,
        };
        for i in 0..2 {
            for _ in 0..RX_DEPTH {
                pp.post_recv(i);
            }
        }
        pp.post_send(0);
        pp
    }

    fn sge(&self, i: usize) -> Vec<Sge> {
        vec![Sge { addr: 0x1000, length: SIZE, lkey: self.keys[i] }]
    }

    fn post_recv(&mut self, i: usize) {
        let wr = RecvWr { wr_id: RECV_WRID, sg_list: self.sge(i) };
        self.sim.engines[i].post_recv(self.eps[i].qpn, wr).unwrap();
    }

    fn post_send(&mut self, i: usize) {
        self.retries_at_post[i] = self.retries(i);
        let wr = SendWr::new(SEND_WRID, WrOp::Send, self.sge(i));
        self.sim.engines[i].post_send(self.eps[i].qpn, wr).unwrap();
    }

    fn retries(&self, i: usize) -> u64 {
        self.sim.engines[i].counters().get(Counter::CompleterRetryErr)
    }

    /// Takes the completions of both nodes and posts what the tool would.
    /// Returns the nodes whose send completed.
    fn poll(&mut self) -> [bool; 2] {
        [0, 1].map(|i| {
            let ep = self.eps[i];
            let mut sent = false;
            loop {
                let wc = match self.sim.engines[i].poll_cq(ep.send_cq) {
                    Some(wc) => wc,
                    None => match self.sim.engines[i].poll_cq(ep.recv_cq) {
                        Some(wc) => wc,
                        None => return sent,
                    },
                };
                sent |= self.completion(i, wc);
            }
        })
    }

    fn completion(&mut self, i: usize, wc: WorkCompletion) -> bool {
        if wc.status != WcStatus::Success {
            self.failed.get_or_insert((i, wc.status));
            return false;
        }
        let sent = wc.wr_id == SEND_WRID;
        if sent {
            self.sends[i] += 1;
            self.per_msg.push(self.retries(i) - self.retries_at_post[i]);
        } else {
            self.recvs[i] += 1;
            self.post_recv(i);
        }
        self.pending[i] &= !wc.wr_id;
        if self.sends[i] < self.iters && self.pending[i] == 0 {
            self.post_send(i);
            self.pending[i] = RECV_WRID | SEND_WRID;
        }
        sent
    }

    fn finished(&self) -> bool {
        self.failed.is_some() || (0..2).all(|i| self.sends[i] >= self.iters && self.recvs[i] >= self.iters)
    }
}

/// The link of the symptom: 5% loss and 5% reordering (200 us), each on its
/// own or both.
fn link(loss: f64, reorder: f64) -> LinkConfig {
    let mut l = LinkConfig::clean();
    l.loss = loss;
    l.reorder = reorder;
    l.reorder_delay = Duration::from_micros(200);
    l.delay = Duration::from_micros(10);
    l
}

/// Runs one ping-pong of `iters` exchanges to its end or first failure.
fn pingpong(seed: u64, link: LinkConfig, iters: u32, retry_cnt: u8) -> PingPong {
    let mut pp = PingPong::new(seed, link, iters, retry_cnt);
    loop {
        pp.poll();
        if pp.finished() {
            return pp;
        }
        assert!(pp.sim.step(), "seed {seed}: nothing left to happen before the end");
    }
}

/// Retries per completed message: (mean, largest).
fn retry_stats(pp: &PingPong) -> (f64, u64) {
    let n = pp.per_msg.len().max(1) as f64;
    (pp.per_msg.iter().sum::<u64>() as f64 / n, pp.per_msg.iter().copied().max().unwrap_or(0))
}

#[test]
fn pingpong_under_loss_and_reorder_never_exhausts_the_retries() {
    for (name, l, seeds) in
        [("loss and reorder", link(0.05, 0.05), 60), ("loss", link(0.05, 0.0), 20), ("reorder", link(0.0, 0.05), 20)]
    {
        let (mut sum, mut msgs, mut most) = (0u64, 0usize, 0u64);
        for seed in 0..seeds {
            let pp = pingpong(seed, l, 100, 7);
            assert_eq!(pp.failed, None, "{name}, seed {seed}: failed after {} exchanges", pp.sends[0]);
            assert_eq!(pp.per_msg.len(), 200, "{name}, seed {seed}");
            sum += pp.per_msg.iter().sum::<u64>();
            msgs += pp.per_msg.len();
            most = most.max(retry_stats(&pp).1);
        }
        let mean = sum as f64 / msgs as f64;
        // About a third of the messages meet an impairment; few need more
        // than two rounds (see the model above).
        let (lo, hi) = match name {
            "loss and reorder" => (0.3, 0.55),
            "loss" => (0.2, 0.4),
            _ => (0.1, 0.25),
        };
        assert!((lo..hi).contains(&mean), "{name}: {mean:.3} retries per message");
        assert!(most <= 6, "{name}: a message took {most} retries");
    }
}

/// Node 1 goes silent (takes in nothing, as an end whose thread is not
/// scheduled) right after its 10th send completed, while node 0's next
/// message is on its way; it runs again once node 0 has retried `retries`
/// times (or failed), taking in at once all that reached it meanwhile.
/// Returns the run and how long node 1 was silent.
fn silent_peer(retries: u64) -> (PingPong, Duration) {
    let mut pp = PingPong::new(1, LinkConfig::clean(), 20, 7);
    let held: Arc<Mutex<Option<Vec<Vec<u8>>>>> = Arc::new(Mutex::new(None));
    let h = held.clone();
    pp.sim.drop_if = Some(Box::new(move |to, data| match h.lock().unwrap().as_mut() {
        Some(backlog) if to == 1 => {
            backlog.push(data.to_vec());
            true
        }
        _ => false,
    }));
    let mut silent = None;
    let mut silent_for = Duration::ZERO;
    loop {
        let sent = pp.poll();
        if sent[1] && pp.sends[1] == 10 {
            *held.lock().unwrap() = Some(Vec::new());
            silent = Some((pp.sim.now, pp.retries(0)));
        }
        if let Some((since, base)) = silent {
            if pp.failed.is_some() || pp.retries(0) - base >= retries {
                silent = None;
                silent_for = pp.sim.now - since;
                let backlog = held.lock().unwrap().take().unwrap();
                assert!(backlog.len() >= 4, "node 0's message reached node 1 before it went silent");
                for p in backlog {
                    pp.sim.inject(1, &p);
                }
                continue;
            }
        }
        if pp.finished() {
            return (pp, silent_for);
        }
        assert!(pp.sim.step(), "nothing left to happen before the end");
    }
}

/// Within 100 us: node 0's timer started when its first packet left, a few
/// microseconds before node 1 went silent.
fn near(d: Duration, want: Duration) -> bool {
    d.abs_diff(want) < Duration::from_micros(100)
}

#[test]
fn a_silent_peer_is_given_eight_timeouts() {
    let timeout = Duration::from_nanos(4096 << 14);
    // Silent through 7 timeouts: the 7th retransmission finds it awake.
    let (pp, silent_for) = silent_peer(7);
    assert_eq!(pp.failed, None);
    assert_eq!((pp.sends, pp.recvs), ([20; 2], [20; 2]));
    assert!(near(silent_for, 7 * timeout), "{silent_for:?}");
    // Node 0's 11th message took all 7 retries (the per_msg list interleaves
    // the nodes, so look for it rather than index it).
    assert_eq!(pp.per_msg.iter().filter(|&&r| r == 7).count(), 1, "{:?}", pp.per_msg);
    // Silent for longer: the 8th timeout fails the send (retry_cnt 7 is not
    // infinite), 8 timeouts after the first transmission.
    let (pp, silent_for) = silent_peer(u64::MAX);
    assert_eq!(pp.failed, Some((0, WcStatus::RetryExcErr)));
    assert_eq!(pp.sends[0], 10);
    assert!(near(silent_for, 8 * timeout), "{silent_for:?}");
    assert_eq!(pp.sim.engines[0].counters().get(Counter::RetryExceededErr), 1);
}

/// Progress refills the budget, and a PSN sequence NAK is progress: one
/// 10-packet SEND under retry_cnt 1 whose round k loses its packet k (k = 1..8)
/// takes 8 retries, each NAKed at the lost packet, which acknowledges the
/// ones before it; each round starts at the NAKed packet.
#[test]
fn naks_that_acknowledge_refill_the_retry_budget() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.timeout = 14;
    o.retry_cnt = 1;
    let mut sim = Sim::new(3, LinkConfig::clean());
    let a = create_endpoint(&mut sim.engines[0], &o, None, None);
    let b = create_endpoint(&mut sim.engines[1], &o, None, None);
    connect(&mut sim, &a, &b, &o);
    let len = 10 * 1024;
    let src = sim.engines[0].reg_mr(a.pd, 0, Box::new(vec![7u8; len]), AccessFlags::LOCAL_WRITE).unwrap().lkey;
    let dst = sim.engines[1].reg_mr(b.pd, 0, Box::new(vec![0u8; len]), AccessFlags::LOCAL_WRITE).unwrap().lkey;
    let sge = |lkey| vec![Sge { addr: 0, length: len as u32, lkey }];
    sim.engines[1].post_recv(b.qpn, RecvWr { wr_id: 1, sg_list: sge(dst) }).unwrap();
    sim.engines[0].post_send(a.qpn, SendWr::new(2, WrOp::Send, sge(src))).unwrap();
    // Data packets seen per PSN offset; the first PSN is the first seen.
    let sent = Arc::new(Mutex::new((None, [0u32; 10])));
    let s = sent.clone();
    sim.drop_if = Some(Box::new(move |to, data| {
        if to != 1 {
            return false;
        }
        let psn = RoceRepr::parse(&RocePacket::new_checked(data).unwrap()).unwrap().bth.psn;
        let mut s = s.lock().unwrap();
        let first = *s.0.get_or_insert(psn);
        let k = (psn - first) as usize;
        s.1[k] += 1;
        (1..=8).contains(&k) && s.1[k] == k as u32
    }));
    let done = sim.run_until(10_000, Duration::from_secs(10), |s| s.engines[0].cq_len(a.send_cq) > 0);
    assert!(done);
    let wc = sim.engines[0].poll_cq(a.send_cq).unwrap();
    assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
    let c = sim.engines[0].counters();
    assert_eq!((c.get(Counter::CompleterRetryErr), c.get(Counter::RcvdSeqErr)), (8, 8));
    // Round 1 sends the 10 packets, round k + 1 those from packet k on.
    assert_eq!(sent.lock().unwrap().1, [1, 2, 3, 4, 5, 6, 7, 8, 9, 9]);
}

/// Runs `seeds` ping-pongs of 100 exchanges and prints failures and the
/// distribution of retries per message.
fn sweep(name: &str, l: LinkConfig, seeds: u64) {
    let mut failed = Vec::new();
    let mut hist = [0u64; 9];
    let mut msgs = 0;
    for seed in 0..seeds {
        let pp = pingpong(seed, l, 100, 7);
        if let Some(f) = pp.failed {
            failed.push((seed, pp.sends[0], f));
        }
        for &m in &pp.per_msg {
            hist[(m as usize).min(8)] += 1;
            msgs += 1;
        }
    }
    println!("{name}: {} of {seeds} runs failed {failed:?}", failed.len());
    println!("  retries per message (0..=7, more): {hist:?} of {msgs}");
}

fn seeds(default: u64) -> u64 {
    std::env::var("SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

#[test]
#[ignore = "statistics: cargo test --release -p uroce-transport --test pingpong_retry -- --ignored --nocapture"]
fn sweep_pingpong() {
    let n = seeds(5000);
    sweep("loss 5% + reorder 5%", link(0.05, 0.05), n);
    sweep("loss 5%", link(0.05, 0.0), n);
    sweep("reorder 5%", link(0.0, 0.05), n);
}

/// The hazard per message of retry_cnt + 1 rounds in a row without progress,
/// measured where failures are common enough to count (small retry_cnt).
#[test]
#[ignore = "statistics: cargo test --release -p uroce-transport --test pingpong_retry -- --ignored --nocapture"]
fn hazard_by_retry_cnt() {
    let n = seeds(2000);
    for (name, l) in
        [("loss 5% + reorder 5%", link(0.05, 0.05)), ("loss 5%", link(0.05, 0.0)), ("reorder 5%", link(0.0, 0.05))]
    {
        for retry_cnt in 0..=3u8 {
            let (mut failed, mut msgs) = (0u64, 0u64);
            for seed in 0..n {
                let pp = pingpong(seed, l, 100, retry_cnt);
                msgs += pp.per_msg.len() as u64 + u64::from(pp.failed.is_some());
                failed += u64::from(pp.failed.is_some());
            }
            let h = failed as f64 / msgs as f64;
            println!("{name}, retry_cnt {retry_cnt}: {failed} failures in {msgs} messages, {h:.2e} per message");
        }
    }
}
