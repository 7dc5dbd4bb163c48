//! Completion channels: a descriptor that becomes readable when an armed CQ
//! gets a completion, one record per event (see the event_fd module), for
//! event-driven programs (epoll, mio) and for C programs' `channel->fd`.

use crate::cq::{Cq, CqInner};
use crate::driver::Driver;
use crate::error::Error;
use crate::event_fd::EventQueue;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

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
    /// armed again with [`Cq::req_notify`] for its next event.
    pub fn get_cq_event(&self, timeout: Duration) -> Result<Cq, Error> {
        let deadline = Instant::now() + timeout;
        let mut take_packets = true;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = match self.0.driver.upgrade() {
                // The packet that completes the event is taken in by this
                // thread if it comes first (`Driver::wait_taking_packets`);
                // once, then the progress thread takes the rest in: packets
                // that did not complete it (a stream's) would wake this
                // thread for nothing.
                Some(driver) => self.0.events.try_take().or_else(|| {
                    driver.wait_taking_packets(self.as_fd(), left, std::mem::take(&mut take_packets));
                    self.0.events.try_take()
                }),
                // The device is closed: only events already fired.
                None => self.0.events.take(left),
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
