//! Capture and impairment middleware over the udp link on loopback (any user).

mod common;

use common::*;
use std::net::IpAddr;
use std::time::{Duration, Instant};
use uroce_stack::link::capture::Capture;
use uroce_stack::link::impair::{Faults, Impair, ImpairConfig};
use uroce_stack::link::udp::UdpLink;
use uroce_stack::link::Link;
use uroce_stack::pcap::LinkType;
use uroce_stack::testnet::TestNet;

/// The udp link on address `host` of `net`.
fn udp(net: &TestNet, host: u8) -> UdpLink {
    UdpLink::open(&net.udp(host).parse().unwrap()).unwrap()
}

/// Sends `n` packets a -> b (through whatever wraps them) and returns the PSNs
/// b delivered, waiting until `quiet` passes with nothing new.
fn run(a: &mut dyn Link, b: &mut dyn Link, b_ip: IpAddr, n: u32, quiet: Duration) -> Vec<u32> {
    let packets: Vec<Vec<u8>> = (0..n).map(|i| roce_packet(0x11, i, &[i as u8; 32])).collect();
    for chunk in packets.chunks(16) {
        a.send(&tx(b_ip, chunk)).unwrap();
    }
    let mut psns = Vec::new();
    let start = Instant::now();
    let mut last = Instant::now();
    while last.elapsed() < quiet && start.elapsed() < Duration::from_secs(20) {
        recv_each(a, Duration::ZERO, |_| {}).unwrap();
        let got = recv_each(b, Duration::from_millis(5), |d| psns.push(psn_of(d.roce))).unwrap();
        if got > 0 {
            last = Instant::now();
        }
    }
    psns
}

#[test]
fn impairment_repeats_from_its_seed() {
    let faults = Faults { loss: 0.2, duplicate: 0.1, ..Faults::default() };
    let mut runs = Vec::new();
    let net = TestNet::new();
    // Each run on addresses of its own: no late packet of the first reaches the second.
    for (k, (ha, hb)) in [(1, 2), (3, 4)].into_iter().enumerate() {
        let mut a = udp(&net, ha);
        let mut b = Impair::new(udp(&net, hb), ImpairConfig { seed: 42, rx: faults, ..Default::default() });
        let psns = run(&mut a, &mut b, net.ip(hb).into(), 200, Duration::from_millis(300));
        let s = b.impair_stats();
        println!("run {k}: {} delivered, {s:?}", psns.len());
        assert_eq!(psns.len() as u64, 200 - s.rx_lost + s.rx_duplicated);
        assert!(s.rx_lost > 10 && s.rx_duplicated > 5, "{s:?}");
        runs.push(psns);
    }
    assert_eq!(runs[0], runs[1], "the same seed, the same faults");
}

#[test]
fn reordering_and_delay_keep_every_packet() {
    let net = TestNet::new();
    let mut a = udp(&net, 1);
    let faults = Faults {
        reorder: 0.2,
        reorder_delay: Duration::from_millis(3),
        delay: Duration::from_millis(1),
        jitter: Duration::from_millis(1),
        ..Faults::default()
    };
    let mut b = Impair::new(udp(&net, 2), ImpairConfig { seed: 5, rx: faults, ..Default::default() });
    let mut psns = run(&mut a, &mut b, net.ip(2).into(), 100, Duration::from_millis(300));
    let s = b.impair_stats();
    assert!(s.rx_reordered > 0 && s.rx_delayed > 0, "{s:?}");
    assert!(psns.windows(2).any(|w| w[1] < w[0]), "some packets overtaken");
    psns.sort_unstable();
    assert_eq!(psns, (0..100).collect::<Vec<_>>());
}

#[test]
fn corruption_is_caught_by_a_checking_link() {
    let net = TestNet::new();
    let mut a = udp(&net, 1);
    let faults = Faults { corrupt: 0.5, ..Faults::default() };
    let mut b = Impair::new(udp(&net, 2), ImpairConfig { seed: 9, rx: faults, ..Default::default() });
    let psns = run(&mut a, &mut b, net.ip(2).into(), 100, Duration::from_millis(200));
    let s = b.impair_stats();
    assert!(s.corrupt_caught > 20, "{s:?}");
    assert_eq!(psns.len() as u64, 100 - s.corrupt_caught);
}

#[test]
fn transmit_loss_and_duplication() {
    let net = TestNet::new();
    let faults = Faults { loss: 0.5, duplicate: 0.5, ..Faults::default() };
    let mut a = Impair::new(udp(&net, 1), ImpairConfig { seed: 3, tx: faults, ..Default::default() });
    let mut b = udp(&net, 2);
    let psns = run(&mut a, &mut b, net.ip(2).into(), 100, Duration::from_millis(200));
    let s = a.impair_stats();
    assert!(s.tx_lost > 20 && s.tx_duplicated > 5, "{s:?}");
    assert_eq!(psns.len() as u64, 100 - s.tx_lost + s.tx_duplicated);
}

#[test]
fn capture_of_a_udp_link_decodes() {
    let path = std::env::temp_dir().join(format!("uroce-udp-capture-{}.pcap", std::process::id()));
    let net = TestNet::new();
    let mut a = Capture::to_file(udp(&net, 1), LinkType::RawIp, &path).unwrap();
    let mut b = udp(&net, 2);
    let psns = run(&mut a, &mut b, net.ip(2).into(), 10, Duration::from_millis(100));
    assert_eq!(psns.len(), 10);
    b.send(&tx(net.ip(1).into(), &[roce_packet(0x22, 0, b"back")])).unwrap();
    let back = collect(&mut a, &mut [], 1, Duration::from_secs(5));
    assert_eq!(back.len(), 1);
    let (_, file) = a.finish().unwrap();
    drop(file);
    let (roce, good, other) = check_capture(&path);
    assert_eq!((roce, good, other), (11, 11, 0), "sent and received, every ICRC right");
    if let Some(ops) = tshark_opcodes(&path) {
        assert_eq!(ops.len(), 11, "{ops:?}");
    }
    let _ = std::fs::remove_file(&path);
}
