//! Memory the application owns, registered by pointer as `ibv_reg_mr` takes
//! it: a peer WRITEs, READs and runs atomics on it; a thread spinning on a
//! WRITE's last byte sees the whole message; deregistering during traffic
//! gives the peer a remote access error and no write lands afterwards.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use uroce_stack::link::impair::{Faults, ImpairConfig};
use uroce_verbs::testing::{PairSpec, RcPair};
use uroce_verbs::*;

const T: Duration = Duration::from_secs(20);

/// Side a's link may lose, duplicate or reorder (`impair`); side b's is clean.
fn pair(impair: Option<ImpairConfig>) -> RcPair {
    let spec = PairSpec { impair_a: impair, cq_depth: 256, max_wr: Some(128), ..PairSpec::new(7, Progress::Blocking) };
    RcPair::open(&spec)
}

fn remote() -> AccessFlags {
    AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC
}

fn expect_success(cq: &Cq, wr_id: u64) {
    let wc = cq.wait_one(T).unwrap();
    assert_eq!((wc.wr_id, wc.status), (wr_id, WcStatus::Success), "{wc:?}");
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64).wrapping_mul(31).wrapping_add(seed * 7) as u8).collect()
}

#[test]
fn a_peer_writes_reads_and_runs_atomics_on_memory_the_test_owns() {
    let p = pair(None);
    let target = AppBuffer::new(3 * 4096);
    // Peers name the memory by an I/O virtual address of the test's choosing
    // (ibv_reg_mr_iova), not the pointer.
    let iova = 0x5a00_0000_0000;
    let mr_b = p.pd_b.reg_user_mr(target.region(), iova, remote()).unwrap();
    assert_eq!((mr_b.addr(), mr_b.len()), (iova, 3 * 4096));
    let local = p.pd_a.reg_mr(8192, AccessFlags::LOCAL_WRITE).unwrap();

    let message = pattern(1, 5000);
    local.write(0, &message);
    let write = WrOp::RdmaWrite { remote_addr: iova + 100, rkey: mr_b.rkey() };
    p.a.post_send(&SendWr::new(1, write, vec![local.sge(0, 5000)])).unwrap();
    expect_success(&p.cq_a, 1);
    let mut landed = vec![0; 5000];
    target.read(100, &mut landed);
    assert!(landed == message, "the WRITE's bytes differ in the test's own memory");
    assert_eq!(target.load_acquire(99), 0, "a byte before the WRITE changed");
    assert_eq!(target.load_acquire(5100), 0, "a byte after the WRITE changed");

    target.write(6000, &pattern(2, 3000));
    let read = WrOp::RdmaRead { remote_addr: iova + 6000, rkey: mr_b.rkey() };
    p.a.post_send(&SendWr::new(2, read, vec![local.sge(4096, 3000)])).unwrap();
    expect_success(&p.cq_a, 2);
    let mut got = vec![0; 3000];
    local.read(4096, &mut got);
    assert!(got == pattern(2, 3000), "the READ returned other bytes than the test's memory holds");

    let word = iova + 3 * 4096 - 8;
    let add = WrOp::AtomicFetchAdd { remote_addr: word, rkey: mr_b.rkey(), add: 40 };
    p.a.post_send(&SendWr::new(3, add, vec![local.sge(0, 8)])).unwrap();
    expect_success(&p.cq_a, 3);
    let swap = WrOp::AtomicCmpSwp { remote_addr: word, rkey: mr_b.rkey(), compare: 40, swap: 0xfeed };
    p.a.post_send(&SendWr::new(4, swap, vec![local.sge(8, 8)])).unwrap();
    expect_success(&p.cq_a, 4);
    assert_eq!(target.load_u64(3 * 4096 - 8), 0xfeed);
    let mut orig = [0u8; 16];
    local.read(0, &mut orig);
    assert_eq!(u64::from_ne_bytes(orig[..8].try_into().unwrap()), 0, "FETCH_ADD's original value");
    assert_eq!(u64::from_ne_bytes(orig[8..].try_into().unwrap()), 40, "CMP_SWAP's original value");
}

