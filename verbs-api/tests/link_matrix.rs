//! The simulation matrix's RC operations and impairments over real links
//! (issue 15: every test over every link, the same-host path included).
//! Two devices of this process, each link either UDP (`udp:IP,shm=0`) or
//! the same-host path through shared memory (`shm=1`); side a's link clean,
//! or losing, duplicating, reordering or corrupting packets, or all at once.
//! Every cell posts SENDs, WRITEs, READs or atomics of sizes around the path
//! MTU (4096), several outstanding, and checks the data byte-exact, every WR
//! completed once, in order, successfully, and the atomics' original values.
//! Each run checks that the traffic took the path it names and that the
//! impairment showed in the engines' counters.
//!
//! (The packet and tap links run RC pingpong and perftest over the same
//! impairments in the tools' tests; this matrix needs neither root nor a
//! namespace.)

use std::time::Duration;
use uroce_stack::link::impair::{Faults, ImpairConfig};
use uroce_verbs::testing::{PairSpec, RcPair};
use uroce_verbs::*;

/// The longest one completion may take: far above seven retransmissions at
/// the default 67 ms ACK timeout.
const T: Duration = Duration::from_secs(20);
const SIZES: [usize; 6] = [0, 1, 4095, 4096, 4097, 65_536];
/// Messages of a cell, all posted before the first completion is awaited.
const MESSAGES: usize = 4;
const REGION: usize = MESSAGES * 65_536 + 8;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Send,
    Write,
    Read,
    FetchAdd,
    CmpSwap,
}

const OPS: [Op; 5] = [Op::Send, Op::Write, Op::Read, Op::FetchAdd, Op::CmpSwap];

struct Regions {
    /// Side a's: what it sends and writes, where READ results and atomics'
    /// original values land.
    local: Mr,
    /// Side b's: what a's WRITEs, READs and atomics name, and where its
    /// receives land.
    target: Mr,
}

fn open(same_host: bool, faults: Option<(Faults, Faults)>, seed: u64) -> (RcPair, Regions) {
    let impair_a = faults.map(|(tx, rx)| ImpairConfig { seed, tx, rx });
    let spec = PairSpec {
        impair_a,
        cq_depth: 64,
        max_wr: Some(16),
        same_host: Some(same_host),
        ..PairSpec::new(seed, Progress::Blocking)
    };
    let p = RcPair::open(&spec);
    let remote =
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    let local = p.pd_a.reg_mr(REGION, AccessFlags::LOCAL_WRITE).unwrap();
    let target = p.pd_b.reg_mr(REGION, remote).unwrap();
    (p, Regions { local, target })
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64).wrapping_mul(131).wrapping_add(seed.wrapping_mul(7919)) as u8 | 1).collect()
}

/// Waits for `wr_ids` on `cq`, in that order, each successful.
fn expect_in_order(cq: &Cq, wr_ids: impl Iterator<Item = u64>) -> Result<Vec<WorkCompletion>, String> {
    let mut got = Vec::new();
    for want in wr_ids {
        let wc = cq.wait_one(T).map_err(|e| format!("no completion for WR {want} within {T:?}: {e}"))?;
        if (wc.wr_id, wc.status) != (want, WcStatus::Success) {
            return Err(format!("wanted WR {want} successful, got {wc:?}"));
        }
        got.push(wc);
    }
    Ok(got)
}

/// One cell: `op` at `size` (atomics: 8 bytes), [`MESSAGES`] outstanding.
fn run_cell(p: &RcPair, r: &Regions, op: Op, size: usize, cell: u64) -> Result<(), String> {
    let first = cell * 100;
    let ids = || first..first + MESSAGES as u64;
    let at = |k: usize| k * size;
    match op {
        Op::Send | Op::Write => {
            for (k, id) in ids().enumerate() {
                r.local.write(at(k), &pattern(id, size));
            }
            for (k, id) in ids().enumerate() {
                let sge = vec![r.local.sge(at(k), size as u32)];
                let wr_op = match op {
                    Op::Send => {
                        let recv = RecvWr { wr_id: id, sg_list: r.target.sge(at(k), size as u32).into() };
                        p.b.post_recv(&recv).map_err(|e| e.to_string())?;
                        WrOp::Send
                    }
                    _ => WrOp::RdmaWrite { remote_addr: r.target.addr() + at(k) as u64, rkey: r.target.rkey() },
                };
                p.a.post_send(&SendWr::new(id, wr_op, sge)).map_err(|e| e.to_string())?;
            }
            expect_in_order(&p.cq_a, ids())?;
            if op == Op::Send {
                let wcs = expect_in_order(&p.cq_b, ids())?;
                if let Some(wc) = wcs.iter().find(|wc| wc.byte_len as usize != size) {
                    return Err(format!("a receive took {} bytes of a {size}-byte SEND", wc.byte_len));
                }
            }
            check(&r.target, size, ids(), "the target")
        }
        Op::Read => {
            for (k, id) in ids().enumerate() {
                r.target.write(at(k), &pattern(id, size));
            }
            for (k, id) in ids().enumerate() {
                let wr_op = WrOp::RdmaRead { remote_addr: r.target.addr() + at(k) as u64, rkey: r.target.rkey() };
                p.a.post_send(&SendWr::new(id, wr_op, vec![r.local.sge(at(k), size as u32)]))
                    .map_err(|e| e.to_string())?;
            }
            expect_in_order(&p.cq_a, ids())?;
            check(&r.local, size, ids(), "the READ results")
        }
        Op::FetchAdd | Op::CmpSwap => run_atomics(p, r, op, ids()),
    }
}

