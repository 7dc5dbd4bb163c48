//! TAP devices: /dev/net/tun with IFF_TAP, one Ethernet frame per read/write.

use super::mmsg::RxMeta;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `TUNSETIFF` = _IOW('T', 202, int).
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// An open TAP device.
pub struct Tap {
    fd: OwnedFd,
    name: String,
}

impl Tap {
    /// Opens TAP device `name`, creating it if it does not exist (needs
    /// CAP_NET_ADMIN, or ownership of a persistent device).
    pub fn open(name: &str) -> io::Result<Tap> {
        let path = CString::new("/dev/net/tun").map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: open(2) on a NUL-terminated path; the result is checked below.
        let raw = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        if name.len() >= libc::IFNAMSIZ || name.is_empty() || name.contains('\0') {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        // SAFETY: ifreq is plain old data; all-zero is a valid value.
        let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in r.ifr_name.iter_mut().zip(name.as_bytes()) {
            *d = *s as libc::c_char;
        }
        r.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and updates the ifreq we pass.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut r as *mut libc::ifreq) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let actual: Vec<u8> = r.ifr_name.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
        Ok(Tap { fd, name: String::from_utf8_lossy(&actual).into_owned() })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Reads up to `metas.len()` frames without waiting, one per `slot` of `buf`.
    pub fn recv_batch(&self, buf: &mut [u8], slot: usize, metas: &mut [RxMeta]) -> io::Result<usize> {
        let mut n = 0;
        for (chunk, meta) in buf.chunks_exact_mut(slot).zip(metas.iter_mut()) {
            // SAFETY: `chunk` is valid for writes of `slot` bytes.
            let got = unsafe { libc::read(self.fd.as_raw_fd(), chunk.as_mut_ptr().cast(), slot) };
            if got < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(n),
                    _ if n > 0 => Ok(n),
                    _ => Err(e),
                };
            }
            *meta = RxMeta { len: got as usize, ..RxMeta::default() };
            n += 1;
        }
        Ok(n)
    }

    /// Writes one frame.
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        // SAFETY: `frame` is valid for reads of `frame.len()` bytes.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}
