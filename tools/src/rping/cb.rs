//! rping's control block (`struct rping_cb`): the CM IDs, the QP and its
//! buffers, and the state the CM and completion handlers move. rping runs
//! those handlers on threads that post a semaphore; here one thread waits
//! on both sources and counts the posts the same way.

use super::ping::{RdmaInfo, INFO_LEN};
use std::time::Duration;
use uroce_verbs::rdma_cm::{CmEvent, CmEventType, CmId, EventChannel};
use uroce_verbs::*;

/// `enum test_state`, numbered as rping prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum St {
    Idle = 1,
    ConnectRequest,
    AddrResolved,
    RouteResolved,
    Connected,
    RdmaReadAdv,
    RdmaReadComplete,
    RdmaWriteAdv,
    RdmaWriteComplete,
    Disconnected,
    Error,
}

impl std::fmt::Display for St {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}", *self as u8)
    }
}

/// Why a run ends with status 255 (rping's -1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fatal {
    /// rping's CM thread calls `exit()` on an error event: nothing more is printed.
    Exit,
    /// A step failed; the callers say which, as rping's do.
    Fail,
}

/// The QP, its CQ and the four buffers (`rping_setup_qp`, `rping_setup_buffers`).
pub struct Res {
    pub _pd: Pd,
    pub channel: CompChannel,
    pub cq: Cq,
    pub qp: Qp,
    pub recv: Mr,
    pub send: Mr,
    pub rdma: Mr,
    pub start: Option<Mr>,
}

pub struct Cb {
    pub server: bool,
    pub debug: bool,
    pub state: St,
    posts: usize,
    pub ch: EventChannel,
    /// The client's connection, or the server's listener.
    pub cm_id: CmId,
    pub child: Option<CmId>,
    pub res: Option<Res>,
    /// The peer's last advertisement.
    pub remote: RdmaInfo,
    /// The completion handler quit (an error, or flushed work after a disconnect).
    cq_done: bool,
}

impl Cb {
    pub fn new(server: bool, debug: bool, ch: EventChannel, cm_id: CmId) -> Cb {
        Cb {
            server,
            debug,
            state: St::Idle,
            posts: 0,
            ch,
            cm_id,
            child: None,
            res: None,
            remote: RdmaInfo { buf: 0, rkey: 0, size: 0 },
            cq_done: false,
        }
    }

    /// rping's `DEBUG_LOG`, on stdout with `-d`.
    pub fn dbg(&self, line: impl AsRef<str>) {
        if self.debug {
            println!("{}", line.as_ref());
        }
    }

    fn post(&mut self) {
        self.posts += 1;
    }

    /// `sem_wait(&cb->sem)`: handles CM events and completions until one posts.
    pub fn sem_wait(&mut self) -> Result<(), Fatal> {
        loop {
            if self.posts > 0 {
                self.posts -= 1;
                return Ok(());
            }
            self.step()?;
        }
    }

    /// Handles what is there; waits a little if nothing is.
    fn step(&mut self) -> Result<(), Fatal> {
        if let Some(ev) = self.ch.try_get_cm_event() {
            return self.on_cm_event(ev);
        }
        if self.on_completions() {
            return Ok(());
        }
        let waits_on_cq = self.res.as_ref().filter(|_| !self.cq_done).map(|r| (r.cq.clone(), r.channel.clone()));
        match waits_on_cq {
            Some((cq, channel)) => {
                // Armed, then checked, then slept on: no completion slips by.
                let _ = cq.req_notify(false);
                if !self.on_completions() {
                    let _ = channel.get_cq_event(Duration::from_millis(1));
                }
            }
            _ => {
                if let Ok(ev) = self.ch.get_cm_event(Duration::from_millis(50)) {
                    return self.on_cm_event(ev);
                }
            }
        }
        Ok(())
    }

    /// `rping_cma_event_handler`.
    fn on_cm_event(&mut self, ev: CmEvent) -> Result<(), Fatal> {
        let who = if ev.id == self.cm_id { "parent" } else { "child" };
        self.dbg(format!("cma_event type {} cma_id 0x{:x} ({who})", ev.event, ev.id.handle()));
        match ev.event {
            CmEventType::AddrResolved => {
                self.state = St::AddrResolved;
                if let Err(e) = ev.id.resolve_route(Duration::from_millis(2000)) {
                    self.state = St::Error;
                    eprintln!("rdma_resolve_route: {e}");
                    self.post();
                }
            }
            CmEventType::RouteResolved => {
                self.state = St::RouteResolved;
                self.post();
            }
            CmEventType::ConnectRequest => {
                self.state = St::ConnectRequest;
                self.dbg(format!("child cma 0x{:x}", ev.id.handle()));
                self.child = Some(ev.id);
                self.post();
            }
            CmEventType::ConnectResponse => {
                self.dbg("CONNECT_RESPONSE");
                self.state = St::Connected;
                self.post();
            }
            CmEventType::Established => {
                self.dbg("ESTABLISHED");
                // The server wakes on the first RECV instead.
                if !self.server {
                    self.state = St::Connected;
                }
                self.post();
            }
            CmEventType::AddrError
            | CmEventType::RouteError
            | CmEventType::ConnectError
            | CmEventType::Unreachable
            | CmEventType::Rejected => {
                eprintln!("cma event {}, error {}", ev.event, ev.status);
                self.post();
                return Err(Fatal::Exit);
            }
            CmEventType::Disconnected => {
                eprintln!("{} DISCONNECT EVENT...", if self.server { "server" } else { "client" });
                self.state = St::Disconnected;
                self.post();
            }
            CmEventType::DeviceRemoval => {
                eprintln!("cma detected device removal!!!!");
                self.state = St::Error;
                self.post();
                return Err(Fatal::Exit);
            }
            other => eprintln!("unhandled event: {other}, ignoring"),
        }
        Ok(())
    }

