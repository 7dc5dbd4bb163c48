//! The verbs uroce's drop-in does not serve yet, and the provider-private
//! names of IBVERBS_PRIVATE_34 that perftest's libmlx5/libefa import.
//! Debian's programs are linked with BIND_NOW, so each of these must exist
//! for a program to load at all; each answers as rdma-core does for a verb a
//! device lacks: EOPNOTSUPP as the return value, or NULL / -1 with errno
//! EOPNOTSUPP (rsocket's calls: ENOSYS), or nothing for the `void` ones.
//!
//! The functions take no parameters: on x86_64 (System V) a callee may ignore
//! the arguments its caller passed, and the caller cleans up (so variadic
//! callers of `__verbs_log` are fine too); only the return type matters.

use super::{set_errno, symver};
use core::ffi::{c_int, c_void};

macro_rules! returns_errno {
    ($($name:ident @ $node:literal),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name() -> c_int {
            libc::EOPNOTSUPP
        }
        symver!($name, $node);
    )*};
}

macro_rules! returns_null {
    ($($name:ident @ $node:literal),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name() -> *mut c_void {
            set_errno(libc::EOPNOTSUPP);
            core::ptr::null_mut()
        }
        symver!($name, $node);
    )*};
}

/// -1 as a C `long` is also -1 as an `int` (the low half of the register).
macro_rules! returns_minus_one {
    ($errno:expr; $($name:ident @ $node:literal),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name() -> isize {
            set_errno($errno);
            -1
        }
        symver!($name, $node);
    )*};
}

macro_rules! does_nothing {
    ($($name:ident @ $node:literal),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name() {}
        symver!($name, $node);
    )*};
}

returns_errno! {
    ibv_resolve_eth_l2_from_gid @ "IBVERBS_1.1",
    ibv_query_ece @ "IBVERBS_1.10",
    ibv_set_ece @ "IBVERBS_1.10",
}

returns_null! {
    ibv_import_device @ "IBVERBS_1.10",
    ibv_import_mr @ "IBVERBS_1.10",
    ibv_import_pd @ "IBVERBS_1.10",
    ibv_reg_dmabuf_mr @ "IBVERBS_1.12",
    ibv_import_dm @ "IBVERBS_1.13",
}

returns_minus_one! { libc::EOPNOTSUPP;
}

does_nothing! {
    ibv_copy_path_rec_from_kern @ "IBVERBS_1.0",
    ibv_copy_path_rec_to_kern @ "IBVERBS_1.0",
    ibv_copy_qp_attr_from_kern @ "IBVERBS_1.0",
    ibv_copy_ah_attr_from_kern @ "IBVERBS_1.1",
    ibv_unimport_mr @ "IBVERBS_1.10",
    ibv_unimport_pd @ "IBVERBS_1.10",
    ibv_unimport_dm @ "IBVERBS_1.13",
}

/// `ibv_query_qp_data_in_order` answers flags, not an errno: 0 says "not
/// guaranteed in order", which is true of a QP uroce cannot create yet.
#[no_mangle]
pub extern "C" fn ibv_query_qp_data_in_order() -> c_int {
    0
}
symver!(ibv_query_qp_data_in_order, "IBVERBS_1.14");

// --- IBVERBS_PRIVATE_34: the provider interface. No provider runs on
// uroce's devices; libmlx5 and libefa load, register (a no-op) and find that
// no device is theirs.

