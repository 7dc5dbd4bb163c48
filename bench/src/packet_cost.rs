//! The engine's per-packet cost, for `valgrind --tool=callgrind`: two engines
//! (the simulation's setup, no simulated wire) exchange 4 KiB RDMA WRITEs on
//! one RC QP pair, path MTU 4096, one packet per message. Each step of a
//! message goes through its own `#[inline(never)]` function named `cg_*`, so
//! `--collect-atstart=no --toggle-collect='*cg_send_write'` counts exactly
//! that step; warm-up messages take the same code without the wrappers.
//!
//! ICRC included, as the udp link does it: the ICRC over the IPv4 and UDP
//! headers the kernel will write (built here per packet) and the RoCE packet
//! is computed and stored on send, and checked on receive.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use uroce_transport::engine::{
    AccessFlags, Engine, Instant, Mtu, QpType, RxMeta, SendWr, Sge, Transmit, WcOpcode, WcStatus, WrOp, MAX_PACKET_LEN,
};
use uroce_transport::icrc;
use uroce_transport::sim::{Endpoint, Pair, QpOptions, Sim};
use uroce_transport::wire::ip::{emit_headers, MAX_HEADERS_LEN};
use uroce_transport::wire::{ICRC_LEN, ROCEV2_UDP_PORT};

/// Bytes of RDMA WRITE payload in the one packet of each message, unless
/// `--payload` says otherwise (at most the path MTU, so one packet).
pub const PAYLOAD: usize = 4096;
/// The steps of one message, in order, as (function name, what it is).
pub const STEPS: [(&str, &str); 5] = [
    ("cg_post_write", "post_send of one 4 KiB RDMA WRITE WR (requester)"),
    ("cg_send_write", "send the WRITE packet: poll_transmit (MR -> packet) + ICRC (requester)"),
    ("cg_recv_write", "receive the WRITE packet: ICRC check + handle_packet (payload -> MR) (responder)"),
    ("cg_send_ack", "send the ACK: poll_transmit + ICRC (responder)"),
    ("cg_recv_ack", "receive the ACK: ICRC check + handle_packet + poll_cq of the completion (requester)"),
];

const SRC: u64 = 0x1000_0000;
const DST: u64 = 0x2000_0000;

/// Two connected engines and the buffers of one exchange.
pub struct Bench {
    sim: Sim,
    a: Endpoint,
    src_key: u32,
    dst_key: u32,
    tx: Vec<u8>,
    wr_id: u64,
    /// Bytes of payload in each WRITE.
    payload: usize,
    /// Packets of each kind seen, and bytes of WRITE payload placed.
    pub writes: u64,
    pub acks: u64,
}

/// What one message's steps saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    pub write_len: usize,
    pub ack_len: usize,
}

impl Bench {
    pub fn new() -> Bench {
        Bench::with_payload(PAYLOAD).expect("PAYLOAD is one packet")
    }

    /// WRITEs of `payload` bytes; an error unless 1 to 4096 (one packet each).
    pub fn with_payload(payload: usize) -> Result<Bench, String> {
        if !(1..=PAYLOAD).contains(&payload) {
            return Err(format!("--payload {payload}: give 1 to {PAYLOAD} bytes (one packet at path MTU 4096)"));
        }
        let mut p = Pair::new(8, &QpOptions::new(QpType::Rc, Mtu::Mtu4096));
        let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
        let pattern: Vec<u8> = (0..payload).map(|i| (i * 7 + 3) as u8).collect();
        let src_key = p.reg_mr(0, SRC, pattern, access);
        let dst_key = p.reg_mr(1, DST, vec![0u8; payload], access);
        let tx = vec![0u8; MAX_PACKET_LEN];
        Ok(Bench { sim: p.sim, a: p.a, src_key, dst_key, tx, wr_id: 0, payload, writes: 0, acks: 0 })
    }

    fn wr(&mut self) -> SendWr {
        self.wr_id += 1;
        let op = WrOp::RdmaWrite { remote_addr: DST, rkey: self.dst_key };
        SendWr::new(self.wr_id, op, Sge { addr: SRC, length: self.payload as u32, lkey: self.src_key })
    }

    fn now(&self) -> Instant {
        // A fixed instant: no timer falls due between the steps.
        self.sim.now
    }

    /// One message, each step through its `cg_*` wrapper (`measured`) or not.
    pub fn exchange(&mut self, measured: bool) -> Result<Exchange, String> {
        let wr = self.wr();
        let now = self.now();
        let qa = self.a.qpn;
        let gids = self.sim.gids;
        let (ea, eb) = self.sim.engines.split_at_mut(1);
        let (ea, eb) = (&mut ea[0], &mut eb[0]);
        let tx = &mut self.tx[..];
        let to_b = RxMeta { src_gid: gids[0], dst_gid: gids[1], icrc_skipped: false };
        let to_a = RxMeta { src_gid: gids[1], dst_gid: gids[0], icrc_skipped: false };
        let cq = self.a.send_cq;

        let posted = if measured { cg_post_write(ea, qa, wr) } else { post_write(ea, qa, wr) };
        posted.map_err(|e| format!("post_send: {e:?}"))?;
        let w = if measured { cg_send_write(ea, now, tx) } else { send(ea, now, tx) };
        let w = w.ok_or("the requester sent no packet")?;
        if w.len != write_len(self.payload) {
            return Err(format!("a WRITE packet of {} bytes, not one WRITE_ONLY of {}", w.len, self.payload));
        }
        let ok = if measured { cg_recv_write(eb, now, to_b, &tx[..w.len]) } else { recv(eb, now, to_b, &tx[..w.len]) };
        if !ok {
            return Err("the WRITE packet's ICRC does not check".into());
        }
        let k = if measured { cg_send_ack(eb, now, tx) } else { send(eb, now, tx) };
        let k = k.ok_or("the responder sent no ACK")?;
        let wc = if measured {
            cg_recv_ack(ea, now, to_a, &tx[..k.len], cq)
        } else {
            recv_ack(ea, now, to_a, &tx[..k.len], cq)
        };
        let wc = wc.ok_or("no completion after the ACK")?;
        if wc.status != WcStatus::Success || wc.opcode != WcOpcode::RdmaWrite || wc.wr_id != self.wr_id {
            return Err(format!("unexpected completion {wc:?}"));
        }
        if ea.poll_transmit(now, tx).is_some() || eb.poll_transmit(now, tx).is_some() {
            return Err("more packets than one WRITE and one ACK".into());
        }
        self.writes += 1;
        self.acks += 1;
        Ok(Exchange { write_len: w.len, ack_len: k.len })
    }

