//! Which devices the drop-in library offers: those `UROCE_DEVICES` names, or
//! with nothing configured one device, `uroce0`, on the udp link at the first
//! free loopback address (as the uroce tools take one), so that two programs
//! started on one host find each other: the server takes 127.0.0.1, the
//! client 127.0.0.2 and reaches the server at 127.0.0.1.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};

/// The environment variable that names the devices: entries separated by
/// spaces or `;`, each `NAME=SPEC` or a bare `SPEC` (named `uroce0`,
/// `uroce1`, ... in order), e.g. `uroce0=udp:127.0.0.1` or
/// `packet:eth0,ip=10.0.0.1`.
pub const DEVICES_ENV: &str = "UROCE_DEVICES";

/// RoCEv2's UDP port: an address whose port is taken is another process's device.
const ROCE_PORT: u16 = 4791;

/// One device as `ibv_get_device_list` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceEntry {
    /// rdma-core-style: letters and digits, e.g. `uroce0`.
    pub name: String,
    /// The uroce link spec it opens, e.g. `udp:127.0.0.1`.
    pub spec: String,
}

/// The devices `value` (of [`DEVICES_ENV`]) names, or the default device
/// when it is unset or blank.
pub fn configured(value: Option<&str>) -> Result<Vec<DeviceEntry>, String> {
    let entries: Vec<&str> = value.unwrap_or("").split([' ', ';', '\t', '\n']).filter(|e| !e.is_empty()).collect();
    if entries.is_empty() {
        return Ok(vec![DeviceEntry { name: "uroce0".into(), spec: first_free_loopback() }]);
    }
    let mut out: Vec<DeviceEntry> = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let (name, spec) = match entry.split_once('=') {
            // A spec's own options hold '=' too ("packet:eth0,ip=..."): a
            // name never holds ':' or ','.
            Some((name, spec)) if !name.contains([':', ',']) => (name.to_string(), spec.to_string()),
            _ => (format!("uroce{i}"), entry.to_string()),
        };
        check_name(&name)?;
        if out.iter().any(|d| d.name == name) {
            return Err(format!("{DEVICES_ENV}: the name {name} is given twice"));
        }
        if spec.is_empty() {
            return Err(format!(
                "{DEVICES_ENV}: {name} names no link (give {name}=udp:IP, packet:IFACE or tap:NAME,ip=IP/LEN)"
            ));
        }
        out.push(DeviceEntry { name, spec });
    }
    Ok(out)
}

/// rdma-core's device names are at most 63 bytes (`IBV_SYSFS_NAME_MAX`);
/// uroce keeps them to letters, digits and `_` so that programs that build
/// paths or command lines from them stay safe.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty() && name.len() < 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{DEVICES_ENV}: {name:?} is not a device name: use letters, digits and _ (at most 63), e.g. uroce0"
        ))
    }
}

/// The udp link on the first loopback address from 127.0.0.1 up whose RoCE
/// port no other process holds.
fn first_free_loopback() -> String {
    let free = (1..=254u8).map(|h| Ipv4Addr::new(127, 0, 0, h)).find(|ip| {
        // Bound and released at once: a probe, the device binds it at open.
        UdpSocket::bind(SocketAddrV4::new(*ip, ROCE_PORT)).is_ok()
    });
    format!("udp:{}", free.unwrap_or(Ipv4Addr::new(127, 0, 0, 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_specs_are_read_as_written() {
        let d = configured(Some("uroce0=udp:127.0.0.5; lab=packet:eth0,ip=10.0.0.1/24 tap:t0,ip=10.1.0.1/24")).unwrap();
        let pairs: Vec<(&str, &str)> = d.iter().map(|e| (e.name.as_str(), e.spec.as_str())).collect();
        assert_eq!(
            pairs,
            [("uroce0", "udp:127.0.0.5"), ("lab", "packet:eth0,ip=10.0.0.1/24"), ("uroce2", "tap:t0,ip=10.1.0.1/24")]
        );
    }

    #[test]
    fn nothing_configured_is_one_loopback_device() {
        for value in [None, Some(""), Some(" ; ")] {
            let d = configured(value).unwrap();
            assert_eq!(d.len(), 1);
            assert_eq!(d[0].name, "uroce0");
            assert!(d[0].spec.starts_with("udp:127.0.0."), "{}", d[0].spec);
        }
    }

    #[test]
    fn bad_names_say_what_to_do() {
        let e = configured(Some("my/dev=udp:127.0.0.1")).unwrap_err();
        assert!(e.contains("letters, digits and _"), "{e}");
        let e = configured(Some("a=udp:127.0.0.1 a=udp:127.0.0.2")).unwrap_err();
        assert!(e.contains("given twice"), "{e}");
        let e = configured(Some("a=")).unwrap_err();
        assert!(e.contains("names no link"), "{e}");
    }
}
