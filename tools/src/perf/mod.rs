//! `uroce perf TEST [flags] [HOST]`: perftest 4.5's eight tests (ib_write_bw,
//! ib_read_bw, ib_send_bw, ib_atomic_bw and the four _lat) over uroce, with
//! perftest's flags, defaults, TCP exchange and tables, so that one end can
//! be perftest and the other uroce. `--loopback` runs both ends here.

mod agree;
mod bw;
mod cfmt;
mod clock;
mod exchange;
mod flags;
mod kinds;
mod lat;
mod params;
mod rdma_cm;
mod report;
mod resources;
mod session;
mod stats;

pub use flags::PerftestFlags;
pub use params::TestName;

use crate::common::CommonArgs;
use clap::Args;
use params::{Params, Tst};
use report::Out;
use session::Connector;
use std::process::ExitCode;
use uroce_verbs::{Context, Progress};

/// Arguments of `uroce perf`.
#[derive(Args, Debug, Clone)]
#[command(after_help = "Start the server (no HOST) first, then the client with the server's name; \
    or run both ends here with --loopback.")]
pub struct PerfArgs {
    /// The test
    #[arg(value_enum)]
    pub test: TestName,
    /// The server to connect to; without it, this end is the server and waits for a client
    pub host: Option<String>,
    /// Run the server too, in this process, on the next loopback address, and print the client's output
    #[arg(long)]
    pub loopback: bool,
    /// How uroce moves packets: manual (the test's own thread, as perftest polls a NIC; the default),
    /// busy-poll (a progress thread that never sleeps) or blocking (a progress thread that sleeps on
    /// the link; the default with -e)
    #[arg(long, value_enum, value_name = "MODE")]
    pub progress: Option<ProgressMode>,
    #[command(flatten)]
    pub flags: Box<PerftestFlags>,
    #[command(flatten)]
    pub common: CommonArgs,
}

