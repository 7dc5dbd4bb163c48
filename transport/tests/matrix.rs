//! The matrix: every operation x {clean, 10% loss, 5% duplication,
//! reordering, 1% corruption, all at once} x sizes {0, 1, MTU-1, MTU, MTU+1,
//! 1 MiB} x MTU {256, 1024, 4096}, for RC, UC and UD. Each cell checks data
//! byte-exact, every WR completed exactly once, in order, with the right
//! status, and exact FETCH_ADD counters (N increments from two requesters).
//!
//! FLUSH runs as a WRITE of the size followed by a FLUSH of its range (or of
//! the whole region). Atomics and ATOMIC_WRITE carry 8 bytes whatever the
//! size column says, so they run once per impairment and MTU. Within a cell
//! the messages take turns using one SGE, several SGEs (an empty one among
//! them) and inline data, and every other receive scatters over several SGEs.

use core::time::Duration;
use uroce_transport::engine::{Mtu, QpType};
use uroce_transport::sim::{run_op, LinkConfig, LinkStats, Op};

const MTUS: [Mtu; 3] = [Mtu::Mtu256, Mtu::Mtu1024, Mtu::Mtu4096];
const MIB: usize = 1 << 20;

fn sizes(mtu: Mtu) -> [usize; 6] {
    let m = mtu.bytes() as usize;
    [0, 1, m - 1, m, m + 1, MIB]
}

fn impaired(f: impl FnOnce(&mut LinkConfig)) -> LinkConfig {
    let mut l = LinkConfig::clean();
    f(&mut l);
    l
}

/// `MATRIX_SEED=n` runs the matrix on other seeds (CI runs the default, 0).
fn seed_offset() -> u64 {
    std::env::var("MATRIX_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0) * 1000
}

fn run_matrix(name: &str, link: LinkConfig, seed: u64) {
    let mut failures = Vec::new();
    let mut cells = 0;
    let mut seen = LinkStats::default();
    for qp_type in [QpType::Rc, QpType::Uc, QpType::Ud] {
        for mtu in MTUS {
            for op in Op::ALL.into_iter().filter(|op| op.valid_on(qp_type)) {
                let sizes: &[usize] = if op.fixed_size() { &[8] } else { &sizes(mtu) };
                for &size in sizes {
                    let messages = if op.fixed_size() {
                        40
                    } else if size >= MIB {
                        1
                    } else {
                        3
                    };
                    cells += 1;
                    let cell_seed = (seed + seed_offset()) ^ (cells as u64 * 0x9e37_79b9);
                    match run_op(cell_seed, link, qp_type, mtu, op, size, messages) {
                        Ok(o) => {
                            seen.sent += o.link.sent;
                            seen.lost += o.link.lost;
                            seen.duplicated += o.link.duplicated;
                            seen.reordered += o.link.reordered;
                            seen.corrupted += o.link.corrupted;
                            seen.dropped_corrupt += o.link.dropped_corrupt;
                        }
                        Err(e) => {
                            failures.push(format!("{name} {qp_type:?} MTU {} {op:?} size {size}: {e}", mtu.bytes()))
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {cells} cells failed:\n{}", failures.len(), failures.join("\n"));
    // The cells ran what they claim: each impairment really happened.
    let happened = [
        (link.loss, seen.lost),
        (link.duplicate, seen.duplicated),
        (link.reorder, seen.reordered),
        (link.corrupt, seen.corrupted.min(seen.dropped_corrupt)),
    ];
    for (i, (p, n)) in happened.into_iter().enumerate() {
        assert_eq!(p > 0.0, n > 0, "{name}: impairment {i} configured {p}, seen {n} times");
    }
    eprintln!(
        "{name}: {cells} cells, {} packets sent, {} lost, {} duplicated, {} reordered, {} corrupted",
        seen.sent, seen.lost, seen.duplicated, seen.reordered, seen.corrupted
    );
}

/// Sizes run per MTU, QP type and operation (the cell count is fixed).
#[test]
fn the_matrix_has_every_cell() {
    let mut cells = 0;
    for qp_type in [QpType::Rc, QpType::Uc, QpType::Ud] {
        for mtu in MTUS {
            for op in Op::ALL.into_iter().filter(|op| op.valid_on(qp_type)) {
                cells += if op.fixed_size() { 1 } else { sizes(mtu).len() };
            }
        }
    }
    // RC: 7 sized ops (SEND x3, WRITE x2, READ, WRITE+FLUSH) x 6 sizes + 3 on
    // 8 bytes (CMP_SWAP, FETCH_ADD, ATOMIC_WRITE); UC: 4 x 6; UD: 2 x 6; x 3 MTUs.
    assert_eq!(cells, 3 * ((7 * 6 + 3) + 4 * 6 + 2 * 6));
}

#[test]
fn clean() {
    run_matrix("clean", LinkConfig::clean(), 1);
}

#[test]
fn loss_10_percent() {
    run_matrix("loss", impaired(|l| l.loss = 0.10), 2);
}

#[test]
fn duplication_5_percent() {
    run_matrix("duplication", impaired(|l| l.duplicate = 0.05), 3);
}

#[test]
fn reordering() {
    run_matrix(
        "reordering",
        impaired(|l| {
            l.reorder = 0.10;
            l.reorder_delay = Duration::from_micros(30);
        }),
        4,
    );
}

#[test]
fn corruption_1_percent() {
    run_matrix("corruption", impaired(|l| l.corrupt = 0.01), 5);
}

#[test]
fn all_at_once() {
    run_matrix(
        "all",
        impaired(|l| {
            l.loss = 0.10;
            l.duplicate = 0.05;
            l.reorder = 0.10;
            l.reorder_delay = Duration::from_micros(30);
            l.corrupt = 0.01;
        }),
        6,
    );
}
