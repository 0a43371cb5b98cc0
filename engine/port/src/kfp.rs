//! The kernel fast path (`quench switch`, on by default): quench's own XDP program on each plain
//! AF_XDP port, an offload table the switch core programs, as a NIC's flow table is.
//!
//! # What the program does
//! For a frame received on port `i` (the program is loaded once per port, `i` is an immediate
//! in it), with its destination and source MAC addresses `d` and `s`:
//! - if the [`FastTable`] holds `s` at port `i` and `d` at a port `e` other than `i`, the frame is
//!   redirected to `e`'s device through the DEVMAP (`bpf_redirect_map`): the kernel hands it to
//!   `e`'s driver (`ndo_xdp_xmit`) without an AF_XDP socket, a UMEM or the worker's core; the
//!   program counts it in its per-CPU counters under `e`, and marks `s`'s entry hit;
//! - else it goes to the AF_XDP socket of its receive queue (`XSKMAP[rx_queue_index]`, what
//!   libxdp's default program does), and the switch core handles it as without the fast path.
//!
//! Checking the source as well as the destination keeps learning in the core: a frame from a
//! host that moved (its source at another port than the table says), or from one the core has
//! not learned, reaches the core, which learns it and reprograms the table. A host whose frames
//! all take the fast path never reaches the core; the hit mark is what keeps its entry from
//! ageing out ([`FastTable::take_hit`]).
//!
//! # What writes the table
//! The switch core alone (`switch::forward`), only for entries whose port is plain (no
//! congestion point, no shaping, no PFC, no capture: `docs/design.md`, "The kernel fast path").
//! Group addresses are never learned, so a broadcast or multicast destination is never in the
//! table and always reaches the core.
//!
//! # The program
//! Raw BPF instructions built here ([`program`]), loaded with libbpf's `bpf_prog_load` (no
//! compiler, no object file, no BTF); the maps are created with `bpf_map_create` and their fds
//! are the program's `ld_imm64` pseudo map fds. The program's name starts with
//! [`PROG_NAME`], which the AF_XDP port's stale-program clean-up knows (`port::xdp::clear_stale`).
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::PortError;
use quench_wire::ethernet::{self, ethertype};

/// The program's name (BPF_OBJ_NAME_LEN is 16 with the NUL), known to `xdp::clear_stale`.
pub const PROG_NAME: &str = "quench_kfp";

/// Most ports the program's counters and the DEVMAP index.
pub const MAX_PORTS: u32 = 256;

/// Entries of the fast path's MAC table (the switch's FDB holds at most
/// `fdb::DEFAULT_CAPACITY`; the fast path holds its plain-port share of them).
pub const TABLE_ENTRIES: u32 = 64 * 1024;

/// One BPF instruction (struct bpf_insn, include/uapi/linux/bpf.h): opcode, destination and
/// source registers in one octet (dst in the low nibble), offset, immediate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

// Opcodes (include/uapi/linux/bpf.h, bpf_common.h).
const LDX_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
const LDX_H: u8 = 0x69;
const LDX_DW: u8 = 0x79;
const STX_W: u8 = 0x63;
const STX_H: u8 = 0x6b;
const STX_DW: u8 = 0x7b;
const ST_W: u8 = 0x62;
const ST_H: u8 = 0x6a;
const MOV64_X: u8 = 0xbf;
const MOV64_K: u8 = 0xb7;
const ADD64_K: u8 = 0x07;
const ADD64_X: u8 = 0x0f;
const SUB64_X: u8 = 0x1f;
const JGT_X: u8 = 0x2d;
const JEQ_K: u8 = 0x15;
const JNE_K: u8 = 0x55;
const JLT_K: u8 = 0xa5;
const JA: u8 = 0x05;
/// BPF_ALU | BPF_END | BPF_TO_BE: to network order (a swap on a little-endian machine, where
/// a packet's 16-bit load reads its octets swapped).
const TO_BE: u8 = 0xdc;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
const LD_IMM64: u8 = 0x18;
/// `src_reg` of an `ld_imm64` whose immediate is a map's fd (BPF_PSEUDO_MAP_FD).
const PSEUDO_MAP_FD: u8 = 1;

// Kernel functions a program may call (enum bpf_func_id).
const MAP_LOOKUP_ELEM: i32 = 1;
const REDIRECT_MAP: i32 = 51;

