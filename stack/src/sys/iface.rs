//! Interface facts: addresses, MTU, MAC, flags (getifaddrs and SIOCGIF* ioctls).

use std::ffi::{CStr, CString};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// One address of one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfAddr {
    pub ifname: String,
    pub ip: IpAddr,
    pub prefix_len: u8,
}

impl IfAddr {
    /// Whether `ip` is inside this address's prefix (the same family).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let len = self.prefix_len;
        match (self.ip, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) };
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len.min(128))) };
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

fn prefix_of(mask: &[u8]) -> u8 {
    mask.iter().map(|b| b.count_ones() as u8).sum()
}

/// Every IPv4 and IPv6 address of every interface.
pub fn addresses() -> io::Result<Vec<IfAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let ifname = unsafe { CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned();
        // SAFETY: ifa_addr is non-null and points at a sockaddr of its family.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        match family {
            libc::AF_INET => {
                // SAFETY: the family says both are sockaddr_in (the mask may be null).
                let (a, m) = unsafe {
                    let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in>();
                    let m = ifa.ifa_netmask.cast::<libc::sockaddr_in>().as_ref();
                    (a.sin_addr.s_addr.to_ne_bytes(), m.map(|m| m.sin_addr.s_addr.to_ne_bytes()))
                };
                let prefix_len = m.map(|m| prefix_of(&m)).unwrap_or(32);
                out.push(IfAddr { ifname, ip: IpAddr::V4(Ipv4Addr::from(a)), prefix_len });
            }
            libc::AF_INET6 => {
                // SAFETY: the family says both are sockaddr_in6 (the mask may be null).
                let (a, m) = unsafe {
                    let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in6>();
                    let m = ifa.ifa_netmask.cast::<libc::sockaddr_in6>().as_ref();
                    (a.sin6_addr.s6_addr, m.map(|m| m.sin6_addr.s6_addr))
                };
                let prefix_len = m.map(|m| prefix_of(&m)).unwrap_or(128);
                out.push(IfAddr { ifname, ip: IpAddr::V6(Ipv6Addr::from(a)), prefix_len });
            }
            _ => {}
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed exactly once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let bytes = c.as_bytes_with_nul();
    if bytes.len() > libc::IFNAMSIZ {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(r)
}

fn ioctl_sock() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; checked below.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn ioctl(req: libc::c_ulong, r: &mut libc::ifreq) -> io::Result<()> {
    let s = ioctl_sock()?;
    // SAFETY: `r` is a valid ifreq for the SIOCGIF*/SIOCSIF* request given.
    if unsafe { libc::ioctl(s.as_raw_fd(), req as _, r as *mut libc::ifreq) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The MTU of interface `name`.
pub fn mtu(name: &str) -> io::Result<usize> {
    let mut r = ifreq(name)?;
    ioctl(libc::SIOCGIFMTU, &mut r)?;
    // SAFETY: SIOCGIFMTU filled the ifru_mtu member.
    Ok(unsafe { r.ifr_ifru.ifru_mtu } as usize)
}

/// The hardware address of interface `name`.
pub fn mac(name: &str) -> io::Result<[u8; 6]> {
    let mut r = ifreq(name)?;
    ioctl(libc::SIOCGIFHWADDR, &mut r)?;
    // SAFETY: SIOCGIFHWADDR filled the ifru_hwaddr member.
    let sa = unsafe { r.ifr_ifru.ifru_hwaddr };
    let mut m = [0u8; 6];
    for (d, s) in m.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(m)
}

/// Sets IFF_UP on interface `name` (needs CAP_NET_ADMIN).
pub fn set_up(name: &str) -> io::Result<()> {
    let mut r = ifreq(name)?;
    ioctl(libc::SIOCGIFFLAGS, &mut r)?;
    // SAFETY: SIOCGIFFLAGS filled ifru_flags; we set the same member back.
    unsafe { r.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    ioctl(libc::SIOCSIFFLAGS, &mut r)
}

/// The interface holding `ip`, or else the one whose prefix contains it
/// (127.0.0.2 is on `lo` through 127.0.0.1/8).
pub fn interface_of(ip: IpAddr) -> Option<String> {
    let all = addresses().ok()?;
    if let Some(a) = all.iter().find(|a| a.ip == ip) {
        return Some(a.ifname.clone());
    }
    all.into_iter().filter(|a| a.contains(ip)).max_by_key(|a| a.prefix_len).map(|a| a.ifname)
}

/// What the kernel's table says of an IPv6 address on one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv6State {
    /// Not on the interface.
    Absent,
    /// Duplicate address detection still runs (a second or two after the
    /// interface came up); nothing can bind the address until it ends.
    Tentative,
    /// Usable.
    Ready,
}

/// The state of `ip` on `ifname` (`/proc/net/if_inet6`, flag 0x40 tentative).
pub fn ipv6_state(ip: Ipv6Addr, ifname: &str) -> Ipv6State {
    let Ok(table) = std::fs::read_to_string("/proc/net/if_inet6") else { return Ipv6State::Absent };
    ipv6_state_in(&table, ip, ifname)
}

fn ipv6_state_in(table: &str, ip: Ipv6Addr, ifname: &str) -> Ipv6State {
    let hex: String = ip.octets().iter().map(|b| format!("{b:02x}")).collect();
    let flags = table.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() == 6 && f[0] == hex && f[5] == ifname).then(|| u32::from_str_radix(f[4], 16).unwrap_or(0))
    });
    match flags {
        None => Ipv6State::Absent,
        Some(f) if f & 0x40 != 0 => Ipv6State::Tentative,
        Some(_) => Ipv6State::Ready,
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn an_address_contains_what_its_prefix_covers_in_its_own_family() {
        let at = |ip: &str, prefix_len| IfAddr { ifname: "x".into(), ip: ip.parse().unwrap(), prefix_len };
        let lo = at("127.0.0.1", 8);
        assert!(lo.contains("127.0.0.2".parse().unwrap()));
        assert!(!lo.contains("128.0.0.1".parse().unwrap()));
        assert!(!lo.contains("::1".parse().unwrap()), "another family is never inside");
        assert!(at("10.1.2.3", 0).contains("192.168.0.1".parse().unwrap()), "/0 covers the family");
        assert!(at("10.1.2.3", 32).contains("10.1.2.3".parse().unwrap()));
        assert!(!at("10.1.2.3", 32).contains("10.1.2.4".parse().unwrap()));
        let v6 = at("fd00:12::2", 64);
        assert!(v6.contains("fd00:12::99".parse().unwrap()));
        assert!(!v6.contains("fd00:13::2".parse().unwrap()));
    }

    #[test]
    fn the_address_table_tells_tentative_from_ready_and_absent() {
        let table = "fd000012000000000000000000000002 03 40 00 c0       vb\n\
                     fe80000000000000a8c1abfffe000001 03 40 20 80       vb\n\
                     00000000000000000000000000000001 01 80 10 80       lo\n";
        let global: Ipv6Addr = "fd00:12::2".parse().unwrap();
        let ll: Ipv6Addr = "fe80::a8c1:abff:fe00:1".parse().unwrap();
        assert_eq!(ipv6_state_in(table, global, "vb"), Ipv6State::Tentative);
        assert_eq!(ipv6_state_in(table, ll, "vb"), Ipv6State::Ready);
        assert_eq!(ipv6_state_in(table, Ipv6Addr::LOCALHOST, "lo"), Ipv6State::Ready);
        assert_eq!(ipv6_state_in(table, global, "eth0"), Ipv6State::Absent);
        assert_eq!(ipv6_state_in(table, "fd00:12::3".parse().unwrap(), "vb"), Ipv6State::Absent);
    }
}
