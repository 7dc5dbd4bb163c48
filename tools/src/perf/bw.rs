//! The BW tests after the connection (write_bw.c, read_bw.c, atomic_bw.c,
//! send_bw.c): `run_iter_bw` on the client, `run_iter_bw_server` on the
//! server of send_bw, and who prints which report.

use super::clock::{Clock, Phases, State};
use super::exchange::BwReport;
use super::params::{Conn, Verb, RESULT_LINE};
use super::report::{bw_header, bw_line, json_bw, write_json};
use super::session::{blank_wc, recv_error, send_error, Session, Watch};
use super::stats::{bw_report, BwSamples};
use uroce_verbs::WcStatus;

/// `CTX_POLL_BATCH`.
const POLL_BATCH: usize = 16;

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
    let p = s.p.clone();
    let (nq, iters, cq_mod, dur) = (s.res.qps.len(), p.iters, u64::from(p.cq_mod), p.duration.is_some());
    let tot = iters * nq as u64;
    let clock = Clock::new();
    let mut phases = p.duration.map(Phases::new);
    if let Some(ph) = &mut phases {
        ph.begin(&clock);
    }
    let tarr = if p.no_peak { 1 } else { tot as usize };
    let (mut tp, mut tc) = (vec![0u64; tarr], vec![0u64; tarr]);
    let (mut scnt, mut ccnt) = (vec![0u64; nq], vec![0u64; nq]);
    let (mut totscnt, mut totccnt, mut counted) = (0u64, 0u64, 0u64);
    if !dur && p.no_peak {
        tp[0] = clock.now();
    }
    let mut wcs = [blank_wc(); POLL_BATCH];
    let mut watch = Watch::new();
    loop {
        let state = phases.as_mut().map(|ph| ph.tick(&clock));
        if !(totscnt < tot || totccnt < tot || (dur && state != Some(State::End))) {
            break;
        }
        for i in 0..nq {
            while (scnt[i] < iters || dur) && scnt[i].wrapping_sub(ccnt[i]).wrapping_add(1) <= u64::from(p.tx_depth) {
                if phases.as_mut().map(|ph| ph.tick(&clock)) == Some(State::End) {
                    break;
                }
                let k = scnt[i];
                let signaled = k % cq_mod == cq_mod - 1 || (!dur && k == iters - 1);
                if !p.no_peak {
                    tp[totscnt as usize] = clock.now();
                }
                let wr = s.res.send_wr(&p, i, &s.rem[i], size, k, signaled);
                s.res.qps[i].post_send(&wr).map_err(|e| format!("Couldn't post send: qp {i} scnt={k}: {e}"))?;
                scnt[i] += 1;
                totscnt += 1;
            }
        }
        if totccnt < tot || (dur && totccnt < totscnt) {
            s.wait_event()?;
            let n = s.res.send_cq.poll(&mut wcs);
            let sampling = phases.as_ref().is_some_and(|ph| ph.state == State::Sample);
            for wc in &wcs[..n] {
                if wc.status != WcStatus::Success {
                    return Err(send_error(wc, totscnt, totccnt));
                }
                ccnt[wc.wr_id as usize] += cq_mod;
                totccnt += cq_mod;
                if !p.no_peak {
                    tc[(totccnt.min(tot) - 1) as usize] = clock.now();
                }
                if sampling {
                    counted += cq_mod;
                }
            }
            if n == 0 {
                s.wait(&mut watch)?;
            } else {
                watch.progressed();
            }
        }
    }
    if !dur && p.no_peak {
        tc[0] = clock.now();
    }
    if let Some(ph) = &phases {
        (tp[0], tc[0]) = ph.sample;
    }
    let iters = if dur { counted } else { iters };
    Ok(BwSamples {
        tposted: tp,
        tcompleted: tc,
        iters,
        num_qps: nq as u64,
        size,
        cq_mod,
        no_peak: p.no_peak,
        duration: dur,
    })
}

/// `run_iter_bw_server`: receives, reposting, from the first message to the
/// last (or through the duration, which starts at the first message).
fn run_iter_bw_server(s: &mut Session, size: u64) -> Result<BwSamples, String> {
    let p = s.p.clone();
    let (nq, iters, dur) = (s.res.qps.len(), p.iters, p.duration.is_some());
    let tot = iters * nq as u64;
    let clock = Clock::new();
    let mut phases = p.duration.map(Phases::new);
    let (mut rcnt_qp, mut posted) = (vec![0u64; nq], vec![u64::from(p.rx_depth); nq]);
    let (mut rcnt, mut counted, mut first) = (0u64, 0u64, None);
    let mut wcs = [blank_wc(); POLL_BATCH];
    let mut watch = Watch::new();
    loop {
        let state = phases.as_mut().map(|ph| ph.tick(&clock));
        if !(rcnt < tot || (dur && state != Some(State::End))) {
            break;
        }
        s.wait_event()?;
        let n = s.res.recv_cq.poll(&mut wcs);
        if n == 0 {
            s.wait(&mut watch)?;
            continue;
        }
        watch.progressed();
        if first.is_none() {
            first = Some(clock.now());
            if let Some(ph) = &mut phases {
                ph.begin(&clock);
            }
        }
        let sampling = phases.as_ref().is_some_and(|ph| ph.state == State::Sample);
        for wc in &wcs[..n] {
            let id = wc.wr_id as usize;
            if wc.status != WcStatus::Success {
                return Err(recv_error(wc, rcnt_qp.get(id).copied().unwrap_or(0)));
            }
            rcnt_qp[id] += 1;
            rcnt += 1;
            counted += u64::from(sampling);
            if dur || posted[id] < iters {
                let wr = s.res.recv_wr(&p, id, size, posted[id]);
                s.res.qps[id].post_recv(&wr).map_err(|e| format!("Couldn't post recv Qp={id} rcnt={rcnt}: {e}"))?;
                posted[id] += 1;
            }
        }
    }
    let (mut tp, mut tc) = (vec![first.unwrap_or(0)], vec![clock.now()]);
    if let Some(ph) = &phases {
        (tp[0], tc[0]) = ph.sample;
    }
    let iters = if dur { counted } else { iters };
    Ok(BwSamples {
        tposted: tp,
        tcompleted: tc,
        iters,
        num_qps: nq as u64,
        size,
        cq_mod: 1,
        no_peak: true,
        duration: dur,
    })
}
