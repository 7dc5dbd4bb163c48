//! rdma_cm's events (`struct rdma_cm_event`), connection parameters
//! (`struct rdma_conn_param`) and the channel events arrive on
//! (`struct rdma_event_channel`).

use super::id::{CmId, IdInner};
use crate::context::{Context, ContextInner};
use crate::error::Error;
use crate::event_fd::EventQueue;
use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use uroce_transport::cm::PortSpace;

/// `enum rdma_cm_event_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmEventType {
    /// `rdma_resolve_addr` found the device for the destination.
    AddrResolved,
    /// It did not.
    AddrError,
    /// `rdma_resolve_route` has the path.
    RouteResolved,
    /// It does not.
    RouteError,
    /// A peer asks to connect; the event's `id` is the new connection.
    ConnectRequest,
    /// The peer accepted a connection made without a QP: move the QP
    /// yourself, then call [`CmId::establish`].
    ConnectResponse,
    /// Setting up the connection failed here (status: the errno).
    ConnectError,
    /// The peer did not answer (status: -ETIMEDOUT).
    Unreachable,
    /// The peer refused (status: the IB CM reject reason).
    Rejected,
    /// The connection is up.
    Established,
    /// The connection is down.
    Disconnected,
    /// The device went away.
    DeviceRemoval,
    /// A multicast join completed: the event's `group` and `param` say
    /// where to send (QPN 0xFFFFFF, rdma_cm's Q_Key).
    MulticastJoin,
    /// A multicast join failed (not used by uroce: a join fails at once).
    MulticastError,
    /// The address changed (not used by uroce).
    AddrChange,
    /// The disconnected QP's timewait is over: its number may be reused.
    TimewaitExit,
}

impl CmEventType {
    /// The value of `enum rdma_cm_event_type` (what C programs print as `%d`).
    pub fn code(self) -> i32 {
        self as i32
    }

    /// `rdma_event_str`: `RDMA_CM_EVENT_ESTABLISHED` and so on.
    pub fn as_str(self) -> &'static str {
        match self {
            CmEventType::AddrResolved => "RDMA_CM_EVENT_ADDR_RESOLVED",
            CmEventType::AddrError => "RDMA_CM_EVENT_ADDR_ERROR",
            CmEventType::RouteResolved => "RDMA_CM_EVENT_ROUTE_RESOLVED",
            CmEventType::RouteError => "RDMA_CM_EVENT_ROUTE_ERROR",
            CmEventType::ConnectRequest => "RDMA_CM_EVENT_CONNECT_REQUEST",
            CmEventType::ConnectResponse => "RDMA_CM_EVENT_CONNECT_RESPONSE",
            CmEventType::ConnectError => "RDMA_CM_EVENT_CONNECT_ERROR",
            CmEventType::Unreachable => "RDMA_CM_EVENT_UNREACHABLE",
            CmEventType::Rejected => "RDMA_CM_EVENT_REJECTED",
            CmEventType::Established => "RDMA_CM_EVENT_ESTABLISHED",
            CmEventType::Disconnected => "RDMA_CM_EVENT_DISCONNECTED",
            CmEventType::DeviceRemoval => "RDMA_CM_EVENT_DEVICE_REMOVAL",
            CmEventType::MulticastJoin => "RDMA_CM_EVENT_MULTICAST_JOIN",
            CmEventType::MulticastError => "RDMA_CM_EVENT_MULTICAST_ERROR",
            CmEventType::AddrChange => "RDMA_CM_EVENT_ADDR_CHANGE",
            CmEventType::TimewaitExit => "RDMA_CM_EVENT_TIMEWAIT_EXIT",
        }
    }
}

