//! The Atomic Acknowledge Extended Transport Header: the original remote data.

use super::{be, Result};
use core::fmt;

fixed_header!(
    /// A read/write view of an AtomicAckETH.
    AtomicAckEth,
    8
);

impl<T: AsRef<[u8]>> AtomicAckEth<T> {
    pub fn orig_data(&self) -> u64 {
        be::u64(self.buffer.as_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicAckEth<T> {
    pub fn set_orig_data(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), v)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicAckEthRepr {
    pub orig_data: u64,
}

impl AtomicAckEthRepr {
    pub fn parse<T: AsRef<[u8]>>(h: &AtomicAckEth<T>) -> Result<Self> {
        h.check_len()?;
        Ok(AtomicAckEthRepr { orig_data: h.orig_data() })
    }
    pub const fn buffer_len(&self) -> usize {
        AtomicAckEth::<&[u8]>::LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut AtomicAckEth<T>) {
        h.set_orig_data(self.orig_data);
    }
}

impl fmt::Display for AtomicAckEthRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "AtomicAckETH orig=0x{:x}", self.orig_data)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn deconstruct_construct() {
        let mut buf = [0xa5u8; 8];
        AtomicAckEthRepr { orig_data: 0x0102_0304_0506_0708 }.emit(&mut AtomicAckEth::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [1, 2, 3, 4, 5, 6, 7, 8]);
        let h = AtomicAckEth::new_checked(&buf[..]).unwrap();
        assert_eq!(AtomicAckEthRepr::parse(&h).unwrap().orig_data, 0x0102_0304_0506_0708);
        assert!(AtomicAckEth::new_checked(&buf[..7]).is_err());
    }
}
