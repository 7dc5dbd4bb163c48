//! The simulation matrix's operations and impairments over real links
//! (issue 15: every test over every link, the same-host path included).
//! Two devices of this process, each link either UDP (`udp:IP,shm=0`), the
//! same-host path through shared memory (`shm=1`), or (as root) the packet
//! link on the two ends of a veth in a network namespace of the test's own;
//! side a's link clean, or losing, duplicating, reordering or corrupting
//! packets, or all at once.
//! Every cell posts SENDs, WRITEs, READs or atomics of sizes around the path
//! MTU (4096), several outstanding, and checks the data byte-exact, every WR
//! completed once, in order, successfully, and the atomics' original values.
//! On clean links also UC (SEND, WRITE_WITH_IMM) and UD (SEND up to the path
//! MTU). Each run checks that the traffic took the path it names and that
//! the impairment showed in the engines' counters.

use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;
use uroce_stack::link::impair::{Faults, ImpairConfig};
use uroce_stack::link::netns::is_root;
use uroce_stack::testnet::Namespaces;
use uroce_verbs::testing::{connect_pair, PairSpec, RcPair};
use uroce_verbs::*;

/// The longest one completion may take: far above seven retransmissions at
/// the default 67 ms ACK timeout.
const T: Duration = Duration::from_secs(20);
const SIZES: [usize; 6] = [0, 1, 4095, 4096, 4097, 65_536];
/// Messages of a cell, all posted before the first completion is awaited.
const MESSAGES: usize = 4;
const REGION: usize = MESSAGES * 65_536 + 8;
/// The UD QPs' Q_Key.
const QKEY: u32 = 0x1111_2222;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Send,
    Write,
    /// WRITE_WITH_IMM: a UC WRITE's completion at the requester says only
    /// that it left; the immediate's receive at the responder, that it landed.
    WriteImm,
    Read,
    FetchAdd,
    CmpSwap,
}

const OPS: [Op; 5] = [Op::Send, Op::Write, Op::Read, Op::FetchAdd, Op::CmpSwap];

struct Regions {
    /// Side a's: what it sends and writes, where READ results and atomics'
    /// original values land.
    local: Mr,
    /// Side b's: what a's WRITEs, READs and atomics name, and where its
    /// receives land.
    target: Mr,
}

/// The packet link's two ends on the veth.
const DEV_A: &str = "packet:va,ip=198.18.7.1,mac=02:00:00:00:07:01";
const DEV_B: &str = "packet:vb,ip=198.18.7.2,mac=02:00:00:00:07:02";

/// The link the pair runs over.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Path {
    Udp,
    SameHost,
    Packet,
}

/// A network namespace of the test's own holding a veth pair `va`-`vb`;
/// deleted on drop.
fn veth_namespace(tag: &str) -> Namespaces {
    let ns = Namespaces::new(&format!("lm-{tag}"), 1);
    ns.veth(0, "va", 0, "vb");
    ns
}
/// The two QPs a cell runs on, and their CQs.
struct Ends<'a> {
    a: &'a Qp,
    b: &'a Qp,
    cq_a: &'a Cq,
    cq_b: &'a Cq,
}

fn open(path: Path, faults: Option<(Faults, Faults)>, seed: u64, tag: &str) -> (RcPair, Regions, Option<Namespaces>) {
    let impair_a = faults.map(|(tx, rx)| ImpairConfig { seed, tx, rx });
    let spec = PairSpec {
        impair_a,
        cq_depth: 64,
        max_wr: Some(16),
        same_host: Some(path == Path::SameHost),
        ..PairSpec::new(seed, Progress::Blocking)
    };
    let (p, veth) = match path {
        Path::Packet => {
            let veth = veth_namespace(tag);
            // Sockets opened (and progress threads started) inside stay there.
            let _in = veth.enter(0);
            // Every packet test opens these two names, each in its own
            // namespace: distinct devices, with options of their own.
            let a = |o: &OpenOptions| Device::open_with(DEV_A, o);
            let b = |o: &OpenOptions| Device::open_with(DEV_B, o);
            (RcPair::open_on(&spec, TestNet::new(), a, b), Some(veth))
        }
        _ => (RcPair::open(&spec), None),
    };
    let remote =
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    let local = p.pd_a.reg_mr(REGION, AccessFlags::LOCAL_WRITE).unwrap();
    let target = p.pd_b.reg_mr(REGION, remote).unwrap();
    (p, Regions { local, target }, veth)
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64).wrapping_mul(131).wrapping_add(seed.wrapping_mul(7919)) as u8 | 1).collect()
}

