//! perftest's command line, as clap sees it: the flags uroce perf carries out,
//! and the perftest flags it knows but refuses with the reason.

use clap::Args;
use std::path::PathBuf;

/// The perftest flags uroce perf carries out (perftest 4.5's names and meanings).
#[derive(Args, Debug, Clone, Default)]
pub struct PerftestFlags {
    /// Listen on/connect to port <port> (default 18515)
    #[arg(short = 'p', long = "port", value_name = "PORT")]
    pub port: Option<u16>,
    /// Size of message to exchange (default 65536 for BW tests, 2 for latency); K and M suffixes
    #[arg(short = 's', long = "size", value_name = "SIZE")]
    pub size: Option<String>,
    /// Number of exchanges (at least 5, default 1000; 5000 for write_bw)
    #[arg(short = 'n', long = "iters", value_name = "ITERS", allow_negative_numbers = true)]
    pub iters: Option<i64>,
    /// Run sizes from 2 till 2^23
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Run the test for this many seconds
    #[arg(short = 'D', long = "duration", value_name = "SECONDS", allow_negative_numbers = true)]
    pub duration: Option<i64>,
    /// With -D: measure only after and before this many seconds (default duration/4)
    #[arg(short = 'f', long = "margin", value_name = "SECONDS", allow_negative_numbers = true)]
    pub margin: Option<i64>,
    /// Number of QPs (BW tests, default 1)
    #[arg(short = 'q', long = "qp", value_name = "NUM", allow_negative_numbers = true)]
    pub qps: Option<i64>,
    /// Size of the send queue (default 128 for BW tests, 1 for latency)
    #[arg(short = 't', long = "tx-depth", value_name = "DEPTH", allow_negative_numbers = true)]
    pub tx_depth: Option<i64>,
    /// Size of the receive queue (SEND tests, default 512)
    #[arg(short = 'r', long = "rx-depth", value_name = "DEPTH", allow_negative_numbers = true)]
    pub rx_depth: Option<i64>,
    /// Generate a completion only every <cq-mod> sends (BW tests, default 100)
    #[arg(short = 'Q', long = "cq-mod", value_name = "NUM", allow_negative_numbers = true)]
    pub cq_mod: Option<i64>,
    /// MTU: 256, 512, 1024, 2048 or 4096 (default the port's active MTU)
    #[arg(short = 'm', long = "mtu", value_name = "MTU", allow_negative_numbers = true)]
    pub mtu: Option<i64>,
    /// Connection type RC, UC or UD, where the test allows it (default RC)
    #[arg(short = 'c', long = "connection", value_name = "TYPE")]
    pub connection: Option<String>,
    /// Use the GID with this index (default: the first IPv4 one, as perftest picks)
    #[arg(short = 'x', long = "gid-index", value_name = "INDEX", allow_negative_numbers = true)]
    pub gid_index: Option<i64>,
    /// Use port <port> of the device (uroce devices have one: 1)
    #[arg(short = 'i', long = "ib-port", value_name = "PORT", allow_negative_numbers = true)]
    pub ib_port: Option<i64>,
    /// Max size of message to be sent inline
    #[arg(short = 'I', long = "inline_size", value_name = "SIZE", allow_negative_numbers = true)]
    pub inline_size: Option<i64>,
    /// Number of outstanding reads/atomics (default the device's maximum)
    #[arg(short = 'o', long = "outs", value_name = "NUM", allow_negative_numbers = true)]
    pub outs: Option<i64>,
    /// Atomic operation: CMP_AND_SWAP or FETCH_AND_ADD (default FETCH_AND_ADD)
    #[arg(short = 'A', long = "atomic_type", value_name = "TYPE")]
    pub atomic_type: Option<String>,
    /// Sleep on CQ events (default poll)
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// Do not warn about CPU frequency (uroce times with the monotonic clock: no warning to silence)
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
    /// Cancel the peak BW calculation (BW tests)
    #[arg(short = 'N', long = "noPeak")]
    pub no_peak: bool,
    /// QP timeout, 4.096 usec * 2^timeout (default 14)
    #[arg(short = 'u', long = "qp-timeout", value_name = "TIMEOUT", allow_negative_numbers = true)]
    pub qp_timeout: Option<i64>,
    /// Print out all results, sorted (latency tests)
    #[arg(short = 'H', long = "report-histogrm", visible_alias = "report-histogram")]
    pub histogram: bool,
    /// Print out all results, unsorted (latency tests; implies -H)
    #[arg(short = 'U', long = "report-unsorted")]
    pub unsorted: bool,
    /// Report BW in Gbit/sec (instead of MiB/sec)
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// Save the report in a json file (perftest's format)
    #[arg(long = "out_json")]
    pub out_json: bool,
    /// Name of the report json file (default perftest_out.json)
    #[arg(long = "out_json_file", value_name = "FILE")]
    pub out_json_file: Option<PathBuf>,
    /// Use an IPv6 GID (default IPv4)
    #[arg(long = "ipv6")]
    pub ipv6: bool,
    /// Connect QPs with rdma_cm and run test on those QPs
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,
    /// Communicate with rdma_cm module to exchange data - use regular QPs
    #[arg(short = 'z', long = "comm_rdma_cm")]
    pub comm_rdma_cm: bool,
    /// Set retry count value in rdma_cm mode (default 7)
    #[arg(long = "retry_count", value_name = "NUM", allow_negative_numbers = true)]
    pub retry_count: Option<i64>,
    #[command(flatten)]
    pub unsupported: Unsupported,
}

