//! perftest's parameters: its defaults (`init_perftest_params`), the checks of
//! its parser and the adjustments of `force_dependecies` and `check_link`,
//! with perftest's messages.

pub use super::kinds::{AtomicType, Conn, DurationSpec, TestName, Tst, Verb};

use super::flags::PerftestFlags;
use std::path::PathBuf;
use uroce_verbs::{DeviceAttr, Mtu};

pub const DEF_PORT: u16 = 18515;
pub const MAX_SIZE: u64 = 8_388_608;
pub const DEF_RX_SEND: u32 = 512;
pub const UC_MAX_RX: u64 = 16000;
pub const MSG_SIZE_CQ_MOD_LIMIT: u64 = 8192;
/// `DEF_PAGE_SIZE`, `DEF_CACHE_LINE_SIZE`: perftest asks the system; both sides keep the larger.
pub const DEF_CYCLE_BUFFER: u64 = 4096;
pub const DEF_CACHE_LINE: u64 = 64;

/// The resolved parameters of one end.
#[derive(Debug, Clone)]
pub struct Params {
    pub test: TestName,
    pub verb: Verb,
    pub tst: Tst,
    pub conn: Conn,
    pub atomic: AtomicType,
    pub servername: Option<String>,
    pub port: Option<u16>,
    pub size: u64,
    pub req_size: bool,
    pub iters: u64,
    pub tx_depth: u32,
    pub rx_depth: u32,
    pub cq_mod: u32,
    pub req_cq_mod: bool,
    pub num_qps: u32,
    /// `-m` as given (validated against the port in `set_mtu`).
    pub mtu: Option<u32>,
    /// `-x`, when given.
    pub gid_index: Option<u8>,
    /// `-I`, when given; resolved into `inline_size` by [`Params::apply_device`].
    pub req_inline: Option<u32>,
    pub inline_size: u32,
    pub req_outs: Option<u32>,
    pub out_reads: u32,
    pub use_event: bool,
    pub no_peak: bool,
    pub qp_timeout: u8,
    pub duration: Option<DurationSpec>,
    /// `-f`, when given.
    pub margin: Option<u64>,
    pub run_all: bool,
    pub report_gbits: bool,
    pub out_json: Option<PathBuf>,
    pub histogram: bool,
    pub unsorted: bool,
    pub ipv6: bool,
    pub cycle_buffer: u64,
    pub cache_line: u64,
    /// `-R`: the test's QPs connect with rdma_cm (`work_rdma_cm`).
    pub rdma_cm: bool,
    /// `-z`, or `-R`: the exchange runs over an rdma_cm connection (`use_rdma_cm`).
    pub comm_rdma_cm: bool,
    /// uroce's authenticated mode: the key both ends' QPs use (`--auth-key`).
    pub auth_key: Option<[u8; 32]>,
    /// `--retry_count` of the rdma_cm connections.
    pub retry_count: u8,
    /// What perftest prints while parsing (warnings), to print first, each
    /// after a line of dashes.
    pub notes: Vec<String>,
}

impl Params {
    pub fn is_server(&self) -> bool {
        self.servername.is_none()
    }
    pub fn iterations(&self) -> bool {
        self.duration.is_none()
    }
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(DEF_PORT)
    }
}

type Check = Result<(), String>;

fn range(v: i64, min: i64, max: i64, name: &str) -> Result<i64, String> {
    if v < min || v > max {
        return Err(format!("{name} should be between {min} and {max}"));
    }
    Ok(v)
}

/// perftest's `-s`: a number with an optional K or M suffix.
fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, factor) = match s.strip_suffix('K') {
        Some(d) => (d, 1024),
        None => s.strip_suffix('M').map_or((s, 1), |d| (d, 1024 * 1024)),
    };
    let n: u64 =
        digits.trim().parse().map_err(|_| format!("-s {s}: give a size in bytes (K and M suffixes allowed)"))?;
    let size = n.saturating_mul(factor);
    if size < 1 || size > u64::from(u32::MAX / 2) {
        return Err(format!("Message Size should be between 1 and {}", u32::MAX / 2));
    }
    Ok(size)
}

