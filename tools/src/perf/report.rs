//! What perftest prints, with its format macros copied verbatim from
//! perftest 4.5's `perftest_parameters.h` and `perftest_communication.h`
//! (only `PRIu64` spelled `lu`): the test header, the address lines, the
//! result tables and the `--out_json` file.

use super::cfmt::{sprintf, Arg};
use super::dest::Dest;
use super::exchange::BwReport;
use super::params::{Params, Tst, Verb};
use super::stats::LatReport;
use std::io::Write;
use uroce_verbs::Mtu;

/// perftest's line of dashes around every block of its output.
pub const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------\n";
pub const RESULT_FMT: &str = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
pub const RESULT_FMT_G: &str = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
pub const RESULT_FMT_LAT: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
pub const RESULT_FMT_LAT_DUR: &str = " #bytes        #iterations       t_avg[usec]    tps average";
pub const RESULT_EXT: &str = "\n";
pub const REPORT_FMT: &str = " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf";
pub const REPORT_FMT_EXT: &str = " %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf";
pub const REPORT_FMT_LAT: &str =
    " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f";
pub const REPORT_FMT_LAT_DUR: &str = " %-7lu       %lu            %-7.2f        %-7.2f";
pub const REPORT_EXT: &str = "\n";
const REPORT_FMT_JSON: &str =
    "MsgSize: %lu,\nn_iterations: %lu,\nBW_peak: %.2lf,\nBW_average: %.2lf,\nMsgRate: %.6lf,\n";
const REPORT_FMT_EXT_JSON: &str =
    "MsgSize: %lu,\nn_iterations: %lu,\nBW_peak: %.6lf,\nBW_average: %.6lf,\nMsgRate: %.6lf,\n";
const REPORT_FMT_LAT_JSON: &str = "MsgSize: %lu,\nn_iterations: %lu,\nt_min: %.2f,\nt_max: %.2f,\nt_typical: %.2f,\nt_avg: %.2f,\nt_stdev: %.2f,\npercentile_99: %.2f,\npercentile_99.9: %.2f,\n";
const REPORT_FMT_LAT_DUR_JSON: &str = "MsgSize: %lu,\nn_iterations: %lu,\nt_avg: %.2f,\ntps_average: %.2f,\n";
pub const BASIC_ADDR_FMT: &str = " %s address: LID %#04x QPN %#06x PSN %#06x";
pub const READ_FMT: &str = " OUT %#04x";
pub const RDMA_FMT: &str = " RKey %#08x VAddr %#016llx";
pub const PERF_GID_FMT: &str = " %s: %02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d\n";
pub const WAITING: &str =
    "\n************************************\n* Waiting for client to connect... *\n************************************\n";

/// Where one end's output goes: stdout and stderr, or nowhere (the server
/// of --loopback).
pub struct Out {
    out: Box<dyn Write + Send>,
    err: Box<dyn Write + Send>,
}

impl Out {
    pub fn stdout() -> Out {
        Out { out: Box::new(std::io::stdout()), err: Box::new(std::io::stderr()) }
    }
    pub fn sink() -> Out {
        Out { out: Box::new(std::io::sink()), err: Box::new(std::io::sink()) }
    }
    pub fn print(&mut self, s: &str) {
        let _ = self.out.write_all(s.as_bytes());
        let _ = self.out.flush();
    }
    /// What perftest prints to stderr without failing.
    pub fn warn(&mut self, s: &str) {
        let _ = self.err.write_all(s.as_bytes());
    }
}

/// What the header says about the device and the agreed link.
#[derive(Debug, Clone)]
pub struct Info {
    pub device: String,
    pub mtu: Mtu,
    pub gid_index: u8,
}

