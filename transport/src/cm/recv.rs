//! What the CM does with each received message (the kernel's cm_*_handler):
//! find the connection it belongs to, answer duplicates, move the state on.

use super::api::{CmEvent, CommId, State};
use super::machine::{mra_repr, Cm};
use super::mad::Mad;
use super::msg::{
    CmMessage, DrepRepr, DreqRepr, MraRepr, MsgResponse, RejReason, RejRepr, RepRepr, ReqRepr, RtuRepr, REJ_ARI_LEN,
    REJ_PRIVATE_DATA_LEN,
};
use super::timing::cm_time;
use crate::engine::{Gid, Instant};

impl Cm {
    /// Takes in one MAD received on QP1 from `src_gid` (the GRH's source).
    /// Anything that is not a CM `Send()` of a known message is dropped.
    pub fn handle_mad(&mut self, now: Instant, src_gid: Gid, bytes: &[u8]) {
        let Ok(mad) = Mad::new_checked(bytes) else { return };
        let Ok((header, msg)) = CmMessage::parse(&mad) else { return };
        if !header.is_cm_send() {
            return;
        }
        let tid = header.tid;
        match msg {
            CmMessage::Req(m) => self.on_req(now, src_gid, tid, m),
            CmMessage::Rep(m) => self.on_rep(now, src_gid, m),
            CmMessage::Rtu(m) => self.on_rtu(src_gid, &m),
            CmMessage::Rej(m) => self.on_rej(now, src_gid, m),
            CmMessage::Mra(m) => self.on_mra(now, src_gid, &m),
            CmMessage::Dreq(m) => self.on_dreq(src_gid, tid, &m),
            CmMessage::Drep(m) => self.on_drep(now, src_gid, &m),
            CmMessage::SidrReq(m) => self.on_sidr_req(src_gid, tid, m),
            CmMessage::SidrRep(m) => self.on_sidr_rep(src_gid, m),
            // LAP/APR are for alternate paths, which RoCE has none of.
            CmMessage::Other(_) => {}
        }
    }

    /// The connection `local` whose peer is `remote` (0: not known yet), as
    /// the kernel's `cm_acquire_id` finds it.
    fn find(&self, local: CommId, remote: u32) -> Option<CommId> {
        self.conns.get(&local).filter(|c| c.remote_comm_id == remote).map(|_| local)
    }

    /// Connection `found`, if message from `src` may act on it: only its
    /// peer's port may move or tear down a connection (a forged DREQ or REJ
    /// from elsewhere would otherwise end it). Others are dropped and counted.
    fn peer_conn(&mut self, found: Option<CommId>, src: Gid) -> Option<CommId> {
        let id = found?;
        if self.conns[&id].remote_gid == src {
            return Some(id);
        }
        self.stats.rcvd_bad_src += 1;
        None
    }

    /// A live connection whose peer is `remote` on CA `guid` at port `src`.
    fn find_remote(&self, remote: u32, guid: u64, src: Gid) -> Option<CommId> {
        self.conns
            .iter()
            .find(|(_, c)| c.is_live() && c.remote_comm_id == remote && c.remote_ca_guid == guid && c.remote_gid == src)
            .map(|(id, _)| *id)
    }

    /// A live connection to QP `qpn` of CA `guid` at port `src`: a new
    /// request for it means the old connection is stale. (A request from
    /// another port names another QP, whatever its fields say.)
    fn find_remote_qp(&self, qpn: u32, guid: u64, src: Gid) -> Option<CommId> {
        self.conns
            .iter()
            .find(|(_, c)| c.is_live() && c.remote_qpn == qpn && c.remote_ca_guid == guid && c.remote_gid == src)
            .map(|(id, _)| *id)
    }

    /// A REJ that answers a message with no connection here (`cm_issue_rej`).
    fn issue_rej(&mut self, dst: Gid, tid: u64, to: (u32, u32), of: MsgResponse, reason: RejReason) {
        let (local, remote) = to;
        let rej = RejRepr {
            local_comm_id: remote,
            remote_comm_id: local,
            message_rejected: of,
            rejected_info_length: 0,
            reason,
            ari: [0; REJ_ARI_LEN],
            private_data: [0; REJ_PRIVATE_DATA_LEN],
        };
        self.send(dst, CmMessage::Rej(Box::new(rej)), tid);
    }

    /// A stale connection: reject the new request and disconnect the old one.
    fn reject_stale(&mut self, now: Instant, src: Gid, tid: u64, ids: (u32, u32), of: MsgResponse, old: CommId) {
        self.issue_rej(src, tid, ids, of, RejReason::STALE_CONN);
        if self.state(old) == Some(State::Established) {
            let _ = self.send_dreq(now, old, &[]);
        }
    }

