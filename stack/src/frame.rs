//! Ethernet / IPv4 / IPv6 / UDP framing of RoCEv2 packets, on smoltcp's wire types.
//!
//! [`parse_ethernet`] and [`parse_ip`] split a frame into its [`FrameRepr`] (every
//! L2/L3/L4 field that matters, enough to re-emit the same bytes), the exact IP
//! packet (what the ICRC covers) and the RoCEv2 UDP payload. [`FrameRepr::emit`]
//! writes the headers around a RoCE packet the caller fills in place, and
//! [`FrameRepr::seal`] then writes the ICRC and, where used, the UDP checksum.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::ops::Range;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, IpAddress, IpProtocol, Ipv4Packet, Ipv6Packet, UdpPacket,
};
use uroce_transport::wire::ip::{self, ipv4, ipv6, udp};
use uroce_transport::{icrc, wire::ROCEV2_UDP_PORT};

// The header lengths, under the names the stack uses: Ethernet's from
// smoltcp, IP's and UDP's from the transport, which owns their layout.
pub use smoltcp::wire::ETHERNET_HEADER_LEN as ETH_HDR;
pub use uroce_transport::wire::ip::ipv4::HEADER_LEN as IPV4_HDR;
pub use uroce_transport::wire::ip::ipv6::HEADER_LEN as IPV6_HDR;
pub use uroce_transport::wire::ip::udp::HEADER_LEN as UDP_HDR;

/// Why a frame is not a well-formed RoCEv2 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// Not IPv4/IPv6 UDP to port 4791: some other traffic, to be skipped.
    NotRoce,
    /// Addressed to UDP 4791 but broken: the reason.
    Malformed(&'static str),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            FrameError::NotRoce => write!(f, "not a RoCEv2 frame"),
            FrameError::Malformed(why) => write!(f, "malformed RoCEv2 frame: {why}"),
        }
    }
}

