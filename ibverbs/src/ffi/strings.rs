//! The small verbs that need no device: names of statuses, events, node
//! types and port states; link-rate conversions; fork (uroce pins nothing,
//! so a fork needs no preparation); rsocket's `rpoll`, which is `poll(2)`.

use super::symver;
use core::ffi::{c_char, c_int, CStr};

/// The name at `index` of `table`, or `unknown`.
fn name_of(table: &'static [&'static CStr], index: c_int, unknown: &'static CStr) -> *const c_char {
    usize::try_from(index).ok().and_then(|i| table.get(i)).copied().unwrap_or(unknown).as_ptr()
}

const WC_STATUS: [&CStr; 24] = [
    c"success",
    c"local length error",
    c"local QP operation error",
    c"local EE context operation error",
    c"local protection error",
    c"Work Request Flushed Error",
    c"memory management operation error",
    c"bad response error",
    c"local access error",
    c"remote invalid request error",
    c"remote access error",
    c"remote operation error",
    c"transport retry counter exceeded",
    c"RNR retry counter exceeded",
    c"local RDD violation error",
    c"remote invalid RD request",
    c"aborted error",
    c"invalid EE context number",
    c"invalid EE context state",
    c"fatal error",
    c"response timeout error",
    c"general error",
    c"TM error",
    c"TM rendezvous error",
];

#[no_mangle]
pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    name_of(&WC_STATUS, status, c"unknown")
}
symver!(ibv_wc_status_str, "IBVERBS_1.1");

const EVENT_TYPE: [&CStr; 20] = [
    c"CQ error",
    c"local work queue catastrophic error",
    c"invalid request local work queue error",
    c"local access violation work queue error",
    c"communication established",
    c"send queue drained",
    c"path migrated",
    c"path migration request error",
    c"local catastrophic error",
    c"port active",
    c"port error",
    c"LID change",
    c"P_Key change",
    c"SM change",
    c"SRQ catastrophic error",
    c"SRQ limit reached",
    c"last WQE reached",
    c"client reregistration",
    c"GID table change",
    c"WQ fatal",
];

#[no_mangle]
pub extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    name_of(&EVENT_TYPE, event, c"unknown")
}
symver!(ibv_event_type_str, "IBVERBS_1.1");

const NODE_TYPE: [&CStr; 8] = [
    c"unknown",
    c"InfiniBand channel adapter",
    c"InfiniBand switch",
    c"InfiniBand router",
    c"iWARP NIC",
    c"usNIC",
    c"usNIC UDP",
    c"unspecified",
];

#[no_mangle]
pub extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    name_of(&NODE_TYPE, node_type, c"unknown")
}
symver!(ibv_node_type_str, "IBVERBS_1.1");

const PORT_STATE: [&CStr; 6] = [c"no state change (NOP)", c"down", c"init", c"armed", c"active", c"active deferred"];

#[no_mangle]
pub extern "C" fn ibv_port_state_str(state: c_int) -> *const c_char {
    name_of(&PORT_STATE, state, c"unknown")
}
symver!(ibv_port_state_str, "IBVERBS_1.1");

const CM_EVENT: [&CStr; 16] = [
    c"RDMA_CM_EVENT_ADDR_RESOLVED",
    c"RDMA_CM_EVENT_ADDR_ERROR",
    c"RDMA_CM_EVENT_ROUTE_RESOLVED",
    c"RDMA_CM_EVENT_ROUTE_ERROR",
    c"RDMA_CM_EVENT_CONNECT_REQUEST",
    c"RDMA_CM_EVENT_CONNECT_RESPONSE",
    c"RDMA_CM_EVENT_CONNECT_ERROR",
    c"RDMA_CM_EVENT_UNREACHABLE",
    c"RDMA_CM_EVENT_REJECTED",
    c"RDMA_CM_EVENT_ESTABLISHED",
    c"RDMA_CM_EVENT_DISCONNECTED",
    c"RDMA_CM_EVENT_DEVICE_REMOVAL",
    c"RDMA_CM_EVENT_MULTICAST_JOIN",
    c"RDMA_CM_EVENT_MULTICAST_ERROR",
    c"RDMA_CM_EVENT_ADDR_CHANGE",
    c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
];

#[no_mangle]
pub extern "C" fn rdma_event_str(event: c_int) -> *const c_char {
    name_of(&CM_EVENT, event, c"UNKNOWN EVENT")
}
symver!(rdma_event_str, "RDMACM_1.0");

/// `enum ibv_rate` values with their multiple of 2.5 Gb/s (0: not a
/// multiple) and their rate in Mb/s.
const RATES: [(c_int, c_int, c_int); 21] = [
    (2, 1, 2500),
    (5, 2, 5000),
    (3, 4, 10000),
    (6, 8, 20000),
    (4, 12, 30000),
    (7, 16, 40000),
    (8, 24, 60000),
    (9, 32, 80000),
    (10, 48, 120000),
    (11, 0, 14062),
    (12, 0, 56250),
    (13, 0, 112500),
    (14, 0, 168750),
    (15, 0, 25781),
    (16, 0, 103125),
    (17, 0, 206250),
    (18, 0, 309375),
    (19, 0, 28125),
    (20, 0, 53125),
    (21, 0, 425000),
    (22, 0, 637500),
];

#[no_mangle]
pub extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate && r.1 != 0).map_or(-1, |r| r.1)
}
symver!(ibv_rate_to_mult, "IBVERBS_1.0");

#[no_mangle]
pub extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    RATES.iter().find(|r| r.1 == mult && mult != 0).map_or(0, |r| r.0)
}
symver!(mult_to_ibv_rate, "IBVERBS_1.0");

#[no_mangle]
pub extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}
symver!(ibv_rate_to_mbps, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    RATES.iter().find(|r| r.2 == mbps).map_or(0, |r| r.0)
}
symver!(mbps_to_ibv_rate, "IBVERBS_1.1");

/// Nothing to prepare: uroce does no DMA and pins no memory.
#[no_mangle]
pub extern "C" fn ibv_fork_init() -> c_int {
    0
}
symver!(ibv_fork_init, "IBVERBS_1.1");

/// `IBV_FORK_UNNEEDED`.
#[no_mangle]
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    2
}
symver!(ibv_is_fork_initialized, "IBVERBS_1.13");

#[no_mangle]
pub extern "C" fn ibv_dontfork_range() -> c_int {
    0
}
symver!(ibv_dontfork_range, "IBVERBS_1.1");

#[no_mangle]
pub extern "C" fn ibv_dofork_range() -> c_int {
    0
}
symver!(ibv_dofork_range, "IBVERBS_1.1");

/// rsocket's `rpoll` on ordinary descriptors is `poll(2)`, a cancellation
/// point as librdmacm's is (hence "C-unwind").
#[no_mangle]
pub extern "C-unwind" fn rpoll(fds: *mut libc::pollfd, nfds: libc::nfds_t, timeout: c_int) -> c_int {
    // SAFETY: the caller's array of nfds pollfds, passed on as poll(2) takes it.
    unsafe { super::cancellable::poll(fds, nfds, timeout) }
}
symver!(rpoll, "RDMACM_1.0");
