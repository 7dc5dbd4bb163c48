//! The CM messages, each a `Repr` parsed from and emitted into the 232 data
//! bytes of a MAD; [`CmMessage`] reads any of them from a whole MAD.

mod others;
mod path;
mod rej;
mod rep;
mod req;
mod sidr;

pub use others::{
    DrepRepr, DreqRepr, MraRepr, RtuRepr, DREP_PRIVATE_DATA_LEN, DREQ_PRIVATE_DATA_LEN, MRA_PRIVATE_DATA_LEN,
    RTU_PRIVATE_DATA_LEN,
};
pub use path::{PathRepr, PATH_LEN};
pub use rej::{MsgResponse, RejReason, RejRepr, REJ_ARI_LEN, REJ_PRIVATE_DATA_LEN};
pub use rep::{RepRepr, REP_PRIVATE_DATA_LEN};
pub use req::{ReqRepr, REQ_PRIVATE_DATA_LEN, TRANSPORT_RC, TRANSPORT_UC};
pub use sidr::{
    SidrRepRepr, SidrReqRepr, SidrStatus, SIDR_REP_INFO_LEN, SIDR_REP_PRIVATE_DATA_LEN, SIDR_REQ_PRIVATE_DATA_LEN,
};

use super::mad::{Mad, MadHeaderRepr, MAD_LEN};
use crate::wire::Result;
use core::fmt;

/// Attribute IDs of the CM class (IBTA Vol 1 Table 104).
pub mod attr {
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    pub const REQ: u16 = 0x0010;
    pub const MRA: u16 = 0x0011;
    pub const REJ: u16 = 0x0012;
    pub const REP: u16 = 0x0013;
    pub const RTU: u16 = 0x0014;
    pub const DREQ: u16 = 0x0015;
    pub const DREP: u16 = 0x0016;
    pub const SIDR_REQ: u16 = 0x0017;
    pub const SIDR_REP: u16 = 0x0018;
    pub const LAP: u16 = 0x0019;
    pub const APR: u16 = 0x001a;
}

/// One CM message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmMessage {
    Req(Box<ReqRepr>),
    Mra(Box<MraRepr>),
    Rej(Box<RejRepr>),
    Rep(Box<RepRepr>),
    Rtu(Box<RtuRepr>),
    Dreq(Box<DreqRepr>),
    Drep(Box<DrepRepr>),
    SidrReq(Box<SidrReqRepr>),
    SidrRep(Box<SidrRepRepr>),
    /// An attribute this stack does not act on (LAP, APR, ...).
    Other(u16),
}

impl CmMessage {
    /// Reads the header and the message of a MAD. Any attribute ID parses;
    /// whether the header is a CM `Send()` is the caller's to check.
    pub fn parse<T: AsRef<[u8]>>(mad: &Mad<T>) -> Result<(MadHeaderRepr, CmMessage)> {
        let header = MadHeaderRepr::parse(mad)?;
        let d = mad.data();
        let msg = match header.attr_id {
            attr::REQ => CmMessage::Req(Box::new(ReqRepr::parse(d))),
            attr::MRA => CmMessage::Mra(Box::new(MraRepr::parse(d))),
            attr::REJ => CmMessage::Rej(Box::new(RejRepr::parse(d))),
            attr::REP => CmMessage::Rep(Box::new(RepRepr::parse(d))),
            attr::RTU => CmMessage::Rtu(Box::new(RtuRepr::parse(d))),
            attr::DREQ => CmMessage::Dreq(Box::new(DreqRepr::parse(d))),
            attr::DREP => CmMessage::Drep(Box::new(DrepRepr::parse(d))),
            attr::SIDR_REQ => CmMessage::SidrReq(Box::new(SidrReqRepr::parse(d))),
            attr::SIDR_REP => CmMessage::SidrRep(Box::new(SidrRepRepr::parse(d))),
            other => CmMessage::Other(other),
        };
        Ok((header, msg))
    }

    pub fn attr_id(&self) -> u16 {
        match self {
            CmMessage::Req(_) => attr::REQ,
            CmMessage::Mra(_) => attr::MRA,
            CmMessage::Rej(_) => attr::REJ,
            CmMessage::Rep(_) => attr::REP,
            CmMessage::Rtu(_) => attr::RTU,
            CmMessage::Dreq(_) => attr::DREQ,
            CmMessage::Drep(_) => attr::DREP,
            CmMessage::SidrReq(_) => attr::SIDR_REQ,
            CmMessage::SidrRep(_) => attr::SIDR_REP,
            CmMessage::Other(a) => *a,
        }
    }

    /// The whole MAD: the CM header with `tid`, then the message; every
    /// byte not written is zero.
    pub fn to_mad(&self, tid: u64) -> [u8; MAD_LEN] {
        let mut buf = [0u8; MAD_LEN];
        let mut mad = Mad::new_unchecked(&mut buf[..]);
        MadHeaderRepr::cm(self.attr_id(), tid).emit(&mut mad);
        let d = mad.data_mut();
        match self {
            CmMessage::Req(m) => m.emit(d),
            CmMessage::Mra(m) => m.emit(d),
            CmMessage::Rej(m) => m.emit(d),
            CmMessage::Rep(m) => m.emit(d),
            CmMessage::Rtu(m) => m.emit(d),
            CmMessage::Dreq(m) => m.emit(d),
            CmMessage::Drep(m) => m.emit(d),
            CmMessage::SidrReq(m) => m.emit(d),
            CmMessage::SidrRep(m) => m.emit(d),
            CmMessage::Other(_) => {}
        }
        buf
    }

    /// The kernel's name of the message (as tshark shows it).
    pub fn name(&self) -> &'static str {
        attr_name(self.attr_id())
    }
}

/// The name tshark gives an attribute of the CM class.
pub fn attr_name(attr_id: u16) -> &'static str {
    match attr_id {
        attr::CLASS_PORT_INFO => "ClassPortInfo",
        attr::REQ => "ConnectRequest",
        attr::MRA => "MsgRcptAck",
        attr::REJ => "ConnectReject",
        attr::REP => "ConnectReply",
        attr::RTU => "ReadyToUse",
        attr::DREQ => "DisconnectRequest",
        attr::DREP => "DisconnectReply",
        attr::SIDR_REQ => "ServiceIDResReq",
        attr::SIDR_REP => "ServiceIDResReqResp",
        attr::LAP => "LoadAlternatePath",
        attr::APR => "AlternatePathResponse",
        _ => "unknown attribute",
    }
}

impl fmt::Display for CmMessage {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            CmMessage::Req(m) => m.fmt(f),
            CmMessage::Mra(m) => m.fmt(f),
            CmMessage::Rej(m) => m.fmt(f),
            CmMessage::Rep(m) => m.fmt(f),
            CmMessage::Rtu(m) => m.fmt(f),
            CmMessage::Dreq(m) => m.fmt(f),
            CmMessage::Drep(m) => m.fmt(f),
            CmMessage::SidrReq(m) => m.fmt(f),
            CmMessage::SidrRep(m) => m.fmt(f),
            CmMessage::Other(a) => write!(f, "CM attribute 0x{a:04x} ({})", attr_name(*a)),
        }
    }
}

/// `data` in front of zeroes, as private data of `N` bytes; `None` when it
/// does not fit.
pub fn private_data<const N: usize>(data: &[u8]) -> Option<[u8; N]> {
    let mut a = [0u8; N];
    a.get_mut(..data.len())?.copy_from_slice(data);
    Some(a)
}
