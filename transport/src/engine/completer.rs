//! The completer: reads responses (ACK, NAK, RNR NAK, READ responses, atomic
//! ACKs), completes send WRs in order, and decides retries: go back N on a
//! PSN sequence NAK, a missing READ response or the local ACK timeout, after
//! the RNR timer on an RNR NAK, with `retry_cnt` and `rnr_retry` (7: forever).

use super::attr::QpState;
use super::qp::Qp;
use super::requester::rewind;
use super::status::WcStatus;
use super::time::{ack_timeout, rnr_timer, Instant};
use super::timer::Timer;
use super::{Counter, EngineState};
use crate::wire::{AethSyndrome, NakCode, Opcode, RoceRepr};
use crate::Psn;

pub(crate) fn on_response(qp: &mut Qp, sh: &mut EngineState, now: Instant, repr: &RoceRepr, payload: &[u8]) {
    if !matches!(qp.state(), QpState::Rts | QpState::Sqd) {
        return;
    }
    let psn = repr.bth.psn;
    // Only PSNs in flight: older ones are duplicates, newer ones bogus.
    if psn - qp.req.comp_psn < 0 || psn - qp.req.sent_end >= 0 {
        return;
    }
    let before = qp.req.comp_psn;
    // A response for PSN p acknowledges every SEND and WRITE before p; a
    // READ or atomic before p whose response never came must be asked again.
    while let Some(w) = qp.req.wqes.front() {
        if !w.started || psn - w.last_psn <= 0 {
            break;
        }
        if w.is_read_or_atomic() {
            progress(qp, now, before);
            retry_for_gap(qp, sh);
            return;
        }
        qp.complete_front(sh, WcStatus::Success);
    }
    match repr.bth.opcode {
        Opcode::RcAck => match repr.aeth.map(|a| a.syndrome) {
            Some(AethSyndrome::Ack { .. }) => on_ack(qp, sh, psn),
            Some(AethSyndrome::RnrNak { timer }) => {
                progress(qp, now, before);
                on_rnr_nak(qp, sh, now, psn, timer);
                return;
            }
            Some(AethSyndrome::Nak(code)) => {
                on_nak(qp, sh, now, before, psn, code);
                return;
            }
            _ => {}
        },
        Opcode::RcAtomicAck => on_atomic_ack(qp, sh, psn, repr),
        op if op.is_response() => on_read_response(qp, sh, op, psn, payload),
        _ => {}
    }
    progress(qp, now, before);
    super::modify::notify_if_drained(qp, sh);
}

/// After the completer moved: fresh retry budgets and a restarted timer, or
/// no timer when nothing is outstanding.
fn progress(qp: &mut Qp, now: Instant, before: Psn) {
    if qp.state() == QpState::Err || qp.req.comp_psn == before {
        return;
    }
    qp.req.retry_left = qp.attr.retry_cnt;
    qp.req.rnr_left = qp.attr.rnr_retry;
    qp.req.retried_at = None;
    if qp.req.comp_psn == qp.req.sent_end {
        qp.timers.stop(Timer::Retransmit);
    } else if let Some(t) = ack_timeout(qp.attr.timeout) {
        qp.timers.set(Timer::Retransmit, now + t);
    }
}

fn on_ack(qp: &mut Qp, sh: &mut EngineState, psn: Psn) {
    let Some(w) = qp.req.wqes.front() else { return };
    if !w.started || w.is_read_or_atomic() || psn - w.first_psn < 0 {
        return;
    }
    if psn == w.last_psn {
        qp.complete_front(sh, WcStatus::Success);
    } else {
        // An ACK within a long message (the periodic AckReq).
        qp.req.set_comp_psn(psn.next());
    }
}

fn on_atomic_ack(qp: &mut Qp, sh: &mut EngineState, psn: Psn, repr: &RoceRepr) {
    let Some(w) = qp.req.wqes.front() else { return };
    let Some(ack) = repr.atomic_ack_eth else { return };
    if !w.started || !w.wr.op.is_atomic() || psn != w.first_psn {
        return;
    }
    let pd = qp.init.pd;
    let sges = w.wr.sg_list.clone();
    match sh.mrs.scatter(pd, &sges, 0, &ack.orig_data.to_ne_bytes()) {
        Ok(()) => qp.complete_front(sh, WcStatus::Success),
        Err(status) => qp.fail_front(sh, status),
    }
}

