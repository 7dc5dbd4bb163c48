//! The goodput-versus-loss table: RC RDMA WRITE over the simulated link, a
//! deterministic function of the seed, kept as a snapshot so a change in
//! retransmission behaviour shows up as a changed number.

use super::{run_op, LinkConfig, Op};
use crate::engine::{Mtu, QpType};
use core::fmt::Write;

/// Loss rates of the table's rows, in percent.
pub const LOSS_PERCENT: [u32; 6] = [0, 1, 2, 5, 10, 20];
const MTUS: [Mtu; 3] = [Mtu::Mtu256, Mtu::Mtu1024, Mtu::Mtu4096];
const MESSAGE: usize = 1 << 20;
const MESSAGES: usize = 4;

/// The table, as `cargo run --example goodput` prints it.
pub fn table(seed: u64) -> String {
    let link = LinkConfig::clean();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "RC RDMA WRITE goodput over the simulated link: {} Gb/s, {} us one-way delay, seed {seed}",
        link.rate_bps / 1_000_000_000,
        link.delay.as_micros()
    );
    let _ = writeln!(out, "{MESSAGES} x {} KiB per cell; Mb/s of payload (packets on the wire)", MESSAGE >> 10);
    let _ = write!(out, "{:>6}", "loss");
    for m in MTUS {
        let _ = write!(out, "  {:>22}", format!("MTU {}", m.bytes()));
    }
    out.push('\n');
    for loss in LOSS_PERCENT {
        let _ = write!(out, "{:>5}%", loss);
        for mtu in MTUS {
            let mut l = link;
            l.loss = f64::from(loss) / 100.0;
            let cell = match run_op(seed, l, QpType::Rc, mtu, Op::Write, MESSAGE, MESSAGES) {
                Ok(o) => {
                    let mbps = o.bytes as f64 * 8.0 / o.elapsed.as_secs_f64() / 1e6;
                    format!("{mbps:.1} ({})", o.link.sent)
                }
                Err(e) => format!("failed: {e}"),
            };
            let _ = write!(out, "  {cell:>22}");
        }
        out.push('\n');
    }
    out
}
