//! The Datagram Extended Transport Header of UD: Q_Key and source QP.

use super::{be, Result};
use core::fmt;

mod field {
    use core::ops::Range;
    pub const QKEY: Range<usize> = 0..4;
    pub const RESERVED: usize = 4;
    pub const SRC_QP: Range<usize> = 5..8;
}

fixed_header!(
    /// A read/write view of a DETH.
    Deth,
    8
);

impl<T: AsRef<[u8]>> Deth<T> {
    pub fn qkey(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::QKEY])
    }
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }
    pub fn src_qp(&self) -> u32 {
        be::u24(&self.buffer.as_ref()[field::SRC_QP])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Deth<T> {
    pub fn set_qkey(&mut self, v: u32) {
        be::set_u32(&mut self.buffer.as_mut()[field::QKEY], v)
    }
    pub fn set_reserved(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESERVED] = v;
    }
    pub fn set_src_qp(&mut self, v: u32) {
        be::set_u24(&mut self.buffer.as_mut()[field::SRC_QP], v)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DethRepr {
    pub qkey: u32,
    pub src_qp: u32,
    /// The reserved byte, kept so that parse -> emit is exact (0 when sent).
    pub reserved: u8,
}

impl DethRepr {
    pub fn parse<T: AsRef<[u8]>>(h: &Deth<T>) -> Result<Self> {
        h.check_len()?;
        Ok(DethRepr { qkey: h.qkey(), src_qp: h.src_qp(), reserved: h.reserved() })
    }
    pub const fn buffer_len(&self) -> usize {
        Deth::<&[u8]>::LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Deth<T>) {
        h.set_qkey(self.qkey);
        h.set_reserved(self.reserved);
        h.set_src_qp(self.src_qp);
    }
}

impl fmt::Display for DethRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "DETH qkey=0x{:08x} srcQP=0x{:06x}", self.qkey, self.src_qp)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn deconstruct_construct() {
        let bytes = [0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x12];
        let repr = DethRepr::parse(&Deth::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(repr, DethRepr { qkey: 0x1111_1111, src_qp: 0x12, reserved: 0 });
        let mut buf = [0xa5u8; 8];
        repr.emit(&mut Deth::new_unchecked(&mut buf[..]));
        assert_eq!(buf, bytes);
        assert!(Deth::new_checked(&bytes[..7]).is_err());
    }
}
