//! Timers. Each QP keeps a small table indexed by an enum, its next wake-up
//! their minimum; the engine keeps one index of every QP's next wake-up,
//! ordered by deadline, so finding what is due never scans every QP.

use super::time::Instant;
use std::collections::BTreeSet;

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
    /// The deadline this QP is filed under in the engine's [`TimerIndex`].
    indexed: Option<Instant>,
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

/// Every QP's next wake-up, by deadline, kept lazily: a QP is filed no later
/// than its next deadline, maybe earlier. Moving a deadline later (a
/// retransmit timer restarted by each packet) or stopping it (the ACK came)
/// leaves the entry where it is, which is what almost every packet does, so
/// the common path touches no tree. An entry that comes due early finds no
/// timer expired and is filed again under the QP's real next deadline.
#[derive(Debug, Default)]
pub(crate) struct TimerIndex {
    by_deadline: BTreeSet<(Instant, u32)>,
    /// The vector [`TimerIndex::take_due`] lends, kept for its allocation.
    spare: Vec<u32>,
}

impl TimerIndex {
    /// Files QP `qpn` again if its next deadline is now earlier than the one
    /// it is filed under (or it was not filed).
    pub fn update(&mut self, qpn: u32, table: &mut TimerTable) {
        match (table.next(), table.indexed) {
            (Some(next), Some(filed)) if next < filed => self.refile(qpn, table),
            (Some(_), None) => self.refile(qpn, table),
            _ => {}
        }
    }

    /// Files QP `qpn` under exactly its next deadline (or nowhere): after
    /// its filed deadline came due.
    pub fn refile(&mut self, qpn: u32, table: &mut TimerTable) {
        if let Some(old) = table.indexed {
            self.by_deadline.remove(&(old, qpn));
        }
        let next = table.next();
        if let Some(new) = next {
            self.by_deadline.insert((new, qpn));
        }
        table.indexed = next;
    }

    /// Forgets a QP that is going away.
    pub fn remove(&mut self, qpn: u32, table: &TimerTable) {
        if let Some(old) = table.indexed {
            self.by_deadline.remove(&(old, qpn));
        }
    }

    /// The earliest deadline any QP is filed under: when to look again (at
    /// worst a little early).
    pub fn next(&self) -> Option<Instant> {
        self.by_deadline.first().map(|&(at, _)| at)
    }

    /// The QPs filed under a deadline due at `now`, earliest first, in a
    /// vector to hand back with [`TimerIndex::return_due`] (a timeout round
    /// then allocates nothing).
    pub fn take_due(&mut self, now: Instant) -> Vec<u32> {
        let mut due = core::mem::take(&mut self.spare);
        due.clear();
        due.extend(self.by_deadline.iter().take_while(|&&(at, _)| at <= now).map(|&(_, qpn)| qpn));
        due
    }

    /// Takes back the vector of [`TimerIndex::take_due`].
    pub fn return_due(&mut self, due: Vec<u32>) {
        self.spare = due;
    }

    /// Whether `table` is filed no later than its next deadline.
    pub fn is_current(table: &TimerTable) -> bool {
        match (table.next(), table.indexed) {
            (Some(next), Some(filed)) => filed <= next,
            (Some(_), None) => false,
            (None, _) => true,
        }
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

    #[test]
    fn the_index_files_each_qp_no_later_than_its_next_deadline() {
        let at = Instant::from_nanos;
        let mut index = TimerIndex::default();
        let (mut a, mut b) = (TimerTable::default(), TimerTable::default());
        a.set(Timer::Retransmit, at(30));
        b.set(Timer::RnrRetry, at(10));
        index.update(1, &mut a);
        index.update(2, &mut b);
        assert_eq!(index.next(), Some(at(10)));
        assert_eq!(index.take_due(at(30)), vec![2, 1]);
        // Stopped or moved later: the entry stays (early is harmless)...
        b.stop_all();
        index.update(2, &mut b);
        a.set(Timer::Retransmit, at(50));
        index.update(1, &mut a);
        assert_eq!(index.take_due(at(30)), vec![2, 1]);
        assert!(TimerIndex::is_current(&a) && TimerIndex::is_current(&b));
        // ...until it comes due and is filed where the timers really are.
        index.refile(2, &mut b);
        index.refile(1, &mut a);
        assert_eq!((index.next(), index.take_due(at(49))), (Some(at(50)), vec![]));
        // Moved earlier: filed again at once.
        a.set(Timer::Retransmit, at(20));
        index.update(1, &mut a);
        assert_eq!(index.next(), Some(at(20)));
        index.remove(1, &a);
        assert_eq!(index.next(), None);
    }
}
