//! `uroce-bench`: the pieces `bench/run` drives. Each subcommand prints its
//! figure on stdout (one number, or the table) and errors on stderr.

use clap::{Parser, Subcommand};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use uroce_bench::{baseline, packet_cost, rate, table};

#[derive(Parser)]
#[command(name = "uroce-bench", about = "uroce's benchmark pieces (bash bench/run runs them all)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// One 4 KiB RDMA WRITE and its ACK through two engines, each step in its own cg_* function
    /// (run under valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*cg_STEP')
    PacketCost {
        /// Messages before the measured ones (not in any cg_* function)
        #[arg(long, default_value_t = 1000)]
        warmup: u64,
        /// Messages through the cg_* functions (divide callgrind's count by this)
        #[arg(long, default_value_t = 1000)]
        iters: u64,
        /// Bytes of payload in each WRITE (1 to 4096, one packet)
        #[arg(long, default_value_t = packet_cost::PAYLOAD)]
        payload: usize,
        /// List the steps (function name, what it does) and exit
        #[arg(long)]
        list: bool,
    },
    /// ICRC rate in GB/s on one core (icrc::compute over IPv4 RoCEv2 packets)
    Icrc {
        #[arg(long, default_value_t = 4096)]
        payload: usize,
        #[arg(long, default_value_t = 0.5)]
        secs: f64,
    },
    /// One core's memcpy rate in GB/s: CHUNK-byte copies out of a SPAN-byte source (in cache), as the engine copies payload
    Memcpy {
        #[arg(long, default_value_t = 4096)]
        chunk: usize,
        #[arg(long, default_value_t = 65536)]
        span: usize,
        #[arg(long, default_value_t = 0.5)]
        secs: f64,
    },
    /// Nanoseconds per clock read, per empty non-blocking UDP receive (a system call that finds nothing), per cache-line hand-off between two cores, and for the udp link to carry a write_lat half trip's datagrams over loopback in one thread (the WRITE alone; the WRITE and an ACK)
    SyscallCost {
        #[arg(long, default_value_t = 0.3)]
        secs: f64,
    },
    /// Nanoseconds for the packet link (AF_PACKET) to carry a write_lat half trip's datagrams over a veth in one
    /// thread, as syscall-cost does for the udp link: each end is NETNS:SPEC (`packet:IFACE,ip=IP[,mac=MAC]`,
    /// the veth's two ends in their namespaces); needs root
    PacketLinkCost {
        a: String,
        b: String,
        #[arg(long, default_value_t = 0.3)]
        secs: f64,
    },
    /// TCP stream receiver: accepts one connection, prints Gbit/s received
    TcpServer {
        addr: SocketAddr,
        /// Seconds to wait for the connection
        #[arg(long, default_value_t = 30)]
        wait: u64,
    },
    /// TCP stream sender: writes 128 KiB chunks for --secs
    TcpClient {
        addr: SocketAddr,
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
    },
    /// Both ends of a TCP stream on one address; prints Gbit/s
    TcpLoopback {
        ip: IpAddr,
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
    },
    /// UDP echo server: answers until --idle seconds pass with nothing
    UdpServer {
        addr: SocketAddr,
        #[arg(long, default_value_t = 5.0)]
        idle: f64,
        /// Spin on a non-blocking socket instead of sleeping in recv
        #[arg(long)]
        polling: bool,
    },
    /// UDP ping-pong client: prints the median half round trip in microseconds
    UdpClient {
        addr: SocketAddr,
        #[arg(long, default_value_t = 34)]
        size: usize,
        #[arg(long, default_value_t = 20000)]
        count: usize,
        /// Spin on a non-blocking socket instead of sleeping in recv
        #[arg(long)]
        polling: bool,
    },
    /// Both ends of a UDP ping-pong on one address; prints the median half round trip in microseconds
    UdpLoopback {
        ip: IpAddr,
        #[arg(long, default_value_t = 34)]
        size: usize,
        #[arg(long, default_value_t = 20000)]
        count: usize,
        /// Both ends spin on non-blocking sockets instead of sleeping in recv
        #[arg(long)]
        polling: bool,
    },
    /// Serves FILE to each of --count TCP connections (write it all, close), for the lab guests'
    /// `nc ADDR PORT >FILE`; gives up after --wait seconds without a connection
    ServeFile {
        file: PathBuf,
        addr: SocketAddr,
        #[arg(long, default_value_t = 1)]
        count: usize,
        #[arg(long, default_value_t = 120)]
        wait: u64,
    },
    /// The results table from bench/run's TSV file: text on stdout, markdown with --markdown
    Table {
        results: PathBuf,
        /// Also write the table as markdown here
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// Also write every sample behind the medians here
        #[arg(long)]
        samples: Option<PathBuf>,
    },
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.clamp(0.01, 3600.0))
}

