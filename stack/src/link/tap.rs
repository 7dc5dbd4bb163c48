//! The tap link: a TAP device uroce creates (or opens, if it exists), the
//! kernel's side of a virtual cable whose far end is uroce. Needs CAP_NET_ADMIN
//! to create it. uroce has its own MAC (given, or `02:75:72:` + the low bytes
//! of its address) and its own `ip=IP/LEN`; framing and neighbour handling are
//! the packet link's. One read or write per frame: the TAP interface has no
//! batched calls.

use super::neighbour::NeighbourCache;
use super::raw::{port_guards, raw_link_impl, FrameIo, RawLink, RawLinkConfig};
use super::{DeviceSpec, LinkError};
use crate::sys::iface;
use crate::sys::mmsg::RxMeta;
use crate::sys::packet::if_index;
use crate::sys::tap::Tap;
use std::io;
use std::net::IpAddr;
use std::os::fd::RawFd;

pub(crate) struct TapIo(Tap);

impl FrameIo for TapIo {
    fn fd(&self) -> RawFd {
        self.0.fd()
    }
    fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        for (i, f) in frames.iter().enumerate() {
            if let Err(e) = self.0.send(f) {
                return if i == 0 { Err(e) } else { Ok(i) };
            }
        }
        Ok(frames.len())
    }
    fn recv(&mut self, buf: &mut [u8], slot: usize, metas: &mut [RxMeta]) -> io::Result<usize> {
        self.0.recv_batch(buf, slot, metas)
    }
}

/// RoCEv2 over a TAP device.
pub struct TapLink(RawLink<TapIo>);

raw_link_impl!(TapLink);

impl TapLink {
    /// Opens `tap:NAME,ip=IP/LEN` (a [`DeviceSpec::Tap`]).
    pub fn open(spec: &DeviceSpec) -> Result<TapLink, LinkError> {
        let DeviceSpec::Tap { name, ipv4, ipv6, mac, path_mtu } = spec else {
            return Err(LinkError::Spec { spec: spec.to_string(), why: "not a tap link".into() });
        };
        let tap = Tap::open(name).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENODEV) => LinkError::Io {
                what: "opening /dev/net/tun".into(),
                source: io::Error::new(e.kind(), format!("{e} (is the tun module loaded? `modprobe tun`)")),
            },
            Some(libc::EBUSY) => LinkError::Io {
                what: format!("opening TAP device {name}"),
                source: io::Error::new(
                    e.kind(),
                    format!("{e} (another program has it open, or it is not a TAP device)"),
                ),
            },
            Some(libc::EINVAL) => LinkError::Spec {
                spec: spec.to_string(),
                why: format!("{name:?} is not a usable TAP name, or an existing non-TAP interface"),
            },
            _ => LinkError::os(format!("creating TAP device {name}"), e, "CAP_NET_ADMIN"),
        })?;
        let ifname = tap.name().to_string();
        iface::set_up(&ifname).map_err(|e| LinkError::os(format!("bringing {ifname} up"), e, "CAP_NET_ADMIN"))?;
        let mtu = iface::mtu(&ifname).unwrap_or(1500);
        let low = match (ipv4, ipv6) {
            (Some((a, _)), _) => {
                let o = a.octets();
                [o[1], o[2], o[3]]
            }
            (None, Some((a, _))) => {
                let o = a.octets();
                [o[13], o[14], o[15]]
            }
            (None, None) => [0, 0, 1],
        };
        let our_mac = mac.unwrap_or([0x02, 0x75, 0x72, low[0], low[1], low[2]]);
        let ifindex = if_index(&ifname).unwrap_or(0);
        let all = iface::addresses().unwrap_or_default();
        let ours: Vec<IpAddr> =
            ipv4.iter().map(|a| IpAddr::V4(a.0)).chain(ipv6.iter().map(|a| IpAddr::V6(a.0))).collect();
        let kernel_owned: Vec<IpAddr> = ours.iter().copied().filter(|ip| all.iter().any(|a| a.ip == *ip)).collect();
        let guards = port_guards(&kernel_owned, ifindex)?;
        let cfg = RawLinkConfig {
            kind: "tap",
            name: spec.to_string(),
            ifname,
            mac: our_mac,
            ipv4: *ipv4,
            ipv6: ipv6.iter().map(|a| a.0).collect(),
            kernel_owned,
            mtu,
            path_mtu: *path_mtu,
            guards,
            // The tap queue's length is the kernel's business (txqueuelen).
            rx_queue_packets: 0,
        };
        Ok(TapLink(RawLink::new(TapIo(tap), cfg)))
    }

    /// The neighbour cache (for inspection).
    pub fn neighbours(&self) -> &NeighbourCache {
        self.0.neighbours()
    }
}
