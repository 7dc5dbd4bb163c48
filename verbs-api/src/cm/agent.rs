//! The CM agent of one context: QP1 with its receive ring and send slots,
//! the sans-IO [`Cm`], and a thread that sleeps on QP1's completion channel
//! and a doorbell, feeds the CM its MADs and timers, and turns its events
//! into rdma_cm events. It runs while some rdma_cm ID uses the context.
//!
//! Locks, in the order they may be taken: an agent's state, then an ID's
//! state; the engine, the channels' queues and the registry's tables are
//! leaves (nothing is locked while holding them). A user call that needs
//! both takes the agent's first; an ID dropped where an agent lock is held
//! leaves its CM work to the agent thread.

use super::dispatch;
use super::id::IdInner;
use crate::channel::CompChannel;
use crate::context::Context;
use crate::cq::Cq;
use crate::error::Error;
use crate::memory::{Mr, Pd};
use crate::qp::{Qp, QpInit};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::{Deref, DerefMut};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::Duration;
use uroce_transport::cm::mad::MAD_LEN;
use uroce_transport::cm::timing::RXE_LOCAL_CA_ACK_DELAY;
use uroce_transport::cm::{Cm, CmConfig, CmMessage, CommId, Mad, Outgoing, GSI_QKEY, GSI_QPN};
use uroce_transport::engine::{
    AccessFlags, Gid, Instant, QpAttr, QpAttrMask, QpCap, QpState, QpType, RecvWr, SendWr, UdDest, WcOpcode, WcStatus,
    WorkCompletion, WrOp, GRH_LEN,
};

/// MADs QP1 can receive before the agent reposts, and send at once.
const RECV_SLOTS: usize = 64;
const SEND_SLOTS: usize = 64;
const RECV_LEN: usize = GRH_LEN + MAD_LEN;
/// The longest the thread sleeps with nothing due.
const IDLE: Duration = Duration::from_millis(100);

thread_local! {
    /// How many agent locks this thread holds: an ID dropped meanwhile
    /// leaves its CM work to the agent thread instead of deadlocking.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

/// Work an ID's drop leaves for the agent.
enum Op {
    Destroy(CommId),
    Unregister(usize),
}

pub(crate) struct AgentState {
    pub cm: Cm,
    /// The rdma_cm ID of each connection.
    pub ids: HashMap<CommId, Weak<IdInner>>,
    /// The listeners (by key) of each service ID the CM takes REQs for.
    services: BTreeMap<u64, BTreeSet<usize>>,
    free: Vec<usize>,
    backlog: VecDeque<Outgoing>,
}

/// QP1 and its buffers.
struct Gsi {
    _pd: Pd,
    cq: Cq,
    qp: Qp,
    recv: Mr,
    send: Mr,
}

/// What the thread sleeps on, shared so that it sleeps without holding the agent.
struct Wake {
    channel: CompChannel,
    doorbell: EventFd,
}

pub(crate) struct Agent {
    pub ctx: Context,
    state: Mutex<AgentState>,
    gsi: Gsi,
    wake: Arc<Wake>,
    stop: AtomicBool,
    epoch: std::time::Instant,
    ops: Mutex<Vec<Op>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// The agent's state, locked; counted per thread (see `HELD`).
pub(crate) struct Locked<'a>(MutexGuard<'a, AgentState>);

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        HELD.with(|h| h.set(h.get() - 1));
    }
}

impl Deref for Locked<'_> {
    type Target = AgentState;
    fn deref(&self) -> &AgentState {
        &self.0
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut AgentState {
        &mut self.0
    }
}

