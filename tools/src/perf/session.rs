//! One end of a test, up to the first message: the TCP exchange in perftest's
//! order (versions, page and cache-line sizes, MTU), the resources, the
//! header, and the handshakes that connect the QPs and print their addresses.

use super::agree;
use super::dest::Dest;
use super::exchange::{Comm, Peer};
use super::params::{Conn, Params, TestName, Verb};
use super::report::{dest_lines, test_info, Info, Out, RESULT_LINE, WAITING};
use super::resources::Resources;
use super::waiting::{idle, Watch, STALL};
use std::net::TcpListener;
use std::time::Instant;
use uroce_verbs::{Context, Cq, Gid, Mtu, Progress, WorkCompletion};

/// How this end reaches the other.
pub enum Connector {
    Listen(TcpListener),
    Connect {
        host: String,
        port: u16,
    },
    /// `-R`/`-z`: over rdma_cm, as the client of `host` or, without, the server.
    RdmaCm {
        host: Option<String>,
        port: u16,
    },
}

/// An end with its QPs connected.
pub struct Session {
    pub p: Params,
    pub out: Out,
    pub comm: Comm,
    pub peer: Peer,
    pub res: Resources,
    pub info: Info,
    pub my: Vec<Dest>,
    pub rem: Vec<Dest>,
    /// `-R`: the QPs' rdma_cm connections, disconnected at the end.
    pub cm: Option<super::rdma_cm::TestConns>,
}

/// `set_up_connection`'s GID: `-x`, or the first IPv4 one (`get_best_gid_index`).
pub fn choose_gid(ctx: &Context, p: &Params) -> Result<(u8, Gid), String> {
    let len = ctx.query_port().gid_tbl_len as usize;
    if let Some(x) = p.gid_index {
        let gid = crate::common::source_gid(ctx, "-x", x.into())?;
        return Ok((x, gid));
    }
    // perftest's choice among the GIDs this device can send from.
    let sendable: Vec<usize> = (0..len).filter(|&i| ctx.source_gid(i).is_ok()).collect();
    let is_v4 = |i: usize| ctx.query_gid(i).ok().and_then(|g| g.ipv4()).is_some();
    let mut best = *sendable.first().ok_or_else(|| format!("{} has no GID to send from", ctx.link_info().name))?;
    for i in sendable {
        if (is_v4(i) && !is_v4(best) && !p.ipv6) || (!is_v4(i) && is_v4(best) && p.ipv6) {
            best = i;
        }
    }
    let gid = ctx.query_gid(best).map_err(|e| e.to_string())?;
    Ok((best as u8, gid))
}

/// Opens the exchange and agrees on everything the QPs need.
pub fn setup(mut p: Params, ctx: &Context, conn: Connector, mut out: Out) -> Result<Session, String> {
    p.apply_device(&ctx.query_device());
    let (gid_index, gid) = choose_gid(ctx, &p)?;
    for note in &p.notes {
        out.print(RESULT_LINE);
        out.print(note);
    }
    let mut comm = match conn {
        Connector::Listen(l) => {
            out.print(WAITING);
            Comm::accept(l)?
        }
        Connector::Connect { host, port } => Comm::connect(&host, port, p.test.name())?,
        Connector::RdmaCm { host, port } => {
            if host.is_none() {
                out.print(WAITING);
            }
            super::rdma_cm::comm(ctx, host.as_deref(), port, &p)?
        }
    };
    let (peer, mtu) = agree_on_link(&mut p, ctx, &mut comm, &mut out)?;
    ud_size(&mut p, u64::from(mtu.bytes()), &mut out)?;
    let mut res = Resources::new(ctx, &p)?;
    if ctx.progress_mode() == Progress::Manual {
        let c = ctx.clone();
        comm.set_idle(Box::new(move || idle(&c)));
    }
    let cm = if p.rdma_cm { Some(super::rdma_cm::connect_qps(&mut res, &p, &mut comm)?) } else { None };
    let my = res.my_dests(&p, gid);
    let info = Info { device: ctx.link_info().name.clone(), mtu, gid_index };
    out.print(&test_info(&p, &info));
    let rem = vec![Dest::default(); my.len()];
    Ok(Session { p, out, comm, peer, res, info, my, rem, cm })
}

/// perftest's exchanges before the QPs (`exchange_versions`,
/// `check_sys_data`, `check_mtu`), with, between two uroce ends, the check
/// that the test parameters agree.
fn agree_on_link(p: &mut Params, ctx: &Context, comm: &mut Comm, out: &mut Out) -> Result<(Peer, Mtu), String> {
    let peer = comm.exchange_versions()?;
    let (local_mtu, mtu_note) = p.set_mtu(ctx.query_port().active_mtu);
    let asked = p.mtu.map(|_| local_mtu.bytes());
    let asked_there = if peer.uroce {
        let theirs = comm.exchange_block(&agree::describe(p, asked), agree::BLOCK_LEN, "the test parameters")?;
        agree::check(p, asked, &theirs)?
    } else {
        None
    };
    (p.cycle_buffer, p.cache_line) = comm.exchange_sys_data(&peer, p.cycle_buffer, p.cache_line)?;
    if let Some(n) = mtu_note {
        out.print(&n);
    }
    let mtu = comm.exchange_mtu(&peer, local_mtu)?;
    agree::check_mtu(asked, asked_there, mtu.bytes())?;
    Ok((peer, mtu))
}

