//! Address handles: `ibv_create_ah`, `ibv_destroy_ah`, and the two that make
//! one from a received datagram (`ibv_init_ah_from_wc`,
//! `ibv_create_ah_from_wc`). On RoCE an address is a GID: the handle keeps
//! the destination GID, which a UD send carries to the engine.

use super::abi::*;
use super::device::context_of;
use super::handles::Live;
use super::memory::{UrocePd, PDS};
use super::query::gid_of;
use super::{guard, null_on_err, symver};
use crate::explain::explain;
use core::ffi::c_int;
use core::ptr;
use std::sync::atomic::Ordering;
use uroce_verbs::{Ah, Gid, UdDest};

/// An AH as C holds it.
#[repr(C)]
pub struct UroceAh {
    ah: IbvAh,
    inner: Ah,
    pd: &'static UrocePd,
}

static AHS: Live = Live::new();

/// The UD destination of a send through `ah` (NULL or not an AH: EINVAL,
/// as the kernel refuses an unknown AH handle).
pub fn ud_dest(ah: *const IbvAh, remote_qpn: u32, remote_qkey: u32) -> Result<UdDest, c_int> {
    // SAFETY: the program passes an AH of its context, as rdma-core requires
    // on the data path (the post verbs follow the pointer unchecked).
    let a = unsafe { AHS.on_data_path(ah.cast::<UroceAh>()) }.ok_or_else(|| {
        explain("ibv_post_send", "a UD work request with no address handle (wr.ud.ah is NULL)");
        libc::EINVAL
    })?;
    Ok(a.inner.dest(remote_qpn, remote_qkey))
}

fn create_ah(pd: *mut IbvPd, attr: *const IbvAhAttr) -> Result<*mut IbvAh, c_int> {
    let p = PDS.get(pd.cast::<UrocePd>()).ok_or_else(|| {
        explain("ibv_create_ah", "the PD is NULL, freed or not one of this library's");
        libc::EINVAL
    })?;
    // SAFETY: attr is NULL or points at the caller's struct ibv_ah_attr.
    let a = unsafe { attr.as_ref() }.ok_or_else(|| {
        explain("ibv_create_ah", "attr is NULL");
        libc::EINVAL
    })?;
    if a.is_global == 0 {
        // The kernel refuses a RoCE address without a GRH: RoCE has no LIDs.
        explain("ibv_create_ah", "RoCE addresses need a GRH: set is_global = 1 and grh.dgid (a LID means nothing)");
        return Err(libc::EINVAL);
    }
    let c = context_of(p.c_context()).ok_or(libc::EINVAL)?;
    gid_of(c, a.port_num.into(), a.grh.sgid_index.into(), "ibv_create_ah")?;
    let inner = p.inner.create_ah(Gid(a.grh.dgid.0));
    let ah = IbvAh { context: p.c_context(), pd, handle: AHS.next_handle() };
    p.users.fetch_add(1, Ordering::AcqRel);
    Ok(AHS.adopt(Box::new(UroceAh { ah, inner, pd: p })).cast())
}

#[no_mangle]
pub extern "C" fn ibv_create_ah(pd: *mut IbvPd, attr: *mut IbvAhAttr) -> *mut IbvAh {
    guard(ptr::null_mut(), || null_on_err(create_ah(pd, attr)))
}
symver!(ibv_create_ah, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_destroy_ah(ah: *mut IbvAh) -> c_int {
    guard(libc::EIO, || match AHS.release(ah.cast::<UroceAh>(), |_| Ok(())) {
        Ok(a) => {
            a.pd.users.fetch_sub(1, Ordering::AcqRel);
            0
        }
        Err(e) => e,
    })
}
symver!(ibv_destroy_ah, "IBVERBS_1.1");

/// The GRH's two addresses and its flow label, traffic class and hop limit,
/// as RoCE v2 puts them in the 40 bytes before a UD receive's data: an IPv6
/// header, or for IPv4 its 20-byte header in the second half.
struct ReceivedGrh {
    sgid: [u8; 16],
    dgid: [u8; 16],
    flow_label: u32,
    traffic_class: u8,
    hop_limit: u8,
}

fn v4_mapped(addr: &[u8]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&addr[..4]);
    g
}

