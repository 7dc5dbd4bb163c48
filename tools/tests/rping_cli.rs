//! `uroce rping` as users run it: two processes on loopback with rping's
//! output, refusals (nobody listening, nobody there) within a bounded time,
//! a disconnect from the server's side, -q, and rping's argument errors.
//! Each test has its own loopback addresses, from a [`TestNet`].

mod common;

use common::*;
use std::process::Child;
use std::time::Duration;
use uroce_verbs::TestNet;

/// A server on `addr`, given a moment to listen.
fn server(args: &[&str]) -> Child {
    let s = spawn(args);
    std::thread::sleep(Duration::from_millis(300));
    s
}

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn client_and_server_ping_validate_and_print_like_rping() {
    let net = TestNet::new();
    let (server_ip, client_ip) = (net.ip(1).to_string(), net.ip(2).to_string());
    let s = server(&["rping", "-s", "-a", &server_ip, "-p", "7200", "-S", "1024", "-v"]);
    let c =
        spawn(&["rping", "-c", "-a", &server_ip, "-I", &client_ip, "-p", "7200", "-C", "20", "-S", "1024", "-V", "-v"]);
    let (code, out, err) = wait_bounded(c, LIMIT);
    assert_eq!(code, 0, "client: {out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 20, "{out}");
    assert!(lines[0].starts_with("ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abc"), "{}", lines[0]);
    assert!(lines[19].starts_with("ping data: rdma-ping-19: TUVWXYZ"), "{}", lines[19]);
    // 1023 characters of text and the NUL.
    assert_eq!(lines[5].len(), "ping data: ".len() + 1023);
    let (code, out, err) = wait_bounded(s, LIMIT);
    assert_eq!(code, 0, "server: {out}{err}");
    let served: Vec<&str> = out.lines().collect();
    assert_eq!(served.len(), 20);
    assert_eq!(served[7].strip_prefix("server ").unwrap(), lines[7]);
    assert_eq!(err, "server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n");
}

/// `--ladder` on the client: after rping's lines, the ladder of its run:
/// the CM exchange between the QP1s, then rping's SEND, READ, SEND, WRITE
/// rounds on the RC QPs.
#[test]
fn the_client_draws_its_run_with_ladder() {
    let net = TestNet::new();
    let (server_ip, client_ip) = (net.ip(1).to_string(), net.ip(2).to_string());
    let s = server(&["rping", "-s", "-a", &server_ip, "-p", "7201", "-C", "2"]);
    let mut c = uroce();
    c.args(["rping", "-c", "-a", &server_ip, "-I", &client_ip, "-p", "7201", "-C", "2", "-v", "--ladder"]);
    let c = c.env("COLUMNS", "120").stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let (code, out, err) = wait_bounded(c.spawn().unwrap(), LIMIT);
    assert_eq!(code, 0, "client: {out}{err}");
    let (pings, ladder) = out.split_at(out.find("QP 0x").expect("a ladder"));
    assert_eq!(pings.lines().filter(|l| l.starts_with("ping data: rdma-ping-")).count(), 2);
    let ladder = ladder.replace('|', " ").split_whitespace().collect::<Vec<_>>().join(" ");
    let at = |needle: &str| ladder.find(needle).unwrap_or_else(|| panic!("no {needle} in the ladder:\n{out}"));
    assert!(at("CM ConnectRequest") < at("CM ReadyToUse") && at("CM ReadyToUse") < at("SEND_ONLY PSN"));
    assert!(at("SEND_ONLY PSN") < at("READ_REQUEST PSN") && at("READ_REQUEST PSN") < at("WRITE_ONLY PSN"));
    let _ = wait_bounded(s, LIMIT);
}

#[test]
fn nobody_listening_on_the_port_is_rejected_at_once() {
    let net = TestNet::new();
    let (server_ip, client_ip) = (net.ip(1).to_string(), net.ip(2).to_string());
    let s = server(&["rping", "-s", "-a", &server_ip, "-p", "7201"]);
    let c = spawn(&["rping", "-c", "-a", &server_ip, "-I", &client_ip, "-p", "7202", "-C", "1", "--stats"]);
    let (code, out, err) = wait_bounded(c, LIMIT);
    assert_eq!((code, err.as_str()), (255, "cma event RDMA_CM_EVENT_REJECTED, error 8\n"), "{out}");
    // At once: the one REQ was answered, none was sent again.
    assert_eq!(counter(&out, "link_tx_packets"), Some(1), "{out}");
    let mut s = s;
    let _ = s.kill();
    let _ = s.wait();
}

#[test]
fn nobody_there_is_unreachable_after_the_retries() {
    // No uroce on address 9: the REQ and one retry, 2 x 1024 ms + 1 ms each.
    let net = TestNet::new();
    let (nobody, client_ip) = (net.ip(9).to_string(), net.ip(2).to_string());
    let args = [
        "rping",
        "-c",
        "-a",
        &nobody,
        "-I",
        &client_ip,
        "-C",
        "1",
        "--cm-timeout",
        "8",
        "--cm-retries",
        "1",
        "--stats",
    ];
    let (code, out, err) = wait_bounded(spawn(&args), LIMIT);
    assert_eq!((code, err.as_str()), (255, "cma event RDMA_CM_EVENT_UNREACHABLE, error -110\n"), "{out}");
    // After the retries: the REQ and its one retry went out, nothing more.
    assert_eq!(counter(&out, "link_tx_packets"), Some(2), "{out}");
}

#[test]
fn a_server_that_fails_disconnects_its_client() {
    // The server's buffer is smaller than the client's ping: its READ fails,
    // it disconnects, and the client hears DISCONNECTED and ends well, as rping does.
    let net = TestNet::new();
    let (server_ip, client_ip) = (net.ip(1).to_string(), net.ip(2).to_string());
    let s = server(&["rping", "-s", "-a", &server_ip, "-p", "7203", "-S", "32"]);
    let c = spawn(&["rping", "-c", "-a", &server_ip, "-I", &client_ip, "-p", "7203", "-C", "3", "-S", "512"]);
    let (code, out, err) = wait_bounded(c, LIMIT);
    assert_eq!(code, 0, "client: {out}{err}");
    assert!(err.contains("client DISCONNECT EVENT...\n"), "{err}");
    assert!(err.contains("wait for RDMA_WRITE_ADV state 10"), "{err}");
    let (code, out, err) = wait_bounded(s, LIMIT);
    assert_eq!(code, 255, "server: {out}{err}");
    // rping's lines (uroce's explanation of the failed completion comes first).
    assert!(
        err.contains("cq completion failed status 4\nwait for RDMA_READ_COMPLETE state 11\nrping server failed: -1\n"),
        "{err}"
    );
}

#[test]
fn self_managed_qps_with_q() {
    let net = TestNet::new();
    let (server_ip, client_ip) = (net.ip(1).to_string(), net.ip(2).to_string());
    let s = server(&["rping", "-s", "-q", "-a", &server_ip, "-p", "7204"]);
    let c = spawn(&["rping", "-c", "-q", "-a", &server_ip, "-I", &client_ip, "-p", "7204", "-C", "5", "-V", "-v"]);
    let (code, out, err) = wait_bounded(c, LIMIT);
    assert_eq!(code, 0, "client: {out}{err}");
    assert_eq!(out.lines().count(), 5);
    let (code, out, err) = wait_bounded(s, LIMIT);
    assert_eq!(code, 0, "server: {out}{err}");
}

#[test]
fn debug_output_and_a_capture_of_the_cm_exchange() {
    let net = TestNet::new();
    let (server_ip, client_ip) = (net.ip(1).to_string(), net.ip(2).to_string());
    let dir = std::env::temp_dir().join(format!("uroce-rping-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("server.pcap");
    let s = server(&["rping", "-s", "-a", &server_ip, "-p", "7205", "--pcap", pcap.to_str().unwrap()]);
    let c = spawn(&["rping", "-c", "-d", "-a", &server_ip, "-I", &client_ip, "-p", "7205", "-C", "2"]);
    let (code, out, err) = wait_bounded(c, LIMIT);
    assert_eq!(code, 0, "{out}{err}");
    for line in [
        "client",
        "cma_event type RDMA_CM_EVENT_ADDR_RESOLVED cma_id 0x",
        "rdma_resolve_addr - rdma_resolve_route successful",
        "rdma_connect successful",
        "recv completion",
    ] {
        assert!(out.contains(line), "{line:?} missing from {out}");
    }
    assert_eq!(wait_bounded(s, LIMIT).0, 0);
    // The CM messages, as `uroce dump` reads them.
    let dump = uroce().args(["dump", pcap.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(dump.status.success(), "{text}");
    let ud_to_qp1 = text.lines().filter(|l| l.contains("UD SEND ONLY") || l.contains("UD_SEND_ONLY")).count();
    assert_eq!(ud_to_qp1, 5, "REQ, REP, RTU, DREQ, DREP:\n{text}");
    // Wireshark's InfiniBand dissector names them, and flags nothing.
    if let Some(names) = tshark_cm_names(&pcap) {
        assert_eq!(names, ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rpings_argument_errors() {
    let out = uroce().args(["rping", "-C", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(22));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n")
    );
    let out = uroce().args(["rping", "-c", "-a", "127.0.0.1", "-S", "10"]).output().unwrap();
    assert_eq!(out.status.code(), Some(22));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "Invalid size 10 (valid range is 26 to 65536)\n");
    let out = uroce().args(["rping", "-s", "-C", "-1"]).output().unwrap();
    assert_eq!((out.status.code(), String::from_utf8_lossy(&out.stderr).as_ref()), (Some(22), "Invalid count -1\n"));
}

#[test]
fn dump_names_the_cm_messages_of_the_kernels_rping() {
    let pcap = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/captures/rdma_cm_rping.pcap");
    let out = uroce().args(["dump", pcap]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> =
        text.lines().filter_map(|l| l.split(" CM ").nth(1)).map(|r| r.trim_end_matches(" ICRC ok")).collect();
    assert_eq!(names, ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"]);
    let verbose = uroce().args(["dump", "-V", pcap]).output().unwrap();
    let text = String::from_utf8_lossy(&verbose.stdout);
    assert!(text.contains("  MAD       base version 1  class 0x07 (CM) version 2  method 0x03 (Send)  TID 0x0000000245b7c33c  attribute 0x0010 ConnectRequest\n"));
    assert!(
        text.contains("  rdma_cm   Tcp port 7174: 198.18.0.11 port 51850 -> 198.18.0.12 (IP CM header version 0)\n")
    );
}
