//! A bounded randomized test: QPs of every type in every state get random,
//! well-formed-but-wrong and mutated packets (valid ICRC assumed: the engine's
//! entry is after the link's check), from their peer and from third hosts,
//! while WRs are posted and timers fire. Nothing may panic, no byte outside a
//! registered region may be touched, a region that allows no remote access
//! must stay as it was, and the engine's count of unacknowledged PSNs stays
//! within its budget and returns to 0 when every QP is reset.
//!
//! 10^7 packets by default (SECURITY-NOTES test 12), about 20 s on 2 cores;
//! `UROCE_HOSTILE_PACKETS=N` for a longer or shorter run.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::{Arc, Mutex};
use uroce_transport::engine::{
    AccessFlags, AddressVector, Counter, CqHandle, Engine, EngineConfig, Gid, Instant, Mtu, QpAttr, QpAttrMask as M,
    QpCap, QpInitAttr, QpState, QpType, RecvWr, RxMeta, SendWr, Sge, UdDest, WrOp, DEFAULT_MAX_INFLIGHT_PSNS,
    MAX_PACKET_LEN,
};
use uroce_transport::wire::{
    AethRepr, AethSyndrome, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, ExtHeaders, FethRepr, IethRepr,
    ImmDtRepr, Opcode, RethRepr, RoceRepr,
};
use uroce_transport::{Psn, Seed};

const GUARD: usize = 64;
const GUARD_BYTE: u8 = 0xa5;

/// Region bytes with guard zones on both sides; any access beyond `len`
/// panics, and the guards are checked at the end.
struct Guarded(Arc<Mutex<Vec<u8>>>);

impl uroce_transport::engine::MrStorage for Guarded {
    fn len(&self) -> usize {
        self.0.lock().unwrap().len() - 2 * GUARD
    }
    fn read(&self, offset: usize, dst: &mut [u8]) {
        assert!(offset + dst.len() <= self.len(), "read outside the region");
        dst.copy_from_slice(&self.0.lock().unwrap()[GUARD + offset..GUARD + offset + dst.len()]);
    }
    fn write(&mut self, offset: usize, src: &[u8]) {
        assert!(offset + src.len() <= self.len(), "write outside the region");
        self.0.lock().unwrap()[GUARD + offset..GUARD + offset + src.len()].copy_from_slice(src);
    }
}

struct Region {
    bytes: Arc<Mutex<Vec<u8>>>,
    key: u32,
    addr: u64,
    len: usize,
}

fn region(e: &mut Engine, pd: uroce_transport::engine::Pd, addr: u64, len: usize, access: AccessFlags) -> Region {
    let mut v = vec![GUARD_BYTE; len + 2 * GUARD];
    v[GUARD..GUARD + len].iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    let bytes = Arc::new(Mutex::new(v));
    let key = e.reg_mr(pd, addr, Box::new(Guarded(bytes.clone())), access).unwrap().lkey;
    Region { bytes, key, addr, len }
}

struct Target {
    qpn: u32,
    qp_type: QpType,
    cqs: [CqHandle; 2],
    /// The state the QP is meant to be tested in.
    state: QpState,
}

const PEER_QPN: u32 = 0x77;
const QKEY: u32 = 0x1111_1111;

/// Takes a new QP of `t` to `state` through the legal path.
fn make_qp(e: &mut Engine, pd: uroce_transport::engine::Pd, t: QpType, state: QpState, open: &Region) -> Target {
    let cqs = [e.create_cq(64), e.create_cq(64)];
    let cap = QpCap { max_send_wr: 32, max_recv_wr: 32, ..QpCap::default() };
    let init = QpInitAttr { qp_type: t, pd, send_cq: cqs[0], recv_cq: cqs[1], srq: None, cap, sq_sig_all: true };
    let qpn = e.create_qp(init).unwrap();
    drive(e, qpn, t, state, open);
    Target { qpn, qp_type: t, cqs, state }
}

