//! Completion queues: `ibv_create_cq`, `ibv_destroy_cq`, and the inline
//! `ibv_poll_cq` / `ibv_req_notify_cq`, which C calls through the context's
//! ops. Polling reads the CQ's ring without the driver's lock.

use super::abi::{IbvCompChannel, IbvContext, IbvCq, IbvWc};
use super::device::context_of;
use super::handles::{unused, Live};
use super::{guard, set_errno, symver};
use crate::explain::explain;
use core::ffi::{c_int, c_void};
use core::ptr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use uroce_verbs::{Cq, WorkCompletion};

/// A CQ as C holds it.
#[repr(C)]
pub struct UroceCq {
    cq: IbvCq,
    pub inner: Cq,
    /// QPs that use it: while any does, it cannot be destroyed (EBUSY).
    pub users: AtomicUsize,
}

pub static CQS: Live = Live::new();

#[no_mangle]
pub extern "C" fn ibv_create_cq(
    ctx: *mut IbvContext,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut IbvCompChannel,
    _comp_vector: c_int,
) -> *mut IbvCq {
    static HANDLES: AtomicU32 = AtomicU32::new(0);
    guard(ptr::null_mut(), || {
        let Some(c) = context_of(ctx) else {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        };
        if !channel.is_null() {
            explain("ibv_create_cq", "completion channels are not served yet: poll the CQ");
            set_errno(libc::EOPNOTSUPP);
            return ptr::null_mut();
        }
        let max = c.ctx.query_device().max_cqe as c_int;
        if !(1..=max).contains(&cqe) {
            explain("ibv_create_cq", &format!("{cqe} entries: give 1 to {max}"));
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        }
        let inner = match c.ctx.create_cq(cqe as usize, None) {
            Ok(cq) => cq,
            Err(e) => {
                explain("ibv_create_cq", &e.to_string());
                set_errno(e.errno());
                return ptr::null_mut();
            }
        };
        // SAFETY: all-zero is a valid IbvCq (NULL pointers, zero counts, an
        // unlocked mutex and an initialized condition variable).
        let mut cq: IbvCq = unsafe { core::mem::zeroed() };
        cq.context = ctx;
        cq.cq_context = cq_context;
        cq.handle = HANDLES.fetch_add(1, Ordering::Relaxed);
        cq.cqe = inner.cqe() as c_int;
        CQS.adopt(Box::new(UroceCq { cq, inner, users: AtomicUsize::new(0) })).cast()
    })
}
symver!(ibv_create_cq, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_destroy_cq(cq: *mut IbvCq) -> c_int {
    guard(libc::EIO, || {
        let busy = |c: &UroceCq| unused(&c.users, "ibv_destroy_cq", "QPs");
        CQS.release(cq.cast::<UroceCq>(), busy).map_or_else(|e| e, |_| 0)
    })
}
symver!(ibv_destroy_cq, "IBVERBS_1.1");

/// The C form of a completion.
fn to_c(wc: &WorkCompletion) -> IbvWc {
    IbvWc {
        wr_id: wc.wr_id,
        status: wc.status as u32,
        opcode: wc.opcode as u32,
        vendor_err: wc.vendor_err,
        byte_len: wc.byte_len,
        // Kept in network order, as `ibv_wc.imm_data` is.
        imm_data: wc.imm_data.to_be(),
        qp_num: wc.qp_num,
        src_qp: wc.src_qp,
        wc_flags: wc.wc_flags.0,
        pkey_index: wc.pkey_index,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    }
}

/// `ops.poll_cq`: up to `n` completions into `out`; their count, or a
/// negative errno.
pub extern "C" fn poll_cq(cq: *mut IbvCq, n: c_int, out: *mut IbvWc) -> c_int {
    guard(-libc::EIO, || {
        let Some(c) = CQS.get(cq.cast::<UroceCq>()) else { return -libc::EINVAL };
        if n < 0 || (n > 0 && out.is_null()) {
            return -libc::EINVAL;
        }
        // A few at a time through a buffer on the stack: no allocation per poll.
        let mut buf = [WorkCompletion::default(); 16];
        let mut done = 0usize;
        while done < n as usize {
            let want = (n as usize - done).min(buf.len());
            let got = c.inner.poll(&mut buf[..want]);
            for (i, wc) in buf[..got].iter().enumerate() {
                // SAFETY: out holds n entries (the caller's array) and done + i < n.
                unsafe { out.add(done + i).write(to_c(wc)) };
            }
            done += got;
            if got < want {
                break;
            }
        }
        done as c_int
    })
}

/// `ops.req_notify_cq`: arms the CQ's completion event.
pub extern "C" fn req_notify_cq(cq: *mut IbvCq, solicited_only: c_int) -> c_int {
    guard(libc::EIO, || {
        let Some(c) = CQS.get(cq.cast::<UroceCq>()) else { return libc::EINVAL };
        c.inner.req_notify(solicited_only != 0).map_or_else(|e| e.errno(), |_| 0)
    })
}
