//! The drop-in library as unmodified programs see it: its exported symbols
//! and versions are rdma-core 44's (objdump -T against abi/symbols.txt),
//! Debian's own `ibv_devices` and `ibv_devinfo -v` run over it and show a
//! uroce device as rxe's are shown, and the four pingpongs (RC, UC, UD, SRQ)
//! run between two processes with their buffers checked. A tool that is missing (not root, so
//! scripts/install-deps could not install it) makes its test say SKIP and why.

mod common;
use common::{
    built_library, free_tcp_port, have, install_dir, run_client_against, run_over_dropin, run_pair, run_pair_on, End,
};
use std::path::Path;
use std::process::Command;
use uroce_stack::testnet::TestNet;

#[test]
fn the_library_exports_rdma_cores_symbols_and_versions() {
    if !have("objdump") {
        return;
    }
    let out = Command::new("objdump").arg("-T").arg(built_library()).output().expect("objdump");
    let table = String::from_utf8_lossy(&out.stdout);
    let mut got: Vec<String> = table
        .lines()
        .filter(|l| !l.contains("*UND*"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (version, name) = (f.get(f.len().wrapping_sub(2))?, f.last()?);
            let ours = |s: &str| s.starts_with("IBVERBS_") || s.starts_with("RDMACM_");
            (f.len() >= 3 && ours(version) && !ours(name)).then(|| format!("{name}@{version}"))
        })
        .collect();
    got.sort();
    let list = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("abi/symbols.txt")).unwrap();
    let mut want: Vec<String> =
        list.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(String::from).collect();
    want.sort();
    let missing: Vec<&String> = want.iter().filter(|w| !got.contains(w)).collect();
    let extra: Vec<&String> = got.iter().filter(|g| !want.contains(g)).collect();
    assert!(missing.is_empty() && extra.is_empty(), "missing {missing:?}, not rdma-core's {extra:?}");
    let other = table.lines().filter(|l| l.contains(" g ") && !l.contains("IBVERBS_") && !l.contains("RDMACM_"));
    assert_eq!(other.count(), 0, "only rdma-core's symbols are exported:\n{table}");
}

#[test]
fn ibv_devices_lists_the_configured_devices() {
    if !have("ibv_devices") {
        return;
    }
    let net = TestNet::new();
    let dir = install_dir();
    let devices = format!("uroce0=udp:{} lab1=udp:{}", net.ip(1), net.ip(2));
    let (ok, text) = run_over_dropin(dir.path(), &devices, "ibv_devices", &[]);
    assert!(ok, "{text}");
    let guid = |ip: std::net::Ipv4Addr| {
        let o = ip.octets();
        format!("0000{:02x}fffe{:02x}{:02x}{:02x}", o[0], o[1], o[2], o[3])
    };
    for (name, ip) in [("uroce0", net.ip(1)), ("lab1", net.ip(2))] {
        let line = text.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap_or_else(|| panic!("{text}"));
        assert!(line.ends_with(&guid(ip)), "{name}'s GUID from its address {ip}: {text}");
    }
}

