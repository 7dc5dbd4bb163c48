//! `uroce dump`: one line per RoCEv2 packet (or every field with `-V`), the ICRC
//! verdict of each, and a closing summary line.

mod cm;
pub mod ladder;
mod line;
mod verbose;

use clap::Args;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uroce_stack::frame::{FrameError, ParsedFrame};
use uroce_stack::live::LiveCapture;
use uroce_stack::pcap::{LinkType, PcapReader, PcapWriter};
use uroce_transport::engine::{marked_authenticated, sealed_parts, Sealed};
use uroce_transport::icrc;
use uroce_transport::wire::{RocePacket, RoceRepr};

#[derive(Args, Debug, Clone, Default)]
pub struct DumpArgs {
    /// A pcap file to read (tcpdump -w, uroce --pcap).
    #[arg(value_name = "FILE.pcap", required_unless_present = "interface", conflicts_with = "interface")]
    pub file: Option<PathBuf>,
    /// Capture live from this interface instead (needs CAP_NET_RAW).
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    pub interface: Option<String>,
    /// Print every field of every header, explained.
    #[arg(short = 'V', long)]
    pub verbose: bool,
    /// Exit with status 1 if any ICRC is bad or any RoCEv2 frame is malformed.
    #[arg(long)]
    pub check: bool,
    /// Live: stop after this many RoCEv2 frames.
    #[arg(short = 'c', long = "count", value_name = "N")]
    pub count: Option<u64>,
    /// Live: stop after this many seconds.
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Live: also write every captured frame to this pcap file.
    #[arg(short = 'w', long = "write", value_name = "FILE.pcap", requires = "interface")]
    pub write: Option<PathBuf>,
    /// Draw the ladder (sequence) diagram: a column per endpoint, an arrow
    /// per packet, notes naming the protocol rule at work (live: drawn when
    /// the capture ends)
    #[arg(long, conflicts_with = "verbose")]
    pub ladder: bool,
    /// Write the ladder as one self-contained HTML page to FILE (zoom,
    /// filters, each packet explained on a click; works offline)
    #[arg(long, value_name = "FILE.html", conflicts_with = "verbose")]
    pub html: Option<PathBuf>,
    /// With --ladder or --html: one row per packet, runs of MIDDLE packets not folded
    #[arg(long)]
    pub unfold: bool,
    /// With --ladder: the width to fit (default: the terminal's, else 120)
    #[arg(long, value_name = "COLUMNS", requires = "ladder")]
    pub width: Option<usize>,
}

/// What one frame turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    NotRoce,
    IcrcOk,
    IcrcBad,
    /// Sealed by uroce's authenticated mode: its MAC stands in for the
    /// ICRC, which its sender left zero.
    Sealed,
    Malformed,
}

/// The counts of the closing line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub frames: u64,
    pub roce: u64,
    pub icrc_ok: u64,
    pub icrc_bad: u64,
    pub sealed: u64,
    pub malformed: u64,
}

impl Summary {
    pub fn add(&mut self, v: Verdict) {
        self.frames += 1;
        match v {
            Verdict::NotRoce => return,
            Verdict::IcrcOk => self.icrc_ok += 1,
            Verdict::IcrcBad => self.icrc_bad += 1,
            Verdict::Sealed => self.sealed += 1,
            Verdict::Malformed => self.malformed += 1,
        }
        self.roce += 1;
    }

    /// Whether `--check` passes.
    pub fn clean(&self) -> bool {
        self.icrc_bad == 0 && self.malformed == 0
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "{} frames, {} RoCEv2, {} ICRC ok, {} ICRC bad",
            self.frames, self.roce, self.icrc_ok, self.icrc_bad
        )?;
        if self.sealed > 0 {
            write!(f, ", {} sealed (MAC, no ICRC)", self.sealed)?;
        }
        write!(f, ", {} malformed", self.malformed)
    }
}

/// Decodes frames one at a time into text, keeping the summary.
pub struct Dumper {
    pub verbose: bool,
    pub summary: Summary,
    first: Option<Duration>,
    /// `--ladder`: the packets go here, and no line is printed per packet.
    pub ladder: Option<ladder::Ladder>,
}

