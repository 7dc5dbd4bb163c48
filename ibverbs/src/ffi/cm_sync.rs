//! Synchronous IDs, as librdmacm makes them for a NULL event channel: each
//! has a channel of its own, and the calls that raise an event
//! (`rdma_resolve_addr`, `rdma_resolve_route`, `rdma_connect`,
//! `rdma_accept`) wait for it, failing with its error (a rejection is
//! ECONNREFUSED). On them: `rdma_create_ep` / `rdma_destroy_ep`,
//! `rdma_get_request` (a passive endpoint's next connection, its QP made
//! from the endpoint's template), and `rdma_migrate_id`.

use super::abi::*;
use super::cm::{cm_call, create_qp, id_of, new_channel, UroceCmId, UroceEventChannel, EVENT_CHANNELS};
use super::cm_abi::*;
use super::cm_addrinfo::{RdmaAddrinfo, RAI_PASSIVE};
use super::cm_event::{rdma_ack_cm_event, rdma_get_cm_event};
use super::{guard, symver};
use crate::explain::explain;
use core::ffi::c_int;
use core::ptr;
use uroce_verbs::rdma_cm::CmEventType;

/// The next event on `channel`, taken and acked: its type, status and ID.
fn next_event(channel: &'static UroceEventChannel) -> Result<(c_int, c_int, *mut RdmaCmId), c_int> {
    let mut ev: *mut RdmaCmEvent = ptr::null_mut();
    cm_ok(rdma_get_cm_event(ptr::from_ref(channel).cast_mut().cast(), &mut ev))?;
    // SAFETY: rdma_get_cm_event returned this live event.
    let (kind, status, id) = unsafe { ((*ev).event, (*ev).status, (*ev).id) };
    rdma_ack_cm_event(ev);
    Ok((kind, status, id))
}

/// On a synchronous ID, waits for `want` (any other outcome is its error).
pub fn await_if_sync(i: &UroceCmId, want: CmEventType) -> Result<(), c_int> {
    if !i.is_sync() {
        return Ok(());
    }
    let (kind, status, _) = next_event(i.channel())?;
    match (kind == want.code(), status) {
        (true, 0) => Ok(()),
        _ if kind == CmEventType::Rejected.code() => Err(libc::ECONNREFUSED),
        (_, s) if s < 0 => Err(-s),
        (_, s) if s > 0 => Err(s),
        _ => Err(libc::EINVAL),
    }
}

fn create_ep(
    out: *mut *mut RdmaCmId,
    res: *const RdmaAddrinfo,
    pd: *mut IbvPd,
    attr: *mut IbvQpInitAttr,
) -> Result<(), c_int> {
    // SAFETY: res is NULL or an rdma_addrinfo from rdma_getaddrinfo.
    let r = unsafe { res.as_ref() }.ok_or(libc::EINVAL)?;
    if out.is_null() {
        return Err(libc::EINVAL);
    }
    let mut id: *mut RdmaCmId = ptr::null_mut();
    cm_ok(super::cm::rdma_create_id(ptr::null_mut(), &mut id, ptr::null_mut(), r.ai_port_space))?;
    let made = set_up_ep(id, r, pd, attr);
    match made {
        Ok(()) => {
            // SAFETY: out is the caller's out-pointer (checked non-NULL).
            unsafe { *out = id };
            Ok(())
        }
        Err(e) => {
            super::cm::rdma_destroy_id(id);
            Err(e)
        }
    }
}

/// A passive endpoint binds and keeps the QP template for the connections
/// `rdma_get_request` hands out; an active one resolves and makes its QP.
fn set_up_ep(id: *mut RdmaCmId, r: &RdmaAddrinfo, pd: *mut IbvPd, attr: *mut IbvQpInitAttr) -> Result<(), c_int> {
    let i = id_of(id)?;
    if r.ai_flags & RAI_PASSIVE != 0 {
        cm_ok(super::cm::rdma_bind_addr(id, r.ai_src_addr))?;
        // SAFETY: attr is NULL or the caller's struct ibv_qp_init_attr.
        if let Some(a) = unsafe { attr.as_ref() } {
            let template = IbvQpInitAttr { qp_type: qp_type_of(r), ..*a };
            *i.ep.lock().unwrap_or_else(|p| p.into_inner()) = Some((pd, template));
        }
        return Ok(());
    }
    cm_ok(super::cm::rdma_resolve_addr(id, r.ai_src_addr, r.ai_dst_addr, 2000))?;
    cm_ok(super::cm::rdma_resolve_route(id, 2000))?;
    // SAFETY: attr is NULL or the caller's struct ibv_qp_init_attr.
    match unsafe { attr.as_mut() } {
        None => Ok(()),
        Some(a) => {
            // As librdmacm: the QP's type is the address's.
            a.qp_type = qp_type_of(r);
            create_qp(id, pd, a)
        }
    }
}

