//! Multicast group membership on a raw link, which the kernel does not
//! speak for (the link's addresses are its own): IGMPv2 reports and leaves
//! for IPv4 groups (RFC 2236), MLDv2 reports for IPv6 ones (RFC 3810),
//! sent when a group is joined or left and in answer to a querier's query,
//! so that a bridge or switch that snoops multicast forwards the group's
//! datagrams to this port. Both carry the Router Alert option, as the RFCs
//! ask and Linux's snooping requires of MLD.

use super::neighbour::{ethernet, ipv6_frame, multicast_mac as ipv6_multicast_mac};
use smoltcp::wire::{
    EthernetFrame, EthernetProtocol, IgmpPacket, IgmpRepr, IgmpVersion, IpProtocol, Ipv4Packet, Ipv6Packet,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The Ethernet multicast address of an IP multicast address (RFC 1112:
/// 01:00:5e and the low 23 bits; RFC 2464: 33:33 and the low 32 bits).
pub fn multicast_mac(group: IpAddr) -> [u8; 6] {
    match group {
        IpAddr::V4(g) => {
            let o = g.octets();
            [0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]
        }
        IpAddr::V6(g) => ipv6_multicast_mac(g),
    }
}

/// All IGMPv2 routers: where a leave goes.
const ALL_ROUTERS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 2);
/// All MLDv2-capable routers: where MLDv2 reports go.
const ALL_MLDV2_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);
/// ICMPv6 type of an MLDv2 report, and a query.
const MLDV2_REPORT: u8 = 143;
const MLD_QUERY: u8 = 130;
/// MLDv2 record types: the group joined (exclude nothing), left (include nothing).
const CHANGE_TO_EXCLUDE: u8 = 4;
const CHANGE_TO_INCLUDE: u8 = 3;

/// An IGMPv2 membership report for `group` (or, `join` false, a leave),
/// from `(mac, src)`, into `buf`.
pub fn igmp(buf: &mut Vec<u8>, mac: [u8; 6], src: Ipv4Addr, group: Ipv4Addr, join: bool) {
    let (repr, dst) = match join {
        true => (IgmpRepr::MembershipReport { group_addr: group, version: IgmpVersion::Version2 }, group),
        false => (IgmpRepr::LeaveGroup { group_addr: group }, ALL_ROUTERS),
    };
    const IP_HDR: usize = 24; // 20 and the Router Alert option
    let igmp_len = repr.buffer_len();
    ethernet(buf, multicast_mac(IpAddr::V4(dst)), mac, EthernetProtocol::Ipv4, IP_HDR + igmp_len);
    // The Router Alert option, before the checksum covers it.
    buf[14 + 20..14 + IP_HDR].copy_from_slice(&[0x94, 0x04, 0, 0]);
    let mut ip = Ipv4Packet::new_unchecked(&mut buf[14..]);
    ip.set_version(4);
    ip.set_header_len(IP_HDR as u8);
    ip.set_total_len((IP_HDR + igmp_len) as u16);
    ip.set_dont_frag(false);
    ip.set_hop_limit(1);
    ip.set_next_header(IpProtocol::Igmp);
    ip.set_src_addr(src);
    ip.set_dst_addr(dst);
    ip.fill_checksum();
    repr.emit(&mut IgmpPacket::new_unchecked(&mut buf[14 + IP_HDR..]));
}

