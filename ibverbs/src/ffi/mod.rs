//! The C side: every symbol of libibverbs.so.1 and librdmacm.so.1 with its
//! version, the C structures, and the conversions between C pointers and
//! uroce's handles. All of the crate's `unsafe` is here.
//!
//! Conventions kept from rdma-core: a verb returning `int` returns 0 or a
//! positive errno (unless rdma-core documents -1 and errno for it); a verb
//! returning a pointer returns NULL and sets errno; no panic crosses into C
//! ([`guard`] turns one into EIO).

pub mod abi;
mod ah;
mod async_event;
mod channel;
mod cm;
pub mod cm_abi;
pub mod cm_addrinfo;
mod cm_event;
mod cm_exit;
mod cm_sync;
mod cq;
mod cq_ex;
mod device;
mod handles;
mod mcast;
mod memory;
mod qp;
mod qp_ex;
mod query;
mod srq;
mod strings;
mod unsupported;
mod window;

use crate::explain::explain;
use core::ffi::c_int;

/// Gives the symbol `$name` (a `#[no_mangle]` item of this crate) the version
/// node `$node` as its default version (`name@@NODE`), as rdma-core's
/// symbol map does. The nodes are declared in `abi/versions.map`.
macro_rules! symver {
    ($name:ident, $node:literal) => {
        core::arch::global_asm!(concat!(".symver ", stringify!($name), ", ", stringify!($name), "@@", $node));
    };
}
pub(crate) use symver;

/// An engine refusal as C's errno, said first (with what to do, where
/// there is a usual fix) if explanations are on.
pub fn refused(verb: &str) -> impl Fn(uroce_verbs::Error) -> c_int + '_ {
    move |e| {
        match e.advice() {
            Some(fix) => explain(verb, &format!("{}: {fix}", e.reason())),
            None => explain(verb, &e.reason()),
        }
        e.errno()
    }
}

/// A verb that returns a pointer: the object, or NULL with errno set.
pub fn null_on_err<T>(made: Result<*mut T, c_int>) -> *mut T {
    made.unwrap_or_else(|e| {
        set_errno(e);
        core::ptr::null_mut()
    })
}

/// `$f`, a function of type `$ty`, as a slot of a table C calls through
/// (`ibv_context.ops`, `verbs_context`).
macro_rules! slot {
    ($f:expr, $ty:ty) => {
        // SAFETY: a function pointer turned into the generic slot type; C
        // calls the slot with the arguments verbs.h gives it, which are the
        // function's (or, for the unsupported ones, more than it reads).
        Some(unsafe { core::mem::transmute::<$ty, unsafe extern "C" fn()>($f) })
    };
}
pub(crate) use slot;

/// Sets the calling thread's errno.
pub fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot,
    // valid for the thread's lifetime.
    unsafe { *libc::__errno_location() = e };
}

/// The calling thread's errno.
pub fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Runs `f`, turning a panic into `on_panic` (with errno EIO) instead of
/// unwinding into C, which would be undefined behaviour (and aborts), and
/// with the thread's cancellation off (`CancelOff`).
pub fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    let _off = CancelOff::new();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            set_errno(libc::EIO);
            on_panic
        }
    }
}

/// The libc calls a verb blocks in as a cancellation point, declared so
/// that a thread cancelled inside them is unwound through them (the libc
/// crate declares them `extern "C"`, out of which no unwind may pass).
pub mod cancellable {
    use core::ffi::{c_int, c_void};
    extern "C-unwind" {
        pub fn read(fd: c_int, buf: *mut c_void, count: usize) -> isize;
        pub fn recv(fd: c_int, buf: *mut c_void, len: usize, flags: c_int) -> isize;
        pub fn poll(fds: *mut libc::pollfd, nfds: libc::nfds_t, timeout: c_int) -> c_int;
        pub fn ppoll(
            fds: *mut libc::pollfd,
            nfds: libc::nfds_t,
            timeout: *const libc::timespec,
            sigmask: *const libc::sigset_t,
        ) -> c_int;
    }
}

// glibc's (and musl's) values; the libc crate does not declare these.
const PTHREAD_CANCEL_DISABLE: c_int = 1;
extern "C" {
    fn pthread_setcancelstate(state: c_int, oldstate: *mut c_int) -> c_int;
}

/// The calling thread's cancellation, off while it lives. A verb's work
/// reaches system calls that are cancellation points (a poll that finds
/// nothing runs a round: `recvmmsg`, `sendmmsg`), where rdma-core's verbs
/// have none: a thread cancelled there was unwound through Rust frames and
/// the process aborted ("exception not rethrown") when a program cancelled
/// a thread that polled a CQ. With cancellation off, a cancel requested
/// meanwhile waits for the program's next cancellation point, as it would
/// with rdma-core. (The blocking reads of `ibv_get_cq_event`,
/// `ibv_get_async_event` and `rdma_get_cm_event` stay cancellation points:
/// they run outside `guard`, with nothing to drop in their frames.)
struct CancelOff(c_int);

impl CancelOff {
    fn new() -> CancelOff {
        let mut before = 0;
        // SAFETY: sets the calling thread's own state; `before` is a valid
        // out-pointer for the state it had.
        unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut before) };
        CancelOff(before)
    }
}

impl Drop for CancelOff {
    fn drop(&mut self) {
        let mut off = 0;
        // SAFETY: as in `new`; restores the state the thread had. Not a
        // cancellation point itself: a pending cancel acts at the program's next.
        unsafe { pthread_setcancelstate(self.0, &mut off) };
    }
}

/// Copies `s` into the C char array `dst`, truncated, always NUL-terminated.
pub fn copy_c_string(dst: &mut [core::ffi::c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(s.bytes().take(n)) {
        *d = b as core::ffi::c_char;
    }
    if let Some(end) = dst.get_mut(n) {
        *end = 0;
    }
}
