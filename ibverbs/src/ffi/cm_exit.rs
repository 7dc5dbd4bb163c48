//! What the process does at exit for its rdma_cm connections: a DREQ to
//! each peer, as the kernel sends when a process exits without destroying
//! its IDs (perftest's `ib_atomic_lat -R` server returns from main
//! connected), so that the peer hears DISCONNECTED instead of waiting out
//! the DREQ's retries.
//!
//! `exit()` may run in a signal handler that interrupted this library, or
//! `malloc`, with a lock held: qperf's server calls it from its SIGURG
//! handler when its client fails, and its handler interrupted `rdma_listen`
//! inside the C library's `calloc` (CI, 2026-11-29) or `rdma_bind_addr`
//! holding the ID's lock. Taking that lock or allocating on the exiting
//! thread would wait forever. So the exit handler only wakes a thread kept
//! for it, by a datagram, and waits for its answer for a bounded time
//! (system calls only: no lock, no allocation); the thread does the work,
//! and a lock that never comes free costs the exit [`EXIT_WAIT`], not the
//! process.

use super::cm::{UroceCmId, CM_IDS};
use super::guard;
use std::os::unix::net::UnixDatagram;
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// How long the exiting thread waits for the disconnects: they take
/// microseconds; this is for a thread that is not scheduled soon on a
/// loaded machine, and what a lock held by the interrupted thread costs.
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// The exit handler's end of the pair whose other end the disconnecting
/// thread reads, and the process that made them: a forked child has the
/// descriptors but not the thread, and makes its own.
struct ExitHelper {
    pid: u32,
    wake: UnixDatagram,
}

static EXIT_HELPER: Mutex<Option<ExitHelper>> = Mutex::new(None);

/// Makes sure this process's connections end at exit (called as each ID is
/// made: the thread is started for the first one, and again in a forked
/// child).
pub fn disconnect_at_exit() {
    let mut helper = EXIT_HELPER.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    if helper.as_ref().is_none_or(|h| h.pid != pid) {
        *helper = start_helper().map(|wake| ExitHelper { pid, wake });
    }
    drop(helper);
    static REGISTERED: Once = Once::new();
    // SAFETY: at_exit is an extern "C" fn of no arguments that lives as
    // long as the process (the library is never unloaded: -z nodelete).
    REGISTERED.call_once(|| unsafe {
        libc::atexit(at_exit);
    });
}

/// The thread that disconnects when told to, and the exit handler's end
/// of the pair; `None` if either cannot be had (exit then disconnects nothing).
fn start_helper() -> Option<UnixDatagram> {
    let (wake, theirs) = UnixDatagram::pair().ok()?;
    wake.set_read_timeout(Some(EXIT_WAIT)).ok()?;
    let serve = move || {
        let mut byte = [0u8; 1];
        while theirs.recv(&mut byte).is_ok() {
            disconnect_all();
            let _ = theirs.send(&byte);
        }
    };
    std::thread::Builder::new().name("uroce-cm-exit".into()).spawn(serve).ok()?;
    Some(wake)
}

/// A DREQ for each connected ID (those not connected refuse: nothing to end).
fn disconnect_all() {
    guard((), || {
        for id in CM_IDS.all::<UroceCmId>() {
            let _ = id.inner.disconnect();
        }
    })
}

/// The exit handler: system calls only, on the exiting thread (see the
/// module's note); nothing in a forked child that made no ID of its own.
extern "C" fn at_exit() {
    let Ok(helper) = EXIT_HELPER.try_lock() else { return };
    let Some(h) = helper.as_ref().filter(|h| h.pid == std::process::id()) else { return };
    if h.wake.send(&[1]).is_err() {
        return;
    }
    // A signal (qperf's interval timer) may cut the wait short: wait again
    // for what is left of it.
    let deadline = Instant::now() + EXIT_WAIT;
    loop {
        match h.wake.recv(&mut [0u8; 1]) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            _ => return,
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || h.wake.set_read_timeout(Some(left)).is_err() {
            return;
        }
    }
}
