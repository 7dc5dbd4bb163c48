//! The Flush Extended Transport Header (IBTA 1.5, FLUSH): selectivity level and
//! placement type. Bits 31-6 are reserved, 5-4 SEL, 3-0 PLT.

use super::{be, Result};
use core::fmt;

fixed_header!(
    /// A read/write view of a FETH.
    Feth,
    4
);

impl<T: AsRef<[u8]>> Feth<T> {
    pub fn raw(&self) -> u32 {
        be::u32(self.buffer.as_ref())
    }
    /// Selectivity level: 0 flush the memory region range, 1 the whole region.
    pub fn selectivity(&self) -> u8 {
        ((self.raw() >> 4) & 0x3) as u8
    }
    /// Placement type: bit 0 global visibility, bit 1 persistence.
    pub fn placement(&self) -> u8 {
        (self.raw() & 0xf) as u8
    }
    pub fn reserved(&self) -> u32 {
        self.raw() >> 6
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Feth<T> {
    pub fn set_raw(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), v)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FethRepr {
    pub selectivity: u8,
    pub placement: u8,
    /// The 26 reserved bits, kept so that parse -> emit is exact (0 when sent).
    pub reserved: u32,
}

impl FethRepr {
    pub fn parse<T: AsRef<[u8]>>(h: &Feth<T>) -> Result<Self> {
        h.check_len()?;
        Ok(FethRepr { selectivity: h.selectivity(), placement: h.placement(), reserved: h.reserved() })
    }
    pub const fn buffer_len(&self) -> usize {
        Feth::<&[u8]>::LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Feth<T>) {
        let raw = (self.reserved << 6) | (u32::from(self.selectivity & 0x3) << 4) | u32::from(self.placement & 0xf);
        h.set_raw(raw);
    }
}

impl fmt::Display for FethRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "FETH sel={} plt={}", self.selectivity, self.placement)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn deconstruct_construct() {
        let repr = FethRepr { selectivity: 1, placement: 2, reserved: 0 };
        let mut buf = [0xa5u8; 4];
        repr.emit(&mut Feth::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0, 0, 0, 0x12]);
        assert_eq!(FethRepr::parse(&Feth::new_checked(&buf[..]).unwrap()).unwrap(), repr);
        let all = [0xffu8; 4];
        let r = FethRepr::parse(&Feth::new_checked(&all[..]).unwrap()).unwrap();
        let mut out = [0u8; 4];
        r.emit(&mut Feth::new_unchecked(&mut out[..]));
        assert_eq!(out, all);
    }
}
