//! Devices and contexts: `ibv_get_device_list` and friends, `ibv_open_device`
//! / `ibv_close_device`, and the queries of a device, its port, GIDs and
//! P_Keys (what `ibv_devices` and `ibv_devinfo -v` call).

use super::abi::*;
use super::handles::Live;
use super::{copy_c_string, guard, set_errno, symver};
use crate::devices::{configured, DeviceEntry, DEVICES_ENV};
use crate::explain::explain;
use core::ffi::{c_char, c_int, c_uint, CStr};
use core::mem::offset_of;
use core::ptr;
use std::sync::OnceLock;
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
    pub device: &'static UroceDevice,
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

/// How the drop-in's contexts move packets: a background thread per device,
/// so one-sided operations land while the program computes or spins on memory.
fn open_options() -> OpenOptions {
    let progress = match std::env::var("UROCE_PROGRESS").as_deref() {
        Ok("busy-poll") => Progress::BusyPoll,
        _ => Progress::Blocking,
    };
    OpenOptions { progress, ..OpenOptions::default() }
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
                explain("ibv_open_device", &format!("{} ({}): {e}", d.entry.name, d.entry.spec));
                set_errno(libc::ENODEV);
                return ptr::null_mut();
            }
        };
        let async_fd = {
            use std::os::fd::AsRawFd;
            ctx.async_fd().as_raw_fd()
        };
        let raw = CONTEXTS.adopt(Box::new(UroceContext { verbs: new_verbs_context(dev, async_fd), ctx, device: d }));
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
    // SAFETY: a function pointer turned into the generic slot type; C calls
    // it with the signature verbs.h gives the slot, the one it is defined with.
    v.query_port = Some(unsafe { core::mem::transmute::<QueryPortFn, unsafe extern "C" fn()>(query_port_ex) });
    v.context.device = dev;
    v.context.cmd_fd = -1;
    v.context.async_fd = async_fd;
    v.context.num_comp_vectors = 1;
    v.context.abi_compat = VERBS_ABI_IS_EXTENDED;
    // SAFETY: as for query_port: the slot's signature is the function's.
    v.context.ops.compat_query_device =
        Some(unsafe { core::mem::transmute::<QueryDeviceFn, unsafe extern "C" fn()>(ibv_query_device) });
    // SAFETY: as for query_port: the slot's signature is the function's.
    v.context.ops.compat_query_port =
        Some(unsafe { core::mem::transmute::<CompatQueryPortFn, unsafe extern "C" fn()>(ibv_query_port) });
    super::unsupported::fill_context_ops(&mut v.context.ops);
    v
}

type QueryPortFn = extern "C" fn(*mut IbvContext, u8, *mut IbvPortAttr, usize) -> c_int;
type CompatQueryPortFn = extern "C" fn(*mut IbvContext, u8, *mut IbvPortAttr) -> c_int;
type QueryDeviceFn = extern "C" fn(*mut IbvContext, *mut IbvDeviceAttr) -> c_int;

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

#[no_mangle]
pub extern "C" fn ibv_query_device(ctx: *mut IbvContext, attr: *mut IbvDeviceAttr) -> c_int {
    guard(libc::EIO, || {
        let (Some(c), false) = (context_of(ctx), attr.is_null()) else { return libc::EINVAL };
        let a = c.ctx.query_device();
        // SAFETY: attr points at a caller's struct ibv_device_attr; all-zero is valid for it.
        let out = unsafe {
            ptr::write_bytes(attr, 0, 1);
            &mut *attr
        };
        copy_c_string(&mut out.fw_ver, &a.fw_ver);
        out.node_guid = a.node_guid.to_be();
        out.sys_image_guid = a.sys_image_guid.to_be();
        out.max_mr_size = a.max_mr_size;
        out.page_size_cap = a.page_size_cap;
        out.vendor_id = a.vendor_id;
        out.vendor_part_id = a.vendor_part_id;
        out.hw_ver = a.hw_ver;
        out.max_qp = a.max_qp as c_int;
        out.max_qp_wr = a.max_qp_wr as c_int;
        // IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN: what uroce does of the list.
        out.device_cap_flags = (1 << 11) | (1 << 12);
        out.max_sge = a.max_sge as c_int;
        out.max_sge_rd = a.max_sge as c_int;
        out.max_cq = a.max_cq as c_int;
        out.max_cqe = a.max_cqe as c_int;
        out.max_mr = a.max_mr as c_int;
        out.max_pd = a.max_pd as c_int;
        out.max_qp_rd_atom = a.max_qp_rd_atom as c_int;
        out.max_res_rd_atom = (a.max_qp_rd_atom * a.max_qp.min(0x3f_0000 / a.max_qp_rd_atom.max(1))) as c_int;
        out.max_qp_init_rd_atom = a.max_qp_init_rd_atom as c_int;
        out.atomic_cap = IBV_ATOMIC_HCA;
        out.max_ah = a.max_qp as c_int;
        out.max_srq = a.max_srq as c_int;
        out.max_srq_wr = a.max_srq_wr as c_int;
        out.max_srq_sge = a.max_srq_sge as c_int;
        out.max_pkeys = 1;
        out.local_ca_ack_delay = 15;
        out.phys_port_cnt = a.phys_port_cnt;
        0
    })
}
symver!(ibv_query_device, "IBVERBS_1.1");

