//! One cell of the test matrix: an operation of a given size over a given
//! link, checked end to end (data byte-exact, every WR completed exactly once,
//! in order, with the right status).

use super::probe::{poll_all, read_mr};
use super::{connect, create_endpoint, Endpoint, LinkConfig, LinkStats, QpOptions, Sim};
use crate::engine::{
    AccessFlags, Engine, Mtu, QpType, RecvWr, SendFlags, SendWr, SgList, Sge, UdDest, WcFlags, WcOpcode, WcStatus,
    WorkCompletion, WrOp, GRH_LEN,
};
use core::time::Duration;

/// The operations of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Send,
    SendWithImm,
    SendWithInv,
    Write,
    WriteWithImm,
    Read,
    CmpSwap,
    FetchAdd,
    AtomicWrite,
    /// A WRITE of the size, then a FLUSH of what it wrote (or of the region).
    Flush,
}

impl Op {
    pub const ALL: [Op; 10] = [
        Op::Send,
        Op::SendWithImm,
        Op::SendWithInv,
        Op::Write,
        Op::WriteWithImm,
        Op::Read,
        Op::CmpSwap,
        Op::FetchAdd,
        Op::AtomicWrite,
        Op::Flush,
    ];
    pub fn is_atomic(self) -> bool {
        matches!(self, Op::CmpSwap | Op::FetchAdd)
    }
    /// Operations on 8 bytes whatever the size: the atomics and ATOMIC_WRITE.
    pub fn fixed_size(self) -> bool {
        matches!(self, Op::CmpSwap | Op::FetchAdd | Op::AtomicWrite)
    }
    /// Whether the operation exists on `t`.
    pub fn valid_on(self, t: QpType) -> bool {
        match t {
            QpType::Rc => true,
            QpType::Uc => matches!(self, Op::Send | Op::SendWithImm | Op::Write | Op::WriteWithImm),
            QpType::Ud => matches!(self, Op::Send | Op::SendWithImm),
        }
    }
}

/// What a cell measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Payload bytes moved by successful WRs.
    pub bytes: u64,
    /// Virtual time from the first post to the last completion.
    pub elapsed: Duration,
    pub link: LinkStats,
    /// UC and UD: messages the receiver got (the rest were lost).
    pub delivered: usize,
}

const SRC: u64 = 0x1000_0000;
/// The wr_id of the FLUSH after WRITE `m` is `FLUSH_ID + m`.
const FLUSH_ID: u64 = 1 << 32;
const DST: u64 = 0x2000_0000;
const MAX_STEPS: u64 = 20_000_000;
const MAX_TIME: Duration = Duration::from_secs(3_000);

/// A pattern that differs per message and per byte.
fn pattern(msg: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(msg as u32 * 7 + 1) as u8).collect()
}

fn mr(e: &mut Engine, ep: &Endpoint, addr: u64, bytes: Vec<u8>) -> u32 {
    mr_with(e, ep, addr, bytes, AccessFlags::EMPTY)
}

fn mr_with(e: &mut Engine, ep: &Endpoint, addr: u64, bytes: Vec<u8>, extra: AccessFlags) -> u32 {
    let access = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC
        | AccessFlags::FLUSH_GLOBAL
        | AccessFlags::FLUSH_PERSISTENT
        | extra;
    e.reg_mr(ep.pd, addr, Box::new(bytes), access).expect("PD exists").lkey
}

