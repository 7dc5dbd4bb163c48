//! The verbs across two processes over the udp link: this test starts a copy of
//! its own binary as the target (the ignored `target_process` test, run only
//! with the environment variables below), swaps QPN/PSN/rkey/address with it over
//! stdin/stdout, and runs SEND with immediate, WRITE, READ, FETCH_ADD and
//! CMP_SWAP against memory the target never touches itself.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;
use uroce_verbs::*;

/// The target's device, which also makes the ignored test the target.
const ROLE: &str = "UROCE_VERBS_TARGET";
/// The test's IPv4 address, the target's peer.
const PEER: &str = "UROCE_VERBS_PEER";
const T: Duration = Duration::from_secs(20);
/// Marks the target's protocol lines among the test harness's own output.
const TAG: &str = "TARGET: ";

/// The target process, killed if the test ends early.
struct Target(std::process::Child);

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "run by two_processes_do_every_operation as its peer"]
fn target_process() {
    let Ok(dev) = std::env::var(ROLE) else { return };
    let peer: std::net::Ipv4Addr = std::env::var(PEER).unwrap().parse().unwrap();
    let ctx = Device::open(&dev).unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(16, None).unwrap();
    let qp = pd.create_qp(&QpInit::rc(&cq, &cq)).unwrap();
    let access =
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    let mr = pd.reg_mr(4096, access).unwrap();
    mr.write(64, &7u64.to_le_bytes());
    mr.write(128, b"from the target");
    let gid = Gid::from_ipv4(peer.octets());
    qp.to_init(&ConnectAttr::new(0, 0, gid)).unwrap();
    qp.post_recv(&RecvWr { wr_id: 5, sg_list: mr.sge(1024, 64).into() }).unwrap();
    println!("{TAG}{} {} {} {}", qp.qp_num(), qp.initial_psn(), mr.rkey(), mr.addr());
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    let f: Vec<u32> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let c = ConnectAttr::new(f[0], f[1], gid);
    qp.to_rtr(&c).unwrap();
    qp.to_rts(&c).unwrap();
    println!("{TAG}connected");
    // The SEND lands in the posted receive; one-sided operations need nothing.
    let wc = cq.wait_one(T).unwrap();
    line.clear();
    std::io::stdin().lock().read_line(&mut line).unwrap(); // "done"
    let mut counter = [0u8; 8];
    mr.read(64, &mut counter);
    let mut written = [0u8; 9];
    mr.read(2048, &mut written);
    println!(
        "{TAG}recv {:?} {} {} imm={:#x} counter={} written={}",
        wc.status,
        wc.byte_len,
        String::from_utf8_lossy(&mr.to_vec()[1024..1024 + wc.byte_len as usize]),
        wc.imm_data,
        u64::from_le_bytes(counter),
        String::from_utf8_lossy(&written)
    );
}

#[test]
fn two_processes_do_every_operation() {
    // The target uses address 2 of this net, which this process holds for it.
    let net = TestNet::new();
    let mut child = Target(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "target_process", "--ignored", "--nocapture", "--test-threads=1"])
            .env(ROLE, net.udp(2))
            .env(PEER, net.ip(1).to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Lines from the target arrive through a channel, so every wait is bounded.
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    let from = BufReader::new(child.0.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in from.lines().map_while(Result::ok) {
            if let Some(at) = line.find(TAG) {
                let _ = tx.send(line[at + TAG.len()..].to_string());
            }
        }
    });
    let mut to = child.0.stdin.take().unwrap();
    let next_line = || lines.recv_timeout(T).expect("a line from the target process in time");
    let peer: Vec<u64> = next_line().split_whitespace().map(|x| x.parse().unwrap()).collect();
    let (qpn, psn, rkey, addr) = (peer[0] as u32, peer[1] as u32, peer[2] as u32, peer[3]);

    let ctx = Device::open(&net.udp(1)).unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(16, None).unwrap();
    let qp = pd.create_qp(&QpInit::rc(&cq, &cq)).unwrap();
    let local = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    writeln!(to, "{} {}", qp.qp_num(), qp.initial_psn()).unwrap();
    qp.connect(&ConnectAttr::new(qpn, psn, Gid::from_ipv4(net.ip(2).octets()))).unwrap();
    assert_eq!(next_line().trim(), "connected");

    let ok = |wr: SendWr| {
        qp.post_send(&wr).unwrap();
        let wc = cq.wait_one(T).unwrap();
        assert_eq!((wc.wr_id, wc.status), (wr.wr_id, WcStatus::Success));
    };
    local.write(0, b"hello peer");
    ok(SendWr::new(1, WrOp::SendWithImm { imm: 0xabcd }, vec![local.sge(0, 10)]));
    local.write(100, b"one-sided");
    ok(SendWr::new(2, WrOp::RdmaWrite { remote_addr: addr + 2048, rkey }, vec![local.sge(100, 9)]));
    ok(SendWr::new(3, WrOp::RdmaRead { remote_addr: addr + 128, rkey }, vec![local.sge(200, 15)]));
    ok(SendWr::new(4, WrOp::AtomicFetchAdd { remote_addr: addr + 64, rkey, add: 5 }, vec![local.sge(512, 8)]));
    let cas = WrOp::AtomicCmpSwp { remote_addr: addr + 64, rkey, compare: 12, swap: 99 };
    ok(SendWr::new(5, cas, vec![local.sge(520, 8)]));
    let mut read_back = [0u8; 15];
    local.read(200, &mut read_back);
    assert_eq!(&read_back, b"from the target");
    let mut olds = [0u8; 16];
    local.read(512, &mut olds);
    assert_eq!(
        (u64::from_le_bytes(olds[..8].try_into().unwrap()), u64::from_le_bytes(olds[8..].try_into().unwrap())),
        (7, 12)
    );

    writeln!(to, "done").unwrap();
    let report = next_line();
    assert_eq!(report.trim(), "recv Success 10 hello peer imm=0xabcd counter=99 written=one-sided");
    assert!(child.0.wait().unwrap().success());
}
