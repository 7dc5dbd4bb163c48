//! Mixed traffic on one RC QP pair under every impairment at once: random
//! SENDs, WRITEs (with and without immediate), READs, atomics, ATOMIC_WRITEs
//! and FLUSHes of random sizes, some fenced, some unsignaled, both
//! directions at once. The matrix runs one operation per cell; here the
//! completer must keep them apart: every WR completes once, in order, with
//! success, and every byte lands where it should.

use core::time::Duration;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use uroce_transport::engine::{
    AccessFlags, Mtu, QpType, RecvWr, SendFlags, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion, WrOp,
};
use uroce_transport::sim::{LinkConfig, Pair, QpOptions};

const REGION: usize = 1 << 20;
const ACCESS: AccessFlags = AccessFlags(
    AccessFlags::LOCAL_WRITE.0
        | AccessFlags::REMOTE_WRITE.0
        | AccessFlags::REMOTE_READ.0
        | AccessFlags::REMOTE_ATOMIC.0
        | AccessFlags::FLUSH_GLOBAL.0,
);

/// What a WR of node `from` is expected to do, checked at the end.
enum Expect {
    /// `len` bytes from `from`'s source at `src` land at the peer's target at `dst`.
    Bytes {
        src: usize,
        dst: usize,
        len: usize,
        into_recv: bool,
    },
    /// `len` bytes of the peer's source at `src` land in `from`'s target at `dst`.
    Read {
        src: usize,
        dst: usize,
        len: usize,
    },
    Nothing,
}

fn pattern(node: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + node * 101) % 253) as u8).collect()
}