/// Runs `messages` WRs of `op` carrying `size` bytes from node 0 to node 1
/// (READ: node 0 reads node 1's memory; atomics: two requester QPs add to one
/// counter). Err says which check failed.
pub fn run_op(
    seed: u64,
    link: LinkConfig,
    qp_type: QpType,
    mtu: Mtu,
    op: Op,
    size: usize,
    messages: usize,
) -> Result<Outcome, String> {
    let mut sim = Sim::new(seed, link);
    let mut o = QpOptions::new(qp_type, mtu);
    if qp_type == QpType::Ud {
        sim.engines[0] = Engine::new(crate::engine::EngineConfig { port_mtu: mtu, ..*sim.engines[0].config() });
        sim.engines[1] = Engine::new(crate::engine::EngineConfig { port_mtu: mtu, ..*sim.engines[1].config() });
    }
    o.sq_sig_all = true;
    if op.is_atomic() {
        return run_atomics(&mut sim, &o, op, messages);
    }
    if op == Op::AtomicWrite {
        return run_atomic_writes(&mut sim, &o, messages);
    }
    let a = create_endpoint(&mut sim.engines[0], &o, None, None);
    let b = create_endpoint(&mut sim.engines[1], &o, None, None);
    connect(&mut sim, &a, &b, &o);
    let total = size * messages;
    let src_bytes: Vec<u8> = (0..messages).flat_map(|m| pattern(m, size)).collect();
    // The data lives at the side it flows from: node 0, or node 1 for READ.
    let (from, to) = if op == Op::Read { (1, 0) } else { (0, 1) };
    let (ep_from, ep_to) = if op == Op::Read { (&b, &a) } else { (&a, &b) };
    let src_key = mr(&mut sim.engines[from], ep_from, SRC, src_bytes.clone());
    let dst_len = if qp_type == QpType::Ud { (GRH_LEN + size) * messages } else { total };
    let dst_key = mr(&mut sim.engines[to], ep_to, DST, vec![0u8; dst_len.max(1)]);
    // Regions a peer may invalidate (only those: a SEND_WITH_INV of any
    // other key is refused).
    let invalidatable =
        |sim: &mut Sim| mr_with(&mut sim.engines[1], &b, 0x3000_0000, vec![0u8; 8], AccessFlags::REMOTE_INVALIDATE);
    let inv_keys: Vec<u32> = (0..messages).map(|_| invalidatable(&mut sim)).collect();
    let recv_each = if qp_type == QpType::Ud { GRH_LEN + size } else { size };
    let needs_recv = matches!(op, Op::Send | Op::SendWithImm | Op::SendWithInv | Op::WriteWithImm);
    if needs_recv {
        for m in 0..messages {
            let base = DST + (m * recv_each) as u64;
            // Every other receive is scattered over several SGEs.
            let sg_list = if recv_each == 0 || op == Op::WriteWithImm {
                SgList::new()
            } else if m % 2 == 1 {
                split(base, recv_each as u32, dst_key)
            } else {
                Sge { addr: base, length: recv_each as u32, lkey: dst_key }.into()
            };
            sim.engines[1].post_recv(b.qpn, RecvWr { wr_id: 1000 + m as u64, sg_list }).map_err(|e| e.to_string())?;
        }
    }
    for (m, &inv_key) in inv_keys.iter().enumerate() {
        let off = (m * size) as u64;
        let (base, key) = if op == Op::Read { (DST + off, dst_key) } else { (SRC + off, src_key) };
        // Message m's local buffer: one SGE, several, or inline data (when
        // it fits), in turn; a lone message uses several SGEs.
        let variant = if messages == 1 { 1 } else { m % 3 };
        let carries_data = op != Op::Read;
        let inline = variant == 2 && carries_data && size <= o.cap.max_inline_data as usize;
        let local = match variant {
            _ if size == 0 => SgList::new(),
            0 => Sge { addr: base, length: size as u32, lkey: key }.into(),
            _ => split(base, size as u32, key),
        };
        let remote_addr = if op == Op::Read { SRC + off } else { DST + off };
        let rkey = if op == Op::Read { src_key } else { dst_key };
        let wr_op = match op {
            Op::Send => WrOp::Send,
            Op::SendWithImm => WrOp::SendWithImm { imm: 0xabc0_0000 + m as u32 },
            Op::SendWithInv => WrOp::SendWithInv { invalidate_rkey: inv_key },
            Op::Write => WrOp::RdmaWrite { remote_addr, rkey },
            Op::WriteWithImm => WrOp::RdmaWriteWithImm { remote_addr, rkey, imm: 0xabc0_0000 + m as u32 },
            Op::Read => WrOp::RdmaRead { remote_addr, rkey },
            Op::Flush => WrOp::RdmaWrite { remote_addr, rkey },
            Op::CmpSwap | Op::FetchAdd | Op::AtomicWrite => unreachable!("atomics run apart"),
        };
        let mut wr = SendWr::new(m as u64, wr_op, local);
        if inline {
            wr.flags |= SendFlags::INLINE;
        }
        if qp_type == QpType::Ud {
            wr.ud = Some(UdDest { dgid: sim.gids[1], remote_qpn: b.qpn, remote_qkey: o.qkey });
        }
        sim.engines[0].post_send(a.qpn, wr).map_err(|e| e.to_string())?;
        if op == Op::Flush {
            // Persist what the WRITE placed: its range, or the whole region.
            let whole_region = m % 2 == 1;
            let flush = WrOp::Flush { remote_addr, rkey, len: size as u32, placement: 3, whole_region };
            sim.engines[0]
                .post_send(a.qpn, SendWr::new(FLUSH_ID + m as u64, flush, vec![]))
                .map_err(|e| e.to_string())?;
        }
    }
    let wrs = if op == Op::Flush { 2 * messages } else { messages };
    let lossy = qp_type != QpType::Rc;
    let start = sim.now;
    let mut sent: Vec<WorkCompletion> = Vec::new();
    let mut recvd: Vec<WorkCompletion> = Vec::new();
    let done = sim.run_until(MAX_STEPS, MAX_TIME, |s| {
        sent.extend(poll_all(&mut s.engines[0], a.send_cq));
        recvd.extend(poll_all(&mut s.engines[1], b.recv_cq));
        sent.len() >= wrs && (lossy || !needs_recv || recvd.len() >= messages)
    });
    if !done {
        return Err(format!("not done: {} of {wrs} send completions, {} receives", sent.len(), recvd.len()));
    }
    let elapsed = sim.now - start;
    // Let stragglers arrive: a late receive, or a WR completing twice, shows.
    settle(&mut sim);
    sent.extend(poll_all(&mut sim.engines[0], a.send_cq));
    recvd.extend(poll_all(&mut sim.engines[1], b.recv_cq));
    check_send_completions(&sent, messages, op, size)?;
    let ud_too_big = qp_type == QpType::Ud && size > mtu.bytes() as usize;
    let cell = Cell { op, qp_type, size, messages, dst_key, src: &src_bytes, inv_keys: &inv_keys };
    let delivered = if ud_too_big {
        if recvd.is_empty() {
            0
        } else {
            return Err("a UD message above the MTU was received".into());
        }
    } else if qp_type == QpType::Rc {
        if needs_recv {
            check_receives(&cell, &recvd)?;
        }
        let got = read_mr(&sim.engines[to], dst_key, 0, size * messages);
        if got != src_bytes {
            return Err(first_difference(&got, &src_bytes));
        }
        messages
    } else if needs_recv {
        check_lossy_receives(&cell, &sim.engines[to], &recvd)?
    } else {
        check_uc_write(&cell, &sim)?
    };
    Ok(Outcome { bytes: (delivered * size) as u64, elapsed, link: sim.stats, delivered })
}