/// Checks that message `k` of `ids` lies at `k * size` of `mr`.
fn check(mr: &Mr, size: usize, ids: impl Iterator<Item = u64>, what: &str) -> Result<(), String> {
    for (k, id) in ids.enumerate() {
        let mut got = vec![0; size];
        mr.read(k * size, &mut got);
        if let Some(i) = got.iter().zip(pattern(id, size)).position(|(a, b)| *a != b) {
            return Err(format!("{what}: message {k} differs at byte {i}"));
        }
    }
    Ok(())
}

/// FETCH_ADDs of 1, 2, 3... or CMP_SWAPs each expecting the last one's
/// value, on one word of the target; the original values must follow.
fn run_atomics(p: &RcPair, r: &Regions, op: Op, ids: std::ops::Range<u64>) -> Result<(), String> {
    let word = REGION - 8;
    r.target.write(word, &0u64.to_ne_bytes());
    let mut value = 0u64;
    let mut wants = Vec::new();
    for (k, id) in ids.clone().enumerate() {
        let remote_addr = r.target.addr() + word as u64;
        let (wr_op, next) = match op {
            Op::FetchAdd => (WrOp::AtomicFetchAdd { remote_addr, rkey: r.target.rkey(), add: id }, value + id),
            _ => (WrOp::AtomicCmpSwp { remote_addr, rkey: r.target.rkey(), compare: value, swap: id }, id),
        };
        wants.push(value);
        value = next;
        p.a.post_send(&SendWr::new(id, wr_op, vec![r.local.sge(8 * k, 8)])).map_err(|e| e.to_string())?;
    }
    expect_in_order(&p.cq_a, ids)?;
    for (k, want) in wants.into_iter().enumerate() {
        let mut orig = [0u8; 8];
        r.local.read(8 * k, &mut orig);
        if u64::from_ne_bytes(orig) != want {
            return Err(format!("{op:?} {k}: original value {} where {want} was", u64::from_ne_bytes(orig)));
        }
    }
    let mut last = [0u8; 8];
    r.target.read(word, &mut last);
    match u64::from_ne_bytes(last) == value {
        true => Ok(()),
        false => Err(format!("{op:?}: the word holds {} after the last, not {value}", u64::from_ne_bytes(last))),
    }
}

/// Requests and responses repeated or put back in order: what each
/// impairment leaves in the counters of one end or the other.
fn recoveries(p: &RcPair) -> u64 {
    let (a, b) = (p.ctx_a.counters(), p.ctx_b.counters());
    a.get(Counter::CompleterRetryErr)
        + a.get(Counter::RcvdSeqErr)
        + b.get(Counter::OutOfSeqRequest)
        + b.get(Counter::DuplicateRequest)
}

/// Runs every cell on a pair whose side a has `faults` (transmit, receive).
fn run_matrix(name: &str, same_host: bool, faults: Option<(Faults, Faults)>) {
    let (p, r) = open(same_host, faults, 11);
    let mut failures = Vec::new();
    let mut cell = 0;
    for op in OPS {
        let sizes: &[usize] = if matches!(op, Op::FetchAdd | Op::CmpSwap) { &[8] } else { &SIZES };
        for &size in sizes {
            cell += 1;
            if let Err(e) = run_cell(&p, &r, op, size, cell) {
                failures.push(format!("{name}: {op:?} of {size} bytes: {e}"));
                // A failed cell may leave WRs behind: the rest would only repeat it.
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let (tx_same_host, tx) = (p.ctx_a.link_stats().tx_same_host, p.ctx_a.link_stats().tx_packets);
    match same_host {
        true => assert!(tx_same_host > 0, "{name}: nothing went through shared memory ({tx} packets sent)"),
        false => assert_eq!(tx_same_host, 0, "{name}: shm=0, yet packets went through shared memory"),
    }
    if faults.is_some() {
        assert!(recoveries(&p) > 0, "{name}: the impairment left no trace in the counters");
    }
    eprintln!("{name}: {cell} cells, {tx} packets sent by side a, {} recoveries", recoveries(&p));
}

fn delayed() -> Faults {
    Faults { reorder_delay: Duration::from_micros(300), ..Faults::default() }
}

fn loss() -> Option<(Faults, Faults)> {
    Some((Faults { loss: 0.05, ..delayed() }, Faults::default()))
}

fn duplication() -> Option<(Faults, Faults)> {
    Some((Faults { duplicate: 0.05, ..delayed() }, Faults::default()))
}

fn reordering() -> Option<(Faults, Faults)> {
    Some((Faults { reorder: 0.1, ..delayed() }, Faults::default()))
}

/// On receive: a flipped bit, caught by the ICRC check, as on the wire.
fn corruption() -> Option<(Faults, Faults)> {
    Some((Faults::default(), Faults { corrupt: 0.05, ..Faults::default() }))
}

fn all_at_once() -> Option<(Faults, Faults)> {
    let tx = Faults { loss: 0.02, duplicate: 0.02, reorder: 0.05, ..delayed() };
    Some((tx, Faults { corrupt: 0.02, ..Faults::default() }))
}

macro_rules! matrix {
    ($($test:ident: $same_host:expr, $faults:expr;)*) => {$(
        #[test]
        fn $test() {
            run_matrix(stringify!($test), $same_host, $faults);
        }
    )*};
}

matrix! {
    udp_clean: false, None;
    udp_loss: false, loss();
    udp_duplication: false, duplication();
    udp_reordering: false, reordering();
    udp_corruption: false, corruption();
    udp_all_at_once: false, all_at_once();
    same_host_clean: true, None;
    same_host_loss: true, loss();
    same_host_duplication: true, duplication();
    same_host_reordering: true, reordering();
    same_host_corruption: true, corruption();
    same_host_all_at_once: true, all_at_once();
}
