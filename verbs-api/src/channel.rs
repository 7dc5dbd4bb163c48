//! Completion channels: a descriptor that becomes readable when an armed CQ
//! gets a completion, one record per event (see the event_fd module), for
//! event-driven programs (epoll, mio) and for C programs' `channel->fd`.

use crate::cq::{Cq, CqInner};
use crate::driver::{Driver, EventWait, LINK_WAIT, MAX_WAIT_BESIDE_LINK};
use crate::error::Error;
use crate::event_fd::EventQueue;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// What a thread that blocks on a channel's descriptor itself watches
/// beside it ([`CompChannel::packet_watch`]).
#[derive(Clone, Copy, Debug)]
pub struct PacketWatch {
    /// The link's descriptors (the second may repeat the first); `None`: a
    /// link with none (wait on the channel alone, at most `at_most`).
    pub fds: Option<[RawFd; 2]>,
    /// The longest the wait may last before [`CompChannel::after_watch`]
    /// (the waiting thread holds the device meanwhile; a manual device's
    /// next timer may be sooner).
    pub at_most: Duration,
    /// Something waits already: no wait, [`CompChannel::after_watch`] with
    /// `true` at once.
    pub ready_now: bool,
}

/// `struct ibv_comp_channel`: cheap to clone.
#[derive(Clone)]
pub struct CompChannel(pub(crate) Arc<ChannelInner>);

pub(crate) struct ChannelInner {
    /// The CQs whose event fired, one entry per event.
    events: EventQueue<Weak<CqInner>>,
    /// The device whose CQs report here (weak: an armed CQ's entry in the
    /// driver holds the channel).
    driver: Weak<Driver>,
}

impl CompChannel {
    pub(crate) fn new(driver: Weak<Driver>) -> Result<CompChannel, Error> {
        Ok(CompChannel(Arc::new(ChannelInner { events: EventQueue::new("ibv_create_comp_channel")?, driver })))
    }

    /// Waits up to `timeout` for a CQ event (`ibv_get_cq_event`). The CQ must be
    /// armed again with [`Cq::req_notify`] for its next event. While the
    /// device's progress thread sleeps (and always on a manual device) the
    /// wait watches the link too and runs a round when packets come first
    /// (once per call, holding the device for at most 100 ms a wait; docs/ARCHITECTURE.md):
    /// it may send ACKs, fire other channels and hand out rdma_cm events.
    /// The channel must be one of the device's whose CQs report to it.
    pub fn get_cq_event(&self, timeout: Duration) -> Result<Cq, Error> {
        let deadline = Instant::now() + timeout;
        let mut first = true;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // The packet that completes the event is taken in by this thread
            // if it comes first (`Driver::event_wait`); once, then the
            // progress thread takes the rest in: packets that did not
            // complete it (a stream's) would wake this thread for nothing.
            let plan = self.0.driver.upgrade().map(|d| (d.event_wait(std::mem::take(&mut first)), d));
            let event = match plan {
                Some((EventWait::TakingPackets { at_most, link_ready }, driver)) => {
                    self.0.events.try_take().or_else(|| {
                        driver.wait_taking_packets(self.as_fd(), left, at_most, link_ready);
                        self.0.events.try_take()
                    })
                }
                // The descriptor alone, holding nothing of the device.
                _ => self.0.events.take(left),
            };
            if let Some(cq) = event {
                // A CQ destroyed since its event fired has nothing to report.
                if let Some(inner) = cq.upgrade() {
                    return Ok(Cq(inner));
                }
                continue;
            }
            if left.is_zero() {
                return Err(Error::Timeout { verb: "ibv_get_cq_event" });
            }
        }
    }

    /// For a caller that blocks on the channel's descriptor itself (the
    /// drop-in's `ibv_get_cq_event`, whose wait must stay a bare,
    /// cancellable libc call), before it blocks: what to watch beside the
    /// descriptor so that this thread takes in the packet that completes
    /// its event, as [`CompChannel::get_cq_event`] does; `None`: the
    /// descriptor alone. `first`: the call's first wait.
    pub fn packet_watch(&self, first: bool) -> Option<PacketWatch> {
        let driver = self.0.driver.upgrade()?;
        let EventWait::TakingPackets { at_most, link_ready } = driver.event_wait(first) else { return None };
        let fds = driver.link_wait_fds().map(|fds| fds.map(|fd| fd.as_raw_fd()));
        // A link with no descriptor is looked at every LINK_WAIT.
        let cap = if fds.is_none() { LINK_WAIT } else { MAX_WAIT_BESIDE_LINK };
        Some(PacketWatch { fds, at_most: at_most.map_or(cap, |t| t.min(cap)), ready_now: link_ready })
    }

    /// After a wait [`CompChannel::packet_watch`] asked for: takes the
    /// packets in if the link's descriptors were readable (`link_ready`;
    /// on a manual device, always).
    pub fn after_watch(&self, link_ready: bool) {
        if let Some(driver) = self.0.driver.upgrade() {
            driver.after_event_wait(link_ready);
        }
    }

    /// Takes a fired event without waiting.
    pub fn try_get_cq_event(&self) -> Option<Cq> {
        std::iter::from_fn(|| self.0.events.try_take()).find_map(|cq| cq.upgrade().map(Cq))
    }

    /// The CQ of the event whose 8-byte record the application read from
    /// the descriptor itself (`ibv_get_cq_event` in C reads `channel->fd`,
    /// blocking or not as the program set it); `None` if the record is not
    /// one of this channel's or its CQ is gone.
    pub fn cq_of_record(&self, record: &[u8]) -> Option<Cq> {
        self.0.events.take_record(record)?.upgrade().map(Cq)
    }

    /// An armed CQ got a completion (the driver calls this with its lock let go).
    pub(crate) fn fire(&self, cq: Weak<CqInner>) {
        self.0.events.push(cq);
    }
}

impl AsFd for CompChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.events.as_fd()
    }
}

impl AsRawFd for CompChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.0.events.as_fd().as_raw_fd()
    }
}
