//! Flags that cannot work on this device or link, and `--loopback` ends that
//! cannot run: each fails at once, with one line that says what to do, and a
//! non-zero exit. Each test's loopback addresses are its own, from a
//! [`TestNet`].

mod common;

use common::{is_root, outcome, run, uroce};
use uroce_verbs::TestNet;

/// `uroce ARGS` fails with exactly `message` on stderr (one line) and `code`.
fn fails_with(args: &[&str], code: i32, message: &str) {
    let (got, out, err) = run(args);
    assert_eq!(got, code, "{args:?}: exit {got}\nstdout: {out}\nstderr: {err}");
    assert_eq!(err.trim_end(), message, "{args:?}\nstdout: {out}");
}

#[test]
fn a_loopback_device_that_cannot_serve_both_ends_is_refused_up_front() {
    let net = TestNet::new();
    let one = |dev: &str| {
        format!(
            "--loopback runs two ends, each on a device of its own, and -d {dev} is one: \
             give the server end its own with --server-dev DEV (another interface, or the same one with its own ,ip= and ,mac=), \
             or leave -d out to run both ends on udp loopback addresses"
        )
    };
    fails_with(&["pingpong", "--loopback", "-d", "packet:lo"], 1, &one("packet:lo"));
    fails_with(&["ud_pingpong", "--loopback", "-d", "tap:t0,ip=10.0.0.1/24"], 1, &one("tap:t0,ip=10.0.0.1/24"));
    fails_with(&["perf", "write_bw", "--loopback", "-d", "packet:lo"], 1, &format!("uroce perf: {}", one("packet:lo")));
    let dev = net.udp(1);
    fails_with(
        &["pingpong", "--loopback", "-d", &dev, "--server-dev", &dev],
        1,
        &format!("--loopback: -d and --server-dev are both {dev}: each end needs a device of its own (another address, or another interface)"),
    );
    let (code, _, err) = run(&["pingpong", "--server-dev", &net.udp(2)]);
    assert_eq!(code, 2, "--server-dev needs --loopback: {err}");
    assert!(err.contains("--loopback"), "{err}");
}

#[test]
fn two_ends_on_one_address_are_refused() {
    // Two raw ends on one interface and MAC share its link-local address.
    if !is_root() {
        println!("SKIP: two_ends_on_one_address_are_refused: opening packet:lo needs root (CAP_NET_RAW)");
        return;
    }
    let net = TestNet::new();
    let (client, server) = (format!("packet:lo,ip={}", net.ip(3)), format!("packet:lo,ip={}", net.ip(4)));
    fails_with(
        &["pingpong", "--loopback", "-d", &client, "--server-dev", &server],
        1,
        &format!(
            "--loopback: both ends have address fe80::200:ff:fe00:0 ({client} and {server}): \
             give each end its own address (on one interface, its own ,ip= and ,mac=) with -d and --server-dev"
        ),
    );
}

/// The failing end's own error, and only it, is what the user reads.
#[test]
fn a_loopback_end_that_cannot_open_its_device_says_why_and_nothing_else() {
    let net = TestNet::new();
    let dev = net.udp(5);
    let args = ["pingpong", "--loopback", "-d", &dev, "--server-dev", "packet:lo"];
    let want = "server: ibv_open_device: opening an AF_PACKET socket on lo needs CAP_NET_RAW: \
                run as root, or `sudo setcap cap_net_raw+ep` on the program";
    if !is_root() {
        fails_with(&args, 1, want);
        return;
    }
    let out = std::process::Command::new("runuser")
        .args(["-u", "nobody", "--", env!("CARGO_BIN_EXE_uroce")])
        .args(args)
        .output();
    let Ok(out) = out else {
        println!(
            "SKIP: a_loopback_end_that_cannot_open_its_device_says_why: needs runuser to run as an unprivileged user"
        );
        return;
    };
    let (code, stdout, err) = common::outcome(out);
    if err.contains("Permission denied") && code != 1 {
        println!("SKIP: a_loopback_end_that_cannot_open_its_device_says_why: nobody cannot run the binary: {err}");
        return;
    }
    assert_eq!((code, err.trim_end(), stdout.as_str()), (1, want, ""));
}

/// Ends that find out after the exchange began that they cannot run together
/// (the server's device has a smaller MTU than the client asks for): one
/// end's own finding is the one line printed, never the other end's report of
/// a closed connection. Both ends find the mismatch, so either may be first.
#[test]
fn a_loopback_end_that_fails_mid_run_is_the_only_error() {
    let net = TestNet::new();
    let mut cmd = uroce();
    cmd.args(["perf", "write_bw", "--loopback", "-m", "2048", "-n", "5", "-d", &net.udp(6)]);
    cmd.args(["--server-dev", &format!("{},mtu=1024", net.udp(8))]);
    let (code, out, err) = common::outcome(cmd.output().unwrap());
    assert_eq!(code, 1, "{out}{err}");
    let causes = [
        "uroce perf: server: MTU mismatch: the peer asked for -m 2048 but this end's MTU is 1024: give both ends the same -m (or none)",
        "uroce perf: client: MTU mismatch: this end asked for -m 2048 but the peer's MTU is 1024: give both ends the same -m (or none)",
    ];
    assert!(causes.contains(&err.trim_end()), "{err}\nstdout: {out}");
}