fn parse_conn(s: &str, verb: Verb) -> Result<Conn, String> {
    match s {
        "RC" => Ok(Conn::Rc),
        "UC" if verb.one_sided_rd() => Err("UC connection not possible in READ/ATOMIC verbs".into()),
        "UC" => Ok(Conn::Uc),
        "UD" if verb != Verb::Send => Err("UD connection only possible in SEND verb".into()),
        "UD" => Ok(Conn::Ud),
        "XRC" | "DC" | "SRD" | "RawEth" => Err(format!("-c {s}: uroce carries out RC, UC and UD only")),
        _ => Err("Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}".into()),
    }
}

fn parse_atomic(s: &str) -> Result<AtomicType, String> {
    match s {
        "CMP_AND_SWAP" => Ok(AtomicType::CmpAndSwap),
        "FETCH_AND_ADD" => Ok(AtomicType::FetchAndAdd),
        _ => Err("Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}".into()),
    }
}

impl Params {
    /// perftest's defaults for `test`, then its parser's checks on `f`, then
    /// `force_dependecies`.
    pub fn resolve(test: TestName, host: Option<String>, f: &PerftestFlags) -> Result<Params, String> {
        f.unsupported.check()?;
        let mut p = Params::defaults(test, host);
        p.parse_flags(f)?;
        p.force_dependencies()?;
        Ok(p)
    }

    fn defaults(test: TestName, servername: Option<String>) -> Params {
        let (verb, tst) = (test.verb(), test.tst());
        let bw = tst == Tst::Bw;
        Params {
            test,
            verb,
            tst,
            conn: Conn::Rc,
            atomic: AtomicType::FetchAndAdd,
            servername,
            port: None,
            size: if verb == Verb::Atomic {
                8
            } else if bw {
                65536
            } else {
                2
            },
            req_size: false,
            iters: if bw && verb == Verb::Write { 5000 } else { 1000 },
            tx_depth: if bw { 128 } else { 1 },
            rx_depth: if verb == Verb::Send { DEF_RX_SEND } else { 1 },
            cq_mod: 100,
            req_cq_mod: false,
            num_qps: 1,
            mtu: None,
            gid_index: None,
            req_inline: None,
            inline_size: 0,
            req_outs: None,
            out_reads: 1,
            use_event: false,
            no_peak: false,
            qp_timeout: 14,
            duration: None,
            margin: None,
            run_all: false,
            auth_key: None,
            report_gbits: false,
            out_json: None,
            histogram: false,
            unsorted: false,
            ipv6: false,
            cycle_buffer: DEF_CYCLE_BUFFER,
            cache_line: DEF_CACHE_LINE,
            rdma_cm: false,
            comm_rdma_cm: false,
            retry_count: 7,
            notes: Vec::new(),
        }
    }

    fn parse_flags(&mut self, f: &PerftestFlags) -> Check {
        self.port = f.port;
        if let Some(i) = f.ib_port {
            if i != 1 {
                return Err(format!("-i {i}: uroce devices have one port, 1"));
            }
        }
        if let Some(m) = f.mtu {
            if Mtu::from_bytes(u32::try_from(m).unwrap_or(0)).is_none() {
                return Err(format!("Invalid MTU - {m}: choose mtu from {{256,512,1024,2048,4096}}"));
            }
            self.mtu = Some(m as u32);
        }
        if let Some(n) = f.iters {
            self.iters = range(n, 5, 100_000_000, "Iteration num")? as u64;
        }
        if let Some(t) = f.tx_depth {
            self.tx_depth = range(t, 1, 15000, "Tx depth")? as u32;
        }
        if let Some(u) = f.qp_timeout {
            self.qp_timeout = range(u, 0, 31, "QP Timeout")? as u8;
        }
        if let Some(x) = f.gid_index {
            self.gid_index = Some(range(x, 0, 64, "Gid index")? as u8);
        }
        if let Some(c) = &f.connection {
            self.conn = parse_conn(c, self.verb)?;
        }
        if let Some(q) = f.qps {
            if self.tst != Tst::Bw {
                return Err("Multiple QPs only available on bw tests".into());
            }
            self.num_qps = range(q, 1, 16384, "num of Qps")? as u32;
        }
        self.parse_verb_flags(f)?;
        self.parse_report_flags(f)?;
        if let Some(s) = &f.size {
            self.size = parse_size(s)?;
            self.req_size = true;
        }
        if let Some(d) = f.duration {
            if d <= 0 {
                return Err("Duration period must be positive".into());
            }
            self.duration = Some(DurationSpec { secs: d as u64, margin: 0 });
        }
        self.run_all = f.all;
        self.parse_rdma_cm_flags(f)
    }