/// `ctx_print_test_info`.
pub fn test_info(p: &Params, info: &Info) -> String {
    let mut s = String::from(RESULT_LINE);
    s += &format!("                    {} ", p.verb.title());
    if p.verb == Verb::Atomic {
        s += &format!("{} ", p.atomic.name());
    }
    s += if p.tst == Tst::Bw { "BW " } else { "Latency " };
    s += "Test\n";
    if p.use_event {
        s += &format!(" Test with events. Using {}_comp0\n", info.device);
    }
    s += &format!(" Dual-port       : OFF\t\tDevice         : {}\n", info.device);
    s += &format!(" Number of qps   : {}\t\tTransport type : IB\n", p.num_qps);
    s += &format!(" Connection type : {}\t\tUsing SRQ      : OFF\n", p.conn.name());
    s += " PCIe relax order: Unsupported\n";
    s += " ibv_wr* API     : OFF\n";
    if !p.is_server() {
        s += &format!(" TX depth        : {}\n", p.tx_depth);
    }
    if p.verb == Verb::Send && p.is_server() {
        s += &format!(" RX depth        : {}\n", p.rx_depth);
    }
    if p.tst == Tst::Bw {
        s += &format!(" CQ Moderation   : {}\n", p.cq_mod);
    }
    s += &format!(" Mtu             : {}[B]\n", info.mtu.bytes());
    s += " Link type       : Ethernet\n";
    s += &format!(" GID index       : {}\n", info.gid_index);
    if p.verb.one_sided_rd() {
        s += &format!(" Outstand reads  : {}\n", p.out_reads);
    } else {
        s += &format!(" Max inline data : {}[B]\n", p.inline_size);
    }
    s + &rdma_cm_header_lines(p) + RESULT_LINE
}

/// `ctx_print_pingpong_data`: one QP's address line and its GID line.
pub fn dest_lines(verb: Verb, side: &str, d: &Dest) -> String {
    let mut s =
        sprintf(BASIC_ADDR_FMT, &[Arg::S(side), Arg::U(d.lid.into()), Arg::U(d.qpn.into()), Arg::U(d.psn.into())]);
    if verb == Verb::Read {
        s += &sprintf(READ_FMT, &[Arg::U(d.out_reads.into())]);
    }
    if matches!(verb, Verb::Read | Verb::Write) {
        s += &sprintf(RDMA_FMT, &[Arg::U(d.rkey.into()), Arg::U(d.vaddr)]);
    }
    s.push('\n');
    let mut args = vec![Arg::S("GID")];
    args.extend(d.gid.iter().map(|&b| Arg::U(b.into())));
    s + &sprintf(PERF_GID_FMT, &args)
}

/// The table header of a BW test.
pub fn bw_header(gbits: bool) -> String {
    format!("{RESULT_LINE}{}{RESULT_EXT}", if gbits { RESULT_FMT_G } else { RESULT_FMT })
}

/// The table header of a latency test.
pub fn lat_header(iterations: bool) -> String {
    format!("{RESULT_LINE}{}{RESULT_EXT}", if iterations { RESULT_FMT_LAT } else { RESULT_FMT_LAT_DUR })
}

/// A row of the BW table (`print_full_bw_report`); `inc_accuracy` below 0.1 Gb/s.
pub fn bw_line(r: &BwReport, gbits: bool) -> String {
    let fmt = if gbits && r.bw_avg < 0.1 { REPORT_FMT_EXT } else { REPORT_FMT };
    let args = [Arg::U(r.size), Arg::U(r.iters), Arg::F(r.bw_peak), Arg::F(r.bw_avg), Arg::F(r.msg_rate)];
    sprintf(fmt, &args) + REPORT_EXT
}

