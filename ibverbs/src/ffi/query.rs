//! The queries of an open device: `ibv_query_device`, `ibv_query_port`
//! (the inline form through `verbs_context` and the exported compat form),
//! GIDs (`ibv_query_gid`, `_ibv_query_gid_ex`, `_ibv_query_gid_table`,
//! `ibv_query_gid_type`), P_Keys, and sysfs reads: what `ibv_devinfo -v` calls.

use super::abi::*;
use super::device::{context_of, UroceContext};
use super::{copy_c_string, guard, set_errno, symver};
use crate::explain::explain;
use core::ffi::{c_char, c_int, c_uint, CStr};
use core::ptr;

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
        // IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN |
        // IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_MEM_WINDOW |
        // IBV_DEVICE_MEM_WINDOW_TYPE_2B: what uroce does of the list.
        out.device_cap_flags = (1 << 11) | (1 << 12) | (1 << 13) | (1 << 17) | (1 << 24);
        out.max_sge = a.max_sge as c_int;
        out.max_sge_rd = a.max_sge as c_int;
        out.max_cq = a.max_cq as c_int;
        out.max_cqe = a.max_cqe as c_int;
        out.max_mr = a.max_mr as c_int;
        out.max_pd = a.max_pd as c_int;
        out.max_mw = a.max_mw as c_int;
        out.max_mcast_grp = a.max_mcast_grp as c_int;
        out.max_mcast_qp_attach = a.max_mcast_qp_attach as c_int;
        out.max_total_mcast_qp_attach = a.max_total_mcast_qp_attach as c_int;
        out.max_qp_rd_atom = a.max_qp_rd_atom as c_int;
        // RXE_MAX_RES_RD_ATOM: rxe's, as uroce keeps no device-wide count.
        out.max_res_rd_atom = 0x3f_0000;
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

/// Where `struct ibv_device_attr_ex` (rdma-core 44: 400 bytes) keeps
/// `phys_port_cnt_ex`, its last member, and `device_cap_flags_ex` (the
/// 64-bit superset of `device_cap_flags`, as the kernel fills it).
const PHYS_PORT_CNT_EX_AT: usize = 396;
const DEVICE_CAP_FLAGS_EX_AT: usize = 280;

/// `verbs_context.query_device_ex`, which the inline `ibv_query_device_ex`
/// calls (it refuses a nonzero `input->comp_mask` itself): the device's
/// attributes, then the extended ones for the `attr_size` bytes the program
/// has. uroce has none of ODP, completion timestamps, TSO, RSS, packet
/// pacing, tag matching or device memory, so they read zero; the port count
/// is 1.
pub extern "C" fn query_device_ex(
    ctx: *mut IbvContext,
    _input: *const core::ffi::c_void,
    attr: *mut IbvDeviceAttr,
    attr_size: usize,
) -> c_int {
    guard(libc::EIO, || {
        if attr.is_null() || attr_size < size_of::<IbvDeviceAttr>() {
            return libc::EINVAL;
        }
        // SAFETY: attr has attr_size writable bytes (the caller's struct).
        unsafe { ptr::write_bytes(attr.cast::<u8>(), 0, attr_size) };
        let r = ibv_query_device(ctx, attr);
        if r == 0 && attr_size >= PHYS_PORT_CNT_EX_AT + 4 {
            // SAFETY: attr was written by ibv_query_device just above.
            let flags = u64::from(unsafe { (*attr).device_cap_flags });
            // SAFETY: within the attr_size bytes; a u64 at an 8-byte multiple
            // and a u32 at a 4-byte multiple of an 8-aligned struct.
            unsafe {
                attr.cast::<u8>().add(DEVICE_CAP_FLAGS_EX_AT).cast::<u64>().write(flags);
                attr.cast::<u8>().add(PHYS_PORT_CNT_EX_AT).cast::<u32>().write(1);
            }
        }
        r
    })
}

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
    a.max_mtu = p.max_mtu.to_enum().into();
    a.active_mtu = p.active_mtu.to_enum().into();
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
    // The drops a P_Key or a Q_Key caused (ibv_port_attr's own counters).
    let counters = c.ctx.counters();
    let saturated = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    a.bad_pkey_cntr = saturated(counters.get(uroce_verbs::Counter::BadPkey));
    a.qkey_viol_cntr = saturated(counters.get(uroce_verbs::Counter::QkeyViolation));
    let n = len.min(size_of::<IbvPortAttr>());
    // SAFETY: the caller's struct holds at least `len` bytes; we write n <= len.
    unsafe { ptr::copy_nonoverlapping(ptr::addr_of!(a).cast::<u8>(), attr.cast::<u8>(), n) };
    0
}

