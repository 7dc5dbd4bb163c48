//! Virtual time: the engine is told `now`, it never reads a clock.

use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in time, in nanoseconds from an origin chosen by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);

    pub const fn from_nanos(ns: u64) -> Instant {
        Instant(ns)
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// `self - earlier`, or zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

/// The local ACK timeout of a QP attribute `timeout`: 4.096 us x 2^timeout
/// (IBTA 9.7.6.1.3); 0 means infinite (no retransmission timer).
pub fn ack_timeout(timeout: u8) -> Option<Duration> {
    match timeout {
        0 => None,
        t => Some(Duration::from_nanos(4096u64 << t.min(31))),
    }
}

/// The RNR NAK timer table (IBTA Table 45): a 5-bit code to the time the
/// requester waits before retrying. Code 0 is the longest, 655.36 ms.
pub fn rnr_timer(code: u8) -> Duration {
    const MICROS: [u64; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840, 5_120, 7_680,
        10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760, 327_680, 491_520,
    ];
    Duration::from_micros(MICROS[usize::from(code & 0x1f)])
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn timeouts() {
        assert_eq!(ack_timeout(0), None);
        assert_eq!(ack_timeout(1), Some(Duration::from_nanos(8192)));
        assert_eq!(ack_timeout(14), Some(Duration::from_nanos(67_108_864)));
        assert_eq!(rnr_timer(0), Duration::from_micros(655_360));
        assert_eq!(rnr_timer(12), Duration::from_micros(640));
        assert_eq!(rnr_timer(31), Duration::from_micros(491_520));
        assert_eq!(Instant::from_nanos(5) + Duration::from_nanos(7), Instant::from_nanos(12));
        assert_eq!(Instant::from_nanos(5) - Instant::from_nanos(7), Duration::ZERO);
    }
}
