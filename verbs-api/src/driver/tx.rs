//! The transmit path: packets from the engine to the link in batches, sent
//! by whichever thread holds the driver's lock (a poster or a round).

use super::Core;
use smallvec::SmallVec;
use std::time::Duration;
use uroce_stack::link::TxDatagram;
use uroce_transport::engine::{Engine, Instant, Transmit, MAX_PACKET_LEN};

/// Packets moved per batch between engine and link.
pub(super) const BATCH: usize = 32;

/// Request packets unacknowledged on the wire from which a post counts as
/// part of a stream and sends only full batches (`Driver::post_request`).
/// Above what a ping-pong or a few outstanding READs keep in flight; below
/// a window of 4 KiB SENDs or one 64 KiB WRITE.
pub(super) const STREAM_INFLIGHT: u32 = 8;

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

/// The longest lone ACKs wait, by default, for the application's next
/// request to leave with (`OpenOptions::ack_delay`). Far below the peer's
/// retransmission timer (milliseconds); long enough for a program that
/// polls its CQ, finds the peer's message and answers it.
pub const ACK_HOLD: Duration = Duration::from_micros(50);
/// Holds that ended with a request leaving beside the ACKs, remembered up to
/// this many: so many misses in a row turn holding off.
const MAX_CREDIT: u8 = 3;
/// With holding off, one hold in this many is tried again (the program may
/// have started to answer).
const PROBE_EVERY: u16 = 64;

/// Delayed ACKs, as TCP delays its ACKs for the reply they can ride on: lone
/// ACKs wait up to `limit` ([`ACK_HOLD`] unless the device was opened with
/// another) for the application's next request, so that
/// a ping-pong's reply and the ACK of the message it answers leave in one
/// system call, the reply first. The peer's application then finds the
/// reply already in its memory when the ACK completes its own request, and
/// its progress thread is not woken to take it in (perftest's write_lat
/// waits for the reply by spinning on memory, not in a verb).
///
/// A flow that never answers (one-way WRITEs) would pay the hold on every
/// ACK, so holding pays its way: each hold that ended with a request
/// leaving beside the ACKs earns a credit, each that ran out (or filled a
/// batch) spends one, and with none left only one hold in [`PROBE_EVERY`] is
/// tried.
///
/// Who ends a hold that no request ends: the owner's next round on a manual
/// device; else the progress thread, which never sleeps past a running hold,
/// and is woken (its doorbell) when a hold starts while it sleeps on the
/// link with no deadline of that kind (`thread_asleep`, set and read under
/// the driver's lock).
/// No kernel timer: arming and disarming one on every hold cost more here
/// than the hold saved (each reprograms the virtual machine's timer).
pub(super) struct AckHold {
    /// The longest a hold lasts; zero: ACKs never wait.
    limit: Duration,
    /// When the ACKs waiting now were first held back.
    since: Option<Instant>,
    credit: u8,
    /// Holds declined since the credit ran out.
    declined: u16,
    /// The progress thread sleeps until the link, the doorbell or a timer
    /// wakes it: nothing would end a new hold in time.
    pub thread_asleep: bool,
    /// A hold started while the thread slept: ring its doorbell.
    wake_thread: bool,
}

impl AckHold {
    pub fn new(limit: Duration) -> AckHold {
        AckHold { limit, since: None, credit: 1, declined: 0, thread_asleep: false, wake_thread: false }
    }

    /// How long the running hold has left at `now`, if one runs.
    pub fn left(&self, now: Instant) -> Option<Duration> {
        let end = self.since?.as_nanos() + self.limit.as_nanos() as u64;
        Some(Duration::from_nanos(end.saturating_sub(now.as_nanos())))
    }

    /// Whether ACKs alone may stay back now: a hold already running that has
    /// time left, or a new one if holding pays.
    fn may_hold(&mut self, now: Instant) -> bool {
        if let Some(left) = self.left(now) {
            return !left.is_zero();
        }
        if self.limit.is_zero() {
            return false;
        }
        if self.credit == 0 {
            self.declined += 1;
            if self.declined < PROBE_EVERY {
                return false;
            }
        }
        self.declined = 0;
        self.since = Some(now);
        self.wake_thread |= self.thread_asleep;
        true
    }

    /// Whether a hold started while the progress thread slept on the link
    /// (once: the caller rings the doorbell, with the lock let go).
    pub fn take_wake_thread(&mut self) -> bool {
        std::mem::take(&mut self.wake_thread)
    }

    /// A batch left; `with_request`: it held a packet other than a lone
    /// ACK. Ends a hold, if one ran.
    fn sent(&mut self, with_request: bool) {
        if self.since.take().is_none() {
            return;
        }
        self.credit = match with_request {
            true => (self.credit + 1).min(MAX_CREDIT),
            false => self.credit.saturating_sub(1),
        };
    }
}

impl Core {
    /// Takes packets from the engine until the batch is full or the engine
    /// has none.
    fn fill(&mut self, now: Instant) {
        self.fill_with(|engine, buf| engine.poll_transmit(now, buf));
    }

