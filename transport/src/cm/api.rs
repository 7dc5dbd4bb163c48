//! What the CM takes (parameters of the messages it starts) and gives
//! (events, outgoing MADs, errors).

use super::mad::MAD_LEN;
use super::msg::{PathRepr, RejRepr, RepRepr, ReqRepr, SidrRepRepr, SidrReqRepr, SidrStatus};
use crate::engine::Gid;
use core::fmt;
use core::time::Duration;

/// A connection, named by its local communication ID.
pub type CommId = u32;

/// The states of a connection (`enum ib_cm_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Idle,
    ReqSent,
    ReqRcvd,
    MraReqSent,
    MraReqRcvd,
    RepSent,
    RepRcvd,
    MraRepSent,
    MraRepRcvd,
    Established,
    DreqSent,
    DreqRcvd,
    Timewait,
    /// A SIDR_REQ is out, waiting for its SIDR_REP.
    SidrReqSent,
    /// A SIDR_REQ came in; the consumer decides (`Cm::sidr_reply`).
    SidrReqRcvd,
}

/// Everything a REQ needs besides what the CM chooses (communication ID,
/// TID, local CA GUID).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectParams {
    /// The peer port's GID, where the REQ goes (to its QP1).
    pub dgid: Gid,
    pub service_id: u64,
    pub local_qpn: u32,
    /// The PSN the peer starts sending with (our receive PSN).
    pub starting_psn: u32,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub flow_control: bool,
    pub srq: bool,
    /// `enum ibv_mtu` of the path.
    pub path_mtu: u8,
    /// The primary path; its local ACK timeout is computed from
    /// `packet_life_time` and the CA's ACK delay.
    pub path: PathRepr,
    pub packet_life_time: u8,
    pub remote_cm_response_timeout: u8,
    pub local_cm_response_timeout: u8,
    pub max_cm_retries: u8,
    /// At most 92 bytes.
    pub private_data: Vec<u8>,
}

/// Everything a REP needs besides the IDs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AcceptParams {
    pub local_qpn: u32,
    /// The PSN the peer starts sending with (our receive PSN).
    pub starting_psn: u32,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: bool,
    pub rnr_retry_count: u8,
    pub srq: bool,
    /// At most 196 bytes.
    pub private_data: Vec<u8>,
}

/// What a SIDR_REQ needs besides its request ID (`struct ib_cm_sidr_req_param`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidrParams {
    /// The peer port's GID, where the SIDR_REQ goes (to its QP1).
    pub dgid: Gid,
    pub service_id: u64,
    /// How long each try waits for the SIDR_REP.
    pub timeout: Duration,
    /// Tries after the first before [`CmEvent::SidrReqError`].
    pub max_cm_retries: u8,
    /// At most 216 bytes.
    pub private_data: Vec<u8>,
}

/// The answer to a received SIDR_REQ (`struct ib_cm_sidr_rep_param`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidrAnswer {
    pub status: SidrStatus,
    pub qpn: u32,
    pub qkey: u32,
    /// At most 136 bytes.
    pub private_data: Vec<u8>,
}

/// What happened to a connection (`struct ib_cm_event`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmEvent {
    /// A REQ for a service we listen on: a new connection in `ReqRcvd`.
    ReqReceived {
        id: CommId,
        src_gid: Gid,
        req: Box<ReqRepr>,
    },
    RepReceived {
        id: CommId,
        rep: Box<RepRepr>,
    },
    RtuReceived {
        id: CommId,
    },
    RejReceived {
        id: CommId,
        rej: Box<RejRepr>,
    },
    MraReceived {
        id: CommId,
        service_timeout: u8,
    },
    DreqReceived {
        id: CommId,
    },
    DrepReceived {
        id: CommId,
    },
    /// The REQ was sent 1 + max CM retries times and nothing answered.
    ReqError {
        id: CommId,
    },
    /// The REP was sent 1 + max CM retries times and no RTU came.
    RepError {
        id: CommId,
    },
    /// The DREQ went unanswered; the connection is in timewait anyway.
    DreqError {
        id: CommId,
    },
    TimewaitExit {
        id: CommId,
    },
    /// A SIDR_REQ for a service we listen on: a new request in `SidrReqRcvd`.
    SidrReqReceived {
        id: CommId,
        src_gid: Gid,
        req: Box<SidrReqRepr>,
    },
    /// The SIDR_REP of our SIDR_REQ (its status says whether it resolved).
    SidrRepReceived {
        id: CommId,
        rep: Box<SidrRepRepr>,
    },
    /// The SIDR_REQ was sent 1 + max CM retries times and nothing answered.
    SidrReqError {
        id: CommId,
    },
}

impl CmEvent {
    pub fn id(&self) -> CommId {
        match self {
            CmEvent::ReqReceived { id, .. }
            | CmEvent::RepReceived { id, .. }
            | CmEvent::RtuReceived { id }
            | CmEvent::RejReceived { id, .. }
            | CmEvent::MraReceived { id, .. }
            | CmEvent::DreqReceived { id }
            | CmEvent::DrepReceived { id }
            | CmEvent::ReqError { id }
            | CmEvent::RepError { id }
            | CmEvent::DreqError { id }
            | CmEvent::TimewaitExit { id }
            | CmEvent::SidrReqReceived { id, .. }
            | CmEvent::SidrRepReceived { id, .. }
            | CmEvent::SidrReqError { id } => *id,
        }
    }
}

/// A MAD to send to QP1 of `dgid` with Q_Key 0x80010000.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub dgid: Gid,
    pub mad: [u8; MAD_LEN],
}

/// Why the CM refused a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmError {
    NoSuchConnection(CommId),
    /// The command does not apply in the connection's state.
    InvalidState {
        op: &'static str,
        state: State,
    },
    PrivateDataTooLong {
        given: usize,
        max: usize,
    },
    /// Another listener has this service ID.
    ServiceIdInUse(u64),
}

impl fmt::Display for CmError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            CmError::NoSuchConnection(id) => write!(f, "no CM connection 0x{id:08x}"),
            CmError::InvalidState { op, state } => write!(f, "cannot {op} a connection in state {state:?}"),
            CmError::PrivateDataTooLong { given, max } => write!(f, "{given} bytes of private data, at most {max}"),
            CmError::ServiceIdInUse(s) => write!(f, "service ID 0x{s:016x} has a listener already"),
        }
    }
}

impl std::error::Error for CmError {}
