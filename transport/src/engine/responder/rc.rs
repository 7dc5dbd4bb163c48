//! The RC responder: strict PSN order, one NAK per sequence error, duplicates
//! answered again, errors NAKed (the responder then goes to ERR, as rxe).

use super::{check_rkey, InMessage, Resource, ResourceKind, Response};
use crate::engine::memory::AtomicOp;
use crate::engine::qp::Qp;
use crate::engine::status::WcStatus;
use crate::engine::wr::{AccessFlags, WcFlags, WcOpcode, WorkCompletion};
use crate::engine::{Counter, EngineState, Event, MAX_MSG_SZ as MAX_MSG};
use crate::wire::{AethSyndrome, NakCode, Opcode, Position, RethRepr, RoceRepr};
use crate::Psn;

/// What a request opcode asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Send(Position),
    Write(Position),
    Read,
    Atomic,
    AtomicWrite,
    Flush,
    /// Anything else: RD opcodes, reserved ones, responses.
    Unsupported,
}

pub(super) fn kind(op: Opcode) -> Kind {
    use Opcode::*;
    let pos = op.position().unwrap_or(Position::Only);
    match op {
        RcSendFirst | RcSendMiddle | RcSendLast | RcSendLastWithImm | RcSendOnly | RcSendOnlyWithImm
        | RcSendLastWithInv | RcSendOnlyWithInv | UcSendFirst | UcSendMiddle | UcSendLast | UcSendLastWithImm
        | UcSendOnly | UcSendOnlyWithImm => Kind::Send(pos),
        RcWriteFirst | RcWriteMiddle | RcWriteLast | RcWriteLastWithImm | RcWriteOnly | RcWriteOnlyWithImm
        | UcWriteFirst | UcWriteMiddle | UcWriteLast | UcWriteLastWithImm | UcWriteOnly | UcWriteOnlyWithImm => {
            Kind::Write(pos)
        }
        RcReadRequest => Kind::Read,
        RcCompareSwap | RcFetchAdd => Kind::Atomic,
        RcAtomicWrite => Kind::AtomicWrite,
        RcFlush => Kind::Flush,
        _ => Kind::Unsupported,
    }
}

/// Whether `k` may come now, given the message in progress.
pub(super) fn in_sequence(msg: &InMessage, k: Kind) -> bool {
    let continues = |p: Position| matches!(p, Position::Middle | Position::Last);
    match (msg, k) {
        (InMessage::Send { .. }, Kind::Send(p)) => continues(p),
        (InMessage::Write { .. }, Kind::Write(p)) => continues(p),
        (InMessage::Idle, Kind::Send(p) | Kind::Write(p)) => !continues(p),
        (InMessage::Idle, Kind::Read | Kind::Atomic | Kind::AtomicWrite | Kind::Flush) => true,
        _ => false,
    }
}

/// A failed request: NAK it, fail the receive in progress, go to ERR.
fn fatal(qp: &mut Qp, sh: &mut EngineState, psn: Psn, code: NakCode, recv_status: WcStatus) {
    if code == NakCode::RemoteAccessError {
        sh.counters.inc(Counter::RkeyViolation);
    }
    qp.resp.queue_nak(psn, AethSyndrome::Nak(code));
    if let Some(wr) = qp.resp.take_message_recv() {
        qp.complete_recv_error(sh, &wr, recv_status);
    }
    let qpn = qp.qpn;
    sh.events.push_back(match code {
        NakCode::RemoteAccessError => Event::QpAccessError { qpn },
        _ => Event::QpRequestError { qpn },
    });
    qp.enter_error(sh);
}

