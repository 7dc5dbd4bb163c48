//! One end of a pingpong: set up, exchange, connect, ping-pong, report.

use super::exchange::{self, Dest, Server};
use super::Params;
use crate::common::CommonArgs;
use std::io::Write;
use std::net::IpAddr;
use std::time::{Duration, Instant};
use uroce_verbs::*;

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// The Q_Key ibv_ud_pingpong uses.
const UD_QKEY: u32 = 0x1111_1111;
/// What a UD receive puts before the data.
const GRH: usize = GRH_LEN;
/// How long to wait for one completion before calling the peer gone.
const STALL: Duration = Duration::from_secs(30);

/// One end's resources; kept until the peer is done too (see [`linger`]).
pub(crate) struct Side {
    ctx: Context,
    pd: Pd,
    mr: Mr,
    cq: Cq,
    channel: Option<CompChannel>,
    qp: Qp,
    ah: Option<Ah>,
    remote_qpn: u32,
}

/// How an end moves its packets. Polling, the application thread drives the
/// engine itself, as a NIC's poller would: one busy thread an end, so two ends
/// fit on two cores. With -e it sleeps on events and a progress thread moves
/// the packets.
pub(crate) fn progress(p: &Params) -> Progress {
    if p.events {
        Progress::Blocking
    } else {
        Progress::Manual
    }
}

/// Runs one end on `ctx` (opened with [`progress`], checked with
/// [`check_params`]); `server` is a listener already bound (for `--loopback`).
pub(crate) fn run(
    p: &Params,
    common: &CommonArgs,
    ctx: Context,
    server: Option<Server>,
    out: &mut dyn Write,
) -> Result<Side, String> {
    let mut side = setup(p, ctx)?;
    let gid = side.ctx.query_gid(p.gid_idx.unwrap_or(1)).map_err(|e| e.to_string())?;
    let mine = Dest { lid: 0, qpn: side.qp.qp_num(), psn: side.qp.initial_psn(), gid };
    let sep = if p.ud { ':' } else { ',' };
    let _ = writeln!(
        out,
        "  local address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}{sep} GID {}",
        mine.lid,
        mine.qpn,
        mine.psn,
        mine.gid_text()
    );
    let theirs = match &p.host {
        Some(host) => {
            // Move packets while the server connects (it may ARP for us).
            let (theirs, ip) = exchange::client(host, p.port, &mine, &mut || {
                side.ctx.progress();
            })?;
            connect(p, &mut side, &mine, &theirs, ip)?;
            theirs
        }
        None => {
            let server = match server {
                Some(s) => s,
                None => Server::bind(p.port)?,
            };
            server.exchange(&mine, |theirs, ip| connect(p, &mut side, &mine, theirs, ip))?.0
        }
    };
    let _ = writeln!(
        out,
        "  remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        theirs.lid,
        theirs.qpn,
        theirs.psn,
        theirs.gid_text()
    );
    // Counters print whatever the outcome: a failed run is when they matter.
    let result = pingpong(p, &side);
    if let Ok(elapsed) = result {
        report(p, elapsed, out);
    }
    common.write_stats("", &side.ctx, out);
    result?;
    // Returned, not dropped: the peer may still need the QP's ACK of its
    // last message (see `linger`).
    Ok(side)
}

/// How long an end keeps answering after its last exchange when packets may be
/// lost: a few of the peer's retransmit timeouts (4.096 us x 2^14 each).
const LINGER: Duration = Duration::from_millis(300);

/// Keeps `side` answering for [`LINGER`] after its last exchange. The peer may
/// still resend its last message — its ACK was lost, or (the kernel rxe) a
/// stale retransmit timer fired — and an end that has already destroyed its QP
/// leaves that peer retrying into nothing (forever, for rxe, whose retry_cnt 7
/// is unlimited). The C tools exit at once; on hardware that race is rare.
pub(crate) fn linger(side: Side, _common: &CommonArgs) {
    let until = Instant::now() + LINGER;
    serve_until(&side, || Instant::now() >= until);
}

