//! `uroce exec [-d DEV] -- PROGRAM [ARGS...]`: runs an unmodified RDMA
//! program over uroce's drop-in libibverbs (installed by `bash
//! scripts/dropin`), with the library first in its search path and the
//! device configured.

use clap::Args;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Where `uroce exec` looks for the drop-in library when
/// [`DROPIN_DIR_ENV`] does not say: `target/dropin` beside the `target/`
/// this `uroce` was built in.
pub const DROPIN_DIR_ENV: &str = "UROCE_DROPIN_DIR";

/// The drop-in's device list (`uroce_ibverbs::devices::DEVICES_ENV`; the
/// tools do not link the drop-in, whose symbols are C's).
const DEVICES_ENV: &str = "UROCE_DEVICES";

/// Flags of `uroce exec`.
#[derive(Args, Debug)]
pub struct ExecArgs {
    /// The device the program's libibverbs lists (a uroce link spec: udp:IP,
    /// packet:IFACE[,ip=..][,mac=..], tap:NAME,ip=IP/LEN; named uroce0).
    /// Default: udp on the first free loopback address.
    #[arg(short = 'd', long = "ib-dev")]
    pub device: Option<String>,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub program: Vec<String>,
}

/// The directory holding libibverbs.so.1 (the drop-in), or why there is none.
fn dropin_dir() -> Result<PathBuf, String> {
    let dir = match std::env::var_os(DROPIN_DIR_ENV) {
        Some(d) => PathBuf::from(d),
        None => {
            let exe = std::env::current_exe().map_err(|e| format!("cannot find the uroce binary: {e}"))?;
            // target/<profile>/uroce -> target/dropin
            exe.parent().and_then(Path::parent).map(|t| t.join("dropin")).unwrap_or_default()
        }
    };
    if dir.join("libibverbs.so.1").exists() {
        Ok(dir)
    } else {
        Err(format!(
            "no drop-in libibverbs in {}: run `bash scripts/dropin` first (or set {DROPIN_DIR_ENV} to where it is)",
            dir.display()
        ))
    }
}

/// Replaces this process with the program; returns only on failure.
pub fn run(args: &ExecArgs) -> ExitCode {
    let dir = match dropin_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("uroce exec: {e}");
            return ExitCode::from(2);
        }
    };
    let mut path = dir.as_os_str().to_owned();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|o| !o.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mut cmd = Command::new(&args.program[0]);
    cmd.args(&args.program[1..]).env("LD_LIBRARY_PATH", path);
    if let Some(dev) = &args.device {
        cmd.env(DEVICES_ENV, dev);
    }
    let err = cmd.exec();
    eprintln!("uroce exec: cannot run {}: {err}", args.program[0]);
    ExitCode::from(127)
}
