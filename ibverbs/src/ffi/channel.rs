//! Completion channels: `ibv_create_comp_channel`, `ibv_destroy_comp_channel`,
//! `ibv_get_cq_event` and `ibv_ack_cq_events`. `channel->fd` is a real
//! descriptor with the kernel's semantics: `ibv_get_cq_event` reads one
//! record from it, blocking unless the program set O_NONBLOCK (then -1 with
//! EAGAIN), interrupted by signals (EINTR), and cancellable inside the read
//! (rping cancels its CQ thread there), which is why the read runs with no
//! lock or destructor alive in its frame and why the function is `extern
//! "C-unwind"`: glibc's forced unwind out of an `extern "C"` Rust function
//! aborted the process (`ibverbs/tests/c/cancel.c`).

use super::abi::{IbvCompChannel, IbvContext, IbvCq};
use super::cq::{cq_by_id, UroceCq, CQS};
use super::device::context_of;
use super::handles::{unused, Live};
use super::{cancellable, errno, guard, null_on_err, refused, set_errno, symver};
use core::ffi::{c_int, c_uint, c_void};
use core::ptr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use uroce_verbs::{CompChannel, PacketWatch};

/// A completion channel as C holds it.
#[repr(C)]
pub struct UroceChannel {
    channel: IbvCompChannel,
    pub inner: CompChannel,
    /// CQs that report to it: while any does, it cannot be destroyed (EBUSY).
    pub users: AtomicUsize,
}

pub static CHANNELS: Live = Live::new();

#[no_mangle]
pub extern "C" fn ibv_create_comp_channel(ctx: *mut IbvContext) -> *mut IbvCompChannel {
    guard(ptr::null_mut(), || {
        null_on_err(context_of(ctx).ok_or(libc::EINVAL).and_then(|c| {
            let inner = c.ctx.create_comp_channel().map_err(refused("ibv_create_comp_channel"))?;
            let channel = IbvCompChannel { context: ctx, fd: inner.as_raw_fd(), refcnt: 0 };
            Ok(CHANNELS.adopt(Box::new(UroceChannel { channel, inner, users: AtomicUsize::new(0) })).cast())
        }))
    })
}
symver!(ibv_create_comp_channel, "IBVERBS_1.0");

#[no_mangle]
pub extern "C" fn ibv_destroy_comp_channel(channel: *mut IbvCompChannel) -> c_int {
    guard(libc::EIO, || {
        let busy = |c: &UroceChannel| unused(&c.users, "ibv_destroy_comp_channel", "CQs");
        CHANNELS.release(channel.cast::<UroceChannel>(), busy).map_or_else(|e| e, |_| 0)
    })
}
symver!(ibv_destroy_comp_channel, "IBVERBS_1.0");

/// Reads one record from `fd` as the kernel's channel gives it: blocking
/// unless O_NONBLOCK, -1 with errno on failure. A cancellation point: this
/// frame holds nothing that a forced unwind would have to drop.
pub fn read_record(fd: c_int, record: &mut [u8; 8]) -> isize {
    // SAFETY: record is 8 writable bytes; fd is the channel's descriptor.
    unsafe { cancellable::read(fd, record.as_mut_ptr().cast::<c_void>(), record.len()) }
}

#[no_mangle]
pub extern "C-unwind" fn ibv_get_cq_event(
    channel: *mut IbvCompChannel,
    cq_out: *mut *mut IbvCq,
    cq_context_out: *mut *mut c_void,
) -> c_int {
    // The waits come first, outside `guard` and with no lock taken nor
    // anything to drop alive: a thread may be cancelled in them.
    let Some(fd) = CHANNELS.get(channel.cast::<UroceChannel>()).map(|c| c.channel.fd) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    let mut record = [0u8; 8];
    let mut first = true;
    loop {
        // Whether to watch the link too (`CompChannel::packet_watch`: the
        // thread then takes in the packet that completes its event, one
        // wake-up instead of the progress thread's and then its own).
        let watch = guard(None, || CHANNELS.get(channel.cast::<UroceChannel>())?.inner.packet_watch(first));
        first = false;
        let Some(watch) = watch else {
            if read_record(fd, &mut record) != record.len() as isize {
                // errno is read()'s (EAGAIN, EINTR, ...).
                return -1;
            }
            break;
        };
        match wait_beside_link(fd, &watch, &mut record) {
            Waited::Record => break,
            Waited::Failed => return -1,
            Waited::Link(ready) => guard((), || {
                if let Some(ch) = CHANNELS.get(channel.cast::<UroceChannel>()) {
                    ch.inner.after_watch(ready);
                }
            }),
        }
    }
    guard(-1, || {
        let Some(ch) = CHANNELS.get(channel.cast::<UroceChannel>()) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        let Some(cq) = ch.inner.cq_of_record(&record).and_then(|cq| cq_by_id(cq.id())) else {
            // The CQ was destroyed after its event fired: nothing to report.
            set_errno(libc::EAGAIN);
            return -1;
        };
        cq.events_delivered.fetch_add(1, Ordering::AcqRel);
        if !cq_out.is_null() {
            // SAFETY: the caller's out-pointers (checked non-NULL).
            unsafe { *cq_out = cq.as_c() };
        }
        if !cq_context_out.is_null() {
            // SAFETY: as above.
            unsafe { *cq_context_out = cq.cq_context() };
        }
        0
    })
}
symver!(ibv_get_cq_event, "IBVERBS_1.1");