returns_errno! {
    execute_ioctl @ "IBVERBS_PRIVATE_34",
    ibv_cmd_advise_mr @ "IBVERBS_PRIVATE_34",
    ibv_cmd_alloc_dm @ "IBVERBS_PRIVATE_34",
    ibv_cmd_alloc_mw @ "IBVERBS_PRIVATE_34",
    ibv_cmd_alloc_pd @ "IBVERBS_PRIVATE_34",
    ibv_cmd_attach_mcast @ "IBVERBS_PRIVATE_34",
    ibv_cmd_close_xrcd @ "IBVERBS_PRIVATE_34",
    ibv_cmd_create_ah @ "IBVERBS_PRIVATE_34",
    ibv_cmd_create_counters @ "IBVERBS_PRIVATE_34",
    ibv_cmd_create_cq @ "IBVERBS_PRIVATE_34",
    ibv_cmd_create_cq_ex @ "IBVERBS_PRIVATE_34",
    ibv_cmd_create_flow @ "IBVERBS_PRIVATE_34",
    ibv_cmd_create_flow_action_esp @ "IBVERBS_PRIVATE_34",
    ibv_cmd_create_qp @ "IBVERBS_PRIVATE_34",
    ibv_cmd_create_qp_ex @ "IBVERBS_PRIVATE_34",
    ibv_cmd_create_qp_ex2 @ "IBVERBS_PRIVATE_34",
    ibv_cmd_create_rwq_ind_table @ "IBVERBS_PRIVATE_34",
    ibv_cmd_create_srq @ "IBVERBS_PRIVATE_34",
    ibv_cmd_create_srq_ex @ "IBVERBS_PRIVATE_34",
    ibv_cmd_create_wq @ "IBVERBS_PRIVATE_34",
    ibv_cmd_dealloc_mw @ "IBVERBS_PRIVATE_34",
    ibv_cmd_dealloc_pd @ "IBVERBS_PRIVATE_34",
    ibv_cmd_dereg_mr @ "IBVERBS_PRIVATE_34",
    ibv_cmd_destroy_ah @ "IBVERBS_PRIVATE_34",
    ibv_cmd_destroy_counters @ "IBVERBS_PRIVATE_34",
    ibv_cmd_destroy_cq @ "IBVERBS_PRIVATE_34",
    ibv_cmd_destroy_flow @ "IBVERBS_PRIVATE_34",
    ibv_cmd_destroy_flow_action @ "IBVERBS_PRIVATE_34",
    ibv_cmd_destroy_qp @ "IBVERBS_PRIVATE_34",
    ibv_cmd_destroy_rwq_ind_table @ "IBVERBS_PRIVATE_34",
    ibv_cmd_destroy_srq @ "IBVERBS_PRIVATE_34",
    ibv_cmd_destroy_wq @ "IBVERBS_PRIVATE_34",
    ibv_cmd_detach_mcast @ "IBVERBS_PRIVATE_34",
    ibv_cmd_free_dm @ "IBVERBS_PRIVATE_34",
    ibv_cmd_get_context @ "IBVERBS_PRIVATE_34",
    ibv_cmd_modify_cq @ "IBVERBS_PRIVATE_34",
    ibv_cmd_modify_flow_action_esp @ "IBVERBS_PRIVATE_34",
    ibv_cmd_modify_qp @ "IBVERBS_PRIVATE_34",
    ibv_cmd_modify_qp_ex @ "IBVERBS_PRIVATE_34",
    ibv_cmd_modify_srq @ "IBVERBS_PRIVATE_34",
    ibv_cmd_modify_wq @ "IBVERBS_PRIVATE_34",
    ibv_cmd_open_qp @ "IBVERBS_PRIVATE_34",
    ibv_cmd_open_xrcd @ "IBVERBS_PRIVATE_34",
    ibv_cmd_poll_cq @ "IBVERBS_PRIVATE_34",
    ibv_cmd_post_recv @ "IBVERBS_PRIVATE_34",
    ibv_cmd_post_send @ "IBVERBS_PRIVATE_34",
    ibv_cmd_post_srq_recv @ "IBVERBS_PRIVATE_34",
    ibv_cmd_query_context @ "IBVERBS_PRIVATE_34",
    ibv_cmd_query_device_any @ "IBVERBS_PRIVATE_34",
    ibv_cmd_query_mr @ "IBVERBS_PRIVATE_34",
    ibv_cmd_query_port @ "IBVERBS_PRIVATE_34",
    ibv_cmd_query_qp @ "IBVERBS_PRIVATE_34",
    ibv_cmd_query_srq @ "IBVERBS_PRIVATE_34",
    ibv_cmd_read_counters @ "IBVERBS_PRIVATE_34",
    ibv_cmd_reg_dm_mr @ "IBVERBS_PRIVATE_34",
    ibv_cmd_reg_dmabuf_mr @ "IBVERBS_PRIVATE_34",
    ibv_cmd_reg_mr @ "IBVERBS_PRIVATE_34",
    ibv_cmd_req_notify_cq @ "IBVERBS_PRIVATE_34",
    ibv_cmd_rereg_mr @ "IBVERBS_PRIVATE_34",
    ibv_cmd_resize_cq @ "IBVERBS_PRIVATE_34",
    verbs_open_device @ "IBVERBS_PRIVATE_34",
}

