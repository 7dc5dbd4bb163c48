//! A drop-in `libibverbs.so.1` and `librdmacm.so.1` on uroce: unmodified
//! RDMA programs (perftest, rping, the ibverbs examples, pyverbs) run over
//! uroce's userspace RoCEv2, with no kernel RDMA and no root.
//!
//! The cdylib exports the C ABI of rdma-core 44 (Debian 12) with its symbol
//! versions (`abi/symbols.txt` lists them; `scripts/dropin` installs the
//! library as `libibverbs.so.1`, `librdmacm.so.1` and `libibverbs.so`, and
//! checks the list). All `unsafe` lives in [`ffi`]; the rest is safe code
//! over [`uroce_verbs`].
//!
//! What works today: devices (from [`devices::DEVICES_ENV`]), opening and
//! closing them, every query `ibv_devices` and `ibv_devinfo -v` make, PDs,
//! MRs on the program's own memory, CQs and completion channels, RC and UC
//! QPs with posting: enough for Debian's `ibv_rc_pingpong` (with `-e` too).
//! Every other verb exists (programs are linked with BIND_NOW, so all must)
//! and answers EOPNOTSUPP (or NULL with errno EOPNOTSUPP), as rdma-core does
//! for what a device lacks; the README lists them.

pub mod devices;
pub mod explain;
pub mod ffi;
pub mod guid;
