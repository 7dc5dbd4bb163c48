//! `uroce devinfo`, `pingpong` and `ud_pingpong` as users run them: output in the
//! C tools' formats, both ends in one process (`--loopback`) and as two
//! processes, under impairment, and the errors a user can act on. Each test uses
//! its own loopback addresses (a [`TestNet`]) and TCP port so tests run in
//! parallel, with each other and with other test processes.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
mod common;

use common::*;
use std::process::Stdio;
use std::time::{Duration, Instant};
use uroce_verbs::TestNet;

/// A TCP port free right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Runs a pingpong over an impaired link, again (up to 3 runs) while it ends
/// in RETRY_EXC_ERR. The engine recovers from the link's 5% loss and
/// reordering with certainty in practice: the model of
/// transport/src/sim/pingpong.rs puts the chance of 8 rounds in a row without
/// progress near 5e-10 a message. What ends a run so (about 1% of them on
/// this 2-vCPU machine, more under load) is the thread of one end not being
/// scheduled for the 8 timeouts (0.54 s) its peer waits: its capture shows a
/// silence of 0.5 to 1 s, then all the peer's retransmissions read at once.
/// Such stalls come in bursts, hence more than one more run. Each timeout the
/// impairment causes costs 67 ms, so an impaired run lasts long enough to
/// meet one; -n is small.
fn run_impaired(args: &[&str]) -> (i32, String, String) {
    let mut r = run(args);
    for _ in 0..2 {
        if r.0 == 0 || !r.2.contains("transport retry counter exceeded") {
            break;
        }
        eprintln!("an end stopped answering for 8 timeouts (a thread not scheduled?); once more:\n{}", r.2);
        r = run(args);
    }
    r
}

fn assert_address_line(line: &str, local: bool, ud: bool) {
    let head = if local { "  local address:  LID 0x0000, QPN 0x" } else { "  remote address: LID 0x0000, QPN 0x" };
    assert!(line.starts_with(head), "{line:?}");
    let sep = if local && ud { ": GID " } else { ", GID " };
    assert!(line.contains(", PSN 0x") && line.contains(sep), "{line:?}");
}

fn assert_results(lines: &[&str], iters: u32, size: u32) {
    let bytes = u64::from(iters) * u64::from(size) * 2;
    let a = lines.iter().find(|l| l.starts_with(&format!("{bytes} bytes in "))).expect("bytes line");
    assert!(a.ends_with(" Mbit/sec") && a.contains(" seconds = "), "{a}");
    let b = lines.iter().find(|l| l.starts_with(&format!("{iters} iters in "))).expect("iters line");
    assert!(b.ends_with(" usec/iter"), "{b}");
}