/// perftest's write_lat waits for a WRITE by spinning on the last byte of its
/// buffer; every byte before it must be there when it changes. The link
/// drops and reorders packets, so messages arrive out of order and are
/// retransmitted: placement must still be in order, last byte last.
#[test]
fn a_thread_spinning_on_the_last_byte_sees_the_whole_write() {
    const LEN: usize = 20 * 1024;
    const ROUNDS: u64 = 60;
    let faults = Faults { loss: 0.02, reorder: 0.1, reorder_delay: Duration::from_micros(200), ..Faults::default() };
    let p = pair(Some(ImpairConfig { seed: 3, tx: faults, rx: Faults::default() }));
    let target = AppBuffer::new(LEN);
    let mr_b = p.pd_b.reg_user_mr(target.region(), target.as_ptr() as u64, remote()).unwrap();
    let local = p.pd_a.reg_mr(LEN, AccessFlags::LOCAL_WRITE).unwrap();

    let (seen_tx, seen_rx) = mpsc::channel::<Result<u64, String>>();
    let spinner = {
        let target = Arc::clone(&target);
        thread::spawn(move || {
            for round in 1..=ROUNDS {
                let deadline = Instant::now() + T;
                while target.load_acquire(LEN - 1) != marker(round) {
                    if Instant::now() > deadline {
                        let _ = seen_tx.send(Err(format!("round {round}: the last byte never changed")));
                        return;
                    }
                    std::hint::spin_loop();
                }
                // The bytes next to the last one first: they are the last
                // packet's, the ones a wrong order would still be copying.
                let mut whole = vec![0; LEN];
                target.read(LEN - 64, &mut whole[LEN - 64..]);
                target.read(0, &mut whole[..LEN - 64]);
                let want = message(round, LEN);
                let verdict = match whole.iter().zip(&want).position(|(a, b)| a != b) {
                    None => Ok(round),
                    Some(i) => Err(format!("round {round}: byte {i} not yet written when the last byte was")),
                };
                let failed = verdict.is_err();
                let _ = seen_tx.send(verdict);
                if failed {
                    return;
                }
            }
        })
    };
    for round in 1..=ROUNDS {
        local.write(0, &message(round, LEN));
        let write = WrOp::RdmaWrite { remote_addr: mr_b.addr(), rkey: mr_b.rkey() };
        p.a.post_send(&SendWr::new(round, write, vec![local.sge(0, LEN as u32)])).unwrap();
        assert_eq!(seen_rx.recv_timeout(T + T).expect("the spinner answers"), Ok(round));
        expect_success(&p.cq_a, round);
    }
    spinner.join().unwrap();
}

/// The message of `round`: every byte differs from the previous round's, and
/// the last is the round's marker.
fn message(round: u64, len: usize) -> Vec<u8> {
    let mut m = pattern(round, len);
    m[len - 1] = marker(round);
    m
}

fn marker(round: u64) -> u8 {
    (round % 250) as u8 + 1
}

/// A stream of WRITEs, each with other bytes, runs into a region that is
/// deregistered under it: the stream ends with a remote access error, and
/// the memory does not change after `deregister` returned.
#[test]
fn deregistering_during_traffic_gives_the_peer_a_remote_access_error() {
    const LEN: usize = 4096;
    let p = pair(None);
    let target = AppBuffer::new(LEN);
    let mr_b = p.pd_b.reg_user_mr(target.region(), target.as_ptr() as u64, remote()).unwrap();
    let local = p.pd_a.reg_mr(64 * LEN, AccessFlags::LOCAL_WRITE).unwrap();
    for slot in 0..64 {
        local.write(slot * LEN, &pattern(slot as u64 + 10, LEN));
    }
    let (rkey, addr) = (mr_b.rkey(), mr_b.addr());
    let (qp, cq, local2) = (p.a.clone(), p.cq_a.clone(), local.clone());
    let (started_tx, started_rx) = mpsc::channel();
    let writer = thread::spawn(move || stream_writes(&qp, &cq, &local2, rkey, addr, started_tx));

    // Let the stream run, then pull the memory from under it.
    started_rx.recv_timeout(T).expect("the first WRITEs complete");
    mr_b.deregister().unwrap();
    let after = target.to_vec();
    let first_error = writer.join().unwrap();
    assert_eq!(first_error, WcStatus::RemAccessErr, "the peer's first failed WRITE");
    thread::sleep(Duration::from_millis(50));
    assert!(target.to_vec() == after, "a WRITE landed after deregister returned");
    assert!(mr_b.deregister().is_ok(), "a second deregister is a no-op");
}

/// Posts 4 KiB WRITEs, up to 32 at a time, until one fails; returns its
/// status. Says on `started` once 64 have succeeded.
fn stream_writes(qp: &Qp, cq: &Cq, local: &Mr, rkey: u32, addr: u64, started: mpsc::Sender<()>) -> WcStatus {
    let deadline = Instant::now() + T;
    let (mut posted, mut done) = (0u64, 0u64);
    let mut wcs = [WorkCompletion::default(); 32];
    while Instant::now() < deadline && posted < 1_000_000 {
        while posted - done < 32 {
            let slot = (posted % 64) as usize;
            let write = WrOp::RdmaWrite { remote_addr: addr, rkey };
            if qp.post_send(&SendWr::new(posted, write, vec![local.sge(slot * 4096, 4096)])).is_err() {
                break;
            }
            posted += 1;
        }
        let n = cq.poll(&mut wcs);
        for wc in &wcs[..n] {
            if wc.status != WcStatus::Success {
                return wc.status;
            }
            done += 1;
            if done == 64 {
                let _ = started.send(());
            }
        }
    }
    panic!("no WRITE failed within {T:?} ({done} of {posted} succeeded)");
}
