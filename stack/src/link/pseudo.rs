//! The IP and UDP headers a udp link's ICRC covers. The kernel writes the
//! real ones; these are written field by field for the CRC alone, without
//! the checksums (the ICRC masks them, as it masks TOS, TTL, traffic class,
//! flow label and hop limit): per packet, on send and on receive.

use std::net::IpAddr;

const IPV4_HDR: usize = 20;
const IPV6_HDR: usize = 40;
const UDP_HDR: usize = 8;
/// The longest header pair: IPv6 and UDP.
pub(crate) const MAX: usize = IPV6_HDR + UDP_HDR;
const UDP_PROTOCOL: u8 = 17;

/// Writes the headers of a datagram of `roce_len` bytes from `src` to `dst`
/// into `hdr`, as the kernel sends them (IPv4: DF, TTL 64, IP ID `ident`;
/// IPv6: hop limit 64). Returns (IP header length, both headers' length),
/// or `None` for mixed families.
pub(crate) fn headers(
    (src, src_port): (IpAddr, u16),
    (dst, dst_port): (IpAddr, u16),
    ident: u16,
    roce_len: usize,
    hdr: &mut [u8; MAX],
) -> Option<(usize, usize)> {
    let udp_len = (UDP_HDR + roce_len) as u16;
    let ip_len = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = IPV4_HDR as u16 + udp_len;
            hdr[..12].copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, UDP_PROTOCOL, 0, 0]);
            hdr[2..4].copy_from_slice(&total.to_be_bytes());
            hdr[4..6].copy_from_slice(&ident.to_be_bytes());
            hdr[12..16].copy_from_slice(&s.octets());
            hdr[16..20].copy_from_slice(&d.octets());
            IPV4_HDR
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            hdr[..8].copy_from_slice(&[0x60, 0, 0, 0, 0, 0, UDP_PROTOCOL, 64]);
            hdr[4..6].copy_from_slice(&udp_len.to_be_bytes());
            hdr[8..24].copy_from_slice(&s.octets());
            hdr[24..40].copy_from_slice(&d.octets());
            IPV6_HDR
        }
        _ => return None,
    };
    let udp = &mut hdr[ip_len..ip_len + UDP_HDR];
    udp[..2].copy_from_slice(&src_port.to_be_bytes());
    udp[2..4].copy_from_slice(&dst_port.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    udp[6..8].fill(0);
    Some((ip_len, ip_len + UDP_HDR))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameRepr, IpFields, Ipv4Fields, Ipv6Fields};
    use uroce_transport::icrc;

    /// The ICRC over these headers is the ICRC over the headers smoltcp's
    /// wire types emit, checksums and all.
    #[test]
    fn the_icrc_over_them_matches_the_full_headers() {
        let v4 = (IpAddr::from([10, 1, 2, 3]), IpAddr::from([10, 9, 8, 7]));
        let v6 = (IpAddr::from([0xfe80, 0, 0, 0, 1, 2, 3, 4]), IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, 9]));
        let roce: Vec<u8> = (0..1100u32).map(|i| (i * 37 % 251) as u8).collect();
        for (src, dst) in [v4, v6] {
            for ident in [0u16, 1, 0xbeef] {
                let ip = match (src, dst) {
                    (IpAddr::V4(s), IpAddr::V4(d)) => IpFields::V4(Ipv4Fields::new(s, d, ident)),
                    (IpAddr::V6(s), IpAddr::V6(d)) => {
                        IpFields::V6(Ipv6Fields { src: s, dst: d, traffic_class: 0, flow_label: 0, hop_limit: 64 })
                    }
                    _ => unreachable!(),
                };
                let repr = FrameRepr::new(None, ip, 50123);
                let mut full = vec![0u8; repr.header_len()];
                repr.emit(&mut full, roce.len());
                let mut hdr = [0u8; MAX];
                let (iph, n) = headers((src, 50123), (dst, 4791), ident, roce.len(), &mut hdr).unwrap();
                assert_eq!(n, full.len());
                let body = &roce[..roce.len() - 4];
                let ours = icrc::compute_parts(&hdr[..iph], &hdr[iph..n], body).unwrap();
                let theirs = icrc::compute_parts(&full[..iph], &full[iph..], body).unwrap();
                assert_eq!(ours, theirs, "{src} -> {dst} ident {ident}");
            }
        }
        assert!(headers((v4.0, 1), (v6.1, 2), 0, 64, &mut [0; MAX]).is_none());
    }
}
