//! Link throughput: packets and bytes per second for 64 B, 1 KiB and 4 KiB RoCE
//! payloads on the udp link over loopback and on the packet link over a veth
//! pair (root; skipped with a reason otherwise), each beside the kernel's own
//! UDP throughput on the same path (plain UDP sockets, one datagram a call)
//! measured in the same run. Rates are what the receiver got, per second.
//!
//! `cargo bench -p uroce-stack --bench link` (UROCE_BENCH_SECS sets the seconds
//! per measurement, default 1).

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use uroce_stack::link::netns::NetnsGuard;
use uroce_stack::link::{DeviceSpec, Link, RxBatch, TxDatagram};
use uroce_stack::testnet::{Namespaces, TestNet};

#[derive(Clone, Copy, Default)]
struct Rate {
    pps: f64,
    bps: f64,
}

const PAYLOADS: [usize; 3] = [64, 1024, 4096];

fn secs() -> Duration {
    let s = std::env::var("UROCE_BENCH_SECS").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(1.0);
    Duration::from_secs_f64(s.clamp(0.1, 60.0))
}

/// Counts what a receiver loop gets until the sender stops and 100 ms pass quietly.
struct Counter {
    n: u64,
    bytes: u64,
    first: Option<Instant>,
    last: Instant,
}

impl Counter {
    fn new() -> Counter {
        Counter { n: 0, bytes: 0, first: None, last: Instant::now() }
    }
    fn add(&mut self, len: usize) {
        let now = Instant::now();
        self.first.get_or_insert(now);
        self.last = now;
        self.n += 1;
        self.bytes += len as u64;
    }
    fn done(&self, stop: &AtomicBool, start: Instant, dur: Duration) -> bool {
        (stop.load(Ordering::Relaxed) && self.last.elapsed() > Duration::from_millis(100))
            || start.elapsed() > dur + Duration::from_secs(5)
    }
    fn rate(&self) -> Rate {
        let t = self.first.map(|f| (self.last - f).as_secs_f64()).unwrap_or(0.0);
        if t <= 0.0 {
            return Rate::default();
        }
        Rate { pps: self.n as f64 / t, bps: self.bytes as f64 / t }
    }
}

/// uroce link a -> b, with `a` sending batches of 64 for `dur`.
fn link_rate(mut a: Box<dyn Link>, mut b: Box<dyn Link>, to: IpAddr, payload: usize, dur: Duration) -> Rate {
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let stop_rx = stop.clone();
    let rx = thread::spawn(move || {
        let mut c = Counter::new();
        let mut batch = RxBatch::new();
        while !c.done(&stop_rx, start, dur) {
            batch.clear();
            b.recv(Duration::from_millis(10), &mut batch).expect("recv");
            batch.iter().for_each(|d| c.add(d.roce.len()));
        }
        c.rate()
    });
    let pkt = roce_packet(0x11, 0, &vec![0x5a; payload]);
    let batch: Vec<TxDatagram<'_>> = (0..64).map(|_| TxDatagram { peer: to, src_port: 0xc001, roce: &pkt }).collect();
    while start.elapsed() < dur {
        a.send(&batch).expect("send");
    }
    stop.store(true, Ordering::Relaxed);
    rx.join().expect("receiver")
}

/// Kernel UDP sockets `from` -> `to`, one datagram a call.
fn kernel_rate(from: SocketAddr, to: SocketAddr, len: usize, dur: Duration, ns: Option<(String, String)>) -> Rate {
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let stop_rx = stop.clone();
    let rx_ns = ns.as_ref().map(|n| n.1.clone());
    let ready = Arc::new(AtomicBool::new(false));
    let ready_rx = ready.clone();
    let rx = thread::spawn(move || {
        let _in = rx_ns.map(|n| NetnsGuard::enter(&n).expect("netns"));
        let s = UdpSocket::bind(to).expect("bind the kernel receiver");
        s.set_read_timeout(Some(Duration::from_millis(10))).expect("timeout");
        ready_rx.store(true, Ordering::Relaxed);
        let mut buf = vec![0u8; 65536];
        let mut c = Counter::new();
        while !c.done(&stop_rx, start, dur) {
            if let Ok((n, _)) = s.recv_from(&mut buf) {
                c.add(n);
            }
        }
        c.rate()
    });
    let _in = ns.as_ref().map(|n| NetnsGuard::enter(&n.0).expect("netns"));
    let s = UdpSocket::bind(from).expect("bind the kernel sender");
    let t0 = Instant::now();
    while !ready.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(5) {
        thread::sleep(Duration::from_millis(1));
    }
    let data = vec![0x5a; len];
    let start = Instant::now();
    while start.elapsed() < dur {
        for _ in 0..64 {
            let _ = s.send_to(&data, to);
        }
    }
    stop.store(true, Ordering::Relaxed);
    rx.join().expect("receiver")
}

