//! Completion queues. A full CQ behaves as on hardware: the completion is
//! lost, the CQ goes into error (for good: it takes no more completions) and
//! the owner gets an asynchronous CQ error; the QP whose completion was lost
//! goes to ERR with a QP fatal event (the engine does that part).
//!
//! The entries live in a bounded lock-free ring ([`CqRing`]) that the engine
//! fills and that pollers may drain from any thread without the engine:
//! whatever serialises the engine serialises the one producer, and each
//! entry is published with Release and taken with Acquire.

use super::wr::WorkCompletion;
use super::Event;
use crossbeam_queue::ArrayQueue;
use std::sync::Arc;

/// A completion queue handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CqHandle(pub u32);

/// The completions of one CQ, oldest first: cheap to clone, shared by the
/// engine (which pushes) and any number of pollers.
#[derive(Clone)]
pub struct CqRing(Arc<ArrayQueue<WorkCompletion>>);

impl CqRing {
    /// Takes the oldest completion.
    pub fn pop(&self) -> Option<WorkCompletion> {
        self.0.pop()
    }

    /// Completions waiting.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no completion waits.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

pub(crate) struct Cq {
    entries: CqRing,
    /// Set on overflow; a CQ in error accepts no more completions.
    overflowed: bool,
    /// Completions queued since creation: an arm waits for the next one.
    pushed: u64,
}

impl Cq {
    pub fn new(capacity: usize) -> Cq {
        Cq { entries: CqRing(Arc::new(ArrayQueue::new(capacity.max(1)))), overflowed: false, pushed: 0 }
    }

    /// Queues `wc`. `Err` when it was lost, with the event to raise the
    /// first time (the CQ stays in error afterwards, as on hardware).
    pub fn push(&mut self, handle: CqHandle, wc: WorkCompletion) -> Result<(), Option<Event>> {
        if self.overflowed {
            return Err(None);
        }
        if self.entries.0.push(wc).is_err() {
            self.overflowed = true;
            return Err(Some(Event::CqError { cq: handle }));
        }
        self.pushed += 1;
        Ok(())
    }

    /// Completions queued since the CQ was created.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    pub fn pop(&mut self) -> Option<WorkCompletion> {
        self.entries.pop()
    }

    pub fn ring(&self) -> CqRing {
        self.entries.clone()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_overflowed(&self) -> bool {
        self.overflowed
    }
}
