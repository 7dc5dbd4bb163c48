//! UD IDs (RDMA_PS_UDP, RDMA_PS_IPOIB): `rdma_connect` resolves the peer's
//! service with a SIDR_REQ and ESTABLISHED carries its QPN and Q_Key;
//! `rdma_accept` answers with this side's; the kernel's `cma_resolve_ib_udp`,
//! `cma_sidr_rep_handler` and `cma_send_sidr_rep`. A UD ID's QP is ready to
//! send and receive once made (librdmacm's `ucma_init_ud_qp`).

use super::dispatch::{deliver, find_listener_of, Keep};
use super::event::libc_errno::{EINVAL, ETIMEDOUT};
use super::event::{CmEventType, ConnParam};
use super::id::{cm_err, CmId, CmaState, IdInner, Route};
use super::registry;
use crate::driver::Driver;
use crate::error::Error;
use crate::qp::Qp;
use std::net::SocketAddr;
use std::sync::Arc;
use uroce_transport::cm::ip::{flow_label_of_ports, parse_service_id, CmaHdr, CMA_HDR_LEN};
use uroce_transport::cm::msg::{
    SidrRepRepr, SidrReqRepr, SidrStatus, SIDR_REP_PRIVATE_DATA_LEN, SIDR_REQ_PRIVATE_DATA_LEN,
};
use uroce_transport::cm::timing::cm_time;
use uroce_transport::cm::{CommId, PortSpace, SidrAnswer, SidrParams};
use uroce_transport::engine::{required_mask, Gid, QpAttr, QpAttrMask, QpState, QpType};

/// The Q_Key of rdma_cm's UD services (`RDMA_UDP_QKEY`).
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

/// Private data a UD connect may carry: the SIDR_REQ's 216 bytes less the IP CM header.
pub const UD_CONNECT_PRIVATE_DATA_LEN: usize = SIDR_REQ_PRIVATE_DATA_LEN - CMA_HDR_LEN;

/// Whether IDs of `ps` connect UD QPs.
pub(crate) fn is_ud(ps: PortSpace) -> bool {
    matches!(ps, PortSpace::Udp | PortSpace::Ipoib)
}

/// The attributes that move a UD ID's QP to `state` (`rdma_init_qp_attr`):
/// INIT with rdma_cm's Q_Key, RTR, RTS from PSN 0.
pub(crate) fn qp_attr(state: QpState) -> Option<(QpAttr, QpAttrMask)> {
    let (from, attr) = match state {
        QpState::Init => {
            let attr =
                QpAttr { qp_state: state, pkey_index: 0, port_num: 1, qkey: RDMA_UDP_QKEY, ..Default::default() };
            (QpState::Reset, attr)
        }
        QpState::Rtr => (QpState::Init, QpAttr { qp_state: state, ..Default::default() }),
        QpState::Rts => (QpState::Rtr, QpAttr { qp_state: state, sq_psn: 0, ..Default::default() }),
        _ => return None,
    };
    Some((attr, required_mask(QpType::Ud, from, state)?))
}

/// A UD ID's new QP, made ready at once.
pub(crate) fn ready(qp: &Qp) -> Result<(), Error> {
    for state in [QpState::Init, QpState::Rtr, QpState::Rts] {
        let (attr, mask) = qp_attr(state).expect("a UD transition");
        qp.modify(&attr, mask)?;
    }
    Ok(())
}

impl CmId {
    /// `rdma_connect` of a UD ID: a SIDR_REQ (the IP CM header, then the
    /// private data); ESTABLISHED with the service's QPN and Q_Key follows
    /// its SIDR_REP, UNREACHABLE a refusal (status: the SIDR status) or
    /// silence (-ETIMEDOUT) after the retries.
    pub(crate) fn connect_ud(&self, param: &ConnParam) -> Result<(), Error> {
        const VERB: &str = "rdma_connect";
        if param.private_data.len() > UD_CONNECT_PRIVATE_DATA_LEN {
            let what =
                format!("{} bytes of private data, at most {UD_CONNECT_PRIVATE_DATA_LEN}", param.private_data.len());
            return Err(cm_err(VERB, EINVAL, what));
        }
        let mut st = self.state();
        if st.cma != CmaState::RouteResolved {
            return Err(cm_err(VERB, EINVAL, format!("the ID is in state {:?}: resolve the route first", st.cma)));
        }
        let (ctx, route) = (st.ctx.clone().expect("route resolved"), st.route.expect("resolved"));
        let (src, dst) = (st.src.expect("bound"), st.dst.expect("resolved"));
        let mut private = vec![0u8; CMA_HDR_LEN];
        CmaHdr::new(src.ip(), src.port(), dst.ip()).emit(&mut private);
        private.extend_from_slice(&param.private_data);
        let p = SidrParams {
            dgid: route.dgid,
            service_id: self.0.ps.service_id(dst.port()),
            timeout: cm_time(param.cm_response_timeout),
            max_cm_retries: param.max_cm_retries,
            private_data: private,
        };
        let weak = Arc::downgrade(&self.0);
        let comm = ctx
            .driver()
            .with_cm(|qp1, now| {
                let comm = qp1.cm.sidr_request(now, &p)?;
                qp1.ids.insert(comm, weak);
                Ok(comm)
            })?
            .map_err(|e: uroce_transport::cm::CmError| cm_err(VERB, EINVAL, e.to_string()))?;
        st.comm_id = Some(comm);
        st.cma = CmaState::Connect;
        Ok(())
    }

