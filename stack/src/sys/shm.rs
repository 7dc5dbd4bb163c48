//! Memory two processes of one host share for the udp link's same-host path
//! (`link::shm`): a sealed memfd both map, holding two single-producer
//! single-consumer rings of datagrams (one each way), read and written
//! through raw pointers and atomics only; the eventfd a sleeping reader
//! waits on; and descriptors passed over a Unix socket (SCM_RIGHTS).
//!
//! The peer is another process and may be buggy or gone: every index and
//! length read from the shared memory is checked before it is used, so a
//! bad ring can only lose its own datagrams, never make this process read
//! or write outside the mapping.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Datagrams a ring holds: about what a UDP socket's receive buffer holds
/// (the engine sizes its window of unacknowledged packets by that).
pub const RING_SLOTS: u64 = 1024;
/// The largest datagram a slot carries (the udp link's largest RoCE packet).
pub const SLOT_DATA: usize = 4096 + 256;
/// A slot: the datagram's length (u32) and source port (u16), then its bytes.
const SLOT_HEADER: usize = 8;
const SLOT_BYTES: usize = (SLOT_HEADER + SLOT_DATA).next_multiple_of(64);
/// Slots whose first line `publish` fetches ahead for the next pushes: a
/// ping-pong's reply and the ACK before it.
const PREFETCH_SLOTS: u64 = 2;
/// A ring's header: the writer's tail, the reader's head and the reader's
/// "asleep" flag, each on a cache line of its own.
const TAIL_AT: usize = 0;
const HEAD_AT: usize = 64;
const WAITING_AT: usize = 128;
const RING_HEADER: usize = 192;
/// Both headers, then both rings' slots.
const SLOTS_AT: usize = 2 * RING_HEADER;
/// The size of the shared memory of one pair of processes.
pub const MAP_LEN: usize = SLOTS_AT + 2 * RING_SLOTS as usize * SLOT_BYTES;

/// A shared mapping of [`MAP_LEN`] bytes, unmapped on drop.
pub struct SharedMap {
    ptr: NonNull<u8>,
}

// SAFETY: the mapping is only touched through raw copies and atomics (no
// references to its bytes), from whichever thread holds its owner.
unsafe impl Send for SharedMap {}

impl SharedMap {
    /// A new zeroed memfd of [`MAP_LEN`] bytes, sealed against growing and
    /// shrinking, mapped; with its descriptor, to pass to the peer.
    pub fn create() -> io::Result<(SharedMap, OwnedFd)> {
        let name = c"uroce-shm";
        // SAFETY: a NUL-terminated name and constant flags; the result is checked.
        let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate and fcntl on the descriptor just made.
        let sized = unsafe { libc::ftruncate(fd.as_raw_fd(), MAP_LEN as libc::off_t) };
        if sized < 0 {
            return Err(io::Error::last_os_error());
        }
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let map = SharedMap::map(fd.as_fd())?;
        map.warm();
        Ok((map, fd))
    }

