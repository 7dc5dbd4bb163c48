//! The transmit path: packets from the engine to the link in batches, from a
//! round or straight from a post (`kick`).

use super::{gid_ip, Shared};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{fence, Ordering};
use uroce_stack::link::{Link, TxDatagram};
use uroce_transport::engine::{Instant, Transmit, MAX_PACKET_LEN};

/// Packets moved per batch between engine and link.
pub(super) const BATCH: usize = 32;

/// Reusable transmit buffers, so the data path allocates nothing per packet.
pub(crate) struct TxBatch {
    bufs: Vec<Box<[u8]>>,
    /// The packets in `bufs`, in order. Between rounds it may hold ACKs that
    /// wait to leave with the next packet (`flush_tx`).
    meta: Vec<Transmit>,
}

impl TxBatch {
    pub fn new() -> TxBatch {
        TxBatch { bufs: (0..BATCH).map(|_| vec![0u8; MAX_PACKET_LEN].into_boxed_slice()).collect(), meta: Vec::new() }
    }

    /// Whether every packet in the batch is an ACK alone.
    fn only_acks(&self) -> bool {
        self.meta.iter().all(|t| t.ack_only)
    }
}

impl Shared {
    /// Takes packets from the engine until the batch is full or the engine
    /// has none; whether it gave any.
    fn fill(&self, batch: &mut TxBatch, now: Instant) -> bool {
        let mut engine = self.engine();
        let before = batch.meta.len();
        for buf in batch.bufs[before..].iter_mut() {
            match engine.poll_transmit(now, buf) {
                Some(t) => batch.meta.push(t),
                None => break,
            }
        }
        batch.meta.len() > before
    }

    /// Puts the batch on the link (one system call where the link can) and
    /// empties it; how many packets it held.
    fn send_batch(&self, batch: &mut TxBatch, link: &mut dyn Link) -> usize {
        let n = batch.meta.len();
        if n == 0 {
            return 0;
        }
        let blank = TxDatagram { peer: IpAddr::V4(Ipv4Addr::UNSPECIFIED), src_port: 0, roce: &[] };
        let mut grams: [TxDatagram<'_>; BATCH] = [blank; BATCH];
        for (g, (t, buf)) in grams.iter_mut().zip(batch.meta.iter().zip(&batch.bufs)) {
            *g = TxDatagram { peer: gid_ip(t.dest_gid), src_port: t.src_port, roce: &buf[..t.len] };
        }
        if let Err(e) = link.send(&grams[..n]) {
            tracing::warn!("uroce: the link refused a batch of {n} packets: {e}");
        }
        batch.meta.clear();
        n
    }

    /// Sends everything the engine has queued, in batches. With `hold_acks`
    /// (only for a caller that runs another round at once, or soon), a last
    /// batch of ACKs alone stays in `batch` for the next flush or post: an
    /// ACK may wait that long (the peer's timer is milliseconds), and leaves
    /// with the application's next request in one system call.
    pub(super) fn flush_tx(&self, batch: &mut TxBatch, now: Instant, hold_acks: bool) -> usize {
        let mut sent = 0;
        loop {
            self.fill(batch, now);
            let engine_empty = batch.meta.len() < BATCH;
            if batch.meta.is_empty() || (engine_empty && hold_acks && batch.only_acks()) {
                return sent;
            }
            let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
            sent += self.send_batch(batch, link.as_mut());
        }
    }

    /// Sends what the engine queued now, from the calling thread (with any
    /// ACKs a round held back). If another thread holds the transmit path,
    /// that thread sends it when it lets go (`send_kicked`), and the
    /// progress thread is rung: on a manual context nobody else would send
    /// it until the next `progress`.
    pub fn kick(&self) {
        // Announced before trying the locks, checked by a holder after it
        // unlocks: with a SeqCst fence on each side, one of the two sees the
        // other (a poster never leaves a packet behind a holder that missed it).
        self.tx_pending.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        loop {
            // Lock order as in a round: transmit buffers, link, engine.
            let (Ok(mut batch), Ok(mut link)) = (self.tx.try_lock(), self.link.try_lock()) else {
                self.waker.ring();
                return;
            };
            self.tx_pending.store(false, Ordering::SeqCst);
            let now = self.now();
            while self.fill(&mut batch, now) || !batch.meta.is_empty() {
                self.send_batch(&mut batch, link.as_mut());
            }
            drop((batch, link));
            fence(Ordering::SeqCst);
            if !self.tx_pending.load(Ordering::SeqCst) {
                return;
            }
        }
    }

    /// After a round: sends what posters queued while it held the path.
    pub(super) fn send_kicked(&self) {
        fence(Ordering::SeqCst);
        if self.tx_pending.load(Ordering::SeqCst) {
            self.kick();
        }
    }
}