    /// Takes packets `poll` writes until the batch is full or `poll` has none.
    fn fill_with(&mut self, mut poll: impl FnMut(&mut Engine, &mut [u8]) -> Option<Transmit>) {
        let Core { engine, tx, .. } = self;
        let before = tx.meta.len();
        for buf in tx.bufs[before..].iter_mut() {
            match poll(engine, buf) {
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
        let Core { link, tx, ack_hold, .. } = self;
        let n = tx.meta.len();
        if n == 0 {
            return 0;
        }
        // Only the packets there are (a ping-pong's batch holds one or
        // two), filled in place: `collect` would move the inline array.
        let mut grams = SmallVec::<[TxDatagram<'_>; BATCH]>::new();
        for i in lone_acks_last(&tx.meta) {
            let (t, buf) = (&tx.meta[i], &tx.bufs[i]);
            grams.push(TxDatagram { peer: t.dest_gid.ip(), src_port: t.src_port, roce: &buf[..t.len] });
        }
        if let Err(e) = link.send(&grams) {
            tracing::warn!("uroce: the link refused a batch of {n} packets: {e}");
        }
        ack_hold.sent(!tx.only_acks());
        tx.meta.clear();
        n
    }

    /// Takes the engine's packets into the batch and sends only full batches
    /// (`Driver::post_request`): the rest waits for the next flush.
    pub(super) fn send_full_batches(&mut self, now: Instant) {
        loop {
            self.fill(now);
            if self.tx.meta.len() < BATCH {
                return;
            }
            self.send_batch();
        }
    }

    /// Sends, with what the batch holds, the ACKs QP `qpn` still owes its
    /// peer (`Engine::poll_owed_ack`): it is about to be destroyed.
    pub(super) fn send_owed_acks(&mut self, qpn: u32) {
        loop {
            self.fill_with(|engine, buf| engine.poll_owed_ack(qpn, buf));
            let full = self.tx.meta.len() == BATCH;
            self.send_batch();
            if !full {
                return;
            }
        }
    }

    /// Sends everything the engine has queued, in batches; how many packets.
    /// With `hold_acks`, a last batch of ACKs alone may stay for the
    /// application's next request, as [`AckHold`] decides.
    pub(super) fn flush_tx(&mut self, now: Instant, hold_acks: bool) -> usize {
        let mut sent = 0;
        loop {
            self.fill(now);
            let engine_empty = self.tx.meta.len() < BATCH;
            if self.tx.meta.is_empty()
                || (engine_empty && hold_acks && self.tx.only_acks() && self.ack_hold.may_hold(now))
            {
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

    fn at(us: u64) -> Instant {
        Instant::from_nanos(us * 1000)
    }

    #[test]
    fn a_hold_lasts_until_a_request_or_its_end() {
        let mut hold = AckHold::new(ACK_HOLD);
        assert!(hold.may_hold(at(10)), "a new hold starts");
        assert!(hold.may_hold(at(59)), "and runs for ACK_HOLD (50 us)");
        assert_eq!(hold.left(at(40)), Some(Duration::from_micros(20)));
        assert!(!hold.may_hold(at(60)), "then ends");
        hold.sent(true);
        assert_eq!(hold.left(at(61)), None, "a batch that left ends it");
    }

    #[test]
    fn holds_that_no_request_ends_turn_holding_off_but_for_probes() {
        let mut hold = AckHold::new(ACK_HOLD);
        // One credit at the start: one hold that runs out spends it.
        assert!(hold.may_hold(at(0)));
        hold.sent(false);
        let tried = (1..=2 * u64::from(PROBE_EVERY)).filter(|&t| {
            let held = hold.may_hold(at(t * 100));
            if held {
                hold.sent(false);
            }
            held
        });
        assert_eq!(tried.count(), 2, "one hold in PROBE_EVERY is tried");
        // A probe that a request ended earns the credit back.
        while !hold.may_hold(at(1_000_000)) {}
        hold.sent(true);
        assert!(hold.may_hold(at(2_000_000)));
    }

    #[test]
    fn credit_is_capped() {
        let mut hold = AckHold::new(ACK_HOLD);
        for t in 0..10 {
            assert!(hold.may_hold(at(t * 100)));
            hold.sent(true);
        }
        // MAX_CREDIT holds that run out in a row, then holding is off.
        for t in 0..u64::from(MAX_CREDIT) {
            assert!(hold.may_hold(at(10_000 + t * 100)));
            hold.sent(false);
        }
        assert!(!hold.may_hold(at(20_000)));
    }

    #[test]
    fn a_zero_limit_never_holds() {
        let mut hold = AckHold::new(Duration::ZERO);
        assert!(!hold.may_hold(at(0)));
        assert_eq!(hold.left(at(0)), None);
    }

    #[test]
    fn a_hold_begun_while_the_thread_sleeps_asks_for_it_once() {
        let mut hold = AckHold::new(ACK_HOLD);
        hold.thread_asleep = true;
        assert!(hold.may_hold(at(0)));
        assert!(hold.take_wake_thread());
        assert!(!hold.take_wake_thread());
        assert!(hold.may_hold(at(1)), "the hold runs on");
        assert!(!hold.take_wake_thread(), "without a second ring");
    }

    #[test]
    fn lone_acks_leave_after_the_requests_of_their_batch() {
        let t = |ack_only| Transmit { len: 0, dest_gid: Gid::default(), src_port: 0, qpn: 1, ack_only };
        let batch = [t(true), t(false), t(true), t(false)];
        assert_eq!(lone_acks_last(&batch).collect::<Vec<_>>(), [1, 3, 0, 2]);
        assert_eq!(lone_acks_last(&batch[..1]).collect::<Vec<_>>(), [0]);
    }
}
