//! `--loopback`: both ends of a two-ended tool (pingpong, ud_pingpong, perf) in
//! one process, each on a device of its own.
//!
//! Both devices are opened, and checked to be two distinct addresses, before
//! either end starts, so a device that cannot be opened is the first and only
//! thing the user reads. Then each end runs on a thread of its own; the first
//! end that fails ends the run at once with its own error. An end that fails
//! only because the other went away (its TCP connection closed) is a symptom:
//! the other end's error, which caused it, is shown instead. Such failures are
//! noted where they happen ([`exchange_error`]), on the end's own thread, so
//! their text stays what the tool prints when it runs one end.

use crate::common::CommonArgs;
use clap::Args;
use std::cell::Cell;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::mpsc;
use std::time::Duration;
use uroce_stack::link::LinkInfo;
use uroce_verbs::{Context, Progress};

/// The flags of `--loopback`.
#[derive(Args, Debug, Clone, Default)]
pub struct LoopbackArgs {
    /// Run both ends in this process: the client on -d (default: the first free 127.0.0.x), the server on --server-dev
    #[arg(long)]
    pub loopback: bool,
    /// With --loopback: the server end's device (default: the udp address after the client's)
    #[arg(long, value_name = "DEV", requires = "loopback")]
    pub server_dev: Option<String>,
}

/// The two ends' device flags: the client's are `-d`'s, the server's are
/// `--server-dev` or the next udp loopback address, with a seed of its own
/// (or its QPNs and PSNs would be the client's). Impairments act on what each
/// end transmits, so every packet meets them once.
pub fn ends(common: &CommonArgs, args: &LoopbackArgs) -> Result<(CommonArgs, CommonArgs), String> {
    // Flags both ends share are checked once, before either device opens.
    common.impair()?;
    let seed = common.seed.map(|s| s.wrapping_add(1));
    let server_dev = match (&args.server_dev, &common.device) {
        (Some(dev), _) => Some(dev.clone()),
        (None, Some(dev)) => Some(next_udp(dev)?),
        (None, None) => None,
    };
    if let (Some(client), Some(server)) = (&common.device, &server_dev) {
        if client == server {
            return Err(format!(
                "--loopback: -d and --server-dev are both {client}: each end needs a device of its own (another address, or another interface)"
            ));
        }
    }
    Ok((common.clone(), CommonArgs { seed, device: server_dev, ..common.clone() }))
}

/// `udp:A.B.C.D[,opts]` -> `udp:A.B.C.(D+1)[,opts]`: the server's default
/// device beside a client's `-d`.
fn next_udp(dev: &str) -> Result<String, String> {
    let one_device = || {
        format!(
            "--loopback runs two ends, each on a device of its own, and -d {dev} is one: \
             give the server end its own with --server-dev DEV (another interface, or the same one with its own ,ip= and ,mac=), \
             or leave -d out to run both ends on udp loopback addresses"
        )
    };
    let rest = dev.strip_prefix("udp:").ok_or_else(one_device)?;
    let (ip, opts) = rest.split_once(',').map_or((rest, None), |(a, o)| (a, Some(o)));
    let ip: Ipv4Addr = ip.parse().map_err(|_| one_device())?;
    let o = ip.octets();
    let last = o[3].checked_add(1).filter(|&l| l < 255).ok_or_else(one_device)?;
    let next = Ipv4Addr::new(o[0], o[1], o[2], last);
    Ok(match opts {
        Some(o) => format!("udp:{next},{o}"),
        None => format!("udp:{next}"),
    })
}

/// Opens both ends' devices (the client's first, as it prints first), and
/// refuses two ends that would share an address. Errors name the end.
pub fn open_both(client: &CommonArgs, server: &CommonArgs, progress: Progress) -> Result<(Context, Context), String> {
    let client_ctx = client.open(progress, Some("client")).map_err(|e| format!("client: {e}"))?;
    let server_ctx = server.open(progress, Some("server")).map_err(|e| format!("server: {e}"))?;
    let (c, s) = (client_ctx.link_info(), server_ctx.link_info());
    if let Some(ip) = addresses(c).into_iter().find(|ip| addresses(s).contains(ip)) {
        return Err(format!(
            "--loopback: both ends have address {ip} ({} and {}): give each end its own address (on one interface, its own ,ip= and ,mac=) with -d and --server-dev",
            c.name, s.name
        ));
    }
    Ok((client_ctx, server_ctx))
}

/// The IP addresses a link answers to.
fn addresses(info: &LinkInfo) -> Vec<IpAddr> {
    info.ipv4.map(IpAddr::V4).into_iter().chain(info.ipv6.iter().copied().map(IpAddr::V6)).collect()
}

/// Which end of a `--loopback` run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Server,
    Client,
}

impl End {
    fn label(self) -> &'static str {
        match self {
            End::Server => "server",
            End::Client => "client",
        }
    }
}

thread_local! {
    /// Set on an end's thread when an exchange with its peer failed because
    /// the peer closed the connection or was not there (see [`exchange_error`]).
    static PEER_WENT_AWAY: Cell<bool> = const { Cell::new(false) };
}

/// The error text of a failed exchange with the peer, `what: e`. When `e` says
/// the peer closed or was not there, the failure is noted as a symptom on this
/// thread: in `--loopback` the other end's error is the cause.
pub fn exchange_error(what: &str, e: &io::Error) -> String {
    note_if_peer_gone(e);
    format!("{what}: {e}")
}

