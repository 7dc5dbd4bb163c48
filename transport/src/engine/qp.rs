//! One queue pair: attributes, send queue with its requester/completer
//! state, receive queue and responder state, timers. Also what every part
//! shares: posting completions and moving to the error state with a flush.

use super::attr::{Mtu, QpAttr, QpState, QpType};
use super::cq::CqHandle;
use super::memory::{Accessor, Pd};
use super::responder::{Responder, Response};
use super::srq::SrqHandle;
use super::status::WcStatus;
use super::timer::TimerTable;
use super::wr::{RecvWr, SendFlags, SendWr, WcOpcode, WorkCompletion};
use super::{EngineState, Event};
use crate::wire::AethSyndrome;
use crate::Psn;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// The engine's QPs by number. Every packet looks its QP up here, and the
/// scheduler again when it sends: a hash table with a one-multiply hash
/// costs the same for 256 QPs as for one, where a tree search grows with
/// them. QPNs are the engine's own choice, so no peer picks the keys.
pub(crate) type QpTable = HashMap<u32, Qp, BuildHasherDefault<QpnHasher>>;

/// The hash of a QP number: a Fibonacci multiply, its high half folded in.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct QpnHasher(u64);

impl Hasher for QpnHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u32(u32::from(b));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(n)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// Sizes of a QP's queues (`struct ibv_qp_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

impl QpCap {
    /// Bytes of inline data each send SGE's room holds: a QP asked for
    /// less inline data gets at least this much per send SGE, as on rxe
    /// (a send WQE's SGE space doubles as its inline space) and mlx5 (whose
    /// smallest WQE has room too). Debian's `rdma_xclient` sends 16 bytes
    /// inline on a QP asked for none.
    pub const INLINE_PER_SGE: u32 = 16;

    /// The sizes a QP asked for `self` is given (what `ibv_create_qp`
    /// writes back into the caller's `cap`).
    pub fn granted(self) -> QpCap {
        let sge_room = self.max_send_sge.saturating_mul(Self::INLINE_PER_SGE);
        QpCap { max_inline_data: self.max_inline_data.max(sge_room), ..self }
    }
}

impl Default for QpCap {
    fn default() -> QpCap {
        QpCap { max_send_wr: 256, max_recv_wr: 256, max_send_sge: 16, max_recv_sge: 16, max_inline_data: 256 }
    }
}

/// What `create_qp` needs (`struct ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInitAttr {
    pub qp_type: QpType,
    pub pd: Pd,
    pub send_cq: CqHandle,
    pub recv_cq: CqHandle,
    pub srq: Option<SrqHandle>,
    pub cap: QpCap,
    /// Every send WR completes, signaled or not.
    pub sq_sig_all: bool,
}

/// A send WR as the requester sees it.
#[derive(Debug, Clone)]
pub(crate) struct SendWqe {
    pub wr: SendWr,
    /// The data of an inline WR, copied when it was posted.
    pub inline: Option<Vec<u8>>,
    /// Message length in bytes.
    pub len: u32,
    /// PSNs of the first and last packet (for a READ, of its responses).
    pub first_psn: Psn,
    pub last_psn: Psn,
    /// PSNs are assigned once, the first time the WR is sent.
    pub started: bool,
    /// Local buffers were checked (before the first packet, and again after
    /// any region went away)...
    pub checked: bool,
    /// ...under this `MrTable::generation`.
    pub checked_generation: u64,
    /// A local error found by that check; reported when the WR is oldest.
    pub local_error: Option<WcStatus>,
}

impl SendWqe {
    /// Packets (for READ: response packets) the message takes at `mtu`.
    pub fn npkts(&self, mtu: u32) -> u32 {
        if self.wr.op.is_rd_atomic() && !self.wr.op.is_read() {
            1
        } else {
            self.len.div_ceil(mtu).max(1)
        }
    }
    /// READ, atomics, ATOMIC_WRITE, FLUSH: answered by a response of their
    /// own, never by a coalesced ACK.
    pub fn is_read_or_atomic(&self) -> bool {
        self.wr.op.is_rd_atomic()
    }
}

/// The requester and completer state of the send queue.
#[derive(Debug, Default)]
pub(crate) struct Requester {
    /// Posted WRs not yet completed, oldest first.
    pub wqes: VecDeque<SendWqe>,
    /// Index in `wqes` of the WR the next packet belongs to.
    pub next: usize,
    /// PSN of the next packet to send.
    pub psn: Psn,
    /// Oldest PSN not yet acknowledged.
    pub comp_psn: Psn,
    /// One past the highest PSN ever sent (go-back-N rewinds `psn`, not this).
    pub sent_end: Psn,
    /// Packets sent since the last AckReq.
    pub noack_pkts: u32,
    pub retry_left: u8,
    pub rnr_left: u8,
    /// The `comp_psn` of the last go-back-N that a response (not the timer)
    /// caused: later signs of the same gap are already being answered.
    pub retried_at: Option<Psn>,
    /// An SQD drained event is owed once the send queue is idle.
    pub sqd_notify: bool,
    /// What this QP adds to the engine's count of unacknowledged PSNs
    /// (`EngineState::inflight`), as of its last `sync`.
    pub counted_inflight: u32,
}

