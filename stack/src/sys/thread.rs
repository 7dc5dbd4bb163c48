//! Scheduling of the calling thread.

use std::time::Duration;

/// `struct sched_attr` (linux/sched/types.h), as far as SCHED_ATTR_SIZE_VER1.
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

/// Asks for a time slice of `slice` for the calling thread, keeping its
/// policy and nice value. Under EEVDF (Linux 6.12 and later) a SCHED_OTHER
/// thread's `sched_runtime` is its slice, and a thread with a shorter slice
/// than the one running preempts it when it wakes: a progress thread woken
/// by a packet then runs at once beside a program busy-looping on memory,
/// instead of after that program's slice (a few ms on a machine with fewer
/// cores than busy threads). Older kernels ignore the field for SCHED_OTHER.
/// Whether the kernel took the request.
pub fn request_slice(slice: Duration) -> bool {
    let mut attr = SchedAttr { size: std::mem::size_of::<SchedAttr>() as u32, ..SchedAttr::default() };
    // SAFETY: sched_getattr writes at most `size` bytes into attr, which has them.
    let got = unsafe { libc::syscall(libc::SYS_sched_getattr, 0, &mut attr as *mut SchedAttr, attr.size, 0) };
    if got != 0 || attr.sched_policy != libc::SCHED_OTHER as u32 {
        return false;
    }
    attr.size = std::mem::size_of::<SchedAttr>() as u32;
    attr.sched_runtime = slice.as_nanos() as u64;
    // SAFETY: sched_setattr reads `size` bytes of attr, which has them.
    unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) == 0 }
}
