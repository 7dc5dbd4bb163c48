//! The CM's events as rdma_cm reports them (the kernel's `cma_req_handler`
//! and `cma_ib_handler`, with librdmacm's QP handling): a REQ finds its
//! listener and becomes a CONNECT_REQUEST, a REP moves the QP to RTS and
//! answers with an RTU, and so on. Runs after a driver round, in order,
//! with the driver's lock let go: an ID's lock is taken before the driver's.

use super::addr::gid_index;
use super::conn::{accepted_mtu, passive_conn};
use super::event::libc_errno::{EINVAL, ETIMEDOUT};
use super::event::{CmEvent, CmEventType, ConnParam};
use super::id::{connect_qp, qp_to_err, CmId, CmaState, IdInner, Route};
use super::qp_attr::ConnInfo;
use super::registry;
use super::ud;
use crate::driver::Driver;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Weak};
use uroce_transport::cm::ip::{parse_service_id, CmaHdr, CMA_HDR_LEN};
use uroce_transport::cm::msg::{RejRepr, RepRepr, ReqRepr, TRANSPORT_RC};
use uroce_transport::cm::timing::{ack_timeout, CMA_CM_MRA_SERVICE_TIMEOUT, CMA_IBOE_PACKET_LIFETIME};
use uroce_transport::cm::{CmEvent as IbEvent, CommId, RejReason};

/// IDs whose events were queued: released after the round's events, so
/// that a last reference never destroys an ID while another is handled.
pub(crate) type Keep = Vec<Arc<IdInner>>;

pub(crate) fn on_event(driver: &Driver, ev: IbEvent, keep: &mut Keep) {
    let ev = match ev {
        IbEvent::ReqReceived { id, req, .. } => return on_req(driver, id, req, keep),
        IbEvent::SidrReqReceived { id, src_gid, req } => return ud::on_sidr_req(driver, id, src_gid, req, keep),
        ev => ev,
    };
    let comm = ev.id();
    let known = driver.lock().qp1.as_ref().and_then(|q| q.ids.get(&comm).and_then(Weak::upgrade));
    let Some(inner) = known else { return };
    keep.push(inner.clone());
    let id = CmId(inner);
    let cma = id.state().cma;
    match ev {
        IbEvent::RepReceived { id: comm, rep } if cma == CmaState::Connect => on_rep(driver, &id, comm, &rep),
        IbEvent::RtuReceived { .. } if cma == CmaState::Connect => {
            deliver(&id, None, CmEventType::Established, 0, ConnParam::default())
        }
        IbEvent::RejReceived { rej, .. } if cma == CmaState::Connect => on_rej(&id, &rej),
        IbEvent::DreqReceived { .. } | IbEvent::DrepReceived { .. } if cma == CmaState::Connect => disconnected(&id, 0),
        IbEvent::DreqError { .. } if cma == CmaState::Connect => disconnected(&id, -ETIMEDOUT),
        IbEvent::ReqError { .. } | IbEvent::RepError { .. } if cma == CmaState::Connect => {
            deliver(&id, None, CmEventType::Unreachable, -ETIMEDOUT, ConnParam::default())
        }
        IbEvent::SidrRepReceived { rep, .. } if cma == CmaState::Connect => ud::on_sidr_rep(&id, &rep),
        IbEvent::SidrReqError { .. } if cma == CmaState::Connect => ud::on_sidr_timeout(&id),
        IbEvent::TimewaitExit { .. } if cma == CmaState::Disconnect => {
            deliver(&id, None, CmEventType::TimewaitExit, 0, ConnParam::default())
        }
        // An MRA only means "wait longer"; events in other states are stale.
        _ => {}
    }
}

pub(crate) fn deliver(id: &CmId, listen_id: Option<CmId>, event: CmEventType, status: i32, param: ConnParam) {
    if let Some(ch) = id.0.channel() {
        ch.push(CmEvent { id: id.clone(), listen_id, event, status, param, group: None });
    }
}

