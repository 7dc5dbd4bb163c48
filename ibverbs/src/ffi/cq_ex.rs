//! Extended CQs: `ibv_create_cq_ex` (through `verbs_context`) and the
//! polling calls the inline `ibv_start_poll`, `ibv_next_poll`,
//! `ibv_end_poll` and `ibv_wc_read_*` make through `ibv_cq_ex`. A poll takes
//! one completion from the CQ's ring, sets the CQ's `status` and `wr_id`, and
//! the readers read the rest of it. The standard fields are served;
//! timestamps, CVLAN, flow tags and tag matching answer EOPNOTSUPP at
//! creation, as on a device without them.

use super::abi::*;
use super::cq::{create_cq, to_c, UroceCq, CQS};
use super::{guard, null_on_err};
use crate::explain::explain;
use core::ffi::{c_int, c_uint};
use core::ptr;
use uroce_verbs::WorkCompletion;

/// The live CQ of `cq` (the program passes a CQ of its context, as
/// rdma-core requires on the data path).
fn cq_of(cq: *mut IbvCqEx) -> Option<&'static UroceCq> {
    // SAFETY: as above; NULL is refused.
    unsafe { CQS.on_data_path(cq.cast::<UroceCq>()) }
}

/// Takes the next completion as the current one: 0, or ENOENT if none waits.
fn take_next(cq: *mut IbvCqEx) -> c_int {
    guard(libc::EIO, || {
        let Some(c) = cq_of(cq) else { return libc::EINVAL };
        let mut one = [WorkCompletion::default()];
        if c.take(&mut one) == 0 {
            return libc::ENOENT;
        }
        let wc = to_c(&one[0]);
        *c.current.lock().unwrap_or_else(|p| p.into_inner()) = one[0];
        // SAFETY: fields of this live CQ's C struct, which the program reads
        // after this call returns.
        unsafe {
            (*c.as_c_ex()).status = wc.status as c_int;
            (*c.as_c_ex()).wr_id = wc.wr_id;
        }
        0
    })
}

extern "C" fn start_poll(cq: *mut IbvCqEx, attr: *mut IbvPollCqAttr) -> c_int {
    // SAFETY: attr is NULL or the program's struct ibv_poll_cq_attr.
    if unsafe { attr.as_ref() }.is_none_or(|a| a.comp_mask != 0) {
        return libc::EINVAL;
    }
    take_next(cq)
}

extern "C" fn next_poll(cq: *mut IbvCqEx) -> c_int {
    take_next(cq)
}

extern "C" fn end_poll(_cq: *mut IbvCqEx) {}

/// A field of the current completion, in C's form.
fn read<T: Default>(cq: *mut IbvCqEx, field: impl Fn(&IbvWc) -> T) -> T {
    guard(T::default(), || {
        let Some(c) = cq_of(cq) else { return T::default() };
        let wc = *c.current.lock().unwrap_or_else(|p| p.into_inner());
        field(&to_c(&wc))
    })
}

extern "C" fn read_opcode(cq: *mut IbvCqEx) -> c_int {
    read(cq, |w| w.opcode as c_int)
}
extern "C" fn read_vendor_err(cq: *mut IbvCqEx) -> u32 {
    read(cq, |w| w.vendor_err)
}
extern "C" fn read_byte_len(cq: *mut IbvCqEx) -> u32 {
    read(cq, |w| w.byte_len)
}
extern "C" fn read_imm_data(cq: *mut IbvCqEx) -> u32 {
    read(cq, |w| w.imm_data)
}
extern "C" fn read_qp_num(cq: *mut IbvCqEx) -> u32 {
    read(cq, |w| w.qp_num)
}
extern "C" fn read_src_qp(cq: *mut IbvCqEx) -> u32 {
    read(cq, |w| w.src_qp)
}
extern "C" fn read_wc_flags(cq: *mut IbvCqEx) -> c_uint {
    read(cq, |w| w.wc_flags)
}
extern "C" fn read_slid(cq: *mut IbvCqEx) -> u32 {
    read(cq, |w| w.slid.into())
}
extern "C" fn read_sl(cq: *mut IbvCqEx) -> u8 {
    read(cq, |w| w.sl)
}
extern "C" fn read_dlid_path_bits(cq: *mut IbvCqEx) -> u8 {
    read(cq, |w| w.dlid_path_bits)
}
/// The readers of what creation refuses (timestamps, CVLAN, flow tag).
extern "C" fn read_unserved(_cq: *mut IbvCqEx) -> u64 {
    0
}
extern "C" fn read_tm_info(_cq: *mut IbvCqEx, _info: *mut u8) {}

