//! The udp link over loopback (any user), and (root) the wire compared with
//! what the link signed.

mod common;

use common::*;
use std::net::IpAddr;
use std::time::{Duration, Instant};
use uroce_stack::frame::parse_ethernet;
use uroce_stack::link::capture::{Capture, CaptureMode};
use uroce_stack::link::udp::{UdpLink, UdpOffload};
use uroce_stack::link::{open, DeviceSpec, Integrity, Link, LinkError};
use uroce_stack::live::LiveCapture;
use uroce_stack::pcap::{LinkType, PcapReader};
use uroce_stack::testnet::{Namespaces, TestNet};
use uroce_transport::icrc;

fn udp(ip: &str) -> UdpLink {
    UdpLink::open(&format!("udp:{ip}").parse::<DeviceSpec>().unwrap()).unwrap()
}

/// The udp link on address `host` of `net`.
fn udp_on(net: &TestNet, host: u8) -> UdpLink {
    UdpLink::open(&net.udp(host).parse::<DeviceSpec>().unwrap()).unwrap()
}

#[test]
fn two_endpoints_exchange_in_batches() {
    let net = TestNet::new();
    let (mut a, mut b) = (udp_on(&net, 1), udp_on(&net, 2));
    let (a_ip, b_ip) = (IpAddr::V4(net.ip(1)), IpAddr::V4(net.ip(2)));
    let packets: Vec<Vec<u8>> = (0..96).map(|i| roce_packet(0x11, i, &[i as u8; 64])).collect();
    for chunk in packets.chunks(32) {
        assert_eq!(a.send(&tx(b_ip, chunk)).unwrap(), chunk.len());
    }
    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < packets.len() && start.elapsed() < Duration::from_secs(10) {
        recv_each(&mut b, Duration::from_millis(50), |d| {
            assert_eq!(d.peer, a_ip);
            assert_eq!(d.local, b_ip);
            assert_eq!(d.src_port, 4791, "a kernel socket sends from its bound port");
            // Loopback sends each batch of 32 as one GSO datagram: segment k has IP ID k.
            assert_eq!(d.integrity, Integrity::IcrcButIpId { ident: (got.len() % 32) as u16 });
            got.push(d.roce.to_vec());
        })
        .unwrap();
    }
    assert_eq!(got.len(), packets.len());
    for (i, g) in got.iter().enumerate() {
        assert_eq!(psn_of(g), i as u32);
        assert_eq!(g[..g.len() - 4], packets[i][..packets[i].len() - 4], "payload intact");
        assert_ne!(g[g.len() - 4..], [0; 4], "the link wrote the ICRC");
    }
    let (sa, sb) = (a.stats(), b.stats());
    println!("sender {sa:?}\nreceiver {sb:?}");
    assert!(sa.tx_max_batch > 1, "sendmmsg moved more than one datagram per call");
    assert!(sb.rx_max_batch > 1, "recvmmsg moved more than one datagram per call");
    assert_eq!((sa.tx_packets, sb.rx_packets, sb.rx_icrc_bad), (96, 96, 0));

    // And back: b answers a.
    let acks: Vec<Vec<u8>> = (0..8).map(|i| roce_packet(0x22, i, &[])).collect();
    b.send(&tx(a_ip, &acks)).unwrap();
    let back = collect(&mut a, &mut [], acks.len(), Duration::from_secs(10));
    assert_eq!(back.len(), acks.len());
}

#[test]
fn ipv6_loopback_is_fully_checked() {
    let mut a = udp("::1");
    let packets: Vec<Vec<u8>> = (0..4).map(|i| roce_packet(0x11, i, b"over IPv6, checksummed!!")).collect();
    // An IPv4-mapped peer is IPv4: not this socket's family, so dropped and counted.
    let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
    assert_eq!(a.send(&tx(mapped, &packets[..1])).unwrap(), 0);
    assert_eq!(a.stats().tx_dropped, 1);
    a.send(&tx("::1".parse().unwrap(), &packets)).unwrap();
    let mut n = 0;
    let start = Instant::now();
    while n < packets.len() && start.elapsed() < Duration::from_secs(10) {
        recv_each(&mut a, Duration::from_millis(50), |d| {
            assert_eq!(d.integrity, Integrity::Icrc);
            n += 1;
        })
        .unwrap();
    }
    assert_eq!(n, packets.len());
}

