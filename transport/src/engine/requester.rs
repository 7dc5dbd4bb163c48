//! The requester: turns posted send WRs into request packets, in order, one
//! packet per `poll_transmit`. Segmentation by MTU, AckReq on the last packet
//! of a message and every [`ACK_REQ_INTERVAL`] packets, a window of
//! [`MAX_UNACKED_PSNS`] per QP and the engine's `max_inflight_psns` across
//! QPs, fences and the `max_rd_atomic` limit.

use super::attr::{QpState, QpType};
use super::emit::{data_opcode, headers, position, single_opcode};
use super::memory::sge_total;
use super::qp::{Qp, SendWqe};
use super::status::WcStatus;
use super::time::{ack_timeout, Instant};
use super::timer::Timer;
use super::wr::{SendFlags, SendWr, WrOp};
use super::{Counter, EngineState, Error, Transmit};
use crate::wire::{AtomicEthRepr, BthRepr, DethRepr, FethRepr, IethRepr, ImmDtRepr, Position, RethRepr, RoceRepr};
use crate::Psn;

/// At most this many PSNs in flight (rxe's RXE_MAX_UNACKED_PSNS).
pub const MAX_UNACKED_PSNS: i32 = 128;
/// Ask for an ACK at least this often within a long message (rxe's RXE_MAX_PKT_PER_ACK).
pub const ACK_REQ_INTERVAL: u32 = 64;

/// The data of an inline WR that the caller read from its own memory (the
/// drop-in library: C's inline SGEs name plain process memory, no region).
pub(crate) enum InlineData<'a> {
    /// Bytes lent for the call: copied into a reused buffer once the WR is
    /// taken (a refused post takes no buffer).
    Lent(&'a [u8]),
    /// Bytes the caller already owns (`ibv_wr_set_inline_data`'s batch).
    Owned(Vec<u8>),
}

/// `ibv_post_send` for one WR. Without `inline` an inline WR's SGEs must
/// name registered memory.
pub(crate) fn post(qp: &mut Qp, sh: &mut EngineState, wr: SendWr, inline: Option<InlineData<'_>>) -> Result<(), Error> {
    let (qpn, state, t) = (qp.qpn, qp.state(), qp.qp_type());
    if matches!(state, QpState::Reset | QpState::Init | QpState::Rtr) {
        return Err(Error::InvalidState { qpn, state, verb: "post_send" });
    }
    let valid = match t {
        QpType::Rc => true,
        QpType::Uc => matches!(wr.op, WrOp::Send | WrOp::SendWithImm { .. }) || wr.op.is_write() || wr.op.is_local(),
        QpType::Ud => matches!(wr.op, WrOp::Send | WrOp::SendWithImm { .. }),
    };
    if !valid {
        return Err(Error::InvalidOperation { qp_type: t, op: op_name(wr.op) });
    }
    if t == QpType::Ud && wr.ud.is_none() {
        return Err(Error::MissingUdDest);
    }
    let cap = qp.init.cap;
    if wr.sg_list.len() as u32 > cap.max_send_sge {
        return Err(Error::TooManySge { given: wr.sg_list.len(), max: cap.max_send_sge });
    }
    if qp.req.wqes.len() as u32 >= cap.max_send_wr {
        return Err(Error::QueueFull { qpn, verb: "post_send" });
    }
    let mut wqe = new_wqe(wr);
    if wqe.wr.flags.contains(SendFlags::INLINE) && wqe.wr.op.carries_local_data() {
        if wqe.len > cap.max_inline_data {
            return Err(Error::InlineTooLong { given: wqe.len as usize, max: cap.max_inline_data });
        }
        // Given bytes of another length than the SGEs say are not the WR's.
        let given = match inline {
            Some(InlineData::Lent(bytes)) if bytes.len() == wqe.len as usize => Some(sh.inline_bufs.copy_of(bytes)),
            Some(InlineData::Owned(bytes)) if bytes.len() == wqe.len as usize => Some(bytes),
            _ => None,
        };
        match given.or_else(|| copy_inline(sh, qp, &wqe)) {
            Some(data) => wqe.inline = Some(data),
            None => wqe.local_error = Some(WcStatus::LocProtErr),
        }
    }
    qp.req.wqes.push_back(wqe);
    if matches!(state, QpState::Err | QpState::Sqe) {
        qp.flush_send_queue(sh);
    }
    Ok(())
}

