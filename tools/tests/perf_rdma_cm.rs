//! `uroce perf ... -R` (and `-z`): the exchange and the test's QPs over
//! rdma_cm, both ends in one process and as two processes, the header
//! perftest prints for it, and the refusals perftest makes.

mod common;

use common::*;
use std::time::Duration;
use uroce_verbs::TestNet;

const LIMIT: Duration = Duration::from_secs(60);

/// The first row of a result table: its numbers.
fn result_row(out: &str) -> Vec<String> {
    let row =
        out.lines().find(|l| l.starts_with(' ') && l.trim_start().chars().next().is_some_and(|c| c.is_ascii_digit()));
    row.unwrap_or_else(|| panic!("no result row in\n{out}")).split_whitespace().map(String::from).collect()
}

#[test]
fn every_test_with_rdma_cm_in_one_process() {
    let net = TestNet::new();
    for (i, test) in ["write_bw", "read_bw", "send_bw", "atomic_bw", "write_lat", "read_lat", "send_lat", "atomic_lat"]
        .iter()
        .enumerate()
    {
        // Each run on addresses of its own (--loopback's server takes the next one).
        let dev = net.udp(1 + 2 * i as u8);
        let (code, out, err) = run(&["perf", test, "--loopback", "-R", "-n", "100", "-d", &dev]);
        assert_eq!(code, 0, "{test}: {out}{err}");
        assert!(out.contains(" rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n"), "{test}: {out}");
        assert_eq!(result_row(&out)[1], "100", "{test}: {out}");
    }
}

#[test]
fn write_bw_and_read_lat_as_two_processes() {
    let net = TestNet::new();
    let (server_dev, client_dev, server_ip) = (net.udp(1), net.udp(2), net.ip(1).to_string());
    for (test, port) in [("write_bw", "18601"), ("read_lat", "18602"), ("send_bw", "18603")] {
        let server = spawn(&["perf", test, "-R", "-n", "200", "-p", port, "-d", &server_dev]);
        std::thread::sleep(Duration::from_millis(300));
        let client = spawn(&["perf", test, "-R", "-n", "200", "-p", port, "-d", &client_dev, &server_ip]);
        let (code, out, err) = wait_bounded(client, LIMIT);
        assert_eq!(code, 0, "{test} client: {out}{err}");
        let (scode, sout, serr) = wait_bounded(server, LIMIT);
        assert_eq!(scode, 0, "{test} server: {sout}{serr}");
        assert!(sout.contains(" Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP\n"), "{sout}");
        assert!(out.contains(" remote address: LID 0000 QPN 0x"), "{out}");
        assert_eq!(result_row(&out)[1], "200", "{out}");
    }
}

/// UD QPs over rdma_cm (RDMA_PS_UDP, SIDR): the client learns the server
/// QP's number and Q_Key from ESTABLISHED; in send_lat the server learns
/// the client's from its first datagram, as perftest does. In one process
/// and as two.
#[test]
fn ud_send_bw_and_send_lat_with_rdma_cm() {
    let net = TestNet::new();
    for (i, test) in ["send_bw", "send_lat"].iter().enumerate() {
        let dev = net.udp(1 + 2 * i as u8);
        let (code, out, err) = run(&["perf", test, "-c", "UD", "--loopback", "-R", "-n", "300", "-d", &dev]);
        assert_eq!(code, 0, "{test}: {out}{err}");
        assert!(out.contains(" Connection type : UD") && out.contains(" rdma_cm QPs\t : ON\n"), "{test}: {out}");
        assert_eq!(result_row(&out)[1], "300", "{test}: {out}");
    }
    let (server_dev, client_dev, server_ip) = (net.udp(5), net.udp(6), net.ip(5).to_string());
    let pcap = std::env::temp_dir().join(format!("uroce-perf-ud-rdma-cm-{}.pcap", std::process::id()));
    for (test, port) in [("send_lat", "18611"), ("send_bw", "18612")] {
        let args = ["perf", test, "-c", "UD", "-R", "-n", "200", "-p", port];
        let server = spawn(&[&args[..], &["-d", &server_dev, "--pcap", pcap.to_str().unwrap()]].concat());
        std::thread::sleep(Duration::from_millis(300));
        let client = spawn(&[&args[..], &["-d", &client_dev, &server_ip]].concat());
        let (code, out, err) = wait_bounded(client, LIMIT);
        assert_eq!(code, 0, "{test} client: {out}{err}");
        let (scode, sout, serr) = wait_bounded(server, LIMIT);
        assert_eq!(scode, 0, "{test} server: {sout}{serr}");
        assert_eq!(result_row(&out)[1], "200", "{out}");
    }
    // The last run's CM: the exchange's RC connection, the test's SIDR, and
    // the exchange's end; `uroce dump` and tshark name them alike.
    let want = ["ConnectRequest", "ConnectReply", "ReadyToUse", "ServiceIDResReq", "ServiceIDResReqResp"];
    let dump = uroce().args(["dump", pcap.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&dump.stdout);
    let names: Vec<&str> =
        text.lines().filter_map(|l| l.split(" CM ").nth(1)).map(|r| r.trim_end_matches(" ICRC ok")).collect();
    assert_eq!(&names[..5], want, "{text}");
    if let Some(names) = tshark_cm_names(&pcap) {
        assert_eq!(&names[..5], want);
    }
    let _ = std::fs::remove_file(&pcap);
}

#[test]
fn only_the_exchange_over_rdma_cm_with_z() {
    let net = TestNet::new();
    let (code, out, err) = run(&["perf", "write_bw", "--loopback", "-z", "-n", "100", "-d", &net.udp(1)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(" rdma_cm QPs\t : OFF\n Data ex. method : rdma_cm\n"), "{out}");
}

#[test]
fn a_client_without_a_server_says_so() {
    // A device answers on address 1 (a listener on another port), nobody on 18999.
    let net = TestNet::new();
    let server = spawn(&["perf", "write_bw", "-R", "-p", "18998", "-d", &net.udp(1)]);
    std::thread::sleep(Duration::from_millis(300));
    let server_ip = net.ip(1).to_string();
    let (code, out, err) = run(&["perf", "write_bw", "-R", "-p", "18999", "-d", &net.udp(2), "--stats", &server_ip]);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("Unexpected CM event bl blka 8 (RDMA_CM_EVENT_REJECTED status 8 (invalid service ID))"),
        "{err}"
    );
    // Said at once: the one REQ was answered, none was sent again.
    assert_eq!(counter(&out, "link_tx_packets"), Some(1), "{out}");
    let mut server = server;
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn perftests_refusals() {
    let (code, _, err) = run(&["perf", "write_bw", "-R", "-c", "UC", "--loopback"]);
    assert_ne!(code, 0);
    assert!(err.contains("UC is not supported in librdmacm"), "{err}");
    let (code, _, err) = run(&["perf", "write_bw", "-R", "--retry_count", "9", "--loopback"]);
    assert_ne!(code, 0);
    assert!(err.contains("Retry count should be between 0 and 7"), "{err}");
}