    /// `-R` and `-z` (`-R` implies `-z`), with perftest's refusals.
    fn parse_rdma_cm_flags(&mut self, f: &PerftestFlags) -> Check {
        self.rdma_cm = f.rdma_cm;
        self.comm_rdma_cm = f.rdma_cm || f.comm_rdma_cm;
        if let Some(r) = f.retry_count {
            self.retry_count =
                u8::try_from(r).ok().filter(|r| *r <= 7).ok_or("Retry count should be between 0 and 7")?;
        }
        if self.rdma_cm && self.conn == Conn::Uc {
            return Err(" UC is not supported in librdmacm".into());
        }
        Ok(())
    }

    fn parse_verb_flags(&mut self, f: &PerftestFlags) -> Check {
        if let Some(i) = f.inline_size {
            self.req_inline = Some(range(i, 0, 1024, "Max inline")? as u32);
            if self.verb.one_sided_rd() {
                return Err("Inline feature not available on READ/Atomic verbs".into());
            }
        }
        if let Some(o) = f.outs {
            if !self.verb.one_sided_rd() {
                return Err("Setting Outstanding reads only available on READ verb".into());
            }
            self.req_outs = Some(u32::try_from(o).unwrap_or(0));
        }
        if let Some(r) = f.rx_depth {
            self.rx_depth = range(r, 1, 16384, "Rx depth")? as u32;
            if self.verb != Verb::Send && self.rx_depth > 1 {
                return Err("On RDMA verbs rx depth can be only 1".into());
            }
        }
        if let Some(q) = f.cq_mod {
            self.cq_mod = range(q, 1, 1024, "CQ moderation")? as u32;
            self.req_cq_mod = true;
        }
        if let Some(a) = &f.atomic_type {
            if self.verb != Verb::Atomic {
                return Err("You are not running the atomic_lat/bw test! To change the atomic action type, you must run one of the atomic tests".into());
            }
            self.atomic = parse_atomic(a)?;
        }
        if f.events && self.verb == Verb::Write {
            return Err("Events feature not available on WRITE verb".into());
        }
        self.use_event = f.events;
        Ok(())
    }

    fn parse_report_flags(&mut self, f: &PerftestFlags) -> Check {
        let bw = self.tst == Tst::Bw;
        if f.no_peak && !bw {
            return Err("NoPeak only valid for BW tests".into());
        }
        if (f.histogram || f.unsorted) && bw {
            return Err("Available only on Latency tests".into());
        }
        if f.report_gbits && !bw {
            return Err("--report_gbits: only BW tests report a bandwidth".into());
        }
        self.no_peak = f.no_peak;
        self.histogram = f.histogram;
        self.unsorted = f.unsorted;
        self.report_gbits = f.report_gbits;
        self.ipv6 = f.ipv6;
        if f.out_json || f.out_json_file.is_some() {
            self.out_json = Some(f.out_json_file.clone().unwrap_or_else(|| "perftest_out.json".into()));
        }
        if let Some(m) = f.margin {
            self.margin = Some(u64::try_from(m).map_err(|_| "Margin must be non-negative int".to_string())?);
        }
        Ok(())
    }