#[test]
fn corrupt_packets_are_dropped_and_counted() {
    let net = TestNet::new();
    let (mut a, mut b) = (udp_on(&net, 1), udp_on(&net, 2));
    // A raw kernel socket stands in for a peer that corrupts: it sends RoCE
    // bytes whose ICRC is wrong from a's address (any port) to b.
    let evil = std::net::UdpSocket::bind((net.ip(1), 0)).unwrap();
    let mut p = roce_packet(0x11, 1, &[7; 32]);
    evil.send_to(&p, (net.ip(2), 4791)).unwrap();
    let n = p.len();
    p[n - 1] = 0x5a;
    evil.send_to(&p, (net.ip(2), 4791)).unwrap();
    a.send(&tx(IpAddr::V4(net.ip(2)), &[roce_packet(0x11, 2, &[1; 8])])).unwrap();
    let got = collect(&mut b, &mut [], 1, Duration::from_secs(10));
    // Give the other two time to arrive; they must be dropped, not delivered.
    let more = collect(&mut b, &mut [], 1, Duration::from_millis(300));
    assert_eq!(got.len() + more.len(), 1);
    assert_eq!(b.stats().rx_icrc_bad, 2);
}

/// A packet with the authenticated mode's mark is left to its MAC, which the
/// engine checks: its ICRC is not checked here (it arrives as
/// `Integrity::Mac`), with or without a capture tapping the link, and the
/// link sends it with the zero ICRC the engine left, while an unmarked
/// packet gets its ICRC.
#[test]
fn marked_authenticated_packets_are_left_to_their_mac() {
    let net = TestNet::new();
    let mut b = udp_on(&net, 2);
    let evil = std::net::UdpSocket::bind((net.ip(1), 0)).unwrap();
    let mut marked = roce_packet(0x11, 1, &[7; 32]);
    marked[8] |= uroce_transport::engine::AUTH_MARK;
    let unmarked = roce_packet(0x11, 2, &[7; 32]);
    // Both ICRCs are zero, so wrong.
    for p in [&marked, &unmarked] {
        evil.send_to(p, (net.ip(2), 4791)).unwrap();
    }
    // Both arrive (bounded wait: at most 1000 receives of 10 ms).
    let mut got = Vec::new();
    for _ in 0..1000 {
        if b.stats().rx_icrc_bad > 0 && !got.is_empty() {
            break;
        }
        recv_each(&mut b, Duration::from_millis(10), |d| got.push((psn_of(d.roce), d.integrity))).unwrap();
    }
    assert_eq!(got, [(1, Integrity::Mac)], "{:?}", b.stats());
    assert_eq!(b.stats().rx_icrc_bad, 1, "the unmarked one");

    // A capture tapping the link changes nothing: the frame is captured
    // and delivered.
    let captured = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = captured.clone();
    b.set_frame_sink(Some(Box::new(move |_, _: &[u8]| {
        seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    })));
    evil.send_to(&marked, (net.ip(2), 4791)).unwrap();
    let mut delivered = Vec::new();
    for _ in 0..1000 {
        if !delivered.is_empty() {
            break;
        }
        recv_each(&mut b, Duration::from_millis(10), |d| delivered.push(d.integrity)).unwrap();
    }
    assert_eq!(delivered, [Integrity::Mac], "{:?}", b.stats());
    assert_eq!((b.stats().rx_icrc_bad, captured.load(std::sync::atomic::Ordering::Relaxed)), (1, 1));

    // Sending: the marked packet keeps its zero ICRC, the unmarked one gets
    // its ICRC. A plain socket on the peer's RoCE port reads the wire.
    let mut a = udp_on(&net, 1);
    let wire = std::net::UdpSocket::bind((net.ip(3), 4791)).unwrap();
    wire.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let peer = IpAddr::V4(net.ip(3));
    for p in [&marked, &unmarked] {
        assert_eq!(a.send(&tx(peer, std::slice::from_ref(p))).unwrap(), 1);
        let mut buf = [0u8; 256];
        let n = wire.recv(&mut buf).unwrap();
        assert_eq!(buf[..n - 4], p[..p.len() - 4], "bytes up to the ICRC as given");
        let carried = icrc::carried(&buf[..n]).unwrap();
        assert_eq!(carried == 0, p == &marked, "ICRC 0x{carried:08x} of PSN {}", psn_of(p));
    }
}

#[test]
fn clear_open_errors() {
    let net = TestNet::new();
    // Held by a program that is not uroce (a uroce link would share it).
    let _held = std::net::UdpSocket::bind((net.ip(1), 4791)).unwrap();
    let e = open(&net.udp(1)).err().unwrap();
    assert!(matches!(e, LinkError::AddressInUse(_)), "{e}");
    assert!(e.to_string().contains(&format!("{}:4791 is in use", net.ip(1))), "{e}");
    let e = open("udp:203.0.113.9").err().unwrap();
    assert!(e.to_string().contains("not an address of this host"), "{e}");
}

