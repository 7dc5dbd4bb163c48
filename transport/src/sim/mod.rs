//! A deterministic simulation: two engines over an in-memory link with a
//! virtual clock and a seeded impairment model (loss, duplication,
//! reordering, corruption, delay, rate, MTU). Same seed, same run.
//!
//! The link plays the layer below the engine: it stamps a CRC-32 into the
//! ICRC field when a packet leaves and drops packets whose CRC no longer
//! matches on arrival, as a real link checks the ICRC.
//!
//! Behind the crate's `sim` feature: tests, examples and benchmarks use it,
//! applications have no need of it.
//!
//! Most tests start from a [`Pair`] of connected QPs and look at the run
//! through the [`probe`] functions.

pub mod goodput;
mod link;
mod pair;
pub mod pingpong;
pub mod probe;
mod setup;
mod workload;

pub use link::{LinkConfig, LinkStats};
pub use pair::{Pair, REGION_ACCESS};
pub use setup::{connect, create_endpoint, create_qp_on, ready_ud, Endpoint, QpOptions};
pub use workload::{run_op, Op, Outcome};

use crate::engine::{Engine, EngineConfig, Gid, Instant, RxMeta, MAX_PACKET_LEN};
use crate::Seed;
use core::time::Duration;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Sees every packet delivered: the receiving node and the bytes.
pub type Tap = Box<dyn FnMut(usize, &[u8]) + Send>;

/// Decides, for each packet about to be delivered (receiving node, bytes),
/// whether it is lost instead: a test's targeted loss.
pub type DropIf = Box<dyn FnMut(usize, &[u8]) -> bool + Send>;

/// A packet on the wire.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Instant,
    seq: u64,
    from: usize,
    to: usize,
    /// Where it was sent: node `to`'s GID, or a multicast group it joined.
    dst_gid: Gid,
    data: Vec<u8>,
}

/// Two engines, a link and a clock.
pub struct Sim {
    pub engines: [Engine; 2],
    pub gids: [Gid; 2],
    pub now: Instant,
    pub link: LinkConfig,
    pub stats: LinkStats,
    rng: ChaCha8Rng,
    wire: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
    /// When each direction's link is free again (serialisation at `rate_bps`).
    busy_until: [Instant; 2],
    buf: Vec<u8>,
    /// Packets a test wants to see: every packet delivered is offered here.
    pub tap: Option<Tap>,
    /// Packets a test wants lost (after the impairments, before the tap).
    pub drop_if: Option<DropIf>,
    /// The multicast groups each node's link joined (its engine says which).
    pub joined: [std::collections::BTreeSet<Gid>; 2],
}