impl std::error::Error for FrameError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthFields {
    pub dst: [u8; 6],
    pub src: [u8; 6],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Fields {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub dscp: u8,
    pub ecn: u8,
    /// Identification: covered by the ICRC, so the sender's choice must be what is sent.
    pub ident: u16,
    pub dont_frag: bool,
    pub ttl: u8,
}

impl Ipv4Fields {
    /// What rxe sends: DSCP 0, ECN 0, DF, TTL 64.
    pub fn new(src: Ipv4Addr, dst: Ipv4Addr, ident: u16) -> Ipv4Fields {
        Ipv4Fields { src, dst, dscp: 0, ecn: 0, ident, dont_frag: true, ttl: 64 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Fields {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub traffic_class: u8,
    pub flow_label: u32,
    pub hop_limit: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpFields {
    V4(Ipv4Fields),
    V6(Ipv6Fields),
}

impl IpFields {
    pub fn src(&self) -> IpAddr {
        match self {
            IpFields::V4(h) => IpAddr::V4(h.src),
            IpFields::V6(h) => IpAddr::V6(h.src),
        }
    }
    pub fn dst(&self) -> IpAddr {
        match self {
            IpFields::V4(h) => IpAddr::V4(h.dst),
            IpFields::V6(h) => IpAddr::V6(h.dst),
        }
    }
    pub fn header_len(&self) -> usize {
        match self {
            IpFields::V4(_) => IPV4_HDR,
            IpFields::V6(_) => IPV6_HDR,
        }
    }
}

/// The UDP checksum a frame carries or is to carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UdpChecksum {
    /// Zero: "no checksum", what rxe sends over IPv4.
    Zero,
    /// Computed over the pseudo header at [`FrameRepr::seal`] (needed over IPv6).
    Compute,
    /// This exact value (to re-emit a captured frame as it was).
    Value(u16),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpFields {
    pub src_port: u16,
    pub dst_port: u16,
    pub checksum: UdpChecksum,
}

/// Every header field under the BTH of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameRepr {
    /// `None` for a raw IP packet (no link-layer header).
    pub eth: Option<EthFields>,
    pub ip: IpFields,
    pub udp: UdpFields,
}

/// A frame split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedFrame<'a> {
    pub repr: FrameRepr,
    /// The IP packet from its header to the ICRC, as long as the IP header says.
    pub ip_packet: &'a [u8],
    /// The UDP payload: BTH .. ICRC.
    pub roce: &'a [u8],
    /// Bytes after the IP packet (Ethernet minimum-size padding).
    pub trailer: &'a [u8],
}

/// Parses an Ethernet frame carrying RoCEv2.
pub fn parse_ethernet(frame: &[u8]) -> Result<ParsedFrame<'_>, FrameError> {
    let eth = EthernetFrame::new_checked(frame).map_err(|_| FrameError::NotRoce)?;
    match eth.ethertype() {
        EthernetProtocol::Ipv4 | EthernetProtocol::Ipv6 => {}
        _ => return Err(FrameError::NotRoce),
    }
    let mut parsed = parse_ip(&frame[ETH_HDR..])?;
    parsed.repr.eth = Some(EthFields { dst: eth.dst_addr().0, src: eth.src_addr().0 });
    Ok(parsed)
}

/// Whether the bytes at a UDP header's place say "to port 4791".
fn to_rocev2_port(h: &[u8]) -> bool {
    h.get(udp::DST_PORT).is_some_and(|p| u16::from_be_bytes([p[0], p[1]]) == ROCEV2_UDP_PORT)
}

/// Parses a raw IPv4 or IPv6 packet carrying RoCEv2.
pub fn parse_ip(packet: &[u8]) -> Result<ParsedFrame<'_>, FrameError> {
    match packet.first().map(|&b| ip::version(b)) {
        Some(4) => parse_ipv4(packet),
        Some(6) => parse_ipv6(packet),
        _ => Err(FrameError::NotRoce),
    }
}

fn parse_ipv4(packet: &[u8]) -> Result<ParsedFrame<'_>, FrameError> {
    let ihl = ipv4::header_len(packet[ipv4::VER_IHL]);
    let is_udp = packet.get(ipv4::PROTOCOL) == Some(&u8::from(IpProtocol::Udp));
    if !is_udp || !to_rocev2_port(packet.get(ihl.max(IPV4_HDR)..).unwrap_or(&[])) {
        return Err(FrameError::NotRoce);
    }
    let ip = Ipv4Packet::new_checked(packet).map_err(|_| FrameError::Malformed("IPv4 header or length"))?;
    if ihl != IPV4_HDR {
        return Err(FrameError::Malformed("IPv4 options"));
    }
    if ip.more_frags() || ip.frag_offset() != 0 {
        return Err(FrameError::Malformed("IPv4 fragment"));
    }
    if !ip.verify_checksum() {
        return Err(FrameError::Malformed("IPv4 header checksum"));
    }
    let fields = Ipv4Fields {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        dscp: ip.dscp(),
        ecn: ip.ecn(),
        ident: ip.ident(),
        dont_frag: ip.dont_frag(),
        ttl: ip.hop_limit(),
    };
    let total = usize::from(ip.total_len());
    split_udp(IpFields::V4(fields), packet, IPV4_HDR, total)
}

fn parse_ipv6(packet: &[u8]) -> Result<ParsedFrame<'_>, FrameError> {
    let is_udp = packet.get(ipv6::NEXT_HEADER) == Some(&u8::from(IpProtocol::Udp));
    if !is_udp || !to_rocev2_port(packet.get(IPV6_HDR..).unwrap_or(&[])) {
        return Err(FrameError::NotRoce);
    }
    let ip = Ipv6Packet::new_checked(packet).map_err(|_| FrameError::Malformed("IPv6 header or length"))?;
    let fields = Ipv6Fields {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        traffic_class: ip.traffic_class(),
        flow_label: ip.flow_label(),
        hop_limit: ip.hop_limit(),
    };
    let total = IPV6_HDR + usize::from(ip.payload_len());
    split_udp(IpFields::V6(fields), packet, IPV6_HDR, total)
}

