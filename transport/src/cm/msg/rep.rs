//! ConnectReply (REP, attribute 0x0013): IBTA Vol 1 Table 110.

use crate::cm::field::{at, bits, get_bytes, get_u64, set_u64, Field};
use core::fmt;

/// Bytes of private data a REP carries.
pub const REP_PRIVATE_DATA_LEN: usize = 196;

const LOCAL_COMM_ID: Field = at(0, 32);
const REMOTE_COMM_ID: Field = at(4, 32);
const LOCAL_QKEY: Field = at(8, 32);
const LOCAL_QPN: Field = at(12, 24);
const LOCAL_EECN: Field = at(16, 24);
const STARTING_PSN: Field = at(20, 24);
const RESPONDER_RESOURCES: Field = at(24, 8);
const INITIATOR_DEPTH: Field = at(25, 8);
const TARGET_ACK_DELAY: Field = at(26, 5);
const FAILOVER_ACCEPTED: Field = bits(26, 5, 2);
const END_TO_END_FLOW_CONTROL: Field = bits(26, 7, 1);
const RNR_RETRY_COUNT: Field = at(27, 3);
const SRQ: Field = bits(27, 3, 1);
const LOCAL_CA_GUID: usize = 28;
const PRIVATE_DATA: usize = 36;

/// A ConnectReply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RepRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub local_qkey: u32,
    pub local_qpn: u32,
    pub local_eecn: u32,
    /// The first PSN the receiver of the REP sends.
    pub starting_psn: u32,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    /// The sender's local CA ACK delay (5 bits).
    pub target_ack_delay: u8,
    pub failover_accepted: u8,
    pub end_to_end_flow_control: bool,
    pub rnr_retry_count: u8,
    pub srq: bool,
    pub local_ca_guid: u64,
    pub private_data: [u8; REP_PRIVATE_DATA_LEN],
}

impl RepRepr {
    pub fn parse(d: &[u8]) -> RepRepr {
        RepRepr {
            local_comm_id: LOCAL_COMM_ID.get(d),
            remote_comm_id: REMOTE_COMM_ID.get(d),
            local_qkey: LOCAL_QKEY.get(d),
            local_qpn: LOCAL_QPN.get(d),
            local_eecn: LOCAL_EECN.get(d),
            starting_psn: STARTING_PSN.get(d),
            responder_resources: RESPONDER_RESOURCES.get(d) as u8,
            initiator_depth: INITIATOR_DEPTH.get(d) as u8,
            target_ack_delay: TARGET_ACK_DELAY.get(d) as u8,
            failover_accepted: FAILOVER_ACCEPTED.get(d) as u8,
            end_to_end_flow_control: END_TO_END_FLOW_CONTROL.flag(d),
            rnr_retry_count: RNR_RETRY_COUNT.get(d) as u8,
            srq: SRQ.flag(d),
            local_ca_guid: get_u64(d, LOCAL_CA_GUID),
            private_data: get_bytes(d, PRIVATE_DATA),
        }
    }

    pub fn emit(&self, d: &mut [u8]) {
        LOCAL_COMM_ID.set(d, self.local_comm_id);
        REMOTE_COMM_ID.set(d, self.remote_comm_id);
        LOCAL_QKEY.set(d, self.local_qkey);
        LOCAL_QPN.set(d, self.local_qpn);
        LOCAL_EECN.set(d, self.local_eecn);
        STARTING_PSN.set(d, self.starting_psn);
        RESPONDER_RESOURCES.set(d, self.responder_resources.into());
        INITIATOR_DEPTH.set(d, self.initiator_depth.into());
        TARGET_ACK_DELAY.set(d, self.target_ack_delay.into());
        FAILOVER_ACCEPTED.set(d, self.failover_accepted.into());
        END_TO_END_FLOW_CONTROL.set(d, self.end_to_end_flow_control.into());
        RNR_RETRY_COUNT.set(d, self.rnr_retry_count.into());
        SRQ.set(d, self.srq.into());
        set_u64(d, LOCAL_CA_GUID, self.local_ca_guid);
        d[PRIVATE_DATA..PRIVATE_DATA + REP_PRIVATE_DATA_LEN].copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for RepRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "CM REP comm 0x{:08x} -> 0x{:08x} qpn 0x{:06x} psn 0x{:06x} resp_res {} init_depth {} ack_delay {} rnr {}",
            self.local_comm_id,
            self.remote_comm_id,
            self.local_qpn,
            self.starting_psn,
            self.responder_resources,
            self.initiator_depth,
            self.target_ack_delay,
            self.rnr_retry_count
        )
    }
}
