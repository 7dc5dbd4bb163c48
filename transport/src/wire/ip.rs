//! The IPv4, IPv6 and UDP headers a RoCEv2 packet travels in: where their
//! fields lie, and writing them as RoCEv2 senders do.
//!
//! The transport owns this layout because the ICRC covers these headers
//! (with the fields a router may change masked, see [`crate::icrc`]), and a
//! UD receive hands the IP header to the user as its GRH. The stack parses
//! and emits whole frames with smoltcp's views, which lay the fields out the
//! same way; where it needs an offset or a length, it takes it from here.

use core::ops::Range;

/// The IP protocol number of UDP (IPv4 protocol, IPv6 next header).
pub const UDP_PROTOCOL: u8 = 17;

/// What RoCEv2 senders put in the IPv4 TTL and the IPv6 hop limit (rxe, Linux).
pub const HOP_LIMIT: u8 = 64;

/// The IP version of a packet, from its first byte.
pub const fn version(first: u8) -> u8 {
    first >> 4
}

/// The IPv4 header (RFC 791).
pub mod ipv4 {
    use core::ops::Range;

    /// Without options, as RoCEv2 senders send it.
    pub const HEADER_LEN: usize = 20;
    /// With the most options an IHL of 15 allows.
    pub const MAX_HEADER_LEN: usize = 60;

    /// Version (high nibble), IHL in 32-bit words (low nibble).
    pub const VER_IHL: usize = 0;
    /// DSCP (6 bits) and ECN (2 bits).
    pub const TOS: usize = 1;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    /// Flags (3 bits) and fragment offset (13 bits).
    pub const FLAGS_FRAG: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;

    /// Don't Fragment, in the first byte of [`FLAGS_FRAG`].
    pub const DONT_FRAG: u8 = 0x40;

    /// The header length in bytes that the IHL in the first byte gives.
    pub const fn header_len(first: u8) -> usize {
        (first & 0x0f) as usize * 4
    }

    /// The header checksum of `h` (whose checksum field is zero).
    pub fn checksum(h: &[u8]) -> u16 {
        let mut sum: u32 = h.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }
}

/// The IPv6 header (RFC 8200).
pub mod ipv6 {
    use core::ops::Range;

    pub const HEADER_LEN: usize = 40;

    /// Version (4 bits), traffic class (8 bits), flow label (20 bits).
    pub const VER_CLASS_FLOW: Range<usize> = 0..4;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// The UDP header (RFC 768).
pub mod udp {
    use core::ops::Range;

