//! What a test looks at in a simulation: the completions on a CQ, the packets
//! an engine sends or the link delivers, the bytes of a region.

use super::Sim;
use crate::engine::{CqHandle, Engine, Instant, Transmit, WorkCompletion, MAX_PACKET_LEN};
use crate::wire::{RocePacket, RoceRepr};
use std::sync::{Arc, Mutex};

/// Every completion waiting on `cq`, oldest first.
pub fn poll_all(e: &mut Engine, cq: CqHandle) -> Vec<WorkCompletion> {
    std::iter::from_fn(|| e.poll_cq(cq)).collect()
}

/// The headers of a packet an engine sent.
///
/// # Panics
/// When the bytes are not a RoCE packet: an engine never sends one.
pub fn parse(data: &[u8]) -> RoceRepr {
    let packet = RocePacket::new_checked(data).expect("a whole RoCE packet");
    RoceRepr::parse(&packet).expect("headers an engine sends")
}

/// The packets delivered since [`record`], in order: (receiving node, headers).
pub type PacketLog = Arc<Mutex<Vec<(usize, RoceRepr)>>>;

/// Logs the headers of every packet the link delivers from now on, through
/// the simulation's tap (which it takes over).
pub fn record(sim: &mut Sim) -> PacketLog {
    let log = PacketLog::default();
    let l = log.clone();
    sim.tap = Some(Box::new(move |to, data| l.lock().expect("not poisoned").push((to, parse(data)))));
    log
}

/// Every packet `e` has to send now, with what `poll_transmit` said of it,
/// taken past the link: the test delivers them itself ([`Sim::inject`]) in
/// the order it wants, again, or not at all. The engine is asked at time
/// zero, so no timer of its falls due.
pub fn drain_transmits(e: &mut Engine) -> Vec<(Transmit, Vec<u8>)> {
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    std::iter::from_fn(|| e.poll_transmit(Instant::ZERO, &mut buf).map(|tx| (tx, buf[..tx.len].to_vec()))).collect()
}

/// The bytes of the packets of [`drain_transmits`].
pub fn drain_packets(e: &mut Engine) -> Vec<Vec<u8>> {
    drain_transmits(e).into_iter().map(|(_, data)| data).collect()
}

/// `len` bytes of the region of `key`, from `offset` into it.
pub fn read_mr(e: &Engine, key: u32, offset: usize, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    e.mr(key).expect("a registered region").read(offset, &mut out);
    out
}

/// All the bytes of the region of `key`.
pub fn mr_contents(e: &Engine, key: u32) -> Vec<u8> {
    let len = e.mr(key).expect("a registered region").len();
    read_mr(e, key, 0, len)
}
