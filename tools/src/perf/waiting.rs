//! How an end waits for its peer: moving its own packets while it waits,
//! and giving up when the peer stalls or is gone.

use super::exchange::Comm;
use std::time::{Duration, Instant};
use uroce_verbs::Context;

/// How long a wait for the peer may last before the test gives up.
pub const STALL: Duration = Duration::from_secs(60);

/// What this end does while it waits: with manual progress (the default,
/// one thread per end, as an RNIC needs none), move packets; else let the
/// progress thread run.
pub fn idle(ctx: &Context) {
    if ctx.try_progress() == 0 {
        std::thread::yield_now();
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
}

impl Watch {
    pub fn new() -> Watch {
        Watch { since: Instant::now(), checked: Instant::now(), tcp: true }
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
