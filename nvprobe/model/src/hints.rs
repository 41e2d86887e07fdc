//! Remedy texts that verdicts and `nvprobe doctor` share, written once.
//! Macros rather than consts so that longer hints can be composed from them
//! with `concat!` at compile time.

/// The command that reloads nvidia_uvm without HMM.
#[macro_export]
macro_rules! hmm_reload {
    () => {
        "modprobe -r nvidia_uvm && modprobe nvidia_uvm uvm_disable_hmm=1"
    };
}

/// The public reports of UVM's HMM failures.
#[macro_export]
macro_rules! hmm_issues {
    () => {
        "open-gpu-kernel-modules issues 797, 901, 947"
    };
}
