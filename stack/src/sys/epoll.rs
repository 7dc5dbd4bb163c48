//! An epoll set: one descriptor that is readable while any of its members
//! is, for waiting on a changing set of sockets (a udp link's multicast
//! groups) from another thread.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 with a constant flag; the result is checked.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nothing else owns.
        Ok(Epoll { fd: unsafe { OwnedFd::from_raw_fd(raw) } })
    }

    /// Watches `fd` for readability (the caller keeps it open while it is a member).
    pub fn add(&self, fd: RawFd) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
        // SAFETY: `ev` is a valid epoll_event; both descriptors are open.
        let rc = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Stops watching `fd` (closing it does too).
    pub fn remove(&self, fd: RawFd) {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: as in `add`; a descriptor not in the set only makes it fail.
        let _ = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut ev) };
    }

    /// Whether a member is readable within `timeout`.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let mut ev = [libc::epoll_event { events: 0, u64: 0 }];
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `ev` holds one event and we pass 1.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), ev.as_mut_ptr(), 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
        }
        Ok(n > 0)
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
