//! The packet link (in progress).
use super::spec::{DeviceSpec, LinkError};
pub struct PacketLink;
impl PacketLink {
    pub fn open(spec: &DeviceSpec) -> Result<Box<dyn super::Link>, LinkError> {
        if let DeviceSpec::Packet { iface, .. } = spec {
            if crate::sys::packet::if_index(iface).is_none() {
                return Err(LinkError::NoSuchInterface(iface.clone()));
            }
        }
        Err(LinkError::Spec { spec: spec.to_string(), why: "the packet link is not written yet".into() })
    }
}
