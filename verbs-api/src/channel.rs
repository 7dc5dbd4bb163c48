//! Completion channels: a file descriptor (an eventfd) that becomes readable
//! when an armed CQ gets a completion, for event-driven programs (epoll, mio).

use crate::cq::{Cq, CqInner};
use crate::error::Error;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// `struct ibv_comp_channel`: cheap to clone.
#[derive(Clone)]
pub struct CompChannel(pub(crate) Arc<ChannelInner>);

pub(crate) struct ChannelInner {
    efd: EventFd,
    /// CQs whose event fired and was not yet taken by `get_cq_event`.
    ready: Mutex<VecDeque<Weak<CqInner>>>,
}

impl CompChannel {
    pub(crate) fn new() -> Result<CompChannel, Error> {
        let efd = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| Error::Os { verb: "ibv_create_comp_channel", err: e.into() })?;
        Ok(CompChannel(Arc::new(ChannelInner { efd, ready: Mutex::new(VecDeque::new()) })))
    }

    /// Waits up to `timeout` for a CQ event (`ibv_get_cq_event`). The CQ must be
    /// armed again with [`Cq::req_notify`] for its next event.
    pub fn get_cq_event(&self, timeout: Duration) -> Result<Cq, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(cq) = self.take_ready() {
                return Ok(cq);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout { verb: "ibv_get_cq_event" });
            }
            let ms = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
            let mut fds = [PollFd::new(self.0.efd.as_fd(), PollFlags::POLLIN)];
            let _ = poll(&mut fds, PollTimeout::from(ms));
        }
    }

    /// Takes a fired event without waiting.
    pub fn try_get_cq_event(&self) -> Option<Cq> {
        self.take_ready()
    }

    fn take_ready(&self) -> Option<Cq> {
        // Drain the eventfd counter; the queue says which CQs fired.
        let _ = self.0.efd.read();
        let mut ready = self.0.ready.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(w) = ready.pop_front() {
            if let Some(inner) = w.upgrade() {
                return Some(Cq(inner));
            }
        }
        None
    }

    /// An armed CQ got a completion (the driver calls this with its lock let go).
    pub(crate) fn fire(&self, cq: Weak<CqInner>) {
        self.0.ready.lock().unwrap_or_else(|e| e.into_inner()).push_back(cq);
        let _ = self.0.efd.write(1);
    }
}

impl AsFd for CompChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.efd.as_fd()
    }
}

impl AsRawFd for CompChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.0.efd.as_fd().as_raw_fd()
    }
}
