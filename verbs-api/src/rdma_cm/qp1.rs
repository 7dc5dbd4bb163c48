//! QP1 of a device and the sans-IO [`Cm`] that speaks through it, served
//! by the device's driver in its own rounds, under its one lock (no thread
//! of its own): received MADs go to the CM, the CM's timers run, its MADs
//! go out on QP1's send slots, its events wait in `events` until the round
//! lets go of the lock and hands them to rdma_cm (`dispatch`).
//!
//! Started on rdma_cm's first use of the device, it lives as long as the
//! device, answering REQs (with a REJ when nobody listens), as the kernel's
//! QP1 does.

use super::id::IdInner;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Weak;
use uroce_transport::cm::mad::MAD_LEN;
use uroce_transport::cm::timing::RXE_LOCAL_CA_ACK_DELAY;
use uroce_transport::cm::{
    Cm, CmConfig, CmEvent, CmMessage, CommId, Mad, Outgoing, GSI_QKEY, GSI_QPN, MAX_CONNS_PER_PEER,
};
use uroce_transport::engine::{
    AccessFlags, CqHandle, Engine, Error as EngineError, Gid, Instant, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState,
    QpType, RecvWr, SendWr, Sge, UdDest, WcOpcode, WcStatus, WorkCompletion, WrOp, GRH_LEN,
};

/// MADs QP1 can receive before it reposts, and send at once: the kernel's
/// MAD layer's defaults (`ib_mad`'s `recv_queue_size` and
/// `send_queue_size`). Receives are reposted while a receive batch is
/// handed to the engine (`Core::receive`), so that a burst of REQs
/// (cmtime's 1000 connections at once) is not dropped for want of a
/// receive and retried only after the CM's response timeout (4 s).
const RECV_SLOTS: usize = 512;
const SEND_SLOTS: usize = 128;
/// How many received packets `Core::receive` hands the engine between two
/// reposts of QP1's receives: half of them, so that a receive batch of any
/// size leaves QP1 a receive for every MAD in it.
pub(crate) const QP1_REFILL_EVERY: usize = RECV_SLOTS / 2;
const RECV_LEN: usize = GRH_LEN + MAD_LEN;

/// One of QP1's two regions: slots of one size, in memory the engine owns.
struct Slots {
    lkey: u32,
    addr: u64,
    len: usize,
}

impl Slots {
    fn register(
        engine: &mut Engine,
        pd: uroce_transport::engine::Pd,
        addr: u64,
        count: usize,
        len: usize,
    ) -> Result<Slots, EngineError> {
        let keys = engine.reg_mr(pd, addr, Box::new(vec![0u8; count * len]), AccessFlags::LOCAL_WRITE)?;
        Ok(Slots { lkey: keys.lkey, addr, len })
    }

    fn sge(&self, slot: usize, len: usize) -> Sge {
        Sge { addr: self.addr + (slot * self.len) as u64, length: len as u32, lkey: self.lkey }
    }
}

/// QP1, its buffers, and the CM with rdma_cm's tables of it.
pub(crate) struct Qp1 {
    pub cm: Cm,
    /// The rdma_cm ID of each connection.
    pub ids: HashMap<CommId, Weak<IdInner>>,
    /// The listeners (by key) of each service ID the CM takes REQs for.
    services: BTreeMap<u64, BTreeSet<usize>>,
    /// Events the CM raised, for rdma_cm once the lock is let go.
    pub events: VecDeque<CmEvent>,
    qpn: u32,
    cq: CqHandle,
    recv: Slots,
    send: Slots,
    free: Vec<usize>,
    /// MADs waiting for a free send slot.
    backlog: VecDeque<Outgoing>,
}

