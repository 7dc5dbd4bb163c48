//! The statistics behind the retry model of `uroce_transport::sim::pingpong`
//! (ibv_rc_pingpong's traffic over a link that loses and reorders 5% of
//! packets): they assert nothing, so they are not tests.
//!
//! ```text
//! cargo run --release -p uroce-transport --example retry_stats -- [sweep|hazard] [--seeds N]
//! ```
//!
//! - `sweep`: N ping-pongs of 100 exchanges at retry_cnt 7 (default 5000)
//!   per link; the runs that failed and the retries each message took.
//! - `hazard`: the failures per message at retry_cnt 0 to 3, where they are
//!   common enough to count, over N ping-pongs (default 2000) per link and
//!   retry_cnt.
//!
//! Without a table named, both. The runs are deterministic: seeds 0 to N - 1.

use std::process::ExitCode;
use uroce_transport::sim::pingpong::{self, impaired_link};
use uroce_transport::sim::LinkConfig;

/// The links of the model: both impairments, and each alone.
fn links() -> [(&'static str, LinkConfig); 3] {
    [
        ("loss 5% + reorder 5%", impaired_link(0.05, 0.05)),
        ("loss 5%", impaired_link(0.05, 0.0)),
        ("reorder 5%", impaired_link(0.0, 0.05)),
    ]
}

/// Runs `seeds` ping-pongs of 100 exchanges on `link` and prints the
/// failures and the distribution of retries per message.
fn sweep(name: &str, link: LinkConfig, seeds: u64) {
    let mut failed = Vec::new();
    let mut hist = [0u64; 9];
    let mut msgs = 0;
    for seed in 0..seeds {
        let pp = pingpong::run(seed, link, 100, 7);
        if let Some(f) = pp.failed {
            failed.push((seed, pp.sends[0], f));
        }
        for &m in &pp.per_msg {
            hist[(m as usize).min(8)] += 1;
            msgs += 1;
        }
    }
    println!("{name}: {} of {seeds} runs failed {failed:?}", failed.len());
    println!("  retries per message (0..=7, more): {hist:?} of {msgs}");
}

/// Prints the hazard per message of retry_cnt + 1 rounds in a row without
/// progress on `link`, for retry_cnt 0 to 3.
fn hazard(name: &str, link: LinkConfig, seeds: u64) {
    for retry_cnt in 0..=3u8 {
        let (mut failed, mut msgs) = (0u64, 0u64);
        for seed in 0..seeds {
            let pp = pingpong::run(seed, link, 100, retry_cnt);
            msgs += pp.per_msg.len() as u64 + u64::from(pp.failed.is_some());
            failed += u64::from(pp.failed.is_some());
        }
        let h = failed as f64 / msgs as f64;
        println!("{name}, retry_cnt {retry_cnt}: {failed} failures in {msgs} messages, {h:.2e} per message");
    }
}

/// The command line: which tables, and seeds per cell when given.
struct Args {
    sweep: bool,
    hazard: bool,
    seeds: Option<u64>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut sweep, mut hazard, mut seeds) = (false, false, None);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "sweep" => sweep = true,
            "hazard" => hazard = true,
            "--seeds" => {
                let n = args.next().ok_or("--seeds needs a number")?;
                seeds = Some(n.parse().map_err(|_| format!("--seeds: '{n}' is not a number"))?);
            }
            other => return Err(format!("unknown argument '{other}' (try sweep, hazard, --seeds N)")),
        }
    }
    let both = !sweep && !hazard;
    Ok(Args { sweep: sweep || both, hazard: hazard || both, seeds })
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("retry_stats: {e}");
            return ExitCode::from(2);
        }
    };
    if args.sweep {
        for (name, link) in links() {
            sweep(name, link, args.seeds.unwrap_or(5000));
        }
    }
    if args.hazard {
        for (name, link) in links() {
            hazard(name, link, args.seeds.unwrap_or(2000));
        }
    }
    ExitCode::SUCCESS
}
