//! Completion queues. A full CQ behaves as on hardware: the completion is
//! lost, the CQ goes into error (for good: it takes no more completions) and
//! the owner gets an asynchronous CQ error; the QP whose completion was lost
//! goes to ERR with a QP fatal event (the engine does that part).
//!
//! The entries live in a bounded lock-free ring ([`CqRing`]) that the engine
//! fills and that pollers may drain from any thread without the engine:
//! whatever serialises the engine serialises the one producer, and each
//! entry is published with Release and taken with Acquire.
//!
//! A QP destroyed or reset leaves no completion behind in its CQs, as on
//! mlx4/mlx5 (which clean the CQ of the QP's entries in both verbs): a
//! program frees what its work requests' `wr_id`s point at once the QP is
//! gone (libfabric's rxm does), so a completion polled afterwards would
//! hand it a dangling pointer. The engine takes those entries out under a
//! write lock of the ring, which each poll holds for reading, so that no
//! poller sees the others out of order meanwhile.

use super::wr::WorkCompletion;
use super::Event;
use crossbeam_queue::ArrayQueue;
use std::sync::{Arc, RwLock};

/// A completion queue handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CqHandle(pub u32);

/// The completions of one CQ, oldest first: cheap to clone, shared by the
/// engine (which pushes) and any number of pollers.
#[derive(Clone)]
pub struct CqRing(Arc<Ring>);

struct Ring {
    entries: ArrayQueue<WorkCompletion>,
    /// Held for reading by each poll, for writing while a QP's entries are
    /// taken out.
    purging: RwLock<()>,
}

impl CqRing {
    fn new(capacity: usize) -> CqRing {
        CqRing(Arc::new(Ring { entries: ArrayQueue::new(capacity), purging: RwLock::new(()) }))
    }

    /// Moves up to `out.len()` completions into `out`, oldest first;
    /// returns how many.
    pub fn pop_into(&self, out: &mut [WorkCompletion]) -> usize {
        let _polling = self.0.purging.read().unwrap_or_else(|p| p.into_inner());
        let mut n = 0;
        while n < out.len() {
            let Some(wc) = self.0.entries.pop() else { break };
            out[n] = wc;
            n += 1;
        }
        n
    }

    /// Completions waiting.
    pub fn len(&self) -> usize {
        self.0.entries.len()
    }

    /// Whether no completion waits.
    pub fn is_empty(&self) -> bool {
        self.0.entries.is_empty()
    }

    /// Takes out the completions of QP `qpn`; the others stay, in order.
    /// Only the one producer may call it (nothing is pushed meanwhile).
    fn purge_qp(&self, qpn: u32) {
        let _purging = self.0.purging.write().unwrap_or_else(|p| p.into_inner());
        for _ in 0..self.0.entries.len() {
            let Some(wc) = self.0.entries.pop() else { break };
            if wc.qp_num != qpn {
                // Room: it was just taken, and nothing else pushes.
                let _ = self.0.entries.push(wc);
            }
        }
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
        Cq { entries: CqRing::new(capacity.max(1)), overflowed: false, pushed: 0 }
    }

    /// Queues `wc`. `Err` when it was lost, with the event to raise the
    /// first time (the CQ stays in error afterwards, as on hardware).
    pub fn push(&mut self, handle: CqHandle, wc: WorkCompletion) -> Result<(), Option<Event>> {
        if self.overflowed {
            return Err(None);
        }
        if self.entries.0.entries.push(wc).is_err() {
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

    /// The oldest completion. No lock: a purge takes the engine, as this does.
    pub fn pop(&mut self) -> Option<WorkCompletion> {
        self.entries.0.entries.pop()
    }

    /// Takes out the completions of QP `qpn` (destroyed or reset).
    pub fn purge_qp(&mut self, qpn: u32) {
        self.entries.purge_qp(qpn);
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
