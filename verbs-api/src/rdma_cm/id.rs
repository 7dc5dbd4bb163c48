//! `struct rdma_cm_id`: what an ID is (its state, addresses, route, QP,
//! connection), the calls that read it, and what dropping it does.

use super::event::{libc_errno::EINVAL, ChannelInner, EventChannel};
use super::qp_attr::{self, ConnInfo};
use super::registry;
use crate::context::Context;
use crate::error::Error;
use crate::memory::Pd;
use crate::qp::{Qp, QpInit};
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use uroce_transport::cm::msg::ReqRepr;
use uroce_transport::cm::{CommId, PortSpace};
use uroce_transport::engine::{Gid, Mtu, QpAttr, QpAttrMask, QpState, QpType};

/// `enum rdma_cm_state`, the states uroce's IDs go through (address and
/// route resolution complete at once, so their "query" states are not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmaState {
    Idle,
    AddrBound,
    AddrResolved,
    RouteResolved,
    Connect,
    Disconnect,
    Listen,
}

/// The path to the peer, as `rdma_resolve_route` finds it on RoCE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Route {
    pub sgid: Gid,
    pub sgid_index: u8,
    pub dgid: Gid,
    pub path_mtu: Mtu,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

impl Route {
    /// The address vector of a QP on this path.
    pub fn address_vector(&self) -> uroce_transport::engine::AddressVector {
        uroce_transport::engine::AddressVector {
            dgid: self.dgid,
            sgid_index: self.sgid_index,
            flow_label: self.flow_label,
            hop_limit: self.hop_limit,
            traffic_class: self.traffic_class,
            port_num: 1,
        }
    }
}

pub(crate) struct IdState {
    pub cma: CmaState,
    pub src: Option<SocketAddr>,
    pub dst: Option<SocketAddr>,
    /// The device the ID uses; its driver serves the ID's connection on QP1.
    pub ctx: Option<Context>,
    /// A listener's devices (a wildcard listener hears every device).
    pub listen_devices: Vec<Context>,
    pub route: Option<Route>,
    pub comm_id: Option<CommId>,
    pub qp: Option<Qp>,
    /// The PSN the peer starts with, which this side advertises.
    pub seq_num: u32,
    /// What this side serves and asks (librdmacm's `responder_resources`,
    /// `initiator_depth` of the ID).
    pub responder_resources: u8,
    pub initiator_depth: u8,
    /// The active side's REQ values, kept for its QP.
    pub retry_count: u8,
    /// The type of service of the route (`rdma_set_option` RDMA_OPTION_ID_TOS):
    /// its GRH traffic class, the IP header's TOS.
    pub tos: u8,
    /// The QP's local ACK timeout (`rdma_set_option` RDMA_OPTION_ID_ACK_TIMEOUT),
    /// in place of the one the CM exchange gives.
    pub ack_timeout: Option<u8>,
    /// The QP's attributes, once the peer's REQ or REP told them.
    pub conn: Option<ConnInfo>,
    /// The passive side's REQ.
    pub req: Option<Box<ReqRepr>>,
    /// Multicast groups joined, and whether the ID's QP was attached to each.
    pub groups: Vec<(std::net::IpAddr, bool)>,
    /// The devices whose links reserve the bound port for this ID (see
    /// `Driver::reserve_service`), and its service ID there.
    pub reserved: Vec<(Context, u64)>,
}

pub(crate) struct IdInner {
    pub key: usize,
    pub ps: PortSpace,
    /// Where its events go (`rdma_migrate_id` moves it).
    channel: Mutex<Weak<ChannelInner>>,
    pub state: Mutex<IdState>,
}

impl IdInner {
    pub fn new(channel: Weak<ChannelInner>, ps: PortSpace) -> IdInner {
        IdInner {
            key: registry::new_key(),
            ps,
            channel: Mutex::new(channel),
            state: Mutex::new(IdState {
                cma: CmaState::Idle,
                src: None,
                dst: None,
                ctx: None,
                listen_devices: Vec::new(),
                route: None,
                comm_id: None,
                qp: None,
                seq_num: 0,
                responder_resources: 0,
                initiator_depth: 0,
                retry_count: 0,
                tos: 0,
                ack_timeout: None,
                conn: None,
                req: None,
                groups: Vec::new(),
                reserved: Vec::new(),
            }),
        }
    }

    /// The channel its events go to, if it still exists.
    pub fn channel(&self) -> Option<Arc<ChannelInner>> {
        self.channel_weak().upgrade()
    }

    /// The channel its events go to, held weakly.
    pub fn channel_weak(&self) -> Weak<ChannelInner> {
        self.channel.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn lock(&self) -> MutexGuard<'_, IdState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for IdInner {
    /// `rdma_destroy_id`: the port and the listens go; a connection tells
    /// its peer (REJ, DREQ or DREP, as the CM state calls for).
    fn drop(&mut self) {
        registry::unbind(self.key);
        registry::remove_listener(self.key);
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for (ctx, sid) in st.reserved.drain(..) {
            ctx.driver().release_service(sid);
        }
        super::mcast::leave_all(st);
        let key = self.key;
        for ctx in st.listen_devices.drain(..) {
            let _ = ctx.driver().with_cm(|qp1, _| qp1.unregister(key));
        }
        if let (Some(ctx), Some(id)) = (st.ctx.take(), st.comm_id) {
            let _ = ctx.driver().with_cm(|qp1, now| qp1.destroy(now, id));
        }
    }
}

/// `struct rdma_cm_id`: cheap to clone; the last clone destroys it
/// (`rdma_destroy_id`). Events hold it too: take them before dropping the channel.
#[derive(Clone)]
pub struct CmId(pub(crate) Arc<IdInner>);

/// An rdma_cm error naming `verb`, with librdmacm's errno.
pub(crate) fn cm_err(verb: &'static str, errno: i32, what: impl Into<String>) -> Error {
    Error::Cm { verb, what: what.into(), errno }
}

impl CmId {
    /// `rdma_create_id` on `channel`.
    pub fn new(channel: &EventChannel, ps: PortSpace) -> Result<CmId, Error> {
        channel.create_id(ps)
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, IdState> {
        self.0.lock()
    }

    /// `rdma_migrate_id`: its events from now on go to `channel` (events
    /// already queued on the old channel stay there).
    pub fn migrate(&self, channel: &EventChannel) {
        *self.0.channel.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&channel.0);
        if let Some(ctx) = self.context() {
            channel.0.note_context(&ctx);
        }
    }

