//! The harness's plumbing, never its numbers: the table renders with medians,
//! ratios and verdicts; the callgrind target does exactly one WRITE packet
//! and one ACK per message; the built-in baselines produce a figure.

use uroce_bench::{baseline, packet_cost, rate, table};

const TSV: &str = "# section\tfigure\turoce\tbaseline name\tbaseline\tunit\tbetter\ttarget\tnote
1. loopback\twrite_bw 64 KiB, poll\t8,9,7\tTCP\t30,32,31\tGbit/s\thigher\t>=1\t
1. loopback\twrite_lat 2 B, poll\t9.1,9.0\tUDP half RTT\t2.5\tus\tlower\t<=1\tsome | note
1. loopback\tICRC\t38\ttarget\t8\tGB/s\thigher\t>=1\t
3. veth\tevery figure of this part\t\t\t\t\thigher\t-\tSKIP: needs root
4. guests\twrite_bw 64 KiB\t3\trxe\t\tGbit/s\thigher\t>=3\t
";

#[test]
fn the_table_has_medians_ratios_and_verdicts() {
    let rows = table::parse(TSV).unwrap();
    assert_eq!(rows.len(), 5);
    let c = table::cells(&rows[0], None);
    assert_eq!(c[1], "8.00 Gbit/s");
    assert_eq!(c[2], "TCP 31.0 Gbit/s");
    assert_eq!(c[3], "0.258x");
    assert_eq!(c[4], "NO (>= 1x)");
    let c = table::cells(&rows[1], None);
    assert_eq!(c[1], "9.05 us", "the median of an even count is the mean of the middle two");
    assert_eq!(c[4], "NO (<= 1x)");
    assert_eq!(table::cells(&rows[2], None)[4], "yes (>= 1x)");
    assert_eq!(table::cells(&rows[3], None)[1], "not measured");
    assert_eq!(table::cells(&rows[4], None)[4], "n/a (>= 3x, not measured)");
    assert_eq!(table::verdicts(&rows), (1, 2, 1));

    let text = table::text(&rows);
    assert!(text.starts_with("figure"));
    assert!(text.contains("== 3. veth\n"));
    assert!(text.contains("note: SKIP: needs root"));
    let md = table::markdown(&rows);
    assert!(md.starts_with("| figure | uroce | baseline | ratio | target met? |\n| --- |"));
    assert!(md.contains("| **4. guests** | | | | |"));
    assert!(md.contains("some \\| note"), "pipes in notes are escaped");
    assert!(table::samples_text(&rows).contains("uroce [8.00, 9.00, 7.00]; TCP [30.0, 32.0, 31.0] Gbit/s"));
}

/// With one core's memcpy rate in the table, every throughput in Gbit/s
/// also says what fraction of it it is; other units do not.
#[test]
fn throughputs_are_given_as_a_fraction_of_memcpy() {
    let tsv = format!("{TSV}1. loopback\tmemcpy, 4 KiB copies, one core\t20\t\t\tGB/s\thigher\t-\t\n");
    let rows = table::parse(&tsv).unwrap();
    assert_eq!(table::memcpy_limit(&rows), Some(20.0));
    // 8 Gbit/s is 1 GB/s: 5% of 20 GB/s.
    assert_eq!(table::cells(&rows[0], Some(20.0))[1], "8.00 Gbit/s (5.00% of memcpy)");
    assert_eq!(table::cells(&rows[1], Some(20.0))[1], "9.05 us");
    assert!(table::text(&rows).contains("8.00 Gbit/s (5.00% of memcpy)"));
    assert!(rate::memcpy_gbps(4096, 65536, std::time::Duration::from_millis(20)) > 0.0);
}

#[test]
fn bad_lines_are_named() {
    let e = table::parse("a\tb\tx\tc\t1\tus\tlower\t-\t\n").unwrap_err();
    assert!(e.contains("line 1") && e.contains("\"x\""), "{e}");
    let e = table::parse("a\tb\t1\tc\t1\tus\tsideways\t-\t\n").unwrap_err();
    assert!(e.contains("higher or lower"), "{e}");
    let e = table::parse("a\tb\t1\tc\t1\tus\tlower\t=2\t\n").unwrap_err();
    assert!(e.contains("bad target"), "{e}");
}

