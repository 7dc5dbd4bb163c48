//! Which QP sends next. Only QPs that may have something to send are
//! looked at: a QP becomes active when something happens to it (a post, a
//! packet for it, a timer, a modify) and leaves the set when it has nothing
//! to send; a QP stopped only by the engine's budget of unacknowledged PSNs
//! waits apart until the budget frees. With many QPs mostly idle or
//! waiting, a packet costs no scan of them all.

use super::qp::QpTable;
use super::time::Instant;
use super::{requester, responder, EngineState, Transmit};

/// A set of QP numbers, sorted in a vector: insert, remove and "the first at
/// or after" are binary searches, cheaper than a tree's for the tens to
/// hundreds of QPs a device has active at once (one insert per posted
/// message and per packet received, so it counts).
#[derive(Debug, Default)]
struct QpnSet(Vec<u32>);

impl QpnSet {
    fn insert(&mut self, qpn: u32) {
        if let Err(at) = self.0.binary_search(&qpn) {
            self.0.insert(at, qpn);
        }
    }
    fn remove(&mut self, qpn: u32) {
        if let Ok(at) = self.0.binary_search(&qpn) {
            self.0.remove(at);
        }
    }
    /// The smallest member `>= qpn`.
    fn first_from(&self, qpn: u32) -> Option<u32> {
        self.0.get(self.0.partition_point(|&q| q < qpn)).copied()
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Moves every member of `other` here.
    fn take_all(&mut self, other: &mut QpnSet) {
        for qpn in other.0.drain(..) {
            self.insert(qpn);
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct TxSchedule {
    /// QPs that may have a packet to send.
    active: QpnSet,
    /// QPs with requests to send that the budget held back.
    budget_waiting: QpnSet,
    /// The QP looked at first, for fairness.
    cursor: u32,
}

impl TxSchedule {
    /// Something happened to `qpn`: it may have a packet to send.
    pub fn activate(&mut self, qpn: u32) {
        self.active.insert(qpn);
    }

    pub fn forget(&mut self, qpn: u32) {
        self.active.remove(qpn);
        self.budget_waiting.remove(qpn);
    }

    /// The next packet of the active QPs: round robin by message, starting
    /// at the QP that sent last if it is in the middle of a message (a burst
    /// of a whole message, up to its window, as an RNIC's scheduler; ACKs
    /// then come per message), after it otherwise; each QP once at most.
    pub fn poll(&mut self, qps: &mut QpTable, sh: &mut EngineState, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if sh.inflight < sh.inflight_budget && !self.budget_waiting.is_empty() {
            self.active.take_all(&mut self.budget_waiting);
        }
        let start = self.cursor;
        let (mut from, mut wrapped) = (start, false);
        loop {
            let qpn = match self.active.first_from(from) {
                Some(q) if !(wrapped && q >= start) => q,
                Some(_) => return None,
                None if wrapped || start == 0 => return None,
                None => {
                    (from, wrapped) = (0, true);
                    continue;
                }
            };
            from = qpn + 1;
            let Some(qp) = qps.get_mut(&qpn) else {
                self.active.remove(qpn);
                continue;
            };
            let tx = responder::poll_response(qp, sh, buf).or_else(|| requester::poll_request(qp, sh, now, buf));
            qp.sync(sh);
            if let Some(tx) = tx {
                self.cursor = if qp.mid_message() { qpn } else { qpn + 1 };
                return Some(tx);
            }
            self.active.remove(qpn);
            if qp.has_unsent_requests() && sh.inflight >= sh.inflight_budget {
                self.budget_waiting.insert(qpn);
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::QpnSet;

    #[test]
    fn a_qpn_set_stays_sorted_without_duplicates() {
        let mut s = QpnSet::default();
        for q in [0x30, 0x10, 0x20, 0x10] {
            s.insert(q);
        }
        assert_eq!(s.0, [0x10, 0x20, 0x30]);
        assert_eq!((s.first_from(0x11), s.first_from(0x30), s.first_from(0x31)), (Some(0x20), Some(0x30), None));
        s.remove(0x20);
        s.remove(0x99);
        let mut other = QpnSet::default();
        other.insert(0x15);
        s.take_all(&mut other);
        assert!(other.is_empty());
        assert_eq!(s.0, [0x10, 0x15, 0x30]);
    }
}