/// Waits for `wr_ids` on `cq`, in that order, each successful.
fn expect_in_order(cq: &Cq, wr_ids: impl Iterator<Item = u64>) -> Result<Vec<WorkCompletion>, String> {
    let mut got = Vec::new();
    for want in wr_ids {
        let wc = cq.wait_one(T).map_err(|e| format!("no completion for WR {want} within {T:?}: {e}"))?;
        if (wc.wr_id, wc.status) != (want, WcStatus::Success) {
            return Err(format!("wanted WR {want} successful, got {wc:?}"));
        }
        got.push(wc);
    }
    Ok(got)
}

/// One cell: `op` at `size` (atomics: 8 bytes), [`MESSAGES`] outstanding.
fn run_cell(e: &Ends, r: &Regions, op: Op, size: usize, cell: u64) -> Result<(), String> {
    let first = cell * 100;
    let ids = || first..first + MESSAGES as u64;
    let at = |k: usize| k * size;
    match op {
        Op::Send | Op::Write | Op::WriteImm => {
            for (k, id) in ids().enumerate() {
                r.local.write(at(k), &pattern(id, size));
            }
            for (k, id) in ids().enumerate() {
                let sge = vec![r.local.sge(at(k), size as u32)];
                let (remote_addr, rkey) = (r.target.addr() + at(k) as u64, r.target.rkey());
                let wr_op = match op {
                    Op::Send => WrOp::Send,
                    Op::WriteImm => WrOp::RdmaWriteWithImm { remote_addr, rkey, imm: id as u32 },
                    _ => WrOp::RdmaWrite { remote_addr, rkey },
                };
                if op != Op::Write {
                    let sg_list = match op {
                        Op::Send => r.target.sge(at(k), size as u32).into(),
                        _ => SgList::default(),
                    };
                    e.b.post_recv(&RecvWr { wr_id: id, sg_list }).map_err(|e| e.to_string())?;
                }
                e.a.post_send(&SendWr::new(id, wr_op, sge)).map_err(|e| e.to_string())?;
            }
            expect_in_order(e.cq_a, ids())?;
            if op != Op::Write {
                let wcs = expect_in_order(e.cq_b, ids())?;
                if let Some(wc) = wcs.iter().find(|wc| op == Op::Send && wc.byte_len as usize != size) {
                    return Err(format!("a receive took {} bytes of a {size}-byte SEND", wc.byte_len));
                }
                if let Some(wc) = wcs.iter().find(|wc| op == Op::WriteImm && u64::from(wc.imm_data) != wc.wr_id) {
                    return Err(format!("WRITE_WITH_IMM {} brought immediate {}", wc.wr_id, wc.imm_data));
                }
            }
            check(&r.target, size, ids(), "the target")
        }
        Op::Read => {
            for (k, id) in ids().enumerate() {
                r.target.write(at(k), &pattern(id, size));
            }
            for (k, id) in ids().enumerate() {
                let wr_op = WrOp::RdmaRead { remote_addr: r.target.addr() + at(k) as u64, rkey: r.target.rkey() };
                e.a.post_send(&SendWr::new(id, wr_op, vec![r.local.sge(at(k), size as u32)]))
                    .map_err(|e| e.to_string())?;
            }
            expect_in_order(e.cq_a, ids())?;
            check(&r.local, size, ids(), "the READ results")
        }
        Op::FetchAdd | Op::CmpSwap => run_atomics(e, r, op, ids()),
    }
}

