//! `uroce dump` as a user runs it: verdicts and exit codes on the golden
//! captures, errors for bad input, and live capture inside a network namespace
//! the test creates (root only; it says why when it skips).

mod common;

use common::uroce;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use uroce_stack::pcap::{PcapReader, PcapWriter};
use uroce_stack::testnet::Namespaces;

fn capture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/captures").join(name)
}

fn dump(args: &[&str]) -> (i32, String, String) {
    let out: Output = uroce().arg("dump").args(args).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    (code, String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn check_passes_on_every_capture_of_rxe() {
    for name in
        ["atomic.pcap", "rc_send_recv.pcap", "rdma_cm_rping.pcap", "rdma_read.pcap", "rdma_write.pcap", "ud_send.pcap"]
    {
        let (code, out, err) = dump(&["--check", capture(name).to_str().unwrap()]);
        assert_eq!(code, 0, "{name}: {err}");
        let last = out.lines().last().unwrap();
        assert!(last.ends_with("ICRC bad, 0 malformed") && last.contains(" 0 ICRC bad"), "{name}: {last}");
    }
}

#[test]
fn check_fails_on_the_corrupted_icrc() {
    let (code, out, _) = dump(&["--check", capture("host_probe_afpacket.pcap").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(out.lines().last().unwrap(), "7 frames, 5 RoCEv2, 4 ICRC ok, 1 ICRC bad, 0 malformed");
    let bad: Vec<&str> = out.lines().filter(|l| l.contains("ICRC BAD")).collect();
    assert_eq!(bad.len(), 1);
    assert!(bad[0].starts_with("    5 "), "{}", bad[0]);
    // Without --check the verdicts are printed and the exit is 0.
    assert_eq!(dump(&[capture("host_probe_afpacket.pcap").to_str().unwrap()]).0, 0);
}

#[test]
fn lines_show_the_fields_that_matter() {
    let (_, out, _) = dump(&[capture("rdma_write.pcap").to_str().unwrap()]);
    let first = out.lines().next().unwrap();
    assert!(first.contains("198.18.0.11 > 198.18.0.12 RC_RDMA_WRITE_FIRST QP=0x"), "{first}");
    assert!(first.contains(" RETH va=0x") && first.contains(" rkey=0x") && first.contains(" len=4096"), "{first}");
    assert!(out.contains("RC_ACKNOWLEDGE") && out.contains("AETH ACK credits=31 MSN="));
    let (_, ud, _) = dump(&[capture("ud_send.pcap").to_str().unwrap()]);
    assert!(ud.lines().next().unwrap().contains("DETH qkey=0x11111111 srcQP=0x"));
    let (_, atomic, _) = dump(&[capture("atomic.pcap").to_str().unwrap()]);
    assert!(atomic.contains("AtomicETH va=0x") && atomic.contains("AtomicAckETH orig=0x"));
}

#[test]
fn verbose_explains_every_header() {
    let (code, out, _) = dump(&["-V", capture("rdma_read.pcap").to_str().unwrap()]);
    assert_eq!(code, 0);
    for needle in
        ["Ethernet  dst", "IPv4      198.18.0.", "UDP       port", "BTH       opcode 0x0c RC_RDMA_READ_REQUEST"]
    {
        assert!(out.contains(needle), "missing {needle:?}");
    }
    for needle in
        ["partition key 0xffff", "RETH      virtual address 0x", "AETH      syndrome 0x1f = ACK", "ICRC      0x"]
    {
        assert!(out.contains(needle), "missing {needle:?}");
    }
}

/// A packet with the authenticated mode's mark but a real ICRC (a sender
/// that sets the reserved bit for its own reasons) is a plain packet: its
/// last 24 bytes are payload, not a trailer. Only a zero ICRC, which uroce
/// leaves on what it seals, makes a marked packet sealed.
#[test]
fn a_marked_packet_with_a_real_icrc_is_read_as_plain() {
    let mut reader = PcapReader::new(std::fs::File::open(capture("rdma_write.pcap")).unwrap()).unwrap();
    let link = reader.link_type();
    let mut records = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        records.push(r);
    }
    // Record 2, an RDMA WRITE MIDDLE of 1024 bytes: where its IP packet and
    // its BTH start in the frame.
    let frame = &mut records[1].data;
    let (ip, bth_at) = {
        let parsed = link.parse_frame(frame).unwrap();
        let ip_end = frame.len() - parsed.trailer.len();
        let ip_at = ip_end - parsed.ip_packet.len();
        (ip_at..ip_end, ip_end - parsed.roce.len())
    };
    frame[bth_at + 8] |= uroce_transport::engine::AUTH_MARK; // AckReq and Resv7
    uroce_transport::icrc::fill(&mut frame[ip]).unwrap();
    let dir = std::env::temp_dir().join(format!("uroce-dump-mark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let marked = dir.join("marked.pcap");
    let mut writer = PcapWriter::new(std::fs::File::create(&marked).unwrap(), link).unwrap();
    for r in &records {
        writer.write(r.time, &r.data).unwrap();
    }
    writer.flush().unwrap();
    let (code, out, err) = dump(&["--check", marked.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 0, "{err}");
    let line = out.lines().nth(1).unwrap();
    assert!(line.contains("RC_RDMA_WRITE_MIDDLE") && line.ends_with(" len=1024 ICRC ok"), "{line}");
    assert!(!out.contains("sealed"), "{out}");
}

#[test]
fn bad_input_is_an_error_message_not_a_panic() {
    let dir = std::env::temp_dir().join(format!("uroce-dump-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let whole = std::fs::read(capture("atomic.pcap")).unwrap();
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &whole[..1000]).unwrap();
    let (code, out, err) = dump(&["--check", cut.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("truncated in record 10"), "{err}");
    assert!(out.ends_with("9 frames, 9 RoCEv2, 9 ICRC ok, 0 ICRC bad, 0 malformed\n"), "{out}");

    let text = dir.join("text.pcap");
    std::fs::write(&text, "hello, not a capture").unwrap();
    let (code, _, err) = dump(&[text.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("not a pcap file"), "{err}");
    let (code, _, err) = dump(&[dir.join("absent.pcap").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("No such file"), "{err}");
    let (code, _, err) = dump(&[]);
    assert_eq!(code, 2);
    assert!(err.contains("FILE.pcap") || err.contains("--interface"), "{err}");
    let (code, _, err) = dump(&["-i", "uroce-no-such-if0", "-c", "1"]);
    assert_eq!(code, 2);
    assert!(err.contains("no interface named"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A network namespace with a veth pair `v0`-`v1`, deleted on drop; why
/// not, when it cannot be made.
fn veth_namespace() -> Result<Namespaces, String> {
    let ns = Namespaces::try_new("dump", 1)?;
    ns.veth(0, "v0", 0, "v1");
    Ok(ns)
}

const INJECT: &str = r#"
import socket, struct, sys
data = open(sys.argv[1], 'rb').read()
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(('v1', 0))
off = 24
while off + 16 <= len(data):
    incl = struct.unpack('<I', data[off + 8:off + 12])[0]
    s.send(data[off + 16:off + 16 + incl])
    off += 16 + incl
"#;

#[test]
fn live_capture_in_a_namespace() {
    let Some(out) = live_dump(&["--check"]) else { return };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.contains("5 RoCEv2, 4 ICRC ok, 1 ICRC bad"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "--check must fail on the corrupted frame");
}

/// Live with --ladder: the diagram of what was captured, drawn when the
/// capture ends, the bad ICRC named.
#[test]
fn live_ladder_in_a_namespace() {
    let Some(out) = live_dump(&["--ladder", "--width", "120"]) else { return };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let head: Vec<&str> = stdout.lines().take(3).collect();
    assert!(head[0].contains("198.18.0.") && head[1].contains("QP 0x") && head[2].contains('|'), "{stdout}");
    assert!(stdout.contains("^ ICRC bad: the receiver drops it"), "{stdout}");
    assert!(stdout.lines().last().unwrap_or_default().contains("5 RoCEv2, 4 ICRC ok, 1 ICRC bad"), "{stdout}");
}

/// `uroce dump -i v0 -c 5 EXTRA` in a namespace of its own while frames of
/// rxe's captures are injected (the corrupted one first); `None` when it
/// cannot run here (it says why).
fn live_dump(extra: &[&str]) -> Option<Output> {
    if !common::is_root() {
        println!("SKIP: live capture needs root (CAP_NET_RAW, CAP_NET_ADMIN for a namespace); CI runs it as root");
        return None;
    }
    if Command::new("python3").arg("--version").output().is_err() {
        println!("SKIP: python3 (used to inject frames) is not installed");
        return None;
    }
    let ns = match veth_namespace() {
        Ok(ns) => ns,
        Err(why) => {
            println!("SKIP: could not create a network namespace: {why}");
            return None;
        }
    };
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns.name(0)])
        .arg(env!("CARGO_BIN_EXE_uroce"))
        .args(["dump", "-i", "v0", "-c", "5", "--duration", "30"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Inject until the capture has seen its five RoCE frames (bounded).
    let start = Instant::now();
    let pcap = capture("host_probe_afpacket.pcap");
    let six_good = capture("rdma_write.pcap");
    let mut injections = 0;
    while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(25) && injections < 20 {
        let _ = Command::new("ip")
            .args(["netns", "exec", ns.name(0), "python3", "-c", INJECT])
            .arg(if injections == 0 { &pcap } else { &six_good })
            .status();
        injections += 1;
        std::thread::sleep(Duration::from_millis(300));
    }
    Some(child.wait_with_output().unwrap())
}
