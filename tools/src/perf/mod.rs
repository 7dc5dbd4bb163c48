//! `uroce perf TEST [flags] [HOST]`: perftest 4.5's eight tests (ib_write_bw,
//! ib_read_bw, ib_send_bw, ib_atomic_bw and the four _lat) over uroce, with
//! perftest's flags, defaults, TCP exchange and tables, so that one end can
//! be perftest and the other uroce. `--loopback` runs both ends here.

mod agree;
mod bw;
mod cfmt;
mod clock;
mod completions;
mod dest;
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
mod waiting;

pub use flags::PerftestFlags;
pub use params::TestName;

use crate::common::CommonArgs;
use crate::loopback::{self, LoopbackArgs};
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
    #[command(flatten)]
    pub loopback: LoopbackArgs,
    /// How uroce moves packets: manual (the test's own thread, as perftest polls a NIC; the default),
    /// busy-poll (a progress thread that spins while packets flow) or blocking (a progress thread that sleeps on
    /// the link; the default with -e)
    #[arg(long, value_enum, value_name = "MODE")]
    pub progress: Option<ProgressMode>,
    /// uroce's authenticated mode: a MAC under this key (64 hex digits, the same at both ends) in every
    /// packet of the test's QPs; a uroce peer only, RC and UC (docs/SECURITY.md)
    #[arg(long, value_name = "HEX", value_parser = parse_key)]
    pub auth_key: Option<[u8; 32]>,
    #[command(flatten)]
    pub flags: Box<PerftestFlags>,
    #[command(flatten)]
    pub common: CommonArgs,
}

fn parse_key(s: &str) -> Result<[u8; 32], String> {
    crate::common::hex_bytes(s)
        .ok_or_else(|| format!("'{s}': give 64 hex digits (32 bytes), e.g. from `openssl rand -hex 32`"))
}

/// perftest's parameters from the flags, with uroce's own on top.
fn resolve(args: &PerfArgs, host: Option<String>) -> Result<Params, String> {
    let mut p = Params::resolve(args.test, host, &args.flags)?;
    p.auth_key = args.auth_key;
    Ok(p)
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
    if args.loopback.loopback {
        return run_loopback(args);
    }
    let p = resolve(args, args.host.clone())?;
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

/// `--loopback` ([`loopback`]): the client here on `-d`, the server on a
/// thread on `--server-dev` (or the next address), with an ephemeral TCP port;
/// the client's output is printed.
fn run_loopback(args: &PerfArgs) -> Result<(), String> {
    if let Some(host) = &args.host {
        return Err(format!("--loopback runs both ends here: give no host (not {host})"));
    }
    let mut server_p = resolve(args, None)?;
    // The client's report is the one printed and saved.
    server_p.out_json = None;
    let (client_common, server_common) = loopback::ends(&args.common, &args.loopback)?;
    let (client_ctx, server_ctx) = loopback::open_both(&client_common, &server_common, progress(args)?)?;
    let (server_conn, host, client_conn) = if server_p.comm_rdma_cm {
        let (host, port) = (rdma_cm::local_ip(&server_ctx)?.to_string(), server_p.port());
        (Connector::RdmaCm { host: None, port }, host.clone(), Connector::RdmaCm { host: Some(host), port })
    } else {
        let listener = std::net::TcpListener::bind(("127.0.0.1", args.flags.port.unwrap_or(0)))
            .map_err(|e| format!("cannot listen on a loopback TCP port: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let host = "127.0.0.1".to_string();
        (Connector::Listen(listener), host.clone(), Connector::Connect { host, port })
    };
    let client_p = resolve(args, Some(host))?;
    // What depends on the devices, checked for both before either end starts.
    session::choose_gid(&client_ctx, &client_p)?;
    session::choose_gid(&server_ctx, &server_p).map_err(|e| format!("server: {e}"))?;
    let (mtu, _) = client_p.set_mtu(client_ctx.query_port().active_mtu);
    session::check_ud_size(&client_p, u64::from(mtu.bytes()))?;
    let (sc, cc) = (server_ctx.clone(), client_ctx.clone());
    let result = loopback::run_pair(
        move || run_end(server_p, &sc, server_conn, Out::sink()),
        move || run_end(client_p, &cc, client_conn, Out::stdout()),
    );
    client_common.print_stats(" (client)", &client_ctx);
    server_common.print_stats(" (server)", &server_ctx);
    result
}

#[cfg(test)]
mod tests {
    use super::{progress, PerfArgs};
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
}
