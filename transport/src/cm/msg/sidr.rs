//! Service ID Resolution: ServiceIDResReq (SIDR_REQ, attribute 0x0017) and
//! ServiceIDResReqResp (SIDR_REP, 0x0018), IBTA Vol 1 Tables 119 and 120.
//! rdma_cm sends them for UD IDs (RDMA_PS_UDP, RDMA_PS_IPOIB): the REQ
//! carries the IP CM header, the REP the QPN and Q_Key of the service.

use crate::cm::field::{at, get_bytes, get_u64, set_u64, Field};
use core::fmt;

/// Bytes of private data a SIDR_REQ carries.
pub const SIDR_REQ_PRIVATE_DATA_LEN: usize = 216;
/// Bytes of private data a SIDR_REP carries.
pub const SIDR_REP_PRIVATE_DATA_LEN: usize = 136;
/// Bytes of additional information a SIDR_REP carries (a redirect's class port info).
pub const SIDR_REP_INFO_LEN: usize = 72;

const REQUEST_ID: Field = at(0, 32);
const REQ_PARTITION_KEY: Field = at(4, 16);
const REQ_SERVICE_ID: usize = 8;
const REQ_PRIVATE_DATA: usize = 16;

const REP_STATUS: Field = at(4, 8);
const REP_INFO_LENGTH: Field = at(5, 8);
const REP_QPN: Field = at(8, 24);
const REP_SERVICE_ID: usize = 12;
const REP_QKEY: Field = at(20, 32);
const REP_INFO: usize = 24;
const REP_PRIVATE_DATA: usize = 96;

/// A ServiceIDResReq.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SidrReqRepr {
    /// The requester's ID for this request; the REP names it.
    pub request_id: u32,
    pub partition_key: u16,
    pub service_id: u64,
    pub private_data: [u8; SIDR_REQ_PRIVATE_DATA_LEN],
}

impl SidrReqRepr {
    pub fn parse(d: &[u8]) -> SidrReqRepr {
        SidrReqRepr {
            request_id: REQUEST_ID.get(d),
            partition_key: REQ_PARTITION_KEY.get(d) as u16,
            service_id: get_u64(d, REQ_SERVICE_ID),
            private_data: get_bytes(d, REQ_PRIVATE_DATA),
        }
    }

    pub fn emit(&self, d: &mut [u8]) {
        REQUEST_ID.set(d, self.request_id);
        REQ_PARTITION_KEY.set(d, self.partition_key.into());
        set_u64(d, REQ_SERVICE_ID, self.service_id);
        d[REQ_PRIVATE_DATA..REQ_PRIVATE_DATA + SIDR_REQ_PRIVATE_DATA_LEN].copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for SidrReqRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "CM SIDR_REQ request 0x{:08x} service 0x{:016x} pkey 0x{:04x}",
            self.request_id, self.service_id, self.partition_key
        )
    }
}

/// The status of a SIDR_REP (`enum ib_cm_sidr_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SidrStatus(pub u8);

impl SidrStatus {
    /// The QPN and Q_Key are valid.
    pub const SUCCESS: SidrStatus = SidrStatus(0);
    /// Nobody serves the service ID here.
    pub const UNSUPPORTED: SidrStatus = SidrStatus(1);
    /// The service refused.
    pub const REJECT: SidrStatus = SidrStatus(2);
    pub const NO_QP: SidrStatus = SidrStatus(3);
    pub const REDIRECT: SidrStatus = SidrStatus(4);
    pub const UNSUPPORTED_VERSION: SidrStatus = SidrStatus(5);

    /// What the status means, as IBTA names it.
    pub fn text(self) -> &'static str {
        match self.0 {
            0 => "success",
            1 => "service ID not supported",
            2 => "rejected by the service",
            3 => "no QP",
            4 => "redirect",
            5 => "unsupported version",
            _ => "reserved",
        }
    }
}

/// A ServiceIDResReqResp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SidrRepRepr {
    /// The request it answers.
    pub request_id: u32,
    pub status: SidrStatus,
    pub additional_info_length: u8,
    pub qpn: u32,
    pub service_id: u64,
    pub qkey: u32,
    pub additional_info: [u8; SIDR_REP_INFO_LEN],
    pub private_data: [u8; SIDR_REP_PRIVATE_DATA_LEN],
}

impl SidrRepRepr {
    pub fn parse(d: &[u8]) -> SidrRepRepr {
        SidrRepRepr {
            request_id: REQUEST_ID.get(d),
            status: SidrStatus(REP_STATUS.get(d) as u8),
            additional_info_length: REP_INFO_LENGTH.get(d) as u8,
            qpn: REP_QPN.get(d),
            service_id: get_u64(d, REP_SERVICE_ID),
            qkey: REP_QKEY.get(d),
            additional_info: get_bytes(d, REP_INFO),
            private_data: get_bytes(d, REP_PRIVATE_DATA),
        }
    }

    pub fn emit(&self, d: &mut [u8]) {
        REQUEST_ID.set(d, self.request_id);
        REP_STATUS.set(d, self.status.0.into());
        REP_INFO_LENGTH.set(d, self.additional_info_length.into());
        REP_QPN.set(d, self.qpn);
        set_u64(d, REP_SERVICE_ID, self.service_id);
        REP_QKEY.set(d, self.qkey);
        d[REP_INFO..REP_INFO + SIDR_REP_INFO_LEN].copy_from_slice(&self.additional_info);
        d[REP_PRIVATE_DATA..REP_PRIVATE_DATA + SIDR_REP_PRIVATE_DATA_LEN].copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for SidrRepRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "CM SIDR_REP request 0x{:08x} status {} ({}) qpn 0x{:06x} qkey 0x{:08x} service 0x{:016x}",
            self.request_id,
            self.status.0,
            self.status.text(),
            self.qpn,
            self.qkey,
            self.service_id
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn fields_sit_where_the_tables_put_them() {
        let mut d = [0u8; 232];
        let rep = SidrRepRepr {
            request_id: 0x0102_0304,
            status: SidrStatus::REJECT,
            additional_info_length: 0,
            qpn: 0x00ab_cdef,
            service_id: 0x0000_0000_0111_4e20,
            qkey: 0x0123_4567,
            additional_info: [0; SIDR_REP_INFO_LEN],
            private_data: [7; SIDR_REP_PRIVATE_DATA_LEN],
        };
        rep.emit(&mut d);
        assert_eq!(&d[..12], &[1, 2, 3, 4, 2, 0, 0, 0, 0xab, 0xcd, 0xef, 0]);
        assert_eq!(&d[12..24], &[0, 0, 0, 0, 1, 0x11, 0x4e, 0x20, 0x01, 0x23, 0x45, 0x67]);
        assert_eq!((d[95], d[96], d[231]), (0, 7, 7));
        assert_eq!(SidrRepRepr::parse(&d), rep);

        let req = SidrReqRepr {
            request_id: 9,
            partition_key: 0xffff,
            service_id: 0x0000_0000_0111_4e20,
            private_data: [3; SIDR_REQ_PRIVATE_DATA_LEN],
        };
        let mut d = [0u8; 232];
        req.emit(&mut d);
        assert_eq!(&d[..16], &[0, 0, 0, 9, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 1, 0x11, 0x4e, 0x20]);
        assert_eq!(SidrReqRepr::parse(&d), req);
    }
}
