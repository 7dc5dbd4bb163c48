//! One udp address shared by two links, as two processes share it (see
//! `uroce_stack::link::udp`): the one holding port 4791 hands each packet
//! to the link that claimed its QP, the other sends from a port of its own,
//! and takes the port over when the first one goes.

mod common;

use common::*;
use std::io::ErrorKind;
use std::net::IpAddr;
use std::time::{Duration, Instant};
use uroce_stack::link::udp::UdpLink;
use uroce_stack::link::{DeviceSpec, Integrity, Link, RxDatagram, SteerKey, TxDatagram};
use uroce_stack::testnet::TestNet;

fn udp_on(net: &TestNet, host: u8) -> UdpLink {
    UdpLink::open(&net.udp(host).parse::<DeviceSpec>().unwrap()).unwrap()
}

/// Runs `f` on another thread while `owner` takes in what arrives (a
/// tenant's questions are answered from the owner's receives); returns
/// `f`'s result and the QPNs of what the owner kept meanwhile.
fn while_receiving<T: Send>(owner: &mut UdpLink, f: impl FnOnce() -> T + Send) -> (T, Vec<u32>) {
    let mut kept = Vec::new();
    let r = std::thread::scope(|s| {
        let h = s.spawn(f);
        let start = Instant::now();
        while !h.is_finished() && start.elapsed() < Duration::from_secs(20) {
            recv_each(owner, Duration::from_millis(1), |d| kept.push(qpn_of(d.roce))).unwrap();
        }
        h.join().unwrap()
    });
    (r, kept)
}

fn qpn_of(roce: &[u8]) -> u32 {
    u32::from_be_bytes([0, roce[5], roce[6], roce[7]])
}

/// Receives on `link` until `n` datagrams came or 10 s passed: (qpn, peer, src port, integrity).
fn take(link: &mut UdpLink, n: usize) -> Vec<(u32, IpAddr, u16, Integrity)> {
    take_until(link, n, Duration::from_secs(10))
}

/// What `link` receives within `wait`.
fn take_for(link: &mut UdpLink, wait: Duration) -> Vec<(u32, IpAddr, u16, Integrity)> {
    take_until(link, usize::MAX, wait)
}

/// Receives on `link` until `n` datagrams came or `wait` passed.
fn take_until(link: &mut UdpLink, n: usize, wait: Duration) -> Vec<(u32, IpAddr, u16, Integrity)> {
    collect_until(link, n, wait, |d| (qpn_of(d.roce), d.peer, d.src_port, d.integrity))
}

