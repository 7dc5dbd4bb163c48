//! The C structures of rdma-core 44's `<infiniband/verbs.h>` (and
//! `driver.h`'s `verbs_device`) that programs read, write or call through:
//! their layouts are the ABI, so each is `#[repr(C)]` with its size and every
//! field a program touches checked against the header's offsets at compile
//! time (`tests/c_layout.rs` checks them again against the installed headers).

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::mem::{offset_of, size_of};

/// Any function pointer in a table a C program calls through; `None` is NULL.
pub type Slot = Option<unsafe extern "C" fn()>;

/// `enum ibv_node_type`: IBV_NODE_CA.
pub const IBV_NODE_CA: c_int = 1;
/// `enum ibv_transport_type`: IBV_TRANSPORT_IB (RoCE is IB transport).
pub const IBV_TRANSPORT_IB: c_int = 0;
/// `IBV_SYSFS_PATH_MAX` (driver.h): the longest sysfs path libibverbs keeps.
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `struct ibv_device` (verbs.h:1940).
#[repr(C)]
pub struct IbvDevice {
    pub _ops: [*mut c_void; 2],
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; 64],
    pub dev_name: [c_char; 64],
    pub dev_path: [c_char; 256],
    pub ibdev_path: [c_char; 256],
}

/// `struct verbs_device` (driver.h:290), as far as providers look: libmlx5's
/// and libefa's `*dv_*` calls read `ops` just past the `ibv_device` to ask
/// whether a device is theirs; NULL says it is not.
#[repr(C)]
pub struct VerbsDevice {
    pub device: IbvDevice,
    pub ops: *const c_void,
    pub refcount: u32,
    pub entry: [*mut c_void; 2],
    pub sysfs: *mut c_void,
    pub core_support: u64,
}

/// `struct ibv_context_ops` (verbs.h:1955): 32 slots, most of them the
/// `_compat_*` entries of libibverbs 1.0; the inline verbs call through the
/// named ones.
#[repr(C)]
pub struct IbvContextOps {
    pub compat_query_device: Slot,
    pub compat_query_port: Slot,
    pub compat_slots_2_to_6: [Slot; 5],
    pub alloc_mw: Slot,
    pub bind_mw: Slot,
    pub dealloc_mw: Slot,
    pub compat_slot_10: Slot,
    pub poll_cq: Slot,
    pub req_notify_cq: Slot,
    pub compat_slots_13_to_19: [Slot; 7],
    pub post_srq_recv: Slot,
    pub compat_slots_21_to_24: [Slot; 4],
    pub post_send: Slot,
    pub post_recv: Slot,
    pub compat_slots_27_to_31: [Slot; 5],
}

/// `pthread_mutex_t` on x86_64 glibc: 40 bytes, all zero when unlocked
/// (`PTHREAD_MUTEX_INITIALIZER`).
#[repr(C, align(8))]
pub struct PthreadMutex(pub [u8; 40]);

/// `pthread_cond_t` on x86_64 glibc: 48 bytes, zero-initialized.
#[repr(C, align(8))]
pub struct PthreadCond(pub [u8; 48]);

/// `struct ibv_context` (verbs.h:2054).
#[repr(C)]
pub struct IbvContext {
    pub device: *mut IbvDevice,
    pub ops: IbvContextOps,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: PthreadMutex,
    pub abi_compat: *mut c_void,
}

/// `__VERBS_ABI_IS_EXTENDED`: what `abi_compat` holds when a
/// `verbs_context` surrounds the `ibv_context`.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

