//! The udp link's same-host path (`uroce_stack::link::shm`): two links of
//! this process on two addresses stand for two uroce processes on one host,
//! each owning its address. Once the first datagram has asked, their
//! datagrams go through shared rings, both ways, in order, with the ICRC
//! their sender computed (trusted by the receiver: nothing on the way can
//! corrupt them) and captured as UDP's are; a peer that goes away is
//! noticed, and its address is sent to by UDP again.

mod common;

use common::*;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use uroce_stack::link::capture::Capture;
use uroce_stack::link::impair::{Faults, Impair, ImpairConfig};
use uroce_stack::link::udp::{UdpLink, UdpOffload};
use uroce_stack::link::{DeviceSpec, Integrity, Link};
use uroce_stack::pcap::LinkType;
use uroce_stack::testnet::TestNet;

fn link_on(net: &TestNet, host: u8, shm: bool) -> UdpLink {
    let ip = IpAddr::V4(net.ip(host));
    UdpLink::open_with(&net.udp(host).parse::<DeviceSpec>().unwrap(), UdpOffload { shm, ..UdpOffload::auto(ip) })
        .unwrap()
}

/// Receives on both links until `done` or 5 s pass; what `b` took: (psn, integrity).
fn exchange(
    a: &mut dyn Link,
    b: &mut dyn Link,
    mut done: impl FnMut(&[(u32, Integrity)]) -> bool,
) -> Vec<(u32, Integrity)> {
    let mut got = Vec::new();
    let start = Instant::now();
    while !done(&got) && start.elapsed() < Duration::from_secs(5) {
        recv_each(a, Duration::from_millis(1), |_| {}).unwrap();
        recv_each(b, Duration::from_millis(1), |d| got.push((psn_of(d.roce), d.integrity))).unwrap();
    }
    got
}

/// `n` datagrams to QP 0x11, PSNs 1..=n, each 64 bytes of its PSN.
fn burst(n: u32) -> Vec<Vec<u8>> {
    (1..=n).map(|psn| roce_packet(0x11, psn, &[psn as u8; 64])).collect()
}

/// Sends a first packet by UDP (it asks for a channel) and waits until the
/// channel is up on both ends.
fn connect(a: &mut UdpLink, b: &mut UdpLink, b_ip: IpAddr) {
    let first = [roce_packet(0x11, 0, &[1; 8])];
    a.send(&tx(b_ip, &first)).unwrap();
    let start = Instant::now();
    let mut got = 0;
    while (a.same_host_peers() == 0 || b.same_host_peers() == 0) && start.elapsed() < Duration::from_secs(5) {
        recv_each(a, Duration::from_millis(1), |_| {}).unwrap();
        got += recv_each(b, Duration::from_millis(1), |_| {}).unwrap();
    }
    assert_eq!((a.same_host_peers(), b.same_host_peers()), (1, 1), "the channel is up");
    assert_eq!((got, a.stats().tx_same_host), (1, 0), "the first packet went by UDP");
}

/// Links on addresses 1 and 2 of `net` with their channel up, and 2's address.
fn connected_pair(net: &TestNet) -> (UdpLink, UdpLink, IpAddr) {
    let (mut a, mut b) = (link_on(net, 1, true), link_on(net, 2, true));
    let b_ip = IpAddr::V4(net.ip(2));
    connect(&mut a, &mut b, b_ip);
    (a, b, b_ip)
}

#[test]
fn datagrams_between_two_links_of_one_host_go_through_shared_memory() {
    let net = TestNet::new();
    let (mut a, mut b, b_ip) = connected_pair(&net);
    let a_ip = IpAddr::V4(net.ip(1));

    // More than a ring holds, in batches, received between them: in order.
    let packets = burst(3000);
    let mut got = Vec::new();
    for chunk in packets.chunks(32) {
        a.send(&tx(b_ip, chunk)).unwrap();
        got.extend(exchange(&mut a, &mut b, |g| g.len() == chunk.len()));
    }
    let psns: Vec<u32> = got.iter().map(|g| g.0).collect();
    assert_eq!(psns, (1..=3000).collect::<Vec<_>>());
    assert!(got.iter().all(|g| g.1 == Integrity::SameHost), "the rings' ICRC trusted: {:?}", got[0]);
    assert_eq!((a.stats().tx_same_host, b.stats().rx_same_host), (3000, 3000));
    assert_eq!(b.stats().rx_packets, 3001, "with the first, by UDP");

    // And back.
    b.send(&tx(a_ip, &[roce_packet(0x22, 9, &[2; 8])])).unwrap();
    let back = exchange(&mut b, &mut a, |g| !g.is_empty());
    assert_eq!((back.len(), b.stats().tx_same_host, a.stats().rx_same_host), (1, 1, 1));
}

/// A burst larger than the ring, sent before the peer reads anything, is
/// not lost: what the full ring has no room for goes by UDP (counted).
#[test]
fn what_a_full_ring_has_no_room_for_goes_by_udp() {
    let net = TestNet::new();
    let (mut a, mut b, b_ip) = connected_pair(&net);
    let packets = burst(1100);
    for chunk in packets.chunks(32) {
        a.send(&tx(b_ip, chunk)).unwrap();
    }
    let s = a.stats();
    assert_eq!((s.tx_same_host + s.tx_ring_full, s.tx_dropped), (1100, 0), "{s:?}");
    assert!(s.tx_ring_full >= 1100 - 1024, "the ring holds 1024: {s:?}");
    let mut psns: Vec<u32> = exchange(&mut a, &mut b, |g| g.len() == 1100).iter().map(|g| g.0).collect();
    psns.sort_unstable();
    assert_eq!(psns, (1..=1100).collect::<Vec<_>>(), "each datagram once");
}

