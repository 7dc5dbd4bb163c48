//! ICRC throughput on 4 KiB RoCEv2 packets: crc32fast (carry-less multiply where
//! the CPU has it) against the `crc` crate's table implementations, plus the full
//! ICRC (masking included). Prints GB/s and each ratio against the slowest table.
//!
//! cargo bench -p uroce-transport --bench icrc

// A benchmark reads the clock: it drives the sans-IO crate from outside.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::hint::black_box;
use std::time::{Duration, Instant};

const PACKET: usize = 4096;
const MIN_TIME: Duration = Duration::from_millis(400);

fn gbps(name: &str, f: &mut dyn FnMut(&[u8]) -> u32, data: &[u8]) -> f64 {
    // Warm up, then run for at least MIN_TIME (bounded by count too).
    for _ in 0..100 {
        black_box(f(black_box(data)));
    }
    let start = Instant::now();
    let mut iters = 0u64;
    while start.elapsed() < MIN_TIME && iters < 50_000_000 {
        for _ in 0..256 {
            black_box(f(black_box(data)));
        }
        iters += 256;
    }
    let secs = start.elapsed().as_secs_f64();
    let rate = (iters as f64 * data.len() as f64) / secs / 1e9;
    println!("{name:<36} {rate:>8.2} GB/s");
    rate
}

fn main() {
    // An IPv4 RoCEv2 packet: 20 IP + 8 UDP + 12 BTH + 4096 data + 4 ICRC.
    let mut ip = vec![0u8; 20 + 8 + 12 + PACKET + 4];
    ip[0] = 0x45;
    ip[9] = 17;
    for (i, b) in ip[40..].iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    let data = &ip[40..40 + PACKET];

    let reference = crc32fast::hash(data);
    let table1 = crc::Crc::<u32, crc::Table<1>>::new(&crc::CRC_32_ISO_HDLC);
    let table16 = crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISO_HDLC);
    assert_eq!(table1.checksum(data), reference);
    assert_eq!(table16.checksum(data), reference);

    println!("CRC-32 over a {PACKET}-byte payload, one core");
    let base = gbps("crc crate, table (1 x 256)", &mut |d| table1.checksum(d), data);
    let t16 = gbps("crc crate, slice-by-16", &mut |d| table16.checksum(d), data);
    let fast = gbps("crc32fast (clmul)", &mut |d| crc32fast::hash(d), data);
    let full = gbps("uroce icrc::compute (masking + crc)", &mut |p| uroce_transport::icrc::compute(p).unwrap(), &ip);
    println!();
    println!(
        "ratio vs table: slice-by-16 {:.2}x, crc32fast {:.2}x, icrc::compute {:.2}x",
        t16 / base,
        fast / base,
        full / base
    );
    let best = if fast >= t16 { "crc32fast" } else { "crc slice-by-16" };
    println!("fastest: {best} (uroce uses crc32fast)");
}
