//! The ACK Extended Transport Header: a syndrome and the MSN.
//!
//! Syndrome bits 6-5 select ACK (credits), RNR NAK (timer code) or NAK (code);
//! bit 7 is reserved. Every bit pattern parses to a value.

use super::{be, Result};
use core::fmt;

mod field {
    use core::ops::Range;
    pub const SYNDROME: usize = 0;
    pub const MSN: Range<usize> = 1..4;
}

fixed_header!(
    /// A read/write view of an AETH.
    Aeth,
    4
);

enum_with_unknown! {
    /// The NAK codes of an AETH whose syndrome type is NAK.
    pub enum NakCode(u8) {
        PsnSequenceError = 0,
        InvalidRequest = 1,
        RemoteAccessError = 2,
        RemoteOperationalError = 3,
        InvalidRdRequest = 4,
    }
}

impl fmt::Display for NakCode {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            NakCode::PsnSequenceError => write!(f, "PSN sequence error"),
            NakCode::InvalidRequest => write!(f, "invalid request"),
            NakCode::RemoteAccessError => write!(f, "remote access error"),
            NakCode::RemoteOperationalError => write!(f, "remote operational error"),
            NakCode::InvalidRdRequest => write!(f, "invalid RD request"),
            NakCode::Unknown(c) => write!(f, "reserved NAK code {c}"),
        }
    }
}

/// The meaning of an AETH syndrome byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AethSyndrome {
    /// ACK with a credit count (0x1F: credits not valid).
    Ack { credits: u8 },
    /// RNR NAK with the 5-bit timer code (an index into the RNR timer table).
    RnrNak { timer: u8 },
    /// NAK with its code.
    Nak(NakCode),
    /// Syndrome type 0b10, reserved: the whole byte.
    Reserved(u8),
}

impl AethSyndrome {
    /// Credit count meaning "no credit information" (what rxe sends).
    pub const CREDITS_INVALID: u8 = 0x1f;

    pub fn from_byte(b: u8) -> AethSyndrome {
        let value = b & 0x1f;
        match (b >> 5) & 0x3 {
            0 if b & 0x80 == 0 => AethSyndrome::Ack { credits: value },
            1 if b & 0x80 == 0 => AethSyndrome::RnrNak { timer: value },
            3 if b & 0x80 == 0 => AethSyndrome::Nak(NakCode::from(value)),
            _ => AethSyndrome::Reserved(b),
        }
    }

    pub fn to_byte(self) -> u8 {
        match self {
            AethSyndrome::Ack { credits } => credits & 0x1f,
            AethSyndrome::RnrNak { timer } => 0x20 | (timer & 0x1f),
            AethSyndrome::Nak(code) => 0x60 | (u8::from(code) & 0x1f),
            AethSyndrome::Reserved(b) => b,
        }
    }
}

impl fmt::Display for AethSyndrome {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            AethSyndrome::Ack { credits } => write!(f, "ACK credits={credits}"),
            AethSyndrome::RnrNak { timer } => write!(f, "RNR NAK timer={timer}"),
            AethSyndrome::Nak(code) => write!(f, "NAK {code}"),
            AethSyndrome::Reserved(b) => write!(f, "reserved syndrome 0x{b:02x}"),
        }
    }
}

impl<T: AsRef<[u8]>> Aeth<T> {
    pub fn syndrome_byte(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }
    pub fn syndrome(&self) -> AethSyndrome {
        AethSyndrome::from_byte(self.syndrome_byte())
    }
    pub fn msn(&self) -> u32 {
        be::u24(&self.buffer.as_ref()[field::MSN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Aeth<T> {
    pub fn set_syndrome(&mut self, s: AethSyndrome) {
        self.buffer.as_mut()[field::SYNDROME] = s.to_byte();
    }
    pub fn set_msn(&mut self, msn: u32) {
        be::set_u24(&mut self.buffer.as_mut()[field::MSN], msn)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AethRepr {
    pub syndrome: AethSyndrome,
    /// Message sequence number, 24 bits.
    pub msn: u32,
}

impl AethRepr {
    pub fn parse<T: AsRef<[u8]>>(h: &Aeth<T>) -> Result<Self> {
        h.check_len()?;
        Ok(AethRepr { syndrome: h.syndrome(), msn: h.msn() })
    }
    pub const fn buffer_len(&self) -> usize {
        Aeth::<&[u8]>::LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Aeth<T>) {
        h.set_syndrome(self.syndrome);
        h.set_msn(self.msn);
    }
}

impl fmt::Display for AethRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "AETH {} MSN={}", self.syndrome, self.msn)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn every_syndrome_byte_round_trips() {
        for b in 0..=255u8 {
            assert_eq!(AethSyndrome::from_byte(b).to_byte(), b, "byte 0x{b:02x}");
        }
    }

    #[test]
    fn known_syndromes() {
        assert_eq!(AethSyndrome::from_byte(0x1f), AethSyndrome::Ack { credits: 31 });
        assert_eq!(AethSyndrome::from_byte(0x2e), AethSyndrome::RnrNak { timer: 14 });
        assert_eq!(AethSyndrome::from_byte(0x60), AethSyndrome::Nak(NakCode::PsnSequenceError));
        assert_eq!(AethSyndrome::from_byte(0x62), AethSyndrome::Nak(NakCode::RemoteAccessError));
        assert_eq!(AethSyndrome::from_byte(0x6f), AethSyndrome::Nak(NakCode::Unknown(15)));
        assert_eq!(AethSyndrome::from_byte(0x41), AethSyndrome::Reserved(0x41));
    }

    #[test]
    fn deconstruct_construct() {
        let bytes = [0x1f, 0x00, 0x00, 0x2a];
        let repr = AethRepr::parse(&Aeth::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(repr, AethRepr { syndrome: AethSyndrome::Ack { credits: 31 }, msn: 42 });
        let mut buf = [0xa5u8; 4];
        repr.emit(&mut Aeth::new_unchecked(&mut buf[..]));
        assert_eq!(buf, bytes);
        assert!(Aeth::new_checked(&bytes[..3]).is_err());
    }
}
