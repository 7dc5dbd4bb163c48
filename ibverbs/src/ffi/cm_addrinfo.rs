//! `rdma_getaddrinfo` / `rdma_freeaddrinfo` (names resolved by the C
//! library's `getaddrinfo`; IP addresses only, no AF_IB) and
//! `rdma_set_option` (the type of service and the ACK timeout; others answer ENOSYS).

use super::abi::{IBV_QPT_RC, IBV_QPT_UD};
use super::cm::{cm_call, id_of};
use super::cm_abi::{RDMA_PS_TCP, RDMA_PS_UDP};
use super::{guard, set_errno, symver};
use crate::explain::explain;
use core::ffi::{c_char, c_int, c_void};
use core::mem::{offset_of, size_of};
use core::ptr;

/// `struct rdma_addrinfo` (rdma_cma.h:182).
#[repr(C)]
pub struct RdmaAddrinfo {
    pub ai_flags: c_int,
    pub ai_family: c_int,
    pub ai_qp_type: c_int,
    pub ai_port_space: c_int,
    pub ai_src_len: libc::socklen_t,
    pub ai_dst_len: libc::socklen_t,
    pub ai_src_addr: *mut libc::sockaddr,
    pub ai_dst_addr: *mut libc::sockaddr,
    pub ai_src_canonname: *mut c_char,
    pub ai_dst_canonname: *mut c_char,
    pub ai_route_len: usize,
    pub ai_route: *mut c_void,
    pub ai_connect_len: usize,
    pub ai_connect: *mut c_void,
    pub ai_next: *mut RdmaAddrinfo,
}

const _: () = {
    assert!(size_of::<RdmaAddrinfo>() == 96);
    assert!(offset_of!(RdmaAddrinfo, ai_src_addr) == 24);
    assert!(offset_of!(RdmaAddrinfo, ai_next) == 88);
};

/// `RAI_*` flags.
pub const RAI_PASSIVE: c_int = 1;
const RAI_NUMERICHOST: c_int = 2;
/// AF_IB: InfiniBand addresses, which a RoCE-only stack has none of.
const AF_IB: c_int = 27;

/// A malloc'd copy of `len` bytes of the socket address at `addr` (C frees it).
fn copy_addr(addr: *const libc::sockaddr, len: libc::socklen_t) -> Result<*mut libc::sockaddr, c_int> {
    // SAFETY: malloc of len bytes; NULL is checked.
    let out = unsafe { libc::malloc(len as usize) }.cast::<libc::sockaddr>();
    if out.is_null() {
        return Err(libc::ENOMEM);
    }
    // SAFETY: addr names len readable bytes (getaddrinfo's or the program's);
    // out has len writable bytes.
    unsafe { ptr::copy_nonoverlapping(addr.cast::<u8>(), out.cast::<u8>(), len as usize) };
    Ok(out)
}

/// The C library's hints for what the program asked.
fn libc_hints(h: &RdmaAddrinfo) -> libc::addrinfo {
    // SAFETY: all-zero is a valid addrinfo (no flags, any family, NULLs).
    let mut ai: libc::addrinfo = unsafe { core::mem::zeroed() };
    if h.ai_flags & RAI_PASSIVE != 0 {
        ai.ai_flags |= libc::AI_PASSIVE;
    }
    if h.ai_flags & RAI_NUMERICHOST != 0 {
        ai.ai_flags |= libc::AI_NUMERICHOST;
    }
    ai.ai_family = h.ai_family;
    let datagram = h.ai_qp_type == IBV_QPT_UD || h.ai_port_space == RDMA_PS_UDP;
    ai.ai_socktype = if datagram { libc::SOCK_DGRAM } else { libc::SOCK_STREAM };
    ai.ai_protocol = if datagram { libc::IPPROTO_UDP } else { libc::IPPROTO_TCP };
    ai
}

/// Fills `rai` from the first answer of `getaddrinfo(node, service)`; a
/// resolution failure is getaddrinfo's own code (as librdmacm returns it).
fn resolve(node: *const c_char, service: *const c_char, h: &RdmaAddrinfo, rai: &mut RdmaAddrinfo) -> Result<(), c_int> {
    let hints = libc_hints(h);
    let mut found: *mut libc::addrinfo = ptr::null_mut();
    // SAFETY: node and service are NULL or C strings; found receives a list
    // freed below.
    let rc = unsafe { libc::getaddrinfo(node, service, &hints, &mut found) };
    if rc != 0 || found.is_null() {
        return Err(if rc != 0 { rc } else { libc::EAI_NONAME });
    }
    // SAFETY: getaddrinfo succeeded: found is its list's first entry.
    let ai = unsafe { &*found };
    rai.ai_family = ai.ai_family;
    rai.ai_qp_type = if h.ai_qp_type != 0 {
        h.ai_qp_type
    } else if ai.ai_socktype == libc::SOCK_DGRAM {
        IBV_QPT_UD
    } else {
        IBV_QPT_RC
    };
    rai.ai_port_space = if h.ai_port_space != 0 {
        h.ai_port_space
    } else if ai.ai_protocol == libc::IPPROTO_UDP {
        RDMA_PS_UDP
    } else {
        RDMA_PS_TCP
    };
    let copied = copy_addr(ai.ai_addr, ai.ai_addrlen);
    if let Ok(addr) = copied {
        if h.ai_flags & RAI_PASSIVE != 0 {
            rai.ai_flags = RAI_PASSIVE;
            (rai.ai_src_addr, rai.ai_src_len) = (addr, ai.ai_addrlen);
        } else {
            (rai.ai_dst_addr, rai.ai_dst_len) = (addr, ai.ai_addrlen);
        }
    }
    // SAFETY: the list getaddrinfo made, freed once.
    unsafe { libc::freeaddrinfo(found) };
    copied.map(drop).map_err(|e| {
        set_errno(e);
        -1
    })
}

fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const RdmaAddrinfo,
    res: *mut *mut RdmaAddrinfo,
) -> Result<(), c_int> {
    let fail = |e: c_int| {
        set_errno(e);
        -1
    };
    // SAFETY: all-zero is a valid rdma_addrinfo (librdmacm's "no hints").
    let none: RdmaAddrinfo = unsafe { core::mem::zeroed() };
    // SAFETY: hints is NULL or the program's struct rdma_addrinfo.
    let h = unsafe { hints.as_ref() }.unwrap_or(&none);
    if res.is_null() || (node.is_null() && service.is_null() && hints.is_null()) {
        return Err(fail(libc::EINVAL));
    }
    if h.ai_family == AF_IB {
        explain("rdma_getaddrinfo", "AF_IB: uroce is RoCE, its addresses are IP addresses");
        return Err(fail(libc::EAFNOSUPPORT));
    }
    // SAFETY: calloc of one zeroed rdma_addrinfo (all-zero is valid); NULL checked.
    let rai = unsafe { libc::calloc(1, size_of::<RdmaAddrinfo>()) }.cast::<RdmaAddrinfo>();
    // SAFETY: rai is NULL (checked) or the zeroed struct just allocated.
    let Some(r) = (unsafe { rai.as_mut() }) else { return Err(fail(libc::ENOMEM)) };
    let filled = if !node.is_null() || !service.is_null() {
        resolve(node, service, h, r)
    } else {
        (r.ai_flags, r.ai_family, r.ai_qp_type, r.ai_port_space) =
            (h.ai_flags, h.ai_family, h.ai_qp_type, h.ai_port_space);
        match h.ai_dst_len {
            0 => Ok(()),
            n => copy_addr(h.ai_dst_addr, n).map(|a| (r.ai_dst_addr, r.ai_dst_len) = (a, n)).map_err(fail),
        }
    };
    let with_src = filled.and_then(|()| match (r.ai_src_len, h.ai_src_len) {
        (0, n) if n > 0 => copy_addr(h.ai_src_addr, n).map(|a| (r.ai_src_addr, r.ai_src_len) = (a, n)).map_err(fail),
        _ => Ok(()),
    });
    match with_src {
        Ok(()) => {
            // SAFETY: res is the caller's out-pointer (checked non-NULL).
            unsafe { *res = rai };
            Ok(())
        }
        Err(rc) => {
            rdma_freeaddrinfo(rai);
            Err(rc)
        }
    }
}

#[no_mangle]
pub extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const RdmaAddrinfo,
    res: *mut *mut RdmaAddrinfo,
) -> c_int {
    guard(-1, || getaddrinfo(node, service, hints, res).map_or_else(|rc| rc, |()| 0))
}
symver!(rdma_getaddrinfo, "RDMACM_1.0");

#[no_mangle]
pub extern "C" fn rdma_freeaddrinfo(res: *mut RdmaAddrinfo) {
    guard((), || {
        let mut at = res;
        while !at.is_null() {
            // SAFETY: a node rdma_getaddrinfo made with calloc, its members
            // with malloc (or NULL); each freed once.
            unsafe {
                let next = (*at).ai_next;
                for p in [
                    (*at).ai_src_addr.cast::<c_void>(),
                    (*at).ai_dst_addr.cast(),
                    (*at).ai_src_canonname.cast(),
                    (*at).ai_dst_canonname.cast(),
                    (*at).ai_route,
                    (*at).ai_connect,
                ] {
                    libc::free(p);
                }
                libc::free(at.cast());
                at = next;
            }
        }
    })
}
symver!(rdma_freeaddrinfo, "RDMACM_1.0");

/// `RDMA_OPTION_ID` and its `RDMA_OPTION_ID_TOS` and `_ACK_TIMEOUT`.
const RDMA_OPTION_ID: c_int = 0;
const RDMA_OPTION_ID_TOS: c_int = 0;
const RDMA_OPTION_ID_ACK_TIMEOUT: c_int = 3;

#[no_mangle]
pub extern "C" fn rdma_set_option(
    id: *mut super::cm_abi::RdmaCmId,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    cm_call(|| {
        id_of(id).and_then(|i| {
            let set: fn(&uroce_verbs::rdma_cm::CmId, u8) = match (level, optname) {
                (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS) => uroce_verbs::rdma_cm::CmId::set_tos,
                (RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT) => uroce_verbs::rdma_cm::CmId::set_ack_timeout,
                _ => {
                    explain(
                        "rdma_set_option",
                        &format!(
                            "level {level}, option {optname}: uroce serves the type of service and the ACK timeout"
                        ),
                    );
                    return Err(libc::ENOSYS);
                }
            };
            if optval.is_null() || optlen != 1 {
                return Err(libc::EINVAL);
            }
            // SAFETY: optval points at optlen (1) readable bytes.
            set(&i.inner, unsafe { *optval.cast::<u8>() });
            Ok(())
        })
    })
}
symver!(rdma_set_option, "RDMACM_1.0");
