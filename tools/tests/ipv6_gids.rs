//! IPv6 GIDs between two network namespaces (root; SKIP otherwise): every pair
//! of links (packet, tap, udp) runs `uroce pingpong -c` with GID 0 (the
//! link-local address) and with the global IPv6 GID, from empty neighbour
//! caches, and rping runs over an IPv6 address; every capture passes
//! `uroce dump --check` and tshark finds nothing malformed in it.
//!
//! Namespace A holds a bridge (`br0`) with a veth port and a TAP port; B holds
//! the veth's other end (`vb`), as in issue 12's report.

mod common;

use common::{fake_pingpong_server, skip_unless_root_with, uroce, wait_output};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use uroce_stack::testnet::Namespaces;

/// The two namespaces and the captures' directory, deleted on drop.
struct Lab {
    ns: Namespaces,
    dir: PathBuf,
}

const A: usize = 0;
const B: usize = 1;

impl Lab {
    fn new(tag: &str) -> Lab {
        let lab = Lab {
            ns: Namespaces::new(&format!("v6{tag}"), 2),
            dir: std::env::temp_dir().join(format!("uroce-ipv6-{tag}-{}", std::process::id())),
        };
        std::fs::create_dir_all(&lab.dir).unwrap();
        let ns = &lab.ns;
        ns.ip(A, &["link", "add", "br0", "type", "bridge"]);
        ns.veth(A, "va", B, "vb");
        ns.ip(A, &["tuntap", "add", "ut0", "mode", "tap"]);
        for port in ["va", "ut0"] {
            ns.ip(A, &["link", "set", port, "master", "br0"]);
            ns.ip(A, &["link", "set", port, "up"]);
        }
        ns.ip(A, &["addr", "add", "198.18.12.1/24", "dev", "br0"]);
        ns.ip(A, &["addr", "add", "fd00:12::1/64", "dev", "br0"]);
        ns.ip(B, &["addr", "add", "198.18.12.2/24", "dev", "vb"]);
        ns.ip(B, &["addr", "add", "fd00:12::2/64", "dev", "vb"]);
        ns.ip(A, &["link", "set", "br0", "up"]);
        lab
    }

