//! Progress: rounds that take packets in, run timers and serve QP1, and the
//! thread that runs them (or does not, on a manual device).

use super::{Core, Driver, Fired};
use crate::context::Progress;
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::time::TimeSpec;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::{MutexGuard, TryLockError};
use std::time::Duration;
use uroce_stack::link::{LinkInfo, MIN_RECEIVE_BATCH};
use uroce_transport::engine::Instant;

/// The longest a blocking progress thread sleeps with nothing due: it wakes
/// earlier for packets, the doorbell and timers.
const IDLE_WAIT: Duration = Duration::from_millis(100);
/// Receive batches a round takes in before it runs timers (a bound, so a
/// flood cannot starve transmission). The lock is let go between batches.
const MAX_DRAIN_BATCHES: usize = 64;
/// Empty rounds in a row a busy-polling thread spins through, with no
/// application thread polling, before it sleeps on the link as a blocking
/// one does, until a packet, a post or a timer.
const BUSY_SPIN_ROUNDS: u32 = 64;
/// How long a progress thread dozes at a time (busy-poll while an
/// application thread runs rounds; blocking while its rounds move packets).
const DOZE: Duration = Duration::from_millis(1);
/// The progress thread's timer slack (the kernel's default is 50 us).
const TIMER_SLACK_NS: u64 = 1_000;
/// How long a round waits inside `recv` on a link that offers no descriptor
/// to wait on.
pub(crate) const LINK_WAIT: Duration = Duration::from_millis(1);

/// The default budget of unacknowledged request packets: what the link's
/// receive queue holds (the peer's is taken to be alike).
pub(super) fn inflight_budget(info: &LinkInfo) -> u32 {
    use uroce_transport::engine::{DEFAULT_MAX_INFLIGHT_PSNS, MAX_UNACKED_PSNS};
    match u32::try_from(info.rx_queue_packets).unwrap_or(u32::MAX) {
        0 => DEFAULT_MAX_INFLIGHT_PSNS,
        n => n.clamp(MAX_UNACKED_PSNS as u32, 16 * DEFAULT_MAX_INFLIGHT_PSNS),
    }
}

impl Driver {
    /// One round: send what is queued, take in what arrived (waiting up to
    /// `wait` for the first batch), run due timers, serve QP1, send what
    /// that produced; then, with the lock let go, fire completion channels,
    /// publish asynchronous events and hand out rdma_cm events. `hold_acks` as in `Core::flush_tx`.
    /// Returns how many packets moved.
    pub fn round(&self, wait: Duration, hold_acks: bool) -> usize {
        self.round_from(self.lock(), wait, hold_acks)
    }

