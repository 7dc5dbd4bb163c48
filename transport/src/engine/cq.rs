//! Completion queues. A full CQ behaves as on hardware: the completion is
//! lost, the CQ goes into error (for good: it takes no more completions) and
//! the owner gets an asynchronous CQ error; the QP whose completion was lost
//! goes to ERR with a QP fatal event (the engine does that part).

use super::verbs::WorkCompletion;
use super::Event;
use std::collections::VecDeque;

/// A completion queue handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CqHandle(pub u32);

pub(crate) struct Cq {
    capacity: usize,
    entries: VecDeque<WorkCompletion>,
    /// Set on overflow; a CQ in error accepts no more completions.
    overflowed: bool,
}

impl Cq {
    pub fn new(capacity: usize) -> Cq {
        Cq { capacity, entries: VecDeque::with_capacity(capacity.min(4096)), overflowed: false }
    }

    /// Queues `wc`. `Err` when it was lost, with the event to raise the
    /// first time (the CQ stays in error afterwards, as on hardware).
    pub fn push(&mut self, handle: CqHandle, wc: WorkCompletion) -> Result<(), Option<Event>> {
        if self.overflowed {
            return Err(None);
        }
        if self.entries.len() >= self.capacity {
            self.overflowed = true;
            return Err(Some(Event::CqError { cq: handle }));
        }
        self.entries.push_back(wc);
        Ok(())
    }

    pub fn pop(&mut self) -> Option<WorkCompletion> {
        self.entries.pop_front()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_overflowed(&self) -> bool {
        self.overflowed
    }
}
