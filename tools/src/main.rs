//! `uroce`: RDMA tools over a userspace RoCEv2 stack.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "uroce", version, about = "A userspace RoCEv2 stack and the RDMA tools that go with it")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode RoCEv2 frames from a pcap file or a live interface, checking every ICRC.
    Dump(uroce_tools::dump::DumpArgs),
    /// Show the device and its port, like ibv_devinfo.
    Devinfo(uroce_tools::devinfo::DevinfoArgs),
    /// RC SEND ping-pong, like ibv_rc_pingpong (same flags, exchange and output).
    Pingpong(uroce_tools::pingpong::RcArgs),
    /// UD SEND ping-pong, like ibv_ud_pingpong.
    #[command(name = "ud_pingpong")]
    UdPingpong(uroce_tools::pingpong::UdArgs),
    /// perftest's tests (write_bw, read_bw, send_bw, atomic_bw and the _lat ones) with perftest's exchange and tables.
    Perf(uroce_tools::perf::PerfArgs),
    /// rping over rdma_cm, like rdma-core's rping (same flags, protocol and output).
    Rping(uroce_tools::rping::RpingArgs),
    /// Run an unmodified RDMA program over uroce's drop-in libibverbs (bash scripts/dropin installs it).
    Exec(uroce_tools::exec::ExecArgs),
}

fn main() -> ExitCode {
    use uroce_tools::ladder_run::LadderRun;
    let cli = Cli::parse();
    match cli.command {
        Command::Dump(args) => uroce_tools::dump::run(&args),
        Command::Devinfo(args) => uroce_tools::devinfo::run(&args),
        Command::Pingpong(mut args) => {
            let s = &mut args.shared;
            let ladder = LadderRun::prepare(s.common.ladder, &mut s.common.pcap, s.loopback.loopback);
            LadderRun::after(ladder, uroce_tools::pingpong::run_rc(&args))
        }
        Command::UdPingpong(mut args) => {
            let s = &mut args.shared;
            let ladder = LadderRun::prepare(s.common.ladder, &mut s.common.pcap, s.loopback.loopback);
            LadderRun::after(ladder, uroce_tools::pingpong::run_ud(&args))
        }
        Command::Perf(mut args) => {
            let ladder = LadderRun::prepare(args.common.ladder, &mut args.common.pcap, args.loopback.loopback);
            LadderRun::after(ladder, uroce_tools::perf::run(&args))
        }
        Command::Rping(mut args) => {
            let ladder = LadderRun::prepare(args.ladder, &mut args.pcap, false);
            LadderRun::after(ladder, uroce_tools::rping::run(&args))
        }
        Command::Exec(args) => uroce_tools::exec::run(&args),
    }
}
