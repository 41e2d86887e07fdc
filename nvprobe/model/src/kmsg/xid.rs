//! The Xid table: what an NVIDIA Xid number means and what a node operator
//! should do about it.
//!
//! The driver prints an Xid to the kernel log as
//! `NVRM: Xid (PCI:dddd:bb:dd): N, pid=…, name=…, <message>` (with
//! ` GPU-I:nn GPU-CI:nn` after the PCI address when a MIG instance is
//! attributed, and without `pid=…, name=…` when there is no process;
//! `src/nvidia/src/kernel/gpu/rc/kernel_rc.c`, `XID_PRINT_WITH_ATTR`). This
//! module only says what `N` means; it does not parse the line.
//!
//! # Sources
//!
//! Every row comes from NVIDIA's public material, nothing else:
//!
//! - the Xid Catalog for Ampere and newer GPUs,
//!   <https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html>
//!   (also <https://docs.nvidia.com/Xid-Catalog.xlsx>): mnemonic,
//!   description, the "Resolution Bucket" immediate and investigatory
//!   actions, the trigger conditions, the "Xid 144-150 Decode" sheet and
//!   the "Fault Resolution Buckets" sheet that defines each bucket;
//! - the r5xx "Xid Errors" page for older GPUs,
//!   <https://docs.nvidia.com/deploy/xid-errors/archive/index.html>
//!   (formerly <https://docs.nvidia.com/deploy/xid-errors/index.html>):
//!   the descriptions of Xids the catalogue marks unused (61, 122, 123) and
//!   its "Common Xid Errors" section, which the catalogue's trigger
//!   conditions repeat;
//! - NVIDIA's GPU memory error management guide,
//!   <https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/error-recovery-and-response-flags.html>
//!   (a pending row remap happens at the next GPU reset: Xid 63);
//! - NVIDIA/open-gpu-kernel-modules 595.45.04 (commit
//!   df1c9a3de2be4b130f4fc7680f7198193d8ac6ad):
//!   `src/common/sdk/nvidia/inc/nverror.h` for the names;
//!   `src/nvidia/src/kernel/gpu/nvlink/arch/hopper/kernel_nvlink_gh100.c`
//!   (Xid 136 is logged by the NVLink code); 520.61.05's `nverror.h`
//!   string table ("PMU Breakpoint (non-fatal)", Xid 61).
//!
//! `docs/XID.md` is the same table for people; a test keeps the two equal.
//!
//! # How a row is filled
//!
//! - `name`: the `nverror.h` define; where 595.45.04's `nverror.h` has none
//!   (8, 11, 25, 37, 38, 46, 54, 66, 67, 106, 107, 109), the catalogue's
//!   mnemonic. For 63/64 the catalogue's `INFOROM_DRAM_RETIREMENT_*`, which
//!   `nverror.h` defines as aliases of `INFOROM_PAGE_RETIREMENT_*`.
//! - `meaning`: the catalogue's description, with its trigger conditions
//!   in short where it has them.
//! - `causes`: only what the row's own text names (description, trigger
//!   conditions, the decode sheet's HW/SW column for 144-150); where the row
//!   has no such text, what its investigatory bucket's definition names
//!   (`CHECK_APP/CUDA`: the application; `INVESTIGATE_SW`: user or NVIDIA
//!   software). Empty where the catalogue names no cause. (The r5xx page's
//!   old cause matrix is not used: the stored copies lose its columns.)
//! - `action`: from the catalogue's immediate action, refined by the row's
//!   text:
//!   - `RESTART_APP` → [`XidAction::RestartApp`], or
//!     [`XidAction::FixProgram`] where the investigatory bucket or the
//!     trigger text says the application is the likely cause
//!     (`CHECK_APP/CUDA`, `WORKFLOW_XID_13`, `WORKFLOW_XID_31`), except 32,
//!     whose text says PCIe quality, generally not the application;
//!   - `IGNORE` → [`XidAction::Informational`], or `FixProgram` where the
//!     text says the application is at fault (43, 137);
//!   - `RESET_GPU` → [`XidAction::ResetGpu`], or
//!     [`XidAction::DriverFault`] where the text puts the fault in the GSP
//!     firmware's code (119, 120);
//!   - node-level or hands-on buckets → [`XidAction::DrainNode`]:
//!     `RESTART_BM` (79), `CHECK_MECHANICALS` (54), `WORKFLOW_XID_48`
//!     (drain and reset with 63/64, field diagnostics), `WORKFLOW_NVLINK_ERR`
//!     (74: reset or reboot, reseat, diagnostics), and 110 (bucket
//!     `RESET_GPU`, but its text says cold-reset the system and call the
//!     hardware vendor);
//!   - `CONTACT_SUPPORT` alone and `UPDATE_SWFW` → `DriverFault`;
//!   - `WORKFLOW_XID_45`, `XID_154` and rows that only add to another Xid →
//!     `Informational`;
//!   - `WORKFLOW_NVLINK5_ERR` (144-150) → `ResetGpu` where the decode sheet
//!     gives `RESET_GPU` for some status, else `Informational`;
//!   - `RESTART_VM` → `RestartApp`; `CHECK_UVM` → `ResetGpu`.
//! - `what_to_do`: the catalogue's guidance in short, ending with its
//!   buckets as `[immediate → investigatory]`.
//!
//! Rows the catalogue marks "Unused" are left out (except 61, 122, 123,
//! kept with the older page's meaning), and so are 162-170, for which the
//! catalogue gives no resolution bucket.