/// A RoCEv2 frame taken apart, for the printers.
pub(crate) struct Decoded<'a> {
    pub frame: ParsedFrame<'a>,
    /// Without the authenticated mode's trailer, if sealed: its last four
    /// bytes, read as an ICRC by the parser, are the trailer's first four.
    pub packet: RocePacket<&'a [u8]>,
    pub repr: RoceRepr,
    pub icrc_carried: u32,
    pub icrc_expected: u32,
    /// A sealed packet's parts (its trailer: the nonce counter, the tag):
    /// a packet with the mark and a zero ICRC.
    pub sealed: Option<Sealed<'a>>,
}

impl Decoded<'_> {
    /// The ICRC's verdict: right, wrong, or absent (zero) on a packet that
    /// uroce's authenticated mode sealed, whose MAC stands in for it.
    pub fn icrc_verdict(&self) -> Verdict {
        if self.icrc_carried == self.icrc_expected {
            Verdict::IcrcOk
        } else if self.sealed.is_some() {
            Verdict::Sealed
        } else {
            Verdict::IcrcBad
        }
    }
}

impl Dumper {
    pub fn new(verbose: bool) -> Dumper {
        Dumper { verbose, summary: Summary::default(), first: None, ladder: None }
    }

    /// Decodes one captured frame, appends its text to `out` (nothing for a frame
    /// that is not RoCEv2) and counts it. Never panics, whatever the bytes.
    pub fn frame(&mut self, link: LinkType, time: Duration, data: &[u8], out: &mut String) -> Verdict {
        let first = *self.first.get_or_insert(time);
        if let Some(l) = self.ladder.as_mut() {
            let verdict = l.frame(link, time, data);
            self.summary.add(verdict);
            return verdict;
        }
        let rel = time.saturating_sub(first);
        let number = self.summary.frames + 1;
        let verdict = match decode(link, data) {
            Err(FrameError::NotRoce) => Verdict::NotRoce,
            Err(FrameError::Malformed(why)) => {
                let _ = writeln!(out, "{:>5} {} MALFORMED {why}", number, line::time(rel));
                Verdict::Malformed
            }
            Ok(Err((frame, why))) => {
                line::malformed(out, number, rel, &frame, why);
                if self.verbose {
                    verbose::frame_headers(out, &frame.repr, data.len());
                }
                Verdict::Malformed
            }
            Ok(Ok(d)) => {
                if self.verbose {
                    verbose::packet(out, number, rel, data.len(), &d);
                } else {
                    line::packet(out, number, rel, &d);
                }
                d.icrc_verdict()
            }
        };
        self.summary.add(verdict);
        verdict
    }
}

/// Frame errors are `Err`; a RoCEv2 frame whose transport headers are broken is
/// `Ok(Err(..))` so its addresses can still be shown.
#[allow(clippy::type_complexity)]
fn decode(link: LinkType, data: &[u8]) -> Result<Result<Decoded<'_>, (ParsedFrame<'_>, String)>, FrameError> {
    let frame = link.parse_frame(data)?;
    // A sealed packet is parsed without its trailer, as the peer's engine
    // parses it. Sealed means marked and with the zero ICRC uroce leaves
    // on what it seals: a marked packet with a real ICRC came from a
    // sender that set the reserved bit for its own reasons, and its last
    // bytes are payload.
    let roce = frame.roce;
    let icrc_carried = icrc::carried(roce).unwrap_or(0);
    let sealed = if marked_authenticated(roce) && icrc_carried == 0 { sealed_parts(roce) } else { None };
    let packet = match RocePacket::new_checked(sealed.map_or(roce, |s| s.packet)) {
        Ok(p) => p,
        Err(e) => return Ok(Err((frame, format!("transport headers {e}")))),
    };
    let repr = match RoceRepr::parse(&packet) {
        Ok(r) => r,
        Err(e) => return Ok(Err((frame, format!("transport headers {e}")))),
    };
    let icrc_expected = match icrc::compute(frame.ip_packet) {
        Ok(v) => v,
        Err(e) => return Ok(Err((frame, e.to_string()))),
    };
    Ok(Ok(Decoded { frame, packet, repr, icrc_carried, icrc_expected, sealed }))
}

