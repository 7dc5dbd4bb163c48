//! The 44-byte path description a REQ carries twice (primary and alternate).

use crate::cm::field::{at, bits, get_bytes, Field};
use crate::engine::Gid;

/// Bytes of one path in a REQ.
pub const PATH_LEN: usize = 44;

/// One path of a REQ (IBTA Table 106, bytes 52..96 and 96..140).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PathRepr {
    /// 0xFFFF (permissive) on RoCE, where LIDs mean nothing.
    pub local_lid: u16,
    pub remote_lid: u16,
    pub local_gid: Gid,
    pub remote_gid: Gid,
    /// 20 bits.
    pub flow_label: u32,
    /// 6 bits (`enum ib_rate`).
    pub packet_rate: u8,
    pub traffic_class: u8,
    pub hop_limit: u8,
    /// 4 bits.
    pub sl: u8,
    pub subnet_local: bool,
    /// 5 bits: 4.096 us x 2^t.
    pub local_ack_timeout: u8,
}

/// A field at `off` bytes into the path that starts at `base`.
fn f(base: usize, field: Field) -> Field {
    Field { byte: base + field.byte, ..field }
}

const LOCAL_LID: Field = at(0, 16);
const REMOTE_LID: Field = at(2, 16);
const LOCAL_GID: usize = 4;
const REMOTE_GID: usize = 20;
const FLOW_LABEL: Field = at(36, 20);
const PACKET_RATE: Field = bits(39, 2, 6);
const TRAFFIC_CLASS: Field = at(40, 8);
const HOP_LIMIT: Field = at(41, 8);
const SL: Field = at(42, 4);
const SUBNET_LOCAL: Field = bits(42, 4, 1);
const LOCAL_ACK_TIMEOUT: Field = at(43, 5);

impl PathRepr {
    /// Reads the path at `base` of `data` (at least `base + 44` bytes).
    pub(crate) fn parse(data: &[u8], base: usize) -> PathRepr {
        PathRepr {
            local_lid: f(base, LOCAL_LID).get(data) as u16,
            remote_lid: f(base, REMOTE_LID).get(data) as u16,
            local_gid: Gid(get_bytes(data, base + LOCAL_GID)),
            remote_gid: Gid(get_bytes(data, base + REMOTE_GID)),
            flow_label: f(base, FLOW_LABEL).get(data),
            packet_rate: f(base, PACKET_RATE).get(data) as u8,
            traffic_class: f(base, TRAFFIC_CLASS).get(data) as u8,
            hop_limit: f(base, HOP_LIMIT).get(data) as u8,
            sl: f(base, SL).get(data) as u8,
            subnet_local: f(base, SUBNET_LOCAL).flag(data),
            local_ack_timeout: f(base, LOCAL_ACK_TIMEOUT).get(data) as u8,
        }
    }

    pub(crate) fn emit(&self, data: &mut [u8], base: usize) {
        f(base, LOCAL_LID).set(data, self.local_lid.into());
        f(base, REMOTE_LID).set(data, self.remote_lid.into());
        data[base + LOCAL_GID..base + LOCAL_GID + 16].copy_from_slice(&self.local_gid.0);
        data[base + REMOTE_GID..base + REMOTE_GID + 16].copy_from_slice(&self.remote_gid.0);
        f(base, FLOW_LABEL).set(data, self.flow_label);
        f(base, PACKET_RATE).set(data, self.packet_rate.into());
        f(base, TRAFFIC_CLASS).set(data, self.traffic_class.into());
        f(base, HOP_LIMIT).set(data, self.hop_limit.into());
        f(base, SL).set(data, self.sl.into());
        f(base, SUBNET_LOCAL).set(data, self.subnet_local.into());
        f(base, LOCAL_ACK_TIMEOUT).set(data, self.local_ack_timeout.into());
    }

    /// An all-zero path: what a REQ without an alternate path carries.
    pub fn is_empty(&self) -> bool {
        *self == PathRepr::default()
    }
}