    /// A number unique to this ID in the process, for logs (what C prints as
    /// the ID's pointer).
    pub fn handle(&self) -> usize {
        self.0.key
    }

    /// The port space.
    pub fn port_space(&self) -> PortSpace {
        self.0.ps
    }

    /// The device the ID uses (`id->verbs`), once bound or resolved.
    pub fn context(&self) -> Option<Context> {
        self.state().ctx.clone()
    }

    /// The QP `create_qp` made, if any (`id->qp`).
    pub fn qp(&self) -> Option<Qp> {
        self.state().qp.clone()
    }

    /// The local address (`rdma_get_local_addr`).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.state().src
    }

    /// The peer's address (`rdma_get_peer_addr`).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.state().dst
    }

    /// The address vector of the route (what `ibv_ah_attr` a UD peer's
    /// ESTABLISHED event carries), once resolved.
    pub fn address_vector(&self) -> Option<uroce_transport::engine::AddressVector> {
        self.state().route.map(|r| r.address_vector())
    }

    /// The port number: uroce devices have one.
    pub fn port_num(&self) -> u8 {
        1
    }

    /// `rdma_create_qp`: a QP on the ID's device, in INIT with no remote
    /// access yet; connect and accept give it what the exchange decides.
    pub fn create_qp(&self, pd: &Pd, init: &QpInit) -> Result<Qp, Error> {
        const VERB: &str = "rdma_create_qp";
        let mut st = self.state();
        let ctx = st
            .ctx
            .clone()
            .ok_or_else(|| cm_err(VERB, EINVAL, "the ID has no device yet: bind or resolve an address first"))?;
        if !Arc::ptr_eq(&ctx.0, &pd.context().0) {
            return Err(cm_err(VERB, EINVAL, "the PD belongs to another device than the ID"));
        }
        let ud = super::ud::is_ud(self.0.ps);
        let want = if ud { QpType::Ud } else { QpType::Rc };
        if init.qp_type != want {
            let what = format!("a {:?} QP: {:?} IDs connect {want:?} QPs", init.qp_type, self.0.ps);
            return Err(cm_err(VERB, EINVAL, what));
        }
        if st.qp.is_some() {
            return Err(cm_err(VERB, EINVAL, "the ID has a QP already"));
        }
        let qp = pd.create_qp(init)?;
        if ud {
            super::ud::ready(&qp)?;
        } else {
            let (attr, mask) = qp_attr::init(Default::default());
            qp.modify(&attr, mask)?;
        }
        st.qp = Some(qp.clone());
        Ok(qp)
    }

    /// `rdma_init_qp_attr`: the attributes (and mask) that move a QP this
    /// application manages to `state` for this connection.
    pub fn init_qp_attr(&self, state: QpState) -> Result<(QpAttr, QpAttrMask), Error> {
        const VERB: &str = "rdma_init_qp_attr";
        if super::ud::is_ud(self.0.ps) {
            return super::ud::qp_attr(state)
                .ok_or_else(|| cm_err(VERB, EINVAL, format!("no attributes for state {state} of a UD QP")));
        }
        let st = self.state();
        let conn = st.conn.as_ref();
        match (state, conn) {
            (QpState::Init, Some(c)) => Ok(qp_attr::init(c.access())),
            (QpState::Init, None) => Ok(qp_attr::init(Default::default())),
            (QpState::Rtr, Some(c)) => Ok(qp_attr::rtr(c)),
            (QpState::Rts, Some(c)) => Ok(qp_attr::rts(c)),
            (QpState::Rtr | QpState::Rts, None) => {
                Err(cm_err(VERB, EINVAL, "no connection yet: the peer's REQ or REP decides these attributes"))
            }
            (s, _) => Err(cm_err(VERB, EINVAL, format!("no attributes for state {s}"))),
        }
    }
}

/// Moves `qp` through INIT (access), RTR and RTS for connection `c`
/// (librdmacm's `ucma_modify_qp_rtr` and `ucma_modify_qp_rts`).
pub(crate) fn connect_qp(qp: &Qp, c: &ConnInfo) -> Result<(), Error> {
    for (attr, mask) in [qp_attr::init(c.access()), qp_attr::rtr(c), qp_attr::rts(c)] {
        qp.modify(&attr, mask)?;
    }
    Ok(())
}

/// Moves `qp` to ERR (librdmacm's `ucma_modify_qp_err`): its WRs flush.
pub(crate) fn qp_to_err(qp: &Qp) {
    let _ = qp.modify(&QpAttr { qp_state: QpState::Err, ..Default::default() }, QpAttrMask::STATE);
}

impl PartialEq for CmId {
    fn eq(&self, other: &CmId) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for CmId {}

impl fmt::Debug for CmId {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let st = self.state();
        f.debug_struct("CmId").field("state", &st.cma).field("src", &st.src).field("dst", &st.dst).finish()
    }
}
