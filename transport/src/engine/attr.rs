//! QP types, states and the attributes `modify_qp` sets, with verbs' masks.

use super::wr::{flags, AccessFlags, Gid};
use core::fmt;

/// The transport service of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    Rc,
    Uc,
    Ud,
}

/// `enum ibv_qp_state`, with libibverbs' numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum QpState {
    #[default]
    Reset = 0,
    Init = 1,
    Rtr = 2,
    Rts = 3,
    Sqd = 4,
    Sqe = 5,
    Err = 6,
}

impl fmt::Display for QpState {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            QpState::Reset => "RESET",
            QpState::Init => "INIT",
            QpState::Rtr => "RTR",
            QpState::Rts => "RTS",
            QpState::Sqd => "SQD",
            QpState::Sqe => "SQE",
            QpState::Err => "ERR",
        })
    }
}

/// Path MTU (`enum ibv_mtu`): 1 = 256 .. 5 = 4096.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Mtu {
    Mtu256 = 1,
    Mtu512 = 2,
    #[default]
    Mtu1024 = 3,
    Mtu2048 = 4,
    Mtu4096 = 5,
}

/// What rxe subtracts from the netdev MTU before picking the IB MTU
/// (`RXE_MAX_HDR_LENGTH`: IPv6 + UDP + BTH + the largest extension headers + ICRC).
const RXE_MAX_HDR_LENGTH: usize = 80;

impl Mtu {
    pub const ALL: [Mtu; 5] = [Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024, Mtu::Mtu2048, Mtu::Mtu4096];

    /// The largest RoCE payload of one packet.
    pub const fn bytes(self) -> u32 {
        128 << (self as u32)
    }
    /// The enum for a byte count, when it is one of the five.
    pub fn from_bytes(n: u32) -> Option<Mtu> {
        Mtu::ALL.into_iter().find(|m| m.bytes() == n)
    }
    /// The `enum ibv_mtu` value (1 = 256 .. 5 = 4096), as CM REQs and
    /// perftest's MTU exchange carry it.
    pub const fn to_enum(self) -> u8 {
        self as u8
    }
    /// The MTU of an `enum ibv_mtu` value, when it is one of the five.
    pub fn from_enum(v: u8) -> Option<Mtu> {
        Mtu::ALL.into_iter().find(|m| m.to_enum() == v)
    }
    /// The path MTU rxe uses on a netdev of IP MTU `link_mtu`
    /// (`eth_mtu_int_to_enum`): the largest IB MTU not above
    /// `link_mtu - 80`; `None` below 256 + 80.
    pub fn for_link_mtu(link_mtu: usize) -> Option<Mtu> {
        let room = link_mtu.checked_sub(RXE_MAX_HDR_LENGTH)?;
        Mtu::ALL.into_iter().rev().find(|m| m.bytes() as usize <= room)
    }
}

impl fmt::Display for Mtu {
    /// The byte count, as `-m` takes it and the tools print it.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.bytes())
    }
}

/// The address vector of a connected QP's primary path (`struct ibv_ah_attr`
/// with its GRH): RoCE always carries a GRH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AddressVector {
    pub dgid: Gid,
    pub sgid_index: u8,
    /// 20 bits; 0 means "derive it from the QP numbers", as rxe does.
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub port_num: u8,
}

/// The attributes of a QP (`struct ibv_qp_attr`, the fields RoCE uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpAttr {
    pub qp_state: QpState,
    pub cur_qp_state: QpState,
    pub path_mtu: Mtu,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: AccessFlags,
    pub pkey_index: u16,
    pub port_num: u8,
    pub ah_attr: AddressVector,
    /// Local ACK timeout exponent: 4.096 us x 2^timeout; 0 is infinite.
    pub timeout: u8,
    pub retry_cnt: u8,
    /// 7 means retry forever.
    pub rnr_retry: u8,
    /// The RNR NAK timer code this QP sends as a responder.
    pub min_rnr_timer: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub en_sqd_async_notify: bool,
    pub sq_draining: bool,
}