pub(super) fn on_request(qp: &mut Qp, sh: &mut EngineState, repr: &RoceRepr, payload: &[u8]) {
    let psn = repr.bth.psn;
    let d = psn - qp.resp.psn;
    if d > 0 {
        // Counted once per NAK, as rxe does.
        if !qp.resp.nak_sent {
            sh.counters.inc(Counter::OutOfSeqRequest);
            qp.resp.nak_sent = true;
            let expected = qp.resp.psn;
            qp.resp.queue_nak(expected, AethSyndrome::Nak(NakCode::PsnSequenceError));
        }
        return;
    }
    let k = kind(repr.bth.opcode);
    if d < 0 {
        sh.counters.inc(Counter::DuplicateRequest);
        duplicate(qp, sh, k, repr);
        return;
    }
    qp.resp.nak_sent = false;
    let allowed = match k {
        Kind::Write(_) | Kind::AtomicWrite => AccessFlags::REMOTE_WRITE,
        Kind::Read => AccessFlags::REMOTE_READ,
        Kind::Atomic => AccessFlags::REMOTE_ATOMIC,
        Kind::Flush => flush_access(repr),
        _ => AccessFlags::EMPTY,
    };
    // rxe answers an operation the QP does not enable as an invalid request.
    if k == Kind::Unsupported || !in_sequence(&qp.resp.msg, k) || !qp.attr.qp_access_flags.contains(allowed) {
        fatal(qp, sh, psn, NakCode::InvalidRequest, WcStatus::RemInvReqErr);
        return;
    }
    if matches!(k, Kind::Read | Kind::Atomic | Kind::AtomicWrite | Kind::Flush) && !rd_atomic_allowed(qp, sh) {
        fatal(qp, sh, psn, NakCode::InvalidRequest, WcStatus::RemInvReqErr);
        return;
    }
    match k {
        Kind::Send(pos) => send(qp, sh, repr, pos, payload),
        Kind::Write(pos) => write(qp, sh, repr, pos, payload),
        Kind::Read => read(qp, sh, repr),
        Kind::Atomic => atomic(qp, sh, repr),
        Kind::AtomicWrite => atomic_write(qp, sh, repr, payload),
        Kind::Flush => flush(qp, sh, repr),
        Kind::Unsupported => {}
    }
}

/// Whether a new READ or atomic may be executed: at most
/// `max_dest_rd_atomic` are answered at once (IBTA C9-150: beyond the
/// responder's resources the request is NAKed as invalid). rxe recycles its
/// resources instead, so a peer could queue READ responses without bound;
/// here the queue never holds more than `max_dest_rd_atomic` of them. A
/// requester within its `max_rd_atomic` (at most ours, as rdma_cm and
/// perftest negotiate it) never meets the limit: a READ it still waits for
/// is all a queued answer can be.
fn rd_atomic_allowed(qp: &Qp, sh: &mut EngineState) -> bool {
    let max = usize::from(qp.attr.max_dest_rd_atomic);
    if max > 0 && qp.resp.outstanding_rd_atomic() >= max {
        sh.counters.inc(Counter::RdAtomicRefused);
        return false;
    }
    true
}

/// The access a FLUSH needs, of the QP and of the region: one flag per
/// placement type it asks for (rxe's check).
fn flush_access(repr: &RoceRepr) -> AccessFlags {
    let placement = repr.feth.map_or(0, |f| f.placement);
    let mut need = AccessFlags::EMPTY;
    if placement & 1 != 0 {
        need |= AccessFlags::FLUSH_GLOBAL;
    }
    if placement & 2 != 0 {
        need |= AccessFlags::FLUSH_PERSISTENT;
    }
    need
}

/// A request already executed: ACK again, or replay the READ / atomic result.
fn duplicate(qp: &mut Qp, sh: &mut EngineState, k: Kind, repr: &RoceRepr) {
    let psn = repr.bth.psn;
    match k {
        Kind::Send(_) | Kind::Write(_) => {
            let last = qp.resp.psn - 1;
            qp.resp.queue_ack(sh, last);
        }
        Kind::Read => {
            if let Some(res @ Resource { kind: ResourceKind::Read { reth }, .. }) = qp.resp.find_resource(psn) {
                // As rxe: the retried request must ask for the same bytes
                // under the same key, or a part of them; else it is dropped.
                let Some(again) = repr.reth else { return };
                let end = |r: RethRepr| r.va.checked_add(u64::from(r.dma_len));
                let inside = again.va >= reth.va && end(again).is_some() && end(again) <= end(reth);
                if again.rkey != reth.rkey || !inside {
                    return;
                }
                // A newer request for the same data replaces one not yet sent.
                qp.resp
                    .responses
                    .retain(|r| !matches!(r, Response::Read { res: o, .. } if o.first_psn == res.first_psn));
                qp.resp.responses.push_back(Response::Read { res, start: psn, next: psn, replay: true });
            }
        }
        Kind::Atomic => {
            if let Some(Resource { kind: ResourceKind::Atomic { orig }, msn, first_psn, .. }) =
                qp.resp.find_resource(psn)
            {
                if first_psn == psn {
                    qp.resp.responses.push_back(Response::Atomic { psn, msn, orig, replay: true });
                }
            }
        }
        Kind::AtomicWrite | Kind::Flush => {
            // Answered again, never executed again (oA19-14, oA19-15).
            if let Some(Resource { kind: ResourceKind::Placed, msn, first_psn, .. }) = qp.resp.find_resource(psn) {
                if first_psn == psn {
                    qp.resp.responses.push_back(Response::Placed { psn, msn, replay: true });
                }
            }
        }
        Kind::Unsupported => {}
    }
}

