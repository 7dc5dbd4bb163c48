//! The UC responder: no ACKs, no NAKs. A gap in PSNs or any error drops the
//! rest of the message; the next FIRST or ONLY starts afresh. A receive WR
//! taken by a dropped SEND serves the next message (as rxe).

use super::rc::{in_sequence, kind, Kind};
use super::{check_rkey, InMessage};
use crate::engine::qp::Qp;
use crate::engine::status::WcStatus;
use crate::engine::wr::{AccessFlags, WcFlags, WcOpcode, WorkCompletion};
use crate::engine::{Counter, EngineState, Event, UC_RKEY_VIOLATION_LIMIT};
use crate::wire::{Position, RoceRepr};

pub(super) fn on_request(qp: &mut Qp, sh: &mut EngineState, repr: &RoceRepr, payload: &[u8]) {
    let psn = repr.bth.psn;
    // No counter: rxe counts out-of-sequence requests of RC only.
    if psn != qp.resp.psn {
        drop_message(qp, sh);
    }
    qp.resp.psn = psn.next();
    let k = kind(repr.bth.opcode);
    let starts =
        matches!(k, Kind::Send(Position::First | Position::Only) | Kind::Write(Position::First | Position::Only));
    if starts {
        drop_message(qp, sh);
        qp.resp.drop_msg = false;
    }
    if qp.resp.drop_msg || !in_sequence(&qp.resp.msg, k) {
        drop_message(qp, sh);
        return;
    }
    let mtu = qp.mtu(sh.port_mtu) as usize;
    let full =
        matches!(k, Kind::Send(Position::First | Position::Middle) | Kind::Write(Position::First | Position::Middle));
    let empty_last = matches!(k, Kind::Send(Position::Last) | Kind::Write(Position::Last)) && payload.is_empty();
    if payload.len() > mtu || (full && payload.len() != mtu) || empty_last {
        drop_message(qp, sh);
        return;
    }
    match k {
        Kind::Send(pos) => send(qp, sh, repr, pos, payload),
        Kind::Write(pos) => write(qp, sh, repr, pos, payload),
        _ => drop_message(qp, sh),
    }
}

/// A WRITE refused for its key. UC has no NAK to tell the sender (IBTA:
/// silently dropped), so a peer could guess keys forever, each guess one
/// packet: every refusal is counted, and past
/// [`UC_RKEY_VIOLATION_LIMIT`] the QP goes to ERR with an access error
/// event, as an RC QP does at the first.
fn rkey_violation(qp: &mut Qp, sh: &mut EngineState) {
    sh.counters.inc(Counter::RkeyViolation);
    qp.resp.uc_rkey_violations += 1;
    if qp.resp.uc_rkey_violations > UC_RKEY_VIOLATION_LIMIT {
        sh.counters.inc(Counter::UcRkeyLimit);
        sh.events.push_back(Event::QpAccessError { qpn: qp.qpn });
        qp.enter_error(sh);
    }
}

/// Abandons the message in progress; its receive WR goes back to the queue.
fn drop_message(qp: &mut Qp, sh: &mut EngineState) {
    qp.resp.drop_msg = true;
    if let Some(wr) = qp.resp.take_message_recv() {
        qp.untake_recv(sh, wr);
    }
}

fn send(qp: &mut Qp, sh: &mut EngineState, repr: &RoceRepr, pos: Position, payload: &[u8]) {
    if matches!(pos, Position::First | Position::Only) {
        let Some(wr) = qp.take_recv(sh) else {
            qp.resp.drop_msg = true;
            return sh.counters.inc(Counter::RcvdNoRecv);
        };
        qp.resp.msg = InMessage::Send { wr, offset: 0 };
    }
    let pd = qp.recv_pd(sh);
    let InMessage::Send { wr, offset } = &mut qp.resp.msg else { return };
    if let Err(status) = sh.mrs.scatter(pd, &wr.sg_list, u64::from(*offset), payload) {
        if let Some(wr) = qp.resp.take_message_recv() {
            qp.complete_recv_error(sh, &wr, status);
        }
        qp.resp.drop_msg = true;
        return;
    }
    *offset += payload.len() as u32;
    if matches!(pos, Position::Last | Position::Only) {
        let InMessage::Send { wr, offset } = core::mem::take(&mut qp.resp.msg) else { return };
        let mut wc = WorkCompletion::new(wr.wr_id, WcStatus::Success, WcOpcode::Recv, qp.qpn);
        wc.byte_len = offset;
        if let Some(imm) = repr.immdt {
            wc.imm_data = imm.imm;
            wc.wc_flags = WcFlags::WITH_IMM;
        }
        sh.complete(qp.init.recv_cq, wc);
        qp.resp.next_msn();
    }
}

fn write(qp: &mut Qp, sh: &mut EngineState, repr: &RoceRepr, pos: Position, payload: &[u8]) {
    if matches!(pos, Position::First | Position::Only) {
        let Some(reth) = repr.reth else { return };
        if check_rkey(qp, sh, reth.rkey, reth.va, reth.dma_len.into(), AccessFlags::REMOTE_WRITE).is_err() {
            qp.resp.drop_msg = true;
            rkey_violation(qp, sh);
            return;
        }
        qp.resp.msg = InMessage::Write { reth, offset: 0 };
    }
    let InMessage::Write { reth, offset } = qp.resp.msg else { return };
    let left = (reth.dma_len - offset) as usize;
    let last = matches!(pos, Position::Last | Position::Only);
    let with_imm = repr.immdt.is_some();
    if (last && payload.len() != left) || (!last && payload.len() >= left) || (last && with_imm && !qp.has_recv(sh)) {
        drop_message(qp, sh);
        return;
    }
    if !payload.is_empty()
        && sh.mrs.write_remote(reth.rkey, qp.accessor(), reth.va + u64::from(offset), payload).is_err()
    {
        // Deregistered or re-registered since the message's first packet: UC
        // drops the rest of the message.
        drop_message(qp, sh);
        return;
    }
    qp.resp.msg = if last { InMessage::Idle } else { InMessage::Write { reth, offset: offset + payload.len() as u32 } };
    if let (true, Some(imm)) = (last, repr.immdt) {
        let Some(wr) = qp.take_recv(sh) else {
            return sh.counters.inc(Counter::RcvdNoRecv);
        };
        let mut wc = WorkCompletion::new(wr.wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm, qp.qpn);
        wc.byte_len = reth.dma_len;
        wc.imm_data = imm.imm;
        wc.wc_flags = WcFlags::WITH_IMM;
        sh.complete(qp.init.recv_cq, wc);
    }
    if last {
        qp.resp.next_msn();
    }
}