impl Agent {
    /// Creates QP1 on `ctx` (RTS, Q_Key 0x80010000, receives posted) and the thread.
    pub fn start(ctx: &Context) -> Result<Arc<Agent>, Error> {
        let channel = ctx.create_comp_channel()?;
        let gsi = Gsi::new(ctx, &channel)?;
        let doorbell = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| Error::Os { verb: "rdma_cm agent eventfd", err: e.into() })?;
        let seed = ctx.shared().engine().random_psn().into();
        let cm = Cm::new(CmConfig { ca_guid: ctx.query_device().node_guid, ack_delay: RXE_LOCAL_CA_ACK_DELAY, seed });
        let state = AgentState {
            cm,
            ids: HashMap::new(),
            services: BTreeMap::new(),
            free: (0..SEND_SLOTS).collect(),
            backlog: VecDeque::new(),
        };
        let agent = Arc::new(Agent {
            ctx: ctx.clone(),
            state: Mutex::new(state),
            gsi,
            wake: Arc::new(Wake { channel, doorbell }),
            stop: AtomicBool::new(false),
            epoch: std::time::Instant::now(),
            ops: Mutex::new(Vec::new()),
            thread: Mutex::new(None),
        });
        let (weak, wake) = (Arc::downgrade(&agent), agent.wake.clone());
        let thread = std::thread::Builder::new()
            .name("uroce-rdma-cm".into())
            .spawn(move || run(weak, wake))
            .map_err(|err| Error::Os { verb: "rdma_cm agent thread", err })?;
        *agent.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
        Ok(agent)
    }

    pub fn lock(&self) -> Locked<'_> {
        let guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        HELD.with(|h| h.set(h.get() + 1));
        Locked(guard)
    }

    /// The CM's clock: time since the agent started.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    /// Wakes the thread (a timer may now be due earlier).
    pub fn ring(&self) {
        let _ = self.wake.doorbell.write(1);
    }

    /// Takes REQs for `service_id` on behalf of listener `key`.
    pub fn register_service(&self, service_id: u64, key: usize) {
        let mut st = self.lock();
        let keys = st.services.entry(service_id).or_default();
        let first = keys.is_empty();
        keys.insert(key);
        if first {
            let _ = st.cm.listen(service_id);
        }
    }

    /// Listener `key` is gone.
    pub fn unregister(&self, key: usize) {
        self.when_unlocked(Op::Unregister(key));
    }

    /// The connection's ID is gone: tell the peer (`rdma_destroy_id`).
    pub fn destroy(&self, id: CommId) {
        self.when_unlocked(Op::Destroy(id));
    }

    /// Runs `op` now, or, on a thread inside an agent lock, on the agent
    /// thread's next round.
    fn when_unlocked(&self, op: Op) {
        self.ops.lock().unwrap_or_else(|e| e.into_inner()).push(op);
        if HELD.with(Cell::get) > 0 {
            self.ring();
            return;
        }
        let mut st = self.lock();
        self.run_ops(&mut st);
        self.flush(&mut st);
    }

    fn run_ops(&self, st: &mut AgentState) {
        let ops = std::mem::take(&mut *self.ops.lock().unwrap_or_else(|e| e.into_inner()));
        let now = self.now();
        for op in ops {
            match op {
                Op::Destroy(id) => {
                    st.cm.destroy(now, id);
                    st.ids.remove(&id);
                }
                Op::Unregister(key) => unregister(st, key),
            }
        }
    }

    /// Posts the CM's MADs on QP1 (what does not fit waits for a free slot).
    pub fn flush(&self, st: &mut AgentState) {
        flush_to(&self.gsi, st);
    }

    /// One round of the thread: deferred work, received MADs, timers,
    /// events, sends. IDs the events hold are released after the lock.
    fn round(self: &Arc<Self>) {
        let mut keep = Vec::new();
        {
            let mut st = self.lock();
            self.run_ops(&mut st);
            self.receive(&mut st);
            let now = self.now();
            if st.cm.poll_timeout().is_some_and(|t| t <= now) {
                st.cm.handle_timeout(now);
            }
            while let Some(ev) = st.cm.poll_event() {
                dispatch::on_event(self, &mut st, ev, &mut keep);
            }
            self.flush(&mut st);
        }
        drop(keep);
    }

    /// Takes QP1's completions: MADs to the CM (receives posted again), send slots back.
    fn receive(&self, st: &mut AgentState) {
        let mut wcs = [WorkCompletion::default(); 16];
        loop {
            let n = self.gsi.cq.poll(&mut wcs);
            for wc in &wcs[..n] {
                let slot = wc.wr_id as usize;
                if wc.opcode != WcOpcode::Recv {
                    st.free.push(slot);
                    continue;
                }
                if wc.status == WcStatus::WrFlushErr {
                    continue;
                }
                if wc.status == WcStatus::Success {
                    let mut buf = [0u8; RECV_LEN];
                    let len = (wc.byte_len as usize).min(RECV_LEN);
                    self.gsi.recv.read(slot * RECV_LEN, &mut buf[..len]);
                    let src = grh_source(&buf[..GRH_LEN]);
                    trace_mad("receives", src, &buf[GRH_LEN..len]);
                    st.cm.handle_mad(self.now(), src, &buf[GRH_LEN..len]);
                }
                self.gsi.post_recv(slot);
            }
            if n < wcs.len() {
                return;
            }
        }
    }

    /// How long the thread may sleep: until the CM's next timer, at most `IDLE`.
    fn wait_time(&self) -> Duration {
        let st = self.lock();
        let due = st.cm.poll_timeout().map(|t| t - self.now());
        due.map_or(IDLE, |d| d.min(IDLE))
    }
}