/// What a wait beside the link ended with.
enum Waited {
    /// A record was read.
    Record,
    /// -1 for the caller, errno set (EAGAIN under O_NONBLOCK, EINTR, or
    /// the read's).
    Failed,
    /// Woken by the link (`true`), a timeout or a signal to go on after:
    /// `CompChannel::after_watch`, then look again.
    Link(bool),
}

/// Reads a record of the channel's descriptor `fd` if one is there, else
/// waits for one beside the link's descriptors as `watch` says, with the
/// answers `read()` would give: EAGAIN under O_NONBLOCK; EINTR for a
/// signal unless every handler has SA_RESTART (a read it interrupted would
/// have gone on; a `ppoll` never does); a cancellation point in the wait.
/// Nothing here has anything to drop.
fn wait_beside_link(fd: c_int, watch: &PacketWatch, record: &mut [u8; 8]) -> Waited {
    if watch.ready_now {
        return Waited::Link(true);
    }
    // SAFETY: record is 8 writable bytes; fd is the channel's descriptor.
    let n = unsafe { cancellable::recv(fd, record.as_mut_ptr().cast::<c_void>(), record.len(), libc::MSG_DONTWAIT) };
    match n {
        8 => return Waited::Record,
        -1 if errno() == libc::EAGAIN => {}
        _ => return Waited::Failed,
    }
    // SAFETY: reads the descriptor's flags.
    if unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_NONBLOCK != 0 {
        set_errno(libc::EAGAIN);
        return Waited::Failed;
    }
    let poll_fd = |fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let [link, mcast] = watch.fds.unwrap_or([-1, -1]);
    let mut fds = [poll_fd(fd), poll_fd(link), poll_fd(mcast)];
    let nfds = if watch.fds.is_some() { 3 } else { 1 };
    let timeout = libc::timespec {
        tv_sec: watch.at_most.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: watch.at_most.subsec_nanos().into(),
    };
    // SAFETY: fds holds nfds pollfds; timeout outlives the call; no signal
    // mask is passed.
    if unsafe { cancellable::ppoll(fds.as_mut_ptr(), nfds, &timeout, ptr::null()) } < 0 {
        if errno() == libc::EINTR && !every_handler_restarts() {
            set_errno(libc::EINTR);
            return Waited::Failed;
        }
        return Waited::Link(false);
    }
    let woke = |p: &libc::pollfd| p.revents & (libc::POLLIN | libc::POLLERR) != 0;
    Waited::Link(watch.fds.is_none() || fds[1..].iter().any(woke))
}

/// Whether every signal the program handles has SA_RESTART.
fn every_handler_restarts() -> bool {
    (1..=libc::SIGRTMAX()).all(|sig| {
        // SAFETY: all-zero is a valid sigaction to be overwritten.
        let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: a query (no new action); old is a valid out-pointer.
        if unsafe { libc::sigaction(sig, ptr::null(), &mut old) } != 0 {
            return true;
        }
        old.sa_sigaction == libc::SIG_DFL || old.sa_sigaction == libc::SIG_IGN || old.sa_flags & libc::SA_RESTART != 0
    })
}

#[no_mangle]
pub extern "C" fn ibv_ack_cq_events(cq: *mut IbvCq, nevents: c_uint) {
    guard((), || {
        if let Some(c) = CQS.get(cq.cast::<UroceCq>()) {
            c.ack(nevents);
        }
    })
}
symver!(ibv_ack_cq_events, "IBVERBS_1.1");
