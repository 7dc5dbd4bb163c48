//! `rping_run_client` and `rping_test_client`: resolve, connect, then for
//! each ping fill the start buffer, advertise it, advertise the sink, and
//! (with -V) check what the server wrote back; disconnect at the end.

use super::cb::{Cb, Fatal, St};
use super::ping::{c_str, fill, next_start};
use super::setup::{self, conn_param};
use super::RpingArgs;
use std::net::SocketAddr;
use std::time::Duration;

/// The process's exit status.
pub fn run(cb: &mut Cb, args: &RpingArgs, src: Option<SocketAddr>, dst: SocketAddr) -> u8 {
    match connect_and_ping(cb, args, src, dst) {
        Ok(()) => 0,
        Err(_) => 255,
    }
}

fn connect_and_ping(cb: &mut Cb, args: &RpingArgs, src: Option<SocketAddr>, dst: SocketAddr) -> Result<(), Fatal> {
    if let Err(e) = cb.cm_id.resolve_addr(src, dst, Duration::from_millis(2000)) {
        eprintln!("rdma_resolve_addr: {e}");
        return Err(Fatal::Fail);
    }
    cb.sem_wait()?;
    if cb.state != St::RouteResolved {
        eprintln!("waiting for addr/route resolution state {}", cb.state);
        return Err(Fatal::Fail);
    }
    cb.dbg("rdma_resolve_addr - rdma_resolve_route successful");
    let id = cb.cm_id.clone();
    setup::setup_and_post_recv(cb, &id, args)?;
    match connect(cb, args) {
        Ok(()) => {}
        Err(Fatal::Exit) => return Err(Fatal::Exit),
        Err(Fatal::Fail) => {
            eprintln!("connect error -1");
            cb.join_cq();
            return Err(Fatal::Fail);
        }
    }
    let tested = test(cb, args);
    if tested == Err(Fatal::Fail) {
        eprintln!("rping client failed: -1");
    }
    if let Err(e) = setup::disconnect(cb, &id, args.self_qp) {
        eprintln!("rdma_disconnect: {e}");
    }
    cb.join_cq();
    tested
}

/// `rping_connect_client`.
fn connect(cb: &mut Cb, args: &RpingArgs) -> Result<(), Fatal> {
    let id = cb.cm_id.clone();
    if let Err(e) = id.connect(&conn_param(cb, args.self_qp, args)) {
        eprintln!("rdma_connect: {e}");
        return Err(Fatal::Fail);
    }
    cb.sem_wait()?;
    if cb.state != St::Connected {
        eprintln!("wait for CONNECTED state {}", cb.state);
        return Err(Fatal::Fail);
    }
    if args.self_qp {
        if let Err(e) = setup::self_modify_qp(cb, &id).and_then(|()| id.establish()) {
            eprintln!("rping_modify_qp: {e}");
            return Err(Fatal::Fail);
        }
    }
    cb.dbg("rdma_connect successful");
    Ok(())
}

/// `rping_test_client`: ends well after `-C` pings, or when the server disconnected.
fn test(cb: &mut Cb, args: &RpingArgs) -> Result<(), Fatal> {
    let size = args.size as u32;
    let mut start = 65u8;
    let mut ping = 0u32;
    let res = cb.res.as_ref().expect("set up");
    let (start_mr, rdma) = (res.start.clone().expect("the client's start buffer"), res.rdma.clone());
    while args.count == 0 || i64::from(ping) < args.count {
        cb.state = St::RdmaReadAdv;
        let mut message = vec![0; start_mr.len()];
        fill(&mut message, ping, start);
        start_mr.write(0, &message);
        start = next_start(start);
        cb.format_send(&start_mr, size);
        if let Err(e) = cb.post_send_info() {
            eprintln!("post send error {e}");
            return end(cb);
        }
        cb.sem_wait()?;
        if cb.state != St::RdmaWriteAdv {
            eprintln!("wait for RDMA_WRITE_ADV state {}", cb.state);
            return end(cb);
        }
        cb.format_send(&rdma, size);
        if let Err(e) = cb.post_send_info() {
            eprintln!("post send error {e}");
            return end(cb);
        }
        cb.sem_wait()?;
        if cb.state != St::RdmaWriteComplete {
            eprintln!("wait for RDMA_WRITE_COMPLETE state {}", cb.state);
            return end(cb);
        }
        if args.validate > 0 && start_mr.to_vec() != rdma.to_vec() {
            eprintln!("data mismatch!");
            return end(cb);
        }
        if args.verbose > 0 {
            println!("ping data: {}", c_str(&rdma.to_vec()));
        }
        ping += 1;
    }
    Ok(())
}

/// A failed ping: fine if the server went away first (as rping returns 0 then).
fn end(cb: &Cb) -> Result<(), Fatal> {
    if cb.state == St::Disconnected {
        Ok(())
    } else {
        Err(Fatal::Fail)
    }
}