    /// Whether the responder's memory holds the requester's pattern.
    pub fn placed(&self) -> bool {
        let mut got = vec![0u8; self.payload];
        match self.sim.engines[1].mr(self.dst_key) {
            Some(mr) => mr.read(0, &mut got),
            None => return false,
        }
        got.iter().enumerate().all(|(i, &b)| b == (i * 7 + 3) as u8)
    }
}

impl Default for Bench {
    fn default() -> Self {
        Bench::new()
    }
}

/// The RoCE length of a WRITE_ONLY of `payload` bytes: BTH, RETH, the
/// payload padded to 4 bytes, ICRC.
pub fn write_len(payload: usize) -> usize {
    12 + 16 + payload.next_multiple_of(4) + ICRC_LEN
}

/// The udp link's two ends, whose IPv4 and UDP headers the ICRC covers.
const FROM: (IpAddr, u16) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), ROCEV2_UDP_PORT);
const TO: (IpAddr, u16) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), ROCEV2_UDP_PORT);

/// The ICRC of `roce` (its last 4 bytes aside) over the headers the udp
/// link's kernel writes, built per packet as the link builds them.
#[inline(always)]
fn icrc_of(roce: &[u8]) -> u32 {
    let mut h = [0u8; MAX_HEADERS_LEN];
    let Some((iph, n)) = emit_headers(FROM, TO, 0, roce.len(), &mut h) else { return 0 };
    icrc::compute_parts(&h[..iph], &h[iph..n], &roce[..roce.len() - ICRC_LEN]).unwrap_or(0)
}

#[inline(always)]
fn post_write(e: &mut Engine, qpn: u32, wr: SendWr) -> Result<(), uroce_transport::engine::Error> {
    e.post_send(qpn, wr)
}

#[inline(always)]
fn send(e: &mut Engine, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
    let t = e.poll_transmit(now, buf)?;
    let c = icrc_of(&buf[..t.len]);
    buf[t.len - ICRC_LEN..t.len].copy_from_slice(&c.to_le_bytes());
    Some(t)
}

#[inline(always)]
fn recv(e: &mut Engine, now: Instant, meta: RxMeta, pkt: &[u8]) -> bool {
    if icrc::carried(pkt) != Some(icrc_of(pkt)) {
        return false;
    }
    e.handle_packet(now, meta, pkt);
    true
}

#[inline(always)]
fn recv_ack(
    e: &mut Engine,
    now: Instant,
    meta: RxMeta,
    pkt: &[u8],
    cq: uroce_transport::engine::CqHandle,
) -> Option<uroce_transport::engine::WorkCompletion> {
    if !recv(e, now, meta, pkt) {
        return None;
    }
    e.poll_cq(cq)
}

#[inline(never)]
pub fn cg_post_write(e: &mut Engine, qpn: u32, wr: SendWr) -> Result<(), uroce_transport::engine::Error> {
    black_box(1_u8); // distinct, so that no two wrappers are folded into one
    black_box(post_write(e, qpn, wr))
}

#[inline(never)]
pub fn cg_send_write(e: &mut Engine, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
    black_box(2_u8); // distinct, so that no two wrappers are folded into one
    black_box(send(e, now, buf))
}

#[inline(never)]
pub fn cg_recv_write(e: &mut Engine, now: Instant, meta: RxMeta, pkt: &[u8]) -> bool {
    black_box(3_u8); // distinct, so that no two wrappers are folded into one
    black_box(recv(e, now, meta, pkt))
}

#[inline(never)]
pub fn cg_send_ack(e: &mut Engine, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
    black_box(4_u8); // distinct, so that no two wrappers are folded into one
    black_box(send(e, now, buf))
}

#[inline(never)]
pub fn cg_recv_ack(
    e: &mut Engine,
    now: Instant,
    meta: RxMeta,
    pkt: &[u8],
    cq: uroce_transport::engine::CqHandle,
) -> Option<uroce_transport::engine::WorkCompletion> {
    black_box(5_u8); // distinct, so that no two wrappers are folded into one
    black_box(recv_ack(e, now, meta, pkt, cq))
}

/// Warm-up, then `measured` messages of `payload` bytes through the `cg_*`
/// steps.
pub fn run(warmup: u64, measured: u64, payload: usize) -> Result<Exchange, String> {
    let mut b = Bench::with_payload(payload)?;
    let mut last = None;
    for _ in 0..warmup {
        last = Some(b.exchange(false)?);
    }
    for _ in 0..measured {
        last = Some(b.exchange(true)?);
    }
    if !b.placed() {
        return Err("the responder's memory does not hold what was written".into());
    }
    last.ok_or_else(|| "no message".into())
}
