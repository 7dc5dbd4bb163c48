//! The tap link (in progress).
use super::spec::{DeviceSpec, LinkError};
pub struct TapLink;
impl TapLink {
    pub fn open(spec: &DeviceSpec) -> Result<Box<dyn super::Link>, LinkError> {
        if let DeviceSpec::Tap { name: iface, .. } = spec {
            if crate::sys::packet::if_index(iface).is_none() {
                return Err(LinkError::NoSuchInterface(iface.clone()));
            }
        }
        Err(LinkError::Spec { spec: spec.to_string(), why: "the tap link is not written yet".into() })
    }
}
