//! perftest's arithmetic on the timestamps of a run (`print_report_bw`,
//! `print_report_lat`, `print_report_lat_duration`), with nanoseconds from
//! the monotonic clock where perftest has CPU cycles.

use super::exchange::BwReport;

/// Nanoseconds in a second and in a microsecond: what perftest's
/// `cycles_to_units` are for a clock counting nanoseconds.
const NS_PER_S: f64 = 1e9;
const NS_PER_US: f64 = 1e3;

/// The timestamps of a BW run (`tposted`, `tcompleted`, in ns from the start).
#[derive(Debug, Clone, Default)]
pub struct BwSamples {
    pub tposted: Vec<u64>,
    pub tcompleted: Vec<u64>,
    /// `user_param->iters`: per QP, or counted during the sample in duration mode.
    pub iters: u64,
    pub num_qps: u64,
    pub size: u64,
    pub cq_mod: u64,
    pub no_peak: bool,
    pub duration: bool,
}

/// `print_report_bw`: peak and average BW (MiB/s, or Gb/s) and message rate (Mpps).
pub fn bw_report(s: &BwSamples, gbits: bool) -> BwReport {
    let n = if s.duration { s.iters } else { s.iters * s.num_qps };
    let first = |v: &[u64]| v.first().copied().unwrap_or(0);
    let opt_delta = if s.no_peak { span(first(&s.tcompleted), first(&s.tposted)) } else { peak_delta(s, n) };
    let location = if s.no_peak { 0 } else { n.saturating_sub(1) as usize };
    let sum = span(s.tcompleted.get(location).copied().unwrap_or(0), first(&s.tposted));
    let format_factor = if gbits { 125_000_000.0 } else { 1_048_576.0 };
    let bw_avg = (s.size as f64 * n as f64 * NS_PER_S) / (sum * format_factor);
    let msg_rate = (n as f64 * NS_PER_S) / (sum * 1e6);
    let bw_peak = if s.no_peak { 0.0 } else { (s.size as f64 * NS_PER_S) / (opt_delta * format_factor) };
    BwReport { size: s.size, iters: n, bw_peak, bw_avg, msg_rate }
}

/// `b - a` as a float; an unset (earlier) end is infinitely long, as perftest's
/// unsigned wrap-around makes it.
fn span(b: u64, a: u64) -> f64 {
    b.checked_sub(a).map_or(f64::INFINITY, |d| d as f64)
}

/// The shortest time per message between any post and a later completion
/// (perftest's peak search, over the completions it timestamps).
fn peak_delta(s: &BwSamples, n: u64) -> f64 {
    let cq_mod = s.cq_mod.max(1);
    let mut best = span(s.tcompleted.first().copied().unwrap_or(0), s.tposted.first().copied().unwrap_or(0));
    let at = |v: &[u64], i: u64| v.get(i as usize).copied().unwrap_or(0);
    for i in 0..n {
        let mut j = (i + 1).div_ceil(cq_mod) * cq_mod - 1;
        while j < n {
            best = best.min(span(at(&s.tcompleted, j), at(&s.tposted, i)) / (j - i + 1) as f64);
            j += cq_mod;
        }
        if !n.is_multiple_of(cq_mod) {
            let j = n - 1;
            best = best.min(span(at(&s.tcompleted, j), at(&s.tposted, i)) / (j - i + 1) as f64);
        }
    }
    best
}

/// What a latency run measured.
#[derive(Debug, Clone, Default)]
pub struct LatSamples {
    /// Post times, one per iteration (ns).
    pub tposted: Vec<u64>,
    pub iters: u64,
    pub size: u64,
    /// 2 for the ping-pong tests (a sample is a round trip), 1 for READ and atomics.
    pub rtt_factor: u32,
    /// Duration mode: the start and end of the sample (ns).
    pub sample: Option<(u64, u64)>,
}

/// The columns of the latency table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatReport {
    pub size: u64,
    pub iters: u64,
    pub t_min: f64,
    pub t_max: f64,
    pub t_typical: f64,
    pub t_avg: f64,
    pub t_stdev: f64,
    pub p99: f64,
    pub p99_9: f64,
    /// The samples in µs, unsorted and (the measured part) sorted, for -U and -H.
    pub unsorted: Vec<f64>,
    pub sorted: Vec<f64>,
}

/// `LAT_MEASURE_TAIL`: the largest samples perftest leaves out.
const LAT_MEASURE_TAIL: usize = 2;