/// Checks that message `k` of `ids` lies at `k * size` of `mr`.
fn check(mr: &Mr, size: usize, ids: impl Iterator<Item = u64>, what: &str) -> Result<(), String> {
    for (k, id) in ids.enumerate() {
        let mut got = vec![0; size];
        mr.read(k * size, &mut got);
        if let Some(i) = got.iter().zip(pattern(id, size)).position(|(a, b)| *a != b) {
            return Err(format!("{what}: message {k} differs at byte {i}"));
        }
    }
    Ok(())
}

/// FETCH_ADDs of 1, 2, 3... or CMP_SWAPs each expecting the last one's
/// value, on one word of the target; the original values must follow.
fn run_atomics(e: &Ends, r: &Regions, op: Op, ids: std::ops::Range<u64>) -> Result<(), String> {
    let word = REGION - 8;
    r.target.write(word, &0u64.to_ne_bytes());
    let mut value = 0u64;
    let mut wants = Vec::new();
    for (k, id) in ids.clone().enumerate() {
        let remote_addr = r.target.addr() + word as u64;
        let (wr_op, next) = match op {
            Op::FetchAdd => (WrOp::AtomicFetchAdd { remote_addr, rkey: r.target.rkey(), add: id }, value + id),
            _ => (WrOp::AtomicCmpSwp { remote_addr, rkey: r.target.rkey(), compare: value, swap: id }, id),
        };
        wants.push(value);
        value = next;
        e.a.post_send(&SendWr::new(id, wr_op, vec![r.local.sge(8 * k, 8)])).map_err(|e| e.to_string())?;
    }
    expect_in_order(e.cq_a, ids)?;
    for (k, want) in wants.into_iter().enumerate() {
        let mut orig = [0u8; 8];
        r.local.read(8 * k, &mut orig);
        if u64::from_ne_bytes(orig) != want {
            return Err(format!("{op:?} {k}: original value {} where {want} was", u64::from_ne_bytes(orig)));
        }
    }
    let mut last = [0u8; 8];
    r.target.read(word, &mut last);
    match u64::from_ne_bytes(last) == value {
        true => Ok(()),
        false => Err(format!("{op:?}: the word holds {} after the last, not {value}", u64::from_ne_bytes(last))),
    }
}

/// Runs `ops` at every size (atomics: 8 bytes) on `e`, numbering the cells
/// from `cell`.
fn run_cells(name: &str, e: &Ends, r: &Regions, ops: &[Op], cell: &mut u64) {
    for &op in ops {
        let sizes: &[usize] = if matches!(op, Op::FetchAdd | Op::CmpSwap) { &[8] } else { &SIZES };
        for &size in sizes {
            *cell += 1;
            let verdict = run_cell(e, r, op, size, *cell);
            // A failed cell may leave WRs behind: the rest would only repeat it.
            assert!(verdict.is_ok(), "{name}: {op:?} of {size} bytes: {}", verdict.unwrap_err());
        }
    }
}

/// UD SENDs of `size` (at most the path MTU), [`MESSAGES`] outstanding: each
/// lands whole behind the GRH's 40 bytes, from side a's QP, in order.
fn run_ud_cell(p: &RcPair, e: &Ends, r: &Regions, size: usize, cell: u64) -> Result<(), String> {
    let first = cell * 100;
    let ids = || first..first + MESSAGES as u64;
    let slot = GRH_LEN + size;
    let ah = p.pd_a.create_ah(p.ctx_b.query_gid(1).map_err(|e| e.to_string())?);
    for (k, id) in ids().enumerate() {
        r.local.write(k * size, &pattern(id, size));
        e.b.post_recv(&RecvWr { wr_id: id, sg_list: r.target.sge(k * slot, slot as u32).into() })
            .map_err(|e| e.to_string())?;
        let mut wr = SendWr::new(id, WrOp::Send, vec![r.local.sge(k * size, size as u32)]);
        wr.ud = Some(ah.dest(e.b.qp_num(), QKEY));
        e.a.post_send(&wr).map_err(|e| e.to_string())?;
    }
    expect_in_order(e.cq_a, ids())?;
    for (k, wc) in expect_in_order(e.cq_b, ids())?.iter().enumerate() {
        if (wc.byte_len as usize, wc.src_qp) != (slot, e.a.qp_num()) {
            return Err(format!("datagram {k}: {} bytes from QP {}", wc.byte_len, wc.src_qp));
        }
        let mut got = vec![0; size];
        r.target.read(k * slot + GRH_LEN, &mut got);
        if got != pattern(wc.wr_id, size) {
            return Err(format!("datagram {k}: its bytes differ"));
        }
    }
    Ok(())
}