fn parse_grh(grh: &[u8; 40]) -> Option<ReceivedGrh> {
    let v4 = &grh[20..];
    if v4[0] == 0x45 {
        return Some(ReceivedGrh {
            sgid: v4_mapped(&v4[12..16]),
            dgid: v4_mapped(&v4[16..20]),
            flow_label: 0,
            traffic_class: v4[1],
            hop_limit: 0xff,
        });
    }
    if grh[0] >> 4 != 6 {
        return None;
    }
    let word = u32::from_be_bytes([grh[0], grh[1], grh[2], grh[3]]);
    Some(ReceivedGrh {
        sgid: grh[8..24].try_into().ok()?,
        dgid: grh[24..40].try_into().ok()?,
        flow_label: word & 0xf_ffff,
        traffic_class: (word >> 20) as u8,
        hop_limit: 0xff,
    })
}

/// The index of `gid` in the context's GID table.
fn sgid_index_of(ctx: *mut IbvContext, gid: &[u8; 16]) -> Option<u8> {
    let c = context_of(ctx)?;
    let len = c.ctx.query_port().gid_tbl_len;
    (0..len.min(256)).find(|i| c.ctx.query_gid(*i as usize).is_ok_and(|g| &g.0 == gid)).map(|i| i as u8)
}

fn init_ah_from_wc(
    ctx: *mut IbvContext,
    port: u8,
    wc: *const IbvWc,
    grh: *const [u8; 40],
    attr: *mut IbvAhAttr,
) -> Result<(), c_int> {
    // SAFETY: wc and attr are NULL or the caller's structs.
    let (w, out) = unsafe { (wc.as_ref(), attr.as_mut()) };
    let (Some(w), Some(out)) = (w, out) else { return Err(libc::EINVAL) };
    if w.wc_flags & IBV_WC_GRH == 0 || grh.is_null() {
        explain("ibv_init_ah_from_wc", "the completion carries no GRH (IBV_WC_GRH): RoCE needs one to answer");
        return Err(libc::EINVAL);
    }
    // SAFETY: grh points at the 40 bytes the receive put before its data.
    let g = parse_grh(unsafe { &*grh }).ok_or_else(|| {
        explain("ibv_init_ah_from_wc", "the 40 bytes given are neither an IPv6 nor an IPv4 header");
        libc::EINVAL
    })?;
    let sgid_index = sgid_index_of(ctx, &g.dgid).ok_or_else(|| {
        explain("ibv_init_ah_from_wc", "the datagram's destination is none of this device's GIDs");
        libc::EINVAL
    })?;
    *out = IbvAhAttr {
        grh: IbvGlobalRoute {
            dgid: IbvGid(g.sgid),
            flow_label: g.flow_label,
            sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
        },
        dlid: w.slid,
        sl: w.sl,
        src_path_bits: w.dlid_path_bits,
        static_rate: 0,
        is_global: 1,
        port_num: port,
    };
    Ok(())
}

#[no_mangle]
pub extern "C" fn ibv_init_ah_from_wc(
    ctx: *mut IbvContext,
    port: u8,
    wc: *mut IbvWc,
    grh: *mut [u8; 40],
    attr: *mut IbvAhAttr,
) -> c_int {
    guard(-1, || match init_ah_from_wc(ctx, port, wc, grh, attr) {
        Ok(()) => 0,
        Err(e) => {
            super::set_errno(e);
            -1
        }
    })
}
symver!(ibv_init_ah_from_wc, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_create_ah_from_wc(pd: *mut IbvPd, wc: *mut IbvWc, grh: *mut [u8; 40], port: u8) -> *mut IbvAh {
    guard(ptr::null_mut(), || {
        let p = PDS.get(pd.cast::<UrocePd>()).ok_or(libc::EINVAL);
        let made = p.and_then(|p| {
            // SAFETY: all-zero is a valid ibv_ah_attr.
            let mut attr: IbvAhAttr = unsafe { core::mem::zeroed() };
            init_ah_from_wc(p.c_context(), port, wc, grh, &mut attr)?;
            create_ah(pd, &attr)
        });
        null_on_err(made)
    })
}
symver!(ibv_create_ah_from_wc, "IBVERBS_1.1");
