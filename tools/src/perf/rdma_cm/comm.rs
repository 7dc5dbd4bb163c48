//! The exchange's rdma_cm connection (`rdma_client_connect`,
//! `rdma_server_connect`, `rdma_write_data`, `rdma_read_data`) and the
//! binary `pingpong_dest` perftest sends over it.

use super::super::exchange::MessageWire;
use super::super::params::{Params, Verb};
use super::{conn_param, next_event, resolve, server_addr, unexpected, WAIT};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;
use uroce_verbs::rdma_cm::{CmEventType, CmId, EventChannel, PortSpace};
use uroce_verbs::{AccessFlags, Context, Cq, Mr, Pd, Qp, QpCap, QpInit, RecvWr, SendWr, WcStatus, WrOp};

/// The longest message of the exchange: perftest's are at most a dest (56
/// bytes); two uroce ends also exchange their parameters (agree.rs).
const MSG_MAX: usize = 1024;
/// Where SENDs go out of and RECVs land in the exchange's buffer.
const SEND_OFF: usize = 0;
const RECV_OFF: usize = MSG_MAX;

/// The exchange's connection: its QP sends and receives one message at a time.
pub struct CmComm {
    ch: EventChannel,
    id: CmId,
    ctx: Context,
    _pd: Pd,
    cq: Cq,
    qp: Qp,
    mr: Mr,
    closed: std::cell::Cell<bool>,
}

impl CmComm {
    /// `rdma_client_connect`: to the server's port, with a receive posted first.
    pub fn connect(ctx: &Context, host: &str, port: u16, p: &Params) -> Result<CmComm, String> {
        let dst = server_addr(host, port)?;
        let ch = EventChannel::new().map_err(|e| e.to_string())?;
        let id = ch.create_id(PortSpace::Tcp).map_err(|e| format!("rdma_create_id failed: {e}"))?;
        resolve(&ch, &id, ctx, dst)?;
        let comm = CmComm::on(ch, id, ctx)?;
        comm.post_recv()?;
        comm.id.connect(&conn_param(p, Verb::Send)).map_err(|e| format!("Function rdma_connect failed: {e}"))?;
        let ev = next_event(&comm.ch)?;
        if ev.event != CmEventType::Established {
            return Err(format!(
                "{}: start the server first (uroce perf {} -R, or ib_{} -R, with no host)",
                unexpected(&ev, "Unexpected CM event bl blka"),
                p.test.name(),
                p.test.name()
            ));
        }
        Ok(comm)
    }

