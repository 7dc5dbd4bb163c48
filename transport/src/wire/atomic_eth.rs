//! The Atomic Extended Transport Header of CMP_SWAP and FETCH_ADD requests.

use super::{be, Result};
use core::fmt;

mod field {
    use core::ops::Range;
    pub const VA: Range<usize> = 0..8;
    pub const RKEY: Range<usize> = 8..12;
    /// Swap data (CMP_SWAP) or add data (FETCH_ADD).
    pub const SWAP_ADD: Range<usize> = 12..20;
    pub const COMPARE: Range<usize> = 20..28;
}

fixed_header!(
    /// A read/write view of an AtomicETH.
    AtomicEth,
    28
);

impl<T: AsRef<[u8]>> AtomicEth<T> {
    pub fn va(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::VA])
    }
    pub fn rkey(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::RKEY])
    }
    pub fn swap_add(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::SWAP_ADD])
    }
    pub fn compare(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::COMPARE])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicEth<T> {
    pub fn set_va(&mut self, v: u64) {
        be::set_u64(&mut self.buffer.as_mut()[field::VA], v)
    }
    pub fn set_rkey(&mut self, v: u32) {
        be::set_u32(&mut self.buffer.as_mut()[field::RKEY], v)
    }
    pub fn set_swap_add(&mut self, v: u64) {
        be::set_u64(&mut self.buffer.as_mut()[field::SWAP_ADD], v)
    }
    pub fn set_compare(&mut self, v: u64) {
        be::set_u64(&mut self.buffer.as_mut()[field::COMPARE], v)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicEthRepr {
    pub va: u64,
    pub rkey: u32,
    pub swap_add: u64,
    pub compare: u64,
}

impl AtomicEthRepr {
    pub fn parse<T: AsRef<[u8]>>(h: &AtomicEth<T>) -> Result<Self> {
        h.check_len()?;
        Ok(AtomicEthRepr { va: h.va(), rkey: h.rkey(), swap_add: h.swap_add(), compare: h.compare() })
    }
    pub const fn buffer_len(&self) -> usize {
        AtomicEth::<&[u8]>::LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut AtomicEth<T>) {
        h.set_va(self.va);
        h.set_rkey(self.rkey);
        h.set_swap_add(self.swap_add);
        h.set_compare(self.compare);
    }
}

impl fmt::Display for AtomicEthRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "AtomicETH va=0x{:x} rkey=0x{:x} swap/add=0x{:x} compare=0x{:x}",
            self.va, self.rkey, self.swap_add, self.compare
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn deconstruct_construct() {
        let repr = AtomicEthRepr { va: 0x1122_3344_5566_7788, rkey: 0xabcd, swap_add: 1, compare: u64::MAX };
        let mut buf = [0xa5u8; 28];
        repr.emit(&mut AtomicEth::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..8], &0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(&buf[8..12], &[0, 0, 0xab, 0xcd]);
        assert_eq!(AtomicEthRepr::parse(&AtomicEth::new_checked(&buf[..]).unwrap()).unwrap(), repr);
        assert!(AtomicEth::new_checked(&buf[..27]).is_err());
    }
}
