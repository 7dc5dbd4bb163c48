//! ConnectRequest (REQ, attribute 0x0010): IBTA Vol 1 Table 106.

use super::path::PathRepr;
use crate::cm::field::{at, bits, get_bytes, get_u64, set_u64, Field};
use core::fmt;

/// Bytes of private data a REQ carries.
pub const REQ_PRIVATE_DATA_LEN: usize = 92;

const LOCAL_COMM_ID: Field = at(0, 32);
const SERVICE_ID: usize = 8;
const LOCAL_CA_GUID: usize = 16;
const LOCAL_QKEY: Field = at(28, 32);
const LOCAL_QPN: Field = at(32, 24);
const RESPONDER_RESOURCES: Field = at(35, 8);
const LOCAL_EECN: Field = at(36, 24);
const INITIATOR_DEPTH: Field = at(39, 8);
const REMOTE_EECN: Field = at(40, 24);
const REMOTE_CM_RESPONSE_TIMEOUT: Field = at(43, 5);
const TRANSPORT_SERVICE_TYPE: Field = bits(43, 5, 2);
const END_TO_END_FLOW_CONTROL: Field = bits(43, 7, 1);
const STARTING_PSN: Field = at(44, 24);
const LOCAL_CM_RESPONSE_TIMEOUT: Field = at(47, 5);
const RETRY_COUNT: Field = bits(47, 5, 3);
const PARTITION_KEY: Field = at(48, 16);
const PATH_MTU: Field = at(50, 4);
const RDC_EXISTS: Field = bits(50, 4, 1);
const RNR_RETRY_COUNT: Field = bits(50, 5, 3);
const MAX_CM_RETRIES: Field = at(51, 4);
const SRQ: Field = bits(51, 4, 1);
const EXTENDED_TRANSPORT_TYPE: Field = bits(51, 5, 3);
const PRIMARY_PATH: usize = 52;
const ALTERNATE_PATH: usize = 96;
const SAP_SUPPORTED: Field = bits(139, 5, 1);
const PRIVATE_DATA: usize = 140;

/// The transport service of the connection (`Transport Service Type`).
pub const TRANSPORT_RC: u8 = 0;
pub const TRANSPORT_UC: u8 = 1;

/// A ConnectRequest. Responder resources and initiator depth are the
/// sender's: the receiver swaps them for its own QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReqRepr {
    pub local_comm_id: u32,
    pub service_id: u64,
    pub local_ca_guid: u64,
    pub local_qkey: u32,
    pub local_qpn: u32,
    pub responder_resources: u8,
    pub local_eecn: u32,
    pub initiator_depth: u8,
    pub remote_eecn: u32,
    /// How long the sender allows the receiver to answer (4.096 us x 2^t).
    pub remote_cm_response_timeout: u8,
    pub transport_service_type: u8,
    pub end_to_end_flow_control: bool,
    /// The first PSN the receiver sends (and the sender expects).
    pub starting_psn: u32,
    /// How long the sender takes to answer.
    pub local_cm_response_timeout: u8,
    pub retry_count: u8,
    pub partition_key: u16,
    /// `enum ibv_mtu`: 1 = 256 .. 5 = 4096.
    pub path_mtu: u8,
    pub rdc_exists: bool,
    pub rnr_retry_count: u8,
    pub max_cm_retries: u8,
    pub srq: bool,
    pub extended_transport_type: u8,
    pub primary: PathRepr,
    pub alternate: PathRepr,
    pub sap_supported: bool,
    pub private_data: [u8; REQ_PRIVATE_DATA_LEN],
}