impl Qp1 {
    /// Creates QP1 (UD, RTS, Q_Key 0x80010000, receives posted) on `engine`.
    pub fn start(engine: &mut Engine, ca_guid: u64) -> Result<Qp1, EngineError> {
        let pd = engine.alloc_pd();
        let cq = engine.create_cq(RECV_SLOTS + SEND_SLOTS);
        let cap = QpCap {
            max_send_wr: SEND_SLOTS as u32,
            max_recv_wr: RECV_SLOTS as u32,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let init = QpInitAttr { qp_type: QpType::Ud, pd, send_cq: cq, recv_cq: cq, srq: None, cap, sq_sig_all: true };
        let qpn = engine.create_gsi_qp(init)?;
        let attr = QpAttr { qp_state: QpState::Init, pkey_index: 0, port_num: 1, qkey: GSI_QKEY, ..Default::default() };
        engine.modify_qp(
            qpn,
            &attr,
            QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY,
        )?;
        engine.modify_qp(qpn, &QpAttr { qp_state: QpState::Rtr, ..Default::default() }, QpAttrMask::STATE)?;
        let rts = QpAttr { qp_state: QpState::Rts, sq_psn: engine.random_psn(), ..Default::default() };
        engine.modify_qp(qpn, &rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN)?;
        // Addresses in the engine's own space: nothing else names these regions.
        let recv = Slots::register(engine, pd, 0x1000_0000, RECV_SLOTS, RECV_LEN)?;
        let send = Slots::register(engine, pd, 0x2000_0000, SEND_SLOTS, MAD_LEN)?;
        let seed = engine.derive_seed();
        let cm = Cm::new(CmConfig {
            ca_guid,
            ack_delay: RXE_LOCAL_CA_ACK_DELAY,
            seed,
            max_conns_per_peer: MAX_CONNS_PER_PEER,
        });
        let qp1 = Qp1 {
            cm,
            ids: HashMap::new(),
            services: BTreeMap::new(),
            events: VecDeque::new(),
            qpn,
            cq,
            recv,
            send,
            free: (0..SEND_SLOTS).collect(),
            backlog: VecDeque::new(),
        };
        for slot in 0..RECV_SLOTS {
            qp1.post_recv(engine, slot);
        }
        Ok(qp1)
    }

    /// A round's work: received MADs to the CM, its timers, its events
    /// queued, its MADs onto QP1. Whether events wait for rdma_cm.
    pub fn serve(&mut self, engine: &mut Engine, now: Instant) -> bool {
        self.take_completions(engine, now);
        if self.cm.poll_timeout().is_some_and(|t| t <= now) {
            self.cm.handle_timeout(now);
        }
        while let Some(ev) = self.cm.poll_event() {
            self.events.push_back(ev);
        }
        self.flush(engine);
        !self.events.is_empty()
    }

    /// Send slots back from their completions, and the MADs that waited for
    /// one onto QP1 (the device closing). Whether MADs still wait.
    pub fn serve_sends(&mut self, engine: &mut Engine, now: Instant) -> bool {
        self.take_completions(engine, now);
        self.flush(engine);
        !self.backlog.is_empty()
    }

    /// QP1's completions: MADs to the CM (receives posted again), send slots back.
    pub fn take_completions(&mut self, engine: &mut Engine, now: Instant) {
        while let Some(wc) = engine.poll_cq(self.cq) {
            self.on_completion(engine, now, &wc);
        }
    }

    fn on_completion(&mut self, engine: &mut Engine, now: Instant, wc: &WorkCompletion) {
        let slot = wc.wr_id as usize;
        if wc.opcode != WcOpcode::Recv {
            self.free.push(slot);
            return;
        }
        if wc.status == WcStatus::WrFlushErr {
            return;
        }
        if wc.status == WcStatus::Success {
            let mut buf = [0u8; RECV_LEN];
            let len = (wc.byte_len as usize).min(RECV_LEN);
            if let Some(region) = engine.mr(self.recv.lkey) {
                region.read(slot * RECV_LEN, &mut buf[..len]);
            }
            let src = grh_source(&buf[..GRH_LEN]);
            trace_mad("receives", src, &buf[GRH_LEN..len]);
            self.cm.handle_mad(now, src, &buf[GRH_LEN..len]);
        }
        self.post_recv(engine, slot);
    }

    /// Posts the CM's MADs on QP1 (what does not fit waits for a free slot).
    pub fn flush(&mut self, engine: &mut Engine) {
        while let Some(out) = self.backlog.pop_front().or_else(|| self.cm.poll_transmit()) {
            let Some(slot) = self.free.pop() else {
                self.backlog.push_front(out);
                return;
            };
            trace_mad("sends", out.dgid, &out.mad);
            if let Some(region) = engine.mr_mut(self.send.lkey) {
                region.write(slot * MAD_LEN, &out.mad);
            }
            let mut wr = SendWr::new(slot as u64, WrOp::Send, vec![self.send.sge(slot, MAD_LEN)]);
            wr.ud = Some(UdDest { dgid: out.dgid, remote_qpn: GSI_QPN, remote_qkey: GSI_QKEY });
            if let Err(e) = engine.post_send(self.qpn, wr) {
                tracing::warn!("rdma_cm: QP1 refused a MAD: {e}");
                self.free.push(slot);
            }
        }
    }

    fn post_recv(&self, engine: &mut Engine, slot: usize) {
        let wr = RecvWr { wr_id: slot as u64, sg_list: self.recv.sge(slot, RECV_LEN).into() };
        if let Err(e) = engine.post_recv(self.qpn, wr) {
            tracing::warn!("rdma_cm: QP1 refused a receive: {e}");
        }
    }

    /// Takes REQs for `service_id` on behalf of listener `key`.
    pub fn register_service(&mut self, service_id: u64, key: usize) {
        let keys = self.services.entry(service_id).or_default();
        let first = keys.is_empty();
        keys.insert(key);
        if first {
            let _ = self.cm.listen(service_id);
        }
    }

    /// The service IDs listened on.
    pub fn service_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.services.keys().copied()
    }

    /// Stops listening on `service_id`, whoever listened.
    pub fn drop_service(&mut self, service_id: u64) {
        if self.services.remove(&service_id).is_some() {
            self.cm.unlisten(service_id);
        }
    }

    /// Listener `key` is gone: the services only it listened on close.
    pub fn unregister(&mut self, key: usize) {
        let mut gone = Vec::new();
        for (sid, keys) in self.services.iter_mut() {
            if keys.remove(&key) && keys.is_empty() {
                gone.push(*sid);
            }
        }
        for sid in gone {
            self.services.remove(&sid);
            self.cm.unlisten(sid);
        }
    }

    /// The connection's ID is gone: tell the peer (`rdma_destroy_id`).
    pub fn destroy(&mut self, now: Instant, id: CommId) {
        self.cm.destroy(now, id);
        self.ids.remove(&id);
    }
}

/// The source GID of a UD receive's GRH: an IPv6 header, or for IPv4 20
/// zero bytes then the IPv4 header (as rxe writes it).
fn grh_source(grh: &[u8]) -> Gid {
    use uroce_transport::wire::ip::{ipv4, ipv6, version};
    let mut g = [0u8; 16];
    if version(grh[0]) == 6 {
        g.copy_from_slice(&grh[ipv6::SRC]);
        return Gid(g);
    }
    let mut v4 = [0u8; 4];
    v4.copy_from_slice(&grh[GRH_LEN - ipv4::HEADER_LEN..][ipv4::SRC]);
    Gid::from_ipv4(v4)
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
