//! A thread waiting for a completion event takes its device's packets in
//! itself.
//!
//! Without this, the packet that completes a work request woke the
//! progress thread, whose round fired the channel, which woke the waiting
//! thread: two wake-ups (about 6 us each here) on the path of every event,
//! where the kernel's rxe has one. A waiting thread now watches the link
//! beside its channel while the progress thread sleeps and, when packets
//! come first, runs the round itself. Once per wait: packets that did not
//! complete its event (a stream's) are left to the progress thread, which
//! is awake for them then, as a thread woken by each would only compete
//! with it for the lock (send_bw with events lost a quarter of its rate
//! when waiters watched the link throughout). The progress thread still
//! sleeps on the link too (it keeps the timers): whichever thread takes
//! the lock first takes the packets in.

use super::progress::LINK_WAIT;
use super::Driver;
use crate::context::Progress;
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::time::TimeSpec;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

impl Driver {
    /// Waits up to `timeout` for `ready` (a completion channel's
    /// descriptor) to become readable, taking this device's packets in
    /// itself if they come first, `take_packets` and the progress thread
    /// asleep; then the caller looks at `ready` again. On a manual device,
    /// whose application moves its packets, it always takes them, the wait
    /// also ends for the next timer, and its round sends ACKs at once.
    pub(crate) fn wait_taking_packets(&self, ready: BorrowedFd<'_>, timeout: Duration, take_packets: bool) {
        let manual = self.progress() == Progress::Manual;
        let take_packets = manual || take_packets && self.activity.thread_sleeps();
        if !take_packets {
            // The progress thread is awake, moving packets (a stream), or
            // this wait took packets in once already: the thread fires the
            // channel without a wake-up of its own.
            wait_for(&mut [PollFd::new(ready, PollFlags::POLLIN)], timeout);
            return;
        }
        let (wait, waiting_already) = {
            let mut core = self.lock();
            let wait = if manual { timeout.min(core.next_due(self.now())) } else { timeout };
            // Same-host peers write the link's descriptor only for a reader
            // that says it sleeps; one may have written before this said so.
            (wait, !core.link.prepare_to_sleep())
        };
        let link_ready = waiting_already || self.wait_for_either(ready, wait);
        if manual {
            self.round(Duration::ZERO, false);
        } else if link_ready {
            // Not `help`: a thread waiting for events does not poll, and
            // the progress thread must not doze for it. Nothing if another
            // thread holds the lock: that one takes the packets in.
            self.try_round();
        }
    }

    /// Waits up to `timeout` for `ready` or the link to become readable:
    /// whether the link did (always, for a link with no descriptor, which
    /// is looked at every [`LINK_WAIT`]).
    fn wait_for_either(&self, ready: BorrowedFd<'_>, timeout: Duration) -> bool {
        let Some(link_fd) = &self.link_fd else {
            wait_for(&mut [PollFd::new(ready, PollFlags::POLLIN)], timeout.min(LINK_WAIT));
            return true;
        };
        // The link's multicast groups too (a link without: its own descriptor twice).
        let mcast = self.mcast_fd.as_ref().unwrap_or(link_fd);
        let mut fds = [
            PollFd::new(ready, PollFlags::POLLIN),
            PollFd::new(link_fd.as_fd(), PollFlags::POLLIN),
            PollFd::new(mcast.as_fd(), PollFlags::POLLIN),
        ];
        wait_for(&mut fds, timeout);
        fds[1..].iter().any(|f| f.revents().is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLERR)))
    }
}

/// `ppoll` for `timeout` (microseconds count: a timer may be due within
/// tens of them); EINTR or a timeout end it as readiness does.
fn wait_for(fds: &mut [PollFd<'_>], timeout: Duration) {
    let _ = ppoll(fds, Some(TimeSpec::from_duration(timeout)), None);
}