/// `verbs_context.query_port`, which the inline `ibv_query_port` calls with
/// the size of the struct the program was built with.
pub extern "C" fn query_port_ex(ctx: *mut IbvContext, port: u8, attr: *mut IbvPortAttr, len: usize) -> c_int {
    guard(libc::EIO, || write_port_attr(ctx, port, attr, len))
}

/// The exported `ibv_query_port`, for programs that call it by symbol: the
/// 48-byte `_compat_ibv_port_attr`.
#[no_mangle]
pub extern "C" fn ibv_query_port(ctx: *mut IbvContext, port: u8, attr: *mut IbvPortAttr) -> c_int {
    guard(libc::EIO, || write_port_attr(ctx, port, attr, COMPAT_PORT_ATTR_LEN))
}
symver!(ibv_query_port, "IBVERBS_1.1");

/// The GID at `index` of `ctx`'s port `port`, or the errno rdma-core gives
/// (EINVAL: no such context, port or index).
fn gid_at(ctx: *mut IbvContext, port: u32, index: u32, verb: &str) -> Result<[u8; 16], c_int> {
    gid_of(context_of(ctx).ok_or(libc::EINVAL)?, port, index, verb)
}

pub fn gid_of(c: &UroceContext, port: u32, index: u32, verb: &str) -> Result<[u8; 16], c_int> {
    if port != 1 {
        explain(verb, &format!("port {port}: a uroce device has one port, 1"));
        return Err(libc::EINVAL);
    }
    c.ctx.query_gid(index as usize).map(|g| g.0).map_err(|e| {
        explain(verb, &e.reason());
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

/// The GID entry of `index` (all RoCE v2), as `_ibv_query_gid_ex` fills
/// it; `ifindex` is the link's interface ([`link_ifindex`]).
fn gid_entry(c: &UroceContext, index: u32, ifindex: u32) -> Result<IbvGidEntry, c_int> {
    let gid = gid_of(c, 1, index, "ibv_query_gid_ex")?;
    Ok(IbvGidEntry { gid, gid_index: index, port_num: 1, gid_type: IBV_GID_TYPE_ROCE_V2, ndev_ifindex: ifindex })
}

/// The index of the interface the context's link is on (0 for none).
fn link_ifindex(c: &UroceContext) -> u32 {
    c.ctx.link_info().ifname.as_deref().map_or(0, if_index)
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
        match gid_entry(c, index, link_ifindex(c)) {
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
        let ifindex = link_ifindex(c);
        for i in 0..len {
            match gid_entry(c, i as u32, ifindex) {
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

/// `ibv_get_sysfs_path`: `/sys`, or, as in rdma-core, `$SYSFS_PATH` without
/// its trailing slashes when the process is not set-uid (a program may
/// point libraries that read sysfs through this at a tree of its own).
#[no_mangle]
pub extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    static PATH: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        // SAFETY: getuid and geteuid cannot fail and touch no memory.
        let set_uid = unsafe { libc::getuid() != libc::geteuid() };
        let from_env = std::env::var_os("SYSFS_PATH").filter(|_| !set_uid);
        let path = from_env.map_or_else(|| b"/sys".to_vec(), sysfs_path_from_env);
        std::ffi::CString::new(path).unwrap_or_else(|_| c"/sys".into())
    })
    .as_ptr()
}

/// `$SYSFS_PATH` as rdma-core takes it: at most 256 bytes, trailing
/// slashes removed.
fn sysfs_path_from_env(value: std::ffi::OsString) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = value.as_bytes();
    let mut path = bytes[..bytes.len().min(IBV_SYSFS_PATH_MAX)].to_vec();
    while path.last() == Some(&b'/') {
        path.pop();
    }
    path
}
symver!(ibv_get_sysfs_path, "IBVERBS_1.0");