use serde::Serialize;

/// What a node operator should do about an Xid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum XidAction {
    /// The program's own GPU code is at fault (a bad pointer, an illegal
    /// instruction, a trap/assert): fix the program; the node is fine.
    FixProgram,
    /// Restart the application (the GPU recovered; e.g. a channel the
    /// driver reset).
    RestartApp,
    /// Reset the GPU (nvidia-smi -r or a reboot) before it is used again.
    ResetGpu,
    /// Hardware: drain the node and have it checked (ECC double-bit, fallen
    /// off the bus, NVLink, row-remap failure...).
    DrainNode,
    /// A driver or firmware (GSP) fault: collect a bug report
    /// (nvidia-bug-report.sh), update the driver; may need a GPU reset.
    DriverFault,
    /// Informational / follows another error; nothing on its own.
    Informational,
}

impl XidAction {
    /// The serialized (snake_case) name.
    pub fn as_str(self) -> &'static str {
        match self {
            XidAction::FixProgram => "fix_program",
            XidAction::RestartApp => "restart_app",
            XidAction::ResetGpu => "reset_gpu",
            XidAction::DrainNode => "drain_node",
            XidAction::DriverFault => "driver_fault",
            XidAction::Informational => "informational",
        }
    }
}

/// A possible cause the catalogue names for an Xid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    UserApp,
    Driver,
    Hardware,
    Firmware,
    Thermal,
    Bus,
    Nvlink,
    Memory,
    Power,
    SystemMemory,
}

impl Cause {
    /// The serialized (snake_case) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::UserApp => "user_app",
            Cause::Driver => "driver",
            Cause::Hardware => "hardware",
            Cause::Firmware => "firmware",
            Cause::Thermal => "thermal",
            Cause::Bus => "bus",
            Cause::Nvlink => "nvlink",
            Cause::Memory => "memory",
            Cause::Power => "power",
            Cause::SystemMemory => "system_memory",
        }
    }
}

/// One Xid's row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct XidInfo {
    pub number: u32,
    /// NVIDIA's name (nverror.h, e.g. "ROBUST_CHANNEL_GR_EXCEPTION") when
    /// known.
    pub name: Option<&'static str>,
    /// One line: what it means (from the catalogue).
    pub meaning: &'static str,
    /// The catalogue's possible causes, in short: which of user app /
    /// driver / hardware / thermal / bus ... it lists.
    pub causes: &'static [Cause],
    pub action: XidAction,
    /// One or two sentences: what to do, from the catalogue's recommended
    /// action.
    pub what_to_do: &'static str,
}

/// The row of Xid `n`, None when the table has no row.
pub fn info(n: u32) -> Option<&'static XidInfo> {
    ROWS.binary_search_by_key(&n, |r| r.number)
        .ok()
        .map(|i| &ROWS[i])
}

/// Whether Xid `n` means the node should be drained (action DrainNode).
pub fn drains(n: u32) -> bool {
    info(n).is_some_and(|r| r.action == XidAction::DrainNode)
}

/// All rows, sorted by number (for docs and tests).
pub fn all() -> &'static [XidInfo] {
    ROWS
}

use Cause as C;
use XidAction as A;

const fn row(
    number: u32,
    name: &'static str,
    meaning: &'static str,
    causes: &'static [Cause],
    action: XidAction,
    what_to_do: &'static str,
) -> XidInfo {
    XidInfo {
        number,
        name: Some(name),
        meaning,
        causes,
        action,
        what_to_do,
    }
}

/// An engine exception the catalogue buckets `RESTART_APP` →
/// `CONTACT_SUPPORT` and gives no trigger text for.
const fn engine(number: u32, name: &'static str, meaning: &'static str) -> XidInfo {
    row(
        number,
        name,
        meaning,
        &[],
        A::RestartApp,
        "Restart the application; contact support if it recurs. [RESTART_APP → CONTACT_SUPPORT]",
    )
}

const CHECK_APP: &str = "Restart the application; the catalogue says the likely cause is the application passing bad data or using incorrect methods with the GPU: check it (report an issue if it turns out to be the driver). [RESTART_APP → CHECK_APP/CUDA]";
const NVLINK5: &str = "Decode IntrInfo and the error status with the catalogue's \"XID 144-150 Decode\" sheet: the immediate action is IGNORE, RESTART_APP (when no Xid 154 follows) or RESET_GPU depending on them; follow an accompanying Xid 154. [WORKFLOW_NVLINK5_ERR]";