#[test]
fn ibv_devinfo_shows_the_device_as_rxe_is_shown() {
    if !have("ibv_devinfo") {
        return;
    }
    let net = TestNet::new();
    let dir = install_dir();
    let (ok, text) = run_over_dropin(dir.path(), &format!("udp:{}", net.ip(1)), "ibv_devinfo", &["-v"]);
    assert!(ok, "{text}");
    for want in [
        "hca_id:\turoce0",
        "transport:\t\t\tInfiniBand (0)",
        "vendor_id:\t\t\t0xffffff",
        "phys_port_cnt:\t\t\t1",
        "atomic_cap:\t\t\tATOMIC_HCA (1)",
        "state:\t\t\tPORT_ACTIVE (4)",
        "active_mtu:\t\t4096 (5)",
        "link_layer:\t\tEthernet",
        &format!("GID[  1]:\t\t::ffff:{}, RoCE v2", net.ip(1)),
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    assert!(text.contains("GID[  0]:\t\tfe80::"), "the link-local GID 0, as rxe's:\n{text}");
}

#[test]
fn ibv_rc_pingpong_runs_between_two_processes_with_its_data_checked() {
    pingpong("ibv_rc_pingpong", &["-c"]);
}

/// `-e`: each end sleeps in `ibv_get_cq_event`, a blocking read of its
/// completion channel's descriptor, instead of polling.
#[test]
fn ibv_rc_pingpong_waits_on_completion_channels() {
    pingpong("ibv_rc_pingpong", &["-c", "-e"]);
}

#[test]
fn ibv_uc_pingpong_runs_between_two_processes_with_its_data_checked() {
    pingpong("ibv_uc_pingpong", &["-c"]);
}

/// UD: address handles from the peer's GID, the 40-byte GRH before each
/// received message.
#[test]
fn ibv_ud_pingpong_runs_between_two_processes_with_its_data_checked() {
    pingpong("ibv_ud_pingpong", &["-c", "-s", "1024"]);
}

/// 16 RC QPs on each side taking their receives from one shared receive queue.
#[test]
fn ibv_srq_pingpong_runs_between_two_processes_with_its_data_checked() {
    pingpong("ibv_srq_pingpong", &["-c"]);
}

/// Runs one of Debian's pingpongs (`tool`) between two processes over the
/// drop-in, 50 round trips over GID 1, plus `extra` flags.
fn pingpong(tool: &str, extra: &[&str]) {
    if !have(tool) {
        return;
    }
    let mut args = vec!["-g", "1", "-n", "50"];
    args.extend_from_slice(extra);
    let (client, server) = server_and_client(tool, &args);
    for text in [&client, &server] {
        assert!(text.contains("50 iters in"), "{text}");
        assert!(!text.contains("Failed status"), "{text}");
    }
}

/// Runs `tool args -p PORT` as a server and `tool args -p PORT SERVER` as
/// its client, two processes over the drop-in on two loopback addresses;
/// asserts both succeed and returns their outputs (client, server).
fn server_and_client(tool: &str, args: &[&str]) -> (String, String) {
    let port = free_tcp_port().to_string();
    let mut args = args.to_vec();
    args.extend_from_slice(&["-p", &port]);
    // perftest's client exits 0 even when it could not connect: its text
    // says. Over rdma_cm (-R) a connect just before the listen is REJECTED.
    let not_ready = if args.contains(&"-R") { "RDMA_CM_EVENT_REJECTED" } else { "Couldn't connect" };
    let client: Vec<&str> = args.iter().copied().chain(["{server}"]).collect();
    run_pair(End::dropin(tool, &args), End::dropin(tool, &client), not_ready)
}

/// Debian's rping over rdma_cm between two processes: 100 pings of 1 KiB,
/// each checked by both ends (`-V`), the client printing each (`-v`).
#[test]
fn rping_connects_over_rdma_cm_and_checks_its_data() {
    if !have("rping") {
        return;
    }
    let port = free_tcp_port().to_string();
    let common = ["-p", &port, "-C", "100", "-S", "1024", "-V"];
    let server_args: Vec<&str> = ["-s", "-a", "0.0.0.0"].iter().chain(common.iter()).copied().collect();
    let client_args: Vec<&str> = ["-c", "-v", "-a", "{server}"].iter().chain(common.iter()).copied().collect();
    let (client, server) = run_pair(End::dropin("rping", &server_args), End::dropin("rping", &client_args), "REJECTED");
    let pings = client.lines().filter(|l| l.starts_with("ping data: rdma-ping-")).count();
    assert_eq!(pings, 100, "client: {client}\nserver: {server}");
    for text in [&client, &server] {
        assert!(!text.contains("mismatch") && !text.contains("error"), "{text}");
    }
}

/// Two programs on one address, as a server and a client both given the
/// host's IP share `rxe0`: the first holds UDP port 4791 and hands the
/// second the packets of its QPs and its connections (uroce's shared udp
/// address). Plain verbs (QPNs exchanged over TCP) and rdma_cm (a listener
/// in one process, a connecting ID in the other), data checked.
#[test]
fn two_programs_share_one_address() {
    if have("ibv_rc_pingpong") {
        let port = free_tcp_port().to_string();
        let args = ["-g", "1", "-n", "50", "-p", &port];
        let client: Vec<&str> = args.iter().copied().chain(["{server}"]).collect();
        let (client, server) = run_pair_on(
            End::dropin("ibv_rc_pingpong", &args),
            End::dropin("ibv_rc_pingpong", &client),
            "Couldn't connect",
            true,
        );
        for text in [&client, &server] {
            assert!(text.contains("50 iters in") && !text.contains("Failed status"), "{text}");
        }
    }
    if have("rping") {
        let port = free_tcp_port().to_string();
        let common = ["-p", &port, "-C", "50", "-S", "512", "-V"];
        let server: Vec<&str> = ["-s", "-a", "{server}"].iter().chain(common.iter()).copied().collect();
        let client: Vec<&str> = ["-c", "-v", "-a", "{server}"].iter().chain(common.iter()).copied().collect();
        let (client, server) =
            run_pair_on(End::dropin("rping", &server), End::dropin("rping", &client), "REJECTED", true);
        let pings = client.lines().filter(|l| l.starts_with("ping data: rdma-ping-")).count();
        assert_eq!(pings, 50, "client: {client}\nserver: {server}");
    }
    if have("udaddy") {
        // UD over rdma_cm: the SIDR REQ goes to the listening process by its service ID.
        let server = ["-b", "{server}", "-C", "10"];
        let client = ["-b", "{server}", "-s", "{server}", "-C", "10"];
        let (client, server) =
            run_pair_on(End::dropin("udaddy", &server), End::dropin("udaddy", &client), "UNREACHABLE", true);
        for text in [&client, &server] {
            assert!(text.contains("data transfers complete") && text.contains("return status 0"), "{text}");
        }
    }
}

/// A port one program on an address listens on is in use for another
/// program on the same address: its rdma_bind_addr fails with EADDRINUSE,
/// as the second of two programs binding one port on rxe0 does (its
/// rdma_listen did before ports were reserved when bound).
#[test]
fn a_port_listened_on_by_another_program_on_the_address_is_in_use() {
    if !have("rping") {
        return;
    }
    let net = TestNet::new();
    let dir = install_dir();
    let (ip, port) = (net.ip(1).to_string(), free_tcp_port().to_string());
    let rping_server = |secs: &str| {
        let mut cmd = Command::new("timeout");
        cmd.args([secs, "rping", "-s", "-a", &ip, "-p", &port, "-C", "1"]);
        cmd.env("LD_LIBRARY_PATH", dir.path()).env("UROCE_DEVICES", net.udp(1));
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        cmd
    };
    let first = rping_server("20").spawn().expect("start rping");
    // The first's device holds the port (bounded wait); whichever of the
    // two listens second (on a loaded machine the first may not have yet)
    // is refused, and the other waits for a client until stopped.
    for _ in 0..200 {
        if common::roce_port_bound(net.ip(1)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let second = rping_server("3").output().expect("run rping");
    let _ = Command::new("kill").args(["-TERM", &first.id().to_string()]).status();
    let first = first.wait_with_output().expect("the first rping's output");
    let text = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    };
    let (a, b) = (text(&first), text(&second));
    let refused = [&a, &b].iter().filter(|t| t.contains("rdma_bind_addr: Address already in use")).count();
    assert_eq!(refused, 1, "first: {a}\nsecond: {b}");
}

/// Debian's udaddy between two processes: UD QPs connected by rdma_cm
/// (SIDR), four of them, ten 1000-byte datagrams each way on each, in both
/// UD port spaces (RDMA_PS_UDP and RDMA_PS_IPOIB).
#[test]
fn udaddy_resolves_ud_services_over_rdma_cm_and_exchanges_datagrams() {
    if !have("udaddy") {
        return;
    }
    for ps in ["0x111", "0x2"] {
        let common = ["-c", "4", "-C", "10", "-S", "1000", "-p", ps];
        let server_args: Vec<&str> = common.to_vec();
        let client_args: Vec<&str> = ["-s", "{server}"].iter().chain(common.iter()).copied().collect();
        let (client, server) =
            run_pair(End::dropin("udaddy", &server_args), End::dropin("udaddy", &client_args), "UNREACHABLE");
        for text in [&client, &server] {
            assert!(text.contains("data transfers complete") && text.contains("return status 0"), "{ps}: {text}");
        }
    }
}

/// Debian's mckey as three processes: two receivers join an IPv4 group
/// (their UD QPs attached by rdma_join_multicast, as librdmacm does), then
/// a sender sends 20 datagrams to it; each receiver gets every one (mckey
/// waits for all of them) and all three end well.
#[test]
fn mckey_delivers_every_datagram_to_both_receivers() {
    mckey_two_receivers_one_sender([1, 2, 3]);
}

/// mckey's three processes all on one address (`-b` the same IP), as on one
/// host's `rxe0`: each receiver's group socket gets every datagram.
#[test]
fn mckey_runs_three_processes_on_one_address() {
    mckey_two_receivers_one_sender([1, 1, 1]);
}

/// Two mckey receivers and a sender on the test network's hosts `hosts`.
fn mckey_two_receivers_one_sender(hosts: [u8; 3]) {
    if !have("mckey") {
        return;
    }
    let net = TestNet::new();
    let dir = install_dir();
    let o = net.ip(1).octets();
    let group = std::net::Ipv4Addr::new(239, o[1], o[2], o[3]);
    let mckey = |host: u8, sender: bool| {
        let mut cmd = Command::new("timeout");
        cmd.args(["60", "mckey", "-m", &group.to_string(), "-b", &net.ip(host).to_string(), "-C", "20", "-S", "512"]);
        if sender {
            cmd.arg("-s");
        }
        cmd.env("LD_LIBRARY_PATH", dir.path()).env("UROCE_DEVICES", net.udp(host));
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        cmd.spawn().expect("start mckey")
    };
    let receivers = [mckey(hosts[0], false), mckey(hosts[1], false)];
    // Both joined: each holds a socket on the group's address and port 4791.
    for _ in 0..400 {
        if group_sockets(group) >= 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert_eq!(group_sockets(group), 2, "both receivers joined {group}");
    let sender = mckey(hosts[2], true).wait_with_output().unwrap();
    let text = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    };
    assert!(sender.status.success(), "sender: {}", text(&sender));
    for r in receivers {
        let out = r.wait_with_output().unwrap();
        let t = text(&out);
        assert!(
            out.status.success() && t.contains("receiving data transfers") && t.contains("data transfers complete"),
            "receiver: {t}"
        );
    }
}

/// Sockets bound to `group`:4791 on this host (/proc/net/udp).
fn group_sockets(group: std::net::Ipv4Addr) -> usize {
    let want = format!("{:08X}:12B7", u32::from_le_bytes(group.octets()));
    std::fs::read_to_string("/proc/net/udp")
        .map_or(0, |t| t.lines().filter(|l| l.split_whitespace().nth(1) == Some(want.as_str())).count())
}

/// The eight perftest tests over RC between two processes, `extra` flags
/// added: both end well and the client prints its result line (a READ or
/// atomic test's server, whose memory is only the target, prints none).
fn perftest(extra: &[&str]) {
    let tests = ["write_bw", "write_lat", "read_bw", "read_lat", "send_bw", "send_lat", "atomic_bw", "atomic_lat"];
    if !have("ib_write_bw") {
        return;
    }
    for test in tests {
        let tool = format!("ib_{test}");
        let mut args = vec!["-x", "1", "-n", "100"];
        args.extend_from_slice(extra);
        let (client, _) = server_and_client(&tool, &args);
        // The result line follows the header "#bytes #iterations ...".
        let result = client.lines().skip_while(|l| !l.trim_start().starts_with("#bytes")).nth(1);
        let fields: Vec<&str> = result.unwrap_or("").split_whitespace().collect();
        assert!(fields.len() >= 3 && fields[1] == "100", "{tool} {extra:?}: no result line\n{client}");
    }
}

/// perftest's default post path: on a device that is neither mlx5 nor EFA
/// (rxe, uroce) perftest 4.5 itself chooses `ibv_post_send`
/// (perftest_resources.c, "devices supporting new post send").
#[test]
fn perftests_eight_tests_run_between_two_processes() {
    perftest(&[]);
}

#[test]
fn perftests_eight_tests_run_with_the_old_post_send() {
    perftest(&["--use_old_post_send"]);
}

/// `-R`: the ends meet over rdma_cm (rdma_getaddrinfo, a listener, connect
/// and accept, their messages over the connection) instead of a TCP socket.
#[test]
fn perftests_eight_tests_connect_over_rdma_cm() {
    perftest(&["-R"]);
}

/// `-e`: the tests sleep on completion events. After any event on its one
/// channel (send and receive CQs share it) perftest polls the CQ it
/// expects once, so an event must stand for a completion that came after
/// the arm: events fired for completions already waiting failed `ib_send_lat
/// -e` in most runs. 1000 iterations each (perftest refuses `-e` for
/// WRITEs).
#[test]
fn perftests_with_completion_events_run_between_two_processes() {
    if !have("ib_send_lat") {
        return;
    }
    for test in ["send_lat", "send_bw", "read_lat", "read_bw", "atomic_lat"] {
        let tool = format!("ib_{test}");
        let (client, _) = server_and_client(&tool, &["-x", "1", "-n", "1000", "-e"]);
        let result = client.lines().skip_while(|l| !l.trim_start().starts_with("#bytes")).nth(1);
        let fields: Vec<&str> = result.unwrap_or("").split_whitespace().collect();
        assert!(fields.len() >= 3 && fields[1] == "1000", "{tool} -e: no result line\n{client}");
    }
}

#[test]
fn a_bad_device_list_says_what_to_do() {
    if !have("ibv_devices") {
        return;
    }
    let dir = install_dir();
    let (ok, text) = run_over_dropin(dir.path(), "bad/name=udp:127.0.0.1", "ibv_devices", &[]);
    assert!(!ok, "{text}");
    assert!(text.contains("UROCE_DEVICES") && text.contains("letters, digits and _"), "{text}");
}

/// Debian's ucmatose (rdmacm-utils): rdma_cm connections with SENDs both
/// ways, then a disconnect, between two processes.
#[test]
fn ucmatose_connects_transfers_and_disconnects() {
    if !have("ucmatose") {
        return;
    }
    let port = free_tcp_port().to_string();
    let server = End::dropin("ucmatose", &["-b", "{server}", "-p", &port, "-C", "20"]);
    let client = End::dropin("ucmatose", &["-s", "{server}", "-p", &port, "-C", "20"]);
    let (client, server) = run_pair(server, client, "REJECTED");
    for text in [&client, &server] {
        assert!(text.contains("data transfers complete") && text.contains("return status 0"), "{text}");
    }
}

/// Debian's cmtime (rdmacm-utils): 1000 rdma_cm connections set up at once,
/// each step (resolve, connect, disconnect) for all of them before the
/// next. Each side's QP1 takes a burst of 1000 MADs: before it reposted
/// its receives after each receive batch, most were dropped and the run
/// took over a minute (the CM's 4 s retries); now well under a second.
#[test]
fn cmtime_sets_up_a_thousand_connections_at_once() {
    if !have("cmtime") {
        return;
    }
    let port = free_tcp_port().to_string();
    let server = End::dropin("cmtime", &["-b", "{server}", "-p", &port, "-c", "1000"]);
    let client = End::dropin("cmtime", &["-s", "{server}", "-p", &port, "-c", "1000"]);
    let text = run_client_against(server, client);
    for step in ["resolve addr", "resolve route", "create qp", "connect", "disconnect", "destroy"] {
        assert!(text.lines().any(|l| l.starts_with(step)), "no line for {step}: {text}");
    }
}

/// Debian's rdma_server and rdma_client (rdmacm-utils): synchronous
/// endpoints (`rdma_create_ep`, `rdma_get_request`, an `rdma_connect` with
/// no parameters), QPs with the library's PD and CQs, an inline SEND each way.
#[test]
fn rdma_server_and_rdma_client_exchange_over_synchronous_endpoints() {
    if !have("rdma_server") {
        return;
    }
    cm_example_pair(("rdma_server", &["-s", "{server}"]), ("rdma_client", &["-s", "{server}"]));
}

/// Runs one of librdmacm's example pairs (`server` and `client`, each a
/// program and its arguments, `-p PORT` added) between two processes;
/// each must print `PROGRAM: end 0`.
fn cm_example_pair(server: (&str, &[&str]), client: (&str, &[&str])) {
    let port = free_tcp_port().to_string();
    let [s, c] = [server, client].map(|(program, args)| {
        let mut end = End::dropin(program, args);
        end.args.extend(["-p".to_string(), port.clone()]);
        end
    });
    let (client_out, server_out) = run_pair(s, c, "Connection refused");
    assert!(client_out.contains(&format!("{}: end 0", client.0)), "{client_out}");
    assert!(server_out.contains(&format!("{}: end 0", server.0)), "{server_out}");
}

/// A device on an IPv6 address only (`udp:[::1]`, in namespaces of its
/// own): its GID table has no gap where an IPv4 GID would be, as the
/// kernel fills rxe's, so `ibv_devinfo -v` lists `::1` as GID 1 and
/// `ibv_rc_pingpong -g 1` runs over it between two processes (before, index
/// 1 was an empty entry that `ibv_query_gid` refused).
#[test]
fn an_ipv6_only_device_has_its_address_at_gid_1() {
    if !have("ibv_rc_pingpong") {
        return;
    }
    let script = r#"
        echo "== devinfo"
        ibv_devinfo -v | grep -E "gid_tbl_len|GID\["
        echo "== pingpong"
        timeout 20 ibv_rc_pingpong -g 1 -n 100 -c > server.out 2>&1 &
        server=$!
        listening 18515
        timeout 20 ibv_rc_pingpong -g 1 -n 100 -c 127.0.0.1 2>&1 || { cat server.out; exit 1; }
        wait $server || { cat server.out; exit 1; }
    "#;
    let why = "the device needs a ::1 of its own";
    let Some(text) = run_unshared("-Urn", why, script, &[("UROCE_DEVICES", "udp:[::1]")]) else { return };
    assert_eq!(result_of(&text, "devinfo", "\t\t\tgid_tbl_len").split_whitespace().nth(1), Some("2"), "{text}");
    assert!(result_of(&text, "devinfo", "\t\t\tGID[  1]").contains("::1, RoCE v2"), "{text}");
    assert!(result_of(&text, "pingpong", "100 iters in").contains("usec/iter"), "{text}");
}

/// Debian's rdma_xserver and rdma_xclient over RC (`-c r`; XRC, `-c x`,
/// uroce answers EOPNOTSUPP as rxe): `rdma_getaddrinfo`, `rdma_create_ep`
/// with a QP asked for no inline data, then a 16-byte inline SEND, which
/// rxe and mlx5 take on such a QP (16 bytes of inline room per send SGE;
/// EINVAL at the post without it).
#[test]
fn rdma_xserver_and_rdma_xclient_exchange_an_inline_send_over_rc() {
    if !have("rdma_xserver") {
        return;
    }
    cm_example_pair(("rdma_xserver", &["-c", "r"]), ("rdma_xclient", &["-s", "{server}", "-c", "r"]));
}

/// UCX (Debian's 1.13; Open MPI's transport layer) over the drop-in: its UD
/// transport alone (`ucx_perftest -x ud_verbs`, UCT active messages) and
/// UCP over RC with UD for wire-up (each of ucx_perftest's UCP tests:
/// put, get, atomics, tag matching, active messages, streams). UCX lists
/// only devices that have a character device /dev/infiniband/<dev_name>,
/// which uroce has not: the script gives it one (/dev/null bound there)
/// on a /dev of its own, in user, mount and network namespaces of its own. UCX's UD
/// transport takes a datagram only if the RoCE packet type mlx5 reports in
/// a receive's `sl` says where its destination address is (without it
/// the UD run hangs: every datagram dropped as misaddressed).
#[test]
fn ucx_runs_its_verbs_transports_over_the_dropin() {
    if !have("ucx_perftest") {
        return;
    }
    let script = r#"
        run() {
          name=$1; shift
          timeout 30 ucx_perftest "$@" > server.$name 2>&1 &
          server=$!
          listening 13337
          echo "== $name"
          timeout 30 ucx_perftest 127.0.0.1 "$@" 2>&1 || { echo "client $name failed"; cat server.$name; exit 1; }
          wait $server || { echo "server $name failed"; cat server.$name; exit 1; }
        }
        run uct_ud -d uroce0:1 -x ud_verbs -t am_lat -n 1000
        export UCX_TLS=rc_verbs,ud_verbs,self
        for t in $UCP_TESTS; do run $t -t $t -n 1000; done
    "#;
    let why = "UCX needs a /dev/infiniband of its own";
    let ucp_tests = "ucp_put_lat ucp_put_bw ucp_get ucp_add ucp_fadd ucp_swap ucp_cswap tag_lat tag_bw ucp_am_lat \
                     ucp_am_bw stream_lat stream_bw";
    let script = format!("{UVERBS_DEVICE_FILE}{script}");
    let Some(text) = run_unshared("-Urmn", why, &script, &[("UCP_TESTS", ucp_tests)]) else { return };
    for run in std::iter::once("uct_ud").chain(ucp_tests.split_whitespace()) {
        let result = result_of(&text, run, "Final:");
        assert_eq!(result.split_whitespace().nth(1), Some("1000"), "{run}: {result}\n{text}");
    }
}

/// What UCX needs to list a device, for a script run by [`run_unshared`]
/// with a mount namespace: a character device /dev/infiniband/uverbs0
/// (uroce's `dev_name`; uroce never opens it), here /dev/null bound there
/// on a tmpfs /dev of the namespace's own. Leaves the script in a fresh
/// temporary directory.
const UVERBS_DEVICE_FILE: &str = r#"
    t=$(mktemp -d)
    mkdir "$t/dev" && mount --rbind /dev "$t/dev"
    mount -t tmpfs tmpfs /dev
    for n in null zero random urandom; do touch /dev/$n; mount --bind "$t/dev/$n" /dev/$n; done
    mkdir /dev/shm /dev/infiniband
    touch /dev/infiniband/uverbs0
    mount --bind /dev/null /dev/infiniband/uverbs0
    cd "$t"
"#;

/// Open MPI (Debian's 4.1) over the drop-in, two ranks on one 127.0.0.1:
/// `tests/mpi/mpi_check.c` (ping-pong from 1 byte to 4 MiB, 64 nonblocking
/// messages in flight, an allreduce, one-sided put, get and accumulate,
/// every byte checked) run over UCX's verbs transports (`--mca pml ucx`,
/// `UCX_TLS=rc_verbs,ud_verbs,self`: no shared-memory transport, so every
/// byte between the ranks goes through uroce) and over libfabric's verbs
/// provider (`--mca pml cm --mca mtl ofi`, `FI_PROVIDER=verbs`: rxm over
/// RC). Not openib: Debian builds it without the rdmacm connection
/// scheme, and its other (udcm) does not take RoCE ports, rxe's or any.
#[test]
fn open_mpi_runs_over_ucx_and_libfabric_on_the_dropin() {
    if !(have("mpicc") && have("mpirun")) {
        return;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mpi/mpi_check.c");
    let bin = std::env::temp_dir().join(format!("uroce-mpi-check-{}", std::process::id()));
    let cc = Command::new("mpicc").arg("-O2").arg("-Wall").arg("-o").arg(&bin).arg(&src).output().expect("mpicc");
    assert!(cc.status.success(), "mpicc: {}", String::from_utf8_lossy(&cc.stderr));
    let script = r#"
        mpi() {
          name=$1; shift
          echo "== $name"
          timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$@" "$MPI_CHECK" 2>&1
          echo "exit $?"
        }
        mpi ucx --mca pml ucx -x UCX_TLS=rc_verbs,ud_verbs,self
        mpi ofi --mca pml cm --mca mtl ofi --mca osc ^ucx \
          -x FI_PROVIDER=verbs -x FI_VERBS_GID_IDX=1 -x FI_UNIVERSE_SIZE=16
    "#;
    let script = format!("{UVERBS_DEVICE_FILE}{script}");
    let why = "UCX needs a /dev/infiniband of its own";
    let text = run_unshared("-Urmn", why, &script, &[("MPI_CHECK", bin.to_str().expect("a UTF-8 path"))]);
    let _ = std::fs::remove_file(&bin);
    let Some(text) = text else { return };
    for run in ["ucx", "ofi"] {
        assert_eq!(result_of(&text, run, "mpi_check:"), "mpi_check: ok", "{run}: {text}");
        assert_eq!(result_of(&text, run, "exit "), "exit 0", "{run}: {text}");
    }
}

/// Debian's qperf (0.4.11) over the drop-in, its RC tests through rdma_cm
/// (`-cm1`; without it qperf sets no GRH, which no RoCE device takes),
/// server and client on one 127.0.0.1 in namespaces of their own. qperf's
/// server sends its port before it listens (fixed upstream in 2018, in no
/// release): a REQ that comes first is refused, and the test is run again,
/// at most three times (the refused attempts printed after the last, `# `
/// before each line); any other failure fails.
#[test]
fn qperf_runs_its_rc_tests_over_rdma_cm() {
    if !have("qperf") {
        return;
    }
    let script = r#"
        timeout 120 qperf > server.out 2>&1 &
        server=$!
        listening 19765
        for t in $QPERF_TESTS; do
          rejected=""
          for attempt in 1 2 3; do
            out=$(timeout 30 qperf 127.0.0.1 -cm1 -t 1 $t 2>&1) && break
            echo "$out" | grep -q "Event rejected" || break
            rejected="$rejected$(echo "$out" | sed "s/^/# attempt $attempt, rejected: /")
"
          done
          echo "== $t"
          echo "$out"
          printf '%s' "$rejected"
        done
        kill $server
    "#;
    let tests = "rc_bw rc_lat rc_bi_bw rc_rdma_read_bw rc_rdma_read_lat rc_rdma_write_bw rc_rdma_write_lat \
                 rc_compare_swap_mr rc_fetch_add_mr";
    let why = "qperf's server and client share a 127.0.0.1 of their own";
    let Some(text) = run_unshared("-Urn", why, script, &[("QPERF_TESTS", tests)]) else { return };
    for t in tests.split_whitespace() {
        let result = result_of(&text, t, "    ");
        let figure = ["bw  =", "latency  =", "msg_rate  ="].iter().any(|f| result.trim_start().starts_with(f));
        assert!(figure, "{t}: {result}\n{text}");
    }
}

/// Runs `script` with bash under `unshare flags` (user namespaces, and
/// what else `flags` asks) over the drop-in on the namespace's 127.0.0.1,
/// with `env`: its output (stdout, then stderr), the test failing if it
/// fails; `None`, SKIP said, where user namespaces are not to be had.
fn run_unshared(flags: &str, why: &str, script: &str, env: &[(&str, &str)]) -> Option<String> {
    if !have("ss") {
        return None;
    }
    if !Command::new("unshare").args([flags, "true"]).status().is_ok_and(|s| s.success()) {
        println!("SKIP: unshare {flags} failed here (no user namespaces): {why}");
        return None;
    }
    let dir = install_dir();
    let out = Command::new("unshare")
        .args([flags, "bash", "-c", &format!("{SCRIPT_PROLOGUE}{script}")])
        .env("LD_LIBRARY_PATH", dir.path())
        .env("UROCE_DEVICES", "udp:127.0.0.1")
        .envs(env.iter().copied())
        .output()
        .expect("unshare");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    Some(text)
}

/// What each script of [`run_unshared`] starts with: the namespace's
/// loopback up, a fresh temporary directory, and `listening PORT`, which
/// waits (10 s at most) until a server listens on TCP port PORT.
const SCRIPT_PROLOGUE: &str = r#"
    set -u
    ip link set lo up
    cd "$(mktemp -d)"
    listening() { for i in $(seq 200); do ss -ltn | grep -q ":$1 " && return; sleep 0.05; done; }
"#;

/// The first line starting with `prefix` in what the script printed
/// between its `== run` and the next `== `.
fn result_of<'a>(text: &'a str, run: &str, prefix: &str) -> &'a str {
    let after = text.split(&format!("== {run}\n")).nth(1).unwrap_or_else(|| panic!("no {run} run: {text}"));
    let own = after.split("\n== ").next().unwrap_or_default();
    own.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {run} result: {text}"))
}

/// libfabric's verbs provider (Debian's libfabric-bin): `fi_pingpong -c`
/// (data checked) over msg (RC over rdma_cm: synchronous IDs migrated onto
/// a channel) and dgram (UD) endpoints. Not rdm (libfabric's rxm over
/// msg): rxm closes a connection's endpoint before it reads the
/// completions still waiting, so a peer's disconnect that overtakes them
/// loses the last message and the run waits for it (4 runs of 180
/// beside three busy loops; see the README). In user and
/// network namespaces of their own: fi_pingpong's server binds
/// "localhost", so the device is that namespace's 127.0.0.1, which both
/// processes share. With GID 1 (the provider's default, 0, is the
/// link-local IPv6 GID, which the udp link on an IPv4 address does not
/// reach).
#[test]
fn libfabric_verbs_provider_pingpongs_over_the_dropin() {
    if !have("fi_pingpong") {
        return;
    }
    let script = r#"
        for ep in msg dgram; do
          timeout 30 fi_pingpong -p verbs -e $ep -I 100 -S 1024 -c > server.$ep 2>&1 &
          server=$!
          listening 47592
          echo "== $ep"
          timeout 30 fi_pingpong -p verbs -e $ep -I 100 -S 1024 -c 127.0.0.1 2>&1 || { echo "client $ep failed"; cat server.$ep; exit 1; }
          wait $server || { echo "server $ep failed"; cat server.$ep; exit 1; }
        done
    "#;
    let why = "fi_pingpong needs a 127.0.0.1 of its own";
    let Some(text) = run_unshared("-Urn", why, script, &[("FI_VERBS_GID_IDX", "1")]) else { return };
    for ep in ["msg", "dgram"] {
        let result = result_of(&text, ep, "1k");
        assert!(result.contains(" =100 "), "{ep}: {result}\n{text}");
    }
}
