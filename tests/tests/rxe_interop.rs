//! The interop matrix (tests/rxe-lab/run-interop): unmodified rdma-core and
//! perftest on the Linux kernel's rdma_rxe, in a QEMU guest, against the uroce
//! tools on the host side of the lab's network namespace, over uroce's packet
//! and udp links, each cell in both directions (rxe serves, uroce serves):
//! ibv_rc_pingpong and ibv_ud_pingpong, perftest's bandwidth and latency tests,
//! and the RC ping-pong again under netem loss. Every cell's capture passes
//! `uroce dump --check`; the script prints a results table.
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
            "the interop matrix against the kernel rxe runs only with UROCE_RXE_LAB=1, as root \
             (sudo UROCE_RXE_LAB=1 cargo test -p uroce-tests --test rxe_interop)"
                .into(),
        );
    }
    if !is_root() {
        return Some("the interop matrix needs root (network namespaces, TAP devices, apt-get)".into());
    }
    None
}

fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().expect("waiting for run-interop") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn rxe_interop_matrix() {
    if let Some(reason) = skip_reason() {
        println!("SKIP: {reason}");
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rxe-lab").join("run-interop");
    let timeout = std::env::var("UROCE_RXE_LAB_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let log_path = std::env::temp_dir().join(format!("uroce-rxe-interop-{}.log", std::process::id()));
    let log = File::create(&log_path).expect("log file");

    let mut child = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log file"))
        .stderr(log)
        .spawn()
        .expect("starting tests/rxe-lab/run-interop");

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
        None => panic!("run-interop did not finish within {} s (output above)", timeout.as_secs()),
        Some(status) => {
            let failed: Vec<&str> = output
                .lines()
                .skip_while(|l| !l.starts_with("run-interop: FAILED cells:"))
                .skip(1)
                .take_while(|l| l.starts_with("  "))
                .map(str::trim)
                .collect();
            let why = if failed.is_empty() {
                let last = output.lines().rev().find(|l| l.contains("FAILED") || l.contains("cannot run"));
                last.unwrap_or("see the output above").to_string()
            } else {
                failed.join("; ")
            };
            assert!(status.success(), "run-interop failed ({status}): {why}");
        }
    }
}