impl Requester {
    /// Everything before `psn` is acknowledged. A go-back-N resend still
    /// behind it skips ahead: those packets need no resending.
    pub fn set_comp_psn(&mut self, psn: Psn) {
        self.comp_psn = psn;
        if self.psn - psn < 0 {
            self.psn = psn;
        }
    }
}

pub(crate) struct Qp {
    pub qpn: u32,
    pub init: QpInitAttr,
    pub attr: QpAttr,
    /// The UDP source port of every packet of this QP.
    pub sport: u16,
    pub req: Requester,
    pub rq: VecDeque<RecvWr>,
    pub resp: Responder,
    pub timers: TimerTable,
    /// The authenticated mode's key and sequences (`super::auth`), if set.
    pub auth: Option<super::auth::Auth>,
    /// Which of the scheduler's queues hold this QP.
    pub sched: super::sched::SchedMarks,
}

impl Qp {
    pub fn new(qpn: u32, init: QpInitAttr) -> Qp {
        Qp {
            qpn,
            init: QpInitAttr { cap: init.cap.granted(), ..init },
            attr: QpAttr { port_num: 1, ..QpAttr::default() },
            sport: ud_udp_sport(qpn),
            req: Requester::default(),
            rq: VecDeque::new(),
            resp: Responder::default(),
            timers: TimerTable::default(),
            auth: None,
            sched: Default::default(),
        }
    }

    pub fn qp_type(&self) -> QpType {
        self.init.qp_type
    }

    /// Whether the requester has WRs it has not started or finished sending.
    pub fn has_unsent_requests(&self) -> bool {
        self.req.next < self.req.wqes.len()
    }

    /// Whether the requester has sent part of a message and not its end.
    pub fn mid_message(&self) -> bool {
        self.req.wqes.get(self.req.next).is_some_and(|w| w.started)
    }

    /// Request PSNs sent and not yet acknowledged: what an RC QP that may
    /// send has in flight.
    pub fn inflight(&self) -> u32 {
        let sending = matches!(self.state(), QpState::Rts | QpState::Sqd);
        if self.qp_type() != QpType::Rc || !sending {
            return 0;
        }
        (self.req.psn - self.req.comp_psn).max(0) as u32
    }

    /// Brings the engine-wide bookkeeping of this QP up to date after
    /// anything happened to it: its unacknowledged PSNs in the engine's
    /// count, its next deadline in the timer index.
    pub fn sync(&mut self, sh: &mut EngineState) {
        let now = self.inflight();
        sh.inflight = sh.inflight - self.req.counted_inflight + now;
        self.req.counted_inflight = now;
        sh.timers.update(self.qpn, &mut self.timers);
    }
    pub fn state(&self) -> QpState {
        self.attr.qp_state
    }

    /// Bytes per packet: the path MTU, or the port MTU for UD.
    pub fn mtu(&self, port_mtu: Mtu) -> u32 {
        match self.qp_type() {
            QpType::Ud => port_mtu.bytes(),
            _ => self.attr.path_mtu.bytes(),
        }
    }

    /// Posts the completion of the oldest send WR and removes it.
    pub fn complete_front(&mut self, sh: &mut EngineState, status: WcStatus) {
        let Some(mut wqe) = self.req.wqes.pop_front() else { return };
        if let Some(buf) = wqe.inline.take() {
            sh.inline_bufs.give_back(buf);
        }
        self.req.next = self.req.next.saturating_sub(1);
        if wqe.wr.op.is_send() {
            sh.counters.inc(super::Counter::RdmaSends);
        }
        if wqe.started {
            self.req.set_comp_psn(wqe.last_psn.next());
        }
        let signaled = self.init.sq_sig_all || wqe.wr.flags.contains(SendFlags::SIGNALED);
        if signaled || status != WcStatus::Success {
            let mut wc = WorkCompletion::new(wqe.wr.wr_id, status, wqe.wr.op.wc_opcode(), self.qpn);
            if status == WcStatus::Success {
                wc.byte_len = if wqe.wr.op.is_atomic() { 8 } else { wqe.len };
                if wqe.wr.op.is_flush() {
                    wc.byte_len = 0;
                }
            }
            sh.complete(self.init.send_cq, wc);
        }
    }

    /// Fails the oldest send WR with `status` and moves the QP to the error
    /// state: RC to ERR; UC and UD to SQE (their receive side lives on).
    pub fn fail_front(&mut self, sh: &mut EngineState, status: WcStatus) {
        self.complete_front(sh, status);
        match self.qp_type() {
            QpType::Rc => self.enter_error(sh),
            QpType::Uc | QpType::Ud => {
                self.attr.qp_state = QpState::Sqe;
                self.flush_send_queue(sh);
            }
        }
    }

