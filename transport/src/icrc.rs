//! The invariant CRC of RoCEv2 (IBTA Annex A17.8).
//!
//! CRC-32 (the Ethernet/zlib polynomial) over: 8 bytes of 0xFF standing for the
//! masked LRH; the IP header with the fields a router may change set to ones
//! (IPv4: TOS, TTL, header checksum; IPv6: traffic class, flow label, hop limit);
//! the UDP header with its checksum set to ones; the BTH with byte 4 (FECN, BECN,
//! reserved) set to ones; then the rest of the packet up to the ICRC, pad
//! included. The result goes on the wire least significant byte first.
//!
//! The CRC itself is `crc32fast`, which uses carry-less multiplication
//! (PCLMULQDQ) where the CPU has it; `cargo bench -p uroce-transport --bench icrc`
//! compares it with table implementations and prints GB/s.

use crate::wire::ip::{self, ipv4, ipv6, udp, UDP_PROTOCOL};
use crate::wire::{bth, Bth, ICRC_LEN};
use core::fmt;

const BTH_LEN: usize = Bth::<&[u8]>::LEN;
/// 8 bytes of ones + the longest IPv4 header + UDP + BTH.
const PSEUDO_MAX: usize = 8 + ipv4::MAX_HEADER_LEN + udp::HEADER_LEN + BTH_LEN;

/// Why an IP packet has no ICRC to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcrcError {
    /// Shorter than IP + UDP + BTH + ICRC.
    Truncated,
    /// Not IPv4 or IPv6, a bad IPv4 header length, or not UDP.
    NotRoceV2,
}

impl fmt::Display for IcrcError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            IcrcError::Truncated => write!(f, "packet too short for an ICRC"),
            IcrcError::NotRoceV2 => write!(f, "not an IPv4/IPv6 UDP packet"),
        }
    }
}

impl std::error::Error for IcrcError {}

/// Length of the IP header at the front of `ip_packet`, if it is IPv4 or IPv6
/// carrying UDP directly.
fn ip_header_len(ip_packet: &[u8]) -> Result<usize, IcrcError> {
    let first = *ip_packet.first().ok_or(IcrcError::Truncated)?;
    let (len, proto) = match ip::version(first) {
        4 => {
            let ihl = ipv4::header_len(first);
            if ihl < ipv4::HEADER_LEN {
                return Err(IcrcError::NotRoceV2);
            }
            (ihl, ip_packet.get(ipv4::PROTOCOL))
        }
        6 => (ipv6::HEADER_LEN, ip_packet.get(ipv6::NEXT_HEADER)),
        _ => return Err(IcrcError::NotRoceV2),
    };
    match proto {
        None => Err(IcrcError::Truncated),
        Some(&UDP_PROTOCOL) => Ok(len),
        Some(_) => Err(IcrcError::NotRoceV2),
    }
}

/// Copies `ip_hdr`, `udp_hdr` and `bth` after 8 bytes of ones into `out` with the
/// variant fields masked; returns the length used.
fn masked_pseudo_header(ip_hdr: &[u8], udp_hdr: &[u8], bth: &[u8], out: &mut [u8; PSEUDO_MAX]) -> usize {
    out[..8].fill(0xff);
    let i = 8..8 + ip_hdr.len();
    out[i.clone()].copy_from_slice(ip_hdr);
    let ipb = &mut out[i.clone()];
    if ip::version(ipb[0]) == 4 {
        ipb[ipv4::TOS] = 0xff; // DSCP, ECN
        ipb[ipv4::TTL] = 0xff;
        ipb[ipv4::CHECKSUM].fill(0xff);
    } else {
        // All but the version: traffic class and flow label.
        let class_flow = &mut ipb[ipv6::VER_CLASS_FLOW];
        class_flow[0] |= 0x0f;
        class_flow[1..].fill(0xff);
        ipb[ipv6::HOP_LIMIT] = 0xff;
    }
    let u = i.end..i.end + udp::HEADER_LEN;
    out[u.clone()].copy_from_slice(udp_hdr);
    out[u.start..][udp::CHECKSUM].fill(0xff);
    let b = u.end..u.end + BTH_LEN;
    out[b.clone()].copy_from_slice(bth);
    out[b.start + bth::ICRC_MASKED_BYTE] = 0xff;
    b.end
}

/// A fresh CRC-32 state. `Hasher::new` asks the CPU's features each time;
/// a copy of one made once does not (a dozen instructions a packet).
fn new_hasher() -> crc32fast::Hasher {
    static FRESH: std::sync::OnceLock<crc32fast::Hasher> = std::sync::OnceLock::new();
    FRESH.get_or_init(crc32fast::Hasher::new).clone()
}

