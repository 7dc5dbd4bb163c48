//! Impairment middleware: loss, duplication, reordering, corruption and delay,
//! drawn from a seeded ChaCha generator (one stream per direction), so a run is
//! repeatable. Wraps any link.
//!
//! - Transmit: loss, duplication, reordering (a reordered datagram is held back
//!   `reorder_delay` longer than the others) and delay (`delay` plus up to
//!   `jitter`). Held datagrams leave on a later `send` or `recv` call.
//! - Receive: the same, plus corruption: one bit of the datagram flipped, as on
//!   the wire. A link that checked the ICRC would have dropped it, so a corrupted
//!   datagram that arrived with an ICRC known good ([`Integrity::icrc_holds`]:
//!   checked, or through the same-host rings) is dropped and counted in
//!   [`ImpairStats::corrupt_caught`]; an unchecked one (an authenticated
//!   packet's MAC, [`Integrity::Mac`], is checked above) is delivered
//!   corrupted.
//!   (Transmit corruption cannot be modelled above the link: the link signs
//!   what it is given.)

use super::{Integrity, Link, RxBatch, RxDatagram, TxDatagram};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Probabilities (0.0 ..= 1.0) and delays of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    /// Receive only (see the module documentation).
    pub corrupt: f64,
    pub delay: Duration,
    pub jitter: Duration,
    /// Extra hold of a reordered datagram.
    pub reorder_delay: Duration,
}

impl Faults {
    fn holds(&self) -> bool {
        self.reorder > 0.0 || !self.delay.is_zero() || !self.jitter.is_zero()
    }
}

/// What to do to a link's traffic, and the seed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ImpairConfig {
    pub seed: u64,
    pub tx: Faults,
    pub rx: Faults,
}

impl ImpairConfig {
    /// The same faults both ways (corruption applies on receive).
    pub fn both(seed: u64, faults: Faults) -> ImpairConfig {
        ImpairConfig { seed, tx: Faults { corrupt: 0.0, ..faults }, rx: faults }
    }
}

/// Counts of what was done, per direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImpairStats {
    pub tx_lost: u64,
    pub tx_duplicated: u64,
    pub tx_reordered: u64,
    pub tx_delayed: u64,
    pub rx_lost: u64,
    pub rx_duplicated: u64,
    pub rx_reordered: u64,
    pub rx_delayed: u64,
    /// Corrupted datagrams delivered (the link did not check them).
    pub rx_corrupted: u64,
    /// Corrupted datagrams the link's ICRC check would have dropped.
    pub corrupt_caught: u64,
}

struct Held {
    due: Instant,
    seq: u64,
    peer: IpAddr,
    src_port: u16,
    local: IpAddr,
    integrity: Integrity,
    data: Vec<u8>,
}

struct Queue {
    held: Vec<Held>,
    pool: Vec<Vec<u8>>,
    seq: u64,
}

/// Queue bound: beyond it, new held datagrams are dropped (counted as lost).
const MAX_HELD: usize = 65536;

impl Queue {
    fn new() -> Queue {
        Queue { held: Vec::new(), pool: Vec::new(), seq: 0 }
    }

    fn push(
        &mut self,
        due: Instant,
        peer: IpAddr,
        src_port: u16,
        local: IpAddr,
        integrity: Integrity,
        roce: &[u8],
    ) -> bool {
        if self.held.len() >= MAX_HELD {
            return false;
        }
        let mut data = self.pool.pop().unwrap_or_default();
        data.clear();
        data.extend_from_slice(roce);
        self.seq += 1;
        let h = Held { due, seq: self.seq, peer, src_port, local, integrity, data };
        // Keep sorted by (due, seq); most pushes land at the end.
        let at = self.held.partition_point(|x| (x.due, x.seq) <= (h.due, h.seq));
        self.held.insert(at, h);
        true
    }

    fn due_count(&self, now: Instant) -> usize {
        self.held.partition_point(|h| h.due <= now)
    }

    fn next_due(&self) -> Option<Instant> {
        self.held.first().map(|h| h.due)
    }

    fn recycle(&mut self, h: Held) {
        if self.pool.len() < 1024 {
            self.pool.push(h.data);
        }
    }
}

/// A link with seeded faults.
pub struct Impair<L: Link> {
    inner: L,
    cfg: ImpairConfig,
    tx_rng: ChaCha8Rng,
    rx_rng: ChaCha8Rng,
    tx_q: Queue,
    rx_q: Queue,
    stats: ImpairStats,
    /// What the inner link's last receive brought, before impairment.
    arrived: RxBatch,
}

fn chance(rng: &mut ChaCha8Rng, p: f64) -> bool {
    p > 0.0 && rng.gen::<f64>() < p
}

/// How many copies of one datagram go on, drawn in the same order for both
/// directions (loss first, then duplication): 0 lost, 1, or 2 duplicated.
fn copies(rng: &mut ChaCha8Rng, f: &Faults) -> u8 {
    if chance(rng, f.loss) {
        0
    } else if chance(rng, f.duplicate) {
        2
    } else {
        1
    }
}

fn hold(rng: &mut ChaCha8Rng, f: &Faults, reordered: bool) -> Duration {
    let mut d = f.delay;
    if !f.jitter.is_zero() {
        d += Duration::from_nanos(rng.gen_range(0..=f.jitter.as_nanos().min(u64::MAX as u128) as u64));
    }
    if reordered {
        d += if f.reorder_delay.is_zero() { Duration::from_millis(1) } else { f.reorder_delay };
    }
    d
}

