//! Queue pairs: creation, the state machine through `modify` (and the
//! `to_init`/`to_rtr`/`to_rts` helpers), and posting.

use crate::cq::Cq;
use crate::driver::EventObject;
use crate::error::{Error, PostError};
use crate::memory::Pd;
use crate::srq::Srq;
use std::sync::Arc;
use uroce_transport::engine::{
    required_mask, AccessFlags, AddressVector, Gid, Mtu, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType,
    RecvWr, SendWr, MAX_RD_ATOMIC,
};

/// What `create_qp` needs (`struct ibv_qp_init_attr`).
#[derive(Clone)]
pub struct QpInit {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// Where send completions go.
    pub send_cq: Cq,
    /// Where receive completions go.
    pub recv_cq: Cq,
    /// A shared receive queue instead of the QP's own.
    pub srq: Option<Srq>,
    /// Queue sizes.
    pub cap: QpCap,
    /// Every send WR completes, signaled or not.
    pub sq_sig_all: bool,
}

impl QpInit {
    /// A QP of `qp_type` with default capacities, signaling only the WRs that ask.
    pub fn new(qp_type: QpType, send_cq: &Cq, recv_cq: &Cq) -> QpInit {
        QpInit {
            qp_type,
            send_cq: send_cq.clone(),
            recv_cq: recv_cq.clone(),
            srq: None,
            cap: QpCap::default(),
            sq_sig_all: false,
        }
    }
    /// An RC QP.
    pub fn rc(send_cq: &Cq, recv_cq: &Cq) -> QpInit {
        QpInit::new(QpType::Rc, send_cq, recv_cq)
    }
    /// A UC QP.
    pub fn uc(send_cq: &Cq, recv_cq: &Cq) -> QpInit {
        QpInit::new(QpType::Uc, send_cq, recv_cq)
    }
    /// A UD QP.
    pub fn ud(send_cq: &Cq, recv_cq: &Cq) -> QpInit {
        QpInit::new(QpType::Ud, send_cq, recv_cq)
    }
}

/// What connecting a QP to its peer takes: what the two sides exchanged
/// (QPN, PSN, GID) and the usual RC parameters, with rc_pingpong's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectAttr {
    /// The peer's QP number.
    pub dest_qpn: u32,
    /// The peer's initial PSN: our receive PSN.
    pub rq_psn: u32,
    /// Our initial PSN; `None` takes [`Qp::initial_psn`].
    pub sq_psn: Option<u32>,
    /// The peer's GID.
    pub dgid: Gid,
    /// Our GID index (1: the IPv4 GID, as `-g 1`).
    pub sgid_index: u8,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Local ACK timeout: 4.096 us x 2^timeout.
    pub timeout: u8,
    /// Retries after a timeout or sequence NAK (at most 7).
    pub retry_cnt: u8,
    /// Retries after an RNR NAK (7: forever).
    pub rnr_retry: u8,
    /// The RNR timer code we send as responder.
    pub min_rnr_timer: u8,
    /// READs/atomics we keep outstanding as requester.
    pub max_rd_atomic: u8,
    /// READs/atomics we serve at once as responder.
    pub max_dest_rd_atomic: u8,
    /// Remote access this QP grants (RC/UC).
    pub access: AccessFlags,
    /// Q_Key of a UD QP.
    pub qkey: u32,
}

impl ConnectAttr {
    /// Connect to QP `dest_qpn` at `dgid` whose first PSN is `rq_psn`, with rc_pingpong's defaults.
    pub fn new(dest_qpn: u32, rq_psn: u32, dgid: Gid) -> ConnectAttr {
        ConnectAttr {
            dest_qpn,
            rq_psn,
            sq_psn: None,
            dgid,
            sgid_index: 1,
            path_mtu: Mtu::Mtu1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: MAX_RD_ATOMIC.min(16),
            max_dest_rd_atomic: MAX_RD_ATOMIC.min(16),
            access: AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
            qkey: 0x1111_1111,
        }
    }
}

