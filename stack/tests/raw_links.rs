//! The raw links (packet, tap) and the udp link against them, in network
//! namespaces joined by veth pairs (root; prints SKIP otherwise): IPv4 and IPv6,
//! neighbours resolved from an empty cache, captures checked ICRC by ICRC and
//! decoded by tshark, the wire compared with what was signed.

mod common;

use common::*;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use uroce_stack::frame::parse_ethernet;
use uroce_stack::link::capture::Capture;
use uroce_stack::link::packet::PacketLink;
use uroce_stack::link::tap::TapLink;
use uroce_stack::link::udp::UdpLink;
use uroce_stack::link::{DeviceSpec, Integrity, Link};
use uroce_stack::live::LiveCapture;
use uroce_stack::pcap::{LinkType, PcapReader};
use uroce_stack::testnet::Namespaces;

fn spec(s: &str) -> DeviceSpec {
    s.parse().unwrap()
}

fn pcap_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("uroce-{name}-{}.pcap", std::process::id()))
}

/// Sends `n` packets `from` -> `to_ip` and checks `to` gets them all, polling
/// `from` meanwhile (it must answer and hear ARP/ND). Returns the integrities.
fn one_way(from: &mut dyn Link, to: &mut dyn Link, to_ip: &str, n: u32, qpn: u32) -> Vec<Integrity> {
    let ip: IpAddr = to_ip.parse().unwrap();
    let packets: Vec<Vec<u8>> = (0..n).map(|i| roce_packet(qpn, i, &vec![i as u8; 64 + 4 * i as usize])).collect();
    from.send(&tx(ip, &packets)).unwrap();
    let start = Instant::now();
    let mut got: Vec<(Vec<u8>, Integrity)> = Vec::new();
    while got.len() < packets.len() && start.elapsed() < Duration::from_secs(15) {
        recv_each(from, Duration::ZERO, |_| {}).unwrap();
        recv_each(to, Duration::from_millis(10), |d| got.push((d.roce.to_vec(), d.integrity))).unwrap();
    }
    assert_eq!(got.len(), packets.len(), "to {to_ip}: sender {:?}\nreceiver {:?}", from.stats(), to.stats());
    for (i, (g, _)) in got.iter().enumerate() {
        assert_eq!(psn_of(g), i as u32);
        assert_eq!(g[..g.len() - 4], packets[i][..packets[i].len() - 4]);
    }
    got.into_iter().map(|(_, i)| i).collect()
}

/// Every RoCEv2 frame of the capture has a good ICRC, and tshark decodes them.
fn check_pcap(path: &std::path::Path, want_roce: usize) {
    let (roce, good, other) = check_capture(path);
    println!("{}: {roce} RoCEv2 frames ({good} ICRC ok), {other} other", path.display());
    assert_eq!(roce, want_roce);
    assert_eq!(good, roce, "every ICRC in the capture is right");
    if let Some(ops) = tshark_opcodes(path) {
        assert_eq!(ops.len(), roce, "tshark decodes every RoCEv2 frame: {ops:?}");
        assert!(ops.iter().all(|o| o == "4" || o == "0x04"), "RC SEND ONLY: {ops:?}");
    }
}

/// The RoCE frames a live capture saw, as IP packets.
fn wire_roce(live: &mut LiveCapture, want: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let start = Instant::now();
    while out.len() < want && start.elapsed() < Duration::from_secs(5) {
        let Some((_, f)) = live.next_frame(Duration::from_millis(50)).unwrap() else { continue };
        if let Ok(p) = parse_ethernet(f) {
            out.push(p.ip_packet.to_vec());
        }
    }
    out
}

/// The IP packets of the transmitted RoCE frames in a capture.
fn signed_roce(path: &std::path::Path) -> Vec<Vec<u8>> {
    let mut r = PcapReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let lt = r.link_type();
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        if let Ok(p) = lt.parse_frame(&rec.data) {
            out.push(p.ip_packet.to_vec());
        }
    }
    out
}

fn two_namespaces(tag: &str) -> Namespaces {
    let ns = Namespaces::new(tag, 2);
    ns.veth(0, "va", 1, "vb");
    ns
}

