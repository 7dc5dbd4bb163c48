//! Which QP sends next (`engine/sched.rs`): a whole message per turn, the
//! turns round robin over the QPs with something to send, and a destroyed
//! QP's turn gone with it. Thousands of
//! QPs active at once cost the scheduler no search (a queue with marks in
//! each QP); this checks that they are all served, each message whole.

use core::time::Duration;
use uroce_transport::engine::{AccessFlags, Engine, Mtu, QpType, SendWr, Sge, WrOp};
use uroce_transport::sim::probe::{drain_transmits, record};
use uroce_transport::sim::{connect, create_endpoint, Endpoint, LinkConfig, QpOptions, Sim};

const MTU: usize = 1024;

/// `qps` connected RC QP pairs, each requester with `messages` WRITEs of
/// `packets` MTU-sized packets posted; nothing delivered yet.
fn posted(qps: usize, messages: usize, packets: usize) -> (Sim, Vec<(Endpoint, Endpoint)>) {
    let mut sim = Sim::new(5, LinkConfig::clean());
    let o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let len = messages * packets * MTU;
    let mut pairs = Vec::new();
    for _ in 0..qps {
        let a = create_endpoint(&mut sim.engines[0], &o, None, None);
        let b = create_endpoint(&mut sim.engines[1], &o, None, None);
        connect(&mut sim, &a, &b, &o);
        let src = sim.engines[0].reg_mr(a.pd, 0x1000, Box::new(vec![7; len]), access).unwrap();
        let dst = sim.engines[1].reg_mr(b.pd, 0x2000, Box::new(vec![0; len]), access).unwrap();
        for m in 0..messages {
            let at = (m * packets * MTU) as u64;
            let op = WrOp::RdmaWrite { remote_addr: 0x2000 + at, rkey: dst.rkey };
            let sge = Sge { addr: 0x1000 + at, length: (packets * MTU) as u32, lkey: src.lkey };
            sim.engines[0].post_send(a.qpn, SendWr::new(m as u64, op, vec![sge])).unwrap();
        }
        pairs.push((a, b));
    }
    (sim, pairs)
}

/// The sending QP of each packet `e` has to send now, in order.
fn senders(e: &mut Engine) -> Vec<u32> {
    drain_transmits(e).into_iter().map(|(tx, _)| tx.qpn).collect()
}

#[test]
fn each_turn_is_a_whole_message_and_the_turns_go_round() {
    let (qps, messages, packets) = (3, 3, 3);
    let (mut sim, _pairs) = posted(qps, messages, packets);
    let sent = senders(&mut sim.engines[0]);
    assert_eq!(sent.len(), qps * messages * packets, "{sent:x?}");
    let turns: Vec<&[u32]> = sent.chunks(packets).collect();
    for t in &turns {
        assert!(t.iter().all(|&q| q == t[0]), "a message interrupted by another QP's: {sent:x?}");
    }
    // Round robin: any `qps` turns in a row are `qps` different QPs.
    for w in turns.windows(qps) {
        let mut who: Vec<u32> = w.iter().map(|t| t[0]).collect();
        who.sort_unstable();
        who.dedup();
        assert_eq!(who.len(), qps, "a QP took a second turn before another's first: {sent:x?}");
    }
}

#[test]
fn thousands_of_active_qps_are_each_served_whole() {
    let (qps, packets) = (2000, 2);
    let (mut sim, pairs) = posted(qps, 1, packets);
    let budget = sim.engines[0].config().max_inflight_psns as usize;
    assert!(budget < qps * packets, "the budget would park no QP: the test would test less");
    let log = record(&mut sim);
    let all_sent = |sim: &mut Sim| sim.engines[0].inflight_psns() == 0 && log.lock().unwrap().len() >= 2 * qps;
    assert!(sim.run_until(1_000_000, Duration::from_secs(10), all_sent), "not every message went");
    // The requests as the responders received them, by receiving QP.
    let got: Vec<u32> = log.lock().unwrap().iter().filter(|(to, _)| *to == 1).map(|(_, r)| r.bth.dest_qp).collect();
    assert_eq!(got.len(), qps * packets, "each message once, none again");
    for t in got.chunks(packets) {
        assert!(t.iter().all(|&q| q == t[0]), "a message split: {t:x?}");
    }
    let mut served: Vec<u32> = got.chunks(packets).map(|t| t[0]).collect();
    served.sort_unstable();
    let mut want: Vec<u32> = pairs.iter().map(|(_, b)| b.qpn).collect();
    want.sort_unstable();
    assert_eq!(served, want, "every QP once, the budget's parked ones too");
}

#[test]
fn a_destroyed_qp_loses_its_turn_and_the_others_keep_theirs() {
    let (mut sim, pairs) = posted(4, 2, 2);
    let gone = pairs[1].0.qpn;
    sim.engines[0].destroy_qp(gone).unwrap();
    let sent = senders(&mut sim.engines[0]);
    assert!(!sent.contains(&gone), "the destroyed QP sent: {sent:x?}");
    assert_eq!(sent.len(), 3 * 2 * 2, "{sent:x?}");
}
