//! The interop matrix (tests/rxe-lab/run-interop): unmodified rdma-core and
//! perftest on the Linux kernel's rdma_rxe, in a QEMU guest, against the uroce
//! tools on the host side of the lab's network namespace, over uroce's packet
//! and udp links, each cell in both directions (rxe serves, uroce serves):
//! ibv_rc_pingpong and ibv_ud_pingpong, perftest's bandwidth and latency tests,
//! the RC ping-pong again under netem loss, and IPv6 GIDs (the link-local GID 0
//! and a global GID 2: rc_pingpong, ib_write_bw, ib_read_lat, rping over
//! rdma_cm to an IPv6 address). Every cell's capture passes `uroce dump
//! --check`; the script prints a results table.
//!
//! It needs root, QEMU and Debian's apt (it installs what it needs and builds
//! the guest into /var/cache/uroce-rxe-lab), and takes a few minutes once the
//! guest is cached, so it runs only when asked:
//!
//!     sudo UROCE_RXE_LAB=1 cargo test -p uroce-tests --test rxe_interop -- --nocapture
//!
//! Otherwise it prints `SKIP:` with the reason. UROCE_RXE_LAB_TIMEOUT (seconds,
//! default 1800) bounds the whole run; at the limit the script gets SIGTERM
//! (it tears the lab down), then SIGKILL (its watchdog does).

use uroce_tests::lab::{run_script, skip_reason};

#[test]
fn rxe_interop_matrix() {
    if let Some(reason) = skip_reason("the interop matrix against the kernel rxe", "rxe_interop") {
        println!("SKIP: {reason}");
        return;
    }
    let run = run_script("run-interop");
    let Some(status) = run.status else {
        panic!("run-interop did not finish within {} s (output above)", run.timeout.as_secs())
    };
    let failed: Vec<&str> = run
        .output
        .lines()
        .skip_while(|l| !l.starts_with("run-interop: FAILED cells:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    let why = if failed.is_empty() {
        let last = run.output.lines().rev().find(|l| l.contains("FAILED") || l.contains("cannot run"));
        last.unwrap_or("see the output above").to_string()
    } else {
        failed.join("; ")
    };
    assert!(status.success(), "run-interop failed ({status}): {why}");
}
