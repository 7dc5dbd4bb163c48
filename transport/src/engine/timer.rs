//! A QP's timers: a table indexed by an enum; the next wake-up is their minimum.

use super::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The requester's local ACK timeout: go back N when it fires.
    Retransmit = 0,
    /// The requester waits after an RNR NAK before it retries.
    RnrRetry = 1,
}

impl Timer {
    pub const COUNT: usize = 2;
}

#[derive(Debug, Clone, Default)]
pub(crate) struct TimerTable {
    deadlines: [Option<Instant>; Timer::COUNT],
}

impl TimerTable {
    pub fn set(&mut self, t: Timer, at: Instant) {
        self.deadlines[t as usize] = Some(at);
    }
    pub fn stop(&mut self, t: Timer) {
        self.deadlines[t as usize] = None;
    }
    pub fn is_running(&self, t: Timer) -> bool {
        self.deadlines[t as usize].is_some()
    }
    /// Stops and reports `t` if it is due at `now`.
    pub fn take_expired(&mut self, t: Timer, now: Instant) -> bool {
        match self.deadlines[t as usize] {
            Some(at) if at <= now => {
                self.deadlines[t as usize] = None;
                true
            }
            _ => false,
        }
    }
    pub fn next(&self) -> Option<Instant> {
        self.deadlines.iter().flatten().min().copied()
    }
    pub fn stop_all(&mut self) {
        self.deadlines = Default::default();
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn minimum_and_expiry() {
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Retransmit, Instant::from_nanos(50));
        t.set(Timer::RnrRetry, Instant::from_nanos(20));
        assert_eq!(t.next(), Some(Instant::from_nanos(20)));
        assert!(!t.take_expired(Timer::Retransmit, Instant::from_nanos(49)));
        assert!(t.take_expired(Timer::Retransmit, Instant::from_nanos(50)));
        assert!(!t.is_running(Timer::Retransmit));
        assert_eq!(t.next(), Some(Instant::from_nanos(20)));
    }
}
