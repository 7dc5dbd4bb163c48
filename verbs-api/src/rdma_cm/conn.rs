//! Connections: `rdma_connect`, `rdma_accept`, `rdma_reject`,
//! `rdma_establish` and `rdma_disconnect`, with librdmacm's choices of
//! responder resources and initiator depth.

use super::event::libc_errno::EINVAL;
use super::event::{ConnParam, RDMA_MAX_RESP_RES};
use super::id::{cm_err, connect_qp, qp_to_err, CmId, CmaState, IdState};
use super::qp1::Qp1;
use super::qp_attr::{mtu_from_wire, ConnInfo};
use crate::context::Context;
use crate::error::Error;
use uroce_transport::cm::ip::{CmaHdr, CMA_HDR_LEN};
use uroce_transport::cm::msg::{PathRepr, ReqRepr, REJ_PRIVATE_DATA_LEN, REP_PRIVATE_DATA_LEN, REQ_PRIVATE_DATA_LEN};
use uroce_transport::cm::timing::CMA_IBOE_PACKET_LIFETIME;
use uroce_transport::cm::{AcceptParams, CmError, ConnectParams, RejReason};

/// Private data a connect may carry: the REQ's 92 bytes less the IP CM header.
pub const CONNECT_PRIVATE_DATA_LEN: usize = REQ_PRIVATE_DATA_LEN - CMA_HDR_LEN;

fn cm_error(verb: &'static str) -> impl Fn(CmError) -> Error {
    move |e| cm_err(verb, EINVAL, e.to_string())
}

/// `value`, or the device's limit for `RDMA_MAX_*`; more than the limit is EINVAL.
fn within(verb: &'static str, what: &str, value: u8, max: u32) -> Result<u8, Error> {
    let max = max.min(u8::MAX.into()) as u8;
    match value {
        RDMA_MAX_RESP_RES => Ok(max),
        v if v <= max => Ok(v),
        v => Err(cm_err(verb, EINVAL, format!("{what} {v}: the device allows at most {max}"))),
    }
}

impl CmId {
    /// `rdma_connect`: sends the REQ (the IP CM header, then `param`'s private
    /// data); ESTABLISHED follows the REP, REJECTED or UNREACHABLE a refusal or silence.
    pub fn connect(&self, param: &ConnParam) -> Result<(), Error> {
        const VERB: &str = "rdma_connect";
        if super::ud::is_ud(self.0.ps) {
            return self.connect_ud(param);
        }
        if param.private_data.len() > CONNECT_PRIVATE_DATA_LEN {
            let what =
                format!("{} bytes of private data, at most {CONNECT_PRIVATE_DATA_LEN}", param.private_data.len());
            return Err(cm_err(VERB, EINVAL, what));
        }
        let (ctx, route, src, dst, qpn) = {
            let st = self.state();
            if st.cma != CmaState::RouteResolved {
                return Err(cm_err(VERB, EINVAL, format!("the ID is in state {:?}: resolve the route first", st.cma)));
            }
            let qpn = st.qp.as_ref().map_or(param.qp_num, |q| q.qp_num());
            let ctx = st.ctx.clone().expect("route resolved");
            (ctx, st.route.expect("resolved"), st.src.expect("bound"), st.dst.expect("resolved"), qpn)
        };
        let dev = ctx.query_device();
        let rr = within(VERB, "responder_resources", param.responder_resources, dev.max_qp_rd_atom)?;
        let depth = within(VERB, "initiator_depth", param.initiator_depth, dev.max_qp_init_rd_atom)?;
        let mut private = vec![0u8; CMA_HDR_LEN];
        CmaHdr::new(src.ip(), src.port(), dst.ip()).emit(&mut private);
        private.extend_from_slice(&param.private_data);
        let seq_num = ctx.driver().lock().engine.random_psn();
        let p = ConnectParams {
            dgid: route.dgid,
            service_id: self.0.ps.service_id(dst.port()),
            local_qpn: qpn,
            starting_psn: seq_num,
            responder_resources: rr,
            initiator_depth: depth,
            retry_count: param.retry_count.min(7),
            rnr_retry_count: param.rnr_retry_count.min(7),
            flow_control: param.flow_control,
            srq: param.srq,
            path_mtu: route.path_mtu.to_enum(),
            path: PathRepr {
                local_lid: 0xffff,
                remote_lid: 0xffff,
                local_gid: route.sgid,
                remote_gid: route.dgid,
                flow_label: route.flow_label,
                traffic_class: route.traffic_class,
                hop_limit: route.hop_limit,
                ..Default::default()
            },
            packet_life_time: CMA_IBOE_PACKET_LIFETIME,
            remote_cm_response_timeout: param.cm_response_timeout,
            local_cm_response_timeout: param.cm_response_timeout,
            max_cm_retries: param.max_cm_retries,
            private_data: private,
        };
        // The ID's state first, then the driver's lock (rdma_cm's order).
        let mut st = self.state();
        let weak = std::sync::Arc::downgrade(&self.0);
        let comm = ctx
            .driver()
            .with_cm(|qp1, now| {
                let comm = qp1.cm.connect(now, &p)?;
                qp1.ids.insert(comm, weak);
                Ok(comm)
            })?
            .map_err(cm_error(VERB))?;
        st.comm_id = Some(comm);
        st.cma = CmaState::Connect;
        st.seq_num = seq_num;
        st.responder_resources = rr;
        st.initiator_depth = depth;
        st.retry_count = param.retry_count.min(7);
        Ok(())
    }