impl fmt::Display for CmEventType {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `RDMA_MAX_RESP_RES` / `RDMA_MAX_INIT_DEPTH`: "as many as the device allows".
pub const RDMA_MAX_RESP_RES: u8 = 0xff;
/// See [`RDMA_MAX_RESP_RES`].
pub const RDMA_MAX_INIT_DEPTH: u8 = 0xff;

/// `struct rdma_conn_param`, plus the CM timing of a connect (uroce's
/// addition; the kernel hard-codes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnParam {
    /// Up to 56 bytes on connect (the REQ's 92 less the IP CM header), 196
    /// on accept, 148 on reject. On events: what the peer sent, at full length.
    pub private_data: Vec<u8>,
    /// RDMA READs/atomics this side serves at once (`RDMA_MAX_RESP_RES`: the device's limit).
    pub responder_resources: u8,
    /// RDMA READs/atomics this side has outstanding (`RDMA_MAX_INIT_DEPTH`: the device's limit).
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// Transport retries (at most 7).
    pub retry_count: u8,
    /// RNR retries (7: forever).
    pub rnr_retry_count: u8,
    /// The QP uses an SRQ.
    pub srq: bool,
    /// The QP number, for connections whose QP the caller manages.
    pub qp_num: u32,
    /// uroce: the CM response timeout our REQ asks of the peer, 4.096 us x
    /// 2^t (the kernel's 20: 4.3 s). Each REQ try waits twice the packet
    /// lifetime plus this.
    pub cm_response_timeout: u8,
    /// uroce: how often the REQ is sent again before UNREACHABLE (the kernel's 15).
    pub max_cm_retries: u8,
    /// UD IDs: the Q_Key of the peer's service on ESTABLISHED (with its QPN
    /// in `qp_num`); on accept, this side's (0: rdma_cm's, `RDMA_UDP_QKEY`).
    pub qkey: u32,
}

impl Default for ConnParam {
    /// All zero, as a `memset` one, but for the kernel's CM timing.
    fn default() -> ConnParam {
        ConnParam {
            private_data: Vec::new(),
            responder_resources: 0,
            initiator_depth: 0,
            flow_control: false,
            retry_count: 0,
            rnr_retry_count: 0,
            srq: false,
            qp_num: 0,
            cm_response_timeout: uroce_transport::cm::timing::CMA_CM_RESPONSE_TIMEOUT,
            max_cm_retries: uroce_transport::cm::timing::CMA_MAX_CM_RETRIES,
            qkey: 0,
        }
    }
}

/// `struct rdma_cm_event`.
#[derive(Debug)]
pub struct CmEvent {
    /// The ID the event is about; for CONNECT_REQUEST, the new connection.
    pub id: CmId,
    /// For CONNECT_REQUEST, the listener.
    pub listen_id: Option<CmId>,
    /// What happened.
    pub event: CmEventType,
    /// 0, a negative errno (UNREACHABLE: -ETIMEDOUT), or for REJECTED the
    /// IB CM reject reason (8: nobody listens on that port, 28: the consumer refused).
    pub status: i32,
    /// For CONNECT_REQUEST, ESTABLISHED and REJECTED: what the peer sent.
    pub param: ConnParam,
    /// For MULTICAST_JOIN: the group (send to it with
    /// [`CmId::multicast_address_vector`], QPN 0xFFFFFF and `param.qkey`).
    pub group: Option<std::net::IpAddr>,
}

impl fmt::Display for CmEvent {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.event)?;
        if self.status != 0 {
            write!(f, " status {}", self.status)?;
        }
        if self.event == CmEventType::Rejected {
            let reason = uroce_transport::cm::RejReason(self.status as u16);
            write!(f, " ({})", reason.text())?;
        }
        Ok(())
    }
}

/// `struct rdma_event_channel`: a descriptor with one record per waiting
/// event (blocking unless set O_NONBLOCK, ready for poll/epoll); cheap to
/// clone. IDs hold it weakly: keep it while they live.
#[derive(Clone)]
pub struct EventChannel(pub(crate) Arc<ChannelInner>);

pub(crate) struct ChannelInner {
    events: EventQueue<CmEvent>,
    /// Contexts whose IDs report here: manual-progress ones are driven
    /// while a caller waits.
    contexts: Mutex<Vec<Weak<ContextInner>>>,
}

impl EventChannel {
    /// `rdma_create_event_channel`.
    pub fn new() -> Result<EventChannel, Error> {
        let events = EventQueue::new("rdma_create_event_channel")?;
        Ok(EventChannel(Arc::new(ChannelInner { events, contexts: Mutex::new(Vec::new()) })))
    }

