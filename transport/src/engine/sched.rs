//! Which QP sends next. Only QPs that may have something to send are
//! looked at: a QP becomes active when something happens to it (a post, a
//! packet for it, a timer, a modify) and leaves the queue when it has
//! nothing to send; a QP stopped only by the engine's budget of
//! unacknowledged PSNs waits apart until the budget frees. With many QPs
//! mostly idle or waiting, a packet costs no scan of them all, and with
//! thousands active, no search or shift of a sorted set: each QP carries
//! its own marks of which queue holds it (`Qp::sched`), as an RNIC's
//! doorbell list does.

use super::qp::{Qp, QpTable};
use super::time::Instant;
use super::{requester, responder, EngineState, Transmit};
use std::collections::VecDeque;

/// Which of the scheduler's queues hold a QP: at most one entry in each.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SchedMarks {
    active: bool,
    parked: bool,
}

#[derive(Debug, Default)]
pub(crate) struct TxSchedule {
    /// QPs that may have a packet to send, in the order of their turns.
    active: VecDeque<u32>,
    /// QPs with requests to send that the budget held back.
    parked: Vec<u32>,
}

impl TxSchedule {
    /// Something happened to `qp`: it may have a packet to send.
    pub fn activate(&mut self, qp: &mut Qp) {
        if !qp.sched.active {
            qp.sched.active = true;
            self.active.push_back(qp.qpn);
        }
    }

    /// QP `qpn` is gone: its entries go too (a QP number may come back).
    pub fn forget(&mut self, qpn: u32) {
        self.active.retain(|&q| q != qpn);
        self.parked.retain(|&q| q != qpn);
    }

    /// The next packet of the active QPs: round robin by message. A QP that
    /// sent part of a message keeps its turn (a burst of a whole message, up
    /// to its window, as an RNIC's scheduler; ACKs then come per message);
    /// one that finished a message goes to the back; one with nothing to
    /// send leaves the queue. Each QP once at most.
    pub fn poll(&mut self, qps: &mut QpTable, sh: &mut EngineState, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if sh.inflight < sh.inflight_budget && !self.parked.is_empty() {
            // Drained in place, so that the vector keeps its allocation.
            let mut parked = std::mem::take(&mut self.parked);
            for qpn in parked.drain(..) {
                if let Some(qp) = qps.get_mut(&qpn) {
                    qp.sched.parked = false;
                    self.activate(qp);
                }
            }
            self.parked = parked;
        }
        while let Some(qpn) = self.active.pop_front() {
            let Some(qp) = qps.get_mut(&qpn) else { continue };
            let tx = responder::poll_response(qp, sh, buf).or_else(|| requester::poll_request(qp, sh, now, buf));
            qp.sync(sh);
            if let Some(tx) = tx {
                if qp.mid_message() {
                    self.active.push_front(qpn);
                } else {
                    self.active.push_back(qpn);
                }
                return Some(tx);
            }
            qp.sched.active = false;
            if qp.has_unsent_requests() && sh.inflight >= sh.inflight_budget && !qp.sched.parked {
                qp.sched.parked = true;
                self.parked.push(qpn);
            }
        }
        None
    }
}
