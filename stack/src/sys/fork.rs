//! What a forked child does with the descriptors its parent's devices hold.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

/// Runs `child` in the child of every `fork` from now on (the first call
/// registers it; later calls do nothing), and notes in the parent when it
/// forked ([`forked_within`]).
pub fn on_fork_child(child: unsafe extern "C" fn()) {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: registers handlers that the C library calls after fork, in
        // the parent and in the child; no prepare handler.
        unsafe { libc::pthread_atfork(None, Some(note_fork), Some(child)) };
    });
}

/// When this process last forked, in nanoseconds after [`clock_base`] plus
/// one (0: never).
static LAST_FORK: AtomicU64 = AtomicU64::new(0);

fn clock_base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

extern "C" fn note_fork() {
    let since = clock_base().elapsed().as_nanos().min(u128::from(u64::MAX - 1)) as u64;
    LAST_FORK.store(since + 1, Ordering::Release);
}

/// Whether this process forked within `window`: a child that has not yet
/// let go of its copies of our descriptors (its handler runs when it is
/// first scheduled) still holds our sockets' ports.
pub fn forked_within(window: Duration) -> bool {
    match LAST_FORK.load(Ordering::Acquire) {
        0 => false,
        at => clock_base().elapsed().saturating_sub(Duration::from_nanos(at - 1)) <= window,
    }
}

/// Points descriptor `fd` at /dev/null: this process lets go of the file
/// it held (a forked child's copy of its parent's socket, which would keep
/// the parent's port bound) while the number stays open for whoever owns it
/// to close later.
pub fn let_go(fd: RawFd) {
    // SAFETY: open(2) of a constant path; dup3(2) onto a descriptor this
    // process holds (the caller's); the temporary descriptor is closed.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            libc::dup3(null, fd, libc::O_CLOEXEC);
            libc::close(null);
        }
    }
}