/// A READ response packet: data for the oldest WR at the expected PSN; or,
/// empty and alone, the answer to an ATOMIC_WRITE or FLUSH (IBTA 1.5, rxe).
fn on_read_response(qp: &mut Qp, sh: &mut EngineState, op: Opcode, psn: Psn, payload: &[u8]) {
    let Some(w) = qp.req.wqes.front() else { return };
    if w.started && (w.wr.op.is_atomic_write() || w.wr.op.is_flush()) {
        if op == Opcode::RcReadResponseOnly && psn == w.first_psn && payload.is_empty() {
            qp.complete_front(sh, WcStatus::Success);
        }
        return;
    }
    if !w.started || !w.wr.op.is_read() || psn != qp.req.comp_psn {
        if w.wr.op.is_read() && psn - qp.req.comp_psn > 0 {
            // A response went missing: ask again from the first missing one.
            retry_for_gap(qp, sh);
        }
        return;
    }
    let mtu = qp.mtu(sh.port_mtu);
    let offset = (psn - w.first_psn) as u32 * mtu;
    let expected = if psn == w.last_psn { w.len - offset } else { mtu };
    if payload.len() != expected as usize {
        qp.fail_front(sh, WcStatus::BadRespErr);
        return;
    }
    let (pd, sges, last) = (qp.init.pd, w.wr.sg_list.clone(), psn == w.last_psn);
    if let Err(status) = sh.mrs.scatter(pd, &sges, offset.into(), payload) {
        qp.fail_front(sh, status);
        return;
    }
    if last {
        qp.complete_front(sh, WcStatus::Success);
    } else {
        qp.req.set_comp_psn(psn.next());
    }
}

fn on_nak(qp: &mut Qp, sh: &mut EngineState, now: Instant, before: Psn, psn: Psn, code: NakCode) {
    if code == NakCode::PsnSequenceError {
        // Every PSN before the NAKed one arrived.
        if psn - before > 0 {
            sh.counters.inc(Counter::RcvdSeqErr);
        }
        let front_started = qp.req.wqes.front().is_some_and(|w| w.started && !w.is_read_or_atomic());
        if front_started && psn - qp.req.comp_psn > 0 {
            qp.req.set_comp_psn(psn);
        }
        progress(qp, now, before);
        retry_for_gap(qp, sh);
        return;
    }
    let status = match code {
        NakCode::InvalidRequest => WcStatus::RemInvReqErr,
        NakCode::RemoteAccessError => WcStatus::RemAccessErr,
        NakCode::RemoteOperationalError => WcStatus::RemOpErr,
        NakCode::InvalidRdRequest => WcStatus::RemInvRdReqErr,
        NakCode::PsnSequenceError | NakCode::Unknown(_) => WcStatus::BadRespErr,
    };
    qp.fail_front(sh, status);
}

fn on_rnr_nak(qp: &mut Qp, sh: &mut EngineState, now: Instant, psn: Psn, timer: u8) {
    sh.counters.inc(Counter::RcvdRnrErr);
    if qp.req.rnr_left == 0 {
        sh.counters.inc(Counter::RetryRnrExceededErr);
        qp.fail_front(sh, WcStatus::RnrRetryExcErr);
        return;
    }
    if qp.attr.rnr_retry != 7 {
        qp.req.rnr_left -= 1;
    }
    if psn - qp.req.comp_psn > 0 && qp.req.wqes.front().is_some_and(|w| !w.is_read_or_atomic()) {
        qp.req.set_comp_psn(psn);
    }
    rewind(qp);
    // Packets sent after the NAKed one arrive out of sequence and draw a PSN
    // sequence NAK for the same PSN: stale, as the wait already answers it.
    qp.req.retried_at = Some(qp.req.comp_psn);
    qp.timers.stop(Timer::Retransmit);
    qp.timers.set(Timer::RnrRetry, now + rnr_timer(timer));
}

/// The local ACK timeout fired: go back N, or fail when retries ran out.
pub(crate) fn on_retransmit_timeout(qp: &mut Qp, sh: &mut EngineState) {
    if qp.state() == QpState::Err || qp.req.comp_psn == qp.req.sent_end {
        return;
    }
    retry(qp, sh);
}

/// A response showed a gap (a sequence NAK, a READ response or ACK beyond a
/// missing one). Responses still in flight show the same gap again; only the
/// first of them goes back N.
fn retry_for_gap(qp: &mut Qp, sh: &mut EngineState) {
    if qp.req.retried_at != Some(qp.req.comp_psn) {
        retry(qp, sh);
    }
}

/// Go back N, spending one retry; with none left, the oldest WR fails with
/// RETRY_EXC_ERR and the QP goes to ERR (flushing the rest).
fn retry(qp: &mut Qp, sh: &mut EngineState) {
    if qp.req.retry_left == 0 {
        sh.counters.inc(Counter::RetryExceededErr);
        qp.fail_front(sh, WcStatus::RetryExcErr);
        return;
    }
    qp.req.retry_left -= 1;
    qp.req.retried_at = Some(qp.req.comp_psn);
    sh.counters.inc(Counter::CompleterRetryErr);
    rewind(qp);
    // The next packet sent starts a fresh timer.
    qp.timers.stop(Timer::Retransmit);
}
