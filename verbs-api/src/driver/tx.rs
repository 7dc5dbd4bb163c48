//! The transmit path: packets from the engine to the link in batches, sent
//! by whichever thread holds the driver's lock (a poster or a round).

use super::Core;
use std::net::{IpAddr, Ipv4Addr};
use uroce_stack::link::TxDatagram;
use uroce_transport::engine::{Instant, Transmit, MAX_PACKET_LEN};

/// Packets moved per batch between engine and link.
pub(super) const BATCH: usize = 32;

/// Reusable transmit buffers, so the data path allocates nothing per packet.
pub(super) struct TxBatch {
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

impl Core {
    /// Takes packets from the engine until the batch is full or the engine
    /// has none.
    fn fill(&mut self, now: Instant) {
        let Core { engine, tx, .. } = self;
        let before = tx.meta.len();
        for buf in tx.bufs[before..].iter_mut() {
            match engine.poll_transmit(now, buf) {
                Some(t) => tx.meta.push(t),
                None => break,
            }
        }
    }

    /// Puts the batch on the link (one system call where the link can) and
    /// empties it; how many packets it held. Lone ACKs go last: the kernel
    /// delivers a batch's datagrams one after the other inside the call, and
    /// a request the peer waits for (the next WRITE of a ping-pong, which
    /// leaves with the ACK held back for it) should not wait behind an ACK
    /// that only frees the peer's send queue. A QP's ACKs and its requests
    /// are separate sequences, so the order between them is free; ACKs keep
    /// their order among themselves, as requests do.
    fn send_batch(&mut self) -> usize {
        let Core { link, tx, .. } = self;
        let n = tx.meta.len();
        if n == 0 {
            return 0;
        }
        let blank = TxDatagram { peer: IpAddr::V4(Ipv4Addr::UNSPECIFIED), src_port: 0, roce: &[] };
        let mut grams: [TxDatagram<'_>; BATCH] = [blank; BATCH];
        for (g, i) in grams.iter_mut().zip(lone_acks_last(&tx.meta)) {
            let (t, buf) = (&tx.meta[i], &tx.bufs[i]);
            *g = TxDatagram { peer: t.dest_gid.ip(), src_port: t.src_port, roce: &buf[..t.len] };
        }
        if let Err(e) = link.send(&grams[..n]) {
            tracing::warn!("uroce: the link refused a batch of {n} packets: {e}");
        }
        tx.meta.clear();
        n
    }

    /// Sends everything the engine has queued, in batches; how many packets.
    /// With `hold_acks` (only for a caller that runs another round at once,
    /// or soon), a last batch of ACKs alone stays for the next flush or
    /// post: an ACK may wait that long (the peer's timer is milliseconds),
    /// and leaves with the application's next request in one system call.
    pub(super) fn flush_tx(&mut self, now: Instant, hold_acks: bool) -> usize {
        let mut sent = 0;
        loop {
            self.fill(now);
            let engine_empty = self.tx.meta.len() < BATCH;
            if self.tx.meta.is_empty() || (engine_empty && hold_acks && self.tx.only_acks()) {
                return sent;
            }
            sent += self.send_batch();
        }
    }
}

/// The order to send `batch` in: its indices, the packets that are not lone
/// ACKs first, each group in its own order.
fn lone_acks_last(batch: &[Transmit]) -> impl Iterator<Item = usize> + '_ {
    let of = move |acks: bool| batch.iter().enumerate().filter(move |(_, t)| t.ack_only == acks).map(|(i, _)| i);
    of(false).chain(of(true))
}

#[cfg(test)]
mod test {
    use super::*;
    use uroce_transport::engine::Gid;

    #[test]
    fn lone_acks_leave_after_the_requests_of_their_batch() {
        let t = |ack_only| Transmit { len: 0, dest_gid: Gid::default(), src_port: 0, qpn: 1, ack_only };
        let batch = [t(true), t(false), t(true), t(false)];
        assert_eq!(lone_acks_last(&batch).collect::<Vec<_>>(), [1, 3, 0, 2]);
        assert_eq!(lone_acks_last(&batch[..1]).collect::<Vec<_>>(), [0]);
    }
}
