//! The responder: executes requests (SEND into receive WRs, WRITE, READ,
//! atomics, ATOMIC_WRITE, FLUSH), checks PSN order, keys and lengths, and
//! queues responses:
//! coalesced ACKs with the MSN, NAKs, RNR NAKs, READ responses and atomic
//! ACKs. READ and atomic results stay in `max_dest_rd_atomic` resources so
//! that a duplicate request is answered again, and an atomic never runs twice.

mod rc;
mod uc;
mod ud;

use super::attr::{QpState, QpType};
use super::emit::headers;
use super::memory::{AccessError, Target};
use super::qp::Qp;
use super::wr::{AccessFlags, RecvWr};
use super::{EngineState, RxMeta, Transmit};
use crate::wire::{AethRepr, AethSyndrome, AtomicAckEthRepr, BthRepr, NakCode, Opcode, RethRepr, RoceRepr};
use crate::Psn;
use std::collections::VecDeque;

/// The message a responder is in the middle of.
#[derive(Debug, Default)]
pub(crate) enum InMessage {
    #[default]
    Idle,
    /// A SEND: the receive WR it fills and the bytes so far.
    Send { wr: RecvWr, offset: u32 },
    /// A WRITE: where it goes and the bytes so far.
    Write { reth: RethRepr, offset: u32 },
}

/// A READ or atomic the responder executed, kept to answer duplicates.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resource {
    pub first_psn: Psn,
    pub last_psn: Psn,
    pub msn: u32,
    pub kind: ResourceKind,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum ResourceKind {
    Read {
        reth: RethRepr,
    },
    Atomic {
        orig: u64,
    },
    /// An ATOMIC_WRITE or FLUSH: done; a duplicate is only answered again.
    Placed,
}

/// A response waiting for `poll_transmit`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Response {
    Ack {
        psn: Psn,
        msn: u32,
        syndrome: AethSyndrome,
    },
    Atomic {
        psn: Psn,
        msn: u32,
        orig: u64,
        replay: bool,
    },
    /// The answer to an ATOMIC_WRITE or FLUSH: a READ RESPONSE ONLY
    /// without data (IBTA 1.5; what rxe sends).
    Placed {
        psn: Psn,
        msn: u32,
        replay: bool,
    },
    /// READ responses for `res`, from `next` to `res.last_psn`; positions
    /// count from `start`, the PSN of the request being answered.
    Read {
        res: Resource,
        start: Psn,
        next: Psn,
        /// The answer to a duplicate request (not a new one).
        replay: bool,
    },
}

impl Response {
    /// The answer to a new READ, atomic, ATOMIC_WRITE or FLUSH: the requester
    /// counts it against its `max_rd_atomic` until it has all of it.
    fn is_outstanding_rd_atomic(&self) -> bool {
        matches!(
            self,
            Response::Read { replay: false, .. }
                | Response::Atomic { replay: false, .. }
                | Response::Placed { replay: false, .. }
        )
    }
}

#[derive(Debug, Default)]
pub(crate) struct Responder {
    /// The PSN expected next.
    pub psn: Psn,
    /// Messages completed, 24 bits.
    pub msn: u32,
    /// A PSN sequence NAK was sent and the expected PSN has not come since.
    pub nak_sent: bool,
    pub msg: InMessage,
    pub resources: VecDeque<Resource>,
    pub responses: VecDeque<Response>,
    /// UC: drop packets until the next FIRST or ONLY.
    pub drop_msg: bool,
    /// UC: WRITEs refused for their R_Key, range or rights so far.
    pub uc_rkey_violations: u32,
}

impl Responder {
    /// The receive WR of a SEND in progress, taken out (to flush it).
    pub fn take_message_recv(&mut self) -> Option<RecvWr> {
        match core::mem::take(&mut self.msg) {
            InMessage::Send { wr, .. } => Some(wr),
            _ => None,
        }
    }

    pub fn next_msn(&mut self) -> u32 {
        self.msn = (self.msn + 1) & Psn::MASK;
        self.msn
    }

    /// Queues an ACK, replacing an ACK still waiting behind it (coalescing).
    pub fn queue_ack(&mut self, sh: &mut EngineState, psn: Psn) {
        let ack = Response::Ack { psn, msn: self.msn, syndrome: AethSyndrome::Ack { credits: 0x1f } };
        if let Some(back @ Response::Ack { syndrome: AethSyndrome::Ack { .. }, .. }) = self.responses.back_mut() {
            *back = ack;
            sh.counters.inc(super::Counter::AckDeferred);
            return;
        }
        self.responses.push_back(ack);
    }

    pub fn queue_nak(&mut self, psn: Psn, syndrome: AethSyndrome) {
        self.responses.push_back(Response::Ack { psn, msn: self.msn, syndrome });
    }

    /// Keeps `res`, forgetting the oldest beyond `max` resources.
    pub fn add_resource(&mut self, res: Resource, max: u8) {
        while self.resources.len() >= usize::from(max.max(1)) {
            self.resources.pop_front();
        }
        self.resources.push_back(res);
    }

    /// How many READ and atomic requests are being answered: a new one
    /// beyond `max_dest_rd_atomic` means the requester broke its limit.
    pub fn outstanding_rd_atomic(&self) -> usize {
        self.responses.iter().filter(|r| r.is_outstanding_rd_atomic()).count()
    }

    pub fn find_resource(&self, psn: Psn) -> Option<Resource> {
        self.resources.iter().rev().find(|r| psn - r.first_psn >= 0 && r.last_psn - psn >= 0).copied()
    }
}

