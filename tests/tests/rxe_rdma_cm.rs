//! rdma_cm against the kernel's rxe (tests/rxe-lab/interop-rdma-cm): rdmacm-utils'
//! rping and perftest's ib_send_bw -R / ib_write_bw -R in a QEMU guest against
//! `uroce rping` and `uroce perf -R`; perftest's UD tests with -R against
//! `uroce perf -c UD -R`; udaddy and mckey (multicast) against the same
//! programs over uroce's drop-in; both directions, over uroce's packet and
//! udp links (mckey: udp); every capture passes `uroce dump --check` and
//! tshark decodes its CM MADs (ConnectRequest, ..., ServiceIDResReq,
//! ServiceIDResReqResp) unflagged.
//!
//! Root, QEMU and the lab's guest are needed; it runs only when asked:
//!
//!     sudo UROCE_RXE_LAB=1 cargo test -p uroce-tests --test rxe_rdma_cm -- --nocapture
//!
//! Otherwise it prints `SKIP:` with the reason. UROCE_RXE_LAB_TIMEOUT (seconds,
//! default 1800) bounds the run: then SIGTERM (the script tears the lab down),
//! then SIGKILL.

use uroce_tests::lab::{run_script, skip_reason};

#[test]
fn rping_and_perftest_rdma_cm_against_the_kernel_rxe() {
    if let Some(reason) = skip_reason("the rdma_cm interop", "rxe_rdma_cm") {
        println!("SKIP: {reason}");
        return;
    }
    let run = run_script("interop-rdma-cm");
    match run.status {
        None => panic!("interop-rdma-cm did not finish within {} s (output above)", run.timeout.as_secs()),
        Some(s) => assert!(s.success(), "interop-rdma-cm failed ({s}): see the table above"),
    }
}
