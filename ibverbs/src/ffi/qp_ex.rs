//! Extended QPs: `ibv_create_qp_ex` (through `verbs_context`),
//! `ibv_qp_to_qp_ex`, and the work-request builders the inline `ibv_wr_*`
//! call through `ibv_qp_ex`: perftest's default post path. Between
//! `ibv_wr_start` and `ibv_wr_complete` each operation begins a work request
//! (its `wr_id` and `wr_flags` read from the `ibv_qp_ex` then, as rdma-core
//! documents) and the setters fill in the latest; `ibv_wr_complete` posts the
//! batch all or none, `ibv_wr_abort` drops it. A builder uroce lacks (memory
//! windows, TSO, XRC) makes the batch fail with EOPNOTSUPP at completion.

use super::abi::*;
use super::ah::ud_dest;
use super::device::context_of;
use super::qp::{create_qp, sges, with_inline_data, UroceQp, QPS};
use super::{guard, null_on_err, refused, slot, symver};
use crate::explain::explain;
use core::ffi::{c_int, c_void};
use core::ptr;
use std::sync::MutexGuard;
use uroce_verbs::{SendFlags, SendWr, SgList, Sge, WrOp};

/// The work requests of one `ibv_wr_start` .. `ibv_wr_complete`, each with
/// the data of an inline one, and the first error a builder met.
#[derive(Default)]
pub struct WrBatch {
    wrs: Vec<(SendWr, Option<Vec<u8>>)>,
    error: Option<c_int>,
}

impl WrBatch {
    fn fail(&mut self, e: c_int) {
        self.error.get_or_insert(e);
    }

    /// The request being built, or none: a setter called before any
    /// operation fails the batch (EINVAL).
    fn last(&mut self, setter: &str) -> Option<&mut (SendWr, Option<Vec<u8>>)> {
        if self.wrs.is_empty() {
            explain("ibv_wr_complete", &format!("{setter} before any operation (ibv_wr_send, ...)"));
            self.fail(libc::EINVAL);
        }
        self.wrs.last_mut()
    }
}

/// The QP of `qpx` and its batch.
fn batch_of(qpx: *mut IbvQpEx) -> Option<(&'static UroceQp, MutexGuard<'static, WrBatch>)> {
    // SAFETY: the program passes the ibv_qp_ex of a QP of its context (the
    // ibv_qp_ex is the QP's first member, so its address is the QP's).
    let q = unsafe { QPS.on_data_path(qpx.cast::<UroceQp>()) }?;
    Some((q, q.batch.lock().unwrap_or_else(|p| p.into_inner())))
}

/// Begins a work request of `op`, with the `wr_id` and `wr_flags` the
/// program set in `qpx`.
fn begin(qpx: *mut IbvQpEx, op: WrOp) {
    guard((), || {
        let Some((_, mut b)) = batch_of(qpx) else { return };
        // SAFETY: qpx is the live ibv_qp_ex (batch_of); the program writes
        // these two fields directly, and reads nothing we write here.
        let (wr_id, flags) = unsafe { (ptr::addr_of!((*qpx).wr_id).read(), ptr::addr_of!((*qpx).wr_flags).read()) };
        let wr = SendWr { wr_id, sg_list: SgList::new(), op, flags: SendFlags(flags), ud: None };
        b.wrs.push((wr, None));
    })
}

/// Fails the batch: `what` is not served.
fn unserved(qpx: *mut IbvQpEx, what: &str) {
    guard((), || {
        if let Some((_, mut b)) = batch_of(qpx) {
            explain("ibv_wr_complete", &format!("{what}: not served by uroce"));
            b.fail(libc::EOPNOTSUPP);
        }
    })
}

extern "C" fn wr_start(qpx: *mut IbvQpEx) {
    guard((), || {
        if let Some((_, mut b)) = batch_of(qpx) {
            *b = WrBatch::default();
        }
    })
}

extern "C" fn wr_complete(qpx: *mut IbvQpEx) -> c_int {
    guard(libc::EIO, || {
        let Some((q, mut b)) = batch_of(qpx) else { return libc::EINVAL };
        let WrBatch { wrs, error } = core::mem::take(&mut *b);
        drop(b);
        match error {
            Some(e) => e,
            None => q.inner.post_send_batch(wrs).map_or_else(refused("ibv_wr_complete"), |_| 0),
        }
    })
}

extern "C" fn wr_abort(qpx: *mut IbvQpEx) {
    wr_start(qpx)
}

extern "C" fn wr_send(qpx: *mut IbvQpEx) {
    begin(qpx, WrOp::Send)
}

extern "C" fn wr_send_imm(qpx: *mut IbvQpEx, imm: u32) {
    begin(qpx, WrOp::SendWithImm { imm: u32::from_be(imm) })
}