/// The rows of a latency report, with -U and -H's sample lists.
pub fn lat_lines(r: &LatReport, unsorted: bool, histogram: bool, iterations: bool) -> String {
    let mut s = String::new();
    let list = |s: &mut String, v: &[f64]| {
        *s += "#, usec\n";
        for (i, x) in v.iter().enumerate() {
            *s += &sprintf("%d, %g\n", &[Arg::U(i as u64 + 1), Arg::F(*x)]);
        }
    };
    if unsorted {
        list(&mut s, &r.unsorted);
    }
    if histogram {
        list(&mut s, &r.sorted);
    }
    if unsorted || histogram {
        s += &lat_header(iterations);
    }
    let args = [
        Arg::U(r.size),
        Arg::U(r.iters),
        Arg::F(r.t_min),
        Arg::F(r.t_max),
        Arg::F(r.t_typical),
        Arg::F(r.t_avg),
        Arg::F(r.t_stdev),
        Arg::F(r.p99),
        Arg::F(r.p99_9),
    ];
    s + &sprintf(REPORT_FMT_LAT, &args) + REPORT_EXT
}

/// A row of the duration-mode latency table.
pub fn lat_duration_line(size: u64, iters: u64, latency: f64, tps: f64) -> String {
    sprintf(REPORT_FMT_LAT_DUR, &[Arg::U(size), Arg::U(iters), Arg::F(latency), Arg::F(tps)]) + REPORT_EXT
}

/// `write_test_info_to_file`.
fn json_test_info(p: &Params, info: &Info) -> String {
    let mut s = format!("test_info: {{\ntest: {}_", p.verb.title());
    if p.verb == Verb::Atomic {
        s += &format!("{}_", p.atomic.name());
    }
    s += if p.tst == Tst::Bw { "BW_" } else { "Latency_" };
    s += "Test,\n";
    if p.use_event {
        s += &format!("Test with events: Using_{}_comp0,\n", info.device);
    }
    s += &format!("Dual_port: OFF,\nDevice: \"{}\",\n", info.device);
    s += &format!("Number_of_qps: {},\nTransport_type: IB,\n", p.num_qps);
    s += &format!("Connection_type: {},\nUsing_SRQ: OFF,\n", p.conn.name());
    s += " PCIe_relax_order: Unsupported,\nibv_wr_API: OFF,\n";
    if !p.is_server() {
        s += &format!("TX_depth : {},\n", p.tx_depth);
    }
    if p.verb == Verb::Send && p.is_server() {
        s += &format!("RX_depth: {},\n", p.rx_depth);
    }
    if p.tst == Tst::Bw {
        s += &format!("CQ_Moderation: {},\n", p.cq_mod);
    }
    s += &format!("Mtu: {},\nLink_type: Ethernet,\nGID_index: {},\n", info.mtu.bytes(), info.gid_index);
    if p.verb.one_sided_rd() {
        s += &format!("Outstand_reads: {},\n", p.out_reads);
    } else {
        s += &format!("Max_inline_data: {},\n", p.inline_size);
    }
    s + &rdma_cm_json_lines(p) + "},\n"
}

/// The results part of the json file of a BW test.
pub fn json_bw(r: &BwReport, gbits: bool) -> String {
    let fmt = if gbits && r.bw_avg < 0.1 { REPORT_FMT_EXT_JSON } else { REPORT_FMT_JSON };
    let args = [Arg::U(r.size), Arg::U(r.iters), Arg::F(r.bw_peak), Arg::F(r.bw_avg), Arg::F(r.msg_rate)];
    format!("results: {{\n{}}},\n", sprintf(fmt, &args))
}

/// The results part of the json file of a latency test.
pub fn json_lat(r: &LatReport) -> String {
    let args = [
        Arg::U(r.size),
        Arg::U(r.iters),
        Arg::F(r.t_min),
        Arg::F(r.t_max),
        Arg::F(r.t_typical),
        Arg::F(r.t_avg),
        Arg::F(r.t_stdev),
        Arg::F(r.p99),
        Arg::F(r.p99_9),
    ];
    format!("results: {{\n{}}},\n", sprintf(REPORT_FMT_LAT_JSON, &args))
}

/// The results part of the json file of a duration-mode latency test.
pub fn json_lat_duration(size: u64, iters: u64, latency: f64, tps: f64) -> String {
    let args = [Arg::U(size), Arg::U(iters), Arg::F(latency), Arg::F(tps)];
    format!("results: {{\n{}}},\n", sprintf(REPORT_FMT_LAT_DUR_JSON, &args))
}