fn op_name(op: WrOp) -> &'static str {
    match op {
        WrOp::Send => "SEND",
        WrOp::SendWithImm { .. } => "SEND_WITH_IMM",
        WrOp::SendWithInv { .. } => "SEND_WITH_INV",
        WrOp::RdmaWrite { .. } => "RDMA_WRITE",
        WrOp::RdmaWriteWithImm { .. } => "RDMA_WRITE_WITH_IMM",
        WrOp::RdmaRead { .. } => "RDMA_READ",
        WrOp::AtomicCmpSwp { .. } => "ATOMIC_CMP_AND_SWP",
        WrOp::AtomicFetchAdd { .. } => "ATOMIC_FETCH_AND_ADD",
        WrOp::AtomicWrite { .. } => "ATOMIC_WRITE",
        WrOp::Flush { .. } => "FLUSH",
        WrOp::BindMw { .. } => "BIND_MW",
        WrOp::LocalInv { .. } => "LOCAL_INV",
    }
}

fn new_wqe(wr: SendWr) -> SendWqe {
    // ATOMIC_WRITE carries its 8 bytes in the WR; FLUSH and the local
    // operations no data at all.
    let total = match wr.op {
        WrOp::AtomicWrite { .. } => Some(8),
        WrOp::Flush { .. } | WrOp::BindMw { .. } | WrOp::LocalInv { .. } => Some(0),
        _ => sge_total(&wr.sg_list),
    };
    let local_error = if total.is_none() { Some(WcStatus::LocLenErr) } else { None };
    SendWqe {
        len: total.unwrap_or(0),
        wr,
        inline: None,
        first_psn: Psn::default(),
        last_psn: Psn::default(),
        started: false,
        checked: local_error.is_some(),
        checked_generation: 0,
        local_error,
    }
}

/// Inline data is copied at post time (the user may reuse the buffer at
/// once). The engine reaches bytes only through registered regions, so the
/// SGEs of an inline WR must still name one (an RNIC would not look at lkey).
fn copy_inline(sh: &mut EngineState, qp: &Qp, wqe: &SendWqe) -> Option<Vec<u8>> {
    sh.mrs.check_local(qp.init.pd, &wqe.wr.sg_list, false).ok()?;
    let mut data = sh.inline_bufs.zeroed(wqe.len as usize);
    sh.mrs.gather(&wqe.wr.sg_list, 0, &mut data);
    Some(data)
}

/// The local checks an RNIC makes when it first fetches a WR's buffers.
fn check_local(sh: &EngineState, qp: &Qp, wqe: &SendWqe) -> Option<WcStatus> {
    if let Some(e) = wqe.local_error {
        return Some(e);
    }
    let op = wqe.wr.op;
    if op.is_atomic() && wqe.len != 8 {
        return Some(WcStatus::LocLenErr);
    }
    if wqe.inline.is_some() || op.is_atomic_write() || op.is_flush() || op.is_local() {
        return None;
    }
    let writes = op.is_read() || op.is_atomic();
    sh.mrs.check_local(qp.init.pd, &wqe.wr.sg_list, writes).err()
}

/// Read and atomic WRs sent and not yet completed.
fn rd_atomic_in_flight(qp: &Qp) -> usize {
    qp.req.wqes.iter().take(qp.req.next).filter(|w| w.is_read_or_atomic()).count()
}

