//! Lines the H200's driver (580.159.04) wrote for the faults of
//! tests/scripts/gpufault.py, and lines made to look like them.

use super::*;

const XID31_WRITE: &str = "NVRM: Xid (PCI:0000:00:06): 31, pid=711, name=python3, channel 0x0000000a, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_8 faulted @ 0x0_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE";
const XID31_READ: &str = "NVRM: Xid (PCI:0000:00:06): 31, pid=837, name=python3, channel 0x0000000a, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_8 faulted @ 0x7f00_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ";
const XID13: &str = "NVRM: Xid (PCI:0000:00:06): 13, Graphics SM Warp Exception on (GPC 1, TPC 4, SM 0): Misaligned Address";
const XID43: &str = "NVRM: Xid (PCI:0000:00:06): 43, pid=963, name=python3, channel 0x0000000a";
const IDENT: &str = "NVRM: GPU at PCI:0000:00:06: GPU-f32ddf9e-1e8b-5bbb-c267-a7922d39ec21";

#[test]
fn an_mmu_fault_on_a_write_through_null() {
    let x = parse_xid(XID31_WRITE).unwrap();
    assert_eq!(x.number, 31);
    assert_eq!(x.pci, "0000:00:06");
    assert_eq!(x.pid, Some(711));
    assert_eq!(x.name.as_deref(), Some("python3"));
    assert_eq!(x.channel.as_deref(), Some("0x0000000a"));
    let f = x.mmu_fault.unwrap();
    assert_eq!(f.address, 0);
    assert_eq!(f.fault_type, "FAULT_PDE");
    assert_eq!(f.access_type.as_deref(), Some("ACCESS_TYPE_VIRT_WRITE"));
    assert_eq!(f.engine, "GRAPHICS GPC1 GPCCLIENT_T1_8");
    assert_eq!(kind_of(XID31_WRITE), Some(LogKind::Xid));
}

#[test]
fn an_mmu_fault_on_a_read_keeps_the_whole_address() {
    let f = parse_xid(XID31_READ).unwrap().mmu_fault.unwrap();
    assert_eq!(f.address, 0x7f00_0000_0000);
    assert_eq!(f.access_type.as_deref(), Some("ACCESS_TYPE_VIRT_READ"));
}

#[test]
fn an_exception_line_without_a_process() {
    let x = parse_xid(XID13).unwrap();
    assert_eq!((x.number, x.pid, x.name.as_deref()), (13, None, None));
    assert_eq!(
        x.detail,
        "Graphics SM Warp Exception on (GPC 1, TPC 4, SM 0): Misaligned Address"
    );
    assert!(x.mmu_fault.is_none() && x.channel.is_none());
    let x = parse_xid(XID43).unwrap();
    assert_eq!((x.number, x.pid), (43, Some(963)));
    assert_eq!(x.channel.as_deref(), Some("0x0000000a"));
}

#[test]
fn the_uuid_line_before_the_first_xid() {
    assert_eq!(
        gpu_identity(IDENT),
        Some((
            "0000:00:06".to_owned(),
            "GPU-f32ddf9e-1e8b-5bbb-c267-a7922d39ec21".to_owned()
        ))
    );
    assert_eq!(kind_of(IDENT), Some(LogKind::GpuIdentity));
    assert_eq!(gpu_identity("NVRM: GPU at PCI:0000:00:06: GPU-xyz"), None);
}

#[test]
fn a_name_cannot_write_the_drivers_details() {
    // A task named to look like the rest of the line: its name is cut
    // where the driver's own text starts, and a fault it spells is not
    // one (the driver wrote none).
    let m = "NVRM: Xid (PCI:0000:00:06): 43, pid=9, name=a, channel 0x1, channel 0x0000000b";
    let x = parse_xid(m).unwrap();
    assert_eq!(x.name.as_deref(), Some("a"));
    assert_eq!(x.pid, Some(9));
    let m = "NVRM: Xid (PCI:0000:00:06): 43, pid=9, name=MMU Fault: ENG, channel 0x0000000a";
    let x = parse_xid(m).unwrap();
    assert_eq!(x.name.as_deref(), Some("MMU Fault: ENG"));
    assert!(x.mmu_fault.is_none());
    // A line a task's name starts is not the driver's.
    assert_eq!(kind_of("NVRM: Xid 79[12]: segfault at 0"), None);
    // A task named "nvidia-uvm: hmm" that opens a SOCK_PACKET socket.
    assert_eq!(
        kind_of("nvidia-uvm: hmm uses obsolete (PF_INET,SOCK_PACKET)"),
        None
    );
    // The driver's own UVM line is still its.
    assert_eq!(
        kind_of("nvidia-uvm: uvm_hmm: HMM is not supported on this kernel: error"),
        Some(LogKind::UvmError)
    );
    assert_eq!(parse_xid("NVRM: Xid (PCI:zz): 31, pid=1"), None);
}

#[test]
fn hostile_and_odd_lines_give_none_or_raw_parts() {
    for m in [
        "",
        "NVRM: Xid (",
        "NVRM: Xid (PCI:0000:00:06): ",
        "NVRM: Xid (PCI:0000:00:06): x",
        "NVRM: Xid (PCI:0000:00:06): 99999999999999999999",
    ] {
        assert_eq!(parse_xid(m), None, "{m:?}");
    }
    let x = parse_xid("NVRM: Xid (PCI:0000:00:06): 31, pid=1, name=p, MMU Fault: ENGINE E faulted @ 0x123456789_123456789. Fault is of type T").unwrap();
    assert!(x.mmu_fault.is_none(), "a 17-digit address is not read");
    let x = parse_xid("NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.").unwrap();
    assert_eq!((x.number, x.pid), (79, None));
    assert_eq!(x.name.as_deref(), Some("<unknown>"));
    assert_eq!(x.detail, "GPU has fallen off the bus.");
    assert_eq!(
        kind_of(
            "NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
        ),
        Some(LogKind::GpuLost)
    );
}

#[test]
fn kmsg_records() {
    let r = parse_record(b"4,361,32969079,-;NVRM: Xid (PCI:0000:00:06): 13, x\n SUBSYSTEM=pci\n")
        .unwrap();
    assert_eq!(
        (r.level, r.facility, r.seq, r.ts_us),
        (4, 0, 361, 32_969_079)
    );
    assert_eq!(r.msg, "NVRM: Xid (PCI:0000:00:06): 13, x");
    // What user space writes has the user facility.
    let r = parse_record(b"12,5,1,-;NVRM: Xid (PCI:0000:00:06): 79, fake").unwrap();
    assert_eq!(r.facility, 1);
    for bad in [
        &b""[..],
        b"4,1;x",
        b"a,b,c,-;x",
        b"no semicolon",
        b"4,1,\xff,-;x",
    ] {
        assert_eq!(parse_record(bad), None, "{bad:?}");
    }
}