/// `len` bytes at `addr` as a scatter/gather list of up to three pieces of
/// uneven sizes with an empty SGE among them.
fn split(addr: u64, len: u32, lkey: u32) -> SgList {
    let a = len / 3 + 1;
    let a = a.min(len);
    let b = (len - a) / 2;
    let c = len - a - b;
    let mut v: SgList = smallvec::smallvec![Sge { addr, length: a, lkey }, Sge { addr: 0, length: 0, lkey: 0 }];
    for (at, l) in [(a, b), (a + b, c)] {
        if l > 0 {
            v.push(Sge { addr: addr + u64::from(at), length: l, lkey });
        }
    }
    v
}

/// Runs until nothing is left to happen (at most 50 ms of virtual time).
fn settle(sim: &mut Sim) {
    sim.run_until(MAX_STEPS, Duration::from_millis(50), |_| false);
}

/// Every WR completed once, in order, successfully, with its opcode and
/// length (a FLUSH cell interleaves WRITE m and FLUSH m).
fn check_send_completions(sent: &[WorkCompletion], messages: usize, op: Op, size: usize) -> Result<(), String> {
    let per = if op == Op::Flush { 2 } else { 1 };
    if sent.len() != per * messages {
        return Err(format!("{} send completions for {} WRs", sent.len(), per * messages));
    }
    for (i, wc) in sent.iter().enumerate() {
        let (m, flush) = (i / per, per == 2 && i % 2 == 1);
        let want_id = if flush { FLUSH_ID + m as u64 } else { m as u64 };
        if wc.wr_id != want_id || wc.status != WcStatus::Success {
            return Err(format!("send completion {i}: {wc:?}"));
        }
        let (opcode, len) = match op {
            _ if flush => (WcOpcode::Flush, 0),
            Op::Write | Op::WriteWithImm | Op::Flush => (WcOpcode::RdmaWrite, size),
            Op::Read => (WcOpcode::RdmaRead, size),
            _ => (WcOpcode::Send, size),
        };
        if wc.opcode != opcode || wc.byte_len != len as u32 {
            return Err(format!("send completion {i}: opcode/length {wc:?}"));
        }
    }
    Ok(())
}