/// After an accepted packet: advance, count the message, ACK when asked.
fn accepted(qp: &mut Qp, sh: &mut EngineState, psn: Psn, ends_message: bool, ack_req: bool) {
    qp.resp.psn = psn.next();
    if ends_message {
        qp.resp.next_msn();
    }
    if ack_req {
        qp.resp.queue_ack(sh, psn);
    }
}

fn rnr_nak(qp: &mut Qp, sh: &mut EngineState, psn: Psn) {
    sh.counters.inc(Counter::SendRnrErr);
    qp.resp.queue_nak(psn, AethSyndrome::RnrNak { timer: qp.attr.min_rnr_timer });
}

fn send(qp: &mut Qp, sh: &mut EngineState, repr: &RoceRepr, pos: Position, payload: &[u8]) {
    let psn = repr.bth.psn;
    let mtu = qp.mtu(sh.port_mtu) as usize;
    let full = matches!(pos, Position::First | Position::Middle);
    // A LAST packet carries at least one byte (C9-... as rxe's length check).
    let empty_last = pos == Position::Last && payload.is_empty();
    if (full && payload.len() != mtu) || payload.len() > mtu || empty_last {
        fatal(qp, sh, psn, NakCode::InvalidRequest, WcStatus::RemInvReqErr);
        return;
    }
    if matches!(pos, Position::First | Position::Only) {
        let Some(wr) = qp.take_recv(sh) else {
            rnr_nak(qp, sh, psn);
            return;
        };
        qp.resp.msg = InMessage::Send { wr, offset: 0 };
    }
    let pd = qp.recv_pd(sh);
    let InMessage::Send { wr, offset } = &mut qp.resp.msg else { unreachable!("in_sequence checked") };
    if let Err(status) = sh.mrs.scatter(pd, &wr.sg_list, u64::from(*offset), payload) {
        let code = match status {
            WcStatus::LocLenErr => NakCode::InvalidRequest,
            _ => NakCode::RemoteOperationalError,
        };
        fatal(qp, sh, psn, code, status);
        return;
    }
    *offset += payload.len() as u32;
    let last = matches!(pos, Position::Last | Position::Only);
    if last {
        let InMessage::Send { wr, offset } = core::mem::take(&mut qp.resp.msg) else { unreachable!() };
        if let Some(ieth) = repr.ieth {
            if !sh.mrs.invalidate(ieth.rkey, qp.accessor(), true) {
                // Not a key of this PD that may be invalidated remotely:
                // refused, and the region it names stays usable. rxe's
                // class J: the receive fails, the QP goes to ERR, the
                // requester gets an invalid request NAK.
                sh.counters.inc(Counter::RemoteInvRefused);
                qp.complete_recv_error(sh, &wr, WcStatus::RemInvReqErr);
                fatal(qp, sh, psn, NakCode::InvalidRequest, WcStatus::RemInvReqErr);
                return;
            }
        }
        let mut wc = WorkCompletion::new(wr.wr_id, WcStatus::Success, WcOpcode::Recv, qp.qpn);
        wc.byte_len = offset;
        if let Some(imm) = repr.immdt {
            wc.imm_data = imm.imm;
            wc.wc_flags |= WcFlags::WITH_IMM;
        }
        if let Some(ieth) = repr.ieth {
            wc.imm_data = ieth.rkey;
            wc.wc_flags |= WcFlags::WITH_INV;
        }
        sh.complete(qp.init.recv_cq, wc);
    }
    accepted(qp, sh, psn, last, repr.bth.ack_req);
}