// XDP actions.
const XDP_PASS: i32 = 2;
const XDP_REDIRECT: i32 = 4;

// Registers.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R5: u8 = 5;
const R6: u8 = 6;
const R7: u8 = 7;
const R9: u8 = 9;
const FP: u8 = 10;

/// struct xdp_md's fields (offsets).
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE: i16 = 16;

/// The maps a port's program refers to.
#[derive(Clone, Copy, Debug)]
pub struct ProgramMaps {
    /// [`FastTable`]'s MAC table and DEVMAP (shared by every port's program).
    pub table: RawFd,
    pub devmap: RawFd,
    /// This port's own: its sockets by receive queue, its counters by egress port.
    pub xskmap: RawFd,
    pub counters: RawFd,
}

/// A jump to a label, resolved by [`Asm::finish`].
struct Asm {
    out: Vec<Insn>,
    /// (instruction index, label) of each forward jump.
    fixups: Vec<(usize, u8)>,
    labels: [Option<usize>; 8],
}

const L_XSK: u8 = 0;
const L_NO_HIT: u8 = 1;
const L_REDIRECTED: u8 = 2;
const L_TAGGED: u8 = 3;
const L_TYPE: u8 = 4;

// The EtherTypes the program tells apart, as immediates (below ETHERTYPE_MIN: a length).
const ETHERTYPE_MIN: i32 = ethernet::ETHERTYPE_MIN as i32;
const ETH_VLAN: i32 = ethertype::VLAN.0 as i32;
const ETH_QINQ: i32 = ethertype::QINQ.0 as i32;
const ETH_CNTAG: i32 = ethertype::CN_TAG.0 as i32;
const ETH_MAC_CONTROL: i32 = ethertype::MAC_CONTROL.0 as i32;
const ETH_CNM: i32 = ethertype::CNM.0 as i32;

impl Asm {
    fn i(&mut self, x: Insn) {
        self.out.push(x);
    }
    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, label: u8) {
        self.fixups.push((self.out.len(), label));
        self.out.push(insn(code, dst, src, 0, imm));
    }
    fn label(&mut self, l: u8) {
        self.labels[l as usize] = Some(self.out.len());
    }
    fn map(&mut self, dst: u8, fd: RawFd) {
        self.out.push(insn(LD_IMM64, dst, PSEUDO_MAP_FD, 0, fd));
        self.out.push(insn(0, 0, 0, 0, 0));
    }
    /// r0 = bpf_map_lookup_elem(map, fp + at); to `label` when it is null.
    fn lookup(&mut self, map: RawFd, at: i32, label: u8) {
        self.map(R1, map);
        self.i(insn(MOV64_X, R2, FP, 0, 0));
        self.i(insn(ADD64_K, R2, 0, 0, at));
        self.i(insn(CALL, 0, 0, 0, MAP_LOOKUP_ELEM));
        self.jump(JEQ_K, R0, 0, 0, label);
    }
    fn finish(mut self) -> Vec<Insn> {
        for (at, l) in std::mem::take(&mut self.fixups) {
            let to = self.labels[l as usize].unwrap_or_else(|| unreachable!("label {l} placed"));
            // A jump's offset counts from the instruction after it.
            self.out[at].off = (to as isize - at as isize - 1) as i16;
        }
        self.out
    }
}

