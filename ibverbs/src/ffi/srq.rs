//! Shared receive queues: `ibv_create_srq`, `ibv_modify_srq` (the limit
//! and the size),
//! `ibv_query_srq`, `ibv_destroy_srq`, and the inline `ibv_post_srq_recv`,
//! which C calls through the context's ops.

use super::abi::*;
use super::handles::{unused, Live};
use super::memory::{UrocePd, PDS};
use super::qp::{post_chain, recv_wr_of};
use super::{guard, null_on_err, refused, symver};
use core::ffi::c_int;
use core::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use uroce_verbs::{Srq, SrqAttr};

/// An SRQ as C holds it.
#[repr(C)]
pub struct UroceSrq {
    srq: IbvSrq,
    pub inner: Srq,
    pd: &'static UrocePd,
    /// QPs that take their receives from it: while any does, it cannot be
    /// destroyed (EBUSY, as the kernel answers).
    pub users: AtomicUsize,
}

pub static SRQS: Live = Live::new();

pub fn create_srq(pd: *mut IbvPd, init: *mut IbvSrqInitAttr) -> Result<*mut IbvSrq, c_int> {
    let p = PDS.get(pd.cast::<UrocePd>()).ok_or(libc::EINVAL)?;
    // SAFETY: init is NULL or points at the caller's struct ibv_srq_init_attr.
    let init = unsafe { init.as_mut() }.ok_or(libc::EINVAL)?;
    let asked = SrqAttr { max_wr: init.attr.max_wr, max_sge: init.attr.max_sge, srq_limit: init.attr.srq_limit };
    let inner = p.inner.create_srq(asked).map_err(refused("ibv_create_srq"))?;
    // The kernel writes back the sizes it made.
    let made = inner.attr().map_err(refused("ibv_create_srq"))?;
    init.attr.max_wr = made.max_wr;
    init.attr.max_sge = made.max_sge;
    // SAFETY: all-zero is a valid IbvSrq (NULL pointers, zero numbers, an
    // unlocked mutex, an initialized condition variable).
    let mut srq: IbvSrq = unsafe { core::mem::zeroed() };
    srq.context = p.c_context();
    srq.srq_context = init.srq_context;
    srq.pd = pd;
    srq.handle = SRQS.next_handle();
    p.users.fetch_add(1, Ordering::AcqRel);
    Ok(SRQS.adopt(Box::new(UroceSrq { srq, inner, pd: p, users: AtomicUsize::new(0) })).cast())
}

#[no_mangle]
pub extern "C" fn ibv_create_srq(pd: *mut IbvPd, init: *mut IbvSrqInitAttr) -> *mut IbvSrq {
    guard(ptr::null_mut(), || null_on_err(create_srq(pd, init)))
}
symver!(ibv_create_srq, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_destroy_srq(srq: *mut IbvSrq) -> c_int {
    guard(libc::EIO, || {
        let busy = |s: &UroceSrq| unused(&s.users, "ibv_destroy_srq", "QPs");
        match SRQS.release(srq.cast::<UroceSrq>(), busy) {
            Ok(s) => {
                s.pd.users.fetch_sub(1, Ordering::AcqRel);
                0
            }
            Err(e) => e,
        }
    })
}
symver!(ibv_destroy_srq, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_modify_srq(srq: *mut IbvSrq, attr: *mut IbvSrqAttr, mask: c_int) -> c_int {
    guard(libc::EIO, || {
        let Some(s) = SRQS.get(srq.cast::<UroceSrq>()) else { return libc::EINVAL };
        // SAFETY: attr is NULL or points at the caller's struct ibv_srq_attr.
        let Some(a) = (unsafe { attr.as_ref() }) else { return libc::EINVAL };
        if mask & !(IBV_SRQ_LIMIT | IBV_SRQ_MAX_WR) != 0 {
            return libc::EINVAL;
        }
        let max_wr = (mask & IBV_SRQ_MAX_WR != 0).then_some(a.max_wr);
        let limit = (mask & IBV_SRQ_LIMIT != 0).then_some(a.srq_limit);
        s.inner.modify(max_wr, limit).map_or_else(refused("ibv_modify_srq"), |_| 0)
    })
}
symver!(ibv_modify_srq, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_query_srq(srq: *mut IbvSrq, attr: *mut IbvSrqAttr) -> c_int {
    guard(libc::EIO, || {
        let Some(s) = SRQS.get(srq.cast::<UroceSrq>()) else { return libc::EINVAL };
        if attr.is_null() {
            return libc::EINVAL;
        }
        match s.inner.attr() {
            Ok(a) => {
                let out = IbvSrqAttr { max_wr: a.max_wr, max_sge: a.max_sge, srq_limit: a.srq_limit };
                // SAFETY: attr points at the caller's struct ibv_srq_attr (checked non-NULL).
                unsafe { attr.write(out) };
                0
            }
            Err(e) => refused("ibv_query_srq")(e),
        }
    })
}
symver!(ibv_query_srq, "IBVERBS_1.1");

/// `ops.post_srq_recv`: the chain from `wr`.
pub extern "C" fn post_srq_recv(srq: *mut IbvSrq, wr: *mut IbvRecvWr, bad_wr: *mut *mut IbvRecvWr) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: the program passes an SRQ of its context, as rdma-core requires.
        let s = unsafe { SRQS.on_data_path(srq.cast::<UroceSrq>()) };
        post_chain(
            s,
            wr,
            bad_wr,
            |w| w.next,
            |s, w| s.inner.post_recv(&recv_wr_of(w)?).map_err(refused("ibv_post_srq_recv")),
        )
    })
}