fn write(qp: &mut Qp, sh: &mut EngineState, repr: &RoceRepr, pos: Position, payload: &[u8]) {
    let psn = repr.bth.psn;
    let mtu = qp.mtu(sh.port_mtu) as usize;
    if matches!(pos, Position::First | Position::Only) {
        let Some(reth) = repr.reth else { return };
        if reth.dma_len > MAX_MSG {
            fatal(qp, sh, psn, NakCode::InvalidRequest, WcStatus::RemInvReqErr);
            return;
        }
        if check_rkey(qp, sh, reth.rkey, reth.va, reth.dma_len.into(), AccessFlags::REMOTE_WRITE).is_err() {
            fatal(qp, sh, psn, NakCode::RemoteAccessError, WcStatus::RemAccessErr);
            return;
        }
        qp.resp.msg = InMessage::Write { reth, offset: 0 };
    }
    let InMessage::Write { reth, offset } = qp.resp.msg else { unreachable!("in_sequence checked") };
    let left = (reth.dma_len - offset) as usize;
    let last = matches!(pos, Position::Last | Position::Only);
    let bad_len = if last { payload.len() != left } else { payload.len() != mtu || left <= mtu };
    if bad_len || payload.len() > mtu {
        fatal(qp, sh, psn, NakCode::InvalidRequest, WcStatus::RemInvReqErr);
        return;
    }
    let with_imm = repr.immdt.is_some();
    if with_imm && !qp.has_recv(sh) {
        // The data of this packet lands when the retry comes.
        rnr_nak(qp, sh, psn);
        if pos == Position::Only {
            qp.resp.msg = InMessage::Idle;
        }
        return;
    }
    if !payload.is_empty()
        && sh.mrs.write_remote(reth.rkey, qp.accessor(), reth.va + u64::from(offset), payload).is_err()
    {
        // Deregistered or re-registered since the message's first packet.
        fatal(qp, sh, psn, NakCode::RemoteAccessError, WcStatus::RemAccessErr);
        return;
    }
    qp.resp.msg = if last { InMessage::Idle } else { InMessage::Write { reth, offset: offset + payload.len() as u32 } };
    if let (true, Some(imm)) = (last, repr.immdt) {
        let wr = qp.take_recv(sh).expect("checked above");
        let mut wc = WorkCompletion::new(wr.wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm, qp.qpn);
        wc.byte_len = reth.dma_len;
        wc.imm_data = imm.imm;
        wc.wc_flags = WcFlags::WITH_IMM;
        sh.complete(qp.init.recv_cq, wc);
    }
    accepted(qp, sh, psn, last, repr.bth.ack_req);
}

fn read(qp: &mut Qp, sh: &mut EngineState, repr: &RoceRepr) {
    let psn = repr.bth.psn;
    let Some(reth) = repr.reth else { return };
    if qp.attr.max_dest_rd_atomic == 0 || reth.dma_len > MAX_MSG {
        fatal(qp, sh, psn, NakCode::InvalidRequest, WcStatus::RemInvReqErr);
        return;
    }
    if check_rkey(qp, sh, reth.rkey, reth.va, reth.dma_len.into(), AccessFlags::REMOTE_READ).is_err() {
        fatal(qp, sh, psn, NakCode::RemoteAccessError, WcStatus::RemAccessErr);
        return;
    }
    let npkts = reth.dma_len.div_ceil(qp.mtu(sh.port_mtu)).max(1);
    let msn = qp.resp.next_msn();
    let res = Resource { first_psn: psn, last_psn: psn + (npkts - 1), msn, kind: ResourceKind::Read { reth } };
    qp.resp.add_resource(res, qp.attr.max_dest_rd_atomic);
    qp.resp.responses.push_back(Response::Read { res, start: psn, next: psn, replay: false });
    qp.resp.psn = psn + npkts;
}

