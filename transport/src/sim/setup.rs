//! Creating and connecting QPs in a simulation, as `ibv_rc_pingpong` does.

use super::Sim;
use crate::engine::{
    required_mask, AccessFlags, AddressVector, CqHandle, Engine, Mtu, Pd, QpAttr, QpCap, QpInitAttr, QpState, QpType,
    SrqHandle,
};

/// The knobs of a test QP.
#[derive(Debug, Clone, Copy)]
pub struct QpOptions {
    pub qp_type: QpType,
    pub mtu: Mtu,
    /// Local ACK timeout exponent (4.096 us x 2^timeout).
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub access: AccessFlags,
    pub cq_size: usize,
    pub cap: QpCap,
    pub sq_sig_all: bool,
    pub qkey: u32,
    /// The initial PSN of both directions; `None` draws them from the seeds.
    pub start_psn: Option<u32>,
}

impl QpOptions {
    pub fn new(qp_type: QpType, mtu: Mtu) -> QpOptions {
        QpOptions {
            qp_type,
            mtu,
            timeout: 10,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            access: AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC
                | AccessFlags::FLUSH_GLOBAL
                | AccessFlags::FLUSH_PERSISTENT,
            cq_size: 4096,
            cap: QpCap { max_send_wr: 1024, max_recv_wr: 1024, ..QpCap::default() },
            sq_sig_all: false,
            qkey: 0x1111_1111,
            start_psn: None,
        }
    }
}

/// A QP with its PD and CQs.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint {
    pub pd: Pd,
    pub send_cq: CqHandle,
    pub recv_cq: CqHandle,
    pub qpn: u32,
}

/// A PD, two CQs and a QP in RESET (on `srq` when given).
pub fn create_endpoint(e: &mut Engine, o: &QpOptions, pd: Option<Pd>, srq: Option<SrqHandle>) -> Endpoint {
    let pd = pd.unwrap_or_else(|| e.alloc_pd());
    let send_cq = e.create_cq(o.cq_size);
    let recv_cq = e.create_cq(o.cq_size);
    create_qp_on(e, &Endpoint { pd, send_cq, recv_cq, qpn: 0 }, o, srq)
}

/// Another QP in RESET on `ep`'s PD and CQs (on `srq` when given).
pub fn create_qp_on(e: &mut Engine, ep: &Endpoint, o: &QpOptions, srq: Option<SrqHandle>) -> Endpoint {
    let (pd, send_cq, recv_cq) = (ep.pd, ep.send_cq, ep.recv_cq);
    let init = QpInitAttr { qp_type: o.qp_type, pd, send_cq, recv_cq, srq, cap: o.cap, sq_sig_all: o.sq_sig_all };
    let qpn = e.create_qp(init).expect("valid init attributes");
    Endpoint { pd, send_cq, recv_cq, qpn }
}

/// Takes QP `a.qpn` of node 0 and `b.qpn` of node 1 to RTS, each aimed at the
/// other, with random initial PSNs from the engines' seeds.
pub fn connect(sim: &mut Sim, a: &Endpoint, b: &Endpoint, o: &QpOptions) {
    let mut psn = [sim.engines[0].random_psn(), sim.engines[1].random_psn()];
    if let Some(p) = o.start_psn {
        psn = [p, p];
    }
    let ends = [(a.qpn, b.qpn), (b.qpn, a.qpn)];
    for (i, (local, remote)) in ends.into_iter().enumerate() {
        let dgid = sim.gids[1 - i];
        to_rts(&mut sim.engines[i], local, remote, dgid, psn[i], psn[1 - i], o);
    }
}

/// Takes UD QP `ep.qpn` of `e` to RTS on its own (a UD QP is aimed by each
/// send, not at one peer).
pub fn ready_ud(e: &mut Engine, ep: &Endpoint, o: &QpOptions) {
    to_rts(e, ep.qpn, 0, crate::engine::Gid::default(), 0, 0, o);
}

fn to_rts(e: &mut Engine, qpn: u32, remote: u32, dgid: crate::engine::Gid, sq_psn: u32, rq_psn: u32, o: &QpOptions) {
    let mut attr = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        qp_access_flags: o.access,
        qkey: o.qkey,
        path_mtu: o.mtu,
        dest_qp_num: remote,
        rq_psn,
        sq_psn,
        ah_attr: AddressVector { dgid, port_num: 1, hop_limit: 64, ..Default::default() },
        timeout: o.timeout,
        retry_cnt: o.retry_cnt,
        rnr_retry: o.rnr_retry,
        min_rnr_timer: o.min_rnr_timer,
        max_rd_atomic: o.max_rd_atomic,
        max_dest_rd_atomic: o.max_dest_rd_atomic,
        ..QpAttr::default()
    };
    let t = o.qp_type;
    let mask = |from, to| required_mask(t, from, to).expect("a valid transition");
    e.modify_qp(qpn, &attr, mask(QpState::Reset, QpState::Init)).expect("RESET -> INIT");
    attr.qp_state = QpState::Rtr;
    e.modify_qp(qpn, &attr, mask(QpState::Init, QpState::Rtr)).expect("INIT -> RTR");
    attr.qp_state = QpState::Rts;
    let rts = mask(QpState::Rtr, QpState::Rts);
    e.modify_qp(qpn, &attr, rts).expect("RTR -> RTS");
}
