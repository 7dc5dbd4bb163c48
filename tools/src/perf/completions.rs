//! What a test does with a completion it did not expect: perftest's one-line
//! reports of a failed send or receive, with the likely cause.

use uroce_verbs::{WcStatus, WorkCompletion};

/// What a failed completion most likely means here, and what to do.
fn hint(status: WcStatus) -> &'static str {
    match status {
        WcStatus::RetryExcErr => {
            ": the peer's RoCE address did not answer: check that it is reachable (--pcap shows what went out) and runs the same -c"
        }
        WcStatus::RnrRetryExcErr => ": the peer had no receive posted: run the same test, -n and -q on both ends",
        WcStatus::RemAccessErr | WcStatus::RemInvReqErr => {
            ": the peer refused the access: run the same test and -s (and -a) on both ends"
        }
        _ => "",
    }
}

/// perftest's report of a failed send completion (`NOTIFY_COMP_ERROR_SEND`),
/// as one line, with the likely cause.
pub fn send_error(wc: &WorkCompletion, scnt: u64, ccnt: u64) -> String {
    format!(
        "Completion with error at client: Failed status {}: wr_id {} syndrom {:#x} ({}); scnt={scnt}, ccnt={ccnt}{}",
        wc.status as u32,
        wc.wr_id,
        wc.vendor_err,
        wc.status,
        hint(wc.status)
    )
}

/// `NOTIFY_COMP_ERROR_RECV`, as one line, with the likely cause.
pub fn recv_error(wc: &WorkCompletion, rcnt: u64) -> String {
    format!(
        "Completion with error at server: Failed status {}: wr_id {} syndrom {:#x} ({}); rcnt={rcnt}{}",
        wc.status as u32,
        wc.wr_id,
        wc.vendor_err,
        wc.status,
        hint(wc.status)
    )
}
