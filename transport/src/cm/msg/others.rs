//! The small CM messages: ReadyToUse, DisconnectRequest, DisconnectReply
//! (IBTA Vol 1 Tables 111..113) and MessageReceiptAcknowledgement (Table 107).

use super::rej::MsgResponse;
use crate::cm::field::{at, get_bytes, Field};
use core::fmt;

/// Bytes of private data of an RTU or a DREP.
pub const RTU_PRIVATE_DATA_LEN: usize = 224;
pub const DREP_PRIVATE_DATA_LEN: usize = 224;
pub const DREQ_PRIVATE_DATA_LEN: usize = 220;
pub const MRA_PRIVATE_DATA_LEN: usize = 222;

const LOCAL_COMM_ID: Field = at(0, 32);
const REMOTE_COMM_ID: Field = at(4, 32);

/// A ReadyToUse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RtuRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub private_data: [u8; RTU_PRIVATE_DATA_LEN],
}

/// A DisconnectReply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DrepRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub private_data: [u8; DREP_PRIVATE_DATA_LEN],
}

/// RTU and DREP share a layout: two communication IDs and private data.
macro_rules! comm_ids_and_data {
    ($name:ident, $len:expr, $label:expr) => {
        impl $name {
            pub fn parse(d: &[u8]) -> $name {
                $name {
                    local_comm_id: LOCAL_COMM_ID.get(d),
                    remote_comm_id: REMOTE_COMM_ID.get(d),
                    private_data: get_bytes(d, 8),
                }
            }
            pub fn emit(&self, d: &mut [u8]) {
                LOCAL_COMM_ID.set(d, self.local_comm_id);
                REMOTE_COMM_ID.set(d, self.remote_comm_id);
                d[8..8 + $len].copy_from_slice(&self.private_data);
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "CM {} comm 0x{:08x} -> 0x{:08x}", $label, self.local_comm_id, self.remote_comm_id)
            }
        }
    };
}

comm_ids_and_data!(RtuRepr, RTU_PRIVATE_DATA_LEN, "RTU");
comm_ids_and_data!(DrepRepr, DREP_PRIVATE_DATA_LEN, "DREP");

const DREQ_REMOTE_QPN: Field = at(8, 24);
const DREQ_PRIVATE_DATA: usize = 12;

/// A DisconnectRequest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DreqRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    /// The receiver's QP: a DREQ for another QP is ignored.
    pub remote_qpn: u32,
    pub private_data: [u8; DREQ_PRIVATE_DATA_LEN],
}

impl DreqRepr {
    pub fn parse(d: &[u8]) -> DreqRepr {
        DreqRepr {
            local_comm_id: LOCAL_COMM_ID.get(d),
            remote_comm_id: REMOTE_COMM_ID.get(d),
            remote_qpn: DREQ_REMOTE_QPN.get(d),
            private_data: get_bytes(d, DREQ_PRIVATE_DATA),
        }
    }
    pub fn emit(&self, d: &mut [u8]) {
        LOCAL_COMM_ID.set(d, self.local_comm_id);
        REMOTE_COMM_ID.set(d, self.remote_comm_id);
        DREQ_REMOTE_QPN.set(d, self.remote_qpn);
        d[DREQ_PRIVATE_DATA..DREQ_PRIVATE_DATA + DREQ_PRIVATE_DATA_LEN].copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for DreqRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "CM DREQ comm 0x{:08x} -> 0x{:08x} qpn 0x{:06x}",
            self.local_comm_id, self.remote_comm_id, self.remote_qpn
        )
    }
}

const MRA_MESSAGE_MRAED: Field = at(8, 2);
const MRA_SERVICE_TIMEOUT: Field = at(9, 5);
const MRA_PRIVATE_DATA: usize = 10;

/// A MessageReceiptAcknowledgement: "your message arrived, the answer will
/// take up to 4.096 us x 2^service_timeout longer".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MraRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub message_mraed: MsgResponse,
    pub service_timeout: u8,
    pub private_data: [u8; MRA_PRIVATE_DATA_LEN],
}

impl MraRepr {
    pub fn parse(d: &[u8]) -> MraRepr {
        MraRepr {
            local_comm_id: LOCAL_COMM_ID.get(d),
            remote_comm_id: REMOTE_COMM_ID.get(d),
            message_mraed: MsgResponse::from_bits(MRA_MESSAGE_MRAED.get(d)),
            service_timeout: MRA_SERVICE_TIMEOUT.get(d) as u8,
            private_data: get_bytes(d, MRA_PRIVATE_DATA),
        }
    }
    pub fn emit(&self, d: &mut [u8]) {
        LOCAL_COMM_ID.set(d, self.local_comm_id);
        REMOTE_COMM_ID.set(d, self.remote_comm_id);
        MRA_MESSAGE_MRAED.set(d, self.message_mraed.bits());
        MRA_SERVICE_TIMEOUT.set(d, self.service_timeout.into());
        d[MRA_PRIVATE_DATA..MRA_PRIVATE_DATA + MRA_PRIVATE_DATA_LEN].copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for MraRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "CM MRA comm 0x{:08x} -> 0x{:08x} of {:?} service timeout {}",
            self.local_comm_id, self.remote_comm_id, self.message_mraed, self.service_timeout
        )
    }
}