/// What one cell sent, for the checks.
struct Cell<'a> {
    op: Op,
    qp_type: QpType,
    size: usize,
    messages: usize,
    dst_key: u32,
    src: &'a [u8],
    inv_keys: &'a [u32],
}

impl Cell<'_> {
    fn message(&self, m: usize) -> &[u8] {
        &self.src[m * self.size..(m + 1) * self.size]
    }
    /// Where the receive WR `b` puts its data.
    fn buffer(&self, b: usize) -> usize {
        let each = if self.qp_type == QpType::Ud { GRH_LEN + self.size } else { self.size };
        b * each + if self.qp_type == QpType::Ud { GRH_LEN } else { 0 }
    }
    fn has_imm(&self) -> bool {
        matches!(self.op, Op::SendWithImm | Op::WriteWithImm)
    }
    /// Length, flags and immediate of a receive completion for message `m`.
    fn check_wc(&self, wc: &WorkCompletion, m: usize) -> Result<(), String> {
        let want_len = if wc.wc_flags.contains(WcFlags::GRH) { self.size + GRH_LEN } else { self.size };
        if wc.status != WcStatus::Success || wc.byte_len as usize != want_len {
            return Err(format!("receive completion for {want_len} bytes: {wc:?}"));
        }
        if self.has_imm() && (!wc.wc_flags.contains(WcFlags::WITH_IMM) || wc.imm_data != 0xabc0_0000 + m as u32) {
            return Err(format!("immediate of message {m} missing: {wc:?}"));
        }
        let inv = self.inv_keys.get(m).copied();
        if self.op == Op::SendWithInv && (!wc.wc_flags.contains(WcFlags::WITH_INV) || Some(wc.imm_data) != inv) {
            return Err(format!("invalidate of message {m} missing: {wc:?}"));
        }
        Ok(())
    }
}

/// RC: one receive completion per message, in order.
fn check_receives(c: &Cell, recvd: &[WorkCompletion]) -> Result<(), String> {
    if recvd.len() != c.messages {
        return Err(format!("{} receive completions for {} messages", recvd.len(), c.messages));
    }
    for (m, wc) in recvd.iter().enumerate() {
        if wc.wr_id != 1000 + m as u64 {
            return Err(format!("receive completion {m} out of order: {wc:?}"));
        }
        c.check_wc(wc, m)?;
    }
    Ok(())
}