#[test]
fn path_mtu_of_loopback() {
    let net = TestNet::new();
    let a = udp_on(&net, 1);
    let info = a.info();
    assert_eq!(info.path_mtu.bytes(), 4096, "lo's MTU 65536 fits 4096: {info:?}");
    assert_eq!(info.gids.get(1).unwrap().to_ipv6().to_string(), format!("::ffff:{}", net.ip(1)));
    let o = UdpLink::open(&format!("{},mtu=1024", net.udp(2)).parse().unwrap()).unwrap();
    assert_eq!(o.info().path_mtu.bytes(), 1024);
}

/// The IPv4 and UDP header every datagram carried on the wire is the one its
/// ICRC was computed over: captured on a namespace's `lo` with AF_PACKET (what tcpdump uses)
/// and compared with the link's own capture of what it signed.
#[test]
fn signed_header_is_the_wire_header() {
    if !is_root() {
        println!("SKIP: signed_header_is_the_wire_header: needs root (CAP_NET_RAW) to capture on lo");
        return;
    }
    // A namespace of its own: on the host's lo, the other tests running
    // beside this one can flood the capture until these frames are dropped.
    let ns = Namespaces::new("signed", 1);
    let _inside = ns.enter(0);
    let net = TestNet::new();
    let mut wire = LiveCapture::open("lo").unwrap();
    // Without GSO: on lo a GSO datagram is segmented after the capture point, at
    // the receiver (`offloads_every_way` checks those segments' IP IDs).
    let a = UdpLink::open_with(&net.udp(1).parse().unwrap(), UdpOffload::NONE).unwrap();
    let mut a = Capture::new(a, LinkType::RawIp, Vec::new(), CaptureMode::TxOnly).unwrap();
    let mut b = udp_on(&net, 2);
    let packets: Vec<Vec<u8>> = (0..16).map(|i| roce_packet(0x33, i, &vec![i as u8; 4 * i as usize])).collect();
    a.send(&tx(IpAddr::V4(net.ip(2)), &packets)).unwrap();
    let got = collect(&mut b, &mut [], packets.len(), Duration::from_secs(10));
    assert_eq!(got.len(), packets.len());

    let (_, signed) = a.finish().unwrap();
    let mut r = PcapReader::new(&signed[..]).unwrap();
    assert_eq!(r.link_type(), LinkType::RawIp);
    let mut signed_packets = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        assert_eq!(icrc::check(&rec.data), Ok(true));
        signed_packets.push(rec.data);
    }
    assert_eq!(signed_packets.len(), packets.len());

    // On lo each packet shows twice (outgoing and incoming): match in order.
    let mut matched = 0;
    let start = Instant::now();
    while matched < signed_packets.len() && start.elapsed() < Duration::from_secs(10) {
        let Some((_, frame)) = wire.next_frame(Duration::from_millis(100)).unwrap() else { continue };
        let Ok(p) = parse_ethernet(frame) else { continue };
        if p.repr.ip.src() != IpAddr::V4(net.ip(1)) {
            continue;
        }
        let want = &signed_packets[matched];
        if p.ip_packet == &want[..] {
            assert_eq!(icrc::check(p.ip_packet), Ok(true), "the wire ICRC is right");
            matched += 1;
        } else if matched > 0 && p.ip_packet == &signed_packets[matched - 1][..] {
            // the second copy of the previous one
        } else {
            panic!(
                "wire packet differs from the signed one:\n wire   {:02x?}\n signed {:02x?}",
                &p.ip_packet[..28],
                &want[..28]
            );
        }
    }
    assert_eq!(matched, signed_packets.len(), "every signed packet was seen on the wire, byte for byte");
}

