//! Mixed pairs: a Debian binary over the drop-in against uroce's own tool
//! (which speaks the wire and the out-of-band exchange the C tool does),
//! each way round: `ibv_rc_pingpong` with `uroce pingpong`, `ib_write_bw`
//! with `uroce perf write_bw`, `rping` with `uroce rping`. The `uroce`
//! binary is the one `cargo test --workspace` builds (scripts/test); run
//! alone, without it, the tests say SKIP.

mod common;
use common::{free_tcp_port, have, run_pair, uroce_binary, End};
use std::path::PathBuf;

/// The uroce binary and whether `tool` is installed, or SKIP said.
fn both(tool: &str) -> Option<PathBuf> {
    let Some(uroce) = uroce_binary() else {
        println!("SKIP: no uroce binary beside the tests (cargo test --workspace, or bash scripts/test, builds it)");
        return None;
    };
    have(tool).then_some(uroce)
}

/// The server first, then the client; both must end well with their data checked.
fn pingpong_pair(dropin_serves: bool) {
    let Some(uroce) = both("ibv_rc_pingpong") else { return };
    let port = free_tcp_port().to_string();
    let common = ["-g", "1", "-n", "50", "-c", "-p", port.as_str()];
    let c_tool = |tail: &[&str]| End::dropin("ibv_rc_pingpong", &[&common[..], tail].concat());
    let ours = |tail: &[&str]| End::uroce(&uroce, &[&["pingpong", "-d", "{dev}"], &common[..], tail].concat());
    let (server, client) = match dropin_serves {
        true => (c_tool(&[]), ours(&["{server}"])),
        false => (ours(&[]), c_tool(&["{server}"])),
    };
    let (client, server) = run_pair(server, client, "Couldn't connect");
    for text in [&client, &server] {
        assert!(text.contains("50 iters in") && !text.contains("Failed status"), "{text}");
    }
}

#[test]
fn ibv_rc_pingpong_serves_uroce_pingpong() {
    pingpong_pair(true);
}

#[test]
fn uroce_pingpong_serves_ibv_rc_pingpong() {
    pingpong_pair(false);
}

fn write_bw_pair(dropin_serves: bool) {
    let Some(uroce) = both("ib_write_bw") else { return };
    let port = free_tcp_port().to_string();
    let common = ["-x", "1", "-n", "200", "-p", port.as_str()];
    let c_tool = |tail: &[&str]| End::dropin("ib_write_bw", &[&common[..], tail].concat());
    let ours = |tail: &[&str]| End::uroce(&uroce, &[&["perf", "write_bw", "-d", "{dev}"], &common[..], tail].concat());
    let (server, client) = match dropin_serves {
        true => (c_tool(&[]), ours(&["{server}"])),
        false => (ours(&[]), c_tool(&["{server}"])),
    };
    let (client, _) = run_pair(server, client, "Couldn't connect");
    let result = client.lines().skip_while(|l| !l.trim_start().starts_with("#bytes")).nth(1).unwrap_or("");
    assert!(result.split_whitespace().nth(1) == Some("200"), "no result line:\n{client}");
}

#[test]
fn ib_write_bw_serves_uroce_perf() {
    write_bw_pair(true);
}

#[test]
fn uroce_perf_serves_ib_write_bw() {
    write_bw_pair(false);
}

fn rping_pair(dropin_serves: bool) {
    let Some(uroce) = both("rping") else { return };
    let port = free_tcp_port().to_string();
    let common = ["-p", port.as_str(), "-C", "50", "-S", "512", "-V"];
    let c_tool = |head: &[&str]| End::dropin("rping", &[head, &common[..]].concat());
    let ours = |head: &[&str]| End::uroce(&uroce, &[&["rping"], head, &common[..]].concat());
    let (server, client) = match dropin_serves {
        true => (c_tool(&["-s", "-a", "{server}"]), ours(&["-c", "-a", "{server}", "--ib-dev", "{dev}"])),
        false => (ours(&["-s", "-a", "{server}", "--ib-dev", "{dev}"]), c_tool(&["-c", "-a", "{server}"])),
    };
    let (client, server) = run_pair(server, client, "REJECTED");
    for text in [&client, &server] {
        assert!(!text.contains("mismatch") && !text.contains("error"), "{text}");
    }
}

#[test]
fn rping_serves_uroce_rping() {
    rping_pair(true);
}

#[test]
fn uroce_rping_serves_rping() {
    rping_pair(false);
}

/// UD over rdma_cm (`-c UD -R`): SIDR resolves the server's QP; in send_lat
/// the client's first datagram tells the server its QP (perftest's way).
fn ud_send_lat_pair(dropin_serves: bool) {
    let Some(uroce) = both("ib_send_lat") else { return };
    let port = free_tcp_port().to_string();
    let common = ["-c", "UD", "-R", "-n", "300", "-p", port.as_str()];
    let c_tool = |tail: &[&str]| End::dropin("ib_send_lat", &[&common[..], tail].concat());
    let ours = |tail: &[&str]| End::uroce(&uroce, &[&["perf", "send_lat", "-d", "{dev}"], &common[..], tail].concat());
    let (server, client) = match dropin_serves {
        true => (c_tool(&[]), ours(&["{server}"])),
        false => (ours(&[]), c_tool(&["{server}"])),
    };
    // Too early for the exchange (REJECTED) or for the test's UD service (UNREACHABLE, status 1).
    let (client, server) = run_pair(server, client, "REJECTED|RDMA_CM_EVENT_UNREACHABLE; error: 1");
    for text in [&client, &server] {
        let result = text.lines().skip_while(|l| !l.trim_start().starts_with("#bytes")).nth(1).unwrap_or("");
        assert!(result.split_whitespace().nth(1) == Some("300"), "no result line:\n{text}");
    }
}

#[test]
fn ib_send_lat_ud_rdma_cm_serves_uroce_perf() {
    ud_send_lat_pair(true);
}

#[test]
fn uroce_perf_ud_rdma_cm_serves_ib_send_lat() {
    ud_send_lat_pair(false);
}