/// Why the requester may not send the WR at `next` now, if it may not.
fn blocked(qp: &Qp, sh: &EngineState) -> bool {
    let idx = qp.req.next;
    let wqe = &qp.req.wqes[idx];
    if qp.state() == QpState::Sqd && !wqe.started {
        return true;
    }
    if qp.qp_type() != QpType::Rc {
        return false;
    }
    if qp.req.psn - qp.req.comp_psn >= MAX_UNACKED_PSNS || sh.inflight >= sh.inflight_budget {
        return true;
    }
    // A fence (as rxe), a local error and a local operation (BIND_MW,
    // LOCAL_INV: what they change must not reach WRs before them) wait for
    // every older WR.
    let waits = wqe.wr.flags.contains(SendFlags::FENCE) || wqe.local_error.is_some() || wqe.wr.op.is_local();
    if waits && idx != 0 {
        return true;
    }
    !wqe.started && wqe.is_read_or_atomic() && rd_atomic_in_flight(qp) >= usize::from(qp.attr.max_rd_atomic)
}

/// Writes the next request packet of `qp` into `buf`, if one may go now.
pub(crate) fn poll_request(qp: &mut Qp, sh: &mut EngineState, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
    if !matches!(qp.state(), QpState::Rts | QpState::Sqd) || qp.timers.is_running(Timer::RnrRetry) {
        return None;
    }
    loop {
        let idx = qp.req.next;
        if idx >= qp.req.wqes.len() {
            return None;
        }
        // Checked when first fetched, and again when a region was
        // deregistered or re-registered since (inline data was copied at post).
        let w = &qp.req.wqes[idx];
        if !w.checked || (w.checked_generation != sh.mrs.generation() && w.inline.is_none()) {
            let err = check_local(sh, qp, w);
            let w = &mut qp.req.wqes[idx];
            w.checked = true;
            w.checked_generation = sh.mrs.generation();
            w.local_error = err;
        }
        if blocked(qp, sh) {
            return None;
        }
        if let Some(status) = qp.req.wqes[idx].local_error {
            // Oldest now (RC waited in `blocked`; UC/UD complete as they go).
            qp.fail_front(sh, status);
            if qp.qp_type() == QpType::Rc {
                sh.events.push_back(super::Event::QpFatal { qpn: qp.qpn });
            }
            return None;
        }
        if qp.req.wqes[idx].wr.op.is_local() {
            // The oldest now (RC waited in `blocked`; UC completes as it goes).
            match run_local(qp, sh) {
                WcStatus::Success => qp.complete_front(sh, WcStatus::Success),
                status => {
                    qp.fail_front(sh, status);
                    if qp.qp_type() == QpType::Rc {
                        sh.events.push_back(super::Event::QpFatal { qpn: qp.qpn });
                    }
                    return None;
                }
            }
            continue;
        }
        let mtu = qp.mtu(sh.port_mtu);
        if qp.qp_type() == QpType::Ud && qp.req.wqes[idx].len > mtu {
            // C10-93.1.1: a UD message above the MTU emits nothing and fails
            // nothing; rxe completes it as sent.
            qp.complete_front(sh, WcStatus::Success);
            continue;
        }
        return Some(send_packet(qp, sh, now, buf, mtu));
    }
}

/// Runs the local operation at the front of the send queue: its status
/// (rxe's: MW_BIND_ERR for a refused bind, LOC_QP_OP_ERR for a refused
/// invalidation), counted either way.
fn run_local(qp: &Qp, sh: &mut EngineState) -> WcStatus {
    let who = qp.accessor();
    let (done, refused, status) = match qp.req.wqes[0].wr.op {
        WrOp::BindMw { mw_rkey, rkey, bind } => {
            let ok = sh.mrs.bind_window(mw_rkey, rkey, bind, who).is_ok();
            (ok, Counter::MwBindRefused, WcStatus::MwBindErr)
        }
        WrOp::LocalInv { rkey } => {
            (sh.mrs.invalidate(rkey, who, false), Counter::LocalInvRefused, WcStatus::LocQpOpErr)
        }
        _ => unreachable!("only local operations run here"),
    };
    sh.counters.inc(if done { Counter::MwLocalOps } else { refused });
    if done {
        WcStatus::Success
    } else {
        status
    }
}