fn run(seed: u64, wrs: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let link = LinkConfig {
        loss: 0.05,
        duplicate: 0.03,
        reorder: 0.05,
        corrupt: 0.01,
        reorder_delay: Duration::from_micros(25),
        ..LinkConfig::clean()
    };
    let mtu = [Mtu::Mtu256, Mtu::Mtu1024, Mtu::Mtu4096][rng.gen_range(0..3)];
    let mut o = QpOptions::new(QpType::Rc, mtu);
    o.max_rd_atomic = rng.gen_range(1..=4);
    o.max_dest_rd_atomic = 4;
    o.timeout = 8;
    o.cap.max_send_wr = 4096;
    o.cap.max_recv_wr = 4096;
    let mut p = Pair::with_link(seed, link, &o);
    // Per node: a source region (a pattern) and a target region (zeros).
    let src = [0, 1].map(|n| p.reg_mr(n, 0x100_0000, pattern(n, REGION), ACCESS));
    let dst = [0, 1].map(|n| p.reg_mr(n, 0x200_0000, vec![0u8; REGION], ACCESS));
    let Pair { mut sim, a, b, .. } = p;
    let ends = [a, b];
    let max = 3 * mtu.bytes() as usize + 1;
    // Target space is handed out in order so nothing overlaps.
    let mut next_dst = [0usize; 2];
    let mut take = |n: usize, len: usize| {
        let at = next_dst[n];
        next_dst[n] += len.div_ceil(8) * 8 + 8;
        assert!(next_dst[n] <= REGION - 64, "the test ran out of target space");
        at
    };
    let mut expects: [Vec<(u64, WcOpcode, Expect)>; 2] = [Vec::new(), Vec::new()];
    let mut counters_expected = [0u64; 2];
    for i in 0..wrs {
        let from = rng.gen_range(0..2);
        let to = 1 - from;
        let len = if rng.gen_bool(0.1) { 0 } else { rng.gen_range(1..max) };
        let s = rng.gen_range(0..REGION - max);
        let wr_id = i as u64;
        let local = |key: u32, at: usize, len: usize| match len {
            0 => vec![],
            _ => vec![Sge {
                addr: if key == src[from] { 0x100_0000 } else { 0x200_0000 } + at as u64,
                length: len as u32,
                lkey: key,
            }],
        };
        let (op, sg_list, expect, opcode) = match rng.gen_range(0..9) {
            0..=1 => {
                let d = take(to, len);
                let rsge = Sge { addr: 0x200_0000 + d as u64, length: len as u32, lkey: dst[to] };
                sim.engines[to].post_recv(ends[to].qpn, RecvWr { wr_id, sg_list: rsge.into() }).unwrap();
                let op = if rng.gen() { WrOp::Send } else { WrOp::SendWithImm { imm: i as u32 } };
                (op, local(src[from], s, len), Expect::Bytes { src: s, dst: d, len, into_recv: true }, WcOpcode::Send)
            }
            2..=3 => {
                let d = take(to, len);
                let op = WrOp::RdmaWrite { remote_addr: 0x200_0000 + d as u64, rkey: dst[to] };
                let e = Expect::Bytes { src: s, dst: d, len, into_recv: false };
                (op, local(src[from], s, len), e, WcOpcode::RdmaWrite)
            }
            4 => {
                let d = take(to, len);
                sim.engines[to].post_recv(ends[to].qpn, RecvWr { wr_id, sg_list: vec![].into() }).unwrap();
                let op = WrOp::RdmaWriteWithImm { remote_addr: 0x200_0000 + d as u64, rkey: dst[to], imm: i as u32 };
                let e = Expect::Bytes { src: s, dst: d, len, into_recv: true };
                (op, local(src[from], s, len), e, WcOpcode::RdmaWrite)
            }
            5..=6 => {
                // The local SGE of a READ is where the data goes.
                let d = take(from, len);
                let op = WrOp::RdmaRead { remote_addr: 0x100_0000 + s as u64, rkey: src[to] };
                (op, local(dst[from], d, len), Expect::Read { src: s, dst: d, len }, WcOpcode::RdmaRead)
            }
            7 => {
                // The peer keeps a counter in the last word of its target.
                counters_expected[to] += 3;
                let d = take(from, 8);
                let op = WrOp::AtomicFetchAdd { remote_addr: 0x200_0000 + (REGION - 8) as u64, rkey: dst[to], add: 3 };
                (op, local(dst[from], d, 8), Expect::Nothing, WcOpcode::FetchAdd)
            }
            _ => {
                let op = if rng.gen() {
                    WrOp::Flush {
                        remote_addr: 0x200_0000,
                        rkey: dst[to],
                        len: 4096,
                        placement: 1,
                        whole_region: rng.gen(),
                    }
                } else {
                    WrOp::AtomicWrite { remote_addr: 0x200_0000 + (REGION - 16) as u64, rkey: dst[to], data: [7; 8] }
                };
                let opcode = if op.is_flush() { WcOpcode::Flush } else { WcOpcode::AtomicWrite };
                (op, vec![], Expect::Nothing, opcode)
            }
        };
        let mut wr = SendWr::new(wr_id, op, sg_list);
        if rng.gen_bool(0.1) {
            wr.flags |= SendFlags::FENCE;
        }
        if rng.gen_bool(0.3) {
            wr.flags = wr.flags & !SendFlags::SIGNALED;
        }
        let signaled = wr.flags.contains(SendFlags::SIGNALED);
        sim.engines[from].post_send(ends[from].qpn, wr).unwrap();
        if signaled {
            expects[from].push((wr_id, opcode, expect));
        } else {
            expects[from].push((u64::MAX, opcode, expect));
        }
    }
    let want: [usize; 2] = [0, 1].map(|n| expects[n].iter().filter(|e| e.0 != u64::MAX).count());
    let mut got: [Vec<WorkCompletion>; 2] = [Vec::new(), Vec::new()];
    let done = sim.run_until(50_000_000, Duration::from_secs(600), |s| {
        for n in 0..2 {
            while let Some(wc) = s.engines[n].poll_cq(ends[n].send_cq) {
                got[n].push(wc);
            }
        }
        got[0].len() >= want[0] && got[1].len() >= want[1]
    });
    assert!(done, "seed {seed}: {} + {} of {want:?} completions", got[0].len(), got[1].len());
    sim.run_until(1_000_000, Duration::from_millis(50), |_| false);
    for n in 0..2 {
        while let Some(wc) = sim.engines[n].poll_cq(ends[n].send_cq) {
            got[n].push(wc);
        }
        let signaled: Vec<_> = expects[n].iter().filter(|e| e.0 != u64::MAX).collect();
        assert_eq!(got[n].len(), signaled.len(), "seed {seed} node {n}: each WR completes once");
        for (wc, (id, opcode, _)) in got[n].iter().zip(&signaled) {
            assert_eq!((wc.wr_id, wc.status, wc.opcode), (*id, WcStatus::Success, *opcode), "seed {seed} node {n}");
        }
        let mut recvs = 0;
        while let Some(wc) = sim.engines[1 - n].poll_cq(ends[1 - n].recv_cq) {
            assert_eq!(wc.status, WcStatus::Success, "seed {seed}");
            recvs += 1;
        }
        let want_recvs = expects[n].iter().filter(|e| matches!(e.2, Expect::Bytes { into_recv: true, .. })).count();
        assert_eq!(recvs, want_recvs, "seed {seed}: receives of node {}", 1 - n);
        let peer = 1 - n;
        for (_, _, e) in &expects[n] {
            let (engine, key, at, from_node, from_at, len) = match *e {
                Expect::Bytes { src: s, dst: d, len, .. } => (peer, dst[peer], d, n, s, len),
                Expect::Read { src: s, dst: d, len } => (n, dst[n], d, peer, s, len),
                Expect::Nothing => continue,
            };
            let mut got_bytes = vec![0u8; len];
            sim.engines[engine].mr(key).unwrap().read(at, &mut got_bytes);
            let want_bytes = &pattern(from_node, REGION)[from_at..from_at + len];
            assert!(got_bytes == want_bytes, "seed {seed}: {len} bytes at {at} of node {engine}");
        }
        let mut word = [0u8; 8];
        sim.engines[peer].mr(dst[peer]).unwrap().read(REGION - 8, &mut word);
        assert_eq!(u64::from_le_bytes(word), counters_expected[peer], "seed {seed}: FETCH_ADD counter of node {peer}");
    }
}

#[test]
fn mixed_operations_both_ways_under_every_impairment() {
    let seeds: u64 = std::env::var("MIXED_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(6);
    for seed in 0..seeds {
        run(seed, 300);
    }
}
