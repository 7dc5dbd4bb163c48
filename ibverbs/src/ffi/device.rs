//! Devices and contexts: `ibv_get_device_list` and friends, `ibv_open_device`
//! / `ibv_close_device`, and the ops table of a context (query.rs answers
//! the queries of an open device).

use super::abi::*;
use super::handles::Live;
use super::{copy_c_string, cq, cq_ex, guard, qp, qp_ex, query, set_errno, slot, srq, symver, window};
use crate::devices::{configured, DeviceEntry, DEVICES_ENV};
use crate::explain::explain;
use core::ffi::{c_char, c_int, c_void};
use core::mem::offset_of;
use core::ptr;
use std::sync::{Mutex, OnceLock};
use uroce_verbs::{Context, Device, OpenOptions, Progress};

/// A device as C sees it (a `verbs_device`), with what uroce knows of it.
#[repr(C)]
pub struct UroceDevice {
    verbs: VerbsDevice,
    entry: DeviceEntry,
    /// Its place in the list (`ibv_get_device_index`).
    index: c_int,
    /// Network order, as `ibv_get_device_guid` returns it.
    guid_be: u64,
}

// SAFETY: a UroceDevice is written once, before it is shared, and never
// again; its raw pointers are NULL.
unsafe impl Sync for UroceDevice {}
// SAFETY: as above.
unsafe impl Send for UroceDevice {}

/// The devices of this process, made at the first `ibv_get_device_list` and
/// kept for its lifetime (programs may hold device pointers after freeing
/// the list, as rdma-core allows while a context is open).
fn devices() -> Result<&'static [UroceDevice], &'static str> {
    static DEVICES: OnceLock<Result<Vec<UroceDevice>, String>> = OnceLock::new();
    let made = DEVICES.get_or_init(|| {
        let entries = configured(std::env::var(DEVICES_ENV).ok().as_deref())?;
        Ok(entries.into_iter().enumerate().map(|(i, e)| new_device(i, e)).collect())
    });
    made.as_deref().map_err(String::as_str)
}

fn new_device(index: usize, entry: DeviceEntry) -> UroceDevice {
    // SAFETY: all-zero is a valid VerbsDevice: integers, NULL pointers, NUL strings.
    let mut verbs: VerbsDevice = unsafe { core::mem::zeroed() };
    verbs.device.node_type = IBV_NODE_CA;
    verbs.device.transport_type = IBV_TRANSPORT_IB;
    copy_c_string(&mut verbs.device.name, &entry.name);
    copy_c_string(&mut verbs.device.dev_name, &format!("uverbs{index}"));
    copy_c_string(&mut verbs.device.dev_path, &format!("/sys/class/infiniband_verbs/uverbs{index}"));
    copy_c_string(&mut verbs.device.ibdev_path, &format!("/sys/class/infiniband/{}", entry.name));
    let guid_be = crate::guid::of_spec(&entry.spec).to_be();
    UroceDevice { verbs, entry, index: index as c_int, guid_be }
}

/// The device `dev` points at, if it is one of ours.
fn device_of(dev: *const IbvDevice) -> Option<&'static UroceDevice> {
    devices().ok()?.iter().find(|d| ptr::eq(&d.verbs.device, dev))
}