/// Builds one packet of the WR at `next` and advances the requester.
fn send_packet(qp: &mut Qp, sh: &mut EngineState, now: Instant, buf: &mut [u8], mtu: u32) -> Transmit {
    let idx = qp.req.next;
    let psn = qp.req.psn;
    let wqe = &mut qp.req.wqes[idx];
    let npkts = wqe.npkts(mtu);
    if !wqe.started {
        wqe.started = true;
        wqe.first_psn = psn;
        wqe.last_psn = psn + (npkts - 1);
    }
    let pkt_idx = (psn - wqe.first_psn) as u32;
    let wqe = &qp.req.wqes[idx];
    let (len, consumed, ends_wqe, ack_req) = if let Some(op) = single_opcode(wqe.wr.op) {
        let n = (wqe.last_psn - psn) as u32 + 1;
        (emit_single(qp, wqe, op, psn, pkt_idx * mtu, buf), n, true, true)
    } else {
        let pos = position(pkt_idx, npkts);
        let last = matches!(pos, Position::Last | Position::Only);
        let periodic = qp.req.noack_pkts + 1 >= ACK_REQ_INTERVAL;
        // rxe asks no ACK of UD QPs, but QP1 is a GSI QP to it, not a UD one:
        // its MADs go out with AckReq set (tests/data/captures/rdma_cm_rping.pcap).
        let gsi = qp.qpn == 1 && qp.qp_type() == QpType::Ud;
        // The packet that fills the engine's budget asks for an ACK too: QPs
        // stopped by the budget in mid-message would otherwise have nothing
        // in flight that the responder answers, and wait for the timer.
        let budget_full = sh.inflight + 1 >= sh.inflight_budget;
        let ack_req = (qp.qp_type() == QpType::Rc || gsi) && (last || periodic || budget_full);
        (emit_data(qp, sh, wqe, pos, psn, pkt_idx * mtu, mtu, ack_req, buf), 1, last, ack_req)
    };
    qp.req.noack_pkts = if ack_req { 0 } else { qp.req.noack_pkts + 1 };
    qp.req.psn = psn + consumed;
    if qp.req.psn - qp.req.sent_end > 0 {
        qp.req.sent_end = qp.req.psn;
    }
    let dest_gid = match wqe.wr.ud {
        Some(ud) if qp.qp_type() == QpType::Ud => ud.dgid,
        _ => qp.attr.ah_attr.dgid,
    };
    let tx = Transmit { len, dest_gid, src_port: qp.sport, qpn: qp.qpn, ack_only: false };
    if ends_wqe {
        qp.req.next += 1;
        if qp.qp_type() != QpType::Rc {
            // UC and UD complete when the last packet leaves.
            qp.complete_front(sh, WcStatus::Success);
        }
    }
    if qp.qp_type() == QpType::Rc && !qp.timers.is_running(Timer::Retransmit) {
        if let Some(t) = ack_timeout(qp.attr.timeout) {
            qp.timers.set(Timer::Retransmit, now + t);
        }
    }
    tx
}

fn bth(qp: &Qp, op: crate::wire::Opcode, psn: Psn, ack_req: bool) -> BthRepr {
    let mut b = BthRepr::new(op, qp.attr.dest_qp_num, psn);
    b.ack_req = ack_req;
    b
}