extern "C" fn wr_send_inv(qpx: *mut IbvQpEx, invalidate_rkey: u32) {
    begin(qpx, WrOp::SendWithInv { invalidate_rkey })
}

extern "C" fn wr_rdma_write(qpx: *mut IbvQpEx, rkey: u32, remote_addr: u64) {
    begin(qpx, WrOp::RdmaWrite { remote_addr, rkey })
}

extern "C" fn wr_rdma_write_imm(qpx: *mut IbvQpEx, rkey: u32, remote_addr: u64, imm: u32) {
    begin(qpx, WrOp::RdmaWriteWithImm { remote_addr, rkey, imm: u32::from_be(imm) })
}

extern "C" fn wr_rdma_read(qpx: *mut IbvQpEx, rkey: u32, remote_addr: u64) {
    begin(qpx, WrOp::RdmaRead { remote_addr, rkey })
}

extern "C" fn wr_atomic_cmp_swp(qpx: *mut IbvQpEx, rkey: u32, remote_addr: u64, compare: u64, swap: u64) {
    begin(qpx, WrOp::AtomicCmpSwp { remote_addr, rkey, compare, swap })
}

extern "C" fn wr_atomic_fetch_add(qpx: *mut IbvQpEx, rkey: u32, remote_addr: u64, add: u64) {
    begin(qpx, WrOp::AtomicFetchAdd { remote_addr, rkey, add })
}

extern "C" fn wr_atomic_write(qpx: *mut IbvQpEx, rkey: u32, remote_addr: u64, data: *const [u8; 8]) {
    if data.is_null() {
        return unserved(qpx, "ibv_wr_atomic_write with no data");
    }
    // SAFETY: data points at the 8 bytes the program gives (verbs.h).
    let data = unsafe { data.read_unaligned() };
    begin(qpx, WrOp::AtomicWrite { remote_addr, rkey, data })
}

extern "C" fn wr_bind_mw(qpx: *mut IbvQpEx, mw: *mut IbvMw, rkey: u32, info: *const IbvMwBindInfo) {
    guard((), || {
        // SAFETY: info is NULL or the program's struct ibv_mw_bind_info.
        let op = unsafe { info.as_ref() }.ok_or(libc::EINVAL).and_then(|i| super::window::bind_op(mw, rkey, i));
        match op {
            Ok(op) => begin(qpx, op),
            Err(e) => {
                if let Some((_, mut b)) = batch_of(qpx) {
                    b.fail(e);
                }
            }
        }
    })
}

extern "C" fn wr_local_inv(qpx: *mut IbvQpEx, invalidate_rkey: u32) {
    begin(qpx, WrOp::LocalInv { rkey: invalidate_rkey })
}

extern "C" fn wr_send_tso(qpx: *mut IbvQpEx) {
    unserved(qpx, "ibv_wr_send_tso (raw packet QPs)")
}

extern "C" fn wr_set_xrc_srqn(qpx: *mut IbvQpEx) {
    unserved(qpx, "ibv_wr_set_xrc_srqn (XRC)")
}

extern "C" fn wr_set_ud_addr(qpx: *mut IbvQpEx, ah: *mut IbvAh, remote_qpn: u32, remote_qkey: u32) {
    guard((), || {
        let Some((_, mut b)) = batch_of(qpx) else { return };
        match ud_dest(ah, remote_qpn, remote_qkey) {
            Ok(dest) => {
                if let Some(last) = b.last("ibv_wr_set_ud_addr") {
                    last.0.ud = Some(dest);
                }
            }
            Err(e) => b.fail(e),
        }
    })
}

/// Sets the latest request's SGEs from the program's list.
fn set_sges(qpx: *mut IbvQpEx, list: *const IbvSge, n: usize, setter: &str) {
    guard((), || {
        let Some((_, mut b)) = batch_of(qpx) else { return };
        match c_int::try_from(n).map_err(|_| libc::EINVAL).and_then(|n| sges(list, n)) {
            Ok(sg_list) => {
                if let Some(last) = b.last(setter) {
                    last.0.sg_list = sg_list;
                }
            }
            Err(e) => b.fail(e),
        }
    })
}

extern "C" fn wr_set_sge(qpx: *mut IbvQpEx, lkey: u32, addr: u64, length: u32) {
    let sge = IbvSge { addr, length, lkey };
    set_sges(qpx, &sge, 1, "ibv_wr_set_sge")
}

extern "C" fn wr_set_sge_list(qpx: *mut IbvQpEx, n: usize, list: *const IbvSge) {
    set_sges(qpx, list, n, "ibv_wr_set_sge_list")
}