/// `struct verbs_context` (verbs.h:2095): the extended ops sit *before* the
/// `ibv_context`, at negative offsets from the pointer programs hold, so
/// that the struct can grow at the front. The inline verbs use an op only if
/// `sz` covers it and it is not NULL.
#[repr(C)]
pub struct VerbsContext {
    pub query_port: Slot,
    pub advise_mr: Slot,
    pub alloc_null_mr: Slot,
    pub read_counters: Slot,
    pub attach_counters_point_flow: Slot,
    pub create_counters: Slot,
    pub destroy_counters: Slot,
    pub reg_dm_mr: Slot,
    pub alloc_dm: Slot,
    pub free_dm: Slot,
    pub modify_flow_action_esp: Slot,
    pub destroy_flow_action: Slot,
    pub create_flow_action_esp: Slot,
    pub modify_qp_rate_limit: Slot,
    pub alloc_parent_domain: Slot,
    pub dealloc_td: Slot,
    pub alloc_td: Slot,
    pub modify_cq: Slot,
    pub post_srq_ops: Slot,
    pub destroy_rwq_ind_table: Slot,
    pub create_rwq_ind_table: Slot,
    pub destroy_wq: Slot,
    pub modify_wq: Slot,
    pub create_wq: Slot,
    pub query_rt_values: Slot,
    pub create_cq_ex: Slot,
    pub priv_: *mut c_void,
    pub query_device_ex: Slot,
    pub ibv_destroy_flow: Slot,
    pub abi_placeholder2: Slot,
    pub ibv_create_flow: Slot,
    pub abi_placeholder1: Slot,
    pub open_qp: Slot,
    pub create_qp_ex: Slot,
    pub get_srq_num: Slot,
    pub create_srq_ex: Slot,
    pub open_xrcd: Slot,
    pub close_xrcd: Slot,
    pub abi_placeholder3: u64,
    /// `sizeof(struct verbs_context)` as the library laid it out.
    pub sz: usize,
    pub context: IbvContext,
}

/// `struct ibv_device_attr` (verbs.h:183).
#[repr(C)]
pub struct IbvDeviceAttr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: u32,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_port_attr` (verbs.h:417) as rdma-core 44 has it (52 bytes;
/// later releases append fields, which is why callers pass its size).
#[repr(C)]
pub struct IbvPortAttr {
    pub state: c_int,
    pub max_mtu: c_int,
    pub active_mtu: c_int,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// The bytes of `struct ibv_port_attr` the exported `ibv_query_port` writes:
/// `struct _compat_ibv_port_attr` (verbs.c:197), which ends before
/// `port_cap_flags2`.
pub const COMPAT_PORT_ATTR_LEN: usize = 48;

/// `struct ibv_gid_entry` (verbs.h:74).
#[repr(C)]
pub struct IbvGidEntry {
    pub gid: [u8; 16],
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

/// `enum ibv_gid_type`: IBV_GID_TYPE_ROCE_V2 (of `ibv_gid_entry`).
pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;
/// `enum ibv_gid_type_sysfs`: IBV_GID_TYPE_SYSFS_ROCE_V2 (of `ibv_query_gid_type`, driver.h:131).
pub const IBV_GID_TYPE_SYSFS_ROCE_V2: c_int = 1;
/// `enum ibv_port_state`: IBV_PORT_ACTIVE.
pub const IBV_PORT_ACTIVE: c_int = 4;
/// `IBV_LINK_LAYER_ETHERNET`.
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;
/// `enum ibv_atomic_cap`: IBV_ATOMIC_HCA.
pub const IBV_ATOMIC_HCA: c_int = 1;

/// `struct ibv_pd` (verbs.h:623).
#[repr(C)]
pub struct IbvPd {
    pub context: *mut IbvContext,
    pub handle: u32,
}

/// `struct ibv_async_event` (verbs.h:472): the object (`element`, a CQ, QP
/// or SRQ pointer) and what happened to it.
#[repr(C)]
pub struct IbvAsyncEvent {
    pub element: *mut c_void,
    pub event_type: c_int,
}

/// `enum ibv_event_type`: those uroce raises.
pub const IBV_EVENT_CQ_ERR: c_int = 0;
pub const IBV_EVENT_QP_FATAL: c_int = 1;
pub const IBV_EVENT_QP_REQ_ERR: c_int = 2;
pub const IBV_EVENT_QP_ACCESS_ERR: c_int = 3;
pub const IBV_EVENT_SQ_DRAINED: c_int = 5;
pub const IBV_EVENT_SRQ_LIMIT_REACHED: c_int = 15;
pub const IBV_EVENT_QP_LAST_WQE_REACHED: c_int = 16;

/// `struct ibv_ah` (verbs.h:1657).
#[repr(C)]
pub struct IbvAh {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub handle: u32,
}

/// `struct ibv_srq_attr` (verbs.h:772).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSrqAttr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr` (verbs.h:778).
#[repr(C)]
pub struct IbvSrqInitAttr {
    pub srq_context: *mut c_void,
    pub attr: IbvSrqAttr,
}

