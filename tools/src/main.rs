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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Dump(args) => uroce_tools::dump::run(&args),
    }
}
