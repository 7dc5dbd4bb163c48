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

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

fn is_root() -> bool {
    // The effective UID, from /proc (no libc dependency).
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Uid:")).and_then(|l| l.split_whitespace().nth(2).map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

fn skip_reason() -> Option<String> {
    if std::env::var("UROCE_RXE_LAB").as_deref() != Ok("1") {
        return Some(
            "the kernel-rxe lab runs only with UROCE_RXE_LAB=1, as root \
             (sudo UROCE_RXE_LAB=1 cargo test -p uroce-tests --test rxe_lab)"
                .into(),
        );
    }
    if !is_root() {
        return Some("the kernel-rxe lab needs root (network namespaces, TAP devices, apt-get)".into());
    }
    None
}

fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().expect("waiting for run-selftest") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn rxe_lab_selftest() {
    if let Some(reason) = skip_reason() {
        println!("SKIP: {reason}");
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rxe-lab").join("run-selftest");
    let timeout = std::env::var("UROCE_RXE_LAB_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let log_path = std::env::temp_dir().join(format!("uroce-rxe-lab-selftest-{}.log", std::process::id()));
    let log = File::create(&log_path).expect("log file");

    let mut child = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log file"))
        .stderr(log)
        .spawn()
        .expect("starting tests/rxe-lab/run-selftest");

    let status = match wait_until(&mut child, Instant::now() + timeout) {
        Some(status) => Some(status),
        None => {
            // SIGTERM: the script's trap tears the lab down; give it time.
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
            if wait_until(&mut child, Instant::now() + Duration::from_secs(60)).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
            None
        }
    };
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    let _ = std::fs::remove_file(&log_path);
    // Straight to stderr, past the test harness's capture: CI's log shows the
    // results table on every run, not only when the test fails.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{output}\n").as_bytes());
    match status {
        None => panic!("run-selftest did not finish within {} s (output above)", timeout.as_secs()),
        Some(status) => assert!(
            status.success(),
            "run-selftest failed ({status}): {}",
            output.lines().rev().find(|l| l.contains("FAILED")).unwrap_or("see the output above")
        ),
    }
}