/// What `what` makes of each datagram `link` receives, until `n` came or `wait` passed.
fn collect_until<T>(link: &mut UdpLink, n: usize, wait: Duration, what: impl Fn(&RxDatagram<'_>) -> T) -> Vec<T> {
    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < n && start.elapsed() < wait {
        recv_each(link, Duration::from_millis(10), |d| got.push(what(d))).unwrap();
    }
    got
}

/// Two links on address `host` of `net`: the first holds the port, the
/// second has claimed QP `qpn`.
fn owner_and_tenant(net: &TestNet, host: u8, qpn: u32) -> (UdpLink, UdpLink) {
    let owner = udp_on(net, host);
    let mut tenant = udp_on(net, host);
    tenant.claim(SteerKey::Qpn(qpn)).unwrap();
    (owner, tenant)
}

#[test]
fn a_tenant_gets_the_packets_of_its_qps_and_sends_from_its_own_port() {
    let net = TestNet::new();
    let (mut owner, mut tenant) = owner_and_tenant(&net, 1, 0x22);
    assert_eq!(owner.claim(SteerKey::Qpn(0x22)).unwrap_err().kind(), ErrorKind::AddrInUse);
    owner.claim(SteerKey::Qpn(0x33)).unwrap();
    // A peer sends to the shared address: three for the tenant's QP, two for the owner's.
    let mut peer = udp_on(&net, 2);
    let (ip1, ip2) = (IpAddr::V4(net.ip(1)), IpAddr::V4(net.ip(2)));
    let packets: Vec<Vec<u8>> =
        [0x22, 0x33, 0x22, 0x33, 0x22].iter().enumerate().map(|(i, q)| roce_packet(*q, i as u32, &[7; 32])).collect();
    assert_eq!(peer.send(&tx(ip1, &packets)).unwrap(), 5);
    let at_owner = take(&mut owner, 2);
    assert_eq!(at_owner.iter().map(|g| g.0).collect::<Vec<_>>(), [0x33, 0x33]);
    assert_eq!(owner.stats().rx_forwarded, 3, "{:?}", owner.stats());
    let at_tenant = take(&mut tenant, 3);
    assert_eq!(at_tenant.len(), 3);
    for (qpn, from, port, integrity) in at_tenant {
        // As the peer sent it: the owner keeps the sender's address and port.
        assert_eq!((qpn, from, port), (0x22, ip2, 4791));
        assert!(matches!(integrity, Integrity::IcrcButIpId { .. }), "the owner checked the ICRC: {integrity:?}");
    }
    // The tenant's own packets leave from its own port, their ICRC over it.
    assert_eq!(tenant.send(&tx(ip2, &packets[..1])).unwrap(), 1);
    let at_peer = take(&mut peer, 1);
    assert_eq!(at_peer.len(), 1);
    assert_eq!(at_peer[0].1, ip1);
    assert_ne!(at_peer[0].2, 4791, "a tenant sends from a port of its own");
    assert_eq!(peer.stats().rx_icrc_bad, 0);
    // The owner's own packets to the tenant's QP reach it too (handed over
    // at once, with their ICRC).
    assert_eq!(owner.send(&tx(ip1, &packets[..1])).unwrap(), 1);
    let from_owner = take(&mut tenant, 1);
    assert_eq!(from_owner.first().map(|g| (g.0, g.1)), Some((0x22, ip1)));
    assert_eq!(tenant.stats().rx_packets, 4);
    // A QP the tenant let go of is the owner's again.
    // (A release is not answered: the owner takes it in with its next receives.)
    tenant.release(SteerKey::Qpn(0x22));
    let start = Instant::now();
    while owner.claim(SteerKey::Qpn(0x22)).is_err() && start.elapsed() < Duration::from_secs(10) {
        take_for(&mut owner, Duration::from_millis(10));
    }
    owner.claim(SteerKey::Qpn(0x22)).unwrap();
}

#[test]
fn when_the_owner_goes_its_tenant_takes_the_port_over() {
    let net = TestNet::new();
    let (owner, mut tenant) = owner_and_tenant(&net, 3, 0x44);
    drop(owner);
    // The tenant finds its owner gone as it receives, binds port 4791 and
    // keeps its QPs: a peer's packets to the address now come to it.
    let mut peer = udp_on(&net, 4);
    let packets = vec![roce_packet(0x44, 1, &[9; 16])];
    let start = Instant::now();
    let mut got = Vec::new();
    while got.is_empty() && start.elapsed() < Duration::from_secs(10) {
        let _ = peer.send(&tx(IpAddr::V4(net.ip(3)), &packets));
        got = take_for(&mut tenant, Duration::from_millis(100));
    }
    assert_eq!(got.first().map(|g| g.0), Some(0x44), "the tenant took the port over");
    // It is the owner now: a new link on the address becomes its tenant.
    let (mut second, _) = while_receiving(&mut tenant, || udp_on(&net, 3));
    assert_eq!(
        while_receiving(&mut tenant, || second.claim(SteerKey::Qpn(0x44))).0.unwrap_err().kind(),
        ErrorKind::AddrInUse
    );
}

/// An owner that sends its tenant packets and goes at once (udaddy's
/// server sends its last replies and exits): the packets are in the
/// tenant's socket when it finds the owner gone, and it hands them up
/// before it replaces that socket with the port it takes over. Found out
/// on a claim (the tenant's next question finds no owner) and on a receive.
#[test]
fn an_owners_last_packets_reach_its_tenant_when_it_goes() {
    let net = TestNet::new();
    let ip = IpAddr::V4(net.ip(5));
    for found_on_claim in [true, false] {
        let (mut owner, mut tenant) = owner_and_tenant(&net, 5, 0x55);
        let packets: Vec<Vec<u8>> = (0..3).map(|psn| roce_packet(0x55, psn, &[3; 24])).collect();
        assert_eq!(owner.send(&tx(ip, &packets)).unwrap(), 3);
        drop(owner);
        if found_on_claim {
            // Bounded inside: the take-over waits at most 3 s for the port.
            tenant.claim(SteerKey::Qpn(0x56)).unwrap();
        }
        let got = take(&mut tenant, 3);
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [0x55; 3], "found on a claim: {found_on_claim}");
        drop(tenant);
    }
}