/// Writes `--out_json`'s file (perftest's own, not strictly JSON, format),
/// replacing it as perftest does at every report.
pub fn write_json(p: &Params, info: &Info, results: &str) -> Result<(), String> {
    let Some(path) = &p.out_json else { return Ok(()) };
    let text = format!("{{\n{}{results}}}\n", json_test_info(p, info));
    std::fs::write(path, text).map_err(|e| format!("failed to open {}: {e}", path.display()))
}

/// The header's rdma_cm lines (`ctx_print_test_info`).
fn rdma_cm_header_lines(p: &Params) -> String {
    let mut s = format!(" rdma_cm QPs\t : {}\n", on_off(p.rdma_cm));
    s += &format!(" Data ex. method : {}", exchange_method(p));
    if p.rdma_cm && p.is_server() {
        s += "\n";
        s += RESULT_LINE;
        s += " Waiting for client rdma_cm QP to connect\n";
        s += " Please run the same command with the IB/RoCE interface IP";
    }
    s + "\n"
}

/// The json file's rdma_cm lines.
fn rdma_cm_json_lines(p: &Params) -> String {
    format!("rdma_cm_QPs: {},\nData_ex_method: {},\n", on_off(p.rdma_cm), exchange_method(p))
}

fn on_off(b: bool) -> &'static str {
    if b {
        "ON"
    } else {
        "OFF"
    }
}

fn exchange_method(p: &Params) -> &'static str {
    if p.comm_rdma_cm {
        "rdma_cm"
    } else {
        "Ethernet"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::stats::LatReport;

    // The expected lines were printed by glibc's printf with perftest's own macros.
    #[test]
    fn rows_are_byte_for_byte_perftests() {
        let r = BwReport { size: 65536, iters: 5000, bw_peak: 1050.10, bw_avg: 1049.66, msg_rate: 0.016794 };
        assert_eq!(bw_line(&r, false), " 65536      5000             1050.10            1049.66\t\t   0.016794\n");
        let g = BwReport { size: 8, iters: 100, bw_peak: 0.010772, bw_avg: 0.010257, msg_rate: 0.160266 };
        assert_eq!(bw_line(&g, true), " 8          100           0.010772            0.010257            0.160266\n");
        let l = LatReport {
            size: 2,
            iters: 1000,
            t_min: 8.94,
            t_max: 485.95,
            t_typical: 9.19,
            t_avg: 9.45,
            t_stdev: 1.12,
            p99: 20.74,
            p99_9: 485.95,
            ..LatReport::default()
        };
        assert_eq!(
            lat_lines(&l, false, false, true),
            " 2       1000          8.94           485.95       9.19     \t       9.45        \t1.12   \t\t20.74   \t\t485.95 \n"
        );
        assert_eq!(
            lat_duration_line(2, 56937, 17.56, 28466.41),
            " 2             56937            17.56          28466.41\n"
        );
    }

    #[test]
    fn address_lines_are_perftests() {
        let mut gid = [0u8; 16];
        gid[10..].copy_from_slice(&[255, 255, 192, 168, 122, 10]);
        let d = Dest {
            lid: 0,
            out_reads: 128,
            qpn: 0x11,
            psn: 0x6a9d8c,
            rkey: 0x1e8,
            vaddr: 0x7f8b_5c5f_4000,
            gid,
            srqn: 0,
        };
        assert_eq!(
            dest_lines(Verb::Read, "local", &d),
            " local address: LID 0000 QPN 0x0011 PSN 0x6a9d8c OUT 0x80 RKey 0x0001e8 VAddr 0x007f8b5c5f4000\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:122:10\n"
        );
        assert!(
            dest_lines(Verb::Atomic, "remote", &d).starts_with(" remote address: LID 0000 QPN 0x0011 PSN 0x6a9d8c\n")
        );
    }
}
