//! The latency tests after the connection (write_lat.c, read_lat.c,
//! atomic_lat.c, send_lat.c): `run_iter_lat_write` (each end polls the last
//! byte the other writes), `run_iter_lat` (READ or atomic round trips) and
//! `run_iter_lat_send` (SEND ping-pong).

use super::clock::{Clock, Phases, State};
use super::completions::{recv_error, send_error};
use super::params::TestName;
use super::report::{json_lat, json_lat_duration, lat_duration_line, lat_header, lat_lines, write_json, RESULT_LINE};
use super::session::{sizes, Session};
use super::stats::{lat_duration_report, lat_report, LatSamples};
use super::waiting::Watch;
use uroce_verbs::{WcStatus, WorkCompletion};

pub fn run(s: &mut Session) -> Result<(), String> {
    match s.p.test {
        TestName::WriteLat => write_lat(s),
        TestName::SendLat => send_lat(s),
        _ => read_lat(s),
    }
}

fn header(s: &mut Session) {
    let h = lat_header(s.p.iterations());
    s.out.print(&h);
}

/// `print_report_lat` or, with -D, `print_report_lat_duration`.
fn report(s: &mut Session, samples: &LatSamples) -> Result<(), String> {
    let p = &s.p;
    let (line, json) = if p.iterations() {
        let r = lat_report(samples);
        (lat_lines(&r, p.unsorted, p.histogram, true), json_lat(&r))
    } else {
        let (latency, tps) = lat_duration_report(samples);
        let line = lat_duration_line(samples.size, samples.iters, latency, tps);
        (line, json_lat_duration(samples.size, samples.iters, latency, tps))
    };
    s.out.print(&line);
    write_json(&s.p, &s.info, &json)
}

/// write_lat: both ends run and report; no closing handshake.
fn write_lat(s: &mut Session) -> Result<(), String> {
    header(s);
    for size in sizes(s) {
        let samples = run_iter_lat_write(s, size)?;
        report(s, &samples)?;
    }
    s.out.print(RESULT_LINE);
    s.linger();
    Ok(())
}

/// read_lat, atomic_lat: the server only waits for the end.
fn read_lat(s: &mut Session) -> Result<(), String> {
    if s.p.is_server() {
        s.comm.close(&s.my[0])?;
        s.out.print(RESULT_LINE);
        return Ok(());
    }
    header(s);
    for size in sizes(s) {
        let samples = run_iter_lat(s, size)?;
        report(s, &samples)?;
    }
    s.comm.close(&s.my[0])?;
    s.out.print(RESULT_LINE);
    Ok(())
}

/// send_lat: receives posted, a barrier, then the ping-pong, every size.
fn send_lat(s: &mut Session) -> Result<(), String> {
    header(s);
    for size in sizes(s) {
        s.res.post_recvs(&s.p, size, s.p.rx_depth.into())?;
        s.sync()?;
        let samples = run_iter_lat_send(s, size)?;
        report(s, &samples)?;
    }
    s.out.print(RESULT_LINE);
    s.comm.close(&s.my[0])
}

/// What the three loops share: the clock, the duration phases, the samples.
struct Lat {
    clock: Clock,
    phases: Option<Phases>,
    tposted: Vec<u64>,
    counted: u64,
}

impl Lat {
    fn new(s: &Session, begin: bool) -> Lat {
        let clock = Clock::new();
        let mut phases = s.p.duration.map(Phases::new);
        if let (true, Some(ph)) = (begin, &mut phases) {
            ph.begin(&clock);
        }
        Lat { clock, phases, tposted: vec![0; s.p.iters as usize], counted: 0 }
    }
    fn state(&mut self) -> Option<State> {
        let clock = self.clock;
        self.phases.as_mut().map(|ph| ph.tick(&clock))
    }
    fn ended(&mut self) -> bool {
        self.state() == Some(State::End)
    }
    fn count(&mut self) {
        if self.phases.as_ref().is_some_and(|ph| ph.state == State::Sample) {
            self.counted += 1;
        }
    }
    fn stamp(&mut self, k: u64) {
        if let Some(t) = self.tposted.get_mut(k as usize) {
            *t = self.clock.now();
        }
    }
    fn samples(self, s: &Session, size: u64, rtt_factor: u32) -> LatSamples {
        let iters = if s.p.iterations() { s.p.iters } else { self.counted };
        let sample = self.phases.map(|ph| ph.sample);
        LatSamples { tposted: self.tposted, iters, size, rtt_factor, sample }
    }
}

/// Waits for our own send's completion; an error status ends the test.
fn send_done(s: &Session, scnt: u64, ccnt: u64, watch: Watch) -> Result<WorkCompletion, String> {
    let wc = s.wait_one(&s.res.send_cq, watch)?;
    if wc.status != WcStatus::Success {
        return Err(send_error(&wc, scnt, ccnt));
    }
    Ok(wc)
}