/// The receiver trusts a ring's datagrams, so impairment's corruption
/// over the rings is dropped and counted as a checking link would drop it,
/// never delivered: every datagram that arrives is the one sent.
#[test]
fn corruption_through_the_rings_is_dropped_as_on_a_checking_link() {
    let net = TestNet::new();
    let (mut a, b, b_ip) = connected_pair(&net);
    let mut b = Impair::new(
        b,
        ImpairConfig { seed: 9, rx: Faults { corrupt: 0.5, ..Faults::default() }, ..Default::default() },
    );
    let packets = burst(200);
    // A datagram as sent: the same bytes up to the ICRC the link added.
    let sent = |roce: &[u8]| packets.iter().any(|p| p.len() == roce.len() && p[..p.len() - 4] == roce[..p.len() - 4]);
    a.send(&tx(b_ip, &packets)).unwrap();
    let mut got = Vec::new();
    let start = Instant::now();
    while (got.len() as u64) + b.impair_stats().corrupt_caught < 200 && start.elapsed() < Duration::from_secs(5) {
        recv_each(&mut b, Duration::from_millis(1), |d| got.push((sent(d.roce), d.integrity))).unwrap();
    }
    let s = b.impair_stats();
    assert_eq!(b.inner().stats().rx_same_host, 200, "all through the rings");
    assert!(s.corrupt_caught > 50, "{s:?}");
    assert_eq!(got.len() as u64, 200 - s.corrupt_caught, "{s:?}");
    assert!(got.iter().all(|g| *g == (true, Integrity::SameHost)), "delivered intact: {got:?}");
}

#[test]
fn a_capture_shows_same_host_datagrams_with_their_icrc() {
    let net = TestNet::new();
    let (a, b, b_ip) = connected_pair(&net);
    let dir = std::env::temp_dir().join(format!("uroce-same-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (pa, pb): (PathBuf, PathBuf) = (dir.join("a.pcap"), dir.join("b.pcap"));
    let mut a = Capture::to_file(a, LinkType::RawIp, &pa).unwrap();
    let mut b = Capture::to_file(b, LinkType::RawIp, &pb).unwrap();
    let packets: Vec<Vec<u8>> = (1..=5).map(|psn| roce_packet(0x11, psn, &[7; 100])).collect();
    a.send(&tx(b_ip, &packets)).unwrap();
    assert_eq!(exchange(&mut a, &mut b, |g| g.len() == 5).len(), 5);
    assert_eq!(a.inner().stats().tx_same_host, 5);
    let (a, _) = a.finish().unwrap();
    let (b, _) = b.finish().unwrap();
    assert_eq!(check_capture(&pa), (5, 5, 0), "sent: five frames, good ICRCs");
    assert_eq!(check_capture(&pb), (5, 5, 0), "received: the same");
    drop((a, b));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_peer_that_goes_away_is_sent_to_by_udp_again() {
    let net = TestNet::new();
    let (mut a, b, b_ip) = connected_pair(&net);
    drop(b);
    // a notices at its next wait (or within a few dozen receives).
    let start = Instant::now();
    while a.same_host_peers() > 0 && start.elapsed() < Duration::from_secs(5) {
        recv_each(&mut a, Duration::from_millis(1), |_| {}).unwrap();
    }
    assert_eq!(a.same_host_peers(), 0, "the channel went with its peer");
    let before = a.stats();
    a.send(&tx(b_ip, &[roce_packet(0x11, 1, &[1; 8])])).unwrap();
    let after = a.stats();
    assert_eq!((after.tx_same_host, after.tx_packets), (before.tx_same_host, before.tx_packets + 1), "by UDP");
}

/// `udp:IP,shm=0` turns the path off for one device, whatever `UROCE_SHM`
/// says (tests in one process cannot each set the environment).
#[test]
fn a_device_given_shm_0_sends_and_takes_everything_by_udp() {
    let net = TestNet::new();
    let mut a = link_on(&net, 1, true);
    let spec: DeviceSpec = format!("{},shm=0", net.udp(2)).parse().unwrap();
    let mut c = UdpLink::open_with(&spec, UdpOffload::auto(IpAddr::V4(net.ip(2)))).unwrap();
    let c_ip = IpAddr::V4(net.ip(2));
    for psn in 0..3 {
        a.send(&tx(c_ip, &[roce_packet(0x11, psn, &[1; 8])])).unwrap();
        assert_eq!(exchange(&mut a, &mut c, |g| !g.is_empty()).len(), 1);
    }
    assert_eq!((a.stats().tx_same_host, a.same_host_peers(), c.same_host_peers(), c.stats().rx_packets), (0, 0, 0, 3));
}

#[test]
fn a_peer_without_the_same_host_path_gets_udp() {
    let net = TestNet::new();
    let (mut a, mut c) = (link_on(&net, 1, true), link_on(&net, 2, false));
    let c_ip = IpAddr::V4(net.ip(2));
    for psn in 0..3 {
        a.send(&tx(c_ip, &[roce_packet(0x11, psn, &[1; 8])])).unwrap();
        assert_eq!(exchange(&mut a, &mut c, |g| !g.is_empty()).len(), 1);
    }
    assert_eq!((a.stats().tx_same_host, a.same_host_peers(), c.stats().rx_packets), (0, 0, 3));
}