/// `struct ibv_srq_init_attr_ex` (verbs.h:803): `ibv_srq_init_attr`'s
/// fields first, so a BASIC one is made as that.
#[repr(C)]
pub struct IbvSrqInitAttrEx {
    pub srq_context: *mut c_void,
    pub attr: IbvSrqAttr,
    pub comp_mask: u32,
    pub srq_type: u32,
    pub pd: *mut IbvPd,
    pub xrcd: *mut c_void,
    pub cq: *mut c_void,
    /// `struct ibv_tm_cap`: max_num_tags, max_ops.
    pub tm_cap: [u32; 2],
}

/// `enum ibv_srq_init_attr_mask` (verbs.h).
pub const IBV_SRQ_INIT_ATTR_TYPE: u32 = 1 << 0;
pub const IBV_SRQ_INIT_ATTR_PD: u32 = 1 << 1;
/// `enum ibv_srq_type`: the only one uroce (and rxe) makes.
pub const IBV_SRQT_BASIC: u32 = 0;

/// `struct ibv_srq` (verbs.h:1215).
#[repr(C)]
pub struct IbvSrq {
    pub context: *mut IbvContext,
    pub srq_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub handle: u32,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub events_completed: u32,
}

/// `enum ibv_srq_attr_mask`.
pub const IBV_SRQ_MAX_WR: c_int = 1;
pub const IBV_SRQ_LIMIT: c_int = 2;

/// `enum ibv_wc_flags`: IBV_WC_GRH (the first 40 bytes of a UD receive are the GRH).
pub const IBV_WC_GRH: u32 = 1;