/// Makes the latest request inline with the program's buffers, read now.
fn set_inline(qpx: *mut IbvQpEx, bufs: &[IbvSge], setter: &str) {
    guard((), || {
        let Some((q, mut b)) = batch_of(qpx) else { return };
        let n = c_int::try_from(bufs.len()).map_err(|_| libc::EINVAL);
        // Copied now: the program may reuse its buffers before `ibv_wr_complete`.
        let data = n.and_then(|n| with_inline_data(bufs.as_ptr(), n, q.max_inline(), <[u8]>::to_vec));
        match data {
            Ok(data) => {
                if let Some((wr, inline)) = b.last(setter) {
                    // The SGEs give the engine the length; no region is read.
                    wr.sg_list = bufs.iter().map(|s| Sge { addr: s.addr, length: s.length, lkey: 0 }).collect();
                    wr.flags = SendFlags(wr.flags.0 | SendFlags::INLINE.0);
                    *inline = Some(data);
                }
            }
            Err(e) => b.fail(e),
        }
    })
}

/// An inline buffer as an SGE with no key (a length past 4 GiB is past any
/// `max_inline_data`, so saturating keeps it refused).
fn inline_sge(addr: *mut c_void, length: usize) -> IbvSge {
    IbvSge { addr: addr as usize as u64, length: u32::try_from(length).unwrap_or(u32::MAX), lkey: 0 }
}

extern "C" fn wr_set_inline_data(qpx: *mut IbvQpEx, addr: *mut c_void, length: usize) {
    set_inline(qpx, &[inline_sge(addr, length)], "ibv_wr_set_inline_data")
}

extern "C" fn wr_set_inline_data_list(qpx: *mut IbvQpEx, n: usize, list: *const IbvDataBuf) {
    let bufs = match n {
        0 => Vec::new(),
        _ if list.is_null() => return unserved(qpx, "ibv_wr_set_inline_data_list with a NULL list"),
        // SAFETY: the program's array of n ibv_data_buf (checked non-NULL).
        _ => unsafe { core::slice::from_raw_parts(list, n) }.iter().map(|d| inline_sge(d.addr, d.length)).collect(),
    };
    set_inline(qpx, &bufs, "ibv_wr_set_inline_data_list")
}

type WrFn = extern "C" fn(*mut IbvQpEx);
type WrImmFn = extern "C" fn(*mut IbvQpEx, u32);
type WrRdmaFn = extern "C" fn(*mut IbvQpEx, u32, u64);
type WrRdmaImmFn = extern "C" fn(*mut IbvQpEx, u32, u64, u32);
type WrCmpSwpFn = extern "C" fn(*mut IbvQpEx, u32, u64, u64, u64);
type WrFetchAddFn = extern "C" fn(*mut IbvQpEx, u32, u64, u64);
type WrAtomicWriteFn = extern "C" fn(*mut IbvQpEx, u32, u64, *const [u8; 8]);
type WrUdFn = extern "C" fn(*mut IbvQpEx, *mut IbvAh, u32, u32);
type WrSgeFn = extern "C" fn(*mut IbvQpEx, u32, u64, u32);
type WrSgeListFn = extern "C" fn(*mut IbvQpEx, usize, *const IbvSge);
type WrInlineFn = extern "C" fn(*mut IbvQpEx, *mut c_void, usize);
type WrInlineListFn = extern "C" fn(*mut IbvQpEx, usize, *const IbvDataBuf);
type WrCompleteFn = extern "C" fn(*mut IbvQpEx) -> c_int;
type WrBindMwFn = extern "C" fn(*mut IbvQpEx, *mut IbvMw, u32, *const IbvMwBindInfo);

/// The builders of a QP made with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`. Every
/// slot is filled (a call through NULL would crash the program).
pub fn fill_wr_ops(q: &mut IbvQpEx) {
    q.wr_atomic_cmp_swp = slot!(wr_atomic_cmp_swp, WrCmpSwpFn);
    q.wr_atomic_fetch_add = slot!(wr_atomic_fetch_add, WrFetchAddFn);
    q.wr_bind_mw = slot!(wr_bind_mw, WrBindMwFn);
    q.wr_local_inv = slot!(wr_local_inv, WrImmFn);
    q.wr_rdma_read = slot!(wr_rdma_read, WrRdmaFn);
    q.wr_rdma_write = slot!(wr_rdma_write, WrRdmaFn);
    q.wr_rdma_write_imm = slot!(wr_rdma_write_imm, WrRdmaImmFn);
    q.wr_send = slot!(wr_send, WrFn);
    q.wr_send_imm = slot!(wr_send_imm, WrImmFn);
    q.wr_send_inv = slot!(wr_send_inv, WrImmFn);
    q.wr_send_tso = slot!(wr_send_tso, WrFn);
    q.wr_set_ud_addr = slot!(wr_set_ud_addr, WrUdFn);
    q.wr_set_xrc_srqn = slot!(wr_set_xrc_srqn, WrFn);
    q.wr_set_inline_data = slot!(wr_set_inline_data, WrInlineFn);
    q.wr_set_inline_data_list = slot!(wr_set_inline_data_list, WrInlineListFn);
    q.wr_set_sge = slot!(wr_set_sge, WrSgeFn);
    q.wr_set_sge_list = slot!(wr_set_sge_list, WrSgeListFn);
    q.wr_start = slot!(wr_start, WrFn);
    q.wr_complete = slot!(wr_complete, WrCompleteFn);
    q.wr_abort = slot!(wr_abort, WrFn);
    q.wr_atomic_write = slot!(wr_atomic_write, WrAtomicWriteFn);
}