    /// Moves to ERR: timers stop, every outstanding WR completes with
    /// WR_FLUSH_ERR. A NAK already queued (the one that explains the error)
    /// is still sent; READ responses, atomic and plain ACKs are not.
    pub fn enter_error(&mut self, sh: &mut EngineState) {
        if self.state() == QpState::Err {
            return;
        }
        self.attr.qp_state = QpState::Err;
        self.timers.stop_all();
        self.resp.responses.retain(|r| {
            matches!(r, Response::Ack { syndrome: AethSyndrome::Nak(_) | AethSyndrome::RnrNak { .. }, .. })
        });
        self.flush_send_queue(sh);
        self.flush_receive_side(sh);
    }

    pub fn flush_send_queue(&mut self, sh: &mut EngineState) {
        while !self.req.wqes.is_empty() {
            self.complete_front(sh, WcStatus::WrFlushErr);
        }
        self.req.next = 0;
    }

    fn flush_receive_side(&mut self, sh: &mut EngineState) {
        if let Some(wr) = self.resp.take_message_recv() {
            self.complete_recv_error(sh, &wr, WcStatus::WrFlushErr);
        }
        while let Some(wr) = self.rq.pop_front() {
            self.complete_recv_error(sh, &wr, WcStatus::WrFlushErr);
        }
        if let Some(srq) = self.init.srq {
            sh.events.push_back(Event::QpLastWqeReached { qpn: self.qpn, srq });
        }
    }

    pub fn complete_recv_error(&self, sh: &mut EngineState, wr: &RecvWr, status: WcStatus) {
        let wc = WorkCompletion::new(wr.wr_id, status, WcOpcode::Recv, self.qpn);
        sh.complete(self.init.recv_cq, wc);
    }

    /// Takes a receive WR from the SRQ or the receive queue.
    pub fn take_recv(&mut self, sh: &mut EngineState) -> Option<RecvWr> {
        match self.init.srq {
            Some(h) => sh.srqs.get_mut(&h)?.take(h, &mut sh.events),
            None => self.rq.pop_front(),
        }
    }

    /// Returns an unused receive WR to the head of its queue (UC drops a
    /// message whose receive it had taken; the WR serves the next one).
    pub fn untake_recv(&mut self, sh: &mut EngineState, wr: RecvWr) {
        match self.init.srq {
            Some(h) => {
                if let Some(s) = sh.srqs.get_mut(&h) {
                    s.queue.push_front(wr)
                }
            }
            None => self.rq.push_front(wr),
        }
    }

    /// This QP as it reaches memory by remote keys.
    pub fn accessor(&self) -> Accessor {
        Accessor { qpn: self.qpn, pd: self.init.pd }
    }

    /// The PD receive buffers are checked against: the SRQ's, or the QP's.
    pub fn recv_pd(&self, sh: &EngineState) -> Pd {
        self.init.srq.and_then(|h| sh.srqs.get(&h)).map_or(self.init.pd, |s| s.pd)
    }

    /// Whether a receive WR is available without taking it.
    pub fn has_recv(&self, sh: &EngineState) -> bool {
        match self.init.srq {
            Some(h) => sh.srqs.get(&h).is_some_and(|s| !s.queue.is_empty()),
            None => !self.rq.is_empty(),
        }
    }
}

/// The flow label rxe derives from the two QP numbers when the address
/// vector has none (the kernel's `rdma_calc_flow_label`).
pub fn flow_label_of_qps(lqpn: u32, rqpn: u32) -> u32 {
    let mut v = u64::from(lqpn) * u64::from(rqpn);
    v ^= v >> 20;
    v ^= v >> 40;
    (v & 0xf_ffff) as u32
}

/// The UDP source port of a 20-bit flow label (`rdma_flow_label_to_udp_sport`).
pub fn flow_label_to_udp_sport(fl: u32) -> u16 {
    let low = (fl & 0x3fff) ^ ((fl & 0xf_c000) >> 14);
    (low | 0xc000) as u16
}

/// The UDP source port of a UD QP or QP1: `0xC000 + hash_32(qpn, 14)`.
pub fn ud_udp_sport(qpn: u32) -> u16 {
    const GOLDEN_RATIO_32: u32 = 0x61c8_8647;
    let hash = qpn.wrapping_mul(GOLDEN_RATIO_32) >> (32 - 14);
    0xc000 + hash as u16
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn rc_port_is_symmetric_and_in_range() {
        let a = flow_label_to_udp_sport(flow_label_of_qps(0x11, 0x12));
        let b = flow_label_to_udp_sport(flow_label_of_qps(0x12, 0x11));
        assert_eq!(a, b);
        assert!(a >= 0xc000);
        // 0x11 * 0x12 = 0x132: below 2^14, so the port is 0xC000 | 0x132.
        assert_eq!(a, 0xc132);
        assert_eq!(flow_label_to_udp_sport(0xf_ffff), 0xc000 | (0x3fff ^ 0x3f));
    }

    #[test]
    fn ud_port() {
        // hash_32(1, 14) = 0x61c88647 >> 18.
        assert_eq!(ud_udp_sport(1), 0xc000 + (0x61c8_8647u32 >> 18) as u16);
        assert!(ud_udp_sport(0xff_ffff) >= 0xc000);
    }
}
