//! The link's descriptors, readable without the driver's lock: a forked
//! child lets go of them in its `pthread_atfork` handler, where a lock that
//! a thread of the parent held at the fork stays held forever (that thread
//! is not in the child).

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

/// How many descriptors are kept (a link holds a few: its socket, its
/// listeners, its wait sets; more multicast groups or same-host peers than
/// this are let go of only when the lock is free at the fork).
const KEPT: usize = 16;

/// A copy of the link's descriptor list, refreshed under the driver's lock
/// whenever the link may have changed it.
pub(super) struct FdSnapshot {
    fds: [AtomicI32; KEPT],
    len: AtomicUsize,
}

impl FdSnapshot {
    pub fn new(fds: &[RawFd]) -> FdSnapshot {
        let snap = FdSnapshot { fds: std::array::from_fn(|_| AtomicI32::new(-1)), len: AtomicUsize::new(0) };
        snap.store(fds);
        snap
    }

    /// Replaces the list (the caller holds the driver's lock: one writer).
    pub fn store(&self, fds: &[RawFd]) {
        let n = fds.len().min(KEPT);
        // Shrunk first, grown last: a reader in between sees a prefix of
        // numbers that were the link's at one moment or the other.
        self.len.store(0, Ordering::Release);
        for (slot, fd) in self.fds.iter().zip(fds) {
            slot.store(*fd, Ordering::Relaxed);
        }
        self.len.store(n, Ordering::Release);
    }

    /// The descriptors kept.
    pub fn each(&self, mut f: impl FnMut(RawFd)) {
        let n = self.len.load(Ordering::Acquire).min(KEPT);
        self.fds[..n].iter().map(|s| s.load(Ordering::Relaxed)).filter(|fd| *fd >= 0).for_each(&mut f);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn a_snapshot_gives_back_what_was_stored_up_to_its_size() {
        let snap = FdSnapshot::new(&[3, 4]);
        let got = |s: &FdSnapshot| {
            let mut v = Vec::new();
            s.each(|fd| v.push(fd));
            v
        };
        assert_eq!(got(&snap), [3, 4]);
        snap.store(&(10..40).collect::<Vec<_>>());
        assert_eq!(got(&snap), (10..26).collect::<Vec<_>>());
        snap.store(&[7]);
        assert_eq!(got(&snap), [7]);
    }
}
