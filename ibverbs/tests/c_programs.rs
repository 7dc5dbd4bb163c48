//! The project's own C programs (`tests/c/*.c`), compiled with gcc against
//! rdma-core's installed headers, linked against the drop-in library as
//! `-libverbs` and run over it: each checks results and errno of the verbs
//! it calls, the bad inputs included, and prints `ok`.

mod common;
use common::built_library;
use std::path::Path;
use std::process::Command;
use uroce_stack::testnet::TestNet;

/// Compiles `tests/c/NAME.c` against the drop-in and runs it with one
/// device on a loopback address of its own; its output.
fn run_c_program(name: &str) -> Option<String> {
    let net = TestNet::new();
    run_c_program_with(name, &net.udp(1), &[], &[])
}

/// Compiles `tests/c/NAME.c` against the drop-in (`-libverbs -lrdmacm`) and
/// runs it with `args`, the devices `UROCE_DEVICES=devices` and `env`; its
/// output (stdout, then stderr).
fn run_c_program_with(name: &str, devices: &str, args: &[&str], env: &[(&str, &str)]) -> Option<String> {
    let built = build_c_program(name)?;
    let run = built.command(devices).args(args).envs(env.iter().copied()).output().expect("run the C program");
    let text = String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{name}: {text}");
    Some(text)
}

/// A C program built against the drop-in, in a directory of its own that
/// goes when this does.
struct BuiltProgram {
    dir: std::path::PathBuf,
    exe: std::path::PathBuf,
}

impl BuiltProgram {
    /// A command that runs the program over the drop-in with `devices`.
    fn command(&self, devices: &str) -> Command {
        let mut c = Command::new(&self.exe);
        c.env("LD_LIBRARY_PATH", &self.dir).env("UROCE_DEVICES", devices);
        c
    }
}