/// The program for port `port` (see the module docs), as instructions.
///
/// Stack: the destination's key at fp-8, the source's at fp-16 (the six octets as they are on
/// the wire, then two zero octets: [`mac_key`]), the counters' key (the egress port) at fp-20.
/// Registers kept across calls: r6 the context, r7 the egress port, r9 the frame's length.
pub fn program(port: u32, maps: &ProgramMaps) -> Vec<Insn> {
    let mut a = Asm {
        out: Vec::with_capacity(64),
        fixups: Vec::new(),
        labels: [None; 8],
    };
    let port = port as i32;
    a.i(insn(MOV64_X, R6, R1, 0, 0));
    a.i(insn(LDX_W, R2, R6, MD_DATA, 0));
    a.i(insn(LDX_W, R3, R6, MD_DATA_END, 0));
    // Only frames the core would forward as they are: an EtherType (not an 802.3 length)
    // after at most one VLAN tag, and none of the types the core reads (a second tag, a
    // CN-TAG, MAC control, a CNM). Everything else, short frames too, is the core's.
    a.i(insn(MOV64_X, R4, R2, 0, 0));
    a.i(insn(ADD64_K, R4, 0, 0, 14));
    a.jump(JGT_X, R4, R3, 0, L_XSK);
    a.i(insn(LDX_H, R5, R2, 12, 0));
    a.i(insn(TO_BE, R5, 0, 0, 16));
    a.jump(JEQ_K, R5, 0, ETH_VLAN, L_TAGGED);
    a.jump(JEQ_K, R5, 0, ETH_QINQ, L_TAGGED);
    a.jump(JA, 0, 0, 0, L_TYPE);
    a.label(L_TAGGED);
    a.i(insn(MOV64_X, R4, R2, 0, 0));
    a.i(insn(ADD64_K, R4, 0, 0, 18));
    a.jump(JGT_X, R4, R3, 0, L_XSK);
    a.i(insn(LDX_H, R5, R2, 16, 0));
    a.i(insn(TO_BE, R5, 0, 0, 16));
    a.label(L_TYPE);
    a.jump(JLT_K, R5, 0, ETHERTYPE_MIN, L_XSK);
    for t in [ETH_VLAN, ETH_QINQ, ETH_CNTAG, ETH_MAC_CONTROL, ETH_CNM] {
        a.jump(JEQ_K, R5, 0, t, L_XSK);
    }
    a.i(insn(MOV64_X, R9, R3, 0, 0));
    a.i(insn(SUB64_X, R9, R2, 0, 0));
    // Keys: destination (octets 0-5) at fp-8, source (6-11) at fp-16.
    for (from, at) in [(0i16, -8i16), (6, -16)] {
        a.i(insn(LDX_W, R4, R2, from, 0));
        a.i(insn(STX_W, FP, R4, at, 0));
        a.i(insn(LDX_H, R4, R2, from + 4, 0));
        a.i(insn(STX_H, FP, R4, at + 4, 0));
        a.i(insn(ST_H, FP, 0, at + 6, 0));
    }
    // The source must be known at this port.
    a.lookup(maps.table, -16, L_XSK);
    a.i(insn(LDX_W, R1, R0, 0, 0));
    a.jump(JNE_K, R1, 0, port, L_XSK);
    // Its hit mark, written only when it changes (no store per frame to a shared line).
    a.i(insn(LDX_W, R1, R0, 4, 0));
    a.jump(JNE_K, R1, 0, 0, L_NO_HIT);
    a.i(insn(ST_W, R0, 0, 4, 1));
    a.label(L_NO_HIT);
    // The destination, at another port.
    a.lookup(maps.table, -8, L_XSK);
    a.i(insn(LDX_W, R7, R0, 0, 0));
    a.jump(JEQ_K, R7, 0, port, L_XSK);
    // Redirect; a port without a device in the DEVMAP answers XDP_PASS (the flags' low bits),
    // and the frame goes to the socket instead.
    a.map(R1, maps.devmap);
    a.i(insn(MOV64_X, R2, R7, 0, 0));
    a.i(insn(MOV64_K, R3, 0, 0, XDP_PASS));
    a.i(insn(CALL, 0, 0, 0, REDIRECT_MAP));
    a.jump(JNE_K, R0, 0, XDP_REDIRECT, L_XSK);
    // Count it under its egress port: frames, then octets.
    // (No entry, an egress beyond MAX_PORTS: not counted.)
    a.i(insn(STX_W, FP, R7, -20, 0));
    a.lookup(maps.counters, -20, L_REDIRECTED);
    a.i(insn(LDX_DW, R2, R0, 0, 0));
    a.i(insn(ADD64_K, R2, 0, 0, 1));
    a.i(insn(STX_DW, R0, R2, 0, 0));
    a.i(insn(LDX_DW, R2, R0, 8, 0));
    a.i(insn(ADD64_X, R2, R9, 0, 0));
    a.i(insn(STX_DW, R0, R2, 8, 0));
    a.label(L_REDIRECTED);
    a.i(insn(MOV64_K, R0, 0, 0, XDP_REDIRECT));
    a.i(insn(EXIT, 0, 0, 0, 0));
    // Everything else: the socket of its receive queue (libxdp's default program's action,
    // with XDP_PASS when the queue has none).
    a.label(L_XSK);
    a.map(R1, maps.xskmap);
    a.i(insn(LDX_W, R2, R6, MD_RX_QUEUE, 0));
    a.i(insn(MOV64_K, R3, 0, 0, XDP_PASS));
    a.i(insn(CALL, 0, 0, 0, REDIRECT_MAP));
    a.i(insn(EXIT, 0, 0, 0, 0));
    a.finish()
}