/// A READ request, an atomic, an ATOMIC_WRITE or a FLUSH: the READ asks for
/// the bytes from `offset` on (a retry after some responses arrived asks
/// for the rest only).
fn emit_single(qp: &Qp, wqe: &SendWqe, op: crate::wire::Opcode, psn: Psn, offset: u32, buf: &mut [u8]) -> usize {
    let mut repr = RoceRepr::new(bth(qp, op, psn, true));
    let mut payload = None;
    match wqe.wr.op {
        WrOp::RdmaRead { remote_addr, rkey } => {
            repr.reth = Some(RethRepr { va: remote_addr + u64::from(offset), rkey, dma_len: wqe.len - offset });
        }
        WrOp::AtomicCmpSwp { remote_addr, rkey, compare, swap } => {
            repr.atomic_eth = Some(AtomicEthRepr { va: remote_addr, rkey, swap_add: swap, compare });
        }
        WrOp::AtomicFetchAdd { remote_addr, rkey, add } => {
            repr.atomic_eth = Some(AtomicEthRepr { va: remote_addr, rkey, swap_add: add, compare: 0 });
        }
        WrOp::AtomicWrite { remote_addr, rkey, data } => {
            repr.reth = Some(RethRepr { va: remote_addr, rkey, dma_len: 8 });
            payload = Some(data);
        }
        WrOp::Flush { remote_addr, rkey, len, placement, whole_region } => {
            repr.feth = Some(FethRepr { selectivity: whole_region.into(), placement, reserved: 0 });
            repr.reth = Some(RethRepr { va: remote_addr, rkey, dma_len: len });
        }
        _ => unreachable!("single_opcode names READ, atomics, ATOMIC_WRITE and FLUSH"),
    }
    let (len, data) = headers(buf, &repr, payload.map_or(0, |p| p.len()));
    if let Some(p) = payload {
        buf[data].copy_from_slice(&p);
    }
    len
}

/// A SEND or WRITE packet at `pos`, with the data from `offset`.
#[allow(clippy::too_many_arguments)]
fn emit_data(
    qp: &Qp,
    sh: &EngineState,
    wqe: &SendWqe,
    pos: Position,
    psn: Psn,
    offset: u32,
    mtu: u32,
    ack_req: bool,
    buf: &mut [u8],
) -> usize {
    let op = wqe.wr.op;
    let mut repr = RoceRepr::new(bth(qp, data_opcode(qp.qp_type(), op, pos), psn, ack_req));
    let first = matches!(pos, Position::First | Position::Only);
    let last = matches!(pos, Position::Last | Position::Only);
    let notifies = op.is_send() || op.imm().is_some();
    repr.bth.solicited = last && notifies && wqe.wr.flags.contains(SendFlags::SOLICITED);
    if let (true, Some((va, rkey))) = (first, op.remote()) {
        repr.reth = Some(RethRepr { va, rkey, dma_len: wqe.len });
    }
    if let (true, Some(imm)) = (last, op.imm()) {
        repr.immdt = Some(ImmDtRepr { imm });
    }
    if let (true, WrOp::SendWithInv { invalidate_rkey }) = (last, op) {
        repr.ieth = Some(IethRepr { rkey: invalidate_rkey });
    }
    if let Some(ud) = wqe.wr.ud.filter(|_| qp.qp_type() == QpType::Ud) {
        repr.bth.dest_qp = ud.remote_qpn;
        let qkey = if ud.remote_qkey & 0x8000_0000 != 0 { qp.attr.qkey } else { ud.remote_qkey };
        repr.deth = Some(DethRepr { qkey, src_qp: qp.qpn, reserved: 0 });
    }
    let n = (wqe.len - offset).min(mtu) as usize;
    let (len, data) = headers(buf, &repr, n);
    match &wqe.inline {
        Some(bytes) => buf[data.clone()].copy_from_slice(&bytes[offset as usize..offset as usize + n]),
        None => sh.mrs.gather(&wqe.wr.sg_list, offset.into(), &mut buf[data]),
    }
    len
}

/// Go back N: the next packet is the oldest unacknowledged one.
pub(crate) fn rewind(qp: &mut Qp) {
    qp.req.next = 0;
    qp.req.psn = qp.req.comp_psn;
    qp.req.noack_pkts = 0;
}
