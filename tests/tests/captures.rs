//! The golden vectors: every frame the kernel rxe wrote parses, re-emits to the
//! same bytes, and carries the ICRC we compute (but the one corrupted on purpose).

use uroce_stack::frame::FrameRepr;
use uroce_tests::{read_capture, CAPTURES};
use uroce_transport::icrc;
use uroce_transport::wire::{Opcode, RocePacket, RoceRepr};

/// RoCEv2 frames per capture, as shared/captures/README.md lists them.
const ROCE_FRAMES: [(&str, usize); 7] = [
    ("atomic.pcap", 160),
    ("host_probe_afpacket.pcap", 5),
    ("rc_send_recv.pcap", 200),
    ("rdma_cm_rping.pcap", 65),
    ("rdma_read.pcap", 240),
    ("rdma_write.pcap", 280),
    ("ud_send.pcap", 40),
];

#[test]
fn every_frame_round_trips_byte_for_byte() {
    for name in CAPTURES {
        let (link, records) = read_capture(name);
        let mut roce = 0;
        for (i, rec) in records.iter().enumerate() {
            let Ok(parsed) = link.parse_frame(&rec.data) else { continue };
            roce += 1;
            let packet = RocePacket::new_checked(parsed.roce).unwrap_or_else(|e| panic!("{name} #{}: {e}", i + 1));
            let repr = RoceRepr::parse(&packet).unwrap();
            assert!(packet.pad().iter().all(|&b| b == 0), "{name} #{}: nonzero pad", i + 1);

            let frame: FrameRepr = parsed.repr;
            let mut out = vec![0u8; frame.buffer_len(parsed.roce.len())];
            let at = frame.emit(&mut out, parsed.roce.len());
            repr.emit(&mut out[at.clone()], packet.payload());
            RocePacket::new_unchecked(&mut out[at]).set_icrc(packet.icrc());
            out.extend_from_slice(parsed.trailer);
            assert_eq!(out, rec.data, "{name} frame {} re-emits differently", i + 1);
        }
        let want = ROCE_FRAMES.iter().find(|(n, _)| *n == name).unwrap().1;
        assert_eq!(roce, want, "{name}: RoCEv2 frame count");
    }
}

#[test]
fn every_icrc_matches_but_the_corrupted_one() {
    for name in CAPTURES {
        let (link, records) = read_capture(name);
        for (i, rec) in records.iter().enumerate() {
            let Ok(parsed) = link.parse_frame(&rec.data) else { continue };
            let good = icrc::check(parsed.ip_packet).unwrap();
            let corrupted_on_purpose = name == "host_probe_afpacket.pcap" && i + 1 == 5;
            assert_eq!(good, !corrupted_on_purpose, "{name} frame {}", i + 1);
        }
    }
}

#[test]
fn seal_reproduces_rxe_icrcs() {
    // Emitting from the parsed fields with our own ICRC gives rxe's bytes.
    let (link, records) = read_capture("rdma_write.pcap");
    for rec in &records {
        let parsed = link.parse_frame(&rec.data).unwrap();
        let packet = RocePacket::new_checked(parsed.roce).unwrap();
        let repr = RoceRepr::parse(&packet).unwrap();
        let out = uroce_tests::build_frame(&parsed.repr, &repr, packet.payload());
        assert_eq!(out, rec.data);
    }
}

#[test]
fn captures_hold_the_opcodes_their_readme_names() {
    let opcodes = |name| {
        let (link, records) = read_capture(name);
        records
            .iter()
            .filter_map(|r| link.parse_frame(&r.data).ok())
            .map(|p| RocePacket::new_checked(p.roce).unwrap().bth().opcode())
            .collect::<Vec<_>>()
    };
    let read = opcodes("rdma_read.pcap");
    for op in
        [Opcode::RcReadRequest, Opcode::RcReadResponseFirst, Opcode::RcReadResponseLast, Opcode::RcReadResponseOnly]
    {
        assert!(read.contains(&op), "rdma_read.pcap lacks {op}");
    }
    let atomic = opcodes("atomic.pcap");
    for op in [Opcode::RcFetchAdd, Opcode::RcCompareSwap, Opcode::RcAtomicAck] {
        assert!(atomic.contains(&op), "atomic.pcap lacks {op}");
    }
    assert!(opcodes("ud_send.pcap").iter().all(|&op| op == Opcode::UdSendOnly));
}
