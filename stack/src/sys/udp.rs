//! Kernel UDP sockets for the udp link: bound to one address, DF on, IPv4
//! checksum off (as rxe sends), destination address reported per datagram.

use super::mmsg::{self, set_int};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `IPV6_AUTOFLOWLABEL` (Linux 4.10).
const IPV6_AUTOFLOWLABEL: i32 = 70;

/// Options of a RoCE UDP socket.
#[derive(Debug, Clone, Copy)]
pub struct UdpOptions {
    /// Send IPv4 datagrams with UDP checksum 0 (SO_NO_CHECK), as rxe does.
    pub no_check: bool,
    /// Socket buffer sizes in bytes (0: the system default).
    pub buffer: usize,
    /// Ask for GRO-coalesced reception (UDP_GRO).
    pub gro: bool,
    /// Bind even if the address is not (yet) configured (IP_FREEBIND), e.g. a
    /// link-local address still in duplicate address detection.
    pub freebind: bool,
}

/// A UDP socket bound to one address.
pub struct UdpSocket {
    fd: OwnedFd,
}

impl UdpSocket {
    pub fn bind(addr: SocketAddr, opts: UdpOptions) -> io::Result<UdpSocket> {
        let family = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        // SAFETY: socket(2) with constant arguments; the result is checked below.
        let raw = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::IPPROTO_UDP) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let s = fd.as_raw_fd();
        if addr.is_ipv4() {
            // DF on every datagram, and so (unconnected socket) IP ID 0: see the link.
            set_int(s, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_DO)?;
            set_int(s, libc::IPPROTO_IP, libc::IP_TTL, 64)?;
            set_int(s, libc::IPPROTO_IP, libc::IP_TOS, 0)?;
            set_int(s, libc::IPPROTO_IP, libc::IP_PKTINFO, 1)?;
            if opts.no_check {
                set_int(s, libc::SOL_SOCKET, libc::SO_NO_CHECK, 1)?;
            }
        } else {
            set_int(s, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
            set_int(s, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, libc::IP_PMTUDISC_DO)?;
            set_int(s, libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS, 64)?;
            set_int(s, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1)?;
            // The kernel rxe sends RoCEv2 over IPv6 with UDP checksum 0 (the
            // ICRC covers the packet); a plain IPv6 socket drops those.
            set_int(s, libc::SOL_UDP, libc::UDP_NO_CHECK6_RX, 1)?;
            // Flow label 0 (masked by the ICRC anyway): the wire then matches the
            // signed header byte for byte. Best effort: older kernels lack it.
            let _ = set_int(s, libc::IPPROTO_IPV6, IPV6_AUTOFLOWLABEL, 0);
        }
        if opts.buffer > 0 {
            let b = opts.buffer.min(i32::MAX as usize) as i32;
            // Past net.core.[rw]mem_max with CAP_NET_ADMIN; else capped there
            // (best effort: the size is what `receive_buffer` reports).
            for (force, capped) in [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)] {
                if set_int(s, libc::SOL_SOCKET, force, b).is_err() {
                    let _ = set_int(s, libc::SOL_SOCKET, capped, b);
                }
            }
        }
        if opts.freebind {
            set_int(s, libc::SOL_IP, libc::IP_FREEBIND, 1)?;
        }
        if opts.gro {
            set_int(s, libc::SOL_UDP, libc::UDP_GRO, 1)?;
        }
        let (sa, len) = mmsg::sockaddr_of(&addr);
        // SAFETY: `sa` holds a valid socket address of length `len`.
        let rc = unsafe { libc::bind(s, (&sa as *const libc::sockaddr_storage).cast(), len) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(UdpSocket { fd })
    }

    /// Bytes of datagrams (kernel accounting, headers included) the socket
    /// queues on receive before it drops.
    pub fn receive_buffer(&self) -> usize {
        super::mmsg::get_int(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF).map_or(0, |b| b.max(0) as usize)
    }