returns_null! {
    _verbs_init_and_alloc_context @ "IBVERBS_PRIVATE_34",
}

returns_minus_one! { libc::EOPNOTSUPP;
    ibv_read_ibdev_sysfs_file @ "IBVERBS_PRIVATE_34",
}

does_nothing! {
    __verbs_log @ "IBVERBS_PRIVATE_34",
    verbs_init_cq @ "IBVERBS_PRIVATE_34",
    verbs_register_driver_34 @ "IBVERBS_PRIVATE_34",
    verbs_set_ops @ "IBVERBS_PRIVATE_34",
    verbs_uninit_context @ "IBVERBS_PRIVATE_34",
}

/// `__ioctl_final_num_attrs`: an attribute count, 0.
#[no_mangle]
pub extern "C" fn __ioctl_final_num_attrs() -> core::ffi::c_uint {
    0
}
symver!(__ioctl_final_num_attrs, "IBVERBS_PRIVATE_34");

/// A flag providers set; nothing here reads it. An atomic so that it lives
/// in writable memory (C writes it).
#[no_mangle]
pub static verbs_allow_disassociate_destroy: core::sync::atomic::AtomicBool =
    core::sync::atomic::AtomicBool::new(false);
symver!(verbs_allow_disassociate_destroy, "IBVERBS_PRIVATE_34");

// --- librdmacm: not served yet. librdmacm's int calls return -1 with errno.

returns_minus_one! { libc::EOPNOTSUPP;
    rdma_notify @ "RDMACM_1.0",
    rdma_get_remote_ece @ "RDMACM_1.3",
    rdma_reject_ece @ "RDMACM_1.3",
    rdma_set_local_ece @ "RDMACM_1.3",
}

// rsocket: sockets over RDMA, which programs import (rping's common.h takes
// rpoll) but rarely call. rpoll is poll(2) (strings.rs); the rest ENOSYS.
returns_minus_one! { libc::ENOSYS;
    raccept @ "RDMACM_1.0",
    rbind @ "RDMACM_1.0",
    rclose @ "RDMACM_1.0",
    rconnect @ "RDMACM_1.0",
    rfcntl @ "RDMACM_1.0",
    rgetpeername @ "RDMACM_1.0",
    rgetsockname @ "RDMACM_1.0",
    rgetsockopt @ "RDMACM_1.0",
    riomap @ "RDMACM_1.0",
    riounmap @ "RDMACM_1.0",
    riowrite @ "RDMACM_1.0",
    rlisten @ "RDMACM_1.0",
    rread @ "RDMACM_1.0",
    rreadv @ "RDMACM_1.0",
    rrecv @ "RDMACM_1.0",
    rrecvfrom @ "RDMACM_1.0",
    rrecvmsg @ "RDMACM_1.0",
    rselect @ "RDMACM_1.0",
    rsend @ "RDMACM_1.0",
    rsendmsg @ "RDMACM_1.0",
    rsendto @ "RDMACM_1.0",
    rsetsockopt @ "RDMACM_1.0",
    rshutdown @ "RDMACM_1.0",
    rsocket @ "RDMACM_1.0",
    rwrite @ "RDMACM_1.0",
    rwritev @ "RDMACM_1.0",
}
