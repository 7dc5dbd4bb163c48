//! AF_PACKET sockets: raw Ethernet frames on one interface.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::mmsg::RxMeta;

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

    /// Bytes of frames (kernel accounting) the socket queues on receive.
    pub fn receive_buffer(&self) -> usize {
        super::mmsg::get_int(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF).map_or(0, |b| b.max(0) as usize)
    }

    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

const PACKET_RX_RING: i32 = 5;
const PACKET_VERSION: i32 = 10;
const TPACKET_V2: i32 = 1;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
/// `struct tpacket_req`.
#[repr(C)]
#[derive(Clone, Copy)]
struct TpacketReq {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
}
// `struct tpacket2_hdr` field offsets.
const TP_LEN: usize = 4;
const TP_SNAPLEN: usize = 8;
const TP_MAC: usize = 12;

/// A memory-mapped TPACKET_V2 receive ring: the kernel writes frames into
/// shared memory, we read them without a system call each (a `poll` only
/// when the ring is empty). Frame-based, so every frame is visible at once
/// (TPACKET_V3's blocks would hold frames back until a block retires).
pub struct RxRing {
    base: *mut u8,
    len: usize,
    frame_size: usize,
    frames_per_block: usize,
    block_size: usize,
    frame_nr: usize,
    next: usize,
}

// SAFETY: the mapping is owned by the ring and only touched through `&mut self`;
// moving it to another thread moves that exclusive access with it.
unsafe impl Send for RxRing {}

impl RxRing {
    /// How many frames the ring holds.
    pub fn frames(&self) -> usize {
        self.frame_nr
    }

    /// Sets up a ring of about `bytes` on `sock` for frames up to `max_frame` bytes.
    pub fn new(sock: &PacketSocket, max_frame: usize, bytes: usize) -> io::Result<RxRing> {
        let fd = sock.fd.as_raw_fd();
        super::mmsg::set_int(fd, libc::SOL_PACKET, PACKET_VERSION, TPACKET_V2)?;
        // Header (32) + sockaddr_ll (20), aligned, + 16: where the MAC header lands.
        let frame_size = (max_frame + 96).next_power_of_two();
        let page = 4096;
        let block_size = frame_size.max(page * 16);
        let block_nr = (bytes / block_size).max(2);
        let frames_per_block = block_size / frame_size;
        let frame_nr = block_nr * frames_per_block;
        let req = TpacketReq {
            block_size: block_size as u32,
            block_nr: block_nr as u32,
            frame_size: frame_size as u32,
            frame_nr: frame_nr as u32,
        };
        super::mmsg::set_raw(fd, libc::SOL_PACKET, PACKET_RX_RING, &req)?;
        let len = block_size * block_nr;
        // SAFETY: mapping the ring the kernel just allocated for this socket,
        // shared and readable/writable as the packet(7) ring protocol requires.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(RxRing { base: base.cast(), len, frame_size, frames_per_block, block_size, frame_nr, next: 0 })
    }

    fn frame(&self, i: usize) -> *mut u8 {
        let at = (i / self.frames_per_block) * self.block_size + (i % self.frames_per_block) * self.frame_size;
        // SAFETY: `at + frame_size <= len` for every i < frame_nr, so the
        // pointer stays inside the mapping.
        unsafe { self.base.add(at) }
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: tp_status is the first, 4-byte aligned field of the frame's
        // tpacket2_hdr; the kernel and we hand the frame over through it with
        // acquire/release ordering, as packet(7) prescribes.
        unsafe { AtomicU32::from_ptr(self.frame(i).cast::<u32>()) }
    }

    /// Copies up to `metas.len()` ready frames into `slot`-byte pieces of `buf`
    /// and gives their ring frames back to the kernel. Never blocks.
    pub fn recv_batch(&mut self, buf: &mut [u8], slot: usize, metas: &mut [RxMeta]) -> usize {
        let mut n = 0;
        for (chunk, meta) in buf.chunks_exact_mut(slot).zip(metas.iter_mut()) {
            let i = self.next;
            if self.status(i).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                break;
            }
            let f = self.frame(i);
            // SAFETY: the frame is ours until we store TP_STATUS_KERNEL; its
            // header fields are in bounds, and tp_mac + tp_snaplen lie within
            // the frame (the kernel truncates to fit it).
            let (len, snap, mac) = unsafe {
                let len = std::ptr::read_unaligned(f.add(TP_LEN).cast::<u32>()) as usize;
                let snap = std::ptr::read_unaligned(f.add(TP_SNAPLEN).cast::<u32>()) as usize;
                let mac = usize::from(std::ptr::read_unaligned(f.add(TP_MAC).cast::<u16>()));
                (len, snap, mac)
            };
            let take = snap.min(slot).min(self.frame_size.saturating_sub(mac));
            // SAFETY: `take` bytes from `f + mac` lie within the frame (above).
            let data = unsafe { std::slice::from_raw_parts(f.add(mac), take) };
            chunk[..take].copy_from_slice(data);
            *meta = RxMeta { len: take, truncated: take < len, ..RxMeta::default() };
            self.status(i).store(TP_STATUS_KERNEL, Ordering::Release);
            self.next = (i + 1) % self.frame_nr;
            n += 1;
        }
        n
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `new`, once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