    /// `rdma_server_connect`: waits for the client, accepts, and frees the
    /// port for the test's own listener.
    pub fn accept(ctx: &Context, port: u16, p: &Params) -> Result<CmComm, String> {
        let ch = EventChannel::new().map_err(|e| e.to_string())?;
        let listener = ch.create_id(PortSpace::Tcp).map_err(|e| format!("rdma_create_id failed: {e}"))?;
        listener
            .bind_addr(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))
            .map_err(|e| format!(" rdma_bind_addr failed: {e}"))?;
        listener.listen(1).map_err(|e| format!("rdma_listen failed: {e}"))?;
        let ev = loop {
            match ch.get_cm_event(WAIT) {
                Ok(ev) => break ev,
                Err(_) => continue,
            }
        };
        if ev.event != CmEventType::ConnectRequest {
            return Err(unexpected(&ev, "bad event waiting for connect request"));
        }
        let id = ev.id.clone();
        let ctx = id.context().unwrap_or_else(|| ctx.clone());
        let comm = CmComm::on(ch, id, &ctx)?;
        comm.post_recv()?;
        comm.id.accept(Some(&conn_param(p, Verb::Send))).map_err(|e| format!("Function rdma_accept failed: {e}"))?;
        drop((ev, listener));
        Ok(comm)
    }

    /// The QP and its buffer on `id`'s device.
    fn on(ch: EventChannel, id: CmId, ctx: &Context) -> Result<CmComm, String> {
        let err = |e: uroce_verbs::Error| format!(" Unable to create the resources needed by comm struct: {e}");
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(4, None).map_err(err)?;
        let mut init = QpInit::rc(&cq, &cq);
        init.cap = QpCap { max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let qp = id.create_qp(&pd, &init).map_err(err)?;
        let mr = pd.reg_mr(RECV_OFF + MSG_MAX, AccessFlags::LOCAL_WRITE).map_err(err)?;
        Ok(CmComm { ch, id, ctx: ctx.clone(), _pd: pd, cq, qp, mr, closed: std::cell::Cell::new(false) })
    }

    /// `post_one_recv_wqe`.
    fn post_recv(&self) -> Result<(), String> {
        let wr = RecvWr { wr_id: 0, sg_list: self.mr.sge(RECV_OFF, MSG_MAX as u32).into() };
        self.qp.post_recv(&wr).map_err(|e| format!("Function ibv_post_recv failed for RDMA_CM QP: {e}"))
    }

    /// One completion of the exchange's CQ. Unlike a TCP exchange, it needs
    /// this end's packets moved: with manual progress, it moves them.
    fn completion(&mut self, idle: &mut dyn FnMut(), what: &str) -> Result<uroce_verbs::WorkCompletion, String> {
        let since = Instant::now();
        let mut wc = [uroce_verbs::WorkCompletion::default()];
        loop {
            if self.cq.poll(&mut wc) == 1 {
                if wc[0].status != WcStatus::Success {
                    return Err(format!("Bad wc status {} ({}) {what}", wc[0].status as u32, wc[0].status));
                }
                return Ok(wc[0]);
            }
            if self.peer_closed() {
                crate::loopback::note_peer_gone();
                return Err(format!("the peer disconnected the rdma_cm exchange {what} (its output says why)"));
            }
            if since.elapsed() > WAIT {
                return Err(format!("nothing from the peer for {} s {what}", WAIT.as_secs()));
            }
            super::super::waiting::idle(&self.ctx);
            idle();
        }
    }

    /// Who the peer is, for messages.
    pub fn peer(&self) -> String {
        self.id.peer_addr().map_or_else(|| "the client".into(), |a| a.to_string())
    }
}

impl MessageWire for CmComm {
    /// `rdma_write_data`: one SEND, waited for.
    fn write(&mut self, data: &[u8], idle: &mut dyn FnMut()) -> Result<(), String> {
        if data.len() > MSG_MAX {
            return Err(format!("a {}-byte message, at most {MSG_MAX}", data.len()));
        }
        self.mr.write(SEND_OFF, data);
        let wr = SendWr::new(0, WrOp::Send, vec![self.mr.sge(SEND_OFF, data.len() as u32)]);
        self.qp.post_send(&wr).map_err(|e| format!("Function ibv_post_send failed: {e}"))?;
        self.completion(idle, "sending").map(|_| ())
    }

    /// `rdma_read_data`: the next message's first `n` bytes; the receive goes again.
    fn read(&mut self, n: usize, idle: &mut dyn FnMut()) -> Result<Vec<u8>, String> {
        self.completion(idle, "receiving")?;
        let mut buf = vec![0u8; n.min(MSG_MAX)];
        self.mr.read(RECV_OFF, &mut buf);
        buf.resize(n, 0);
        self.post_recv()?;
        Ok(buf)
    }

    /// Whether the peer disconnected (it ended).
    fn peer_closed(&self) -> bool {
        while let Some(ev) = self.ch.try_get_cm_event() {
            if matches!(ev.event, CmEventType::Disconnected | CmEventType::Rejected) {
                self.closed.set(true);
            }
        }
        self.closed.get()
    }

    /// The exchange is over: disconnect it, which tells the peer (as a TCP
    /// half-close does the other exchange).
    fn finish_sending(&self) {
        let _ = self.id.disconnect();
    }
}
