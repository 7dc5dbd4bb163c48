//! The 24-bit packet sequence number.

use core::{cmp::Ordering, fmt, ops};

/// A 24-bit PSN. Arithmetic wraps modulo 2^24; comparison is modular, so `a < b`
/// means `b` is less than half the space (2^23) ahead of `a`. Like TCP sequence
/// numbers, the order is only meaningful for PSNs within that half window.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    pub const MASK: u32 = 0x00ff_ffff;
    /// Half the PSN space: the window within which order is defined.
    pub const HALF: u32 = 1 << 23;

    /// A PSN from the low 24 bits of `v`.
    pub const fn new(v: u32) -> Psn {
        Psn(v & Self::MASK)
    }

    pub const fn value(self) -> u32 {
        self.0
    }

    /// Signed distance from `other` to `self` (`self - other`), in -2^23..2^23.
    pub const fn distance(self, other: Psn) -> i32 {
        let d = self.0.wrapping_sub(other.0) & Self::MASK;
        if d >= Self::HALF {
            d as i32 - (1 << 24)
        } else {
            d as i32
        }
    }

    /// The next PSN.
    pub const fn next(self) -> Psn {
        Psn::new(self.0 + 1)
    }
}

impl ops::Add<u32> for Psn {
    type Output = Psn;
    fn add(self, rhs: u32) -> Psn {
        Psn::new(self.0.wrapping_add(rhs))
    }
}

impl ops::AddAssign<u32> for Psn {
    fn add_assign(&mut self, rhs: u32) {
        *self = *self + rhs;
    }
}

impl ops::Sub<u32> for Psn {
    type Output = Psn;
    fn sub(self, rhs: u32) -> Psn {
        Psn::new(self.0.wrapping_sub(rhs))
    }
}

impl ops::Sub for Psn {
    type Output = i32;
    fn sub(self, rhs: Psn) -> i32 {
        self.distance(rhs)
    }
}

impl PartialOrd for Psn {
    fn partial_cmp(&self, other: &Psn) -> Option<Ordering> {
        Some(self.distance(*other).cmp(&0))
    }
}

impl fmt::Debug for Psn {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Psn({})", self.0)
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn wraps() {
        let top = Psn::new(0xff_ffff);
        assert_eq!(top + 1, Psn::new(0));
        assert_eq!(top.next(), Psn::new(0));
        assert_eq!(Psn::new(0) - 1u32, top);
        assert_eq!(Psn::new(5) - top, 6);
        assert_eq!(top - Psn::new(5), -6);
        assert_eq!(Psn::new(0x1_000_005), Psn::new(5));
    }

    #[test]
    fn modular_order() {
        assert!(Psn::new(0xff_fff0) < Psn::new(3));
        assert!(Psn::new(3) > Psn::new(0xff_fff0));
        assert!(Psn::new(10) < Psn::new(11));
        assert!(Psn::new(0) < Psn::new(Psn::HALF - 1));
        assert!(Psn::new(0) > Psn::new(Psn::HALF + 1));
        assert_eq!(Psn::new(7).partial_cmp(&Psn::new(7)), Some(Ordering::Equal));
    }

    #[test]
    fn distance_is_antisymmetric() {
        for (a, b) in [(0u32, 1u32), (0xff_ffff, 0), (100, 0x80_0000), (5, 5)] {
            let (a, b) = (Psn::new(a), Psn::new(b));
            if a.distance(b) != -(1 << 23) {
                assert_eq!(a.distance(b), -b.distance(a));
            }
        }
    }
}
