//! The BW tests after the connection (write_bw.c, read_bw.c, atomic_bw.c,
//! send_bw.c): `run_iter_bw` on the client, `run_iter_bw_server` on the
//! server of send_bw, and who prints which report.

use super::clock::{Clock, Phases, State};
use super::completions::{recv_error, send_error};
use super::exchange::BwReport;
use super::params::Verb;
use super::report::{bw_header, bw_line, json_bw, write_json, RESULT_LINE};
use super::session::{sizes, Session};
use super::stats::{bw_report, BwSamples};
use super::waiting::Watch;
use uroce_verbs::{WcStatus, WorkCompletion};

/// `CTX_POLL_BATCH`.
const POLL_BATCH: usize = 16;

pub fn run(s: &mut Session) -> Result<(), String> {
    s.out.print(&bw_header(s.p.report_gbits));
    if s.p.verb == Verb::Send {
        run_send(s)
    } else {
        run_one_sided(s)
    }
}

/// `print_full_bw_report` of one report (ours, or the client's on the server).
fn print_full(s: &mut Session, r: &BwReport) -> Result<(), String> {
    s.out.print(&bw_line(r, s.p.report_gbits));
    write_json(&s.p, &s.info, &json_bw(r, s.p.report_gbits))
}

/// write_bw, read_bw, atomic_bw: the client runs and reports; the server
/// waits and prints the client's report.
fn run_one_sided(s: &mut Session) -> Result<(), String> {
    if s.p.is_server() {
        s.sync()?;
        let theirs = s.comm.xchg_bw_reports(&BwReport::default(), &s.peer)?;
        print_full(s, &theirs)?;
        s.comm.close(&s.my[0])?;
        s.out.print(RESULT_LINE);
        return Ok(());
    }
    let mut last = BwReport::default();
    for size in sizes(s) {
        let samples = run_iter_bw(s, size)?;
        last = bw_report(&samples, s.p.report_gbits);
        print_full(s, &last)?;
    }
    s.out.print(RESULT_LINE);
    s.sync()?;
    s.comm.xchg_bw_reports(&last, &s.peer)?;
    s.comm.close(&s.my[0])
}

/// send_bw: both ends run and print their own report.
fn run_send(s: &mut Session) -> Result<(), String> {
    for size in sizes(s) {
        if s.p.is_server() {
            s.res.post_recvs(&s.p, size, s.p.rx_depth.into())?;
        }
        s.sync()?;
        let samples = if s.p.is_server() { run_iter_bw_server(s, size)? } else { run_iter_bw(s, size)? };
        print_full(s, &bw_report(&samples, s.p.report_gbits))?;
        if s.p.run_all {
            s.sync()?;
        }
    }
    s.out.print(RESULT_LINE);
    s.comm.close(&s.my[0])
}

/// `run_iter_bw`: keeps every send queue full, a completion every `cq_mod`
/// messages, timestamps for the peak.
fn run_iter_bw(s: &mut Session, size: u64) -> Result<BwSamples, String> {
    let mut tx = Sender::new(s, size);
    let mut watch = Watch::new();
    while tx.running() {
        tx.fill(s)?;
        if tx.awaiting() {
            tx.reap(s, &mut watch)?;
        }
    }
    Ok(tx.samples(s))
}

/// The counters and timestamps of `run_iter_bw`.
struct Sender {
    clock: Clock,
    phases: Option<Phases>,
    size: u64,
    tot: u64,
    scnt: Vec<u64>,
    ccnt: Vec<u64>,
    totscnt: u64,
    totccnt: u64,
    counted: u64,
    tposted: Vec<u64>,
    tcompleted: Vec<u64>,
}

impl Sender {
    fn new(s: &Session, size: u64) -> Sender {
        let (p, nq) = (&s.p, s.res.qps.len());
        let tot = p.iters * nq as u64;
        let clock = Clock::new();
        let mut phases = p.duration.map(Phases::new);
        if let Some(ph) = &mut phases {
            ph.begin(&clock);
        }
        let tarr = if p.no_peak { 1 } else { tot as usize };
        let mut tposted = vec![0u64; tarr];
        if p.iterations() && p.no_peak {
            tposted[0] = clock.now();
        }
        let (scnt, ccnt) = (vec![0; nq], vec![0; nq]);
        let tcompleted = vec![0u64; tarr];
        Sender { clock, phases, size, tot, scnt, ccnt, totscnt: 0, totccnt: 0, counted: 0, tposted, tcompleted }
    }

    fn state(&mut self) -> Option<State> {
        let clock = self.clock;
        self.phases.as_mut().map(|ph| ph.tick(&clock))
    }

    fn running(&mut self) -> bool {
        let dur = self.phases.is_some();
        self.totscnt < self.tot || self.totccnt < self.tot || (dur && self.state() != Some(State::End))
    }

    fn awaiting(&self) -> bool {
        self.totccnt < self.tot || (self.phases.is_some() && self.totccnt < self.totscnt)
    }

    /// Posts on every QP while its send queue has room.
    fn fill(&mut self, s: &Session) -> Result<(), String> {
        let p = &s.p;
        let (dur, cq_mod, depth) = (self.phases.is_some(), u64::from(p.cq_mod), u64::from(p.tx_depth));
        for i in 0..self.scnt.len() {
            while (self.scnt[i] < p.iters || dur) && self.scnt[i].wrapping_sub(self.ccnt[i]).wrapping_add(1) <= depth {
                if self.state() == Some(State::End) {
                    break;
                }
                let k = self.scnt[i];
                let signaled = k % cq_mod == cq_mod - 1 || (!dur && k == p.iters - 1);
                if !p.no_peak {
                    self.tposted[self.totscnt as usize] = self.clock.now();
                }
                let wr = s.res.send_wr(p, i, &s.rem[i], self.size, k, signaled);
                s.res.qps[i].post_send(&wr).map_err(|e| format!("Couldn't post send: qp {i} scnt={k}: {e}"))?;
                self.scnt[i] += 1;
                self.totscnt += 1;
            }
        }
        Ok(())
    }