    /// Stores to every line of the mapping once, so that the rings' first
    /// round finds their lines in the caches as later rounds do. Zeroed by
    /// the kernel as they were faulted in (MAP_POPULATE), they were not:
    /// each slot's first use waited at both ends, and a polled 1000-iteration write_lat (perftest's
    /// default count) ran at 1.6 us a half trip, against 1.0 once the
    /// rings had gone round (1.1 with this pass; docs/PERFORMANCE.md).
    fn warm(&self) {
        // SAFETY: the whole mapping, which is ours and holds only zeros
        // (fresh, not yet passed to the peer): zeros written over zeros.
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr(), 0, MAP_LEN) }
    }

    /// Maps the memfd a peer passed, once it is shown to be what
    /// [`SharedMap::create`] makes: [`MAP_LEN`] bytes that cannot shrink
    /// (a file cut short under a mapping would fault on access).
    pub fn open(fd: &OwnedFd) -> io::Result<SharedMap> {
        // SAFETY: F_GET_SEALS on an open descriptor.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `st` is a stat buffer fstat fills in; read only on success.
        let stat_ok = unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } == 0;
        // SAFETY: fstat succeeded, so `st` is initialised.
        let size = if stat_ok { unsafe { st.assume_init() }.st_size } else { -1 };
        let sealed = seals >= 0 && seals & libc::F_SEAL_SHRINK != 0 && seals & libc::F_SEAL_SEAL != 0;
        if !sealed || size != MAP_LEN as libc::off_t {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "not a sealed uroce ring memory"));
        }
        SharedMap::map(fd.as_fd())
    }

    /// Maps the whole file, its pages faulted in now (MAP_POPULATE): else
    /// each side takes a page fault every slot or so for the rings' first
    /// round, which made the first thousand round trips five times slower.
    fn map(fd: BorrowedFd<'_>) -> io::Result<SharedMap> {
        // SAFETY: a fresh shared mapping of the whole file, at an address the
        // kernel picks; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MAP_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedMap { ptr: NonNull::new(p.cast()).expect("mmap does not return NULL on success") })
    }

    /// The atomic word at byte `at` of the mapping (8-aligned, in range:
    /// only this module's constants are passed).
    fn word(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at.is_multiple_of(8) && at + 8 <= MAP_LEN);
        // SAFETY: in range and aligned (the mapping is page-aligned); the
        // memory stays mapped while `self` lives and is only ever accessed
        // atomically at these offsets.
        unsafe { AtomicU64::from_ptr(self.ptr.as_ptr().add(at).cast()) }
    }

    fn flag(&self, at: usize) -> &AtomicU32 {
        debug_assert!(at.is_multiple_of(4) && at + 4 <= MAP_LEN);
        // SAFETY: as in `word`.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(at).cast()) }
    }

    /// Asks the CPU to fetch the cache line at `at` for writing, without
    /// waiting for it.
    fn prefetch_for_write(&self, at: usize) {
        assert!(at < MAP_LEN);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: in range (asserted); a prefetch reads and writes nothing.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0};
            _mm_prefetch::<_MM_HINT_ET0>(self.ptr.as_ptr().add(at).cast::<i8>().cast_const());
        }
    }

    /// Copies `src` into the mapping at `at` (in range: checked by callers
    /// against the slot bounds).
    fn write(&self, at: usize, src: &[u8]) {
        assert!(at + src.len() <= MAP_LEN);
        // SAFETY: in range (asserted); the peer may read the same bytes
        // concurrently only after the tail that publishes them moves, and
        // never before (Release/Acquire on the tail).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(at), src.len()) }
    }

    fn read(&self, at: usize, dst: &mut [u8]) {
        assert!(at + dst.len() <= MAP_LEN);
        // SAFETY: in range (asserted); a peer that writes the slot anyway
        // only garbles its own datagram, which lands in `dst` (ours) and
        // is parsed there as any datagram from the network.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(at), dst.as_mut_ptr(), dst.len()) }
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`, once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), MAP_LEN) };
    }
}

/// Why a ring cannot be used any more: the peer wrote indices no ring has.
#[derive(Debug, PartialEq, Eq)]
pub struct Broken;

/// One side's view of the two rings in a [`SharedMap`]: side 0 (who created
/// it) writes ring 0 and reads ring 1, side 1 the other way round.
pub struct RingPair {
    map: SharedMap,
    out: usize,
    inn: usize,
    /// The tail this side has written up to (published by `publish`).
    tail: u64,
    /// The head this side has read up to (published by `release`).
    head: u64,
    /// The head last published, so that an unchanged one is not stored
    /// again: the writer reads that line, and each store takes it back.
    released: u64,
    /// The peer's head of the outgoing ring as last read. Read again only
    /// when the ring looks full by it: a hand-off of the line between
    /// cores costs about 200 ns here (`uroce-bench syscall-cost`), and
    /// reading it for every datagram put one on every send.
    out_head: u64,
}

impl RingPair {
    pub fn new(map: SharedMap, side: usize) -> RingPair {
        let (out, inn) = if side == 0 { (0, 1) } else { (1, 0) };
        let tail = map.word(out * RING_HEADER + TAIL_AT).load(Ordering::Acquire);
        let head = map.word(inn * RING_HEADER + HEAD_AT).load(Ordering::Acquire);
        let out_head = map.word(out * RING_HEADER + HEAD_AT).load(Ordering::Acquire);
        RingPair { map, out, inn, tail, head, released: head, out_head }
    }

    fn slot_at(ring: usize, index: u64) -> usize {
        SLOTS_AT + (ring * RING_SLOTS as usize + (index % RING_SLOTS) as usize) * SLOT_BYTES
    }

    /// Writes a datagram (`parts` one after the other, from `src_port`)
    /// into the outgoing ring; `false` if the ring is full or the datagram
    /// too long (dropped, as a full socket drops). Unseen by the peer until
    /// [`RingPair::publish`].
    pub fn push(&mut self, src_port: u16, parts: &[&[u8]]) -> bool {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if self.tail.wrapping_sub(self.out_head) >= RING_SLOTS {
            // Acquire: the reader is done with the slots up to its head.
            self.out_head = self.map.word(self.out * RING_HEADER + HEAD_AT).load(Ordering::Acquire);
        }
        if len > SLOT_DATA || self.tail.wrapping_sub(self.out_head) >= RING_SLOTS {
            return false;
        }
        let slot = Self::slot_at(self.out, self.tail);
        let mut header = [0u8; SLOT_HEADER];
        header[..4].copy_from_slice(&(len as u32).to_le_bytes());
        header[4..6].copy_from_slice(&src_port.to_le_bytes());
        self.map.write(slot, &header);
        let mut at = slot + SLOT_HEADER;
        for p in parts {
            self.map.write(at, p);
            at += p.len();
        }
        self.tail = self.tail.wrapping_add(1);
        true
    }

    /// Makes the datagrams pushed so far visible; whether the peer was
    /// asleep on them (then the caller wakes it: its eventfd).
    pub fn publish(&mut self) -> bool {
        let tail = self.map.word(self.out * RING_HEADER + TAIL_AT);
        if tail.load(Ordering::Relaxed) == self.tail {
            return false;
        }
        // SeqCst with the reader's flag store and tail load (`prepare_to_sleep`):
        // either it sees this tail or this sees its flag.
        tail.store(self.tail, Ordering::SeqCst);
        let asleep = self.map.flag(self.out * RING_HEADER + WAITING_AT).swap(0, Ordering::SeqCst) == 1;
        // Only slots free by the reader's head as last read: a slot the
        // reader has yet to read stays with it.
        let free = RING_SLOTS.saturating_sub(self.tail.wrapping_sub(self.out_head));
        for next in 0..PREFETCH_SLOTS.min(free) {
            self.map.prefetch_for_write(Self::slot_at(self.out, self.tail.wrapping_add(next)));
        }
        asleep
    }

    /// Takes the next incoming datagram into `dst` (at least [`SLOT_DATA`]
    /// bytes): its length and source port, or `None` when the ring is empty.
    /// A length beyond a slot is skipped as a zero-length datagram.
    pub fn pop(&mut self, dst: &mut [u8]) -> Result<Option<(usize, u16)>, Broken> {
        let tail = self.map.word(self.inn * RING_HEADER + TAIL_AT).load(Ordering::Acquire);
        let queued = tail.wrapping_sub(self.head);
        if queued == 0 {
            return Ok(None);
        }
        if queued > RING_SLOTS {
            return Err(Broken);
        }
        let slot = Self::slot_at(self.inn, self.head);
        let mut header = [0u8; SLOT_HEADER];
        self.map.read(slot, &mut header);
        let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        let src_port = u16::from_le_bytes([header[4], header[5]]);
        self.head = self.head.wrapping_add(1);
        if len > SLOT_DATA || len > dst.len() {
            return Ok(Some((0, src_port)));
        }
        self.map.read(slot + SLOT_HEADER, &mut dst[..len]);
        Ok(Some((len, src_port)))
    }

    /// Gives the slots read so far back to the writer.
    pub fn release(&mut self) {
        if self.head != self.released {
            self.map.word(self.inn * RING_HEADER + HEAD_AT).store(self.head, Ordering::Release);
            self.released = self.head;
        }
    }

    /// Says this side is about to sleep until its eventfd is written;
    /// `false` (and no sleep) if a datagram is already waiting.
    pub fn prepare_to_sleep(&mut self) -> bool {
        self.release();
        self.map.flag(self.inn * RING_HEADER + WAITING_AT).store(1, Ordering::SeqCst);
        self.map.word(self.inn * RING_HEADER + TAIL_AT).load(Ordering::SeqCst) == self.head
    }
}

/// A non-blocking eventfd.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: constant flags; the result is checked.
    let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Adds one to eventfd `fd` (wakes who waits on it).
pub fn signal(fd: BorrowedFd<'_>) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: an 8-byte write from a local buffer; a full counter (EAGAIN)
    // already wakes the reader.
    let _ = unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), 8) };
}

/// Empties eventfd `fd` (non-blocking).
pub fn drain(fd: BorrowedFd<'_>) {
    let mut buf = [0u8; 8];
    // SAFETY: an 8-byte read into a local buffer; EAGAIN when already empty.
    let _ = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
}

/// Connects to the abstract Unix socket `name` without blocking: a
/// listener whose backlog is full (a process that is stuck) refuses
/// (`WouldBlock`) instead of holding the caller, which holds its driver.
pub fn connect_abstract(name: &[u8]) -> io::Result<std::os::unix::net::UnixStream> {
    // SAFETY: a zeroed sockaddr_un is valid; sun_path is filled below.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    // An abstract name: a NUL, then the name (not NUL-terminated).
    if name.len() + 1 > addr.sun_path.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a name too long for a Unix socket"));
    }
    for (d, s) in addr.sun_path[1..].iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    let len = (std::mem::offset_of!(libc::sockaddr_un, sun_path) + 1 + name.len()) as libc::socklen_t;
    // SAFETY: socket(2) with constant arguments; the result is checked.
    let raw = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: `addr` is a sockaddr_un of which `len` bytes are meaningful.
    let rc = unsafe { libc::connect(fd.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(std::os::unix::net::UnixStream::from(fd))
}

/// Descriptors one message passes at most.
pub const MAX_FDS: usize = 2;

/// Sends `data` with `fds` over connected Unix socket `sock`, in one message.
pub fn send_with_fds(sock: BorrowedFd<'_>, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    assert!(fds.len() <= MAX_FDS);
    let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut _, iov_len: data.len() };
    // u64 words: aligned for cmsghdr.
    let mut control = [0u64; 8];
    // SAFETY: CMSG_SPACE computes a size from a constant.
    let space = unsafe { libc::CMSG_SPACE(size_of_val(fds) as u32) } as usize;
    assert!(space <= size_of_val(&control));
    // SAFETY: zeroed msghdr is a valid empty header, filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: msg_control points at `space` bytes we own; CMSG_FIRSTHDR
        // returns a header inside them, and CMSG_DATA its data, which has
        // room for `fds` (CMSG_SPACE above).
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(size_of_val(fds) as u32) as usize;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast::<RawFd>(), fds.len());
        }
    }
    // SAFETY: `msg` describes buffers that live across the call.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
    match n {
        n if n < 0 => Err(io::Error::last_os_error()),
        n if n as usize != data.len() => Err(io::Error::new(io::ErrorKind::WriteZero, "a short message")),
        _ => Ok(()),
    }
}

/// Receives one message into `buf` (non-blocking), with the descriptors it
/// carries: `Ok((0, _))` at end of stream.
pub fn recv_with_fds(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut control = [0u64; 8];
    // SAFETY: zeroed msghdr is a valid empty header, filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of_val(&control);
    // SAFETY: `msg` describes buffers that live across the call.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled msg_control with msg_controllen bytes of
    // cmsg headers; CMSG_FIRSTHDR/NXTHDR stay inside them, and an
    // SCM_RIGHTS header's data holds (cmsg_len - CMSG_LEN(0)) / 4 new
    // descriptors that are ours to own.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                for i in 0..bytes / size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n as usize, fds))
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn datagrams_cross_the_rings_both_ways_and_wrap() {
        let (map, fd) = SharedMap::create().unwrap();
        let mut a = RingPair::new(map, 0);
        let mut b = RingPair::new(SharedMap::open(&fd).unwrap(), 1);
        let mut buf = vec![0u8; SLOT_DATA];
        for round in 0..3 * RING_SLOTS {
            let body = round.to_le_bytes();
            assert!(a.push(4791, &[&body, b"!"]));
            a.publish();
            assert_eq!(b.pop(&mut buf), Ok(Some((9, 4791))));
            assert_eq!((&buf[..8], buf[8]), (&body[..], b'!'));
            b.release();
        }
        assert_eq!(b.pop(&mut buf), Ok(None));
        assert!(b.push(7, &[b"back"]));
        b.publish();
        assert_eq!(a.pop(&mut buf), Ok(Some((4, 7))));
    }

    #[test]
    fn a_full_ring_refuses_and_a_too_long_datagram_is_dropped() {
        let (map, fd) = SharedMap::create().unwrap();
        let mut a = RingPair::new(map, 0);
        assert!(!a.push(1, &[&vec![0u8; SLOT_DATA + 1]]));
        for _ in 0..RING_SLOTS {
            assert!(a.push(1, &[b"x"]));
        }
        assert!(!a.push(1, &[b"x"]), "full until the reader releases");
        a.publish();
        let mut b = RingPair::new(SharedMap::open(&fd).unwrap(), 1);
        let mut buf = vec![0u8; SLOT_DATA];
        assert_eq!(b.pop(&mut buf), Ok(Some((1, 1))));
        assert!(!a.push(1, &[b"x"]), "a slot read but not yet released is still the reader's");
        b.release();
        assert!(a.push(1, &[b"x"]), "released: the writer reads the head again");
        assert!(!a.push(1, &[b"x"]), "and the ring is full again");
    }

    #[test]
    fn a_sleeping_reader_is_told_and_a_waiting_datagram_keeps_it_awake() {
        let (map, fd) = SharedMap::create().unwrap();
        let mut a = RingPair::new(map, 0);
        let mut b = RingPair::new(SharedMap::open(&fd).unwrap(), 1);
        assert!(b.prepare_to_sleep(), "nothing waits: b may sleep");
        assert!(a.push(1, &[b"x"]));
        assert!(a.publish(), "b slept: a wakes it");
        assert!(!b.prepare_to_sleep(), "a datagram waits: b stays up");
        assert!(a.push(1, &[b"y"]));
        assert!(a.publish(), "b said again it would sleep: woken once more");
        assert!(a.push(1, &[b"z"]));
        assert!(!a.publish(), "once");
    }

    #[test]
    fn a_peer_that_corrupts_the_indices_breaks_only_its_ring() {
        let (map, fd) = SharedMap::create().unwrap();
        let mut b = RingPair::new(SharedMap::open(&fd).unwrap(), 1);
        map.word(TAIL_AT).store(RING_SLOTS + 5, Ordering::Release);
        let mut buf = vec![0u8; SLOT_DATA];
        assert_eq!(b.pop(&mut buf), Err(Broken));
        // A length beyond the slot: skipped.
        map.word(TAIL_AT).store(1, Ordering::Release);
        map.write(RingPair::slot_at(0, 0), &u32::MAX.to_le_bytes());
        assert_eq!(RingPair::new(SharedMap::open(&fd).unwrap(), 1).pop(&mut buf), Ok(Some((0, 0))));
    }

    #[test]
    fn memory_that_can_shrink_is_refused() {
        // SAFETY: as in `SharedMap::create`.
        let raw = unsafe { libc::memfd_create(c"x".as_ptr(), libc::MFD_CLOEXEC) };
        // SAFETY: a fresh descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate on it.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), MAP_LEN as libc::off_t) }, 0);
        assert!(SharedMap::open(&fd).is_err());
    }

    #[test]
    fn an_abstract_name_is_reached_without_blocking_or_refused() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("uroce-test/{}", std::process::id());
        assert!(connect_abstract(name.as_bytes()).is_err(), "nobody listens yet");
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        let client = connect_abstract(name.as_bytes()).unwrap();
        let (server, _) = listener.accept().unwrap();
        send_with_fds(client.as_fd(), b"hi", &[]).unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(recv_with_fds(server.as_fd(), &mut buf).unwrap().0, 2);
    }

    #[test]
    fn descriptors_pass_over_a_unix_socket() {
        let (x, y) = std::os::unix::net::UnixStream::pair().unwrap();
        let efd = eventfd().unwrap();
        send_with_fds(x.as_fd(), b"hello", &[efd.as_raw_fd()]).unwrap();
        let mut buf = [0u8; 16];
        let (n, fds) = recv_with_fds(y.as_fd(), &mut buf).unwrap();
        assert_eq!((&buf[..n], fds.len()), (&b"hello"[..], 1));
        signal(fds[0].as_fd());
        let mut v = [0u8; 8];
        // SAFETY: an 8-byte read of the eventfd into a local buffer.
        assert_eq!(unsafe { libc::read(efd.as_raw_fd(), v.as_mut_ptr().cast(), 8) }, 8, "the same eventfd");
    }
}
