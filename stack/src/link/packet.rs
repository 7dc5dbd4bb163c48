//! The packet link: AF_PACKET on an existing interface (veth, eth0, a bridge
//! port), with its own MAC/IP or the interface's. Needs CAP_NET_RAW.
//!
//! Frames arrive through a memory-mapped TPACKET_V2 ring (falling back to
//! `recvmmsg`) and leave in batches (`sendmmsg`, up to 64 a call). With a MAC of its own the socket listens promiscuously; with the
//! interface's MAC it listens to all multicast (neighbour discovery). It
//! answers ARP and neighbour solicitations for its addresses (unless they are
//! the kernel's, which answers itself), resolves peers with its own neighbour
//! cache, and binds a UDP socket on each address the kernel also holds, so
//! the kernel drops RoCE packets for uroce quietly instead of answering them
//! with ICMP port-unreachable. Peers must be on-link (no router support).

use super::neighbour::NeighbourCache;
use super::raw::{port_guards, raw_link_impl, FrameIo, RawLink, RawLinkConfig};
use super::{DeviceSpec, LinkError};
use crate::sys::iface;
use crate::sys::mmsg::{self, RxMeta, TxMsg, MAX_BATCH};
use crate::sys::packet::{if_index, Listen, PacketSocket, RxRing};
use smallvec::SmallVec;
use std::io;
use std::net::IpAddr;
use std::os::fd::RawFd;

/// Ring size for received frames.
const RX_RING_BYTES: usize = 8 << 20;

pub(crate) struct PacketIo {
    sock: PacketSocket,
    /// The receive ring, if the kernel gave one; else `recvmmsg`.
    ring: Option<RxRing>,
}

impl FrameIo for PacketIo {
    fn fd(&self) -> RawFd {
        self.sock.raw_fd()
    }
    fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        // Only the messages there are, pushed in place: a whole array of 64
        // filled per call was a twentieth of a one-frame send's time.
        let mut msgs = SmallVec::<[TxMsg; MAX_BATCH]>::new();
        for f in frames.iter().take(MAX_BATCH) {
            msgs.push(TxMsg { addr: None, iov: std::slice::from_ref(f), gso_segment: 0 });
        }
        mmsg::send_batch(self.sock.raw_fd(), &msgs)
    }
    fn recv(&mut self, buf: &mut [u8], slot: usize, metas: &mut [RxMeta]) -> io::Result<usize> {
        match self.ring.as_mut() {
            Some(r) => Ok(r.recv_batch(buf, slot, metas)),
            None => mmsg::recv_batch(self.sock.raw_fd(), buf, slot, metas),
        }
    }
}

/// RoCEv2 over AF_PACKET.
pub struct PacketLink(RawLink<PacketIo>);

raw_link_impl!(PacketLink);

impl PacketLink {
    /// Opens `packet:IFACE[,ip=IP][,mac=MAC]` (a [`DeviceSpec::Packet`]).
    pub fn open(spec: &DeviceSpec) -> Result<PacketLink, LinkError> {
        let DeviceSpec::Packet { iface: ifname, ipv4, ipv6, mac, path_mtu } = spec else {
            return Err(LinkError::Spec { spec: spec.to_string(), why: "not a packet link".into() });
        };
        let ifindex = if_index(ifname).ok_or_else(|| LinkError::NoSuchInterface(ifname.clone()))?;
        let if_mac = iface::mac(ifname).map_err(|e| LinkError::os(ifname.clone(), e, "CAP_NET_ADMIN"))?;
        let mtu = iface::mtu(ifname).map_err(|e| LinkError::os(ifname.clone(), e, "CAP_NET_ADMIN"))?;
        let all = iface::addresses().map_err(|e| LinkError::Io { what: "listing addresses".into(), source: e })?;
        let on_if: Vec<_> = all.iter().filter(|a| a.ifname == *ifname).collect();
        let our_mac = mac.unwrap_or(if_mac);
        let (v4, v6) = if ipv4.is_none() && ipv6.is_none() {
            // The interface's own addresses.
            let v4 = on_if.iter().find_map(|a| match a.ip {
                IpAddr::V4(ip) => Some((ip, a.prefix_len)),
                _ => None,
            });
            let v6: Vec<_> = on_if
                .iter()
                .filter_map(|a| match a.ip {
                    IpAddr::V6(ip) if !ip.is_unicast_link_local() => Some(ip),
                    _ => None,
                })
                .collect();
            if v4.is_none() && v6.is_empty() && our_mac == [0; 6] {
                return Err(LinkError::NoAddress { iface: ifname.clone() });
            }
            (v4, v6)
        } else {
            // Given addresses are on-link with the interface's prefix if it has one there.
            let v4 = ipv4.map(|ip| {
                let prefix =
                    on_if.iter().find(|a| a.ip.is_ipv4() && a.contains(IpAddr::V4(ip))).map_or(0, |a| a.prefix_len);
                (ip, prefix)
            });
            (v4, ipv6.iter().copied().collect())
        };
        let link_local = super::gid::Gid::link_local(our_mac).ip();
        let ours: Vec<IpAddr> =
            v4.iter().map(|a| IpAddr::V4(a.0)).chain(v6.iter().map(|a| IpAddr::V6(*a))).chain([link_local]).collect();
        let kernel_owned: Vec<IpAddr> = ours.iter().copied().filter(|ip| all.iter().any(|a| a.ip == *ip)).collect();
        let listen = if our_mac != if_mac { Listen::Promisc } else { Listen::AllMulti };
        let sock = PacketSocket::open_link(ifindex, listen)
            .map_err(|e| LinkError::os(format!("opening an AF_PACKET socket on {ifname}"), e, "CAP_NET_RAW"))?;
        let guards = port_guards(&kernel_owned, ifindex)?;
        let ring = RxRing::new(&sock, mtu.min(65535) + 14, RX_RING_BYTES).ok();
        let rx_queue_packets = match &ring {
            Some(r) => r.frames(),
            None => sock.receive_buffer() / super::udp::skb_truesize(mtu),
        };
        let cfg = RawLinkConfig {
            kind: "packet",
            name: spec.to_string(),
            ifname: ifname.clone(),
            mac: our_mac,
            ipv4: v4,
            ipv6: v6,
            kernel_owned,
            mtu,
            path_mtu: *path_mtu,
            guards,
            rx_queue_packets,
        };
        Ok(PacketLink(RawLink::new(PacketIo { sock, ring }, cfg)))
    }

    /// Whether frames arrive through a memory-mapped ring (else `recvmmsg`).
    pub fn has_rx_ring(&self) -> bool {
        self.0.io().ring.is_some()
    }

    /// The neighbour cache (for inspection).
    pub fn neighbours(&self) -> &NeighbourCache {
        self.0.neighbours()
    }
}
