//! The Immediate Data Extended Transport Header: 32 bits for the receiver's CQE.

use super::{be, Result};
use core::fmt;

fixed_header!(
    /// A read/write view of an ImmDt.
    ImmDt,
    4
);

impl<T: AsRef<[u8]>> ImmDt<T> {
    /// The immediate in network byte order, as `ibv_wc.imm_data` holds it.
    pub fn imm(&self) -> u32 {
        be::u32(self.buffer.as_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ImmDt<T> {
    pub fn set_imm(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), v)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImmDtRepr {
    pub imm: u32,
}

impl ImmDtRepr {
    pub fn parse<T: AsRef<[u8]>>(h: &ImmDt<T>) -> Result<Self> {
        h.check_len()?;
        Ok(ImmDtRepr { imm: h.imm() })
    }
    pub const fn buffer_len(&self) -> usize {
        ImmDt::<&[u8]>::LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut ImmDt<T>) {
        h.set_imm(self.imm);
    }
}

impl fmt::Display for ImmDtRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "ImmDt imm=0x{:08x}", self.imm)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn deconstruct_construct() {
        let mut buf = [0xa5u8; 4];
        ImmDtRepr { imm: 0xdead_beef }.emit(&mut ImmDt::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(ImmDtRepr::parse(&ImmDt::new_checked(&buf[..]).unwrap()).unwrap().imm, 0xdead_beef);
        assert!(ImmDt::new_checked(&buf[..3]).is_err());
    }
}