#[no_mangle]
pub extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut IbvDevice {
    guard(ptr::null_mut(), || {
        let list = match devices() {
            Ok(list) => list,
            Err(why) => {
                // Always said: with no device a program can only fail.
                eprintln!("uroce: {why}");
                set_errno(libc::EINVAL);
                return ptr::null_mut();
            }
        };
        // SAFETY: calloc of n+1 pointers; NULL is checked; freed by ibv_free_device_list.
        let out = unsafe { libc::calloc(list.len() + 1, size_of::<*mut IbvDevice>()) } as *mut *mut IbvDevice;
        if out.is_null() {
            set_errno(libc::ENOMEM);
            return ptr::null_mut();
        }
        for (i, d) in list.iter().enumerate() {
            // SAFETY: i < len + 1 slots; the device outlives the process's use of it.
            unsafe { *out.add(i) = ptr::addr_of!(d.verbs.device).cast_mut() };
        }
        if !num_devices.is_null() {
            // SAFETY: the caller passes a writable int or NULL.
            unsafe { *num_devices = list.len() as c_int };
        }
        out
    })
}
symver!(ibv_get_device_list, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_free_device_list(list: *mut *mut IbvDevice) {
    // SAFETY: the list came from ibv_get_device_list's calloc (or is NULL).
    guard((), || unsafe { libc::free(list.cast()) })
}
symver!(ibv_free_device_list, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_get_device_name(dev: *mut IbvDevice) -> *const c_char {
    guard(ptr::null(), || match device_of(dev) {
        Some(d) => d.verbs.device.name.as_ptr(),
        None => {
            set_errno(libc::EINVAL);
            ptr::null()
        }
    })
}
symver!(ibv_get_device_name, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_get_device_guid(dev: *mut IbvDevice) -> u64 {
    guard(0, || device_of(dev).map_or(0, |d| d.guid_be))
}
symver!(ibv_get_device_guid, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_get_device_index(dev: *mut IbvDevice) -> c_int {
    guard(-1, || device_of(dev).map_or(-1, |d| d.index))
}
symver!(ibv_get_device_index, "IBVERBS_1.9");

/// An open context: the `verbs_context` C programs hold (by its inner
/// `ibv_context`), and the uroce context behind it.
#[repr(C)]
pub struct UroceContext {
    verbs: VerbsContext,
    pub ctx: Context,
}

/// The contexts open now.
static CONTEXTS: Live = Live::new();

const CONTEXT_OFFSET: usize = offset_of!(UroceContext, verbs) + offset_of!(VerbsContext, context);

/// The box a context pointer C holds would be the inner context of.
fn boxed(ctx: *const IbvContext) -> *mut UroceContext {
    ctx.cast::<u8>().wrapping_sub(CONTEXT_OFFSET).cast::<UroceContext>().cast_mut()
}

/// The uroce context behind `ctx`, if `ctx` is an open context of ours.
pub fn context_of(ctx: *const IbvContext) -> Option<&'static UroceContext> {
    CONTEXTS.get(boxed(ctx))
}

/// The C context of a uroce context rdma_cm chose (`id->verbs`): the open
/// C context wrapping that very context.
pub fn c_context_for(ctx: &Context) -> Option<*mut IbvContext> {
    let found = CONTEXTS.find(|c: &UroceContext| c.ctx.same_context(ctx))?;
    Some(ptr::from_ref(found).cast::<u8>().wrapping_add(CONTEXT_OFFSET).cast::<IbvContext>().cast_mut())
}

/// Opens every configured device once for rdma_cm, as librdmacm opens its
/// own `ibv_context` of each device and never closes it: rdma_cm then finds
/// each device by its address, and `id->verbs` is one of these (or another
/// context the program opened on the same device). A device that does not
/// open is said (UROCE_EXPLAIN) and left out.
pub fn open_devices_for_cm() -> Vec<usize> {
    // A forked child opens its own: the parent's are the parent's.
    static OPENED: Mutex<Option<(u32, Vec<usize>)>> = Mutex::new(None);
    let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
    match &*opened {
        Some((pid, contexts)) if *pid == std::process::id() => contexts.clone(),
        _ => {
            let open = |d: &UroceDevice| ibv_open_device(ptr::addr_of!(d.verbs.device).cast_mut());
            let contexts: Vec<usize> =
                devices().unwrap_or_default().iter().map(open).filter(|c| !c.is_null()).map(|c| c as usize).collect();
            *opened = Some((std::process::id(), contexts.clone()));
            contexts
        }
    }
}

/// `rdma_get_devices`: librdmacm's own context of every device, in a
/// NULL-terminated array the caller gives back to `rdma_free_devices`.
#[no_mangle]
pub extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut IbvContext {
    guard(ptr::null_mut(), || {
        let contexts = open_devices_for_cm();
        if !num_devices.is_null() {
            // SAFETY: the caller's int, checked non-NULL.
            unsafe { *num_devices = contexts.len() as c_int };
        }
        if contexts.is_empty() {
            set_errno(libc::ENODEV);
            return ptr::null_mut();
        }
        // SAFETY: calloc of len + 1 pointers (zeroed: the terminator is NULL),
        // freed by rdma_free_devices with free(3), as librdmacm frees its own.
        let list = unsafe { libc::calloc(contexts.len() + 1, size_of::<*mut IbvContext>()) }.cast::<*mut IbvContext>();
        if list.is_null() {
            set_errno(libc::ENOMEM);
            return ptr::null_mut();
        }
        for (i, &c) in contexts.iter().enumerate() {
            // SAFETY: i < len, inside the array just allocated.
            unsafe { *list.add(i) = c as *mut IbvContext };
        }
        list
    })
}
symver!(rdma_get_devices, "RDMACM_1.0");

/// `rdma_free_devices`: the array only; the contexts stay librdmacm's.
#[no_mangle]
pub extern "C" fn rdma_free_devices(list: *mut *mut IbvContext) {
    // SAFETY: NULL or an array rdma_get_devices allocated with calloc.
    unsafe { libc::free(list.cast()) }
}
symver!(rdma_free_devices, "RDMACM_1.0");

/// Whether `ip` is the address of a configured device (rdma_cm may bind it).
pub fn is_device_ip(ip: std::net::IpAddr) -> bool {
    CONTEXTS.find(|c: &UroceContext| c.ctx.has_ip(ip)).is_some()
}

/// How the drop-in's contexts move packets: a background thread per device,
/// so one-sided operations land while the program computes or spins on memory;
/// `UROCE_ACK_DELAY_US` sets the delayed ACKs' wait.
fn open_options() -> OpenOptions {
    let progress = match std::env::var("UROCE_PROGRESS").as_deref() {
        Ok("busy-poll") => Progress::BusyPoll,
        _ => Progress::Blocking,
    };
    OpenOptions { progress, ack_delay: ack_delay_from_env(), ..OpenOptions::default() }
}

/// `UROCE_ACK_DELAY_US`, in microseconds; a value that is not a number is
/// named on stderr and the default kept.
fn ack_delay_from_env() -> Option<std::time::Duration> {
    let value = std::env::var("UROCE_ACK_DELAY_US").ok()?;
    match value.trim().parse::<u64>() {
        Ok(us) => Some(std::time::Duration::from_micros(us)),
        Err(_) => {
            eprintln!("uroce: UROCE_ACK_DELAY_US={value:?} is not a number of microseconds: the default (50) is used");
            None
        }
    }
}

#[no_mangle]
pub extern "C" fn ibv_open_device(dev: *mut IbvDevice) -> *mut IbvContext {
    guard(ptr::null_mut(), || {
        let Some(d) = device_of(dev) else {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        };
        let ctx = match Device::open_with(&d.entry.spec, &open_options()) {
            Ok(ctx) => ctx,
            Err(e) => {
                explain("ibv_open_device", &format!("{} ({}): {}", d.entry.name, d.entry.spec, e.reason()));
                set_errno(libc::ENODEV);
                return ptr::null_mut();
            }
        };
        let async_fd = {
            use std::os::fd::AsRawFd;
            ctx.async_fd().as_raw_fd()
        };
        let raw = CONTEXTS.adopt(Box::new(UroceContext { verbs: new_verbs_context(dev, async_fd), ctx }));
        // The context's place in memory never changes: the box is C's until closed.
        raw.cast::<u8>().wrapping_add(CONTEXT_OFFSET).cast::<IbvContext>()
    })
}
symver!(ibv_open_device, "IBVERBS_1.1");

fn new_verbs_context(dev: *mut IbvDevice, async_fd: c_int) -> VerbsContext {
    // SAFETY: all-zero is valid for VerbsContext: NULL slots and pointers,
    // zero integers, an unlocked (PTHREAD_MUTEX_INITIALIZER) mutex.
    let mut v: VerbsContext = unsafe { core::mem::zeroed() };
    v.sz = size_of::<VerbsContext>();
    v.query_port = slot!(query::query_port_ex, QueryPortFn);
    v.create_qp_ex = slot!(qp_ex::create_qp_ex_slot, CreateQpExFn);
    v.create_cq_ex = slot!(cq_ex::create_cq_ex_slot, CreateCqExFn);
    v.query_device_ex = slot!(query::query_device_ex, QueryDeviceExFn);
    v.context.device = dev;
    v.context.cmd_fd = -1;
    v.context.async_fd = async_fd;
    v.context.num_comp_vectors = 1;
    v.context.abi_compat = VERBS_ABI_IS_EXTENDED;
    fill_ops(&mut v.context.ops);
    v
}

/// `ibv_context.ops`, which the inline verbs call through. As libibverbs
/// does, the 1.0 query slots hold the exported queries. None may be NULL (a
/// call through NULL is a crash): those not served answer EOPNOTSUPP.
fn fill_ops(ops: &mut IbvContextOps) {
    ops.compat_query_device = slot!(query::ibv_query_device, QueryDeviceFn);
    ops.compat_query_port = slot!(query::ibv_query_port, CompatQueryPortFn);
    ops.poll_cq = slot!(cq::poll_cq, PollFn);
    ops.req_notify_cq = slot!(cq::req_notify_cq, NotifyFn);
    ops.post_send = slot!(qp::post_send, PostSendFn);
    ops.post_recv = slot!(qp::post_recv, PostRecvFn);
    ops.post_srq_recv = slot!(srq::post_srq_recv, PostSrqRecvFn);
    ops.alloc_mw = slot!(window::alloc_mw_slot, window::AllocMwFn);
    ops.dealloc_mw = slot!(window::dealloc_mw_slot, window::DeallocMwFn);
    ops.bind_mw = slot!(window::bind_mw_slot, window::BindMwFn);
}

type QueryPortFn = extern "C" fn(*mut IbvContext, u8, *mut IbvPortAttr, usize) -> c_int;
type CompatQueryPortFn = extern "C" fn(*mut IbvContext, u8, *mut IbvPortAttr) -> c_int;
type QueryDeviceFn = extern "C" fn(*mut IbvContext, *mut IbvDeviceAttr) -> c_int;
type PollFn = extern "C" fn(*mut IbvCq, c_int, *mut IbvWc) -> c_int;
type NotifyFn = extern "C" fn(*mut IbvCq, c_int) -> c_int;
type PostSendFn = extern "C" fn(*mut IbvQp, *mut IbvSendWr, *mut *mut IbvSendWr) -> c_int;
type PostRecvFn = extern "C" fn(*mut IbvQp, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int;
type CreateCqExFn = extern "C" fn(*mut IbvContext, *mut IbvCqInitAttrEx) -> *mut IbvCqEx;
type QueryDeviceExFn = extern "C" fn(*mut IbvContext, *const c_void, *mut IbvDeviceAttr, usize) -> c_int;
type CreateQpExFn = extern "C" fn(*mut IbvContext, *mut IbvQpInitAttrEx) -> *mut IbvQp;
type PostSrqRecvFn = extern "C" fn(*mut IbvSrq, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int;

#[no_mangle]
pub extern "C" fn ibv_close_device(ctx: *mut IbvContext) -> c_int {
    guard(libc::EIO, || match CONTEXTS.release(boxed(ctx), |_| Ok(())) {
        Ok(context) => {
            drop(context);
            0
        }
        Err(e) => e,
    })
}
symver!(ibv_close_device, "IBVERBS_1.1");