/// Links opened on one address at the same moment, as two programs started
/// together (pyverbs' rdmacm tests fork both ends at once): every open
/// succeeds, one as the owner and the others as its tenants. (The owner
/// once bound the port before it took its name, and an open that came in
/// between took the port for another program's.)
#[test]
fn links_opened_together_on_one_address_all_open() {
    let net = TestNet::new();
    let spec: DeviceSpec = net.udp(6).parse().unwrap();
    for round in 0..200 {
        let start = std::sync::Barrier::new(3);
        let opened: Vec<Result<UdpLink, String>> = std::thread::scope(|s| {
            let open = || {
                start.wait();
                UdpLink::open(&spec).map_err(|e| e.to_string())
            };
            let handles: Vec<_> = (0..3).map(|_| s.spawn(open)).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in &opened {
            assert!(r.is_ok(), "round {round}: {:?}", r.as_ref().err());
        }
    }
}

/// Port 4791 bound by a program that is not uroce (no owner's name): the
/// open fails, naming the port, and leaves the name free.
#[test]
fn a_port_another_program_holds_is_in_use() {
    let net = TestNet::new();
    let ip = IpAddr::V4(net.ip(7));
    let other = std::net::UdpSocket::bind((ip, 4791)).unwrap();
    let spec: DeviceSpec = net.udp(7).parse().unwrap();
    let err = UdpLink::open(&spec).err().expect("the port is another program's");
    assert!(err.to_string().contains("4791"), "{err}");
    drop(other);
    // With the port free, the name was not kept: the next open owns both.
    let _owner = udp_on(&net, 7);
    let mut tenant = udp_on(&net, 7);
    tenant.claim(SteerKey::Qpn(0x77)).unwrap();
}

/// An owner's batch that mixes packets for its tenant's QP (on its own
/// address) with packets for a peer elsewhere: each end gets its own, in
/// the order sent.
#[test]
fn an_owners_mixed_batch_reaches_its_tenant_and_its_peer_in_order() {
    let net = TestNet::new();
    let (mut owner, mut tenant) = owner_and_tenant(&net, 8, 0x88);
    let mut peer = udp_on(&net, 9);
    let (own, other) = (IpAddr::V4(net.ip(8)), IpAddr::V4(net.ip(9)));
    let packets: Vec<Vec<u8>> =
        (0..8).map(|psn| roce_packet(if psn % 3 == 0 { 0x88 } else { 0x99 }, psn, &[1; 16])).collect();
    let batch: Vec<TxDatagram<'_>> = packets
        .iter()
        .map(|p| TxDatagram { peer: if qpn_of(p) == 0x88 { own } else { other }, src_port: 0xc001, roce: p })
        .collect();
    assert_eq!(owner.send(&batch).unwrap(), 8);
    let psns = |link: &mut UdpLink, n: usize| collect_until(link, n, Duration::from_secs(10), |d| psn_of(d.roce));
    assert_eq!(psns(&mut tenant, 3), [0, 3, 6]);
    assert_eq!(psns(&mut peer, 5), [1, 2, 4, 5, 7]);
}

/// A burst an owner sends its tenant (a READ's responses to the tenant's
/// QP) leaves in a system call or two, not one each, and reaches the
/// tenant whole and in order, a shorter packet last (GSO and GRO may join
/// them on the way: the tenant splits them again).
#[test]
fn an_owners_burst_to_its_tenant_goes_in_few_system_calls_and_arrives_in_order() {
    let net = TestNet::new();
    let (mut owner, mut tenant) = owner_and_tenant(&net, 10, 0xaa);
    let own = IpAddr::V4(net.ip(10));
    let packets: Vec<Vec<u8>> =
        (0..40u32).map(|psn| roce_packet(0xaa, psn, &vec![psn as u8; if psn < 39 { 4096 } else { 100 }])).collect();
    let batch: Vec<TxDatagram<'_>> =
        packets.iter().map(|p| TxDatagram { peer: own, src_port: 0xc001, roce: p }).collect();
    let before = owner.stats().tx_syscalls;
    assert_eq!(owner.send(&batch).unwrap(), 40);
    let calls = owner.stats().tx_syscalls - before;
    assert!(calls <= 2, "{calls} system calls for 40 packets to the tenant");
    let got = collect_until(&mut tenant, 40, Duration::from_secs(10), |d| {
        (
            psn_of(d.roce),
            d.roce.len(),
            d.roce[12..d.roce.len() - 4].iter().all(|&b| b == psn_of(d.roce) as u8),
            d.integrity,
        )
    });
    let want: Vec<_> =
        packets.iter().map(|p| (psn_of(p), p.len(), true, Integrity::IcrcButIpId { ident: 0 })).collect();
    assert_eq!(got, want);
}

/// A burst of small packets of one size (ACKs, short SENDs), as many as a
/// batch holds, reaches the tenant whole: a GSO run is cut to what one
/// system call's pieces can carry.
#[test]
fn an_owners_burst_of_small_packets_to_its_tenant_arrives_whole() {
    let net = TestNet::new();
    let (mut owner, mut tenant) = owner_and_tenant(&net, 11, 0xbb);
    let own = IpAddr::V4(net.ip(11));
    let packets: Vec<Vec<u8>> = (0..64u32).map(|psn| roce_packet(0xbb, psn, &[psn as u8; 8])).collect();
    let batch: Vec<TxDatagram<'_>> =
        packets.iter().map(|p| TxDatagram { peer: own, src_port: 0xc001, roce: p }).collect();
    assert_eq!(owner.send(&batch).unwrap(), 64);
    assert_eq!(owner.stats().tx_dropped, 0);
    let psns = collect_until(&mut tenant, 64, Duration::from_secs(10), |d| psn_of(d.roce));
    assert_eq!(psns, (0..64).collect::<Vec<_>>());
}
