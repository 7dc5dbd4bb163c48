//! Service ID Resolution, the CM exchange of UD rdma_cm IDs (the kernel's
//! `ib_send_cm_sidr_req`, `ib_send_cm_sidr_rep` and their handlers): a
//! SIDR_REQ asks a port for the QPN and Q_Key of a service, the SIDR_REP
//! answers with them or with a status that says why not.
//!
//! The requester sends its SIDR_REQ again after each timeout, `max_cm_retries`
//! times, then gives up ([`CmEvent::SidrReqError`]). A repeated SIDR_REQ
//! while the consumer decides is dropped, as the kernel drops it. Unlike the
//! kernel, which forgets a request once answered (so that a SIDR_REQ sent
//! again because its SIDR_REP was lost becomes a second request for the
//! consumer), the answer is kept for [`SIDR_ANSWER_KEPT`] and sent again
//! for a repeat. A port with [`CmConfig::max_conns_per_peer`](super::CmConfig)
//! requests of one peer pending or answered refuses more (REJECT, counted
//! as `req_refused`), so one host cannot fill its memory with them.

use super::api::{CmError, CmEvent, CommId, Outgoing, SidrAnswer, SidrParams, State};
use super::machine::{expect, fit, Cm};
use super::msg::{
    CmMessage, SidrRepRepr, SidrReqRepr, SidrStatus, SIDR_REP_INFO_LEN, SIDR_REP_PRIVATE_DATA_LEN,
    SIDR_REQ_PRIVATE_DATA_LEN,
};
use super::timing::CMA_CM_RESPONSE_TIMEOUT;
use crate::engine::{Gid, Instant};
use core::time::Duration;

/// How long an answered SIDR_REQ is remembered, to answer its repeats with
/// the same SIDR_REP: two of rdma_cm's tries (4.1 s each).
pub const SIDR_ANSWER_KEPT: Duration = Duration::from_millis(2 << (CMA_CM_RESPONSE_TIMEOUT - 8));

impl Cm {
    /// Sends a SIDR_REQ (`ib_send_cm_sidr_req`); the request waits in
    /// `SidrReqSent` for its SIDR_REP.
    pub fn sidr_request(&mut self, now: Instant, p: &SidrParams) -> Result<CommId, CmError> {
        let pd = fit::<SIDR_REQ_PRIVATE_DATA_LEN>(&p.private_data)?;
        let id = self.new_conn(State::SidrReqSent, p.dgid, None);
        let req = SidrReqRepr { request_id: id, partition_key: 0xffff, service_id: p.service_id, private_data: pd };
        let tid = self.form_tid(id);
        let mad = self.send(p.dgid, CmMessage::SidrReq(Box::new(req)), tid);
        let c = self.conn(id)?;
        c.sidr = true;
        c.service_id = p.service_id;
        c.timeout = p.timeout;
        c.max_cm_retries = p.max_cm_retries;
        c.wait_for_answer(now, mad);
        Ok(id)
    }

    /// Answers a received SIDR_REQ (`ib_send_cm_sidr_rep`): success with the
    /// service's QPN and Q_Key, or a refusal. The answer is kept a while
    /// for repeats of the request; the consumer hears nothing more of it.
    pub fn sidr_reply(&mut self, now: Instant, id: CommId, a: &SidrAnswer) -> Result<(), CmError> {
        let pd = fit::<SIDR_REP_PRIVATE_DATA_LEN>(&a.private_data)?;
        let c = self.conn(id)?;
        expect(c.state, "answer a SIDR_REQ on", &[State::SidrReqRcvd])?;
        let rep = SidrRepRepr {
            qpn: a.qpn,
            qkey: a.qkey,
            private_data: pd,
            ..sidr_rep(c.remote_comm_id, c.service_id, a.status)
        };
        let (dgid, tid) = (c.remote_gid, c.tid);
        let mad = self.send(dgid, CmMessage::SidrRep(Box::new(rep)), tid);
        let c = self.conn(id)?;
        c.state = State::Timewait;
        c.timewait_until = Some(now + SIDR_ANSWER_KEPT);
        c.answer = Some(Box::new(mad));
        c.detached = true;
        Ok(())
    }

    /// Refuses a received SIDR_REQ (what destroying its ID does).
    pub(super) fn sidr_refuse(&mut self, now: Instant, id: CommId) -> Result<(), CmError> {
        let refusal = SidrAnswer { status: SidrStatus::REJECT, qpn: 0, qkey: 0, private_data: Vec::new() };
        self.sidr_reply(now, id, &refusal)
    }

    /// A SIDR_REQ: a repeat (answered again, or dropped while the consumer
    /// decides), a service nobody serves (UNSUPPORTED), too many from one
    /// peer (REJECT), or a new request for the consumer.
    pub(super) fn on_sidr_req(&mut self, src: Gid, tid: u64, req: Box<SidrReqRepr>) {
        let repeat = self.conns.values().find(|c| c.sidr && c.remote_gid == src && c.remote_comm_id == req.request_id);
        if let Some(c) = repeat {
            if let Some(mad) = c.answer.as_deref() {
                self.tx.push_back(Outgoing { dgid: src, mad: *mad });
            }
            return;
        }
        let refusal = if !self.listening.contains(&req.service_id) {
            SidrStatus::UNSUPPORTED
        } else if self.sidr_with(src) >= self.cfg.max_conns_per_peer {
            self.stats.req_refused += 1;
            SidrStatus::REJECT
        } else {
            let id = self.new_conn(State::SidrReqRcvd, src, Some(tid));
            let c = self.conns.get_mut(&id).expect("just created");
            c.sidr = true;
            c.remote_comm_id = req.request_id;
            c.service_id = req.service_id;
            self.emit(CmEvent::SidrReqReceived { id, src_gid: src, req });
            return;
        };
        // Refused at once, remembering nothing (as `issue_rej` for a REQ).
        let rep = sidr_rep(req.request_id, req.service_id, refusal);
        self.send(src, CmMessage::SidrRep(Box::new(rep)), tid);
    }

    /// The SIDR_REP of one of our requests, from the port it asked.
    pub(super) fn on_sidr_rep(&mut self, src: Gid, rep: Box<SidrRepRepr>) {
        let Some(c) = self.conns.get_mut(&rep.request_id) else { return };
        if !c.sidr || c.state != State::SidrReqSent {
            return;
        }
        if c.remote_gid != src {
            self.stats.rcvd_bad_src += 1;
            return;
        }
        c.reset_to_idle();
        self.emit(CmEvent::SidrRepReceived { id: rep.request_id, rep });
    }

    /// SIDR requests of port `gid` pending or answered (and remembered).
    fn sidr_with(&self, gid: Gid) -> usize {
        self.conns.values().filter(|c| c.sidr && c.remote_gid == gid && c.state != State::SidrReqSent).count()
    }
}

/// A SIDR_REP answering `request_id` for `service_id` with `status`, no QP,
/// no Q_Key and no data (a refusal as it stands).
fn sidr_rep(request_id: CommId, service_id: u64, status: SidrStatus) -> SidrRepRepr {
    SidrRepRepr {
        request_id,
        status,
        additional_info_length: 0,
        qpn: 0,
        service_id,
        qkey: 0,
        additional_info: [0; SIDR_REP_INFO_LEN],
        private_data: [0; SIDR_REP_PRIVATE_DATA_LEN],
    }
}
