//! The matrix: every operation x {clean, 10% loss, 5% duplication,
//! reordering, 1% corruption, all at once} x sizes {0, 1, MTU-1, MTU, MTU+1,
//! 1 MiB} x MTU {256, 1024, 4096}, for RC, UC and UD. Each cell checks data
//! byte-exact, every WR completed exactly once, in order, with the right
//! status, and exact FETCH_ADD counters (N increments from two requesters).
//! Atomics carry 8 bytes whatever the size column says, so they run once per
//! impairment and MTU.

use core::time::Duration;
use uroce_transport::engine::{Mtu, QpType};
use uroce_transport::sim::{run_op, LinkConfig, Op};

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

fn run_matrix(name: &str, link: LinkConfig, seed: u64) {
    let mut failures = Vec::new();
    let mut cells = 0;
    for qp_type in [QpType::Rc, QpType::Uc, QpType::Ud] {
        for mtu in MTUS {
            for op in Op::ALL.into_iter().filter(|op| op.valid_on(qp_type)) {
                let sizes: &[usize] = if op.is_atomic() { &[8] } else { &sizes(mtu) };
                for &size in sizes {
                    let messages = if op.is_atomic() {
                        40
                    } else if size >= MIB {
                        1
                    } else {
                        3
                    };
                    cells += 1;
                    let cell_seed = seed ^ (cells as u64 * 0x9e37_79b9);
                    if let Err(e) = run_op(cell_seed, link, qp_type, mtu, op, size, messages) {
                        failures.push(format!("{name} {qp_type:?} MTU {} {op:?} size {size}: {e}", mtu.bytes()));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {cells} cells failed:\n{}", failures.len(), failures.join("\n"));
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