    /// `rping_cq_event_handler`: whether it took any completion.
    fn on_completions(&mut self) -> bool {
        if self.cq_done {
            return false;
        }
        let Some(cq) = self.res.as_ref().map(|r| r.cq.clone()) else { return false };
        let mut wc = [WorkCompletion::default()];
        let mut any = false;
        while !self.cq_done && cq.poll(&mut wc) == 1 {
            any = true;
            self.on_completion(&wc[0]);
        }
        any
    }

    fn on_completion(&mut self, wc: &WorkCompletion) {
        if wc.status != WcStatus::Success {
            if wc.status == WcStatus::WrFlushErr {
                // rping's completion thread leaves once its work is flushed.
                self.cq_done = true;
                return;
            }
            eprintln!("cq completion failed status {}", wc.status as u32);
            return self.cq_error();
        }
        match wc.opcode {
            WcOpcode::Send => self.dbg("send completion"),
            WcOpcode::RdmaWrite => {
                self.dbg("rdma write completion");
                self.state = St::RdmaWriteComplete;
                self.post();
            }
            WcOpcode::RdmaRead => {
                self.dbg("rdma read completion");
                self.state = St::RdmaReadComplete;
                self.post();
            }
            WcOpcode::Recv => {
                self.dbg("recv completion");
                if self.on_recv(wc).is_err() {
                    eprintln!("recv wc error: -1");
                    return self.cq_error();
                }
                if let Err(e) = self.post_recv() {
                    eprintln!("post recv error: {e}");
                    return self.cq_error();
                }
                self.post();
            }
            _ => {
                self.dbg("unknown!!!!! completion");
                self.cq_error();
            }
        }
    }

    fn cq_error(&mut self) {
        self.state = St::Error;
        self.cq_done = true;
        self.post();
    }

    /// `server_recv` / `client_recv`.
    fn on_recv(&mut self, wc: &WorkCompletion) -> Result<(), ()> {
        if wc.byte_len as usize != INFO_LEN {
            eprintln!("Received bogus data, size {}", wc.byte_len);
            return Err(());
        }
        if !self.server {
            self.state = if self.state == St::RdmaReadAdv { St::RdmaWriteAdv } else { St::RdmaWriteComplete };
            return Ok(());
        }
        let mut b = [0u8; INFO_LEN];
        self.res.as_ref().expect("receiving").recv.read(0, &mut b);
        self.remote = RdmaInfo::from_bytes(&b);
        let r = self.remote;
        self.dbg(format!("Received rkey {:x} addr {:x} len {} from peer", r.rkey, r.buf, r.size));
        self.state = if self.state <= St::Connected || self.state == St::RdmaWriteComplete {
            St::RdmaReadAdv
        } else {
            St::RdmaWriteAdv
        };
        Ok(())
    }

    /// Posts the one receive of the advertisement buffer.
    pub fn post_recv(&self) -> Result<(), Error> {
        let res = self.res.as_ref().expect("set up");
        res.qp.post_recv(&RecvWr { wr_id: 0, sg_list: res.recv.sge(0, INFO_LEN as u32).into() })
    }

    /// Sends what the send buffer holds (`cb->sq_wr`).
    pub fn post_send_info(&self) -> Result<(), Error> {
        let res = self.res.as_ref().expect("set up");
        res.qp.post_send(&SendWr::new(0, WrOp::Send, vec![res.send.sge(0, INFO_LEN as u32)]))
    }

    /// `rping_format_send`: advertises `mr` (its first `size` bytes).
    pub fn format_send(&self, mr: &Mr, size: u32) {
        let info = RdmaInfo { buf: mr.addr(), rkey: mr.rkey(), size };
        self.dbg(format!("RDMA addr {:x} rkey {:x} len {}", info.buf, info.rkey, info.size));
        self.res.as_ref().expect("set up").send.write(0, &info.to_bytes());
    }

    /// After a disconnect, rping joins its completion thread, which leaves
    /// once the receive is flushed: wait for that (briefly), events included.
    pub fn join_cq(&mut self) {
        let deadline = std::time::Instant::now() + Duration::from_millis(500);
        while !self.cq_done && std::time::Instant::now() < deadline {
            if self.step().is_err() {
                return;
            }
        }
    }
}
