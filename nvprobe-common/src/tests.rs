//! Layout, numbering and contract checks of the kernel/user records.

use super::*;
use core::mem::size_of;

#[test]
fn layouts_have_no_hidden_padding() {
    assert_eq!(size_of::<Header>(), 56);
    assert_eq!(size_of::<FileId>(), 24);
    assert_eq!(
        size_of::<IoctlEvent>(),
        56 + 24 + 8 * 4 + 8 + 8 + 8 + 24 + 64 + 16
    );
    assert_eq!(size_of::<PathEvent>(), 56 + 24 + 24 + 24 + 16 + 128);
    assert_eq!(size_of::<FdEvent>(), 56 + 24 + 24 + 8 + 8);
    assert_eq!(size_of::<MmapEvent>(), 56 + 24 + 24 + 24 + 16);
    assert_eq!(size_of::<Config>(), 38 * 4);
    assert_eq!(size_of::<ProcEvent>(), 56 + 40 + 16);
}

#[test]
fn wire_numbers_round_trip_and_unknown_ones_are_none() {
    for k in EventKind::ALL {
        assert_eq!(EventKind::from_repr(*k as u32), Some(*k));
    }
    for k in DevKind::ALL {
        assert_eq!(DevKind::from_u8(*k as u8), *k);
    }
    for op in PathOp::ALL {
        assert_eq!(PathOp::from_repr(*op as u32), Some(*op));
    }
    assert_eq!(EventKind::from_repr(0), None);
    assert_eq!(EventKind::from_repr(9), Some(EventKind::Nccl));
    assert_eq!(EventKind::from_repr(10), None);
    assert_eq!(ProcOp::from_repr(6), Some(ProcOp::CallFailed));
    assert_eq!(ProcOp::from_repr(7), Some(ProcOp::OomVictim));
    assert_eq!(ProcOp::from_repr(8), Some(ProcOp::ThreadExit));
    assert_eq!(ProcOp::from_repr(9), None);
    assert_eq!(FdOp::from_repr(7), Some(FdOp::CloseRange));
    assert_eq!(FdOp::from_repr(9), Some(FdOp::Dup3Replaced));
    assert_eq!(FdOp::from_repr(10), None);
    assert_eq!(DevKind::from_u8(200), DevKind::None);
    assert_eq!(lost_slot_name(EventKind::RmControl as u32), "rm_control");
    assert_eq!(lost_slot_name(EventKind::Nccl as u32), "nccl");
    assert_eq!(lost_slot_name(LOST_SLOT_COLLISION), "slot_collision");
    assert_eq!(lost_slot_name(12), "other");
}

#[test]
fn the_command_shape_test_takes_nvidia_commands_only() {
    use ioctl::*;
    // NV_ESC_RM_CONTROL as libcuda calls it, and behind XFER.
    assert!(nvidia_shaped(0xc020_462a) && is_escape(0xc020_462a));
    assert_eq!(
        (ioc_nr(0xc020_462a), ioc_size(0xc020_462a)),
        (NV_ESC_RM_CONTROL, 32)
    );
    assert!(is_xfer(0xc010_46d3));
    assert!(nvidia_shaped(UVM_INITIALIZE) && nvidia_shaped(37));
    assert!(nvidia_shaped(NVKMS_IOCTL_IOWR));
    // TCGETS ('T') and a DRM command ('d') are not.
    assert!(!nvidia_shaped(0x5401) && !nvidia_shaped(0xc010_6440));
}

#[test]
fn classify_follows_the_driver_numbering() {
    assert_eq!(classify_rdev(kdev_make(195, 255), 238, 0), DevKind::Ctl);
    assert_eq!(classify_rdev(kdev_make(195, 0), 238, 0), DevKind::Gpu);
    assert_eq!(classify_rdev(kdev_make(195, 247), 238, 0), DevKind::Gpu);
    assert_eq!(classify_rdev(kdev_make(195, 250), 238, 0), DevKind::Other);
    assert_eq!(classify_rdev(kdev_make(195, 254), 238, 0), DevKind::Modeset);
    assert_eq!(classify_rdev(kdev_make(238, 0), 238, 0), DevKind::Uvm);
    assert_eq!(classify_rdev(kdev_make(238, 1), 238, 0), DevKind::UvmTools);
    assert_eq!(classify_rdev(kdev_make(237, 1), 238, 237), DevKind::Caps);
    // No uvm module: major 0 must never match.
    assert_eq!(classify_rdev(kdev_make(0, 0), 0, 0), DevKind::None);
    assert_eq!(classify_rdev(kdev_make(1, 3), 238, 237), DevKind::None);
}

#[test]
fn the_context_functions_are_named_by_number() {
    let want = [
        "cuDevicePrimaryCtxRetain",
        "cuCtxCreate",
        "cuCtxCreate_v2",
        "cuCtxCreate_v3",
        "cuCtxCreate_v4",
        "cuGreenCtxCreate",
    ];
    assert_eq!(CUDA_CONTEXT_FUNCS.len(), want.len());
    for (f, name) in CUDA_CONTEXT_FUNCS.iter().zip(want) {
        assert_eq!(cuda_func_name(*f), Some(name));
        assert_eq!(f & CUDA_INTERPOSER, 0);
    }
    assert_eq!(cuda_func_name(CUDA_CUINIT), Some("cuInit"));
}
