//! What the application's threads did lately, as the progress thread reads
//! it to choose between spinning, dozing and sleeping.
//!
//! Packets move in whichever thread takes the driver's lock (`Driver::round`
//! from the progress thread, `Driver::help` from an application thread that
//! polls, `Driver::post` from one that posts, `Driver::try_round` from one
//! waiting for a completion event). On a 2-core machine a progress thread
//! that spins beside a polling application takes its core, and one that
//! sleeps while nobody polls pays a wake-up (about 6 us here) for every
//! request. The application threads mark what they do here, and the
//! progress thread reads the marks; it marks its own sleeps and dozes here
//! too, which a thread waiting for an event reads. Every moment is a
//! `Driver::now()` in ns, 0 for never; each mark counts for [`APP_RECENT`].

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;
use uroce_transport::engine::Instant;

/// How long an application thread's act counts as current: a busy-poll
/// progress thread dozes while one ran a round this recently, a blocking
/// one while one's rounds moved packets this recently, and a blocking one
/// does not spin after moving packets while one ran a round or posted this
/// recently.
pub(super) const APP_RECENT: Duration = Duration::from_micros(200);
/// How long a blocking progress thread spins after a round that moved
/// packets, while no application thread polls or posts, before it sleeps:
/// longer than a request-response turn (a READ's round trip is about 9 us
/// here), so that a responder whose application does not poll (read_lat's)
/// answers the next request without a wake-up (about 6 us here).
pub(super) const SPIN_AFTER_MOVE: Duration = Duration::from_micros(25);

/// Whether the moment `at_ns` (0: never) is less than `window` before `now`
/// (a moment after `now`, stamped by a thread whose clock read came later,
/// is within).
fn within(now: Instant, at_ns: u64, window: Duration) -> bool {
    at_ns != 0 && now.as_nanos().saturating_sub(at_ns) < window.as_nanos() as u64
}

/// The application threads' marks (see the module).
#[derive(Default)]
pub(crate) struct AppActivity {
    /// When an application thread last ran a round (`Driver::help`).
    round: AtomicU64,
    /// When an application thread's round last moved packets on a blocking
    /// device.
    moved: AtomicU64,
    /// When an application thread last ran a verb through `Driver::post`.
    post: AtomicU64,
    /// Application threads in a post, from before they wait for the lock
    /// until they posted ([`Posting`]).
    posting: AtomicU32,
    /// When a CQ was last armed for an event.
    arm: AtomicU64,
    /// The progress thread dozes on the doorbell alone (not the link).
    dozing: AtomicBool,
    /// The progress thread sleeps on the link (and the doorbell).
    sleeping: AtomicBool,
}

/// An application thread in a post: counted from before it waits for the
/// driver's lock until [`Posting::posted`] or its drop (a verb that panics).
#[must_use = "the post counts until posted"]
pub(crate) struct Posting<'a>(&'a AppActivity);

impl Posting<'_> {
    /// The post ran at `now`.
    pub fn posted(self, now: Instant) {
        self.0.post.store(now.as_nanos(), Ordering::Relaxed);
    }
}

impl Drop for Posting<'_> {
    fn drop(&mut self) {
        self.0.posting.fetch_sub(1, Ordering::Relaxed);
    }
}

