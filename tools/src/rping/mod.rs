//! `uroce rping`: rdma-core's rping (librdmacm/examples/rping.c) over
//! uroce's rdma_cm: its flags, its protocol (the client advertises a buffer
//! with a SEND, the server RDMA READs it, the client advertises another, the
//! server RDMA WRITEs the ping back) and its output, so either end can be
//! the C rping on the kernel's rxe.

mod cb;
mod client;
mod ping;
mod server;
mod setup;

use crate::common::CommonArgs;
use cb::Cb;
use clap::Args;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use uroce_verbs::rdma_cm::{EventChannel, PortSpace};
use uroce_verbs::{Context, Progress};

/// rping's flags, then uroce's (long ones only: rping owns -d and -v).
#[derive(Args, Debug, Clone, Default)]
pub struct RpingArgs {
    /// server side. To bind to any address with IPv6 use -a ::0
    #[arg(short = 's')]
    pub server: bool,
    /// client side
    #[arg(short = 'c')]
    pub client: bool,
    /// address
    #[arg(short = 'a', value_name = "addr")]
    pub addr: Option<String>,
    /// Source address to bind to for client.
    #[arg(short = 'I', value_name = "addr")]
    pub source: Option<String>,
    /// port
    #[arg(short = 'p', value_name = "port", default_value_t = 7174)]
    pub port: u16,
    /// ping count times (0: forever)
    #[arg(short = 'C', value_name = "count", default_value_t = 0, allow_negative_numbers = true)]
    pub count: i64,
    /// ping data size
    #[arg(short = 'S', value_name = "size", default_value_t = 64, allow_negative_numbers = true)]
    pub size: i64,
    /// display ping data to stdout
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// validate ping data
    #[arg(short = 'V', action = clap::ArgAction::Count)]
    pub validate: u8,
    /// debug printfs
    #[arg(short = 'd', action = clap::ArgAction::Count)]
    pub debug: u8,
    /// use self-created, self-modified QP
    #[arg(short = 'q')]
    pub self_qp: bool,
    /// uroce: the RDMA device: udp:IP, packet:IFACE[,ip=IP][,mac=MAC] or tap:NAME,ip=IP/LEN (default: udp on the address)
    #[arg(long = "ib-dev", value_name = "DEV")]
    pub device: Option<String>,
    /// uroce: capture what uroce sends and receives to this pcap file
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// uroce: print the ladder diagram of the run at the end (from its capture: --pcap's file, or a temporary one)
    #[arg(long)]
    pub ladder: bool,
    /// uroce: drop this fraction of the packets sent (0..1)
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub loss: f64,
    /// uroce: duplicate this fraction of packets
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub dup: f64,
    /// uroce: reorder this fraction of packets
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub reorder: f64,
    /// uroce: seed of the impairments, QP numbers, PSNs and keys (insecure: keys become predictable; default: random from the OS)
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// uroce: print the engine's and the link's counters at the end
    #[arg(long)]
    pub stats: bool,
    /// uroce: log what the stack does (tracing), rdma_cm's MADs included
    #[arg(long)]
    pub log: bool,
    /// uroce: the REQ's CM response timeout, 4.096 us x 2^N (the kernel's 20)
    #[arg(long = "cm-timeout", value_name = "N", default_value_t = 20)]
    pub cm_timeout: u8,
    /// uroce: how often the REQ is sent again before UNREACHABLE (the kernel's 15)
    #[arg(long = "cm-retries", value_name = "N", default_value_t = 15)]
    pub cm_retries: u8,
}

/// `EINVAL`: what rping returns for bad flags.
const EINVAL: u8 = 22;