    /// `rdma_accept` of a CONNECT_REQUEST's ID: the QP goes to RTS with what
    /// the REQ carried, then the REP goes out; ESTABLISHED follows the RTU.
    /// Without `param`, librdmacm's defaults: the REQ's values within the
    /// device's limits, 7 RNR retries.
    pub fn accept(&self, param: Option<&ConnParam>) -> Result<(), Error> {
        const VERB: &str = "rdma_accept";
        if super::ud::is_ud(self.0.ps) {
            return self.accept_ud(param);
        }
        let data = param.map_or(&[][..], |p| &p.private_data[..]);
        if data.len() > REP_PRIVATE_DATA_LEN {
            return Err(cm_err(
                VERB,
                EINVAL,
                format!("{} bytes of private data, at most {REP_PRIVATE_DATA_LEN}", data.len()),
            ));
        }
        let (ctx, comm, info, qp) = {
            let st = self.state();
            let (Some(req), Some(comm), CmaState::Connect) = (st.req.as_ref(), st.comm_id, st.cma) else {
                return Err(cm_err(
                    VERB,
                    EINVAL,
                    "not a connection request: accept the ID a CONNECT_REQUEST event gave",
                ));
            };
            let ctx = st.ctx.clone().expect("a request's ID has its device");
            let dev = ctx.query_device();
            // librdmacm: the REQ's values within the device's limits, or the caller's.
            let pick = |given: Option<u8>, from_req: u8, max: u32, what| match given {
                None | Some(RDMA_MAX_RESP_RES) => Ok(from_req.min(max.min(255) as u8)),
                Some(v) => within(VERB, what, v, max),
            };
            let rr = pick(
                param.map(|p| p.responder_resources),
                st.responder_resources,
                dev.max_qp_rd_atom,
                "responder_resources",
            )?;
            let depth =
                pick(param.map(|p| p.initiator_depth), st.initiator_depth, dev.max_qp_init_rd_atom, "initiator_depth")?;
            let info = passive_conn(&st, req, rr, depth);
            (ctx, comm, info, st.qp.clone())
        };
        if let Some(qp) = &qp {
            if let Err(e) = connect_qp(qp, &info) {
                qp_to_err(qp);
                let _ = self.reject(&[]);
                return Err(e);
            }
        }
        let p = AcceptParams {
            local_qpn: qp.as_ref().map_or(param.map_or(0, |p| p.qp_num), |q| q.qp_num()),
            starting_psn: info.rq_psn,
            responder_resources: info.max_dest_rd_atomic,
            initiator_depth: info.max_rd_atomic,
            flow_control: param.is_some_and(|p| p.flow_control),
            rnr_retry_count: param.map_or(7, |p| p.rnr_retry_count).min(7),
            srq: param.is_some_and(|p| p.srq),
            private_data: data.to_vec(),
        };
        let mut st = self.state();
        ctx.driver().with_cm(|qp1, now| qp1.cm.accept(now, comm, &p))?.map_err(cm_error(VERB))?;
        st.conn = Some(info);
        Ok(())
    }