    fn on_req(&mut self, now: Instant, src: Gid, tid: u64, req: Box<ReqRepr>) {
        let ids = (req.local_comm_id, 0);
        if let Some(dup) = self.find_remote(req.local_comm_id, req.local_ca_guid, src) {
            self.answer_dup_req(src, dup);
            return;
        }
        if let Some(old) = self.find_remote_qp(req.local_qpn, req.local_ca_guid, src) {
            self.reject_stale(now, src, tid, ids, MsgResponse::Req, old);
            return;
        }
        if !self.listening.contains(&req.service_id) {
            self.issue_rej(src, tid, ids, MsgResponse::Req, RejReason::INVALID_SERVICE_ID);
            return;
        }
        if self.conns_with(src) >= self.cfg.max_conns_per_peer {
            self.stats.req_refused += 1;
            self.issue_rej(src, tid, ids, MsgResponse::Req, RejReason::NO_RESOURCES);
            return;
        }
        let id = self.new_conn(State::ReqRcvd, src, Some(tid));
        let c = self.conns.get_mut(&id).expect("just created");
        c.remote_comm_id = req.local_comm_id;
        c.remote_ca_guid = req.local_ca_guid;
        c.remote_qpn = req.local_qpn;
        c.timeout = cm_time(req.local_cm_response_timeout);
        c.max_cm_retries = req.max_cm_retries;
        // The path's packet lifetime is the REQ's ACK timeout less one; the
        // connection's ACK timeout is that plus one again.
        let t = req.primary.local_ack_timeout;
        c.av_timeout = t - u8::from(t > 0) + 1;
        self.emit(CmEvent::ReqReceived { id, src_gid: src, req });
    }

    /// A repeated REQ: the consumer is still deciding (say so again with an
    /// MRA, if one was promised), or the REP is on its way (ignore it).
    fn answer_dup_req(&mut self, src: Gid, id: CommId) {
        let c = &self.conns[&id];
        if c.state == State::MraReqSent {
            let mra = mra_repr(id, c, MsgResponse::Req, super::msg::private_data(&c.reply_data).unwrap_or([0; 222]));
            let tid = c.tid;
            self.send(src, CmMessage::Mra(Box::new(mra)), tid);
        }
    }

    fn on_rep(&mut self, now: Instant, src: Gid, rep: Box<RepRepr>) {
        let Some(id) = self.find(rep.remote_comm_id, 0) else {
            self.answer_dup_rep(src, &rep);
            return;
        };
        let Some(id) = self.peer_conn(Some(id), src) else { return };
        let c = &self.conns[&id];
        if !matches!(c.state, State::ReqSent | State::MraReqRcvd) {
            return;
        }
        if self.find_remote(rep.local_comm_id, rep.local_ca_guid, src).is_some() {
            return;
        }
        if let Some(old) = self.find_remote_qp(rep.local_qpn, rep.local_ca_guid, src) {
            let tid = c.tid;
            self.reject_stale(now, src, tid, (rep.local_comm_id, rep.remote_comm_id), MsgResponse::Rep, old);
            return;
        }
        let c = self.conns.get_mut(&id).expect("found above");
        c.state = State::RepRcvd;
        c.remote_comm_id = rep.local_comm_id;
        c.remote_ca_guid = rep.local_ca_guid;
        c.remote_qpn = rep.local_qpn;
        c.av_timeout = super::timing::ack_timeout(rep.target_ack_delay, c.av_timeout.saturating_sub(1));
        c.pending = None;
        self.emit(CmEvent::RepReceived { id, rep });
    }

    /// A repeated REP: our RTU was lost (send it again), or our consumer is
    /// still deciding (repeat the MRA).
    fn answer_dup_rep(&mut self, src: Gid, rep: &RepRepr) {
        let found = self.find(rep.remote_comm_id, rep.local_comm_id);
        let Some(id) = self.peer_conn(found, src) else { return };
        let c = &self.conns[&id];
        let msg = match c.state {
            State::Established => {
                let pd = super::msg::private_data(&c.reply_data).unwrap_or([0; 224]);
                CmMessage::Rtu(Box::new(RtuRepr {
                    local_comm_id: id,
                    remote_comm_id: c.remote_comm_id,
                    private_data: pd,
                }))
            }
            State::MraRepSent => {
                let pd = super::msg::private_data(&c.reply_data).unwrap_or([0; 222]);
                CmMessage::Mra(Box::new(mra_repr(id, c, MsgResponse::Rep, pd)))
            }
            _ => return,
        };
        let tid = c.tid;
        self.send(src, msg, tid);
    }