/// The port's attributes, written for `len` bytes of the caller's struct.
fn write_port_attr(ctx: *mut IbvContext, port: u8, attr: *mut IbvPortAttr, len: usize) -> c_int {
    let (Some(c), false) = (context_of(ctx), attr.is_null()) else { return libc::EINVAL };
    if port != 1 {
        explain("ibv_query_port", &format!("port {port}: a uroce device has one port, 1"));
        return libc::EINVAL;
    }
    let p = c.ctx.query_port();
    // SAFETY: all-zero is a valid IbvPortAttr.
    let mut a: IbvPortAttr = unsafe { core::mem::zeroed() };
    a.state = IBV_PORT_ACTIVE;
    a.max_mtu = ibv_mtu(p.max_mtu);
    a.active_mtu = ibv_mtu(p.active_mtu);
    a.gid_tbl_len = p.gid_tbl_len as c_int;
    // IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS, as rxe.
    a.port_cap_flags = (1 << 16) | (1 << 26);
    a.max_msg_sz = p.max_msg_sz;
    a.pkey_tbl_len = 1;
    a.lid = p.lid;
    a.sm_lid = p.sm_lid;
    a.max_vl_num = 1;
    a.active_width = 1;
    a.active_speed = 1;
    a.phys_state = 5;
    a.link_layer = IBV_LINK_LAYER_ETHERNET;
    let n = len.min(size_of::<IbvPortAttr>());
    // SAFETY: the caller's struct holds at least `len` bytes; we write n <= len.
    unsafe { ptr::copy_nonoverlapping(ptr::addr_of!(a).cast::<u8>(), attr.cast::<u8>(), n) };
    0
}

fn ibv_mtu(m: uroce_verbs::Mtu) -> c_int {
    // enum ibv_mtu: IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5.
    (m.bytes().trailing_zeros() as c_int) - 7
}

/// `verbs_context.query_port`, which the inline `ibv_query_port` calls with
/// the size of the struct the program was built with.
extern "C" fn query_port_ex(ctx: *mut IbvContext, port: u8, attr: *mut IbvPortAttr, len: usize) -> c_int {
    guard(libc::EIO, || write_port_attr(ctx, port, attr, len))
}

/// The exported `ibv_query_port`, for programs that call it by symbol: the
/// 48-byte `_compat_ibv_port_attr`.
#[no_mangle]
pub extern "C" fn ibv_query_port(ctx: *mut IbvContext, port: u8, attr: *mut IbvPortAttr) -> c_int {
    guard(libc::EIO, || write_port_attr(ctx, port, attr, COMPAT_PORT_ATTR_LEN))
}
symver!(ibv_query_port, "IBVERBS_1.1");

/// The GID at `index`, or the errno rdma-core gives (EINVAL: no such port
/// or index).
fn gid_at(ctx: *mut IbvContext, port: u32, index: u32, verb: &str) -> Result<[u8; 16], c_int> {
    let c = context_of(ctx).ok_or(libc::EINVAL)?;
    if port != 1 {
        explain(verb, &format!("port {port}: a uroce device has one port, 1"));
        return Err(libc::EINVAL);
    }
    c.ctx.query_gid(index as usize).map(|g| g.0).map_err(|e| {
        explain(verb, &e.to_string());
        libc::EINVAL
    })
}

#[no_mangle]
pub extern "C" fn ibv_query_gid(ctx: *mut IbvContext, port: u8, index: c_int, gid: *mut [u8; 16]) -> c_int {
    guard(-1, || {
        if gid.is_null() || index < 0 {
            set_errno(libc::EINVAL);
            return -1;
        }
        match gid_at(ctx, port.into(), index as u32, "ibv_query_gid") {
            Ok(g) => {
                // SAFETY: gid points at the caller's union ibv_gid (16 bytes).
                unsafe { *gid = g };
                0
            }
            Err(e) => {
                set_errno(e);
                -1
            }
        }
    })
}
symver!(ibv_query_gid, "IBVERBS_1.1");

/// The GID entry of `index` (all RoCE v2), as `_ibv_query_gid_ex` fills it.
fn gid_entry(c: &UroceContext, ctx: *mut IbvContext, index: u32) -> Result<IbvGidEntry, c_int> {
    let gid = gid_at(ctx, 1, index, "ibv_query_gid_ex")?;
    let ifindex = c.ctx.link_info().ifname.as_deref().map_or(0, if_index);
    Ok(IbvGidEntry { gid, gid_index: index, port_num: 1, gid_type: IBV_GID_TYPE_ROCE_V2, ndev_ifindex: ifindex })
}

