//! What a checked `modify_qp` does to a QP: copy the attributes, then the
//! side effects of entering the new state.

use super::attr::{QpAttr, QpAttrMask, QpState, QpType};
use super::qp::{flow_label_of_qps, flow_label_to_udp_sport, Qp, Requester};
use super::responder::Responder;
use super::{EngineState, Event};
use crate::Psn;

pub(crate) fn apply(qp: &mut Qp, sh: &mut EngineState, attr: &QpAttr, mask: QpAttrMask, to: QpState) {
    let from = qp.state();
    super::state::apply(&mut qp.attr, attr, mask);
    // A flow label is 20 bits; the kernel takes any value for one and a
    // NIC keeps those bits (UCX's rc_verbs passes 0xFFFFFFFF).
    qp.attr.ah_attr.flow_label &= 0xf_ffff;
    if mask.contains(QpAttrMask::AV) && qp.qp_type() != QpType::Ud {
        let fl = match qp.attr.ah_attr.flow_label {
            0 => flow_label_of_qps(qp.qpn, qp.attr.dest_qp_num),
            fl => fl,
        };
        qp.sport = flow_label_to_udp_sport(fl);
    }
    if mask.contains(QpAttrMask::DEST_QPN) && qp.attr.ah_attr.flow_label == 0 && qp.qp_type() != QpType::Ud {
        qp.sport = flow_label_to_udp_sport(flow_label_of_qps(qp.qpn, qp.attr.dest_qp_num));
    }
    if mask.contains(QpAttrMask::RQ_PSN) {
        qp.resp.psn = Psn::new(qp.attr.rq_psn);
    }
    if mask.contains(QpAttrMask::SQ_PSN) {
        let psn = Psn::new(qp.attr.sq_psn);
        qp.req.psn = psn;
        qp.req.comp_psn = psn;
        qp.req.sent_end = psn;
    }
    if mask.contains(QpAttrMask::RETRY_CNT) {
        qp.req.retry_left = qp.attr.retry_cnt;
    }
    if mask.contains(QpAttrMask::RNR_RETRY) {
        qp.req.rnr_left = qp.attr.rnr_retry;
    }
    if to == from {
        return;
    }
    match to {
        QpState::Reset => {
            reset(qp);
            sh.purge_completions(qp.qpn, qp.init.send_cq, qp.init.recv_cq);
        }
        QpState::Err => qp.enter_error(sh),
        QpState::Sqd => {
            qp.attr.qp_state = QpState::Sqd;
            qp.req.sqd_notify = qp.attr.en_sqd_async_notify;
            notify_if_drained(qp, sh);
        }
        _ => qp.attr.qp_state = to,
    }
    qp.attr.cur_qp_state = qp.attr.qp_state;
}

/// Back to RESET: queues emptied without completions, state forgotten
/// (the caller takes the QP's completions out of its CQs).
fn reset(qp: &mut Qp) {
    // What the engine counts for this QP stays until `sync` takes it back out.
    qp.req = Requester { counted_inflight: qp.req.counted_inflight, ..Requester::default() };
    qp.rq.clear();
    qp.resp = Responder::default();
    // Stopped, not replaced: the table stays filed in the engine's timer index.
    qp.timers.stop_all();
    let port = qp.attr.port_num;
    qp.attr = QpAttr { port_num: port, ..QpAttr::default() };
}

/// Raises SQ_DRAINED once an SQD QP has nothing in flight.
pub(crate) fn notify_if_drained(qp: &mut Qp, sh: &mut EngineState) {
    let idle = qp.req.wqes.iter().all(|w| !w.started);
    if qp.state() == QpState::Sqd && qp.req.sqd_notify && idle {
        qp.req.sqd_notify = false;
        sh.events.push_back(Event::SqDrained { qpn: qp.qpn });
    }
}