/// `run_iter_lat_write`: the server writes first; each end waits for the
/// byte the other wrote last before writing again.
fn run_iter_lat_write(s: &mut Session, size: u64) -> Result<LatSamples, String> {
    let (iters, dur, server) = (s.p.iters, s.p.duration.is_some(), s.p.is_server());
    let post_off = s.res.layout.send_off(0) + size - 1;
    let poll_off = s.res.layout.target_off(0) + size - 1;
    let mut lat = Lat::new(s, true);
    let (mut scnt, mut ccnt, mut rcnt) = (0u64, 0u64, 0u64);
    loop {
        let running = dur && lat.state() != Some(State::End);
        if !(scnt < iters || ccnt < iters || rcnt < iters || running) {
            break;
        }
        if (rcnt < iters || dur) && !(scnt < 1 && server) {
            rcnt += 1;
            let mut watch = Watch::new();
            while s.res.read_byte(poll_off) != rcnt as u8 && !lat.ended() {
                s.wait(&mut watch)?;
            }
        }
        if scnt < iters || dur {
            lat.stamp(scnt);
            scnt += 1;
            s.res.write_byte(post_off, scnt as u8);
            let wr = s.res.send_wr(&s.p, 0, &s.rem[0], size, 0, true);
            s.res.qps[0].post_send(&wr).map_err(|e| format!("Couldn't post send: scnt={scnt}: {e}"))?;
        }
        if dur && lat.ended() {
            break;
        }
        if ccnt < iters || dur {
            // The peer may be done and gone while our last ACK is resent.
            send_done(s, scnt, ccnt, Watch::stall_only())?;
            ccnt += 1;
            lat.count();
        }
    }
    Ok(lat.samples(s, size, 2))
}

/// `run_iter_lat`: one READ or atomic at a time, timed post to post.
fn run_iter_lat(s: &mut Session, size: u64) -> Result<LatSamples, String> {
    let (iters, dur) = (s.p.iters, s.p.duration.is_some());
    let mut lat = Lat::new(s, true);
    let mut scnt = 0u64;
    while scnt < iters || (dur && !lat.ended()) {
        if !dur {
            lat.stamp(scnt);
            scnt += 1;
        }
        let wr = s.res.send_wr(&s.p, 0, &s.rem[0], size, 0, true);
        s.res.qps[0].post_send(&wr).map_err(|e| format!("Couldn't post send: scnt={scnt}: {e}"))?;
        if dur && lat.ended() {
            break;
        }
        send_done(s, scnt, scnt, Watch::new())?;
        lat.count();
    }
    Ok(lat.samples(s, size, 1))
}

/// `run_iter_lat_send`: the client sends first; each end answers a receive
/// with a send. The duration starts at the first receive.
fn run_iter_lat_send(s: &mut Session, size: u64) -> Result<LatSamples, String> {
    let (iters, dur, client) = (s.p.iters, s.p.duration.is_some(), !s.p.is_server());
    let (cq_mod, rx_depth) = (u64::from(s.p.cq_mod), u64::from(s.p.rx_depth));
    let mut lat = Lat::new(s, false);
    let (mut scnt, mut rcnt) = (0u64, 0u64);
    loop {
        let running = dur && lat.state() != Some(State::End);
        if !(scnt < iters || rcnt < iters || running) {
            break;
        }
        if (rcnt < iters || dur) && !(scnt < 1 && client) && !receive(s, &mut lat, size, &mut rcnt, rx_depth)? {
            break;
        }
        if scnt < iters || (dur && !lat.ended()) {
            lat.stamp(scnt);
            scnt += 1;
            let signaled = scnt % cq_mod == 0 || (!dur && scnt == iters);
            let wr = s.res.send_wr(&s.p, 0, &s.rem[0], size, 0, signaled);
            s.res.qps[0].post_send(&wr).map_err(|e| format!("Couldn't post send: scnt={scnt}: {e}"))?;
            if signaled {
                send_done(s, scnt, scnt, Watch::new())?;
            }
        }
    }
    Ok(lat.samples(s, size, 2))
}

/// One receive of `run_iter_lat_send`, reposted while more are to come;
/// false when the duration ended while waiting.
fn receive(s: &mut Session, lat: &mut Lat, size: u64, rcnt: &mut u64, rx_depth: u64) -> Result<bool, String> {
    let mut wc = [WorkCompletion::default()];
    let mut watch = Watch::new();
    loop {
        if lat.ended() {
            return Ok(false);
        }
        s.wait_event(&s.res.recv_cq)?;
        if s.res.recv_cq.poll(&mut wc) == 1 {
            break;
        }
        s.wait(&mut watch)?;
    }
    if let Some(ph) = &mut lat.phases {
        ph.begin(&lat.clock);
    }
    if wc[0].status != WcStatus::Success {
        return Err(recv_error(&wc[0], *rcnt));
    }
    *rcnt += 1;
    lat.count();
    if s.p.duration.is_some() || *rcnt + rx_depth <= s.p.iters {
        let id = wc[0].wr_id as usize;
        let wr = s.res.recv_wr(&s.p, id, size, 0);
        s.res.qps[id].post_recv(&wr).map_err(|e| format!("Couldn't post recv: rcnt={rcnt}: {e}"))?;
    }
    Ok(true)
}