#[test]
fn sizes_past_the_device_limit_are_refused_with_the_limit() {
    let net = TestNet::new();
    let max = "max_msg_sz 2147483648 bytes";
    fails_with(
        &["pingpong", "--loopback", "-s", "3000000000", "-n", "1", "-d", &net.udp(7)],
        1,
        &format!("-s 3000000000: larger than the device's largest message ({max}): give -s 2147483648 or less"),
    );
    fails_with(
        &["perf", "write_bw", "--loopback", "-s", "3000000000", "-d", &net.udp(9)],
        1,
        "uroce perf: Message Size should be between 1 and 2147483647",
    );
    fails_with(
        &["ud_pingpong", "--loopback", "-s", "5000", "-d", &net.udp(11)],
        1,
        "Requested size larger than port MTU (4096): give -s 4096 or less",
    );
    fails_with(
        &["perf", "send_bw", "--loopback", "-c", "UD", "-s", "8000", "-d", &net.udp(12)],
        1,
        "uroce perf: Max message size in UD cannot be greater than MTU (4096): give -s 4096 or less",
    );
    fails_with(
        &["rping", "-c", "-a", &net.ip(13).to_string(), "-S", "100000"],
        22,
        "Invalid size 100000 (valid range is 26 to 65536)",
    );
}

#[test]
fn pingpong_flags_the_device_cannot_honour_are_refused() {
    let net = TestNet::new();
    let dev = net.udp(15);
    let d = ["--loopback", "-d", &dev];
    let with = |extra: &[&'static str]| [&["pingpong"][..], &d, extra].concat();
    fails_with(
        &with(&["-r", "20000"]),
        1,
        "-r 20000: the device's queues hold at most 16384 receives: give -r 16384 or less",
    );
    fails_with(
        &with(&["-g", "5"]),
        1,
        &format!("-g 5: {dev} has no GID index 5 (it has 2; `uroce devinfo -v -d {dev}` lists them): give -g 1"),
    );
    fails_with(&with(&["-l", "16"]), 1, "-l 16: a service level is 0 to 15");
    fails_with(&with(&["--loss", "2"]), 1, "--loss 2: give a probability between 0 and 1");
    fails_with(&["pingpong", "-p", "0"], 1, "-p 0: give the TCP port both ends use, 1 to 65535 (default 18515)");
}

#[test]
fn perf_flags_the_device_cannot_honour_are_refused() {
    let net = TestNet::new();
    let dev = net.udp(17);
    fails_with(
        &["perf", "write_bw", "--loopback", "-x", "7", "-d", &dev],
        1,
        &format!(
            "uroce perf: -x 7: {dev} has no GID index 7 (it has 2; `uroce devinfo -v -d {dev}` lists them): give -x 1"
        ),
    );
}

#[test]
fn rping_flags_that_cannot_work_are_refused() {
    let net = TestNet::new();
    let server_ip = net.ip(19).to_string();
    let a = ["rping", "-c", "-a", &server_ip, "-C", "1"];
    let with = |extra: &[&'static str]| [&a[..], extra].concat();
    fails_with(
        &["rping", "-s", "-c", "-a", &server_ip],
        22,
        "uroce rping: -s and -c: give one (-s waits for a client, -c connects to -a)",
    );
    fails_with(
        &with(&["-p", "0"]),
        22,
        "uroce rping: -p 0: give the port the server listens on (rping's default is 7174)",
    );
    fails_with(
        &with(&["--cm-timeout", "40"]),
        22,
        "uroce rping: --cm-timeout 40: give 0 to 31 (4.096 us x 2^N; the kernel's is 20)",
    );
    fails_with(
        &with(&["--cm-retries", "30"]),
        22,
        "uroce rping: --cm-retries 30: give 0 to 15 (the REQ carries 4 bits; the kernel's is 15)",
    );
}

/// `uroce exec` without the drop-in installed says how to install it; a
/// program that does not exist is named.
#[test]
fn exec_says_what_is_missing() {
    let (code, out, err) =
        outcome(uroce().args(["exec", "--", "true"]).env("UROCE_DROPIN_DIR", "/nonexistent").output().unwrap());
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(
        err.trim_end(),
        "uroce exec: no drop-in libibverbs in /nonexistent: run `bash scripts/dropin` first (or set UROCE_DROPIN_DIR to where it is)"
    );
    let dir = std::env::temp_dir().join(format!("uroce-exec-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("libibverbs.so.1"), b"").unwrap();
    let (code, _, err) =
        outcome(uroce().args(["exec", "--", "/nonexistent/prog"]).env("UROCE_DROPIN_DIR", &dir).output().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 127);
    assert!(err.starts_with("uroce exec: cannot run /nonexistent/prog: "), "{err}");
}
