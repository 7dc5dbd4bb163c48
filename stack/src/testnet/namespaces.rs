//! Network namespaces for tests that need a real interface (a veth, a
//! bridge, a TAP): made by `ip netns add`, deleted on drop, and named after
//! the test's tag, process and a count so that tests of one binary, and
//! test binaries run in parallel, never share one. Root only (CI runs as
//! root); a test without root skips before it asks for one.

use crate::link::netns::NetnsGuard;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `count` network namespaces made for one test, each with its loopback up,
/// deleted (with everything in them) when this drops.
#[derive(Debug)]
pub struct Namespaces {
    names: Vec<String>,
}

impl Namespaces {
    /// Namespaces `uroce-<tag>-<pid>-<n>-<i>` for `i` in `0..count`, `n`
    /// counting the sets this process made (two tests of one binary may
    /// run at once with the same tag). A leftover of the same name (a test
    /// killed before its drop) is deleted first. Panics with `ip`'s message
    /// when one cannot be made.
    pub fn new(tag: &str, count: usize) -> Namespaces {
        Namespaces::try_new(tag, count).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Namespaces::new`], but says why instead of panicking (for a
    /// test that skips when `ip` is missing or refuses).
    pub fn try_new(tag: &str, count: usize) -> Result<Namespaces, String> {
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let (pid, n) = (std::process::id(), MADE.fetch_add(1, Ordering::Relaxed));
        let mut ns = Namespaces { names: Vec::new() };
        for i in 0..count {
            let name = format!("uroce-{tag}-{pid}-{n}-{i}");
            let _ = Command::new("ip").args(["netns", "del", &name]).output();
            try_ip(&["netns", "add", &name])?;
            ns.names.push(name);
            ns.try_ip_in(i, &["link", "set", "lo", "up"])?;
        }
        Ok(ns)
    }

    /// The name of namespace `i`.
    pub fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// `ip -n NAME ARGS` in namespace `i`; panics with `ip`'s message if it
    /// fails.
    pub fn ip(&self, i: usize, args: &[&str]) {
        self.try_ip_in(i, args).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Runs `args` (a program and its arguments) in namespace `i`, through
    /// `ip netns exec`; panics if it fails.
    pub fn exec(&self, i: usize, args: &[&str]) {
        let out = Command::new("ip").args(["netns", "exec", self.name(i)]).args(args).output();
        check(&format!("ip netns exec {} {}", self.name(i), args.join(" ")), out).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Starts `args` in namespace `i`, its output piped.
    pub fn spawn(&self, i: usize, args: &[&str]) -> Child {
        Command::new("ip")
            .args(["netns", "exec", self.name(i)])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("ip netns exec {} {args:?}: {e}", self.name(i)))
    }

    /// A veth pair: `a` in namespace `i`, `b` in namespace `j` (the same
    /// one if `i == j`), both up.
    pub fn veth(&self, i: usize, a: &str, j: usize, b: &str) {
        let args = ["link", "add", a, "netns", self.name(i), "type", "veth", "peer", "name", b, "netns", self.name(j)];
        try_ip(&args).unwrap_or_else(|e| panic!("{e}"));
        self.ip(i, &["link", "set", a, "up"]);
        self.ip(j, &["link", "set", b, "up"]);
    }

    /// Puts this thread in namespace `i` until the guard drops: sockets and
    /// threads it opens meanwhile stay in the namespace.
    pub fn enter(&self, i: usize) -> NetnsGuard {
        NetnsGuard::enter(self.name(i)).unwrap_or_else(|e| panic!("enter {}: {e}", self.name(i)))
    }

    fn try_ip_in(&self, i: usize, args: &[&str]) -> Result<(), String> {
        let full: Vec<&str> = ["-n", self.name(i)].into_iter().chain(args.iter().copied()).collect();
        try_ip(&full)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

fn try_ip(args: &[&str]) -> Result<(), String> {
    check(&format!("ip {}", args.join(" ")), Command::new("ip").args(args).output())
}

/// `Ok` if the command `what` ran and succeeded; otherwise why not.
fn check(what: &str, out: std::io::Result<std::process::Output>) -> Result<(), String> {
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("`{what}` failed: {}", String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Err(format!("`{what}` could not run: {e} (is iproute2 installed?)")),
    }
}