/// Runs `uroce dump`; exit status 0, 1 (`--check` failed) or 2 (could not run).
pub fn run(args: &DumpArgs) -> ExitCode {
    let mut dumper = Dumper::new(args.verbose);
    if args.ladder || args.html.is_some() {
        dumper.ladder = Some(ladder::Ladder::new(args.html.is_some()));
    }
    let result = match (&args.file, &args.interface) {
        (Some(path), _) => dump_file(path, &mut dumper),
        (None, Some(iface)) => dump_live(iface, args, &mut dumper),
        (None, None) => Err("give a pcap file or -i IFACE".to_string()),
    };
    // The summary closes every run that read anything, even one cut short
    // (after the ladder, if drawn).
    if result.is_ok() || dumper.summary.frames > 0 {
        if let Some(l) = dumper.ladder.take() {
            if let Err(e) = draw(&l, args) {
                eprintln!("uroce dump: {e}");
                return ExitCode::from(2);
            }
        }
        let _ = writeln!(io::stdout().lock(), "{}", dumper.summary);
    }
    if let Err(e) = result {
        eprintln!("uroce dump: {e}");
        return ExitCode::from(2);
    }
    if args.check && !dumper.summary.clean() {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// `--ladder` to stdout, `--html` to its file.
fn draw(l: &ladder::Ladder, args: &DumpArgs) -> Result<(), String> {
    if args.ladder {
        let text = l.draw(args.unfold, ladder::Style::for_stdout(args.width));
        let _ = io::stdout().lock().write_all(text.as_bytes());
    }
    if let Some(path) = &args.html {
        let source = match (&args.file, &args.interface) {
            (Some(f), _) => f.file_name().map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into_owned()),
            (None, i) => format!("live on {}", i.as_deref().unwrap_or("?")),
        };
        std::fs::write(path, l.html(args.unfold, &source)).map_err(|e| format!("{}: {e}", path.display()))?;
        let _ = writeln!(io::stdout().lock(), "ladder written to {}", path.display());
    }
    Ok(())
}

/// Writes `text` to stdout; `false` once stdout is gone (e.g. `| head`).
fn emit(text: &mut String) -> bool {
    let ok = io::stdout().lock().write_all(text.as_bytes()).is_ok();
    text.clear();
    ok
}

fn dump_file(path: &PathBuf, dumper: &mut Dumper) -> Result<(), String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut reader = PcapReader::new(io::BufReader::new(file)).map_err(|e| format!("{}: {e}", path.display()))?;
    let link = reader.link_type();
    let mut text = String::new();
    while let Some(rec) = reader.next_record().map_err(|e| format!("{}: {e}", path.display()))? {
        dumper.frame(link, rec.time, &rec.data, &mut text);
        if !emit(&mut text) {
            return Ok(());
        }
    }
    Ok(())
}

fn dump_live(iface: &str, args: &DumpArgs, dumper: &mut Dumper) -> Result<(), String> {
    let mut cap = LiveCapture::open(iface).map_err(|e| e.to_string())?;
    let mut writer = match &args.write {
        Some(p) => {
            let f = std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?;
            Some(PcapWriter::new(io::BufWriter::new(f), LinkType::Ethernet).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    // Ctrl-C ends the capture like tcpdump's: the summary still prints.
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let _ = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed));
    let deadline = args.duration.map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    let mut text = String::new();
    loop {
        let counted = args.count.is_some_and(|c| dumper.summary.roce >= c);
        if counted || deadline.is_some_and(|d| Instant::now() >= d) || stop.load(Ordering::Relaxed) {
            break;
        }
        let Some((time, data)) = cap.next_frame(Duration::from_millis(100)).map_err(|e| e.to_string())? else {
            continue;
        };
        if let Some(w) = writer.as_mut() {
            w.write(time, data).map_err(|e| e.to_string())?;
        }
        dumper.frame(LinkType::Ethernet, time, data, &mut text);
        if !emit(&mut text) {
            break;
        }
    }
    if let Some(mut w) = writer {
        w.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Everything `dump` does with one frame, for fuzzers: the first byte picks the
/// link type and whether to print verbosely. Must never panic.
pub fn fuzz_one(data: &[u8]) {
    let Some((&select, frame)) = data.split_first() else { return };
    let links = [LinkType::Ethernet, LinkType::RawIp, LinkType::LinuxSll, LinkType::LinuxSll2];
    let mut dumper = Dumper::new(select & 0x80 != 0);
    let mut text = String::new();
    dumper.frame(links[usize::from(select) % links.len()], Duration::ZERO, frame, &mut text);
}
