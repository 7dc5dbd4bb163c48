//! Many RC QPs streaming at once under the engine's budget of unacknowledged
//! PSNs (`EngineConfig::max_inflight_psns`): the budget holds, and no QP
//! waits for its retransmit timer (the packet that fills the budget asks
//! for an ACK; a QP sends a whole message before the next QP's turn).

use core::time::Duration;
use uroce_transport::engine::{
    AccessFlags, Counter, Engine, EngineConfig, Mtu, QpType, SendFlags, SendWr, Sge, WcStatus, WrOp,
};
use uroce_transport::sim::{connect, create_endpoint, Endpoint, LinkConfig, QpOptions, Sim};

const QPS: usize = 32;
const BUDGET: u32 = 40;
const WRITES: usize = 4;
const WRITE_LEN: u32 = 8192;
const READ_LEN: u32 = 4096;

#[test]
fn many_qps_stream_within_the_budget_without_timeouts() {
    let mut sim = Sim::new(11, LinkConfig::clean());
    for e in &mut sim.engines {
        *e = Engine::new(EngineConfig { max_inflight_psns: BUDGET, ..*e.config() });
    }
    let mut o = QpOptions::new(QpType::Rc, Mtu::Mtu1024);
    o.timeout = 14; // 67 ms: a QP that waited for it shows in the virtual time
    o.max_rd_atomic = 1;
    o.max_dest_rd_atomic = 1;
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let mut pairs: Vec<(Endpoint, Endpoint)> = Vec::new();
    for _ in 0..QPS {
        let a = create_endpoint(&mut sim.engines[0], &o, None, None);
        let b = create_endpoint(&mut sim.engines[1], &o, None, None);
        connect(&mut sim, &a, &b, &o);
        pairs.push((a, b));
    }
    let len = WRITES * WRITE_LEN as usize + READ_LEN as usize;
    let mut wrs = 0;
    for (i, (a, b)) in pairs.iter().enumerate() {
        let fill = (i + 1) as u8;
        let src = sim.engines[0].reg_mr(a.pd, 0x10_0000, Box::new(vec![fill; len]), access).unwrap();
        let dst = sim.engines[1].reg_mr(b.pd, 0x20_0000, Box::new(vec![0; len]), access).unwrap();
        for w in 0..WRITES {
            let at = w as u64 * u64::from(WRITE_LEN);
            let op = WrOp::RdmaWrite { remote_addr: 0x20_0000 + at, rkey: dst.rkey };
            let sge = Sge { addr: 0x10_0000 + at, length: WRITE_LEN, lkey: src.lkey };
            let mut wr = SendWr::new(wrs, op, vec![sge]);
            wr.flags = SendFlags::SIGNALED;
            sim.engines[0].post_send(a.qpn, wr).unwrap();
            wrs += 1;
        }
        // A READ of what the first WRITE put there, into the tail of the source.
        let op = WrOp::RdmaRead { remote_addr: 0x20_0000, rkey: dst.rkey };
        let sge = Sge { addr: 0x10_0000 + (WRITES as u64) * u64::from(WRITE_LEN), length: READ_LEN, lkey: src.lkey };
        let mut wr = SendWr::new(wrs, op, vec![sge]);
        wr.flags = SendFlags::SIGNALED;
        sim.engines[0].post_send(a.qpn, wr).unwrap();
        wrs += 1;
    }
    let mut done = 0u64;
    let mut peak = 0;
    let reached = sim.run_until(1_000_000, Duration::from_secs(5), |sim| {
        peak = peak.max(sim.engines[0].inflight_psns());
        for (a, _) in &pairs {
            while let Some(wc) = sim.engines[0].poll_cq(a.send_cq) {
                assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
                done += 1;
            }
        }
        done == wrs
    });
    assert!(reached, "{done} of {wrs} WRs completed");
    // A READ reserves all its response PSNs at once: at most 3 past the budget.
    let read_pkts = READ_LEN / 1024;
    assert!(peak < BUDGET + read_pkts, "peak {peak} PSNs in flight, budget {BUDGET}");
    assert!(peak >= BUDGET - 1, "the budget was never reached (peak {peak}): the test tests nothing");
    assert_eq!(sim.engines[0].counters().get(Counter::CompleterRetryErr), 0, "a go-back-N retry");
    let elapsed = sim.now.as_nanos();
    assert!(elapsed < 20_000_000, "{elapsed} ns of virtual time: some QP waited for its timer");
    assert_eq!(sim.engines[0].inflight_psns(), 0);
}
