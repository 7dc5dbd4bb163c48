//! A thread waiting for a completion event takes its device's packets in
//! itself.
//!
//! Without this, the packet that completes a work request woke the
//! progress thread, whose round fired the channel, which woke the waiting
//! thread: two wake-ups (about 6 us each here) on the path of every event,
//! where the kernel's rxe has one. A waiting thread now watches the link
//! beside its channel while the progress thread sleeps and, when packets
//! come first, runs the round itself. Once per call: packets that did not
//! complete its event (a stream's) are left to the progress thread, which
//! is awake for them then, as a thread woken by each would only compete
//! with it for the lock (send_bw with events lost a quarter of its rate
//! when waiters watched the link throughout). The progress thread still
//! sleeps on the link too (it keeps the timers): whichever thread takes
//! the lock first takes the packets in.

use super::progress::{wait_for, LINK_WAIT};
use super::Driver;
use crate::context::Progress;
use nix::poll::{PollFd, PollFlags};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

/// How a thread about to wait for a completion event waits.
#[derive(Clone, Copy, Debug)]
pub(crate) enum EventWait {
    /// On its channel alone: the progress thread is awake (a stream's
    /// packets move), or this wait took packets in once already.
    ChannelOnly,
    /// Beside the link too, for at most `at_most` (a manual device's next
    /// timer), then [`Driver::after_event_wait`]; `link_ready`: something
    /// waits already (same-host peers wrote before it said it sleeps).
    TakingPackets { at_most: Option<Duration>, link_ready: bool },
}

/// The longest one wait beside the link lasts: the waiting thread holds
/// the device meanwhile, which must close when its contexts do.
pub(crate) const MAX_WAIT_BESIDE_LINK: Duration = Duration::from_millis(100);

impl Driver {
    /// Waits up to `timeout` (at most [`MAX_WAIT_BESIDE_LINK`]) for
    /// `ready` (a completion channel's descriptor) to become readable,
    /// taking this device's packets in itself if they come first; `at_most`
    /// and `link_ready` as [`Driver::event_wait`] gave them. Then the
    /// caller looks at `ready` again.
    pub(crate) fn wait_taking_packets(
        &self,
        ready: BorrowedFd<'_>,
        timeout: Duration,
        at_most: Option<Duration>,
        link_ready: bool,
    ) {
        let wait = at_most.unwrap_or(timeout).min(timeout).min(MAX_WAIT_BESIDE_LINK);
        let link_ready = link_ready || self.wait_for_either(ready, wait);
        self.after_event_wait(link_ready);
    }

    /// How a thread about to wait for a completion event waits: beside the
    /// link if this is its `first` wait of the call and the progress thread
    /// sleeps or dozes (a packet would cost it a wake-up), always on a
    /// manual device, whose application moves its packets (then until the
    /// next timer at most). Not in a forked child's copy, which moves no
    /// packets, nor while another thread holds the lock (it moves them).
    pub(crate) fn event_wait(&self, first: bool) -> EventWait {
        let manual = self.progress() == Progress::Manual;
        if self.forked_away() || !(manual || first && self.activity.thread_sleeps()) {
            return EventWait::ChannelOnly;
        }
        let Ok(mut core) = self.core.try_lock() else {
            // A manual device's lock holder may be a poster that takes
            // nothing in: look again soon.
            return match manual {
                true => EventWait::TakingPackets { at_most: Some(LINK_WAIT), link_ready: false },
                false => EventWait::ChannelOnly,
            };
        };
        if !manual {
            // The progress thread sleeps: same-host peers write the link's
            // descriptor for it (`prepare_to_sleep` would take its wake-up).
            return EventWait::TakingPackets { at_most: None, link_ready: false };
        }
        let at_most = Some(core.next_due(self.now()));
        // Same-host peers write the link's descriptor only for a reader
        // that says it sleeps; one may have written before this said so.
        EventWait::TakingPackets { at_most, link_ready: !core.link.prepare_to_sleep() }
    }

    /// After a wait beside the link: a round if the link woke it (on a
    /// manual device always, ACKs sent at once, for its timers too).
    pub(crate) fn after_event_wait(&self, link_ready: bool) {
        if self.progress() == Progress::Manual {
            self.round(Duration::ZERO, false);
        } else if link_ready {
            // Not `help`: a thread waiting for events does not poll, and
            // the progress thread must not doze for it. Nothing if another
            // thread holds the lock: that one takes the packets in.
            self.try_round();
        }
    }

    /// The link's descriptors a thread sleeps on, the progress thread's or
    /// one waiting for an event (the second may repeat the first); `None`
    /// for a link with none (looked at every [`LINK_WAIT`]).
    pub(crate) fn link_wait_fds(&self) -> Option<[BorrowedFd<'_>; 2]> {
        let link_fd = self.link_fd.as_ref()?;
        // The link's multicast groups too (a link without: its own descriptor twice).
        Some([link_fd.as_fd(), self.mcast_fd.as_ref().unwrap_or(link_fd).as_fd()])
    }

    /// Waits up to `timeout` for `ready` or the link to become readable:
    /// whether the link did (always, for a link with no descriptor, which
    /// is looked at every [`LINK_WAIT`]).
    fn wait_for_either(&self, ready: BorrowedFd<'_>, timeout: Duration) -> bool {
        let Some([link, mcast]) = self.link_wait_fds() else {
            wait_for(&mut [PollFd::new(ready, PollFlags::POLLIN)], timeout.min(LINK_WAIT));
            return true;
        };
        let mut fds = [
            PollFd::new(ready, PollFlags::POLLIN),
            PollFd::new(link, PollFlags::POLLIN),
            PollFd::new(mcast, PollFlags::POLLIN),
        ];
        wait_for(&mut fds, timeout);
        fds[1..].iter().any(|f| f.revents().is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLERR)))
    }
}