impl ReqRepr {
    /// Reads a REQ from MAD data (232 bytes).
    pub fn parse(d: &[u8]) -> ReqRepr {
        ReqRepr {
            local_comm_id: LOCAL_COMM_ID.get(d),
            service_id: get_u64(d, SERVICE_ID),
            local_ca_guid: get_u64(d, LOCAL_CA_GUID),
            local_qkey: LOCAL_QKEY.get(d),
            local_qpn: LOCAL_QPN.get(d),
            responder_resources: RESPONDER_RESOURCES.get(d) as u8,
            local_eecn: LOCAL_EECN.get(d),
            initiator_depth: INITIATOR_DEPTH.get(d) as u8,
            remote_eecn: REMOTE_EECN.get(d),
            remote_cm_response_timeout: REMOTE_CM_RESPONSE_TIMEOUT.get(d) as u8,
            transport_service_type: TRANSPORT_SERVICE_TYPE.get(d) as u8,
            end_to_end_flow_control: END_TO_END_FLOW_CONTROL.flag(d),
            starting_psn: STARTING_PSN.get(d),
            local_cm_response_timeout: LOCAL_CM_RESPONSE_TIMEOUT.get(d) as u8,
            retry_count: RETRY_COUNT.get(d) as u8,
            partition_key: PARTITION_KEY.get(d) as u16,
            path_mtu: PATH_MTU.get(d) as u8,
            rdc_exists: RDC_EXISTS.flag(d),
            rnr_retry_count: RNR_RETRY_COUNT.get(d) as u8,
            max_cm_retries: MAX_CM_RETRIES.get(d) as u8,
            srq: SRQ.flag(d),
            extended_transport_type: EXTENDED_TRANSPORT_TYPE.get(d) as u8,
            primary: PathRepr::parse(d, PRIMARY_PATH),
            alternate: PathRepr::parse(d, ALTERNATE_PATH),
            sap_supported: SAP_SUPPORTED.flag(d),
            private_data: get_bytes(d, PRIVATE_DATA),
        }
    }

    /// Writes the REQ into zeroed MAD data.
    pub fn emit(&self, d: &mut [u8]) {
        LOCAL_COMM_ID.set(d, self.local_comm_id);
        set_u64(d, SERVICE_ID, self.service_id);
        set_u64(d, LOCAL_CA_GUID, self.local_ca_guid);
        LOCAL_QKEY.set(d, self.local_qkey);
        LOCAL_QPN.set(d, self.local_qpn);
        RESPONDER_RESOURCES.set(d, self.responder_resources.into());
        LOCAL_EECN.set(d, self.local_eecn);
        INITIATOR_DEPTH.set(d, self.initiator_depth.into());
        REMOTE_EECN.set(d, self.remote_eecn);
        REMOTE_CM_RESPONSE_TIMEOUT.set(d, self.remote_cm_response_timeout.into());
        TRANSPORT_SERVICE_TYPE.set(d, self.transport_service_type.into());
        END_TO_END_FLOW_CONTROL.set(d, self.end_to_end_flow_control.into());
        STARTING_PSN.set(d, self.starting_psn);
        LOCAL_CM_RESPONSE_TIMEOUT.set(d, self.local_cm_response_timeout.into());
        RETRY_COUNT.set(d, self.retry_count.into());
        PARTITION_KEY.set(d, self.partition_key.into());
        PATH_MTU.set(d, self.path_mtu.into());
        RDC_EXISTS.set(d, self.rdc_exists.into());
        RNR_RETRY_COUNT.set(d, self.rnr_retry_count.into());
        MAX_CM_RETRIES.set(d, self.max_cm_retries.into());
        SRQ.set(d, self.srq.into());
        EXTENDED_TRANSPORT_TYPE.set(d, self.extended_transport_type.into());
        self.primary.emit(d, PRIMARY_PATH);
        self.alternate.emit(d, ALTERNATE_PATH);
        SAP_SUPPORTED.set(d, self.sap_supported.into());
        d[PRIVATE_DATA..PRIVATE_DATA + REQ_PRIVATE_DATA_LEN].copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for ReqRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "CM REQ comm 0x{:08x} service 0x{:016x} qpn 0x{:06x} psn 0x{:06x} resp_res {} init_depth {} \
             mtu {} retry {} rnr {} timeouts {}/{} cm_retries {} flow {:05x} {} -> {}",
            self.local_comm_id,
            self.service_id,
            self.local_qpn,
            self.starting_psn,
            self.responder_resources,
            self.initiator_depth,
            self.path_mtu,
            self.retry_count,
            self.rnr_retry_count,
            self.local_cm_response_timeout,
            self.remote_cm_response_timeout,
            self.max_cm_retries,
            self.primary.flow_label,
            self.primary.local_gid,
            self.primary.remote_gid,
        )
    }
}
