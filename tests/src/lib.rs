//! Helpers shared by uroce's cross-crate tests: the golden captures and frame
//! builders, and running the kernel-rxe lab's scripts.

pub mod lab;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use uroce_stack::frame::{EthFields, FrameRepr, IpFields, Ipv4Fields, Ipv6Fields};
use uroce_stack::pcap::{LinkType, PcapReader, Record};
use uroce_transport::wire::RoceRepr;

/// The seven captures of the kernel rxe (copied from shared/captures).
pub const CAPTURES: [&str; 7] = [
    "atomic.pcap",
    "host_probe_afpacket.pcap",
    "rc_send_recv.pcap",
    "rdma_cm_rping.pcap",
    "rdma_read.pcap",
    "rdma_write.pcap",
    "ud_send.pcap",
];

pub fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data")
}

pub fn capture_path(name: &str) -> PathBuf {
    data_dir().join("captures").join(name)
}

/// Every record of a capture, with its link type.
pub fn read_capture(name: &str) -> (LinkType, Vec<Record>) {
    let file = std::fs::File::open(capture_path(name)).expect("capture file");
    let mut r = PcapReader::new(std::io::BufReader::new(file)).expect("pcap header");
    let mut records = Vec::new();
    while let Some(rec) = r.next_record().expect("pcap record") {
        records.push(rec);
    }
    (r.link_type(), records)
}

/// The L2-L4 headers of a test frame between 198.18.0.1 and .2 (or fd00::1 and ::2).
pub fn test_frame_repr(ipv6: bool, ident: u16) -> FrameRepr {
    let eth = EthFields { dst: [0x02, 0, 0, 0, 0, 0x02], src: [0x02, 0, 0, 0, 0, 0x01] };
    let ip = if ipv6 {
        IpFields::V6(Ipv6Fields {
            src: "fd00::1".parse().unwrap(),
            dst: "fd00::2".parse().unwrap(),
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 64,
        })
    } else {
        IpFields::V4(Ipv4Fields::new(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2), ident))
    };
    FrameRepr::new(Some(eth), ip, 0xc0de)
}

/// A whole Ethernet frame around `roce` and `payload`, ICRC filled in.
pub fn build_frame(frame: &FrameRepr, roce: &RoceRepr, payload: &[u8]) -> Vec<u8> {
    let roce_len = roce.buffer_len(payload.len());
    let mut buf = vec![0u8; frame.buffer_len(roce_len)];
    let at = frame.emit(&mut buf, roce_len);
    roce.emit(&mut buf[at], payload);
    frame.seal(&mut buf).expect("seal");
    buf
}
