//! Bit fields of CM messages as IBTA Vol 1 chapter 12 draws them: a field is
//! `width` bits starting `bit` bits (counted from the most significant bit)
//! into byte `byte` of the message, big-endian, at most 32 bits wide.

/// Where a field lives in a message (offsets from the start of the MAD data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    pub byte: usize,
    pub bit: u32,
    pub width: u32,
}

/// A field of `width` bits at the top of byte `byte`.
pub(crate) const fn at(byte: usize, width: u32) -> Field {
    Field { byte, bit: 0, width }
}

/// A field of `width` bits that starts `bit` bits into byte `byte`.
pub(crate) const fn bits(byte: usize, bit: u32, width: u32) -> Field {
    Field { byte, bit, width }
}

impl Field {
    /// The bytes the field touches.
    const fn span(self) -> usize {
        (self.bit + self.width).div_ceil(8) as usize
    }
    const fn shift(self) -> u32 {
        self.span() as u32 * 8 - self.bit - self.width
    }
    const fn mask(self) -> u64 {
        (1u64 << self.width) - 1
    }

    fn window(self, buf: &[u8]) -> u64 {
        buf[self.byte..self.byte + self.span()].iter().fold(0u64, |v, &b| (v << 8) | u64::from(b))
    }

    /// The field's value. The caller has checked the buffer is long enough.
    pub fn get(self, buf: &[u8]) -> u32 {
        ((self.window(buf) >> self.shift()) & self.mask()) as u32
    }

    /// Writes `value` (truncated to the field's width), leaving the other bits.
    pub fn set(self, buf: &mut [u8], value: u32) {
        let shift = self.shift();
        let v = (self.window(buf) & !(self.mask() << shift)) | ((u64::from(value) & self.mask()) << shift);
        let span = self.span();
        for (i, b) in buf[self.byte..self.byte + span].iter_mut().enumerate() {
            *b = (v >> (8 * (span - 1 - i))) as u8;
        }
    }

    /// A boolean flag (a one-bit field).
    pub fn flag(self, buf: &[u8]) -> bool {
        self.get(buf) != 0
    }
}

/// A 64-bit big-endian field at `byte`.
pub(crate) fn get_u64(buf: &[u8], byte: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&buf[byte..byte + 8]);
    u64::from_be_bytes(a)
}

pub(crate) fn set_u64(buf: &mut [u8], byte: usize, v: u64) {
    buf[byte..byte + 8].copy_from_slice(&v.to_be_bytes());
}

/// `N` bytes at `byte`.
pub(crate) fn get_bytes<const N: usize>(buf: &[u8], byte: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&buf[byte..byte + N]);
    a
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn fields_as_the_tables_draw_them() {
        // REQ byte 43: remote CM response timeout (5) | transport type (2) | EE flow control (1).
        let mut b = [0u8; 8];
        b[3] = 0xa0;
        assert_eq!(at(3, 5).get(&b), 0x14);
        assert_eq!(bits(3, 5, 2).get(&b), 0);
        bits(3, 7, 1).set(&mut b, 1);
        assert_eq!(b[3], 0xa1);
        // A 24-bit QPN at the top of a 32-bit word, the low byte untouched.
        let mut q = [0, 0, 0, 0x01];
        at(0, 24).set(&mut q, 0x2d);
        assert_eq!(q, [0, 0, 0x2d, 0x01]);
        // The 20-bit flow label, then 6 reserved and 6 rate bits.
        let fl = [0x8a, 0x2b, 0xc0, 0x0a];
        assert_eq!(at(0, 20).get(&fl), 0x8a2bc);
        assert_eq!(bits(3, 2, 6).get(&fl), 0x0a);
        let mut w = [0xffu8; 4];
        at(0, 20).set(&mut w, 0);
        assert_eq!(w, [0, 0, 0x0f, 0xff]);
    }

    #[test]
    fn set_truncates_to_the_width() {
        let mut b = [0u8; 1];
        at(0, 4).set(&mut b, 0xff);
        assert_eq!(b, [0xf0]);
    }
}
