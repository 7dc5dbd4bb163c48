//! Running a script of the kernel-rxe lab (tests/rxe-lab) from a test: only
//! when asked (UROCE_RXE_LAB=1, as root), bounded in time, its output shown
//! on every run.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use uroce_stack::link::netns::is_root;

/// Why the lab cannot run here, if it cannot: `what` names the run, `test`
/// the cargo test target that runs it.
pub fn skip_reason(what: &str, test: &str) -> Option<String> {
    if std::env::var("UROCE_RXE_LAB").as_deref() != Ok("1") {
        return Some(format!(
            "{what} runs only with UROCE_RXE_LAB=1, as root (sudo UROCE_RXE_LAB=1 cargo test -p uroce-tests --test {test})"
        ));
    }
    if !is_root() {
        return Some(format!("{what} needs root (network namespaces, TAP devices, apt-get for QEMU and the guest)"));
    }
    None
}

/// How a script run ended.
pub struct ScriptRun {
    /// `None`: it did not finish within `timeout` (it was ended).
    pub status: Option<ExitStatus>,
    /// Its stdout and stderr.
    pub output: String,
    pub timeout: Duration,
}

/// Runs tests/rxe-lab/`script`, at most UROCE_RXE_LAB_TIMEOUT seconds
/// (default 1800): past it SIGTERM (the script's trap tears the lab down),
/// a minute later SIGKILL (its watchdog does). Its output goes straight to
/// stderr, past the test harness's capture: CI's log shows the results
/// table on every run, not only when the test fails.
pub fn run_script(script: &str) -> ScriptRun {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rxe-lab").join(script);
    let timeout = std::env::var("UROCE_RXE_LAB_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let log_path = std::env::temp_dir().join(format!("uroce-{script}-{}.log", std::process::id()));
    let log = File::create(&log_path).expect("log file");
    let mut child = Command::new("bash")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log file"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("starting tests/rxe-lab/{script}: {e}"));
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
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{output}\n").as_bytes());
    ScriptRun { status, output, timeout }
}

fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().expect("waiting for a lab script") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
