//! The BTH opcode and what each one implies: transport, position in a message,
//! the extension headers that follow the BTH, and whether a payload follows.
//!
//! Extension headers always appear in one order after the BTH (IBTA Vol 1 9.2,
//! FLUSH from 1.5): DETH, FETH, RETH, AtomicETH, ImmDt, IETH, AETH, AtomicAckETH;
//! a CNP has its 16 reserved bytes. [`ExtHeaders::ORDER`] lists that order.

use core::fmt;

/// The transport service an opcode belongs to (its top three bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    Rc,
    Uc,
    Rd,
    Ud,
    Cnp,
    /// Any other top-bit pattern (reserved or manufacturer specific).
    Other,
}

/// Where a packet sits in a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    First,
    Middle,
    Last,
    Only,
}

/// A set of extension headers; the bits name them, [`ExtHeaders::ORDER`] orders them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtHeaders(u16);

impl ExtHeaders {
    pub const NONE: ExtHeaders = ExtHeaders(0);
    pub const DETH: ExtHeaders = ExtHeaders(1 << 0);
    pub const FETH: ExtHeaders = ExtHeaders(1 << 1);
    pub const RETH: ExtHeaders = ExtHeaders(1 << 2);
    pub const ATOMIC_ETH: ExtHeaders = ExtHeaders(1 << 3);
    pub const IMMDT: ExtHeaders = ExtHeaders(1 << 4);
    pub const IETH: ExtHeaders = ExtHeaders(1 << 5);
    pub const AETH: ExtHeaders = ExtHeaders(1 << 6);
    pub const ATOMIC_ACK_ETH: ExtHeaders = ExtHeaders(1 << 7);
    pub const CNP: ExtHeaders = ExtHeaders(1 << 8);

    /// Every header in wire order, with its length in bytes.
    pub const ORDER: [(ExtHeaders, usize); 9] = [
        (Self::DETH, 8),
        (Self::FETH, 4),
        (Self::RETH, 16),
        (Self::ATOMIC_ETH, 28),
        (Self::IMMDT, 4),
        (Self::IETH, 4),
        (Self::AETH, 4),
        (Self::ATOMIC_ACK_ETH, 8),
        (Self::CNP, super::cnp::LEN),
    ];

    pub const fn union(self, other: ExtHeaders) -> ExtHeaders {
        ExtHeaders(self.0 | other.0)
    }
    pub const fn contains(self, other: ExtHeaders) -> bool {
        self.0 & other.0 == other.0
    }
    /// The total length of these headers on the wire.
    pub const fn len(self) -> usize {
        let mut total = 0;
        let mut i = 0;
        while i < Self::ORDER.len() {
            if self.contains(Self::ORDER[i].0) {
                total += Self::ORDER[i].1;
            }
            i += 1;
        }
        total
    }

    /// Where header `which` starts, counted from the end of the BTH, in a
    /// packet carrying these headers (meaningful when it carries `which`).
    pub const fn offset_of(self, which: ExtHeaders) -> usize {
        let mut off = 0;
        let mut i = 0;
        while i < Self::ORDER.len() && Self::ORDER[i].0 .0 != which.0 {
            if self.contains(Self::ORDER[i].0) {
                off += Self::ORDER[i].1;
            }
            i += 1;
        }
        off
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// What the specification says of one opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpcodeInfo {
    pub headers: ExtHeaders,
    pub position: Position,
    /// Whether data may follow the headers (READ requests, ACKs, atomics: no).
    pub has_payload: bool,
    /// The name used by IBTA, rxe and this project's dump, e.g. `RC_SEND_FIRST`.
    pub name: &'static str,
    /// `headers.len()`: bytes of extension headers after the BTH.
    pub ext_len: usize,
}

macro_rules! opcodes {
    ($( $variant:ident = $value:expr, $name:expr, $pos:ident, $payload:expr, [$($hdr:ident),*]; )+) => {
        enum_with_unknown! {
            /// A BTH opcode. Values with no name in IBTA are `Unknown`.
            pub enum Opcode(u8) {
                $( $variant = $value ),+
            }
        }

        impl Opcode {
            /// Every named opcode, for tables and exhaustive tests.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant),+];

        }

        /// The specification's facts for opcode byte `value`; `None` when unknown.
        const fn info_of_byte(value: u8) -> Option<OpcodeInfo> {
            match value {
                $( $value => Some(OpcodeInfo {
                    headers: ExtHeaders::NONE $(.union(ExtHeaders::$hdr))*,
                    position: Position::$pos,
                    has_payload: $payload,
                    name: $name,
                    ext_len: ExtHeaders::NONE $(.union(ExtHeaders::$hdr))*.len(),
                }), )+
                _ => None,
            }
        }
    };
}

/// [`info_of_byte`] of every byte, made at compile time: what a parser asks
/// of each packet costs one load.
static INFO_BY_BYTE: [Option<OpcodeInfo>; 256] = {
    let mut t = [None; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = info_of_byte(b as u8);
        b += 1;
    }
    t
};

/// The specification's facts for opcode byte `value`, as a table lookup.
pub fn info_of(value: u8) -> Option<&'static OpcodeInfo> {
    INFO_BY_BYTE[usize::from(value)].as_ref()
}

