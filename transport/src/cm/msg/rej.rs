//! ConnectReject (REJ, attribute 0x0012): IBTA Vol 1 Table 108, with the
//! reasons of Table 109.

use crate::cm::field::{at, get_bytes, Field};
use core::fmt;

/// Bytes of additional reject information.
pub const REJ_ARI_LEN: usize = 72;
/// Bytes of private data a REJ carries.
pub const REJ_PRIVATE_DATA_LEN: usize = 148;

const LOCAL_COMM_ID: Field = at(0, 32);
const REMOTE_COMM_ID: Field = at(4, 32);
const MESSAGE_REJECTED: Field = at(8, 2);
const REJECTED_INFO_LENGTH: Field = at(9, 7);
const REASON: Field = at(10, 16);
const ARI: usize = 12;
const PRIVATE_DATA: usize = 84;

/// Which message a REJ or MRA answers (`Message REJected` / `Message MRAed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MsgResponse {
    Req,
    Rep,
    Other,
    /// The fourth 2-bit value, reserved.
    Reserved,
}

impl MsgResponse {
    pub(crate) fn from_bits(v: u32) -> MsgResponse {
        match v {
            0 => MsgResponse::Req,
            1 => MsgResponse::Rep,
            2 => MsgResponse::Other,
            _ => MsgResponse::Reserved,
        }
    }
    pub(crate) fn bits(self) -> u32 {
        match self {
            MsgResponse::Req => 0,
            MsgResponse::Rep => 1,
            MsgResponse::Other => 2,
            MsgResponse::Reserved => 3,
        }
    }
}

/// A reject reason; any 16-bit value is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RejReason(pub u16);

impl RejReason {
    pub const NO_QP: RejReason = RejReason(1);
    pub const NO_RESOURCES: RejReason = RejReason(3);
    pub const TIMEOUT: RejReason = RejReason(4);
    pub const UNSUPPORTED: RejReason = RejReason(5);
    pub const INVALID_COMM_ID: RejReason = RejReason(6);
    pub const INVALID_SERVICE_ID: RejReason = RejReason(8);
    pub const INVALID_TRANSPORT_TYPE: RejReason = RejReason(9);
    pub const STALE_CONN: RejReason = RejReason(10);
    pub const INVALID_GID: RejReason = RejReason(12);
    pub const INVALID_MTU: RejReason = RejReason(26);
    pub const INSUFFICIENT_RESP_RESOURCES: RejReason = RejReason(27);
    pub const CONSUMER_DEFINED: RejReason = RejReason(28);
    pub const INVALID_RNR_RETRY: RejReason = RejReason(29);
    pub const INVALID_CLASS_VERSION: RejReason = RejReason(31);

    /// The kernel's text for the reason (`ibcm_reject_msg`).
    pub fn text(self) -> &'static str {
        const TEXT: [&str; 34] = [
            "unrecognized reason",
            "no QP",
            "no EEC",
            "no resources",
            "timeout",
            "unsupported",
            "invalid comm ID",
            "invalid comm instance",
            "invalid service ID",
            "invalid transport type",
            "stale conn",
            "RDC not exist",
            "invalid GID",
            "invalid LID",
            "invalid SL",
            "invalid traffic class",
            "invalid hop limit",
            "invalid packet rate",
            "invalid alt GID",
            "invalid alt LID",
            "invalid alt SL",
            "invalid alt traffic class",
            "invalid alt hop limit",
            "invalid alt packet rate",
            "port CM redirect",
            "port redirect",
            "invalid MTU",
            "insufficient resp resources",
            "consumer defined",
            "invalid RNR retry",
            "duplicate local comm ID",
            "invalid class version",
            "invalid flow label",
            "invalid alt flow label",
        ];
        TEXT.get(usize::from(self.0)).copied().unwrap_or(TEXT[0])
    }
}

impl fmt::Display for RejReason {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} ({})", self.0, self.text())
    }
}

/// A ConnectReject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RejRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub message_rejected: MsgResponse,
    /// Bytes of `ari` that mean something (7 bits).
    pub rejected_info_length: u8,
    pub reason: RejReason,
    pub ari: [u8; REJ_ARI_LEN],
    pub private_data: [u8; REJ_PRIVATE_DATA_LEN],
}

impl RejRepr {
    pub fn parse(d: &[u8]) -> RejRepr {
        RejRepr {
            local_comm_id: LOCAL_COMM_ID.get(d),
            remote_comm_id: REMOTE_COMM_ID.get(d),
            message_rejected: MsgResponse::from_bits(MESSAGE_REJECTED.get(d)),
            rejected_info_length: REJECTED_INFO_LENGTH.get(d) as u8,
            reason: RejReason(REASON.get(d) as u16),
            ari: get_bytes(d, ARI),
            private_data: get_bytes(d, PRIVATE_DATA),
        }
    }

    pub fn emit(&self, d: &mut [u8]) {
        LOCAL_COMM_ID.set(d, self.local_comm_id);
        REMOTE_COMM_ID.set(d, self.remote_comm_id);
        MESSAGE_REJECTED.set(d, self.message_rejected.bits());
        REJECTED_INFO_LENGTH.set(d, self.rejected_info_length.into());
        REASON.set(d, self.reason.0.into());
        d[ARI..ARI + REJ_ARI_LEN].copy_from_slice(&self.ari);
        d[PRIVATE_DATA..PRIVATE_DATA + REJ_PRIVATE_DATA_LEN].copy_from_slice(&self.private_data);
    }

    /// The additional reject information that is meant (at most 72 bytes).
    pub fn ari(&self) -> &[u8] {
        &self.ari[..usize::from(self.rejected_info_length).min(REJ_ARI_LEN)]
    }
}

impl fmt::Display for RejRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "CM REJ comm 0x{:08x} -> 0x{:08x} of {:?} reason {}",
            self.local_comm_id, self.remote_comm_id, self.message_rejected, self.reason
        )
    }
}
