//! Helpers shared by the link tests: RoCE packets, privilege and tool checks,
//! network namespaces that clean up after themselves, capture checks.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use uroce_stack::link::netns::NetnsGuard;
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

/// Network namespaces (and their veths) made for one test, deleted on drop.
pub struct Netns {
    pub names: Vec<String>,
}

impl Netns {
    /// `count` namespaces named `uroce-<tag>-<pid>-<i>`.
    pub fn new(tag: &str, count: usize) -> Netns {
        let pid = std::process::id();
        let mut ns = Netns { names: Vec::new() };
        for i in 0..count {
            let name = format!("uroce-{tag}-{pid}-{i}");
            let _ = Command::new("ip").args(["netns", "del", &name]).output();
            run(&["ip", "netns", "add", &name]);
            ns.names.push(name.clone());
            ns.exec(i, &["ip", "link", "set", "lo", "up"]);
        }
        ns
    }

    /// Runs a command in namespace `i`.
    pub fn exec(&self, i: usize, args: &[&str]) {
        let mut full = vec!["ip", "netns", "exec", &self.names[i]];
        full.extend_from_slice(args);
        run(&full);
    }

    /// Spawns a command in namespace `i`.
    pub fn spawn(&self, i: usize, args: &[&str]) -> Child {
        Command::new("ip")
            .args(["netns", "exec", &self.names[i]])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn in netns")
    }

    /// A veth pair `a` in namespace `i` and `b` in namespace `j`, both up.
    pub fn veth(&self, i: usize, a: &str, j: usize, b: &str) {
        run(&[
            "ip",
            "link",
            "add",
            a,
            "netns",
            &self.names[i],
            "type",
            "veth",
            "peer",
            "name",
            b,
            "netns",
            &self.names[j],
        ]);
        self.exec(i, &["ip", "link", "set", a, "up"]);
        self.exec(j, &["ip", "link", "set", b, "up"]);
    }

    /// Puts this thread in namespace `i` until the guard drops (sockets
    /// opened meanwhile stay in that namespace).
    pub fn enter(&self, i: usize) -> NetnsGuard {
        NetnsGuard::enter(&self.names[i]).expect("enter netns")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
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
