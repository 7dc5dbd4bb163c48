//! Protection domains and memory regions: `ibv_alloc_pd`, `ibv_dealloc_pd`,
//! `ibv_reg_mr` (and its `_iova`/`_iova2` forms) and `ibv_dereg_mr`. A
//! region is the application's own memory, read and written in place as a
//! NIC would (uroce_verbs' `reg_user_mr`).

use super::abi::{IbvContext, IbvMr, IbvPd};
use super::device::context_of;
use super::handles::{unused, Live};
use super::{guard, null_on_err, refused, symver};
use crate::explain::explain;
use core::cell::UnsafeCell;
use core::ffi::{c_int, c_uint, c_void};
use core::ptr::{self, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
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

/// An MR as C holds it: the C struct in an `UnsafeCell`, as
/// `ibv_rereg_mr` rewrites fields the program reads (PD, keys).
#[repr(C)]
pub struct UroceMr {
    mr: UnsafeCell<IbvMr>,
    reg: Mutex<Registration>,
}

/// What an MR is registered as: the uroce region, its PD and access.
struct Registration {
    inner: Mr,
    pd: &'static UrocePd,
    access: c_uint,
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

/// The access flags uroce serves; the others (zero-based,
/// on-demand paging, huge pages, flush) answer EOPNOTSUPP, as a device
/// without them does. Relaxed ordering is a hint and always allowed.
const SERVED_ACCESS: u32 = AccessFlags::LOCAL_WRITE.0
    | AccessFlags::REMOTE_WRITE.0
    | AccessFlags::REMOTE_READ.0
    | AccessFlags::REMOTE_ATOMIC.0
    | AccessFlags::MW_BIND.0
    | AccessFlags::RELAXED_ORDERING.0;

/// EOPNOTSUPP (said) for access flags uroce has no MRs for.
fn served(access: c_uint, verb: &str) -> Result<(), c_int> {
    match access & !SERVED_ACCESS {
        0 => Ok(()),
        other => {
            explain(verb, &format!("access flags {other:#x}: uroce has no such MRs"));
            Err(libc::EOPNOTSUPP)
        }
    }
}

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

/// Registers `length` bytes at `addr` on `p`, as peers name them at `iova`.
fn register(p: &UrocePd, addr: *mut c_void, length: usize, iova: u64, access: c_uint) -> Result<Mr, c_int> {
    served(access, "ibv_reg_mr")?;
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
    p.inner.reg_user_mr(region, iova, AccessFlags(access)).map_err(refused("ibv_reg_mr"))
}

fn reg_mr(pd: *mut IbvPd, addr: *mut c_void, length: usize, iova: u64, access: c_uint) -> Result<*mut IbvMr, c_int> {
    let p = PDS.get(pd.cast::<UrocePd>()).ok_or(libc::EINVAL)?;
    let inner = register(p, addr, length, iova, access)?;
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
    let reg = Mutex::new(Registration { inner, pd: p, access });
    Ok(MRS.adopt(Box::new(UroceMr { mr: UnsafeCell::new(mr), reg })).cast())
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
    // Deregistered while the handle is still in the set, so that a refusal
    // (EINVAL while a memory window is bound, as rxe) leaves it usable.
    // Returns once no access is in flight: the memory is the caller's again.
    let deregister = |m: &UroceMr| {
        let reg = m.reg.lock().unwrap_or_else(|p| p.into_inner());
        reg.inner.deregister().map_err(|e| {
            explain("ibv_dereg_mr", &e.reason());
            e.errno()
        })
    };
    guard(libc::EIO, || match MRS.release(mr.cast::<UroceMr>(), deregister) {
        Ok(m) => {
            let reg = m.reg.into_inner().unwrap_or_else(|p| p.into_inner());
            reg.pd.users.fetch_sub(1, Ordering::AcqRel);
            0
        }
        Err(e) => e,
    })
}

/// The lkey of the live MR C names, if it is one.
pub fn mr_lkey(mr: *mut IbvMr) -> Option<u32> {
    MRS.get(mr.cast::<UroceMr>()).map(|m| m.reg.lock().unwrap_or_else(|p| p.into_inner()).inner.lkey())
}
symver!(ibv_dereg_mr, "IBVERBS_1.1");

/// `enum ibv_rereg_mr_flags`.
const IBV_REREG_MR_CHANGE_TRANSLATION: c_int = 1 << 0;
const IBV_REREG_MR_CHANGE_PD: c_int = 1 << 1;
const IBV_REREG_MR_CHANGE_ACCESS: c_int = 1 << 2;
/// `enum ibv_rereg_mr_err_code`: bad input, and the command failed.
const IBV_REREG_MR_ERR_INPUT: c_int = -1;
const IBV_REREG_MR_ERR_CMD: c_int = -4;

/// Moves the MR to another PD and/or other access, as rxe does: the same
/// keys and memory, work requests checked again. A new translation
/// (address, length) is not served: EOPNOTSUPP, as rxe answers.
fn rereg_mr(mr: *mut IbvMr, flags: c_int, pd: *mut IbvPd, access: c_int) -> Result<(), (c_int, c_int)> {
    let input = |e| (IBV_REREG_MR_ERR_INPUT, e);
    let m = MRS.get(mr.cast::<UroceMr>()).ok_or(input(libc::EINVAL))?;
    let known = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
    if flags == 0 || flags & !known != 0 {
        return Err(input(libc::EINVAL));
    }
    if flags & IBV_REREG_MR_CHANGE_TRANSLATION != 0 {
        explain("ibv_rereg_mr", "IBV_REREG_MR_CHANGE_TRANSLATION: register the new memory instead (as on rxe)");
        return Err((IBV_REREG_MR_ERR_CMD, libc::EOPNOTSUPP));
    }
    let mut reg = m.reg.lock().unwrap_or_else(|p| p.into_inner());
    let new_pd = match flags & IBV_REREG_MR_CHANGE_PD {
        0 => reg.pd,
        _ => PDS.get(pd.cast::<UrocePd>()).ok_or(input(libc::EINVAL))?,
    };
    let new_access = if flags & IBV_REREG_MR_CHANGE_ACCESS != 0 { access as c_uint } else { reg.access };
    served(new_access, "ibv_rereg_mr").map_err(|e| (IBV_REREG_MR_ERR_CMD, e))?;
    let inner = reg
        .inner
        .rereg(&new_pd.inner, AccessFlags(new_access))
        .map_err(|e| (IBV_REREG_MR_ERR_CMD, refused("ibv_rereg_mr")(e)))?;
    new_pd.users.fetch_add(1, Ordering::AcqRel);
    reg.pd.users.fetch_sub(1, Ordering::AcqRel);
    // SAFETY: a field of this live MR's C struct, the library's to write
    // (the keys stay, as on rxe).
    unsafe { (*m.mr.get()).pd = ptr::from_ref(new_pd).cast_mut().cast() };
    *reg = Registration { inner, pd: new_pd, access: new_access };
    Ok(())
}

#[no_mangle]
pub extern "C" fn ibv_rereg_mr(
    mr: *mut IbvMr,
    flags: c_int,
    pd: *mut IbvPd,
    _addr: *mut c_void,
    _length: usize,
    access: c_int,
) -> c_int {
    guard(IBV_REREG_MR_ERR_CMD, || match rereg_mr(mr, flags, pd, access) {
        Ok(()) => 0,
        Err((code, errno)) => {
            super::set_errno(errno);
            code
        }
    })
}
symver!(ibv_rereg_mr, "IBVERBS_1.1");
