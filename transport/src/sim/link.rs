//! The impairment model: one line of data manipulation per impairment.

use crate::engine::Instant;
use core::time::Duration;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// What the link does to packets. Probabilities are per packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    pub loss: f64,
    pub duplicate: f64,
    /// A reordered packet is held back by `reorder_delay`.
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// A corrupted packet has one bit flipped (and fails the CRC check).
    pub corrupt: f64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Bits per second, 0 for no serialisation delay.
    pub rate_bps: u64,
    /// Longest packet (UDP payload) the link carries; longer ones are dropped.
    pub mtu: usize,
}

impl LinkConfig {
    /// A clean 10 Gb/s link with 5 us of delay.
    pub fn clean() -> LinkConfig {
        LinkConfig {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_micros(20),
            corrupt: 0.0,
            delay: Duration::from_micros(5),
            rate_bps: 10_000_000_000,
            mtu: 9000,
        }
    }

    pub(super) fn serialisation(&self, len: usize) -> Duration {
        match self.rate_bps {
            0 => Duration::ZERO,
            r => Duration::from_nanos((len as u64 * 8 * 1_000_000_000) / r),
        }
    }
}

/// What the link did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub sent: u64,
    pub delivered: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    pub dropped_corrupt: u64,
    pub dropped_mtu: u64,
    pub misaddressed: u64,
}

/// The copies of `data` that arrive, with their arrival times.
pub(super) fn impair(
    cfg: &LinkConfig,
    rng: &mut ChaCha8Rng,
    stats: &mut LinkStats,
    at: Instant,
    mut data: Vec<u8>,
) -> Vec<(Instant, Vec<u8>)> {
    if data.len() > cfg.mtu {
        stats.dropped_mtu += 1;
        return Vec::new();
    }
    if rng.gen_bool(cfg.loss) {
        stats.lost += 1;
        return Vec::new();
    }
    if rng.gen_bool(cfg.corrupt) {
        stats.corrupted += 1;
        let i = rng.gen_range(0..data.len());
        data[i] ^= 1 << rng.gen_range(0..8);
    }
    let at = if rng.gen_bool(cfg.reorder) {
        stats.reordered += 1;
        at + cfg.reorder_delay
    } else {
        at
    };
    let mut out = Vec::with_capacity(2);
    if rng.gen_bool(cfg.duplicate) {
        stats.duplicated += 1;
        out.push((at + Duration::from_nanos(rng.gen_range(0..2_000)), data.clone()));
    }
    out.push((at, data));
    out
}

/// Writes a CRC-32 of the packet into its ICRC field (the link's check).
pub(super) fn stamp_crc(data: &mut [u8]) {
    let n = data.len();
    let crc = crc32fast::hash(&data[..n - 4]);
    data[n - 4..].copy_from_slice(&crc.to_le_bytes());
}

pub(super) fn check_crc(data: &[u8]) -> bool {
    let n = data.len();
    n >= 4 && crc32fast::hash(&data[..n - 4]).to_le_bytes() == data[n - 4..]
}