type PollFn = extern "C" fn(*mut IbvCqEx) -> c_int;
type StartFn = extern "C" fn(*mut IbvCqEx, *mut IbvPollCqAttr) -> c_int;
type EndFn = extern "C" fn(*mut IbvCqEx);
type U32Fn = extern "C" fn(*mut IbvCqEx) -> u32;
type U8Fn = extern "C" fn(*mut IbvCqEx) -> u8;
type U64Fn = extern "C" fn(*mut IbvCqEx) -> u64;
type TmFn = extern "C" fn(*mut IbvCqEx, *mut u8);

/// The polling calls of an extended CQ. Every slot is filled (a call
/// through NULL would crash the program).
fn fill_poll_ops(q: &mut IbvCqEx) {
    q.start_poll = super::slot!(start_poll, StartFn);
    q.next_poll = super::slot!(next_poll, PollFn);
    q.end_poll = super::slot!(end_poll, EndFn);
    q.read_opcode = super::slot!(read_opcode, PollFn);
    q.read_vendor_err = super::slot!(read_vendor_err, U32Fn);
    q.read_byte_len = super::slot!(read_byte_len, U32Fn);
    q.read_imm_data = super::slot!(read_imm_data, U32Fn);
    q.read_qp_num = super::slot!(read_qp_num, U32Fn);
    q.read_src_qp = super::slot!(read_src_qp, U32Fn);
    q.read_wc_flags = super::slot!(read_wc_flags, U32Fn);
    q.read_slid = super::slot!(read_slid, U32Fn);
    q.read_sl = super::slot!(read_sl, U8Fn);
    q.read_dlid_path_bits = super::slot!(read_dlid_path_bits, U8Fn);
    q.read_completion_ts = super::slot!(read_unserved, U64Fn);
    q.read_cvlan = super::slot!(read_unserved, U64Fn);
    q.read_flow_tag = super::slot!(read_unserved, U64Fn);
    q.read_tm_info = super::slot!(read_tm_info, TmFn);
    q.read_completion_wallclock_ns = super::slot!(read_unserved, U64Fn);
}

fn create_cq_ex(ctx: *mut IbvContext, attr: *mut IbvCqInitAttrEx) -> Result<*mut IbvCqEx, c_int> {
    // SAFETY: attr is NULL or the program's struct ibv_cq_init_attr_ex.
    let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
    let flags = if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 { a.flags } else { 0 };
    let unserved = (a.wc_flags & !IBV_WC_STANDARD_FLAGS, a.comp_mask & !IBV_CQ_INIT_ATTR_MASK_FLAGS);
    if unserved != (0, 0) || flags & !IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0 {
        explain(
            "ibv_create_cq_ex",
            &format!(
                "wc_flags {:#x}, comp_mask {:#x}, flags {flags:#x}: timestamps, CVLAN, flow tags, tag matching, \
                 parent domains and ignoring overruns are not served",
                unserved.0, unserved.1
            ),
        );
        return Err(libc::EOPNOTSUPP);
    }
    let cqe = c_int::try_from(a.cqe).map_err(|_| libc::EINVAL)?;
    let comp_vector = c_int::try_from(a.comp_vector).map_err(|_| libc::EINVAL)?;
    create_cq(ctx, cqe, a.cq_context, a.channel, comp_vector, Some(fill_poll_ops)).map(|cq| cq.cast())
}

/// `verbs_context.create_cq_ex`, which the inline `ibv_create_cq_ex` calls.
pub extern "C" fn create_cq_ex_slot(ctx: *mut IbvContext, attr: *mut IbvCqInitAttrEx) -> *mut IbvCqEx {
    guard(ptr::null_mut(), || null_on_err(create_cq_ex(ctx, attr)))
}
