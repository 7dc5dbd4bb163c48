//! ibv_rc_pingpong's traffic in the simulator: RC, path MTU 1024, 4 KiB SENDs
//! (4 packets, AckReq on the last) alternating directions with one in flight
//! each way, QP timeout 14 (67.1 ms) and retry_cnt 7, over a link that loses
//! and reorders (holds back 200 us) 5% of packets each
//! ([`impaired_link`]). `transport/tests/pingpong_retry.rs` checks it;
//! `cargo run --release -p uroce-transport --example retry_stats` measures it.
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
//! and 0.34 x 0.1 x 0.05^(k-1) for retry_cnt k. Measured (`retry_stats
//! hazard`, 2000 seeds of 100 exchanges): 3.2e-1, 3.1e-2, 1.6e-3, 7.8e-5 for
//! retry_cnt 0..3 (loss alone 2.1e-1, 2.1e-2, 1.1e-3, 4.5e-5; reordering
//! alone 1.4e-1, 2.2e-4, 0, 0). For retry_cnt 7 that is about 5e-10 a
//! message, 1e-7 a 200-message run: never, in practice (`retry_stats sweep`:
//! no failure in 5000 runs, 10^6 messages; 0.41 retries a message on
//! average, at most 7 for one).
//!
//! What does fail is a peer that does not answer for 8 timeouts (0.54 s):
//! the test `a_silent_peer_is_given_eight_timeouts` shows the budget. On a
//! loaded machine the thread that drives an end can stop that long (captures
//! of `uroce pingpong --loopback` show the silent end's socket holding all
//! eight retransmissions, read within a millisecond when it runs again).

use super::{Endpoint, LinkConfig, Pair, QpOptions, Sim};
use crate::engine::{AccessFlags, Counter, Mtu, QpType, RecvWr, SendWr, SgList, Sge, WcStatus, WorkCompletion, WrOp};
use core::time::Duration;

const SIZE: u32 = 4096;
const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
const RX_DEPTH: usize = 500;
const BUFFER: u64 = 0x1000;

/// Both ends of the C tool's loop: the client (node 0) sends first; an end
/// sends again once its last send completed and a message came in.
pub struct PingPong {
    pub sim: Sim,
    eps: [Endpoint; 2],
    keys: [u32; 2],
    iters: u32,
    /// WR ids still awaited before the next send, per node.
    pending: [u64; 2],
    /// Sends and receives completed, per node.
    pub sends: [u32; 2],
    pub recvs: [u32; 2],
    /// The retry counter of each node when it posted its current send.
    retries_at_post: [u64; 2],
    /// Retries each completed message took, the nodes' messages interleaved
    /// in the order they completed.
    pub per_msg: Vec<u64>,
    /// The first failed completion: node and status.
    pub failed: Option<(usize, WcStatus)>,
}

impl PingPong {
    /// Connected ends with ibv_rc_pingpong's attributes and `retry_cnt`, the
    /// receives posted and node 0's first send on its way; `iters` exchanges
    /// to go.
    pub fn new(seed: u64, link: LinkConfig, iters: u32, retry_cnt: u8) -> PingPong {
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
        let mut pair = Pair::with_link(seed, link, &o);
        let keys = [0, 1].map(|i| pair.reg_mr(i, BUFFER, vec![0x7bu8; SIZE as usize], AccessFlags::LOCAL_WRITE));
        let mut pp = PingPong {
            sim: pair.sim,
            eps: [pair.a, pair.b],
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

    fn sge(&self, i: usize) -> SgList {
        Sge { addr: BUFFER, length: SIZE, lkey: self.keys[i] }.into()
    }

    fn post_recv(&mut self, i: usize) {
        let wr = RecvWr { wr_id: RECV_WRID, sg_list: self.sge(i) };
        self.sim.engines[i].post_recv(self.eps[i].qpn, wr).expect("room for the receive");
    }

    fn post_send(&mut self, i: usize) {
        self.retries_at_post[i] = self.retries(i);
        let wr = SendWr::new(SEND_WRID, WrOp::Send, self.sge(i));
        self.sim.engines[i].post_send(self.eps[i].qpn, wr).expect("room for the send");
    }

    /// The go-back-N retries node `i` has made so far.
    pub fn retries(&self, i: usize) -> u64 {
        self.sim.engines[i].counters().get(Counter::CompleterRetryErr)
    }

    /// Takes the completions of both nodes and posts what the tool would.
    /// Returns the nodes whose send completed.
    pub fn poll(&mut self) -> [bool; 2] {
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

    /// Whether every exchange is done or a completion failed.
    pub fn finished(&self) -> bool {
        self.failed.is_some() || (0..2).all(|i| self.sends[i] >= self.iters && self.recvs[i] >= self.iters)
    }

    /// Retries per completed message: (mean, largest).
    pub fn retry_stats(&self) -> (f64, u64) {
        let n = self.per_msg.len().max(1) as f64;
        (self.per_msg.iter().sum::<u64>() as f64 / n, self.per_msg.iter().copied().max().unwrap_or(0))
    }
}

/// The link of the symptom: `loss` and `reorder` (holding a packet back
/// 200 us) per packet, 10 us of delay.
pub fn impaired_link(loss: f64, reorder: f64) -> LinkConfig {
    let mut l = LinkConfig::clean();
    l.loss = loss;
    l.reorder = reorder;
    l.reorder_delay = Duration::from_micros(200);
    l.delay = Duration::from_micros(10);
    l
}

/// Runs one ping-pong of `iters` exchanges to its end or first failure.
///
/// # Panics
/// When nothing is left to happen before the end: the engine lost track of
/// a message.
pub fn run(seed: u64, link: LinkConfig, iters: u32, retry_cnt: u8) -> PingPong {
    let mut pp = PingPong::new(seed, link, iters, retry_cnt);
    loop {
        pp.poll();
        if pp.finished() {
            return pp;
        }
        assert!(pp.sim.step(), "seed {seed}: nothing left to happen before the end");
    }
}