/// The `ibv_wr_*` operations uroce builds.
const SERVED_SEND_OPS: u64 = IBV_QP_EX_WITH_RDMA_WRITE
    | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | IBV_QP_EX_WITH_SEND
    | IBV_QP_EX_WITH_SEND_WITH_IMM
    | IBV_QP_EX_WITH_RDMA_READ
    | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
    | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
    | IBV_QP_EX_WITH_SEND_WITH_INV
    | IBV_QP_EX_WITH_LOCAL_INV
    | IBV_QP_EX_WITH_BIND_MW
    | IBV_QP_EX_WITH_ATOMIC_WRITE;

/// `verbs_context.create_qp_ex`: `ibv_create_qp`'s attributes (the first
/// part of `ibv_qp_init_attr_ex`), a PD, and optionally the operations to
/// build with `ibv_wr_*`. XRC, RSS, TSO and creation flags answer
/// EOPNOTSUPP, as from a device without them.
fn create_qp_ex(ctx: *mut IbvContext, attr: *mut IbvQpInitAttrEx) -> Result<*mut IbvQp, c_int> {
    context_of(ctx).ok_or(libc::EINVAL)?;
    // SAFETY: attr is NULL or points at the caller's struct ibv_qp_init_attr_ex.
    let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
    if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 {
        explain("ibv_create_qp_ex", "no PD: set IBV_QP_INIT_ATTR_PD in comp_mask and attr.pd");
        return Err(libc::EINVAL);
    }
    let send_ops = served_send_ops("ibv_create_qp_ex", a)?;
    // ibv_qp_init_attr_ex begins with the members of ibv_qp_init_attr.
    create_qp(a.pd, attr.cast::<IbvQpInitAttr>(), send_ops)
}

/// The `send_ops_flags` of `a` if it asks for builders, after checking it
/// asks for nothing uroce lacks: XRC, RSS, TSO and creation flags answer
/// EOPNOTSUPP, as from a device without them (`verb` names the call).
pub fn served_send_ops(verb: &str, a: &IbvQpInitAttrEx) -> Result<Option<u64>, c_int> {
    let served = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    let flags = if a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 { a.create_flags } else { 0 };
    if a.comp_mask & !served != 0 || flags != 0 {
        explain(
            verb,
            &format!(
                "comp_mask {:#x}, create_flags {flags:#x}: XRC, RSS, TSO and creation flags are not served",
                a.comp_mask
            ),
        );
        return Err(libc::EOPNOTSUPP);
    }
    let send_ops = (a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0).then_some(a.send_ops_flags);
    if let Some(ops) = send_ops.filter(|ops| ops & !SERVED_SEND_OPS != 0) {
        explain(verb, &format!("send_ops_flags {:#x}: TSO and FLUSH are not served", ops & !SERVED_SEND_OPS));
        return Err(libc::EOPNOTSUPP);
    }
    Ok(send_ops)
}

/// `verbs_context.create_qp_ex`, which the inline `ibv_create_qp_ex` calls.
pub extern "C" fn create_qp_ex_slot(ctx: *mut IbvContext, attr: *mut IbvQpInitAttrEx) -> *mut IbvQp {
    guard(ptr::null_mut(), || null_on_err(create_qp_ex(ctx, attr)))
}

#[no_mangle]
pub extern "C" fn ibv_qp_to_qp_ex(qp: *mut IbvQp) -> *mut IbvQpEx {
    guard(ptr::null_mut(), || {
        // As rdma-core: NULL (and errno untouched) for a QP made without builders.
        QPS.get(qp.cast::<UroceQp>()).and_then(UroceQp::qp_ex).unwrap_or(ptr::null_mut())
    })
}
symver!(ibv_qp_to_qp_ex, "IBVERBS_1.6");