/// UC and UD: messages may be lost, and a receive WR a lost message had
/// started serves the next one. Like rxe, UC takes any FIRST or ONLY packet
/// as a new message, so a duplicated or late message may arrive again or out
/// of order; UD has no order at all. Each receive must still complete in
/// order of posting and hold one whole message, immediate included.
/// Returns how many arrived.
fn check_lossy_receives(c: &Cell, e: &Engine, recvd: &[WorkCompletion]) -> Result<usize, String> {
    for (i, wc) in recvd.iter().enumerate() {
        if wc.wr_id != 1000 + i as u64 {
            return Err(format!("receive completion {i} out of order: {wc:?}"));
        }
        let imm_of = |m: usize| 0xabc0_0000 + m as u32;
        let m = if c.op == Op::WriteWithImm {
            // The data went to the WRITE's address, the receive holds nothing.
            let m = wc.imm_data.wrapping_sub(imm_of(0)) as usize;
            let ok = m < c.messages && read_mr(e, c.dst_key, m * c.size, c.size) == c.message(m);
            ok.then_some(m)
        } else {
            let got = read_mr(e, c.dst_key, c.buffer(i), c.size);
            (0..c.messages).find(|&m| got == c.message(m) && (!c.has_imm() || wc.imm_data == imm_of(m)))
        };
        let m = m.ok_or_else(|| format!("receive {i} holds no whole message: {wc:?}"))?;
        c.check_wc(wc, m)?;
    }
    Ok(recvd.len())
}

/// UC WRITE tells the receiver nothing, and a dropped one may have landed in
/// part: only a link that lost, duplicated or reordered nothing promises data.
fn check_uc_write(c: &Cell, sim: &Sim) -> Result<usize, String> {
    let s = sim.stats;
    if s.lost + s.dropped_corrupt + s.reordered + s.duplicated + s.dropped_mtu > 0 {
        return Ok(0);
    }
    let got = read_mr(&sim.engines[1], c.dst_key, 0, c.size * c.messages);
    if got != c.src {
        return Err(first_difference(&got, c.src));
    }
    Ok(c.messages)
}

fn first_difference(got: &[u8], want: &[u8]) -> String {
    let i = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
    format!("data differs at byte {i} of {} (got {:?}, want {:?})", want.len(), got.get(i), want.get(i))
}

/// `messages` atomics from two requester QPs on node 0 to one counter on
/// node 1. FETCH_ADD: the counter ends at exactly `messages` and the fetched
/// values are `0..messages`, each once. CMP_SWAP: a chain of swaps 0->1->2...
fn run_atomics(sim: &mut Sim, o: &QpOptions, op: Op, messages: usize) -> Result<Outcome, String> {
    let pd1 = sim.engines[1].alloc_pd();
    let pd0 = sim.engines[0].alloc_pd();
    let req: Vec<Endpoint> = (0..2).map(|_| create_endpoint(&mut sim.engines[0], o, Some(pd0), None)).collect();
    let resp: Vec<Endpoint> = (0..2).map(|_| create_endpoint(&mut sim.engines[1], o, Some(pd1), None)).collect();
    for (a, b) in req.iter().zip(&resp) {
        connect(sim, a, b, o);
    }
    let counter = mr(&mut sim.engines[1], &resp[0], DST, vec![0u8; 8]);
    let results = mr(&mut sim.engines[0], &req[0], SRC, vec![0u8; 8 * messages]);
    // CMP_SWAP runs on one QP so the chain is ordered; FETCH_ADD alternates.
    for m in 0..messages {
        let qp = if op == Op::FetchAdd { m % 2 } else { 0 };
        let wr_op = match op {
            Op::FetchAdd => WrOp::AtomicFetchAdd { remote_addr: DST, rkey: counter, add: 1 },
            _ => WrOp::AtomicCmpSwp { remote_addr: DST, rkey: counter, compare: m as u64, swap: m as u64 + 1 },
        };
        let sge = Sge { addr: SRC + 8 * m as u64, length: 8, lkey: results };
        sim.engines[0].post_send(req[qp].qpn, SendWr::new(m as u64, wr_op, vec![sge])).map_err(|e| e.to_string())?;
    }
    let mut sent = [Vec::new(), Vec::new()];
    let start = sim.now;
    let done = sim.run_until(MAX_STEPS, MAX_TIME, |s| {
        for (i, ep) in req.iter().enumerate() {
            sent[i].extend(poll_all(&mut s.engines[0], ep.send_cq));
        }
        sent[0].len() + sent[1].len() >= messages
    });
    if !done {
        return Err(format!("atomics not done: {} + {} of {messages}", sent[0].len(), sent[1].len()));
    }
    let elapsed = sim.now - start;
    settle(sim);
    for (i, ep) in req.iter().enumerate() {
        sent[i].extend(poll_all(&mut sim.engines[0], ep.send_cq));
    }
    if sent[0].len() + sent[1].len() != messages {
        return Err(format!("{} atomic completions for {messages} WRs", sent[0].len() + sent[1].len()));
    }
    for (i, wcs) in sent.iter().enumerate() {
        for (n, wc) in wcs.iter().enumerate() {
            let want_id = if op == Op::FetchAdd { (2 * n + i) as u64 } else { n as u64 };
            if wc.status != WcStatus::Success || wc.wr_id != want_id || wc.byte_len != 8 {
                return Err(format!("atomic completion on QP {i}: {wc:?}"));
            }
        }
    }
    let final_value = u64::from_le_bytes(read_mr(&sim.engines[1], counter, 0, 8).try_into().expect("8 bytes"));
    if final_value != messages as u64 {
        return Err(format!("counter is {final_value} after {messages} atomics"));
    }
    let mut fetched: Vec<u64> = read_mr(&sim.engines[0], results, 0, 8 * messages)
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    fetched.sort_unstable();
    if fetched != (0..messages as u64).collect::<Vec<_>>() {
        return Err(format!("fetched values {fetched:?}"));
    }
    Ok(Outcome { bytes: 8 * messages as u64, elapsed, link: sim.stats, delivered: messages })
}

