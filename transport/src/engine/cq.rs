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
//! poller sees the others out of order meanwhile. A resize
//! (`ibv_resize_cq`) moves the waiting entries, in order, into a new ring
//! under the same write lock.

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

type Entries = Arc<ArrayQueue<WorkCompletion>>;

struct Ring {
    /// The queue, held for reading by each poll; for writing while a QP's
    /// entries are taken out, or while the queue is replaced by a larger or
    /// smaller one (`ibv_resize_cq`).
    entries: RwLock<Entries>,
}

impl CqRing {
    fn new(queue: Entries) -> CqRing {
        CqRing(Arc::new(Ring { entries: RwLock::new(queue) }))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries> {
        self.0.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries> {
        self.0.entries.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves up to `out.len()` completions into `out`, oldest first;
    /// returns how many.
    pub fn pop_into(&self, out: &mut [WorkCompletion]) -> usize {
        let entries = self.read();
        let mut n = 0;
        while n < out.len() {
            let Some(wc) = entries.pop() else { break };
            out[n] = wc;
            n += 1;
        }
        n
    }

    /// Completions waiting.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether no completion waits.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Takes out the completions of QP `qpn`; the others stay, in order.
    /// Only the one producer may call it (nothing is pushed meanwhile).
    fn purge_qp(&self, qpn: u32) {
        let entries = self.write();
        for _ in 0..entries.len() {
            let Some(wc) = entries.pop() else { break };
            if wc.qp_num != qpn {
                // Room: it was just taken, and nothing else pushes.
                let _ = entries.push(wc);
            }
        }
    }

    /// Moves the waiting completions, in order, into a queue of `capacity`
    /// and makes it the one polled; the new queue. Only the one producer
    /// may call it. `Err` with the number waiting when they would not fit.
    fn replace(&self, capacity: usize) -> Result<Entries, usize> {
        let mut entries = self.write();
        if entries.len() > capacity {
            return Err(entries.len());
        }
        let resized = Arc::new(ArrayQueue::new(capacity.max(1)));
        while let Some(wc) = entries.pop() {
            // Room: checked above, and nothing else pushes or polls.
            let _ = resized.push(wc);
        }
        *entries = resized.clone();
        Ok(resized)
    }
}

pub(crate) struct Cq {
    /// The queue the engine pushes to (the ring's, without its lock: the
    /// engine is the one producer, and the only one that replaces it).
    queue: Entries,
    ring: CqRing,
    /// Set on overflow; a CQ in error accepts no more completions.
    overflowed: bool,
    /// Completions queued since creation: an arm waits for the next one.
    pushed: u64,
}

impl Cq {
    pub fn new(capacity: usize) -> Cq {
        let queue = Arc::new(ArrayQueue::new(capacity.max(1)));
        Cq { ring: CqRing::new(queue.clone()), queue, overflowed: false, pushed: 0 }
    }

    /// Queues `wc`. `Err` when it was lost, with the event to raise the
    /// first time (the CQ stays in error afterwards, as on hardware).
    pub fn push(&mut self, handle: CqHandle, wc: WorkCompletion) -> Result<(), Option<Event>> {
        if self.overflowed {
            return Err(None);
        }
        if self.queue.push(wc).is_err() {
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

    /// The oldest completion. No lock: a purge or resize takes the engine,
    /// as this does.
    pub fn pop(&mut self) -> Option<WorkCompletion> {
        self.queue.pop()
    }

    /// Takes out the completions of QP `qpn` (destroyed or reset).
    pub fn purge_qp(&mut self, qpn: u32) {
        self.ring.purge_qp(qpn);
    }

    /// Holds `capacity` completions from now on, those waiting kept in
    /// order. `Err` with the number waiting when more wait than that.
    pub fn resize(&mut self, capacity: usize) -> Result<(), usize> {
        self.queue = self.ring.replace(capacity)?;
        Ok(())
    }

    pub fn ring(&self) -> CqRing {
        self.ring.clone()
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_overflowed(&self) -> bool {
        self.overflowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wc(id: u64) -> WorkCompletion {
        WorkCompletion { wr_id: id, ..WorkCompletion::default() }
    }

    #[test]
    fn a_ring_taken_before_a_resize_polls_the_new_queue() {
        let mut cq = Cq::new(2);
        let ring = cq.ring();
        for id in 0..2 {
            cq.push(CqHandle(1), wc(id)).unwrap();
        }
        assert_eq!(cq.resize(1), Err(2));
        cq.resize(4).unwrap();
        for id in 2..4 {
            cq.push(CqHandle(1), wc(id)).unwrap();
        }
        let mut out = [WorkCompletion::default(); 8];
        assert_eq!(ring.pop_into(&mut out), 4);
        assert_eq!(out[..4].iter().map(|w| w.wr_id).collect::<Vec<_>>(), [0, 1, 2, 3]);
    }
}
