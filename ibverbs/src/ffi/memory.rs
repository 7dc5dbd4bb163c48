//! Protection domains and memory regions: `ibv_alloc_pd`, `ibv_dealloc_pd`,
//! `ibv_reg_mr` (and its `_iova`/`_iova2` forms) and `ibv_dereg_mr`. A
//! region is the application's own memory, read and written in place as a
//! NIC would (uroce_verbs' `reg_user_mr`).

use super::abi::{IbvContext, IbvMr, IbvPd};
use super::device::context_of;
use super::handles::{unused, Live};
use super::{guard, null_on_err, refused, symver};
use crate::explain::explain;
use core::ffi::{c_int, c_uint, c_void};
use core::ptr::{self, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use uroce_stack::memory::RawRegion;
use uroce_verbs::{AccessFlags, Mr, Pd};

/// A PD as C holds it.
#[repr(C)]
pub struct UrocePd {
    pd: IbvPd,
    pub inner: Pd,
    /// MRs and QPs made on it and not yet destroyed: while any is, the PD
    /// cannot be deallocated (EBUSY, as the kernel answers).
    pub users: AtomicUsize,
}

/// An MR as C holds it.
#[repr(C)]
pub struct UroceMr {
    mr: IbvMr,
    inner: Mr,
    pd: &'static UrocePd,
}

pub static PDS: Live = Live::new();
static MRS: Live = Live::new();

#[no_mangle]
pub extern "C" fn ibv_alloc_pd(ctx: *mut IbvContext) -> *mut IbvPd {
    guard(ptr::null_mut(), || {
        null_on_err(context_of(ctx).ok_or(libc::EINVAL).map(|c| {
            let pd = IbvPd { context: ctx, handle: PDS.next_handle() };
            PDS.adopt(Box::new(UrocePd { pd, inner: c.ctx.alloc_pd(), users: AtomicUsize::new(0) })).cast()
        }))
    })
}
symver!(ibv_alloc_pd, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_dealloc_pd(pd: *mut IbvPd) -> c_int {
    guard(libc::EIO, || {
        let busy = |p: &UrocePd| unused(&p.users, "ibv_dealloc_pd", "MRs or QPs");
        PDS.release(pd.cast::<UrocePd>(), busy).map_or_else(|e| e, |_| 0)
    })
}
symver!(ibv_dealloc_pd, "IBVERBS_1.1");

/// The access flags uroce serves; the others (memory windows, zero-based,
/// on-demand paging, huge pages, flush) answer EOPNOTSUPP, as a device
/// without them does. Relaxed ordering is a hint and always allowed.
const SERVED_ACCESS: u32 = AccessFlags::LOCAL_WRITE.0
    | AccessFlags::REMOTE_WRITE.0
    | AccessFlags::REMOTE_READ.0
    | AccessFlags::REMOTE_ATOMIC.0
    | AccessFlags::RELAXED_ORDERING.0;

/// Whether every page of `addr..addr + len` is mapped (`mincore` fails with
/// ENOMEM otherwise): the kernel refuses such a registration with EFAULT,
/// and uroce would otherwise fault later, in its progress thread.
fn is_mapped(addr: usize, len: usize) -> bool {
    // SAFETY: sysconf has no memory effects.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
    let start = addr & !(page - 1);
    let Some(end) = addr.checked_add(len) else { return false };
    let pages = (end - start).div_ceil(page);
    let mut vec = vec![0u8; pages];
    // SAFETY: mincore only reads the page tables of start..end and writes
    // one byte per page into vec, which holds exactly that many.
    unsafe { libc::mincore(start as *mut c_void, end - start, vec.as_mut_ptr()) == 0 }
}

fn reg_mr(pd: *mut IbvPd, addr: *mut c_void, length: usize, iova: u64, access: c_uint) -> Result<*mut IbvMr, c_int> {
    let p = PDS.get(pd.cast::<UrocePd>()).ok_or(libc::EINVAL)?;
    if access & !SERVED_ACCESS != 0 {
        explain("ibv_reg_mr", &format!("access flags {:#x}: uroce has no such MRs", access & !SERVED_ACCESS));
        return Err(libc::EOPNOTSUPP);
    }
    let Some(start) = NonNull::new(addr.cast::<u8>()).filter(|_| length > 0) else {
        explain("ibv_reg_mr", "a NULL address or a length of 0");
        return Err(libc::EINVAL);
    };
    if !is_mapped(addr as usize, length) {
        explain("ibv_reg_mr", &format!("{length} bytes at {addr:p} are not all mapped memory of this process"));
        return Err(libc::EFAULT);
    }
    // SAFETY: the range is mapped memory of this process (checked above),
    // which the caller keeps until ibv_dereg_mr, as ibv_reg_mr's contract
    // says; dereg waits for any access in flight.
    let region = unsafe { RawRegion::new(start, length) };
    let inner = p.inner.reg_user_mr(region, iova, AccessFlags(access)).map_err(refused("ibv_reg_mr"))?;
    let mr = IbvMr {
        context: p.c_context(),
        pd,
        addr,
        length,
        handle: MRS.next_handle(),
        lkey: inner.lkey(),
        rkey: inner.rkey(),
    };
    p.users.fetch_add(1, Ordering::AcqRel);
    Ok(MRS.adopt(Box::new(UroceMr { mr, inner, pd: p })).cast())
}

impl UrocePd {
    /// The `ibv_context` this PD was allocated on.
    pub fn c_context(&self) -> *mut IbvContext {
        self.pd.context
    }
}

/// The C face of `reg_mr`: the region, or NULL with errno.
fn reg_mr_or_null(pd: *mut IbvPd, addr: *mut c_void, length: usize, iova: u64, access: c_uint) -> *mut IbvMr {
    guard(ptr::null_mut(), || null_on_err(reg_mr(pd, addr, length, iova, access)))
}

#[no_mangle]
pub extern "C" fn ibv_reg_mr(pd: *mut IbvPd, addr: *mut c_void, length: usize, access: c_int) -> *mut IbvMr {
    reg_mr_or_null(pd, addr, length, addr as u64, access as c_uint)
}
symver!(ibv_reg_mr, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_reg_mr_iova(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut IbvMr {
    reg_mr_or_null(pd, addr, length, iova, access as c_uint)
}
symver!(ibv_reg_mr_iova, "IBVERBS_1.7");

/// What the `ibv_reg_mr` macro of verbs.h calls whenever `access` is not a
/// constant (perftest and pyverbs always come here).
#[no_mangle]
pub extern "C" fn ibv_reg_mr_iova2(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut IbvMr {
    reg_mr_or_null(pd, addr, length, iova, access)
}
symver!(ibv_reg_mr_iova2, "IBVERBS_1.8");

#[no_mangle]
pub extern "C" fn ibv_dereg_mr(mr: *mut IbvMr) -> c_int {
    guard(libc::EIO, || match MRS.release(mr.cast::<UroceMr>(), |_| Ok(())) {
        Ok(m) => {
            // Returns once no access is in flight: the memory is the caller's again.
            let r = m.inner.deregister();
            m.pd.users.fetch_sub(1, Ordering::AcqRel);
            r.map_or_else(|e| e.errno(), |_| 0)
        }
        Err(e) => e,
    })
}
symver!(ibv_dereg_mr, "IBVERBS_1.1");
