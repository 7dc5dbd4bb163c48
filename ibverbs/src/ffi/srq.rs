//! Shared receive queues: `ibv_create_srq`, `ibv_modify_srq` (the limit
//! and the size),
//! `ibv_query_srq`, `ibv_destroy_srq`, and the inline `ibv_post_srq_recv`,
//! which C calls through the context's ops.

use super::abi::*;
use super::handles::{unused, Live};
use super::memory::{UrocePd, PDS};
use super::qp::{post_chain, recv_wr_of};
use super::{guard, null_on_err, refused, symver};
use crate::explain::explain;
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

/// The smallest queue rxe makes (RXE_MIN_SRQ_WR): smaller requests grow to it.
const MIN_SRQ_WR: u32 = 4;

/// The sizes an SRQ is made with, as rxe checks and rounds them.
fn sizes(p: &UrocePd, asked: &IbvSrqAttr) -> Result<SrqAttr, c_int> {
    let dev = p.inner.context().query_device();
    if asked.max_wr == 0 || asked.max_wr > dev.max_srq_wr || asked.max_sge > dev.max_srq_sge {
        explain(
            "ibv_create_srq",
            &format!(
                "max_wr {} and max_sge {}: the device takes 1..={} receives of at most {} SGEs",
                asked.max_wr, asked.max_sge, dev.max_srq_wr, dev.max_srq_sge
            ),
        );
        return Err(libc::EINVAL);
    }
    Ok(SrqAttr { max_wr: asked.max_wr.max(MIN_SRQ_WR), max_sge: asked.max_sge.max(1), srq_limit: asked.srq_limit })
}

pub fn create_srq(pd: *mut IbvPd, init: *mut IbvSrqInitAttr) -> Result<*mut IbvSrq, c_int> {
    let p = PDS.get(pd.cast::<UrocePd>()).ok_or(libc::EINVAL)?;
    // SAFETY: init is NULL or points at the caller's struct ibv_srq_init_attr.
    let init = unsafe { init.as_mut() }.ok_or(libc::EINVAL)?;
    let attr = sizes(p, &init.attr)?;
    let inner = p.inner.create_srq(attr).map_err(refused("ibv_create_srq"))?;
    // The kernel writes back the sizes it made.
    init.attr.max_wr = attr.max_wr;
    init.attr.max_sge = attr.max_sge;
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
        let now = match s.inner.attr() {
            Ok(now) => now,
            Err(e) => return refused("ibv_modify_srq")(e),
        };
        // As rxe: a size under the smallest grows to it; the limit (the one
        // armed, or the one given with it) must fit the new size.
        let max_wr = match mask & IBV_SRQ_MAX_WR != 0 {
            true if a.max_wr == 0 => {
                explain("ibv_modify_srq", "max_wr 0: an SRQ takes at least one receive");
                return libc::EINVAL;
            }
            true => a.max_wr.max(MIN_SRQ_WR),
            false => now.max_wr,
        };
        let limit = if mask & IBV_SRQ_LIMIT != 0 { a.srq_limit } else { now.srq_limit };
        if limit > max_wr {
            explain("ibv_modify_srq", &format!("a limit of {limit} past the queue's {max_wr} receives"));
            return libc::EINVAL;
        }
        if max_wr != now.max_wr {
            if let Err(e) = s.inner.resize(max_wr) {
                return refused("ibv_modify_srq")(e);
            }
        }
        if mask & IBV_SRQ_LIMIT == 0 {
            return 0;
        }
        s.inner.modify_limit(a.srq_limit).map_or_else(refused("ibv_modify_srq"), |_| 0)
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