/// `messages` ATOMIC_WRITEs on one QP: the even ones all to one word, each
/// odd one to a word of its own. The shared word must end with the last
/// even value (a duplicate executed again after a later write would leave
/// an older one), every own word with its value.
fn run_atomic_writes(sim: &mut Sim, o: &QpOptions, messages: usize) -> Result<Outcome, String> {
    let a = create_endpoint(&mut sim.engines[0], o, None, None);
    let b = create_endpoint(&mut sim.engines[1], o, None, None);
    connect(sim, &a, &b, o);
    let words = mr(&mut sim.engines[1], &b, DST, vec![0u8; 8 * (messages + 1)]);
    let value = |m: usize| (0x0102_0304_0506_0700u64 + m as u64).to_be_bytes();
    let addr = |m: usize| match m % 2 {
        0 => DST,
        _ => DST + 8 * (m as u64 + 1),
    };
    for m in 0..messages {
        let op = WrOp::AtomicWrite { remote_addr: addr(m), rkey: words, data: value(m) };
        sim.engines[0].post_send(a.qpn, SendWr::new(m as u64, op, vec![])).map_err(|e| e.to_string())?;
    }
    let mut sent = Vec::new();
    let start = sim.now;
    let done = sim.run_until(MAX_STEPS, MAX_TIME, |s| {
        sent.extend(poll_all(&mut s.engines[0], a.send_cq));
        sent.len() >= messages
    });
    if !done {
        return Err(format!("atomic writes not done: {} of {messages}", sent.len()));
    }
    let elapsed = sim.now - start;
    settle(sim);
    sent.extend(poll_all(&mut sim.engines[0], a.send_cq));
    if sent.len() != messages {
        return Err(format!("{} completions for {messages} ATOMIC_WRITEs", sent.len()));
    }
    for (m, wc) in sent.iter().enumerate() {
        let ok = wc.wr_id == m as u64 && wc.status == WcStatus::Success && wc.opcode == WcOpcode::AtomicWrite;
        if !ok || wc.byte_len != 8 {
            return Err(format!("ATOMIC_WRITE completion {m}: {wc:?}"));
        }
    }
    let last_even = (messages - 1) / 2 * 2;
    for m in (0..messages).filter(|&m| m % 2 != 0 || m == last_even) {
        let got = read_mr(&sim.engines[1], words, (addr(m) - DST) as usize, 8);
        if got != value(m) {
            return Err(format!("word of ATOMIC_WRITE {m} holds {got:?}"));
        }
    }
    Ok(Outcome { bytes: 8 * messages as u64, elapsed, link: sim.stats, delivered: messages })
}
