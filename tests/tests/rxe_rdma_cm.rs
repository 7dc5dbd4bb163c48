//! rdma_cm against the kernel's rxe (tests/rxe-lab/interop-rdma-cm): rdmacm-utils'
//! rping and perftest's ib_send_bw -R / ib_write_bw -R in a QEMU guest against
//! `uroce rping` and `uroce perf -R`, both directions, over uroce's packet and
//! udp links; every capture passes `uroce dump --check` and tshark decodes
//! its CM MADs (ConnectRequest, ConnectReply, ReadyToUse, ...) unflagged.
//!
//! Root, QEMU and the lab's guest are needed; it runs only when asked:
//!
//!     sudo UROCE_RXE_LAB=1 cargo test -p uroce-tests --test rxe_rdma_cm -- --nocapture
//!
//! Otherwise it prints `SKIP:` with the reason. UROCE_RXE_LAB_TIMEOUT (seconds,
//! default 1800) bounds the run: then SIGTERM (the script tears the lab down),
//! then SIGKILL.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Uid:")).and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn skip_reason() -> Option<&'static str> {
    if std::env::var("UROCE_RXE_LAB").as_deref() != Ok("1") {
        return Some("the rdma_cm interop runs only with UROCE_RXE_LAB=1, as root (sudo UROCE_RXE_LAB=1 cargo test -p uroce-tests --test rxe_rdma_cm)");
    }
    if !is_root() {
        return Some("the rdma_cm interop needs root (network namespaces, TAP devices)");
    }
    None
}

fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().expect("waiting for interop-rdma-cm") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn rping_and_perftest_rdma_cm_against_the_kernel_rxe() {
    if let Some(reason) = skip_reason() {
        println!("SKIP: {reason}");
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rxe-lab").join("interop-rdma-cm");
    let timeout = std::env::var("UROCE_RXE_LAB_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let log_path = std::env::temp_dir().join(format!("uroce-rxe-rdma-cm-{}.log", std::process::id()));
    let log = File::create(&log_path).expect("log file");
    let mut child = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log file"))
        .stderr(log)
        .spawn()
        .expect("starting tests/rxe-lab/interop-rdma-cm");
    let status = wait_until(&mut child, Instant::now() + timeout);
    if status.is_none() {
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        if wait_until(&mut child, Instant::now() + Duration::from_secs(60)).is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    let _ = std::fs::remove_file(&log_path);
    // Straight to stderr, past the test harness's capture: CI's log shows the
    // results table on every run, not only when the test fails.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{output}\n").as_bytes());
    match status {
        None => panic!("interop-rdma-cm did not finish within {} s (output above)", timeout.as_secs()),
        Some(s) => assert!(s.success(), "interop-rdma-cm failed ({s}): see the table above"),
    }
}
