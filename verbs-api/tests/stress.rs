//! Eight threads post and poll on QPs and CQs that they share, on both ends
//! of two devices whose links lose, duplicate and reorder packets, for 60 s
//! (`UROCE_STRESS_SECS` to change it). Every WRITE is read back and must be
//! exact; every work request completes exactly once, successfully. A
//! watchdog fails the test, naming the stuck thread, instead of letting it hang.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use uroce_stack::link::impair::{Faults, ImpairConfig};
use uroce_verbs::testing::connect_pair;
use uroce_verbs::*;

const THREADS: usize = 8;
/// QP pairs; each QP is shared by two threads of its side.
const PAIRS: usize = 2;
/// WRITE + READ-back rounds a thread keeps going at once, each on its own slot.
const DEPTH: usize = 4;
const SLOT: usize = 3000;
/// The longest one operation may take before the thread gives up; well above
/// seven retransmissions at the 67 ms ACK timeout.
const OP_LIMIT: Duration = Duration::from_secs(30);

/// One device's half: its context, QPs, one CQ for all of them, and regions:
/// `target` for the peer's WRITEs and READs, `local` for our sources and
/// READ results. Slot `thread * DEPTH + k` of each belongs to one thread.
struct Side {
    ctx: Context,
    qps: Vec<Qp>,
    cq: Cq,
    target: Mr,
    local: Mr,
}

/// Completions any thread polled, by wr_id, for whichever thread posted them.
type Done = Arc<Mutex<HashMap<u64, WcStatus>>>;

fn stress_secs() -> u64 {
    std::env::var("UROCE_STRESS_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60)
}

fn sides(net: &TestNet) -> [Arc<Side>; 2] {
    let faults = Faults {
        loss: 0.005,
        duplicate: 0.01,
        reorder: 0.02,
        reorder_delay: Duration::from_micros(300),
        ..Faults::default()
    };
    let open = |host: u8| {
        let impair = Some(ImpairConfig { seed: u64::from(host), tx: faults, rx: Faults::default() });
        let opts = OpenOptions { progress: Progress::Blocking, impair, ..OpenOptions::default() };
        Device::open_with(&net.udp(host), &opts).unwrap()
    };
    let ctxs = [open(1), open(2)];
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let halves = ctxs.map(|ctx| {
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(4096, None).unwrap();
        let mut init = QpInit::rc(&cq, &cq);
        init.cap.max_send_wr = 256;
        let qps = (0..PAIRS).map(|_| pd.create_qp(&init).unwrap()).collect();
        let bytes = THREADS * DEPTH * SLOT;
        let (target, local) = (pd.reg_mr(bytes, access).unwrap(), pd.reg_mr(2 * bytes, access).unwrap());
        Side { ctx, qps, cq, target, local }
    });
    for i in 0..PAIRS {
        let (a, b) = (&halves[0].qps[i], &halves[1].qps[i]);
        connect_pair(a, b);
    }
    halves.map(Arc::new)
}

#[test]
fn eight_threads_on_shared_qps_and_cqs_under_loss_duplication_and_reordering() {
    let net = TestNet::new();
    let [a, b] = sides(&net);
    let done: Done = Arc::default();
    let stop_at = Instant::now() + Duration::from_secs(stress_secs());
    let failed = Arc::new(AtomicBool::new(false));
    let (finished_tx, finished_rx) = mpsc::channel();
    for t in 0..THREADS {
        let (mine, peer) = if t % 2 == 0 { (a.clone(), b.clone()) } else { (b.clone(), a.clone()) };
        let (done, failed, finished) = (done.clone(), failed.clone(), finished_tx.clone());
        thread::spawn(move || {
            let worker = Worker { t, mine, peer, done, failed: failed.clone() };
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker.run(stop_at)));
            if outcome.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            let _ = finished.send((t, outcome.map_err(|_| ())));
        });
    }
    // The watchdog: every thread must report within the run plus the time
    // its last operations may take.
    let deadline = stop_at + 2 * OP_LIMIT;
    let mut rounds = 0;
    let mut pending: Vec<usize> = (0..THREADS).collect();
    while !pending.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((t, outcome)) = finished_rx.recv_timeout(left) else {
            panic!("watchdog: threads {pending:?} neither finished nor failed within the run + {:?}", 2 * OP_LIMIT);
        };
        pending.retain(|&p| p != t);
        rounds += outcome.unwrap_or_else(|()| panic!("thread {t} failed (its panic is printed above)"));
    }
    assert!(rounds > 0, "no thread completed a round");
    let done = done.lock().unwrap();
    assert!(done.values().all(|&s| s == WcStatus::Success), "a completion failed");
    // The faults happened: both responders saw duplicates and gaps.
    for side in [&a, &b] {
        let counters = side.ctx.counters();
        let (dup, gap) = (counters.get(Counter::DuplicateRequest), counters.get(Counter::OutOfSeqRequest));
        assert!(dup > 0 && gap > 0, "the link did not impair: {dup} duplicates, {gap} out of sequence");
    }
    eprintln!("stress: {rounds} WRITE + READ rounds by {THREADS} threads, {} completions", done.len());
}