fn split_udp(ip: IpFields, packet: &[u8], ip_hdr: usize, ip_total: usize) -> Result<ParsedFrame<'_>, FrameError> {
    let ip_packet = packet.get(..ip_total).ok_or(FrameError::Malformed("IP length beyond the frame"))?;
    let udp = UdpPacket::new_checked(&ip_packet[ip_hdr..]).map_err(|_| FrameError::Malformed("UDP length"))?;
    if usize::from(udp.len()) != ip_total - ip_hdr {
        return Err(FrameError::Malformed("UDP length differs from IP length"));
    }
    let checksum = match udp.checksum() {
        0 => UdpChecksum::Zero,
        v => UdpChecksum::Value(v),
    };
    let repr =
        FrameRepr { eth: None, ip, udp: UdpFields { src_port: udp.src_port(), dst_port: udp.dst_port(), checksum } };
    Ok(ParsedFrame { repr, ip_packet, roce: &ip_packet[ip_hdr + UDP_HDR..], trailer: &packet[ip_total..] })
}

impl FrameRepr {
    /// A frame to RoCEv2's port with rxe's defaults (IPv4 UDP checksum zero,
    /// IPv6 UDP checksum computed, as Linux receivers require over IPv6).
    pub fn new(eth: Option<EthFields>, ip: IpFields, src_port: u16) -> FrameRepr {
        let checksum = match ip {
            IpFields::V4(_) => UdpChecksum::Zero,
            IpFields::V6(_) => UdpChecksum::Compute,
        };
        FrameRepr { eth, ip, udp: UdpFields { src_port, dst_port: ROCEV2_UDP_PORT, checksum } }
    }

    fn eth_len(&self) -> usize {
        if self.eth.is_some() {
            ETH_HDR
        } else {
            0
        }
    }

    /// Bytes before the BTH.
    pub fn header_len(&self) -> usize {
        self.eth_len() + self.ip.header_len() + UDP_HDR
    }

    /// The frame's length around a RoCE packet of `roce_len` bytes (ICRC included).
    pub fn buffer_len(&self, roce_len: usize) -> usize {
        self.header_len() + roce_len
    }

    /// Writes the Ethernet, IP and UDP headers for a RoCE packet of `roce_len`
    /// bytes into `buf` (exactly `buffer_len(roce_len)` long) and returns where the
    /// RoCE packet goes. Call [`FrameRepr::seal`] once it is written.
    pub fn emit(&self, buf: &mut [u8], roce_len: usize) -> Range<usize> {
        let l3 = self.eth_len();
        if let Some(e) = &self.eth {
            let mut f = EthernetFrame::new_unchecked(&mut buf[..ETH_HDR]);
            f.set_dst_addr(EthernetAddress(e.dst));
            f.set_src_addr(EthernetAddress(e.src));
            f.set_ethertype(match self.ip {
                IpFields::V4(_) => EthernetProtocol::Ipv4,
                IpFields::V6(_) => EthernetProtocol::Ipv6,
            });
        }
        let udp_len = UDP_HDR + roce_len;
        let l4 = l3 + self.ip.header_len();
        match &self.ip {
            IpFields::V4(h) => emit_ipv4(h, &mut buf[l3..l4], udp_len),
            IpFields::V6(h) => emit_ipv6(h, &mut buf[l3..l4], udp_len),
        }
        let mut udp = UdpPacket::new_unchecked(&mut buf[l4..l4 + UDP_HDR]);
        udp.set_src_port(self.udp.src_port);
        udp.set_dst_port(self.udp.dst_port);
        udp.set_len(udp_len as u16);
        udp.set_checksum(match self.udp.checksum {
            UdpChecksum::Value(v) => v,
            UdpChecksum::Zero | UdpChecksum::Compute => 0,
        });
        l4 + UDP_HDR..l4 + udp_len
    }

