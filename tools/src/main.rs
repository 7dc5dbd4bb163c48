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
    /// perftest's tests (write_bw, read_bw, send_bw, atomic_bw and the _lat ones) with perftest's exchange and tables.
    Perf(uroce_tools::perf::PerfArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Dump(args) => uroce_tools::dump::run(&args),
        Command::Perf(args) => uroce_tools::perf::run(&args),
    }
}