    /// `rdma_accept` of a UD CONNECT_REQUEST: the SIDR_REP with this ID's
    /// QPN (or `param.qp_num` without one) and Q_Key (`param.qkey`, or
    /// rdma_cm's); the peer hears ESTABLISHED, this side nothing more.
    pub(crate) fn accept_ud(&self, param: Option<&ConnParam>) -> Result<(), Error> {
        const VERB: &str = "rdma_accept";
        let data = param.map_or(&[][..], |p| &p.private_data[..]);
        let qpn = self.qp().map_or(param.map_or(0, |p| p.qp_num), |q| q.qp_num());
        let qkey = param.map(|p| p.qkey).filter(|&k| k != 0).unwrap_or(RDMA_UDP_QKEY);
        self.answer_sidr(VERB, SidrAnswer { status: SidrStatus::SUCCESS, qpn, qkey, private_data: data.to_vec() })
    }

    /// `rdma_reject` of a UD CONNECT_REQUEST: a SIDR_REP with status REJECT.
    pub(crate) fn reject_ud(&self, private_data: &[u8]) -> Result<(), Error> {
        let no = SidrAnswer { status: SidrStatus::REJECT, qpn: 0, qkey: 0, private_data: private_data.to_vec() };
        self.answer_sidr("rdma_reject", no)
    }

    fn answer_sidr(&self, verb: &'static str, a: SidrAnswer) -> Result<(), Error> {
        if a.private_data.len() > SIDR_REP_PRIVATE_DATA_LEN {
            let what = format!("{} bytes of private data, at most {SIDR_REP_PRIVATE_DATA_LEN}", a.private_data.len());
            return Err(cm_err(verb, EINVAL, what));
        }
        let (ctx, comm) = {
            let st = self.state();
            match (st.ctx.clone(), st.comm_id, st.cma) {
                (Some(ctx), Some(c), CmaState::Connect) => (ctx, c),
                _ => {
                    return Err(cm_err(verb, EINVAL, "not a connection request: answer the ID a CONNECT_REQUEST gave"))
                }
            }
        };
        ctx.driver()
            .with_cm(|qp1, now| qp1.cm.sidr_reply(now, comm, &a))?
            .map_err(|e| cm_err(verb, EINVAL, e.to_string()))
    }
}

/// A SIDR_REQ for a service some listener registered: the listener whose
/// address matches the IP CM header's destination gets CONNECT_REQUEST with
/// a new UD ID; with none, the request is refused (REJECT), as the kernel
/// refuses when its rdma_cm handler fails.
pub(crate) fn on_sidr_req(driver: &Driver, comm: CommId, src_gid: Gid, req: Box<SidrReqRepr>, keep: &mut Keep) {
    let hdr = CmaHdr::parse(&req.private_data).ok();
    let listener = hdr.and_then(|h| find_listener_of(driver, req.service_id, &h));
    let ctx = registry::context_on(driver);
    let (Some(hdr), Some(listener), Some(ctx)) = (hdr, listener, ctx) else {
        tracing::debug!("rdma_cm: no listener takes {req}");
        let no = SidrAnswer { status: SidrStatus::REJECT, qpn: 0, qkey: 0, private_data: Vec::new() };
        let _ = driver.with_cm(|qp1, now| qp1.cm.sidr_reply(now, comm, &no));
        return;
    };
    keep.push(listener.0.clone());
    let child = CmId(Arc::new(IdInner::new(listener.0.channel_weak(), listener.0.ps)));
    keep.push(child.0.clone());
    let port = parse_service_id(req.service_id).map_or(0, |(_, p)| p);
    {
        let mut c = child.state();
        let sgid = Gid::from_ip(hdr.dst_addr);
        c.cma = CmaState::Connect;
        c.src = Some(SocketAddr::new(hdr.dst_addr, port));
        c.dst = Some(SocketAddr::new(hdr.src_addr, hdr.src_port));
        c.route = Some(Route {
            sgid,
            sgid_index: super::addr::gid_index(&ctx, sgid),
            dgid: src_gid,
            path_mtu: ctx.query_port().active_mtu,
            flow_label: flow_label_of_ports(hdr.src_port, port),
            hop_limit: 64,
            traffic_class: 0,
        });
        c.ctx = Some(ctx);
        c.comm_id = Some(comm);
    }
    let weak = Arc::downgrade(&child.0);
    let _ = driver.with_cm(|qp1, _| qp1.ids.insert(comm, weak));
    let param = ConnParam { private_data: req.private_data[CMA_HDR_LEN..].to_vec(), ..ConnParam::default() };
    deliver(&child, Some(listener), CmEventType::ConnectRequest, 0, param);
}

/// The SIDR_REP of our SIDR_REQ: ESTABLISHED with the service's QPN and
/// Q_Key, or UNREACHABLE with the SIDR status.
pub(crate) fn on_sidr_rep(id: &CmId, rep: &SidrRepRepr) {
    let mut param = ConnParam { private_data: rep.private_data.to_vec(), ..ConnParam::default() };
    if rep.status != SidrStatus::SUCCESS {
        tracing::debug!("rdma_cm: {rep}");
        deliver(id, None, CmEventType::Unreachable, i32::from(rep.status.0), param);
        return;
    }
    (param.qp_num, param.qkey) = (rep.qpn, rep.qkey);
    deliver(id, None, CmEventType::Established, 0, param);
}

/// Nothing answered our SIDR_REQ (the QP stays as it is: a UD QP may
/// still talk to others).
pub(crate) fn on_sidr_timeout(id: &CmId) {
    deliver(id, None, CmEventType::Unreachable, -ETIMEDOUT, ConnParam::default());
}