struct Worker {
    t: usize,
    mine: Arc<Side>,
    peer: Arc<Side>,
    done: Done,
    failed: Arc<AtomicBool>,
}

impl Worker {
    /// Rounds of: WRITE a fresh pattern to our slot in the peer's target,
    /// then READ it back into our local slot and compare. Returns how many.
    fn run(&self, stop_at: Instant) -> u64 {
        let qp = &self.mine.qps[(self.t / 2) % PAIRS];
        let mut rounds = 0u64;
        let mut seq = 0u64;
        while Instant::now() < stop_at && !self.failed.load(Ordering::Relaxed) {
            let writes: Vec<(usize, u64, Vec<u8>)> = (0..DEPTH)
                .map(|k| {
                    seq += 1;
                    let slot = self.t * DEPTH + k;
                    let pattern = pattern(self.t, seq);
                    self.mine.local.write(slot * SLOT, &pattern);
                    let op = WrOp::RdmaWrite {
                        remote_addr: self.peer.target.addr() + (slot * SLOT) as u64,
                        rkey: self.peer.target.rkey(),
                    };
                    let wr_id = self.wr_id(seq);
                    qp.post_send(&SendWr::new(wr_id, op, vec![self.mine.local.sge(slot * SLOT, SLOT as u32)])).unwrap();
                    (slot, wr_id, pattern)
                })
                .collect();
            self.await_all(writes.iter().map(|w| w.1));
            let reads: Vec<u64> = writes
                .iter()
                .map(|(slot, _, _)| {
                    seq += 1;
                    let back = (THREADS * DEPTH + slot) * SLOT;
                    let op = WrOp::RdmaRead {
                        remote_addr: self.peer.target.addr() + (slot * SLOT) as u64,
                        rkey: self.peer.target.rkey(),
                    };
                    let wr_id = self.wr_id(seq);
                    qp.post_send(&SendWr::new(wr_id, op, vec![self.mine.local.sge(back, SLOT as u32)])).unwrap();
                    wr_id
                })
                .collect();
            self.await_all(reads.into_iter());
            for (slot, _, pattern) in &writes {
                let mut back = vec![0; SLOT];
                self.mine.local.read((THREADS * DEPTH + slot) * SLOT, &mut back);
                assert!(&back == pattern, "thread {}: slot {slot} read back other bytes than written", self.t);
            }
            rounds += 1;
        }
        rounds
    }

    fn wr_id(&self, seq: u64) -> u64 {
        ((self.t as u64) << 48) | seq
    }

    /// Polls the shared CQ, filing what it finds for whoever posted it, until
    /// each of `ids` has completed.
    fn await_all(&self, ids: impl Iterator<Item = u64>) {
        let ids: Vec<u64> = ids.collect();
        let deadline = Instant::now() + OP_LIMIT;
        let mut wcs = [WorkCompletion::default(); 16];
        loop {
            let n = self.mine.cq.poll(&mut wcs);
            if n > 0 {
                let mut done = self.done.lock().unwrap();
                for wc in &wcs[..n] {
                    let again = done.insert(wc.wr_id, wc.status);
                    assert!(again.is_none(), "wr_id {:#x} completed twice", wc.wr_id);
                    assert_eq!(wc.status, WcStatus::Success, "wr_id {:#x}: {wc:?}", wc.wr_id);
                }
            }
            if ids.iter().all(|id| self.done.lock().unwrap().contains_key(id)) {
                return;
            }
            assert!(Instant::now() < deadline, "thread {}: no completion for {ids:x?} in {OP_LIMIT:?}", self.t);
            assert!(!self.failed.load(Ordering::Relaxed), "another thread failed");
            thread::yield_now();
        }
    }
}

/// Bytes that differ from every other (thread, seq)'s in most places.
fn pattern(t: usize, seq: u64) -> Vec<u8> {
    let key = (seq ^ ((t as u64) << 40)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..SLOT).map(|i| ((i as u64).wrapping_mul(31) ^ (key >> ((i % 8) * 8))) as u8).collect()
}
