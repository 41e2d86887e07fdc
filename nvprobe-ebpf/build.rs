use which::which;

/// Rebuild when bpf-linker changes (aya-template does the same): a new linker
/// can change the object even when no source did.
fn main() {
    let bpf_linker = which("bpf-linker").expect(
        "bpf-linker not found on PATH: run `cargo xtask setup` (installs bpf-linker@0.10.3)",
    );
    println!("cargo:rerun-if-changed={}", bpf_linker.display());
}