/// `struct ibv_qp`: cheap to clone; keeps its PD, CQs and SRQ alive; destroyed
/// when the last clone drops.
#[derive(Clone)]
pub struct Qp(Arc<QpInner>);

struct QpInner {
    pd: Pd,
    _send_cq: Cq,
    _recv_cq: Cq,
    _srq: Option<Srq>,
    qpn: u32,
    qp_type: QpType,
    initial_psn: u32,
}

impl Drop for QpInner {
    fn drop(&mut self) {
        let mut core = self.pd.context().driver().lock();
        core.destroy_qp(self.qpn);
        // Its groups: the link leaves those it was the last member of.
        let _ = core.follow_groups();
    }
}

impl Pd {
    /// `ibv_create_qp`: a QP in RESET.
    pub fn create_qp(&self, init: &QpInit) -> Result<Qp, Error> {
        let same_ctx = |cq: &Cq| Arc::ptr_eq(&cq.context().0, &self.context().0);
        if !same_ctx(&init.send_cq) || !same_ctx(&init.recv_cq) {
            return Err(Error::InvalidValue { verb: "ibv_create_qp", what: "CQ of another context".into() });
        }
        self.within_device_limits(&init.cap, init.srq.is_some())?;
        let attr = QpInitAttr {
            qp_type: init.qp_type,
            pd: self.handle(),
            send_cq: init.send_cq.handle(),
            recv_cq: init.recv_cq.handle(),
            srq: init.srq.as_ref().map(|s| s.handle()),
            cap: init.cap,
            sq_sig_all: init.sq_sig_all,
        };
        let (qpn, initial_psn) = {
            let mut core = self.context().driver().lock();
            let qpn = core.create_qp(attr)?;
            self.context().route_events_of(&mut core, EventObject::Qp(qpn));
            (qpn, core.engine.random_psn())
        };
        Ok(Qp(Arc::new(QpInner {
            pd: self.clone(),
            _send_cq: init.send_cq.clone(),
            _recv_cq: init.recv_cq.clone(),
            _srq: init.srq.clone(),
            qpn,
            qp_type: init.qp_type,
            initial_psn,
        })))
    }

    /// Queue sizes past what the device takes are refused (EINVAL), as
    /// rxe refuses them: WRs past `max_qp_wr`, SGEs past `max_sge`, inline
    /// data past [`MAX_INLINE_DATA`]; the receive queue's sizes only
    /// without an SRQ (which has its own).
    fn within_device_limits(&self, cap: &QpCap, has_srq: bool) -> Result<(), Error> {
        let dev = self.context().query_device();
        let (wr, sge) = (dev.max_qp_wr, dev.max_sge);
        let recv_fits = has_srq || (cap.max_recv_wr <= wr && cap.max_recv_sge <= sge);
        if cap.max_send_wr <= wr && cap.max_send_sge <= sge && recv_fits && cap.max_inline_data <= MAX_INLINE_DATA {
            return Ok(());
        }
        let what = format!(
            "{} send and {} receive WRs of {} and {} SGEs, {} bytes inline: the device takes at most {wr} WRs of \
             {sge} SGEs and {MAX_INLINE_DATA} bytes inline",
            cap.max_send_wr, cap.max_recv_wr, cap.max_send_sge, cap.max_recv_sge, cap.max_inline_data
        );
        Err(Error::InvalidValue { verb: "ibv_create_qp", what })
    }
}

/// The most inline data a QP takes (rxe's RXE_MAX_INLINE_DATA: the SGE
/// room of its largest send WQE, 32 SGEs of 16 bytes).
pub const MAX_INLINE_DATA: u32 = 512;