/// `check_mtu`: a UD message must fit in one packet.
fn ud_size(p: &mut Params, mtu: u64, out: &mut Out) -> Result<(), String> {
    if p.conn != Conn::Ud || p.size <= mtu {
        return Ok(());
    }
    check_ud_size(p, mtu)?;
    out.warn(&format!(" Max msg size in UD is MTU {mtu}\n Changing to this MTU\n"));
    p.size = mtu;
    Ok(())
}

/// A UD message asked for with -s must fit in one packet of `mtu` bytes.
pub fn check_ud_size(p: &Params, mtu: u64) -> Result<(), String> {
    if p.conn != Conn::Ud || p.size <= mtu || p.run_all || !p.req_size {
        return Ok(());
    }
    Err(format!("Max message size in UD cannot be greater than MTU ({mtu}): give -s {mtu} or less"))
}

/// The message sizes of a run: the one given, or with -a 2 to 2^23 (to the
/// MTU for UD).
pub fn sizes(s: &Session) -> Vec<u64> {
    let p = &s.p;
    if !p.run_all {
        return vec![p.size];
    }
    let max_pow = if p.conn == Conn::Ud { u64::from(s.info.mtu.bytes()).ilog2() + 1 } else { 24 };
    (1..max_pow).map(|i| 1u64 << i).collect()
}

impl Session {
    /// The handshakes around `ctx_connect`, in the order of each perftest
    /// program, printing the local and the remote addresses.
    pub fn connect(&mut self) -> Result<(), String> {
        let test = self.p.test;
        let sends = self.p.verb == Verb::Send;
        if matches!(test, TestName::WriteLat | TestName::ReadLat | TestName::AtomicLat) {
            self.comm.hand_shake(&self.my[0])?;
        }
        for i in 0..self.my.len() {
            self.rem[i] = self.comm.hand_shake(&self.my[i])?;
        }
        let v4 = |g: [u8; 16]| Gid(g).ipv4().is_some();
        if !self.p.rdma_cm && v4(self.my[0].gid) != v4(self.rem[0].gid) {
            return Err("Found Incompatibility issue with GID types: one end uses an IPv4 GID, the other an IPv6 one: give both ends --ipv6 (or neither), or matching -x".into());
        }
        let (mtu, gid_index) = (self.info.mtu, self.info.gid_index);
        // With -R rdma_cm connected the QPs.
        if !self.p.rdma_cm {
            self.res.connect(&self.p, mtu, gid_index, &self.my, &self.rem)?;
        }
        if sends {
            self.comm.hand_shake(&self.my[0])?;
        }
        for d in &self.my {
            self.out.print(&dest_lines(self.p.verb, "local", d));
        }
        for i in 0..self.my.len() {
            self.rem[i] = self.comm.hand_shake(&self.my[i])?;
            self.out.print(&dest_lines(self.p.verb, "remote", &self.rem[i]));
        }
        if !sends {
            self.comm.hand_shake(&self.my[0])?;
        }
        if self.p.use_event {
            self.res.send_cq.req_notify(false).map_err(|e| e.to_string())?;
            self.res.recv_cq.req_notify(false).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    pub fn idle(&self) {
        idle(&self.res.ctx);
    }

    /// Idles once in a wait for the peer, failing as [`Watch`] says.
    pub fn wait(&self, watch: &mut Watch) -> Result<(), String> {
        watch.check(&self.comm)?;
        self.idle();
        Ok(())
    }

    /// The end of a test without a closing handshake (write_lat): tell the
    /// peer we are done, and keep answering it (its last ACK may need a
    /// retransmission) until it is done too.
    pub fn linger(&mut self) {
        self.comm.finish_sending();
        let since = Instant::now();
        while !self.comm.peer_closed() && since.elapsed() < STALL {
            for _ in 0..100 {
                self.idle();
            }
        }
    }

    /// `ctx_hand_shake` on the first QP: a barrier between the two ends.
    pub fn sync(&mut self) -> Result<(), String> {
        self.comm.hand_shake(&self.my[0]).map(|_| ())
    }

    /// With -e, waits for a completion event and re-arms its CQ
    /// (`ctx_notify_events`), unless `cq` holds completions already (an arm
    /// fires for the next completion only, as on a NIC, and a poll may have
    /// left some); without -e, does nothing.
    pub fn wait_event(&self, cq: &Cq) -> Result<(), String> {
        let Some(ch) = &self.res.channel else { return Ok(()) };
        if cq.pending() > 0 {
            return Ok(());
        }
        let cq = ch.get_cq_event(STALL).map_err(|_| format!("no completion event for {} s", STALL.as_secs()))?;
        cq.req_notify(false).map_err(|e| e.to_string())
    }

    /// Polls `cq` until one completion arrives (with -e, after an event).
    pub fn wait_one(&self, cq: &Cq, mut watch: Watch) -> Result<WorkCompletion, String> {
        let mut wc = [WorkCompletion::default()];
        loop {
            self.wait_event(cq)?;
            if cq.poll(&mut wc) == 1 {
                return Ok(wc[0]);
            }
            self.wait(&mut watch)?;
        }
    }
}