/// A MAC address (as `switch::fdb::key` gives it: the six octets, first most significant) as
/// the program's table key: the octets in wire order, then two zero octets.
pub fn mac_key(k: u64) -> [u8; 8] {
    let b = k.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7], 0, 0]
}

/// A table entry's value: the port, and the hit mark the program sets.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Value {
    port: u32,
    hit: u32,
}

/// A counter entry's value (per CPU): frames and octets.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Count {
    frames: u64,
    bytes: u64,
}

fn bpf_err(what: &str, rc: i32) -> PortError {
    // libbpf returns -errno (and sets errno).
    let errno = if rc < 0 {
        -rc
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    };
    let e = std::io::Error::from_raw_os_error(errno);
    let hint = match errno {
        libc::EPERM => " (needs root: CAP_BPF and CAP_NET_ADMIN)",
        _ => "",
    };
    PortError::Unsupported {
        name: "fast path".into(),
        what: format!("{what}: {e}{hint}"),
    }
}

fn map_create(
    kind: u32,
    name: &str,
    key: u32,
    value: u32,
    entries: u32,
) -> Result<OwnedFd, PortError> {
    let cname = CString::new(name).map_err(|_| bpf_err(name, -libc::EINVAL))?;
    // Safety: a valid NUL-terminated name; null options are allowed (all defaults).
    let fd = unsafe {
        libxdp_sys::bpf_map_create(kind, cname.as_ptr(), key, value, entries, std::ptr::null())
    };
    if fd < 0 {
        return Err(bpf_err(&format!("creating map {name}"), fd));
    }
    // Safety: a fresh fd the kernel just gave us, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn update<K, V>(fd: RawFd, key: &K, value: &V, what: &str) -> Result<(), PortError> {
    // Safety: `key` and `value` point to live values of the map's key and value sizes (the
    // callers' types match the sizes the maps were created with).
    let rc = unsafe {
        libxdp_sys::bpf_map_update_elem(
            fd,
            key as *const K as *const libc::c_void,
            value as *const V as *const libc::c_void,
            0,
        )
    };
    if rc < 0 {
        return Err(bpf_err(what, rc));
    }
    Ok(())
}

/// The shared half of the fast path: the MAC table (address -> port and hit mark) and the
/// DEVMAP (port -> ifindex). Written by the switch core only.
pub struct FastTable {
    table: OwnedFd,
    devmap: OwnedFd,
}

impl FastTable {
    pub fn new() -> Result<FastTable, PortError> {
        Ok(FastTable {
            table: map_create(
                libxdp_sys::bpf_map_type_BPF_MAP_TYPE_HASH,
                "quench_kfp_fdb",
                8,
                std::mem::size_of::<Value>() as u32,
                TABLE_ENTRIES,
            )?,
            devmap: map_create(
                libxdp_sys::bpf_map_type_BPF_MAP_TYPE_DEVMAP,
                "quench_kfp_dev",
                4,
                4,
                MAX_PORTS,
            )?,
        })
    }

    /// Makes port `port` a redirect target: its device `ifindex`.
    pub fn set_device(&self, port: u32, ifindex: u32) -> Result<(), PortError> {
        update(
            self.devmap.as_raw_fd(),
            &port,
            &ifindex,
            &format!("DEVMAP entry for port {port} (ifindex {ifindex})"),
        )
    }

    /// Installs (or moves) address `k` (`switch::fdb::key`) at `port`, its hit mark clear.
    pub fn install(&self, k: u64, port: u32) -> Result<(), PortError> {
        let v = Value { port, hit: 0 };
        update(
            self.table.as_raw_fd(),
            &mac_key(k),
            &v,
            "fast path table entry",
        )
    }

    /// Takes port `port` out of the redirect targets: the program's redirect to it then answers
    /// XDP_PASS and the frame goes to the socket. Removing one not there is not an error.
    pub fn remove_device(&self, port: u32) {
        // Safety: `port` is 4 octets, the DEVMAP's key size.
        unsafe {
            libxdp_sys::bpf_map_delete_elem(
                self.devmap.as_raw_fd(),
                &port as *const u32 as *const libc::c_void,
            )
        };
    }