impl Qp {
    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        self.0.qpn
    }
    /// RC, UC or UD.
    pub fn qp_type(&self) -> QpType {
        self.0.qp_type
    }
    /// The PD the QP belongs to.
    pub fn pd(&self) -> &Pd {
        &self.0.pd
    }
    /// A random PSN chosen at creation, to start the send queue with (and to
    /// tell the peer).
    pub fn initial_psn(&self) -> u32 {
        self.0.initial_psn
    }

    /// uroce's authenticated mode (not in libibverbs): every packet of this
    /// RC or UC QP carries a MAC under `key` and every packet it takes must,
    /// so that nobody without the key can forge, change or replay one (see
    /// docs/SECURITY.md). The peer's QP needs the same key; an rxe or RNIC
    /// peer cannot take part. Set it in RESET or INIT, before connecting.
    pub fn set_auth_key(&self, key: [u8; 32]) -> Result<(), Error> {
        let driver = self.0.pd.context().driver();
        driver.post(|e| e.set_qp_auth_key(self.0.qpn, key)).map_err(Error::engine("set_auth_key"))
    }

    /// `ibv_modify_qp`: a wrong transition or mask is an error naming the
    /// states and attributes involved.
    pub fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<(), Error> {
        if mask.contains(QpAttrMask::AV) {
            let index = usize::from(attr.ah_attr.sgid_index);
            self.0
                .pd
                .context()
                .source_gid(index)
                .map_err(|e| Error::InvalidValue { verb: "ibv_modify_qp", what: format!("ah_attr.sgid_index: {e}") })?;
        }
        let driver = self.0.pd.context().driver();
        driver.post(|e| e.modify_qp(self.0.qpn, attr, mask)).map_err(Error::engine("ibv_modify_qp"))
    }

    /// `ibv_query_qp`.
    pub fn query(&self) -> QpAttr {
        self.0.pd.context().driver().lock().engine.query_qp(self.0.qpn).unwrap_or_default()
    }

    /// The current state.
    pub fn state(&self) -> QpState {
        self.query().qp_state
    }

    /// RESET -> INIT with port 1, P_Key index 0 and the access (RC/UC) or Q_Key (UD).
    pub fn to_init(&self, c: &ConnectAttr) -> Result<(), Error> {
        let attr = QpAttr {
            qp_state: QpState::Init,
            pkey_index: 0,
            port_num: 1,
            qp_access_flags: c.access,
            qkey: c.qkey,
            ..QpAttr::default()
        };
        self.modify(&attr, self.required_mask(QpState::Reset, QpState::Init))
    }

    /// INIT -> RTR: the peer's QPN, PSN and GID, path MTU, responder resources.
    pub fn to_rtr(&self, c: &ConnectAttr) -> Result<(), Error> {
        let ah_attr =
            AddressVector { dgid: c.dgid, sgid_index: c.sgid_index, hop_limit: 64, port_num: 1, ..Default::default() };
        let attr = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: c.path_mtu,
            dest_qp_num: c.dest_qpn,
            rq_psn: c.rq_psn,
            max_dest_rd_atomic: c.max_dest_rd_atomic,
            min_rnr_timer: c.min_rnr_timer,
            ah_attr,
            ..QpAttr::default()
        };
        self.modify(&attr, self.required_mask(QpState::Init, QpState::Rtr))
    }

    /// RTR -> RTS: our send PSN and (RC) the retry parameters.
    pub fn to_rts(&self, c: &ConnectAttr) -> Result<(), Error> {
        let attr = QpAttr {
            qp_state: QpState::Rts,
            sq_psn: c.sq_psn.unwrap_or(self.0.initial_psn),
            timeout: c.timeout,
            retry_cnt: c.retry_cnt,
            rnr_retry: c.rnr_retry,
            max_rd_atomic: c.max_rd_atomic,
            ..QpAttr::default()
        };
        self.modify(&attr, self.required_mask(QpState::Rtr, QpState::Rts))
    }

    /// What a `from -> to` modify of this QP must carry, from the engine's
    /// table (the helpers below give exactly that, nothing optional).
    fn required_mask(&self, from: QpState, to: QpState) -> QpAttrMask {
        required_mask(self.qp_type(), from, to).expect("a transition the table has")
    }

    /// RESET -> INIT -> RTR -> RTS in one call.
    pub fn connect(&self, c: &ConnectAttr) -> Result<(), Error> {
        self.to_init(c)?;
        self.to_rtr(c)?;
        self.to_rts(c)
    }

    /// `ibv_attach_mcast`: this UD QP receives the datagrams sent to the
    /// multicast GID `gid` (with destination QPN 0xFFFFFF,
    /// [`uroce_transport::engine::MULTICAST_QPN`]); the device joins the IP
    /// group (the udp link: IPv4 `::ffff:224.0.0.0/100`, or IPv6 `ff00::/8`).
    /// EINVAL for a QP that is not UD or a GID that is not multicast,
    /// ENOMEM past rxe's limits (8192 groups, 56 QPs a group).
    pub fn attach_mcast(&self, gid: Gid) -> Result<(), Error> {
        self.0.pd.context().driver().lock().attach_mcast(self.0.qpn, gid)
    }

    /// `ibv_detach_mcast`: EINVAL if the QP is not attached to `gid`.
    pub fn detach_mcast(&self, gid: Gid) -> Result<(), Error> {
        self.0.pd.context().driver().lock().detach_mcast(self.0.qpn, gid)
    }

    /// `ibv_post_send` of one WR. A bad lkey or range is not an error here: the
    /// WR completes with LOC_PROT_ERR / LOC_LEN_ERR, as on a NIC.
    pub fn post_send(&self, wr: &SendWr) -> Result<(), Error> {
        self.post_send_list(std::slice::from_ref(wr)).map_err(|e| e.error)
    }

    /// `ibv_post_send` of one WR taken by value, with the data of an inline WR
    /// (`SendFlags::INLINE`) that the caller already copied from its own
    /// memory, as C's inline SGEs name unregistered memory (their lkeys are
    /// ignored, as an RNIC ignores them); `None` gathers from the SGEs' regions.
    /// The engine copies the bytes before this returns.
    pub fn post_send_inline(&self, wr: SendWr, inline: Option<&[u8]>) -> Result<(), Error> {
        let qpn = self.0.qpn;
        let driver = self.0.pd.context().driver();
        driver
            .post_request(qpn, |engine| engine.post_send_inline(qpn, wr, inline))
            .map_err(Error::engine("ibv_post_send"))
    }

    /// `ibv_wr_complete`: posts `wrs` (each with its inline data, as
    /// [`Qp::post_send_inline`]) all or none (see `Engine::post_send_batch`).
    pub fn post_send_batch(&self, wrs: Vec<(SendWr, Option<Vec<u8>>)>) -> Result<(), Error> {
        let qpn = self.0.qpn;
        let driver = self.0.pd.context().driver();
        driver.post_request(qpn, |engine| engine.post_send_batch(qpn, wrs)).map_err(Error::engine("ibv_wr_complete"))
    }

    /// `ibv_post_send` of a list; stops at the first refused WR and says which.
    pub fn post_send_list(&self, wrs: &[SendWr]) -> Result<(), PostError> {
        self.0.pd.context().driver().post_request(self.0.qpn, |engine| {
            wrs.iter().enumerate().try_for_each(|(index, wr)| {
                engine
                    .post_send(self.0.qpn, wr.clone())
                    .map_err(|err| PostError { index, error: Error::Engine { verb: "ibv_post_send", err } })
            })
        })
    }

    /// `ibv_post_recv` of one WR.
    pub fn post_recv(&self, wr: &RecvWr) -> Result<(), Error> {
        self.post_recv_list(std::slice::from_ref(wr)).map_err(|e| e.error)
    }

    /// `ibv_post_recv` of a list; stops at the first refused WR and says which.
    pub fn post_recv_list(&self, wrs: &[RecvWr]) -> Result<(), PostError> {
        // A receive may release a peer waiting on RNR: nothing to send now, but
        // the engine may have queued an ACK.
        self.0.pd.context().driver().post(|engine| {
            wrs.iter().enumerate().try_for_each(|(index, wr)| {
                engine
                    .post_recv(self.0.qpn, wr.clone())
                    .map_err(|err| PostError { index, error: Error::Engine { verb: "ibv_post_recv", err } })
            })
        })
    }
}