/// Whether `e` says the peer closed the connection or was not there; if so,
/// that is noted on this thread ([`note_peer_gone`]).
pub fn note_if_peer_gone(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    let gone = matches!(e.kind(), UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe | ConnectionRefused);
    if gone {
        note_peer_gone();
    }
    gone
}

/// Notes, on this thread, that the end running here fails because its peer
/// went away (see [`exchange_error`]).
pub fn note_peer_gone() {
    PEER_WENT_AWAY.with(|f| f.set(true));
}

/// Runs one end on this thread: its result, and whether a failure only says
/// that its peer went away.
fn run_end(end: impl FnOnce() -> Result<(), String>) -> (Result<(), String>, bool) {
    PEER_WENT_AWAY.with(|f| f.set(false));
    let r = end();
    let symptom = r.is_err() && PEER_WENT_AWAY.with(Cell::get);
    (r, symptom)
}

/// How long a symptom waits for the error of the end that went away: that end
/// has already closed its connection, so its result is on its way.
const CAUSE_GRACE: Duration = Duration::from_secs(5);

/// Runs the two ends on threads of their own and returns the outcome of the
/// run: `Ok` when both succeeded; otherwise the first error that is not a
/// symptom, prefixed with its end, returned the moment it is known (the other
/// end is left to the process's exit).
pub fn run_pair(
    server: impl FnOnce() -> Result<(), String> + Send + 'static,
    client: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    let to_server = tx.clone();
    std::thread::spawn(move || to_server.send((End::Server, run_end(server))));
    std::thread::spawn(move || tx.send((End::Client, run_end(client))));
    let (first_end, (first, symptom)) = rx.recv().map_err(|_| "both ends' threads panicked".to_string())?;
    let labelled = |end: End, e: String| format!("{}: {e}", end.label());
    match first {
        Ok(()) => match rx.recv() {
            Ok((end, (r, _))) => r.map_err(|e| labelled(end, e)),
            Err(_) => Err("the other end's thread panicked".into()),
        },
        Err(e) if symptom => match rx.recv_timeout(CAUSE_GRACE) {
            Ok((end, (Err(cause), _))) => Err(labelled(end, cause)),
            _ => Err(labelled(first_end, e)),
        },
        Err(e) => Err(labelled(first_end, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn common(dev: Option<&str>) -> CommonArgs {
        CommonArgs { device: dev.map(str::to_string), seed: Some(7), ..CommonArgs::default() }
    }

    fn lb(server_dev: Option<&str>) -> LoopbackArgs {
        LoopbackArgs { loopback: true, server_dev: server_dev.map(str::to_string) }
    }

    #[test]
    fn the_server_takes_the_next_udp_address_or_its_own_device() {
        let (c, s) = ends(&common(Some("udp:127.0.9.1,mtu=1024")), &lb(None)).unwrap();
        assert_eq!(c.device.as_deref(), Some("udp:127.0.9.1,mtu=1024"));
        assert_eq!(s.device.as_deref(), Some("udp:127.0.9.2,mtu=1024"));
        assert_eq!((c.seed, s.seed), (Some(7), Some(8)));
        let (_, s) = ends(&common(Some("packet:veth-a")), &lb(Some("packet:veth-b"))).unwrap();
        assert_eq!(s.device.as_deref(), Some("packet:veth-b"));
        let (c, s) = ends(&common(None), &lb(None)).unwrap();
        assert_eq!((c.device, s.device), (None, None));
    }

    #[test]
    fn one_device_for_two_ends_is_refused() {
        for dev in ["packet:lo", "tap:t0,ip=10.0.0.1/24", "udp:[::1]", "udp:127.0.0.254"] {
            let e = ends(&common(Some(dev)), &lb(None)).unwrap_err();
            assert!(e.contains(&format!("-d {dev} is one")) && e.contains("--server-dev"), "{e}");
        }
        let e = ends(&common(Some("packet:lo")), &lb(Some("packet:lo"))).unwrap_err();
        assert!(e.contains("both packet:lo"), "{e}");
    }

    #[test]
    fn the_cause_is_reported_not_the_symptom() {
        // The server fails; the client, which saw the server's connection
        // close first, reports a symptom: the server's error wins.
        let (gate_tx, gate_rx) = mpsc::channel::<()>();
        let r = run_pair(
            move || {
                gate_rx.recv().ok();
                Err("cannot open the device".into())
            },
            move || {
                let e = io::Error::from(io::ErrorKind::ConnectionReset);
                let symptom = exchange_error("Couldn't read remote address", &e);
                gate_tx.send(()).ok();
                Err(symptom)
            },
        );
        assert_eq!(r, Err("server: cannot open the device".into()));
    }

    #[test]
    fn a_failing_end_stops_the_run_at_once() {
        // The client would wait for ever; the server's error ends the run.
        let (_hold, never) = mpsc::channel::<()>();
        let r = run_pair(
            || Err("size too large".into()),
            move || {
                never.recv().ok();
                Ok(())
            },
        );
        assert_eq!(r, Err("server: size too large".into()));
        assert_eq!(run_pair(|| Ok(()), || Err("bad".into())), Err("client: bad".into()));
        assert_eq!(run_pair(|| Ok(()), || Ok(())), Ok(()));
    }
}
