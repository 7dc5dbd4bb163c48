//! `uroce dump --ladder`: the diagram's content on the kernel rxe's captures
//! and on a seeded run that loses packets: columns, arrows in time order,
//! folding, the notes at the right PSN, no colour when piped.

mod common;

use common::uroce;
use std::path::{Path, PathBuf};
use uroce_stack::pcap::PcapReader;
use uroce_tools::dump::ladder::{Kind, Ladder, Row, Style};
use uroce_verbs::TestNet;

fn capture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/captures").join(name)
}

fn ladder(args: &[&str]) -> String {
    let out = uroce().args(["dump", "--ladder", "--width", "120"]).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A row of the diagram: its time, its arrow's line, and the whole text of
/// the row (the arrow's line and the lines under it: a label too long for
/// its arrow, notes), spaces squeezed.
struct TextRow<'a> {
    time: f64,
    arrow: &'a str,
    text: String,
}

/// The rows of the diagram, after the three header lines.
fn rows(text: &str) -> Vec<TextRow<'_>> {
    let mut rows: Vec<TextRow> = Vec::new();
    for line in text.lines().skip(3) {
        let squeezed = line.split([' ', '|']).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ");
        match line.get(..12).and_then(|t| t.trim().parse::<f64>().ok()) {
            Some(time) => rows.push(TextRow { time, arrow: line, text: squeezed }),
            None => {
                if let Some(r) = rows.last_mut() {
                    r.text.push(' ');
                    r.text.push_str(&squeezed);
                }
            }
        }
    }
    rows
}

fn count_rows(text: &str) -> usize {
    rows(text).len()
}

/// The column (character offset) of each vertical line in the header.
fn verticals(text: &str) -> Vec<usize> {
    text.lines().nth(2).unwrap().match_indices('|').map(|(i, _)| i).collect()
}

#[test]
fn the_ladder_of_rping_has_a_column_per_endpoint_and_arrows_in_time_order() {
    let text = ladder(&[capture("rdma_cm_rping.pcap").to_str().unwrap()]);
    assert!(!text.contains('\x1b'), "colour when piped:\n{text}");
    let head: Vec<&str> = text.lines().take(2).collect();
    for title in ["198.18.0.11", "198.18.0.12", "QP 0x000001", "QP 0x00002d"] {
        assert!(head.iter().any(|l| l.contains(title)), "no {title} in\n{}", head.join("\n"));
    }
    let cols = verticals(&text);
    assert_eq!(cols.len(), 4, "QP1 at each end, the RC QP at each end");
    let rows = rows(&text);
    assert_eq!(rows.len(), 65, "one row a packet (nothing to fold here)");
    assert!(rows.windows(2).all(|w| w[0].time <= w[1].time), "time flows down");
    // The CM exchange first, between the QP1 columns: right, left, right.
    for (row, (cm, head)) in
        rows.iter().zip([("CM ConnectRequest", b'>'), ("CM ConnectReply", b'<'), ("CM ReadyToUse", b'>')])
    {
        assert!(row.text.contains(cm), "{}", row.text);
        let a = row.arrow.as_bytes();
        assert_eq!((a[cols[0]], a[cols[1]]), (b'|', b'|'), "{}", row.arrow);
        assert_eq!(if head == b'>' { a[cols[1] - 1] } else { a[cols[0] + 1] }, head, "{}", row.arrow);
    }
    // The client's first SEND goes right, from its QP to the server's.
    let send = rows.iter().find(|r| r.text.contains("SEND_ONLY PSN 6467698")).unwrap().arrow;
    assert_eq!(send.as_bytes()[cols[2]], b'|');
    assert_eq!(send.as_bytes()[cols[3] - 1], b'>');
    assert!(text.ends_with("65 frames, 65 RoCEv2, 65 ICRC ok, 0 ICRC bad, 0 malformed\n"));
}

