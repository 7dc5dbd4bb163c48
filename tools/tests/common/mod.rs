//! What the CLI tests share: running the `uroce` binary, bounded in time.
#![allow(dead_code)] // each test crate uses its own part

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn uroce() -> Command {
    Command::new(env!("CARGO_BIN_EXE_uroce"))
}

/// Exit code (-1 if killed), stdout, stderr.
pub fn outcome(out: Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// Runs `uroce ARGS` to the end.
pub fn run(args: &[&str]) -> (i32, String, String) {
    outcome(uroce().args(args).output().unwrap())
}

pub fn spawn(args: &[&str]) -> Child {
    uroce().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// Waits for a child, killing it (by PID, ours) if it outlives `limit`.
pub fn wait_output(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// [`wait_output`], as exit code, stdout, stderr.
pub fn wait_bounded(child: Child, limit: Duration) -> (i32, String, String) {
    outcome(wait_output(child, limit))
}

pub use uroce_stack::link::netns::is_root;

/// A Python stand-in for ibv_rc_pingpong's server, up to the client's
/// 52-byte `LID:QPN:PSN:GID`: it listens on TCP `port`, prints `listening`,
/// accepts `c` and reads the message into `msg`; `then` (Python) answers.
pub fn fake_pingpong_server(port: u16, then: &str) -> String {
    format!(
        r#"import socket
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", {port})); l.listen(1)
print("listening", flush=True)
c, _ = l.accept()
msg = b""
while len(msg) < 52:
    msg += c.recv(52 - len(msg))
{then}"#
    )
}

/// The value of counter `name` in what `--stats` printed.
pub fn counter(out: &str, name: &str) -> Option<u64> {
    out.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some(name)).then(|| w.next()?.parse().ok()).flatten()
    })
}

/// Whether `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|st| st.success())
}

/// Prints why `test` cannot run, and says so, when it is not root or one of
/// `tools` is missing.
pub fn skip_unless_root_with(test: &str, tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !have(t)).collect();
    if is_root() && missing.is_empty() {
        return false;
    }
    println!("SKIP: {test}: needs root and {} (missing: {missing:?}, root: {})", tools.join(", "), is_root());
    true
}

/// The CM messages of a capture as tshark decodes them, in order (None
/// without tshark); panics if it flags any of them as malformed.
pub fn tshark_cm_names(pcap: &std::path::Path) -> Option<Vec<String>> {
    let run = |filter: &str, field: &str| {
        Command::new("tshark").args(["-r", pcap.to_str().unwrap(), "-Y", filter, "-T", "fields", "-e", field]).output()
    };
    let Ok(out) = run("infiniband.mad", "_ws.col.Info") else {
        println!("SKIP: tshark not found; install it with `apt-get install tshark` for the CM decode check");
        return None;
    };
    // Only the MADs: tshark takes tiny SENDs of other frames for RPC over RDMA.
    let flagged =
        run("infiniband.mad && (_ws.malformed || _ws.expert.severity >= \"warning\")", "frame.number").unwrap();
    assert!(flagged.stdout.is_empty(), "tshark flags frames {}", String::from_utf8_lossy(&flagged.stdout));
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.lines().map(|l| l.trim_start_matches("CM: ").trim().to_string()).collect())
}
