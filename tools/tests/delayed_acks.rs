//! Delayed ACKs (verbs-api `driver/tx.rs` `AckHold`), seen on the wire: in
//! a write ping-pong the ACK of the peer's message waits for this end's
//! reply and leaves after it, in the same batch, so the peer takes in the
//! reply with the ACK that completes its own request. Without the hold the
//! ACK leaves first, as soon as the peer's WRITE is taken in.

mod common;

use common::{run, uroce};
use std::path::Path;
use uroce_verbs::TestNet;

/// The `uroce dump` lines of a capture: (source address, opcode name).
fn packets(pcap: &Path) -> Vec<(String, String)> {
    let out = uroce().arg("dump").arg(pcap).output().unwrap();
    assert!(out.status.success(), "uroce dump {}: {}", pcap.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 5 && f[3] == ">").then(|| (f[2].to_string(), f[5].to_string()))
        })
        .collect()
}

/// Of the ACKs `me` sent, how many left right after a WRITE of its own.
fn acks_after_own_write(packets: &[(String, String)], me: &str) -> (usize, usize) {
    let mut acks = 0;
    let mut behind_write = 0;
    for (i, (src, op)) in packets.iter().enumerate() {
        if src != me || op != "RC_ACKNOWLEDGE" {
            continue;
        }
        acks += 1;
        if i > 0 && packets[i - 1].0 == me && packets[i - 1].1 == "RC_RDMA_WRITE_ONLY" {
            behind_write += 1;
        }
    }
    (acks, behind_write)
}

/// A 200-message write ping-pong with `--ack-delay US`: of the ACKs the
/// client sent, (how many, how many behind its own reply WRITE).
fn ping_pong(ack_delay_us: &str) -> (usize, usize) {
    let net = TestNet::new();
    let dir = std::env::temp_dir().join(format!("uroce-delayed-acks-{}-{ack_delay_us}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("run.pcap");
    let dev = net.udp(1);
    let args = ["perf", "write_lat", "--loopback", "-d", &dev, "-s", "2", "-n", "200", "--progress", "blocking"];
    let r = run(&[&args[..], &["--ack-delay", ack_delay_us, "--pcap", pcap.to_str().unwrap()]].concat());
    assert_eq!(r.0, 0, "uroce perf failed:\n{}\n{}", r.1, r.2);
    // --loopback writes one capture per end; the client's is enough.
    let seen = packets(&dir.join("run-client.pcap"));
    let me = net.ip(2).to_string();
    let (acks, behind) = acks_after_own_write(&seen, &me);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(acks >= 150, "{acks} ACKs from {me} in {} packets", seen.len());
    (acks, behind)
}

#[test]
fn a_write_ping_pong_sends_each_ack_behind_the_reply() {
    // A wait of 200 ms, not the default 50 us, so that a loaded machine that
    // deschedules the program between two messages does not end the waits
    // (the default's effect is measured by bench/run, not asserted here).
    let (acks, behind) = ping_pong("200000");
    assert!(behind * 2 >= acks, "only {behind} of {acks} ACKs left behind a reply WRITE");
    println!("{behind} of {acks} ACKs left behind the reply they waited for");
}

#[test]
fn with_no_delay_each_ack_leaves_before_the_reply() {
    let (acks, behind) = ping_pong("0");
    assert!(behind * 10 < acks, "{behind} of {acks} ACKs left behind a reply WRITE with --ack-delay 0");
}