    /// Writes the ICRC over the finished IP packet, then the UDP checksum if
    /// it is to be computed (it covers the ICRC, so it comes last).
    pub fn seal(&self, buf: &mut [u8]) -> Result<u32, icrc::IcrcError> {
        let icrc = icrc::fill(&mut buf[self.eth_len()..])?;
        self.seal_checksum(buf);
        Ok(icrc)
    }

    /// Writes the UDP checksum, if it is to be computed, over a frame whose
    /// ICRC is already in place.
    pub fn seal_checksum(&self, buf: &mut [u8]) {
        if self.udp.checksum == UdpChecksum::Compute {
            let (src, dst) = (IpAddress::from(self.ip.src()), IpAddress::from(self.ip.dst()));
            let mut udp = UdpPacket::new_unchecked(&mut buf[self.eth_len() + self.ip.header_len()..]);
            udp.fill_checksum(&src, &dst);
        }
    }
}

fn emit_ipv4(h: &Ipv4Fields, buf: &mut [u8], payload_len: usize) {
    let mut ip = Ipv4Packet::new_unchecked(buf);
    ip.set_version(4);
    ip.set_header_len(IPV4_HDR as u8);
    ip.set_dscp(h.dscp);
    ip.set_ecn(h.ecn);
    ip.set_total_len((IPV4_HDR + payload_len) as u16);
    ip.set_ident(h.ident);
    ip.clear_flags();
    ip.set_dont_frag(h.dont_frag);
    ip.set_frag_offset(0);
    ip.set_hop_limit(h.ttl);
    ip.set_next_header(IpProtocol::Udp);
    ip.set_src_addr(h.src);
    ip.set_dst_addr(h.dst);
    ip.fill_checksum();
}

fn emit_ipv6(h: &Ipv6Fields, buf: &mut [u8], payload_len: usize) {
    let mut ip = Ipv6Packet::new_unchecked(buf);
    ip.set_version(6);
    ip.set_traffic_class(h.traffic_class);
    ip.set_flow_label(h.flow_label);
    ip.set_payload_len(payload_len as u16);
    ip.set_next_header(IpProtocol::Udp);
    ip.set_hop_limit(h.hop_limit);
    ip.set_src_addr(h.src);
    ip.set_dst_addr(h.dst);
}

#[cfg(test)]
mod test {
    use super::*;
    use uroce_transport::wire::{BthRepr, Opcode, RoceRepr};
    use uroce_transport::Psn;

    fn build(ip: IpFields) -> Vec<u8> {
        let eth = EthFields { dst: [2, 0, 0, 0, 0, 1], src: [2, 0, 0, 0, 0, 2] };
        let frame = FrameRepr::new(Some(eth), ip, 0xc123);
        let roce = RoceRepr::new(BthRepr::new(Opcode::RcSendOnly, 0x11, Psn::new(7)));
        let payload = b"hello";
        let roce_len = roce.buffer_len(payload.len());
        let mut buf = vec![0xa5; frame.buffer_len(roce_len)];
        let at = frame.emit(&mut buf, roce_len);
        roce.emit(&mut buf[at], payload);
        frame.seal(&mut buf).unwrap();
        buf
    }

