//! Live capture from an interface (`uroce dump -i IFACE`), over AF_PACKET.

use crate::sys::packet::{if_index, PacketSocket};
use std::fmt;
use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Why an interface cannot be captured from, phrased so the user can act.
#[derive(Debug)]
pub enum LiveError {
    NoSuchInterface(String),
    NotPermitted(String),
    Io(io::Error),
}

impl fmt::Display for LiveError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            LiveError::NoSuchInterface(n) => write!(f, "no interface named {n:?}: `ip link` lists the interfaces"),
            LiveError::NotPermitted(n) => write!(
                f,
                "capturing on {n} needs CAP_NET_RAW: run as root, or `sudo setcap cap_net_raw+ep $(which uroce)`"
            ),
            LiveError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LiveError {}

/// Frames seen on one interface, in both directions.
pub struct LiveCapture {
    sock: PacketSocket,
    buf: Vec<u8>,
}

impl LiveCapture {
    pub fn open(iface: &str) -> Result<LiveCapture, LiveError> {
        let idx = if_index(iface).ok_or_else(|| LiveError::NoSuchInterface(iface.to_string()))?;
        let sock = PacketSocket::open(idx).map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => LiveError::NotPermitted(iface.to_string()),
            _ => LiveError::Io(e),
        })?;
        Ok(LiveCapture { sock, buf: vec![0; 65536] })
    }

    /// Sends one Ethernet frame out of the interface (for tests and experiments).
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        self.sock.send(frame)
    }

    /// The next frame with its time since the Unix epoch, or `None` if none came
    /// within `timeout`.
    pub fn next_frame(&mut self, timeout: Duration) -> io::Result<Option<(Duration, &[u8])>> {
        match self.sock.recv_timeout(&mut self.buf, timeout)? {
            None => Ok(None),
            Some(n) => {
                let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
                Ok(Some((now, &self.buf[..n])))
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn missing_interface_says_so() {
        let e = LiveCapture::open("uroce-no-such-if0").err().unwrap();
        assert!(e.to_string().contains("no interface named"), "{e}");
    }
}
