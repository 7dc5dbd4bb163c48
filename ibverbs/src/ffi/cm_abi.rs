//! The C structures of rdma-core 44's `<rdma/rdma_cma.h>` that programs read
//! and write: laid out as the header lays them out, checked at compile time
//! and against the installed header (`tests/c_layout.rs`).

use super::abi::{IbvAhAttr, IbvCompChannel, IbvContext, IbvCq, IbvGid, IbvPd, IbvQp, IbvSrq};
use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// `struct rdma_event_channel` (rdma_cma.h:118).
#[repr(C)]
pub struct RdmaEventChannel {
    pub fd: c_int,
}

/// `struct rdma_ib_addr` (rdma_cma.h:88).
#[repr(C)]
pub struct RdmaIbAddr {
    pub sgid: IbvGid,
    pub dgid: IbvGid,
    pub pkey: u16,
}

/// `struct rdma_addr` (rdma_cma.h:94): the two ends, each room for any
/// socket address, and their GIDs.
#[repr(C)]
pub struct RdmaAddr {
    pub src: libc::sockaddr_storage,
    pub dst: libc::sockaddr_storage,
    pub ibaddr: RdmaIbAddr,
}

/// `struct rdma_route` (rdma_cma.h:112).
#[repr(C)]
pub struct RdmaRoute {
    pub addr: RdmaAddr,
    pub path_rec: *mut c_void,
    pub num_paths: c_int,
}

/// `struct rdma_cm_id` (rdma_cma.h:122).
#[repr(C)]
pub struct RdmaCmId {
    pub verbs: *mut IbvContext,
    pub channel: *mut RdmaEventChannel,
    pub context: *mut c_void,
    pub qp: *mut IbvQp,
    pub route: RdmaRoute,
    pub ps: c_int,
    pub port_num: u8,
    pub event: *mut RdmaCmEvent,
    pub send_cq_channel: *mut IbvCompChannel,
    pub send_cq: *mut IbvCq,
    pub recv_cq_channel: *mut IbvCompChannel,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut IbvSrq,
    pub pd: *mut IbvPd,
    pub qp_type: c_int,
}

/// `struct rdma_conn_param` (rdma_cma.h:145).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RdmaConnParam {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct rdma_ud_param` (rdma_cma.h:158): an event's parameters for a
/// UD ID (a connection request's private data; on ESTABLISHED, the
/// service's address, QPN and Q_Key).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RdmaUdParam {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: IbvAhAttr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// The `param` union of `struct rdma_cm_event`: `conn` for RC IDs, `ud`
/// for UD ones (librdmacm's choice by the ID's QP type and the event).
#[repr(C)]
#[derive(Clone, Copy)]
pub union RdmaEventParam {
    pub conn: RdmaConnParam,
    pub ud: RdmaUdParam,
}

/// `struct rdma_cm_event` (rdma_cma.h:166).
#[repr(C)]
pub struct RdmaCmEvent {
    pub id: *mut RdmaCmId,
    pub listen_id: *mut RdmaCmId,
    pub event: c_int,
    pub status: c_int,
    pub param: RdmaEventParam,
}

/// `enum rdma_port_space`: RDMA_PS_TCP, reliable connections.
pub const RDMA_PS_TCP: c_int = 0x0106;
/// RDMA_PS_UDP and RDMA_PS_IPOIB: UD QPs, resolved by SIDR.
pub const RDMA_PS_UDP: c_int = 0x0111;
pub const RDMA_PS_IPOIB: c_int = 0x0002;
/// RDMA_PS_IB: native InfiniBand addressing (AF_IB), which uroce lacks.
pub const RDMA_PS_IB: c_int = 0x013F;

const _: () = {
    assert!(size_of::<RdmaAddr>() == 296);
    assert!(size_of::<RdmaRoute>() == 312);
    assert!(size_of::<RdmaCmId>() == 416);
    assert!(offset_of!(RdmaCmId, ps) == 344);
    assert!(offset_of!(RdmaCmId, qp_type) == 408);
    assert!(size_of::<RdmaConnParam>() == 24);
    assert!(size_of::<RdmaUdParam>() == 56);
    assert!(size_of::<RdmaCmEvent>() == 80);
};

/// The socket address C passed (`struct sockaddr *`, IPv4 or IPv6).
///
/// # Safety
/// `sa` is NULL or points at a `sockaddr_in` or `sockaddr_in6` as its
/// family says.
pub unsafe fn socket_addr_of(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    // SAFETY: the caller's contract: NULL or a socket address of its family.
    let family = i32::from(unsafe { sa.as_ref() }?.sa_family);
    match family {
        libc::AF_INET => {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let s = unsafe { &*sa.cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(s.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: an AF_INET6 address is a sockaddr_in6.
            let s = unsafe { &*sa.cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(s.sin6_addr.s6_addr);
            let port = u16::from_be(s.sin6_port);
            Some(SocketAddr::V6(SocketAddrV6::new(ip, port, s.sin6_flowinfo, s.sin6_scope_id)))
        }
        _ => None,
    }
}

/// `addr` as a C socket address in room for any.
pub fn storage_of(addr: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: all-zero is a valid sockaddr_storage (and AF_UNSPEC).
    let mut out: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is larger and as aligned as sockaddr_in.
            let s = unsafe { &mut *core::ptr::addr_of_mut!(out).cast::<libc::sockaddr_in>() };
            s.sin_family = libc::AF_INET as libc::sa_family_t;
            s.sin_port = a.port().to_be();
            s.sin_addr.s_addr = u32::from(*a.ip()).to_be();
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_storage is larger and as aligned as sockaddr_in6.
            let s = unsafe { &mut *core::ptr::addr_of_mut!(out).cast::<libc::sockaddr_in6>() };
            s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            s.sin6_port = a.port().to_be();
            s.sin6_addr.s6_addr = a.ip().octets();
            s.sin6_flowinfo = a.flowinfo();
            s.sin6_scope_id = a.scope_id();
        }
    }
    out
}

/// The GID RoCE v2 gives an IP address (IPv4-mapped for IPv4).
pub fn gid_of_ip(ip: IpAddr) -> IbvGid {
    IbvGid(match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    })
}
