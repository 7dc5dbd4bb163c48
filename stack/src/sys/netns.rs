//! Switching the calling thread between network namespaces (setns(2)).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Moves the calling thread into the network namespace open at `ns`.
pub fn setns_net(ns: &File) -> io::Result<()> {
    // SAFETY: setns(2) on a descriptor we own; it affects only this thread.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
