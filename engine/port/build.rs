//! Build script of the port crate. Does nothing unless the cargo feature `dpdk` is on; then it
//! finds DPDK with `pkg-config libdpdk`, compiles the C shim src/dpdk/shim.c (DPDK's burst
//! and mbuf calls are `static inline`, so Rust cannot call them directly) and links DPDK.

/// Poll-mode drivers linked into every binary, so `--vdev=net_null0` (and net_ring, and
/// net_af_packet on a veth) work without `-d`. They register themselves from ELF constructors and
/// export nothing quench calls, so they are linked with `--no-as-needed` (the linker would drop
/// them otherwise). Other PMDs: pass `-d /usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0/librte_net_X.so`
/// in the EAL arguments.
#[cfg(feature = "dpdk")]
const PMDS: &[&str] = &["rte_net_null", "rte_net_ring", "rte_net_af_packet"];

#[cfg(feature = "dpdk")]
fn pkg_config(arg: &str) -> Result<Vec<String>, String> {
    let out = std::process::Command::new("pkg-config")
        .args([arg, "libdpdk"])
        .output()
        .map_err(|e| {
            format!("feature `dpdk`: cannot run pkg-config ({e}); run scripts/setup-dpdk.sh")
        })?;
    if !out.status.success() {
        return Err(format!(
            "feature `dpdk`: `pkg-config {arg} libdpdk` failed ({}); run scripts/setup-dpdk.sh",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

fn main() -> Result<(), String> {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "dpdk")]
    dpdk()?;
    Ok(())
}

#[cfg(feature = "dpdk")]
fn dpdk() -> Result<(), String> {
    println!("cargo:rerun-if-changed=src/dpdk/shim.c");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let mut shim = cc::Build::new();
    shim.file("src/dpdk/shim.c").opt_level(3).warnings(true);
    let cflags = pkg_config("--cflags")?;
    let mut it = cflags.iter();
    while let Some(f) = it.next() {
        if let Some(dir) = f.strip_prefix("-I") {
            shim.include(dir);
        } else if f == "-include" {
            if let Some(h) = it.next() {
                shim.flag("-include").flag(h);
            }
        } else {
            shim.flag(f);
        }
    }
    shim.compile("quench_dpdk_shim");

    for f in pkg_config("--libs")? {
        if let Some(dir) = f.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = f.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    for pmd in PMDS {
        println!("cargo:rustc-link-arg=-l{pmd}");
    }
    println!("cargo:rustc-link-arg=-Wl,--as-needed");
    // Link arguments reach only this crate's own targets. The binaries of the crates above it get
    // the PMDs from the EAL's plugin directory instead (a shared DPDK, as Debian's, loads every
    // driver there in rte_eal_init), and net_ring's own calls (rte_eth_from_rings: the DPDK
    // benchmark's ring ports) from this library, which reaches them.
    println!("cargo:rustc-link-lib=dylib=rte_net_ring");
    Ok(())
}