/// An MLDv2 report that `group` is joined (or, `join` false, left), from
/// `(mac, src)` (a link-local address), into `buf`.
pub fn mld(buf: &mut Vec<u8>, mac: [u8; 6], src: Ipv6Addr, group: Ipv6Addr, join: bool) {
    // Hop-by-hop header: ICMPv6 next, Router Alert (MLD), PadN.
    const HBH: [u8; 8] = [58, 0, 5, 2, 0, 0, 1, 0];
    let mut icmp = [0u8; 28];
    icmp[0] = MLDV2_REPORT;
    icmp[6..8].copy_from_slice(&1u16.to_be_bytes()); // one record
    icmp[8] = if join { CHANGE_TO_EXCLUDE } else { CHANGE_TO_INCLUDE };
    icmp[12..28].copy_from_slice(&group.octets());
    let sum = icmpv6_checksum(src, ALL_MLDV2_ROUTERS, &icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let eth = (ipv6_multicast_mac(ALL_MLDV2_ROUTERS), mac);
    ipv6_frame(buf, eth, (src, ALL_MLDV2_ROUTERS), (IpProtocol::HopByHop, 1), HBH.len() + icmp.len());
    buf[54..62].copy_from_slice(&HBH);
    buf[62..].copy_from_slice(&icmp);
}

/// The ICMPv6 checksum of `msg` (its checksum field zero) from `src` to `dst`.
fn icmpv6_checksum(src: Ipv6Addr, dst: Ipv6Addr, msg: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut add = |b: &[u8]| {
        for c in b.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    };
    add(&src.octets());
    add(&dst.octets());
    add(&(msg.len() as u32).to_be_bytes());
    add(&[0, 0, 0, 58]);
    add(msg);
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Whether `frame` is a multicast querier's query (IGMP, or MLD): each
/// joined group is then reported again.
pub fn is_query(frame: &[u8]) -> bool {
    let Ok(f) = EthernetFrame::new_checked(frame) else { return false };
    match f.ethertype() {
        EthernetProtocol::Ipv4 => {
            let Ok(ip) = Ipv4Packet::new_checked(f.payload()) else { return false };
            ip.next_header() == IpProtocol::Igmp && ip.payload().first() == Some(&0x11)
        }
        EthernetProtocol::Ipv6 => {
            let Ok(ip) = Ipv6Packet::new_checked(f.payload()) else { return false };
            // Behind the hop-by-hop header MLD always has.
            let p = ip.payload();
            ip.next_header() == IpProtocol::HopByHop
                && p.first() == Some(&58)
                && p.get(1).map(|l| (usize::from(*l) + 1) * 8).and_then(|hbh| p.get(hbh)) == Some(&MLD_QUERY)
        }
        _ => false,
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn an_igmp_report_is_what_the_rfc_draws() {
        let mut b = Vec::new();
        let group = Ipv4Addr::new(239, 198, 18, 1);
        igmp(&mut b, [2, 0, 0, 0, 0, 3], Ipv4Addr::new(198, 18, 0, 3), group, true);
        assert_eq!(&b[..6], &[0x01, 0x00, 0x5e, 0x46, 18, 1]);
        let ip = Ipv4Packet::new_checked(&b[14..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!((ip.header_len(), ip.hop_limit(), ip.dst_addr()), (24, 1, group));
        let igmp = IgmpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!(
            IgmpRepr::parse(&igmp).unwrap(),
            IgmpRepr::MembershipReport { group_addr: group, version: IgmpVersion::Version2 }
        );
        igmp_leave_goes_to_all_routers();
    }

    fn igmp_leave_goes_to_all_routers() {
        let mut b = Vec::new();
        igmp(&mut b, [2, 0, 0, 0, 0, 3], Ipv4Addr::new(198, 18, 0, 3), Ipv4Addr::new(239, 1, 1, 1), false);
        let ip = Ipv4Packet::new_checked(&b[14..]).unwrap();
        assert_eq!(ip.dst_addr(), ALL_ROUTERS);
    }

    #[test]
    fn an_mld_report_has_router_alert_and_a_good_checksum() {
        let mut b = Vec::new();
        let src: Ipv6Addr = "fe80::ff:fe00:3".parse().unwrap();
        let group: Ipv6Addr = "ff0e::198:18".parse().unwrap();
        mld(&mut b, [2, 0, 0, 0, 0, 3], src, group, true);
        assert_eq!(&b[..6], &[0x33, 0x33, 0, 0, 0, 0x16]);
        let ip = Ipv6Packet::new_checked(&b[14..]).unwrap();
        assert_eq!((ip.next_header(), ip.hop_limit()), (IpProtocol::HopByHop, 1));
        let icmp = &ip.payload()[8..];
        assert_eq!((icmp[0], icmp[8], &icmp[12..28]), (MLDV2_REPORT, CHANGE_TO_EXCLUDE, &group.octets()[..]));
        // A checksum over a message holding its own checksum comes out zero.
        assert_eq!(icmpv6_checksum(src, ALL_MLDV2_ROUTERS, icmp), 0);
        assert!(!is_query(&b));
    }

    #[test]
    fn queries_are_recognised() {
        let mut b = Vec::new();
        igmp(&mut b, [2, 0, 0, 0, 0, 9], Ipv4Addr::new(198, 18, 0, 9), Ipv4Addr::new(239, 1, 1, 1), true);
        assert!(!is_query(&b));
        b[14 + 24] = 0x11; // the same frame as a membership query
        assert!(is_query(&b));
    }
}
