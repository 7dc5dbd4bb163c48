//! What every subcommand that opens a device shares: `-d`, capture, impairment,
//! counters and logging, and the default device on loopback.

use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use uroce_stack::link::impair::Faults;
use uroce_stack::link::ImpairConfig;
use uroce_verbs::{Context, Device, OpenOptions, Progress};

/// Flags common to the subcommands that run a device.
#[derive(Args, Debug, Clone, Default)]
pub struct CommonArgs {
    /// RDMA device: udp:IP (default: the first free 127.0.0.x), packet:IFACE[,ip=IP][,mac=MAC] or tap:NAME,ip=IP/LEN
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub device: Option<String>,
    /// Capture what uroce sends and receives to this pcap file
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Drop this fraction of the packets sent (0..1)
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub loss: f64,
    /// Duplicate this fraction of packets
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub dup: f64,
    /// Reorder this fraction of packets
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub reorder: f64,
    /// Corrupt this fraction of received packets (the ICRC check drops them)
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub corrupt: f64,
    /// Delay every packet by this many microseconds
    #[arg(long, value_name = "US", default_value_t = 0)]
    pub delay: u64,
    /// Seed of the impairments, QP numbers, PSNs and keys, so that a run repeats (insecure: keys become predictable; default: random from the OS)
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Print the engine's and the link's counters at the end
    #[arg(long)]
    pub stats: bool,
    /// Print the ladder diagram of the run at the end (from its capture: --pcap's file, or a temporary one)
    #[arg(long)]
    pub ladder: bool,
    /// At most N request packets unacknowledged across the device's RC QPs (default: what the link's receive queue holds)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_inflight: Option<u32>,
    /// Delayed ACKs: how long an ACK may wait for this end's next request, to leave behind it (default 50; 0: never wait)
    #[arg(long, value_name = "US")]
    pub ack_delay: Option<u64>,
    /// Log what the stack does (tracing); `devinfo -v` also prints what `ibv_devinfo -v` adds (the GID table, the limits)
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,
}

/// Loopback addresses tried, in order, when no device is given: the first
/// program takes 127.0.0.1, the next 127.0.0.2, so a server and a client in two
/// terminals find each other with no flags.
const DEFAULT_LOOPBACK: std::ops::RangeInclusive<u8> = 1..=16;

impl CommonArgs {
    pub fn impair(&self) -> Result<Option<ImpairConfig>, String> {
        for (name, p) in
            [("--loss", self.loss), ("--dup", self.dup), ("--reorder", self.reorder), ("--corrupt", self.corrupt)]
        {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{name} {p}: give a probability between 0 and 1"));
            }
        }
        // Each packet crosses one transmit: loss, duplication, reordering and
        // delay there make P the chance per packet on the wire. Corruption can
        // only be modelled on receive (the link signs what it is given).
        let tx = Faults {
            loss: self.loss,
            duplicate: self.dup,
            reorder: self.reorder,
            corrupt: 0.0,
            delay: Duration::from_micros(self.delay),
            jitter: Duration::ZERO,
            reorder_delay: Duration::from_micros(200),
        };
        let rx = Faults { corrupt: self.corrupt, ..Faults::default() };
        let probabilities = [self.loss, self.dup, self.reorder, self.corrupt];
        if probabilities.iter().all(|&p| p == 0.0) && self.delay == 0 {
            return Ok(None);
        }
        Ok(Some(ImpairConfig { seed: self.seed.unwrap_or(1), tx, rx }))
    }

    fn options(&self, progress: Progress, pcap: Option<PathBuf>) -> Result<OpenOptions, String> {
        let max_inflight_psns = self.max_inflight;
        let ack_delay = self.ack_delay.map(std::time::Duration::from_micros);
        Ok(OpenOptions { progress, seed: self.seed, pcap, impair: self.impair()?, max_inflight_psns, ack_delay })
    }

    /// Opens `-d`, or the first free loopback address. `pcap_suffix` keeps two
    /// ends of a `--loopback` run from writing one file.
    pub fn open(&self, progress: Progress, pcap_suffix: Option<&str>) -> Result<Context, String> {
        let pcap = self.pcap.as_ref().map(|p| match pcap_suffix {
            Some(s) => suffixed(p, s),
            None => p.clone(),
        });
        let opts = self.options(progress, pcap)?;
        if let Some(dev) = &self.device {
            return Device::open_with(dev, &opts).map_err(|e| e.to_string());
        }
        let mut last = String::new();
        // Free: neither another process's nor this one's (a --loopback run's
        // other end), which would share the device instead of failing.
        let specs = DEFAULT_LOOPBACK.map(|host| format!("udp:127.0.0.{host}"));
        for spec in specs.filter(|s| !Device::is_open(s)) {
            match Device::open_with(&spec, &opts) {
                Ok(ctx) => return Ok(ctx),
                Err(e) => last = e.to_string(),
            }
        }
        Err(format!("{last} (tried 127.0.0.1 to 127.0.0.16; give a device with -d udp:127.0.0.N)"))
    }

    /// Installs the tracing subscriber when `--verbose` is given.
    pub fn init_logging(&self) {
        let level = if self.verbose { tracing::Level::DEBUG } else { tracing::Level::WARN };
        // Colour only for a person at a terminal, not in files and pipes.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let _ = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_writer(std::io::stderr)
            .with_target(false)
            .with_ansi(ansi)
            .try_init();
    }

    /// Prints the counters (`--stats`) of one context.
    pub fn print_stats(&self, label: &str, ctx: &Context) {
        self.write_stats(label, ctx, &mut std::io::stdout());
    }

    /// Writes the counters (`--stats`) of one context to `out`
    /// ([`Context::stats`]).
    pub fn write_stats(&self, label: &str, ctx: &Context, out: &mut dyn std::io::Write) {
        if !self.stats {
            return;
        }
        let _ = writeln!(out, "--- counters{label} ---");
        for (name, value) in ctx.stats() {
            let _ = writeln!(out, "{name:<28} {value}");
        }
    }
}

/// The GID at `index` that a tool's `flag` (`-g`, `-x`) asked for, if the
/// device has it and can send from it; otherwise one line saying what to give.
pub fn source_gid(ctx: &Context, flag: &str, index: usize) -> Result<uroce_verbs::Gid, String> {
    ctx.source_gid(index).map_err(|e| match e {
        uroce_verbs::Error::NoSuchGid { len, .. } => {
            let dev = &ctx.link_info().name;
            let usable: Vec<String> =
                (0..len).filter(|&i| ctx.source_gid(i).is_ok()).map(|i| format!("{flag} {i}")).collect();
            format!(
                "{flag} {index}: {dev} has no GID index {index} (it has {len}; `uroce devinfo -v -d {dev}` lists \
                 them): give {}",
                usable.join(" or ")
            )
        }
        e => format!("{flag} {index}: {e}"),
    })
}

/// `cap.pcap` with suffix `server` -> `cap-server.pcap`.
/// The `N` bytes written as `2 N` hex digits in `s` (a GID, a key), or
/// `None` for anything else (another length, a non-hex or non-ASCII digit).
pub fn hex_bytes<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !s.is_ascii() {
        return None;
    }
    let mut bytes = [0u8; N];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(bytes)
}

pub(crate) fn suffixed(p: &std::path::Path, suffix: &str) -> PathBuf {
    let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = p.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    p.with_file_name(format!("{stem}-{suffix}{ext}"))
}