#[test]
fn segmented_writes_fold_and_each_ack_says_what_it_covers() {
    let file = capture("rdma_write.pcap");
    let text = ladder(&[file.to_str().unwrap()]);
    let rows = rows(&text);
    let middle = rows.iter().position(|r| r.text.contains("WRITE_MIDDLE x2 PSN 784307..784308")).expect("folded");
    assert!(rows[middle - 1].text.contains("WRITE_FIRST PSN 784306"));
    assert!(rows[middle + 1].text.contains("WRITE_LAST PSN 784309"));
    let ack = rows.iter().find(|r| r.text.contains("ACK PSN 784309 credits=31 MSN=1")).expect("the first ACK");
    assert!(ack.text.contains("^ coalesced ACK: acknowledges PSN 784306 to 784309, 4 packets"), "{}", ack.text);
    // Two connections (write_bw, then write_lat) between the same hosts.
    assert_eq!(verticals(&text).len(), 4);

    let unfolded = ladder(&["--unfold", file.to_str().unwrap()]);
    assert!(!unfolded.contains(" x2 "));
    assert_eq!(count_rows(&unfolded), 280);
    assert!(rows.len() < 280);
}

#[test]
fn a_bad_icrc_is_named_where_it_happened() {
    let text = ladder(&[capture("host_probe_afpacket.pcap").to_str().unwrap()]);
    let rows = rows(&text);
    let bad: Vec<&TextRow> = rows.iter().filter(|r| r.text.contains("^ ICRC bad: the receiver drops it")).collect();
    assert_eq!(bad.len(), 1);
    assert!(bad[0].text.starts_with("0.2") && bad[0].text.contains("SEND_ONLY PSN 1193046"), "{}", bad[0].text);
}

/// The ladder's rows of a pcap file, one a packet.
fn rows_of(path: &Path) -> Vec<Row> {
    let mut reader = PcapReader::new(std::io::BufReader::new(std::fs::File::open(path).unwrap())).unwrap();
    let link = reader.link_type();
    let mut ladder = Ladder::default();
    while let Some(rec) = reader.next_record().unwrap() {
        ladder.frame(link, rec.time, &rec.data);
    }
    ladder.rows(true).1
}

