//! `uroce dump --html`: one self-contained page, loaded in a real headless
//! browser (Debian's chromium, which scripts/install-deps installs): it
//! renders with no script error, its arrows and notes are in the DOM, a
//! click shows a packet's explanation and a filter hides what it should
//! (the page's own `#selftest`), a screenshot is not blank, and nothing in
//! it points outside the file.

mod common;

use common::uroce;
use std::path::{Path, PathBuf};
use std::process::Command;
use uroce_verbs::TestNet;

fn capture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/captures").join(name)
}

/// A directory of this test's own.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("uroce-html-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn html_of(pcap: &Path, page: &Path) -> String {
    let out = uroce().args(["dump", "--html"]).arg(page).arg(pcap).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("ladder written to {}", page.display())));
    std::fs::read_to_string(page).unwrap()
}

/// Nothing the browser would fetch: no URL but the SVG namespace, no
/// source or link attribute, no CSS import or external url().
fn assert_self_contained(html: &str) {
    let outside = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for needle in ["http://", "https://", "src=", "href=", "@import", "//cdn", "url(http"] {
        assert!(!outside.contains(needle), "the page points outside itself: {needle}");
    }
    assert!(!html.contains("url(") || html.matches("url(").count() == html.matches("url(#head)").count());
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|b| common::have(b))
}

/// Runs headless chromium with a profile of its own; its stdout.
fn browse(browser: &str, dir: &Path, args: &[&str]) -> String {
    let out = Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{browser} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The share of a PNG's pixels unlike its top-left one.
fn non_background(png_path: &Path) -> f64 {
    let decoder = png::Decoder::new(std::fs::File::open(png_path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let bytes = &buf[..info.buffer_size()];
    let background = &bytes[..px];
    let pixels = bytes.chunks(px);
    let total = pixels.len();
    bytes.chunks(px).filter(|p| *p != background).count() as f64 / total as f64
}

fn check_in_browser(page: &Path, dir: &Path, rows: usize, notes: usize) {
    let Some(browser) = chromium() else {
        println!(
            "skipped: no chromium (scripts/install-deps installs it as root): the page was checked without a browser"
        );
        return;
    };
    let url = format!("file://{}#selftest", page.display());
    let dom = browse(browser, dir, &["--dump-dom", &url]);
    let expected = format!("selftest: ok ({rows} rows, {notes} notes)");
    assert!(dom.contains(&expected), "expected {expected:?} in the page after its script ran");
    assert!(
        dom.contains("<span id=\"errors\"></span>"),
        "a script error: {}",
        dom.lines().find(|l| l.contains("errors")).unwrap_or("")
    );
    assert_eq!(dom.matches("<g class=\"row ").count(), rows);
    let shot = dir.join("shot.png");
    let _ = browse(browser, dir, &["--window-size=1200,800", &format!("--screenshot={}", shot.display()), &url]);
    let drawn = non_background(&shot);
    assert!(drawn > 0.01, "the screenshot is blank ({:.4} of its pixels drawn)", drawn);
}

#[test]
fn the_page_of_rping_renders_and_answers_a_click() {
    let dir = scratch("rping");
    let page = dir.join("rping.html");
    let html = html_of(&capture("rdma_cm_rping.pcap"), &page);
    assert_self_contained(&html);
    assert_eq!(html.matches("<g class=\"row ").count(), 65);
    assert!(html.contains("CM ConnectRequest") && html.contains("198.18.0.12"));
    // Each row's explanation is the -V text of its packet.
    assert!(html.contains("Frame 1 at 0.000000"));
    check_in_browser(&page, &dir, 65, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_page_of_a_lossy_run_shows_its_notes() {
    let net = TestNet::new();
    let dir = scratch("loss");
    let pcap = dir.join("loss.pcap");
    let args = ["perf", "write_bw", "--loopback", "-d", &net.udp(1), "-n", "30", "-s", "8192", "--seed", "11"];
    let out = uroce().args(args).args(["--loss", "0.1", "--pcap", pcap.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = dir.join("loss.html");
    let html = html_of(&dir.join("loss-client.pcap"), &page);
    assert_self_contained(&html);
    let (rows, notes) = (html.matches("<g class=\"row ").count(), html.matches("<text class=\"note\"").count());
    assert!(notes > 0 && html.contains("go-back-N after NAK PSN sequence error"));
    check_in_browser(&page, &dir, rows, notes);
    let _ = std::fs::remove_dir_all(&dir);
}
