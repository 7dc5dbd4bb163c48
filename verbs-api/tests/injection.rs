//! Attacks from an unprivileged process (SECURITY-NOTES tests 1 and 6).
//!
//! 1: keys, QPNs and PSNs once came from a generator seeded with the clock
//! and the pid, which a local user reads in /proc: one QPN and one PSN seen
//! on the wire gave the seed, and with it every rkey. The search is run
//! here against a device opened without a seed.
//!
//! 6: a plain UDP socket (no root) on another loopback address sends a
//! server a correctly ICRC'd RDMA WRITE with the server's QPN, PSN and rkey.
//! The forger is a second process: this binary again (the ignored
//! `forger_process` test, run only with the environment variables below).

use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use uroce_stack::frame::{FrameRepr, IpFields, Ipv4Fields};
use uroce_stack::testnet::TestNet;
use uroce_transport::wire::{BthRepr, Opcode, RethRepr, RoceRepr};
use uroce_transport::Psn;
use uroce_verbs::*;

const T: Duration = Duration::from_secs(20);

/// The first QPN and PSN a device opened with the fixed seed `seed` draws
/// (the engine's order: the QP number, then the QP's initial PSN).
fn first_draws(seed: u64) -> (u32, u32) {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let qpn = rng.gen_range(0x11..=0xff_ffff);
    (qpn, rng.gen::<u32>() & 0xff_ffff)
}

fn first_qp(opts: OpenOptions, dev: &str) -> (u32, u32) {
    let ctx = Device::open_with(dev, &opts).unwrap();
    let cq = ctx.create_cq(4, None).unwrap();
    let qp = ctx.alloc_pd().create_qp(&QpInit::rc(&cq, &cq)).unwrap();
    (qp.qp_num(), qp.initial_psn())
}

/// The old seed: wall-clock nanoseconds XOR pid << 32.
fn clock_seed(ns: u64) -> u64 {
    ns ^ u64::from(std::process::id()) << 32
}

#[test]
fn no_clock_seed_gives_a_devices_first_qpn_and_psn() {
    let net = TestNet::new();
    let manual = |seed| OpenOptions { progress: Progress::Manual, seed, ..OpenOptions::default() };
    // The search is sound: a device seeded with a clock seed is found.
    let known = clock_seed(1_700_000_000_123_456_789);
    assert_eq!(first_qp(manual(Some(known)), &net.udp(1)), first_draws(known));

    let start = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let seen = first_qp(manual(None), &net.udp(2));
    // +-5 ms around the open, every nanosecond: 10^7 candidates, 2 threads.
    const SPAN: u64 = 5_000_000;
    let found = std::thread::scope(|s| {
        let halves = [(start - SPAN, start), (start, start + SPAN)];
        let searches: Vec<_> = halves
            .into_iter()
            .map(|(from, to)| s.spawn(move || (from..to).find(|ns| first_draws(clock_seed(*ns)) == seen)))
            .collect();
        searches.into_iter().filter_map(|h| h.join().unwrap()).next()
    });
    assert_eq!(found, None, "the device's numbers follow from the clock");
}

/// The forger's environment: the address to send from, the server's
/// address, and the WRITE's "qpn psn rkey va".
const FORGE_FROM: &str = "UROCE_FORGE_FROM";
const FORGE_TO: &str = "UROCE_FORGE_TO";
const FORGE_WRITE: &str = "UROCE_FORGE_WRITE";
const FORGED: &[u8; 16] = b"forged by a user";

#[test]
#[ignore = "run by an_unprivileged_socket_cannot_write_into_a_connection as the forger"]
fn forger_process() {
    let Ok(from) = std::env::var(FORGE_FROM) else { return };
    let from: std::net::Ipv4Addr = from.parse().unwrap();
    let to: std::net::Ipv4Addr = std::env::var(FORGE_TO).unwrap().parse().unwrap();
    let f: Vec<u64> = std::env::var(FORGE_WRITE).unwrap().split(' ').map(|x| x.parse().unwrap()).collect();
    // A plain socket on any port: what any user may open.
    let socket = std::net::UdpSocket::bind((from, 0)).unwrap();
    let port = socket.local_addr().unwrap().port();
    let mut r = RoceRepr::new(BthRepr::new(Opcode::RcWriteOnly, f[0] as u32, Psn::new(f[1] as u32)));
    r.bth.ack_req = true;
    r.reth = Some(RethRepr { va: f[3], rkey: f[2] as u32, dma_len: FORGED.len() as u32 });
    let frame = FrameRepr::new(None, IpFields::V4(Ipv4Fields::new(from, to, 0)), port);
    let mut buf = vec![0u8; frame.buffer_len(r.buffer_len(FORGED.len()))];
    let roce = frame.emit(&mut buf, r.buffer_len(FORGED.len()));
    r.emit(&mut buf[roce.clone()], FORGED);
    frame.seal(&mut buf).unwrap();
    socket.send_to(&buf[roce], (to, 4791)).unwrap();
}

/// Runs the forger process once; it exits after one datagram.
fn forge(from: std::net::Ipv4Addr, to: std::net::Ipv4Addr, fields: [u64; 4]) {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "forger_process", "--ignored", "--test-threads=1"])
        .env(FORGE_FROM, from.to_string())
        .env(FORGE_TO, to.to_string())
        .env(FORGE_WRITE, fields.map(|x| x.to_string()).join(" "))
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the forger failed: {status}");
}

