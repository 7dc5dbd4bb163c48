//! Descriptor duplication, for waiting on a link from another thread.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};

/// A duplicate of `fd` (same open file: readable when the original is).
pub fn dup(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: callers pass the descriptor of a socket or device they own and
    // keep open for the duration of this call; it is only borrowed to dup it.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    borrowed.try_clone_to_owned()
}
