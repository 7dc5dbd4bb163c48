//! RoCEv2 transport headers as typed views over bytes.
//!
//! The shape is smoltcp's: each header has a `mod field` of byte ranges, a
//! `Header<T: AsRef<[u8]>>` view whose `new_checked` validates the length (after
//! which no accessor panics), and a small `Repr` with `parse`, `emit` and
//! `buffer_len`. Unknown opcodes, syndromes and reserved values are values
//! (`Unknown(u8)`), never panics.
//!
//! [`RocePacket`] ties them together: the BTH, the extension headers its opcode
//! calls for, the payload, the pad and the ICRC of one RoCEv2 UDP payload.
//! [`ip`] holds the layout of the IPv4, IPv6 and UDP headers around it.

use core::fmt;

#[macro_use]
mod macros;
pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod cnp;
pub mod deth;
pub mod feth;
pub mod ieth;
pub mod immdt;
pub mod ip;
pub mod opcode;
pub mod packet;
pub mod reth;

pub use aeth::{Aeth, AethRepr, AethSyndrome, NakCode};
pub use atomic_ack_eth::{AtomicAckEth, AtomicAckEthRepr};
pub use atomic_eth::{AtomicEth, AtomicEthRepr};
pub use bth::{Bth, BthRepr};
pub use cnp::CnpRepr;
pub use deth::{Deth, DethRepr};
pub use feth::{Feth, FethRepr};
pub use ieth::{Ieth, IethRepr};
pub use immdt::{ImmDt, ImmDtRepr};
pub use opcode::{ExtHeaders, Opcode, Position, Transport};
pub use packet::{RocePacket, RoceRepr};
pub use reth::{Reth, RethRepr};

/// The UDP destination port of RoCEv2.
pub const ROCEV2_UDP_PORT: u16 = 4791;
/// Length of the invariant CRC trailer.
pub const ICRC_LEN: usize = 4;

/// Why a buffer could not be read as a header or packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the header (or the headers the opcode calls for).
    Truncated,
    /// The lengths are inconsistent, e.g. a pad count larger than the payload.
    Malformed,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Error::Truncated => write!(f, "truncated"),
            Error::Malformed => write!(f, "malformed"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = core::result::Result<T, Error>;

/// Big-endian field accessors over a byte slice; callers have checked the length.
pub(crate) mod be {
    pub fn u24(b: &[u8]) -> u32 {
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }
    pub fn u32(b: &[u8]) -> u32 {
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    pub fn u64(b: &[u8]) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        u64::from_be_bytes(a)
    }
    pub fn set_u24(b: &mut [u8], v: u32) {
        b[..3].copy_from_slice(&v.to_be_bytes()[1..]);
    }
    pub fn set_u32(b: &mut [u8], v: u32) {
        b[..4].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_u64(b: &mut [u8], v: u64) {
        b[..8].copy_from_slice(&v.to_be_bytes());
    }
}