    pub const HEADER_LEN: usize = 8;

    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// The longest IP and UDP headers of a RoCEv2 packet without IP options: IPv6's.
pub const MAX_HEADERS_LEN: usize = ipv6::HEADER_LEN + udp::HEADER_LEN;

fn put(buf: &mut [u8], at: Range<usize>, bytes: &[u8]) {
    buf[at].copy_from_slice(bytes);
}

/// Writes into `h` (at least [`ipv4::HEADER_LEN`] long) the IPv4 header of a
/// UDP datagram of `udp_len` bytes as RoCEv2 senders send it: no options,
/// TOS 0, Identification `ident`, DF, TTL 64. The checksum is left zero:
/// the ICRC masks it, and [`ipv4::checksum`] computes it where it is wanted.
pub fn emit_ipv4(h: &mut [u8], src: [u8; 4], dst: [u8; 4], ident: u16, udp_len: usize) {
    h[ipv4::VER_IHL] = 0x40 | (ipv4::HEADER_LEN / 4) as u8;
    h[ipv4::TOS] = 0;
    put(h, ipv4::TOTAL_LEN, &((ipv4::HEADER_LEN + udp_len) as u16).to_be_bytes());
    put(h, ipv4::IDENT, &ident.to_be_bytes());
    put(h, ipv4::FLAGS_FRAG, &[ipv4::DONT_FRAG, 0]);
    h[ipv4::TTL] = HOP_LIMIT;
    h[ipv4::PROTOCOL] = UDP_PROTOCOL;
    put(h, ipv4::CHECKSUM, &[0, 0]);
    put(h, ipv4::SRC, &src);
    put(h, ipv4::DST, &dst);
}

/// Writes into `h` (at least [`ipv6::HEADER_LEN`] long) the IPv6 header of a
/// UDP datagram of `udp_len` bytes: traffic class and flow label 0, hop
/// limit 64.
pub fn emit_ipv6(h: &mut [u8], src: [u8; 16], dst: [u8; 16], udp_len: usize) {
    put(h, ipv6::VER_CLASS_FLOW, &[0x60, 0, 0, 0]);
    put(h, ipv6::PAYLOAD_LEN, &(udp_len as u16).to_be_bytes());
    h[ipv6::NEXT_HEADER] = UDP_PROTOCOL;
    h[ipv6::HOP_LIMIT] = HOP_LIMIT;
    put(h, ipv6::SRC, &src);
    put(h, ipv6::DST, &dst);
}

/// Writes into `h` (at least [`udp::HEADER_LEN`] long) the UDP header of a
/// datagram carrying `payload_len` bytes, with the checksum zero.
pub fn emit_udp(h: &mut [u8], src_port: u16, dst_port: u16, payload_len: usize) {
    put(h, udp::SRC_PORT, &src_port.to_be_bytes());
    put(h, udp::DST_PORT, &dst_port.to_be_bytes());
    put(h, udp::LENGTH, &((udp::HEADER_LEN + payload_len) as u16).to_be_bytes());
    put(h, udp::CHECKSUM, &[0, 0]);
}

/// Writes the IP and UDP headers of a RoCEv2 datagram of `roce_len` bytes
/// (BTH .. ICRC) from `src` to `dst` into `hdr`, as the kernel sends them
/// (see [`emit_ipv4`], [`emit_ipv6`]) but with zero checksums: they are the
/// headers the ICRC covers, for a sender or receiver that never sees the
/// real ones (a kernel UDP socket). Returns (IP header length, both
/// headers' length), or `None` for mixed families.
pub fn emit_headers(
    (src, src_port): (core::net::IpAddr, u16),
    (dst, dst_port): (core::net::IpAddr, u16),
    ident: u16,
    roce_len: usize,
    hdr: &mut [u8; MAX_HEADERS_LEN],
) -> Option<(usize, usize)> {
    use core::net::IpAddr;
    let udp_len = udp::HEADER_LEN + roce_len;
    let ip_len = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            emit_ipv4(hdr, s.octets(), d.octets(), ident, udp_len);
            ipv4::HEADER_LEN
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            emit_ipv6(hdr, s.octets(), d.octets(), udp_len);
            ipv6::HEADER_LEN
        }
        _ => return None,
    };
    emit_udp(&mut hdr[ip_len..], src_port, dst_port, roce_len);
    Some((ip_len, ip_len + udp::HEADER_LEN))
}

#[cfg(test)]
mod test {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn ipv4_and_udp() {
        let mut hdr = [0xa5; MAX_HEADERS_LEN];
        let (src, dst) = ("198.18.0.12".parse().unwrap(), "198.18.0.11".parse().unwrap());
        assert_eq!(emit_headers((src, 0xc000), (dst, 4791), 0x0102, 20, &mut hdr), Some((20, 28)));
        // Version/IHL, TOS, length 48, ident, DF, TTL 64, UDP, checksum 0, addresses; then UDP.
        let want = hex(concat!("450000300102400040110000c612000cc612000b", "c00012b7001c0000"));
        assert_eq!(&hdr[..28], &want[..]);
        assert_eq!((version(hdr[0]), ipv4::header_len(hdr[0])), (4, 20));
        let sum = ipv4::checksum(&hdr[..20]);
        hdr[ipv4::CHECKSUM].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(ipv4::checksum(&hdr[..20]), 0, "a header with its checksum sums to zero");
    }

    #[test]
    fn ipv6_and_udp() {
        let mut hdr = [0xa5; MAX_HEADERS_LEN];
        let (src, dst) = ("fe80::1".parse().unwrap(), "fd00::2".parse().unwrap());
        assert_eq!(emit_headers((src, 1), (dst, 4791), 9, 32, &mut hdr), Some((40, 48)));
        assert_eq!(&hdr[..8], &[0x60, 0, 0, 0, 0, 40, UDP_PROTOCOL, 64]);
        assert_eq!(&hdr[40..], &[0, 1, 0x12, 0xb7, 0, 40, 0, 0]);
        assert_eq!(version(hdr[0]), 6);
        let v4 = "10.0.0.1".parse().unwrap();
        assert_eq!(emit_headers((v4, 1), (dst, 2), 0, 0, &mut hdr), None);
    }
}
