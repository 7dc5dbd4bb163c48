//! Memory windows: `ops.alloc_mw`, `ops.dealloc_mw` and `ops.bind_mw`
//! (which the inline `ibv_alloc_mw`, `ibv_dealloc_mw` and `ibv_bind_mw`
//! call), and the BIND_MW work request of `ibv_post_send` and
//! `ibv_wr_bind_mw`, as rxe's provider builds them.

use super::abi::{IbvMr, IbvMw, IbvMwBind, IbvMwBindInfo, IbvPd, IbvQp, IbvSendWr};
use super::handles::Live;
use super::memory::{mr_lkey, UrocePd, PDS};
use super::qp::data_path_qp;
use super::{guard, null_on_err, refused};
use crate::explain::explain;
use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::ptr;
use std::sync::atomic::Ordering;
use uroce_verbs::{next_key, AccessFlags, Mw, MwBind, MwType, SendFlags, SendWr, WrOp};

/// `enum ibv_mw_type`.
const IBV_MW_TYPE_1: c_int = 1;
const IBV_MW_TYPE_2: c_int = 2;

/// A window as C holds it: the C struct in an `UnsafeCell`, as `ibv_bind_mw`
/// rewrites its `rkey`, which the program reads.
#[repr(C)]
pub struct UroceMw {
    mw: UnsafeCell<IbvMw>,
    inner: Mw,
    pd: &'static UrocePd,
}

// SAFETY: the C struct is written only by `ibv_bind_mw` on the thread that
// calls it, as rdma-core's provider writes it; C serialises its own use.
unsafe impl Sync for UroceMw {}

static MWS: Live = Live::new();

pub type AllocMwFn = extern "C" fn(*mut IbvPd, c_int) -> *mut IbvMw;
pub type DeallocMwFn = extern "C" fn(*mut IbvMw) -> c_int;
pub type BindMwFn = extern "C" fn(*mut IbvQp, *mut IbvMw, *mut IbvMwBind) -> c_int;

fn alloc_mw(pd: *mut IbvPd, kind: c_int) -> Result<*mut IbvMw, c_int> {
    let p = PDS.get(pd.cast::<UrocePd>()).ok_or(libc::EINVAL)?;
    let kind = match kind {
        IBV_MW_TYPE_1 => MwType::Type1,
        IBV_MW_TYPE_2 => MwType::Type2,
        other => {
            explain("ibv_alloc_mw", &format!("type {other}: IBV_MW_TYPE_1 or IBV_MW_TYPE_2"));
            return Err(libc::EINVAL);
        }
    };
    let inner = p.inner.alloc_mw(kind).map_err(refused("ibv_alloc_mw"))?;
    let mw =
        IbvMw { context: p.c_context(), pd, rkey: inner.rkey(), handle: MWS.next_handle(), mw_type: kind_of(kind) };
    p.users.fetch_add(1, Ordering::AcqRel);
    Ok(MWS.adopt(Box::new(UroceMw { mw: UnsafeCell::new(mw), inner, pd: p })).cast())
}

fn kind_of(kind: MwType) -> c_int {
    match kind {
        MwType::Type1 => IBV_MW_TYPE_1,
        MwType::Type2 => IBV_MW_TYPE_2,
    }
}

/// `ops.alloc_mw`.
pub extern "C" fn alloc_mw_slot(pd: *mut IbvPd, kind: c_int) -> *mut IbvMw {
    guard(ptr::null_mut(), || null_on_err(alloc_mw(pd, kind)))
}

/// `ops.dealloc_mw`: bound or not, the window's keys reach nothing after.
pub extern "C" fn dealloc_mw_slot(mw: *mut IbvMw) -> c_int {
    guard(libc::EIO, || match MWS.release(mw.cast::<UroceMw>(), |_| Ok(())) {
        Ok(m) => {
            let m = *m;
            m.pd.users.fetch_sub(1, Ordering::AcqRel);
            m.inner.dealloc().map_or_else(|e| e.errno(), |_| 0)
        }
        Err(e) => e,
    })
}

/// The window C names and its rkey as C holds it (rxe's provider sends
/// that as the key the window must have now).
fn window(mw: *mut IbvMw) -> Result<(&'static UroceMw, u32), c_int> {
    let m = MWS.get(mw.cast::<UroceMw>()).ok_or_else(|| {
        explain("ibv_post_send", "BIND_MW names no live window (bind_mw.mw)");
        libc::EINVAL
    })?;
    // SAFETY: the live window's C struct; only ibv_bind_mw writes it.
    Ok((m, unsafe { (*m.mw.get()).rkey }))
}

/// The engine's BIND_MW for window `mw`, new key `rkey` and `info` (a NULL
/// region only with length 0, as libibverbs checks).
pub fn bind_op(mw: *mut IbvMw, rkey: u32, info: &IbvMwBindInfo) -> Result<WrOp, c_int> {
    let (_, mw_rkey) = window(mw)?;
    let mr_lkey = match info.mr.is_null() {
        true if info.length == 0 => 0,
        _ => mr_lkey(info.mr).ok_or_else(|| {
            explain("ibv_post_send", "BIND_MW names no live MR (bind_info.mr)");
            libc::EINVAL
        })?,
    };
    let access = AccessFlags(info.mw_access_flags);
    Ok(WrOp::BindMw { mw_rkey, rkey, bind: MwBind { mr_lkey, addr: info.addr, length: info.length, access } })
}

/// The BIND_MW of a C send work request (`wr.bind_mw` at offset 80).
pub fn bind_op_of(w: &IbvSendWr) -> Result<WrOp, c_int> {
    if w.num_sge != 0 {
        explain("ibv_post_send", "a BIND_MW work request carries no scatter/gather entries");
        return Err(libc::EINVAL);
    }
    let [mw, rkey, mr, addr, length, access] = w.bind_mw_or_tso;
    let info = IbvMwBindInfo { mr: mr as usize as *mut IbvMr, addr, length, mw_access_flags: access as u32 };
    bind_op(mw as usize as *mut IbvMw, rkey as u32, &info)
}

/// `ops.bind_mw` (`ibv_bind_mw`, type 1 windows; libibverbs checked the
/// type and the region's PD): posts BIND_MW with the next key byte and, once
/// posted, gives the window that key, as rxe's provider does ("the user has
/// to undo this if he gets an error completion").
pub extern "C" fn bind_mw_slot(qp: *mut IbvQp, mw: *mut IbvMw, bind: *mut IbvMwBind) -> c_int {
    guard(libc::EIO, || {
        let result = (|| {
            // SAFETY: bind is NULL or the caller's struct ibv_mw_bind.
            let b = unsafe { bind.as_ref() }.ok_or(libc::EINVAL)?;
            if b.bind_info.mw_access_flags & AccessFlags::ZERO_BASED.0 != 0 {
                explain("ibv_bind_mw", "a type 1 window cannot be zero-based");
                return Err(libc::EINVAL);
            }
            let q = data_path_qp(qp).ok_or(libc::EINVAL)?;
            let (m, old) = window(mw)?;
            let rkey = next_key(old);
            let op = bind_op(mw, rkey, &b.bind_info)?;
            let wr = SendWr {
                wr_id: b.wr_id,
                sg_list: uroce_verbs::SgList::new(),
                op,
                flags: SendFlags(b.send_flags),
                ud: None,
            };
            q.inner.post_send(&wr).map_err(refused("ibv_bind_mw"))?;
            // SAFETY: the live window's C struct (see `window`).
            unsafe { (*m.mw.get()).rkey = rkey };
            Ok(())
        })();
        result.map_or_else(|e| e, |_| 0)
    })
}
