//! Capture middleware: every frame a link sends or receives, written to a pcap
//! file Wireshark and `uroce dump` read. A raw link's frames are Ethernet (ARP
//! and neighbour discovery included); a udp link's are the IP packets the kernel
//! sent and received (LINKTYPE_RAW), rebuilt from what was signed and what the
//! kernel reported. Capture sees the wire, so it sits under any impairment.

use super::{Direction, Link, RxBatch, TxDatagram};
use crate::pcap::{LinkType, PcapWriter};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Which directions to capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureMode {
    Both,
    RxOnly,
    TxOnly,
}

/// The pcap writer, shared with the sink the link calls.
type SharedPcapWriter<W> = Arc<Mutex<Option<PcapWriter<W>>>>;

/// A link whose frames are written to a pcap stream.
pub struct Capture<L: Link, W: Write + Send + 'static = BufWriter<File>> {
    inner: L,
    writer: SharedPcapWriter<W>,
    errors: Arc<Mutex<Option<io::Error>>>,
}

impl<L: Link> Capture<L, BufWriter<File>> {
    /// Captures `inner`, whose frames are of type `frame_type`
    /// ([`super::LinkInfo::frame_type`]), into the file at `path` (created
    /// or truncated).
    pub fn to_file(inner: L, frame_type: LinkType, path: impl AsRef<Path>) -> io::Result<Self> {
        let f = BufWriter::new(File::create(path)?);
        Capture::new(inner, frame_type, f, CaptureMode::Both)
    }
}

impl<L: Link, W: Write + Send + 'static> Capture<L, W> {
    /// Captures `inner`, whose frames are of type `frame_type`
    /// ([`super::LinkInfo::frame_type`]), into `out`.
    pub fn new(mut inner: L, frame_type: LinkType, out: W, mode: CaptureMode) -> io::Result<Self> {
        let writer: SharedPcapWriter<W> = Arc::new(Mutex::new(Some(PcapWriter::new(out, frame_type)?)));
        let errors = Arc::new(Mutex::new(None));
        let (w, errs) = (writer.clone(), errors.clone());
        inner.set_frame_sink(Some(Box::new(move |dir, frame| {
            let wanted = match mode {
                CaptureMode::Both => true,
                CaptureMode::RxOnly => dir == Direction::Rx,
                CaptureMode::TxOnly => dir == Direction::Tx,
            };
            if !wanted {
                return;
            }
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
            let mut guard = w.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(pw) = guard.as_mut() {
                if let Err(e) = pw.write(now, frame) {
                    // Keep the first error for `finish`; stop writing.
                    *guard = None;
                    errs.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                }
            }
        })));
        Ok(Capture { inner, writer, errors })
    }

    pub fn inner(&self) -> &L {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut L {
        &mut self.inner
    }

    /// Flushes what was captured so far.
    pub fn flush(&mut self) -> io::Result<()> {
        let mut g = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        match g.as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }

    /// Stops capturing and returns the link and the output stream (or the
    /// first write error).
    pub fn finish(mut self) -> io::Result<(L, W)> {
        self.inner.set_frame_sink(None);
        if let Some(e) = self.errors.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(e);
        }
        let w = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        match w {
            Some(mut w) => {
                w.flush()?;
                Ok((self.inner, w.into_inner()))
            }
            None => Err(io::Error::other("capture stopped")),
        }
    }
}

impl<L: Link, W: Write + Send + 'static> Link for Capture<L, W> {
    super::pass_to_inner!();
    fn send(&mut self, batch: &[TxDatagram<'_>]) -> io::Result<usize> {
        self.inner.send(batch)
    }
    fn recv(&mut self, timeout: Duration, batch: &mut RxBatch) -> io::Result<usize> {
        self.inner.recv(timeout, batch)
    }
    fn next_due(&self) -> Option<std::time::Instant> {
        self.inner.next_due()
    }
}