/// Keeps the engine of `side` moving (on a manual context nothing else does)
/// until `done` says so, at most [`STALL`].
pub(crate) fn serve_until(side: &Side, done: impl Fn() -> bool) {
    let deadline = Instant::now() + STALL;
    while !done() && Instant::now() < deadline {
        if side.ctx.progress() == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// Refuses, before anything runs, what this device cannot do.
pub(crate) fn check_params(p: &Params, ctx: &Context) -> Result<(), String> {
    if p.ib_port != 1 {
        return Err(format!("IB port {} does not exist: uroce devices have one port (give -i 1)", p.ib_port));
    }
    let port = ctx.query_port();
    let active = port.active_mtu.bytes();
    if u64::from(p.size) > u64::from(port.max_msg_sz) {
        let max = port.max_msg_sz;
        return Err(format!(
            "-s {}: larger than the device's largest message (max_msg_sz {max} bytes): give -s {max} or less",
            p.size
        ));
    }
    if p.ud && p.size > active {
        return Err(format!("Requested size larger than port MTU ({active}): give -s {active} or less"));
    }
    if !p.ud && Mtu::from_bytes(p.mtu).is_none() {
        return Err(format!("-m {}: the path MTU is one of 256, 512, 1024, 2048, 4096", p.mtu));
    }
    if !p.ud && p.mtu > active {
        return Err(format!("path MTU {} is above the device's active MTU {active}: give -m {active} or less", p.mtu));
    }
    if p.rx_depth == 0 || p.iters == 0 {
        return Err("-r and -n must be at least 1".into());
    }
    let dev = ctx.query_device();
    // The CQ holds every receive and the one send.
    let max_rx = dev.max_qp_wr.min(dev.max_cqe - 1);
    if p.rx_depth > max_rx {
        return Err(format!(
            "-r {}: the device's queues hold at most {max_rx} receives: give -r {max_rx} or less",
            p.rx_depth
        ));
    }
    if p.sl > 15 {
        return Err(format!("-l {}: a service level is 0 to 15", p.sl));
    }
    crate::common::source_gid(ctx, "-g", p.gid_idx.unwrap_or(1))?;
    Ok(())
}

/// The buffer both tools start with: 0x7b, and with -c a zero at each page start
/// (what rdma-core's -c checks). Every received message must equal it.
fn initial_buffer(len: usize) -> Vec<u8> {
    let mut buf = vec![0x7b; len];
    buf.iter_mut().step_by(4096).for_each(|b| *b = 0);
    buf
}

fn setup(p: &Params, ctx: Context) -> Result<Side, String> {
    let pd = ctx.alloc_pd();
    let len = p.size as usize + if p.ud { GRH } else { 0 };
    let mr = pd.reg_mr_with(initial_buffer(len.max(1)), AccessFlags::LOCAL_WRITE).map_err(|e| e.to_string())?;
    let channel = if p.events { Some(ctx.create_comp_channel().map_err(|e| e.to_string())?) } else { None };
    let cq = ctx.create_cq(p.rx_depth as usize + 1, channel.as_ref()).map_err(|e| e.to_string())?;
    let mut init = QpInit::new(if p.ud { QpType::Ud } else { QpType::Rc }, &cq, &cq);
    init.cap.max_send_wr = 1;
    init.cap.max_recv_wr = p.rx_depth;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    let qp = pd.create_qp(&init).map_err(|e| format!("Couldn't create QP: {e}"))?;
    let mut c = ConnectAttr::new(0, 0, Gid::default());
    c.access = AccessFlags::EMPTY;
    c.qkey = UD_QKEY;
    qp.to_init(&c).map_err(|e| format!("Failed to modify QP to INIT: {e}"))?;
    let side = Side { ctx, pd, mr, cq, channel, qp, ah: None, remote_qpn: 0 };
    post_recvs(p, &side, p.rx_depth)?;
    if let Some(_ch) = &side.channel {
        side.cq.req_notify(false).map_err(|e| e.to_string())?;
    }
    Ok(side)
}

fn post_recvs(p: &Params, side: &Side, n: u32) -> Result<(), String> {
    let len = p.size + if p.ud { GRH as u32 } else { 0 };
    let wr = RecvWr { wr_id: RECV_WRID, sg_list: side.mr.sge(0, len).into() };
    for i in 0..n {
        side.qp.post_recv(&wr).map_err(|e| format!("Couldn't post receive ({i}): {e}"))?;
    }
    Ok(())
}

/// RTR and RTS with the C tools' attributes; a peer that sent no GID is reached
/// at its TCP address.
fn connect(p: &Params, side: &mut Side, mine: &Dest, theirs: &Dest, tcp_peer: IpAddr) -> Result<(), String> {
    let dgid = if theirs.gid == Gid::default() { Gid::from_ip(tcp_peer) } else { theirs.gid };
    let mut c = ConnectAttr::new(theirs.qpn, theirs.psn, dgid);
    c.sq_psn = Some(mine.psn);
    c.sgid_index = p.gid_idx.unwrap_or(1) as u8;
    c.path_mtu = Mtu::from_bytes(p.mtu).unwrap_or(Mtu::Mtu1024);
    c.max_dest_rd_atomic = 1;
    c.max_rd_atomic = 1;
    c.qkey = UD_QKEY;
    side.qp.to_rtr(&c).map_err(|e| format!("Failed to modify QP to RTR: {e}"))?;
    side.qp.to_rts(&c).map_err(|e| format!("Failed to modify QP to RTS: {e}"))?;
    if p.ud {
        side.ah = Some(side.pd.create_ah(dgid));
        side.remote_qpn = theirs.qpn;
    }
    Ok(())
}

fn post_send(p: &Params, side: &Side) -> Result<(), String> {
    let offset = if p.ud { GRH } else { 0 };
    let mut wr = SendWr::new(SEND_WRID, WrOp::Send, vec![side.mr.sge(offset, p.size)]);
    if let Some(ah) = &side.ah {
        wr.ud = Some(ah.dest(side.remote_qpn, UD_QKEY));
    }
    side.qp.post_send(&wr).map_err(|e| format!("Couldn't post send: {e}"))
}

/// The loop of the C tools: one send in flight, receives reposted when all but
/// one are used; the client sends first. Returns the time it took.
fn pingpong(p: &Params, side: &Side) -> Result<Duration, String> {
    let client = p.host.is_some();
    let mut pending = RECV_WRID;
    if client {
        post_send(p, side)?;
        pending |= SEND_WRID;
    }
    let expected = initial_buffer(p.size as usize + if p.ud { GRH } else { 0 });
    let (mut rcnt, mut scnt, mut routs) = (0u32, 0u32, p.rx_depth);
    let start = Instant::now();
    let mut wcs = [WorkCompletion::default(); 2];
    while rcnt < p.iters || scnt < p.iters {
        let n = next_completions(side, &mut wcs)?;
        for wc in &wcs[..n] {
            if wc.status != WcStatus::Success {
                let hint = match (wc.status, side.ctx.unresolved_neighbour()) {
                    (WcStatus::RetryExcErr, Some(why)) => format!(": {why}"),
                    _ => hint(wc.status).to_string(),
                };
                return Err(format!("Failed status {} ({}) for wr_id {}{hint}", wc.status, wc.status as u32, wc.wr_id));
            }
            match wc.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    routs -= 1;
                    if routs <= 1 {
                        post_recvs(p, side, p.rx_depth - routs)?;
                        routs = p.rx_depth;
                    }
                    rcnt += 1;
                    if p.check {
                        verify(p, side, &expected, rcnt)?;
                    }
                }
                other => return Err(format!("Completion for unknown wr_id {other}")),
            }
            pending &= !wc.wr_id;
            if scnt < p.iters && pending == 0 {
                post_send(p, side)?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    Ok(start.elapsed())
}

/// How long a polling loop spins with nothing moving before it starts yielding
/// the CPU between polls: a peer that answers does so well within it, and one
/// that waits for a retransmit timeout (67 ms) need not hold a core meanwhile.
const SPIN_BEFORE_YIELD: Duration = Duration::from_millis(1);

/// Waits for completions: by polling (driving the engine), or (-e) by sleeping
/// on the channel.
fn next_completions(side: &Side, wcs: &mut [WorkCompletion]) -> Result<usize, String> {
    let deadline = Instant::now() + STALL;
    let mut last_moved = Instant::now();
    loop {
        // An arm fires for the next completion only: a poll may have left some.
        if let Some(ch) = side.channel.as_ref().filter(|_| side.cq.pending() == 0) {
            let left = deadline.saturating_duration_since(Instant::now());
            let cq = ch.get_cq_event(left).map_err(|_| stalled())?;
            cq.req_notify(false).map_err(|e| e.to_string())?;
        }
        let n = side.cq.poll(wcs);
        if n > 0 {
            return Ok(n);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(stalled());
        }
        if side.channel.is_none() {
            if side.ctx.progress() > 0 {
                last_moved = now;
            } else if now - last_moved > SPIN_BEFORE_YIELD {
                std::thread::yield_now();
            }
        }
    }
}

fn stalled() -> String {
    format!("no completion for {} s: the peer stopped (or was never there); run the server first", STALL.as_secs())
}

fn verify(p: &Params, side: &Side, expected: &[u8], n: u32) -> Result<(), String> {
    let at = if p.ud { GRH } else { 0 };
    let mut got = vec![0; p.size as usize];
    side.mr.read(at, &mut got);
    match got.iter().zip(&expected[at..]).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(i) => Err(format!("received data of exchange {n} differs at byte {i}: 0x{:02x}", got[i])),
    }
}

/// One line on what a failed status usually means here.
fn hint(status: WcStatus) -> &'static str {
    match status {
        WcStatus::RetryExcErr => ": the peer does not answer (is it running, and reachable over the -d device?)",
        WcStatus::RnrRetryExcErr => ": the peer had no receive posted",
        _ => "",
    }
}

fn report(p: &Params, elapsed: Duration, out: &mut dyn Write) {
    let usec = elapsed.as_secs_f64() * 1e6;
    let bytes = u64::from(p.size) * u64::from(p.iters) * 2;
    let _ = writeln!(out, "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec", usec / 1e6, bytes as f64 * 8.0 / usec);
    let _ =
        writeln!(out, "{} iters in {:.2} seconds = {:.2} usec/iter", p.iters, usec / 1e6, usec / f64::from(p.iters));
}