fn atomic(qp: &mut Qp, sh: &mut EngineState, repr: &RoceRepr) {
    let psn = repr.bth.psn;
    let Some(a) = repr.atomic_eth else { return };
    if qp.attr.max_dest_rd_atomic == 0 || a.va % 8 != 0 {
        fatal(qp, sh, psn, NakCode::InvalidRequest, WcStatus::RemInvReqErr);
        return;
    }
    let Ok(Some(target)) = check_rkey(qp, sh, a.rkey, a.va, 8, AccessFlags::REMOTE_ATOMIC) else {
        fatal(qp, sh, psn, NakCode::RemoteAccessError, WcStatus::RemAccessErr);
        return;
    };
    let op = match repr.bth.opcode {
        Opcode::RcCompareSwap => AtomicOp::CompareSwap { compare: a.compare, swap: a.swap_add },
        _ => AtomicOp::FetchAdd { add: a.swap_add },
    };
    let orig = sh.mrs.atomic_remote(target, op);
    let msn = qp.resp.next_msn();
    let res = Resource { first_psn: psn, last_psn: psn, msn, kind: ResourceKind::Atomic { orig } };
    qp.resp.add_resource(res, qp.attr.max_dest_rd_atomic);
    qp.resp.responses.push_back(Response::Atomic { psn, msn, orig, replay: false });
    qp.resp.psn = psn.next();
}

/// ATOMIC_WRITE: 8 bytes, 8-byte aligned, written at once under an rkey with
/// remote write. Answered by an empty READ RESPONSE ONLY.
fn atomic_write(qp: &mut Qp, sh: &mut EngineState, repr: &RoceRepr, payload: &[u8]) {
    let psn = repr.bth.psn;
    let Some(reth) = repr.reth else { return };
    if qp.attr.max_dest_rd_atomic == 0 || reth.dma_len != 8 || payload.len() != 8 || reth.va % 8 != 0 {
        fatal(qp, sh, psn, NakCode::InvalidRequest, WcStatus::RemInvReqErr);
        return;
    }
    let Ok(Some(target)) = check_rkey(qp, sh, reth.rkey, reth.va, 8, AccessFlags::REMOTE_WRITE) else {
        fatal(qp, sh, psn, NakCode::RemoteAccessError, WcStatus::RemAccessErr);
        return;
    };
    let bytes: [u8; 8] = payload.try_into().expect("length checked above");
    sh.mrs.atomic_store_remote(target, bytes);
    placed(qp, psn);
}

/// FLUSH: the range (or the whole region) must be reachable under the rkey
/// with the flush access for each placement type asked. The engine's stores
/// are already visible to whoever reads the region, so nothing else is done;
/// persistence is the storage's business. Answered by an empty READ
/// RESPONSE ONLY.
fn flush(qp: &mut Qp, sh: &mut EngineState, repr: &RoceRepr) {
    let psn = repr.bth.psn;
    let (Some(feth), Some(reth)) = (repr.feth, repr.reth) else { return };
    // Reserved selectivity levels and placement types are invalid requests.
    if qp.attr.max_dest_rd_atomic == 0 || feth.selectivity > 1 || feth.placement & !3 != 0 {
        fatal(qp, sh, psn, NakCode::InvalidRequest, WcStatus::RemInvReqErr);
        return;
    }
    let need = flush_access(repr);
    let ok = if feth.selectivity == 1 {
        // The whole region (or window): only the key and its rights matter.
        sh.mrs.check_whole(reth.rkey, qp.accessor(), need)
    } else {
        sh.mrs.check_remote(reth.rkey, qp.accessor(), reth.va, reth.dma_len.into(), need).is_ok()
    };
    if !ok {
        fatal(qp, sh, psn, NakCode::RemoteAccessError, WcStatus::RemAccessErr);
        return;
    }
    placed(qp, psn);
}

/// Records an executed ATOMIC_WRITE or FLUSH and queues its answer.
fn placed(qp: &mut Qp, psn: Psn) {
    let msn = qp.resp.next_msn();
    let res = Resource { first_psn: psn, last_psn: psn, msn, kind: ResourceKind::Placed };
    qp.resp.add_resource(res, qp.attr.max_dest_rd_atomic);
    qp.resp.responses.push_back(Response::Placed { psn, msn, replay: false });
    qp.resp.psn = psn.next();
}