pub fn run(args: &PerfArgs) -> ExitCode {
    args.common.init_logging();
    match run_args(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uroce perf: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_args(args: &PerfArgs) -> Result<(), String> {
    if args.loopback {
        return run_loopback(args);
    }
    let p = Params::resolve(args.test, args.host.clone(), &args.flags)?;
    let ctx = args.common.open(progress(args)?, None)?;
    let conn = match &p.servername {
        _ if p.comm_rdma_cm => Connector::RdmaCm { host: p.servername.clone(), port: p.port() },
        None => Connector::Listen(exchange::listen(p.port())?),
        Some(host) => Connector::Connect { host: host.clone(), port: p.port() },
    };
    let result = run_end(p, &ctx, conn, Out::stdout());
    args.common.print_stats("", &ctx);
    result
}

/// `--progress`: uroce's ways of moving packets ([`Progress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    Manual,
    BusyPoll,
    Blocking,
}

/// Each end moves its own packets from the thread that runs the test, as
/// perftest's thread polls a NIC; with -e that thread sleeps on completion
/// events, and a progress thread that sleeps on the link moves them.
/// `--progress` chooses otherwise.
fn progress(args: &PerfArgs) -> Result<Progress, String> {
    match (args.progress, args.flags.events) {
        (Some(ProgressMode::Manual), true) => {
            Err("--progress manual cannot go with -e: nothing would move packets while the test sleeps".into())
        }
        (Some(ProgressMode::Manual), false) | (None, false) => Ok(Progress::Manual),
        (Some(ProgressMode::BusyPoll), _) => Ok(Progress::BusyPoll),
        (Some(ProgressMode::Blocking), _) | (None, true) => Ok(Progress::Blocking),
    }
}

/// One end, from the exchange to the last line.
fn run_end(p: Params, ctx: &Context, conn: Connector, out: Out) -> Result<(), String> {
    let tst = p.tst;
    let mut s = session::setup(p, ctx, conn, out)?;
    s.connect()?;
    let result = match tst {
        Tst::Bw => bw::run(&mut s),
        Tst::Lat => lat::run(&mut s),
    };
    if let Some(cm) = s.cm.take() {
        cm.disconnect();
    }
    result
}

/// `--loopback`: the server on a thread with its own device (the next
/// loopback address) and an ephemeral TCP port, the client here.
fn run_loopback(args: &PerfArgs) -> Result<(), String> {
    if let Some(host) = &args.host {
        return Err(format!("--loopback runs both ends here: give no host (not {host})"));
    }
    let mut server_p = Params::resolve(args.test, None, &args.flags)?;
    // The client's report is the one printed and saved.
    server_p.out_json = None;
    let client_ctx = args.common.open(progress(args)?, Some("client"))?;
    let server_ctx = server_common(&args.common)?.open(progress(args)?, Some("server"))?;
    let (server_conn, host, client_conn) = if server_p.comm_rdma_cm {
        rdma_cm::loopback_connectors(&server_ctx, server_p.port())?
    } else {
        let listener = std::net::TcpListener::bind(("127.0.0.1", args.flags.port.unwrap_or(0)))
            .map_err(|e| format!("cannot listen on a loopback TCP port: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let host = "127.0.0.1".to_string();
        (Connector::Listen(listener), host.clone(), Connector::Connect { host, port })
    };
    let server = {
        let ctx = server_ctx.clone();
        std::thread::spawn(move || run_end(server_p, &ctx, server_conn, Out::sink()))
    };
    let client_p = Params::resolve(args.test, Some(host), &args.flags)?;
    let client = run_end(client_p, &client_ctx, client_conn, Out::stdout());
    if let Err(e) = client {
        // A server that failed first is the cause; one still waiting ends with the process.
        std::thread::sleep(std::time::Duration::from_millis(200));
        if server.is_finished() {
            if let Ok(Err(why)) = server.join() {
                eprintln!("uroce perf: server: {why}");
            }
        }
        return Err(e);
    }
    let served = server.join().map_err(|_| "the server thread panicked".to_string())?;
    args.common.print_stats(" (client)", &client_ctx);
    args.common.print_stats(" (server)", &server_ctx);
    served.map_err(|e| format!("server: {e}"))
}

/// The server's device flags in --loopback: the next address after the
/// client's udp device (or the first free loopback address), and a seed of
/// its own (or its QPNs and PSNs would be the client's). Impairments act on
/// what each end transmits, so every packet meets them once.
fn server_common(common: &CommonArgs) -> Result<CommonArgs, String> {
    let seed = common.seed.map(|s| s.wrapping_add(1));
    let mut c = CommonArgs { seed, ..common.clone() };
    if let Some(dev) = &common.device {
        c.device = Some(next_udp(dev)?);
    }
    Ok(c)
}

/// `udp:A.B.C.D[,opts]` -> `udp:A.B.C.(D+1)[,opts]`.
fn next_udp(dev: &str) -> Result<String, String> {
    let bad = || format!("--loopback needs a udp:IPv4 device (or none) for the client, not {dev}");
    let rest = dev.strip_prefix("udp:").ok_or_else(bad)?;
    let (ip, opts) = rest.split_once(',').map_or((rest, None), |(a, o)| (a, Some(o)));
    let ip: std::net::Ipv4Addr = ip.parse().map_err(|_| bad())?;
    let o = ip.octets();
    let last = o[3].checked_add(1).filter(|&l| l < 255).ok_or_else(bad)?;
    let next = std::net::Ipv4Addr::new(o[0], o[1], o[2], last);
    Ok(match opts {
        Some(o) => format!("udp:{next},{o}"),
        None => format!("udp:{next}"),
    })
}

#[cfg(test)]
mod tests {
    use super::{next_udp, progress, PerfArgs};
    use clap::Parser;
    use uroce_verbs::Progress;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        perf: PerfArgs,
    }

    fn mode(args: &[&str]) -> Result<Progress, String> {
        let cmd =
            Cmd::try_parse_from(std::iter::once("perf").chain(args.iter().copied())).map_err(|e| e.to_string())?;
        progress(&cmd.perf)
    }

    #[test]
    fn progress_follows_perftest_unless_asked() {
        assert_eq!(mode(&["write_bw"]), Ok(Progress::Manual));
        assert_eq!(mode(&["send_bw", "-e"]), Ok(Progress::Blocking));
        assert_eq!(mode(&["write_bw", "--progress", "busy-poll"]), Ok(Progress::BusyPoll));
        assert_eq!(mode(&["write_lat", "--progress", "blocking"]), Ok(Progress::Blocking));
        assert_eq!(mode(&["send_bw", "-e", "--progress", "busy-poll"]), Ok(Progress::BusyPoll));
        assert!(mode(&["send_bw", "-e", "--progress", "manual"]).unwrap_err().contains("-e"));
        assert!(mode(&["write_bw", "--progress", "fast"]).is_err());
    }

    #[test]
    fn the_loopback_server_takes_the_next_address() {
        assert_eq!(next_udp("udp:127.0.9.1").unwrap(), "udp:127.0.9.2");
        assert_eq!(next_udp("udp:127.0.9.1,mtu=1024").unwrap(), "udp:127.0.9.2,mtu=1024");
        assert!(next_udp("packet:eth0").is_err());
        assert!(next_udp("udp:127.0.0.254").is_err());
    }
}