impl Drop for Agent {
    /// Deferred destroys run, and QP1's last MADs (a DREQ, a REJ) get a
    /// moment to leave before it is destroyed.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.ring();
        let now = Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64);
        let ops = std::mem::take(self.ops.get_mut().unwrap_or_else(|e| e.into_inner()));
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for op in ops {
            if let Op::Destroy(id) = op {
                st.cm.destroy(now, id);
            }
        }
        flush_to(&self.gsi, st);
        drain_sends(&self.gsi, st, &self.ctx);
        let thread = self.thread.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread.filter(|t| t.thread().id() != std::thread::current().id()) {
            let _ = t.join();
        }
    }
}

fn flush_to(gsi: &Gsi, st: &mut AgentState) {
    while let Some(out) = st.backlog.pop_front().or_else(|| st.cm.poll_transmit()) {
        let Some(slot) = st.free.pop() else {
            st.backlog.push_front(out);
            return;
        };
        trace_mad("sends", out.dgid, &out.mad);
        gsi.send.write(slot * MAD_LEN, &out.mad);
        let mut wr = SendWr::new(slot as u64, WrOp::Send, vec![gsi.send.sge(slot * MAD_LEN, MAD_LEN as u32)]);
        wr.ud = Some(UdDest { dgid: out.dgid, remote_qpn: GSI_QPN, remote_qkey: GSI_QKEY });
        if let Err(e) = gsi.qp.post_send(&wr) {
            tracing::warn!("rdma_cm: QP1 refused a MAD: {e}");
            st.free.push(slot);
        }
    }
}

