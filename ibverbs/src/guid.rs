//! A device's node GUID before it is opened (`ibv_devices` lists GUIDs
//! without opening anything): derived from its spec as uroce derives it from
//! the open link, from the MAC (the interface's own for a packet link without
//! `mac=`) or, for the udp link, from its IPv4 address.

use std::net::IpAddr;
use uroce_stack::link::DeviceSpec;

/// The GUID (host order) of the device `spec` names; 0 for a spec that
/// does not parse (opening it will say why).
pub fn of_spec(spec: &str) -> u64 {
    let Ok(parsed) = spec.parse::<DeviceSpec>() else { return 0 };
    let (mac, ipv4) = match parsed {
        DeviceSpec::Udp { ip: IpAddr::V4(v4), .. } => (None, Some(v4)),
        DeviceSpec::Udp { .. } => (None, None),
        DeviceSpec::Packet { iface, mac, ipv4, .. } => (mac.or_else(|| interface_mac(&iface)), ipv4),
        DeviceSpec::Tap { mac, ipv4, .. } => (mac, ipv4.map(|(a, _)| a)),
    };
    uroce_verbs::node_guid_of(mac, ipv4)
}

/// The MAC of interface `iface`, from sysfs.
fn interface_mac(iface: &str) -> Option<[u8; 6]> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{iface}/address")).ok()?;
    let mut mac = [0u8; 6];
    let mut parts = text.trim().split(':');
    for b in mac.iter_mut() {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    Some(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_udp_device_has_the_guid_its_open_link_will_have() {
        // 127.0.0.9 -> MAC 02:00:7f:00:00:09 -> EUI-64 00:00:7f:ff:fe:00:00:09.
        assert_eq!(of_spec("udp:127.0.0.9"), 0x0000_7fff_fe00_0009);
        assert_eq!(of_spec("packet:eth0,mac=02:11:22:33:44:55"), 0x0011_22ff_fe33_4455);
        assert_eq!(of_spec("not a spec"), 0);
    }
}