fn disconnected(id: &CmId, status: i32) {
    id.state().cma = CmaState::Disconnect;
    deliver(id, None, CmEventType::Disconnected, status, ConnParam::default());
}

/// A REQ for a service some listener registered: the listener whose address
/// matches the IP CM header's destination gets CONNECT_REQUEST with a new
/// ID; with none (or a REQ this stack cannot take), a consumer REJ, as the
/// kernel answers when its rdma_cm handler fails.
fn on_req(driver: &Driver, comm: CommId, req: Box<ReqRepr>, keep: &mut Keep) {
    let hdr = CmaHdr::parse(&req.private_data).ok();
    let listener = hdr.and_then(|h| find_listener_of(driver, req.service_id, &h));
    let ctx = registry::context_on(driver);
    let (Some(hdr), Some(listener), Some(ctx), TRANSPORT_RC) = (hdr, listener, ctx, req.transport_service_type) else {
        tracing::debug!("rdma_cm: no listener takes {req}");
        let _ = driver.with_cm(|qp1, now| qp1.cm.reject(now, comm, RejReason::CONSUMER_DEFINED, &[], &[]));
        return;
    };
    keep.push(listener.0.clone());
    let child = CmId(Arc::new(IdInner::new(listener.0.channel_weak(), listener.0.ps)));
    keep.push(child.0.clone());
    let (port, param) = (parse_service_id(req.service_id).map_or(0, |(_, p)| p), request_param(&req));
    {
        let mut c = child.state();
        let sgid = req.primary.remote_gid;
        c.cma = CmaState::Connect;
        c.src = Some(SocketAddr::new(hdr.dst_addr, port));
        c.dst = Some(SocketAddr::new(hdr.src_addr, hdr.src_port));
        c.ctx = Some(ctx.clone());
        c.route = Some(Route {
            sgid,
            sgid_index: gid_index(&ctx, sgid),
            dgid: req.primary.local_gid,
            path_mtu: accepted_mtu(&ctx, req.path_mtu),
            flow_label: req.primary.flow_label,
            hop_limit: req.primary.hop_limit.max(1),
            traffic_class: req.primary.traffic_class,
        });
        c.comm_id = Some(comm);
        c.seq_num = driver.lock().engine.random_psn();
        // The peer's initiator depth is what this side serves, and the other way round.
        c.responder_resources = req.initiator_depth;
        c.initiator_depth = req.responder_resources;
        // What accepting with the defaults gives, for callers that move their own QP first.
        let dev = ctx.query_device();
        let rr = req.initiator_depth.min(dev.max_qp_rd_atom.min(255) as u8);
        let depth = req.responder_resources.min(dev.max_qp_init_rd_atom.min(255) as u8);
        c.conn = Some(passive_conn(&c, &req, rr, depth));
        c.req = Some(req);
    }
    let weak = Arc::downgrade(&child.0);
    let _ = driver.with_cm(|qp1, _| {
        qp1.ids.insert(comm, weak);
        // Promise an MRA while the consumer decides, sent if the peer asks again.
        let _ = qp1.cm.mra(comm, CMA_CM_MRA_SERVICE_TIMEOUT, true, &[]);
    });
    deliver(&child, Some(listener), CmEventType::ConnectRequest, 0, param);
}

/// The listener on the REQ's port whose address is the header's
/// destination (or the wildcard of its family, `::` taking IPv4 too) and
/// whose device is this one.
pub(crate) fn find_listener_of(driver: &Driver, service_id: u64, hdr: &CmaHdr) -> Option<CmId> {
    let (ps, port) = parse_service_id(service_id)?;
    let takes = |ip: IpAddr| match ip {
        IpAddr::V4(v4) if v4.is_unspecified() => hdr.dst_addr.is_ipv4(),
        IpAddr::V6(v6) if v6.is_unspecified() => true,
        ip => ip == hdr.dst_addr && registry::has_ip(&driver.info, ip),
    };
    registry::listeners()
        .into_iter()
        .filter(|l| l.ps == ps && l.addr.port() == port && takes(l.addr.ip()))
        .filter_map(|l| l.id.upgrade())
        .map(CmId)
        .find(|l| l.state().cma == CmaState::Listen)
}