    /// `rdma_create_id`: an ID in the port space `ps` (TCP for reliable
    /// connections, UDP or IPoIB for UD QPs).
    pub fn create_id(&self, ps: PortSpace) -> Result<CmId, Error> {
        if ps == PortSpace::Ib {
            let what = "port space RDMA_PS_IB: uroce's rdma_cm speaks RDMA_PS_TCP, RDMA_PS_UDP and RDMA_PS_IPOIB";
            return Err(Error::Cm { verb: "rdma_create_id", what: what.into(), errno: libc_errno::EPROTONOSUPPORT });
        }
        Ok(CmId(Arc::new(IdInner::new(Arc::downgrade(&self.0), ps))))
    }

    /// `rdma_get_cm_event`: waits up to `timeout` for the next event.
    pub fn get_cm_event(&self, timeout: Duration) -> Result<CmEvent, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(ev) = self.try_get_cm_event() {
                return Ok(ev);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout { verb: "rdma_get_cm_event" });
            }
            let manual = self.drive_manual_contexts();
            // Manual contexts move packets only when driven: come back soon.
            let wait = if manual { left.min(Duration::from_micros(500)) } else { left };
            if let Some(ev) = self.0.events.take(wait) {
                return Ok(ev);
            }
        }
    }

    /// The event a record read from the channel's descriptor names: the
    /// program read the descriptor itself (`rdma_get_cm_event` in C reads
    /// `channel->fd`, blocking or not as the program set it); `None` if the
    /// record names no waiting event.
    pub fn event_of_record(&self, record: &[u8]) -> Option<CmEvent> {
        self.0.events.take_record(record)
    }

    /// Takes back the events not yet read that are about `id`, or that
    /// ask `id` (a listener) for a connection: a C program's
    /// `rdma_destroy_id` drops them, as the kernel does, and the channel's
    /// descriptor no longer wakes for them. Returns how many went.
    pub fn retract_events_of(&self, id: &CmId) -> usize {
        let h = id.handle();
        self.0.events.retract(|e| e.id.handle() == h || e.listen_id.as_ref().is_some_and(|l| l.handle() == h))
    }

    /// The next event, without waiting.
    pub fn try_get_cm_event(&self) -> Option<CmEvent> {
        self.0.events.try_take()
    }

    /// One round of progress on each manual-progress context of this
    /// channel's IDs; whether there was one.
    fn drive_manual_contexts(&self) -> bool {
        let contexts: Vec<Context> = {
            let mut list = self.0.contexts.lock().unwrap_or_else(|e| e.into_inner());
            list.retain(|w| w.strong_count() > 0);
            list.iter().filter_map(|w| w.upgrade().map(Context)).collect()
        };
        let mut manual = false;
        for ctx in contexts.iter().filter(|c| c.progress_mode() == crate::Progress::Manual) {
            ctx.progress();
            manual = true;
        }
        manual
    }
}

impl ChannelInner {
    pub(crate) fn push(&self, ev: CmEvent) {
        tracing::debug!("rdma_cm: {ev}");
        self.events.push(ev);
    }

    pub(crate) fn note_context(&self, ctx: &Context) {
        let mut list = self.contexts.lock().unwrap_or_else(|e| e.into_inner());
        if !list.iter().any(|w| w.as_ptr() == Arc::as_ptr(&ctx.0)) {
            list.push(Arc::downgrade(&ctx.0));
        }
    }
}

impl AsFd for EventChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.events.as_fd()
    }
}

impl AsRawFd for EventChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.0.events.as_fd().as_raw_fd()
    }
}

/// The errno values rdma_cm calls return, as Linux numbers them.
pub mod libc_errno {
    /// Operation not permitted in this state / bad argument.
    pub const EINVAL: i32 = 22;
    /// The port is taken.
    pub const EADDRINUSE: i32 = 98;
    /// No device has the address.
    pub const EADDRNOTAVAIL: i32 = 99;
    /// The peer did not answer.
    pub const ETIMEDOUT: i32 = 110;
    /// No such device.
    pub const ENODEV: i32 = 19;
    /// Port space not supported.
    pub const EPROTONOSUPPORT: i32 = 93;
}
