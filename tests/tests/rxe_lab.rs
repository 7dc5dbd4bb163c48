//! The kernel-rxe lab's self-test (tests/rxe-lab/run-selftest): two QEMU guests
//! running the Linux kernel's rdma_rxe exchange RC, UD, RDMA WRITE/READ,
//! atomics and rdma_cm traffic with rdma-core and perftest on a bridge in a
//! network namespace; the capture of the bridge passes `uroce dump --check`.
//!
//! It needs root, QEMU and Debian's apt (it installs what it needs and builds
//! the guest into /var/cache/uroce-rxe-lab), and takes a minute or two once the
//! guest is cached, so it runs only when asked:
//!
//!     sudo UROCE_RXE_LAB=1 cargo test -p uroce-tests --test rxe_lab -- --nocapture
//!
//! Otherwise it prints `SKIP:` with the reason. UROCE_RXE_LAB_TIMEOUT (seconds,
//! default 1800) bounds the whole run; at the limit the script gets SIGTERM
//! (it tears the lab down), then SIGKILL (its watchdog does).

use uroce_tests::lab::{run_script, skip_reason};

#[test]
fn rxe_lab_selftest() {
    if let Some(reason) = skip_reason("the kernel-rxe lab", "rxe_lab") {
        println!("SKIP: {reason}");
        return;
    }
    let run = run_script("run-selftest");
    match run.status {
        None => panic!("run-selftest did not finish within {} s (output above)", run.timeout.as_secs()),
        Some(status) => assert!(
            status.success(),
            "run-selftest failed ({status}): {}",
            run.output.lines().rev().find(|l| l.contains("FAILED")).unwrap_or("see the output above")
        ),
    }
}