opcodes! {
    RcSendFirst = 0x00, "RC_SEND_FIRST", First, true, [];
    RcSendMiddle = 0x01, "RC_SEND_MIDDLE", Middle, true, [];
    RcSendLast = 0x02, "RC_SEND_LAST", Last, true, [];
    RcSendLastWithImm = 0x03, "RC_SEND_LAST_WITH_IMMEDIATE", Last, true, [IMMDT];
    RcSendOnly = 0x04, "RC_SEND_ONLY", Only, true, [];
    RcSendOnlyWithImm = 0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", Only, true, [IMMDT];
    RcWriteFirst = 0x06, "RC_RDMA_WRITE_FIRST", First, true, [RETH];
    RcWriteMiddle = 0x07, "RC_RDMA_WRITE_MIDDLE", Middle, true, [];
    RcWriteLast = 0x08, "RC_RDMA_WRITE_LAST", Last, true, [];
    RcWriteLastWithImm = 0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", Last, true, [IMMDT];
    RcWriteOnly = 0x0a, "RC_RDMA_WRITE_ONLY", Only, true, [RETH];
    RcWriteOnlyWithImm = 0x0b, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", Only, true, [RETH, IMMDT];
    RcReadRequest = 0x0c, "RC_RDMA_READ_REQUEST", Only, false, [RETH];
    RcReadResponseFirst = 0x0d, "RC_RDMA_READ_RESPONSE_FIRST", First, true, [AETH];
    RcReadResponseMiddle = 0x0e, "RC_RDMA_READ_RESPONSE_MIDDLE", Middle, true, [];
    RcReadResponseLast = 0x0f, "RC_RDMA_READ_RESPONSE_LAST", Last, true, [AETH];
    RcReadResponseOnly = 0x10, "RC_RDMA_READ_RESPONSE_ONLY", Only, true, [AETH];
    RcAck = 0x11, "RC_ACKNOWLEDGE", Only, false, [AETH];
    RcAtomicAck = 0x12, "RC_ATOMIC_ACKNOWLEDGE", Only, false, [AETH, ATOMIC_ACK_ETH];
    RcCompareSwap = 0x13, "RC_COMPARE_SWAP", Only, false, [ATOMIC_ETH];
    RcFetchAdd = 0x14, "RC_FETCH_ADD", Only, false, [ATOMIC_ETH];
    RcSendLastWithInv = 0x16, "RC_SEND_LAST_WITH_INVALIDATE", Last, true, [IETH];
    RcSendOnlyWithInv = 0x17, "RC_SEND_ONLY_WITH_INVALIDATE", Only, true, [IETH];
    RcFlush = 0x1c, "RC_FLUSH", Only, false, [FETH, RETH];
    RcAtomicWrite = 0x1d, "RC_ATOMIC_WRITE", Only, true, [RETH];
    UcSendFirst = 0x20, "UC_SEND_FIRST", First, true, [];
    UcSendMiddle = 0x21, "UC_SEND_MIDDLE", Middle, true, [];
    UcSendLast = 0x22, "UC_SEND_LAST", Last, true, [];
    UcSendLastWithImm = 0x23, "UC_SEND_LAST_WITH_IMMEDIATE", Last, true, [IMMDT];
    UcSendOnly = 0x24, "UC_SEND_ONLY", Only, true, [];
    UcSendOnlyWithImm = 0x25, "UC_SEND_ONLY_WITH_IMMEDIATE", Only, true, [IMMDT];
    UcWriteFirst = 0x26, "UC_RDMA_WRITE_FIRST", First, true, [RETH];
    UcWriteMiddle = 0x27, "UC_RDMA_WRITE_MIDDLE", Middle, true, [];
    UcWriteLast = 0x28, "UC_RDMA_WRITE_LAST", Last, true, [];
    UcWriteLastWithImm = 0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", Last, true, [IMMDT];
    UcWriteOnly = 0x2a, "UC_RDMA_WRITE_ONLY", Only, true, [RETH];
    UcWriteOnlyWithImm = 0x2b, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", Only, true, [RETH, IMMDT];
    UdSendOnly = 0x64, "UD_SEND_ONLY", Only, true, [DETH];
    UdSendOnlyWithImm = 0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", Only, true, [DETH, IMMDT];
    Cnp = 0x81, "CNP", Only, false, [CNP];
}

