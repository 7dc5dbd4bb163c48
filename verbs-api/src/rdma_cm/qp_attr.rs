//! The QP attributes a connection's CM exchange decides (`rdma_init_qp_attr`,
//! the kernel's `cm_init_qp_*_attr`): what the REQ and REP carried, on the
//! QP of each side.

use uroce_transport::engine::{required_mask, AccessFlags, AddressVector, Mtu, QpAttr, QpAttrMask, QpState, QpType};

/// Everything the QP of one end of a connection needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnInfo {
    pub av: AddressVector,
    pub path_mtu: Mtu,
    pub dest_qpn: u32,
    /// The PSN the peer starts with: what this side advertised.
    pub rq_psn: u32,
    /// The PSN this side starts with: what the peer advertised.
    pub sq_psn: u32,
    pub max_dest_rd_atomic: u8,
    pub max_rd_atomic: u8,
    /// Local ACK timeout (4.096 us x 2^t).
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
}

impl ConnInfo {
    /// What rdma_cm grants the peer: RDMA WRITE, and READ and atomics when
    /// this side serves any.
    pub fn access(&self) -> AccessFlags {
        access(self.max_dest_rd_atomic)
    }
}

pub(crate) fn access(responder_resources: u8) -> AccessFlags {
    if responder_resources > 0 {
        AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC
    } else {
        AccessFlags::REMOTE_WRITE
    }
}

/// INIT with P_Key index 0, port 1 and `access` (rdma_create_qp uses none;
/// the connection's come in an INIT -> INIT before RTR).
pub(crate) fn init(access: AccessFlags) -> (QpAttr, QpAttrMask) {
    let attr =
        QpAttr { qp_state: QpState::Init, pkey_index: 0, port_num: 1, qp_access_flags: access, ..Default::default() };
    (attr, mask(QpState::Reset, QpState::Init))
}

/// RTR: the path, the peer's QPN and PSN, responder resources; rdma_cm sets
/// no RNR delay (`min_rnr_timer` 0, the longest: 655 ms).
pub(crate) fn rtr(c: &ConnInfo) -> (QpAttr, QpAttrMask) {
    let attr = QpAttr {
        qp_state: QpState::Rtr,
        ah_attr: c.av,
        path_mtu: c.path_mtu,
        dest_qp_num: c.dest_qpn,
        rq_psn: c.rq_psn,
        max_dest_rd_atomic: c.max_dest_rd_atomic,
        min_rnr_timer: 0,
        ..Default::default()
    };
    (attr, mask(QpState::Init, QpState::Rtr))
}

/// RTS: our PSN, the ACK timeout and retries, initiator depth.
pub(crate) fn rts(c: &ConnInfo) -> (QpAttr, QpAttrMask) {
    let attr = QpAttr {
        qp_state: QpState::Rts,
        sq_psn: c.sq_psn,
        timeout: c.timeout,
        retry_cnt: c.retry_cnt,
        rnr_retry: c.rnr_retry,
        max_rd_atomic: c.max_rd_atomic,
        ..Default::default()
    };
    (attr, mask(QpState::Rtr, QpState::Rts))
}

/// What a modify of an rdma_cm QP (always RC) from `from` to `to` must carry.
fn mask(from: QpState, to: QpState) -> QpAttrMask {
    required_mask(QpType::Rc, from, to).expect("a valid RC transition")
}

/// The `enum ibv_mtu` value a REQ carries, as the engine's MTU (a value out
/// of range is 1024, the smallest path any RoCE port has).
pub(crate) fn mtu_from_wire(v: u8) -> Mtu {
    Mtu::from_enum(v).unwrap_or(Mtu::Mtu1024)
}