/// `print_report_lat`.
pub fn lat_report(s: &LatSamples) -> LatReport {
    let q = NS_PER_US * f64::from(s.rtt_factor);
    let mut delta: Vec<u64> = s.tposted.windows(2).map(|w| w[1].saturating_sub(w[0])).collect();
    let unsorted = delta.iter().map(|&d| d as f64 / q).collect();
    delta.sort_unstable();
    let mc = delta.len().saturating_sub(LAT_MEASURE_TAIL).max(1);
    delta.resize(delta.len().max(mc + 1), 0);
    let median = if (mc - 1) % 2 == 1 { (delta[mc / 2] + delta[mc / 2 - 1]) / 2 } else { delta[mc / 2] };
    let us = |d: u64| d as f64 / q;
    let average = delta[..mc].iter().map(|&d| us(d)).sum::<f64>() / mc as f64;
    // perftest squares the deviations as ints, truncated.
    let stdev_sum: f64 = delta[..mc]
        .iter()
        .map(|&d| {
            let t = (average - us(d)) as i32;
            f64::from(t.saturating_mul(t))
        })
        .sum();
    let at = |i: f64| us(delta[(i.ceil() as usize).min(delta.len() - 1)]);
    LatReport {
        size: s.size,
        iters: s.iters,
        t_min: us(delta[0]),
        t_max: us(delta[mc]),
        t_typical: us(median),
        t_avg: average,
        t_stdev: (stdev_sum / mc as f64).sqrt(),
        p99: at(mc as f64 * 0.99),
        p99_9: at(mc as f64 * 0.999),
        unsorted,
        sorted: delta[..mc].iter().map(|&d| us(d)).collect(),
    }
}

/// `print_report_lat_duration`: the average latency (µs) and transactions per second.
pub fn lat_duration_report(s: &LatSamples) -> (f64, f64) {
    let (start, end) = s.sample.unwrap_or((0, 0));
    let t = end.saturating_sub(start) as f64;
    let latency = ((t / NS_PER_US) / f64::from(s.rtt_factor)) / s.iters as f64;
    let tps = s.iters as f64 / (t / (NS_PER_US * 1e6));
    (latency, tps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bw_average_and_peak_follow_perftest() {
        // 4 messages of 1 MiB, one completion each, 1 ms apart: 1000 MiB/s.
        let s = BwSamples {
            tposted: vec![0, 1_000_000, 2_000_000, 3_000_000],
            tcompleted: vec![1_000_000, 2_000_000, 3_000_000, 4_000_000],
            iters: 4,
            num_qps: 1,
            size: 1 << 20,
            cq_mod: 1,
            no_peak: false,
            duration: false,
        };
        let r = bw_report(&s, false);
        assert_eq!((r.iters, r.size), (4, 1 << 20));
        assert!((r.bw_avg - 1000.0).abs() < 1e-9 && (r.bw_peak - 1000.0).abs() < 1e-9);
        assert!((r.msg_rate - 0.001).abs() < 1e-12);
        let g = bw_report(&s, true);
        assert!((g.bw_avg - 8.388608).abs() < 1e-9);
        let np = bw_report(&BwSamples { tposted: vec![0], tcompleted: vec![4_000_000], no_peak: true, ..s }, false);
        assert_eq!(np.bw_peak, 0.0);
        assert!((np.bw_avg - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn latency_drops_the_tail_and_halves_round_trips() {
        // Round trips of 10 us, one of 100 us (dropped as tail), 11 samples.
        let mut t = vec![0u64];
        for i in 0..11 {
            let step = if i == 5 { 100_000 } else { 10_000 };
            t.push(t.last().unwrap() + step);
        }
        let r = lat_report(&LatSamples { tposted: t, iters: 12, size: 2, rtt_factor: 2, sample: None });
        assert_eq!((r.t_min, r.t_typical, r.t_avg, r.t_stdev), (5.0, 5.0, 5.0, 0.0));
        assert_eq!(r.t_max, 5.0);
        assert_eq!(r.unsorted.len(), 11);
        assert_eq!(r.sorted.len(), 9);
    }

    #[test]
    fn duration_latency_is_an_average() {
        let s = LatSamples { tposted: vec![], iters: 1000, size: 2, rtt_factor: 1, sample: Some((0, 1_000_000_000)) };
        assert_eq!(lat_duration_report(&s), (1000.0, 1000.0));
    }
}