#[test]
fn packet_to_packet_ipv4_and_ipv6() {
    if skip_unless_root_with_ip("packet_to_packet_ipv4_and_ipv6") {
        return;
    }
    let ns = two_namespaces("pp");
    let path = pcap_path("packet-packet");
    let a = {
        let _in = ns.enter(0);
        PacketLink::open(&spec("packet:va,ip=198.18.0.1,ip=fd00::1,mac=02:00:00:00:00:01")).unwrap()
    };
    let frame_type = a.info().frame_type;
    let mut a = Capture::to_file(a, frame_type, &path).unwrap();
    let (mut b, mut live) = {
        let _in = ns.enter(1);
        let live = LiveCapture::open("vb").unwrap();
        (PacketLink::open(&spec("packet:vb,ip=198.18.0.2,ip=fd00::2,mac=02:00:00:00:00:02")).unwrap(), live)
    };
    assert!(a.inner().neighbours().is_empty() && b.neighbours().is_empty());
    assert!(a.inner().has_rx_ring() && b.has_rx_ring(), "frames arrive through the mmap ring");
    assert_eq!(a.inner().info().path_mtu.bytes(), 1024, "veth MTU 1500 gives path MTU 1024, as on rxe");
    assert_eq!(a.inner().info().gids.get(1).unwrap().to_ipv6().to_string(), "::ffff:198.18.0.1");
    assert_eq!(a.inner().info().gids.get(0).unwrap().to_ipv6().to_string(), "fe80::ff:fe00:1");

    let v4 = one_way(&mut a, &mut b, "198.18.0.2", 16, 0x11);
    assert!(v4.iter().all(|i| *i == Integrity::Icrc));
    let back = one_way(&mut b, &mut a, "198.18.0.1", 4, 0x12);
    assert!(back.iter().all(|i| *i == Integrity::Icrc));
    let v6 = one_way(&mut a, &mut b, "fd00::2", 8, 0x13);
    assert!(v6.iter().all(|i| *i == Integrity::Icrc));
    one_way(&mut b, &mut a, "fd00::1", 2, 0x14);
    // Link-local GIDs work too.
    let ll_b = b.info().gids.get(0).unwrap().ip().to_string();
    one_way(&mut a, &mut b, &ll_b, 2, 0x15);

    let (sa, sb) = (a.stats(), b.stats());
    println!("a {sa:?}\nb {sb:?}");
    assert!(sa.arp_requests_sent >= 1 && sb.arp_replies_sent >= 1, "resolved by ARP");
    assert!(sa.nd_solicits_sent >= 1 && sb.nd_adverts_sent >= 1, "resolved by neighbour discovery");
    assert!(sa.tx_max_batch > 1, "frames left in batches");
    assert_eq!(sa.rx_icrc_bad + sb.rx_icrc_bad, 0);

    // The wire carries exactly the frames a signed.
    let (_, file) = a.finish().unwrap();
    drop(file);
    let signed = signed_roce(&path);
    let wire = wire_roce(&mut live, signed.len());
    for w in &wire {
        assert!(signed.contains(w), "a wire packet differs from every signed one: {:02x?}", &w[..28.min(w.len())]);
    }
    // a's capture holds what it sent and what it received; vb saw both ways.
    assert_eq!(wire.len(), signed.len());
    check_pcap(&path, 16 + 4 + 8 + 2 + 2);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn tap_to_packet_ipv4_and_ipv6() {
    if skip_unless_root_with_ip("tap_to_packet_ipv4_and_ipv6") {
        return;
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        println!("SKIP: tap_to_packet_ipv4_and_ipv6: no /dev/net/tun (modprobe tun)");
        return;
    }
    let ns = two_namespaces("tp");
    let tap_name = format!("ut{}", std::process::id() % 100_000);
    let path = pcap_path("tap-packet");
    let t = {
        let _in = ns.enter(0);
        TapLink::open(&spec(&format!("tap:{tap_name},ip=198.18.0.1/24,ip=fd00::1/64"))).unwrap()
    };
    // The tap and va on one bridge: uroce's frames cross to the other namespace.
    ns.exec(0, &["ip", "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"]);
    ns.exec(0, &["ip", "link", "set", &tap_name, "master", "br0"]);
    ns.exec(0, &["ip", "link", "set", "va", "master", "br0"]);
    ns.exec(0, &["ip", "link", "set", "br0", "up"]);
    let frame_type = t.info().frame_type;
    let mut t = Capture::to_file(t, frame_type, &path).unwrap();
    let (mut p, mut live) = {
        let _in = ns.enter(1);
        let live = LiveCapture::open("vb").unwrap();
        (PacketLink::open(&spec("packet:vb,ip=198.18.0.2,ip=fd00::2,mac=02:00:00:00:00:02")).unwrap(), live)
    };
    assert_eq!(t.inner().info().kind, "tap");
    one_way(&mut t, &mut p, "198.18.0.2", 8, 0x21);
    one_way(&mut p, &mut t, "198.18.0.1", 8, 0x22);
    one_way(&mut t, &mut p, "fd00::2", 4, 0x23);
    one_way(&mut p, &mut t, "fd00::1", 4, 0x24);
    let (st, sp) = (t.stats(), p.stats());
    println!("tap {st:?}\npacket {sp:?}");
    assert!(st.arp_requests_sent >= 1 && sp.arp_replies_sent >= 1);
    assert!(st.nd_solicits_sent >= 1 && sp.nd_adverts_sent >= 1);
    let (_, file) = t.finish().unwrap();
    drop(file);
    // The frames on the far side of the bridge are the ones the tap link signed.
    let signed = signed_roce(&path);
    let wire = wire_roce(&mut live, signed.len());
    assert_eq!(wire.len(), signed.len());
    for w in &wire {
        assert!(signed.contains(w), "a wire packet differs from every signed one: {:02x?}", &w[..28.min(w.len())]);
    }
    check_pcap(&path, 8 + 8 + 4 + 4);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn udp_to_packet_ipv4_and_ipv6() {
    if skip_unless_root_with_ip("udp_to_packet_ipv4_and_ipv6") {
        return;
    }
    let ns = two_namespaces("up");
    ns.exec(0, &["ip", "addr", "add", "198.18.0.1/24", "dev", "va"]);
    ns.exec(0, &["ip", "addr", "add", "fd00::1/64", "dev", "va", "nodad"]);
    let path4 = pcap_path("udp4-packet");
    let path6 = pcap_path("udp6-packet");
    let (u4, u6) = {
        let _in = ns.enter(0);
        (UdpLink::open(&spec("udp:198.18.0.1")).unwrap(), UdpLink::open(&spec("udp:fd00::1")).unwrap())
    };
    let mut u4 = Capture::to_file(u4, LinkType::RawIp, &path4).unwrap();
    let mut u6 = Capture::to_file(u6, LinkType::RawIp, &path6).unwrap();
    let (mut p, mut live) = {
        let _in = ns.enter(1);
        let live = LiveCapture::open("vb").unwrap();
        (PacketLink::open(&spec("packet:vb,ip=198.18.0.2,ip=fd00::2,mac=02:00:00:00:00:02")).unwrap(), live)
    };
    // The kernel resolves the packet link by ARP/ND, the packet link the kernel.
    one_way(&mut u4, &mut p, "198.18.0.2", 8, 0x31);
    let from_p = one_way(&mut p, &mut u4, "198.18.0.1", 8, 0x32);
    // The packet link counts IP IDs (as rxe does): the udp link recovers each one.
    let ids: Vec<u16> = from_p
        .iter()
        .map(|i| match i {
            Integrity::IcrcButIpId { ident } => *ident,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0].wrapping_add(1)), "consecutive IP IDs recovered: {ids:?}");
    one_way(&mut u6, &mut p, "fd00::2", 4, 0x33);
    let v6 = one_way(&mut p, &mut u6, "fd00::1", 4, 0x34);
    assert!(v6.iter().all(|i| *i == Integrity::Icrc), "IPv6: every field known, fully checked");
    let sp = p.stats();
    assert!(sp.arp_replies_sent >= 1 && sp.nd_adverts_sent >= 1, "answered the kernel's ARP and ND: {sp:?}");

    // What the udp link signed is what the kernel put on the wire (IPv4 and IPv6).
    let (_, f4) = u4.finish().unwrap();
    let (_, f6) = u6.finish().unwrap();
    drop((f4, f6));
    let signed: Vec<Vec<u8>> = signed_roce(&path4).into_iter().chain(signed_roce(&path6)).collect();
    let wire = wire_roce(&mut live, 24);
    assert_eq!(wire.len(), 24, "all 24 RoCE packets seen on vb");
    // veth hands IPv6 UDP checksums on as CHECKSUM_PARTIAL (a capture on the
    // receiving veth shows only the pseudo-header sum), so that one field, which
    // the ICRC masks, is compared as zero; every other byte must be equal.
    let masked = |p: &[u8]| {
        let mut p = p.to_vec();
        if p[0] >> 4 == 6 {
            p[46] = 0;
            p[47] = 0;
        }
        p
    };
    let signed: Vec<Vec<u8>> = signed.iter().map(|p| masked(p)).collect();
    for w in &wire {
        let w = masked(w);
        assert!(signed.contains(&w), "wire packet not as signed: {w:02x?}");
    }
    // Both captures: every ICRC right, including the received ones whose IP ID was recovered.
    check_pcap(&path4, 16);
    check_pcap(&path6, 8);
    let _ = std::fs::remove_file(&path4);
    let _ = std::fs::remove_file(&path6);
}

#[test]
fn packet_on_the_interface_address_gets_no_icmp() {
    if skip_unless_root_with_ip("packet_on_the_interface_address_gets_no_icmp") {
        return;
    }
    let ns = two_namespaces("pi");
    ns.exec(1, &["ip", "addr", "add", "198.18.0.2/24", "dev", "vb"]);
    let mut a = {
        let _in = ns.enter(0);
        PacketLink::open(&spec("packet:va,ip=198.18.0.1,mac=02:00:00:00:00:01")).unwrap()
    };
    let (mut b, mut live) = {
        let _in = ns.enter(0);
        let live = LiveCapture::open("va").unwrap();
        drop(_in);
        let _in = ns.enter(1);
        // No ip=: the interface's own address and MAC; the kernel answers ARP.
        (PacketLink::open(&spec("packet:vb")).unwrap(), live)
    };
    assert_eq!(b.info().ipv4, Some("198.18.0.2".parse().unwrap()));
    one_way(&mut a, &mut b, "198.18.0.2", 8, 0x41);
    one_way(&mut b, &mut a, "198.18.0.1", 2, 0x42);
    assert_eq!(b.stats().arp_replies_sent, 0, "the kernel answers for its own address");
    // No ICMP port-unreachable came back for any RoCE packet.
    let start = Instant::now();
    let mut icmp = 0;
    while start.elapsed() < Duration::from_millis(500) {
        let Some((_, f)) = live.next_frame(Duration::from_millis(50)).unwrap() else { continue };
        if f.len() > 23 && f[12..14] == [0x08, 0x00] && f[23] == 1 {
            icmp += 1;
        }
    }
    assert_eq!(icmp, 0, "the port guard keeps the kernel quiet");
    // A second link cannot take the same address: the error says so.
    let e = {
        let _in = ns.enter(1);
        PacketLink::open(&spec("packet:vb")).err().unwrap().to_string()
    };
    assert!(e.contains("198.18.0.2:4791 is in use"), "{e}");
}

#[test]
fn unresolved_neighbour_gives_up_and_counts() {
    if skip_unless_root_with_ip("unresolved_neighbour_gives_up_and_counts") {
        return;
    }
    let ns = two_namespaces("nr");
    let mut a = {
        let _in = ns.enter(0);
        PacketLink::open(&spec("packet:va,ip=198.18.0.1,ip=fd00::1,mac=02:00:00:00:00:01")).unwrap()
    };
    let packets: Vec<Vec<u8>> = (0..5).map(|i| roce_packet(0x51, i, &[0; 16])).collect();
    // Nobody has these addresses: six requests each (at 0, 0.1, 0.3, 0.7, 1.5
    // and 2.5 s), then the frames are dropped.
    a.send(&tx("198.18.0.99".parse().unwrap(), &packets)).unwrap();
    a.send(&tx("fd00::99".parse().unwrap(), &packets[..2])).unwrap();
    let start = Instant::now();
    while a.stats().tx_dropped < 7 && start.elapsed() < Duration::from_secs(10) {
        recv_each(&mut a, Duration::from_millis(50), |_| panic!("nothing to receive")).unwrap();
    }
    let s = a.stats();
    assert_eq!(s.tx_dropped, 7, "{s:?}");
    assert_eq!((s.arp_requests_sent, s.nd_solicits_sent), (6, 6), "{s:?}");
    assert_eq!(s.tx_packets, 0);
    assert!(a.neighbours().is_empty(), "failed entries are forgotten");
    assert_eq!(s.neighbours_unresolved, 2, "{s:?}");
    let (last, tries) = s.last_unresolved.expect("the last address given up on");
    assert!(["198.18.0.99", "fd00::99"].contains(&last.to_string().as_str()) && tries == 6, "{s:?}");
}

/// Whether the kernel in namespace `i` still holds `dev`'s IPv6 link-local
/// address as tentative (duplicate address detection not done).
fn link_local_tentative(ns: &Namespaces, i: usize, dev: &str) -> bool {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns.name(i), "ip", "-6", "addr", "show", "dev", dev, "scope", "link"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.contains("fe80::") && text.contains("tentative")
}

/// Issue 12's failing pair: GID 0 (the link-local address, from the
/// interface's MAC) across a bridge, right after the interfaces came up. The
/// kernel holds those addresses but does not answer for them while they are
/// tentative, which lasts longer than an RC requester waits; uroce answers the
/// solicitations itself. Duplicate address detection is stretched here (30
/// probes, a second apart: the neighbour retransmit time) so that the whole
/// exchange happens while it runs.
#[test]
fn link_local_gids_resolve_while_the_kernel_still_checks_for_duplicates() {
    if skip_unless_root_with_ip("link_local_gids_resolve_while_the_kernel_still_checks_for_duplicates") {
        return;
    }
    let ns = Namespaces::new("dad", 2);
    for i in 0..2 {
        ns.exec(i, &["sysctl", "-qw", "net.ipv6.conf.default.dad_transmits=30"]);
    }
    ns.exec(0, &["ip", "link", "add", "ndbr", "type", "bridge"]);
    ns.veth(0, "va", 1, "vb");
    ns.exec(0, &["ip", "link", "set", "va", "master", "ndbr"]);
    ns.exec(0, &["ip", "link", "set", "ndbr", "up"]);
    let mut a = {
        let _in = ns.enter(0);
        PacketLink::open(&spec("packet:ndbr")).unwrap()
    };
    let mut b = {
        let _in = ns.enter(1);
        PacketLink::open(&spec("packet:vb")).unwrap()
    };
    let (a_ll, b_ll) = (a.info().gids.get(0).unwrap().ip().to_string(), b.info().gids.get(0).unwrap().ip().to_string());
    assert!(link_local_tentative(&ns, 0, "ndbr") && link_local_tentative(&ns, 1, "vb"), "DAD should still run");
    assert!(a.neighbours().is_empty() && b.neighbours().is_empty());
    one_way(&mut b, &mut a, &a_ll, 8, 0x21);
    one_way(&mut a, &mut b, &b_ll, 8, 0x22);
    // Still tentative: the kernel answered nothing, uroce did.
    assert!(link_local_tentative(&ns, 0, "ndbr") && link_local_tentative(&ns, 1, "vb"), "DAD ended too early");
    assert!(a.stats().nd_adverts_sent >= 1, "{:?}", a.stats());
}

/// Multicast on the packet link: b joins an IPv4 and an IPv6 group (its
/// IGMP and MLD reports go out on the wire), a sends to each and b gets
/// every datagram; once b left, it gets none.
#[test]
fn packet_link_multicast_ipv4_and_ipv6() {
    if skip_unless_root_with_ip("packet_link_multicast_ipv4_and_ipv6") {
        return;
    }
    let ns = two_namespaces("pm");
    let mut a = {
        let _in = ns.enter(0);
        PacketLink::open(&spec("packet:va,ip=198.18.0.1,ip=fd00::1,mac=02:00:00:00:00:01")).unwrap()
    };
    let (mut b, mut live) = {
        let _in = ns.enter(1);
        let live = LiveCapture::open("vb").unwrap();
        (PacketLink::open(&spec("packet:vb,ip=198.18.0.2,ip=fd00::2,mac=02:00:00:00:00:02")).unwrap(), live)
    };
    let (g4, g6): (IpAddr, IpAddr) = ("239.198.18.7".parse().unwrap(), "ff0e::198:7".parse().unwrap());
    b.join_multicast(g4).unwrap();
    b.join_multicast(g6).unwrap();
    let v4 = one_way(&mut a, &mut b, "239.198.18.7", 8, 0xff_ffff);
    assert!(v4.iter().all(|i| *i == Integrity::Icrc));
    one_way(&mut a, &mut b, "ff0e::198:7", 4, 0xff_ffff);
    // The reports b sent: IGMP (IPv4 protocol 2) and MLDv2 (behind a hop-by-hop header).
    let mut frames = Vec::new();
    for _ in 0..1000 {
        let Some((_, f)) = live.next_frame(Duration::from_millis(100)).unwrap() else { break };
        frames.push(f.to_vec());
    }
    let igmp = frames.iter().filter(|f| f.len() > 34 && f[12..14] == [8, 0] && f[23] == 2).count();
    let mld = frames.iter().filter(|f| f.len() > 62 && f[12..14] == [0x86, 0xdd] && f[20] == 0 && f[62] == 143).count();
    assert!(igmp >= 2 && mld >= 2, "b's reports on the wire: {igmp} IGMP, {mld} MLD");
    b.leave_multicast(g4).unwrap();
    a.send(&tx(g4, &[roce_packet(0xff_ffff, 99, &[7; 64])])).unwrap();
    let mut late = 0;
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        recv_each(&mut b, Duration::from_millis(10), |_| late += 1).unwrap();
    }
    assert_eq!(late, 0, "b left the group");
}