impl Opcode {
    /// The specification's facts for this opcode; `None` when unknown.
    pub fn info(self) -> Option<OpcodeInfo> {
        info_of(u8::from(self)).copied()
    }

    pub fn transport(self) -> Transport {
        match u8::from(self) >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            4 if self == Opcode::Cnp => Transport::Cnp,
            _ => Transport::Other,
        }
    }
    pub fn name(self) -> Option<&'static str> {
        info_of(u8::from(self)).map(|i| i.name)
    }
    pub fn headers(self) -> Option<ExtHeaders> {
        info_of(u8::from(self)).map(|i| i.headers)
    }
    pub fn position(self) -> Option<Position> {
        info_of(u8::from(self)).map(|i| i.position)
    }
    pub fn has_payload(self) -> bool {
        info_of(u8::from(self)).is_some_and(|i| i.has_payload)
    }
    /// Whether this opcode is a response (ACK, atomic ACK, READ response).
    pub fn is_response(self) -> bool {
        matches!(u8::from(self), 0x0d..=0x12)
    }
    /// Whether this opcode carries an immediate for the receiver's completion.
    pub fn has_immediate(self) -> bool {
        self.headers().is_some_and(|h| h.contains(ExtHeaders::IMMDT))
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "UNKNOWN_0x{:02x}", u8::from(*self)),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn every_byte_round_trips() {
        for b in 0..=255u8 {
            assert_eq!(u8::from(Opcode::from(b)), b);
        }
    }

    #[test]
    fn table_facts() {
        let w = Opcode::RcWriteOnlyWithImm.info().unwrap();
        assert_eq!(w.headers.len(), 20);
        assert!(w.headers.contains(ExtHeaders::RETH) && w.headers.contains(ExtHeaders::IMMDT));
        assert_eq!(Opcode::RcAtomicAck.headers().unwrap().len(), 12);
        assert_eq!(Opcode::RcCompareSwap.headers().unwrap().len(), 28);
        assert_eq!(Opcode::RcFlush.headers().unwrap().len(), 20);
        assert_eq!(Opcode::UdSendOnlyWithImm.headers().unwrap().len(), 12);
        assert!(!Opcode::RcReadRequest.has_payload());
        assert_eq!(Opcode::UdSendOnly.transport(), Transport::Ud);
        assert_eq!(Opcode::from(0x15).info(), None);
        assert_eq!(Opcode::from(0x15).to_string(), "UNKNOWN_0x15");
        assert_eq!(Opcode::ALL.len(), 40);
    }

    #[test]
    fn offsets_follow_the_order() {
        let h = ExtHeaders::RETH.union(ExtHeaders::IMMDT);
        assert_eq!((h.offset_of(ExtHeaders::RETH), h.offset_of(ExtHeaders::IMMDT)), (0, 16));
        let h = ExtHeaders::FETH.union(ExtHeaders::RETH);
        assert_eq!((h.offset_of(ExtHeaders::FETH), h.offset_of(ExtHeaders::RETH)), (0, 4));
        let h = ExtHeaders::DETH.union(ExtHeaders::IMMDT);
        assert_eq!(h.offset_of(ExtHeaders::IMMDT), 8);
    }
}
