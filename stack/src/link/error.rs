//! Why a link could not be opened, phrased so the user can act on it.

use core::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};

/// Why a link could not be opened.
#[derive(Debug)]
pub enum LinkError {
    /// The device name does not parse.
    Spec {
        spec: String,
        why: String,
    },
    NoSuchInterface(String),
    /// The operation needs a capability the process lacks.
    NotPermitted {
        what: String,
        cap: &'static str,
    },
    /// Another socket (another uroce, or the kernel's rdma_rxe) holds the port.
    AddressInUse(SocketAddr),
    /// The address is not one of this host's.
    AddressNotAvailable(IpAddr),
    /// The interface has no address of the family needed and none was given.
    NoAddress {
        iface: String,
    },
    Io {
        what: String,
        source: io::Error,
    },
}

impl LinkError {
    /// Classifies an OS error of `what`, naming `cap` if it is a permission error.
    pub fn os(what: impl Into<String>, e: io::Error, cap: &'static str) -> LinkError {
        let what = what.into();
        match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => LinkError::NotPermitted { what, cap },
            Some(libc::ENODEV) => LinkError::NoSuchInterface(what),
            _ => LinkError::Io { what, source: e },
        }
    }
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            LinkError::Spec { spec, why } => write!(
                f,
                "bad device {spec:?}: {why} (expected udp:IP, packet:IFACE[,ip=IP][,mac=MAC] or tap:NAME,ip=IP/LEN, \
                 each with an optional ,mtu=256|512|1024|2048|4096)"
            ),
            LinkError::NoSuchInterface(n) => write!(f, "no interface named {n:?}: `ip link` lists the interfaces"),
            LinkError::NotPermitted { what, cap } => write!(
                f,
                "{what} needs {cap}: run as root, or `sudo setcap {}+ep` on the program",
                cap.to_ascii_lowercase()
            ),
            LinkError::AddressInUse(a) => write!(
                f,
                "{a} is in use by another socket (another uroce, or the kernel's rdma_rxe: `rdma link` lists it)"
            ),
            LinkError::AddressNotAvailable(ip) => {
                write!(f, "{ip} is not an address of this host: `ip addr` lists them (any 127.x.y.z works on loopback)")
            }
            LinkError::NoAddress { iface } => {
                write!(f, "interface {iface} has no IPv4 or IPv6 address: give one with ip=")
            }
            LinkError::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for LinkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LinkError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn privilege_errors_name_the_capability() {
        let e = LinkError::os(
            "opening an AF_PACKET socket on eth0",
            io::Error::from_raw_os_error(libc::EPERM),
            "CAP_NET_RAW",
        );
        assert_eq!(
            e.to_string(),
            "opening an AF_PACKET socket on eth0 needs CAP_NET_RAW: run as root, or `sudo setcap cap_net_raw+ep` on the program"
        );
        let e = LinkError::os("creating TAP device ut0", io::Error::from_raw_os_error(libc::EACCES), "CAP_NET_ADMIN");
        assert!(e.to_string().contains("needs CAP_NET_ADMIN"));
    }
}
