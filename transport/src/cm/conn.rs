//! One connection's CM state: who the peer is, which TIDs answer what, and
//! the request (REQ, REP or DREQ) waiting for its answer.

use super::api::State;
use super::mad::MAD_LEN;
use crate::engine::{Gid, Instant};
use core::time::Duration;

/// A sent request that is retransmitted until answered.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub mad: [u8; MAD_LEN],
    pub due: Instant,
    pub retries_left: u8,
}

#[derive(Debug, Clone)]
pub(crate) struct Conn {
    pub state: State,
    /// Where its MADs go: the peer port's GID.
    pub remote_gid: Gid,
    /// 0 until the peer's REQ or REP names it, as in the kernel's lookups.
    pub remote_comm_id: u32,
    pub remote_ca_guid: u64,
    pub remote_qpn: u32,
    pub local_qpn: u32,
    /// The TID of the transaction our answers belong to (REQ's, then DREQ's).
    pub tid: u64,
    /// The TID of the requests this side starts (REQ, DREQ).
    pub own_tid: u64,
    /// The path's local ACK timeout; timewait lasts 4.096 us x 2^av_timeout.
    pub av_timeout: u8,
    /// How long one try of our REQ, REP or DREQ waits.
    pub timeout: Duration,
    pub max_cm_retries: u8,
    pub pending: Option<Pending>,
    pub timewait_until: Option<Instant>,
    /// The consumer destroyed it: no more events; gone after timewait.
    pub detached: bool,
    /// The service timeout of our MRA, resent for duplicates.
    pub mra_timeout: u8,
    /// Private data of our last RTU, MRA or DREP, resent for duplicates.
    pub reply_data: Vec<u8>,
    /// A service ID resolution rather than a connection.
    pub sidr: bool,
    /// The service a received SIDR_REQ asked for, named again by its REP.
    pub service_id: u64,
    /// The SIDR_REP sent, resent for a repeated SIDR_REQ.
    pub answer: Option<Box<[u8; MAD_LEN]>>,
}

impl Conn {
    pub fn new(state: State, remote_gid: Gid, tid: u64, own_tid: u64) -> Conn {
        Conn {
            state,
            remote_gid,
            remote_comm_id: 0,
            remote_ca_guid: 0,
            remote_qpn: 0,
            local_qpn: 0,
            tid,
            own_tid,
            av_timeout: 0,
            timeout: Duration::ZERO,
            max_cm_retries: 0,
            pending: None,
            timewait_until: None,
            detached: false,
            mra_timeout: 0,
            reply_data: Vec::new(),
            sidr: false,
            service_id: 0,
            answer: None,
        }
    }

    /// In the kernel's tables of remote IDs and QPNs, which find duplicate
    /// and stale requests: from the REQ (or REP) until idle or timewait.
    pub fn is_live(&self) -> bool {
        !matches!(self.state, State::Idle | State::Timewait) && self.remote_comm_id != 0
    }

    /// Starts retransmitting `mad` every `self.timeout`, `max_cm_retries` times.
    pub fn wait_for_answer(&mut self, now: Instant, mad: [u8; MAD_LEN]) {
        self.pending = Some(Pending { mad, due: now + self.timeout, retries_left: self.max_cm_retries });
    }

    pub fn enter_timewait(&mut self, now: Instant) {
        self.state = State::Timewait;
        self.pending = None;
        self.timewait_until = Some(now + super::timing::cm_time(self.av_timeout));
    }

    pub fn reset_to_idle(&mut self) {
        self.state = State::Idle;
        self.pending = None;
    }

    pub fn next_due(&self) -> Option<Instant> {
        let pending = self.pending.as_ref().map(|p| p.due);
        [pending, self.timewait_until].into_iter().flatten().min()
    }
}