#[test]
fn the_callgrind_target_moves_one_write_and_one_ack_per_message() {
    let x = packet_cost::run(5, 5, packet_cost::PAYLOAD).unwrap();
    assert_eq!(x.write_len, 12 + 16 + packet_cost::PAYLOAD + 4, "one WRITE_ONLY with its RETH and ICRC");
    assert_eq!(x.ack_len, 12 + 4 + 4, "BTH, AETH, ICRC");
    // A 2-byte WRITE (write_lat's) is padded to 4.
    assert_eq!(packet_cost::run(5, 5, 2).unwrap().write_len, 12 + 16 + 4 + 4);
    let mut small = packet_cost::Bench::with_payload(2).unwrap();
    small.exchange(true).unwrap();
    assert!(small.placed());
    for bad in [0, packet_cost::PAYLOAD + 1] {
        let e = packet_cost::run(1, 1, bad).unwrap_err();
        assert!(e.contains("--payload"), "{e}");
    }
    let mut b = packet_cost::Bench::new();
    for _ in 0..3 {
        b.exchange(true).unwrap();
    }
    assert_eq!((b.writes, b.acks), (3, 3));
    assert!(b.placed());
    assert_eq!(packet_cost::STEPS.len(), 5);
}

#[test]
fn the_built_in_baselines_give_a_figure() {
    let ip = "127.0.0.1".parse().unwrap();
    for waiting in [baseline::Waiting::Polling, baseline::Waiting::Blocking] {
        let half_rtt = baseline::udp_loopback(ip, 34, 200, waiting).unwrap();
        assert!(half_rtt > 0.0, "{waiting:?}");
    }
    let gbits = baseline::tcp_loopback(ip, std::time::Duration::from_millis(50)).unwrap();
    assert!(gbits > 0.0);
}

#[test]
fn the_rates_give_a_figure() {
    assert!(rate::icrc_gbps(4096, std::time::Duration::from_millis(20)) > 0.0);
    let (clock, recv) = rate::syscall_costs(std::time::Duration::from_millis(20)).unwrap();
    assert!(clock > 0.0 && recv > 0.0);
    let handoff = rate::cache_line_handoff_ns(std::time::Duration::from_millis(20));
    assert!(handoff.is_finite() && handoff > 0.0, "{handoff}");
    for with_ack in [false, true] {
        let ns = rate::udp_link_half_trip_ns(with_ack, std::time::Duration::from_millis(20)).unwrap();
        assert!(ns.is_finite() && ns > 0.0, "{with_ack}: {ns}");
    }
}

#[test]
fn the_packet_link_cost_gives_a_figure_over_a_veth() {
    use uroce_stack::link::netns::is_root;
    use uroce_stack::testnet::Namespaces;
    if !is_root() {
        println!("SKIP: the_packet_link_cost_gives_a_figure_over_a_veth: needs root (network namespaces, a veth)");
        return;
    }
    let ns = match Namespaces::try_new("bench-plc", 2) {
        Ok(ns) => ns,
        Err(e) => {
            println!("SKIP: the_packet_link_cost_gives_a_figure_over_a_veth: no namespaces here: {e}");
            return;
        }
    };
    ns.veth(0, "ubpa", 1, "ubpb");
    let a = (ns.name(0), "packet:ubpa,ip=10.78.0.11,mac=02:00:00:78:00:11");
    let b = (ns.name(1), "packet:ubpb,ip=10.78.0.12,mac=02:00:00:78:00:12");
    for with_ack in [false, true] {
        let ns = rate::packet_link_half_trip_ns(a, b, with_ack, std::time::Duration::from_millis(20)).unwrap();
        assert!(ns.is_finite() && ns > 0.0, "{with_ack}: {ns}");
    }
    // A spec without the peer's address says so.
    let no_ip = (ns.name(1), "packet:ubpb");
    let e = rate::packet_link_half_trip_ns(a, no_ip, false, std::time::Duration::from_millis(20)).unwrap_err();
    assert!(e.contains("ip="), "{e}");
}
