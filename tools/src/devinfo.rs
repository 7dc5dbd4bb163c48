//! `uroce devinfo`: ibv_devinfo's layout for a uroce device (`-l` lists them).

use crate::common::CommonArgs;
use clap::Args;
use std::fmt::Write as _;
use std::process::ExitCode;
use uroce_verbs::{device_counters, devices, Context, Mtu, Progress};

#[derive(Args, Debug, Clone)]
pub struct DevinfoArgs {
    /// Use port PORT of the device (uroce devices have one: 1)
    #[arg(short = 'i', long = "ib-port")]
    pub ib_port: Option<u8>,
    /// Print only the device names
    #[arg(short = 'l', long)]
    pub list: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

pub fn run(args: &DevinfoArgs) -> ExitCode {
    args.common.init_logging();
    if args.list {
        let devs = devices();
        println!("{} HCA{} found:", devs.len(), if devs.len() == 1 { "" } else { "s" });
        for d in &devs {
            println!("\t{}", d.name);
        }
        println!();
        return ExitCode::SUCCESS;
    }
    if let Some(port) = args.ib_port.filter(|&p| p != 1) {
        eprintln!("Invalid port requested for device: {port} (uroce devices have one port, 1)");
        return ExitCode::from(4);
    }
    match args.common.open(Progress::Manual, None) {
        Ok(ctx) => {
            print!("{}", render(&ctx, args.common.verbose));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn guid(g: u64) -> String {
    format!("{:04x}:{:04x}:{:04x}:{:04x}", g >> 48, (g >> 32) & 0xffff, (g >> 16) & 0xffff, g & 0xffff)
}

fn mtu(m: Mtu) -> String {
    format!("{} ({})", m.bytes(), m.to_enum())
}

/// The text ibv_devinfo prints for this device, tabs included.
pub fn render(ctx: &Context, verbose: bool) -> String {
    let d = ctx.query_device();
    let port = ctx.query_port();
    let mut s = String::new();
    let _ = writeln!(s, "hca_id:\t{}", ctx.link_info().name);
    let _ = writeln!(s, "\ttransport:\t\t\tInfiniBand (0)");
    let _ = writeln!(s, "\tfw_ver:\t\t\t\t{}", d.fw_ver);
    let _ = writeln!(s, "\tnode_guid:\t\t\t{}", guid(d.node_guid));
    let _ = writeln!(s, "\tsys_image_guid:\t\t\t{}", guid(d.sys_image_guid));
    let _ = writeln!(s, "\tvendor_id:\t\t\t0x{:04x}", d.vendor_id);
    let _ = writeln!(s, "\tvendor_part_id:\t\t\t{}", d.vendor_part_id);
    let _ = writeln!(s, "\thw_ver:\t\t\t\t0x{:X}", d.hw_ver);
    let _ = writeln!(s, "\tphys_port_cnt:\t\t\t{}", d.phys_port_cnt);
    if verbose {
        let _ = writeln!(s, "\tmax_mr_size:\t\t\t0x{:x}", d.max_mr_size);
        let _ = writeln!(s, "\tpage_size_cap:\t\t\t0x{:x}", d.page_size_cap);
        let _ = writeln!(s, "\tmax_qp:\t\t\t\t{}", d.max_qp);
        let _ = writeln!(s, "\tmax_qp_wr:\t\t\t{}", d.max_qp_wr);
        let _ = writeln!(s, "\tmax_sge:\t\t\t{}", d.max_sge);
        let _ = writeln!(s, "\tmax_cq:\t\t\t\t{}", d.max_cq);
        let _ = writeln!(s, "\tmax_cqe:\t\t\t{}", d.max_cqe);
        let _ = writeln!(s, "\tmax_mr:\t\t\t\t{}", d.max_mr);
        let _ = writeln!(s, "\tmax_pd:\t\t\t\t{}", d.max_pd);
        let _ = writeln!(s, "\tmax_qp_rd_atom:\t\t\t{}", d.max_qp_rd_atom);
        let _ = writeln!(s, "\tmax_qp_init_rd_atom:\t\t{}", d.max_qp_init_rd_atom);
        let _ = writeln!(s, "\tatomic_cap:\t\t\t{} (1)", d.atomic_cap);
        let _ = writeln!(s, "\tmax_mw:\t\t\t\t{}", d.max_mw);
        let _ = writeln!(s, "\tmax_srq:\t\t\t{}", d.max_srq);
        let _ = writeln!(s, "\tmax_srq_wr:\t\t\t{}", d.max_srq_wr);
        let _ = writeln!(s, "\tmax_srq_sge:\t\t\t{}", d.max_srq_sge);
    }
    let _ = writeln!(s, "\t\tport:\t1");
    let _ = writeln!(s, "\t\t\tstate:\t\t\tPORT_ACTIVE (4)");
    let _ = writeln!(s, "\t\t\tmax_mtu:\t\t{}", mtu(port.max_mtu));
    let _ = writeln!(s, "\t\t\tactive_mtu:\t\t{}", mtu(port.active_mtu));
    let _ = writeln!(s, "\t\t\tsm_lid:\t\t\t{}", port.sm_lid);
    let _ = writeln!(s, "\t\t\tport_lid:\t\t{}", port.lid);
    let _ = writeln!(s, "\t\t\tport_lmc:\t\t0x00");
    let _ = writeln!(s, "\t\t\tlink_layer:\t\t{}", port.link_layer);
    if verbose {
        let _ = writeln!(s, "\t\t\tmax_msg_sz:\t\t0x{:x}", port.max_msg_sz);
        let _ = writeln!(s, "\t\t\tgid_tbl_len:\t\t{}", port.gid_tbl_len);
        for (i, g) in ctx.link_info().gids.iter() {
            let _ = writeln!(s, "\t\t\tGID[{i:3}]:\t\t{}, RoCE v2", g);
        }
        counters(&mut s, ctx);
    }
    let _ = writeln!(s);
    s
}

/// `-v`: the device's counters, as rxe shows its hw_counters: summed over
/// every context of the device, in running programs and closed ones
/// (`uroce_verbs::device_counters`), each counter this version knows
/// first (this context's own list, all zero), then any other one found.
fn counters(s: &mut String, ctx: &Context) {
    let device = &ctx.link_info().name;
    match device_counters(device) {
        Ok((mut sums, open)) => {
            let _ = writeln!(s, "\t\t\tcounters:\t\t{open} open context(s) in running programs, and all closed ones");
            for (name, _) in ctx.stats() {
                let at = sums.iter().position(|(n, _)| n == name);
                let value = at.map_or(0, |i| sums.remove(i).1);
                let _ = writeln!(s, "\t\t\t\t{name:<28}{value}");
            }
            for (name, value) in sums {
                let _ = writeln!(s, "\t\t\t\t{name:<28}{value}");
            }
        }
        Err(e) => {
            let _ = writeln!(s, "\t\t\tcounters:\t\tnot readable: {e}");
        }
    }
}
