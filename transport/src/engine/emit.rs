//! Building packets: which opcode a request packet carries, and writing
//! headers into the caller's buffer.

use super::attr::QpType;
use super::wr::WrOp;
use crate::wire::{Opcode, Position, RoceRepr};
use core::ops::Range;

/// Where packet `idx` of a message of `npkts` packets sits.
pub(crate) fn position(idx: u32, npkts: u32) -> Position {
    match (idx, npkts) {
        (_, 1) => Position::Only,
        (0, _) => Position::First,
        (i, n) if i + 1 == n => Position::Last,
        _ => Position::Middle,
    }
}

/// The opcode of a SEND or WRITE packet at `pos` (READ and atomics have one
/// opcode each; see [`single_opcode`]).
pub(crate) fn data_opcode(t: QpType, op: WrOp, pos: Position) -> Opcode {
    use Opcode::*;
    use Position::*;
    let imm = op.imm().is_some();
    let inv = matches!(op, WrOp::SendWithInv { .. });
    match (t, op.is_write(), pos) {
        (QpType::Ud, _, _) if imm => UdSendOnlyWithImm,
        (QpType::Ud, _, _) => UdSendOnly,
        (QpType::Rc, false, First) => RcSendFirst,
        (QpType::Rc, false, Middle) => RcSendMiddle,
        (QpType::Rc, false, Last) if imm => RcSendLastWithImm,
        (QpType::Rc, false, Last) if inv => RcSendLastWithInv,
        (QpType::Rc, false, Last) => RcSendLast,
        (QpType::Rc, false, Only) if imm => RcSendOnlyWithImm,
        (QpType::Rc, false, Only) if inv => RcSendOnlyWithInv,
        (QpType::Rc, false, Only) => RcSendOnly,
        (QpType::Rc, true, First) => RcWriteFirst,
        (QpType::Rc, true, Middle) => RcWriteMiddle,
        (QpType::Rc, true, Last) if imm => RcWriteLastWithImm,
        (QpType::Rc, true, Last) => RcWriteLast,
        (QpType::Rc, true, Only) if imm => RcWriteOnlyWithImm,
        (QpType::Rc, true, Only) => RcWriteOnly,
        (QpType::Uc, false, First) => UcSendFirst,
        (QpType::Uc, false, Middle) => UcSendMiddle,
        (QpType::Uc, false, Last) if imm => UcSendLastWithImm,
        (QpType::Uc, false, Last) => UcSendLast,
        (QpType::Uc, false, Only) if imm => UcSendOnlyWithImm,
        (QpType::Uc, false, Only) => UcSendOnly,
        (QpType::Uc, true, First) => UcWriteFirst,
        (QpType::Uc, true, Middle) => UcWriteMiddle,
        (QpType::Uc, true, Last) if imm => UcWriteLastWithImm,
        (QpType::Uc, true, Last) => UcWriteLast,
        (QpType::Uc, true, Only) if imm => UcWriteOnlyWithImm,
        (QpType::Uc, true, Only) => UcWriteOnly,
    }
}

/// The opcode of a one-packet request: READ, the atomics, ATOMIC_WRITE, FLUSH.
pub(crate) fn single_opcode(op: WrOp) -> Option<Opcode> {
    match op {
        WrOp::RdmaRead { .. } => Some(Opcode::RcReadRequest),
        WrOp::AtomicCmpSwp { .. } => Some(Opcode::RcCompareSwap),
        WrOp::AtomicFetchAdd { .. } => Some(Opcode::RcFetchAdd),
        WrOp::AtomicWrite { .. } => Some(Opcode::RcAtomicWrite),
        WrOp::Flush { .. } => Some(Opcode::RcFlush),
        _ => None,
    }
}

/// Writes `repr`'s headers for `payload_len` bytes of data into `buf`;
/// returns the packet length and where the data goes.
pub(crate) fn headers(buf: &mut [u8], repr: &RoceRepr, payload_len: usize) -> (usize, Range<usize>) {
    let len = repr.buffer_len(payload_len);
    let data = repr.emit_headers(&mut buf[..len], payload_len);
    (len, data)
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn positions() {
        assert_eq!(position(0, 1), Position::Only);
        assert_eq!(position(0, 3), Position::First);
        assert_eq!(position(1, 3), Position::Middle);
        assert_eq!(position(2, 3), Position::Last);
    }

    #[test]
    fn opcodes_match_their_position() {
        let ops =
            [WrOp::Send, WrOp::SendWithImm { imm: 1 }, WrOp::RdmaWriteWithImm { remote_addr: 0, rkey: 0, imm: 2 }];
        for t in [QpType::Rc, QpType::Uc] {
            for op in ops {
                for pos in [Position::First, Position::Middle, Position::Last, Position::Only] {
                    assert_eq!(data_opcode(t, op, pos).position(), Some(pos), "{t:?} {op:?} {pos:?}");
                }
            }
        }
        assert_eq!(
            data_opcode(QpType::Rc, WrOp::SendWithInv { invalidate_rkey: 3 }, Position::Last),
            Opcode::RcSendLastWithInv
        );
    }
}