    /// The kernel's link-local address of `dev` in namespace `i`. The kernel
    /// adds it some time after the device is up and has a carrier (a bridge
    /// gets one when a port forwards): wait for it, up to 10 s.
    fn link_local(&self, i: usize, dev: &str) -> String {
        for _ in 0..200 {
            let out = Command::new("ip")
                .args(["-n", self.ns.name(i), "-6", "addr", "show", "dev", dev, "scope", "link"])
                .output()
                .expect("ip");
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            if let Some(addr) = text.split_whitespace().skip_while(|w| *w != "inet6").nth(1) {
                return addr.split('/').next().unwrap().to_string();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("{dev} in {} has no link-local address after 10 s", self.ns.name(i));
    }

    /// `uroce ARGS` in namespace `i`.
    fn uroce(&self, i: usize, args: &[&str]) -> std::process::Child {
        Command::new("ip")
            .args(["netns", "exec", self.ns.name(i), env!("CARGO_BIN_EXE_uroce")])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Forgets every neighbour the kernels learnt (uroce's ends start empty).
    fn flush_neighbours(&self) {
        for i in [A, B] {
            self.ns.ip(i, &["neigh", "flush", "all"]);
        }
    }

    fn pcap(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.pcap"))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // The namespaces go with `ns`.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `uroce dump --check` passes on the capture, which holds at least `min`
/// RoCEv2 packets, and tshark flags nothing in it as malformed.
fn check_capture(path: &Path, min: usize) {
    let out = uroce().args(["dump", "--check"]).arg(path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default().to_string();
    assert!(out.status.success(), "{}: {last}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    let roce: usize = last.split(", ").nth(1).and_then(|f| f.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
    assert!(roce >= min, "{}: {last}", path.display());
    let filter = "_ws.malformed || _ws.expert.severity >= error";
    let tshark = Command::new("tshark").arg("-r").arg(path).args(["-Y", filter]).output();
    let flagged = String::from_utf8_lossy(&tshark.unwrap().stdout).to_string();
    assert!(flagged.trim().is_empty(), "{}: tshark flags\n{flagged}", path.display());
}

/// One end of a pair: its device and the GID index of the kind asked for.
struct End {
    ns: usize,
    dev: String,
    gid: &'static str,
}

/// Runs a pingpong server in A and its client in B; both must succeed.
fn pingpong(lab: &Lab, name: &str, server: &End, client: &End, port: u16) {
    lab.flush_neighbours();
    let (sp, cp) = (lab.pcap(&format!("{name}-server")), lab.pcap(&format!("{name}-client")));
    let port = port.to_string();
    let common = ["-n", "20", "-s", "5000", "-c", "-p", &port];
    let mut sargs = vec!["pingpong", "-g", server.gid, "-d", &server.dev, "--pcap", sp.to_str().unwrap()];
    sargs.extend(common);
    let s = lab.uroce(server.ns, &sargs);
    let mut cargs = vec!["pingpong", "-g", client.gid, "-d", &client.dev, "--pcap", cp.to_str().unwrap()];
    cargs.extend(common);
    cargs.push("198.18.12.1");
    // The server listens within moments; a client that came too early retries.
    let start = Instant::now();
    let client_out = loop {
        let out = wait_output(lab.uroce(client.ns, &cargs), Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        if !err.contains("Couldn't connect") || start.elapsed() > Duration::from_secs(10) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let server_out = wait_output(s, Duration::from_secs(30));
    for (end, out) in [("server", &server_out), ("client", &client_out)] {
        assert!(
            out.status.success(),
            "{name} {end}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let local = String::from_utf8_lossy(&client_out.stdout).lines().next().unwrap_or_default().to_string();
    println!("{name}: ok ({local})");
    // 20 exchanges of 5000 bytes: 5 packets a message at MTU 1024, each way.
    check_capture(&sp, 200);
    check_capture(&cp, 200);
}

#[test]
fn every_pair_of_links_runs_with_link_local_and_global_ipv6_gids() {
    if skip_unless_root_with("every_pair_of_links_runs_with_link_local_and_global_ipv6_gids", &["ip", "tshark"]) {
        return;
    }
    let lab = Lab::new("p");
    let (br_ll, vb_ll) = (lab.link_local(A, "br0"), lab.link_local(B, "vb"));
    // The global GID: 2 on the dual-stack packet and tap devices, 1 on a udp
    // device on an IPv6 address alone (no IPv4 entry before it).
    let gid = |kind: &str, global: bool| match (kind, global) {
        (_, false) => "0",
        ("udp", true) => "1",
        _ => "2",
    };
    let server = |kind: &str, global: bool| -> End {
        let gid = gid(kind, global);
        let dev = match kind {
            "packet" => "packet:br0,ip=198.18.12.41,ip=fd00:12::41".to_string(),
            "tap" => "tap:ut0,ip=198.18.12.51/24,ip=fd00:12::51/64,mac=02:00:00:00:12:51".to_string(),
            _ if global => "udp:[fd00:12::1]".to_string(),
            _ => format!("udp:[{br_ll}%br0]"),
        };
        End { ns: A, dev, gid }
    };
    let client = |kind: &str, global: bool| -> End {
        let gid = gid(kind, global);
        let dev = match kind {
            "packet" => "packet:vb,ip=198.18.12.42,ip=fd00:12::42,mac=02:00:00:00:12:42".to_string(),
            _ if global => "udp:[fd00:12::2]".to_string(),
            _ => format!("udp:[{vb_ll}%vb]"),
        };
        End { ns: B, dev, gid }
    };
    let mut port = 18600;
    for (s, c) in
        [("packet", "packet"), ("tap", "packet"), ("udp", "packet"), ("packet", "udp"), ("udp", "udp"), ("tap", "udp")]
    {
        for global in [false, true] {
            port += 1;
            let name = format!("{s}-{c}-{}", if global { "global" } else { "gid0" });
            pingpong(&lab, &name, &server(s, global), &client(c, global), port);
        }
    }
}

#[test]
fn rping_runs_over_ipv6() {
    if skip_unless_root_with("rping_runs_over_ipv6", &["ip", "tshark"]) {
        return;
    }
    let lab = Lab::new("r");
    let servers = [
        ("udp", "udp:[fd00:12::1]", "fd00:12::1"),
        ("packet", "packet:br0,ip=198.18.12.41,ip=fd00:12::41", "fd00:12::41"),
    ];
    for (kind, dev, addr) in servers {
        lab.flush_neighbours();
        let pcap = lab.pcap(&format!("rping-{kind}"));
        let s = lab.uroce(A, &["rping", "-s", "-a", addr, "-C", "10", "-V", "--ib-dev", dev]);
        let args =
            ["rping", "-c", "-a", addr, "-I", "fd00:12::2", "-C", "10", "-V", "-v", "--pcap", pcap.to_str().unwrap()];
        let start = Instant::now();
        let c = loop {
            let out = wait_output(lab.uroce(B, &args), Duration::from_secs(60));
            let err = String::from_utf8_lossy(&out.stderr);
            // The server binds within moments; a client that came too early is rejected and retries.
            if !err.contains("REJECTED") || start.elapsed() > Duration::from_secs(10) {
                break out;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let s = wait_output(s, Duration::from_secs(30));
        let text = String::from_utf8_lossy(&c.stdout).to_string();
        assert!(c.status.success(), "{kind}: client {text}{}", String::from_utf8_lossy(&c.stderr));
        assert!(s.status.success(), "{kind}: server {}", String::from_utf8_lossy(&s.stderr));
        assert_eq!(text.lines().filter(|l| l.starts_with("ping data: rdma-ping-")).count(), 10, "{text}");
        check_capture(&pcap, 40);
        println!("rping to {addr} ({kind} server): ok");
    }
}

/// ibv_rc_pingpong's server half of the exchange (port 18700), answering
/// with a GID nobody on the link holds (fd00:12::99).
const GHOST_ANSWER: &str = r#"c.sendall(b"0000:000011:000000:fd000012000000000000000000000099\0")
c.recv(5)
"#;

#[test]
fn a_peer_no_neighbour_answers_for_is_named() {
    if skip_unless_root_with("a_peer_no_neighbour_answers_for_is_named", &["ip", "python3"]) {
        return;
    }
    let lab = Lab::new("n");
    let mut server = Command::new("ip")
        .args(["netns", "exec", lab.ns.name(A), "python3", "-c", &fake_pingpong_server(18700, GHOST_ANSWER)])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(server.stdout.take().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "listening");
    let dev = "packet:vb,ip=198.18.12.42,ip=fd00:12::42,mac=02:00:00:00:12:42";
    let client = lab.uroce(B, &["pingpong", "-g", "2", "-n", "1", "-d", dev, "-p", "18700", "198.18.12.1", "--stats"]);
    let out = wait_output(client, Duration::from_secs(30));
    let _ = server.kill();
    let _ = server.wait();
    let (err, stdout) = (String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(1), "{stdout}{err}");
    let last = err.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("Failed status transport retry counter exceeded (12) for wr_id 2: no neighbour answered for fd00:12::99 on vb after ")
            && last.ends_with(" tries: is the peer on this link?"),
        "{err}"
    );
    assert!(stdout.contains("link_neighbours_unresolved"), "{stdout}");
}