    /// Removes address `k`; removing one not there is not an error.
    pub fn remove(&self, k: u64) {
        let key = mac_key(k);
        // Safety: `key` is 8 octets, the table's key size.
        unsafe {
            libxdp_sys::bpf_map_delete_elem(
                self.table.as_raw_fd(),
                key.as_ptr() as *const libc::c_void,
            )
        };
    }

    /// Whether the program marked `k` hit (a frame from it took the fast path) since the last
    /// call; clears the mark. `None`: not in the table.
    pub fn take_hit(&self, k: u64) -> Option<bool> {
        let key = mac_key(k);
        let mut v = Value::default();
        // Safety: `key` is 8 octets, `v` the table's value size, both live.
        let rc = unsafe {
            libxdp_sys::bpf_map_lookup_elem(
                self.table.as_raw_fd(),
                key.as_ptr() as *const libc::c_void,
                &mut v as *mut Value as *mut libc::c_void,
            )
        };
        if rc < 0 {
            return None;
        }
        if v.hit != 0 {
            // A lost race with the program (it marks the entry again between the read and
            // this write) loses one mark: the entry is refreshed one sweep later at worst.
            let _ = update(
                self.table.as_raw_fd(),
                &key,
                &Value {
                    port: v.port,
                    hit: 0,
                },
                "fast path hit mark",
            );
        }
        Some(v.hit != 0)
    }
}

/// The CPUs a per-CPU map has a value for: the highest id in /sys/devices/system/cpu/possible
/// (e.g. `0-1`, `0,2-5`) plus one, as libbpf's `libbpf_num_possible_cpus` counts them. A
/// lookup writes that many values into its buffer ([`FastProgram::counts`]), so a list that
/// cannot be read is an error, never a guess.
fn possible_cpus() -> Result<usize, PortError> {
    const POSSIBLE: &str = "/sys/devices/system/cpu/possible";
    highest_plus_one(&std::fs::read_to_string(POSSIBLE).unwrap_or_default()).ok_or_else(|| {
        PortError::Unsupported {
            name: "fast path".into(),
            what: format!("{POSSIBLE} gives no CPU list: the per-CPU counters cannot be read"),
        }
    })
}

/// The highest CPU id of a kernel CPU list plus one (`None`: malformed or empty).
fn highest_plus_one(list: &str) -> Option<usize> {
    crate::worker::parse_cpu_list(list)?
        .into_iter()
        .max()
        .map(|m| m + 1)
}

/// One port's program: loaded, not attached (the AF_XDP port attaches it to its device,
/// `port::xdp::XdpOptions::program`), with its XSKMAP and counters.
pub struct FastProgram {
    prog: OwnedFd,
    xskmap: OwnedFd,
    counters: OwnedFd,
    cpus: usize,
}

