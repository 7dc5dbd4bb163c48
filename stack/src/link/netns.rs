//! Running the calling thread in a named network namespace (`ip netns add NAME`),
//! for tests and labs: links opened while inside stay in that namespace.

use crate::sys::netns::setns_net;
use std::fs::File;
use std::io;

/// The calling thread is in another network namespace until this is dropped.
pub struct NetnsGuard {
    home: File,
}

impl NetnsGuard {
    /// Enters `/var/run/netns/NAME` (needs CAP_SYS_ADMIN).
    pub fn enter(name: &str) -> io::Result<NetnsGuard> {
        let home = File::open("/proc/thread-self/ns/net")?;
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