    /// Polls the send CQ once; each completion stands for `cq_mod` messages.
    fn reap(&mut self, s: &Session, watch: &mut Watch) -> Result<(), String> {
        let cq_mod = u64::from(s.p.cq_mod);
        s.wait_event(&s.res.send_cq)?;
        let mut wcs = [WorkCompletion::default(); POLL_BATCH];
        let n = s.res.send_cq.poll(&mut wcs);
        let sampling = self.phases.as_ref().is_some_and(|ph| ph.state == State::Sample);
        for wc in &wcs[..n] {
            if wc.status != WcStatus::Success {
                return Err(send_error(wc, self.totscnt, self.totccnt));
            }
            self.ccnt[wc.wr_id as usize] += cq_mod;
            self.totccnt += cq_mod;
            if !s.p.no_peak {
                self.tcompleted[(self.totccnt.min(self.tot) - 1) as usize] = self.clock.now();
            }
            if sampling {
                self.counted += cq_mod;
            }
        }
        if n == 0 {
            return s.wait(watch);
        }
        watch.progressed();
        Ok(())
    }

    fn samples(mut self, s: &Session) -> BwSamples {
        let p = &s.p;
        if p.iterations() && p.no_peak {
            self.tcompleted[0] = self.clock.now();
        }
        if let Some(ph) = &self.phases {
            (self.tposted[0], self.tcompleted[0]) = ph.sample;
        }
        BwSamples {
            iters: if p.iterations() { p.iters } else { self.counted },
            tposted: self.tposted,
            tcompleted: self.tcompleted,
            num_qps: self.scnt.len() as u64,
            size: self.size,
            cq_mod: p.cq_mod.into(),
            no_peak: p.no_peak,
            duration: !p.iterations(),
        }
    }
}

/// `run_iter_bw_server`: receives, reposting, from the first message to the
/// last (or through the duration, which starts at the first message).
fn run_iter_bw_server(s: &mut Session, size: u64) -> Result<BwSamples, String> {
    let mut rx = Receiver::new(s, size);
    let mut watch = Watch::new();
    while rx.running() {
        s.wait_event(&s.res.recv_cq)?;
        rx.reap(s, &mut watch)?;
    }
    Ok(rx.samples(s))
}

/// The counters of `run_iter_bw_server`.
struct Receiver {
    clock: Clock,
    phases: Option<Phases>,
    size: u64,
    tot: u64,
    rcnt_qp: Vec<u64>,
    posted: Vec<u64>,
    rcnt: u64,
    counted: u64,
    first: Option<u64>,
}

impl Receiver {
    fn new(s: &Session, size: u64) -> Receiver {
        let nq = s.res.qps.len();
        Receiver {
            clock: Clock::new(),
            phases: s.p.duration.map(Phases::new),
            size,
            tot: s.p.iters * nq as u64,
            rcnt_qp: vec![0; nq],
            posted: vec![u64::from(s.p.rx_depth); nq],
            rcnt: 0,
            counted: 0,
            first: None,
        }
    }

    fn running(&mut self) -> bool {
        let clock = self.clock;
        let state = self.phases.as_mut().map(|ph| ph.tick(&clock));
        self.rcnt < self.tot || (self.phases.is_some() && state != Some(State::End))
    }

    /// Polls the receive CQ once and reposts what was used, while more is to come.
    fn reap(&mut self, s: &Session, watch: &mut Watch) -> Result<(), String> {
        let mut wcs = [WorkCompletion::default(); POLL_BATCH];
        let n = s.res.recv_cq.poll(&mut wcs);
        if n == 0 {
            return s.wait(watch);
        }
        watch.progressed();
        if self.first.is_none() {
            self.first = Some(self.clock.now());
            if let Some(ph) = &mut self.phases {
                ph.begin(&self.clock);
            }
        }
        let sampling = self.phases.as_ref().is_some_and(|ph| ph.state == State::Sample);
        let dur = self.phases.is_some();
        for wc in &wcs[..n] {
            let id = wc.wr_id as usize;
            if wc.status != WcStatus::Success {
                return Err(recv_error(wc, self.rcnt_qp.get(id).copied().unwrap_or(0)));
            }
            self.rcnt_qp[id] += 1;
            self.rcnt += 1;
            self.counted += u64::from(sampling);
            if dur || self.posted[id] < s.p.iters {
                let wr = s.res.recv_wr(&s.p, id, self.size, self.posted[id]);
                let rcnt = self.rcnt;
                s.res.qps[id].post_recv(&wr).map_err(|e| format!("Couldn't post recv Qp={id} rcnt={rcnt}: {e}"))?;
                self.posted[id] += 1;
            }
        }
        Ok(())
    }

    fn samples(self, s: &Session) -> BwSamples {
        let (start, end) = match &self.phases {
            Some(ph) => ph.sample,
            None => (self.first.unwrap_or(0), self.clock.now()),
        };
        BwSamples {
            tposted: vec![start],
            tcompleted: vec![end],
            iters: if s.p.iterations() { s.p.iters } else { self.counted },
            num_qps: self.rcnt_qp.len() as u64,
            size: self.size,
            cq_mod: 1,
            no_peak: true,
            duration: !s.p.iterations(),
        }
    }
}
