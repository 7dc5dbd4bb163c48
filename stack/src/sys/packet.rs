//! AF_PACKET sockets: raw Ethernet frames on one interface.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// `ETH_P_ALL` in network byte order, as `socket(2)` and `sockaddr_ll` want it.
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// The index of interface `name`, or `None` if there is no such interface.
pub fn if_index(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (idx != 0).then_some(idx)
}

/// A raw AF_PACKET socket bound to one interface, seeing every protocol.
pub struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    pub fn open(ifindex: u32) -> io::Result<PacketSocket> {
        // SAFETY: socket(2) with constant arguments; the result is checked below.
        let raw =
            unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, i32::from(ETH_P_ALL_BE)) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL_BE;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll and the length passed is its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PacketSocket { fd })
    }

    /// Waits up to `timeout` for a frame; `Ok(None)` when none came.
    pub fn recv_timeout(&self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `pfd` is one valid pollfd and we pass a count of 1.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(None) } else { Err(e) };
        }
        if n == 0 {
            return Ok(None);
        }
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let got = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_TRUNC) };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Some((got as usize).min(buf.len())))
    }

    /// Sends one Ethernet frame out of the interface.
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        // SAFETY: `frame` is valid for reads of `frame.len()` bytes.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

/// `PACKET_IGNORE_OUTGOING` (Linux 4.20): do not see our own transmissions.
const PACKET_IGNORE_OUTGOING: i32 = 23;

/// How an AF_PACKET link socket listens beyond its own MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    /// Also every multicast (IPv6 neighbour discovery for our own addresses).
    AllMulti,
    /// Every frame (a MAC of our own).
    Promisc,
}

impl PacketSocket {
    /// A socket for a link: our own transmissions not looped back, a large
    /// receive buffer, listening as `listen` asks (undone when it closes).
    pub fn open_link(ifindex: u32, listen: Listen) -> io::Result<PacketSocket> {
        let s = PacketSocket::open(ifindex)?;
        let fd = s.fd.as_raw_fd();
        // Old kernels lack the option: then our frames come back and are filtered by MAC.
        let _ = super::mmsg::set_int(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);
        if super::mmsg::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20).is_err() {
            let _ = super::mmsg::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 8 << 20);
        }
        let kind = match listen {
            Listen::AllMulti => libc::PACKET_MR_ALLMULTI,
            Listen::Promisc => libc::PACKET_MR_PROMISC,
        };
        {
            // SAFETY: packet_mreq is plain old data; all-zero is a valid value.
            let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
            mr.mr_ifindex = ifindex as i32;
            mr.mr_type = kind as u16;
            super::mmsg::set_raw(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr)?;
        }
        Ok(s)
    }

    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}
