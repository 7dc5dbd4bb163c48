//! Which of several processes that share one address a packet is for.
//!
//! Two programs on one host may use one IP, as two programs share the
//! kernel's `rxe0`. Then one UDP port 4791 takes every packet, and whoever
//! holds it hands each packet to the process that owns it
//! (`uroce_stack::link::udp`): a QP's packets by destination QPN; QP1's
//! connection requests by service ID (the listener's), every other CM
//! message by the comm ID that the receiving side chose, which that side
//! announced in the first message it sent (its local comm ID).

use super::mad::{Mad, CM_CLASS};
use super::msg::attr;
use crate::wire::{Bth, Deth};

/// What a process claims of a shared address, and how a packet is steered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SteerKey {
    /// A QP number (never 1: QP1 is steered by the two below).
    Qpn(u32),
    /// A service ID that a listener takes REQs and SIDR REQs for.
    Service(u64),
    /// A comm ID (or SIDR request ID) this side chose.
    CommId(u32),
}

impl core::fmt::Display for SteerKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SteerKey::Qpn(q) => write!(f, "QPN {q:#08x}"),
            SteerKey::Service(s) => write!(f, "service ID {s:#018x}"),
            SteerKey::CommId(c) => write!(f, "comm ID {c:#010x}"),
        }
    }
}

/// QP1, where CM MADs go.
const QP1: u32 = 1;
/// Offsets in a CM message's data: the sender's comm ID (the SIDR request
/// ID), the receiver's, and the service ID of a REQ or SIDR REQ.
const SENDER_ID: usize = 0;
const RECEIVER_ID: usize = 4;
const SERVICE_ID: usize = 8;

/// The attribute and data of a CM MAD to QP1 (BTH, DETH, then the MAD), if
/// `roce` is one.
fn cm_mad(roce: &[u8]) -> Option<(u16, &[u8])> {
    let mad = Mad::new_checked(roce.get(Bth::<&[u8]>::LEN + Deth::<&[u8]>::LEN..)?).ok()?;
    (mad.mgmt_class() == CM_CLASS).then(|| (mad.attr_id(), mad.into_inner()))
}

/// The CM message's data begins after the MAD header.
fn be32(mad: &[u8], at: usize) -> u32 {
    let at = super::mad::MAD_HEADER_LEN + at;
    u32::from_be_bytes([mad[at], mad[at + 1], mad[at + 2], mad[at + 3]])
}

/// The destination QPN of a RoCE packet (BTH .. ICRC).
pub fn dest_qpn(roce: &[u8]) -> Option<u32> {
    let b = roce.get(5..8)?;
    Some(u32::from_be_bytes([0, b[0], b[1], b[2]]))
}

/// Whose a received packet is: `None` for a packet to QP1 that is no CM
/// message (or too short to be one), which the address's holder keeps.
pub fn steer(roce: &[u8]) -> Option<SteerKey> {
    let qpn = dest_qpn(roce)?;
    if qpn != QP1 {
        return Some(SteerKey::Qpn(qpn));
    }
    let (attr_id, mad) = cm_mad(roce)?;
    Some(match attr_id {
        attr::REQ | attr::SIDR_REQ => {
            SteerKey::Service(u64::from(be32(mad, SERVICE_ID)) << 32 | u64::from(be32(mad, SERVICE_ID + 4)))
        }
        // The answer echoes the requester's request ID where others put the sender's.
        attr::SIDR_REP => SteerKey::CommId(be32(mad, SENDER_ID)),
        _ => SteerKey::CommId(be32(mad, RECEIVER_ID)),
    })
}

/// The comm ID (or SIDR request ID) that a CM message being sent announces
/// as its sender's: the answers will be steered by it. `None` for other
/// packets, and for a SIDR REP (it carries the requester's ID).
pub fn sender_comm_id(roce: &[u8]) -> Option<u32> {
    if dest_qpn(roce)? != QP1 {
        return None;
    }
    let (attr_id, mad) = cm_mad(roce)?;
    (attr_id != attr::SIDR_REP).then(|| be32(mad, SENDER_ID)).filter(|id| *id != 0)
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::msg::{CmMessage, DreqRepr};
    use crate::cm::MAD_LEN;

    /// A UD packet to QP1 holding `msg` (BTH, DETH, MAD, ICRC).
    fn packet(msg: &CmMessage) -> Vec<u8> {
        let mut p = vec![0u8; 12 + 8 + MAD_LEN + 4];
        p[7] = 1;
        p[20..20 + MAD_LEN].copy_from_slice(&msg.to_mad(7));
        p
    }

    #[test]
    fn qps_go_by_their_number_and_cm_messages_by_id() {
        let mut data = vec![0u8; 40];
        data[5..8].copy_from_slice(&[0x12, 0x34, 0x56]);
        assert_eq!(steer(&data), Some(SteerKey::Qpn(0x123456)));
        assert_eq!(sender_comm_id(&data), None);
        let dreq = CmMessage::Dreq(Box::new(DreqRepr {
            local_comm_id: 0xaabb_ccdd,
            remote_comm_id: 0x1122_3344,
            remote_qpn: 9,
            private_data: [0; crate::cm::msg::DREQ_PRIVATE_DATA_LEN],
        }));
        let p = packet(&dreq);
        assert_eq!(steer(&p), Some(SteerKey::CommId(0x1122_3344)));
        assert_eq!(sender_comm_id(&p), Some(0xaabb_ccdd));
        // Not a CM MAD: its holder keeps it.
        let mut other = p.clone();
        other[20 + 1] = 0x01; // the management class
        assert_eq!((steer(&other), sender_comm_id(&other)), (None, None));
        assert_eq!(steer(&p[..30]), None);
    }
}