fn if_index(name: &str) -> u32 {
    let Ok(c) = std::ffi::CString::new(name) else { return 0 };
    // SAFETY: c is a NUL-terminated string that outlives the call.
    unsafe { libc::if_nametoindex(c.as_ptr()) }
}

#[no_mangle]
pub extern "C" fn _ibv_query_gid_ex(
    ctx: *mut IbvContext,
    port: u32,
    index: u32,
    entry: *mut IbvGidEntry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    guard(libc::EIO, || {
        let Some(c) = context_of(ctx) else { return libc::EINVAL };
        if entry.is_null() || flags != 0 || entry_size < size_of::<IbvGidEntry>() || port != 1 {
            return libc::EINVAL;
        }
        match gid_entry(c, ctx, index) {
            Ok(e) => {
                // SAFETY: entry holds at least one IbvGidEntry (entry_size checked).
                unsafe { entry.write(e) };
                0
            }
            Err(e) => e,
        }
    })
}
symver!(_ibv_query_gid_ex, "IBVERBS_1.11");

#[no_mangle]
pub extern "C" fn _ibv_query_gid_table(
    ctx: *mut IbvContext,
    entries: *mut IbvGidEntry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    guard(-(libc::EIO as isize), || {
        let Some(c) = context_of(ctx) else { return -(libc::EINVAL as isize) };
        if entries.is_null() || flags != 0 || entry_size < size_of::<IbvGidEntry>() {
            return -(libc::EINVAL as isize);
        }
        let len = c.ctx.query_port().gid_tbl_len as usize;
        if max_entries < len {
            return -(libc::EINVAL as isize);
        }
        for i in 0..len {
            match gid_entry(c, ctx, i as u32) {
                // SAFETY: entries holds max_entries >= len entries of entry_size bytes.
                Ok(e) => unsafe { entries.cast::<u8>().add(i * entry_size).cast::<IbvGidEntry>().write_unaligned(e) },
                Err(e) => return -(e as isize),
            }
        }
        len as isize
    })
}
symver!(_ibv_query_gid_table, "IBVERBS_1.11");

#[no_mangle]
pub extern "C" fn ibv_query_gid_type(ctx: *mut IbvContext, port: u8, index: c_uint, kind: *mut c_int) -> c_int {
    guard(-1, || match (gid_at(ctx, port.into(), index, "ibv_query_gid_type"), kind.is_null()) {
        (Ok(_), false) => {
            // SAFETY: kind points at the caller's enum ibv_gid_type_sysfs.
            unsafe { *kind = IBV_GID_TYPE_SYSFS_ROCE_V2 };
            0
        }
        (Err(e), _) => {
            set_errno(e);
            -1
        }
        (Ok(_), true) => {
            set_errno(libc::EINVAL);
            -1
        }
    })
}
symver!(ibv_query_gid_type, "IBVERBS_PRIVATE_34");

/// The one P_Key, the default full-membership 0xffff (network order is the same).
const DEFAULT_PKEY: u16 = 0xffff;

#[no_mangle]
pub extern "C" fn ibv_query_pkey(ctx: *mut IbvContext, port: u8, index: c_int, pkey: *mut u16) -> c_int {
    guard(-1, || {
        if context_of(ctx).is_none() || port != 1 || index != 0 || pkey.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: pkey points at the caller's __be16.
        unsafe { *pkey = DEFAULT_PKEY };
        0
    })
}
symver!(ibv_query_pkey, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_get_pkey_index(ctx: *mut IbvContext, port: u8, pkey: u16) -> c_int {
    guard(-1, || if context_of(ctx).is_some() && port == 1 && pkey == DEFAULT_PKEY { 0 } else { -1 })
}
symver!(ibv_get_pkey_index, "IBVERBS_1.5");

/// `ibv_read_sysfs_file`: the file's text without its trailing newline, or
/// -1. uroce's devices have no sysfs directory, so for them this finds
/// nothing (as for rxe's missing `board_id`); other paths are read as they are.
#[no_mangle]
pub extern "C" fn ibv_read_sysfs_file(dir: *const c_char, file: *const c_char, buf: *mut c_char, size: usize) -> c_int {
    guard(-1, || {
        if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
            return -1;
        }
        // SAFETY: dir and file are NUL-terminated strings of the caller.
        let (dir, file) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
        use std::os::unix::ffi::OsStrExt;
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(dir.to_bytes()))
            .join(std::ffi::OsStr::from_bytes(file.to_bytes()));
        let Ok(text) = std::fs::read(&path) else { return -1 };
        let text = text.strip_suffix(b"\n").unwrap_or(&text);
        let n = text.len().min(size - 1);
        // SAFETY: buf holds size bytes; we write n + 1 <= size.
        unsafe {
            ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
        n as c_int
    })
}
symver!(ibv_read_sysfs_file, "IBVERBS_1.0");

#[no_mangle]
pub extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    c"/sys".as_ptr()
}
symver!(ibv_get_sysfs_path, "IBVERBS_1.0");
