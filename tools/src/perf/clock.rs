//! Time: nanosecond timestamps from the monotonic clock (perftest reads CPU
//! cycles), and the duration mode's states (perftest's `catch_alarm`: warm-up
//! for a margin, sample, cool-down for a margin, end).

use super::kinds::DurationSpec;
use std::time::{Duration, Instant};

/// Timestamps in ns since the clock was made.
#[derive(Debug, Clone, Copy)]
pub struct Clock(Instant);

impl Clock {
    pub fn new() -> Clock {
        Clock(Instant::now())
    }
    pub fn now(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::new()
    }
}

/// `DurationStates`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Start,
    Sample,
    StopSample,
    End,
}

/// The duration mode of one run: where it is, and when the sample began and
/// ended (ns on the run's [`Clock`]).
#[derive(Debug, Clone)]
pub struct Phases {
    begun: Option<Instant>,
    spec: DurationSpec,
    pub state: State,
    pub sample: (u64, u64),
}

impl Phases {
    /// Phases not started yet (the SEND tests start them at the first receive).
    pub fn new(spec: DurationSpec) -> Phases {
        Phases { begun: None, spec, state: State::Start, sample: (0, 0) }
    }

    /// Starts the phases now (perftest arms its alarm).
    pub fn begin(&mut self, clock: &Clock) {
        if self.begun.is_none() {
            self.begun = Some(Instant::now());
            self.tick(clock);
        }
    }

    /// Moves through the states whose time has come; returns the state.
    pub fn tick(&mut self, clock: &Clock) -> State {
        let Some(begun) = self.begun else { return self.state };
        let elapsed = begun.elapsed();
        let secs = |s: u64| Duration::from_secs(s);
        loop {
            match self.state {
                State::Start if elapsed >= secs(self.spec.margin) => {
                    self.state = State::Sample;
                    self.sample.0 = clock.now();
                }
                State::Sample if elapsed >= secs(self.spec.secs - self.spec.margin) => {
                    self.state = State::StopSample;
                    self.sample.1 = clock.now();
                }
                State::StopSample if elapsed >= secs(self.spec.secs) => self.state = State::End,
                _ => return self.state,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_margin_the_sample_is_the_whole_run() {
        let clock = Clock::new();
        let mut ph = Phases::new(DurationSpec { secs: 1, margin: 0 });
        assert_eq!(ph.tick(&clock), State::Start);
        ph.begin(&clock);
        assert_eq!(ph.state, State::Sample);
        std::thread::sleep(Duration::from_millis(1010));
        assert_eq!(ph.tick(&clock), State::End);
        assert!(ph.sample.1 - ph.sample.0 >= 1_000_000_000);
    }
}