/// A seeded WRITE run on a link that drops 10% of what it sends (the
/// capture shows what passed): after every PSN sequence error NAK the
/// requester resends from the NAK's PSN on, in order, up to the last it
/// had sent (go-back-N) unless another NAK stops the burst; the first
/// resend is named as such, and a packet lost again in the burst is named
/// where it is missing.
#[test]
fn a_lost_packet_shows_the_nak_and_exactly_the_go_back_n_resends() {
    let net = TestNet::new();
    let dir = std::env::temp_dir().join(format!("uroce-ladder-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("loss.pcap");
    let args = ["perf", "write_bw", "--loopback", "-d", &net.udp(1), "-n", "30", "-s", "8192", "--seed", "11"];
    let out = uroce().args(args).args(["--loss", "0.1", "--pcap", pcap.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = rows_of(&dir.join("loss-client.pcap"));
    let is_nak = |r: &Row| r.notes.iter().any(|n| n.starts_with("NAK PSN sequence error"));
    let naks: Vec<usize> = (0..rows.len()).filter(|&i| is_nak(&rows[i])).collect();
    assert!(!naks.is_empty(), "seed 11 loses a packet of a message, so a NAK");
    for &i in &naks {
        let (requester, nak_psn) = (rows[i].to, rows[i].first.psn);
        let is_request = |r: &Row| r.from == requester && matches!(r.kind, Kind::Request | Kind::Resend);
        let last_before = rows[..i].iter().filter(|r| is_request(r)).map(|r| r.first.psn).max().unwrap();
        // The burst: the requester's packets up to the next NAK, at or
        // below the last PSN sent before this one.
        let next_nak = rows[i + 1..].iter().position(is_nak).map_or(rows.len(), |k| i + 1 + k);
        let mut burst: Vec<&Row> =
            rows[i + 1..next_nak].iter().filter(|r| is_request(r) && r.first.psn <= last_before).collect();
        // A lost NAK or ACK makes the requester time out and start over:
        // the burst ends there, and the new start says why.
        let restart = burst.windows(2).position(|w| w[1].first.psn <= w[0].first.psn);
        if let Some(k) = restart {
            let notes = &burst[k + 1].notes;
            assert!(notes.iter().any(|n| n.contains("again:")), "a restart is named: {notes:?}");
            burst.truncate(k + 1);
        }
        assert_eq!(burst[0].first.psn, nak_psn, "go-back-N starts at the NAK's PSN");
        assert!(burst[0].notes[0].contains(&format!("PSN {nak_psn} again: go-back-N after NAK PSN sequence error")));
        assert!(burst.iter().all(|r| r.kind == Kind::Resend));
        for pair in burst.windows(2) {
            let (a, b) = (pair[0].first.psn, pair[1].first.psn);
            assert!(b > a, "in order: {a} then {b}");
            let gap_named = pair[1].notes.iter().any(|n| n.contains(&format!("from PSN {} lost again", a + 1)));
            assert_eq!(b == a + 1, !gap_named, "a packet missing from the burst is named, only then ({a} -> {b})");
        }
        if next_nak == rows.len() && restart.is_none() {
            assert_eq!(burst.last().unwrap().first.psn, last_before, "a burst no NAK stops reaches the last PSN sent");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a terminal: colour by kind (ACKs green, NAKs red, resends yellow),
/// and every line within the width, long labels and notes wrapped.
#[test]
fn colour_and_width_as_asked() {
    let mut reader =
        PcapReader::new(std::io::BufReader::new(std::fs::File::open(capture("rdma_cm_rping.pcap")).unwrap())).unwrap();
    let link = reader.link_type();
    let mut l = Ladder::default();
    while let Some(rec) = reader.next_record().unwrap() {
        l.frame(link, rec.time, &rec.data);
    }
    let coloured = l.draw(false, Style { width: 120, colour: true });
    assert!(coloured.contains("\x1b[32m") && coloured.contains("\x1b[35m"), "ACKs green, CM magenta");
    let plain = l.draw(false, Style { width: 90, colour: false });
    assert!(!plain.contains('\x1b'));
    let widest = plain.lines().map(str::len).max().unwrap();
    assert!(widest <= 90, "a line of {widest} characters in 90:\n{plain}");
}

/// `--ladder` on the tools: the run's ladder after the usual output, both
/// ends of a `--loopback` run; a long run as its excerpt.
#[test]
fn the_tools_draw_what_they_did() {
    let net = TestNet::new();
    let dev = net.udp(1);
    for (tool, extra, arrows) in [
        ("pingpong", &["-s", "2048"][..], &["SEND_FIRST PSN", "ACK PSN"][..]),
        ("ud_pingpong", &["-s", "512"][..], &["SEND_ONLY PSN", "DETH qkey=0x11111111"][..]),
    ] {
        let out = uroce().args([tool, "--loopback", "-d", &dev, "-n", "2", "--ladder"]).args(extra).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{tool}: {}", String::from_utf8_lossy(&out.stderr));
        // The tool's own output, then the ladder: its columns, its arrows.
        let (own, ladder) = text.split_at(text.find("QP 0x").unwrap_or_else(|| panic!("{tool}: no ladder:\n{text}")));
        assert!(own.contains("iters in") && arrows.iter().all(|a| ladder.contains(a)), "{tool}:\n{text}");
    }
    // A long run with losses: the excerpt keeps the NAKs and says what it left out.
    let args =
        ["perf", "write_bw", "--loopback", "-d", &dev, "-n", "300", "-s", "65536", "--seed", "3", "--loss", "0.01"];
    let out = uroce().args(args).arg("--ladder").env("COLUMNS", "110").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("BW average"), "perftest's table first");
    assert!(text.contains("without a loss, NAK or retry left out"), "{text}");
    assert!(text.contains("go-back-N") || text.contains("again: resent after"), "{text}");
    assert!(text.lines().all(|l| l.len() <= 110 || !l.contains('|')), "within COLUMNS");
}
