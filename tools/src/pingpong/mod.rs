//! `uroce pingpong` and `uroce ud_pingpong`: ibv_rc_pingpong and ibv_ud_pingpong
//! with their flags, exchange, QP attributes and output, plus `--loopback`
//! (both ends in one process) and uroce's common flags.

mod exchange;
mod session;

use crate::common::CommonArgs;
use crate::loopback::{self, LoopbackArgs};
use clap::Args;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The flags ibv_rc_pingpong and ibv_ud_pingpong share.
#[derive(Args, Debug, Clone)]
pub struct SharedArgs {
    /// Server to connect to; none: be the server and wait
    pub host: Option<String>,
    /// Listen on/connect to TCP port
    #[arg(short = 'p', long, default_value_t = 18515)]
    pub port: u16,
    /// Use port PORT of the device
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    pub ib_port: u8,
    /// Number of receives to post at a time
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500)]
    pub rx_depth: u32,
    /// Number of exchanges
    #[arg(short = 'n', long, default_value_t = 1000)]
    pub iters: u32,
    /// Service level (RoCE has no SL on the wire; accepted and ignored, as rxe)
    #[arg(short = 'l', long, default_value_t = 0)]
    pub sl: u8,
    /// Sleep on CQ events (default poll)
    #[arg(short = 'e', long)]
    pub events: bool,
    /// Local port GID index (default 1, the IPv4 GID; the C tools send none without -g)
    #[arg(short = 'g', long = "gid-idx")]
    pub gid_idx: Option<usize>,
    /// Validate every received buffer
    #[arg(short = 'c', long = "chk")]
    pub check: bool,
    #[command(flatten)]
    pub loopback: LoopbackArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// ibv_rc_pingpong's flags.
#[derive(Args, Debug, Clone)]
pub struct RcArgs {
    /// Size of message to exchange
    #[arg(short = 's', long, default_value_t = 4096)]
    pub size: u32,
    /// Path MTU
    #[arg(short = 'm', long, default_value_t = 1024)]
    pub mtu: u32,
    #[command(flatten)]
    pub shared: SharedArgs,
}

/// ibv_ud_pingpong's flags.
#[derive(Args, Debug, Clone)]
pub struct UdArgs {
    /// Size of message to exchange (at most the port's MTU)
    #[arg(short = 's', long, default_value_t = 2048)]
    pub size: u32,
    #[command(flatten)]
    pub shared: SharedArgs,
}

/// What one end of either pingpong needs.
#[derive(Debug, Clone)]
pub(crate) struct Params {
    pub ud: bool,
    pub host: Option<String>,
    pub port: u16,
    pub ib_port: u8,
    pub size: u32,
    pub mtu: u32,
    pub rx_depth: u32,
    pub iters: u32,
    pub events: bool,
    pub gid_idx: Option<usize>,
    pub check: bool,
    pub sl: u8,
}

impl SharedArgs {
    fn params(&self, ud: bool, size: u32, mtu: u32) -> Params {
        Params {
            ud,
            host: self.host.clone(),
            port: self.port,
            ib_port: self.ib_port,
            size,
            mtu,
            rx_depth: self.rx_depth,
            iters: self.iters,
            events: self.events,
            gid_idx: self.gid_idx,
            check: self.check,
            sl: self.sl,
        }
    }
}

/// `uroce pingpong`.
pub fn run_rc(args: &RcArgs) -> ExitCode {
    let s = &args.shared;
    run(s.params(false, args.size, args.mtu), &s.common, &s.loopback)
}

/// `uroce ud_pingpong` (no path MTU flag: a UD message fits one packet).
pub fn run_ud(args: &UdArgs) -> ExitCode {
    let s = &args.shared;
    run(s.params(true, args.size, 0), &s.common, &s.loopback)
}

fn run(p: Params, common: &CommonArgs, lb: &LoopbackArgs) -> ExitCode {
    common.init_logging();
    let result = if lb.loopback { run_loopback(p, common, lb) } else { run_one(&p, common) };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// One end, as the C tools run.
fn run_one(p: &Params, common: &CommonArgs) -> Result<(), String> {
    if p.port == 0 {
        return Err("-p 0: give the TCP port both ends use, 1 to 65535 (default 18515)".into());
    }
    let ctx = common.open(session::progress(p), None)?;
    session::check_params(p, &ctx)?;
    let side = session::run(p, common, ctx, None, &mut std::io::stdout())?;
    session::linger(side, common);
    Ok(())
}

/// Both ends in one process ([`loopback`]): the client on `-d`, the server on
/// `--server-dev` (or the next address) with an ephemeral TCP port; the
/// server's lines are printed after the client's, prefixed `server:`.
fn run_loopback(p: Params, common: &CommonArgs, lb: &LoopbackArgs) -> Result<(), String> {
    if p.host.is_some() {
        return Err("--loopback runs both ends here: give no HOST".into());
    }
    let (client_common, server_common) = loopback::ends(common, lb)?;
    let (client_ctx, server_ctx) = loopback::open_both(&client_common, &server_common, session::progress(&p))?;
    session::check_params(&p, &client_ctx)?;
    session::check_params(&p, &server_ctx).map_err(|e| format!("server: {e}"))?;
    let server = exchange::Server::bind(0)?;
    let port = server.port();
    // Each end keeps answering until the other is done too: it may still owe
    // the other the ACK of its last message.
    let done = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    let server_lines = Arc::new(Mutex::new(Vec::new()));
    let (server_done, lines, sp) = (done.clone(), server_lines.clone(), p.clone());
    let serve = move || {
        let mut out = Vec::new();
        let r = session::run(&sp, &server_common, server_ctx, Some(server), &mut out);
        *lines.lock().unwrap_or_else(|e| e.into_inner()) = out;
        server_done[0].store(true, Ordering::Release);
        let side = r?;
        session::serve_until(&side, || server_done[1].load(Ordering::Acquire));
        Ok(())
    };
    let client = Params { host: Some("127.0.0.1".into()), port, ..p };
    let run_client = move || {
        let r = session::run(&client, &client_common, client_ctx, None, &mut std::io::stdout());
        done[1].store(true, Ordering::Release);
        let side = r?;
        session::serve_until(&side, || done[0].load(Ordering::Acquire));
        Ok(())
    };
    let result = loopback::run_pair(serve, run_client);
    let mut stdout = std::io::stdout().lock();
    for line in String::from_utf8_lossy(&server_lines.lock().unwrap_or_else(|e| e.into_inner())).lines() {
        let _ = writeln!(stdout, "server: {line}");
    }
    result
}