impl Drop for BuiltProgram {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Compiles `tests/c/NAME.c` against the drop-in; `None` (said) without gcc
/// or rdma-core's headers.
fn build_c_program(name: &str) -> Option<BuiltProgram> {
    let gcc = Command::new("gcc").arg("--version").output().is_ok_and(|o| o.status.success());
    let headers = ["/usr/include/infiniband/verbs.h", "/usr/include/rdma/rdma_cma.h"];
    if !gcc || !headers.iter().all(|h| Path::new(h).exists()) {
        println!(
            "SKIP: needs gcc and rdma-core's headers (libibverbs-dev, librdmacm-dev; bash scripts/install-deps as root)"
        );
        return None;
    }
    // One directory a run: two tests may run one program at once.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let nth = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("uroce-c-{name}-{}-{nth}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let built = BuiltProgram { exe: dir.join(name), dir };
    std::fs::copy(built_library(), built.dir.join("libibverbs.so.1")).unwrap();
    for link in ["libibverbs.so", "librdmacm.so"] {
        std::os::unix::fs::symlink("libibverbs.so.1", built.dir.join(link)).unwrap();
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c").join(format!("{name}.c"));
    let cc = Command::new("gcc")
        .args(["-Wall", "-Werror", "-o"])
        .arg(&built.exe)
        .arg(&src)
        .arg(format!("-L{}", built.dir.display()))
        .args(["-lrdmacm", "-libverbs"])
        .output()
        .expect("gcc");
    assert!(cc.status.success(), "gcc {name}.c: {}", String::from_utf8_lossy(&cc.stderr));
    Some(built)
}

#[test]
fn every_other_verb_answers_as_rdma_core() {
    if let Some(out) = run_c_program("every_verb") {
        assert_eq!(out.trim(), "ok");
    }
}

/// `ibv_get_sysfs_path` follows `$SYSFS_PATH`, its trailing slashes
/// removed, as rdma-core's does (every_verb.c checks it against
/// `EXPECT_SYSFS_PATH`; without the variable it answers `/sys`).
#[test]
fn the_sysfs_path_follows_the_environment_as_in_rdma_core() {
    let net = TestNet::new();
    let env = [("SYSFS_PATH", "/tmp/uroce-sysfs///"), ("EXPECT_SYSFS_PATH", "/tmp/uroce-sysfs")];
    if let Some(out) = run_c_program_with("every_verb", &net.udp(1), &[], &env) {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn every_other_rdma_cm_call_answers_as_librdmacm() {
    let net = TestNet::new();
    let devices = format!("{} {}", net.udp(1), net.udp(2));
    let (server, client) = (net.ip(1).to_string(), net.ip(2).to_string());
    if let Some(out) = run_c_program_with("every_cm", &devices, &[&server, &client], &[]) {
        assert_eq!(out.trim(), "ok");
    }
}

/// The exit handler's DREQ: a connected child that exits without
/// destroying its ID is heard (DISCONNECTED); and children whose signal
/// handler calls exit() while their main thread is inside librdmacm (as
/// qperf's server on SIGURG) each exit with their handler's status, none
/// hung on a lock or malloc's arena the interrupted thread held (qperf's
/// server child hung so in CI, and every later qperf test failed).
#[test]
fn connections_end_at_exit_even_from_a_signal_handler() {
    let net = TestNet::new();
    let devices = format!("{} {}", net.udp(1), net.udp(2));
    let (parent, child) = (net.ip(1).to_string(), net.ip(2).to_string());
    for args in [&["connected", &parent, &child][..], &["interrupted", &child]] {
        if let Some(out) = run_c_program_with("exit_handler", &devices, args, &[]) {
            assert_eq!(out.trim(), "ok", "{args:?}");
        }
    }
}

/// Two processes sharing one address never bind one port, ephemeral or
/// by number: the port is reserved on the address when bound, as the
/// kernel reserves it for the host; a REQ to a port bound and not listened
/// on is refused by the process that holds it.
#[test]
fn processes_sharing_an_address_bind_no_port_twice() {
    let net = TestNet::new();
    let ip = net.ip(1).to_string();
    for args in [&[ip.as_str()][..], &["unlistened", &ip]] {
        if let Some(out) = run_c_program_with("shared_ports", &net.udp(1), args, &[]) {
            assert_eq!(out.trim(), "ok", "{args:?}");
        }
    }
}

/// With UROCE_EXPLAIN=1 an event that reports a failure gets a line that
/// says it in words (programs often print only the event's name): the
/// refused client's REJECTED, with the reason.
#[test]
fn a_rejection_is_explained_with_its_reason() {
    let net = TestNet::new();
    let devices = format!("{} {}", net.udp(1), net.udp(2));
    let (server, client) = (net.ip(1).to_string(), net.ip(2).to_string());
    let explain = [("UROCE_EXPLAIN", "1")];
    let Some(out) = run_c_program_with("every_cm", &devices, &[&server, &client], &explain) else { return };
    let want = "uroce: rdma_get_cm_event: RDMA_CM_EVENT_REJECTED status 28 (consumer defined)";
    assert!(out.lines().any(|l| l == want), "{out}");
}

#[test]
fn pds_mrs_and_cqs_answer_as_rdma_core() {
    if let Some(out) = run_c_program("pd_mr_cq") {
        assert_eq!(out.trim(), "ok");
    }
}

/// A thread cancelled while it polls a CQ ends at its own cancellation
/// point (the process aborted before: a round's system calls inside the
/// poll were cancellation points); threads blocked in `ibv_get_cq_event`,
/// `ibv_get_async_event` and `rdma_get_cm_event` are cancelled there (the
/// process aborted there too); the device answers afterwards. With each
/// kind of progress thread the drop-in offers.
#[test]
fn threads_cancelled_while_polling_or_waiting_end_as_with_rdma_core() {
    run_with_each_progress_thread("cancel");
}

/// Runs `tests/c/NAME.c` once with each kind of progress thread the
/// drop-in offers; each run prints "ok".
fn run_with_each_progress_thread(name: &str) {
    for progress in ["blocking", "busy-poll"] {
        let net = TestNet::new();
        if let Some(out) = run_c_program_with(name, &net.udp(1), &[], &[("UROCE_PROGRESS", progress)]) {
            assert_eq!(out.trim(), "ok", "{name}, UROCE_PROGRESS={progress}");
        }
    }
}

/// `ibv_get_cq_event` answers signals as the kernel's `read()` would,
/// SA_RESTART or not, with each kind of progress thread (blocking: it may
/// wait beside the link to take the completing packet in itself).
#[test]
fn a_signal_interrupts_an_event_wait_as_it_interrupts_a_read() {
    run_with_each_progress_thread("cq_event_signals");
}

#[test]
fn a_forked_child_opens_the_device_its_parent_closed() {
    if let Some(out) = run_c_program("fork") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn ud_qps_address_handles_srqs_and_inline_sends_answer_as_rdma_core() {
    if let Some(out) = run_c_program("ud_srq") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn cqs_and_srqs_are_resized_keeping_what_waits_as_on_rxe() {
    if let Some(out) = run_c_program("resize") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn two_contexts_of_one_device_connect_and_each_gets_its_own_async_events() {
    if let Some(out) = run_c_program("two_contexts") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn extended_qps_build_work_requests_and_post_them_all_or_none() {
    if let Some(out) = run_c_program("qp_ex") {
        assert_eq!(out.trim(), "ok");
    }
}

/// librdmacm as a tutorial program uses it, server and client in one
/// process on two devices.
#[test]
fn rdma_cm_connects_sends_writes_and_disconnects_as_librdmacm() {
    let net = TestNet::new();
    let devices = format!("{} {}", net.udp(1), net.udp(2));
    let (server, client) = (net.ip(1).to_string(), net.ip(2).to_string());
    if let Some(out) = run_c_program_with("cm", &devices, &[&server, &client], &[]) {
        assert_eq!(out.trim(), "ok");
    }
}

/// Memory windows between two processes (`tests/c/mw.c`): a type 2 window
/// bound by a work request and a type 1 window by `ibv_bind_mw`, used by
/// the other process, taken back by its SEND_WITH_INV; the stale key fails.
#[test]
fn memory_windows_work_between_two_processes() {
    let Some(built) = build_c_program("mw") else { return };
    let net = TestNet::new();
    let (server_ip, client_ip) = (net.ip(1).to_string(), net.ip(2).to_string());
    let mut server = built
        .command(&net.udp(1))
        .args(["server", &server_ip])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the server");
    // The server says "listening" first; the client retries a refused connect anyway.
    let mut out = std::io::BufReader::new(server.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    assert_eq!(first.trim(), "listening");
    let client = built.command(&net.udp(2)).args(["client", &server_ip, &client_ip]).output().expect("run the client");
    let server_rest = std::io::read_to_string(out).unwrap();
    let server_status = server.wait().unwrap();
    let server_err = std::io::read_to_string(server.stderr.take().unwrap()).unwrap();
    let client_text = String::from_utf8_lossy(&client.stdout).into_owned() + &String::from_utf8_lossy(&client.stderr);
    assert!(
        client.status.success() && client_text.trim() == "ok",
        "client: {client_text}\nserver: {server_rest}{server_err}"
    );
    assert!(server_status.success() && server_rest.trim() == "ok", "server: {server_rest}{server_err}");
}

/// The mistakes the issue names, and rdma-core's and rxe's answers.
#[test]
fn mistakes_get_the_answers_rdma_core_and_rxe_give() {
    if let Some(out) = run_c_program("bad_input") {
        assert_eq!(out.trim(), "ok");
    }
}

/// With UROCE_EXPLAIN=1 each of those mistakes gets one line on stderr that
/// says what happened and what to do.
#[test]
fn mistakes_are_explained_with_what_to_do() {
    let net = TestNet::new();
    let Some(out) = run_c_program_with("bad_input", &net.udp(1), &[], &[("UROCE_EXPLAIN", "1")]) else { return };
    for (what, fix) in [
        ("no GID index", "the table has"),
        ("is in state RESET", "ibv_modify_qp"),
        ("RNR retry counter exceeded", "post receives before the sender starts"),
        ("local protection error", "lkey"),
        ("remote access error", "the rkey is unknown to it"),
        ("is full", "poll the CQ"),
    ] {
        assert!(out.lines().any(|l| l.starts_with("uroce: ") && l.contains(what) && l.contains(fix)), "{what}: {out}");
    }
    // The verb is named once, in front.
    for line in out.lines().filter_map(|l| l.strip_prefix("uroce: ")) {
        let verb = line.split(':').next().unwrap_or_default();
        assert!(!line[verb.len()..].contains(&format!("{verb}:")), "the verb twice: {line}");
    }
}

/// The C programs together call every verb the library exports for
/// applications (the version nodes IBVERBS_1.x and RDMACM_x; the provider
/// interface, IBVERBS_PRIVATE_34, is not for applications), as read from
/// the library's dynamic symbol table. Left out: the `ibv_copy_*_kern`
/// helpers, which no installed header declares.
#[test]
fn the_c_programs_call_every_exported_verb() {
    let Ok(out) = Command::new("objdump").arg("-T").arg(built_library()).output() else {
        println!("SKIP: needs objdump (binutils; bash scripts/install-deps as root)");
        return;
    };
    let table = String::from_utf8_lossy(&out.stdout);
    let exported: Vec<&str> = table
        .lines()
        .filter(|l| !l.contains("*UND*") && (l.contains(" IBVERBS_1.") || l.contains(" RDMACM_")))
        .filter_map(|l| l.split_whitespace().last())
        .filter(|s| !(s.starts_with("ibv_copy_") && s.ends_with("_kern")))
        .collect();
    assert!(exported.len() > 100, "the symbol table: {} verbs", exported.len());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let sources: String =
        std::fs::read_dir(&dir).unwrap().map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap()).collect();
    let called = |verb: &str| {
        // The inline verbs of verbs.h call these (`ibv_query_gid_ex` -> `_ibv_query_gid_ex`).
        let name = verb.strip_prefix('_').unwrap_or(verb);
        sources.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).any(|w| w == name)
    };
    let missing: Vec<&&str> = exported.iter().filter(|v| !called(v)).collect();
    assert!(missing.is_empty(), "no C program calls {missing:?}");
}
