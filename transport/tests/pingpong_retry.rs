//! ibv_rc_pingpong's traffic in the simulator (`uroce_transport::sim::pingpong`,
//! which also explains the retry model and its measured numbers): under 5%
//! loss and 5% reordering the retries are never exhausted, a silent peer is
//! given eight timeouts, and NAKs that acknowledge refill the retry budget.

use core::time::Duration;
use std::sync::{Arc, Mutex};
use uroce_transport::engine::{AccessFlags, Counter, Mtu, QpType, RecvWr, SendWr, Sge, WcStatus, WrOp};
use uroce_transport::sim::pingpong::{self, impaired_link, PingPong};
use uroce_transport::sim::probe::parse;
use uroce_transport::sim::{LinkConfig, Pair, QpOptions};

#[test]
fn pingpong_under_loss_and_reorder_never_exhausts_the_retries() {
    for (name, l, seeds) in [
        ("loss and reorder", impaired_link(0.05, 0.05), 60),
        ("loss", impaired_link(0.05, 0.0), 20),
        ("reorder", impaired_link(0.0, 0.05), 20),
    ] {
        let (mut sum, mut msgs, mut most) = (0u64, 0usize, 0u64);
        for seed in 0..seeds {
            let pp = pingpong::run(seed, l, 100, 7);
            assert_eq!(pp.failed, None, "{name}, seed {seed}: failed after {} exchanges", pp.sends[0]);
            assert_eq!(pp.per_msg.len(), 200, "{name}, seed {seed}");
            sum += pp.per_msg.iter().sum::<u64>();
            msgs += pp.per_msg.len();
            most = most.max(pp.retry_stats().1);
        }
        let mean = sum as f64 / msgs as f64;
        // About a third of the messages meet an impairment; few need more
        // than two rounds (see the model in sim::pingpong).
        let (lo, hi) = match name {
            "loss and reorder" => (0.3, 0.55),
            "loss" => (0.2, 0.4),
            _ => (0.1, 0.25),
        };
        assert!((lo..hi).contains(&mean), "{name}: {mean:.3} retries per message");
        assert!(most <= 6, "{name}: a message took {most} retries");
    }
}

/// Node 1 goes silent (takes in nothing, as an end whose thread is not
/// scheduled) right after its 10th send completed, while node 0's next
/// message is on its way; it runs again once node 0 has retried `retries`
/// times (or failed), taking in at once all that reached it meanwhile.
/// Returns the run and how long node 1 was silent.
fn silent_peer(retries: u64) -> (PingPong, Duration) {
    let mut pp = PingPong::new(1, LinkConfig::clean(), 20, 7);
    let held: Arc<Mutex<Option<Vec<Vec<u8>>>>> = Arc::new(Mutex::new(None));
    let h = held.clone();
    pp.sim.drop_if = Some(Box::new(move |to, data| match h.lock().unwrap().as_mut() {
        Some(backlog) if to == 1 => {
            backlog.push(data.to_vec());
            true
        }
        _ => false,
    }));
    let mut silent = None;
    let mut silent_for = Duration::ZERO;
    loop {
        let sent = pp.poll();
        if sent[1] && pp.sends[1] == 10 {
            *held.lock().unwrap() = Some(Vec::new());
            silent = Some((pp.sim.now, pp.retries(0)));
        }
        if let Some((since, base)) = silent {
            if pp.failed.is_some() || pp.retries(0) - base >= retries {
                silent = None;
                silent_for = pp.sim.now - since;
                let backlog = held.lock().unwrap().take().unwrap();
                assert!(backlog.len() >= 4, "node 0's message reached node 1 before it went silent");
                for p in backlog {
                    pp.sim.inject(1, &p);
                }
                continue;
            }
        }
        if pp.finished() {
            return (pp, silent_for);
        }
        assert!(pp.sim.step(), "nothing left to happen before the end");
    }
}

/// Within 100 us: node 0's timer started when its first packet left, a few
/// microseconds before node 1 went silent.
fn near(d: Duration, want: Duration) -> bool {
    d.abs_diff(want) < Duration::from_micros(100)
}

#[test]
fn a_silent_peer_is_given_eight_timeouts() {
    let timeout = Duration::from_nanos(4096 << 14);
    // Silent through 7 timeouts: the 7th retransmission finds it awake.
    let (pp, silent_for) = silent_peer(7);
    assert_eq!(pp.failed, None);
    assert_eq!((pp.sends, pp.recvs), ([20; 2], [20; 2]));
    assert!(near(silent_for, 7 * timeout), "{silent_for:?}");
    // Node 0's 11th message took all 7 retries (the per_msg list interleaves
    // the nodes, so look for it rather than index it).
    assert_eq!(pp.per_msg.iter().filter(|&&r| r == 7).count(), 1, "{:?}", pp.per_msg);
    // Silent for longer: the 8th timeout fails the send (retry_cnt 7 is not
    // infinite), 8 timeouts after the first transmission.
    let (pp, silent_for) = silent_peer(u64::MAX);
    assert_eq!(pp.failed, Some((0, WcStatus::RetryExcErr)));
    assert_eq!(pp.sends[0], 10);
    assert!(near(silent_for, 8 * timeout), "{silent_for:?}");
    assert_eq!(pp.sim.engines[0].counters().get(Counter::RetryExceededErr), 1);
}

/// Progress refills the budget, and a PSN sequence NAK is progress: one
/// 10-packet SEND under retry_cnt 1 whose round k loses its packet k (k = 1..8)
/// takes 8 retries, each NAKed at the lost packet, which acknowledges the
/// ones before it; each round starts at the NAKed packet.
#[test]
fn naks_that_acknowledge_refill_the_retry_budget() {
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.timeout = 14;
    o.retry_cnt = 1;
    let mut p = Pair::new(3, &o);
    let len = 10 * 1024;
    let src = p.reg_mr(0, 0, vec![7u8; len], AccessFlags::LOCAL_WRITE);
    let dst = p.reg_mr(1, 0, vec![0u8; len], AccessFlags::LOCAL_WRITE);
    let Pair { mut sim, a, b, .. } = p;
    let sge = |lkey| vec![Sge { addr: 0, length: len as u32, lkey }];
    sim.engines[1].post_recv(b.qpn, RecvWr { wr_id: 1, sg_list: sge(dst).into() }).unwrap();
    sim.engines[0].post_send(a.qpn, SendWr::new(2, WrOp::Send, sge(src))).unwrap();
    // Data packets seen per PSN offset; the first PSN is the first seen.
    let sent = Arc::new(Mutex::new((None, [0u32; 10])));
    let s = sent.clone();
    sim.drop_if = Some(Box::new(move |to, data| {
        if to != 1 {
            return false;
        }
        let psn = parse(data).bth.psn;
        let mut s = s.lock().unwrap();
        let first = *s.0.get_or_insert(psn);
        let k = (psn - first) as usize;
        s.1[k] += 1;
        (1..=8).contains(&k) && s.1[k] == k as u32
    }));
    let done = sim.run_until(10_000, Duration::from_secs(10), |s| s.engines[0].cq_len(a.send_cq) > 0);
    assert!(done);
    let wc = sim.engines[0].poll_cq(a.send_cq).unwrap();
    assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
    let c = sim.engines[0].counters();
    assert_eq!((c.get(Counter::CompleterRetryErr), c.get(Counter::RcvdSeqErr)), (8, 8));
    // Round 1 sends the 10 packets, round k + 1 those from packet k on.
    assert_eq!(sent.lock().unwrap().1, [1, 2, 3, 4, 5, 6, 7, 8, 9, 9]);
}
