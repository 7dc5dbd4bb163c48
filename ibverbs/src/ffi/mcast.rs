//! Multicast: `ibv_attach_mcast` and `ibv_detach_mcast`, and librdmacm's
//! `rdma_join_multicast`, `rdma_join_multicast_ex` and `rdma_leave_multicast`
//! (the join attaches the ID's QP, as librdmacm does when MULTICAST_JOIN
//! is read).

use super::abi::{IbvGid, IbvQp};
use super::cm::{any_addr_arg, cm_call, id_of, UroceCmId};
use super::cm_sync::await_if_sync;
use super::qp::{UroceQp, QPS};
use super::{guard, refused, symver};
use crate::explain::explain;
use core::ffi::{c_int, c_void};
use uroce_verbs::rdma_cm::CmEventType;
use uroce_verbs::Gid;

/// `struct rdma_cm_join_mc_attr_ex` (rdma_cma.h).
#[repr(C)]
pub struct RdmaCmJoinMcAttrEx {
    pub comp_mask: u32,
    pub join_flags: u32,
    pub addr: *mut libc::sockaddr,
}

/// `enum rdma_cm_join_mc_attr_mask`.
const RDMA_CM_JOIN_MC_ATTR_ADDRESS: u32 = 1 << 0;
const RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS: u32 = 1 << 1;
/// `enum rdma_cm_mc_join_flags`.
const RDMA_MC_JOIN_FLAG_FULLMEMBER: u32 = 0;
const RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER: u32 = 1;

/// The GID C passed.
fn gid_arg(gid: *const IbvGid) -> Option<Gid> {
    // SAFETY: gid is NULL or the caller's union ibv_gid.
    unsafe { gid.as_ref() }.map(|g| Gid(g.0))
}

#[no_mangle]
pub extern "C" fn ibv_attach_mcast(qp: *mut IbvQp, gid: *const IbvGid, lid: u16) -> c_int {
    let _ = lid; // RoCE has no LIDs
    guard(libc::EIO, || {
        let (Some(q), Some(g)) = (QPS.get(qp.cast::<UroceQp>()), gid_arg(gid)) else { return libc::EINVAL };
        q.inner.attach_mcast(g).map_or_else(refused("ibv_attach_mcast"), |_| 0)
    })
}
symver!(ibv_attach_mcast, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_detach_mcast(qp: *mut IbvQp, gid: *const IbvGid, lid: u16) -> c_int {
    let _ = lid;
    guard(libc::EIO, || {
        let (Some(q), Some(g)) = (QPS.get(qp.cast::<UroceQp>()), gid_arg(gid)) else { return libc::EINVAL };
        q.inner.detach_mcast(g).map_or_else(refused("ibv_detach_mcast"), |_| 0)
    })
}
symver!(ibv_detach_mcast, "IBVERBS_1.1");

/// Joins `addr` on `id` with `context` (what MULTICAST_JOIN hands back).
fn join(id: *mut c_void, addr: *const libc::sockaddr, send_only: bool, context: *mut c_void) -> Result<(), c_int> {
    let i = id_of(id.cast())?;
    let Some(group) = any_addr_arg(addr, "rdma_join_multicast")? else {
        explain("rdma_join_multicast", "no address: give the group's");
        return Err(libc::EINVAL);
    };
    i.joins.lock().unwrap_or_else(|p| p.into_inner()).push((group.ip(), context as usize));
    if let Err(e) = i.inner.join_multicast(group.ip(), send_only).map_err(refused("rdma_join_multicast")) {
        forget(i, group.ip());
        return Err(e);
    }
    await_if_sync(i, CmEventType::MulticastJoin)
}

fn forget(i: &UroceCmId, group: std::net::IpAddr) {
    i.joins.lock().unwrap_or_else(|p| p.into_inner()).retain(|(g, _)| *g != group);
}

#[no_mangle]
pub extern "C" fn rdma_join_multicast(id: *mut c_void, addr: *mut libc::sockaddr, context: *mut c_void) -> c_int {
    cm_call(|| join(id, addr, false, context))
}
symver!(rdma_join_multicast, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_join_multicast_ex(
    id: *mut c_void,
    attr: *mut RdmaCmJoinMcAttrEx,
    context: *mut c_void,
) -> c_int {
    cm_call(|| {
        // SAFETY: attr is NULL or the caller's struct rdma_cm_join_mc_attr_ex.
        let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
        let wanted = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
        if a.comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS == 0 || a.comp_mask & !wanted != 0 {
            explain("rdma_join_multicast_ex", "comp_mask: RDMA_CM_JOIN_MC_ATTR_ADDRESS, and JOIN_FLAGS if any");
            return Err(libc::EINVAL);
        }
        let flags = if a.comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS != 0 { a.join_flags } else { 0 };
        let send_only = match flags {
            RDMA_MC_JOIN_FLAG_FULLMEMBER => false,
            RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER => true,
            other => {
                explain("rdma_join_multicast_ex", &format!("join_flags {other}: FULLMEMBER or SENDONLY_FULLMEMBER"));
                return Err(libc::EINVAL);
            }
        };
        join(id, a.addr, send_only, context)
    })
}
symver!(rdma_join_multicast_ex, "RDMACM_1.1");

#[no_mangle]
pub extern "C" fn rdma_leave_multicast(id: *mut c_void, addr: *mut libc::sockaddr) -> c_int {
    cm_call(|| {
        let i = id_of(id.cast())?;
        let group = any_addr_arg(addr, "rdma_leave_multicast")?.ok_or(libc::EINVAL)?;
        i.inner.leave_multicast(group.ip()).map_err(refused("rdma_leave_multicast"))?;
        forget(i, group.ip());
        Ok(())
    })
}
symver!(rdma_leave_multicast, "RDMACM_1.0");

/// The context a join of `group` on `i` gave.
pub fn join_context(i: &UroceCmId, group: std::net::IpAddr) -> *mut c_void {
    let joins = i.joins.lock().unwrap_or_else(|p| p.into_inner());
    joins.iter().find(|(g, _)| *g == group).map_or(core::ptr::null_mut(), |(_, c)| *c as *mut c_void)
}
