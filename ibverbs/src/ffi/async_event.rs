//! Asynchronous events: `ibv_get_async_event` and `ibv_ack_async_event`.
//! `context->async_fd` is a real descriptor with the kernel's semantics: the
//! call reads one record from it, blocking unless the program set O_NONBLOCK
//! (then -1 with EAGAIN), and names the QP, CQ or SRQ the event concerns.
//! Each context has its own descriptor, with the events of the QPs, CQs and
//! SRQs made on it (verbs-api routes them), as the kernel keeps one per
//! `ibv_context`.

use super::abi::*;
use super::channel::read_record;
use super::cq::{UroceCq, CQS};
use super::device::context_of;
use super::qp::{UroceQp, QPS};
use super::srq::{UroceSrq, SRQS};
use super::{guard, set_errno, symver};
use core::ffi::{c_int, c_void};
use core::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use uroce_verbs::Event;

/// The C object and event type of a uroce event, if its object still lives
/// (an event of a destroyed object is not reported, as the kernel drops it).
fn c_event_of(e: Event) -> Option<IbvAsyncEvent> {
    let qp = |qpn: u32| QPS.find(|q: &UroceQp| q.inner.qp_num() == qpn).map(|q| ptr::from_ref(q) as *mut c_void);
    let (element, event_type) = match e {
        Event::QpRequestError { qpn } => (qp(qpn)?, IBV_EVENT_QP_REQ_ERR),
        Event::QpAccessError { qpn } => (qp(qpn)?, IBV_EVENT_QP_ACCESS_ERR),
        Event::QpFatal { qpn } => (qp(qpn)?, IBV_EVENT_QP_FATAL),
        Event::SqDrained { qpn } => (qp(qpn)?, IBV_EVENT_SQ_DRAINED),
        Event::QpLastWqeReached { qpn, .. } => (qp(qpn)?, IBV_EVENT_QP_LAST_WQE_REACHED),
        Event::CqError { cq } => {
            let c = CQS.find(|c: &UroceCq| c.inner.handle() == cq)?;
            (ptr::from_ref(c) as *mut c_void, IBV_EVENT_CQ_ERR)
        }
        Event::SrqLimitReached { srq } => {
            let s = SRQS.find(|s: &UroceSrq| s.inner.handle() == srq)?;
            (ptr::from_ref(s) as *mut c_void, IBV_EVENT_SRQ_LIMIT_REACHED)
        }
    };
    Some(IbvAsyncEvent { element, event_type })
}

/// The context's `async_fd`, with events verbs raised on this thread moved
/// onto it first.
fn async_fd(ctx: *mut IbvContext) -> Option<c_int> {
    guard(None, || {
        let c = context_of(ctx)?;
        c.ctx.publish_async_events();
        // SAFETY: ctx is a live context (context_of found it); async_fd is
        // set at open and never changed.
        Some(unsafe { ptr::addr_of!((*ctx).async_fd).read() })
    })
}

#[no_mangle]
pub extern "C-unwind" fn ibv_get_async_event(ctx: *mut IbvContext, event: *mut IbvAsyncEvent) -> c_int {
    let Some(fd) = async_fd(ctx).filter(|_| !event.is_null()) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    loop {
        // The read runs outside `guard` with no lock taken, as a thread may be
        // cancelled in it (unwound: hence "C-unwind"); it blocks unless the
        // program set O_NONBLOCK.
        let mut record = [0u8; 8];
        if read_record(fd, &mut record) != record.len() as isize {
            return -1; // read()'s errno: EAGAIN, EINTR, ...
        }
        let found = guard(None, || context_of(ctx)?.ctx.async_event_of_record(&record).and_then(c_event_of));
        if let Some(e) = found {
            // SAFETY: event is the caller's struct ibv_async_event (checked non-NULL).
            unsafe { event.write(e) };
            return 0;
        }
        // Its object is gone: the next.
    }
}
symver!(ibv_get_async_event, "IBVERBS_1.1");

/// Adds one to the object's count of acknowledged events (the field rdma-core
/// keeps in the object) if it still lives.
#[no_mangle]
pub extern "C" fn ibv_ack_async_event(event: *mut IbvAsyncEvent) {
    guard((), || {
        // SAFETY: event is NULL or the caller's struct, as ibv_get_async_event filled it.
        let Some(e) = (unsafe { event.as_ref() }) else { return };
        let element = e.element;
        // SAFETY (each arm): element is a live object of that kind (checked),
        // whose C struct is at its address.
        let count: *mut u32 = match e.event_type {
            IBV_EVENT_CQ_ERR if CQS.get(element.cast::<UroceCq>()).is_some() => unsafe {
                ptr::addr_of_mut!((*element.cast::<IbvCq>()).async_events_completed)
            },
            IBV_EVENT_SRQ_LIMIT_REACHED if SRQS.get(element.cast::<UroceSrq>()).is_some() => unsafe {
                ptr::addr_of_mut!((*element.cast::<IbvSrq>()).events_completed)
            },
            IBV_EVENT_CQ_ERR | IBV_EVENT_SRQ_LIMIT_REACHED => return,
            _ if QPS.get(element.cast::<UroceQp>()).is_some() => unsafe {
                ptr::addr_of_mut!((*element.cast::<IbvQp>()).events_completed)
            },
            _ => return,
        };
        // SAFETY: a u32 field of a live object, aligned; C only reads it.
        unsafe { AtomicU32::from_ptr(count) }.fetch_add(1, Ordering::AcqRel);
    })
}
symver!(ibv_ack_async_event, "IBVERBS_1.1");
