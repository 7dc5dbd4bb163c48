//! `uroce pingpong HOST` over a packet link answers ARP while it waits for the
//! server's half of the TCP exchange.
//!
//! Found by the interop matrix (tests/rxe-lab/run-interop): ibv_rc_pingpong,
//! as the server, connects its QP before it answers, and the kernel's rxe
//! resolves the client's MAC at modify_qp(RTR) by ARP, giving up after 1 s
//! ("Failed to modify QP to RTR"). The polling pingpong drives its engine (and
//! link) itself, and while it sat in a blocking TCP read nobody answered the
//! guest's ARP requests. Here a fake server in a network namespace does what
//! the kernel does: after the client's message, it makes its kernel resolve the
//! client's IP (from the GID in the message) and answers only if that takes
//! less than 1 s. Root only (network namespaces, AF_PACKET); SKIP otherwise.

mod common;

use common::{fake_pingpong_server, have, is_root};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use uroce_stack::testnet::Namespaces;

/// Two namespaces joined by a veth, deleted on drop.
fn pair() -> Namespaces {
    let ns = Namespaces::new("arpx", 2);
    ns.veth(0, "va", 1, "vb");
    ns.ip(0, &["addr", "add", "198.18.0.2/24", "dev", "va"]);
    ns.ip(1, &["addr", "add", "198.18.0.11/24", "dev", "vb"]);
    ns
}

/// ibv_rc_pingpong's server (port 18515) as the kernel's rxe runs it, for
/// this test: once it has the client's `LID:QPN:PSN:GID`, resolves the GID's IPv4 address with the
/// kernel's ARP (a datagram to it, then the neighbour table) within 1 s as
/// rdma_resolve_ip does, and only then answers. Exits 0 if it answered, 3 if
/// the address did not resolve.
const RESOLVE_THEN_ANSWER: &str = r#"import ipaddress, subprocess, sys, time
gid = msg.rstrip(b"\0").decode().split(":")[3]
peer = str(ipaddress.IPv6Address(bytes.fromhex(gid)).ipv4_mapped)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
deadline = time.time() + 1.0
resolved = False
while time.time() < deadline and not resolved:
    u.sendto(b"x", (peer, 9))
    out = subprocess.run(["ip", "neigh", "show", peer], capture_output=True, text=True).stdout
    resolved = "lladdr" in out and ("REACHABLE" in out or "STALE" in out or "DELAY" in out)
    time.sleep(0.02)
if not resolved:
    print("no ARP reply from", peer, "within 1 s:", out.strip(), flush=True)
    sys.exit(3)
gid = "00000000000000000000ffffc612000b"
c.sendall(("0000:000011:000000:" + gid).encode() + b"\0")
c.recv(5)
print("answered", peer, flush=True)
"#;

fn wait_bounded(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return Some(s);
        }
        if t0.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn output(mut child: std::process::Child) -> Output {
    let _ = child.kill();
    child.wait_with_output().expect("output")
}

#[test]
fn packet_link_client_answers_arp_during_the_exchange() {
    if !is_root() {
        println!("SKIP: packet_link_client_answers_arp_during_the_exchange needs root (network namespaces, AF_PACKET)");
        return;
    }
    if !have("ip") || !have("python3") {
        println!("SKIP: packet_link_client_answers_arp_during_the_exchange needs ip (iproute2) and python3");
        return;
    }
    let ns = pair();
    let (a, b) = (ns.name(0), ns.name(1));
    let mut server = Command::new("ip")
        .args(["netns", "exec", b, "python3", "-c", &fake_pingpong_server(18515, RESOLVE_THEN_ANSWER)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fake server");
    // Wait until it listens.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        let ss = Command::new("ip").args(["netns", "exec", b, "ss", "-Hltn", "sport = :18515"]).output().unwrap();
        if !ss.stdout.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let client = Command::new("ip")
        .args(["netns", "exec", a, env!("CARGO_BIN_EXE_uroce"), "pingpong"])
        .args(["-d", "packet:va,ip=198.18.0.3,mac=02:00:00:00:00:03", "-g", "1", "-n", "1", "198.18.0.11"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("uroce pingpong");
    let status = wait_bounded(&mut server, Duration::from_secs(20));
    // The client then ping-pongs with a QP that does not exist: not this test's business.
    let client = output(client);
    let server = output(server);
    let said = format!(
        "fake server: {}{}\nuroce: {}{}",
        String::from_utf8_lossy(&server.stdout),
        String::from_utf8_lossy(&server.stderr),
        String::from_utf8_lossy(&client.stdout),
        String::from_utf8_lossy(&client.stderr)
    );
    assert_eq!(status.and_then(|s| s.code()), Some(0), "the server's kernel could not resolve uroce's MAC:\n{said}");
}