/// Takes QP `qpn`, in RESET, to `state` through the legal path, with
/// receives posted from INIT on.
fn drive(e: &mut Engine, qpn: u32, t: QpType, state: QpState, open: &Region) {
    let mut a = QpAttr {
        port_num: 1,
        qkey: QKEY,
        qp_access_flags: AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC
            | AccessFlags::FLUSH_GLOBAL
            | AccessFlags::FLUSH_PERSISTENT,
        path_mtu: Mtu::Mtu1024,
        dest_qp_num: PEER_QPN,
        rq_psn: 100,
        sq_psn: 500,
        ah_attr: AddressVector { dgid: Gid::from_ipv4([10, 0, 0, 2]), port_num: 1, ..Default::default() },
        timeout: 4,
        retry_cnt: 2,
        rnr_retry: 2,
        min_rnr_timer: 1,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 4,
        ..QpAttr::default()
    };
    let path = [
        (QpState::Init, M::PKEY_INDEX | M::PORT | if t == QpType::Ud { M::QKEY } else { M::ACCESS_FLAGS }),
        (
            QpState::Rtr,
            match t {
                QpType::Rc => M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER,
                QpType::Uc => M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN,
                QpType::Ud => M::EMPTY,
            },
        ),
        (
            QpState::Rts,
            match t {
                QpType::Rc => M::SQ_PSN | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC,
                _ => M::SQ_PSN,
            },
        ),
    ];
    let target_rank = match state {
        QpState::Reset => 0,
        QpState::Init => 1,
        QpState::Rtr => 2,
        _ => 3,
    };
    for (s, mask) in path.into_iter().take(target_rank) {
        a.qp_state = s;
        e.modify_qp(qpn, &a, M::STATE | mask).unwrap();
    }
    if target_rank >= 1 {
        for i in 0..8 {
            let sge = Sge { addr: open.addr + 512 * i, length: 512, lkey: open.key };
            e.post_recv(qpn, RecvWr { wr_id: i, sg_list: sge.into() }).unwrap();
        }
    }
    match state {
        QpState::Sqd | QpState::Err => {
            a.qp_state = state;
            e.modify_qp(qpn, &a, M::STATE).unwrap();
        }
        QpState::Sqe => {
            // A local protection error moves UC and UD to SQE.
            let mut wr = SendWr::new(1, WrOp::Send, vec![Sge { addr: 0, length: 8, lkey: 0xdead }]);
            wr.ud = Some(UdDest { dgid: Gid::default(), remote_qpn: PEER_QPN, remote_qkey: QKEY });
            e.post_send(qpn, wr).unwrap();
            let mut buf = vec![0u8; MAX_PACKET_LEN];
            while e.poll_transmit(Instant::ZERO, &mut buf).is_some() {}
            assert_eq!(e.query_qp(qpn).unwrap().qp_state, QpState::Sqe);
        }
        _ => {}
    }
}

fn any_opcode(rng: &mut ChaCha8Rng) -> Opcode {
    if rng.gen_bool(0.9) {
        Opcode::ALL[rng.gen_range(0..Opcode::ALL.len())]
    } else {
        Opcode::from(rng.gen::<u8>())
    }
}

/// A value near the interesting ones, or anything.
fn near(rng: &mut ChaCha8Rng, base: u64, span: u64) -> u64 {
    match rng.gen_range(0..4) {
        0 => rng.gen(),
        _ => base.wrapping_add(rng.gen_range(0..span.max(1))).wrapping_sub(span / 4),
    }
}

/// A packet whose headers are what its opcode calls for, with fields that
/// are plausible, borderline or wrong.
fn structured(rng: &mut ChaCha8Rng, qpns: &[u32], keys: &[(u32, u64, usize)]) -> Vec<u8> {
    let op = any_opcode(rng);
    let qpn = if rng.gen_bool(0.95) { qpns[rng.gen_range(0..qpns.len())] } else { rng.gen::<u32>() & 0xff_ffff };
    let psn = Psn::new(near(rng, if op.is_response() { 500 } else { 100 }, 40) as u32);
    let mut r = RoceRepr::new(BthRepr::new(op, qpn, psn));
    r.bth.ack_req = rng.gen();
    if rng.gen_bool(0.05) {
        r.bth.pkey = rng.gen();
    }
    let (key, addr, len) = keys[rng.gen_range(0..keys.len())];
    let key = if rng.gen_bool(0.9) { key } else { rng.gen() };
    let h = op.headers().unwrap_or(ExtHeaders::NONE);
    if h.contains(ExtHeaders::DETH) {
        let qkey = if rng.gen_bool(0.8) { QKEY } else { rng.gen() };
        r.deth = Some(DethRepr { qkey, src_qp: rng.gen::<u32>() & 0xff_ffff, reserved: 0 });
    }
    if h.contains(ExtHeaders::FETH) {
        r.feth = Some(FethRepr { selectivity: rng.gen_range(0..4), placement: rng.gen_range(0..4), reserved: 0 });
    }
    if h.contains(ExtHeaders::RETH) {
        let va = near(rng, addr, len as u64 + 64);
        r.reth = Some(RethRepr { va, rkey: key, dma_len: near(rng, 0, 9000) as u32 });
    }
    if h.contains(ExtHeaders::ATOMIC_ETH) {
        let va = near(rng, addr, len as u64 + 16);
        r.atomic_eth = Some(AtomicEthRepr { va, rkey: key, swap_add: rng.gen(), compare: rng.gen() });
    }
    if h.contains(ExtHeaders::IMMDT) {
        r.immdt = Some(ImmDtRepr { imm: rng.gen() });
    }
    if h.contains(ExtHeaders::IETH) {
        r.ieth = Some(IethRepr { rkey: key });
    }
    if h.contains(ExtHeaders::AETH) {
        r.aeth = Some(AethRepr { syndrome: AethSyndrome::from_byte(rng.gen()), msn: rng.gen::<u32>() & 0xff_ffff });
    }
    if h.contains(ExtHeaders::ATOMIC_ACK_ETH) {
        r.atomic_ack_eth = Some(AtomicAckEthRepr { orig_data: rng.gen() });
    }
    let payload_len = if op.has_payload() {
        *[0usize, 1, 255, 1023, 1024, 1025, 4096, rng.gen_range(0..4200)].get(rng.gen_range(0..8)).unwrap()
    } else {
        0
    };
    let payload: Vec<u8> = (0..payload_len).map(|_| rng.gen()).collect();
    let mut buf = vec![0u8; r.buffer_len(payload_len)];
    r.emit(&mut buf, &payload);
    buf
}

