//! What a forked child does with the descriptors its parent's devices hold.

use std::os::fd::RawFd;
use std::sync::Once;

/// Runs `child` in the child of every `fork` from now on (the first call
/// registers it; later calls do nothing).
pub fn on_fork_child(child: unsafe extern "C" fn()) {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: registers a handler that the C library calls in the child
        // after fork; no prepare or parent handler.
        unsafe { libc::pthread_atfork(None, None, Some(child)) };
    });
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
