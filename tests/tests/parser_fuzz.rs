//! A bounded randomized test: a million random and mutated frames through the
//! frame parser, the transport parser, the ICRC and `uroce dump`'s printers.
//! Nothing may panic; the verdicts must cover every kind (so the mutations reach
//! every path). The cargo-fuzz target in fuzz/ runs the same entry point unbounded.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;
use uroce_stack::pcap::LinkType;
use uroce_tests::{build_frame, read_capture, test_frame_repr, CAPTURES};
use uroce_tools::dump::{Dumper, Verdict};
use uroce_transport::wire::{Opcode, RocePacket, RoceRepr};
use uroce_transport::{icrc, Psn};

const FRAMES: u64 = 1_000_000;

/// Well-formed starting points: every captured frame and every opcode we emit.
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = CAPTURES.iter().flat_map(|n| read_capture(n).1).map(|r| r.data).collect();
    for ipv6 in [false, true] {
        for &op in Opcode::ALL {
            let payload = if op.has_payload() { &b"0123456"[..] } else { &[][..] };
            seeds.push(build_frame(&test_frame_repr(ipv6, 1), &RoceRepr::example(op, Psn::new(5)), payload));
        }
    }
    seeds
}

fn mutate(rng: &mut ChaCha8Rng, seed: &[u8]) -> Vec<u8> {
    let mut f = seed.to_vec();
    match rng.gen_range(0..8) {
        0 => {
            let n = rng.gen_range(0..200);
            f = (0..n).map(|_| rng.gen()).collect();
        }
        1 => f.truncate(rng.gen_range(0..=f.len())),
        2 => f.extend((0..rng.gen_range(1..64)).map(|_| rng.gen::<u8>())),
        3 if f.len() > 42 => f[42] = rng.gen(), // the BTH opcode of an IPv4 frame
        4 if f.len() > 43 => f[43] ^= 0x30,     // its pad count
        5 if f.len() > 19 => {
            let at = if rng.gen() { 16 } else { 18 }; // IPv4 total length or identification
            f[at] = rng.gen();
        }
        _ => {
            for _ in 0..rng.gen_range(1..8) {
                if f.is_empty() {
                    break;
                }
                let i = rng.gen_range(0..f.len());
                f[i] ^= 1 << rng.gen_range(0..8);
            }
        }
    }
    f
}

#[test]
fn a_million_hostile_frames_never_panic() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_0fc0_ffee);
    let seeds = seeds();
    let links = [LinkType::Ethernet, LinkType::RawIp, LinkType::LinuxSll, LinkType::LinuxSll2];
    let mut dumper = Dumper::new(false);
    let mut verbose = Dumper::new(true);
    let mut text = String::new();
    let mut seen = [0u64; 5];
    for i in 0..FRAMES {
        let seed = &seeds[rng.gen_range(0..seeds.len())];
        let frame = mutate(&mut rng, seed);
        let link = if i % 8 == 0 { links[rng.gen_range(0..links.len())] } else { LinkType::Ethernet };
        let time = Duration::from_nanos(rng.gen_range(0..u64::from(u32::MAX)));
        let d = if i % 16 == 0 { &mut verbose } else { &mut dumper };
        let v = d.frame(link, time, &frame, &mut text);
        seen[v as usize] += 1;
        text.clear();
        // The transport parser and ICRC on raw bytes, without the framing's checks.
        if let Ok(p) = RocePacket::new_checked(&frame[frame.len().min(42)..]) {
            let _ = (RoceRepr::parse(&p), p.payload(), p.pad(), p.icrc());
        }
        let _ = icrc::compute(&frame[frame.len().min(14)..]);
        if i % 64 == 0 {
            uroce_tools::dump::fuzz_one(&frame); // the cargo-fuzz entry point
        }
    }
    assert_eq!(dumper.summary.frames + verbose.summary.frames, FRAMES);
    // (Sealed, a zero ICRC under the authenticated mode's mark, is rare in
    // mutations of rxe's traffic: not required.)
    for kind in [Verdict::NotRoce, Verdict::IcrcOk, Verdict::IcrcBad, Verdict::Malformed] {
        let n = seen[kind as usize];
        assert!(n > 1000, "mutations produced only {n} frames judged {kind:?}");
    }
}