    /// `force_dependecies`, the parts that apply to these tests.
    fn force_dependencies(&mut self) -> Check {
        if self.iterations() {
            self.tx_depth = self.tx_depth.min(self.iters as u32);
            if self.verb == Verb::Send {
                self.rx_depth = self.rx_depth.min(self.iters as u32);
            }
            if matches!(self.conn, Conn::Ud | Conn::Uc) && self.rx_depth == DEF_RX_SEND {
                self.rx_depth = self.iters.min(UC_MAX_RX) as u32;
            }
        }
        self.moderate_large_messages();
        self.cq_mod = self.cq_mod.min(self.tx_depth);
        if self.run_all {
            if self.verb == Verb::Atomic {
                return Err("Message size cannot be changed for Atomic tests (-a runs all sizes)".into());
            }
            self.size = MAX_SIZE;
        }
        if self.verb == Verb::Atomic && self.size != 8 {
            return Err("Message size cannot be changed for Atomic tests".into());
        }
        self.duration_dependencies()?;
        if self.verb == Verb::Send && self.tst == Tst::Bw && self.is_server() {
            self.no_peak = true;
        }
        if self.verb == Verb::Send && self.rx_depth % 2 == 1 && !self.run_all {
            self.rx_depth += 1;
        }
        if self.iterations() && self.iters > 20000 && self.tst == Tst::Bw {
            self.no_peak = true;
        }
        Ok(())
    }

    fn moderate_large_messages(&mut self) {
        if self.size > MSG_SIZE_CQ_MOD_LIMIT && self.conn != Conn::Ud && !self.run_all && !self.use_event {
            if !self.req_cq_mod {
                self.cq_mod = 1;
            } else if self.cq_mod > 1 {
                self.notes.push(
                    "Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n"
                        .into(),
                );
            }
        }
    }

    fn duration_dependencies(&mut self) -> Check {
        let Some(d) = self.duration else { return Ok(()) };
        if self.use_event {
            return Err("Duration mode doesn't work with events.".into());
        }
        if self.run_all {
            return Err("Duration mode currently doesn't support running on all sizes.".into());
        }
        self.iters = 0;
        self.no_peak = true;
        let margin = self.margin.unwrap_or(d.secs / 4);
        if d.secs <= 2 * margin {
            return Err("please check that DURATION > 2*MARGIN".into());
        }
        self.duration = Some(DurationSpec { secs: d.secs, margin });
        Ok(())
    }
}

impl Params {
    /// `check_link`: the inline size and the outstanding reads this device
    /// gives, as perftest sets them for a device it knows.
    pub fn apply_device(&mut self, dev: &DeviceAttr) {
        self.inline_size = match (self.req_inline, self.tst, self.verb) {
            (Some(i), _, _) => i,
            (None, Tst::Lat, Verb::Write) => 220,
            (None, Tst::Lat, Verb::Send) if self.conn == Conn::Ud => 188,
            (None, Tst::Lat, Verb::Send) => 236,
            _ => 0,
        };
        if !self.verb.one_sided_rd() {
            self.out_reads = 1;
            return;
        }
        self.inline_size = 0;
        let max = dev.max_qp_rd_atom;
        self.out_reads = match self.req_outs {
            Some(n) if n > max => {
                self.notes
                    .push(format!(" Number of outstanding reads is above max = {max}\n Changing to that max value\n"));
                max
            }
            Some(n) if n > 0 => n,
            _ => max,
        };
    }

