//! What the drop-in's test binaries share: the built library installed
//! under the names programs load, and two programs run as server and
//! client over it (or one of them a uroce tool).

#![allow(dead_code)] // each test binary uses its own part of this

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use uroce_stack::testnet::TestNet;

/// The cdylib cargo built beside the running test (in `deps/`), or beside that.
pub fn built_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let deps = exe.parent().expect("deps/");
    [deps, deps.parent().unwrap_or(deps)]
        .iter()
        .map(|d| d.join("liburoce_ibverbs.so"))
        .find(|p| p.exists())
        .expect("cargo builds liburoce_ibverbs.so with the tests")
}

/// The `uroce` binary of this build (`cargo test --workspace` builds it
/// beside the test binaries), if it is there.
pub fn uroce_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.parent()?;
    Some(dir.join("uroce")).filter(|p| p.exists())
}

/// A directory removed when dropped (std has none; this crate adds no
/// dependency for one).
pub struct Dir(PathBuf);

impl Dir {
    pub fn new(prefix: &str) -> Dir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create a temporary directory");
        Dir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A directory holding the library under the names programs load.
pub fn install_dir() -> Dir {
    let dir = Dir::new("uroce-dropin");
    std::fs::copy(built_library(), dir.path().join("libibverbs.so.1")).expect("copy the library");
    for link in ["librdmacm.so.1", "libibverbs.so"] {
        std::os::unix::fs::symlink("libibverbs.so.1", dir.path().join(link)).expect("symlink");
    }
    dir
}

/// Whether `tool` is installed; if not, says the test skips and why.
pub fn have(tool: &str) -> bool {
    let found =
        Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().is_ok_and(|o| o.status.success());
    if !found {
        println!("SKIP: {tool} is not installed (bash scripts/install-deps as root installs it)");
    }
    found
}

/// Runs `program args` over the drop-in with `UROCE_DEVICES=devices`.
pub fn run_over_dropin(dir: &Path, devices: &str, program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(program)
        .args(args)
        .env("LD_LIBRARY_PATH", dir)
        .env("UROCE_DEVICES", devices)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// A free TCP port for a program's out-of-band exchange.
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// Whether a process holds UDP port 4791 (RoCEv2) on `ip`: a uroce device
/// on the udp link is open there. Read from /proc/net/udp, as binding the
/// port to find out could take it from the server.
pub fn roce_port_bound(ip: Ipv4Addr) -> bool {
    let want = format!("{:08X}:12B7", u32::from_le_bytes(ip.octets()));
    std::fs::read_to_string("/proc/net/udp")
        .is_ok_and(|t| t.lines().any(|l| l.split_whitespace().nth(1) == Some(want.as_str())))
}

/// Waits (up to 5 s) for a device on the udp link at `ip`: a client
/// connecting over rdma_cm before the server's device is up would wait out
/// its REQ's retries.
fn wait_for_device(ip: Ipv4Addr) {
    for _ in 0..200 {
        if roce_port_bound(ip) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
}

/// How often a pair is started before a client that came too early fails
/// the test (each attempt is a second or two).
const PAIR_ATTEMPTS: u64 = 12;

/// What perftest prints when it cannot measure the CPU's clock: its
/// calibration (`get_cpu_mhz`) fits a line through cycle counts against
/// `gettimeofday` over a series of short intervals and gives up when the
/// fit's r^2 is below 0.9, which preemption on a loaded machine (the test
/// binaries run in parallel) can cause. It then prints no
/// report and fails, whatever the transfer did.
const PERFTEST_CLOCK_FAILED: &str = "Correlation coefficient r^2";

fn clock_failed(end: &str) -> String {
    format!("perftest's {end} could not calibrate its clock on this loaded machine (\"{PERFTEST_CLOCK_FAILED}\")")
}

/// One end of a pair: a program and its arguments, in which `{dev}` is
/// replaced by the end's device (a uroce link spec) and `{server}` by the
/// server's address. Over the drop-in, the device is given as
/// `UROCE_DEVICES`; a uroce tool takes it from its arguments.
pub struct End {
    pub program: String,
    pub args: Vec<String>,
    pub dropin: bool,
}

impl End {
    /// An unmodified program over the drop-in.
    pub fn dropin(program: &str, args: &[&str]) -> End {
        End { program: program.into(), args: args.iter().map(|a| a.to_string()).collect(), dropin: true }
    }

    /// A uroce tool (the `uroce` binary, `args` from its subcommand on).
    pub fn uroce(uroce: &Path, args: &[&str]) -> End {
        let program = uroce.display().to_string();
        End { program, args: args.iter().map(|a| a.to_string()).collect(), dropin: false }
    }

    /// Runs it (bounded by `timeout 60`) on device `dev`; the `timeout`
    /// process, its output piped.
    fn spawn(&self, dir: &Path, dev: &str, server: &str) -> std::process::Child {
        let args = self.args.iter().map(|a| a.replace("{dev}", dev).replace("{server}", server));
        let mut cmd = Command::new("timeout");
        cmd.arg("60").arg(&self.program).args(args);
        if self.dropin {
            cmd.env("LD_LIBRARY_PATH", dir).env("UROCE_DEVICES", dev);
        }
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        cmd.spawn().unwrap_or_else(|e| panic!("start {}: {e}", self.program))
    }
}

fn text_of(out: std::process::Output) -> (bool, String) {
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Runs `server` on one loopback address and, once its device is open,
/// `client` on another. A client that came too early (its output says
/// `not_ready`, or one of its `|`-separated texts: the server was not
/// listening yet) ends the attempt: the
/// server is stopped and both start again, as a client that half-connected
/// can leave a server (perftest -R's) waiting on it. perftest -R also races
/// itself: its client connects its second connection as soon as the first
/// is up, and a server slow to listen again (a loaded machine) rejects it;
/// hence up to [`PAIR_ATTEMPTS`] attempts. Asserts both succeed; their
/// outputs (client, server).
pub fn run_pair(server: End, client: End, not_ready: &str) -> (String, String) {
    run_pair_on(server, client, not_ready, false)
}

/// Runs `client` against a `server` that does not exit by itself (it
/// serves until stopped), then stops the server; asserts the client
/// succeeds; its output.
pub fn run_client_against(server: End, client: End) -> String {
    let net = TestNet::new();
    let dir = install_dir();
    let running = server.spawn(dir.path(), &net.udp(1), &net.ip(1).to_string());
    wait_for_device(net.ip(1));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let child = client.spawn(dir.path(), &net.udp(2), &net.ip(1).to_string());
    let (ok, text) = text_of(child.wait_with_output().expect("the client's output"));
    // SIGTERM to our own `timeout`, which passes it to the server it runs.
    let _ = Command::new("kill").args(["-TERM", &running.id().to_string()]).status();
    let (_, server_text) = text_of(running.wait_with_output().expect("the server's output"));
    assert!(ok, "{} {:?} client: {text}\nserver: {server_text}", client.program, client.args);
    text
}

/// [`run_pair`] with both ends on the server's address (`shared`), as two
/// programs share a host's `rxe0`, or each on its own.
pub fn run_pair_on(server: End, client: End, not_ready: &str, shared: bool) -> (String, String) {
    let net = TestNet::new();
    let dir = install_dir();
    let (server_dev, server_ip) = (net.udp(1), net.ip(1));
    let client_dev = if shared { net.udp(1) } else { net.udp(2) };
    for attempt in 1..=PAIR_ATTEMPTS {
        let running = server.spawn(dir.path(), &server_dev, &server_ip.to_string());
        wait_for_device(server_ip);
        std::thread::sleep(std::time::Duration::from_millis(100 * attempt.min(5)));
        let client_out = text_of(
            client
                .spawn(dir.path(), &client_dev, &server_ip.to_string())
                .wait_with_output()
                .expect("the client's output"),
        );
        let early = not_ready.split('|').any(|m| client_out.1.contains(m));
        let client_clock = client_out.1.contains(PERFTEST_CLOCK_FAILED);
        if (early || client_clock) && attempt < PAIR_ATTEMPTS {
            let why = if early { format!("the client came too early ({not_ready})") } else { clock_failed("client") };
            println!("{} {:?}: attempt {attempt}: {why}; both again", client.program, client.args);
            // SIGTERM to our own `timeout`, which passes it to the server it runs.
            let _ = Command::new("kill").args(["-TERM", &running.id().to_string()]).status();
            let _ = running.wait_with_output();
            continue;
        }
        let (server_ok, server_text) = text_of(running.wait_with_output().expect("the server's output"));
        if server_text.contains(PERFTEST_CLOCK_FAILED) && attempt < PAIR_ATTEMPTS {
            println!("{} {:?}: attempt {attempt}: {}; both again", server.program, server.args, clock_failed("server"));
            continue;
        }
        let ok = client_out.0 && !early;
        assert!(ok, "{} {:?} client: {}\nserver: {server_text}", client.program, client.args, client_out.1);
        assert!(server_ok, "{} {:?} server: {server_text}", server.program, server.args);
        return (client_out.1, server_text);
    }
    unreachable!("the last attempt returns or fails")
}
