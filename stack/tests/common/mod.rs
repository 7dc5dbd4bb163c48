//! Helpers shared by the link tests: RoCE packets, privilege and tool checks,
//! network namespaces that clean up after themselves, capture checks.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use uroce_stack::link::{Link, RxBatch, RxDatagram, TxDatagram};
use uroce_stack::pcap::PcapReader;
use uroce_transport::wire::{BthRepr, Opcode, RoceRepr};
use uroce_transport::Psn;

/// An RC SEND ONLY to QP `qpn` with PSN `psn` and `payload`, ICRC left zero.
pub fn roce_packet(qpn: u32, psn: u32, payload: &[u8]) -> Vec<u8> {
    let r = RoceRepr::new(BthRepr::new(Opcode::RcSendOnly, qpn, Psn::new(psn)));
    let mut buf = vec![0u8; r.buffer_len(payload.len())];
    r.emit(&mut buf, payload);
    buf
}

/// The PSN of a RoCE packet.
pub fn psn_of(roce: &[u8]) -> u32 {
    u32::from_be_bytes([0, roce[9], roce[10], roce[11]])
}

pub use uroce_stack::link::netns::is_root;

pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// `None` if the test can run as root with `ip`; otherwise prints why not.
pub fn skip_unless_root_with_ip(test: &str) -> bool {
    if !is_root() {
        println!("SKIP: {test}: needs root (network namespaces, CAP_NET_ADMIN/CAP_NET_RAW)");
        return true;
    }
    if !have("ip") {
        println!("SKIP: {test}: needs the `ip` command (iproute2)");
        return true;
    }
    false
}

pub fn run(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().expect("run command");
    assert!(out.status.success(), "{:?} failed: {}", args, String::from_utf8_lossy(&out.stderr));
}

/// One receive on `link`, each datagram it brought handed to `f`; how many.
pub fn recv_each<L: Link + ?Sized>(
    link: &mut L,
    timeout: Duration,
    mut f: impl FnMut(&RxDatagram<'_>),
) -> std::io::Result<usize> {
    let mut batch = RxBatch::new();
    let n = link.recv(timeout, &mut batch)?;
    batch.iter().for_each(|d| f(&d));
    Ok(n)
}

/// Receives until `want` datagrams came or `limit` passed, polling both links
/// (so a raw link answers ARP while the other waits). Returns the roce bytes.
pub fn collect(rx: &mut dyn Link, others: &mut [&mut dyn Link], want: usize, limit: Duration) -> Vec<Vec<u8>> {
    let start = Instant::now();
    let mut got = Vec::new();
    while got.len() < want && start.elapsed() < limit {
        for o in others.iter_mut() {
            recv_each(&mut **o, Duration::ZERO, |_| {}).expect("recv on the other link");
        }
        recv_each(rx, Duration::from_millis(10), |d| got.push(d.roce.to_vec())).expect("recv");
    }
    got
}

pub fn tx<'a>(peer: std::net::IpAddr, packets: &'a [Vec<u8>]) -> Vec<TxDatagram<'a>> {
    packets.iter().map(|p| TxDatagram { peer, src_port: 0xc001, roce: p }).collect()
}

/// Reads a capture; returns (RoCEv2 frames, frames with a good ICRC, other frames).
pub fn check_capture(path: &Path) -> (usize, usize, usize) {
    let f = std::fs::File::open(path).expect("open capture");
    let mut r = PcapReader::new(std::io::BufReader::new(f)).expect("read capture");
    let lt = r.link_type();
    let (mut roce, mut good, mut other) = (0, 0, 0);
    while let Some(rec) = r.next_record().expect("capture record") {
        match lt.parse_frame(&rec.data) {
            Ok(p) => {
                roce += 1;
                if uroce_transport::icrc::check(p.ip_packet) == Ok(true) {
                    good += 1;
                }
            }
            Err(_) => other += 1,
        }
    }
    (roce, good, other)
}

/// The BTH opcodes tshark decodes in a capture, or `None` (with a printed
/// reason) when tshark is missing.
pub fn tshark_opcodes(path: &Path) -> Option<Vec<String>> {
    if !have("tshark") {
        println!("SKIP (tshark part): tshark is not installed");
        return None;
    }
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(path)
        .args(["-T", "fields", "-e", "infiniband.bth.opcode"])
        .output()
        .expect("run tshark");
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(str::to_string).collect())
}
