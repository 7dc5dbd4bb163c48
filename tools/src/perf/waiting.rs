//! How an end waits for its peer: moving its own packets while it waits,
//! and giving up when the peer stalls or is gone.

use super::exchange::Comm;
use std::time::{Duration, Instant};
use uroce_verbs::Context;

/// How long a wait for the peer may last before the test gives up.
pub const STALL: Duration = Duration::from_secs(60);

/// Empty rounds a waiting end spins through before it offers its core.
const SPIN_ROUNDS: u32 = 64;

thread_local! {
    /// This thread's empty rounds in a row.
    static EMPTY_ROUNDS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// What this end does while it waits: with manual progress (the default,
/// one thread per end, as an RNIC needs none), move packets; else let the
/// progress thread run. A round that moves nothing is followed by another
/// at once, as a polled socket is (a yield is a system call and a pass
/// through the scheduler: a microsecond or more, and the core given away
/// whenever anything else is runnable); only after [`SPIN_ROUNDS`] empty
/// rounds in a row does the thread yield, so that a peer or a progress
/// thread short of a core gets one (and not for a while after a yield that
/// found the core shared: [`offer_core_once`]).
pub fn idle(ctx: &Context) {
    let moved = ctx.try_progress() > 0;
    let offer_core = EMPTY_ROUNDS.with(|n| {
        let empty = if moved { 0 } else { n.get() + 1 };
        n.set(empty % SPIN_ROUNDS);
        empty == SPIN_ROUNDS
    });
    if offer_core {
        offer_core_once();
    } else if !moved {
        // After a round that moved packets the caller looks at once: what
        // it waits for may have come (a pause is 40 to 140 cycles).
        std::hint::spin_loop();
    }
}

/// A yield that gave the core away for this long ran another thread that
/// waits too (a peer's end spinning on the same core).
const SHARED_CORE: Duration = Duration::from_micros(20);
/// How long a thread that found its core shared spins without yielding.
const HOLD_CORE: Duration = Duration::from_millis(1);

thread_local! {
    /// Until when this thread does not yield.
    static NO_YIELD_UNTIL: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// The cores this process may run on (its affinity, a cgroup's quota).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Offers the core to another runnable thread (a peer, a progress thread
/// short of one). If one took it for long, both ends spin on one core while
/// the other may idle: two threads that hand a core back and forth stay
/// "cache hot", and the scheduler's balancing left such a pair together
/// for 30 ms at a time (a blocking write_lat through the same-host rings
/// at 8 to 20 us a half trip instead of 3, one run in four). A thread that
/// keeps its core for a while lets the other go cold, and the scheduler
/// moves a cold thread to an idle core. (With one core there is nowhere
/// to move to: it always yields.)
fn offer_core_once() {
    let now = Instant::now();
    if NO_YIELD_UNTIL.get().is_some_and(|t| now < t) {
        return;
    }
    std::thread::yield_now();
    if cores() > 1 && now.elapsed() >= SHARED_CORE {
        NO_YIELD_UNTIL.set(Some(Instant::now() + HOLD_CORE));
    }
}

/// How often a waiting end looks at the TCP connection.
const PEER_CHECK: Duration = Duration::from_millis(100);

/// Watches a wait for the peer: an error once nothing has happened for
/// [`STALL`], or as soon as the peer closed the TCP connection (it failed).
pub struct Watch {
    since: Instant,
    checked: Instant,
    tcp: bool,
    /// Checks left before the next that reads the clock.
    unclocked: u32,
}

/// A wait reads the clock once in this many checks: a waiting end checks
/// between rounds that take a fraction of a microsecond, and a clock read
/// costs tens of nanoseconds here, so reading it each time was a tenth of
/// a polling loop; 256 checks are well under a millisecond, against limits
/// of 100 ms and 60 s.
const CHECKS_PER_CLOCK_READ: u32 = 256;

impl Watch {
    pub fn new() -> Watch {
        let now = Instant::now();
        Watch { since: now, checked: now, tcp: true, unclocked: CHECKS_PER_CLOCK_READ }
    }
    /// A wait during which the peer may end normally (write_lat has no
    /// closing handshake): only the stall counts.
    pub fn stall_only() -> Watch {
        Watch { tcp: false, ..Watch::new() }
    }
    /// Something happened: the stall clock starts again.
    pub fn progressed(&mut self) {
        self.since = Instant::now();
    }
    pub fn check(&mut self, comm: &Comm) -> Result<(), String> {
        if self.unclocked > 0 {
            self.unclocked -= 1;
            return Ok(());
        }
        self.unclocked = CHECKS_PER_CLOCK_READ;
        let now = Instant::now();
        if self.tcp && now - self.checked >= PEER_CHECK {
            self.checked = now;
            if comm.peer_closed() {
                crate::loopback::note_peer_gone();
                return Err(
                    "the peer closed the TCP connection during the test: it failed (its output says why)".into()
                );
            }
        }
        if now - self.since > STALL {
            return Err(format!(
                "nothing from the peer for {} s: it stopped, or packets are lost (UC/UD do not retransmit)",
                STALL.as_secs()
            ));
        }
        Ok(())
    }
}

impl Default for Watch {
    fn default() -> Watch {
        Watch::new()
    }
}