    #[test]
    fn ipv4_round_trip() {
        let ip = IpFields::V4(Ipv4Fields::new(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2), 77));
        let buf = build(ip);
        let p = parse_ethernet(&buf).unwrap();
        assert_eq!(p.repr.ip, ip);
        assert_eq!(p.repr.udp.checksum, UdpChecksum::Zero);
        assert_eq!(icrc::check(p.ip_packet), Ok(true));
        let mut again = vec![0; buf.len()];
        let at = p.repr.emit(&mut again, p.roce.len());
        again[at].copy_from_slice(p.roce);
        assert_eq!(again, buf);
    }

    #[test]
    fn ipv6_checksum_covers_icrc() {
        let ip = IpFields::V6(Ipv6Fields {
            src: "fe80::1".parse().unwrap(),
            dst: "fe80::2".parse().unwrap(),
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 64,
        });
        let buf = build(ip);
        let p = parse_ethernet(&buf).unwrap();
        assert_eq!(icrc::check(p.ip_packet), Ok(true));
        let udp = UdpPacket::new_checked(&p.ip_packet[IPV6_HDR..]).unwrap();
        assert!(udp.verify_checksum(&IpAddress::from(p.repr.ip.src()), &IpAddress::from(p.repr.ip.dst())));
    }

    #[test]
    fn other_traffic_and_broken_frames() {
        assert_eq!(parse_ethernet(&[0u8; 10]), Err(FrameError::NotRoce));
        let ip = IpFields::V4(Ipv4Fields::new(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, 1));
        let mut buf = build(ip);
        buf[ETH_HDR + IPV4_HDR + udp::CHECKSUM.start] ^= 0xff; // a UDP checksum is reported, not enforced
        assert!(parse_ethernet(&buf).is_ok());
        buf[ETH_HDR + ipv4::CHECKSUM.start] ^= 0xff; // an IPv4 header checksum is enforced
        assert_eq!(parse_ethernet(&buf), Err(FrameError::Malformed("IPv4 header checksum")));
        let good = build(ip);
        let cut = &good[..good.len() - 3];
        assert!(matches!(parse_ethernet(cut), Err(FrameError::Malformed(_))));
        let mut tcp = good.clone();
        tcp[ETH_HDR + ipv4::PROTOCOL] = 6;
        assert_eq!(parse_ethernet(&tcp), Err(FrameError::NotRoce));
    }

    /// The ICRC over the bare headers a udp link computes it over (the
    /// transport's [`ip::emit_headers`]: no checksums) is the ICRC over the
    /// headers smoltcp's wire types emit, checksums and all.
    #[test]
    fn the_icrc_over_the_bare_headers_matches_the_full_headers() {
        let v4 = (IpAddr::from([10, 1, 2, 3]), IpAddr::from([10, 9, 8, 7]));
        let v6 = (IpAddr::from([0xfe80, 0, 0, 0, 1, 2, 3, 4]), IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, 9]));
        let roce: Vec<u8> = (0..1100u32).map(|i| (i * 37 % 251) as u8).collect();
        for (src, dst) in [v4, v6] {
            for ident in [0u16, 1, 0xbeef] {
                let fields = match (src, dst) {
                    (IpAddr::V4(s), IpAddr::V4(d)) => IpFields::V4(Ipv4Fields::new(s, d, ident)),
                    (IpAddr::V6(s), IpAddr::V6(d)) => {
                        IpFields::V6(Ipv6Fields { src: s, dst: d, traffic_class: 0, flow_label: 0, hop_limit: 64 })
                    }
                    _ => unreachable!(),
                };
                let repr = FrameRepr::new(None, fields, 50123);
                let mut full = vec![0u8; repr.header_len()];
                repr.emit(&mut full, roce.len());
                let mut hdr = [0u8; ip::MAX_HEADERS_LEN];
                let (iph, n) = ip::emit_headers((src, 50123), (dst, 4791), ident, roce.len(), &mut hdr).unwrap();
                assert_eq!(n, full.len());
                let body = &roce[..roce.len() - 4];
                let ours = icrc::compute_parts(&hdr[..iph], &hdr[iph..n], body).unwrap();
                let theirs = icrc::compute_parts(&full[..iph], &full[iph..], body).unwrap();
                assert_eq!(ours, theirs, "{src} -> {dst} ident {ident}");
            }
        }
    }
}