fn waiting(polling: bool) -> baseline::Waiting {
    if polling {
        baseline::Waiting::Polling
    } else {
        baseline::Waiting::Blocking
    }
}

fn run(cmd: Cmd) -> Result<(), String> {
    match cmd {
        Cmd::PacketCost { list: true, .. } => {
            for (name, what) in packet_cost::STEPS {
                println!("{name}\t{what}");
            }
        }
        Cmd::PacketCost { warmup, iters, payload, list: false } => {
            let x = packet_cost::run(warmup, iters, payload)?;
            println!(
                "{iters} measured messages after {warmup}: each one WRITE packet of {} bytes (RoCE, ICRC included) and one ACK of {}",
                x.write_len, x.ack_len
            );
        }
        Cmd::Icrc { payload, secs: s } => println!("{:.2}", rate::icrc_gbps(payload, secs(s))),
        Cmd::Memcpy { chunk, span, secs: s } => println!("{:.2}", rate::memcpy_gbps(chunk, span, secs(s))),
        Cmd::SyscallCost { secs: s } => {
            let (clock, recv) = rate::syscall_costs(secs(s))?;
            println!("clock_read_ns {clock:.1}\nempty_udp_recv_ns {recv:.1}");
            println!("cache_line_handoff_ns {:.1}", rate::cache_line_handoff_ns(secs(s)));
            for (name, with_ack) in [("udp_link_write_ns", false), ("udp_link_write_and_ack_ns", true)] {
                println!("{name} {:.1}", rate::udp_link_half_trip_ns(with_ack, secs(s))?);
            }
        }
        Cmd::PacketLinkCost { a, b, secs: s } => {
            let end = |x: &str| -> Result<(String, String), String> {
                let (ns, spec) = x.split_once(':').ok_or_else(|| format!("{x}: want NETNS:packet:IFACE,ip=IP"))?;
                Ok((ns.to_string(), spec.to_string()))
            };
            let (a, b) = (end(&a)?, end(&b)?);
            for (name, with_ack) in [("packet_link_write_ns", false), ("packet_link_write_and_ack_ns", true)] {
                let ns = rate::packet_link_half_trip_ns((&a.0, &a.1), (&b.0, &b.1), with_ack, secs(s))?;
                println!("{name} {ns:.1}");
            }
        }
        Cmd::TcpServer { addr, wait } => println!("{:.3}", baseline::tcp_server(addr, Duration::from_secs(wait))?),
        Cmd::TcpClient { addr, secs: s } => baseline::tcp_client(addr, secs(s))?,
        Cmd::TcpLoopback { ip, secs: s } => println!("{:.3}", baseline::tcp_loopback(ip, secs(s))?),
        Cmd::UdpServer { addr, idle, polling } => {
            baseline::udp_server(addr, secs(idle), waiting(polling))?;
        }
        Cmd::UdpClient { addr, size, count, polling } => {
            println!("{:.3}", baseline::udp_client(addr, size, count.max(1), count / 10, waiting(polling))?)
        }
        Cmd::UdpLoopback { ip, size, count, polling } => {
            println!("{:.3}", baseline::udp_loopback(ip, size, count.max(1), waiting(polling))?)
        }
        Cmd::ServeFile { file, addr, count, wait } => {
            let bytes = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            baseline::serve_file(&bytes, addr, count, Duration::from_secs(wait))?;
        }
        Cmd::Table { results, markdown, samples } => {
            let text = std::fs::read_to_string(&results).map_err(|e| format!("{}: {e}", results.display()))?;
            let rows = table::parse(&text)?;
            print!("{}", table::text(&rows));
            let (met, missed, unmeasured) = table::verdicts(&rows);
            println!("targets: {met} met, {missed} missed, {unmeasured} not measured");
            if let Some(p) = markdown {
                std::fs::write(&p, table::markdown(&rows)).map_err(|e| format!("{}: {e}", p.display()))?;
            }
            if let Some(p) = samples {
                std::fs::write(&p, table::samples_text(&rows)).map_err(|e| format!("{}: {e}", p.display()))?;
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse().cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uroce-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