static ROWS: &[XidInfo] = &[
    row(
        8,
        "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT",
        "GPU stopped processing.",
        &[],
        A::RestartApp,
        "Restart the application; contact support if it recurs. [RESTART_APP → CONTACT_SUPPORT]",
    ),
    row(
        11,
        "ROBUST_CHANNEL_GR_ERROR_MISSING_HW",
        "Invalid or corrupted push buffer stream.",
        &[C::UserApp],
        A::FixProgram,
        CHECK_APP,
    ),
    row(
        13,
        "ROBUST_CHANNEL_GR_EXCEPTION",
        "Graphics Engine Exception: a general application fault, typically an out-of-bounds access, or an illegal instruction or register; rarely hardware or system software.",
        &[C::UserApp, C::Driver, C::Hardware],
        A::FixProgram,
        "Restart the application and debug it with cuda-gdb or Compute Sanitizer memcheck (or CUDA_DEVICE_WAITS_ON_EXCEPTION=1); if it repeats on the same TPC and GPC, run DCGM EUD then field diagnostics (possible hardware). [RESTART_APP → WORKFLOW_XID_13]",
    ),
    row(
        25,
        "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY",
        "Invalid or illegal push buffer stream.",
        &[C::UserApp],
        A::FixProgram,
        CHECK_APP,
    ),
    row(
        31,
        "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT",
        "GPU memory page fault: the MMU reported an illegal address access; typically an application bug, also possibly a driver or hardware bug.",
        &[C::UserApp, C::Driver, C::Hardware],
        A::FixProgram,
        "Restart the application and debug it with cuda-gdb or Compute Sanitizer memcheck (or CUDA_DEVICE_WAITS_ON_EXCEPTION=1); if MMU faults repeat on the same GPU (PCI ID), run DCGM EUD then field diagnostics (possible hardware). [RESTART_APP → WORKFLOW_XID_31]",
    ),
    row(
        32,
        "ROBUST_CHANNEL_PBDMA_ERROR",
        "Invalid or corrupted push buffer stream: the DMA controller between the driver and the GPU over PCIe reported a fault; mostly PCIe quality issues, generally not the application.",
        &[C::Bus],
        A::RestartApp,
        "Restart the application; the catalogue's text points at PCIe quality, its investigatory bucket at checking the application. [RESTART_APP → CHECK_APP/CUDA]",
    ),
    row(
        37,
        "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD",
        "Driver firmware error.",
        &[C::Driver, C::Firmware],
        A::Informational,
        "No immediate action; if it recurs, check the application. [IGNORE → CHECK_APP/CUDA]",
    ),
    row(
        38,
        "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT",
        "Driver firmware error (FECS watchdog timeout).",
        &[C::Driver, C::Firmware],
        A::Informational,
        "No immediate action; contact support if it recurs. [IGNORE → CONTACT_SUPPORT]",
    ),
    engine(
        39,
        "ROBUST_CHANNEL_CE0_ERROR",
        "Copy Engine Exception (CE0).",
    ),
    engine(
        40,
        "ROBUST_CHANNEL_CE1_ERROR",
        "Copy Engine Exception (CE1).",
    ),
    engine(
        41,
        "ROBUST_CHANNEL_CE2_ERROR",
        "Copy Engine Exception (CE2).",
    ),
    row(
        43,
        "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
        "GPU stopped processing: the application hit a software-induced fault and had to terminate; the GPU remains healthy.",
        &[C::UserApp],
        A::FixProgram,
        "Nothing to do on the node; the catalogue says it is in most cases an application error, not a driver bug. [IGNORE → CONTACT_SUPPORT]",
    ),
    row(
        44,
        "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW",
        "Graphics Engine fault during context switch.",
        &[],
        A::Informational,
        "No immediate action; contact support if it recurs. [IGNORE → CONTACT_SUPPORT]",
    ),
    row(
        45,
        "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
        "Preemptive cleanup after previous errors: the driver tore down the application's GPU work (Ctrl-C, kill, a GPU reset, or an error such as a DBE).",
        &[C::UserApp],
        A::Informational,
        "Follow the Xid it comes with; seen alone, restart Fabric Manager. [WORKFLOW_XID_45: solo RESTART_FM, else IGNORE]",
    ),
    row(
        46,
        "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR",
        "GPU stopped processing.",
        &[],
        A::ResetGpu,
        "Reset the GPU; contact support if it recurs. [RESET_GPU → CONTACT_SUPPORT]",
    ),
    row(
        48,
        "ROBUST_CHANNEL_GPU_ECC_DBE",
        "Double Bit ECC Error: an uncorrectable error on the GPU, also reported to the application; a GPU reset or node reboot clears it.",
        &[C::Memory, C::Hardware],
        A::DrainNode,
        "Alone: reset the GPU and run field diagnostics; with Xid 63/64: drain and reset. For SRAM errors check the SRAM threshold flag (nvidia-smi sram_threshold_exceeded) and, if set, run field diagnostics / the RMA flow. [WORKFLOW_XID_48]",
    ),
    row(
        54,
        "SILENT_RUNNING_PWR_REDUCED_CLOCKING",
        "Auxiliary power is not connected to the GPU board.",
        &[C::Power, C::Hardware],
        A::DrainNode,
        "Check that the GPU is seated and all its connections are secure; contact support if it recurs. [CHECK_MECHANICALS → CONTACT_SUPPORT]",
    ),
    row(
        60,
        "ROBUST_CHANNEL_SEC2_ERROR",
        "Video processor exception (SEC2).",
        &[C::UserApp, C::Driver],
        A::RestartApp,
        "Restart the application; if it recurs, investigate the user or NVIDIA software. [RESTART_APP → INVESTIGATE_SW]",
    ),
    row(
        61,
        "PMU_BREAKPOINT",
        "Internal micro-controller breakpoint/warning (non-fatal); the catalogue lists it as unused on A100/H100/B100/GB200.",
        &[],
        A::Informational,
        "Nothing on its own (nverror.h: non-fatal); the catalogue gives no guidance beyond CONTACT_SUPPORT for an unused Xid. [CONTACT_SUPPORT]",
    ),
    row(
        62,
        "PMU_HALT_ERROR",
        "Internal micro-controller halt.",
        &[],
        A::ResetGpu,
        "Reset the GPU; contact support if it recurs. [RESET_GPU → CONTACT_SUPPORT]",
    ),
    row(
        63,
        "INFOROM_DRAM_RETIREMENT_EVENT",
        "GPU memory remapping event: the GPU handled an ECC memory error with a row remap (Ampere and newer) or a page retirement (older GPUs).",
        &[C::Memory],
        A::Informational,
        "No action; NVIDIA's memory error management guide says a pending row remap happens at the next GPU reset. [IGNORE → IGNORE]",
    ),
    row(
        64,
        "INFOROM_DRAM_RETIREMENT_FAILURE",
        "GPU memory remapping failure: the row remap (or page retirement) for an ECC memory error failed.",
        &[C::Memory],
        A::ResetGpu,
        "Reset the GPU and contact support; with Xid 48, drain and reset (WORKFLOW_XID_48). [RESET_GPU → CONTACT_SUPPORT]",
    ),
    row(
        66,
        "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION",
        "Illegal access by driver.",
        &[C::Driver],
        A::Informational,
        "No immediate action; if it recurs, investigate the user or NVIDIA software. [IGNORE → INVESTIGATE_SW]",
    ),
    row(
        67,
        "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION",
        "Illegal access by driver.",
        &[C::Driver],
        A::Informational,
        "No immediate action; contact support if it recurs. [IGNORE → CONTACT_SUPPORT]",
    ),
    engine(
        68,
        "ROBUST_CHANNEL_NVDEC0_ERROR",
        "NVDEC0 (video decoder) exception.",
    ),
    row(
        69,
        "ROBUST_CHANNEL_GR_CLASS_ERROR",
        "Graphics Engine class error.",
        &[C::UserApp],
        A::FixProgram,
        CHECK_APP,
    ),
    engine(
        70,
        "ROBUST_CHANNEL_CE3_ERROR",
        "Copy engine CE3 error (\"CE3: Unknown Error\").",
    ),
    engine(
        71,
        "ROBUST_CHANNEL_CE4_ERROR",
        "Copy engine CE4 error (\"CE4: Unknown Error\").",
    ),
    engine(
        72,
        "ROBUST_CHANNEL_CE5_ERROR",
        "Copy engine CE5 error (\"CE5: Unknown Error\").",
    ),
    row(
        74,
        "NVLINK_ERROR",
        "NVLink error: a problem on the GPU's NVLink connection to another GPU or NVSwitch; the link or the device at its remote end may be at fault. A GPU reset or node reboot is needed to clear it.",
        &[C::Nvlink, C::Hardware],
        A::DrainNode,
        "Decode the error registers in the message (some bits are ignorable; others call for checking and reseating the link and running diagnostics); if a GPU reset or node reboot does not clear it, contact the hardware vendor. [WORKFLOW_NVLINK_ERR → CONTACT_SUPPORT]",
    ),
    engine(
        75,
        "ROBUST_CHANNEL_CE6_ERROR",
        "Copy engine CE6 error (\"CE6: Unknown Error\").",
    ),
    engine(
        76,
        "ROBUST_CHANNEL_CE7_ERROR",
        "Copy engine CE7 error (\"CE7: Unknown Error\").",
    ),
    engine(
        77,
        "ROBUST_CHANNEL_CE8_ERROR",
        "Copy engine CE8 error (\"CE8: Unknown Error\").",
    ),
    row(
        78,
        "VGPU_START_ERROR",
        "vGPU Start Error: e.g. the guest driver is incompatible with the host driver, or the vGPU type is not supported.",
        &[C::Driver],
        A::DriverFault,
        "Update the firmware and software to the latest versions. [UPDATE_SWFW → UPDATE_SWFW]",
    ),
    row(
        79,
        "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
        "GPU has fallen off the bus: the driver cannot reach the GPU over PCIe; often a PCIe link hardware failure, also failing GPU hardware or driver issues.",
        &[C::Bus, C::Hardware, C::Driver],
        A::DrainNode,
        "Restart the machine (bare metal); check the system event and kernel PCIe logs for the link failure's source, and contact support. [RESTART_BM → CONTACT_SUPPORT]",
    ),
    row(
        80,
        "PBDMA_PUSHBUFFER_CRC_MISMATCH",
        "Corrupted data sent to GPU (push buffer CRC mismatch).",
        &[C::UserApp],
        A::FixProgram,
        CHECK_APP,
    ),
    engine(
        82,
        "ROBUST_CHANNEL_NVJPG0_ERROR",
        "NVJPG0 (JPEG engine) error.",
    ),
    engine(
        83,
        "ROBUST_CHANNEL_NVDEC1_ERROR",
        "NVDEC1 (video decoder) error.",
    ),
    engine(
        84,
        "ROBUST_CHANNEL_NVDEC2_ERROR",
        "NVDEC2 (video decoder) error.",
    ),
    engine(
        85,
        "ROBUST_CHANNEL_CE9_ERROR",
        "Copy engine CE9 error (\"CE9: Unknown Error\").",
    ),
    engine(
        86,
        "ROBUST_CHANNEL_OFA0_ERROR",
        "OFA (video engine) exception.",
    ),
    engine(
        88,
        "ROBUST_CHANNEL_NVDEC3_ERROR",
        "NVDEC3 (video decoder) error.",
    ),
    engine(
        89,
        "ROBUST_CHANNEL_NVDEC4_ERROR",
        "NVDEC4 (video decoder) error.",
    ),
    row(
        92,
        "EXCESSIVE_SBE_INTERRUPTS",
        "High single-bit ECC error rate.",
        &[C::Memory],
        A::Informational,
        "No immediate action; contact support if it recurs. [IGNORE → CONTACT_SUPPORT]",
    ),
    row(
        93,
        "INFOROM_ERASE_LIMIT_EXCEEDED",
        "Non-fatal violation of the provisioned InfoROM wear limit (set with nvflash); usually the intended effect of that limit, not a failure.",
        &[],
        A::Informational,
        "Clear the limit with nvflash --elsessionclear; report to NVIDIA if that does not help. [IGNORE → CONTACT_SUPPORT]",
    ),
    row(
        94,
        "ROBUST_CHANNEL_CONTAINED_ERROR",
        "Contained memory error: confined to one application, the others are unaffected; ECC memory errors are one possible cause (Xid 45 comes with it).",
        &[C::Memory],
        A::RestartApp,
        "Restart the application that hit it; reset the GPU when convenient, other applications may run until then. [RESTART_APP → IGNORE (sympathetic)]",
    ),
    row(
        95,
        "ROBUST_CHANNEL_UNCONTAINED_ERROR",
        "Uncontained memory error: affects several applications; ECC memory errors are one possible cause (Xid 45 comes with it).",
        &[C::Memory],
        A::ResetGpu,
        "Reset the GPU before applications restart. [RESET_GPU → IGNORE (sympathetic)]",
    ),
    engine(
        96,
        "ROBUST_CHANNEL_NVDEC5_ERROR",
        "NVDEC5 (video decoder) error.",
    ),
    engine(
        97,
        "ROBUST_CHANNEL_NVDEC6_ERROR",
        "NVDEC6 (video decoder) error.",
    ),
    engine(
        98,
        "ROBUST_CHANNEL_NVDEC7_ERROR",
        "NVDEC7 (video decoder) error.",
    ),
    engine(
        99,
        "ROBUST_CHANNEL_NVJPG1_ERROR",
        "NVJPG1 (JPEG engine) error.",
    ),
    engine(
        100,
        "ROBUST_CHANNEL_NVJPG2_ERROR",
        "NVJPG2 (JPEG engine) error.",
    ),
    engine(
        101,
        "ROBUST_CHANNEL_NVJPG3_ERROR",
        "NVJPG3 (JPEG engine) error.",
    ),
    engine(
        102,
        "ROBUST_CHANNEL_NVJPG4_ERROR",
        "NVJPG4 (JPEG engine) error.",
    ),
    engine(
        103,
        "ROBUST_CHANNEL_NVJPG5_ERROR",
        "NVJPG5 (JPEG engine) error.",
    ),
    engine(
        104,
        "ROBUST_CHANNEL_NVJPG6_ERROR",
        "NVJPG6 (JPEG engine) error.",
    ),
    engine(
        105,
        "ROBUST_CHANNEL_NVJPG7_ERROR",
        "NVJPG7 (JPEG engine) error.",
    ),
    row(
        106,
        "SMBPBI_TEST_MESSAGE",
        "SMBPBI Test Message.",
        &[],
        A::Informational,
        "No action. [IGNORE → IGNORE]",
    ),
    row(
        107,
        "SMBPBI_TEST_MESSAGE_SILENT",
        "SMBPBI Test Message Silent.",
        &[],
        A::Informational,
        "No action. [IGNORE → IGNORE]",
    ),
    row(
        109,
        "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR",
        "Context Switch Timeout Error.",
        &[],
        A::ResetGpu,
        "Reset the GPU; contact support if it recurs. [RESET_GPU → CONTACT_SUPPORT]",
    ),
    row(
        110,
        "SEC_FAULT_ERROR",
        "Security Fault Error; uncommon unless there is a hardware failure.",
        &[C::Hardware],
        A::DrainNode,
        "Revert any recent hardware changes and cold-reset the system; if that does not fix it, contact the hardware vendor. [RESET_GPU → INVESTIGATE_SW]",
    ),
    row(
        119,
        "GSP_RPC_TIMEOUT",
        "GSP RPC Timeout: the GPU's GSP core did not answer the driver's RPC in time, or code running on it failed.",
        &[C::Firmware, C::Driver],
        A::DriverFault,
        "Reset the GPU or power-cycle the node if it persists; if it comes back after a power cycle, follow NVIDIA's GPU Debug Guidelines. [RESET_GPU → INVESTIGATE_SW]",
    ),
    row(
        120,
        "GSP_ERROR",
        "GSP Error: an error in code running on the GPU's GSP core.",
        &[C::Firmware],
        A::DriverFault,
        "Reset the GPU or power-cycle the node if it persists; if it comes back after a power cycle, follow NVIDIA's GPU Debug Guidelines. [RESET_GPU → INVESTIGATE_SW]",
    ),
    row(
        121,
        "C2C_ERROR",
        "C2C Error: corrected errors on the C2C NVLink connection to a Grace CPU; no operational impact.",
        &[C::Nvlink],
        A::Informational,
        "No immediate action; reset the GPU at a service window to retrain the link (repeats may be reported; the catalogue says VBIOS 97.00.90.00.00 may help). [IGNORE → CONTACT_SUPPORT]",
    ),
    row(
        122,
        "SPI_PMU_RPC_READ_FAIL",
        "SPI PMU RPC read failure; the catalogue lists it as unused on A100/H100/B100/GB200.",
        &[],
        A::DriverFault,
        "Contact support: the catalogue gives no other guidance for it. [CONTACT_SUPPORT]",
    ),
    row(
        123,
        "SPI_PMU_RPC_WRITE_FAIL",
        "SPI PMU RPC write failure; the catalogue lists it as unused on A100/H100/B100/GB200.",
        &[],
        A::DriverFault,
        "Contact support: the catalogue gives no other guidance for it. [CONTACT_SUPPORT]",
    ),
    engine(
        126,
        "ROBUST_CHANNEL_CE10_ERROR",
        "Copy engine CE10 error (\"CE10: Unknown Error\").",
    ),
    engine(
        127,
        "ROBUST_CHANNEL_CE11_ERROR",
        "Copy engine CE11 error (\"CE11: Unknown Error\").",
    ),
    engine(
        128,
        "ROBUST_CHANNEL_CE12_ERROR",
        "Copy engine CE12 error (\"CE12: Unknown Error\").",
    ),
    engine(
        129,
        "ROBUST_CHANNEL_CE13_ERROR",
        "Copy engine CE13 error (\"CE13: Unknown Error\").",
    ),
    engine(
        130,
        "ROBUST_CHANNEL_CE14_ERROR",
        "Copy engine CE14 error (\"CE14: Unknown Error\").",
    ),
    engine(
        131,
        "ROBUST_CHANNEL_CE15_ERROR",
        "Copy engine CE15 error (\"CE15: Unknown Error\").",
    ),
    engine(
        132,
        "ROBUST_CHANNEL_CE16_ERROR",
        "Copy engine CE16 error (\"CE16: Unknown Error\").",
    ),
    engine(
        133,
        "ROBUST_CHANNEL_CE17_ERROR",
        "Copy engine CE17 error (\"CE17: Unknown Error\").",
    ),
    engine(
        134,
        "ROBUST_CHANNEL_CE18_ERROR",
        "Copy engine CE18 error (\"CE18: Unknown Error\").",
    ),
    engine(
        135,
        "ROBUST_CHANNEL_CE19_ERROR",
        "Copy engine CE19 error (\"CE19: Unknown Error\").",
    ),
    row(
        136,
        "ALI_TRAINING_FAIL",
        "Link Training Failed (logged by the driver's NVLink code).",
        &[C::Nvlink],
        A::ResetGpu,
        "Reset the GPU; investigate the link's signal integrity and telemetry. [RESET_GPU → INVESTIGATE_LINK_SI]",
    ),
    row(
        137,
        "NVLINK_PRIV_ERR",
        "NVLink Privilege Error: the remote MMU reported an illegal NVLink peer-to-peer access; typically an application bug, also possibly a driver or hardware bug.",
        &[C::UserApp, C::Driver, C::Hardware],
        A::FixProgram,
        "Nothing on the node; debug the application with cuda-gdb or Compute Sanitizer memcheck (or CUDA_DEVICE_WAITS_ON_EXCEPTION=1), and file a bug if that is inconclusive. [IGNORE → XID_137_FLOW]",
    ),
    engine(
        139,
        "ROBUST_CHANNEL_OFA1_ERROR",
        "OFA1 (video engine) error.",
    ),
    row(
        140,
        "UNRECOVERABLE_ECC_ERROR_ESCAPE",
        "ECC Unrecovered Error: uncorrectable GPU memory errors that kept the driver from marking the pages for offlining or row remapping.",
        &[C::Memory, C::Hardware],
        A::ResetGpu,
        "Reset the GPU; if the problem persists, contact the hardware vendor. [RESET_GPU → CONTACT_SUPPORT]",
    ),
    row(
        141,
        "ROBUST_CHANNEL_FAST_PATH_ERROR",
        "CUDA Fast Path Error.",
        &[],
        A::Informational,
        "No immediate action; contact support if it recurs. [IGNORE → CONTACT_SUPPORT]",
    ),
    row(
        142,
        "ROBUST_CHANNEL_NVENC3_ERROR",
        "NVENC3 (video encoder) error.",
        &[],
        A::DriverFault,
        "Contact support. [CONTACT_SUPPORT]",
    ),
    row(
        143,
        "GPU_INIT_ERROR",
        "GPU Initialization Error.",
        &[],
        A::ResetGpu,
        "Reset the GPU; contact support if it recurs. [RESET_GPU → CONTACT_SUPPORT]",
    ),
    row(
        144,
        "NVLINK_SAW_ERROR",
        "NVLink SAW error (NVLink5).",
        &[C::Nvlink, C::Hardware],
        A::ResetGpu,
        NVLINK5,
    ),
    row(
        145,
        "NVLINK_RLW_ERROR",
        "NVLink RLW error (NVLink5).",
        &[C::Nvlink, C::Hardware],
        A::ResetGpu,
        NVLINK5,
    ),
    row(
        146,
        "NVLINK_TLW_ERROR",
        "NVLink TLW error (NVLink5).",
        &[C::Nvlink, C::Hardware],
        A::ResetGpu,
        NVLINK5,
    ),
    row(
        147,
        "NVLINK_TREX_ERROR",
        "NVLink TREX error (NVLink5); the catalogue says it is not in production code and should not be seen.",
        &[C::Nvlink],
        A::Informational,
        "No immediate action for any of its decoded statuses; contact support. [WORKFLOW_NVLINK5_ERR: IGNORE → CONTACT_SUPPORT]",
    ),
    row(
        148,
        "NVLINK_NVLPW_CTRL_ERROR",
        "NVLink NVLPW_CTRL error (NVLink5).",
        &[C::Nvlink],
        A::Informational,
        "No immediate action for its decoded status; contact support. [WORKFLOW_NVLINK5_ERR: IGNORE → CONTACT_SUPPORT]",
    ),
    row(
        149,
        "NVLINK_NETIR_ERROR",
        "NVLink NETIR error (NVLink5): link down, link error-rate and other link events, local or at the peer.",
        &[C::Nvlink, C::Hardware],
        A::ResetGpu,
        NVLINK5,
    ),
    row(
        150,
        "NVLINK_MSE_ERROR",
        "NVLink MSE error (NVLink5): MSE degraded or MSE watchdog; fatal, firmware.",
        &[C::Nvlink, C::Firmware],
        A::ResetGpu,
        "Reset the GPU; contact support. [WORKFLOW_NVLINK5_ERR: RESET_GPU → CONTACT_SUPPORT]",
    ),
    row(
        151,
        "ROBUST_CHANNEL_KEY_ROTATION_ERROR",
        "Key rotation Error.",
        &[],
        A::RestartApp,
        "Restart the VM that owns the GPU; a GPU reset or machine restart is not needed. [RESTART_VM → CONTACT_SUPPORT]",
    ),
    row(
        154,
        "GPU_RECOVERY_ACTION_CHANGED",
        "GPU Recovery Action Changed: always seen with other Xids; names the recovery they need (None, Drain P2P, Drain and Reset, GPU Reset Required, Node Reboot Required).",
        &[],
        A::Informational,
        "Do what it names for the other Xids. [XID_154 → informational only]",
    ),
    row(
        155,
        "NVLINK_SW_DEFINED_ERROR",
        "NVLink SW Defined Error: link-down events flagged as intentional (including transitions to sleep).",
        &[C::Nvlink],
        A::ResetGpu,
        "Reset the GPU; investigate the software or user action if it was not expected. [RESET_GPU → INVESTIGATE_SW_USER]",
    ),
    row(
        156,
        "RESOURCE_RETIREMENT_EVENT",
        "Resource Retirement Event.",
        &[],
        A::ResetGpu,
        "Reset the GPU. [RESET_GPU → IGNORE]",
    ),
    row(
        157,
        "RESOURCE_RETIREMENT_FAILURE",
        "Resource Retirement Failure: no repair is possible for lack of resources.",
        &[],
        A::Informational,
        "Workloads may keep running but may see the same Xid again; contact support. [IGNORE → CONTACT_SUPPORT]",
    ),
    row(
        158,
        "GPU_FATAL_TIMEOUT",
        "GPU Fatal Timeout.",
        &[],
        A::ResetGpu,
        "Reset the GPU; contact support if it recurs. [RESET_GPU → CONTACT_SUPPORT]",
    ),
    row(
        159,
        "ROBUST_CHANNEL_CHI_NON_DATA_ERROR",
        "CHI Non-Data Error; may be seen on any C2C link-connected GPU.",
        &[],
        A::ResetGpu,
        "If UVM or vGPU is in use, reset the GPU, otherwise ignore it; a sympathetic error: act on the others first. [CHECK_UVM → SYMPATHETIC_REPORT_SOLO]",
    ),
    row(
        160,
        "CHANNEL_RETIREMENT_EVENT",
        "Channel Retirement Event.",
        &[C::UserApp, C::Driver],
        A::Informational,
        "No immediate action; if it recurs, investigate the user or NVIDIA software. [IGNORE → INVESTIGATE_SW]",
    ),
    row(
        161,
        "CHANNEL_RETIREMENT_FAILURE",
        "Channel Retirement Failure.",
        &[C::UserApp, C::Driver],
        A::Informational,
        "No immediate action; if it recurs, investigate the user or NVIDIA software. [IGNORE → INVESTIGATE_SW]",
    ),
    row(
        171,
        "UNCORRECTABLE_DRAM_ERROR",
        "Additional to Xid 48: the uncorrectable error was in DRAM.",
        &[C::Memory],
        A::Informational,
        "Follow Xid 48's guidance; the catalogue gives no action of its own. [none]",
    ),
    row(
        172,
        "UNCORRECTABLE_SRAM_ERROR",
        "Additional to Xid 48: the uncorrectable error was in SRAM.",
        &[C::Memory],
        A::Informational,
        "Follow Xid 48's guidance (for SRAM: check the SRAM threshold flag); the catalogue gives no action of its own. [none]",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/XID.md, the table for people.
    const DOC: &str = include_str!("../../../../docs/XID.md");

    /// The markdown line docs/XID.md has for `r`.
    fn doc_line(r: &XidInfo) -> String {
        let causes = if r.causes.is_empty() {
            "—".to_string()
        } else {
            r.causes
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let name = r.name.map_or_else(|| "—".to_string(), |n| format!("`{n}`"));
        format!(
            "| {} | {} | {} | {} | `{}` | {} |",
            r.number,
            name,
            r.meaning,
            causes,
            r.action.as_str(),
            r.what_to_do
        )
    }

    /// The doc's table rows: lines whose first cell is a number.
    fn doc_rows() -> Vec<&'static str> {
        DOC.lines()
            .filter(|l| {
                l.strip_prefix("| ")
                    .and_then(|rest| rest.split(' ').next())
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .collect()
    }

    #[test]
    fn doc_lists_exactly_the_rows() {
        let want: Vec<String> = all().iter().map(doc_line).collect();
        let got = doc_rows();
        if got != want {
            eprintln!("docs/XID.md's table should read:\n{}", want.join("\n"));
        }
        // Number and action first, for a readable failure.
        let pairs = |rows: &[&str]| -> Vec<(u32, String)> {
            rows.iter()
                .map(|l| {
                    let cells: Vec<&str> = l.split(" | ").collect();
                    let n = cells[0].trim_start_matches("| ").parse().unwrap();
                    (n, cells[4].trim_matches('`').to_string())
                })
                .collect()
        };
        let want_refs: Vec<&str> = want.iter().map(String::as_str).collect();
        assert_eq!(pairs(&got), pairs(&want_refs));
        assert_eq!(got, want_refs);
    }

    #[test]
    fn rows_are_sorted_and_unique() {
        assert!(all().windows(2).all(|w| w[0].number < w[1].number));
        assert_eq!(all().len(), ROWS.len());
    }

    #[test]
    fn lookup() {
        for r in all() {
            assert_eq!(info(r.number).map(|i| i.number), Some(r.number));
        }
        assert!(info(0).is_none());
        assert!(info(14).is_none(), "the catalogue marks 14 unused");
        assert!(info(u32::MAX).is_none());
        assert_eq!(info(13).unwrap().name, Some("ROBUST_CHANNEL_GR_EXCEPTION"));
        assert_eq!(info(79).unwrap().action, XidAction::DrainNode);
    }

    #[test]
    fn drain_set() {
        let drained: Vec<u32> = all()
            .iter()
            .map(|r| r.number)
            .filter(|&n| drains(n))
            .collect();
        // 48, 74, 79 as the issue says; 54 (CHECK_MECHANICALS) and 110 (cold
        // reset, hardware vendor) from the catalogue. Not 64 (RESET_GPU) nor
        // 119 (RESET_GPU → INVESTIGATE_SW, a GSP fault): the catalogue wins.
        assert_eq!(drained, [48, 54, 74, 79, 110]);
        assert!(!drains(64));
        assert!(!drains(119));
        assert!(!drains(0));
        assert_eq!(info(64).unwrap().action, XidAction::ResetGpu);
        assert_eq!(info(119).unwrap().action, XidAction::DriverFault);
        assert_eq!(info(120).unwrap().action, XidAction::DriverFault);
    }

    #[test]
    fn covers_the_asked_for_xids() {
        let asked = [
            8, 13, 31, 32, 38, 43, 44, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109,
            119, 120, 121, 122, 123, 136, 140, 143, 144, 145, 146, 147, 148, 149, 150, 154, 155,
        ];
        for n in asked {
            assert!(info(n).is_some(), "no row for Xid {n}");
        }
    }

    #[test]
    fn rows_are_well_formed() {
        for r in all() {
            let n = r.number;
            assert!(r.name.is_some_and(|s| !s.is_empty()), "{n}: name");
            for text in [r.meaning, r.what_to_do] {
                assert!(!text.is_empty(), "{n}: empty text");
                assert!(
                    !text.contains('|') && !text.contains('\n'),
                    "{n}: breaks the table"
                );
            }
            assert!(
                r.what_to_do.contains('['),
                "{n}: what_to_do names the catalogue's bucket"
            );
            for (i, c) in r.causes.iter().enumerate() {
                assert!(!r.causes[..i].contains(c), "{n}: {c:?} twice");
            }
        }
    }

    #[test]
    fn serializes_snake_case() {
        let actions = [
            XidAction::FixProgram,
            XidAction::RestartApp,
            XidAction::ResetGpu,
            XidAction::DrainNode,
            XidAction::DriverFault,
            XidAction::Informational,
        ];
        for a in actions {
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
        }
        let causes = [
            Cause::UserApp,
            Cause::Driver,
            Cause::Hardware,
            Cause::Firmware,
            Cause::Thermal,
            Cause::Bus,
            Cause::Nvlink,
            Cause::Memory,
            Cause::Power,
            Cause::SystemMemory,
        ];
        for c in causes {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
        let v = serde_json::to_value(info(48).unwrap()).unwrap();
        assert_eq!(v["action"], "drain_node");
        assert_eq!(v["causes"], serde_json::json!(["memory", "hardware"]));
    }
}
