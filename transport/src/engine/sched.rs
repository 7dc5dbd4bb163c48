//! Which QP sends next. Only QPs that may have something to send are
//! looked at: a QP becomes active when something happens to it (a post, a
//! packet for it, a timer, a modify) and leaves the set when it has nothing
//! to send; a QP stopped only by the engine's budget of unacknowledged PSNs
//! waits apart until the budget frees. With many QPs mostly idle or
//! waiting, a packet costs no scan of them all.

use super::qp::Qp;
use super::time::Instant;
use super::{requester, responder, Shared, Transmit};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Default)]
pub(crate) struct TxSchedule {
    /// QPs that may have a packet to send.
    active: BTreeSet<u32>,
    /// QPs with requests to send that the budget held back.
    budget_waiting: BTreeSet<u32>,
    /// The QP looked at first, for fairness.
    cursor: u32,
}

impl TxSchedule {
    /// Something happened to `qpn`: it may have a packet to send.
    pub fn activate(&mut self, qpn: u32) {
        self.active.insert(qpn);
    }

    pub fn forget(&mut self, qpn: u32) {
        self.active.remove(&qpn);
        self.budget_waiting.remove(&qpn);
    }

    /// The next packet of the active QPs: round robin by message, starting
    /// at the QP that sent last if it is in the middle of a message (a burst
    /// of a whole message, up to its window, as an RNIC's scheduler; ACKs
    /// then come per message), after it otherwise; each QP once at most.
    pub fn poll(
        &mut self,
        qps: &mut BTreeMap<u32, Qp>,
        sh: &mut Shared,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        if sh.inflight < sh.inflight_budget && !self.budget_waiting.is_empty() {
            self.active.append(&mut self.budget_waiting);
        }
        let start = self.cursor;
        let (mut from, mut wrapped) = (start, false);
        loop {
            let qpn = match self.active.range(from..).next() {
                Some(&q) if !(wrapped && q >= start) => q,
                Some(_) => return None,
                None if wrapped || start == 0 => return None,
                None => {
                    (from, wrapped) = (0, true);
                    continue;
                }
            };
            from = qpn + 1;
            let Some(qp) = qps.get_mut(&qpn) else {
                self.active.remove(&qpn);
                continue;
            };
            let tx = responder::poll_response(qp, sh, buf).or_else(|| requester::poll_request(qp, sh, now, buf));
            qp.sync(sh);
            if let Some(tx) = tx {
                self.cursor = if qp.mid_message() { qpn } else { qpn + 1 };
                return Some(tx);
            }
            self.active.remove(&qpn);
            if qp.has_unsent_requests() && sh.inflight >= sh.inflight_budget {
                self.budget_waiting.insert(qpn);
            }
        }
    }
}