impl FastProgram {
    /// Loads port `port`'s program on `table`, with room for `queues` receive queues.
    pub fn load(table: &FastTable, port: u32, queues: u32) -> Result<FastProgram, PortError> {
        let xskmap = map_create(
            libxdp_sys::bpf_map_type_BPF_MAP_TYPE_XSKMAP,
            "quench_kfp_xsk",
            4,
            4,
            queues.max(1),
        )?;
        let counters = map_create(
            libxdp_sys::bpf_map_type_BPF_MAP_TYPE_PERCPU_ARRAY,
            "quench_kfp_cnt",
            4,
            std::mem::size_of::<Count>() as u32,
            MAX_PORTS,
        )?;
        let maps = ProgramMaps {
            table: table.table.as_raw_fd(),
            devmap: table.devmap.as_raw_fd(),
            xskmap: xskmap.as_raw_fd(),
            counters: counters.as_raw_fd(),
        };
        let insns = program(port, &maps);
        let name = CString::new(PROG_NAME).unwrap_or_default();
        let license = CString::new("Dual MIT/GPL").unwrap_or_default();
        let mut log = vec![0u8; 64 * 1024];
        // Safety: bpf_prog_load_opts is plain old data; zeroed is its default.
        let mut opts: libxdp_sys::bpf_prog_load_opts = unsafe { std::mem::zeroed() };
        opts.sz = std::mem::size_of::<libxdp_sys::bpf_prog_load_opts>();
        opts.log_buf = log.as_mut_ptr() as *mut libc::c_char;
        opts.log_size = log.len() as u32;
        opts.log_level = 0;
        // Safety: `Insn` has struct bpf_insn's layout (8 octets: code, regs, off, imm; the
        // bindgen struct's bitfield octet is our `regs`); the name, license and log buffer
        // outlive the call.
        let fd = unsafe {
            libxdp_sys::bpf_prog_load(
                libxdp_sys::bpf_prog_type_BPF_PROG_TYPE_XDP,
                name.as_ptr(),
                license.as_ptr(),
                insns.as_ptr() as *const libxdp_sys::bpf_insn,
                insns.len(),
                &mut opts,
            )
        };
        if fd < 0 {
            let text =
                String::from_utf8_lossy(&log[..log.iter().position(|&b| b == 0).unwrap_or(0)])
                    .trim()
                    .to_string();
            let mut e = bpf_err("loading the fast path's XDP program", fd);
            if let PortError::Unsupported { what, .. } = &mut e {
                if !text.is_empty() {
                    what.push_str(&format!("; verifier: {text}"));
                }
            }
            return Err(e);
        }
        // Safety: a fresh fd the kernel just gave us.
        let prog = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(FastProgram {
            prog,
            xskmap,
            counters,
            cpus: possible_cpus()?,
        })
    }

    /// The program's fd (for attaching) and its XSKMAP's (for the sockets to enter).
    pub fn fds(&self) -> (RawFd, RawFd) {
        (self.prog.as_raw_fd(), self.xskmap.as_raw_fd())
    }

    /// Frames and octets this port's program redirected to each egress port, summed over the
    /// CPUs: `out[e]` for `e` below `out.len()`.
    pub fn counts(&self, out: &mut [(u64, u64)]) {
        let mut per_cpu = vec![Count::default(); self.cpus];
        for (e, slot) in out.iter_mut().enumerate().take(MAX_PORTS as usize) {
            let key = e as u32;
            // Safety: a per-CPU array's lookup writes one value per possible CPU, each
            // rounded up to 8 octets (`Count` is 16): `per_cpu` holds that many.
            let rc = unsafe {
                libxdp_sys::bpf_map_lookup_elem(
                    self.counters.as_raw_fd(),
                    &key as *const u32 as *const libc::c_void,
                    per_cpu.as_mut_ptr() as *mut libc::c_void,
                )
            };
            *slot = if rc < 0 {
                (0, 0)
            } else {
                per_cpu
                    .iter()
                    .fold((0, 0), |(f, b), c| (f + c.frames, b + c.bytes))
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_give_the_highest_cpu_plus_one() {
        assert_eq!(highest_plus_one("0-1\n"), Some(2));
        assert_eq!(highest_plus_one("0"), Some(1));
        assert_eq!(highest_plus_one("0,2-5"), Some(6));
        assert_eq!(highest_plus_one(""), None);
    }

    /// The key is the address in wire order: what the program stores from the frame.
    #[test]
    fn keys_are_the_wire_octets_then_zeros() {
        let k = u64::from_be_bytes([0, 0, 0x02, 0x71, 0x6e, 0x0a, 0, 1]);
        assert_eq!(mac_key(k), [0x02, 0x71, 0x6e, 0x0a, 0, 1, 0, 0]);
    }

    /// Every jump lands inside the program, and the program ends with an exit.
    #[test]
    fn jumps_land_inside_the_program() {
        let maps = ProgramMaps {
            table: 3,
            devmap: 4,
            xskmap: 5,
            counters: 6,
        };
        let p = program(2, &maps);
        assert_eq!(p.last().map(|i| i.code), Some(EXIT));
        for (at, i) in p.iter().enumerate() {
            let class = i.code & 0x07;
            if class == 0x05 && i.code != CALL && i.code != EXIT {
                let to = at as isize + 1 + i.off as isize;
                assert!(
                    to > at as isize && (to as usize) < p.len(),
                    "jump at {at} to {to}"
                );
            }
        }
        // The port is the immediate of the source check and of the same-port check.
        assert_eq!(
            p.iter()
                .filter(|i| i.imm == 2 && i.code & 0x07 == 0x05)
                .count(),
            2
        );
    }
}
