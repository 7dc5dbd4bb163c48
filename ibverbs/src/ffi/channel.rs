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
use super::{guard, null_on_err, refused, set_errno, symver};
use core::ffi::{c_int, c_uint, c_void};
use core::ptr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use uroce_verbs::CompChannel;

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
    unsafe { libc::read(fd, record.as_mut_ptr().cast::<c_void>(), record.len()) }
}

#[no_mangle]
pub extern "C-unwind" fn ibv_get_cq_event(
    channel: *mut IbvCompChannel,
    cq_out: *mut *mut IbvCq,
    cq_context_out: *mut *mut c_void,
) -> c_int {
    // The read comes first, outside `guard` and with no lock taken: a thread
    // may be cancelled in it.
    let Some(fd) = CHANNELS.get(channel.cast::<UroceChannel>()).map(|c| c.channel.fd) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    let mut record = [0u8; 8];
    if read_record(fd, &mut record) != record.len() as isize {
        // errno is read()'s (EAGAIN, EINTR, ...).
        return -1;
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

#[no_mangle]
pub extern "C" fn ibv_ack_cq_events(cq: *mut IbvCq, nevents: c_uint) {
    guard((), || {
        if let Some(c) = CQS.get(cq.cast::<UroceCq>()) {
            c.ack(nevents);
        }
    })
}
symver!(ibv_ack_cq_events, "IBVERBS_1.1");
