//! Shared receive queues with the limit event: when the number of posted
//! receives drops below `srq_limit`, one `SrqLimitReached` is raised and the
//! limit is disarmed until `modify_srq` arms it again (IBTA 10.2.9.3).

use super::memory::Pd;
use super::wr::RecvWr;
use super::Event;
use std::collections::VecDeque;

/// A shared receive queue handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SrqHandle(pub u32);

/// `struct ibv_srq_attr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrqAttr {
    pub max_wr: u32,
    pub max_sge: u32,
    /// 0 disarms the limit event.
    pub srq_limit: u32,
}

pub(crate) struct Srq {
    pub pd: Pd,
    pub attr: SrqAttr,
    pub queue: VecDeque<RecvWr>,
}

impl Srq {
    /// Takes the oldest receive, raising the limit event when it crosses the limit.
    pub fn take(&mut self, handle: SrqHandle, events: &mut VecDeque<Event>) -> Option<RecvWr> {
        let wr = self.queue.pop_front()?;
        if self.attr.srq_limit > 0 && (self.queue.len() as u32) < self.attr.srq_limit {
            self.attr.srq_limit = 0;
            events.push_back(Event::SrqLimitReached { srq: handle });
        }
        Some(wr)
    }
}