fn mutate(rng: &mut ChaCha8Rng, mut p: Vec<u8>) -> Vec<u8> {
    for _ in 0..rng.gen_range(1..4) {
        match rng.gen_range(0..3) {
            0 if !p.is_empty() => {
                let i = rng.gen_range(0..p.len());
                p[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if !p.is_empty() => p.truncate(rng.gen_range(0..p.len())),
            _ => p.extend((0..rng.gen_range(1..8)).map(|_| rng.gen::<u8>())),
        }
    }
    p
}

fn post_random_wr(rng: &mut ChaCha8Rng, e: &mut Engine, t: &Target, open: &Region) {
    let sge = Sge { addr: open.addr + rng.gen_range(0..4096), length: rng.gen_range(0..3000), lkey: open.key };
    let remote_addr = near(rng, 0x9000_0000, 8192);
    let op = match rng.gen_range(0..7) {
        0 => WrOp::Send,
        1 => WrOp::RdmaWrite { remote_addr, rkey: rng.gen() },
        2 => WrOp::RdmaRead { remote_addr, rkey: rng.gen() },
        3 => WrOp::AtomicFetchAdd { remote_addr: remote_addr & !7, rkey: rng.gen(), add: 1 },
        4 => WrOp::AtomicWrite { remote_addr, rkey: rng.gen(), data: rng.gen() },
        5 => WrOp::Flush {
            remote_addr,
            rkey: rng.gen(),
            len: rng.gen_range(0..9000),
            placement: rng.gen_range(0..4),
            whole_region: rng.gen(),
        },
        _ => WrOp::SendWithImm { imm: rng.gen() },
    };
    let sg_list = if op.is_atomic() { vec![Sge { length: 8, ..sge }] } else { vec![sge] };
    let mut wr = SendWr::new(rng.gen(), op, sg_list);
    wr.ud = Some(UdDest { dgid: Gid::default(), remote_qpn: PEER_QPN, remote_qkey: QKEY });
    let _ = e.post_send(t.qpn, wr);
    let sge = Sge { addr: open.addr + 512 * rng.gen_range(0..8), length: 512, lkey: open.key };
    let _ = e.post_recv(t.qpn, RecvWr { wr_id: rng.gen(), sg_list: sge.into() });
}

fn run(seed: u64, packets: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut e =
        Engine::new(EngineConfig { seed: Seed::Fixed(seed), gid: Gid::from_ipv4([10, 0, 0, 1]), ..Default::default() });
    let pd = e.alloc_pd();
    let all = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC
        | AccessFlags::FLUSH_GLOBAL;
    let open = region(&mut e, pd, 0x10_0000, 8192, all);
    let closed = region(&mut e, pd, 0x20_0000, 4096, AccessFlags::LOCAL_WRITE);
    let other_pd = e.alloc_pd();
    let foreign = region(&mut e, other_pd, 0x30_0000, 4096, all);
    let states = [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts, QpState::Sqd, QpState::Sqe, QpState::Err];
    let mut targets = Vec::new();
    for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
        for s in states {
            if s == QpState::Sqe && t == QpType::Rc {
                continue;
            }
            targets.push(make_qp(&mut e, pd, t, s, &open));
        }
    }
    let qpns: Vec<u32> = targets.iter().map(|t| t.qpn).collect();
    let keys: Vec<(u32, u64, usize)> = [&open, &closed, &foreign].iter().map(|r| (r.key, r.addr, r.len)).collect();
    let peer =
        RxMeta { src_gid: Gid::from_ipv4([10, 0, 0, 2]), dst_gid: Gid::from_ipv4([10, 0, 0, 1]), icrc_skipped: false };
    let third = RxMeta { src_gid: Gid::from_ipv4([10, 0, 0, 3]), ..peer };
    let mut now = Instant::ZERO;
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut statuses = std::collections::HashSet::new();
    let mut revived = 0;
    let mut events = std::collections::HashSet::new();
    for i in 0..packets {
        let pkt = match rng.gen_range(0..10) {
            0 | 1 => (0..rng.gen_range(0..80)).map(|_| rng.gen()).collect(),
            2 | 3 if !seen.is_empty() => {
                let original = seen[rng.gen_range(0..seen.len())].clone();
                mutate(&mut rng, original)
            }
            _ => structured(&mut rng, &qpns, &keys),
        };
        let meta = if rng.gen_bool(0.05) { third } else { peer };
        e.handle_packet(now, meta, &pkt);
        let inflight = e.inflight_psns();
        assert!(inflight <= DEFAULT_MAX_INFLIGHT_PSNS + 64, "seed {seed}: {inflight} PSNs unacknowledged");
        if seen.len() < 256 {
            seen.push(pkt);
        }
        if i % 1000 == 999 {
            // A QP the packets (or the test) knocked out of its state is reset
            // and brought back, so every state keeps being exercised.
            for t in &targets {
                if e.query_qp(t.qpn).unwrap().qp_state != t.state {
                    let reset = QpAttr { qp_state: QpState::Reset, ..QpAttr::default() };
                    e.modify_qp(t.qpn, &reset, M::STATE).unwrap();
                    drive(&mut e, t.qpn, t.qp_type, t.state, &open);
                    revived += 1;
                }
            }
        }
        if i % 50 == 0 {
            let t = &targets[rng.gen_range(0..targets.len())];
            post_random_wr(&mut rng, &mut e, t, &open);
            if t.qp_type == QpType::Rc && rng.gen_bool(0.2) {
                let mut a = QpAttr { qp_state: QpState::Err, ..QpAttr::default() };
                a.qp_state = if rng.gen_bool(0.5) { QpState::Err } else { QpState::Sqd };
                let _ = e.modify_qp(t.qpn, &a, M::STATE);
            }
        }
        for _ in 0..64 {
            match e.poll_transmit(now, &mut buf) {
                Some(tx) => seen.push(buf[..tx.len].to_vec()),
                None => break,
            }
        }
        seen.truncate(512);
        now = Instant::from_nanos(now.as_nanos() + rng.gen_range(0..200_000));
        if e.poll_timeout().is_some_and(|t| t <= now) {
            e.handle_timeout(now);
        }
        for t in &targets {
            for cq in t.cqs {
                while let Some(wc) = e.poll_cq(cq) {
                    statuses.insert(wc.status);
                }
            }
        }
        while let Some(ev) = e.poll_event() {
            events.insert(core::mem::discriminant(&ev));
        }
    }
    // The packets reached the QPs' logic, not only the parser: the run saw
    // requests executed and answered, duplicates, gaps and failures.
    let c = e.counters();
    for counter in [Counter::RcvdPkts, Counter::SentPkts, Counter::DuplicateRequest, Counter::OutOfSeqRequest] {
        assert!(c.get(counter) > 0, "seed {seed}: {} stayed 0", counter.name());
    }
    assert!(statuses.len() >= 3 && !events.is_empty(), "seed {seed}: {statuses:?}, {} event kinds", events.len());
    assert!(revived > 0, "seed {seed}: no QP ever left its state");
    assert!(c.get(Counter::RcvdBadSrc) > 0, "seed {seed}: no packet from a third host");
    for t in &targets {
        let reset = QpAttr { qp_state: QpState::Reset, ..QpAttr::default() };
        e.modify_qp(t.qpn, &reset, M::STATE).unwrap();
    }
    assert_eq!(e.inflight_psns(), 0, "seed {seed}: reset QPs still hold PSNs of the budget");
    for r in [&open, &closed, &foreign] {
        let b = r.bytes.lock().unwrap();
        assert!(b[..GUARD].iter().chain(&b[GUARD + r.len..]).all(|&x| x == GUARD_BYTE), "guard zone touched");
    }
    for r in [&closed, &foreign] {
        let b = r.bytes.lock().unwrap();
        assert!(b[GUARD..GUARD + r.len].iter().enumerate().all(|(i, &x)| x == i as u8), "protected region written");
    }
}

#[test]
fn hostile_packets_in_every_state() {
    let total: usize = std::env::var("UROCE_HOSTILE_PACKETS").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000_000);
    const SEEDS: u64 = 64;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for seed in (t..SEEDS).step_by(threads as usize) {
                    run(seed, total / SEEDS as usize);
                }
            });
        }
    });
}