impl<L: Link> Impair<L> {
    pub fn new(inner: L, cfg: ImpairConfig) -> Impair<L> {
        Impair {
            inner,
            cfg,
            tx_rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            rx_rng: ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x9e37_79b9_7f4a_7c15),
            tx_q: Queue::new(),
            rx_q: Queue::new(),
            stats: ImpairStats::default(),
            arrived: RxBatch::new(),
        }
    }

    pub fn impair_stats(&self) -> ImpairStats {
        self.stats
    }

    pub fn inner(&self) -> &L {
        &self.inner
    }

    pub fn into_inner(self) -> L {
        self.inner
    }

    /// When the next held datagram is due, if any.
    pub fn next_due(&self) -> Option<Instant> {
        match (self.tx_q.next_due(), self.rx_q.next_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sends the held datagrams that are due.
    fn flush_tx(&mut self, now: Instant) -> io::Result<usize> {
        let n = self.tx_q.due_count(now);
        if n == 0 {
            return Ok(0);
        }
        let due: Vec<Held> = self.tx_q.held.drain(..n).collect();
        let batch: Vec<TxDatagram<'_>> =
            due.iter().map(|h| TxDatagram { peer: h.peer, src_port: h.src_port, roce: &h.data }).collect();
        let r = self.inner.send(&batch);
        drop(batch);
        for h in due {
            self.tx_q.recycle(h);
        }
        r
    }

    /// Loses, duplicates, corrupts, delays or reorders one datagram the
    /// inner link received, holding what survives until it is due.
    fn impair_arrival(&mut self, d: &RxDatagram<'_>) {
        let faults = self.cfg.rx;
        let copies = copies(&mut self.rx_rng, &faults);
        self.stats.rx_lost += u64::from(copies == 0);
        self.stats.rx_duplicated += u64::from(copies == 2);
        for _ in 0..copies {
            let corrupt = chance(&mut self.rx_rng, faults.corrupt) && !d.roce.is_empty();
            if corrupt && d.integrity.icrc_holds() {
                self.rx_rng.gen::<u32>();
                self.stats.corrupt_caught += 1;
                continue;
            }
            let reordered = chance(&mut self.rx_rng, faults.reorder);
            let wait = hold(&mut self.rx_rng, &faults, reordered);
            self.stats.rx_reordered += u64::from(reordered);
            self.stats.rx_delayed += u64::from(!reordered && !wait.is_zero());
            if !self.rx_q.push(Instant::now() + wait, d.peer, d.src_port, d.local, d.integrity, d.roce) {
                self.stats.rx_lost += 1;
                continue;
            }
            if corrupt {
                self.stats.rx_corrupted += 1;
                let bit = self.rx_rng.gen_range(0..d.roce.len() * 8);
                // The datagram just pushed is the one with the highest seq.
                let seq = self.rx_q.seq;
                if let Some(h) = self.rx_q.held.iter_mut().find(|h| h.seq == seq) {
                    h.data[bit / 8] ^= 1 << (bit % 8);
                }
            }
        }
    }
}

impl<L: Link> Link for Impair<L> {
    super::pass_to_inner!();
    fn send(&mut self, batch: &[TxDatagram<'_>]) -> io::Result<usize> {
        let now = Instant::now();
        let mut sent = self.flush_tx(now)?;
        let f = self.cfg.tx;
        if !f.holds() && f.loss == 0.0 && f.duplicate == 0.0 {
            return Ok(sent + self.inner.send(batch)?);
        }
        let mut direct: Vec<TxDatagram<'_>> = Vec::with_capacity(batch.len() * 2);
        for d in batch {
            let copies = copies(&mut self.tx_rng, &f);
            self.stats.tx_lost += u64::from(copies == 0);
            self.stats.tx_duplicated += u64::from(copies == 2);
            for _ in 0..copies {
                let reordered = chance(&mut self.tx_rng, f.reorder);
                let wait = hold(&mut self.tx_rng, &f, reordered);
                if wait.is_zero() {
                    direct.push(*d);
                    continue;
                }
                self.stats.tx_reordered += u64::from(reordered);
                self.stats.tx_delayed += u64::from(!reordered);
                let local = d.peer;
                if !self.tx_q.push(now + wait, d.peer, d.src_port, local, Integrity::Unchecked, d.roce) {
                    self.stats.tx_lost += 1;
                }
            }
        }
        sent += self.inner.send(&direct)?;
        Ok(sent)
    }

    fn recv(&mut self, timeout: Duration, batch: &mut RxBatch) -> io::Result<usize> {
        let deadline = Instant::now() + timeout;
        // Bounded: each round either delivers, or waits until a due time or the deadline.
        for _ in 0..1000 {
            let now = Instant::now();
            self.flush_tx(now)?;
            let n = self.rx_q.due_count(now);
            if n > 0 {
                let due: Vec<Held> = self.rx_q.held.drain(..n).collect();
                for h in due {
                    batch.push(&RxDatagram {
                        peer: h.peer,
                        src_port: h.src_port,
                        local: h.local,
                        roce: &h.data,
                        integrity: h.integrity,
                    });
                    self.rx_q.recycle(h);
                }
                return Ok(n);
            }
            let until = self.next_due().map_or(deadline, |d| d.min(deadline).max(now));
            let wait = until.saturating_duration_since(now);
            let mut arrived = std::mem::take(&mut self.arrived);
            arrived.clear();
            let r = self.inner.recv(wait, &mut arrived);
            arrived.iter().for_each(|d| self.impair_arrival(&d));
            self.arrived = arrived;
            r?;
            if Instant::now() >= deadline && self.rx_q.due_count(Instant::now()) == 0 {
                return Ok(0);
            }
        }
        Ok(0)
    }
    fn next_due(&self) -> Option<Instant> {
        let mine = Impair::next_due(self);
        match (mine, self.inner.next_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
