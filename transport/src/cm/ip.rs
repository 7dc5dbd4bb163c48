//! The RDMA IP CM Service annex (IBTA Vol 1 Annex A11): how rdma_cm maps a TCP
//! or UDP port to a service ID, and the 36-byte header (`struct cma_hdr` in
//! the kernel's cma.c) it puts in front of the consumer's private data of a
//! REQ: version, IP version, source port, source and destination addresses.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Bytes of the IP CM header in the REQ's private data.
pub const CMA_HDR_LEN: usize = 36;
/// The header version the kernel writes and accepts (`CMA_VERSION`).
pub const CMA_VERSION: u8 = 0x00;

/// An rdma_cm port space (`enum rdma_port_space`): the middle 16 bits of the
/// service IDs of its ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PortSpace {
    /// RDMA_PS_IPOIB.
    Ipoib,
    /// RDMA_PS_TCP: reliable connections, what rping and perftest use.
    Tcp,
    /// RDMA_PS_UDP.
    Udp,
    /// RDMA_PS_IB.
    Ib,
}

impl PortSpace {
    pub const fn value(self) -> u16 {
        match self {
            PortSpace::Ipoib => 0x0002,
            PortSpace::Tcp => 0x0106,
            PortSpace::Udp => 0x0111,
            PortSpace::Ib => 0x013f,
        }
    }

    pub fn from_value(v: u16) -> Option<PortSpace> {
        [PortSpace::Ipoib, PortSpace::Tcp, PortSpace::Udp, PortSpace::Ib].into_iter().find(|p| p.value() == v)
    }

    /// The service ID of `port` in this space: `0x0000_0000_01PP_pppp` for TCP.
    pub const fn service_id(self, port: u16) -> u64 {
        ((self.value() as u64) << 16) | port as u64
    }
}

/// The port space and port a service ID names, when it is an IP one.
pub fn parse_service_id(service_id: u64) -> Option<(PortSpace, u16)> {
    if service_id >> 32 != 0 {
        return None;
    }
    let ps = PortSpace::from_value((service_id >> 16) as u16)?;
    Some((ps, service_id as u16))
}

/// The flow label the kernel gives a RoCEv2 connection from its ports when
/// the source address carries none (`cma_get_roce_udp_flow_label`): the same
/// value then names the UDP source port of both directions.
pub const fn flow_label_of_ports(src_port: u16, dst_port: u16) -> u32 {
    (src_port as u32 * 31 + dst_port as u32) & 0xf_ffff
}

/// The IP CM header: who connects from where to where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmaHdr {
    pub version: u8,
    /// The active side's port.
    pub src_port: u16,
    pub src_addr: IpAddr,
    pub dst_addr: IpAddr,
}

/// Why private data holds no IP CM header this stack can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmaHdrError {
    Truncated,
    /// An IP version other than 4 or 6 (the kernel answers -EAFNOSUPPORT).
    IpVersion(u8),
}

impl fmt::Display for CmaHdrError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            CmaHdrError::Truncated => write!(f, "private data shorter than the 36-byte IP CM header"),
            CmaHdrError::IpVersion(v) => write!(f, "IP CM header with IP version {v}"),
        }
    }
}

impl CmaHdr {
    pub fn new(src: IpAddr, src_port: u16, dst: IpAddr) -> CmaHdr {
        CmaHdr { version: CMA_VERSION, src_port, src_addr: src, dst_addr: dst }
    }

    pub fn parse(b: &[u8]) -> Result<CmaHdr, CmaHdrError> {
        if b.len() < CMA_HDR_LEN {
            return Err(CmaHdrError::Truncated);
        }
        let ip_version = b[1] >> 4;
        let addr = |at: usize| -> Result<IpAddr, CmaHdrError> {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[at..at + 16]);
            match ip_version {
                4 => Ok(IpAddr::V4(Ipv4Addr::new(a[12], a[13], a[14], a[15]))),
                6 => Ok(IpAddr::V6(Ipv6Addr::from(a))),
                v => Err(CmaHdrError::IpVersion(v)),
            }
        };
        Ok(CmaHdr {
            version: b[0],
            src_port: u16::from_be_bytes([b[2], b[3]]),
            src_addr: addr(4)?,
            dst_addr: addr(20)?,
        })
    }

    /// Writes the header into the first 36 bytes of `b`. Both addresses are
    /// of one family (the source's); IPv4 ones sit in the last 4 bytes.
    pub fn emit(&self, b: &mut [u8]) {
        let put = |b: &mut [u8], ip: IpAddr| match ip {
            IpAddr::V4(v4) => {
                b[..12].fill(0);
                b[12..16].copy_from_slice(&v4.octets());
            }
            IpAddr::V6(v6) => b[..16].copy_from_slice(&v6.octets()),
        };
        b[0] = self.version;
        b[1] = if self.src_addr.is_ipv4() { 4 << 4 } else { 6 << 4 };
        b[2..4].copy_from_slice(&self.src_port.to_be_bytes());
        put(&mut b[4..20], self.src_addr);
        put(&mut b[20..36], self.dst_addr);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn service_ids_of_the_tcp_port_space() {
        assert_eq!(PortSpace::Tcp.service_id(7174), 0x0000_0000_0106_1c06);
        assert_eq!(parse_service_id(0x0106_1c06), Some((PortSpace::Tcp, 7174)));
        assert_eq!(parse_service_id(0x0107_1c06), None);
        assert_eq!(parse_service_id(0x1_0106_1c06), None);
    }

    #[test]
    fn the_kernel_flow_label_of_the_capture() {
        // rping's REQ: port 0xca8a to 7174, flow label 0x8a2bc.
        assert_eq!(flow_label_of_ports(0xca8a, 7174), 0x8a2bc);
    }

    #[test]
    fn header_round_trip_v4_and_v6() {
        let h =
            CmaHdr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 11)), 0xca8a, IpAddr::V4(Ipv4Addr::new(198, 18, 0, 12)));
        let mut b = [0xaau8; 40];
        h.emit(&mut b);
        assert_eq!(&b[..4], &[0x00, 0x40, 0xca, 0x8a]);
        assert_eq!(&b[4..20], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 198, 18, 0, 11]);
        assert_eq!(CmaHdr::parse(&b).unwrap(), h);
        let v6 = CmaHdr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 1, IpAddr::V6(Ipv6Addr::LOCALHOST));
        v6.emit(&mut b);
        assert_eq!(b[1], 0x60);
        assert_eq!(CmaHdr::parse(&b).unwrap(), v6);
        b[1] = 0x50;
        assert_eq!(CmaHdr::parse(&b), Err(CmaHdrError::IpVersion(5)));
        assert_eq!(CmaHdr::parse(&b[..35]), Err(CmaHdrError::Truncated));
    }
}
