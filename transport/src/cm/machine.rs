//! [`Cm`]: the connections of one port, the commands that start CM messages
//! (connect, accept, RTU, reject, MRA, DREQ, DREP, destroy), timers and
//! retries, as the kernel's cm.c runs them.

use super::api::{AcceptParams, CmError, CmEvent, CommId, ConnectParams, Outgoing, State};
use super::conn::Conn;
use super::mad::MAD_LEN;
use super::msg::{
    private_data, CmMessage, DrepRepr, DreqRepr, MraRepr, MsgResponse, PathRepr, RejReason, RejRepr, RepRepr, ReqRepr,
    RtuRepr, DREP_PRIVATE_DATA_LEN, DREQ_PRIVATE_DATA_LEN, MRA_PRIVATE_DATA_LEN, REJ_ARI_LEN, REJ_PRIVATE_DATA_LEN,
    REP_PRIVATE_DATA_LEN, REQ_PRIVATE_DATA_LEN, RTU_PRIVATE_DATA_LEN, TRANSPORT_RC,
};
use super::timing::{ack_timeout, cm_time};
use crate::engine::{Gid, Instant};
use crate::Seed;
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Who this CM is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmConfig {
    /// The CA GUID of the port (Local CA GUID of REQs and REPs).
    pub ca_guid: u64,
    /// The CA's local ACK delay, sent as a REP's Target ACK Delay.
    pub ack_delay: u8,
    /// At most this many connections (being set up or established) with one
    /// peer port; a REQ beyond them is rejected with "no resources" and
    /// counted ([`CmStats::req_refused`]), so that one host cannot make a
    /// listener create QPs without bound (ReDMArk's A4).
    pub max_conns_per_peer: usize,
    /// Seeds communication IDs and the upper half of TIDs: a secret seed
    /// (from [`crate::engine::Engine::derive_seed`]) so that one comm ID
    /// seen on the wire tells nothing of the others.
    pub seed: Seed,
}

/// The Communication Manager of one port, sans-IO: MADs in
/// ([`Cm::handle_mad`]), MADs out ([`Cm::poll_transmit`]), events
/// ([`Cm::poll_event`]) and timers ([`Cm::poll_timeout`],
/// [`Cm::handle_timeout`]). After any input, drain all three.
pub struct Cm {
    pub(super) cfg: CmConfig,
    rng: ChaCha20Rng,
    /// The upper 32 bits of the TIDs this side starts.
    hi_tid: u32,
    pub(super) conns: BTreeMap<CommId, Conn>,
    pub(super) listening: BTreeSet<u64>,
    pub(super) tx: VecDeque<Outgoing>,
    events: VecDeque<CmEvent>,
    pub(super) stats: CmStats,
}

/// What the CM refused, for `--stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmStats {
    /// Messages about a connection that did not come from its peer's port
    /// (a forged DREQ, REJ, DREP, ...): dropped.
    pub rcvd_bad_src: u64,
    /// REQs rejected because their port had `max_conns_per_peer` already.
    pub req_refused: u64,
}

/// The default [`CmConfig::max_conns_per_peer`]: far above what perftest
/// (`-q`) or an RPC system opens between two hosts, far below memory limits.
pub const MAX_CONNS_PER_PEER: usize = 4096;

impl Cm {
    pub fn new(cfg: CmConfig) -> Cm {
        let mut rng = cfg.seed.rng();
        let hi_tid = rng.gen_range(1..=0xffff);
        Cm {
            cfg,
            rng,
            hi_tid,
            conns: BTreeMap::new(),
            listening: BTreeSet::new(),
            tx: VecDeque::new(),
            events: VecDeque::new(),
            stats: CmStats::default(),
        }
    }

    pub fn config(&self) -> &CmConfig {
        &self.cfg
    }

    /// What was refused so far.
    pub fn stats(&self) -> CmStats {
        self.stats
    }