/// CONNECT_REQUEST's parameters: the consumer's private data (after the IP
/// CM header), and the REQ's values as this side sees them.
fn request_param(req: &ReqRepr) -> ConnParam {
    ConnParam {
        private_data: req.private_data[CMA_HDR_LEN..].to_vec(),
        responder_resources: req.initiator_depth,
        initiator_depth: req.responder_resources,
        flow_control: req.end_to_end_flow_control,
        retry_count: req.retry_count,
        rnr_retry_count: req.rnr_retry_count,
        srq: req.srq,
        qp_num: req.local_qpn,
        ..ConnParam::default()
    }
}

/// The REP of our REQ: the QP goes to RTS with what it carries, the RTU
/// goes out, ESTABLISHED (librdmacm's `ucma_process_conn_resp`); without a
/// QP, CONNECT_RESPONSE and the caller finishes with `establish`.
fn on_rep(driver: &Driver, id: &CmId, comm: CommId, rep: &RepRepr) {
    let param = ConnParam {
        private_data: rep.private_data.to_vec(),
        responder_resources: rep.initiator_depth,
        initiator_depth: rep.responder_resources,
        flow_control: rep.end_to_end_flow_control,
        rnr_retry_count: rep.rnr_retry_count,
        srq: rep.srq,
        qp_num: rep.local_qpn,
        ..ConnParam::default()
    };
    let (conn, qp) = {
        let mut s = id.state();
        let route = s.route.expect("a connecting ID has its route");
        let conn = ConnInfo {
            av: route.address_vector(),
            path_mtu: route.path_mtu,
            dest_qpn: rep.local_qpn,
            rq_psn: s.seq_num,
            sq_psn: rep.starting_psn,
            // What the peer asks of us, and serves us.
            max_dest_rd_atomic: rep.initiator_depth,
            max_rd_atomic: rep.responder_resources,
            timeout: s.ack_timeout.unwrap_or_else(|| ack_timeout(rep.target_ack_delay, CMA_IBOE_PACKET_LIFETIME)),
            retry_cnt: s.retry_count,
            rnr_retry: rep.rnr_retry_count,
        };
        s.conn = Some(conn);
        (conn, s.qp.clone())
    };
    let Some(qp) = qp else {
        let _ = driver.with_cm(|qp1, _| qp1.cm.mra(comm, CMA_CM_MRA_SERVICE_TIMEOUT, true, &[]));
        deliver(id, None, CmEventType::ConnectResponse, 0, param);
        return;
    };
    match connect_qp(&qp, &conn) {
        Ok(()) => {
            let _ = driver.with_cm(|qp1, _| qp1.cm.ready_to_use(comm, &[]));
            deliver(id, None, CmEventType::Established, 0, param);
        }
        Err(e) => {
            tracing::warn!("rdma_cm: the REP's attributes do not fit the QP: {e}");
            qp_to_err(&qp);
            let _ = driver.with_cm(|qp1, now| qp1.cm.reject(now, comm, RejReason::CONSUMER_DEFINED, &[], &[]));
            deliver(id, None, CmEventType::ConnectError, -EINVAL, param);
        }
    }
}

/// A REJ: the QP goes to ERR, REJECTED with the reason as status.
fn on_rej(id: &CmId, rej: &RejRepr) {
    if let Some(qp) = id.qp() {
        qp_to_err(&qp);
    }
    let param = ConnParam { private_data: rej.private_data.to_vec(), ..ConnParam::default() };
    deliver(id, None, CmEventType::Rejected, i32::from(rej.reason.0), param);
}