impl AppActivity {
    /// An application thread starts a post (before it waits for the lock,
    /// which a spinning progress thread takes round after round).
    pub fn posting(&self) -> Posting<'_> {
        self.posting.fetch_add(1, Ordering::Relaxed);
        Posting(self)
    }

    /// An application thread runs a round, from `now`.
    pub fn runs_round(&self, now: Instant) {
        self.round.store(now.as_nanos(), Ordering::Relaxed);
    }

    /// An application thread's round from `now` moved packets on a
    /// blocking device.
    pub fn round_moved(&self, now: Instant) {
        self.moved.store(now.as_nanos(), Ordering::Relaxed);
    }

    /// A CQ was armed at `now`: the application waits for an event that the
    /// progress thread delivers, so it stops dozing. Whether it dozes now
    /// (then ring its doorbell). SeqCst with [`AppActivity::doze_while`].
    pub fn armed(&self, now: Instant) -> bool {
        self.arm.store(now.as_nanos(), Ordering::SeqCst);
        self.dozing.load(Ordering::SeqCst)
    }

    /// Whether an application thread ran a round within [`APP_RECENT`] of
    /// `now` and no CQ was armed in that time (a program that arms and then
    /// waits on its channel, after one more poll, is not polling): a
    /// busy-poll progress thread leaves the core to it.
    pub fn is_helping(&self, now: Instant) -> bool {
        self.recent_and_unarmed(now, self.round.load(Ordering::Relaxed))
    }

    /// Whether an application thread's round moved packets within
    /// [`APP_RECENT`] of `now` and no CQ was armed in that time: a blocking
    /// progress thread, woken by each packet only to find it taken, dozes.
    pub fn moves_packets(&self, now: Instant) -> bool {
        self.recent_and_unarmed(now, self.moved.load(Ordering::SeqCst))
    }

    fn recent_and_unarmed(&self, now: Instant, at_ns: u64) -> bool {
        within(now, at_ns, APP_RECENT) && !within(now, self.arm.load(Ordering::SeqCst), APP_RECENT)
    }

    /// Whether a progress thread that last moved packets at `last_moved`
    /// keeps spinning at `now`: within [`SPIN_AFTER_MOVE`] of that, while
    /// no application thread is posting (it may be waiting for the lock the
    /// spinning thread takes each round) or ran a round or posted within
    /// [`APP_RECENT`] (a polling application takes the packets itself, and
    /// a spinning thread beside a running one would take its core: blocking
    /// send_bw lost 7% when only rounds counted, its posters' polls finding
    /// completions).
    pub fn serves_alone(&self, now: Instant, last_moved: u64) -> bool {
        within(now, last_moved, SPIN_AFTER_MOVE)
            && !within(now, self.round.load(Ordering::Relaxed), APP_RECENT)
            && !within(now, self.post.load(Ordering::Relaxed), APP_RECENT)
            && self.posting.load(Ordering::Relaxed) == 0
    }

    /// Runs `sleep` with the progress thread marked sleeping on the link.
    pub fn sleep(&self, sleep: impl FnOnce()) {
        self.sleeping.store(true, Ordering::Relaxed);
        sleep();
        self.sleeping.store(false, Ordering::Relaxed);
    }

    /// Whether the progress thread sleeps or dozes: a packet now would cost
    /// it a wake-up (or, dozing, wait for the doze's end).
    pub fn thread_sleeps(&self) -> bool {
        self.sleeping.load(Ordering::Relaxed) || self.dozing.load(Ordering::Relaxed)
    }

    /// Runs `doze` if `still()` holds once the thread is marked dozing: an
    /// arm after that look finds the mark and rings the doorbell, which
    /// ends the doze (SeqCst with [`AppActivity::armed`]).
    pub fn doze_while(&self, still: impl Fn() -> bool, doze: impl FnOnce()) {
        self.dozing.store(true, Ordering::SeqCst);
        if still() {
            doze();
        }
        self.dozing.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECENT: u64 = APP_RECENT.as_nanos() as u64;
    const SPIN: u64 = SPIN_AFTER_MOVE.as_nanos() as u64;

    fn at(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    #[test]
    fn a_round_counts_for_app_recent_and_an_arm_ends_it() {
        let a = AppActivity::default();
        assert!(!a.is_helping(at(1_000)), "no round yet");
        a.runs_round(at(1_000));
        assert!(a.is_helping(at(1_000 + RECENT - 1)));
        assert!(!a.is_helping(at(1_000 + RECENT)), "too long ago");
        assert!(!a.moves_packets(at(1_000)), "the round moved nothing");
        a.round_moved(at(5_000));
        assert!(a.moves_packets(at(5_000 + RECENT - 1)));
        assert!(!a.armed(at(6_000)), "nobody dozes");
        assert!(!a.is_helping(at(6_000)) && !a.moves_packets(at(6_000)), "an arm ends both");
        // A stamp a moment later than the look (another thread's clock read).
        a.runs_round(at(10_000_000));
        assert!(a.is_helping(at(9_999_000)));
    }

    #[test]
    fn a_thread_serves_alone_only_after_moving_with_nobody_posting_or_polling() {
        let a = AppActivity::default();
        let now = at(1_000_000);
        assert!(a.serves_alone(now, now.as_nanos()));
        assert!(!a.serves_alone(now, 0), "it moved nothing");
        assert!(!a.serves_alone(now, now.as_nanos() - SPIN), "it moved too long ago");
        a.runs_round(now);
        assert!(!a.serves_alone(now, now.as_nanos()), "an application thread polls");
        let later = at(now.as_nanos() + RECENT);
        assert!(a.serves_alone(later, later.as_nanos()));
        let post = a.posting();
        assert!(!a.serves_alone(later, later.as_nanos()), "one waits to post");
        post.posted(later);
        assert!(!a.serves_alone(later, later.as_nanos()), "one posted");
        let much_later = at(later.as_nanos() + RECENT);
        assert!(a.serves_alone(much_later, much_later.as_nanos()), "the post ended its count");
        drop(a.posting());
        assert!(a.serves_alone(much_later, much_later.as_nanos()), "a post dropped unposted counts no more");
    }

    #[test]
    fn a_doze_starts_only_if_its_condition_holds_once_marked() {
        let a = AppActivity::default();
        let mut dozed = false;
        a.doze_while(|| false, || dozed = true);
        assert!(!dozed);
        a.doze_while(
            || {
                assert!(a.armed(at(1)), "an arm during the doze sees it and rings");
                true
            },
            || dozed = true,
        );
        assert!(dozed && !a.armed(at(2)), "the mark ends with the doze");
    }
}
