//! Batched datagram I/O: `sendmmsg(2)` and `recvmmsg(2)` over borrowed buffers,
//! for UDP and AF_PACKET sockets alike. The message headers live on the stack
//! for the length of one call, so nothing here allocates.

use std::io;
use std::mem::{size_of, zeroed, MaybeUninit};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;
use std::time::Duration;

/// The most messages one system call moves.
pub const MAX_BATCH: usize = 64;
/// Pieces of all the messages of one call together (e.g. each datagram's
/// body and ICRC, gathered by the kernel into one GSO message).
pub const MAX_IOV: usize = 2 * MAX_BATCH;
/// Control-message room per received message (pktinfo, GRO segment size).
const CMSG_ROOM: usize = 128;

/// One outgoing message: the destination (none on a bound AF_PACKET socket),
/// its pieces, and the UDP GSO segment size (0: none).
#[derive(Clone, Copy)]
pub struct TxMsg<'a> {
    pub addr: Option<SocketAddr>,
    pub iov: &'a [&'a [u8]],
    pub gso_segment: u16,
}

/// What the kernel said about one received message.
#[derive(Debug, Clone, Copy, Default)]
pub struct RxMeta {
    /// Bytes in the slot (at most the slot length).
    pub len: usize,
    /// The datagram was longer than the slot.
    pub truncated: bool,
    /// The sender (UDP sockets).
    pub src: Option<SocketAddr>,
    /// The address it was sent to (IP_PKTINFO / IPV6_PKTINFO).
    pub dst: Option<IpAddr>,
    /// GRO: the size of the coalesced segments, when the kernel coalesced.
    pub gro_segment: Option<u16>,
    /// AF_PACKET `sll_pkttype` (PACKET_HOST, PACKET_OTHERHOST, ...).
    pub pkttype: Option<u8>,
}

fn sockaddr_from(addr: &SocketAddr, out: &mut libc::sockaddr_storage) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for a sockaddr_in.
            let sin = unsafe { &mut *(out as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr = libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) };
            size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for a sockaddr_in6.
            let sin6 = unsafe { &mut *(out as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr = libc::in6_addr { s6_addr: a.ip().octets() };
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

pub(crate) fn sockaddr_to(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

pub(crate) fn sockaddr_of(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut s: libc::sockaddr_storage = unsafe { zeroed() };
    let len = sockaddr_from(addr, &mut s);
    (s, len)
}

/// Sends up to [`MAX_BATCH`] messages in one `sendmmsg`; returns how many the
/// kernel took. An error means the first message failed.
pub fn send_batch(fd: RawFd, msgs: &[TxMsg<'_>]) -> io::Result<usize> {
    // Only the entries a call uses are written: sending one datagram (the
    // latency path) must not zero the 15 KiB a full batch's headers take.
    let mut iovs = [const { MaybeUninit::<libc::iovec>::uninit() }; MAX_IOV];
    let mut names = [const { MaybeUninit::<libc::sockaddr_storage>::uninit() }; MAX_BATCH];
    // u64 elements keep the control buffers aligned for cmsghdr.
    let mut ctrl = [const { MaybeUninit::<[u64; 4]>::uninit() }; MAX_BATCH];
    // First the pieces, names and control data; messages whose pieces do not
    // fit in `iovs` wait for the next call.
    let mut spans = [(0usize, 0usize, 0 as libc::socklen_t); MAX_BATCH]; // (first iovec, count, name length)
    let mut used = 0;
    let mut n = 0;
    for (i, m) in msgs.iter().take(MAX_BATCH).enumerate() {
        let pieces = m.iov.iter().filter(|p| !p.is_empty());
        if used + pieces.clone().count() > MAX_IOV {
            break;
        }
        let first = used;
        for piece in pieces {
            iovs[used].write(libc::iovec { iov_base: piece.as_ptr() as *mut libc::c_void, iov_len: piece.len() });
            used += 1;
        }
        let mut namelen = 0;
        if let Some(a) = &m.addr {
            // SAFETY: all-zero is a valid sockaddr_storage (plain old data).
            namelen = sockaddr_from(a, names[i].write(unsafe { zeroed() }));
        }
        if m.gso_segment != 0 {
            ctrl[i].write([0; 4]);
        }
        spans[i] = (first, used - first, namelen);
        n = i + 1;
    }
    if n == 0 {
        return Ok(0);
    }
    // Then the headers, pointing into the arrays above through one base
    // pointer each (no reference to them is taken after this).
    let (iov_base, name_base, ctrl_base) = (iovs.as_mut_ptr(), names.as_mut_ptr(), ctrl.as_mut_ptr());
    let mut hdrs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; MAX_BATCH];
    for (i, m) in msgs[..n].iter().enumerate() {
        let (first, count, namelen) = spans[i];
        // SAFETY: all-zero is a valid mmsghdr (plain old data).
        let h = &mut hdrs[i].write(unsafe { zeroed() }).msg_hdr;
        h.msg_iov = iov_base.wrapping_add(first).cast();
        h.msg_iovlen = count;
        if namelen != 0 {
            h.msg_name = name_base.wrapping_add(i).cast();
            h.msg_namelen = namelen;
        }
        if m.gso_segment != 0 {
            let space = size_of::<[u64; 4]>();
            h.msg_control = ctrl_base.wrapping_add(i).cast();
            h.msg_controllen = space;
            // SAFETY: msg_control points at `space` initialised bytes, enough
            // for one cmsghdr with a u16, so CMSG_FIRSTHDR is non-null and in bounds.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(h);
                (*c).cmsg_level = libc::SOL_UDP;
                (*c).cmsg_type = libc::UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as usize;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), m.gso_segment);
                h.msg_controllen = libc::CMSG_SPACE(size_of::<u16>() as u32) as usize;
            }
        }
    }
    // SAFETY: `hdrs[..n]` are initialised message headers whose pointers refer to
    // initialised entries of `iovs`, `names`, `ctrl` and to the caller's slices,
    // all alive for this call.
    let rc = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr().cast(), n as u32, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as usize)
}

