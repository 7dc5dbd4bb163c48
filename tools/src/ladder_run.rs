//! `--ladder` on the tools: the run captures what it sends and receives
//! (to `--pcap`'s file, or to a temporary one), and when it ends its ladder
//! is printed after the usual output. A `--loopback` run's client capture
//! holds both ends' traffic. Short runs are drawn whole; long ones as their
//! first and last rows and every row near a loss, NAK or retry.

use crate::common::suffixed;
use crate::dump::ladder::{Ladder, Style};
use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;
use uroce_stack::pcap::PcapReader;

/// The capture a `--ladder` run draws from.
pub struct LadderRun {
    /// The file `--pcap` names (or the temporary one).
    pcap: PathBuf,
    /// A temporary capture, removed after drawing.
    temporary: bool,
    loopback: bool,
}

impl LadderRun {
    /// For a run with `--ladder`: makes sure it captures (setting `pcap` to
    /// a temporary file if none was asked for).
    pub fn prepare(ladder: bool, pcap: &mut Option<PathBuf>, loopback: bool) -> Option<LadderRun> {
        if !ladder {
            return None;
        }
        let temporary = pcap.is_none();
        let path = pcap.get_or_insert_with(|| {
            std::env::temp_dir().join(format!("uroce-ladder-{}-{}.pcap", std::process::id(), unique()))
        });
        Some(LadderRun { pcap: path.clone(), temporary, loopback })
    }

    /// After the run (whatever its outcome): its ladder on stdout.
    pub fn after(run: Option<LadderRun>, code: ExitCode) -> ExitCode {
        if let Some(r) = run {
            r.draw();
        }
        code
    }

    fn draw(self) {
        let files = if self.loopback {
            vec![suffixed(&self.pcap, "client"), suffixed(&self.pcap, "server")]
        } else {
            vec![self.pcap.clone()]
        };
        // A run that failed before its device opened captured nothing: its
        // own error said why.
        if !files[0].exists() {
            return;
        }
        match read(&files[0]) {
            Ok(ladder) => print!("{}", ladder.draw_excerpt(Style::for_stdout(None))),
            Err(e) => eprintln!("--ladder: {}: {e}", files[0].display()),
        }
        if self.temporary {
            files.iter().for_each(|f| {
                let _ = std::fs::remove_file(f);
            });
        }
    }
}

fn read(path: &PathBuf) -> Result<Ladder, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut reader = PcapReader::new(BufReader::new(file)).map_err(|e| e.to_string())?;
    let link = reader.link_type();
    let mut ladder = Ladder::new(false);
    while let Some(rec) = reader.next_record().map_err(|e| e.to_string())? {
        ladder.frame(link, rec.time, &rec.data);
    }
    Ok(ladder)
}

/// A number not used before in this process.
fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
