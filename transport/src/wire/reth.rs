//! The RDMA Extended Transport Header: virtual address, R_Key, DMA length.

use super::{be, Result};
use core::fmt;

mod field {
    use core::ops::Range;
    pub const VA: Range<usize> = 0..8;
    pub const RKEY: Range<usize> = 8..12;
    pub const DMA_LEN: Range<usize> = 12..16;
}

fixed_header!(
    /// A read/write view of a RETH.
    Reth,
    16
);

impl<T: AsRef<[u8]>> Reth<T> {
    pub fn va(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::VA])
    }
    pub fn rkey(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::RKEY])
    }
    pub fn dma_len(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::DMA_LEN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Reth<T> {
    pub fn set_va(&mut self, v: u64) {
        be::set_u64(&mut self.buffer.as_mut()[field::VA], v)
    }
    pub fn set_rkey(&mut self, v: u32) {
        be::set_u32(&mut self.buffer.as_mut()[field::RKEY], v)
    }
    pub fn set_dma_len(&mut self, v: u32) {
        be::set_u32(&mut self.buffer.as_mut()[field::DMA_LEN], v)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RethRepr {
    pub va: u64,
    pub rkey: u32,
    pub dma_len: u32,
}

impl RethRepr {
    pub fn parse<T: AsRef<[u8]>>(h: &Reth<T>) -> Result<Self> {
        h.check_len()?;
        Ok(RethRepr { va: h.va(), rkey: h.rkey(), dma_len: h.dma_len() })
    }
    pub const fn buffer_len(&self) -> usize {
        Reth::<&[u8]>::LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Reth<T>) {
        h.set_va(self.va);
        h.set_rkey(self.rkey);
        h.set_dma_len(self.dma_len);
    }
}

impl fmt::Display for RethRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "RETH va=0x{:x} rkey=0x{:x} len={}", self.va, self.rkey, self.dma_len)
    }
}

#[cfg(test)]
mod test {
    use super::*;
    static BYTES: [u8; 16] =
        [0x00, 0x00, 0x55, 0x55, 0x12, 0x34, 0x50, 0x00, 0x00, 0x00, 0x12, 0x34, 0x00, 0x00, 0x10, 0x00];
    const REPR: RethRepr = RethRepr { va: 0x5555_1234_5000, rkey: 0x1234, dma_len: 4096 };

    #[test]
    fn deconstruct_construct() {
        assert_eq!(RethRepr::parse(&Reth::new_checked(&BYTES[..]).unwrap()).unwrap(), REPR);
        let mut buf = [0xa5u8; 16];
        REPR.emit(&mut Reth::new_unchecked(&mut buf[..]));
        assert_eq!(buf, BYTES);
        assert!(Reth::new_checked(&BYTES[..15]).is_err());
    }
}