    /// `set_mtu`: `-m`, or the port's active MTU; never above the active MTU.
    /// Returns the MTU and what perftest prints about it.
    pub fn set_mtu(&self, active: Mtu) -> (Mtu, Option<String>) {
        let Some(asked) = self.mtu.and_then(Mtu::from_bytes) else { return (active, None) };
        if asked > active {
            let note =
                format!("Requested mtu is higher than active mtu \nChanging to active mtu - {}\n", active as u32);
            return (active, Some(note));
        }
        (asked, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(test: TestName, host: Option<&str>, f: impl Fn(&mut PerftestFlags)) -> Result<Params, String> {
        let mut flags = PerftestFlags::default();
        f(&mut flags);
        Params::resolve(test, host.map(String::from), &flags)
    }

    #[test]
    fn defaults_are_perftests() {
        let w = resolve(TestName::WriteBw, Some("h"), |_| {}).unwrap();
        assert_eq!((w.size, w.iters, w.tx_depth, w.cq_mod, w.port()), (65536, 5000, 128, 1, 18515));
        let l = resolve(TestName::SendLat, None, |_| {}).unwrap();
        assert_eq!((l.size, l.iters, l.tx_depth, l.cq_mod, l.rx_depth), (2, 1000, 1, 1, 512));
        let a = resolve(TestName::AtomicBw, Some("h"), |_| {}).unwrap();
        assert_eq!((a.size, a.atomic, a.cq_mod), (8, AtomicType::FetchAndAdd, 100));
        // The send_bw server never has a peak; nor does a run above 20000 iterations.
        assert!(resolve(TestName::SendBw, None, |_| {}).unwrap().no_peak);
        assert!(resolve(TestName::WriteBw, Some("h"), |f| f.iters = Some(20001)).unwrap().no_peak);
    }

    #[test]
    fn force_dependencies() {
        let p = resolve(TestName::SendBw, None, |f| f.iters = Some(7)).unwrap();
        assert_eq!((p.tx_depth, p.rx_depth, p.cq_mod), (7, 8, 1));
        let ud = resolve(TestName::SendBw, None, |f| f.connection = Some("UD".into())).unwrap();
        assert_eq!(ud.rx_depth, 1000);
        let d = resolve(TestName::WriteBw, Some("h"), |f| f.duration = Some(8)).unwrap();
        assert_eq!((d.iters, d.no_peak, d.duration), (0, true, Some(DurationSpec { secs: 8, margin: 2 })));
        let a = resolve(TestName::ReadLat, Some("h"), |f| f.all = true).unwrap();
        assert_eq!(a.size, MAX_SIZE);
        let q = resolve(TestName::WriteBw, Some("h"), |f| f.cq_mod = Some(10)).unwrap();
        assert!(q.notes[0].starts_with("Warning: Large message requested and CQ moderation enabled\n"));
    }

    #[test]
    fn parser_errors_are_perftests() {
        let err = |t, f: fn(&mut PerftestFlags)| resolve(t, Some("h"), f).unwrap_err();
        assert_eq!(err(TestName::WriteLat, |f| f.qps = Some(2)), "Multiple QPs only available on bw tests");
        assert_eq!(
            err(TestName::ReadBw, |f| f.connection = Some("UC".into())),
            "UC connection not possible in READ/ATOMIC verbs"
        );
        assert_eq!(
            err(TestName::WriteBw, |f| f.connection = Some("UD".into())),
            "UD connection only possible in SEND verb"
        );
        assert_eq!(
            err(TestName::AtomicBw, |f| f.size = Some("16".into())),
            "Message size cannot be changed for Atomic tests"
        );
        assert_eq!(err(TestName::WriteBw, |f| f.iters = Some(3)), "Iteration num should be between 5 and 100000000");
        let margin = |f: &mut PerftestFlags| {
            f.duration = Some(2);
            f.margin = Some(1);
        };
        assert_eq!(err(TestName::WriteBw, margin), "please check that DURATION > 2*MARGIN");
        assert!(err(TestName::WriteBw, |f| f.mtu = Some(1000)).starts_with("Invalid MTU - 1000"));
        assert!(err(TestName::SendBw, |f| f.connection = Some("XRC".into())).contains("RC, UC and UD only"));
        assert_eq!(resolve(TestName::WriteBw, None, |f| f.size = Some("2K".into())).unwrap().size, 2048);
    }
}