    /// A round that starts with the lock already taken.
    fn round_from<'a>(&'a self, mut core: MutexGuard<'a, Core>, wait: Duration, hold_acks: bool) -> usize {
        let start = self.now();
        let sent = core.flush_tx(start, hold_acks);
        let received = core.receive(|| self.now(), wait);
        let mut moved = sent + received;
        // Take in everything already queued before any timer fires: a thread
        // that was not scheduled for a while must see the ACKs that arrived
        // meanwhile, not retransmit as if they had not. A first batch smaller
        // than any link asks for found the queue empty: nothing to drain, and
        // no second recvmmsg between a ping-pong's packet and the
        // application that waits for it (nor a second take of the lock).
        if received >= MIN_RECEIVE_BATCH {
            drop(core);
            for _ in 0..MAX_DRAIN_BATCHES {
                match self.lock().receive(|| self.now(), Duration::ZERO) {
                    0 => break,
                    n => moved += n,
                }
            }
            core = self.lock();
        }
        // The clock for timers: when the last batch came in (read then), or,
        // for a round that took nothing in and waited for nothing, a system
        // call old, its first read.
        let now = match (received, wait.is_zero()) {
            (1.., _) => core.rx_at,
            (0, false) => self.now(),
            (0, true) => start,
        };
        if core.engine.poll_timeout().is_some_and(|t| t <= now) {
            core.engine.handle_timeout(now);
        }
        let cm_events = core.with_qp1(|qp1, engine| qp1.serve(engine, now));
        moved += core.flush_tx(now, hold_acks);
        let wake = core.ack_hold.take_wake_thread();
        let stats = self.publish_due(now).then(|| core.stats());
        let (fired, async_events) = (core.take_fired(), core.take_async_events());
        drop(core);
        if wake {
            self.ring();
        }
        if let Some(stats) = stats {
            self.publish_stats(stats);
        }
        fired.into_iter().for_each(Fired::deliver);
        super::publish(async_events);
        if cm_events {
            self.dispatch_cm_events();
        }
        moved
    }

    /// Hands out the rdma_cm events QP1's MADs raised, in order, with the
    /// lock let go (rdma_cm takes its IDs' locks, then this one).
    fn dispatch_cm_events(&self) {
        let _in_order = self.dispatching.lock().unwrap_or_else(|e| e.into_inner());
        let mut keep = Vec::new();
        loop {
            let next = self.lock().qp1.as_mut().and_then(|q| q.events.pop_front());
            let Some(ev) = next else { break };
            crate::rdma_cm::on_event(self, ev, &mut keep);
        }
        // IDs the events held are released last, outside every lock.
        drop(keep);
    }

    /// A round run by an application thread that polls and found nothing:
    /// it moves its packets itself instead of waiting for the progress
    /// thread to be scheduled (on a 2-core machine that wait is a scheduler
    /// tick). Not on manual devices, where only `progress` (and a wait for a
    /// completion or CM event) moves.
    ///
    /// It does not wait for the lock: a thread holding it is moving the
    /// packets already, and a poller put to sleep on a contended lock pays a
    /// wake-up (measured: it doubled blocking-mode write_lat).
    pub fn help(&self) -> usize {
        if self.progress() == Progress::Manual {
            return 0;
        }
        // One clock read serves both marks: a round lasts microseconds, the
        // windows they are read against hundreds.
        let now = self.now();
        self.activity.runs_round(now);
        let moved = self.try_round();
        if moved > 0 && self.progress() == Progress::Blocking {
            self.activity.round_moved(now);
        }
        moved
    }

    /// A round if no other thread holds the lock (it is moving the packets
    /// already), else nothing; ACKs held back, which the progress thread
    /// ends (AckHold).
    pub(crate) fn try_round(&self) -> usize {
        match self.core.try_lock() {
            Ok(core) => self.round_from(core, Duration::ZERO, true),
            Err(TryLockError::Poisoned(e)) => self.round_from(e.into_inner(), Duration::ZERO, true),
            Err(TryLockError::WouldBlock) => 0,
        }
    }

    /// Whether an application thread polls now (`AppActivity::is_helping`).
    pub(crate) fn app_is_helping(&self) -> bool {
        self.activity.is_helping(self.now())
    }

    /// Whether this progress thread, which last moved packets at
    /// `last_moved` (ns), keeps spinning (`AppActivity::serves_alone`).
    pub(crate) fn serves_alone(&self, last_moved: u64) -> bool {
        self.activity.serves_alone(self.now(), last_moved)
    }

    /// Dozes once, for [`DOZE`], if `still()` holds once the thread is
    /// marked dozing (`AppActivity::doze_while`).
    fn doze_while(&self, still: impl Fn() -> bool) {
        self.activity.doze_while(still, || self.doze(DOZE));
    }

    /// The progress thread.
    pub(super) fn run(&self) {
        let busy = self.progress() == Progress::BusyPoll;
        // Its sleeps end on time, not up to the default 50 us late: a held
        // ACK's hold is itself 50 us.
        let _ = nix::sys::prctl::set_timerslack(TIMER_SLACK_NS);
        // Without a descriptor to sleep on, the thread waits inside `recv`.
        let in_recv = if busy || self.link_fd.is_some() { Duration::ZERO } else { LINK_WAIT };
        let mut idle_rounds = 0u32;
        let (mut last_moved, mut just_moved) = (0u64, false);
        while !self.stop.load(Ordering::Relaxed) {
            // A round that moved packets is followed by another at once.
            let n = {
                let mut core = self.lock();
                core.ack_hold.thread_asleep = false;
                self.round_from(core, in_recv, true)
            };
            if n > 0 {
                idle_rounds = 0;
                just_moved = true;
                continue;
            }
            if just_moved {
                // The first empty round after moving ones: their end, to a
                // round, for one clock read per run of them.
                (last_moved, just_moved) = (self.now().as_nanos(), false);
            }
            if busy && self.app_is_helping() {
                // The application's thread polls and moves the packets itself:
                // spinning beside it only takes its core (two ends of a test in
                // one process are four busy threads on this 2-core machine).
                // A hold started meanwhile ends at the application's next
                // round after it, or at the doze's end. (A blocking thread
                // that dozed likewise whenever the application merely
                // polled, in 50 us turns, made read_lat, whose responder
                // answers from its progress thread, twice as slow: a
                // blocking one dozes only while the application's rounds
                // move the packets, below.) An arm ends the doze at once: the
                // application then waits for an event this thread delivers.
                self.doze_while(|| self.app_is_helping());
            } else if busy {
                // Spin, but not for long when nothing comes: the application
                // may be spinning on memory (perftest's write_lat waits so
                // for the peer's WRITE). With more spinning threads than
                // cores a thread that spun ran on after a wake-up, not at
                // once, until the scheduler's tick (4 ms here): once a
                // ping-pong fell into that it stayed, at 2 or 4 ms a half
                // trip (one run in three of ib_write_lat over the drop-in,
                // when this thread yielded its core instead of sleeping).
                // A thread that slept is woken by the packet and runs at once.
                // (A link with no descriptor to sleep on: the core is offered.)
                idle_rounds = idle_rounds.saturating_add(1);
                match (idle_rounds >= BUSY_SPIN_ROUNDS, self.link_fd.is_some()) {
                    (false, _) => std::hint::spin_loop(),
                    (true, true) => self.sleep(self.before_sleep()),
                    (true, false) => std::thread::yield_now(),
                }
            } else if self.activity.moves_packets(self.now()) {
                // The application's thread polls often enough to move the
                // packets itself: this thread, woken by each one only to
                // find it taken, would take a core from it (four threads
                // on two cores in a two-ended test: a run fell into a mode
                // of 30 to 40 us a half trip instead of 4). It watches the
                // doorbell alone until the application stops moving
                // packets (an arm ends the doze at once). Moving packets,
                // not merely polling: a thread that polls now and then
                // while this one answers (read_lat's responder) would
                // leave requests waiting.
                self.doze_while(|| self.activity.moves_packets(self.now()));
            } else if self.serves_alone(last_moved) {
                // Packets moved a moment ago and no application thread
                // polls: the peer's next request likely comes within a
                // turn, and a thread asleep would pay a wake-up for it.
                std::hint::spin_loop();
            } else {
                self.sleep(self.before_sleep());
            }
        }
    }

    /// How long the thread may sleep: until the engine's, QP1's or the
    /// link's next deadline, or a running ACK hold's end, at most
    /// [`IDLE_WAIT`]. From here until its next round, a hold another thread
    /// starts rings the doorbell (`AckHold::thread_asleep`).
    fn before_sleep(&self) -> Duration {
        let mut core = self.lock();
        core.ack_hold.thread_asleep = true;
        let due = core.next_due(self.now());
        // A link whose peers must be told it sleeps (the udp link's same-host
        // rings) may find something already waiting: then no sleep.
        if !core.link.prepare_to_sleep() {
            return Duration::ZERO;
        }
        due
    }

    /// Sleeps until the link is readable, the doorbell rings or `timeout` passes.
    fn sleep(&self, timeout: Duration) {
        let Some([link, mcast]) = self.link_wait_fds() else { return };
        let mut fds = [
            PollFd::new(self.doorbell.as_fd(), PollFlags::POLLIN),
            PollFd::new(link, PollFlags::POLLIN),
            PollFd::new(mcast, PollFlags::POLLIN),
        ];
        self.activity.sleep(|| wait_for(&mut fds, timeout));
        if fds[0].revents().is_some_and(|r| r.contains(PollFlags::POLLIN)) {
            let _ = self.doorbell.read();
        }
    }

    /// Sleeps until the doorbell rings or `timeout` passes: not woken by
    /// packets, which a helping application thread takes in.
    fn doze(&self, timeout: Duration) {
        let mut fds = [PollFd::new(self.doorbell.as_fd(), PollFlags::POLLIN)];
        wait_for(&mut fds, timeout);
        if fds[0].revents().is_some_and(|r| r.contains(PollFlags::POLLIN)) {
            let _ = self.doorbell.read();
        }
    }

    /// The device closes: what QP1 still has to say (a DREQ, a REJ) and the
    /// ACKs a round held back leave now.
    pub(super) fn close(&self) {
        let mut core = self.lock();
        let now = self.now();
        // QP1's sends complete as the engine puts them out, which frees
        // send slots for the MADs still waiting: a few passes empty it.
        for _ in 0..8 {
            let waiting = core.with_qp1(|qp1, engine| qp1.serve_sends(engine, now));
            core.flush_tx(now, false);
            if !waiting {
                return;
            }
        }
    }
}

impl Core {
    /// How long until the engine's, QP1's or the link's next deadline, or a
    /// running ACK hold's end, at most [`IDLE_WAIT`].
    pub(super) fn next_due(&self, now: Instant) -> Duration {
        let hold_due = self.ack_hold.left(now);
        let engine_due = self.engine.poll_timeout().map(|t| t - now);
        let cm_due = self.qp1.as_ref().and_then(|q| q.cm.poll_timeout()).map(|t| t - now);
        let link_due = self.link.next_due().map(|t| t.saturating_duration_since(std::time::Instant::now()));
        [engine_due, cm_due, link_due, hold_due].into_iter().flatten().fold(IDLE_WAIT, Duration::min)
    }
}

/// `ppoll` for `timeout` (microseconds count: a held ACK or a timer may be
/// due within tens of them); EINTR or a timeout end it as readiness does.
pub(super) fn wait_for(fds: &mut [PollFd<'_>], timeout: Duration) {
    let _ = ppoll(fds, Some(TimeSpec::from_duration(timeout)), None);
}