    /// The port the socket is bound to (the one the kernel picked for port 0).
    pub fn local_port(&self) -> io::Result<u16> {
        let mut sa: libc::sockaddr_storage = unsafe_zeroed_storage();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: `sa` is a sockaddr_storage of `len` bytes, as getsockname fills in.
        let rc = unsafe {
            libc::getsockname(self.fd.as_raw_fd(), (&mut sa as *mut libc::sockaddr_storage).cast(), &mut len)
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // Both sockaddr_in and sockaddr_in6 hold the port, big-endian, at bytes 2..4.
        // SAFETY: the storage is at least 4 bytes and was filled in by getsockname.
        let bytes = unsafe { std::slice::from_raw_parts((&sa as *const libc::sockaddr_storage).cast::<u8>(), 4) };
        Ok(u16::from_be_bytes([bytes[2], bytes[3]]))
    }

    /// Whether the kernel has UDP GSO (UDP_SEGMENT, Linux 4.18).
    pub fn supports_gso(&self) -> bool {
        set_int(self.fd.as_raw_fd(), libc::SOL_UDP, libc::UDP_SEGMENT, 0).is_ok()
    }

    /// Turns on GRO reception (UDP_GRO, Linux 5.0); whether it is on.
    pub fn enable_gro(&self) -> bool {
        set_int(self.fd.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, 1).is_ok()
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Multicast datagrams leave from `local` (its interface, `ifindex` for
    /// IPv6) with TTL 64, and come back to this host's members (loop on).
    pub fn set_multicast_source(&self, local: IpAddr, ifindex: u32) -> io::Result<()> {
        let s = self.fd.as_raw_fd();
        match local {
            IpAddr::V4(v4) => {
                let addr = libc::in_addr { s_addr: u32::from_ne_bytes(v4.octets()) };
                mmsg::set_raw(s, libc::IPPROTO_IP, libc::IP_MULTICAST_IF, &addr)?;
                set_int(s, libc::IPPROTO_IP, libc::IP_MULTICAST_TTL, 64)?;
                set_int(s, libc::IPPROTO_IP, libc::IP_MULTICAST_LOOP, 1)
            }
            IpAddr::V6(_) => {
                set_int(s, libc::IPPROTO_IPV6, libc::IPV6_MULTICAST_IF, ifindex as i32)?;
                set_int(s, libc::IPPROTO_IPV6, libc::IPV6_MULTICAST_HOPS, 64)?;
                set_int(s, libc::IPPROTO_IPV6, libc::IPV6_MULTICAST_LOOP, 1)
            }
        }
    }

    /// A socket that receives the datagrams sent to multicast `group` on
    /// `port`, joined on the interface of `local` (`ifindex` for IPv6).
    /// Shared with every other such socket on the host (SO_REUSEPORT): each
    /// gets its own copy, as each member host would on a network.
    pub fn bind_group(group: IpAddr, port: u16, local: IpAddr, ifindex: u32) -> io::Result<UdpSocket> {
        let addr = SocketAddr::new(group, port);
        let family = if group.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        // SAFETY: socket(2) with constant arguments; the result is checked below.
        let raw = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::IPPROTO_UDP) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let s = fd.as_raw_fd();
        set_int(s, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        set_int(s, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
        match (group, local) {
            (IpAddr::V4(g), IpAddr::V4(l)) => {
                set_int(s, libc::IPPROTO_IP, libc::IP_PKTINFO, 1)?;
                let mreq = libc::ip_mreqn {
                    imr_multiaddr: libc::in_addr { s_addr: u32::from_ne_bytes(g.octets()) },
                    imr_address: libc::in_addr { s_addr: u32::from_ne_bytes(l.octets()) },
                    imr_ifindex: 0,
                };
                mmsg::set_raw(s, libc::IPPROTO_IP, libc::IP_ADD_MEMBERSHIP, &mreq)?;
            }
            (IpAddr::V6(g), IpAddr::V6(_)) => {
                set_int(s, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
                set_int(s, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1)?;
                set_int(s, libc::SOL_UDP, libc::UDP_NO_CHECK6_RX, 1)?;
                let mreq = libc::ipv6_mreq {
                    ipv6mr_multiaddr: libc::in6_addr { s6_addr: g.octets() },
                    ipv6mr_interface: ifindex,
                };
                mmsg::set_raw(s, libc::IPPROTO_IPV6, libc::IPV6_ADD_MEMBERSHIP, &mreq)?;
            }
            _ => return Err(io::Error::new(io::ErrorKind::InvalidInput, "a group of another family than the link")),
        }
        let (sa, len) = mmsg::sockaddr_of(&addr);
        // SAFETY: `sa` holds a valid socket address of length `len`.
        let rc = unsafe { libc::bind(s, (&sa as *const libc::sockaddr_storage).cast(), len) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(UdpSocket { fd })
    }
}

/// A zeroed socket address buffer.
fn unsafe_zeroed_storage() -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain data; all zeroes is a valid value.
    unsafe { std::mem::zeroed() }
}