/// Waits (bounded) until `done` holds.
fn wait_until(mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + T;
    while Instant::now() < end {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

#[test]
fn an_unprivileged_socket_cannot_write_into_a_connection() {
    let net = TestNet::new();
    let (a_ip, b_ip, forger_ip) = (net.ip(1), net.ip(2), net.ip(3));
    let a = Device::open(&net.udp(1)).unwrap();
    let b = Device::open(&net.udp(2)).unwrap();
    let (a_cq, b_cq) = (a.create_cq(8, None).unwrap(), b.create_cq(8, None).unwrap());
    let a_qp = a.alloc_pd().create_qp(&QpInit::rc(&a_cq, &a_cq)).unwrap();
    let b_pd = b.alloc_pd();
    let b_qp = b_pd.create_qp(&QpInit::rc(&b_cq, &b_cq)).unwrap();
    let target = b_pd.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    a_qp.connect(&ConnectAttr::new(b_qp.qp_num(), b_qp.initial_psn(), Gid::from_ipv4(b_ip.octets()))).unwrap();
    b_qp.connect(&ConnectAttr::new(a_qp.qp_num(), a_qp.initial_psn(), Gid::from_ipv4(a_ip.octets()))).unwrap();
    let epsn = u64::from(a_qp.initial_psn());
    let fields = |psn: u64| [u64::from(b_qp.qp_num()), psn, u64::from(target.rkey()), target.addr()];

    // From another address: dropped, counted (what `--stats` prints as rcvd_bad_src).
    forge(forger_ip, b_ip, fields(epsn));
    assert!(wait_until(|| b.counters().get(Counter::RcvdBadSrc) == 1), "the forged WRITE was not counted");
    assert_eq!(target.to_vec(), vec![0; 64], "the forged WRITE changed memory");

    // The real peer's WRITE at that PSN lands.
    let src = a_qp.pd().reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    src.write(0, b"from the peer...");
    let wr = SendWr::new(1, WrOp::RdmaWrite { remote_addr: target.addr(), rkey: target.rkey() }, vec![src.sge(0, 16)]);
    a_qp.post_send(&wr).unwrap();
    assert_eq!(a_cq.wait_one(T).unwrap().status, WcStatus::Success);
    assert_eq!(&target.to_vec()[..16], b"from the peer...");

    // The same datagram from the peer's address (any port) is accepted: the
    // forgery was right, and a local user who can bind the peer's loopback
    // address is the limit of a source check (docs/SECURITY.md).
    forge(a_ip, b_ip, fields(epsn + 1));
    assert!(wait_until(|| &target.to_vec()[..16] == FORGED), "the control WRITE did not land");
    assert_eq!(b.counters().get(Counter::RcvdBadSrc), 1);
}

/// SECURITY-NOTES test 11: a region the library allocates is named by a
/// random page-aligned address, other each time a device is opened without
/// a seed; the process's heap addresses mean nothing to a peer.
#[test]
fn regions_are_named_by_random_addresses_not_heap_pointers() {
    let net = TestNet::new();
    let (a, b) = (Device::open(&net.udp(1)).unwrap(), Device::open(&net.udp(2)).unwrap());
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let target = b.alloc_pd().reg_mr(4096, access).unwrap();
    let again = Device::open(&net.udp(3)).unwrap().alloc_pd().reg_mr(4096, access).unwrap();
    assert_eq!(target.addr() % 4096, 0);
    assert_ne!(target.addr(), again.addr(), "two devices chose one address");
    // An address of this process's heap, where the region's bytes would be.
    let heap = uroce_stack::memory::AppBuffer::new(4096);
    let heap_addr = heap.as_ptr() as u64;
    assert_ne!(target.addr(), heap_addr);

    let (a_cq, b_cq) = (a.create_cq(8, None).unwrap(), b.create_cq(8, None).unwrap());
    let a_qp = a.alloc_pd().create_qp(&QpInit::rc(&a_cq, &a_cq)).unwrap();
    let b_qp = target.pd().create_qp(&QpInit::rc(&b_cq, &b_cq)).unwrap();
    a_qp.connect(&ConnectAttr::new(b_qp.qp_num(), b_qp.initial_psn(), Gid::from_ipv4(net.ip(2).octets()))).unwrap();
    b_qp.connect(&ConnectAttr::new(a_qp.qp_num(), a_qp.initial_psn(), Gid::from_ipv4(net.ip(1).octets()))).unwrap();
    let src = a_qp.pd().reg_mr(8, AccessFlags::LOCAL_WRITE).unwrap();
    let write = |id, addr| {
        let wr = SendWr::new(id, WrOp::RdmaWrite { remote_addr: addr, rkey: target.rkey() }, vec![src.sge(0, 8)]);
        a_qp.post_send(&wr).unwrap();
        a_cq.wait_one(T).unwrap().status
    };
    assert_eq!(write(1, target.addr()), WcStatus::Success);
    assert_eq!(write(2, heap_addr), WcStatus::RemAccessErr);
}