/// perftest flags uroce perf knows and refuses, each with the reason.
#[derive(Args, Debug, Clone, Default)]
pub struct Unsupported {
    #[arg(short = 'b', long = "bidirectional", hide = true)]
    bidirectional: bool,
    #[arg(short = 'l', long = "post_list", hide = true)]
    post_list: Option<String>,
    #[arg(short = 'O', long = "dualport", hide = true)]
    dualport: bool,
    #[arg(short = 'g', long = "mcg", hide = true)]
    mcg: bool,
    #[arg(short = 'S', long = "sl", hide = true)]
    sl: Option<String>,
    #[arg(short = 'T', long = "tos", hide = true)]
    tos: Option<String>,
    #[arg(short = 'C', long = "report-cycles", hide = true)]
    cycles: bool,
    #[arg(short = 'V', long = "version", hide = true)]
    version: bool,
    #[arg(short = 'w', long = "limit_bw", hide = true)]
    limit_bw: Option<String>,
    #[arg(short = 'y', long = "limit_msgrate", hide = true)]
    limit_msgrate: Option<String>,
    #[arg(long = "use-srq", hide = true)]
    srq: bool,
    #[arg(long = "run_infinitely", hide = true)]
    run_infinitely: bool,
    #[arg(long = "reversed", hide = true)]
    reversed: bool,
    #[arg(long = "dont_xchg_versions", hide = true)]
    dont_xchg_versions: bool,
    #[arg(long = "perform_warm_up", hide = true)]
    warm_up: bool,
    #[arg(long = "output", hide = true)]
    output: Option<String>,
    #[arg(long = "latency_gap", hide = true)]
    latency_gap: Option<String>,
    #[arg(long = "cpu_util", hide = true)]
    cpu_util: bool,
    #[arg(long = "mr_per_qp", hide = true)]
    mr_per_qp: bool,
    #[arg(long = "tclass", hide = true)]
    tclass: Option<String>,
    #[arg(long = "use_old_post_send", hide = true)]
    old_post_send: bool,
}

impl Unsupported {
    /// The first refused flag given, as a one-line error naming why.
    pub fn check(&self) -> Result<(), String> {
        let refused: [(bool, &str, &str); 21] = [
            (self.bidirectional, "-b/--bidirectional", "bidirectional tests are not implemented; run two tests"),
            (self.post_list.is_some(), "-l/--post_list", "post lists are not implemented; use -Q for CQ moderation"),
            (self.dualport, "-O/--dualport", "uroce devices have one port"),
            (self.mcg, "-g/--mcg", "uroce does not do multicast"),
            (self.sl.is_some(), "-S/--sl", "RoCE has no service level without VLANs, which uroce does not tag"),
            (self.tos.is_some(), "-T/--tos", "uroce's rdma_cm sends traffic class 0"),
            (self.cycles, "-C/--report-cycles", "uroce times with the monotonic clock in ns, not CPU cycles"),
            (self.version, "-V/--version", "see `uroce --version`; the exchange announces perftest version 6.06"),
            (self.limit_bw.is_some(), "-w/--limit_bw", "BW limits are not implemented"),
            (self.limit_msgrate.is_some(), "-y/--limit_msgrate", "message rate limits are not implemented"),
            (self.srq, "--use-srq", "SRQ tests are not implemented"),
            (self.run_infinitely, "--run_infinitely", "use -D with a long duration"),
            (self.reversed, "--reversed", "start the other end as the client instead"),
            (self.dont_xchg_versions, "--dont_xchg_versions", "perftest 4.5 itself fails with it (remote version 0)"),
            (self.warm_up, "--perform_warm_up", "warm-up is not implemented"),
            (self.output.is_some(), "--output", "reduced output levels are not implemented"),
            (self.latency_gap.is_some(), "--latency_gap", "latency gaps are not implemented"),
            (self.cpu_util, "--cpu_util", "CPU utilisation is not reported"),
            (self.mr_per_qp, "--mr_per_qp", "one MR serves all QPs"),
            (self.tclass.is_some(), "--tclass", "traffic classes are not implemented"),
            (self.old_post_send, "--use_old_post_send", "uroce has only the ibv_post_send path already"),
        ];
        match refused.iter().find(|(given, _, _)| *given) {
            Some((_, flag, why)) => Err(format!("{flag} is not supported by uroce perf: {why}")),
            None => Ok(()),
        }
    }
}