/// GSO on the sender, GRO on the receiver, each on and off: every packet
/// arrives with a right ICRC, and a GSO datagram's segment k carried IP ID k
/// (the receiver recovers it from the ICRC), so what was signed was sent.
#[test]
fn offloads_every_way() {
    let net = TestNet::new();
    for (i, (gso, gro)) in [(false, false), (true, false), (false, true), (true, true)].into_iter().enumerate() {
        // Addresses of its own for each way: no late packet of one way reaches the next.
        let (ha, hb) = (1 + 2 * i as u8, 2 + 2 * i as u8);
        let mut a =
            UdpLink::open_with(&net.udp(ha).parse().unwrap(), UdpOffload { gso, gro: false, shm: false }).unwrap();
        let mut b =
            UdpLink::open_with(&net.udp(hb).parse().unwrap(), UdpOffload { gso: false, gro, shm: false }).unwrap();
        assert_eq!((a.offload().gso, b.offload().gro), (gso, gro), "this kernel has UDP GSO and GRO");
        // Groups: 19 full packets and a shorter one, three times.
        let mut packets = Vec::new();
        for round in 0..3u32 {
            for k in 0..20u32 {
                let len = if k == 19 { 100 } else { 1024 };
                packets.push(roce_packet(0x11, round * 20 + k, &vec![k as u8; len]));
            }
        }
        let b_ip = IpAddr::V4(net.ip(hb));
        for chunk in packets.chunks(20) {
            a.send(&tx(b_ip, chunk)).unwrap();
        }
        let mut got = Vec::new();
        let start = Instant::now();
        while got.len() < packets.len() && start.elapsed() < Duration::from_secs(10) {
            recv_each(&mut b, Duration::from_millis(20), |d| got.push((psn_of(d.roce), d.integrity))).unwrap();
        }
        assert_eq!(got.len(), packets.len(), "gso {gso} gro {gro}: {:?}", b.stats());
        for (n, (psn, integrity)) in got.iter().enumerate() {
            assert_eq!(*psn, n as u32);
            let ident = if gso { (n % 20) as u16 } else { 0 };
            assert_eq!(*integrity, Integrity::IcrcButIpId { ident }, "gso {gso} gro {gro} packet {n}");
        }
        let (sa, sb) = (a.stats(), b.stats());
        println!(
            "gso {gso} gro {gro}: tx syscalls {} rx syscalls {} rx max batch {}",
            sa.tx_syscalls, sb.rx_syscalls, sb.rx_max_batch
        );
        assert_eq!(sb.rx_icrc_bad, 0);
    }
}

/// Without privileges, opening a raw link says which capability is missing.
/// As root, the test runs itself again as `nobody` (with `runuser`).
#[test]
fn errors_without_privilege_name_the_capability() {
    if std::env::var_os("UROCE_TEST_AS_USER").is_some() || !is_root() {
        let e = open("packet:lo").err().unwrap().to_string();
        assert!(e.contains("needs CAP_NET_RAW"), "{e}");
        let e = open("tap:uroce-nope0,ip=198.18.0.1/24").err().unwrap().to_string();
        assert!(e.contains("needs CAP_NET_ADMIN"), "{e}");
        println!("unprivileged errors: ok");
        return;
    }
    if !have("runuser") {
        println!("SKIP: errors_without_privilege_name_the_capability: needs runuser to run as an unprivileged user");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .arg(&exe)
        .args(["--exact", "errors_without_privilege_name_the_capability", "--nocapture"])
        .env("UROCE_TEST_AS_USER", "1")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if text.contains("Permission denied") && !text.contains("test result") {
        println!("SKIP: errors_without_privilege_name_the_capability: nobody cannot run {}", exe.display());
        return;
    }
    assert!(out.status.success() && text.contains("unprivileged errors: ok"), "{text}");
}

/// The kernel rxe sends RoCEv2 over IPv6 with UDP checksum 0 (RFC 6935 lets
/// a tunnel whose payload has its own check do so; the ICRC is that check).
/// A plain IPv6 UDP socket drops such datagrams in the kernel: the link's
/// must take them. Root, in a namespace of its own (for its own `::1`); the
/// sender is python's socket with UDP_NO_CHECK6_TX.
#[test]
fn ipv6_datagrams_with_a_zero_udp_checksum_reach_the_link() {
    if skip_unless_root_with_ip("ipv6_datagrams_with_a_zero_udp_checksum_reach_the_link") {
        return;
    }
    if !have("python3") {
        println!("SKIP: ipv6_datagrams_with_a_zero_udp_checksum_reach_the_link: needs python3");
        return;
    }
    let ns = Namespaces::new("zc6", 1);
    let mut link = {
        let _in = ns.enter(0);
        udp("::1")
    };
    let packet: String = roce_packet(0x11, 0, b"checksum zero").iter().map(|b| format!("{b:02x}")).collect();
    let send = "import socket, sys\n\
                s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n\
                s.setsockopt(17, 101, 1)  # SOL_UDP, UDP_NO_CHECK6_TX\n\
                for _ in range(4): s.sendto(bytes.fromhex(sys.argv[1]), ('::1', 4791))\n";
    ns.exec(0, &["python3", "-c", send, &packet]);
    let start = Instant::now();
    // The ICRC of this test packet is not the one for these headers: each
    // datagram that reaches the link is counted as a bad ICRC.
    while link.stats().rx_icrc_bad < 4 && start.elapsed() < Duration::from_secs(5) {
        recv_each(&mut link, Duration::from_millis(50), |_| panic!("the ICRC cannot match")).unwrap();
    }
    assert_eq!(link.stats().rx_icrc_bad, 4, "{:?}", link.stats());
}