/// Dispatches a request by the QP's transport.
pub(crate) fn on_request(qp: &mut Qp, sh: &mut EngineState, meta: &RxMeta, repr: &RoceRepr, payload: &[u8]) {
    let accepting = match qp.qp_type() {
        QpType::Rc => matches!(qp.state(), QpState::Rtr | QpState::Rts | QpState::Sqd),
        QpType::Uc | QpType::Ud => matches!(qp.state(), QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe),
    };
    if !accepting {
        return sh.counters.inc(super::Counter::RcvdQpNotReady);
    }
    match qp.qp_type() {
        QpType::Rc => rc::on_request(qp, sh, repr, payload),
        QpType::Uc => uc::on_request(qp, sh, repr, payload),
        QpType::Ud => ud::on_request(qp, sh, meta, repr, payload),
    }
}

/// Checks remote access to `len` bytes at `va` under `rkey` (a region's or
/// a memory window's): where it lands. A zero-length access needs no key
/// (IBTA 9.4.4: the R_Key is not checked) and lands nowhere.
pub(crate) fn check_rkey(
    qp: &Qp,
    sh: &EngineState,
    rkey: u32,
    va: u64,
    len: u64,
    need: AccessFlags,
) -> Result<Option<Target>, AccessError> {
    if len == 0 {
        return Ok(None);
    }
    sh.mrs.check_remote(rkey, qp.accessor(), va, len, need).map(Some)
}

/// Writes the next queued response of `qp` into `buf` if it is not a READ
/// response (`Engine::poll_owed_ack`).
pub(crate) fn poll_owed_ack(qp: &mut Qp, sh: &mut EngineState, buf: &mut [u8]) -> Option<Transmit> {
    match qp.resp.responses.front()? {
        Response::Read { .. } => None,
        _ => poll_response(qp, sh, buf),
    }
}

/// Writes the next queued response of `qp` into `buf`.
pub(crate) fn poll_response(qp: &mut Qp, sh: &mut EngineState, buf: &mut [u8]) -> Option<Transmit> {
    if qp.qp_type() != QpType::Rc || qp.state() == QpState::Reset {
        return None;
    }
    let resp = *qp.resp.responses.front()?;
    let ack_only = matches!(resp, Response::Ack { .. });
    let len = match resp {
        Response::Ack { psn, msn, syndrome } => {
            qp.resp.responses.pop_front();
            emit_ack(qp, buf, Opcode::RcAck, psn, AethRepr { syndrome, msn }, None)
        }
        Response::Atomic { psn, msn, orig, .. } => {
            qp.resp.responses.pop_front();
            let aeth = AethRepr { syndrome: AethSyndrome::Ack { credits: 0x1f }, msn };
            emit_ack(qp, buf, Opcode::RcAtomicAck, psn, aeth, Some(AtomicAckEthRepr { orig_data: orig }))
        }
        Response::Placed { psn, msn, .. } => {
            qp.resp.responses.pop_front();
            let aeth = AethRepr { syndrome: AethSyndrome::Ack { credits: 0x1f }, msn };
            emit_ack(qp, buf, Opcode::RcReadResponseOnly, psn, aeth, None)
        }
        Response::Read { res, start, next, .. } => emit_read_response(qp, sh, buf, res, start, next),
    };
    Some(Transmit { len, dest_gid: qp.attr.ah_attr.dgid, src_port: qp.sport, qpn: qp.qpn, ack_only })
}

fn emit_ack(qp: &Qp, buf: &mut [u8], op: Opcode, psn: Psn, aeth: AethRepr, atomic: Option<AtomicAckEthRepr>) -> usize {
    let mut repr = RoceRepr::new(BthRepr::new(op, qp.attr.dest_qp_num, psn));
    repr.aeth = Some(aeth);
    repr.atomic_ack_eth = atomic;
    headers(buf, &repr, 0).0
}

/// One READ response packet; the data is read from memory now, so a region
/// deregistered since the request turns into a remote access NAK.
fn emit_read_response(
    qp: &mut Qp,
    sh: &mut EngineState,
    buf: &mut [u8],
    res: Resource,
    start: Psn,
    next: Psn,
) -> usize {
    let ResourceKind::Read { reth } = res.kind else { unreachable!("read responses only for reads") };
    let mtu = qp.mtu(sh.port_mtu);
    let offset = (next - res.first_psn) as u32 * mtu;
    let n = (reth.dma_len - offset).min(mtu);
    let va = reth.va + u64::from(offset);
    let Ok(target) = check_rkey(qp, sh, reth.rkey, va, n.into(), AccessFlags::REMOTE_READ) else {
        qp.resp.responses.pop_front();
        let aeth = AethRepr { syndrome: AethSyndrome::Nak(NakCode::RemoteAccessError), msn: res.msn };
        return emit_ack(qp, buf, Opcode::RcAck, next, aeth, None);
    };
    let total = (res.last_psn - start) as u32 + 1;
    let op = match super::emit::position((next - start) as u32, total) {
        crate::wire::Position::Only => Opcode::RcReadResponseOnly,
        crate::wire::Position::First => Opcode::RcReadResponseFirst,
        crate::wire::Position::Middle => Opcode::RcReadResponseMiddle,
        crate::wire::Position::Last => Opcode::RcReadResponseLast,
    };
    let mut repr = RoceRepr::new(BthRepr::new(op, qp.attr.dest_qp_num, next));
    if op != Opcode::RcReadResponseMiddle {
        repr.aeth = Some(AethRepr { syndrome: AethSyndrome::Ack { credits: 0x1f }, msn: res.msn });
    }
    let (len, data) = headers(buf, &repr, n as usize);
    if let Some(at) = target {
        sh.mrs.read_remote(at, &mut buf[data]);
    }
    if next == res.last_psn {
        qp.resp.responses.pop_front();
    } else if let Some(Response::Read { next: n, .. }) = qp.resp.responses.front_mut() {
        *n = next.next();
    }
    len
}