    /// Connections with port `gid` that are being set up or established.
    pub(super) fn conns_with(&self, gid: Gid) -> usize {
        self.conns.values().filter(|c| c.remote_gid == gid && !matches!(c.state, State::Idle | State::Timewait)).count()
    }

    /// Accepts REQs for `service_id`; a REQ for a service no one listens on
    /// is rejected with reason 8 (invalid service ID).
    pub fn listen(&mut self, service_id: u64) -> Result<(), CmError> {
        if !self.listening.insert(service_id) {
            return Err(CmError::ServiceIdInUse(service_id));
        }
        Ok(())
    }

    pub fn unlisten(&mut self, service_id: u64) {
        self.listening.remove(&service_id);
    }

    pub fn state(&self, id: CommId) -> Option<State> {
        self.conns.get(&id).map(|c| c.state)
    }

    /// Connections, the ones still in timewait after their consumer left included.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Outgoing> {
        self.tx.pop_front()
    }

    #[must_use]
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        self.events.pop_front()
    }

    /// When [`Cm::handle_timeout`] must next be called.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.conns.values().filter_map(Conn::next_due).min()
    }

    /// A fresh, nonzero communication ID (zero means "not known yet").
    fn alloc_id(&mut self) -> CommId {
        loop {
            let id = self.rng.gen::<u32>();
            if id != 0 && !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    /// The TID of requests this side starts on connection `id`: the kernel's
    /// agent number over the comm ID as an x86 kernel holds it in memory.
    pub(super) fn form_tid(&self, id: CommId) -> u64 {
        u64::from(self.hi_tid) << 32 | u64::from(id.swap_bytes())
    }

    /// A new connection in `state` whose requests go to `remote_gid`.
    pub(super) fn new_conn(&mut self, state: State, remote_gid: Gid, tid: Option<u64>) -> CommId {
        let id = self.alloc_id();
        let own = self.form_tid(id);
        self.conns.insert(id, Conn::new(state, remote_gid, tid.unwrap_or(own), own));
        id
    }

    pub(super) fn send(&mut self, dgid: Gid, msg: CmMessage, tid: u64) -> [u8; MAD_LEN] {
        let mad = msg.to_mad(tid);
        self.tx.push_back(Outgoing { dgid, mad });
        mad
    }

    pub(super) fn emit(&mut self, ev: CmEvent) {
        if self.conns.get(&ev.id()).is_some_and(|c| !c.detached) {
            self.events.push_back(ev);
        }
    }

    pub(super) fn conn(&mut self, id: CommId) -> Result<&mut Conn, CmError> {
        self.conns.get_mut(&id).ok_or(CmError::NoSuchConnection(id))
    }

    /// Sends a REQ (`ib_send_cm_req`); the connection waits in `ReqSent`.
    pub fn connect(&mut self, now: Instant, p: &ConnectParams) -> Result<CommId, CmError> {
        let pd = fit::<REQ_PRIVATE_DATA_LEN>(&p.private_data)?;
        let id = self.new_conn(State::ReqSent, p.dgid, None);
        let req = ReqRepr {
            local_comm_id: id,
            service_id: p.service_id,
            local_ca_guid: self.cfg.ca_guid,
            local_qkey: 0,
            local_qpn: p.local_qpn,
            responder_resources: p.responder_resources,
            local_eecn: 0,
            initiator_depth: p.initiator_depth,
            remote_eecn: 0,
            remote_cm_response_timeout: p.remote_cm_response_timeout,
            transport_service_type: TRANSPORT_RC,
            end_to_end_flow_control: p.flow_control,
            starting_psn: p.starting_psn,
            local_cm_response_timeout: p.local_cm_response_timeout,
            retry_count: p.retry_count.min(7),
            partition_key: 0xffff,
            path_mtu: p.path_mtu,
            rdc_exists: false,
            rnr_retry_count: p.rnr_retry_count.min(7),
            max_cm_retries: p.max_cm_retries,
            srq: p.srq,
            extended_transport_type: 0,
            primary: PathRepr { local_ack_timeout: ack_timeout(self.cfg.ack_delay, p.packet_life_time), ..p.path },
            alternate: PathRepr::default(),
            sap_supported: false,
            private_data: pd,
        };
        let tid = self.form_tid(id);
        let mad = self.send(p.dgid, CmMessage::Req(Box::new(req)), tid);
        let c = self.conn(id)?;
        c.local_qpn = p.local_qpn;
        c.av_timeout = p.packet_life_time + 1;
        c.timeout = cm_time(p.packet_life_time) * 2 + cm_time(p.remote_cm_response_timeout);
        c.max_cm_retries = p.max_cm_retries;
        c.wait_for_answer(now, mad);
        Ok(id)
    }

    /// Sends a REP for a received REQ (`ib_send_cm_rep`); waits in `RepSent` for the RTU.
    pub fn accept(&mut self, now: Instant, id: CommId, p: &AcceptParams) -> Result<(), CmError> {
        let pd = fit::<REP_PRIVATE_DATA_LEN>(&p.private_data)?;
        let (ca_guid, ack_delay) = (self.cfg.ca_guid, self.cfg.ack_delay);
        let c = self.conn(id)?;
        expect(c.state, "accept", &[State::ReqRcvd, State::MraReqSent])?;
        let rep = RepRepr {
            local_comm_id: id,
            remote_comm_id: c.remote_comm_id,
            local_qkey: 0,
            local_qpn: p.local_qpn,
            local_eecn: 0,
            starting_psn: p.starting_psn,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            target_ack_delay: ack_delay,
            failover_accepted: 0,
            end_to_end_flow_control: p.flow_control,
            rnr_retry_count: p.rnr_retry_count.min(7),
            srq: p.srq,
            local_ca_guid: ca_guid,
            private_data: pd,
        };
        c.state = State::RepSent;
        c.local_qpn = p.local_qpn;
        let (dgid, tid) = (c.remote_gid, c.tid);
        let mad = self.send(dgid, CmMessage::Rep(Box::new(rep)), tid);
        self.conn(id)?.wait_for_answer(now, mad);
        Ok(())
    }

    /// Sends the RTU that completes an active connection (`ib_send_cm_rtu`).
    pub fn ready_to_use(&mut self, id: CommId, data: &[u8]) -> Result<(), CmError> {
        let pd = fit::<RTU_PRIVATE_DATA_LEN>(data)?;
        let c = self.conn(id)?;
        expect(c.state, "send an RTU on", &[State::RepRcvd, State::MraRepSent])?;
        c.state = State::Established;
        c.reply_data = data.to_vec();
        let rtu = RtuRepr { local_comm_id: id, remote_comm_id: c.remote_comm_id, private_data: pd };
        let (dgid, tid) = (c.remote_gid, c.tid);
        self.send(dgid, CmMessage::Rtu(Box::new(rtu)), tid);
        Ok(())
    }

    /// Acknowledges a REQ or REP whose answer will take a while
    /// (`ib_send_cm_mra`). With `delay`, nothing is sent until the peer
    /// repeats its message, as rdma_cm does while its consumer decides.
    pub fn mra(&mut self, id: CommId, service_timeout: u8, delay: bool, data: &[u8]) -> Result<(), CmError> {
        let pd = fit::<MRA_PRIVATE_DATA_LEN>(data)?;
        let c = self.conn(id)?;
        let (next, of) = match c.state {
            State::ReqRcvd => (State::MraReqSent, MsgResponse::Req),
            State::RepRcvd => (State::MraRepSent, MsgResponse::Rep),
            state => return Err(CmError::InvalidState { op: "send an MRA on", state }),
        };
        c.state = next;
        c.mra_timeout = service_timeout;
        c.reply_data = data.to_vec();
        if !delay {
            let mra = mra_repr(id, c, of, pd);
            let (dgid, tid) = (c.remote_gid, c.tid);
            self.send(dgid, CmMessage::Mra(Box::new(mra)), tid);
        }
        Ok(())
    }

    /// Rejects a connection being set up (`ib_send_cm_rej`).
    pub fn reject(
        &mut self,
        now: Instant,
        id: CommId,
        reason: RejReason,
        ari: &[u8],
        data: &[u8],
    ) -> Result<(), CmError> {
        let pd = fit::<REJ_PRIVATE_DATA_LEN>(data)?;
        let ari_bytes = fit::<REJ_ARI_LEN>(ari)?;
        let c = self.conn(id)?;
        let (local_comm_id, of) = match c.state {
            State::ReqRcvd => (0, MsgResponse::Req),
            State::MraReqSent => (id, MsgResponse::Req),
            State::RepRcvd | State::MraRepSent => (id, MsgResponse::Rep),
            State::ReqSent | State::MraReqRcvd | State::RepSent | State::MraRepRcvd => (id, MsgResponse::Other),
            state => return Err(CmError::InvalidState { op: "reject", state }),
        };
        let rej = RejRepr {
            local_comm_id,
            remote_comm_id: c.remote_comm_id,
            message_rejected: of,
            rejected_info_length: ari.len() as u8,
            reason,
            ari: ari_bytes,
            private_data: pd,
        };
        if matches!(c.state, State::RepSent | State::MraRepRcvd) {
            c.enter_timewait(now);
        } else {
            c.reset_to_idle();
        }
        let (dgid, tid) = (c.remote_gid, c.tid);
        self.send(dgid, CmMessage::Rej(Box::new(rej)), tid);
        Ok(())
    }

    /// Starts a disconnect (`ib_send_cm_dreq`): only from `Established`.
    pub fn send_dreq(&mut self, now: Instant, id: CommId, data: &[u8]) -> Result<(), CmError> {
        let pd = fit::<DREQ_PRIVATE_DATA_LEN>(data)?;
        let c = self.conn(id)?;
        expect(c.state, "send a DREQ on", &[State::Established])?;
        c.state = State::DreqSent;
        let dreq = DreqRepr {
            local_comm_id: id,
            remote_comm_id: c.remote_comm_id,
            remote_qpn: c.remote_qpn,
            private_data: pd,
        };
        let (dgid, tid) = (c.remote_gid, c.own_tid);
        let mad = self.send(dgid, CmMessage::Dreq(Box::new(dreq)), tid);
        self.conn(id)?.wait_for_answer(now, mad);
        Ok(())
    }

    /// Answers a received DREQ (`ib_send_cm_drep`) and enters timewait.
    pub fn send_drep(&mut self, now: Instant, id: CommId, data: &[u8]) -> Result<(), CmError> {
        let pd = fit::<DREP_PRIVATE_DATA_LEN>(data)?;
        let c = self.conn(id)?;
        expect(c.state, "send a DREP on", &[State::DreqRcvd])?;
        c.reply_data = data.to_vec();
        c.enter_timewait(now);
        let drep = DrepRepr { local_comm_id: id, remote_comm_id: c.remote_comm_id, private_data: pd };
        let (dgid, tid) = (c.remote_gid, c.tid);
        self.send(dgid, CmMessage::Drep(Box::new(drep)), tid);
        Ok(())
    }

    /// The consumer is gone (`ib_destroy_cm_id`): whatever the state, tell the
    /// peer (REJ, DREQ or DREP); the connection lingers through timewait to
    /// answer duplicates, silently.
    pub fn destroy(&mut self, now: Instant, id: CommId) {
        let Some(state) = self.state(id) else { return };
        let consumer = RejReason::CONSUMER_DEFINED;
        let guid = self.cfg.ca_guid.to_be_bytes();
        let _ = match state {
            State::ReqSent | State::MraReqRcvd => self.reject(now, id, RejReason::TIMEOUT, &guid, &[]),
            State::ReqRcvd
            | State::MraReqSent
            | State::RepSent
            | State::MraRepRcvd
            | State::RepRcvd
            | State::MraRepSent => self.reject(now, id, consumer, &[], &[]),
            State::Established => {
                // One DREQ, no retries: nobody waits for the answer.
                let r = self.send_dreq(now, id, &[]);
                if let Some(c) = self.conns.get_mut(&id) {
                    c.enter_timewait(now);
                }
                r
            }
            State::DreqSent => {
                if let Some(c) = self.conns.get_mut(&id) {
                    c.enter_timewait(now);
                }
                Ok(())
            }
            State::DreqRcvd => self.send_drep(now, id, &[]),
            State::SidrReqRcvd => self.sidr_refuse(now, id),
            State::SidrReqSent => {
                if let Some(c) = self.conns.get_mut(&id) {
                    c.reset_to_idle();
                }
                Ok(())
            }
            State::Idle | State::Timewait => Ok(()),
        };
        if let Some(c) = self.conns.get_mut(&id) {
            c.detached = true;
            if c.state == State::Idle {
                self.conns.remove(&id);
            }
        }
    }

    /// Retransmits requests whose answer is late; gives up after the retries
    /// (REQ/REP: back to idle; DREQ: timewait anyway); ends timewaits.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<CommId> =
            self.conns.iter().filter(|(_, c)| c.next_due().is_some_and(|t| t <= now)).map(|(id, _)| *id).collect();
        for id in due {
            self.retransmit_or_fail(now, id);
            self.end_timewait(now, id);
        }
    }

    fn retransmit_or_fail(&mut self, now: Instant, id: CommId) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        let Some(p) = c.pending.as_mut().filter(|p| p.due <= now) else { return };
        if p.retries_left > 0 {
            p.retries_left -= 1;
            p.due = now + c.timeout;
            let out = Outgoing { dgid: c.remote_gid, mad: p.mad };
            self.tx.push_back(out);
            return;
        }
        c.pending = None;
        let ev = match c.state {
            State::ReqSent | State::MraReqRcvd => {
                c.reset_to_idle();
                CmEvent::ReqError { id }
            }
            State::RepSent | State::MraRepRcvd => {
                c.reset_to_idle();
                CmEvent::RepError { id }
            }
            State::DreqSent => {
                c.enter_timewait(now);
                CmEvent::DreqError { id }
            }
            State::SidrReqSent => {
                c.reset_to_idle();
                CmEvent::SidrReqError { id }
            }
            _ => return,
        };
        self.emit(ev);
    }

    fn end_timewait(&mut self, now: Instant, id: CommId) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        match c.timewait_until {
            Some(t) if t <= now => {}
            _ => return,
        }
        c.timewait_until = None;
        if c.state != State::Timewait {
            return;
        }
        c.state = State::Idle;
        if c.detached {
            self.conns.remove(&id);
        } else {
            self.emit(CmEvent::TimewaitExit { id });
        }
    }
}

/// `data` as private data of `N` bytes, or the error that says it is too long.
pub(super) fn fit<const N: usize>(data: &[u8]) -> Result<[u8; N], CmError> {
    private_data::<N>(data).ok_or(CmError::PrivateDataTooLong { given: data.len(), max: N })
}

pub(super) fn expect(state: State, op: &'static str, allowed: &[State]) -> Result<(), CmError> {
    if allowed.contains(&state) {
        Ok(())
    } else {
        Err(CmError::InvalidState { op, state })
    }
}

pub(super) fn mra_repr(id: CommId, c: &Conn, of: MsgResponse, pd: [u8; MRA_PRIVATE_DATA_LEN]) -> MraRepr {
    MraRepr {
        local_comm_id: id,
        remote_comm_id: c.remote_comm_id,
        message_mraed: of,
        service_timeout: c.mra_timeout,
        private_data: pd,
    }
}
