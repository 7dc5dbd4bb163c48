//! Device specs: `udp:IP[,shm=0|1]`, `packet:IFACE[,ip=IP][,mac=MAC]`,
//! `tap:NAME,ip=IP/LEN`, each with an optional `,mtu=N` overriding the RoCE
//! path MTU (256..4096).

use super::LinkError;
use core::fmt;
use core::str::FromStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use uroce_transport::engine::Mtu;

/// A parsed `-d` device name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    /// `udp:IP`: a kernel UDP socket on `IP:4791`; a link-local IPv6 address
    /// with the interface it is on, `udp:[fe80::1%eth0]` (`scope`). `shm=0`
    /// sends every datagram by UDP, `shm=1` takes the same-host path to
    /// peers on this host whatever `UROCE_SHM` says (`None`: it decides).
    Udp { ip: IpAddr, scope: Option<String>, path_mtu: Option<Mtu>, shm: Option<bool> },
    /// `packet:IFACE[,ip=IP][,mac=MAC]`: AF_PACKET on an existing interface;
    /// without `ip=`/`mac=`, the interface's own address and MAC.
    Packet {
        iface: String,
        ipv4: Option<Ipv4Addr>,
        ipv6: Option<Ipv6Addr>,
        mac: Option<[u8; 6]>,
        path_mtu: Option<Mtu>,
    },
    /// `tap:NAME,ip=IP/LEN`: a TAP device, created if missing; uroce's own
    /// address and prefix on it (an IPv4 and/or an IPv6 `ip=`).
    Tap {
        name: String,
        ipv4: Option<(Ipv4Addr, u8)>,
        ipv6: Option<(Ipv6Addr, u8)>,
        mac: Option<[u8; 6]>,
        path_mtu: Option<Mtu>,
    },
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.split([':', '-']);
    for b in m.iter_mut() {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

fn fmt_mac(m: &[u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn parse_ip(s: &str) -> Option<IpAddr> {
    s.trim_start_matches('[').trim_end_matches(']').parse().ok()
}

impl FromStr for DeviceSpec {
    type Err = LinkError;

    fn from_str(spec: &str) -> Result<DeviceSpec, LinkError> {
        let bad = |why: String| LinkError::Spec { spec: spec.to_string(), why };
        let (kind, rest) = spec.split_once(':').ok_or_else(|| bad("no link kind before ':'".into()))?;
        let mut parts = rest.split(',');
        let first = parts.next().unwrap_or("").trim();
        if first.is_empty() {
            return Err(bad(format!("{kind}: needs {}", if kind == "udp" { "an IP address" } else { "a name" })));
        }
        let (mut ipv4, mut ipv6, mut mac, mut path_mtu, mut shm) = (None, None, None, None, None);
        for opt in parts {
            let (k, v) = opt.split_once('=').ok_or_else(|| bad(format!("option {opt:?} is not key=value")))?;
            match (kind, k) {
                ("packet" | "tap", "ip") => {
                    let (addr, len) = match v.split_once('/') {
                        Some((a, l)) => {
                            let l: u8 = l.parse().map_err(|_| bad(format!("prefix length {l:?} is not a number")))?;
                            (a, Some(l))
                        }
                        None => (v, None),
                    };
                    let ip = parse_ip(addr).ok_or_else(|| bad(format!("{addr:?} is not an IP address")))?;
                    let max = if ip.is_ipv4() { 32 } else { 128 };
                    if len.is_some_and(|l| l > max) {
                        return Err(bad(format!("prefix length /{} is longer than {max}", len.unwrap_or(0))));
                    }
                    if kind == "tap" && len.is_none() {
                        return Err(bad(format!("tap needs ip=IP/LEN (a prefix length), got ip={v}")));
                    }
                    match ip {
                        IpAddr::V4(a) if ipv4.is_none() => ipv4 = Some((a, len.unwrap_or(32))),
                        IpAddr::V6(a) if ipv6.is_none() => ipv6 = Some((a, len.unwrap_or(128))),
                        _ => return Err(bad(format!("two ip= of the same family ({v})"))),
                    }
                }
                ("packet" | "tap", "mac") => {
                    let m = parse_mac(v).ok_or_else(|| bad(format!("{v:?} is not a MAC address")))?;
                    if m[0] & 1 != 0 {
                        return Err(bad(format!("{v} is a multicast MAC address")));
                    }
                    mac = Some(m);
                }
                ("udp", "shm") => {
                    shm = Some(match v {
                        "0" => false,
                        "1" => true,
                        _ => return Err(bad(format!("shm={v}: give shm=0 (every datagram by UDP) or shm=1"))),
                    });
                }
                (_, "mtu") => {
                    let n: usize = v.parse().map_err(|_| bad(format!("mtu {v:?} is not a number")))?;
                    path_mtu = Some(
                        u32::try_from(n)
                            .ok()
                            .and_then(Mtu::from_bytes)
                            .ok_or_else(|| bad(format!("mtu {n} is not an IB MTU")))?,
                    );
                }
                _ => return Err(bad(format!("{kind}: unknown option {k:?}"))),
            }
        }
        match kind {
            "udp" => {
                let unbracketed = first.trim_start_matches('[').trim_end_matches(']');
                let (addr, scope) = match unbracketed.split_once('%') {
                    Some((a, s)) => (a, Some(s.to_string())),
                    None => (unbracketed, None),
                };
                let ip = parse_ip(addr).ok_or_else(|| bad(format!("{addr:?} is not an IP address")))?;
                match (matches!(ip, IpAddr::V6(v6) if v6.is_unicast_link_local()), &scope) {
                    (true, None) => {
                        return Err(bad(format!("a link-local address is on an interface: give it, udp:[{ip}%IFACE]")))
                    }
                    (false, Some(s)) => {
                        return Err(bad(format!("%{s}: only a link-local (fe80::) address takes an interface")))
                    }
                    _ => {}
                }
                Ok(DeviceSpec::Udp { ip, scope, path_mtu, shm })
            }
            "packet" => Ok(DeviceSpec::Packet {
                iface: first.to_string(),
                ipv4: ipv4.map(|(a, _)| a),
                ipv6: ipv6.map(|(a, _)| a),
                mac,
                path_mtu,
            }),
            "tap" => {
                if ipv4.is_none() && ipv6.is_none() {
                    return Err(bad("tap needs ip=IP/LEN: uroce's own address on the tap".into()));
                }
                Ok(DeviceSpec::Tap { name: first.to_string(), ipv4, ipv6, mac, path_mtu })
            }
            other => Err(bad(format!("unknown link kind {other:?}"))),
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let mtu = |m: &Option<Mtu>| m.map(|m| format!(",mtu={}", m.bytes())).unwrap_or_default();
        let shm = |s: &Option<bool>| s.map(|s| format!(",shm={}", u8::from(s))).unwrap_or_default();
        match self {
            DeviceSpec::Udp { ip, scope: Some(scope), path_mtu, shm: s } => {
                write!(f, "udp:[{ip}%{scope}]{}{}", mtu(path_mtu), shm(s))
            }
            DeviceSpec::Udp { ip: ip @ IpAddr::V6(_), scope: None, path_mtu, shm: s } => {
                write!(f, "udp:[{ip}]{}{}", mtu(path_mtu), shm(s))
            }
            DeviceSpec::Udp { ip, scope: None, path_mtu, shm: s } => write!(f, "udp:{ip}{}{}", mtu(path_mtu), shm(s)),
            DeviceSpec::Packet { iface, ipv4, ipv6, mac, path_mtu } => {
                write!(f, "packet:{iface}")?;
                if let Some(a) = ipv4 {
                    write!(f, ",ip={a}")?;
                }
                if let Some(a) = ipv6 {
                    write!(f, ",ip={a}")?;
                }
                if let Some(m) = mac {
                    write!(f, ",mac={}", fmt_mac(m))?;
                }
                write!(f, "{}", mtu(path_mtu))
            }
            DeviceSpec::Tap { name, ipv4, ipv6, mac, path_mtu } => {
                write!(f, "tap:{name}")?;
                if let Some((a, l)) = ipv4 {
                    write!(f, ",ip={a}/{l}")?;
                }
                if let Some((a, l)) = ipv6 {
                    write!(f, ",ip={a}/{l}")?;
                }
                if let Some(m) = mac {
                    write!(f, ",mac={}", fmt_mac(m))?;
                }
                write!(f, "{}", mtu(path_mtu))
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn err(s: &str) -> String {
        s.parse::<DeviceSpec>().unwrap_err().to_string()
    }

    #[test]
    fn parses_and_prints() {
        for s in [
            "udp:127.0.0.1",
            "udp:[::1]",
            "udp:198.18.0.1,mtu=1024",
            "udp:198.18.0.1,shm=0",
            "udp:198.18.0.1,mtu=2048,shm=1",
            "udp:[fe80::1%veth-b]",
            "udp:[fd00::1],mtu=1024",
            "udp:[fe80::1%eth0],mtu=1024",
            "packet:veth0",
            "packet:eth0,ip=198.18.0.3,mac=02:00:00:00:00:03",
            "packet:eth0,ip=198.18.0.3,ip=fd00::3",
            "tap:ut0,ip=198.18.0.9/24",
            "tap:ut0,ip=198.18.0.9/24,ip=fd00::9/64,mac=02:00:00:00:00:09,mtu=2048",
        ] {
            let d: DeviceSpec = s.parse().unwrap();
            assert_eq!(d.to_string(), s);
        }
        // An IPv6 address in brackets, as it is written (`udp:::1` parses too).
        assert_eq!("udp:::1".parse::<DeviceSpec>().unwrap().to_string(), "udp:[::1]");
        assert_eq!("udp:fe80::1%eth0".parse::<DeviceSpec>().unwrap().to_string(), "udp:[fe80::1%eth0]");
    }

    #[test]
    fn a_link_local_udp_address_names_its_interface() {
        assert!(err("udp:fe80::1").contains("give it, udp:[fe80::1%IFACE]"), "{}", err("udp:fe80::1"));
        assert!(err("udp:[fd00::1%eth0]").contains("only a link-local (fe80::) address takes an interface"));
    }

    #[test]
    fn clear_errors() {
        assert!(err("eth0").contains("no link kind"), "{}", err("eth0"));
        assert!(err("udp:").contains("needs an IP address"));
        assert!(err("udp:localhost").contains("\"localhost\" is not an IP address"));
        assert!(err("bogus:x").contains("unknown link kind \"bogus\""));
        assert!(err("tap:ut0").contains("tap needs ip=IP/LEN"));
        assert!(err("tap:ut0,ip=198.18.0.1").contains("prefix length"));
        assert!(err("packet:eth0,mac=01:00:5e:00:00:01").contains("multicast"));
        assert!(err("packet:eth0,mac=02:00").contains("not a MAC"));
        assert!(err("udp:127.0.0.1,mtu=1500").contains("not an IB MTU"));
        assert!(err("udp:127.0.0.1,ip=1.2.3.4").contains("unknown option \"ip\""));
        assert!(err("udp:127.0.0.1,shm=off").contains("give shm=0"), "{}", err("udp:127.0.0.1,shm=off"));
        assert!(err("packet:eth0,shm=0").contains("unknown option \"shm\""));
        assert!(err("packet:eth0,ip=1.2.3.4,ip=1.2.3.5").contains("two ip="));
    }
}
