//! The test's QPs over rdma_cm (`create_rdma_cm_connection`,
//! `rdma_cm_server_connection`, `rdma_cm_client_connection`,
//! `rdma_cm_disconnect_nodes`).

use super::super::dest::Dest;
use super::super::exchange::Comm;
use super::super::params::{Conn, Params};
use super::super::resources::{set_auth_key, Resources};
use super::ud::{dest_of, needs_hello, Hello};
use super::{conn_param, next_event, resolve, server_addr};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};
use uroce_verbs::rdma_cm::{CmEventType, CmId, EventChannel, PortSpace};
use uroce_verbs::Context;

/// perftest's retries of the test QPs' connect (`rdma_cm_client_connection`).
const CONNECT_TRIES: u32 = 10;

/// The test's rdma_cm connections (`cma_master`), kept until the end.
pub struct TestConns {
    ch: EventChannel,
    ids: Vec<CmId>,
}

/// `create_rdma_cm_connection`: a barrier, the connections (the server
/// listens on the port, the client connects every QP), a barrier. Unlike
/// perftest's, the server listens before the first barrier, so that a
/// client going on at once never finds the port closed.
pub fn connect_qps(res: &mut Resources, p: &Params, comm: &mut Comm) -> Result<TestConns, String> {
    let fail = |e: String| format!("Failed to create RDMA CM connection with resources: {e}");
    let listening = if p.is_server() { Some(listen(p).map_err(fail)?) } else { None };
    comm.hand_shake(&Dest::default())?;
    let conns = match listening {
        Some((ch, listener)) => serve(res, p, ch, listener),
        None => dial(res, p, &res.ctx.clone()),
    }
    .map_err(fail)?;
    comm.hand_shake(&Dest::default())?;
    Ok(conns)
}

/// The port space of the test's IDs: UD's for UD QPs.
fn port_space(p: &Params) -> PortSpace {
    if p.conn == Conn::Ud {
        PortSpace::Udp
    } else {
        PortSpace::Tcp
    }
}

/// The server's listener for the test's QPs, on the test's port.
fn listen(p: &Params) -> Result<(EventChannel, CmId), String> {
    let ch = EventChannel::new().map_err(|e| e.to_string())?;
    let listener = ch.create_id(port_space(p)).map_err(|e| e.to_string())?;
    let bind = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), p.port());
    listener.bind_addr(bind).map_err(|e| format!("Failed to bind RDMA CM address on the server: {e}"))?;
    listener.listen(p.num_qps as i32).map_err(|e| format!("Failed to listen on RDMA CM server listen ID: {e}"))?;
    Ok((ch, listener))
}

/// `rdma_cm_server_connection`: every request gets a QP and an accept
/// (the server counts a connection at its request, as perftest does).
fn serve(res: &mut Resources, p: &Params, ch: EventChannel, listener: CmId) -> Result<TestConns, String> {
    let mut ids = Vec::new();
    let hello = if p.conn == Conn::Ud && needs_hello(p) { Some(Hello::new(res)?) } else { None };
    while ids.len() < p.num_qps as usize {
        let ev = next_event(&ch)?;
        match ev.event {
            CmEventType::ConnectRequest => {
                let qp = ev.id.create_qp(&res.pd, &res.qp_init(p)).map_err(|e| format!("Failed to create QP: {e}"))?;
                set_auth_key(&qp, p)?;
                if let Some(h) = &hello {
                    h.expect(&qp)?;
                }
                ev.id
                    .accept(Some(&conn_param(p, p.verb)))
                    .map_err(|e| format!("Failed to accept RDMA CM connection: {e}"))?;
                if let Some(h) = &hello {
                    res.ud_peers.push(h.take(res, &ev.id, &qp)?);
                }
                // perftest sets its RNR timer after the accept.
                let attr = uroce_verbs::QpAttr { min_rnr_timer: 12, ..Default::default() };
                let _ = qp.modify(&attr, uroce_verbs::QpAttrMask::MIN_RNR_TIMER);
                res.qps.push(qp);
                ids.push(ev.id.clone());
            }
            CmEventType::Established => {}
            _ => return Err(format!("RDMA CM event error: Event: {}; error: {}.", ev.event, ev.status)),
        }
    }
    drop(listener);
    Ok(TestConns { ch, ids })
}

/// `rdma_cm_client_connection`: each QP resolves, creates its QP, connects;
/// a refused attempt is tried again after 100 ms, 10 times in all.
fn dial(res: &mut Resources, p: &Params, ctx: &Context) -> Result<TestConns, String> {
    let host = p.servername.clone().unwrap_or_default();
    let dst = server_addr(&host, p.port())?;
    let mut last = String::new();
    for _ in 0..CONNECT_TRIES {
        match dial_once(res, p, ctx, dst) {
            Ok(conns) => return Ok(conns),
            Err(e) => last = e,
        }
        res.qps.clear();
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("Failed to connect RDMA CM client, tried {CONNECT_TRIES} times: {last}"))
}

fn dial_once(res: &mut Resources, p: &Params, ctx: &Context, dst: SocketAddr) -> Result<TestConns, String> {
    let ch = EventChannel::new().map_err(|e| e.to_string())?;
    let mut ids = Vec::new();
    for _ in 0..p.num_qps {
        let id = ch.create_id(port_space(p)).map_err(|e| e.to_string())?;
        resolve(&ch, &id, ctx, dst)?;
        let qp = id.create_qp(&res.pd, &res.qp_init(p)).map_err(|e| format!("Failed to create QP: {e}"))?;
        set_auth_key(&qp, p)?;
        id.connect(&conn_param(p, p.verb)).map_err(|e| format!("Failed to connect through RDMA CM: {e}"))?;
        res.qps.push(qp);
        ids.push(id);
    }
    let hello = if p.conn == Conn::Ud && needs_hello(p) { Some(Hello::new(res)?) } else { None };
    let mut ud_peers = vec![None; ids.len()];
    let mut established = 0;
    while established < ids.len() {
        let ev = next_event(&ch)?;
        match ev.event {
            CmEventType::Established if p.conn == Conn::Ud => {
                let i = ids.iter().position(|id| *id == ev.id).ok_or("ESTABLISHED for an ID this end did not make")?;
                let to = dest_of(&ev)?;
                if let Some(h) = &hello {
                    h.send(res, &res.qps[i], to)?;
                }
                ud_peers[i] = Some(to);
                established += 1;
            }
            CmEventType::Established => established += 1,
            _ => return Err(format!("RDMA CM event error: Event: {}; error: {}.", ev.event, ev.status)),
        }
    }
    res.ud_peers = ud_peers.into_iter().flatten().collect();
    Ok(TestConns { ch, ids })
}

impl TestConns {
    /// `rdma_cm_disconnect_nodes`: each connection goes down; the DREPs of
    /// both sides are sent before this end leaves (bounded: 2 s).
    pub fn disconnect(self) {
        for id in &self.ids {
            let _ = id.disconnect();
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut down = 0;
        while down < self.ids.len() && Instant::now() < deadline {
            let Ok(ev) = self.ch.get_cm_event(Duration::from_millis(100)) else { continue };
            if ev.event == CmEventType::Disconnected {
                // Answers a DREQ that crossed ours.
                let _ = ev.id.disconnect();
                down += 1;
            }
        }
    }
}