/// The ICRC of a packet given as its parts: the IP header, the UDP header, and
/// the UDP payload from the BTH up to (not including) the ICRC. Used by senders
/// whose kernel writes the IP header, and by [`compute`].
pub fn compute_parts(ip_hdr: &[u8], udp_hdr: &[u8], roce: &[u8]) -> Result<u32, IcrcError> {
    if roce.len() < BTH_LEN || udp_hdr.len() != udp::HEADER_LEN {
        return Err(IcrcError::Truncated);
    }
    if ip_hdr.len() > ipv4::MAX_HEADER_LEN {
        return Err(IcrcError::NotRoceV2);
    }
    let mut pseudo = [0u8; PSEUDO_MAX];
    let n = masked_pseudo_header(ip_hdr, udp_hdr, &roce[..BTH_LEN], &mut pseudo);
    let mut h = new_hasher();
    h.update(&pseudo[..n]);
    h.update(&roce[BTH_LEN..]);
    Ok(h.finalize())
}

/// The ICRC of an IP packet that ends with its ICRC trailer (whose value is
/// ignored). `ip_packet` must end where the IP header's length says it does.
pub fn compute(ip_packet: &[u8]) -> Result<u32, IcrcError> {
    let ip_len = ip_header_len(ip_packet)?;
    let roce = ip_len + udp::HEADER_LEN;
    if ip_packet.len() < roce + BTH_LEN + ICRC_LEN {
        return Err(IcrcError::Truncated);
    }
    let end = ip_packet.len() - ICRC_LEN;
    compute_parts(&ip_packet[..ip_len], &ip_packet[ip_len..roce], &ip_packet[roce..end])
}

/// The ICRC carried in the last 4 bytes of a packet.
pub fn carried(packet: &[u8]) -> Option<u32> {
    let t = packet.get(packet.len().checked_sub(ICRC_LEN)?..)?;
    Some(u32::from_le_bytes([t[0], t[1], t[2], t[3]]))
}

/// Whether the ICRC carried by `ip_packet` is right.
pub fn check(ip_packet: &[u8]) -> Result<bool, IcrcError> {
    let want = compute(ip_packet)?;
    Ok(carried(ip_packet) == Some(want))
}

/// Computes and writes the ICRC trailer of `ip_packet`.
pub fn fill(ip_packet: &mut [u8]) -> Result<u32, IcrcError> {
    let icrc = compute(ip_packet)?;
    let n = ip_packet.len();
    ip_packet[n - ICRC_LEN..].copy_from_slice(&icrc.to_le_bytes());
    Ok(icrc)
}

#[cfg(test)]
mod test {
    use super::*;

    // An IPv4 RC ACK (198.18.0.12 -> .11), IP header onward, ICRC zeroed.
    const ACK_V4: &str = "4500003000004000401184a4c6120000c6120000c00012b7001c0000\
                          1100ffff000000110000000e1f00000100000000";

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn fill_then_check() {
        let mut p = hex(ACK_V4);
        fill(&mut p).unwrap();
        assert_eq!(check(&p), Ok(true));
        let n = p.len();
        p[n - 5] ^= 1;
        assert_eq!(check(&p), Ok(false));
    }

    #[test]
    fn masked_fields_do_not_matter() {
        let mut p = hex(ACK_V4);
        let icrc = fill(&mut p).unwrap();
        p[1] = 0x2e; // TOS
        p[8] = 3; // TTL
        p[10] = 0x12; // checksum
        p[26] = 0x55; // UDP checksum
        p[28 + 4] = 0xc0; // FECN/BECN
        assert_eq!(compute(&p), Ok(icrc));
        p[4] ^= 1; // IP identification is covered
        assert_ne!(compute(&p), Ok(icrc));
    }

    #[test]
    fn ipv6_masks_class_flow_hop() {
        let mut p = vec![0u8; 40 + 8 + 12 + 4];
        p[0] = 0x60;
        p[6] = 17;
        p[7] = 64;
        let icrc = fill(&mut p).unwrap();
        p[0] = 0x6f;
        p[1] = 0x12;
        p[3] = 0x77;
        p[7] = 1;
        assert_eq!(compute(&p), Ok(icrc));
        p[8] = 1; // source address is covered
        assert_ne!(compute(&p), Ok(icrc));
    }

    #[test]
    fn rejects_what_is_not_rocev2() {
        assert_eq!(compute(&[]), Err(IcrcError::Truncated));
        assert_eq!(compute(&[0x45; 30]), Err(IcrcError::NotRoceV2));
        let mut p = hex(ACK_V4);
        p[0] = 0x44;
        assert_eq!(compute(&p), Err(IcrcError::NotRoceV2));
        let p = hex(ACK_V4);
        assert_eq!(compute(&p[..40]), Err(IcrcError::Truncated));
    }
}