#[test]
fn rc_loopback_checks_data_and_prints_like_ibv_rc_pingpong() {
    let net = TestNet::new();
    let (code, out, err) = run(&["pingpong", "--loopback", "-n", "200", "-c", "-d", &net.udp(1)]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_address_line(lines[0], true, false);
    assert_address_line(lines[1], false, false);
    assert_results(&lines, 200, 4096);
    assert!(lines.iter().any(|l| l.starts_with("server:   local address:  LID 0x0000")), "{out}");
}

#[test]
fn ud_loopback_prints_like_ibv_ud_pingpong() {
    let net = TestNet::new();
    let (code, out, err) = run(&["ud_pingpong", "--loopback", "-n", "100", "-s", "1024", "-c", "-d", &net.udp(1)]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_address_line(lines[0], true, true);
    assert_address_line(lines[1], false, true);
    assert_results(&lines, 100, 1024);
}

#[test]
fn two_processes_find_each_other() {
    let net = TestNet::new();
    // Each run on addresses of its own: no late packet of the first reaches the second.
    for (sub, server_host, client_host) in [("pingpong", 1, 2), ("ud_pingpong", 3, 4)] {
        let port = free_port().to_string();
        let server_dev = net.udp(server_host);
        let client_dev = net.udp(client_host);
        let server = uroce()
            .args([sub, "-n", "50", "-s", "512", "-p", &port, "-d", &server_dev])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The client retries its TCP connect until the server listens (bounded).
        let deadline = Instant::now() + Duration::from_secs(20);
        let client = loop {
            let (code, out, err) = run(&[sub, "-n", "50", "-s", "512", "-p", &port, "-d", &client_dev, "127.0.0.1"]);
            if code == 0 || !err.contains("Couldn't connect") || Instant::now() > deadline {
                break (code, out, err);
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let server = wait_output(server, Duration::from_secs(30));
        assert_eq!(client.0, 0, "{sub} client: {}", client.2);
        assert!(server.status.success(), "{sub} server: {}", String::from_utf8_lossy(&server.stderr));
        let s = String::from_utf8_lossy(&server.stdout);
        assert!(s.contains(&format!("GID ::ffff:{}", net.ip(client_host))), "{s}");
        assert_results(&client.1.lines().collect::<Vec<_>>(), 50, 512);
    }
}

#[test]
fn events_mode_and_impaired_link_still_verify() {
    // Each run on addresses of its own (--loopback's server takes the next one).
    let net = TestNet::new();
    let (code, out, err) = run(&["pingpong", "--loopback", "-e", "-n", "100", "-c", "-d", &net.udp(1)]);
    assert_eq!(code, 0, "{err}");
    assert_results(&out.lines().collect::<Vec<_>>(), 100, 4096);
    let dev = net.udp(3);
    let args = ["--loss", "0.05", "--reorder", "0.05", "--seed", "7", "--stats", "-d", &dev];
    let (code, out, err) = run_impaired(&[&["pingpong", "--loopback", "-n", "30", "-c"][..], &args[..]].concat());
    assert_eq!(code, 0, "{err}");
    let retried = out.lines().any(|l| {
        let mut f = l.split_whitespace();
        matches!((f.next(), f.next()), (Some("duplicate_request" | "rcvd_seq_err" | "out_of_seq_request"), Some(v)) if v != "0")
    });
    assert!(retried, "5% loss should show in the counters:\n{out}");
}

#[test]
fn loopback_capture_decodes_with_every_icrc_ok() {
    let net = TestNet::new();
    let dir = std::env::temp_dir().join(format!("uroce-pp-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("pp.pcap");
    let (code, _, err) =
        run(&["pingpong", "--loopback", "-n", "20", "--pcap", pcap.to_str().unwrap(), "-d", &net.udp(1)]);
    assert_eq!(code, 0, "{err}");
    for side in ["server", "client"] {
        let f: PathBuf = dir.join(format!("pp-{side}.pcap"));
        let (code, out, err) = run(&["dump", "--check", f.to_str().unwrap()]);
        assert_eq!(code, 0, "{side}: {err}\n{out}");
        let last = out.lines().last().unwrap();
        // 20 iterations of 4 KiB at MTU 1024: 4 SENDs and an ACK each way, both
        // directions, so at least 200 frames (a loaded machine may retransmit).
        let counts: Vec<u64> = last.split(", ").map(|f| f.split(' ').next().unwrap().parse().unwrap()).collect();
        let [frames, roce, ok, bad, malformed] = counts[..] else { panic!("{last}") };
        assert!(frames >= 200 && roce == frames && ok == frames && bad == 0 && malformed == 0, "{side}: {last}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn devinfo_has_ibv_devinfo_layout() {
    let net = TestNet::new();
    let dev = net.udp(1);
    let (code, out, err) = run(&["devinfo", "-v", "-d", &dev]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&format!("hca_id:\t{dev}\n\ttransport:\t\t\tInfiniBand (0)\n")), "{out}");
    // The IPv4-mapped GID of the device's address, in 16-bit groups.
    let [a, b, c, d] = net.ip(1).octets();
    let gid = format!("\t\t\tGID[  1]:\t\t0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}, RoCE v2\n");
    for needle in [
        "\t\tport:\t1\n",
        "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
        "\t\t\tmax_mtu:\t\t4096 (5)\n",
        "\t\t\tlink_layer:\t\tEthernet\n",
        "\tatomic_cap:\t\t\tATOMIC_HCA (1)\n",
        gid.as_str(),
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
    let (code, out, _) = run(&["devinfo", "-l"]);
    assert_eq!(code, 0);
    assert!(out.contains(" found:\n\tudp:127.0.0.1\n"), "{out}");
}

/// `devinfo -v` shows a device's counters as rxe shows its hw_counters:
/// summed over every program that used the device (each publishes its own
/// into the runtime directory, and adds them there when it closes).
#[test]
fn devinfo_v_sums_the_counters_of_every_run_on_the_device() {
    let net = TestNet::new();
    let dir = std::env::temp_dir().join(format!("uroce-devinfo-counters-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let with_dir = |args: &[&str]| outcome(uroce().args(args).env("UROCE_RUNTIME_DIR", &dir).output().unwrap());
    let (dev1, dev2) = (net.udp(1), net.udp(2));
    let mut sent_by_runs = 0;
    for _ in 0..2 {
        let (code, out, err) = with_dir(&["perf", "write_bw", "--loopback", "-d", &dev1, "-n", "50", "--stats"]);
        assert_eq!(code, 0, "{err}");
        let sent: Vec<u64> = out.lines().filter_map(|l| counter(l, "sent_pkts")).collect();
        assert_eq!(sent.len(), 2, "one block per end:\n{out}");
        sent_by_runs += sent.iter().sum::<u64>();
    }
    let shown = |dev: &str| {
        let (code, out, err) = with_dir(&["devinfo", "-v", "-d", dev]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("\t\t\tcounters:\t\t"), "{out}");
        counter(&out, "sent_pkts").unwrap_or_else(|| panic!("no sent_pkts in\n{out}"))
    };
    assert!(sent_by_runs > 0);
    assert_eq!(shown(&dev1) + shown(&dev2), sent_by_runs, "devinfo -v sums both runs of both ends");
    assert_eq!(shown(&net.udp(3)), 0, "a device nobody used");

    // A runtime directory others may write to is not trusted.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let (code, out, _) = with_dir(&["devinfo", "-v", "-d", &dev1]);
    assert_eq!(code, 0);
    assert!(out.contains("counters:\t\tnot readable: ") && out.contains("is not a private directory"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn errors_name_the_cause_and_the_fix() {
    let net = TestNet::new();
    let dev: Vec<String> = (1..=5).map(|host| net.udp(host)).collect();
    let cases: [(&[&str], &str); 6] = [
        (&["pingpong", "-g", "9", "-d", &dev[0], "127.0.0.1"], "no GID index 9"),
        (&["pingpong", "-i", "2", "-d", &dev[1]], "give -i 1"),
        (&["pingpong", "-m", "3000", "-d", &dev[2]], "256, 512, 1024, 2048, 4096"),
        (&["ud_pingpong", "-s", "5000", "-d", &dev[3]], "Requested size larger than port MTU (4096)"),
        (&["pingpong", "-d", "eth0:nope"], "expected udp:IP"),
        (&["pingpong", "-p", "1", "-d", &dev[4], "127.0.0.1"], "Couldn't connect to 127.0.0.1:1"),
    ];
    for (args, needle) in cases {
        let (code, _, err) = run(args);
        assert_ne!(code, 0, "{args:?} succeeded");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
}

/// A pingpong server that answers the exchange with a peer that does not exist.
#[test]
fn an_unreachable_peer_is_a_retry_error_not_a_hang() {
    let net = TestNet::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    // LID 0, QPN 0x000123, PSN 0x000001, GID ::ffff: and address 9 of the net (nobody there).
    let nobody = u32::from(net.ip(9));
    let fake = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut msg = [0u8; 52];
        s.read_exact(&mut msg).unwrap();
        let mut reply = format!("0000:000123:000001:00000000000000000000ffff{nobody:08x}").into_bytes();
        reply.push(0);
        s.write_all(&reply).unwrap();
        let _ = s.read(&mut msg);
    });
    let (code, _, err) = run(&["pingpong", "-n", "5", "-p", &port, "-d", &net.udp(1), "127.0.0.1"]);
    fake.join().unwrap();
    assert_eq!(code, 1);
    assert!(err.contains("Failed status transport retry counter exceeded (12) for wr_id 2"), "{err}");
    assert!(err.contains("the peer does not answer"), "{err}");
}
