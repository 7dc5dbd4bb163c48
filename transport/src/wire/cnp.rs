//! The RoCEv2 Congestion Notification Packet (Annex A17.9.2): a BTH with opcode
//! 0x81 and BECN set, then 16 reserved bytes, then the ICRC.

use super::{Error, Result};
use core::fmt;

/// Length of the reserved block after the BTH of a CNP.
pub const LEN: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CnpRepr {
    /// The 16 reserved bytes (zero when sent), kept so that parse -> emit is exact.
    pub reserved: [u8; LEN],
}

impl CnpRepr {
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let mut reserved = [0u8; LEN];
        reserved.copy_from_slice(bytes.get(..LEN).ok_or(Error::Truncated)?);
        Ok(CnpRepr { reserved })
    }
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    pub fn emit(&self, bytes: &mut [u8]) {
        bytes[..LEN].copy_from_slice(&self.reserved);
    }
}

impl fmt::Display for CnpRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "CNP")
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn round_trip() {
        let bytes = [7u8; 16];
        let r = CnpRepr::parse(&bytes).unwrap();
        let mut out = [0u8; 16];
        r.emit(&mut out);
        assert_eq!(out, bytes);
        assert_eq!(CnpRepr::parse(&bytes[..15]), Err(Error::Truncated));
    }
}
