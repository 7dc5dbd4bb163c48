//! Running the calling thread in a named network namespace (`ip netns add NAME`),
//! for tests and labs: links opened while inside stay in that namespace.

use crate::sys::netns::setns_net;
use std::fs::File;
use std::io;

/// Whether this process runs as root (its effective uid is 0): the one gate
/// of the tests and labs that make namespaces, veths and TAP devices.
pub fn is_root() -> bool {
    // From /proc, so that no unsafe call is needed outside the sys modules.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

/// The calling thread's network namespace, as the kernel names it
/// (`net:[INODE]`); `None` where /proc cannot tell.
pub fn current() -> Option<String> {
    std::fs::read_link(THREAD_NETNS).ok().map(|p| p.display().to_string())
}

const THREAD_NETNS: &str = "/proc/thread-self/ns/net";

/// The calling thread is in another network namespace until this is dropped.
pub struct NetnsGuard {
    home: File,
}

impl NetnsGuard {
    /// Enters `/var/run/netns/NAME` (needs CAP_SYS_ADMIN).
    pub fn enter(name: &str) -> io::Result<NetnsGuard> {
        let home = File::open(THREAD_NETNS)?;
        let target = File::open(format!("/var/run/netns/{name}"))?;
        setns_net(&target)?;
        Ok(NetnsGuard { home })
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // Going back can only fail if the original namespace vanished.
        let _ = setns_net(&self.home);
    }
}