flags! {
    /// `enum ibv_qp_attr_mask`: which fields of [`QpAttr`] a modify sets.
    QpAttrMask(u32) {
        STATE = 1 << 0,
        CUR_STATE = 1 << 1,
        EN_SQD_ASYNC_NOTIFY = 1 << 2,
        ACCESS_FLAGS = 1 << 3,
        PKEY_INDEX = 1 << 4,
        PORT = 1 << 5,
        QKEY = 1 << 6,
        AV = 1 << 7,
        PATH_MTU = 1 << 8,
        TIMEOUT = 1 << 9,
        RETRY_CNT = 1 << 10,
        RNR_RETRY = 1 << 11,
        RQ_PSN = 1 << 12,
        MAX_QP_RD_ATOMIC = 1 << 13,
        ALT_PATH = 1 << 14,
        MIN_RNR_TIMER = 1 << 15,
        SQ_PSN = 1 << 16,
        MAX_DEST_RD_ATOMIC = 1 << 17,
        PATH_MIG_STATE = 1 << 18,
        CAP = 1 << 19,
        DEST_QPN = 1 << 20,
    }
}

impl QpAttrMask {
    /// The verbs names of the flags set, e.g. `IBV_QP_AV, IBV_QP_DEST_QPN`.
    pub fn verbs_names(self) -> String {
        let mut out = Vec::new();
        for (name, bit) in Self::NAMES {
            if self.0 & bit != 0 {
                out.push(format!("IBV_QP_{name}"));
            }
        }
        out.join(", ")
    }
}

/// Why `modify_qp` refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModifyError {
    NoSuchQp(u32),
    /// The state change is not one the IBTA allows for this QP type.
    InvalidTransition {
        qp_type: QpType,
        from: QpState,
        to: QpState,
    },
    /// `cur_qp_state` was given and is not the QP's state.
    WrongCurrentState {
        given: QpState,
        actual: QpState,
    },
    /// Attributes this transition requires were not in the mask.
    MissingAttributes {
        from: QpState,
        to: QpState,
        missing: QpAttrMask,
    },
    /// Attributes this transition does not accept were in the mask.
    UnexpectedAttributes {
        from: QpState,
        to: QpState,
        unexpected: QpAttrMask,
    },
    /// A value out of range, e.g. `retry_cnt` above 7.
    InvalidValue {
        attribute: &'static str,
        value: u64,
    },
}

impl fmt::Display for ModifyError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            ModifyError::NoSuchQp(q) => write!(f, "modify QP: no QP number 0x{q:06x}"),
            ModifyError::InvalidTransition { qp_type, from, to } => {
                write!(f, "modify QP: {from} -> {to} is not a valid transition for a {qp_type:?} QP")
            }
            ModifyError::WrongCurrentState { given, actual } => {
                write!(f, "modify QP: IBV_QP_CUR_STATE says {given} but the QP is in {actual}")
            }
            ModifyError::MissingAttributes { from, to, missing } => {
                write!(f, "modify QP {from} -> {to}: missing required attributes {}", missing.verbs_names())
            }
            ModifyError::UnexpectedAttributes { from, to, unexpected } => {
                write!(f, "modify QP {from} -> {to}: attributes not allowed here: {}", unexpected.verbs_names())
            }
            ModifyError::InvalidValue { attribute, value } => {
                write!(f, "modify QP: invalid value {value} for {attribute}")
            }
        }
    }
}

impl std::error::Error for ModifyError {}

#[cfg(test)]
mod test {
    use super::Mtu;

    #[test]
    fn path_mtu_as_rxe() {
        assert_eq!(Mtu::for_link_mtu(1500), Some(Mtu::Mtu1024));
        assert_eq!(Mtu::for_link_mtu(9000), Some(Mtu::Mtu4096));
        assert_eq!(Mtu::for_link_mtu(65536), Some(Mtu::Mtu4096));
        assert_eq!(Mtu::for_link_mtu(4096 + 80), Some(Mtu::Mtu4096));
        assert_eq!(Mtu::for_link_mtu(4096 + 79), Some(Mtu::Mtu2048));
        assert_eq!(Mtu::for_link_mtu(2128), Some(Mtu::Mtu2048));
        assert_eq!(Mtu::for_link_mtu(576), Some(Mtu::Mtu256));
        assert_eq!(Mtu::for_link_mtu(335), None);
    }

    #[test]
    fn bytes_and_ibv_mtu_values() {
        assert_eq!(Mtu::from_bytes(2048).map(Mtu::to_enum), Some(4));
        assert_eq!(Mtu::from_enum(1).map(Mtu::bytes), Some(256));
        assert_eq!((Mtu::from_enum(0), Mtu::from_enum(6), Mtu::from_bytes(1500)), (None, None, None));
        assert_eq!(Mtu::Mtu4096.to_string(), "4096");
    }
}
