//! Links the cdylib as libibverbs.so.1: its soname, and the version nodes of
//! rdma-core 44's libibverbs and librdmacm (declared here; each symbol picks
//! its node with a `.symver` directive, see src/ffi/symver.rs).

fn main() {
    let map = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("abi/versions.map");
    println!("cargo:rerun-if-changed={}", map.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={}", map.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
    // Library threads must never outlive a dlclose: the object stays mapped.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