/// `struct ibv_mr` (verbs.h:661).
#[repr(C)]
pub struct IbvMr {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_mw` (verbs.h:714).
#[repr(C)]
pub struct IbvMw {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub rkey: u32,
    pub handle: u32,
    /// `enum ibv_mw_type`.
    pub mw_type: c_int,
}

/// `struct ibv_mw_bind_info` (verbs.h:629).
#[repr(C)]
pub struct IbvMwBindInfo {
    pub mr: *mut IbvMr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: u32,
}

/// `struct ibv_mw_bind` (verbs.h:1274), what `ibv_bind_mw` takes.
#[repr(C)]
pub struct IbvMwBind {
    pub wr_id: u64,
    pub send_flags: u32,
    pub bind_info: IbvMwBindInfo,
}

/// `struct ibv_comp_channel` (verbs.h:1480).
#[repr(C)]
pub struct IbvCompChannel {
    pub context: *mut IbvContext,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq` (verbs.h:1482).
#[repr(C)]
pub struct IbvCq {
    pub context: *mut IbvContext,
    pub channel: *mut IbvCompChannel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_cq_ex` (verbs.h:1492): the CQ, then the polling calls of
/// `ibv_start_poll` / `ibv_next_poll` / `ibv_wc_read_*`, and the current
/// completion's status and `wr_id`.
#[repr(C)]
pub struct IbvCqEx {
    pub base: IbvCq,
    pub comp_mask: u32,
    pub status: c_int,
    pub wr_id: u64,
    pub start_poll: Slot,
    pub next_poll: Slot,
    pub end_poll: Slot,
    pub read_opcode: Slot,
    pub read_vendor_err: Slot,
    pub read_byte_len: Slot,
    pub read_imm_data: Slot,
    pub read_qp_num: Slot,
    pub read_src_qp: Slot,
    pub read_wc_flags: Slot,
    pub read_slid: Slot,
    pub read_sl: Slot,
    pub read_dlid_path_bits: Slot,
    pub read_completion_ts: Slot,
    pub read_cvlan: Slot,
    pub read_flow_tag: Slot,
    pub read_tm_info: Slot,
    pub read_completion_wallclock_ns: Slot,
}

/// `struct ibv_cq_init_attr_ex` (verbs.h:2018).
#[repr(C)]
pub struct IbvCqInitAttrEx {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut IbvCompChannel,
    pub comp_vector: u32,
    pub wc_flags: u64,
    pub comp_mask: u32,
    pub flags: u32,
    pub parent_domain: *mut IbvPd,
}

/// `struct ibv_poll_cq_attr` (verbs.h:1483).
#[repr(C)]
pub struct IbvPollCqAttr {
    pub comp_mask: u32,
}

/// `enum ibv_create_cq_wc_flags`: what `ibv_wc_read_*` a CQ serves; the
/// standard ones (byte length, immediate, QP number, source QP, SLID, SL,
/// DLID path bits) are uroce's.
pub const IBV_WC_STANDARD_FLAGS: u64 = 0x7f;
/// `enum ibv_cq_init_attr_mask`: IBV_CQ_INIT_ATTR_MASK_FLAGS, _PD.
pub const IBV_CQ_INIT_ATTR_MASK_FLAGS: u32 = 1 << 0;
/// `enum ibv_create_cq_attr_flags`: IBV_CREATE_CQ_ATTR_SINGLE_THREADED.
pub const IBV_CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1 << 0;

/// `struct ibv_wc` (verbs.h:573).
#[repr(C)]
pub struct IbvWc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// `imm_data` (network order) or `invalidated_rkey`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_qp_cap` (verbs.h:885).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvQpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr` (verbs.h:893).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvQpInitAttr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut c_void,
    pub cap: IbvQpCap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
}

/// `enum ibv_qp_type`: the three uroce serves.
pub const IBV_QPT_RC: c_int = 2;
pub const IBV_QPT_UC: c_int = 3;
pub const IBV_QPT_UD: c_int = 4;

/// `union ibv_gid`: 16 bytes, aligned as its `__be64` halves are.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct IbvGid(pub [u8; 16]);

/// `struct ibv_global_route` (verbs.h:736).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvGlobalRoute {
    pub dgid: IbvGid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr` (verbs.h:772).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvAhAttr {
    pub grh: IbvGlobalRoute,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_attr` (verbs.h:958).
#[repr(C)]
pub struct IbvQpAttr {
    pub qp_state: c_int,
    pub cur_qp_state: c_int,
    pub path_mtu: c_int,
    pub path_mig_state: c_int,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: IbvQpCap,
    pub ah_attr: IbvAhAttr,
    pub alt_ah_attr: IbvAhAttr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_qp` (verbs.h:1281).
#[repr(C)]
pub struct IbvQp {
    pub context: *mut IbvContext,
    pub qp_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    pub state: c_int,
    pub qp_type: c_int,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub events_completed: u32,
}

/// `struct ibv_qp_ex` (verbs.h:1272): the QP, then the work-request
/// builders perftest and pyverbs post with (`ibv_wr_*` call these slots).
#[repr(C)]
pub struct IbvQpEx {
    pub qp_base: IbvQp,
    pub comp_mask: u64,
    pub wr_id: u64,
    pub wr_flags: c_uint,
    pub wr_atomic_cmp_swp: Slot,
    pub wr_atomic_fetch_add: Slot,
    pub wr_bind_mw: Slot,
    pub wr_local_inv: Slot,
    pub wr_rdma_read: Slot,
    pub wr_rdma_write: Slot,
    pub wr_rdma_write_imm: Slot,
    pub wr_send: Slot,
    pub wr_send_imm: Slot,
    pub wr_send_inv: Slot,
    pub wr_send_tso: Slot,
    pub wr_set_ud_addr: Slot,
    pub wr_set_xrc_srqn: Slot,
    pub wr_set_inline_data: Slot,
    pub wr_set_inline_data_list: Slot,
    pub wr_set_sge: Slot,
    pub wr_set_sge_list: Slot,
    pub wr_start: Slot,
    pub wr_complete: Slot,
    pub wr_abort: Slot,
    pub wr_atomic_write: Slot,
}

/// `struct ibv_data_buf` (verbs.h:1112): one piece of inline data.
#[repr(C)]
pub struct IbvDataBuf {
    pub addr: *mut c_void,
    pub length: usize,
}

/// `struct ibv_rx_hash_conf` (verbs.h:957).
#[repr(C)]
pub struct IbvRxHashConf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex` (verbs.h:966): `ibv_qp_init_attr`, then more.
#[repr(C)]
pub struct IbvQpInitAttrEx {
    pub qp_context: *mut c_void,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut c_void,
    pub cap: IbvQpCap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut IbvPd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: IbvRxHashConf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

/// `enum ibv_qp_init_attr_mask`.
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
pub const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

/// `enum ibv_qp_create_send_ops_flags`.
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
pub const IBV_QP_EX_WITH_SEND: u64 = 1 << 2;
pub const IBV_QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 1 << 4;
pub const IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
pub const IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
pub const IBV_QP_EX_WITH_LOCAL_INV: u64 = 1 << 7;
pub const IBV_QP_EX_WITH_BIND_MW: u64 = 1 << 8;
pub const IBV_QP_EX_WITH_SEND_WITH_INV: u64 = 1 << 9;
pub const IBV_QP_EX_WITH_ATOMIC_WRITE: u64 = 1 << 12;

/// `struct ibv_sge` (verbs.h:1087).
#[repr(C)]
pub struct IbvSge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `struct ibv_send_wr` (verbs.h:1093): the `wr` union read as its three
/// views by offset (`rdma`, `atomic`, `ud`).
#[repr(C)]
pub struct IbvSendWr {
    pub wr_id: u64,
    pub next: *mut IbvSendWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
    pub opcode: c_int,
    pub send_flags: c_uint,
    /// `imm_data` (network order) or `invalidate_rkey`.
    pub imm_data: u32,
    /// rdma: remote_addr; atomic: remote_addr; ud: ah.
    pub wr_0: u64,
    /// rdma: rkey (low half); atomic: compare_add; ud: remote_qpn, remote_qkey.
    pub wr_8: u64,
    /// atomic: swap.
    pub wr_16: u64,
    /// atomic: rkey.
    pub wr_24: u32,
    pub _pad: u32,
    pub qp_type_xrc: u32,
    pub _pad2: u32,
    pub bind_mw_or_tso: [u64; 6],
}

/// `enum ibv_wr_opcode`.
pub const IBV_WR_RDMA_WRITE: c_int = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: c_int = 1;
pub const IBV_WR_SEND: c_int = 2;
pub const IBV_WR_SEND_WITH_IMM: c_int = 3;
pub const IBV_WR_RDMA_READ: c_int = 4;
pub const IBV_WR_ATOMIC_CMP_AND_SWP: c_int = 5;
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: c_int = 6;
pub const IBV_WR_LOCAL_INV: c_int = 7;
pub const IBV_WR_BIND_MW: c_int = 8;
pub const IBV_WR_SEND_WITH_INV: c_int = 9;

/// `struct ibv_recv_wr` (verbs.h:1144).
#[repr(C)]
pub struct IbvRecvWr {
    pub wr_id: u64,
    pub next: *mut IbvRecvWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
}

const _: () = {
    assert!(size_of::<IbvDevice>() == 664);
    assert!(size_of::<IbvMw>() == 32);
    assert!(offset_of!(IbvMw, mw_type) == 24);
    assert!(size_of::<IbvMwBindInfo>() == 32);
    assert!(size_of::<IbvMwBind>() == 48);
    assert!(offset_of!(IbvMwBind, bind_info) == 16);
    assert!(offset_of!(IbvSendWr, bind_mw_or_tso) == 80);
    assert!(offset_of!(IbvDevice, node_type) == 16);
    assert!(offset_of!(IbvDevice, name) == 24);
    assert!(offset_of!(IbvDevice, dev_name) == 88);
    assert!(offset_of!(IbvDevice, dev_path) == 152);
    assert!(offset_of!(IbvDevice, ibdev_path) == 408);
    assert!(offset_of!(VerbsDevice, ops) == 664);
    assert!(size_of::<IbvContextOps>() == 256);
    assert!(offset_of!(IbvContextOps, alloc_mw) == 56);
    assert!(offset_of!(IbvContextOps, dealloc_mw) == 72);
    assert!(offset_of!(IbvContextOps, poll_cq) == 88);
    assert!(offset_of!(IbvContextOps, req_notify_cq) == 96);
    assert!(offset_of!(IbvContextOps, post_srq_recv) == 160);
    assert!(offset_of!(IbvContextOps, post_send) == 200);
    assert!(offset_of!(IbvContextOps, post_recv) == 208);
    assert!(size_of::<IbvContext>() == 328);
    assert!(offset_of!(IbvContext, cmd_fd) == 264);
    assert!(offset_of!(IbvContext, async_fd) == 268);
    assert!(offset_of!(IbvContext, num_comp_vectors) == 272);
    assert!(offset_of!(IbvContext, mutex) == 280);
    assert!(offset_of!(IbvContext, abi_compat) == 320);
    assert!(size_of::<VerbsContext>() == 648);
    assert!(offset_of!(VerbsContext, context) == 320);
    assert!(offset_of!(VerbsContext, create_cq_ex) == 320 - 120);
    assert!(offset_of!(VerbsContext, query_device_ex) == 320 - 104);
    assert!(offset_of!(VerbsContext, create_qp_ex) == 320 - 56);
    assert!(offset_of!(VerbsContext, sz) == 320 - 8);
    assert!(size_of::<IbvSrqInitAttrEx>() == 64);
    assert!(offset_of!(IbvSrqInitAttrEx, comp_mask) == 20);
    assert!(offset_of!(IbvSrqInitAttrEx, pd) == 32);
    assert!(size_of::<IbvDeviceAttr>() == 232);
    assert!(offset_of!(IbvDeviceAttr, atomic_cap) == 164);
    assert!(offset_of!(IbvDeviceAttr, max_pkeys) == 224);
    assert!(offset_of!(IbvDeviceAttr, phys_port_cnt) == 227);
    assert!(size_of::<IbvPortAttr>() == 52);
    assert!(offset_of!(IbvPortAttr, lid) == 34);
    assert!(offset_of!(IbvPortAttr, active_width) == 43);
    assert!(offset_of!(IbvPortAttr, link_layer) == 46);
    assert!(offset_of!(IbvPortAttr, port_cap_flags2) == 48);
    assert!(size_of::<IbvGidEntry>() == 32);
    assert!(size_of::<IbvPd>() == 16);
    assert!(size_of::<IbvAsyncEvent>() == 16);
    assert!(size_of::<IbvAh>() == 24);
    assert!(size_of::<IbvSrqAttr>() == 12);
    assert!(size_of::<IbvSrqInitAttr>() == 24);
    assert!(size_of::<IbvSrq>() == 128);
    assert!(offset_of!(IbvSrq, events_completed) == 120);
    assert!(size_of::<IbvMr>() == 48);
    assert!(offset_of!(IbvMr, lkey) == 36);
    assert!(offset_of!(IbvMr, rkey) == 40);
    assert!(size_of::<IbvCompChannel>() == 16);
    assert!(offset_of!(IbvCompChannel, fd) == 8);
    assert!(size_of::<IbvCq>() == 128);
    assert!(offset_of!(IbvCq, cqe) == 28);
    assert!(offset_of!(IbvCq, cond) == 72);
    assert!(offset_of!(IbvCq, comp_events_completed) == 120);
    assert!(size_of::<IbvCqEx>() == 288);
    assert!(offset_of!(IbvCqEx, status) == 132);
    assert!(offset_of!(IbvCqEx, start_poll) == 144);
    assert!(size_of::<IbvCqInitAttrEx>() == 56);
    assert!(size_of::<IbvWc>() == 48);
    assert!(offset_of!(IbvWc, wc_flags) == 36);
    assert!(offset_of!(IbvWc, sl) == 44);
    assert!(size_of::<IbvQpInitAttr>() == 64);
    assert!(offset_of!(IbvQpInitAttr, qp_type) == 52);
    assert!(size_of::<IbvAhAttr>() == 32);
    assert!(offset_of!(IbvAhAttr, is_global) == 29);
    assert!(size_of::<IbvQpAttr>() == 144);
    assert!(offset_of!(IbvQpAttr, ah_attr) == 56);
    assert!(offset_of!(IbvQpAttr, pkey_index) == 120);
    assert!(offset_of!(IbvQpAttr, rnr_retry) == 132);
    assert!(offset_of!(IbvQpAttr, rate_limit) == 136);
    assert!(size_of::<IbvQp>() == 160);
    assert!(offset_of!(IbvQp, qp_num) == 52);
    assert!(offset_of!(IbvQp, events_completed) == 152);
    assert!(size_of::<IbvQpEx>() == 352);
    assert!(offset_of!(IbvQpEx, wr_flags) == 176);
    assert!(offset_of!(IbvQpEx, wr_start) == 320);
    assert!(size_of::<IbvQpInitAttrEx>() == 136);
    assert!(offset_of!(IbvQpInitAttrEx, comp_mask) == 60);
    assert!(offset_of!(IbvQpInitAttrEx, send_ops_flags) == 128);
    assert!(size_of::<IbvSendWr>() == 128);
    assert!(offset_of!(IbvSendWr, wr_0) == 40);
    assert!(offset_of!(IbvSendWr, qp_type_xrc) == 72);
    assert!(size_of::<IbvRecvWr>() == 32);
};
