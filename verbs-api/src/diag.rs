//! One tracing line for each failed completion: what happened and what to do,
//! where a verbs user would get only a status.

use uroce_transport::engine::{WcStatus, WorkCompletion};

/// The likely cause and the fix for a completion status.
pub fn advice(status: WcStatus) -> Option<&'static str> {
    Some(match status {
        WcStatus::Success => return None,
        WcStatus::RnrRetryExcErr => {
            "the peer had no receive posted for our SEND (RNR) more times than rnr_retry allows: \
             post receives before the sender starts, or raise rnr_retry (7 = forever)"
        }
        WcStatus::RetryExcErr => {
            "the peer did not answer within timeout x retry_cnt: it is gone, unreachable, or connected with another \
             QPN/PSN/GID (check what was exchanged at connect time)"
        }
        WcStatus::RemAccessErr => {
            "the peer refused the rkey, address range or access: the rkey is unknown to it, the range is outside \
             the region, or the region lacks REMOTE_WRITE/READ/ATOMIC"
        }
        WcStatus::RemInvReqErr => {
            "the peer found the request invalid: an operation its QP type or access does not allow, a message \
             longer than its receive buffer, or a misaligned atomic"
        }
        WcStatus::RemOpErr => "the peer failed to carry out the request (its QP went to error)",
        WcStatus::LocProtErr => "an SGE names an lkey this PD does not own, or a range outside its region",
        WcStatus::LocLenErr => "the data does not fit: the receive buffer is too small, or the SGE lengths are wrong",
        WcStatus::WrFlushErr => "the QP is in the error state: this request was flushed, not executed",
        WcStatus::BadRespErr => "the peer answered with an unexpected response opcode",
        _ => "see the status",
    })
}

pub fn explain_completion(wc: &WorkCompletion) {
    if let Some(why) = advice(wc.status) {
        // Flushes follow the failure that caused them; keep them quiet.
        if wc.status == WcStatus::WrFlushErr {
            tracing::debug!(wr_id = wc.wr_id, qp = wc.qp_num, "uroce: {}: {why}", wc.status);
        } else {
            tracing::warn!(wr_id = wc.wr_id, qp = wc.qp_num, "uroce: {}: {why}", wc.status);
        }
    }
}
