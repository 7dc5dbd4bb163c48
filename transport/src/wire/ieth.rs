//! The Invalidate Extended Transport Header of SEND_WITH_INV: the R_Key to invalidate.

use super::{be, Result};
use core::fmt;

fixed_header!(
    /// A read/write view of an IETH.
    Ieth,
    4
);

impl<T: AsRef<[u8]>> Ieth<T> {
    pub fn rkey(&self) -> u32 {
        be::u32(self.buffer.as_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ieth<T> {
    pub fn set_rkey(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), v)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IethRepr {
    pub rkey: u32,
}

impl IethRepr {
    pub fn parse<T: AsRef<[u8]>>(h: &Ieth<T>) -> Result<Self> {
        h.check_len()?;
        Ok(IethRepr { rkey: h.rkey() })
    }
    pub const fn buffer_len(&self) -> usize {
        Ieth::<&[u8]>::LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Ieth<T>) {
        h.set_rkey(self.rkey);
    }
}

impl fmt::Display for IethRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "IETH rkey=0x{:x}", self.rkey)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn deconstruct_construct() {
        let mut buf = [0xa5u8; 4];
        IethRepr { rkey: 0x0102_0304 }.emit(&mut Ieth::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [1, 2, 3, 4]);
        assert_eq!(IethRepr::parse(&Ieth::new_checked(&buf[..]).unwrap()).unwrap().rkey, 0x0102_0304);
        assert!(Ieth::new_checked(&buf[..3]).is_err());
    }
}