/// Receives up to `metas.len()` messages without waiting, each into its own
/// `slot`-byte piece of `buf`. Returns how many came (0 when none was ready).
pub fn recv_batch(fd: RawFd, buf: &mut [u8], slot: usize, metas: &mut [RxMeta]) -> io::Result<usize> {
    let n = metas.len().min(buf.len() / slot.max(1)).min(MAX_BATCH);
    if n == 0 {
        return Ok(0);
    }
    // Only the headers of the `n` slots are written; the names and control
    // buffers are the kernel's to fill (it says how much it wrote), so a
    // receive does not zero 21 KiB first.
    let mut iovs = [const { MaybeUninit::<libc::iovec>::uninit() }; MAX_BATCH];
    let mut names = [const { MaybeUninit::<libc::sockaddr_storage>::uninit() }; MAX_BATCH];
    let mut ctrl = [const { MaybeUninit::<[u64; CMSG_ROOM / 8]>::uninit() }; MAX_BATCH];
    for (iov, chunk) in iovs.iter_mut().zip(buf.chunks_exact_mut(slot).take(n)) {
        iov.write(libc::iovec { iov_base: chunk.as_mut_ptr().cast(), iov_len: slot });
    }
    let (iov_base, name_base, ctrl_base) = (iovs.as_mut_ptr(), names.as_mut_ptr(), ctrl.as_mut_ptr());
    let mut hdrs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; MAX_BATCH];
    for (i, hdr) in hdrs.iter_mut().take(n).enumerate() {
        // SAFETY: all-zero is a valid mmsghdr (plain old data).
        let h = &mut hdr.write(unsafe { zeroed() }).msg_hdr;
        h.msg_iov = iov_base.wrapping_add(i).cast();
        h.msg_iovlen = 1;
        h.msg_name = name_base.wrapping_add(i).cast();
        h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        h.msg_control = ctrl_base.wrapping_add(i).cast();
        h.msg_controllen = CMSG_ROOM;
    }
    // SAFETY: `hdrs[..n]` are initialised and point at live buffers (`buf`
    // slots, `names`, `ctrl`) of the lengths they state; MSG_DONTWAIT keeps
    // the call from blocking.
    let rc =
        unsafe { libc::recvmmsg(fd, hdrs.as_mut_ptr().cast(), n as u32, libc::MSG_DONTWAIT, std::ptr::null_mut()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
            _ => Err(e),
        };
    }
    let got = rc as usize;
    for i in 0..got {
        // SAFETY: the kernel wrote the first `got` headers.
        let hdr = unsafe { hdrs[i].assume_init_ref() };
        let (h, len) = (&hdr.msg_hdr, hdr.msg_len as usize);
        let mut meta = RxMeta {
            len: len.min(slot),
            truncated: len > slot || h.msg_flags & libc::MSG_TRUNC != 0,
            ..RxMeta::default()
        };
        // The name, as far as the kernel wrote it, in a zeroed storage.
        // SAFETY: all-zero is a valid sockaddr_storage (plain old data).
        let mut name: libc::sockaddr_storage = unsafe { zeroed() };
        let written = (h.msg_namelen as usize).min(size_of::<libc::sockaddr_storage>());
        // SAFETY: the kernel wrote `msg_namelen` bytes of `names[i]` (at most
        // its size); `name` has room for them.
        unsafe {
            std::ptr::copy_nonoverlapping(
                names[i].as_ptr().cast::<u8>(),
                (&mut name as *mut libc::sockaddr_storage).cast::<u8>(),
                written,
            );
        }
        if i32::from(name.ss_family) == libc::AF_PACKET {
            // SAFETY: the family says the storage holds a sockaddr_ll.
            let sll = unsafe { &*(&name as *const libc::sockaddr_storage).cast::<libc::sockaddr_ll>() };
            meta.pkttype = Some(sll.sll_pkttype);
        } else {
            meta.src = sockaddr_to(&name);
        }
        // SAFETY: the kernel filled `msg_control` with `msg_controllen` bytes of
        // well-formed control messages; CMSG_* walk them within those bounds.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                let data = libc::CMSG_DATA(c);
                match ((*c).cmsg_level, (*c).cmsg_type) {
                    (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                        let pi = std::ptr::read_unaligned(data.cast::<libc::in_pktinfo>());
                        meta.dst = Some(IpAddr::V4(Ipv4Addr::from(pi.ipi_addr.s_addr.to_ne_bytes())));
                    }
                    (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                        let pi = std::ptr::read_unaligned(data.cast::<libc::in6_pktinfo>());
                        meta.dst = Some(IpAddr::V6(Ipv6Addr::from(pi.ipi6_addr.s6_addr)));
                    }
                    (libc::SOL_UDP, libc::UDP_GRO) => {
                        let seg = std::ptr::read_unaligned(data.cast::<libc::c_int>());
                        meta.gro_segment = u16::try_from(seg).ok();
                    }
                    _ => {}
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        metas[i] = meta;
    }
    Ok(got)
}

/// Waits up to `timeout` until `fd` is readable; `false` if it did not become so.
pub fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `pfd` is one valid pollfd and we pass a count of 1.
    let n = unsafe { libc::poll(&mut pfd, 1, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
    }
    Ok(n > 0)
}

/// Whether any of `fds` is readable within `timeout`.
pub fn wait_readable_any(fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    let mut pfds: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `pfds` holds `pfds.len()` valid pollfds.
    let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
    }
    Ok(n > 0)
}

/// `setsockopt` with an integer value.
pub fn set_int(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: `value` is a valid c_int and we pass its size.
    let rc = unsafe {
        libc::setsockopt(fd, level, name, (&value as *const i32).cast(), size_of::<libc::c_int>() as libc::socklen_t)
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `getsockopt` of an int option.
pub fn get_int(fd: RawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid for writes of the sizes passed.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut i32).cast(), &mut len) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(value)
    }
}

/// `setsockopt` with any plain-old-data value.
pub fn set_raw<T: Copy>(fd: RawFd, level: i32, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` points at size_of::<T>() readable bytes.
    let rc =
        unsafe { libc::setsockopt(fd, level, name, (value as *const T).cast(), size_of::<T>() as libc::socklen_t) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