    /// `rdma_reject` of a connection request: a REJ, reason 28 (consumer
    /// defined), with up to 148 bytes of private data.
    pub fn reject(&self, private_data: &[u8]) -> Result<(), Error> {
        const VERB: &str = "rdma_reject";
        if super::ud::is_ud(self.0.ps) {
            return self.reject_ud(private_data);
        }
        if private_data.len() > REJ_PRIVATE_DATA_LEN {
            let what = format!("{} bytes of private data, at most {REJ_PRIVATE_DATA_LEN}", private_data.len());
            return Err(cm_err(VERB, EINVAL, what));
        }
        let (ctx, comm) = self.connection(VERB)?;
        let reject = |qp1: &mut Qp1, now| qp1.cm.reject(now, comm, RejReason::CONSUMER_DEFINED, &[], private_data);
        ctx.driver().with_cm(reject)?.map_err(cm_error(VERB))
    }

    /// `rdma_establish`, after a CONNECT_RESPONSE: the caller moved its QP
    /// (with [`CmId::init_qp_attr`]); the RTU goes out.
    pub fn establish(&self) -> Result<(), Error> {
        const VERB: &str = "rdma_establish";
        let (ctx, comm) = self.connection(VERB)?;
        ctx.driver().with_cm(|qp1, _| qp1.cm.ready_to_use(comm, &[]))?.map_err(cm_error(VERB))
    }

    /// `rdma_disconnect`: the QP goes to ERR (its WRs flush), then a DREQ, or
    /// the DREP that answers the peer's DREQ. DISCONNECTED follows.
    pub fn disconnect(&self) -> Result<(), Error> {
        const VERB: &str = "rdma_disconnect";
        let (ctx, comm) = self.connection(VERB)?;
        if let Some(qp) = self.qp() {
            qp_to_err(&qp);
        }
        if super::ud::is_ud(self.0.ps) {
            // As the kernel: a UD ID has no connection to end, only its QP.
            return Ok(());
        }
        // As the kernel: start a disconnect, or answer one; in other states, nothing.
        ctx.driver().with_cm(|qp1, now| {
            if qp1.cm.send_dreq(now, comm, &[]).is_err() {
                let _ = qp1.cm.send_drep(now, comm, &[]);
            }
        })
    }

    /// The device and CM connection of a connecting or connected ID.
    fn connection(&self, verb: &'static str) -> Result<(Context, u32), Error> {
        let st = self.state();
        match (st.ctx.clone(), st.comm_id) {
            (Some(ctx), Some(c)) => Ok((ctx, c)),
            _ => Err(cm_err(verb, EINVAL, format!("no connection: the ID is in state {:?}", st.cma))),
        }
    }
}

/// The passive side's QP attributes: the REQ's path, QPN, PSN and retry
/// counts, and the responder resources and initiator depth chosen here.
pub(crate) fn passive_conn(st: &IdState, req: &ReqRepr, rr: u8, depth: u8) -> ConnInfo {
    let route = st.route.expect("a request's ID has its route");
    ConnInfo {
        av: route.address_vector(),
        path_mtu: route.path_mtu,
        dest_qpn: req.local_qpn,
        rq_psn: st.seq_num,
        sq_psn: req.starting_psn,
        max_dest_rd_atomic: rr,
        max_rd_atomic: depth,
        // The path's packet lifetime is the REQ's ACK timeout less one; the QP's timeout, that plus one.
        timeout: st.ack_timeout.unwrap_or(req.primary.local_ack_timeout.max(1)),
        retry_cnt: req.retry_count,
        rnr_retry: req.rnr_retry_count,
    }
}

/// The path MTU of a connection: the REQ's, within what this port can carry.
pub(crate) fn accepted_mtu(ctx: &Context, wire: u8) -> uroce_transport::engine::Mtu {
    mtu_from_wire(wire).min(ctx.query_port().active_mtu)
}
