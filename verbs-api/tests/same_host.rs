//! The udp link's same-host path (on unless `UROCE_SHM=0`) between two processes:
//! this test binary runs itself twice, as a survivor and a victim, each on
//! an address of its own, and relays their QP details. Their WRITEs go
//! through the memory they share; once the victim is killed, the
//! survivor's next WRITE fails with RETRY_EXC_ERR, as with a peer gone from
//! a network.

use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use uroce_verbs::*;

/// The environment variable that makes this test a peer: `survivor` or `victim`.
const ROLE: &str = "UROCE_SAME_HOST_ROLE";
const DEVICE: &str = "UROCE_SAME_HOST_DEVICE";
const TEST: &str = "a_killed_peer_on_the_same_host_path_times_out_as_on_a_network";
const WAIT: Duration = Duration::from_secs(20);

#[test]
fn a_killed_peer_on_the_same_host_path_times_out_as_on_a_network() {
    if let Ok(role) = std::env::var(ROLE) {
        return peer(&role, &std::env::var(DEVICE).expect("the device"));
    }
    let net = TestNet::new();
    let (mut survivor, from_survivor) = spawn("survivor", &net.udp(1));
    let (mut victim, from_victim) = spawn("victim", &net.udp(2));
    let line = |rx: &mpsc::Receiver<String>, what: &str| {
        rx.recv_timeout(WAIT).unwrap_or_else(|_| panic!("no {what} from a peer process"))
    };
    // Each one's QP details to the other.
    let (s, v) = (line(&from_survivor, "details"), line(&from_victim, "details"));
    tell(&mut victim.1, &s);
    tell(&mut survivor.1, &v);
    assert_eq!(line(&from_victim, "readiness"), "ready");
    let first = line(&from_survivor, "first WRITEs");
    let same_host: u64 = first.strip_prefix("written, same host ").and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(same_host > 0, "the WRITEs went through shared memory: {first}");

    victim.0.kill().expect("kill the victim");
    let _ = victim.0.wait();
    tell(&mut survivor.1, "go");
    assert_eq!(line(&from_survivor, "the last WRITE's status"), "status RetryExcErr");
    let _ = survivor.0.wait();
}

/// Starts this test as a peer process on `dev`: the child, its stdin, its stdout's lines.
fn spawn(role: &str, dev: &str) -> ((Child, ChildStdin), mpsc::Receiver<String>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads", "1"])
        .env(ROLE, role)
        .env(DEVICE, dev)
        .env("UROCE_SHM", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            // The harness's "test NAME ... " may lead the first line.
            if let Some((_, msg)) = l.split_once("peer: ") {
                let _ = tx.send(msg.to_string());
            }
        }
    });
    let stdin = child.stdin.take().unwrap();
    ((child, stdin), rx)
}

fn tell(to: &mut ChildStdin, line: &str) {
    writeln!(to, "{line}").expect("write to a peer process");
}

/// One peer: its QP, connected to the other's from the details it reads.
fn peer(role: &str, dev: &str) {
    let say = |s: String| println!("peer: {s}");
    let mut stdin = std::io::stdin().lock().lines().map_while(Result::ok);
    let ctx = Device::open(dev).unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(16, None).unwrap();
    let qp = pd.create_qp(&QpInit::rc(&cq, &cq)).unwrap();
    let mr = pd.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let ip = dev.strip_prefix("udp:").unwrap().parse::<IpAddr>().unwrap();
    say(format!("{} {} {} {} {ip}", qp.qp_num(), qp.initial_psn(), mr.rkey(), mr.addr()));
    let theirs = stdin.next().expect("the other's details");
    let f: Vec<&str> = theirs.split(' ').collect();
    let n = |i: usize| f[i].parse::<u64>().unwrap();
    let gid = Gid::from_ip(f[4].parse::<IpAddr>().unwrap());
    qp.connect(&ConnectAttr::new(n(0) as u32, n(1) as u32, gid)).unwrap();
    if role == "victim" {
        say("ready".into());
        // Until killed; bounded all the same.
        std::thread::sleep(WAIT * 2);
        return;
    }
    let write = |id: u64| {
        let op = WrOp::RdmaWrite { remote_addr: n(3), rkey: n(2) as u32 };
        qp.post_send(&SendWr::new(id, op, vec![mr.sge(0, 8)])).unwrap();
        cq.wait_one(WAIT).expect("a completion").status
    };
    for id in 0..20 {
        assert_eq!(write(id), WcStatus::Success);
        std::thread::sleep(Duration::from_millis(5));
    }
    say(format!("written, same host {}", ctx.link_stats().tx_same_host));
    assert_eq!(stdin.next().as_deref(), Some("go"));
    say(format!("status {:?}", write(99)));
}
