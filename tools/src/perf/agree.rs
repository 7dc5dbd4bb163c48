//! Between two uroce ends only (perftest peers never see it): each describes
//! the parameters that must agree for the test to run, and a mismatch is
//! named on both ends, with the flag to fix, before any QP is connected.
//! perftest itself would hang or fail later with a completion error.

use super::params::{Params, Verb};
use std::collections::HashMap;

/// The size of the block both ends exchange.
pub const BLOCK_LEN: usize = 128;

/// This end's parameters, as `key=value` words.
pub fn describe(p: &Params, mtu_asked: Option<u32>) -> String {
    format!(
        "test={} conn={} qps={} size={} all={} mode={} iters={} mtu={} server={}",
        p.test.name(),
        p.conn.name(),
        p.num_qps,
        p.size,
        u8::from(p.run_all),
        if p.iterations() { "iterations" } else { "duration" },
        p.iters,
        mtu_asked.unwrap_or(0),
        u8::from(p.is_server()),
    )
}

fn words(s: &str) -> HashMap<&str, &str> {
    s.split_whitespace().filter_map(|w| w.split_once('=')).collect()
}

/// Checks the peer's description against ours; returns the MTU the peer asked
/// for with -m, if it did.
pub fn check(p: &Params, mtu_asked: Option<u32>, theirs: &str) -> Result<Option<u32>, String> {
    let (mine, theirs) = (describe(p, mtu_asked), theirs.to_string());
    let (m, t) = (words(&mine), words(&theirs));
    let get = |w: &HashMap<&str, &str>, k: &str| w.get(k).copied().unwrap_or("?").to_string();
    let differs = |k: &str| get(&m, k) != get(&t, k);
    if differs("test") {
        return Err(format!(
            "the peer runs {} but this end {}: run the same test on both ends",
            get(&t, "test"),
            get(&m, "test")
        ));
    }
    if get(&m, "server") == get(&t, "server") {
        return Err("both ends are clients or both servers: give the host to one end only".into());
    }
    for (key, flag, what) in [("conn", "-c", "connection type"), ("qps", "-q", "number of QPs")] {
        if differs(key) {
            return Err(mismatch(flag, what, &get(&t, key), &get(&m, key)));
        }
    }
    if differs("all") {
        return Err("-a: one end runs all sizes and the other does not: give -a to both ends or to none".into());
    }
    let lockstep = matches!(p.verb, Verb::Send) || p.test == super::params::TestName::WriteLat;
    if lockstep && differs("mode") {
        return Err(
            "-D: one end runs for a duration, the other for a number of iterations: give -D to both ends or to none"
                .into(),
        );
    }
    if lockstep && get(&m, "mode") == "iterations" && differs("iters") {
        return Err(mismatch("-n", "number of iterations", &get(&t, "iters"), &get(&m, "iters")));
    }
    check_size(p, &get(&t, "size"))?;
    Ok(get(&t, "mtu").parse().ok().filter(|&v: &u32| v != 0))
}

fn mismatch(flag: &str, what: &str, theirs: &str, mine: &str) -> String {
    format!("{flag}: the peer's {what} is {theirs}, this end's {mine}: give both ends the same {flag}")
}

/// SEND and write_lat need equal sizes; a one-sided client needs its messages
/// to fit in the server's buffer.
fn check_size(p: &Params, theirs: &str) -> Result<(), String> {
    if p.verb == Verb::Atomic || p.run_all {
        return Ok(());
    }
    let theirs: u64 = theirs.parse().unwrap_or(0);
    let mine = p.size;
    let equal_needed = p.verb == Verb::Send || p.test == super::params::TestName::WriteLat;
    let (client, server) = if p.is_server() { (theirs, mine) } else { (mine, theirs) };
    let fits = client <= server.max(p.cycle_buffer);
    if (equal_needed && theirs != mine) || !fits {
        return Err(mismatch("-s", "message size", &theirs.to_string(), &mine.to_string()));
    }
    Ok(())
}

/// After the MTU exchange: an MTU asked with -m on either end must be the one
/// the two ends agreed on.
pub fn check_mtu(asked_here: Option<u32>, asked_there: Option<u32>, agreed: u32) -> Result<(), String> {
    if let Some(a) = asked_here.filter(|&a| a != agreed) {
        return Err(format!(
            "MTU mismatch: this end asked for -m {a} but the peer's MTU is {agreed}: give both ends the same -m (or none)"
        ));
    }
    if let Some(a) = asked_there.filter(|&a| a != agreed) {
        return Err(format!(
            "MTU mismatch: the peer asked for -m {a} but this end's MTU is {agreed}: give both ends the same -m (or none)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::flags::PerftestFlags;
    use crate::perf::params::TestName;

    fn params(test: TestName, host: Option<&str>, f: impl Fn(&mut PerftestFlags)) -> Params {
        let mut flags = PerftestFlags::default();
        f(&mut flags);
        Params::resolve(test, host.map(String::from), &flags).unwrap()
    }

    #[test]
    fn equal_parameters_agree() {
        let s = params(TestName::SendBw, None, |_| {});
        let c = params(TestName::SendBw, Some("h"), |_| {});
        assert_eq!(check(&s, None, &describe(&c, Some(1024))), Ok(Some(1024)));
    }

    #[test]
    fn mismatches_name_the_flag() {
        let s = params(TestName::SendBw, None, |_| {});
        let c = params(TestName::SendBw, Some("h"), |f| f.iters = Some(100));
        let e = check(&s, None, &describe(&c, None)).unwrap_err();
        assert!(e.starts_with("-n: the peer's number of iterations is 100, this end's 1000"), "{e}");
        let w = params(TestName::WriteBw, Some("h"), |_| {});
        assert!(check(&s, None, &describe(&w, None))
            .unwrap_err()
            .contains("the peer runs write_bw but this end send_bw"));
        let big = params(TestName::WriteBw, Some("h"), |f| f.size = Some("1M".into()));
        let ws = params(TestName::WriteBw, None, |_| {});
        assert!(check(&ws, None, &describe(&big, None)).unwrap_err().starts_with("-s: "));
        let small = params(TestName::WriteBw, Some("h"), |f| f.size = Some("1K".into()));
        assert!(check(&ws, None, &describe(&small, None)).is_ok());
        assert!(check_mtu(Some(2048), None, 1024).unwrap_err().contains("asked for -m 2048"));
        assert!(check_mtu(None, None, 1024).is_ok());
    }
}
