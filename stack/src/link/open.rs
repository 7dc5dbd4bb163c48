//! Opening the link a device spec names, and the default device.

use super::packet::PacketLink;
use super::tap::TapLink;
use super::udp::UdpLink;
use super::{DeviceSpec, Link, LinkError, LinkInfo};
use std::net::{IpAddr, Ipv4Addr};

/// An open link, and what it is: its static facts (addresses, MTU, GIDs,
/// frame type), learnt once here and never asked of the link again.
pub struct OpenedLink {
    pub link: Box<dyn Link>,
    pub info: LinkInfo,
}

impl DeviceSpec {
    /// Opens the link this spec names.
    pub fn open(&self) -> Result<OpenedLink, LinkError> {
        Ok(match self {
            DeviceSpec::Udp { .. } => UdpLink::open(self).map(|l| OpenedLink::new(l, UdpLink::info))?,
            DeviceSpec::Packet { .. } => PacketLink::open(self).map(|l| OpenedLink::new(l, PacketLink::info))?,
            DeviceSpec::Tap { .. } => TapLink::open(self).map(|l| OpenedLink::new(l, TapLink::info))?,
        })
    }
}

impl OpenedLink {
    /// Boxes `link` with its facts, read by `info` (the link type's own accessor).
    fn new<L: Link + 'static>(link: L, info: fn(&L) -> &LinkInfo) -> OpenedLink {
        let info = info(&link).clone();
        OpenedLink { link: Box::new(link), info }
    }
}

/// The default device: the udp link on the first free loopback address from
/// `127.0.0.1` up, so that a server and a client started on one machine with
/// no `-d` both get one (each learns the other's GID in the out-of-band exchange).
pub fn open_default() -> Result<OpenedLink, LinkError> {
    let mut last = None;
    for host in 1..=254u8 {
        let spec =
            DeviceSpec::Udp { ip: IpAddr::V4(Ipv4Addr::new(127, 0, 0, host)), scope: None, path_mtu: None, shm: None };
        match UdpLink::open_unshared(&spec) {
            Ok(l) => return Ok(OpenedLink::new(l, UdpLink::info)),
            Err(e @ LinkError::AddressInUse(_)) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or(LinkError::Spec { spec: "udp:127.0.0.x".into(), why: "no loopback address free".into() }))
}

/// Parses and opens a device spec.
pub fn open(spec: &str) -> Result<OpenedLink, LinkError> {
    spec.parse::<DeviceSpec>()?.open()
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn default_device_steps_past_busy_addresses() {
        // The default addresses are every process's: one such test at a time.
        let _default = crate::testnet::default_loopback_guard();
        let a = open_default().unwrap();
        let b = open_default().unwrap();
        assert_ne!(a.info.ipv4, b.info.ipv4);
        assert!(a.info.ipv4.unwrap().is_loopback() && b.info.ipv4.unwrap().is_loopback());
    }

    #[test]
    fn open_errors_name_the_problem() {
        let e = open("packet:uroce-nosuch0").err().unwrap().to_string();
        assert!(e.contains("no interface named \"uroce-nosuch0\""), "{e}");
        let e = open("udp:192.0.2.77").err().unwrap().to_string();
        assert!(e.contains("is not an address of this host"), "{e}");
    }
}