/// Waits (at most 200 ms) until every send slot's MAD has left.
fn drain_sends(gsi: &Gsi, st: &mut AgentState, ctx: &Context) {
    let deadline = std::time::Instant::now() + Duration::from_millis(200);
    let mut wcs = [WorkCompletion::default(); 16];
    loop {
        let n = gsi.cq.poll(&mut wcs);
        st.free.extend(wcs[..n].iter().filter(|wc| wc.opcode != WcOpcode::Recv).map(|wc| wc.wr_id as usize));
        if st.free.len() >= SEND_SLOTS || std::time::Instant::now() >= deadline {
            return;
        }
        if ctx.progress_mode() == crate::Progress::Manual {
            ctx.progress();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn unregister(st: &mut AgentState, key: usize) {
    let mut gone = Vec::new();
    for (sid, keys) in st.services.iter_mut() {
        if keys.remove(&key) && keys.is_empty() {
            gone.push(*sid);
        }
    }
    for sid in gone {
        st.services.remove(&sid);
        st.cm.unlisten(sid);
    }
}

/// The thread: arm, work, sleep on the completion channel and the doorbell.
fn run(agent: Weak<Agent>, wake: Arc<Wake>) {
    loop {
        let wait = {
            let Some(a) = agent.upgrade() else { return };
            if a.stop.load(Ordering::Relaxed) {
                return;
            }
            // Armed before polling: a completion after the poll still wakes us.
            let _ = a.gsi.cq.req_notify(false);
            a.round();
            a.wait_time()
        };
        let ms = u16::try_from(wait.as_micros().div_ceil(1000)).unwrap_or(u16::MAX);
        let mut fds = [
            PollFd::new(wake.channel.as_fd(), PollFlags::POLLIN),
            PollFd::new(wake.doorbell.as_fd(), PollFlags::POLLIN),
        ];
        let _ = poll(&mut fds, PollTimeout::from(ms));
        let _ = wake.channel.try_get_cq_event();
        let _ = wake.doorbell.read();
    }
}

impl Gsi {
    fn new(ctx: &Context, channel: &CompChannel) -> Result<Gsi, Error> {
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(RECV_SLOTS + SEND_SLOTS, Some(channel))?;
        let mut init = QpInit::new(QpType::Ud, &cq, &cq);
        init.cap = QpCap {
            max_send_wr: SEND_SLOTS as u32,
            max_recv_wr: RECV_SLOTS as u32,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        init.sq_sig_all = true;
        let qp = pd.create_gsi_qp(&init)?;
        let attr = QpAttr { qp_state: QpState::Init, pkey_index: 0, port_num: 1, qkey: GSI_QKEY, ..Default::default() };
        qp.modify(&attr, QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY)?;
        qp.modify(&QpAttr { qp_state: QpState::Rtr, ..Default::default() }, QpAttrMask::STATE)?;
        let sq_psn = ctx.shared().engine().random_psn();
        let rts = QpAttr { qp_state: QpState::Rts, sq_psn, ..Default::default() };
        qp.modify(&rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN)?;
        let recv = pd.reg_mr(RECV_SLOTS * RECV_LEN, AccessFlags::LOCAL_WRITE)?;
        let send = pd.reg_mr(SEND_SLOTS * MAD_LEN, AccessFlags::LOCAL_WRITE)?;
        let gsi = Gsi { _pd: pd, cq, qp, recv, send };
        for slot in 0..RECV_SLOTS {
            gsi.post_recv(slot);
        }
        Ok(gsi)
    }

    fn post_recv(&self, slot: usize) {
        let wr = RecvWr { wr_id: slot as u64, sg_list: vec![self.recv.sge(slot * RECV_LEN, RECV_LEN as u32)] };
        if let Err(e) = self.qp.post_recv(&wr) {
            tracing::warn!("rdma_cm: QP1 refused a receive: {e}");
        }
    }
}

/// The source GID of a UD receive's GRH: an IPv6 header, or for IPv4 20
/// zero bytes then the IPv4 header (as rxe writes it).
fn grh_source(grh: &[u8]) -> Gid {
    if grh[0] >> 4 == 6 {
        let mut g = [0u8; 16];
        g.copy_from_slice(&grh[8..24]);
        Gid(g)
    } else {
        Gid::from_ipv4([grh[32], grh[33], grh[34], grh[35]])
    }
}

fn trace_mad(dir: &str, peer: Gid, bytes: &[u8]) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    match Mad::new_checked(bytes).and_then(|m| CmMessage::parse(&m)) {
        Ok((h, m)) => tracing::debug!("rdma_cm: QP1 {dir} {m} (tid 0x{:016x}) {peer}", h.tid),
        Err(e) => tracing::debug!("rdma_cm: QP1 {dir} a {}-byte datagram that is no MAD ({e}) {peer}", bytes.len()),
    }
}