fn open(spec: &str) -> Box<dyn Link> {
    spec.parse::<DeviceSpec>().expect("spec").open().unwrap_or_else(|e| panic!("{spec}: {e}")).link
}

fn row(path: &str, payload: usize, ours: Rate, kernel: Rate) {
    let ratio = if kernel.pps > 0.0 { ours.pps / kernel.pps } else { f64::NAN };
    println!(
        "{path:<14} {payload:>6} B {:>12.0} {:>10.1} {:>14.0} {:>10.1} {:>8.2}",
        ours.pps,
        ours.bps / 1e6,
        kernel.pps,
        kernel.bps / 1e6,
        ratio
    );
}

fn main() {
    // `cargo bench` passes --bench; a filter or --list means nothing here.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dur = secs();
    println!(
        "uroce link benchmark: {:.1} s per measurement; rates as received; MB = 10^6 bytes of UDP payload",
        dur.as_secs_f64()
    );
    println!(
        "{:<14} {:>8} {:>12} {:>10} {:>14} {:>10} {:>8}",
        "path", "payload", "uroce pkt/s", "uroce MB/s", "kernel pkt/s", "kernel MB/s", "ratio"
    );
    // Each measurement on addresses of its own, so that nothing late from
    // one reaches the next.
    let net = TestNet::new();
    for (i, &payload) in PAYLOADS.iter().enumerate() {
        let host = 4 * i as u8;
        let a = open(&net.udp(host + 1));
        let b = open(&net.udp(host + 2));
        let ours = link_rate(a, b, net.ip(host + 2).into(), payload, dur);
        let len = 12 + payload + 4;
        let kernel = kernel_rate((net.ip(host + 3), 0).into(), (net.ip(host + 4), 4791).into(), len, dur, None);
        row("udp loopback", payload, ours, kernel);
    }
    if !is_root() || !have("ip") {
        println!("SKIP: veth packet link: needs root and the `ip` command (network namespaces)");
        return;
    }
    let ns = Namespaces::new("bench", 2);
    ns.veth(0, "va", 1, "vb");
    for (i, dev) in [(0, "va"), (1, "vb")] {
        ns.exec(i, &["ip", "link", "set", dev, "mtu", "9000"]);
    }
    ns.exec(0, &["ip", "addr", "add", "198.18.0.1/24", "dev", "va"]);
    ns.exec(1, &["ip", "addr", "add", "198.18.0.2/24", "dev", "vb"]);
    for &payload in &PAYLOADS {
        let mut a = {
            let _in = ns.enter(0);
            open("packet:va,ip=198.18.0.11,mac=02:00:00:00:00:11")
        };
        let mut b = {
            let _in = ns.enter(1);
            open("packet:vb,ip=198.18.0.12,mac=02:00:00:00:00:12")
        };
        // Resolve the neighbour before timing.
        let warm = roce_packet(0x11, 0, &[0; 8]);
        let to: IpAddr = "198.18.0.12".parse().unwrap();
        a.send(&tx(to, std::slice::from_ref(&warm))).expect("send");
        let got = collect(b.as_mut(), &mut [a.as_mut()], 1, Duration::from_secs(5));
        assert_eq!(got.len(), 1, "warm-up packet crossed the veth");
        let ours = link_rate(a, b, to, payload, dur);
        let kernel = kernel_rate(
            "198.18.0.1:0".parse().unwrap(),
            "198.18.0.2:4791".parse().unwrap(),
            12 + payload + 4,
            dur,
            Some((ns.name(0).to_string(), ns.name(1).to_string())),
        );
        row("veth packet", payload, ours, kernel);
    }
}