/// The QP type an address calls for (RC unless it says).
fn qp_type_of(r: &RdmaAddrinfo) -> c_int {
    if r.ai_qp_type == 0 {
        IBV_QPT_RC
    } else {
        r.ai_qp_type
    }
}

/// A librdmacm call's -1 as the errno it set.
fn cm_ok(rc: c_int) -> Result<(), c_int> {
    match rc {
        0 => Ok(()),
        _ => Err(Some(super::errno()).filter(|&e| e != 0).unwrap_or(libc::EIO)),
    }
}

#[no_mangle]
pub extern "C" fn rdma_create_ep(
    id: *mut *mut RdmaCmId,
    res: *mut RdmaAddrinfo,
    pd: *mut IbvPd,
    attr: *mut IbvQpInitAttr,
) -> c_int {
    cm_call(|| create_ep(id, res, pd, attr))
}
symver!(rdma_create_ep, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_destroy_ep(id: *mut RdmaCmId) {
    guard((), || {
        if id_of(id).is_ok() {
            super::cm::rdma_destroy_qp(id);
            super::cm::rdma_destroy_id(id);
        }
    })
}
symver!(rdma_destroy_ep, "RDMACM_1.0");

fn get_request(listen: *mut RdmaCmId, out: *mut *mut RdmaCmId) -> Result<(), c_int> {
    let l = id_of(listen)?;
    if !l.is_sync() || out.is_null() {
        explain(
            "rdma_get_request",
            "the listener must be synchronous (rdma_create_ep, or rdma_create_id with no channel)",
        );
        return Err(libc::EINVAL);
    }
    let conn = loop {
        let (kind, _, id) = next_event(l.channel())?;
        if kind == CmEventType::ConnectRequest.code() {
            break id;
        }
        // Anything else about the listener is not a connection: the next.
    };
    let c = id_of(conn)?;
    // The connection is synchronous too, on a channel of its own.
    c.migrate(new_channel()?);
    c.set_sync(true);
    let template = *l.ep.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((pd, mut attr)) = template {
        if let Err(e) = create_qp(conn, pd, &mut attr) {
            super::cm::rdma_reject(conn, ptr::null(), 0);
            super::cm::rdma_destroy_id(conn);
            return Err(e);
        }
    }
    // SAFETY: out is the caller's out-pointer (checked non-NULL).
    unsafe { *out = conn };
    Ok(())
}

#[no_mangle]
pub extern "C" fn rdma_get_request(listen: *mut RdmaCmId, id: *mut *mut RdmaCmId) -> c_int {
    cm_call(|| get_request(listen, id))
}
symver!(rdma_get_request, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_migrate_id(id: *mut RdmaCmId, channel: *mut RdmaEventChannel) -> c_int {
    cm_call(|| {
        id_of(id).and_then(|i| {
            let to = match channel.is_null() {
                true => new_channel()?,
                false => EVENT_CHANNELS.get(channel.cast::<UroceEventChannel>()).ok_or(libc::EINVAL)?,
            };
            let (was_sync, from) = (i.is_sync(), i.channel());
            i.migrate(to);
            // Onto the program's channel, the ID is asynchronous from now
            // on: its calls leave their events there (libfabric resolves
            // an address synchronously, then migrates the ID and waits for
            // ROUTE_RESOLVED on its own channel). A synchronous ID's own
            // channel goes with the move, as in librdmacm.
            i.set_sync(channel.is_null());
            if was_sync && !ptr::eq(from, to) {
                super::cm::rdma_destroy_event_channel(from.as_c());
            }
            Ok(())
        })
    })
}
symver!(rdma_migrate_id, "RDMACM_1.0");
