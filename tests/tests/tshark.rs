//! Frames uroce emits for every opcode, over IPv4 and IPv6, decoded by Wireshark's
//! own InfiniBand dissector (tshark): same opcode, QPN, PSN and extension-header
//! fields. CI installs tshark (.ci/run); elsewhere the test skips, saying why.

use std::process::Command;
use std::time::Duration;
use uroce_stack::pcap::{LinkType, PcapWriter};
use uroce_tests::{build_frame, test_frame_repr};
use uroce_transport::wire::{Opcode, RoceRepr};
use uroce_transport::Psn;

const FIELDS: [&str; 17] = [
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.bth.padcnt",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.deth.q_key",
    "infiniband.deth.srcqp",
    "infiniband.immdt",
    "infiniband.ieth",
    "infiniband.atomiceth.swapdt",
    "infiniband.atomiceth.cmpdt",
    "infiniband.atomicacketh.origremdt",
];

/// Opcodes Wireshark 4.0 (Debian 12) has no dissection for: their header layout
/// is checked by our own tests against the IBTA tables, and their BTH here.
fn dissector_knows_headers(op: Opcode) -> bool {
    !matches!(op, Opcode::RcFlush | Opcode::RcAtomicWrite | Opcode::Cnp)
}

fn tshark() -> Option<&'static str> {
    let found = Command::new("tshark").arg("--version").output().is_ok_and(|o| o.status.success());
    if found {
        return Some("tshark");
    }
    if std::env::var_os("CI").is_some() {
        panic!("tshark is missing in CI: .ci/run must install it (apt-get install tshark)");
    }
    println!("SKIP: tshark not found; install it with `apt-get install tshark` to run this test");
    None
}

fn expected(repr: &RoceRepr, payload_len: usize) -> Vec<String> {
    let b = &repr.bth;
    let opt = |v: Option<String>| v.unwrap_or_default();
    let headers = dissector_knows_headers(b.opcode);
    let pick = |v: Option<String>| if headers { opt(v) } else { String::new() };
    vec![
        u8::from(b.opcode).to_string(),
        b.dest_qp.to_string(),
        b.psn.value().to_string(),
        if b.ack_req { "1" } else { "0" }.to_string(),
        (if b.opcode.has_payload() { (4 - payload_len % 4) % 4 } else { 0 }).to_string(),
        pick(repr.reth.map(|h| h.va.to_string()).or(repr.atomic_eth.map(|h| h.va.to_string()))),
        pick(repr.reth.map(|h| h.rkey.to_string()).or(repr.atomic_eth.map(|h| h.rkey.to_string()))),
        pick(repr.reth.map(|h| h.dma_len.to_string())),
        pick(repr.aeth.map(|h| h.syndrome.to_byte().to_string())),
        pick(repr.aeth.map(|h| h.msn.to_string())),
        pick(repr.deth.map(|h| h.qkey.to_string())),
        pick(repr.deth.map(|h| h.src_qp.to_string())),
        pick(repr.immdt.map(|h| hex(&h.imm.to_be_bytes()))),
        pick(repr.ieth.map(|h| hex(&h.rkey.to_be_bytes()))),
        pick(repr.atomic_eth.map(|h| h.swap_add.to_string())),
        pick(repr.atomic_eth.map(|h| h.compare.to_string())),
        pick(repr.atomic_ack_eth.map(|h| h.orig_data.to_string())),
    ]
}

/// Wireshark tries heuristic sub-dissectors (RPC-over-RDMA, iSER, SMB Direct...)
/// on SEND payloads; ours are counting bytes, which those then call malformed.
/// Decode RoCE alone.
const PAYLOAD_PROTOCOLS: [&str; 9] =
    ["smc", "smb_direct", "rpcordma", "nvme-rdma", "lnet", "iser", "infiniband.eoib", "infiniband_sdp", "fcoib"];

fn tshark_cmd(tshark: &str, path: &std::path::Path) -> Command {
    let mut cmd = Command::new(tshark);
    cmd.arg("-r").arg(path);
    for p in PAYLOAD_PROTOCOLS {
        cmd.args(["--disable-protocol", p]);
    }
    cmd
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn tshark_decodes_every_opcode_as_we_emit_it() {
    let Some(tshark) = tshark() else { return };
    let dir = std::env::temp_dir().join(format!("uroce-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("every_opcode.pcap");
    let mut w = PcapWriter::new(std::fs::File::create(&path).unwrap(), LinkType::Ethernet).unwrap();
    let mut want = Vec::new();
    let mut n = 0u32;
    for ipv6 in [false, true] {
        for &op in Opcode::ALL {
            for payload_len in [0usize, 1, 7, 256] {
                let payload_len = if op.has_payload() { payload_len } else { 0 };
                let mut repr = RoceRepr::example(op, Psn::new(0xfffff0 + n));
                repr.bth.dest_qp = 0x100 + n;
                repr.bth.ack_req = n % 2 == 1;
                let payload: Vec<u8> = (0..payload_len).map(|i| i as u8).collect();
                let frame = build_frame(&test_frame_repr(ipv6, n as u16), &repr, &payload);
                w.write(Duration::from_millis(u64::from(n)), &frame).unwrap();
                want.push(expected(&repr, payload_len));
                n += 1;
            }
        }
    }
    drop(w);
    let mut cmd = tshark_cmd(tshark, &path);
    cmd.args(["-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let got: Vec<Vec<String>> = text.lines().map(|l| l.split('|').map(normalise).collect()).collect();
    assert_eq!(got.len(), want.len(), "tshark saw a different number of frames");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        for (k, field) in FIELDS.iter().enumerate() {
            assert_eq!(g[k], w[k], "frame {} field {field}: tshark {:?}, ours {:?}", i + 1, g, w);
        }
    }
    let malformed =
        tshark_cmd(tshark, &path).args(["-Y", "_ws.malformed || _ws.expert.severity >= \"warning\""]).output().unwrap();
    let flagged = String::from_utf8_lossy(&malformed.stdout);
    assert!(flagged.trim().is_empty(), "tshark flags frames as malformed:\n{flagged}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// tshark prints numbers in decimal or 0x-hex depending on the field; bytes as
/// hex with or without colons. Bring them to one form.
fn normalise(s: &str) -> String {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x") {
        return u64::from_str_radix(h, 16).map(|v| v.to_string()).unwrap_or_else(|_| s.to_string());
    }
    match s {
        "True" => "1".into(),
        "False" => "0".into(),
        _ => s.replace(':', ""),
    }
}