    fn on_rtu(&mut self, src: Gid, rtu: &RtuRepr) {
        let found = self.find(rtu.remote_comm_id, rtu.local_comm_id);
        let Some(id) = self.peer_conn(found, src) else { return };
        let c = self.conns.get_mut(&id).expect("found");
        if !matches!(c.state, State::RepSent | State::MraRepRcvd) {
            return;
        }
        c.state = State::Established;
        c.pending = None;
        self.emit(CmEvent::RtuReceived { id });
    }

    /// The connection a REJ is about (`cm_acquire_rejected_id`).
    fn rejected(&self, src: Gid, rej: &RejRepr) -> Option<CommId> {
        if rej.reason == RejReason::TIMEOUT {
            // The peer gave up on its REQ: it names itself by CA GUID in the ARI.
            let guid = u64::from_be_bytes(super::field::get_bytes(&rej.ari, 0));
            self.find_remote(rej.local_comm_id, guid, src)
        } else if rej.message_rejected == MsgResponse::Req {
            self.find(rej.remote_comm_id, 0)
        } else {
            self.find(rej.remote_comm_id, rej.local_comm_id)
        }
    }

    fn on_rej(&mut self, now: Instant, src: Gid, rej: Box<RejRepr>) {
        let found = self.rejected(src, &rej);
        let Some(id) = self.peer_conn(found, src) else { return };
        let c = self.conns.get_mut(&id).expect("found");
        match c.state {
            State::ReqSent
            | State::MraReqRcvd
            | State::RepSent
            | State::MraRepRcvd
            | State::ReqRcvd
            | State::MraReqSent => {
                if rej.reason == RejReason::STALE_CONN {
                    c.enter_timewait(now);
                } else {
                    c.reset_to_idle();
                }
            }
            State::DreqSent | State::RepRcvd | State::MraRepSent | State::Established => c.enter_timewait(now),
            _ => return,
        }
        self.emit(CmEvent::RejReceived { id, rej });
    }

    fn on_mra(&mut self, now: Instant, src: Gid, mra: &MraRepr) {
        let found = match mra.message_mraed {
            MsgResponse::Req => self.find(mra.remote_comm_id, 0),
            MsgResponse::Rep | MsgResponse::Other => self.find(mra.remote_comm_id, mra.local_comm_id),
            MsgResponse::Reserved => None,
        };
        let Some(id) = self.peer_conn(found, src) else { return };
        let c = self.conns.get_mut(&id).expect("found");
        let next = match (c.state, mra.message_mraed) {
            (State::ReqSent, MsgResponse::Req) => State::MraReqRcvd,
            (State::RepSent, MsgResponse::Rep) => State::MraRepRcvd,
            _ => return,
        };
        // The answer may take the service timeout on top of a round trip:
        // wait that long before trying again.
        c.state = next;
        c.timeout = cm_time(mra.service_timeout) + cm_time(c.av_timeout);
        if let Some(p) = c.pending.as_mut() {
            p.due = now + c.timeout;
        }
        self.emit(CmEvent::MraReceived { id, service_timeout: mra.service_timeout });
    }

    fn on_dreq(&mut self, src: Gid, tid: u64, dreq: &DreqRepr) {
        let Some(id) = self.find(dreq.remote_comm_id, dreq.local_comm_id) else {
            // Long gone here: answer so that the peer stops asking (`cm_issue_drep`).
            let drep = DrepRepr {
                local_comm_id: dreq.remote_comm_id,
                remote_comm_id: dreq.local_comm_id,
                private_data: [0; 224],
            };
            self.send(src, CmMessage::Drep(Box::new(drep)), tid);
            return;
        };
        let Some(id) = self.peer_conn(Some(id), src) else { return };
        let c = &self.conns[&id];
        if c.local_qpn != dreq.remote_qpn {
            return;
        }
        match c.state {
            State::RepSent | State::DreqSent | State::Established | State::MraRepRcvd => {}
            State::Timewait => {
                // Our DREP was lost: send it again.
                let pd = super::msg::private_data(&c.reply_data).unwrap_or([0; 224]);
                let drep = DrepRepr { local_comm_id: id, remote_comm_id: c.remote_comm_id, private_data: pd };
                self.send(src, CmMessage::Drep(Box::new(drep)), tid);
                return;
            }
            _ => return,
        }
        let c = self.conns.get_mut(&id).expect("found");
        c.state = State::DreqRcvd;
        c.pending = None;
        c.tid = tid;
        self.emit(CmEvent::DreqReceived { id });
    }

    fn on_drep(&mut self, now: Instant, src: Gid, drep: &DrepRepr) {
        let found = self.find(drep.remote_comm_id, drep.local_comm_id);
        let Some(id) = self.peer_conn(found, src) else { return };
        let c = self.conns.get_mut(&id).expect("found");
        if !matches!(c.state, State::DreqSent | State::DreqRcvd) {
            return;
        }
        c.enter_timewait(now);
        self.emit(CmEvent::DrepReceived { id });
    }
}