impl Sim {
    /// Engines seeded from `seed` (and `seed + 1`), GIDs 10.0.0.1 and 10.0.0.2.
    pub fn new(seed: u64, link: LinkConfig) -> Sim {
        let gids = [Gid::from_ipv4([10, 0, 0, 1]), Gid::from_ipv4([10, 0, 0, 2])];
        let cfg = |i: usize| EngineConfig {
            seed: Seed::Fixed(seed.wrapping_mul(2).wrapping_add(i as u64)),
            gid: gids[i],
            ..Default::default()
        };
        Sim {
            engines: [Engine::new(cfg(0)), Engine::new(cfg(1))],
            gids,
            now: Instant::ZERO,
            link,
            stats: LinkStats::default(),
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_114c),
            wire: BinaryHeap::new(),
            seq: 0,
            busy_until: [Instant::ZERO; 2],
            buf: vec![0u8; MAX_PACKET_LEN],
            tap: None,
            drop_if: None,
            joined: Default::default(),
        }
    }

    /// Takes every packet both engines have to send and puts it on the wire:
    /// to the other node, or a multicast datagram to each node (the sender
    /// included, as IP loops multicast back) whose link joined its group.
    pub fn transmit_all(&mut self) {
        self.follow_groups(0);
        self.follow_groups(1);
        for from in 0..2 {
            while let Some(tx) = self.engines[from].poll_transmit(self.now, &mut self.buf) {
                let mut data = self.buf[..tx.len].to_vec();
                link::stamp_crc(&mut data);
                if tx.dest_gid.is_multicast() {
                    let members: Vec<usize> = (0..2).filter(|&n| self.joined[n].contains(&tx.dest_gid)).collect();
                    for to in members {
                        self.send(from, to, tx.dest_gid, data.clone());
                    }
                    continue;
                }
                let to = 1 - from;
                if tx.dest_gid != self.gids[to] {
                    self.stats.misaddressed += 1;
                    continue;
                }
                self.send(from, to, self.gids[to], data);
            }
        }
    }

    /// Node `node`'s link joins and leaves the groups its engine asks for.
    fn follow_groups(&mut self, node: usize) {
        while let Some(change) = self.engines[node].poll_mcast_change() {
            match change {
                crate::engine::McastChange::Join(g) => self.joined[node].insert(g),
                crate::engine::McastChange::Leave(g) => self.joined[node].remove(&g),
            };
        }
    }

    fn send(&mut self, from: usize, to: usize, dst_gid: Gid, data: Vec<u8>) {
        self.stats.sent += 1;
        let ser = self.link.serialisation(data.len());
        let start = self.busy_until[from].max(self.now);
        self.busy_until[from] = start + ser;
        let base = start + ser + self.link.delay;
        for (at, data) in link::impair(&self.link, &mut self.rng, &mut self.stats, base, data) {
            self.seq += 1;
            self.wire.push(Reverse(InFlight { at, seq: self.seq, from, to, dst_gid, data }));
        }
    }

    /// The next time something happens: a delivery or an engine deadline.
    pub fn next_event(&self) -> Option<Instant> {
        let wire = self.wire.peek().map(|Reverse(p)| p.at);
        let timers = self.engines.iter().filter_map(|e| e.poll_timeout());
        wire.into_iter().chain(timers).min()
    }

    /// Sends what is ready, then advances to the next event and handles it.
    /// False when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.transmit_all();
        let Some(at) = self.next_event() else { return false };
        self.now = self.now.max(at);
        while self.wire.peek().is_some_and(|Reverse(p)| p.at <= self.now) {
            let Reverse(p) = self.wire.pop().expect("peeked");
            self.deliver(p);
        }
        for e in &mut self.engines {
            if e.poll_timeout().is_some_and(|t| t <= self.now) {
                e.handle_timeout(self.now);
            }
        }
        self.transmit_all();
        true
    }

    fn deliver(&mut self, p: InFlight) {
        if !link::check_crc(&p.data) {
            self.stats.dropped_corrupt += 1;
            return;
        }
        if let Some(drop_if) = &mut self.drop_if {
            if drop_if(p.to, &p.data) {
                self.stats.lost += 1;
                return;
            }
        }
        self.stats.delivered += 1;
        if let Some(tap) = &mut self.tap {
            tap(p.to, &p.data);
        }
        let meta = RxMeta { src_gid: self.gids[p.from], dst_gid: p.dst_gid, icrc_skipped: false };
        self.engines[p.to].handle_packet(self.now, meta, &p.data);
    }

    /// Steps until `done` says so, at most `max_steps` steps and `max_time`
    /// of virtual time. Returns whether `done` was reached.
    pub fn run_until(&mut self, max_steps: u64, max_time: Duration, mut done: impl FnMut(&mut Sim) -> bool) -> bool {
        let deadline = self.now + max_time;
        for _ in 0..max_steps {
            if done(self) {
                return true;
            }
            if !self.step() || self.now > deadline {
                return done(self);
            }
        }
        done(self)
    }

    /// Injects raw bytes as if `to` received them from the other node now.
    pub fn inject(&mut self, to: usize, data: &[u8]) {
        self.inject_from(to, self.gids[1 - to], data);
    }

    /// Injects raw bytes as if `to` received them from `src_gid` now (a
    /// third host, or one forging its address).
    pub fn inject_from(&mut self, to: usize, src_gid: Gid, data: &[u8]) {
        let meta = RxMeta { src_gid, dst_gid: self.gids[to], icrc_skipped: false };
        self.engines[to].handle_packet(self.now, meta, data);
    }
}