/// The tap link behind a bridge that snoops multicast: its IGMP and MLD
/// reports make the bridge list it as a member of each group (`bridge mdb`)
/// and forward the group's datagrams, which a packet link on the other
/// side sends.
#[test]
fn tap_link_multicast_through_a_snooping_bridge() {
    if skip_unless_root_with_ip("tap_link_multicast_through_a_snooping_bridge") {
        return;
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        println!("SKIP: tap_link_multicast_through_a_snooping_bridge: no /dev/net/tun (modprobe tun)");
        return;
    }
    let ns = two_namespaces("tm");
    let tap_name = format!("um{}", std::process::id() % 100_000);
    let mut t = {
        let _in = ns.enter(0);
        TapLink::open(&spec(&format!("tap:{tap_name},ip=198.18.0.1/24,ip=fd00::1/64"))).unwrap()
    };
    ns.exec(0, &["ip", "link", "add", "br0", "type", "bridge", "mcast_snooping", "1"]);
    ns.exec(0, &["ip", "link", "set", &tap_name, "master", "br0"]);
    ns.exec(0, &["ip", "link", "set", "va", "master", "br0"]);
    ns.exec(0, &["ip", "link", "set", "br0", "up"]);
    let mut p = {
        let _in = ns.enter(1);
        PacketLink::open(&spec("packet:vb,ip=198.18.0.2,ip=fd00::2,mac=02:00:00:00:00:02")).unwrap()
    };
    let (g4, g6): (IpAddr, IpAddr) = ("239.198.18.9".parse().unwrap(), "ff0e::198:9".parse().unwrap());
    t.join_multicast(g4).unwrap();
    t.join_multicast(g6).unwrap();
    // The bridge learnt both memberships on the tap's port.
    let mut mdb = String::new();
    for _ in 0..50 {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", ns.name(0), "bridge", "mdb", "show", "dev", "br0"])
            .output()
            .unwrap();
        mdb = String::from_utf8_lossy(&out.stdout).into_owned();
        if mdb.contains("239.198.18.9") && mdb.contains("ff0e::198:9") {
            break;
        }
        recv_each(&mut t, Duration::from_millis(20), |_| {}).unwrap();
    }
    assert!(mdb.contains(&tap_name) && mdb.contains("239.198.18.9") && mdb.contains("ff0e::198:9"), "{mdb}");
    one_way(&mut p, &mut t, "239.198.18.9", 6, 0xff_ffff);
    one_way(&mut p, &mut t, "ff0e::198:9", 3, 0xff_ffff);
}