pub fn run(args: &RpingArgs) -> ExitCode {
    let common = args.common();
    common.init_logging();
    if !args.server && !args.client {
        usage();
        return ExitCode::from(EINVAL);
    }
    if args.size < i64::from(ping::MIN_SIZE) || args.size > i64::from(ping::BUFSIZE - 1) {
        eprintln!("Invalid size {} (valid range is {} to {})", args.size, ping::MIN_SIZE, ping::BUFSIZE);
        return ExitCode::from(EINVAL);
    }
    if args.count < 0 {
        eprintln!("Invalid count {}", args.count);
        return ExitCode::from(EINVAL);
    }
    if let Err(e) = check_uroce_flags(args) {
        eprintln!("uroce rping: {e}");
        return ExitCode::from(EINVAL);
    }
    match run_args(args, &common) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("uroce rping: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What rping itself accepts but cannot work: both ends at once, a client
/// of port 0, CM timing the REQ's fields cannot carry.
fn check_uroce_flags(args: &RpingArgs) -> Result<(), String> {
    if args.server && args.client {
        return Err("-s and -c: give one (-s waits for a client, -c connects to -a)".into());
    }
    if args.client && args.port == 0 {
        return Err("-p 0: give the port the server listens on (rping's default is 7174)".into());
    }
    // The REQ's Remote CM Response Timeout is 5 bits, Max CM Retries 4.
    if args.cm_timeout > 31 {
        return Err(format!("--cm-timeout {}: give 0 to 31 (4.096 us x 2^N; the kernel's is 20)", args.cm_timeout));
    }
    if args.cm_retries > 15 {
        return Err(format!(
            "--cm-retries {}: give 0 to 15 (the REQ carries 4 bits; the kernel's is 15)",
            args.cm_retries
        ));
    }
    Ok(())
}

/// rping's usage text.
fn usage() {
    println!("rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]");
    println!("rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]");
    println!("\t-c\t\tclient side");
    println!("\t-I\t\tSource address to bind to for client.");
    println!("\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0");
    println!("\t-v\t\tdisplay ping data to stdout");
    println!("\t-V\t\tvalidate ping data");
    println!("\t-d\t\tdebug printfs");
    println!("\t-S size \tping data size");
    println!("\t-C count\tping count times");
    println!("\t-a addr\t\taddress");
    println!("\t-p port\t\tport");
    println!("\t-q\t\tuse self-created, self-modified QP");
}

impl RpingArgs {
    /// The device flags every uroce tool shares.
    fn common(&self) -> CommonArgs {
        CommonArgs {
            device: self.device.clone(),
            pcap: self.pcap.clone(),
            loss: self.loss,
            dup: self.dup,
            reorder: self.reorder,
            seed: self.seed,
            stats: self.stats,
            verbose: self.log,
            ..CommonArgs::default()
        }
    }

    fn dbg(&self, line: &str) {
        if self.debug > 0 {
            println!("{line}");
        }
    }
}

/// `getaddrinfo` of a host name or address (its first address).
fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    let unbracketed = host.trim_start_matches('[').trim_end_matches(']');
    (unbracketed, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("getaddrinfo failed - invalid hostname or IP address: {host}"))
}

/// The device: --ib-dev, or udp on the address this end binds (-a for the
/// server, -I for the client), or the first free 127.0.0.x.
fn open(common: &CommonArgs, ip: Option<IpAddr>, dst: Option<IpAddr>) -> Result<Context, String> {
    let mut common = common.clone();
    if common.device.is_none() {
        match ip.filter(|ip| !ip.is_unspecified()) {
            Some(ip) => common.device = Some(format!("udp:{ip}")),
            None if dst.is_some_and(|d| !d.is_loopback()) => {
                let d = dst.expect("checked");
                return Err(format!("which device reaches {d}? give -I (a source address) or --ib-dev"));
            }
            None if dst.is_some_and(|d| d.is_ipv6()) => {
                return Err("::1 is the only IPv6 loopback address, and the server's udp device holds its RoCE port: \
                    run the two ends in two network namespaces, or over IPv4 loopback (-a 127.0.0.x)"
                    .into());
            }
            None => {}
        }
    }
    common.open(Progress::Blocking, None)
}

fn run_args(args: &RpingArgs, common: &CommonArgs) -> Result<u8, String> {
    // What rping's option parsing logs with -d.
    if args.port != 7174 {
        args.dbg(&format!("port {}", args.port));
    }
    args.dbg(if args.server { "server" } else { "client" });
    if args.size != 64 {
        args.dbg(&format!("size {}", args.size));
    }
    if args.count != 0 {
        args.dbg(&format!("count {}", args.count));
    }
    if args.verbose > 0 {
        args.dbg("verbose");
    }
    if args.validate > 0 {
        args.dbg("validate data");
    }
    let ch = EventChannel::new().map_err(|e| e.to_string())?;
    let cm_id = ch.create_id(PortSpace::Tcp).map_err(|e| format!("rdma_create_id: {e}"))?;
    args.dbg(&format!("created cm_id 0x{:x}", cm_id.handle()));
    let mut cb = Cb::new(args.server, args.debug > 0, ch, cm_id);
    let (code, ctx) = if args.server {
        let bind = match &args.addr {
            Some(a) => resolve(a, args.port)?,
            None => SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), args.port),
        };
        let ctx = open(common, Some(bind.ip()), None)?;
        (server::run(&mut cb, args, bind), ctx)
    } else {
        let Some(a) = &args.addr else {
            usage();
            return Ok(EINVAL);
        };
        let dst = resolve(a, args.port)?;
        let src = args.source.as_deref().map(|s| resolve(s, 0)).transpose()?;
        let ctx = open(common, src.map(|s| s.ip()), Some(dst.ip()))?;
        (client::run(&mut cb, args, src, dst), ctx)
    };
    args.dbg(&format!("destroy cm_id 0x{:x}", cb.cm_id.handle()));
    common.print_stats("", &ctx);
    Ok(code)
}