/// Requests and responses repeated or put back in order: what each
/// impairment leaves in the counters of one end or the other.
fn recoveries(p: &RcPair) -> u64 {
    let (a, b) = (p.ctx_a.counters(), p.ctx_b.counters());
    a.get(Counter::CompleterRetryErr)
        + a.get(Counter::RcvdSeqErr)
        + b.get(Counter::OutOfSeqRequest)
        + b.get(Counter::DuplicateRequest)
}

/// One run at a time: each has two progress threads and a poller. All the
/// binary's runs at once, at the lowest priority beside a CI run on two
/// cores, once left a pair without its ACKs through 7 timeouts (RETRY_EXC_ERR).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs every cell on a pair whose side a has `faults` (transmit, receive).
fn run_matrix(name: &str, path: Path, faults: Option<(Faults, Faults)>) {
    if path == Path::Packet && !(is_root() && Command::new("ip").arg("-V").output().is_ok()) {
        println!("SKIP: {name} needs root (a network namespace, a veth, AF_PACKET) and ip (iproute2)");
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (p, r, veth) = open(path, faults, 11, name);
    let rc = Ends { a: &p.a, b: &p.b, cq_a: &p.cq_a, cq_b: &p.cq_b };
    let mut cell = 0;
    run_cells(name, &rc, &r, &OPS, &mut cell);
    // UC and UD lose messages by design on an impaired link (the simulation
    // matrix checks what they do then): here they run on clean links only.
    if faults.is_none() {
        let init = |kind: fn(&Cq, &Cq) -> QpInit, pd: &Pd, cq: &Cq| pd.create_qp(&kind(cq, cq)).unwrap();
        let (uc_a, uc_b) = (init(QpInit::uc, &p.pd_a, &p.cq_a), init(QpInit::uc, &p.pd_b, &p.cq_b));
        connect_pair(&uc_a, &uc_b);
        let uc = Ends { a: &uc_a, b: &uc_b, cq_a: &p.cq_a, cq_b: &p.cq_b };
        run_cells(&format!("{name} UC"), &uc, &r, &[Op::Send, Op::WriteImm], &mut cell);
        let (ud_a, ud_b) = (init(QpInit::ud, &p.pd_a, &p.cq_a), init(QpInit::ud, &p.pd_b, &p.cq_b));
        for qp in [&ud_a, &ud_b] {
            let mut c = ConnectAttr::new(0, 0, Gid::default());
            c.qkey = QKEY;
            qp.connect(&c).unwrap();
        }
        let ud = Ends { a: &ud_a, b: &ud_b, cq_a: &p.cq_a, cq_b: &p.cq_b };
        let mtu = p.ctx_a.query_port().active_mtu.bytes() as usize;
        for size in [0, 1, mtu - 1, mtu] {
            cell += 1;
            let verdict = run_ud_cell(&p, &ud, &r, size, cell);
            assert!(verdict.is_ok(), "{name}: UD SEND of {size} bytes: {}", verdict.unwrap_err());
        }
    }
    let (tx_same_host, tx) = (p.ctx_a.link_stats().tx_same_host, p.ctx_a.link_stats().tx_packets);
    match path {
        Path::SameHost => assert!(tx_same_host > 0, "{name}: nothing went through shared memory ({tx} packets sent)"),
        _ => assert_eq!(tx_same_host, 0, "{name}: packets went through shared memory"),
    }
    if path == Path::Packet {
        assert_eq!(p.ctx_a.query_port().active_mtu.bytes(), 1024, "{name}: a veth of MTU 1500 gives path MTU 1024");
    }
    if faults.is_some() {
        assert!(recoveries(&p) > 0, "{name}: the impairment left no trace in the counters");
    }
    eprintln!("{name}: {cell} cells, {tx} packets sent by side a, {} recoveries", recoveries(&p));
    // The devices close before their namespace goes.
    drop((r, p));
    drop(veth);
}

fn delayed() -> Faults {
    Faults { reorder_delay: Duration::from_micros(300), ..Faults::default() }
}

fn loss() -> Option<(Faults, Faults)> {
    Some((Faults { loss: 0.05, ..delayed() }, Faults::default()))
}

fn duplication() -> Option<(Faults, Faults)> {
    Some((Faults { duplicate: 0.05, ..delayed() }, Faults::default()))
}

fn reordering() -> Option<(Faults, Faults)> {
    Some((Faults { reorder: 0.1, ..delayed() }, Faults::default()))
}

/// On receive: a flipped bit, caught by the ICRC check, as on the wire.
fn corruption() -> Option<(Faults, Faults)> {
    Some((Faults::default(), Faults { corrupt: 0.05, ..Faults::default() }))
}

fn all_at_once() -> Option<(Faults, Faults)> {
    let tx = Faults { loss: 0.02, duplicate: 0.02, reorder: 0.05, ..delayed() };
    Some((tx, Faults { corrupt: 0.02, ..Faults::default() }))
}

macro_rules! matrix {
    ($($test:ident: $path:expr, $faults:expr;)*) => {$(
        #[test]
        fn $test() {
            run_matrix(stringify!($test), $path, $faults);
        }
    )*};
}

matrix! {
    udp_clean: Path::Udp, None;
    udp_loss: Path::Udp, loss();
    udp_duplication: Path::Udp, duplication();
    udp_reordering: Path::Udp, reordering();
    udp_corruption: Path::Udp, corruption();
    udp_all_at_once: Path::Udp, all_at_once();
    same_host_clean: Path::SameHost, None;
    same_host_loss: Path::SameHost, loss();
    same_host_duplication: Path::SameHost, duplication();
    same_host_reordering: Path::SameHost, reordering();
    same_host_corruption: Path::SameHost, corruption();
    same_host_all_at_once: Path::SameHost, all_at_once();
    packet_clean: Path::Packet, None;
    packet_loss: Path::Packet, loss();
    packet_duplication: Path::Packet, duplication();
    packet_reordering: Path::Packet, reordering();
    packet_corruption: Path::Packet, corruption();
    packet_all_at_once: Path::Packet, all_at_once();
}

/// A process tells its devices apart by spec and network namespace: the
/// same spec opened in two namespaces is two devices, each with the options
/// it was opened with (one spec is one device only within a namespace).
#[test]
fn one_spec_in_two_namespaces_opens_two_devices() {
    let name = "one_spec_in_two_namespaces_opens_two_devices";
    if !(is_root() && Command::new("ip").arg("-V").output().is_ok()) {
        println!("SKIP: {name} needs root (network namespaces, a veth, AF_PACKET) and ip (iproute2)");
        return;
    }
    let (one, two) = (veth_namespace("ns1"), veth_namespace("ns2"));
    let open_in = |veth: &Namespaces, progress| {
        let _in = veth.enter(0);
        Device::open_with(DEV_A, &OpenOptions { progress, ..OpenOptions::default() })
    };
    let first = open_in(&one, Progress::Manual).expect("the device in the first namespace");
    let second = open_in(&two, Progress::Blocking).expect("the same spec in the second namespace: another device");
    assert_eq!((first.progress_mode(), second.progress_mode()), (Progress::Manual, Progress::Blocking));
    let again = open_in(&one, Progress::Blocking).map(|_| ()).unwrap_err().to_string();
    assert!(again.contains("open already in this process"), "{again}");
    drop((first, second));
}
